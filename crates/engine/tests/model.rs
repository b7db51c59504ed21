//! Model check: random operations against the DB and a BTreeMap, for every GC policy,
//! with flushes, compactions, snapshots, scans and reopenings. Small memtables and value
//! files make every background path (flush, compaction, relocation, GC, write-back) run.

use halflife_engine::lifetime::{GbmParams, ThresholdParams};
use halflife_engine::{
    CacheOptions, CacheWarmingConfig, CompactionStyle, Cursor, Direction, GcPolicyConfig,
    GcTrigger, LearnedParams, LifetimeMode, LifetimeOptions, LifetimeOracle, Options, ReadOptions,
    Snapshot, TreeOptions, ValueLogOptions, WalOptions, WriteBatch, WriteOptions, DB,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use testkit::{check_scan, key, value};

fn small_options(gc: GcPolicyConfig, dynamic_level_bytes: bool) -> Options {
    Options {
        tree: TreeOptions {
            dynamic_level_bytes,
            memtable_size: 16 << 10,
            level1_max_bytes: 64 << 10,
            target_file_size: 16 << 10,
            l0_compaction_trigger: 2,
            growth_factor: 4.0,
            num_levels: 4,
            // The leveled runs check each level holds one run; `model_auto_style` covers the
            // default, which may tier.
            compaction_style: CompactionStyle::Leveled,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 64,
            blob_file_size: 32 << 10,
            lifetime: LifetimeOptions {
                // TTLs of a few hundred writes and a tiny dataset, so that GC jobs, training
                // and model-driven placement all happen within a few thousand operations.
                thresholds: ThresholdParams {
                    initial_ttl: 300,
                    ..ThresholdParams::default()
                },
                dataset_capacity: 64,
                gbm: GbmParams {
                    iterations: 5,
                    ..GbmParams::default()
                },
                value_size_feature: true,
                max_gc_batch_bytes: 64 << 10,
                trigger: GcTrigger::default(),
                // A write history far smaller than the keys: evictions and tag collisions
                // misplace values, which must cost bytes only, never a value.
                write_history_slots: 64,
                // The finder's recent pointers far fewer than the keys (two generations of 16
                // slots): keys are forgotten and looked up in the tree, and entries are left
                // stale by tables compacted before they were searched. A wrong entry would mark
                // a live record dead, and GC would drop a value.
                recent_pointer_bytes: 32 * halflife_engine::gc::recent_pointers::SLOT_BYTES,
            },
            lifetime_oracle: Some(Arc::new(EveryKeyAgainSoon)),
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

/// An oracle for the model test (which has no future to look at): every key is written
/// again within one sequence number, so `oracle` places every valid value short.
struct EveryKeyAgainSoon;

impl LifetimeOracle for EveryKeyAgainSoon {
    fn next_write(&self, _key: &[u8], after: u64) -> Option<u64> {
        Some(after + 1)
    }

    fn mean_interval(&self, _key: &[u8]) -> Option<u64> {
        Some(1)
    }
}

#[derive(Default)]
struct LifetimeSums {
    gc_jobs: u64,
    lazy_rewrites: u64,
    links: u64,
    gc_records: usize,
    placed_short: u64,
    /// Values placed per class at flush and at GC (space-amplification trigger).
    born: Vec<u64>,
    copied: Vec<u64>,
}

impl LifetimeSums {
    fn add(&mut self, s: &halflife_engine::DbStats) {
        self.gc_jobs += s.gc_jobs;
        if let Some(l) = &s.lifetime {
            self.lazy_rewrites += l.lazy_rewrites;
            self.links += l.links;
            self.gc_records += l.gc_history.len();
            self.placed_short += l.placed_short;
            let add = |sum: &mut Vec<u64>, v: &[u64]| {
                sum.resize(v.len().max(sum.len()), 0);
                sum.iter_mut().zip(v).for_each(|(s, v)| *s += v);
            };
            add(&mut self.born, &l.born_by_class);
            add(&mut self.copied, &l.copied_by_class);
        }
    }
}

fn run_model(gc: GcPolicyConfig, seed: u64, steps: usize) {
    run_model_shaped(gc, seed, steps, true);
}

/// A lifetime policy under `trigger`.
fn run_model_triggered(mode: LifetimeMode, trigger: GcTrigger, seed: u64, steps: usize) {
    let gc = GcPolicyConfig::Lifetime { mode };
    let runs = run_model_with(&gc, seed, steps, &|_| {
        let o = small_options(gc.clone(), true);
        Options {
            vlog: ValueLogOptions {
                lifetime: LifetimeOptions {
                    trigger,
                    ..o.vlog.lifetime.clone()
                },
                ..o.vlog
            },
            ..o
        }
    });
    assert!(runs <= 1, "leveled: {runs} runs in one level");
}

fn run_model_shaped(gc: GcPolicyConfig, seed: u64, steps: usize, dynamic: bool) {
    run_model_warmed(gc, seed, steps, dynamic, CacheWarmingConfig::None);
}

fn run_model_warmed(
    gc: GcPolicyConfig,
    seed: u64,
    steps: usize,
    dynamic: bool,
    warming: CacheWarmingConfig,
) {
    let runs = run_model_with(&gc, seed, steps, &|_| {
        let base = small_options(gc.clone(), dynamic);
        Options {
            cache: CacheOptions {
                cache_warming: warming.clone(),
                ..base.cache
            },
            ..base
        }
    });
    assert!(runs <= 1, "leveled: {runs} runs in one level");
}

/// Tiered compaction with growth factor `f` (a level merges at `f` runs), or alternating
/// between tiered and leveled every eight reopenings when `switch` is set (leveled then
/// meets levels of several runs and must merge them down whole). `f` is at least 3, so
/// that a level rests at two runs between merges: at 2 it holds two runs only until the
/// background merge that the second one triggers, and whether a step sees that depends on
/// how fast the merge runs.
fn run_model_tiered(gc: GcPolicyConfig, seed: u64, steps: usize, f: f64, switch: bool) {
    assert!(f >= 3.0, "see above");
    let runs = run_model_with(&gc, seed, steps, &|opening| {
        let tiered = !switch || (opening / 8) % 2 == 0;
        {
            let base = small_options(gc.clone(), true);
            Options {
                tree: TreeOptions {
                    compaction_style: if tiered {
                        CompactionStyle::Tiered
                    } else {
                        CompactionStyle::Leveled
                    },
                    growth_factor: f,
                    ..base.tree
                },
                ..base
            }
        }
    });
    // Levels below L0 really held several overlapping runs at times.
    assert!(runs >= 2, "at most {runs} run(s) per level >= 1");
}

/// `options(n)` gives the options of the n-th opening of the database (whose policy is
/// `gc`). Returns the most sorted runs seen in one level >= 1.
fn run_model_with(
    gc: &GcPolicyConfig,
    seed: u64,
    steps: usize,
    options: &dyn Fn(usize) -> Options,
) -> usize {
    let mut max_runs = 0;
    let mut openings = 0;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = DB::open(dir.path(), options(openings)).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut snaps = Vec::new();
    let mut version = 0u32;
    let (mut flushes, mut compactions) = (0, 0);
    // Lifetime counters summed over the reopenings.
    let mut sums = LifetimeSums::default();
    for step in 0..steps {
        version += 1;
        let v = db.version();
        max_runs = (1..v.num_levels())
            .map(|l| v.runs(l).len())
            .fold(max_runs, usize::max);
        drop(v);
        let i = rng.random_range(0..400u32);
        match rng.random_range(0..100) {
            0..=49 => {
                let v = value(&mut rng, i, version);
                db.put(&key(i), &v).unwrap();
                model.insert(key(i), v);
            }
            50..=59 => {
                db.delete(&key(i)).unwrap();
                model.remove(&key(i));
            }
            60..=64 => {
                let mut b = WriteBatch::new();
                for j in 0..rng.random_range(1..10u32) {
                    let k = key((i + j * 7) % 400);
                    if rng.random_bool(0.2) {
                        b.delete(&k);
                        model.remove(&k);
                    } else {
                        let v = value(&mut rng, i + j, version);
                        b.put(&k, &v);
                        model.insert(k, v);
                    }
                }
                db.write(b, &WriteOptions::default()).unwrap();
            }
            65..=79 => {
                assert_eq!(
                    db.get(&key(i)).unwrap(),
                    model.get(&key(i)).cloned(),
                    "get {i} at step {step}"
                );
            }
            80..=84 => {
                let j = rng.random_range(i..=400);
                match rng.random_range(0..4) {
                    0 => check_scan(&db, &model, &key(i), &key(j)),
                    1 => check_scan_rev(&db, None, &model, &key(i), &key(j)),
                    2 => check_prefix(&db, &model, &key(i)[..rng.random_range(3..=8)]),
                    _ => {
                        // Writes made after the cursor opened are not seen by it.
                        let seen = model.clone();
                        let mut cursor = db
                            .cursor(
                                Bound::Included(&key(i)),
                                Bound::Excluded(&key(j)),
                                None,
                                &ReadOptions::default(),
                            )
                            .unwrap();
                        for w in 0..rng.random_range(0..20u32) {
                            let k = key((i + w * 13) % 400);
                            if rng.random_bool(0.3) {
                                db.delete(&k).unwrap();
                                model.remove(&k);
                            } else {
                                let v = value(&mut rng, i + w, version);
                                db.put(&k, &v).unwrap();
                                model.insert(k, v);
                            }
                        }
                        walk_cursor(&mut cursor, &seen, (&key(i), &key(j)), &mut rng);
                    }
                }
            }
            85..=88 => {
                if snaps.len() < 3 {
                    snaps.push((db.snapshot(), model.clone()));
                } else {
                    let (s, m): (_, BTreeMap<_, _>) =
                        snaps.remove(rng.random_range(0..snaps.len()));
                    for probe in 0..20 {
                        let k = key((i + probe * 19) % 400);
                        assert_eq!(
                            db.get_at(&k, &s).unwrap(),
                            m.get(&k).cloned(),
                            "snapshot get"
                        );
                    }
                    let got: Vec<_> = db
                        .scan_at(Bound::Unbounded, Bound::Unbounded, &s)
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    let want: Vec<_> = m.clone().into_iter().collect();
                    assert!(got == want, "snapshot scan differs");
                    check_scan_rev(&db, Some(&s), &m, b"", b"\xff");
                    let mut cursor = db
                        .cursor(
                            Bound::Unbounded,
                            Bound::Unbounded,
                            Some(&s),
                            &ReadOptions::default(),
                        )
                        .unwrap();
                    walk_cursor(&mut cursor, &m, (b"", b"\xff"), &mut rng);
                }
            }
            89..=91 => db.flush().unwrap(),
            92..=93 => {
                let j = rng.random_range(i..=400);
                db.compact_range(Some(&key(i)), Some(&key(j))).unwrap();
            }
            94..=95 => {
                db.wait_idle().unwrap();
                assert_eq!(db.version().check_invariants(), Ok(()));
            }
            _ => {
                snaps.clear();
                let s = db.stats();
                flushes += s.flushes;
                compactions += s.compactions;
                sums.add(&s);
                db.close().unwrap();
                openings += 1;
                db = DB::open(dir.path(), options(openings)).unwrap();
            }
        }
    }
    db.wait_idle().unwrap();
    check_scan(&db, &model, b"", b"\xff");
    check_scan_rev(&db, None, &model, b"", b"\xff");
    assert_eq!(db.version().check_invariants(), Ok(()));
    let live: u64 = model.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    assert_eq!(db.measure_live_bytes().unwrap(), live);
    let s = db.stats();
    assert!(s.write_amplification >= 1.0, "{}", s.write_amplification);
    sums.add(&s);
    if gc.uses_index_maps() {
        assert!(sums.gc_jobs > 0, "no GC job ran");
        assert!(
            sums.lazy_rewrites > 0,
            "no pointer was rewritten through a map"
        );
        let ttl = options(0).vlog.lifetime.trigger == GcTrigger::Ttl;
        if let Some(mode) = gc.lifetime_mode() {
            // Compaction links feature records for their readers only: the classifier
            // (TTL trigger) and the history predictor where the write path does not place
            // values from its write history (the value log as the WAL).
            let vwal_off = (0..=openings).any(|o| !options(o).wal.value_log_wal);
            let read = ttl || (mode == LifetimeMode::Learned && vwal_off);
            assert_eq!(sums.links > 0, read, "{} records linked", sums.links);
            assert!(sums.gc_records > 0);
        }
        let classes = |v: &[u64]| v.iter().filter(|&&n| n > 0).count();
        match gc.lifetime_mode() {
            // Training needs more samples than one session between reopenings collects;
            // tests/lifetime.rs checks it.
            Some(LifetimeMode::Learned) if ttl => {}
            Some(LifetimeMode::Oracle | LifetimeMode::RateOracle) if ttl => {
                assert!(sums.placed_short > 0)
            }
            Some(LifetimeMode::NoModel) if ttl => assert_eq!(sums.placed_short, 0),
            // Placement by predicted death: the key history spreads values over several
            // classes at flush and at GC; the test's oracle says every key dies at once
            // (class 0, within one flush); without prediction every value is in the unknown class.
            Some(LifetimeMode::Learned) => {
                assert!(classes(&sums.born) >= 2, "born {:?}", sums.born);
                assert!(sums.copied.iter().sum::<u64>() > 0, "nothing copied");
            }
            Some(LifetimeMode::Oracle | LifetimeMode::RateOracle) => {
                // (Class 1 when a flush follows the previous one within a write or two.)
                assert!(
                    sums.born[2..].iter().all(|&n| n == 0),
                    "born {:?}",
                    sums.born
                );
                assert!(
                    sums.born[0] > 0 && sums.copied[0] > 0,
                    "{:?} {:?}",
                    sums.born,
                    sums.copied
                );
            }
            Some(LifetimeMode::NoModel) => {
                assert_eq!(classes(&sums.born), 1, "born {:?}", sums.born);
                assert_eq!(sums.born[0], 0);
            }
            None => {}
        }
    }
    flushes += s.flushes;
    compactions += s.compactions;
    assert!(
        flushes > 10 && compactions > 5,
        "flushes {flushes} compactions {compactions}"
    );
    drop(snaps);
    db.close().unwrap();
    // Every file on disk is accounted for: nothing leaked, nothing missing.
    let db = DB::open(dir.path(), options(openings + 1)).unwrap();
    check_scan(&db, &model, b"", b"\xff");
    max_runs
}

/// A reverse scan of `[lo, hi)` (as of `snap`) gives the model's range, descending.
fn check_scan_rev(
    db: &DB,
    snap: Option<&Snapshot>,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    lo: &[u8],
    hi: &[u8],
) {
    let got: Vec<_> = db
        .scan_dir(
            Bound::Included(lo),
            Bound::Excluded(hi),
            snap,
            &ReadOptions::default(),
            Direction::Reverse,
        )
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let want: Vec<_> = model
        .range::<[u8], _>((Bound::Included(lo), Bound::Excluded(hi)))
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(
        got.len(),
        want.len(),
        "reverse scan length [{lo:?}, {hi:?})"
    );
    assert!(got == want, "reverse scan contents differ");
}

/// A prefix scan, both ways, gives the model's keys that start with `prefix`.
fn check_prefix(db: &DB, model: &BTreeMap<Vec<u8>, Vec<u8>>, prefix: &[u8]) {
    let want: Vec<_> = model
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for dir in [Direction::Forward, Direction::Reverse] {
        let mut got: Vec<_> = db
            .scan_prefix(prefix, None, dir)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        if dir == Direction::Reverse {
            got.reverse();
        }
        assert!(
            got == want,
            "prefix {prefix:?} {dir:?}: {} of {}",
            got.len(),
            want.len()
        );
    }
}

/// Random moves of `cursor` (over `[lo, hi)`): seeks to keys present and absent, inside
/// and outside the bounds, steps both ways and turns, each checked against `model`.
fn walk_cursor(
    cursor: &mut Cursor,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    (lo, hi): (&[u8], &[u8]),
    rng: &mut StdRng,
) {
    let range = |m: &BTreeMap<Vec<u8>, Vec<u8>>| -> Vec<(Vec<u8>, Vec<u8>)> {
        m.range::<[u8], _>((Bound::Included(lo), Bound::Excluded(hi)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let want = range(model);
    let mut at: Option<usize> = None;
    for step in 0..40 {
        let what = rng.random_range(0..10);
        // A target between keys half the time (a suffix sorts after the key itself).
        let mut target = key(rng.random_range(0..401));
        if rng.random_bool(0.5) {
            target.push(b'~');
        }
        match what {
            0 => {
                cursor.seek_to_first().unwrap();
                at = (!want.is_empty()).then_some(0);
            }
            1 => {
                cursor.seek_to_last().unwrap();
                at = want.len().checked_sub(1);
            }
            2 | 3 => {
                cursor.seek(&target).unwrap();
                let i = want.partition_point(|(k, _)| *k < target);
                at = (i < want.len()).then_some(i);
            }
            4 | 5 => {
                cursor.seek_for_prev(&target).unwrap();
                at = want.partition_point(|(k, _)| *k <= target).checked_sub(1);
            }
            6..=7 => {
                let Some(i) = at else { continue };
                cursor.next().unwrap();
                at = (i + 1 < want.len()).then_some(i + 1);
            }
            _ => {
                let Some(i) = at else { continue };
                cursor.prev().unwrap();
                at = i.checked_sub(1);
            }
        }
        let got = cursor
            .key()
            .map(|k| (k.to_vec(), cursor.value().unwrap().to_vec()));
        let expect = at.map(|i| want[i].clone());
        assert!(
            got == expect,
            "cursor move {step} ({what}, target {:?}): at {:?}, want {:?}",
            String::from_utf8_lossy(&target),
            got.map(|(k, _)| String::from_utf8_lossy(&k).to_string()),
            expect.map(|(k, _)| String::from_utf8_lossy(&k).to_string()),
        );
    }
}

#[test]
fn model_inline() {
    run_model(GcPolicyConfig::Inline, 1, 3000);
}

#[test]
fn model_blobdb() {
    run_model(GcPolicyConfig::blobdb(), 2, 3000);
}

#[test]
fn model_titan() {
    run_model(GcPolicyConfig::titan(), 3, 3000);
}

#[test]
fn model_blobdb_aggressive_gc() {
    run_model(
        GcPolicyConfig::BlobDb {
            age_cutoff: 1.0,
            force_threshold: 0.0,
        },
        4,
        2000,
    );
}

#[test]
fn model_titan_aggressive_gc() {
    run_model(
        GcPolicyConfig::Titan {
            garbage_ratio: 0.01,
        },
        5,
        2000,
    );
}

#[test]
fn model_blobdb_static_level_targets() {
    run_model_shaped(GcPolicyConfig::blobdb(), 6, 2000, false);
}

#[test]
fn model_lifetime() {
    run_model(
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::Learned,
        },
        7,
        3000,
    );
}

#[test]
fn model_lifetime_nomodel() {
    run_model(
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::NoModel,
        },
        8,
        2000,
    );
}

#[test]
fn model_lifetime_oracle() {
    run_model(
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::Oracle,
        },
        9,
        2000,
    );
}

#[test]
fn model_lifetime_aggressive_space_amp() {
    run_model_triggered(
        LifetimeMode::Learned,
        GcTrigger::SpaceAmp { target: 1.05 },
        21,
        2000,
    );
}

/// Several GC threads: jobs run side by side on distinct files, compactions drop pointers
/// into files either collects, and every value must survive (index maps and write-back).
fn run_model_gc_threads(gc: GcPolicyConfig, target: f64, seed: u64, steps: usize) {
    run_model_with(&gc, seed, steps, &|_| {
        let o = small_options(gc.clone(), true);
        Options {
            background_gc: 3,
            vlog: ValueLogOptions {
                lifetime: LifetimeOptions {
                    trigger: GcTrigger::SpaceAmp { target },
                    ..o.vlog.lifetime.clone()
                },
                ..o.vlog
            },
            ..o
        }
    });
}

#[test]
fn model_lifetime_three_gc_threads() {
    let gc = GcPolicyConfig::Lifetime {
        mode: LifetimeMode::Learned,
    };
    run_model_gc_threads(gc, 1.05, 23, 2000);
}

#[test]
fn model_titan_three_gc_threads() {
    run_model_gc_threads(
        GcPolicyConfig::Titan {
            garbage_ratio: 0.05,
        },
        1.5,
        24,
        2000,
    );
}

#[test]
fn model_oracle_aggressive_space_amp() {
    run_model_triggered(
        LifetimeMode::Oracle,
        GcTrigger::SpaceAmp { target: 1.05 },
        22,
        2000,
    );
}

#[test]
fn model_rate_oracle() {
    run_model(
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::RateOracle,
        },
        25,
        2000,
    );
}

#[test]
fn model_dumpkv_ttl() {
    run_model_triggered(LifetimeMode::Learned, GcTrigger::Ttl, 23, 2000);
}

#[test]
fn model_dumpkv_oracle_ttl() {
    run_model_triggered(LifetimeMode::Oracle, GcTrigger::Ttl, 24, 2000);
}

#[test]
fn model_terark() {
    run_model(
        GcPolicyConfig::Terark {
            garbage_ratio: 0.05,
        },
        10,
        3000,
    );
}

/// Small slots so that the learned policy trains and prefetches within the run.
fn tiny_learned() -> CacheWarmingConfig {
    CacheWarmingConfig::Learned(LearnedParams {
        slot_reads: 10,
        slot_reads_per_range: 0.0,
        sample_every: 1,
        min_train_slots: 8,
        history_slots: 12,
        retrain_every_slots: 8,
        min_ranges: 8,
        ..LearnedParams::default()
    })
}

#[test]
fn model_warming_none() {
    run_model_warmed(
        GcPolicyConfig::blobdb(),
        11,
        3000,
        true,
        CacheWarmingConfig::None,
    );
}

#[test]
fn model_warming_incremental() {
    run_model_warmed(
        GcPolicyConfig::blobdb(),
        12,
        2000,
        true,
        CacheWarmingConfig::IncrementalWarmup,
    );
}

#[test]
fn model_warming_learned() {
    run_model_warmed(GcPolicyConfig::Inline, 13, 2000, true, tiny_learned());
}

#[test]
fn model_warming_learned_titan() {
    run_model_warmed(GcPolicyConfig::titan(), 14, 2000, true, tiny_learned());
}

#[test]
fn model_warming_learned_lifetime() {
    run_model_warmed(
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::Learned,
        },
        15,
        2000,
        true,
        tiny_learned(),
    );
}

#[test]
fn model_tiered_inline() {
    run_model_tiered(GcPolicyConfig::Inline, 7, 3000, 3.0, false);
}

#[test]
fn model_tiered_blobdb() {
    run_model_tiered(GcPolicyConfig::blobdb(), 8, 3000, 3.0, false);
}

#[test]
fn model_tiered_titan() {
    run_model_tiered(GcPolicyConfig::titan(), 9, 3000, 4.0, false);
}

#[test]
fn model_tiered_lifetime() {
    run_model_tiered(
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::Learned,
        },
        16,
        2000,
        3.0,
        false,
    );
}

#[test]
fn model_tiered_blobdb_aggressive_gc() {
    run_model_tiered(
        GcPolicyConfig::BlobDb {
            age_cutoff: 1.0,
            force_threshold: 0.0,
        },
        12,
        2000,
        3.0,
        false,
    );
}

/// The default style: the engine tiers or levels the tree from its measured share, and
/// may switch at any pick.
#[test]
fn model_auto_style_lifetime() {
    let gc = GcPolicyConfig::Lifetime {
        mode: LifetimeMode::Learned,
    };
    run_model_with(&gc, 17, 3000, &|_| {
        let base = small_options(gc.clone(), true);
        Options {
            tree: TreeOptions {
                compaction_style: CompactionStyle::Auto,
                ..base.tree
            },
            ..base
        }
    });
}

/// Two compaction threads: a deep merge and the shallow merges writers wait for run at
/// once, and must never reorder versions of a key (leveled, tiered, and the default).
#[test]
fn model_two_compaction_threads() {
    let gc = GcPolicyConfig::Lifetime {
        mode: LifetimeMode::Learned,
    };
    for (seed, style) in [
        (18, CompactionStyle::Leveled),
        (19, CompactionStyle::Tiered),
        (20, CompactionStyle::Auto),
    ] {
        run_model_with(&gc, seed, 3000, &|_| {
            let base = small_options(gc.clone(), true);
            Options {
                background_compactions: 2,
                tree: TreeOptions {
                    compaction_style: style,
                    ..base.tree
                },
                ..base
            }
        });
    }
    run_model_with(&GcPolicyConfig::blobdb(), 21, 3000, &|_| {
        let base = small_options(GcPolicyConfig::blobdb(), true);
        Options {
            background_compactions: 2,
            tree: TreeOptions {
                compaction_style: CompactionStyle::Tiered,
                growth_factor: 2.0,
                ..base.tree
            },
            ..base
        }
    });
}

#[test]
fn model_switching_between_tiered_and_leveled() {
    run_model_tiered(GcPolicyConfig::blobdb(), 11, 3000, 3.0, true);
}

#[test]
fn growth_factor_auto_shapes_the_tree_from_measured_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let opts = {
        let base = small_options(GcPolicyConfig::Inline, true);
        Options {
            tree: TreeOptions {
                auto_shape: Some(halflife_engine::AutoShapeConfig::new(2 << 20)),
                ..base.tree
            },
            ..base
        }
    };
    let db = DB::open(dir.path(), opts).unwrap();
    let first = db.stats().shape.expect("a choice is made at open");
    assert_eq!(first.compactions, 0);
    let mut rng = StdRng::seed_from_u64(13);
    for i in 0..3000u32 {
        db.put(&key(i % 1000), &value(&mut rng, i, i)).unwrap();
    }
    db.wait_idle().unwrap();
    let s = db.stats();
    let shape = s.shape.unwrap();
    assert!(s.compactions > 0);
    // Every executed compaction fed its merge amplification into the choice.
    assert!(
        shape.compactions >= s.compactions,
        "{shape:?} vs {}",
        s.compactions
    );
    assert!((2.0..=64.0).contains(&shape.growth_factor));
    assert!(
        shape.explanation.contains("growth factor"),
        "{}",
        shape.explanation
    );
}

/// The value log as the WAL, switched off at every third opening (a database written with
/// it is read and written without it, and back).
fn run_model_value_log_wal(gc: GcPolicyConfig, seed: u64, steps: usize) {
    run_model_with(&gc, seed, steps, &|opening| {
        let base = small_options(gc.clone(), true);
        Options {
            wal: WalOptions {
                value_log_wal: opening % 3 != 2,
                ..base.wal
            },
            ..base
        }
    });
}

#[test]
fn model_titan_value_log_wal() {
    run_model_value_log_wal(GcPolicyConfig::titan(), 31, 3000);
}

#[test]
fn model_lifetime_value_log_wal() {
    run_model_value_log_wal(
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::Learned,
        },
        32,
        3000,
    );
}

#[test]
fn model_terark_value_log_wal() {
    run_model_value_log_wal(
        GcPolicyConfig::Terark {
            garbage_ratio: 0.05,
        },
        33,
        3000,
    );
}
