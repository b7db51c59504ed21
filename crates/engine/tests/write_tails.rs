//! What the write path no longer waits for (issue 13, docs/bench.md "Tails"): a value file
//! cut by the write path (the value log as the WAL) is synced by the flush that installs
//! it, or by the next synced write, never by the unsynced write that cut it; GC's
//! relocations written back in chunks install only where the key was not written since;
//! compaction and GC give a client thread the CPU first.

use halflife_engine::io::IoCause;
use halflife_engine::{
    GcPolicyConfig, LifetimeMode, Options, TreeOptions, ValueLogOptions, WalOptions, WriteOptions,
    DB,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn value_log_syncs(db: &DB) -> u64 {
    db.stats().io.cause(IoCause::ValueLog).syncs
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(4096, b'a' + (i % 26) as u8);
    v
}

/// Every key `0..keys` reads back `want(i)`.
fn check(db: &DB, keys: u64, want: impl Fn(u64) -> Vec<u8>) {
    for i in 0..keys {
        assert_eq!(db.get(&key(i)).unwrap(), Some(want(i)), "key {i}");
    }
}

/// The value log as the WAL, with value files of about 16 values.
fn vwal_options(memtable_size: usize) -> Options {
    Options {
        tree: TreeOptions {
            memtable_size,
            ..Default::default()
        },
        wal: WalOptions {
            value_log_wal: true,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 512,
            blob_file_size: 64 << 10,
            gc: GcPolicyConfig::titan(),
            ..Default::default()
        },
        ..Options::default()
    }
}

#[test]
fn unsynced_writes_do_not_sync_the_value_files_they_cut() {
    let dir = tempfile::tempdir().unwrap();
    // Never full here: no flush runs until the test asks for one; 200 puts cut about a
    // dozen value files.
    let opts = vwal_options(64 << 20);
    let db = DB::open(dir.path(), opts.clone()).unwrap();
    for i in 0..200 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    assert_eq!(
        value_log_syncs(&db),
        0,
        "an unsynced write synced a value file"
    );
    // A synced write makes every earlier write durable: the files cut before it too.
    let sync = WriteOptions { sync: true };
    db.put_opt(b"k-sync", &value(999, 0), &sync).unwrap();
    let cut = value_log_syncs(&db);
    assert!(cut >= 10, "a synced write synced {cut} value files");
    // Flush installs the cut files (already synced: no second sync) and the new one.
    db.flush().unwrap();
    let after_flush = value_log_syncs(&db);
    assert!(
        after_flush <= cut + 1,
        "flush synced {} value files again",
        after_flush - cut
    );
    check(&db, 200, |i| value(i, 0));
    db.close().unwrap();
    // Reopened from the manifest: the installed files hold every value.
    let db = DB::open(dir.path(), opts).unwrap();
    check(&db, 200, |i| value(i, 0));
    assert_eq!(db.get(b"k-sync").unwrap(), Some(value(999, 0)));
}

#[test]
fn value_files_cut_without_sync_are_installed_by_flush() {
    let dir = tempfile::tempdir().unwrap();
    // Flushes run while the writes go on: each installs files cut without a sync.
    let opts = vwal_options(512 << 10);
    let db = DB::open(dir.path(), opts.clone()).unwrap();
    for round in 0..3 {
        for i in 0..300 {
            db.put(&key(i), &value(i, round)).unwrap();
        }
    }
    db.wait_idle().unwrap();
    assert!(db.stats().flushes >= 3, "{} flushes", db.stats().flushes);
    db.close().unwrap();
    check(&DB::open(dir.path(), opts).unwrap(), 300, |i| value(i, 2));
}

#[test]
fn gc_write_back_keeps_writes_made_while_it_runs() {
    // Titan's GC relocates values and writes their new pointers back in chunks, each
    // checked outside the write queue; keys overwritten meanwhile (in the memtable, or
    // flushed since) must keep the newer value.
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        tree: TreeOptions {
            memtable_size: 256 << 10,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 512,
            blob_file_size: 256 << 10,
            gc: GcPolicyConfig::Titan { garbage_ratio: 0.1 },
            ..Default::default()
        },
        ..Options::default()
    };
    let db = DB::open(dir.path(), opts.clone()).unwrap();
    const KEYS: u64 = 2000;
    let done = AtomicBool::new(false);
    let last = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut round = 0;
            while !done.load(Ordering::Relaxed) || round < 6 {
                round += 1;
                // Hot keys (every fourth) are rewritten every round, the rest only in the
                // first: GC finds both live and dead records in the hot keys' files.
                for i in (0..KEYS).filter(|i| round == 1 || i.is_multiple_of(4)) {
                    db.put(&key(i), &value(i, round)).unwrap();
                }
            }
            round
        });
        std::thread::sleep(Duration::from_millis(200));
        done.store(true, Ordering::Relaxed);
        writer.join().unwrap()
    });
    db.wait_idle().unwrap();
    assert!(db.stats().gc_jobs > 0, "no GC job ran");
    let want = |i: u64| value(i, if i.is_multiple_of(4) { last } else { 1 });
    check(&db, KEYS, want);
    db.close().unwrap();
    check(&DB::open(dir.path(), opts).unwrap(), KEYS, want);
}

