//! The interface of a cache-warming policy: what it is shown of a job ([`JobInputs`]),
//! how it decides block by block ([`BlockFilter`]) and what it is asked at a
//! compaction's install ([`Dropping`]); [`NoWarming`] is the baseline.

use super::keys::{BlockKeys, KeySet};
use super::older_versions::OlderVersions;
use super::ranges::KeyRanges;
use super::stats::WarmingStats;
use crate::sst::block::Block;
use std::sync::{Arc, OnceLock};

/// What kind of job writes the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    Flush,
    Compaction,
}

/// A data block of a job's input table: its key interval (from the index) and whether it
/// was cached when the job started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputBlock {
    pub file: u64,
    pub offset: u64,
    /// At or below the block's first user key.
    pub lo: Vec<u8>,
    /// At or above the block's last user key.
    pub hi: Vec<u8>,
    pub cached: bool,
}

/// What a policy sees of a job.
#[derive(Debug)]
pub struct JobInputs<'a> {
    pub kind: JobKind,
    pub blocks: &'a [InputBlock],
    /// The user keys of the input blocks cached when the job started (empty unless the
    /// policy [wants them](CacheWarming::wants_cached_keys)).
    pub cached_keys: &'a KeySet,
    /// A flush's lookup of its keys' previous versions in the cache (`None` for a
    /// compaction, and unless the policy [wants](CacheWarming::wants_cached_keys) it).
    pub older: Option<Arc<OlderVersions>>,
}

static NO_KEYS: KeySet = KeySet::EMPTY;

impl JobInputs<'static> {
    /// A job without input tables (a flush).
    pub fn empty() -> Self {
        JobInputs {
            kind: JobKind::Flush,
            blocks: &[],
            cached_keys: &NO_KEYS,
            older: None,
        }
    }
}

/// Decides, block by block, what a job's output puts into the cache.
pub trait BlockFilter: Send + Sync {
    /// Whether to cache an output block holding `keys` (its user keys, in order, not
    /// empty): `None` leaves it out; `Some(priority)` admits it, and when a job admits more
    /// than its budget the blocks of highest priority are the ones kept.
    fn admit(&self, keys: &BlockKeys) -> Option<f64>;

    /// A compaction's admitted block is held until the job's output replaces its inputs
    /// (see [`JobWarming`]); this is asked again then, with what is known at that moment:
    /// the input blocks the cache drops ([`Dropping`]). Policies whose knowledge changed
    /// while the job ran (the oracle: reads have moved on; the learned policy: blocks read
    /// during the job) decide again; the default keeps the first answer.
    fn at_install(&self, held: &Candidate<'_>, _dropping: &Dropping) -> Option<f64> {
        Some(held.priority)
    }

    /// Most blocks a compaction may load at its install besides its [`Budget`]; `None`:
    /// no other limit.
    fn limit(&self) -> Option<u64> {
        None
    }

    /// The job loaded `blocks` more (a flush: one at a time, as it writes them; a
    /// compaction: once, at its install, all of them).
    fn loaded(&self, _blocks: u64) {}
}

/// A held output block, as [`BlockFilter::at_install`] sees it.
pub struct Candidate<'a> {
    pub block: &'a Arc<Block>,
    /// The block's first and last user keys.
    pub first: &'a [u8],
    pub last: &'a [u8],
    /// Hashes ([`KeySet::hash`]) of its user keys.
    pub hashes: &'a [u64],
    /// What [`BlockFilter::admit`] gave it.
    pub priority: f64,
}

/// How many blocks one job may put into the cache.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// Up to this share of the cache's capacity in bytes (more would only evict the job's
    /// own blocks).
    CacheFraction(f64),
    /// Up to this many times as many blocks as the cache drops when the output replaces
    /// the inputs (the input blocks it holds then), plus what a flush may take as a share
    /// of the cache (a flush drops nothing). Replacing what the job took out of the cache
    /// evicts nothing else: filling the whole cache with a job's blocks pushes out the
    /// blocks of every other file readers were using.
    ReplaceDropped { factor: f64, flush_fraction: f64 },
}

