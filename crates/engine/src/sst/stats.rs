//! Read-path counters of table files: how often the Bloom filter saved a block read and
//! how often it was wrong. One [`TableStats`] is usually shared by all tables of a
//! database, so the numbers describe the whole read path.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Lock-free counters updated by [`Table`](super::Table) reads.
#[derive(Debug, Default)]
pub struct TableStats {
    filter_checked: AtomicU64,
    filter_useful: AtomicU64,
    filter_false_positive: AtomicU64,
    data_block_reads: AtomicU64,
    data_block_bytes_read: AtomicU64,
}

/// A point-in-time copy of [`TableStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableStatsSnapshot {
    /// Gets that consulted a Bloom filter.
    pub filter_checked: u64,
    /// Gets the filter answered "absent" (no block read).
    pub filter_useful: u64,
    /// Gets the filter let through for a user key the table does not hold.
    pub filter_false_positive: u64,
    /// Data blocks read from storage (cache misses or uncached reads).
    pub data_block_reads: u64,
    pub data_block_bytes_read: u64,
}

impl TableStats {
    pub(crate) fn filter_checked(&self) {
        self.filter_checked.fetch_add(1, Relaxed);
    }
    pub(crate) fn filter_useful(&self) {
        self.filter_useful.fetch_add(1, Relaxed);
    }
    pub(crate) fn filter_false_positive(&self) {
        self.filter_false_positive.fetch_add(1, Relaxed);
    }
    pub(crate) fn data_block_read(&self, bytes: u64) {
        self.data_block_reads.fetch_add(1, Relaxed);
        self.data_block_bytes_read.fetch_add(bytes, Relaxed);
    }

    pub fn snapshot(&self) -> TableStatsSnapshot {
        TableStatsSnapshot {
            filter_checked: self.filter_checked.load(Relaxed),
            filter_useful: self.filter_useful.load(Relaxed),
            filter_false_positive: self.filter_false_positive.load(Relaxed),
            data_block_reads: self.data_block_reads.load(Relaxed),
            data_block_bytes_read: self.data_block_bytes_read.load(Relaxed),
        }
    }
}
