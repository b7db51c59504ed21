use super::*;
use crate::sst::block::{Block, BlockBuilder};
use crate::types::{make_internal_key, ValueKind};

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

/// Ranges [.., k10), [k10, k20), ... [k90, ..) cut by hand, and file 5's blocks mapped:
/// the block at offset 0 spans ranges 1..=2, the one at 100 range 7.
fn tracked(cache: &Arc<BlockCache>) -> Warming {
    let w = Warming::with_policy(Box::new(NoWarming), cache.clone());
    let keys: Vec<Vec<u8>> = (0..100).map(|i| format!("k{i:02}").into_bytes()).collect();
    let r = Arc::new(KeyRanges::from_sorted_keys(&keys, 10, 2, 10).unwrap());
    assert_eq!(r.len(), 10);
    let marks = (0..r.len()).map(|_| AtomicU64::new(0)).collect();
    let cut = Arc::new(Cut {
        ranges: r,
        marks,
        blocks: 100,
    });
    *w.tracking.cut.write() = Some(cut.clone());
    w.tracking
        .files
        .lock()
        .insert(5, (cut, vec![(0, 1, 2), (100, 7, 7)]));
    w
}

#[test]
fn misses_after_an_invalidation_are_counted_within_the_window_and_range() {
    let cache = BlockCache::new(1 << 20);
    let w = tracked(&cache);
    cache.insert(5, 0, block(&["k15"], 10));
    cache.insert(6, 0, block(&["k75"], 10));
    w.record_read(b"k15", true); // before any invalidation: not counted
    assert_eq!(cache.erase_file(5), 1);
    let s = w.stats();
    assert_eq!((s.invalidation_events, s.invalidated_ranges), (1, 2));
    w.record_read(b"k25", true); // range 2: invalidated, owed one miss
    w.record_read(b"k25", true); // the debt is paid: an ordinary miss
    w.record_read(b"k15", false); // a hit: not a miss
    w.record_read(b"k75", true); // range 7: block at 100 was not cached, so not marked
    w.record_read(b"k35", true); // range 3: untouched
    assert_eq!(w.stats().invalidation_misses, 1);
    for _ in 0..INVALIDATION_WINDOW_READS {
        w.record_read(b"k50", false);
    }
    w.record_read(b"k15", true); // range 1 still owed, but past the window
    assert_eq!(w.stats().invalidation_misses, 1);
    // A file no job mapped.
    assert_eq!(cache.erase_file(6), 1);
    assert_eq!(w.stats().unmapped_invalidated_blocks, 1);
}

#[test]
fn marks_pack_and_debts_accumulate_within_the_window() {
    assert_eq!(unpack(pack(123_456, 7)), (123_456, 7));
    assert_eq!(unpack(pack(1, 1 << 20)), (1, (1 << DEBT_BITS) - 1), "debt saturates");
    let cache = BlockCache::new(1 << 20);
    let w = tracked(&cache);
    w.tracking.files.lock().get_mut(&5).unwrap().1.push((200, 2, 2));
    cache.insert(5, 0, block(&["k15"], 10));
    cache.insert(5, 200, block(&["k25"], 10));
    assert_eq!(cache.erase_file(5), 2);
    // Range 2 lost two blocks: two misses are owed there.
    for _ in 0..3 {
        w.record_read(b"k22", true);
    }
    assert_eq!(w.stats().invalidation_misses, 2);
}

#[test]
fn sink_inserts_admitted_blocks_as_prefetched_within_capacity() {
    struct Only(&'static [u8]);
    impl BlockFilter for Only {
        fn admit(&self, first: &[u8], last: &[u8]) -> bool {
            first <= self.0 && self.0 <= last
        }
    }
    let one = block(&["a", "b"], 1000).size_in_bytes();
    // Room for four blocks in one shard.
    let cache = BlockCache::with_shards(4 * one, 1);
    let jw = JobWarming {
        cache: cache.clone(),
        filter: Arc::new(Only(b"m")),
        counters: Arc::default(),
    };
    let mut sink = jw.sink(9);
    sink(0, &block(&["a", "b"], 1000));
    sink(4096, &block(&["l", "n"], 1000));
    assert!(cache.contains(9, 4096) && !cache.contains(9, 0));
    for i in 0..20u64 {
        sink(8192 + i * 4096, &block(&["m", "mm"], 1000));
        assert!(cache.usage() <= cache.capacity(), "over capacity at block {i}");
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
