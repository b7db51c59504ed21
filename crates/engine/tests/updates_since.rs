//! The change stream, `DB::updates_since`: every user write from a sequence number on, in
//! commit order, across memtable switches, flushes, GC and a reopen, with the value log as
//! the WAL and without; and a clear `UpdatesGone` error, never a gap, where the WALs or
//! logged values it needs are no longer retained.

use halflife_engine::batch::WriteBatch;
use halflife_engine::internal_key::{SeqNo, ValueKind};
use halflife_engine::{
    Error, GcPolicyConfig, Options, TreeOptions, ValueLogOptions, WalOptions, WriteOptions, DB,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Clone, Debug, PartialEq)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn options(value_log_wal: bool, gc: GcPolicyConfig) -> Options {
    Options {
        tree: TreeOptions {
            memtable_size: 64 << 10,
            level1_max_bytes: 256 << 10,
            target_file_size: 64 << 10,
            l0_compaction_trigger: 2,
            ..Default::default()
        },
        wal: WalOptions {
            value_log_wal,
            // Keep every obsolete WAL.
            wal_size_limit: 1 << 40,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            gc,
            ..Default::default()
        },
        ..Options::default()
    }
}

/// Writes `n` operations (puts of small and large values, deletes, some in batches of
/// three) and returns them in commit order. With `rewrite_large` false, a large value is
/// never overwritten or deleted, so no value file ever holds garbage.
fn write(db: &DB, n: usize, seed: u64, rewrite_large: bool) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ops = Vec::new();
    let mut fresh = 0u64;
    while ops.len() < n {
        let mut batch = WriteBatch::new();
        let size = if rng.random_bool(0.05) { 3 } else { 1 };
        for _ in 0..size {
            let large = rng.random_bool(0.5);
            // A large value written once: its key is new and is never rewritten.
            let once = large && !rewrite_large;
            let key = if once {
                fresh += 1;
                format!("large{seed}-{fresh:06}").into_bytes()
            } else if large {
                format!("large{:04}", rng.random_range(0..200)).into_bytes()
            } else {
                format!("small{:04}", rng.random_range(0..200)).into_bytes()
            };
            if !once && rng.random_bool(0.1) {
                batch.delete(&key);
                ops.push(Op::Delete(key));
            } else {
                let mut v = format!("{}:", ops.len()).into_bytes();
                v.resize(if large { 600 } else { 30 }, b'v');
                batch.put(&key, &v);
                ops.push(Op::Put(key, v));
            }
        }
        db.write(batch, &WriteOptions::default()).unwrap();
    }
    ops
}

/// The stream from `seq`, as (first sequence number, operations) per batch.
fn stream(db: &DB, seq: SeqNo) -> Result<Vec<(SeqNo, Vec<Op>)>, Error> {
    let mut out = Vec::new();
    for b in db.updates_since(seq)? {
        let (first, batch) = b?;
        let ops = batch
            .iter()
            .map(|e| match e.kind {
                ValueKind::Value => Op::Put(e.key.to_vec(), e.value.to_vec()),
                ValueKind::Deletion => Op::Delete(e.key.to_vec()),
                ValueKind::ExpiringValue => panic!("no expiring write in these tests"),
                ValueKind::Pointer | ValueKind::ExpiringPointer => {
                    panic!("a pointer in the change stream")
                }
            })
            .collect();
        out.push((first, ops));
    }
    Ok(out)
}

/// Checks that the batches are in commit order, the first holds `from`, and their
/// operations are exactly `want`.
fn check(batches: &[(SeqNo, Vec<Op>)], from: SeqNo, want: &[Op]) {
    let first = batches.first().expect("a non-empty stream");
    assert!(first.0 <= from && from < first.0 + first.1.len() as u64 + 1);
    for w in batches.windows(2) {
        assert!(
            w[0].0 + w[0].1.len() as u64 <= w[1].0,
            "out of order: {:?}",
            (w[0].0, w[1].0)
        );
    }
    let got: Vec<Op> = batches.iter().flat_map(|b| b.1.clone()).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the stream differs from the writes");
}

