//! Expiry as a lifetime the engine knows (`WriteBatch::put_with_expiry`): reads, scans,
//! flush, compaction, GC and the drop of whole value files, all on a manual clock (no test
//! waits for time to pass).

use halflife_engine::check::check;
use halflife_engine::expiry::ManualClock;
use halflife_engine::lifetime::ThresholdParams;
use halflife_engine::vlog::FileExpiry;
use halflife_engine::{
    GcPolicyConfig, GcTrigger, LifetimeOptions, Options, ValueLogOptions, WriteBatch, DB,
};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

const T0: u64 = 1_700_000_000_000;

fn opts(clock: &Arc<ManualClock>, gc: GcPolicyConfig, divisor: u64) -> Options {
    Options {
        tree: testkit::small_tree(),
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            gc,
            expiry_window_divisor: divisor,
            ..Default::default()
        },
        clock: clock.clone(),
        ..Options::default()
    }
}

fn big(tag: &str, n: u32) -> Vec<u8> {
    let mut v = format!("{tag}/{n}/").into_bytes();
    v.resize(400, b'x');
    v
}

fn scan_all(db: &DB) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn vlogs(dir: &Path) -> usize {
    testkit::files_with_ext(dir, "vlog").len()
}

#[test]
fn an_expired_entry_reads_as_a_deletion_in_gets_and_scans() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = DB::open(dir.path(), opts(&clock, GcPolicyConfig::Inline, 8)).unwrap();
    for (k, v) in [
        (&b"inline"[..], &b"old"[..]),
        (b"separated", &big("old", 0)),
    ] {
        db.put(k, v).unwrap();
    }
    let before = db.snapshot();
    let mut b = WriteBatch::new();
    b.put_with_expiry(b"inline", b"new", T0 + 100);
    b.put_with_expiry(b"separated", &big("new", 0), T0 + 100);
    b.put_with_expiry(b"later", b"l", T0 + 200);
    b.put(b"plain", b"p");
    db.write(b, &Default::default()).unwrap();
    assert_eq!(db.get(b"inline").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(db.get(b"separated").unwrap(), Some(big("new", 0)));
    assert_eq!(scan_all(&db).len(), 4);
    // Just before and at the expiry time.
    clock.set(T0 + 99);
    assert_eq!(db.get(b"inline").unwrap().as_deref(), Some(&b"new"[..]));
    clock.set(T0 + 100);
    for round in 0..2 {
        // Not found, and the older version does not come back: the expired entry hides it
        // as a deletion would. The same from the memtable and from the tables.
        assert_eq!(db.get(b"inline").unwrap(), None, "round {round}");
        assert_eq!(db.get(b"separated").unwrap(), None, "round {round}");
        assert_eq!(db.get(b"later").unwrap().as_deref(), Some(&b"l"[..]));
        let keys: Vec<_> = scan_all(&db).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![b"later".to_vec(), b"plain".to_vec()]);
        // A snapshot older than the expiring write still reads what it saw.
        assert_eq!(
            db.get_at(b"inline", &before).unwrap().as_deref(),
            Some(&b"old"[..])
        );
        db.flush().unwrap();
        // The flush ran at T0 + 100: it wrote the expired entries as deletions. Moving
        // the clock back must not bring either version back.
        clock.set(T0 + 50);
        assert_eq!(db.get(b"inline").unwrap(), None);
        clock.set(T0 + 100);
    }
    drop(before);
    let s = db.stats();
    assert!(s.expired_entries >= 2, "{}", s.expired_entries);
}

