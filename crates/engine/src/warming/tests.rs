use super::*;
use crate::internal_key::{make_internal_key, ValueKind};
use crate::sst::block::{Block, BlockBuilder};

fn block(keys: &[&str], value_len: usize) -> Arc<Block> {
    let mut b = BlockBuilder::new(16);
    for k in keys {
        b.add(
            &make_internal_key(k.as_bytes(), 1, ValueKind::Value),
            &vec![7u8; value_len],
        );
    }
    Arc::new(Block::new(b.finish()).unwrap())
}

/// Ranges [.., k10), [k10, k20), ... [k90, ..) cut by hand, and file 5's blocks mapped
/// as a job's start maps them: the block at offset 0 covers k12..k27, the one at 100
/// k70..k79.
fn tracked(cache: &Arc<BlockCache>) -> Warming {
    let w = Warming::with_policy(Box::new(NoWarming), cache.clone());
    let keys: Vec<Vec<u8>> = (0..100).map(|i| format!("k{i:02}").into_bytes()).collect();
    let r = Arc::new(KeyRanges::from_sorted_keys(&keys, 10, 2, 10).unwrap());
    assert_eq!(r.len(), 10);
    *w.tracking.cut.write() = Some(Arc::new(Cut::new(r, 100)));
    w.tracking.files.lock().insert(
        5,
        vec![
            (0, b"k12".to_vec(), b"k27".to_vec()),
            (100, b"k70".to_vec(), b"k79".to_vec()),
        ],
    );
    w
}

/// A compaction's prefetch plan over `inputs`, registered with `w` as `begin_job` would,
/// holding at most `hold` bytes.
fn compaction_job(
    w: &Warming,
    cache: &Arc<BlockCache>,
    inputs: &[u64],
    budget: Budget,
    filter: Arc<dyn BlockFilter>,
    hold: u64,
) -> JobWarming {
    let counters: Arc<JobCounters> = Arc::default();
    let d = Arc::new(Deferred {
        inputs: inputs.to_vec(),
        budget,
        filter: filter.clone(),
        counters: counters.clone(),
        hold: Mutex::new(Hold::new(hold)),
    });
    for f in inputs {
        w.tracking.deferred.lock().insert(*f, d.clone());
    }
    JobWarming {
        cache: cache.clone(),
        tracking: w.tracking.clone(),
        inputs: inputs.to_vec(),
        filter: Some(filter),
        counters,
        deferred: Some(d),
        budget: Arc::new(AtomicU64::new(u64::MAX)),
        remember_drops: false,
    }
}

#[test]
fn misses_after_an_invalidation_are_charged_once_within_the_window() {
    let cache = BlockCache::new(1 << 20);
    let w = tracked(&cache);
    cache.insert(5, 0, block(&["k12", "k15", "k25", "k27"], 10));
    cache.insert(6, 0, block(&["k75"], 10));
    w.record_read(b"k15", true); // before any invalidation: not counted
    assert_eq!(cache.erase_file(5), 1);
    let s = w.stats();
    assert_eq!((s.invalidation_events, s.invalidated_ranges), (1, 2));
    w.record_read(b"k11", true); // range 1, but outside the block's keys
    w.record_read(b"k20", true); // inside its interval, not one of its keys
    w.record_read(b"k15", false); // a hit: not a miss
    w.record_read(b"k35", true); // range 3: untouched
    assert_eq!(w.stats().invalidation_misses, 0);
    w.record_read(b"k25", true); // a key of the dropped block: charged
    w.record_read(b"k12", true); // the block was charged already
    assert_eq!(w.stats().invalidation_misses, 1);
    // A file no job mapped.
    assert_eq!(cache.erase_file(6), 1);
    assert_eq!(w.stats().unmapped_invalidated_blocks, 1);
}

#[test]
fn charges_expire_with_the_window() {
    let cache = BlockCache::new(1 << 20);
    let w = tracked(&cache);
    cache.insert(5, 0, block(&["k15"], 10));
    cache.insert(5, 100, block(&["k71", "k75"], 10));
    assert_eq!(cache.erase_file(5), 2);
    w.record_read(b"k71", true);
    for _ in 0..INVALIDATION_WINDOW_READS {
        w.record_read(b"k50", false);
    }
    w.record_read(b"k15", true); // past the window
    assert_eq!(w.stats().invalidation_misses, 1);
}

