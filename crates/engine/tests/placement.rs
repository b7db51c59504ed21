//! Placement by predicted death and GC under a space-amplification target, end to end:
//! values of keys with very different write rates are placed in different value files at
//! flush and at GC, knowing the future makes GC copy less than knowing nothing, the value
//! files stay near the target, and every value survives GC and a reopen.

use halflife_engine::{
    CacheOptions, GcPolicyConfig, GcTrigger, LifetimeMode, LifetimeOptions, LifetimeOracle,
    Options, TreeOptions, ValueLogOptions, WalOptions, DB,
};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Keys 0..20 are hot (written every ~40 writes), 20..2000 cold (every few thousand).
fn ops() -> Vec<u32> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut v: Vec<u32> = (0..2000).collect();
    for _ in 0..40_000 {
        let r = next();
        v.push(if r % 2 == 0 {
            (r >> 8) as u32 % 20
        } else {
            20 + (r >> 8) as u32 % 1980
        });
    }
    v
}

fn key(k: u32) -> Vec<u8> {
    format!("key{k:05}").into_bytes()
}

fn value(k: u32, n: usize) -> Vec<u8> {
    let mut v = format!("{k}/{n}/").into_bytes();
    v.resize(400, b'v');
    v
}

/// The future of `ops()`: write `n` has sequence number `n + 1`.
struct Future(HashMap<Vec<u8>, Vec<u64>>);

impl Future {
    fn of(ops: &[u32]) -> Future {
        let mut m: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
        for (n, &k) in ops.iter().enumerate() {
            m.entry(key(k)).or_default().push(n as u64 + 1);
        }
        Future(m)
    }
}

impl LifetimeOracle for Future {
    fn next_write(&self, key: &[u8], after: u64) -> Option<u64> {
        let w = self.0.get(key)?;
        w.get(w.partition_point(|&s| s <= after)).copied()
    }

    fn mean_interval(&self, key: &[u8]) -> Option<u64> {
        let w = self.0.get(key)?;
        (w.len() > 1).then(|| (w[w.len() - 1] - w[0]) / (w.len() as u64 - 1))
    }
}

fn options(mode: LifetimeMode, target: f64, future: &Arc<Future>) -> Options {
    Options {
        tree: TreeOptions {
            memtable_size: 128 << 10,
            level1_max_bytes: 512 << 10,
            target_file_size: 64 << 10,
            l0_compaction_trigger: 2,
            num_levels: 4,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            gc: GcPolicyConfig::Lifetime { mode },
            lifetime: LifetimeOptions {
                trigger: GcTrigger::SpaceAmp { target },
                ..LifetimeOptions::default()
            },
            lifetime_oracle: Some(future.clone() as Arc<dyn LifetimeOracle>),
            ..Default::default()
        },
        ..Options::default()
    }
}

struct Outcome {
    gc_bytes: u64,
    born_classes: usize,
    copied: u64,
    value_space_amp: f64,
}

fn run(mode: LifetimeMode, target: f64) -> Outcome {
    let ops = ops();
    let future = Arc::new(Future::of(&ops));
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), options(mode, target, &future)).unwrap();
    let mut latest = HashMap::new();
    for (n, &k) in ops.iter().enumerate() {
        db.put(&key(k), &value(k, n)).unwrap();
        latest.insert(k, n);
        if n % 5000 == 4999 {
            db.wait_idle().unwrap();
        }
    }
    db.wait_idle().unwrap();
    let s = db.stats();
    let l = s.lifetime.clone().unwrap();
    let v = db.version();
    let (total, live) = v.blobs.values().fold((0, 0), |(t, l), b| {
        (t + b.record_bytes(), l + b.live_bytes())
    });
    drop(v);
    db.close().unwrap();
    let db = DB::open(dir.path(), options(mode, target, &future)).unwrap();
    for (&k, &n) in &latest {
        assert_eq!(db.get(&key(k)).unwrap(), Some(value(k, n)), "key {k}");
    }
    Outcome {
        gc_bytes: s.gc_relocated_bytes,
        born_classes: l.born_by_class.iter().filter(|&&n| n > 0).count(),
        copied: l.copied_by_class.iter().sum(),
        value_space_amp: total as f64 / live as f64,
    }
}

