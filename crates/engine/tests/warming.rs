//! Cache warming through a real engine: compactions invalidate cached blocks and the
//! misses that follow are counted; warming policies prefetch output blocks; prefetching
//! never pushes the cache past its capacity.

use halflife_engine::{CacheWarmingConfig, DbStats, GcPolicyConfig, LearnedParams, Options, DB};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn options(warming: CacheWarmingConfig) -> Options {
    Options {
        memtable_size: 32 << 10,
        level1_max_bytes: 128 << 10,
        target_file_size: 32 << 10,
        l0_compaction_trigger: 2,
        growth_factor: 4.0,
        num_levels: 4,
        block_size: 1024,
        block_cache_capacity: 256 << 10,
        gc: GcPolicyConfig::Inline,
        cache_warming: warming,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

/// Loads 3000 keys, then reads a hot tenth of them (90% of reads, contiguous keys: about
/// 35 of 350 blocks) while updating, so that
/// compactions keep replacing the files the hot blocks live in. Checks the cache's budget
/// after every operation.
fn run(warming: CacheWarmingConfig) -> DbStats {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), options(warming)).unwrap();
    let value = vec![b'v'; 100];
    for i in 0..3000 {
        db.put(&key(i), &value).unwrap();
    }
    db.wait_idle().unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    for step in 0..20_000u32 {
        let i = if rng.random_bool(0.9) {
            rng.random_range(0..300)
        } else {
            rng.random_range(0..3000)
        };
        if rng.random_bool(0.15) {
            db.put(&key(i), &value).unwrap();
        } else {
            assert!(db.get(&key(i)).unwrap().is_some());
        }
        if step.is_multiple_of(64) {
            let c = db.stats().cache;
            assert!(
                c.usage <= c.capacity,
                "usage {} > capacity {}",
                c.usage,
                c.capacity
            );
        }
    }
    db.wait_idle().unwrap();
    let s = db.stats();
    assert!(s.cache.usage <= s.cache.capacity);
    assert!(s.compactions > 5, "compactions {}", s.compactions);
    s
}

#[test]
fn invalidations_and_warming_through_the_engine() {
    let none = run(CacheWarmingConfig::None);
    let w = &none.warming;
    assert_eq!(w.policy, "none");
    assert!(w.ranges >= 64, "ranges {}", w.ranges);
    assert!(none.cache.invalidated_blocks > 0);
    assert!(w.invalidation_events > 0 && w.invalidated_ranges > 0);
    assert!(w.invalidation_misses > 0, "{w:?}");
    assert_eq!(none.cache.prefetched, 0);

    let inc = run(CacheWarmingConfig::IncrementalWarmup);
    assert!(inc.warming.jobs_planned > 0);
    assert!(
        inc.cache.prefetched > 0 && inc.cache.prefetch_hits > 0,
        "{:?}",
        inc.cache
    );

    let learned = run(CacheWarmingConfig::Learned(LearnedParams {
        slot_reads: 500,
        slot_reads_per_range: 0.0,
        sample_every: 1,
        min_train_slots: 8,
        history_slots: 12,
        retrain_every_slots: 10,
        ..LearnedParams::default()
    }));
    let l = &learned.warming;
    assert!(l.trainings >= 1 && l.predictions > 0, "{l:?}");
    assert!(l.training_micros > 0 && l.model_trees > 0);
    assert!(learned.cache.prefetched > 0 && learned.cache.prefetch_hits > 0);
    assert!(
        l.blocks_admitted < l.blocks_considered,
        "cold ranges are left out: {l:?}"
    );
    eprintln!(
        "invalidation misses: none {} incremental {} learned {}; prefetched: incremental {} learned {}",
        none.warming.invalidation_misses,
        inc.warming.invalidation_misses,
        l.invalidation_misses,
        inc.cache.prefetched,
        learned.cache.prefetched
    );
}
