use super::*;
use crate::internal_key::{make_internal_key, ValueKind};
use crate::sst::block::BlockBuilder;
use rand::{Rng, SeedableRng};

/// A block whose charge is roughly `value_len` plus overhead.
fn block(value_len: usize) -> Arc<Block> {
    let mut b = BlockBuilder::new(16);
    b.add(
        &make_internal_key(b"k", 1, ValueKind::Value),
        &vec![7u8; value_len],
    );
    Arc::new(Block::new(b.finish()).unwrap())
}

#[test]
fn hit_miss_and_lru_order() {
    let one = block(100).size_in_bytes();
    // One shard with room for exactly three blocks.
    let cache = BlockCache::with_shards(3 * one, 1);
    for off in 0..3 {
        cache.insert(1, off, block(100));
    }
    assert_eq!(cache.len(), 3);
    // Touch block 0 so block 1 becomes the least recently used.
    assert!(cache.get(1, 0).is_some());
    cache.insert(1, 3, block(100));
    assert!(
        cache.get(1, 1).is_none(),
        "LRU block should have been evicted"
    );
    for off in [0, 2, 3] {
        assert!(
            cache.get(1, off).is_some(),
            "block {off} should still be cached"
        );
    }
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.inserts, s.evictions), (4, 1, 4, 1));
    assert_eq!(s.usage, 3 * one as u64);
    assert_eq!(s.entries, 3);
    assert!(s.usage <= s.capacity);
}

#[test]
fn reinserting_a_key_replaces_it_without_double_charging() {
    let cache = BlockCache::with_shards(1 << 20, 1);
    cache.insert(1, 0, block(100));
    cache.insert(1, 0, block(200));
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.usage(), block(200).size_in_bytes());
}

#[test]
fn oversized_blocks_are_not_cached() {
    let cache = BlockCache::with_shards(16 * 1024, 16);
    cache.insert(1, 0, block(2000)); // > 1 KiB shard
    assert!(cache.is_empty());
    assert_eq!(cache.stats().rejected, 1);
    assert!(cache.get(1, 0).is_none());
}

#[test]
fn capacity_is_never_exceeded_under_random_inserts() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let cache = BlockCache::new(64 * 1024);
    for i in 0..5000u64 {
        let len = rng.random_range(0..3000);
        cache.insert(rng.random_range(0..20), i * 4096, block(len));
        if rng.random_bool(0.3) {
            cache.get(rng.random_range(0..20), rng.random_range(0..i + 1) * 4096);
        }
        if rng.random_bool(0.01) {
            cache.erase_file(rng.random_range(0..20));
        }
        assert!(
            cache.usage() <= cache.capacity(),
            "over capacity at insert {i}"
        );
    }
    let s = cache.stats();
    assert!(s.evictions > 0 && s.entries > 0);
}

#[test]
fn erase_file_drops_exactly_that_files_blocks() {
    let cache = BlockCache::new(1 << 20);
    for off in 0..50 {
        cache.insert(7, off * 4096, block(10));
        cache.insert(8, off * 4096, block(10));
    }
    assert_eq!(cache.erase_file(7), 50);
    assert_eq!(cache.erase_file(7), 0);
    assert_eq!(cache.len(), 50);
    assert!(cache.get(7, 0).is_none());
    assert!(cache.get(8, 0).is_some());
    assert_eq!(cache.usage(), 50 * block(10).size_in_bytes());
    assert_eq!(cache.stats().invalidated_blocks, 50);
}

#[test]
fn erase_file_after_evictions_counts_only_cached_blocks() {
    let one = block(100).size_in_bytes();
    let cache = BlockCache::with_shards(2 * one, 1);
    for off in 0..5 {
        cache.insert(3, off, block(100));
    }
    assert_eq!(cache.erase_file(3), 2);
    assert_eq!(cache.usage(), 0);
}

#[test]
fn stats_serialize() {
    let cache = BlockCache::new(1024);
    let json = serde_json::to_string(&cache.stats()).unwrap();
    let back: CacheStats = serde_json::from_str(&json).unwrap();
    assert_eq!(back, cache.stats());
}