#[test]
fn knowing_deaths_copies_less_than_knowing_nothing() {
    let none = run(LifetimeMode::NoModel, 1.3);
    let oracle = run(LifetimeMode::Oracle, 1.3);
    let history = run(LifetimeMode::Learned, 1.3);
    // GC ran, and left the value files near the target (garbage is counted when
    // compaction drops a pointer, so some stays uncounted above it).
    for o in [&none, &oracle, &history] {
        assert!(
            o.value_space_amp < 1.6,
            "value files at {}",
            o.value_space_amp
        );
    }
    assert!(
        none.copied > 0 && none.gc_bytes > 0,
        "no GC without placement"
    );
    assert_eq!(none.born_classes, 1);
    // Placement spreads values over classes, at flush already.
    assert!(oracle.born_classes >= 3, "{}", oracle.born_classes);
    assert!(history.born_classes >= 3, "{}", history.born_classes);
    // Knowing each value's death, values that die together are collected together.
    assert!(
        oracle.gc_bytes * 2 < none.gc_bytes,
        "oracle copied {} bytes, no placement {}",
        oracle.gc_bytes,
        none.gc_bytes
    );
}

/// Flush finds the garbage of overwritten keys before any compaction counts it, and GC
/// collects on that knowledge alone.
#[test]
fn garbage_found_at_flush_drives_gc_before_compaction_counts_it() {
    let future = Arc::new(Future::of(&[]));
    let dir = tempfile::tempdir().unwrap();
    let o = {
        let base = options(LifetimeMode::Learned, 1.25, &future);
        Options {
            tree: TreeOptions {
                // No compaction: L0 takes every flush (a tiered tree would merge L0 at its run
                // trigger).
                l0_compaction_trigger: 1000,
                l0_stop_writes_trigger: 2000,
                compaction_style: halflife_engine::CompactionStyle::Leveled,
                ..base.tree
            },
            ..base
        }
    };
    let db = DB::open(dir.path(), o).unwrap();
    for round in 0..2 {
        for k in 0..300u32 {
            db.put(&key(k), &value(k, round)).unwrap();
        }
        db.flush().unwrap();
    }
    let s = db.stats();
    assert_eq!(s.compactions, 0);
    let counted: u64 = db.version().blobs.values().map(|b| b.garbage_bytes()).sum();
    assert_eq!(counted, 0, "compaction counted garbage");
    db.wait_idle().unwrap();
    // Round 0's records are all known dead: their files are gone, by a GC job or released
    // whole, and still no compaction counted anything.
    assert_eq!(db.stats().compactions, 0);
    for k in 0..300u32 {
        assert_eq!(db.get(&key(k)).unwrap(), Some(value(k, 1)));
    }
    // What GC collected is forgotten; the value files hold about the live data.
    let v = db.version();
    let total: u64 = v.blobs.values().map(|b| b.record_bytes()).sum();
    assert!(total < 300 * 450 * 5 / 4, "value files {total}");
}

/// With the value log as the WAL (the default), the learned policy places a new value by
/// its key's write history even when the key's previous write is long flushed: keys
/// written at steady periods of about six memtables are placed by their period, not as
/// keys never seen, and apart from keys written every few hundred writes.
#[test]
fn write_history_places_keys_whose_previous_write_is_flushed() {
    // Even writes: 100 hot keys in turn (period 200); odd writes: 1000 cold keys in turn
    // (period 2000, about six memtables of 128 KiB with these values).
    let ops: Vec<u32> = (0..24_000u32)
        .map(|n| {
            if n % 2 == 0 {
                (n / 2) % 100
            } else {
                100 + (n / 2) % 1000
            }
        })
        .collect();
    let future = Arc::new(Future::of(&ops));
    let dir = tempfile::tempdir().unwrap();
    let o = options(LifetimeMode::Learned, 1.5, &future);
    assert!(o.logs_values());
    let db = DB::open(dir.path(), o).unwrap();
    for (n, &k) in ops.iter().enumerate() {
        db.put(&key(k), &value(k, n)).unwrap();
    }
    db.wait_idle().unwrap();
    let born = db.stats().lifetime.unwrap().born_by_class;
    let unknown = *born.last().unwrap();
    // Only first writes are unpredicted (1,100 keys).
    assert!(unknown <= 1_100, "{unknown} values unpredicted: {born:?}");
    // Hot and cold values are born into different classes, each holding most of its kind.
    let big: Vec<usize> = (0..born.len() - 1).filter(|&c| born[c] > 8_000).collect();
    assert_eq!(big.len(), 2, "classes {born:?}");
    for (n, &k) in ops.iter().enumerate().rev().take(2_000) {
        if ops[n + 1..].contains(&k) {
            continue;
        }
        assert_eq!(db.get(&key(k)).unwrap(), Some(value(k, n)));
    }
}

