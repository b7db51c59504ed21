//! Checkpoints and backups: a checkpoint taken while a writer runs holds every write
//! acknowledged before the call and is a prefix of the writes, for the Titan and lifetime
//! GC policies with the value log as the WAL and without; incremental backups share the
//! files an earlier backup copied, verify, and restore to the database as it was; a
//! damaged backup file fails `verify` naming it.

use halflife_engine::backup::BackupEngine;
use halflife_engine::check::check;
use halflife_engine::lifetime::ThresholdParams;
use halflife_engine::{
    Error, GcPolicyConfig, GcTrigger, LifetimeOptions, Options, TreeOptions, ValueLogOptions,
    WalOptions, DB,
};
use std::collections::BTreeMap;
use std::ops::Bound::Unbounded;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

/// Keys the writer cycles through: every other write goes to one of `HOT` keys, the
/// others to the rest in turn, so that value files hold values that die soon next to
/// values that live on, which GC must move.
const KEYS: u64 = 300;
const HOT: u64 = 30;
const WRITES: u64 = 6000;

fn opts(gc: GcPolicyConfig, value_log_wal: bool) -> Options {
    Options {
        tree: testkit::small_tree(),
        wal: WalOptions {
            value_log_wal,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            gc,
            // The lifetime policy collects a file once a TTL shorter than the writes between
            // two versions of a cold key elapses, so that its GC runs and moves values.
            lifetime: LifetimeOptions {
                thresholds: ThresholdParams {
                    initial_ttl: 150,
                    ..ThresholdParams::default()
                },
                trigger: GcTrigger::Ttl,
                ..LifetimeOptions::default()
            },
            ..Default::default()
        },
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    let k = match i % 2 {
        0 => (i / 2) % HOT,
        _ => HOT + (i / 2) % (KEYS - HOT),
    };
    format!("key{k:04}").into_bytes()
}

/// Write `i`: a delete every eleventh, else a value naming `i`, separated for most writes.
fn value(i: u64) -> Option<Vec<u8>> {
    if i % 11 == 10 {
        return None;
    }
    let mut v = format!("{i}:").into_bytes();
    v.resize(
        if i.is_multiple_of(7) { 40 } else { 600 },
        b'a' + (i % 26) as u8,
    );
    Some(v)
}

/// The database after writes `0..m`.
fn state_after(m: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut s = BTreeMap::new();
    for i in 0..m {
        match value(i) {
            Some(v) => s.insert(key(i), v),
            None => s.remove(&key(i)),
        };
    }
    s
}

fn contents(db: &DB) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.scan(Unbounded, Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn assert_checks_clean(dir: &Path, o: &Options) {
    let r = check(dir, o, &mut |_, _| {}).unwrap();
    assert!(r.is_ok(), "check of {}: {:?}", dir.display(), r.problems);
}

fn checkpoint_under_writes(gc: GcPolicyConfig, value_log_wal: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let o = opts(gc, value_log_wal);
    let db = Arc::new(DB::open(tmp.path().join("db"), o.clone()).unwrap());
    // Writes started (`started`) and acknowledged (`acked`), in order, one at a time.
    let started = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(AtomicU64::new(0));
    let writer = {
        let (db, started, acked) = (db.clone(), started.clone(), acked.clone());
        std::thread::spawn(move || {
            for i in 0..WRITES {
                started.store(i + 1, SeqCst);
                match value(i) {
                    Some(v) => db.put(&key(i), &v).unwrap(),
                    None => db.delete(&key(i)).unwrap(),
                }
                acked.store(i + 1, SeqCst);
            }
        })
    };
    while acked.load(SeqCst) < WRITES / 3 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let cp = tmp.path().join("cp");
    let before = acked.load(SeqCst);
    let info = db.checkpoint(&cp).unwrap();
    let by_end = started.load(SeqCst);
    assert_eq!(info.dir, cp);
    assert!(info.data_files > 0 && info.linked == info.data_files);
    writer.join().unwrap();
    // The database goes on and deletes files it no longer needs; the checkpoint's links
    // keep them.
    db.compact_range(None, None).unwrap();
    db.wait_idle().unwrap();
    assert_eq!(contents(&db), state_after(WRITES));
    assert!(
        db.stats().gc_jobs > 0,
        "GC never ran: the test would not test it"
    );
    let err = db.checkpoint(&cp).unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, source } if path == &cp && source.kind() == std::io::ErrorKind::AlreadyExists),
        "{err}"
    );
    drop(db);

    assert_checks_clean(&cp, &o);
    let got = contents(&DB::open(&cp, o.clone()).unwrap());
    // A prefix of the writes: the state after some write count m between the writes
    // acknowledged before the call and those started before it returned.
    let m = (before..=by_end).find(|&m| state_after(m) == got);
    assert!(
        m.is_some(),
        "the checkpoint is not the state after any of writes {before}..={by_end}"
    );
    assert_checks_clean(&cp, &o);
}

#[test]
fn checkpoint_under_writes_titan() {
    checkpoint_under_writes(GcPolicyConfig::titan(), false);
}

#[test]
fn checkpoint_under_writes_titan_value_log_wal() {
    checkpoint_under_writes(GcPolicyConfig::titan(), true);
}

#[test]
fn checkpoint_under_writes_lifetime() {
    checkpoint_under_writes(GcPolicyConfig::default(), false);
}

#[test]
fn checkpoint_under_writes_lifetime_value_log_wal() {
    checkpoint_under_writes(GcPolicyConfig::default(), true);
}