fn every_write_in_order(value_log_wal: bool, gc: GcPolicyConfig, rewrite_large: bool) {
    let dir = tempfile::tempdir().unwrap();
    let ops = {
        let db = DB::open(dir.path(), options(value_log_wal, gc.clone())).unwrap();
        let ops = write(&db, 3000, 7, rewrite_large);
        db.wait_idle().unwrap();
        let s = db.stats();
        assert!(s.wal_archive_files > 3, "few memtables were flushed: {s:?}");
        check(&stream(&db, 1).unwrap(), 1, &ops);
        // From the middle: the batch holding that sequence number, then the rest.
        let all = stream(&db, 1).unwrap();
        let (mid_seq, _) = all[all.len() / 2];
        let skipped: usize = all[..all.len() / 2].iter().map(|b| b.1.len()).sum();
        check(&stream(&db, mid_seq).unwrap(), mid_seq, &ops[skipped..]);
        // Nothing after the last write.
        let latest = db.latest_sequence_number();
        assert!(stream(&db, latest + 1).unwrap().is_empty());
        db.close().unwrap();
        ops
    };
    // The archive survives a reopen, and the stream goes on across it.
    let db = DB::open(dir.path(), options(value_log_wal, gc)).unwrap();
    let more = write(&db, 300, 8, rewrite_large);
    let want: Vec<Op> = ops.into_iter().chain(more).collect();
    check(&stream(&db, 1).unwrap(), 1, &want);
}

#[test]
fn the_stream_holds_every_write_in_order_with_gc_write_backs_left_out() {
    // Titan's GC writes pointers back through the WAL; the stream leaves them out.
    every_write_in_order(false, GcPolicyConfig::titan(), true);
}

#[test]
fn the_stream_reads_logged_values_back_from_the_value_files() {
    every_write_in_order(true, GcPolicyConfig::titan(), false);
    every_write_in_order(true, GcPolicyConfig::default(), false);
}

#[test]
fn a_value_file_collected_by_gc_ends_the_stream_with_updates_gone() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), options(true, GcPolicyConfig::titan())).unwrap();
    write(&db, 3000, 9, true);
    db.wait_idle().unwrap();
    assert!(db.stats().gc_jobs > 0);
    let from = db.latest_sequence_number() + 1;
    let ops = write(&db, 50, 10, true);
    match stream(&db, 1) {
        Err(Error::UpdatesGone { detail, .. }) => {
            assert!(detail.contains("value file"), "{detail}")
        }
        other => panic!("expected UpdatesGone, got {:?}", other.map(|b| b.len())),
    }
    // Writes after the collection are all there.
    check(&stream(&db, from).unwrap(), from, &ops);
}

#[test]
fn without_an_archive_only_the_live_wals_are_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let opts = {
        let base = options(false, GcPolicyConfig::titan());
        Options {
            wal: WalOptions {
                wal_size_limit: 0,
                ..base.wal
            },
            ..base
        }
    };
    let db = DB::open(dir.path(), opts).unwrap();
    write(&db, 1000, 11, true);
    db.flush().unwrap();
    db.wait_idle().unwrap();
    assert_eq!(db.stats().wal_archive_files, 0);
    let from = db.latest_sequence_number() + 1;
    let ops = write(&db, 20, 12, true);
    match stream(&db, 1) {
        Err(Error::UpdatesGone { seq: 1, detail }) => {
            assert!(detail.contains("oldest WAL retained"), "{detail}")
        }
        other => panic!("expected UpdatesGone, got {:?}", other.map(|b| b.len())),
    }
    check(&stream(&db, from).unwrap(), from, &ops);
}

#[test]
fn the_size_bound_drops_the_oldest_archived_wals_first() {
    let dir = tempfile::tempdir().unwrap();
    let limit = 256 << 10;
    let opts = {
        let base = options(false, GcPolicyConfig::titan());
        Options {
            wal: WalOptions {
                wal_size_limit: limit,
                ..base.wal
            },
            ..base
        }
    };
    let db = DB::open(dir.path(), opts).unwrap();
    write(&db, 4000, 13, true);
    db.wait_idle().unwrap();
    let s = db.stats();
    assert!(
        s.wal_archive_files > 0 && s.wal_archive_bytes <= limit,
        "{s:?}"
    );
    assert!(matches!(stream(&db, 1), Err(Error::UpdatesGone { .. })));
    let from = db.latest_sequence_number() + 1;
    let ops = write(&db, 20, 14, true);
    check(&stream(&db, from).unwrap(), from, &ops);
}

#[test]
fn keeping_wals_without_a_wal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        wal: WalOptions {
            use_wal: false,
            wal_ttl_seconds: 60,
            ..Default::default()
        },
        ..Options::default()
    };
    match DB::open(dir.path(), opts) {
        Err(Error::InvalidOptions { name, .. }) => assert_eq!(name, "wal_ttl_seconds"),
        other => panic!("expected InvalidOptions, got {:?}", other.map(|_| ())),
    }
}