/// The garbage a flush makes is found after the flush is installed (by the job in
/// `db/superseded.rs`), and never a record an open snapshot still reads.
#[test]
fn garbage_found_after_flush_spares_what_a_snapshot_reads() {
    let future = Arc::new(Future::of(&[]));
    let dir = tempfile::tempdir().unwrap();
    let o = {
        let base = options(LifetimeMode::Learned, 5.0, &future);
        Options {
            tree: TreeOptions {
                l0_compaction_trigger: 1000,
                l0_slowdown_writes_trigger: 1000,
                l0_stop_writes_trigger: 2000,
                compaction_style: halflife_engine::CompactionStyle::Leveled,
                ..base.tree
            },
            // Far above three versions of every key: GC leaves the garbage where it is.
            ..base
        }
    };
    let db = DB::open(dir.path(), o).unwrap();
    let round = |r: usize| {
        for k in 0..300u32 {
            db.put(&key(k), &value(k, r)).unwrap();
        }
        db.flush().unwrap();
        db.wait_idle().unwrap();
    };
    let early = |db: &DB| db.stats().lifetime.unwrap().early_garbage_records;
    let files = |db: &DB| {
        db.version()
            .blobs
            .keys()
            .copied()
            .collect::<BTreeSet<u64>>()
    };
    round(0);
    let round0 = files(&db);
    let snap = db.snapshot();
    round(1);
    let round1: BTreeSet<u64> = files(&db).difference(&round0).copied().collect();
    // Round 1 hides round 0 from new readers, but the snapshot still reads it.
    assert_eq!(early(&db), 0);
    for k in 0..300u32 {
        assert_eq!(db.get_at(&key(k), &snap).unwrap(), Some(value(k, 0)));
    }
    drop(snap);
    round(2);
    // Round 2 hides round 1 from every reader: each of those records is known dead, and
    // their files, dead whole, are released without a GC job. Round 0's records were
    // still read when round 1 was searched: their files stay.
    let now = files(&db);
    assert!(
        !round1.is_empty() && round1.iter().all(|n| !now.contains(n)),
        "{round1:?} {now:?}"
    );
    assert!(round0.is_subset(&now), "{round0:?} {now:?}");
    let l = db.stats().lifetime.unwrap();
    // Every flushed table was searched (each round takes two memtables).
    assert_eq!(
        l.superseded_tables_searched,
        db.version().levels[0].len() as u64
    );
    assert_eq!(l.superseded_tables_missed, 0);
    // Round 0's keys were looked up in the tree; rounds 1 and 2 found their previous writes
    // in the finder's table of recent pointers, without a lookup (and with the same
    // snapshot rule: round 1 spared round 0's records).
    assert_eq!(l.superseded_looked_up, 300);
    assert_eq!(l.superseded_from_recent, 600);
    assert_eq!(db.stats().gc_jobs, 0);
    for k in 0..300u32 {
        assert_eq!(db.get(&key(k)).unwrap(), Some(value(k, 2)));
    }
}

/// The finder's table of recent pointers grows with the keys it sees: over more keys than
/// the fixed table the same cache gave before (two generations of 1792 keys at a 1 MiB
/// cache), every flushed key's previous write is still answered from memory, so the
/// finder needs no tree lookup past the first round and gives up on no table. A fixed
/// table of the old size forgets most of each round.
#[test]
fn recent_pointers_grow_with_the_keys_the_finder_sees() {
    const KEYS: u32 = 5000;
    let future = Arc::new(Future::of(&[]));
    let run = |recent_pointer_bytes: usize| {
        let dir = tempfile::tempdir().unwrap();
        let base = options(LifetimeMode::Learned, 5.0, &future);
        let o = Options {
            tree: TreeOptions {
                memtable_size: 1 << 20,
                l0_compaction_trigger: 1000,
                l0_slowdown_writes_trigger: 1000,
                l0_stop_writes_trigger: 2000,
                compaction_style: halflife_engine::CompactionStyle::Leveled,
                ..base.tree
            },
            cache: CacheOptions {
                block_cache_capacity: 1 << 20,
                ..base.cache.clone()
            },
            vlog: ValueLogOptions {
                lifetime: LifetimeOptions {
                    recent_pointer_bytes,
                    ..base.vlog.lifetime.clone()
                },
                ..base.vlog.clone()
            },
            ..base
        };
        let db = DB::open(dir.path(), o).unwrap();
        for r in 0..3 {
            for k in 0..KEYS {
                db.put(&key(k), &value(k, r)).unwrap();
            }
            db.flush().unwrap();
            db.wait_idle().unwrap();
        }
        for k in (0..KEYS).step_by(97) {
            assert_eq!(db.get(&key(k)).unwrap(), Some(value(k, 2)));
        }
        db.stats().lifetime.unwrap()
    };
    let grown = run(0);
    assert_eq!(grown.superseded_tables_missed, 0);
    assert!(grown.superseded_tables_searched >= 3);
    assert_eq!(grown.superseded_looked_up, KEYS as u64);
    assert_eq!(grown.superseded_from_recent, 2 * KEYS as u64);
    assert_eq!(grown.recent_pointer_keys, KEYS as u64);
    assert!(grown.recent_pointer_bytes <= 512 << 10);
    // The old default at this cache: a fifth of it, fixed.
    let fixed = run((1 << 20) / 5);
    assert!(
        fixed.superseded_looked_up > 2 * KEYS as u64,
        "{} looked up",
        fixed.superseded_looked_up
    );
}

