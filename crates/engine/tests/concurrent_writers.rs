//! Model check with several writer threads: group commit gathers their batches into one WAL
//! write and inserts them into the memtable (large batches concurrently, by their own
//! writers; small ones by the leader) while the next group writes its WAL record; groups
//! are published in sequence order. Each writer owns a disjoint set of
//! keys and keeps its own model, so the expected contents are exact whatever the
//! interleaving; a reader thread checks, at snapshots, that a batch is seen entirely or not
//! at all; reopenings (clean, and after dropping the handle without closing) must keep every
//! acknowledged write.

use halflife_engine::{
    CacheOptions, GcPolicyConfig, Options, TreeOptions, ValueLogOptions, WriteBatch, WriteOptions,
    DB,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use testkit::{check_scan, key, value};

const WRITERS: u32 = 4;
const KEYS_PER_WRITER: u32 = 150;
/// Pairs per writer: few, so that the reader often looks at a pair being written.
const PAIRS_PER_WRITER: u32 = 4;

fn options(gc: GcPolicyConfig) -> Options {
    Options {
        tree: TreeOptions {
            memtable_size: 32 << 10,
            level1_max_bytes: 128 << 10,
            target_file_size: 32 << 10,
            l0_compaction_trigger: 2,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 64,
            blob_file_size: 64 << 10,
            gc,
            ..Default::default()
        },
        cache: CacheOptions {
            block_cache_capacity: 64 << 10,
            ..Default::default()
        },
        ..Options::default()
    }
}

/// Key `i` of writer `w`: writers' key sets interleave in key order.
fn owned(w: u32, i: u32) -> u32 {
    i * WRITERS + w
}

/// The two keys of pair `k`: only ever written (or deleted) together, in one batch.
fn pair(k: u32) -> [Vec<u8>; 2] {
    let mut a = key(k);
    a.extend_from_slice(b"-pair-a");
    let mut b = key(k);
    b.extend_from_slice(b"-pair-b");
    [a, b]
}

/// One writer's round: puts, deletes and pair batches (some synced) on its own keys,
/// checking that each acknowledged write is read back at once.
fn writer_round(db: &DB, w: u32, seed: u64, steps: usize, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut rng = StdRng::seed_from_u64(seed);
    for step in 0..steps {
        let k = owned(w, rng.random_range(0..KEYS_PER_WRITER));
        let version = step as u32;
        match rng.random_range(0..10) {
            0 => {
                db.delete(&key(k)).unwrap();
                model.remove(&key(k));
                assert_eq!(db.get(&key(k)).unwrap(), None);
            }
            1..=3 => {
                // Both keys of the pair in one batch, with the same value, or both deleted.
                let mut b = WriteBatch::new();
                let keys = pair(owned(w, k % PAIRS_PER_WRITER));
                if rng.random_bool(0.2) {
                    for p in &keys {
                        b.delete(p);
                        model.remove(p);
                    }
                } else {
                    let v = value(&mut rng, k, version);
                    for p in &keys {
                        b.put(p, &v);
                        model.insert(p.clone(), v.clone());
                    }
                }
                let sync = rng.random_bool(0.2);
                db.write(b, &WriteOptions { sync }).unwrap();
            }
            4 => {
                // A large batch: inserted by its own writer, in parallel with the rest of
                // its group (small ones are inserted by the group's leader).
                let mut b = WriteBatch::new();
                for _ in 0..24 {
                    let k = owned(w, rng.random_range(0..KEYS_PER_WRITER));
                    let v = value(&mut rng, k, version);
                    b.put(&key(k), &v);
                    model.insert(key(k), v);
                }
                db.write(b, &WriteOptions { sync: false }).unwrap();
                assert_eq!(db.get(&key(k)).unwrap().as_ref(), model.get(&key(k)));
            }
            _ => {
                let v = value(&mut rng, k, version);
                db.put(&key(k), &v).unwrap();
                assert_eq!(db.get(&key(k)).unwrap().as_deref(), Some(&v[..]));
                model.insert(key(k), v);
            }
        }
    }
}

/// Until `stop`: at any snapshot, the two keys of a pair hold the same value (a batch is
/// visible entirely or not at all). Returns the number of pairs seen written.
fn check_batches_atomic(db: &DB, stop: &AtomicBool, seed: u64) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut seen = 0;
    while !stop.load(Relaxed) {
        let k = rng.random_range(0..WRITERS * PAIRS_PER_WRITER);
        let snap = db.snapshot();
        let [a, b] = pair(k);
        let (va, vb) = (db.get_at(&a, &snap).unwrap(), db.get_at(&b, &snap).unwrap());
        assert_eq!(va, vb, "pair {k} half visible at a snapshot");
        seen += u64::from(va.is_some());
    }
    seen
}