#[test]
fn compaction_drops_expired_entries_at_the_bottom_and_keeps_them_as_deletions_above() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = DB::open(dir.path(), opts(&clock, GcPolicyConfig::Inline, 0)).unwrap();
    // Older versions at the bottom.
    for i in 0..200u32 {
        db.put(format!("k{i:04}").as_bytes(), &big("old", i))
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    // Newer versions, half of them expiring, in level 0 only.
    for i in 0..200u32 {
        let k = format!("k{i:04}");
        match i % 2 {
            0 => db.put_with_expiry(k.as_bytes(), &big("exp", i), T0 + 1000),
            _ => db.put(k.as_bytes(), &big("new", i)),
        }
        .unwrap();
    }
    db.flush().unwrap();
    // A compaction the flush started runs at T0 and keeps the entries; let it end before
    // the clock moves, so that the compaction below is the one that meets them expired.
    db.wait_idle().unwrap();
    clock.set(T0 + 1000);
    let check_all = |db: &DB| {
        for i in 0..200u32 {
            let got = db.get(format!("k{i:04}").as_bytes()).unwrap();
            let want = (i % 2 == 1).then(|| big("new", i));
            assert_eq!(got, want, "key {i}");
        }
        assert_eq!(scan_all(db).len(), 100);
    };
    check_all(&db);
    // The range's bottom tables hold entries that expired: `compact_range` rewrites them
    // even where nothing lies above them.
    db.compact_range(None, None).unwrap();
    check_all(&db);
    // Nothing expired is left: another `compact_range` rewrites nothing.
    let compactions = db.stats().compactions;
    db.compact_range(None, None).unwrap();
    assert_eq!(db.stats().compactions, compactions);
    // Everything is at the bottom now: no expired entry is left at all, so setting the
    // clock back finds none of the expiring values, and none of the older ones.
    clock.set(T0);
    check_all(&db);
    assert!(db.stats().expired_entries >= 100);
    db.close().unwrap();
    let report = check(
        dir.path(),
        &opts(&clock, GcPolicyConfig::Inline, 0),
        &mut |_, _| {},
    )
    .unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn gc_never_copies_an_expired_value() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    // Placement by expiry off: expiring and plain values share value files. The lifetime
    // policy under its TTL trigger collects a file once 500 writes passed since it was
    // written (counted from no earlier than the first write, so no file is due before the
    // clock moves below: a job started then would rightly copy values not yet expired), whatever the garbage counted in it: it reads every record and asks the tree
    // whether it is live, and the tree still points at the expired ones (no compaction
    // rewrote them).
    let mut o = opts(&clock, "lifetime".parse().unwrap(), 0);
    o.vlog.lifetime = LifetimeOptions {
        thresholds: ThresholdParams {
            initial_ttl: 500,
            ..ThresholdParams::default()
        },
        trigger: GcTrigger::Ttl,
        ..LifetimeOptions::default()
    };
    // One memtable for all the writes: no file is written (and collected, its values all
    // live then) before the clock moves.
    o.tree.memtable_size = 4 << 20;
    // Flush writes every value: with the value log as the WAL the plain values would be
    // logged to files of their own, and the files GC reads would not mix the two.
    o.wal.value_log_wal = false;
    let db = DB::open(dir.path(), o.clone()).unwrap();
    for i in 0..400u32 {
        let k = format!("k{i:04}");
        match i % 4 {
            0 => db.put(k.as_bytes(), &big("live", i)),
            _ => db.put_with_expiry(k.as_bytes(), &big("exp", i), T0 + 1000),
        }
        .unwrap();
    }
    db.flush().unwrap();
    clock.set(T0 + 1000);
    // Other keys, inline, to move the sequence numbers past the files' TTL.
    for i in 0..1000u32 {
        db.put(format!("other{i:04}").as_bytes(), b"o").unwrap();
    }
    db.flush().unwrap();
    // The TTL trigger is looked at by the GC thread on its own schedule: wait for the
    // job (the deadline only guards against a hang), then for the engine to settle.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while db.stats().gc_jobs == 0 {
        assert!(std::time::Instant::now() < deadline, "no GC job ran");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    db.wait_idle().unwrap();
    let s = db.stats();
    // Each job copies at most the live values (plus their headers): one that copied the
    // expired ones too would copy four times as much. A job's output file can itself fall
    // due before the writes end (when the first job ran early among them), so the live
    // values may be copied once per job.
    let live_bytes = 100 * 400;
    assert!(
        s.gc_relocated_bytes <= s.gc_jobs * (live_bytes + 100 * 64),
        "GC copied {} bytes in {} jobs, the live values are {live_bytes}",
        s.gc_relocated_bytes,
        s.gc_jobs
    );
    // Every value file here holds values with an expiry (the others are inline), so every
    // byte GC copied is counted as copied out of one.
    assert!(s.gc_relocated_bytes > 0);
    assert_eq!(s.gc_relocated_expiring_bytes, s.gc_relocated_bytes);
    for i in 0..400u32 {
        let got = db.get(format!("k{i:04}").as_bytes()).unwrap();
        assert_eq!(got, (i % 4 == 0).then(|| big("live", i)), "key {i}");
    }
    db.close().unwrap();
    let report = check(dir.path(), &o, &mut |_, _| {}).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn value_files_of_an_expiry_window_are_dropped_whole_once_it_passed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let o = opts(&clock, GcPolicyConfig::Inline, 8);
    let o = Options {
        vlog: ValueLogOptions {
            gc: "titan".parse().unwrap(),
            ..o.vlog
        },
        ..o
    };
    let db = DB::open(dir.path(), o.clone()).unwrap();
    // Three groups: expiring in 10 s, in an hour, never.
    for i in 0..300u32 {
        let k = format!("k{i:04}");
        match i % 3 {
            0 => db.put_with_expiry(k.as_bytes(), &big("soon", i), T0 + 10_000 + u64::from(i)),
            1 => db.put_with_expiry(k.as_bytes(), &big("hour", i), T0 + 3_600_000),
            _ => db.put(k.as_bytes(), &big("plain", i)),
        }
        .unwrap();
    }
    db.flush().unwrap();
    let v = db.version();
    let latest: Vec<FileExpiry> = v.blobs.values().map(|b| b.expiry).collect();
    drop(v);
    // The soon group's files: their latest expiry is the group's latest.
    assert!(
        latest.contains(&FileExpiry::AllBy(T0 + 10_000 + 297)),
        "expiry windows of the files: {latest:?}"
    );
    assert!(
        latest.contains(&FileExpiry::AllBy(T0 + 3_600_000)),
        "{latest:?}"
    );
    assert!(latest.contains(&FileExpiry::None), "{latest:?}");
    let files_before = vlogs(dir.path());
    clock.set(T0 + 10_000 + 297);
    // Any background job's end drops expired files; a flush of one more write is one.
    db.put(b"other", b"x").unwrap();
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let v = db.version();
    assert!(
        v.blobs
            .values()
            .all(|b| b.expiry != FileExpiry::AllBy(T0 + 10_000 + 297)),
        "the soon files are gone from the version"
    );
    drop(v);
    assert!(vlogs(dir.path()) < files_before, "and from the directory");
    assert!(db.stats().expired_value_files >= 1);
    // Their keys read as absent (the pointers into the dropped files are never
    // followed); the rest is intact.
    for i in 0..300u32 {
        let got = db.get(format!("k{i:04}").as_bytes()).unwrap();
        let want = match i % 3 {
            0 => None,
            1 => Some(big("hour", i)),
            _ => Some(big("plain", i)),
        };
        assert_eq!(got, want, "key {i}");
    }
    assert_eq!(scan_all(&db).len(), 201);
    // The wall clock steps back (NTP) to before the drop: the engine's time stands
    // still, so the pointers into the dropped files still read as expired, not as a
    // missing file.
    clock.set(T0);
    for i in (0..300u32).step_by(3) {
        assert_eq!(
            db.get(format!("k{i:04}").as_bytes()).unwrap(),
            None,
            "key {i}"
        );
    }
    assert_eq!(scan_all(&db).len(), 201);
    clock.set(T0 + 10_000 + 297);
    db.close().unwrap();
    // The tree still holds pointers into the dropped files (no compaction ran): `check`
    // knows they expired.
    let report = check(dir.path(), &o, &mut |_, _| {}).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    let db = DB::open(dir.path(), o).unwrap();
    assert_eq!(scan_all(&db).len(), 201);
}