/// Nice values of this process's threads named `prefix` or `prefix-N`.
#[cfg(target_os = "linux")]
fn nice_of_threads(prefix: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let t = t.unwrap().path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(t.join("comm")),
            std::fs::read_to_string(t.join("stat")),
        ) else {
            continue; // the thread ended meanwhile
        };
        // The role's thread ("halflife-gc") or its numbered siblings ("halflife-gc-1"),
        // not another role that shares the prefix (the GC read pool's "halflife-gc-read-0",
        // cut to "halflife-gc-rea", which another test's GC job may have started).
        let comm = comm.trim_end();
        let numbered = comm
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if comm != prefix && !numbered {
            continue;
        }
        // After the name's closing parenthesis: field 3 (state) onwards; nice is field 19.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        out.push(rest.split(' ').nth(16).unwrap().parse().unwrap());
    }
    out
}

/// This thread's nice value: the one threads that keep normal priority inherit (a test
/// run under `nice` starts them all above 0).
#[cfg(target_os = "linux")]
fn own_nice() -> i64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(16).unwrap().parse().unwrap()
}

/// [`nice_of_threads`] once every such thread is at `want`, or after 30 s (a failure
/// guard: under load a new thread can be listed, named, for a while before it has set its
/// priority, which it does first).
#[cfg(target_os = "linux")]
fn settled_nice(prefix: &str, want: i64) -> Vec<i64> {
    let mut nice = nice_of_threads(prefix);
    for _ in 0..1500 {
        if !nice.is_empty() && nice.iter().all(|&n| n == want) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        nice = nice_of_threads(prefix);
    }
    nice
}

#[cfg(target_os = "linux")]
#[test]
fn background_threads_yield_the_cpu_unless_writers_wait_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let opts = vwal_options(64 << 20);
    assert!(opts.lower_background_priority, "on by default");
    let db = DB::open(dir.path(), opts).unwrap();
    // Other tests of this binary open databases with the default too: every thread of
    // these names in the process is at the priority its role asks for.
    // (Thread names are cut to 15 bytes: "halflife-compact-0" reads "halflife-compac".)
    let normal = own_nice();
    for (prefix, want) in [
        ("halflife-compac", 19),
        ("halflife-gc", 19),
        ("halflife-flush", normal),
    ] {
        let nice = settled_nice(prefix, want);
        assert!(!nice.is_empty(), "no {prefix} thread");
        assert!(
            nice.iter().all(|&n| n == want),
            "{prefix}: {nice:?}, want {want}"
        );
    }
    drop(db);
    // Under a space-amplification target (the learned policy's default) writers wait for
    // GC, so the finder that feeds it keeps normal priority. No other test of this binary
    // opens a database with a finder.
    let dir = tempfile::tempdir().unwrap();
    let opts = {
        let base = vwal_options(64 << 20);
        Options {
            vlog: ValueLogOptions {
                gc: GcPolicyConfig::Lifetime {
                    mode: LifetimeMode::Learned,
                },
                ..base.vlog
            },
            ..base
        }
    };
    let db = DB::open(dir.path(), opts).unwrap();
    let find = settled_nice("halflife-find", normal);
    assert!(!find.is_empty(), "no finder thread");
    assert!(find.iter().all(|&n| n == normal), "finder: {find:?}");
    drop(db);
}
