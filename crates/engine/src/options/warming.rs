//! The `cache_warming` option: which policy, the learned policy's knobs, and the
//! interface a benchmark implements to hand the oracle policy its future reads. The
//! policies themselves are in [`crate::warming`]; this module imports nothing from them,
//! so that `Options` stays a leaf.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Which [`CacheWarming`](crate::warming::CacheWarming) policy an engine runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum CacheWarmingConfig {
    /// Output blocks of flushes and compactions enter the cache only when read.
    #[default]
    None,
    /// X-Engine's incremental warmup, the paper's baseline: after a compaction, the output
    /// blocks whose key ranges overlap blocks that were cached in the inputs.
    IncrementalWarmup,
    /// Leaper: output blocks of key ranges a classifier predicts will be read soon.
    Learned(LearnedParams),
    /// The bound: output blocks that the workload will read within the invalidation
    /// window, known from its future (benchmarks only; not parsed from a name).
    Oracle(ReadOracleHandle),
}

/// Knows when each key will be read. Keys are named by their
/// [`KeySet::hash`](crate::warming::KeySet::hash).
pub trait ReadOracle: Send + Sync {
    /// The numbers of the client reads of the key whose hash is `key`, ascending (counted
    /// from 0 at the engine's open; at most 2^32 reads).
    fn reads_of(&self, key: u64) -> &[u32];

    /// The keys (hashes) of reads `from..to`, in read order, clipped to the reads known.
    fn keys_read(&self, from: u64, to: u64) -> &[u64];

    /// How far ahead, in reads, a compaction's install looks; `None` (the default) is the
    /// invalidation window ([`crate::warming::INVALIDATION_WINDOW_READS`]), so that the
    /// oracle bounds what the invalidation-miss count can charge. A benchmark whose misses
    /// after a compaction last longer than the window (a cache holding all the data,
    /// refilled over a second or more) widens it, or the bound would stop where the count
    /// does and not where the misses do.
    fn horizon(&self) -> Option<u64> {
        None
    }

    /// The first read of `key` numbered `from` or later.
    fn next_read(&self, key: u64, from: u64) -> Option<u64> {
        let r = self.reads_of(key);
        r.get(r.partition_point(|&n| u64::from(n) < from))
            .map(|&n| u64::from(n))
    }

    /// How many reads of `key` have numbers in `[from, to)`.
    fn reads_in(&self, key: u64, from: u64, to: u64) -> u64 {
        let r = self.reads_of(key);
        let a = r.partition_point(|&n| u64::from(n) < from);
        let b = r.partition_point(|&n| u64::from(n) < to);
        b.saturating_sub(a) as u64
    }
}

/// Recent slots each feature row of the learned policy looks at (its features are the
/// read and write counts of the last this many slots), which bounds the history settings.
pub const FEATURE_WINDOW_SLOTS: usize = 6;

/// The future reads the `oracle` policy is given.
#[derive(Clone)]
pub struct ReadOracleHandle(pub Arc<dyn ReadOracle>);

impl fmt::Debug for ReadOracleHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReadOracle")
    }
}

impl PartialEq for ReadOracleHandle {
    /// The same oracle.
    fn eq(&self, o: &Self) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
}

impl CacheWarmingConfig {
    pub const NAMES: [&'static str; 3] = ["none", "incremental-warmup", "learned"];

    pub fn name(&self) -> &'static str {
        match self {
            CacheWarmingConfig::None => "none",
            CacheWarmingConfig::IncrementalWarmup => "incremental-warmup",
            CacheWarmingConfig::Learned(_) => "learned",
            CacheWarmingConfig::Oracle(_) => "oracle",
        }
    }

    pub fn learned() -> Self {
        CacheWarmingConfig::Learned(LearnedParams::default())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            CacheWarmingConfig::Learned(p) => p.validate(),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for CacheWarmingConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CacheWarmingConfig {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(CacheWarmingConfig::None),
            "incremental-warmup" | "incremental" => Ok(CacheWarmingConfig::IncrementalWarmup),
            "learned" | "leaper" => Ok(CacheWarmingConfig::learned()),
            "oracle" => Err(Error::InvalidOptions {
                name: "cache_warming",
                detail: "the oracle policy needs the workload's future reads: \
                         build CacheWarmingConfig::Oracle with a ReadOracle"
                    .to_string(),
            }),
            other => Err(Error::InvalidOptions {
                name: "cache_warming",
                detail: format!(
                    "unknown policy {other:?}: use one of {}",
                    CacheWarmingConfig::NAMES.join(", ")
                ),
            }),
        }
    }
}

