//! Value-file GC: no value lost, obsolete values reclaimed, counted bytes equal file sizes.

use halflife_engine::io::IoCause;
use halflife_engine::lifetime::ThresholdParams;
use halflife_engine::{
    GcPolicyConfig, GcTrigger, LifetimeMode, LifetimeOptions, Options, TreeOptions,
    ValueLogOptions, WalOptions, DB,
};
use std::path::Path;

fn opts(gc: GcPolicyConfig) -> Options {
    opts_triggered(gc, GcTrigger::Ttl)
}

fn opts_triggered(gc: GcPolicyConfig, trigger: GcTrigger) -> Options {
    Options {
        tree: testkit::small_tree(),
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            gc,
            // Lifetime policy: a TTL of 150 writes, shorter than the 200 writes between two
            // versions of a key, so that GC finds valid values to move.
            lifetime: LifetimeOptions {
                thresholds: ThresholdParams {
                    initial_ttl: 150,
                    ..ThresholdParams::default()
                },
                trigger,
                ..LifetimeOptions::default()
            },
            ..Default::default()
        },
        ..Options::default()
    }
}

fn dir_bytes(dir: &Path, ext: &str) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

fn value(k: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{k}/{round}/").into_bytes();
    v.resize(1000, b'0' + (round % 10) as u8);
    v
}

fn expected(k: u32) -> Vec<u8> {
    value(k, if k.is_multiple_of(2) { 9 } else { 8 })
}

/// Overwrites 200 keys ten times, then checks every value and how much space is left.
fn overwrite_and_collect(gc: GcPolicyConfig) -> (halflife_engine::DbStats, u64) {
    overwrite_and_collect_with(opts(gc))
}

fn overwrite_and_collect_with(o: Options) -> (halflife_engine::DbStats, u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), o).unwrap();
    for round in 0..10 {
        // The last round rewrites only even keys, so the files of round 8 stay half live
        // and GC must move (and write back) their odd keys.
        for k in (0..200u32).filter(|k| round < 9 || k.is_multiple_of(2)) {
            db.put(format!("key{k:04}").as_bytes(), &value(k, round))
                .unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    db.wait_idle().unwrap();
    for k in 0..200u32 {
        assert_eq!(
            db.get(format!("key{k:04}").as_bytes()).unwrap(),
            Some(expected(k))
        );
    }
    let live = db.measure_live_bytes().unwrap();
    assert_eq!(live, 200 * (7 + 1000));
    let s = db.stats();
    assert_eq!(
        s.value_file_bytes,
        dir_bytes(dir.path(), "vlog"),
        "stats match the files"
    );
    db.close().unwrap();
    // Nothing lost across a reopen either.
    let db = DB::open(dir.path(), opts(GcPolicyConfig::Inline)).unwrap();
    for k in 0..200u32 {
        assert_eq!(
            db.get(format!("key{k:04}").as_bytes()).unwrap(),
            Some(expected(k))
        );
    }
    (s, live)
}

#[test]
fn titan_reclaims_overwritten_values() {
    let (s, live) = overwrite_and_collect(GcPolicyConfig::titan());
    assert!(s.gc_jobs > 0, "no GC job ran");
    assert!(s.gc_writeback_entries > 0);
    // Ten versions were written; after GC well under half of that space remains.
    assert!(
        s.value_file_bytes < 4 * live,
        "value files {} live {live}",
        s.value_file_bytes
    );
}

#[test]
fn blobdb_reclaims_overwritten_values() {
    let (s, live) = overwrite_and_collect(GcPolicyConfig::BlobDb {
        age_cutoff: 1.0,
        force_threshold: 0.2,
    });
    assert!(
        s.value_file_bytes < 4 * live,
        "value files {} live {live}",
        s.value_file_bytes
    );
    let files_with_garbage = s.value_files.iter().filter(|f| f.garbage_bytes > 0).count();
    assert!(files_with_garbage < s.value_files.len() || s.value_files.is_empty());
}

#[test]
fn terark_reclaims_overwritten_values_through_index_maps() {
    let (s, live) = overwrite_and_collect(GcPolicyConfig::Terark { garbage_ratio: 0.2 });
    assert!(s.gc_jobs > 0, "no GC job ran");
    assert_eq!(s.gc_writeback_entries, 0, "no write-back with index maps");
    assert!(
        s.value_file_bytes < 4 * live,
        "value files {} live {live}",
        s.value_file_bytes
    );
}

#[test]
fn lifetime_reclaims_overwritten_values_when_ttls_expire() {
    let (s, live) = overwrite_and_collect(GcPolicyConfig::Lifetime {
        mode: LifetimeMode::NoModel,
    });
    assert!(s.gc_jobs > 0, "no GC job ran");
    assert_eq!(s.gc_writeback_entries, 0);
    let l = s.lifetime.unwrap();
    assert!(l.placed_long > 0, "GC found no valid value to place");
    assert!(!l.gc_history.is_empty());
    // Ten versions were written; what remains is the files still inside their TTL.
    assert!(
        s.value_file_bytes < 5 * live,
        "value files {} live {live}",
        s.value_file_bytes
    );
}

#[test]
fn counted_bytes_equal_file_sizes() {
    for value_log_wal in [false, true] {
        counted_bytes_with(value_log_wal);
    }
}

fn counted_bytes_with(value_log_wal: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), {
        let base = opts(GcPolicyConfig::blobdb());
        Options {
            tree: TreeOptions {
                l0_compaction_trigger: 8,
                l0_stop_writes_trigger: 20,
                ..base.tree
            },
            wal: WalOptions {
                value_log_wal,
                ..base.wal
            },
            ..base
        }
    })
    .unwrap();
    for k in 0..300u32 {
        db.put(format!("key{k:04}").as_bytes(), &value(k, 0))
            .unwrap();
        db.put(format!("small{k:04}").as_bytes(), b"tiny").unwrap();
    }
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!(s.compactions, 0);
    assert_eq!(s.written(IoCause::Flush), dir_bytes(dir.path(), "sst"));
    assert_eq!(s.written(IoCause::ValueLog), dir_bytes(dir.path(), "vlog"));
    assert_eq!(s.user_bytes_written, 300 * (7 + 1000 + 9 + 4));
    if value_log_wal {
        // The WAL logs keys and pointers; the values went to value files once.
        assert!(s.written(IoCause::Wal) < s.user_bytes_written / 2);
    } else {
        assert!(s.written(IoCause::Wal) > s.user_bytes_written);
    }
}

