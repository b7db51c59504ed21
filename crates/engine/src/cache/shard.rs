//! One shard of the block cache: an LRU list with byte accounting and a per-file index.

use crate::sst::block::Block;
use lru::LruCache;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// `(file_number, block offset)`.
pub(super) type CacheKey = (u64, u64);

/// What an insert did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Inserted {
    /// Cached, after evicting this many blocks.
    Yes { evicted: usize },
    /// The block alone is larger than the shard.
    TooLarge,
}

/// A cached block, whether a prefetch put it there and no reader has hit it yet, and the
/// shard's lookup count when it was last hit (or inserted).
struct Entry {
    block: Arc<Block>,
    unread_prefetch: bool,
    used_at: u64,
}

/// What a lookup found.
pub(super) struct Hit {
    pub block: Arc<Block>,
    /// The first read of a block a prefetch inserted.
    pub first_hit_of_prefetch: bool,
}

pub(super) struct Shard {
    capacity: usize,
    usage: usize,
    lru: LruCache<CacheKey, Entry>,
    /// The offsets cached for each file, so a file's blocks can be erased without a scan.
    by_file: HashMap<u64, HashSet<u64>>,
    /// Lookups of this shard so far (hits and misses): the clock of `Entry::used_at`,
    /// kept per shard so that no lookup writes anything another shard's lookups share.
    lookups: u64,
}

impl Shard {
    pub fn new(capacity: usize) -> Self {
        Shard {
            capacity,
            usage: 0,
            lru: LruCache::unbounded(),
            by_file: HashMap::new(),
            lookups: 0,
        }
    }

    pub fn usage(&self) -> usize {
        self.usage
    }

    pub fn len(&self) -> usize {
        self.lru.len()
    }

    /// Looks a block up and marks it most recently used.
    pub fn get(&mut self, key: &CacheKey) -> Option<Hit> {
        self.lookups += 1;
        let now = self.lookups;
        self.lru.get_mut(key).map(|e| {
            e.used_at = now;
            Hit {
                block: Arc::clone(&e.block),
                first_hit_of_prefetch: std::mem::take(&mut e.unread_prefetch),
            }
        })
    }

    /// The cached block, without changing its LRU position.
    pub fn peek(&self, key: &CacheKey) -> Option<Arc<Block>> {
        self.lru.peek(key).map(|e| Arc::clone(&e.block))
    }

    /// The cached block and the lookups of this shard since it was last hit or inserted
    /// (how long it has sat unread), without changing its LRU position.
    pub fn peek_idle(&self, key: &CacheKey) -> Option<(Arc<Block>, u64)> {
        self.lru
            .peek(key)
            .map(|e| (Arc::clone(&e.block), self.lookups - e.used_at))
    }

    /// True if the block is cached; does not change its LRU position.
    pub fn contains(&self, key: &CacheKey) -> bool {
        self.lru.contains(key)
    }

    /// Caches a block; `prefetched` marks it as put there by a prefetch rather than a read.
    /// `reserved` bytes of the shard's capacity are charged to memory other than blocks
    /// ([`super::CacheCharge`]): blocks get the rest.
    pub fn insert(
        &mut self,
        key: CacheKey,
        block: Arc<Block>,
        prefetched: bool,
        reserved: usize,
    ) -> Inserted {
        let charge = block.size_in_bytes();
        let room = self.capacity.saturating_sub(reserved);
        if charge > room {
            return Inserted::TooLarge;
        }
        if let Some(old) = self.lru.pop(&key) {
            self.usage -= old.block.size_in_bytes();
        }
        let evicted = self.evict_to(room - charge);
        self.lru.put(
            key,
            Entry {
                block,
                unread_prefetch: prefetched,
                used_at: self.lookups,
            },
        );
        self.usage += charge;
        self.by_file.entry(key.0).or_default().insert(key.1);
        Inserted::Yes { evicted }
    }

    /// Evicts least-recently-used blocks until at most `limit` bytes are cached; returns
    /// how many were evicted.
    pub fn evict_to(&mut self, limit: usize) -> usize {
        let mut evicted = 0;
        while self.usage > limit {
            let Some((victim, old)) = self.lru.pop_lru() else {
                break;
            };
            self.usage -= old.block.size_in_bytes();
            self.forget(victim);
            evicted += 1;
        }
        evicted
    }

    /// Drops every block of `file_number`; returns the dropped blocks, by offset.
    pub fn erase_file(&mut self, file_number: u64) -> Vec<(u64, Arc<Block>)> {
        let Some(offsets) = self.by_file.remove(&file_number) else {
            return Vec::new();
        };
        let mut dropped = Vec::with_capacity(offsets.len());
        for offset in offsets {
            if let Some(old) = self.lru.pop(&(file_number, offset)) {
                self.usage -= old.block.size_in_bytes();
                dropped.push((offset, old.block));
            }
        }
        dropped
    }

    fn forget(&mut self, (file, offset): CacheKey) {
        if let Some(set) = self.by_file.get_mut(&file) {
            set.remove(&offset);
            if set.is_empty() {
                self.by_file.remove(&file);
            }
        }
    }
}
