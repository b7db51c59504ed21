//! The sharded block cache (design in the module docs of [`crate::cache`]).

use super::shard::{Inserted, Shard};
use super::stats::{CacheStats, Counters};
use crate::sst::block::Block;
use crate::sst::BlockSink;
use parking_lot::Mutex;
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64;

/// Shards of a cache made by [`BlockCache::new`].
pub const DEFAULT_SHARDS: usize = 16;

/// A sharded LRU cache of decoded blocks.
pub struct BlockCache {
    capacity: usize,
    shards: Box<[Mutex<Shard>]>,
    counters: Counters,
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
            shards: (0..n).map(|_| Mutex::new(Shard::new(per_shard))).collect(),
            counters: Counters::default(),
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
        let counter = if found.is_some() {
            &self.counters.hits
        } else {
            &self.counters.misses
        };
        Counters::add(counter, 1);
        found
    }

    /// Caches a block, evicting least-recently-used blocks of its shard until it fits. A
    /// block larger than a shard's capacity is not cached.
    pub fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        let result = self
            .shard(file_number, offset)
            .lock()
            .insert((file_number, offset), block);
        match result {
            Inserted::Yes { evicted } => {
                Counters::add(&self.counters.inserts, 1);
                Counters::add(&self.counters.evictions, evicted as u64);
            }
            Inserted::TooLarge => Counters::add(&self.counters.rejected, 1),
        }
    }

    /// Drops every cached block of a file (it was deleted); returns how many were dropped.
    pub fn erase_file(&self, file_number: u64) -> usize {
        let n: usize = self
            .shards
            .iter()
            .map(|s| s.lock().erase_file(file_number))
            .sum();
        Counters::add(&self.counters.invalidated, n as u64);
        n
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
            ..CacheStats::from_counters(&self.counters)
        }
    }

    /// A [`BlockSink`] for [`TableBuilder::set_block_sink`](crate::sst::TableBuilder::set_block_sink)
    /// that inserts each freshly written data block of `file_number` into this cache.
    pub fn warming_sink(self: &Arc<Self>, file_number: u64) -> BlockSink {
        let cache = Arc::clone(self);
        Box::new(move |offset, block| cache.insert(file_number, offset, Arc::clone(block)))
    }
}

#[cfg(test)]
mod tests;
