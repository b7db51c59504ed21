//! Cache counters and their serializable snapshot.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub inserts: AtomicU64,
    pub evictions: AtomicU64,
    pub invalidated: AtomicU64,
    pub rejected: AtomicU64,
    pub prefetched: AtomicU64,
    pub prefetch_hits: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        if n > 0 {
            counter.fetch_add(n, Relaxed);
        }
    }
}

/// A point-in-time copy of a [`BlockCache`](super::BlockCache)'s counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    pub capacity: u64,
    /// Bytes charged by the blocks currently cached.
    pub usage: u64,
    pub entries: u64,
    /// Bytes of the capacity charged to memory other than blocks (table index and filter
    /// blocks, the engine's in-memory tables: [`CacheCharge`](super::CacheCharge)).
    #[serde(default)]
    pub reserved: u64,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    /// Blocks pushed out to make room (least recently used first).
    pub evictions: u64,
    /// Blocks dropped because their file was deleted ([`erase_file`](super::BlockCache::erase_file)).
    pub invalidated_blocks: u64,
    /// Inserts refused because the block alone exceeds a shard's room (its capacity less
    /// its share of the reserved bytes).
    pub rejected: u64,
    /// Blocks inserted by cache warming (written by a flush or compaction, never read).
    #[serde(default)]
    pub prefetched: u64,
    /// Prefetched blocks that a reader then hit (each counted once, at its first hit).
    #[serde(default)]
    pub prefetch_hits: u64,
}

impl CacheStats {
    /// Hits over lookups; 0 before any lookup.
    pub fn hit_ratio(&self) -> f64 {
        let lookups = self.hits + self.misses;
        if lookups == 0 {
            0.0
        } else {
            self.hits as f64 / lookups as f64
        }
    }

    pub(super) fn from_counters(c: &Counters) -> Self {
        CacheStats {
            hits: c.hits.load(Relaxed),
            misses: c.misses.load(Relaxed),
            inserts: c.inserts.load(Relaxed),
            evictions: c.evictions.load(Relaxed),
            invalidated_blocks: c.invalidated.load(Relaxed),
            rejected: c.rejected.load(Relaxed),
            prefetched: c.prefetched.load(Relaxed),
            prefetch_hits: c.prefetch_hits.load(Relaxed),
            ..CacheStats::default()
        }
    }
}