#[test]
fn sink_inserts_admitted_blocks_as_prefetched_within_capacity() {
    struct Only(&'static [u8]);
    impl BlockFilter for Only {
        fn admit(&self, keys: &BlockKeys) -> Option<f64> {
            keys.iter().any(|k| k == self.0).then_some(0.0)
        }
    }
    let one = block(&["a", "b"], 1000).size_in_bytes();
    // Room for four blocks in one shard.
    let cache = BlockCache::with_shards(4 * one, 1);
    let jw = JobWarming {
        cache: cache.clone(),
        tracking: tracked(&cache).tracking.clone(),
        inputs: Vec::new(),
        filter: Some(Arc::new(Only(b"m"))),
        counters: Arc::default(),
        deferred: None,
        budget: Arc::new(AtomicU64::new(u64::MAX)),
        remember_drops: false,
    };
    let mut sink = jw.sink(9);
    sink(0, &block(&["a", "b"], 1000));
    sink(4096, &block(&["l", "m"], 1000));
    assert!(cache.contains(9, 4096) && !cache.contains(9, 0));
    for i in 0..20u64 {
        sink(8192 + i * 4096, &block(&["m", "mm"], 1000));
        assert!(
            cache.usage() <= cache.capacity(),
            "over capacity at block {i}"
        );
    }
    let s = cache.stats();
    assert_eq!(s.prefetched, 21);
    assert_eq!(s.entries, 4);
    assert_eq!(s.prefetch_hits, 0);
    assert!(cache.get(9, 8192 + 19 * 4096).is_some());
    assert!(cache.get(9, 8192 + 19 * 4096).is_some());
    assert_eq!(cache.stats().prefetch_hits, 1, "counted once per block");
    assert_eq!(
        (
            jw.counters.considered.load(Relaxed),
            jw.counters.admitted.load(Relaxed)
        ),
        (22, 21)
    );
}

#[test]
fn config_parses_names_and_rejects_bad_ones() {
    for n in CacheWarmingConfig::NAMES {
        let c: CacheWarmingConfig = n.parse().unwrap();
        assert_eq!(c.name(), n);
        assert_eq!(c.to_string(), n);
    }
    assert!("leaper".parse::<CacheWarmingConfig>().is_ok());
    let e = "lru".parse::<CacheWarmingConfig>().unwrap_err().to_string();
    assert!(e.contains("cache_warming"), "{e}");
    let bad = CacheWarmingConfig::Learned(LearnedParams {
        threshold: 1.5,
        ..LearnedParams::default()
    });
    assert!(bad.validate().is_err());
    assert!(CacheWarmingConfig::learned().validate().is_ok());
}

#[test]
fn compaction_prefetches_wait_for_the_inputs_and_respect_the_budget() {
    let cache = BlockCache::new(1 << 20);
    let w = tracked(&cache);
    let one = block(&["x"], 100).size_in_bytes() as u64;
    let budget = Budget::CacheFraction(1.0);
    let jw = compaction_job(&w, &cache, &[5, 6], budget, Arc::new(All), 3 * one);
    let mut sink = jw.sink(9);
    for i in 0..5 {
        sink(i * 4096, &block(&["x"], 100));
    }
    assert!(cache.is_empty(), "held until the inputs go");
    assert_eq!(
        jw.counters.displaced.load(Relaxed),
        2,
        "budget of three blocks"
    );
    // The job's inputs had nothing cached; deleting one still releases the blocks.
    assert_eq!(cache.erase_file(6), 0);
    assert_eq!(cache.len(), 3);
    assert_eq!(cache.stats().prefetched, 3);
    assert_eq!(jw.counters.admitted.load(Relaxed), 3);
    for i in 0..3 {
        assert!(
            cache.contains(9, i * 4096),
            "equal priorities: the first kept"
        );
    }
    assert!(
        w.tracking.deferred.lock().is_empty(),
        "both inputs forgotten"
    );
    assert_eq!(
        w.stats().invalidation_events,
        0,
        "nothing cached was dropped"
    );
}

/// Over the budget a compaction keeps its blocks of highest priority, and inserts them
/// least valuable first (the most valuable are evicted last); a block the policy withdraws
/// at install stays out.
#[test]
fn the_hold_keeps_the_highest_priorities_and_asks_again_at_install() {
    /// Priority: the block's first key's number; at install, "k13" is withdrawn.
    struct ByNumber;
    impl BlockFilter for ByNumber {
        fn admit(&self, keys: &BlockKeys) -> Option<f64> {
            std::str::from_utf8(&keys.first()?[1..]).ok()?.parse().ok()
        }
        fn at_install(&self, held: &Candidate<'_>, _now: &Dropping) -> Option<f64> {
            (held.first != b"k13").then_some(held.priority)
        }
    }
    let one = block(&["k10"], 100).size_in_bytes() as u64;
    // Room for exactly three blocks in one shard.
    let cache = BlockCache::with_shards(3 * one as usize, 1);
    let w = tracked(&cache);
    let jw = compaction_job(
        &w,
        &cache,
        &[5],
        Budget::CacheFraction(1.0),
        Arc::new(ByNumber),
        3 * one,
    );
    let mut sink = jw.sink(9);
    for (i, k) in ["k11", "k15", "k12", "k13", "k14"].iter().enumerate() {
        sink(i as u64 * 4096, &block(&[k], 100));
    }
    let c = &jw.counters;
    assert_eq!(c.displaced.load(Relaxed), 2, "k11 and k12 displaced");
    cache.erase_file(5);
    assert_eq!(c.withdrawn.load(Relaxed), 1, "k13");
    assert_eq!(c.admitted.load(Relaxed), 2);
    assert!(cache.contains(9, 4096) && cache.contains(9, 4 * 4096));
    // k14 went in first: one more block evicts it, not k15.
    cache.insert(1, 0, block(&["k99"], 100));
    cache.insert(1, 1, block(&["k98"], 100));
    assert!(
        cache.contains(9, 4096),
        "k15, the highest, is the last evicted"
    );
    assert!(!cache.contains(9, 4 * 4096));
}

/// Admits every block, all of one priority.
struct All;
impl BlockFilter for All {
    fn admit(&self, _keys: &BlockKeys) -> Option<f64> {
        Some(0.0)
    }
}

/// Priority: the number in the block's first key.
struct ByNumber;
impl BlockFilter for ByNumber {
    fn admit(&self, keys: &BlockKeys) -> Option<f64> {
        std::str::from_utf8(&keys.first()?[1..]).ok()?.parse().ok()
    }
}

/// A compaction of files 5 and 6 (two blocks of file 5 and one of file 6 cached) that
/// wrote ten blocks, k10..k19, under `ReplaceDropped { factor }`.
fn three_cached_ten_written(factor: f64) -> (Arc<BlockCache>, Warming, JobWarming) {
    let cache = BlockCache::new(1 << 20);
    let w = tracked(&cache);
    w.tracking
        .files
        .lock()
        .insert(6, vec![(200, b"k0".to_vec(), b"k1".to_vec())]);
    cache.insert(5, 0, block(&["k01"], 100));
    cache.insert(5, 100, block(&["k02"], 100));
    cache.insert(6, 200, block(&["k03"], 100));
    let budget = Budget::ReplaceDropped {
        factor,
        flush_fraction: 0.5,
    };
    let jw = compaction_job(&w, &cache, &[5, 6], budget, Arc::new(ByNumber), 1 << 20);
    let mut sink = jw.sink(9);
    for i in 10..20u64 {
        sink(i * 4096, &block(&[&format!("k{i}")], 100));
    }
    (cache, w, jw)
}

/// Under `ReplaceDropped` a compaction puts into the cache at most `factor` times as many
/// blocks as the cache drops at its install (the first input's dropped blocks and the
/// other inputs' cached ones), the highest priorities.
#[test]
fn replace_dropped_budget_follows_the_blocks_dropped_at_install() {
    let (cache, _w, jw) = three_cached_ten_written(1.5);
    // File 5's blocks go first: the install.
    assert_eq!(cache.erase_file(5), 2);
    let c = &jw.counters;
    // ceil(1.5 x 3) = 5 of the 10, the highest: k15..k19.
    assert_eq!(c.admitted.load(Relaxed), 5);
    assert_eq!(c.displaced.load(Relaxed), 5);
    for i in 10..20u64 {
        assert_eq!(cache.contains(9, i * 4096), i >= 15, "k{i}");
    }
}

/// The engine installs a compaction's prefetches before it publishes the output: the
/// budget then counts the input blocks still cached (all of them are about to go), the
/// output's blocks are cached beside them, and deleting the inputs later installs nothing
/// again.
#[test]
fn install_before_publish_judges_the_cached_inputs_and_runs_once() {
    let (cache, w, jw) = three_cached_ten_written(1.0);
    jw.install();
    let c = &jw.counters;
    assert_eq!(c.admitted.load(Relaxed), 3, "one per cached input block");
    for i in 10..20u64 {
        assert_eq!(cache.contains(9, i * 4096), i >= 17, "k{i}");
    }
    assert!(
        cache.contains(5, 0) && cache.contains(6, 200),
        "inputs still cached"
    );
    assert!(w.tracking.deferred.lock().is_empty());
    assert_eq!(cache.erase_file(5), 2);
    assert_eq!(cache.erase_file(6), 1);
    jw.install();
    assert_eq!(c.admitted.load(Relaxed), 3, "installed once");
    assert_eq!(
        w.stats().invalidation_events,
        2,
        "the drops are still counted"
    );
}

/// A compaction whose prefetches were not installed before publication (an engine path
/// that does not call [`JobWarming::install`]) installs them when its first input goes,
/// and the drop is counted before the policy judges (reads made meanwhile are charged).
#[test]
fn a_job_not_installed_before_publication_installs_when_the_first_input_goes() {
    let cache = BlockCache::new(1 << 20);
    let w = tracked(&cache);
    cache.insert(5, 0, block(&["k12", "k15"], 10));
    let jw = compaction_job(
        &w,
        &cache,
        &[5],
        Budget::CacheFraction(1.0),
        Arc::new(All),
        1 << 20,
    );
    let mut sink = jw.sink(9);
    sink(0, &block(&["k12", "k15"], 10));
    assert!(!cache.contains(9, 0), "held while the job runs");
    assert_eq!(cache.erase_file(5), 1);
    assert!(cache.contains(9, 0), "installed at the drop");
    assert_eq!(w.stats().invalidation_events, 1);
}

/// A compaction's inputs count as dropped from the moment its output is published (reads
/// go to the output from then on), whatever the policy, also one that prefetches nothing:
/// a miss before the purge thread deletes the input is charged, and the deletion
/// registers nothing again.
#[test]
fn the_inputs_count_as_dropped_from_the_publication() {
    let cache = BlockCache::new(1 << 20);
    let w = tracked(&cache);
    cache.insert(5, 0, block(&["k12", "k15"], 10));
    let jw = JobWarming {
        cache: cache.clone(),
        tracking: w.tracking.clone(),
        inputs: vec![5],
        filter: None,
        counters: Arc::default(),
        deferred: None,
        budget: Arc::new(AtomicU64::new(0)),
        remember_drops: false,
    };
    w.record_read(b"k15", true);
    assert_eq!(w.stats().invalidation_misses, 0, "not published yet");
    jw.install();
    assert!(
        cache.contains(5, 0),
        "still cached: the file is not deleted yet"
    );
    w.record_read(b"k15", true);
    assert_eq!(
        w.stats().invalidation_misses,
        1,
        "a read of the output missed"
    );
    assert_eq!(cache.erase_file(5), 1);
    let s = w.stats();
    assert_eq!(s.invalidation_events, 1, "registered once");
    assert!(w.tracking.published.lock().is_empty());
}