fn backup_opts() -> Options {
    {
        let base = opts(GcPolicyConfig::default(), true);
        Options {
            tree: TreeOptions {
                memtable_size: 256 << 10,
                l0_compaction_trigger: 4,
                ..base.tree
            },
            ..base
        }
    }
}

/// Writes `range`, then waits for the background work they cause.
fn write(db: &DB, range: std::ops::Range<u64>) {
    for i in range {
        match value(i) {
            Some(v) => db.put(&key(i), &v).unwrap(),
            None => db.delete(&key(i)).unwrap(),
        }
    }
    db.wait_idle().unwrap();
}

#[test]
fn incremental_backups_share_files_verify_and_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let o = backup_opts();
    let db = DB::open(tmp.path().join("db"), o.clone()).unwrap();
    let be = BackupEngine::open(tmp.path().join("backups")).unwrap();
    write(&db, 0..3000);
    let first = be.create(&db).unwrap();
    let state1 = contents(&db);
    assert_eq!(first.meta.id, 1);
    assert_eq!(first.reused, 0);
    assert!(first.copied > 0);
    write(&db, 3000..3200);
    let second = be.create(&db).unwrap();
    let state2 = contents(&db);
    assert_eq!(second.meta.id, 2);
    let data = second.copied + second.reused;
    assert!(
        second.copied < data && second.reused > 0,
        "backup 2 copied {} of {data} data files",
        second.copied
    );
    assert!(second.meta.sequence > first.meta.sequence);
    drop(db);

    let ids: Vec<u64> = be.list().unwrap().iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 2]);
    be.verify(1).unwrap();
    be.verify(2).unwrap();
    for (id, want) in [(Some(1), &state1), (None, &state2)] {
        let to = tmp.path().join(format!("restored-{id:?}"));
        let meta = be.restore(id, &to).unwrap();
        assert_eq!(meta.id, id.unwrap_or(2));
        assert_checks_clean(&to, &o);
        let db = DB::open(&to, o.clone()).unwrap();
        assert_eq!(&contents(&db), want, "backup {}", meta.id);
    }
    // An empty directory may be restored into; one holding anything may not.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    be.restore(Some(1), &empty).unwrap();
    let err = be.restore(Some(1), &empty).unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, .. } if path == &empty),
        "{err}"
    );
    // Another engine cannot work on the directory while this one holds it.
    assert!(matches!(
        BackupEngine::open(be.dir()),
        Err(Error::Locked(_))
    ));
}

#[test]
fn a_damaged_backup_file_fails_verify_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let o = backup_opts();
    let db = DB::open(tmp.path().join("db"), o).unwrap();
    let be = BackupEngine::open(tmp.path().join("backups")).unwrap();
    write(&db, 0..2000);
    let meta = be.create(&db).unwrap().meta;
    drop(db);
    let f = meta
        .files
        .iter()
        .find(|f| f.name.ends_with(".vlog") && f.size > 1000)
        .expect("a value file");
    let path = be.dir().join(&f.path);
    let mut data = std::fs::read(&path).unwrap();
    data[f.size as usize / 2] ^= 0x40;
    std::fs::write(&path, &data).unwrap();
    for err in [
        be.verify(1).unwrap_err(),
        be.restore(Some(1), &tmp.path().join("r")).unwrap_err(),
    ] {
        match &err {
            Error::Corruption { file, .. } => assert_eq!(file, &path, "{err}"),
            e => panic!("expected corruption naming {}, got {e}", path.display()),
        }
    }
    assert!(!tmp.path().join("r").exists());
    std::fs::remove_file(&path).unwrap();
    match be.verify(1).unwrap_err() {
        Error::Corruption { file, detail } => {
            assert_eq!(file, path);
            assert!(detail.contains("missing"), "{detail}");
        }
        e => panic!("{e}"),
    }
}

#[test]
fn purging_old_backups_keeps_the_newest_whole_and_removes_what_only_the_old_ones_named() {
    let tmp = tempfile::tempdir().unwrap();
    let o = backup_opts();
    let db = DB::open(tmp.path().join("db"), o.clone()).unwrap();
    let be = BackupEngine::open(tmp.path().join("backups")).unwrap();
    let mut states = Vec::new();
    for round in 0..3u64 {
        write(&db, round * 2000..(round + 1) * 2000);
        be.create(&db).unwrap();
        states.push(contents(&db));
    }
    drop(db);
    let shared = |be: &BackupEngine| std::fs::read_dir(be.dir().join("shared")).unwrap().count();
    let before = shared(&be);
    assert_eq!(be.purge_old(1).unwrap(), [1, 2]);
    let ids: Vec<u64> = be.list().unwrap().iter().map(|m| m.id).collect();
    assert_eq!(ids, [3]);
    // Exactly the files the remaining backup names are left.
    let named = be
        .meta(3)
        .unwrap()
        .files
        .iter()
        .filter(|f| f.path.starts_with("shared/"))
        .count();
    assert_eq!(shared(&be), named);
    assert!(
        named < before,
        "the purged backups' own files went: {named} of {before}"
    );
    assert!(!be.dir().join("private/1").exists());
    be.verify(3).unwrap();
    let to = tmp.path().join("restored");
    be.restore(None, &to).unwrap();
    assert_checks_clean(&to, &o);
    assert_eq!(contents(&DB::open(&to, o.clone()).unwrap()), states[2]);
    // Nothing left to purge; keeping none empties the directory.
    assert!(be.purge_old(1).unwrap().is_empty());
    assert_eq!(be.purge_old(0).unwrap(), [3]);
    assert_eq!(shared(&be), 0);
}
