//! Whether a key's previous version was in the block cache: the baseline's signal for a
//! flush, which has no input blocks.
//!
//! A flush writes the newest version of each key it holds into a new L0 file. Readers of
//! those keys read that file from then on, and its blocks are not cached: a key whose
//! older version sat in a cached block (it was being read) now misses, until the L0 file
//! is compacted and again after that. These misses are no invalidation (no cached block
//! is dropped), but they are what a reader sees between a flush and the compaction that
//! follows it. A compaction's policy knows the cached input blocks' keys; for a flush the
//! same knowledge is a lookup of each written key in the tree as it was when the flush
//! started ([`OlderVersions::cached`]).
//!
//! Among those keys, the ones whose cached block a compaction's install dropped within
//! the invalidation window ([`OlderVersions::dropped_recently`]) are the compaction's
//! invalidations still under way: the compaction's output, warmed or not, no longer holds
//! their newest version, and their next read misses in the flush's file. Only these keys'
//! misses are invalidation misses.

use super::keys::KeySet;
use crate::cache::BlockCache;
use crate::internal_key::seek_key;
use crate::internal_key::{user_key, MAX_SEQ};
use crate::version::{TableFile, Version};
use std::sync::Arc;

/// The tree's sorted runs when a flush started, searched for each key the flush writes.
pub struct OlderVersions {
    /// Sorted runs, shallowest level first and newest run first within a level: the order
    /// a read searches them.
    runs: Vec<Vec<Arc<TableFile>>>,
    cache: Arc<BlockCache>,
    /// The keys of the blocks compactions' installs dropped within the window.
    dropped: Vec<Arc<KeySet>>,
}

impl OlderVersions {
    pub fn new(
        version: &Version,
        cache: Arc<BlockCache>,
        dropped: Vec<Arc<KeySet>>,
    ) -> OlderVersions {
        let runs = (0..version.num_levels())
            .flat_map(|l| version.runs(l).iter().cloned())
            .filter(|r| !r.is_empty())
            .collect();
        OlderVersions {
            runs,
            cache,
            dropped,
        }
    }

    /// True if a compaction's install dropped a cached block holding `key` within the
    /// invalidation window.
    pub fn dropped_recently(&self, key: &[u8]) -> bool {
        let h = KeySet::hash(key);
        self.dropped.iter().any(|d| d.contains_hash(h))
    }

    /// True if the newest version of `key` in the tree is in a cached block. The first run
    /// whose file may hold the key (key range, Bloom filter) decides: an uncached block is
    /// not read to find out whether the key is in it.
    pub fn cached(&self, key: &[u8]) -> bool {
        let seek = seek_key(key, MAX_SEQ);
        for run in &self.runs {
            let i = run.partition_point(|f| f.largest_user_key() < key);
            let Some(f) = run.get(i).filter(|f| f.smallest_user_key() <= key) else {
                continue;
            };
            let Ok(t) = f.table() else { continue };
            if !t.may_contain(key) {
                continue;
            }
            let mut index = t.index_block().iter();
            index.seek(&seek);
            if !index.valid() {
                continue;
            }
            let Ok(h) = t.index_handle(index.key(), index.value()) else {
                continue;
            };
            let Some(block) = self.cache.peek(f.number(), h.offset) else {
                return false;
            };
            let mut it = block.iter();
            it.seek(&seek);
            if it.valid() && user_key(it.key()) == key {
                return true;
            }
        }
        false
    }
}

impl std::fmt::Debug for OlderVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OlderVersions")
            .field("runs", &self.runs.len())
            .finish_non_exhaustive()
    }
}