fn run(gc: GcPolicyConfig, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut models: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new(); WRITERS as usize];
    for round in 0..4u64 {
        let db = Arc::new(DB::open(dir.path(), options(gc.clone())).unwrap());
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| check_batches_atomic(&db, &stop, seed ^ round));
            let flusher = s.spawn(|| {
                while !stop.load(Relaxed) {
                    db.flush().unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            });
            let writers: Vec<_> = models
                .iter_mut()
                .enumerate()
                .map(|(w, model)| {
                    let db = &db;
                    let seed = seed + round * 100 + w as u64;
                    s.spawn(move || writer_round(db, w as u32, seed, 1500, model))
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            stop.store(true, Relaxed);
            assert!(reader.join().unwrap() > 0);
            flusher.join().unwrap();
        });
        let all: BTreeMap<_, _> = models
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        check_scan(&db, &all, b"", b"\xff");
        for (k, v) in &all {
            assert_eq!(
                db.get(k).unwrap().as_ref(),
                Some(v),
                "{}",
                String::from_utf8_lossy(k)
            );
        }
        let db = Arc::try_unwrap(db).ok().expect("no other handle");
        if round % 2 == 0 {
            db.close().unwrap();
        } else {
            // Dropped without close: the WAL must bring back every acknowledged write.
            drop(db);
        }
        let reopened = DB::open(dir.path(), options(gc.clone())).unwrap();
        check_scan(&reopened, &all, b"", b"\xff");
        reopened.close().unwrap();
    }
}

#[test]
fn concurrent_writers_inline() {
    run(GcPolicyConfig::Inline, 1);
}

#[test]
fn concurrent_writers_blobdb() {
    run(
        GcPolicyConfig::BlobDb {
            age_cutoff: 0.8,
            force_threshold: 0.2,
        },
        2,
    );
}

/// Writes reach the memtable in any order (groups insert concurrently, and a group that
/// writes its WAL record while the previous one is still inserting can finish first), but
/// a snapshot must see a prefix of the sequence order. Each writer puts its own `a` key and
/// then its own `b` key, both with the step number, so at any snapshot `a >= b`; and
/// reading the same snapshots again once every write is done must give the same values:
/// a sequence number published while an earlier write was still being inserted would show
/// that earlier key's older value first and its newer value later.
#[test]
fn snapshots_see_writes_in_sequence_order() {
    const STEPS: u64 = 3000;
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), Options::default()).unwrap();
    let keys = |w: u32| [format!("order-{w}-a"), format!("order-{w}-b")];
    let read = |snap: &halflife_engine::Snapshot, k: &str| -> u64 {
        db.get_at(k.as_bytes(), snap)
            .unwrap()
            .map_or(0, |v| u64::from_be_bytes(v[..8].try_into().unwrap()))
    };
    let stop = AtomicBool::new(false);
    let seen = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut seen = Vec::new();
                    while !stop.load(Relaxed) {
                        let snap = db.snapshot();
                        // `b` first: a later read of `a` at the same snapshot cannot make
                        // the check pass by seeing a newer `a`.
                        let vals: Vec<(u64, u64)> = (0..WRITERS)
                            .map(|w| {
                                let [a, b] = keys(w);
                                let vb = read(&snap, &b);
                                (read(&snap, &a), vb)
                            })
                            .collect();
                        for (w, (va, vb)) in vals.iter().enumerate() {
                            assert!(
                                va >= vb,
                                "writer {w}: b = {vb} visible without a (a = {va})"
                            );
                        }
                        seen.push((snap, vals));
                    }
                    seen
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let db = &db;
                s.spawn(move || {
                    let [a, b] = keys(w);
                    for step in 1..=STEPS {
                        let mut v = step.to_be_bytes().to_vec();
                        v.resize(200, b'v');
                        db.put(a.as_bytes(), &v).unwrap();
                        db.put(b.as_bytes(), &v).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Relaxed);
        readers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert!(seen.len() > 100, "only {} snapshots read", seen.len());
    for (snap, vals) in &seen {
        for (w, &(va, vb)) in vals.iter().enumerate() {
            let [a, b] = keys(w as u32);
            assert_eq!(
                (read(snap, &a), read(snap, &b)),
                (va, vb),
                "writer {w}: snapshot at {} changed after the writes finished",
                snap.seq()
            );
        }
    }
    drop(seen);
    db.close().unwrap();
}
