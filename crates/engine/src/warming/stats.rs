//! What cache warming counts, for every policy ([`WarmingStats`]).

use serde::{Deserialize, Serialize};

/// Reads after an invalidation within which a miss in the invalidated range counts as an
/// invalidation miss.
pub const INVALIDATION_WINDOW_READS: u64 = 10_000;

/// Counters of cache warming and of the invalidations it is measured against.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WarmingStats {
    pub policy: String,
    /// Key ranges (0 until cut), and how many times the key space was cut.
    pub ranges: u64,
    pub range_cuts: u64,
    pub reads: u64,
    /// Deletions of table files that had cached blocks.
    pub invalidation_events: u64,
    /// Key ranges marked invalidated (summed over events).
    pub invalidated_ranges: u64,
    /// Dropped blocks not tracked: the key space was not cut into ranges yet, or no job
    /// had mapped their file.
    pub unmapped_invalidated_blocks: u64,
    /// Cache misses in a range within the window after its invalidation.
    pub invalidation_misses: u64,
    pub invalidation_window_reads: u64,
    /// Flushes and compactions seen, and those a policy planned prefetches for.
    pub jobs: u64,
    pub jobs_planned: u64,
    /// Output blocks a filter looked at, and those that entered the cache.
    pub blocks_considered: u64,
    pub blocks_admitted: u64,
    /// Of those, the blocks flushes admitted (the rest are compactions').
    #[serde(default)]
    pub flush_blocks_admitted: u64,
    /// Admitted blocks beyond the job's budget (the lowest priorities), and held blocks
    /// the policy withdrew when the output was installed.
    #[serde(default)]
    pub blocks_displaced: u64,
    #[serde(default)]
    pub blocks_withdrawn: u64,
    /// Learned policy: completed slots, sampled reads and writes.
    pub slots: u64,
    pub sampled_reads: u64,
    pub sampled_writes: u64,
    /// Learned policy: model trainings (and ones skipped for a one-class set), their total
    /// time, the size of the last set, trees in the model.
    pub trainings: u64,
    pub training_failures: u64,
    pub training_micros: u64,
    pub last_training_rows: u64,
    pub last_training_positives: u64,
    pub model_trees: u64,
    /// Learned policy: predictions (one per slot once a model exists), their total time,
    /// and the ranges the last one found hot.
    pub predictions: u64,
    pub prediction_micros: u64,
    pub hot_ranges: u64,
}