/// Knobs of the learned policy. Time is counted in client reads (gets), not seconds, so
/// that runs of different policies on a loaded machine see the same slots for the same
/// workload (the paper uses slots of about a second).
#[derive(Clone, Debug, PartialEq)]
pub struct LearnedParams {
    /// Client reads per time slot, at least; a slot is also at least `slot_reads_per_range`
    /// sampled reads per range, so that "read in the next slot" stays informative however
    /// many ranges the key space is cut into (with far fewer samples than ranges, almost
    /// every range would look cold).
    pub slot_reads: u64,
    pub slot_reads_per_range: f64,
    /// One read (and one write) in this many is counted per range.
    pub sample_every: u64,
    /// Completed slots kept for features and training.
    pub history_slots: usize,
    /// Slots needed before the first training.
    pub min_train_slots: usize,
    /// Slots between trainings.
    pub retrain_every_slots: usize,
    /// Training rows (range, slot) kept, sampled uniformly when there are more.
    pub max_training_rows: usize,
    /// A range is predicted hot when the model's probability reaches this.
    pub threshold: f64,
    /// The ranges predicted hot are capped, most probable first, at what fills this
    /// fraction of the block cache (the rest keeps what readers cached); a flush prefetches
    /// at most this fraction of the cache.
    pub cache_fraction: f64,
    /// A compaction prefetches at most this many times as many blocks as the cache drops
    /// when its output replaces its inputs ([`Budget::ReplaceDropped`](crate::warming::Budget)).
    pub replace_factor: f64,
    /// The policy loads no more blocks in all than incremental warm-up would have loaded
    /// for the same compactions: it counts the output blocks the baseline admits; a
    /// compaction loads at most that plus what earlier jobs left unspent, its freshest
    /// blocks first, and a flush only what compactions left unspent, except for blocks
    /// whose keys a compaction dropped from the cache within the invalidation window,
    /// which it loads on credit (the next compactions repay). Off by default: measured
    /// at the fourth pass (docs/leaper.md), it holds the loads on instant messaging and
    /// synthetic but costs instant messaging about 8 points of removed invalidation
    /// misses (12% below the oracle) and e-commerce up to 5.
    pub loads_within_baseline: bool,
    /// Target data blocks per key range when the ranges are cut.
    pub blocks_per_range: usize,
    pub min_ranges: usize,
    pub max_ranges: usize,
    pub gbm_iterations: usize,
    pub gbm_max_depth: usize,
    pub gbm_learning_rate: f32,
}

impl Default for LearnedParams {
    fn default() -> Self {
        LearnedParams {
            slot_reads: 5_000,
            // One read in 8 sampled: the sampled path (a range search and a counter)
            // costs about 100 ns, which at 1 in 2 was several percent of a cached read.
            // Slots stay one read per range long, as they were at 1 in 2 and 0.5.
            slot_reads_per_range: 0.125,
            sample_every: 8,
            history_slots: 24,
            min_train_slots: 8,
            retrain_every_slots: 100,
            max_training_rows: 12_000,
            threshold: 0.25,
            cache_fraction: 0.1,
            replace_factor: 2.0,
            loads_within_baseline: false,
            blocks_per_range: 2,
            min_ranges: 64,
            max_ranges: 1 << 16,
            gbm_iterations: 25,
            gbm_max_depth: 4,
            gbm_learning_rate: 0.2,
        }
    }
}

impl LearnedParams {
    fn validate(&self) -> Result<()> {
        let bad = |d: &str| {
            Err(Error::InvalidOptions {
                name: "cache_warming.learned",
                detail: d.to_string(),
            })
        };
        if self.slot_reads == 0
            || self.sample_every == 0
            || self.slot_reads_per_range.is_nan()
            || self.slot_reads_per_range < 0.0
        {
            return bad("slot_reads and sample_every must be at least 1");
        }
        if self.history_slots < FEATURE_WINDOW_SLOTS + 1 {
            return bad("history_slots must exceed the feature window");
        }
        if self.min_train_slots < FEATURE_WINDOW_SLOTS + 1
            || self.min_train_slots > self.history_slots
        {
            return bad("min_train_slots must lie between the feature window and history_slots");
        }
        if self.retrain_every_slots == 0 || self.max_training_rows < 100 {
            return bad("retrain_every_slots must be >= 1 and max_training_rows >= 100");
        }
        if !(0.0..=1.0).contains(&self.threshold) {
            return bad("threshold must be a probability");
        }
        if !(self.cache_fraction > 0.0 && self.cache_fraction <= 1.0) {
            return bad("cache_fraction must be in (0, 1]");
        }
        if !(self.replace_factor > 0.0 && self.replace_factor <= 100.0) {
            return bad("replace_factor must be in (0, 100]");
        }
        if self.blocks_per_range == 0
            || self.min_ranges < 2
            || self.min_ranges > self.max_ranges
            || self.max_ranges > 1 << 20
        {
            return bad("need blocks_per_range >= 1 and 2 <= min_ranges <= max_ranges <= 2^20");
        }
        if self.gbm_iterations == 0 || self.gbm_max_depth == 0 || self.gbm_learning_rate <= 0.0 {
            return bad("GBM iterations, depth and learning rate must be positive");
        }
        Ok(())
    }
}
