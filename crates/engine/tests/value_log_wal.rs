//! The value log as the write-ahead log of separated values (`Options::wal.value_log_wal`):
//! each large value is written once, writes acknowledged before a crash come back from the
//! value files through the WAL's pointers, a value append cut by the crash is cut off at
//! open, and a damaged value record a WAL record points to fails open naming the file and
//! offset. Values with an expiry are logged like the others (to the files of their expiry
//! windows) and keep it through the crash.

use halflife_engine::filename::{number_of, FileKind};
use halflife_engine::io::IoCause;
use halflife_engine::{
    GcPolicyConfig, Options, TreeOptions, ValueLogOptions, WalOptions, WriteBatch, WriteOptions, DB,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use testkit::files_with_ext as files;

const DIR_VAR: &str = "HALFLIFE_VWAL_DIR";
const KEYS: u64 = 300;

fn options(value_log_wal: bool) -> Options {
    Options {
        tree: TreeOptions {
            // Large enough that the child's writes are never flushed: they live only in the
            // WAL and the value files when it is killed.
            memtable_size: 64 << 20,
            ..Default::default()
        },
        wal: WalOptions {
            value_log_wal,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 128 << 10,
            gc: GcPolicyConfig::titan(),
            ..Default::default()
        },
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Write `i`'s value: large (separated) for most writes, small (kept in the tree) for
/// every seventh.
fn value(i: u64) -> Vec<u8> {
    let mut v = format!("{i}:").into_bytes();
    v.resize(
        if i.is_multiple_of(7) { 40 } else { 1000 },
        b'a' + (i % 26) as u8,
    );
    v
}

/// Bytes written to `paths`: a WAL a killed process left behind ends in the zeros of its
/// mapped window, which are not records.
fn written(paths: &[PathBuf]) -> u64 {
    paths
        .iter()
        .map(|p| {
            let data = std::fs::read(p).unwrap();
            data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1) as u64
        })
        .sum()
}

fn size(paths: &[PathBuf]) -> u64 {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

/// The child: synced writes of keys `0..KEYS` (each acknowledged on stdout), then it
/// waits to be killed.
#[test]
#[ignore = "child process of the value-log WAL tests"]
fn vwal_child_writer() {
    let dir = std::env::var(DIR_VAR).expect("run by a value-log WAL test");
    let db = DB::open(&dir, options(true)).unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0..KEYS {
        let mut b = WriteBatch::new();
        match expiry(i) {
            Some(at) => b.put_with_expiry(&key(i), &value(i), at),
            None => b.put(&key(i), &value(i)),
        }
        db.write(b, &WriteOptions { sync: true }).unwrap();
        use std::io::Write;
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
    std::thread::sleep(Duration::from_secs(600));
}

/// Runs the child until it has acknowledged every write, then kills it.
fn killed_writer(dir: &Path) {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", "vwal_child_writer", "--ignored", "--nocapture"])
        .env(DIR_VAR, dir);
    let acked = testkit::kill_after(child, Duration::from_secs(3));
    assert_eq!(
        acked.len() as u64,
        KEYS,
        "the child acknowledged every write"
    );
}

/// Write `i`'s expiry: a day from now for every third write, in the past (expired when
/// written) for the one after it, none for the rest. Values with an expiry are logged to
/// the value files of their expiry windows.
fn expiry(i: u64) -> Option<u64> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    match i % 3 {
        1 => Some(now + 86_400_000),
        2 => Some(now - 1_000),
        _ => None,
    }
}

fn verify(db: &DB) {
    for i in 0..KEYS {
        let want = (i % 3 != 2).then(|| value(i));
        assert_eq!(db.get(&key(i)).unwrap(), want, "write {i}");
    }
}

#[test]
fn unflushed_writes_come_back_from_the_value_files() {
    let dir = tempfile::tempdir().unwrap();
    killed_writer(dir.path());
    // Nothing was flushed: no table; the WAL holds keys and pointers only.
    assert!(files(dir.path(), "sst").is_empty());
    let (wal, vlog) = (
        written(&files(dir.path(), "wal")),
        size(&files(dir.path(), "vlog")),
    );
    assert!(vlog > 200_000, "values went to value files ({vlog} bytes)");
    assert!(
        wal * 5 < vlog,
        "the WAL ({wal} bytes) holds no values ({vlog} in value files)"
    );
    let report = halflife_engine::check::check(dir.path(), &options(true), &mut |_, _| {}).unwrap();
    assert!(report.is_ok(), "check before reopen: {:?}", report.problems);

    let db = DB::open(dir.path(), options(true)).unwrap();
    verify(&db);
    // Open installed the value files with the replayed tables, moved nothing aside.
    assert!(db.recovery_report().moved_to_lost.is_empty());
    assert!(db.recovery_report().value_tails_cut.is_empty());
    // The file of the values written already expired is dropped whole by background work
    // after open and unlinked when the last version naming it goes: every file the version
    // names is on disk at once, and the disk holds no other once that drop is done.
    let numbers = |db: &DB| -> (Vec<u64>, Vec<u64>) {
        let named = db.version().blobs.keys().copied().collect();
        let on_disk = files(dir.path(), "vlog")
            .iter()
            .map(|p| number_of(p, FileKind::ValueFile).unwrap())
            .collect();
        (named, on_disk)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        db.wait_idle().unwrap();
        let (named, on_disk) = numbers(&db);
        assert!(
            named.iter().all(|n| on_disk.contains(n)),
            "{named:?} on disk: {on_disk:?}"
        );
        if named == on_disk {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{on_disk:?} stay on disk, named: {named:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    db.close().unwrap();
    // Reopened without the option, the same files are read the ordinary way.
    let db = DB::open(dir.path(), options(false)).unwrap();
    verify(&db);
    db.close().unwrap();
    let report =
        halflife_engine::check::check(dir.path(), &options(false), &mut |_, _| {}).unwrap();
    assert!(report.is_ok(), "check after reopen: {:?}", report.problems);
}

#[test]
fn repair_keeps_unflushed_writes() {
    let dir = tempfile::tempdir().unwrap();
    killed_writer(dir.path());
    halflife_engine::repair::repair(dir.path(), &options(true), &mut |_, _| {}).unwrap();
    let db = DB::open(dir.path(), options(true)).unwrap();
    verify(&db);
    db.close().unwrap();
    let report = halflife_engine::check::check(dir.path(), &options(true), &mut |_, _| {}).unwrap();
    assert!(report.is_ok(), "check after repair: {:?}", report.problems);
}

#[test]
fn a_value_append_cut_by_the_crash_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    killed_writer(dir.path());
    let newest = files(dir.path(), "vlog").pop().unwrap();
    let len = std::fs::metadata(&newest).unwrap().len();
    // A record header promising 1000 bytes, followed by 10: an append cut short.
    let mut tail = vec![0u8; 4];
    tail.extend_from_slice(&9u32.to_le_bytes());
    tail.extend_from_slice(&991u32.to_le_bytes());
    tail.extend_from_slice(&[7u8; 10]);
    let mut data = std::fs::read(&newest).unwrap();
    data.extend_from_slice(&tail);
    std::fs::write(&newest, &data).unwrap();

    let db = DB::open(dir.path(), options(true)).unwrap();
    verify(&db);
    assert_eq!(
        db.recovery_report().value_tails_cut,
        vec![(newest.clone(), len, tail.len() as u64)]
    );
    assert_eq!(std::fs::metadata(&newest).unwrap().len(), len);
}

#[test]
fn a_damaged_value_record_fails_open_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    killed_writer(dir.path());
    let first = files(dir.path(), "vlog").remove(0);
    let mut data = std::fs::read(&first).unwrap();
    // A byte of the first record's value (16-byte file header, 12-byte record header,
    // the 9-byte key).
    data[16 + 12 + 9 + 5] ^= 0x40;
    std::fs::write(&first, &data).unwrap();
    let err = DB::open(dir.path(), options(true))
        .err()
        .expect("open must fail")
        .to_string();
    let name = first.file_name().unwrap().to_str().unwrap();
    assert!(err.contains(name), "{err}");
    assert!(err.contains("offset 16"), "{err}");
    // Nothing was deleted or moved.
    assert_eq!(std::fs::read(&first).unwrap(), data);
}

/// Each large value is written once (to its value file) instead of twice (WAL, then
/// flush), and reads are the same through flushes, compactions and a reopen.
#[test]
fn each_large_value_is_written_once() {
    let mut written = Vec::new();
    for vwal in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let o = {
            let base = options(vwal);
            Options {
                tree: TreeOptions {
                    memtable_size: 256 << 10,
                    ..base.tree
                },
                ..base
            }
        };
        let db = DB::open(dir.path(), o.clone()).unwrap();
        for round in 0..3 {
            for i in 0..KEYS {
                db.put(&key(i), &value(i + round * KEYS)).unwrap();
            }
            db.flush().unwrap();
        }
        for i in (0..KEYS).step_by(3) {
            db.delete(&key(i)).unwrap();
        }
        db.wait_idle().unwrap();
        let s = db.stats();
        written.push(s.written(IoCause::Wal) + s.written(IoCause::ValueLog));
        let check = |db: &DB| {
            for i in 0..KEYS {
                let want = (i % 3 != 0).then(|| value(i + 2 * KEYS));
                assert_eq!(
                    db.get(&key(i)).unwrap(),
                    want,
                    "key {i}, value log as WAL: {vwal}"
                );
            }
        };
        check(&db);
        db.close().unwrap();
        let db = DB::open(dir.path(), o).unwrap();
        check(&db);
    }
    let (plain, vwal) = (written[0], written[1]);
    assert!(
        vwal * 10 < plain * 6,
        "WAL + value-file bytes: {vwal} with the value log as the WAL, {plain} without"
    );
}
