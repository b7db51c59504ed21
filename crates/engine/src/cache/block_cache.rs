//! The sharded block cache (design in the module docs of [`crate::cache`]).

use super::shard::{Inserted, Shard};
use super::stats::{CacheStats, Counters};
use crate::sst::block::Block;
use crate::sst::DataBlockCache;
use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use xxhash_rust::xxh3::xxh3_64;

/// Told `(file_number, blocks)` of the blocks [`BlockCache::erase_file`] dropped, by
/// offset (none, if the file had nothing cached: the call still says the file is gone).
pub type EraseListener = Box<dyn Fn(u64, &[(u64, Arc<Block>)]) + Send + Sync>;

thread_local! {
    /// Misses of all caches on this thread: a reader compares it before and after a lookup
    /// to learn whether that lookup missed, without a lock or a shared counter.
    static THREAD_MISSES: Cell<u64> = const { Cell::new(0) };
}

/// Cache misses so far on the calling thread (all caches).
pub fn thread_misses() -> u64 {
    THREAD_MISSES.with(|m| m.get())
}

/// Shards of a cache made by [`BlockCache::new`].
pub const DEFAULT_SHARDS: usize = 16;

/// Memory charged to a [`BlockCache`]'s capacity ([`BlockCache::charge`]); released when
/// dropped.
pub struct CacheCharge {
    cache: Arc<BlockCache>,
    bytes: AtomicUsize,
}

impl CacheCharge {
    /// Charges `bytes` instead of what was charged so far; a larger charge evicts blocks
    /// at once, so that blocks and charges together stay within the capacity (as long as
    /// the charges alone do).
    pub fn set(&self, bytes: usize) {
        let old = self.bytes.swap(bytes, Relaxed);
        self.cache.reserve(old, bytes);
    }

    /// Bytes charged now.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Relaxed)
    }
}

impl Drop for CacheCharge {
    fn drop(&mut self) {
        self.set(0);
    }
}

impl std::fmt::Debug for CacheCharge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheCharge")
            .field("bytes", &self.bytes())
            .finish()
    }
}

/// A sharded LRU cache of decoded blocks.
pub struct BlockCache {
    capacity: usize,
    /// Bytes of `capacity` held by [`CacheCharge`]s, spread evenly over the shards.
    reserved: AtomicUsize,
    shards: Box<[Mutex<Shard>]>,
    counters: Counters,
    erase_listener: OnceLock<EraseListener>,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("shards", &self.shards.len())
            .field("usage", &self.usage())
            .finish()
    }
}

impl BlockCache {
    /// A cache of `capacity_bytes` in [`DEFAULT_SHARDS`] shards.
    pub fn new(capacity_bytes: usize) -> Arc<Self> {
        Self::with_shards(capacity_bytes, DEFAULT_SHARDS)
    }

    /// A cache with `num_shards` shards (at least 1), each holding `capacity / num_shards`.
    pub fn with_shards(capacity_bytes: usize, num_shards: usize) -> Arc<Self> {
        let n = num_shards.max(1);
        let per_shard = capacity_bytes / n;
        Arc::new(BlockCache {
            capacity: per_shard * n,
            reserved: AtomicUsize::new(0),
            shards: (0..n).map(|_| Mutex::new(Shard::new(per_shard))).collect(),
            counters: Counters::default(),
            erase_listener: OnceLock::new(),
        })
    }