/// A value only a snapshot can still read lives in a value file created after the snapshot
/// (it was in the memtable when the snapshot was taken). A TTL-triggered GC collects that
/// file while the snapshot lives and must not lose the value. A garbage-driven one
/// (`gc_while_snapshot` false) finds no garbage while the snapshot pins every version, and
/// collects once it is gone.
fn snapshot_keeps_value_through_gc(o: Options, gc_while_snapshot: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), o).unwrap();
    db.put(b"x", &value(999, 1)).unwrap();
    let snap = db.snapshot();
    db.put(b"x", &value(999, 2)).unwrap();
    // Written after the snapshot, so it does not protect them once overwritten.
    for k in 0..50u32 {
        db.put(format!("key{k:04}").as_bytes(), &value(k, 0))
            .unwrap();
    }
    db.flush().unwrap();
    // Overwrite the rest of that file so that it becomes garbage and gets collected.
    for round in 1..4 {
        for k in 0..50u32 {
            db.put(format!("key{k:04}").as_bytes(), &value(k, round))
                .unwrap();
        }
        db.compact_range(None, None).unwrap();
    }
    db.wait_idle().unwrap();
    assert_eq!(db.stats().gc_jobs > 0, gc_while_snapshot, "GC jobs");
    assert_eq!(db.get_at(b"x", &snap).unwrap(), Some(value(999, 1)));
    assert_eq!(db.get(b"x").unwrap(), Some(value(999, 2)));
    drop(snap);
    // One more round, now that no snapshot pins the versions its compaction drops.
    for k in 0..50u32 {
        db.put(format!("key{k:04}").as_bytes(), &value(k, 4))
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.wait_idle().unwrap();
    if gc_while_snapshot {
        assert!(db.stats().gc_jobs > 0, "no GC job ran");
    } else {
        // Collected by a job, or released whole once every record in a file died
        // (which one depends on how flushes and compactions interleaved).
        let v = db.version();
        let (total, live) = v.blobs.values().fold((0, 0), |(t, l), b| {
            (t + b.record_bytes(), l + b.live_bytes())
        });
        assert!(
            total as f64 <= 1.1 * live as f64,
            "value files hold {total} bytes for {live} live"
        );
    }
    assert_eq!(db.get(b"x").unwrap(), Some(value(999, 2)));
}