/// Where every flushed key's previous write is found, a value file written since the
/// database opened has every dead record known by position (found after a flush, or
/// dropped by the flush of a memtable that overwrote it), so GC keeps its other records
/// without a tree lookup, and copies no dead one. After a reopen that knowledge is gone:
/// GC looks the older files' records up again. With the value log as the WAL the finder
/// finds the previous writes after each flush.
#[test]
fn gc_keeps_records_of_covered_files_without_lookups() {
    covered_files_need_no_lookups(true);
}

/// With a separate WAL the flush itself looks each key's previous write up (to place the
/// value) and records the hidden ones: its files are covered the same way, and GC looks
/// nothing up (it looked every copied record up before, most of a GC job's time at the
/// `lifetime` preset, docs/lifetime.md "Limits").
#[test]
fn gc_keeps_records_of_covered_files_without_lookups_with_a_separate_wal() {
    covered_files_need_no_lookups(false);
}

fn covered_files_need_no_lookups(value_log_wal: bool) {
    let future = Arc::new(Future::of(&[]));
    let dir = tempfile::tempdir().unwrap();
    let o = || {
        let base = options(LifetimeMode::Learned, 1.05, &future);
        Options {
            wal: WalOptions {
                value_log_wal,
                ..base.wal
            },
            tree: TreeOptions {
                l0_compaction_trigger: 1000,
                l0_slowdown_writes_trigger: 1000,
                l0_stop_writes_trigger: 2000,
                compaction_style: halflife_engine::CompactionStyle::Leveled,
                ..base.tree
            },
            // Low enough that every file of round 0 is collected.
            ..base
        }
    };
    let gc = |db: &DB| {
        let h = db.stats().lifetime.unwrap().gc_history;
        let sum = |f: fn(&halflife_engine::db::GcJobRecord) -> u64| h.iter().map(f).sum::<u64>();
        (h.len(), sum(|j| j.lookups), sum(|j| j.unlooked))
    };
    let db = DB::open(dir.path(), o()).unwrap();
    // Round 0 writes every key; round 1 every even key, the first 30 of them twice in one
    // memtable (its flush drops the first writes). Round 0's files are half dead, round
    // 1's a sixth, and every file is collected.
    for k in 0..300u32 {
        db.put(&key(k), &value(k, 0)).unwrap();
    }
    db.flush().unwrap();
    for k in (0..60u32).step_by(2) {
        db.put(&key(k), &value(k, 1)).unwrap();
    }
    for k in (0..300u32).step_by(2) {
        db.put(&key(k), &value(k, 2)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let expect = |k: u32| value(k, if k.is_multiple_of(2) { 2 } else { 0 });
    let (jobs, lookups, unlooked) = gc(&db);
    assert!(jobs > 0, "no GC job");
    assert_eq!(lookups, 0, "records looked up");
    let copied: u64 = db.stats().lifetime.unwrap().copied_by_class.iter().sum();
    assert!(copied > 0 && unlooked == copied, "{unlooked} of {copied}");
    // No dead record was copied: a copy would be garbage nobody knows of, left on disk
    // above the target (300 live records, 480 written).
    let on_disk: u64 = db.version().blobs.values().map(|b| b.entries).sum();
    assert!(on_disk <= 315, "{on_disk} records on disk");
    assert_eq!(db.stats().compactions, 0);
    for k in 0..300u32 {
        assert_eq!(db.get(&key(k)).unwrap(), Some(expect(k)), "key {k}");
    }
    db.close().unwrap();

    let db = DB::open(dir.path(), o()).unwrap();
    for k in 0..300u32 {
        assert_eq!(
            db.get(&key(k)).unwrap(),
            Some(expect(k)),
            "key {k} after reopen"
        );
    }
    // Every third key again: the files written before the reopen, a third dead now, are
    // collected with lookups.
    for k in (0..300u32).step_by(3) {
        db.put(&key(k), &value(k, 3)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let (jobs, lookups, _) = gc(&db);
    assert!(jobs > 0 && lookups > 0, "{jobs} jobs, {lookups} lookups");
    for k in 0..300u32 {
        let v = if k % 3 == 0 { value(k, 3) } else { expect(k) };
        assert_eq!(db.get(&key(k)).unwrap(), Some(v), "key {k}");
    }
}