    fn shard(&self, file_number: u64, offset: u64) -> &Mutex<Shard> {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&file_number.to_le_bytes());
        key[8..].copy_from_slice(&offset.to_le_bytes());
        let i = (xxh3_64(&key) % self.shards.len() as u64) as usize;
        &self.shards[i]
    }

    /// The cached block at `(file_number, offset)`, now most recently used.
    pub fn get(&self, file_number: u64, offset: u64) -> Option<Arc<Block>> {
        let found = self
            .shard(file_number, offset)
            .lock()
            .get(&(file_number, offset));
        match found {
            Some(hit) => {
                Counters::add(&self.counters.hits, 1);
                if hit.first_hit_of_prefetch {
                    Counters::add(&self.counters.prefetch_hits, 1);
                }
                Some(hit.block)
            }
            None => {
                Counters::add(&self.counters.misses, 1);
                THREAD_MISSES.with(|m| m.set(m.get() + 1));
                None
            }
        }
    }

    /// The cached block, if any, for a background reader (compaction): counts neither a
    /// hit nor a miss and leaves the LRU order alone.
    pub fn peek(&self, file_number: u64, offset: u64) -> Option<Arc<Block>> {
        self.shard(file_number, offset)
            .lock()
            .peek(&(file_number, offset))
    }

    /// Like [`peek`](Self::peek), with how long the block has sat unread: about how many
    /// lookups the whole cache served since the block was last hit or inserted (its
    /// shard's lookups since then, times the shard count: lookups spread evenly over the
    /// shards). What a warming policy ranks a dropped block's keys by.
    pub fn peek_idle(&self, file_number: u64, offset: u64) -> Option<(Arc<Block>, u64)> {
        let n = self.shards.len() as u64;
        self.shard(file_number, offset)
            .lock()
            .peek_idle(&(file_number, offset))
            .map(|(b, idle)| (b, idle * n))
    }

    /// True if the block is cached. Counts neither a hit nor a miss and leaves the LRU
    /// order alone: warming policies use it to see what the cache holds.
    pub fn contains(&self, file_number: u64, offset: u64) -> bool {
        self.shard(file_number, offset)
            .lock()
            .contains(&(file_number, offset))
    }

    /// Caches a block, evicting least-recently-used blocks of its shard until it fits. A
    /// block larger than a shard's capacity is not cached.
    pub fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        self.insert_as(file_number, offset, block, false);
    }

    /// Caches a block a flush or compaction just wrote (cache warming). The same budget
    /// applies as to [`insert`](Self::insert): prefetching can never exceed the capacity.
    pub fn insert_prefetched(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        self.insert_as(file_number, offset, block, true);
    }

    fn insert_as(&self, file_number: u64, offset: u64, block: Arc<Block>, prefetched: bool) {
        let reserved = self.reserved_per_shard();
        let result = self.shard(file_number, offset).lock().insert(
            (file_number, offset),
            block,
            prefetched,
            reserved,
        );
        match result {
            Inserted::Yes { evicted } => {
                Counters::add(&self.counters.inserts, 1);
                Counters::add(&self.counters.evictions, evicted as u64);
                if prefetched {
                    Counters::add(&self.counters.prefetched, 1);
                }
            }
            Inserted::TooLarge => Counters::add(&self.counters.rejected, 1),
        }
    }

    /// Registers the one listener told about the blocks [`erase_file`](Self::erase_file)
    /// drops (cache warming maps them to key ranges). Later calls are ignored.
    pub fn set_erase_listener(&self, listener: EraseListener) {
        let _ = self.erase_listener.set(listener);
    }

    /// Drops every cached block of a file (it was deleted); returns how many were dropped.
    pub fn erase_file(&self, file_number: u64) -> usize {
        let mut dropped = Vec::new();
        for s in self.shards.iter() {
            dropped.extend(s.lock().erase_file(file_number));
        }
        let n = dropped.len();
        Counters::add(&self.counters.invalidated, n as u64);
        if let Some(l) = self.erase_listener.get() {
            l(file_number, &dropped);
        }
        n
    }

    fn reserved_per_shard(&self) -> usize {
        self.reserved.load(Relaxed).div_ceil(self.shards.len())
    }

    /// A charge of `bytes` against this cache's capacity, for memory other than its
    /// blocks (RocksDB's cache reservations, as with `cache_index_and_filter_blocks`):
    /// while it is held, blocks get that much less room. [`CacheCharge::set`] changes it;
    /// dropping it gives the room back.
    pub fn charge(self: &Arc<Self>, bytes: usize) -> CacheCharge {
        let c = CacheCharge {
            cache: Arc::clone(self),
            bytes: AtomicUsize::new(0),
        };
        c.set(bytes);
        c
    }

    fn reserve(&self, old: usize, new: usize) {
        if new < old {
            self.reserved.fetch_sub(old - new, Relaxed);
            return;
        }
        self.reserved.fetch_add(new - old, Relaxed);
        let room = (self.capacity / self.shards.len()).saturating_sub(self.reserved_per_shard());
        let mut evicted = 0;
        for s in self.shards.iter() {
            evicted += s.lock().evict_to(room);
        }
        Counters::add(&self.counters.evictions, evicted as u64);
    }

    /// Bytes of the capacity held by charges.
    pub fn reserved(&self) -> usize {
        self.reserved.load(Relaxed)
    }

    /// Bytes charged by the cached blocks.
    pub fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage()).sum()
    }

    /// Total capacity (a multiple of the shard count, rounded down).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn stats(&self) -> CacheStats {
        let (mut usage, mut entries) = (0, 0);
        for s in self.shards.iter() {
            let s = s.lock();
            usage += s.usage();
            entries += s.len();
        }
        CacheStats {
            capacity: self.capacity as u64,
            usage: usage as u64,
            entries: entries as u64,
            reserved: self.reserved() as u64,
            ..CacheStats::from_counters(&self.counters)
        }
    }
}

/// Tables read their data blocks through the cache and charge it their index and filter.
impl DataBlockCache for BlockCache {
    fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        BlockCache::get(self, file, offset)
    }

    fn peek(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        BlockCache::peek(self, file, offset)
    }

    fn insert(&self, file: u64, offset: u64, block: Arc<Block>) {
        BlockCache::insert(self, file, offset, block)
    }

    fn recharge(&self, old: usize, new: usize) {
        self.reserve(old, new)
    }
}

#[cfg(test)]
mod tests;