/// A cache-warming policy. The hooks other than [`plan`](Self::plan) feed policies that
/// learn from the workload; the defaults ignore them.
pub trait CacheWarming: Send + Sync {
    fn name(&self) -> &'static str;

    /// The filter for one job's output blocks; `None` caches none of them.
    fn plan(&self, job: &JobInputs<'_>) -> Option<Arc<dyn BlockFilter>>;

    /// The key ranges were cut (again: counts of the old ranges no longer apply);
    /// `cache_ranges` is about how many ranges' blocks the cache's prefetch budget holds.
    fn on_ranges(&self, _ranges: &Arc<KeyRanges>, _cache_ranges: usize) {}

    /// A client read `key`.
    fn record_read(&self, _key: &[u8]) {}

    /// A client wrote `key`.
    fn record_write(&self, _key: &[u8]) {}

    /// Adds the policy's own counters.
    fn stats(&self, _s: &mut WarmingStats) {}

    /// How much one job may prefetch; the whole cache by default.
    fn budget(&self) -> Budget {
        Budget::CacheFraction(1.0)
    }

    /// True if [`plan`](Self::plan) uses [`JobInputs::cached_keys`] (decoding the cached
    /// input blocks' keys costs a job's start a little).
    fn wants_cached_keys(&self) -> bool {
        false
    }
}

/// Today's behaviour: output blocks enter the cache only when read.
#[derive(Debug, Default)]
pub struct NoWarming;

impl CacheWarming for NoWarming {
    fn name(&self) -> &'static str {
        "none"
    }

    fn plan(&self, _job: &JobInputs<'_>) -> Option<Arc<dyn BlockFilter>> {
        None
    }
}

/// What the cache is dropping when a compaction's output is installed: the input blocks
/// it held then (the job's inputs, as readers last saw them), each with how long it had
/// sat unread ([`BlockCache::peek_idle`]). Their keys are listed when a policy first asks.
#[derive(Debug, Default)]
pub struct Dropping {
    blocks: Vec<(Arc<Block>, u64)>,
    /// Per key hash, the least idle of the blocks holding it; sorted by hash.
    idle: OnceLock<Vec<(u64, u64)>>,
    keys: OnceLock<KeySet>,
}

impl Dropping {
    /// Blocks read just now (idle 0).
    pub fn new(blocks: Vec<Arc<Block>>) -> Dropping {
        Dropping::with_idle(blocks.into_iter().map(|b| (b, 0)).collect())
    }

    /// Blocks with the lookups of the cache since each was last read.
    pub fn with_idle(blocks: Vec<(Arc<Block>, u64)>) -> Dropping {
        Dropping {
            blocks,
            idle: OnceLock::new(),
            keys: OnceLock::new(),
        }
    }

    /// How many blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    fn by_key(&self) -> &[(u64, u64)] {
        self.idle.get_or_init(|| {
            let mut v = Vec::new();
            for (b, idle) in &self.blocks {
                v.extend(BlockKeys::of(b).iter().map(|k| (KeySet::hash(k), *idle)));
            }
            // Least idle first within a key, then one entry per key.
            v.sort_unstable();
            v.dedup_by_key(|x| x.0);
            v
        })
    }

    /// The user keys the blocks held.
    pub fn keys(&self) -> &KeySet {
        self.keys
            .get_or_init(|| KeySet::from_hashes(self.by_key().iter().map(|x| x.0).collect()))
    }

    /// Of the dropped blocks holding one of `hashes` ([`KeySet::hash`]es of user keys),
    /// how long the most recently read had sat unread; `None` if none holds any.
    pub fn idle(&self, hashes: &[u64]) -> Option<u64> {
        let v = self.by_key();
        hashes
            .iter()
            .filter_map(|h| {
                let i = v.binary_search_by_key(h, |x| x.0).ok()?;
                Some(v[i].1)
            })
            .min()
    }
}