#[test]
fn concurrent_use_keeps_the_budget() {
    let cache = BlockCache::new(32 * 1024);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let cache = &cache;
            s.spawn(move || {
                for i in 0..2000u64 {
                    cache.insert(t, i * 4096, block((i % 700) as usize));
                    cache.get(t, (i / 2) * 4096);
                    if i % 500 == 0 {
                        cache.erase_file((t + 1) % 4);
                    }
                }
            });
        }
    });
    let s = cache.stats();
    assert!(s.usage <= s.capacity);
    assert_eq!(s.hits + s.misses, 8000);
}

/// A block's idle count is the cache's lookups (hits and misses) since it was last hit or
/// inserted; peeking leaves it alone; with several shards it is scaled to the whole cache.
#[test]
fn idle_counts_lookups_since_the_last_hit() {
    let cache = BlockCache::with_shards(1 << 20, 1);
    cache.insert(1, 0, block(10));
    cache.insert(1, 1, block(10));
    assert_eq!(cache.peek_idle(1, 0).map(|x| x.1), Some(0));
    assert!(cache.get(1, 0).is_some());
    assert!(cache.get(1, 7).is_none());
    assert!(cache.get(1, 0).is_some());
    assert_eq!(cache.peek_idle(1, 0).map(|x| x.1), Some(0), "just hit");
    assert_eq!(
        cache.peek_idle(1, 1).map(|x| x.1),
        Some(3),
        "three lookups since insert"
    );
    assert!(cache.peek(1, 1).is_some());
    assert_eq!(
        cache.peek_idle(1, 1).map(|x| x.1),
        Some(3),
        "a peek is no use"
    );
    assert!(cache.peek_idle(1, 7).is_none());
    cache.insert(1, 1, block(10));
    assert_eq!(cache.peek_idle(1, 1).map(|x| x.1), Some(0), "reinserted");

    // Four shards: three misses in the block's shard stand for about twelve lookups of
    // the cache; lookups of other shards do not move it.
    let sharded = BlockCache::with_shards(1 << 20, 4);
    sharded.insert(1, 0, block(10));
    let same = (0..).find(|o| std::ptr::eq(sharded.shard(2, *o), sharded.shard(1, 0)));
    let other = (0..).find(|o| !std::ptr::eq(sharded.shard(2, *o), sharded.shard(1, 0)));
    for _ in 0..3 {
        assert!(sharded.get(2, same.unwrap()).is_none());
        assert!(sharded.get(2, other.unwrap()).is_none());
    }
    assert_eq!(sharded.peek_idle(1, 0).map(|x| x.1), Some(12));
}

#[test]
fn a_charge_takes_room_from_blocks_until_dropped() {
    let one = block(100).size_in_bytes();
    let cache = BlockCache::with_shards(4 * one, 1);
    for off in 0..4 {
        cache.insert(1, off, block(100));
    }
    assert_eq!(cache.len(), 4);
    // Charging two blocks' worth evicts the two least recently used at once.
    let charge = cache.charge(2 * one);
    assert_eq!(cache.reserved(), 2 * one);
    assert_eq!(cache.len(), 2);
    assert!(cache.get(1, 0).is_none() && cache.get(1, 1).is_none());
    // Inserts now stay within what is left.
    for off in 4..8 {
        cache.insert(1, off, block(100));
    }
    assert_eq!(cache.usage(), 2 * one);
    assert_eq!(cache.stats().reserved, 2 * one as u64);
    // A charge as large as the capacity leaves no room: blocks are refused.
    charge.set(4 * one);
    assert_eq!(cache.len(), 0);
    cache.insert(1, 9, block(100));
    assert_eq!((cache.len(), cache.stats().rejected), (0, 1));
    // Dropped, the room is back.
    drop(charge);
    assert_eq!(cache.reserved(), 0);
    for off in 10..14 {
        cache.insert(1, off, block(100));
    }
    assert_eq!(cache.len(), 4);
}

#[test]
fn charges_add_up_and_shrink() {
    let cache = BlockCache::with_shards(1 << 20, 4);
    let a = cache.charge(1000);
    let b = cache.charge(500);
    assert_eq!(cache.reserved(), 1500);
    a.set(200);
    assert_eq!((cache.reserved(), a.bytes()), (700, 200));
    drop(b);
    assert_eq!(cache.reserved(), 200);
}