/// Values of more expiry windows than a job (or, with the value log as the WAL, the write
/// path) keeps files open for: no more files, and no value dropped before its time.
#[test]
fn more_expiry_windows_than_open_files_write_no_more_files_and_drop_nothing_early() {
    for value_log_wal in [false, true] {
        more_windows_than_open_files(value_log_wal);
    }
}

fn more_windows_than_open_files(value_log_wal: bool) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let o = opts(&clock, "titan".parse().unwrap(), 8);
    // One flush of every value: a memtable that holds them all.
    let o = Options {
        tree: halflife_engine::TreeOptions {
            memtable_size: 4 << 20,
            ..o.tree
        },
        wal: halflife_engine::WalOptions {
            value_log_wal,
            ..o.wal
        },
        ..o
    };
    let db = DB::open(dir.path(), o).unwrap();
    // 400 values with TTLs from 2 s to about 7.5 hours (1.1x apart every 4 values): some
    // 100 windows of ttl / 8, three times the 32 a job keeps open.
    let ttl = |i: u32| (2_000.0 * 1.1f64.powi((i / 4) as i32)) as u64;
    for i in 0..400u32 {
        let k = format!("k{i:04}");
        db.put_with_expiry(k.as_bytes(), &big("e", i), T0 + ttl(i))
            .unwrap();
    }
    db.flush().unwrap();
    // 32 windows, and a few files cut at the 64 KiB file size (160 KB of values).
    let files = db.version().blobs.len();
    assert!((2..=36).contains(&files), "{files} value files");
    // Step the clock through every expiry: each value reads until its own time, and is
    // gone from it; the files are all dropped by the last one.
    let mut expiries: Vec<u64> = (0..400).map(ttl).collect();
    expiries.dedup();
    for at in expiries {
        clock.set(T0 + at - 1);
        db.put(b"tick", b"x").unwrap();
        db.flush().unwrap();
        db.wait_idle().unwrap();
        for i in 0..400u32 {
            let got = db.get(format!("k{i:04}").as_bytes()).unwrap();
            let want = (ttl(i) > at - 1).then(|| big("e", i));
            assert_eq!(got, want, "key {i} (TTL {} ms) at {} ms", ttl(i), at - 1);
        }
    }
    clock.set(T0 + ttl(399));
    db.put(b"tick", b"y").unwrap();
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let v = db.version();
    assert!(
        v.blobs.values().all(|b| b.expiry == FileExpiry::None),
        "every expiring file dropped: {:?}",
        v.blobs.values().map(|b| b.expiry).collect::<Vec<_>>()
    );
    assert!(db.stats().expired_value_files >= files as u64 - 1);
}