#[test]
fn lifetime_gc_keeps_values_snapshots_read() {
    snapshot_keeps_value_through_gc(
        opts(GcPolicyConfig::Lifetime {
            mode: LifetimeMode::NoModel,
        }),
        true,
    );
}

/// Titan's GC writes pointers back and judges records by the newest version only: a
/// value only a snapshot reads is not copied, and its file must outlive the snapshot even
/// when the file was not among those live when the snapshot was taken (the value log's
/// file being written, or a flush of a memtable the snapshot saw).
fn titan_keeps_values_snapshots_read(value_log_wal: bool) {
    let dir = tempfile::tempdir().unwrap();
    let base = opts(GcPolicyConfig::Titan {
        garbage_ratio: 0.05,
    });
    let o = Options {
        wal: WalOptions {
            value_log_wal,
            ..base.wal
        },
        ..base
    };
    let db = DB::open(dir.path(), o).unwrap();
    db.put(b"x", &value(999, 1)).unwrap();
    // Two versions of each key before the snapshot: the first is garbage at once.
    for round in 0..2 {
        for k in 0..50u32 {
            db.put(format!("key{k:04}").as_bytes(), &value(k, round))
                .unwrap();
        }
    }
    let snap = db.snapshot();
    db.put(b"x", &value(999, 2)).unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.wait_idle().unwrap();
    assert!(db.stats().gc_jobs > 0, "no GC job ran");
    assert_eq!(db.get_at(b"x", &snap).unwrap(), Some(value(999, 1)));
    assert_eq!(db.get(b"x").unwrap(), Some(value(999, 2)));
    drop(snap);
    assert_eq!(db.get(b"x").unwrap(), Some(value(999, 2)));
    // Released with the snapshot: every value file left on disk is a live one.
    let live = db.version().blobs.len();
    let on_disk = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("vlog".as_ref()))
        .count();
    assert_eq!(on_disk, live, "value files on disk against live ones");
}

#[test]
fn titan_gc_keeps_values_snapshots_read() {
    titan_keeps_values_snapshots_read(false);
    titan_keeps_values_snapshots_read(true);
}

#[test]
fn space_amp_gc_keeps_values_snapshots_read() {
    snapshot_keeps_value_through_gc(
        opts_triggered(
            GcPolicyConfig::Lifetime {
                mode: LifetimeMode::Learned,
            },
            GcTrigger::SpaceAmp { target: 1.1 },
        ),
        false,
    );
}

#[test]
fn space_amp_gc_reclaims_overwritten_values_placed_by_history() {
    // Flush places the values (with the value log as the WAL the write path places them;
    // `tests/placement.rs` covers that).
    let (s, live) = overwrite_and_collect_with({
        let base = opts_triggered(
            GcPolicyConfig::Lifetime {
                mode: LifetimeMode::Learned,
            },
            GcTrigger::SpaceAmp { target: 1.25 },
        );
        Options {
            wal: WalOptions {
                value_log_wal: false,
                ..base.wal
            },
            ..base
        }
    });
    assert!(s.gc_jobs > 0, "no GC job ran");
    assert_eq!(s.gc_writeback_entries, 0);
    let l = s.lifetime.unwrap();
    // Keys rewritten every 200 writes are placed by that history at flush.
    assert!(
        l.born_by_class.iter().filter(|&&n| n > 0).count() >= 2,
        "{:?}",
        l.born_by_class
    );
    // Ten versions were written; GC keeps the value files near 1.25 times the live data
    // (counted garbage, plus what flush found since).
    assert!(
        s.value_file_bytes < 2 * live,
        "value files {} live {live}",
        s.value_file_bytes
    );
}
