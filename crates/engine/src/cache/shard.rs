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

pub(super) struct Shard {
    capacity: usize,
    usage: usize,
    lru: LruCache<CacheKey, Arc<Block>>,
    /// The offsets cached for each file, so a file's blocks can be erased without a scan.
    by_file: HashMap<u64, HashSet<u64>>,
}

impl Shard {
    pub fn new(capacity: usize) -> Self {
        Shard {
            capacity,
            usage: 0,
            lru: LruCache::unbounded(),
            by_file: HashMap::new(),
        }
    }

    pub fn usage(&self) -> usize {
        self.usage
    }

    pub fn len(&self) -> usize {
        self.lru.len()
    }

    /// Looks a block up and marks it most recently used.
    pub fn get(&mut self, key: &CacheKey) -> Option<Arc<Block>> {
        self.lru.get(key).cloned()
    }

    pub fn insert(&mut self, key: CacheKey, block: Arc<Block>) -> Inserted {
        let charge = block.size_in_bytes();
        if charge > self.capacity {
            return Inserted::TooLarge;
        }
        if let Some(old) = self.lru.pop(&key) {
            self.usage -= old.size_in_bytes();
        }
        let mut evicted = 0;
        while self.usage + charge > self.capacity {
            let Some((victim, old)) = self.lru.pop_lru() else {
                break;
            };
            self.usage -= old.size_in_bytes();
            self.forget(victim);
            evicted += 1;
        }
        self.lru.put(key, block);
        self.usage += charge;
        self.by_file.entry(key.0).or_default().insert(key.1);
        Inserted::Yes { evicted }
    }

    /// Drops every block of `file_number`; returns how many there were.
    pub fn erase_file(&mut self, file_number: u64) -> usize {
        let Some(offsets) = self.by_file.remove(&file_number) else {
            return 0;
        };
        for offset in &offsets {
            if let Some(old) = self.lru.pop(&(file_number, *offset)) {
                self.usage -= old.size_in_bytes();
            }
        }
        offsets.len()
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