#[test]
fn a_database_of_the_format_before_expiry_opens_and_reads() {
    // Written by the code path that predates expiry (plain puts and deletes, no expiring
    // kind, no manifest tag 15): the bytes are the old format's, unchanged.
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let o = opts(&clock, "titan".parse().unwrap(), 8);
    {
        let db = DB::open(dir.path(), o.clone()).unwrap();
        for i in 0..100u32 {
            db.put(format!("k{i:04}").as_bytes(), &big("v", i)).unwrap();
        }
        db.delete(b"k0003").unwrap();
        db.compact_range(None, None).unwrap();
        db.close().unwrap();
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/before-expiry");
    for d in [dir.path(), fixture.as_path()] {
        let copy = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() && p.file_name().unwrap() != "LOCK" {
                std::fs::copy(&p, copy.path().join(p.file_name().unwrap())).unwrap();
            }
        }
        let db = DB::open(copy.path(), o.clone()).unwrap();
        let got = scan_all(&db);
        assert!(!got.is_empty(), "{}", d.display());
        for (k, v) in &got {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
        }
        // And it takes expiring writes on top.
        db.put_with_expiry(b"zz", b"e", T0 + 5).unwrap();
        clock.set(T0 + 5);
        assert_eq!(db.get(b"zz").unwrap(), None);
        clock.set(T0);
        db.close().unwrap();
        let report = check(copy.path(), &o, &mut |_, _| {}).unwrap();
        assert!(report.is_ok(), "{}: {:?}", d.display(), report.problems);
    }
}

/// `DB::contains` answers as `get` does (live, deleted, expired, absent; from a memtable
/// and from the tables) but never reads a separated value from its file.
#[test]
fn contains_answers_as_get_without_reading_a_separated_value() {
    use halflife_engine::io::IoCause;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = DB::open(
        dir.path(),
        opts(&clock, GcPolicyConfig::Titan { garbage_ratio: 0.5 }, 8),
    )
    .unwrap();
    let large = vec![b'v'; 64 << 10];
    db.put(b"inline", b"small").unwrap();
    db.put(b"separated", &large).unwrap();
    db.put(b"deleted", &large).unwrap();
    db.delete(b"deleted").unwrap();
    let mut b = WriteBatch::new();
    b.put_with_expiry(b"expiring", &large, T0 + 10);
    db.write(b, &Default::default()).unwrap();
    let keys: [&[u8]; 5] = [b"inline", b"separated", b"deleted", b"expiring", b"absent"];
    for flushed in [false, true] {
        for now in [T0, T0 + 10] {
            clock.set(now);
            for k in keys {
                let want = db.get(k).unwrap().is_some();
                assert_eq!(
                    db.contains(k).unwrap(),
                    want,
                    "{k:?} flushed={flushed} now={now}"
                );
            }
        }
        clock.set(T0);
        db.flush().unwrap();
    }
    let read = |db: &DB| db.stats().io.cause(IoCause::ClientRead).bytes_read;
    let before = read(&db);
    assert_eq!(db.get(b"separated").unwrap().unwrap(), large);
    let by_get = read(&db) - before;
    assert!(by_get >= large.len() as u64, "get read {by_get} bytes");
    let before = read(&db);
    assert!(db.contains(b"separated").unwrap());
    let by_contains = read(&db) - before;
    assert!(
        by_contains < large.len() as u64,
        "contains read {by_contains} bytes"
    );
}
