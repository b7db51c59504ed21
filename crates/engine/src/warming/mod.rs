//! Cache warming across flushes and compactions (paper 002, Leaper).
//!
//! A compaction deletes its input tables; their cached blocks are dropped
//! ([`BlockCache::erase_file`]) and reads of those keys miss until the new blocks are read
//! in: the hit ratio drops and read latency jumps after every compaction. A
//! [`CacheWarming`] policy decides which blocks of a job's output are inserted into the
//! cache as the job writes them ([`BlockCache::insert_prefetched`], no extra read):
//!
//! - `none` ([`NoWarming`]): none; today's behaviour.
//! - `incremental-warmup` ([`incremental::IncrementalWarmup`]): those overlapping blocks
//!   that were cached in the inputs.
//! - `learned` ([`learned::Learned`]): those holding keys of cached input blocks, ranked
//!   by a classifier's prediction of their key ranges being read in the next slot, then
//!   those of ranges it predicts hot ([`learned::Hybrid`]).
//! - `oracle` ([`oracle::OracleWarming`]): the bound; knows the reads to come.
//!
//! # What is measured, for every policy ([`WarmingStats`])
//!
//! The key space is cut into ranges ([`ranges`]) at the first job that finds enough
//! blocks on disk, and cut again whenever the tree has grown fourfold since (a database
//! filling up from empty would otherwise keep the few ranges of its first flushes). When a
//! deleted file's blocks are dropped from the cache, each dropped block is remembered with
//! its keys and the read count. A client read that misses the cache on a key the dropped
//! block held, within [`INVALIDATION_WINDOW_READS`] reads of the drop, is an *invalidation
//! miss*, charged to that block once: the re-read of a block the compaction took out of
//! the cache. So invalidation misses never exceed the cached blocks dropped, and a miss
//! the cache would have taken anyway is not charged to compactions: neither a key whose
//! block was not cached, nor a key that merely lies between a dropped block's first and
//! last keys (a flush's block spans the key intervals of dozens of deeper blocks, and
//! holds keys of a few of them). This is the count the paper's "cache invalidations"
//! stand for, and what warming sets out to remove: a warmed block is hit, and the dropped
//! block's charge expires unpaid. (Key ranges index the dropped blocks: a miss looks only
//! at those of its key's range.) The window is counted in client reads, not time, so that
//! runs on a loaded machine are comparable.
//!
//! Prefetched blocks of a compaction enter the cache just before the engine publishes its
//! output (see [`JobWarming::install`]), while readers still read the cached inputs.
//! Deletion happens wherever the last reference to a file goes, a client's read among
//! them: the accounting decodes
//! nothing then (intervals come from the index when the job starts; a dropped block's keys
//! are listed only when a miss falls in its interval).
//!
//! Hooks: [`Warming::record_read`] (every get), [`Warming::record_write`] (every put and
//! delete), [`Warming::begin_job`] (a flush or compaction, with its inputs) which returns
//! the [`JobWarming`] whose [`sink`](JobWarming::sink) the job gives each table builder.

pub mod collector;
pub mod features;
pub mod incremental;
mod keys;
pub mod learned;
pub mod model;
pub mod older_versions;
pub mod oracle;
mod policy;
pub mod ranges;
mod stats;

pub use crate::options::warming::{CacheWarmingConfig, LearnedParams, ReadOracleHandle};
pub use keys::{BlockKeys, KeyHashHasher, KeyHashMap, KeySet};
pub use oracle::ReadOracle;
pub use policy::{
    BlockFilter, Budget, CacheWarming, Candidate, Dropping, InputBlock, JobInputs, JobKind,
    NoWarming,
};
pub use stats::{WarmingStats, INVALIDATION_WINDOW_READS};

use crate::cache::BlockCache;
use crate::internal_key::user_key;
use crate::sst::block::Block;
use crate::sst::BlockSink;
use crate::version::{TableFile, Version};
use parking_lot::{Mutex, RwLock};
use ranges::KeyRanges;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

/// A cached block dropped at read count `at`, covering user keys `[lo, hi]`; `paid` once
/// a miss was charged to it. Its keys are listed when a miss first falls in its interval
/// (most dropped blocks are never missed on: decoding them all would cost the thread that
/// deletes the file).
struct Invalidated {
    lo: Vec<u8>,
    hi: Vec<u8>,
    block: Arc<Block>,
    keys: OnceLock<KeySet>,
    at: u64,
    paid: AtomicBool,
}

impl Invalidated {
    fn holds(&self, key: &[u8], hash: u64) -> bool {
        self.lo.as_slice() <= key
            && key <= self.hi.as_slice()
            && self
                .keys
                .get_or_init(|| KeySet::of(&BlockKeys::of(&self.block)))
                .contains_hash(hash)
    }
}

/// One cut of the key space, with the recently invalidated blocks listed under every range
/// they span (so that a miss looks in one short list).
struct Cut {
    ranges: Arc<KeyRanges>,
    invalidated: Box<[Mutex<Vec<Arc<Invalidated>>>]>,
    /// Data blocks in the tree when cut.
    blocks: u64,
}

impl Cut {
    fn new(ranges: Arc<KeyRanges>, blocks: u64) -> Cut {
        Cut {
            invalidated: (0..ranges.len()).map(|_| Mutex::new(Vec::new())).collect(),
            ranges,
            blocks,
        }
    }

    /// Records a dropped block covering `[lo, hi]`; returns the ranges it spans.
    fn invalidate(&self, lo: &[u8], hi: &[u8], block: &Arc<Block>, at: u64) -> u64 {
        let b = Arc::new(Invalidated {
            lo: lo.to_vec(),
            hi: hi.to_vec(),
            block: block.clone(),
            keys: OnceLock::new(),
            at,
            paid: AtomicBool::new(false),
        });
        let span = self.ranges.span(lo, hi);
        let n = span.end() - span.start() + 1;
        for r in span {
            let mut list = self.invalidated[r].lock();
            list.retain(|x| !x.paid.load(Relaxed) && at - x.at < INVALIDATION_WINDOW_READS);
            list.push(b.clone());
        }
        n as u64
    }

    /// True if a miss of `key` at read count `now` is of a key that a block dropped
    /// within the window held, and no earlier miss was charged to that block (then it is
    /// charged to it).
    fn charge_miss(&self, key: &[u8], now: u64) -> bool {
        let mut list = self.invalidated[self.ranges.range_of(key)].lock();
        list.retain(|x| !x.paid.load(Relaxed) && now - x.at.min(now) < INVALIDATION_WINDOW_READS);
        let h = KeySet::hash(key);
        list.iter().any(|x| {
            x.holds(key, h)
                && x.paid
                    .compare_exchange(false, true, Relaxed, Relaxed)
                    .is_ok()
        })
    }
}

/// The input blocks of a file: offset and user-key interval, by offset.
type FileBlocks = Vec<(u64, Vec<u8>, Vec<u8>)>;

/// Ranges, invalidated blocks, the block maps of job inputs and the holds of running
/// compactions.
struct Tracking {
    cut: RwLock<Option<Arc<Cut>>>,
    /// Prefetches waiting for their job's inputs to be deleted, by input file number.
    deferred: Mutex<HashMap<u64, Arc<Deferred>>>,
    files: Mutex<HashMap<u64, FileBlocks>>,
    /// Input files whose cached blocks were registered as dropped when their compaction
    /// published its output ([`Tracking::publish`]); their deletion registers nothing more.
    published: Mutex<std::collections::HashSet<u64>>,
    /// The keys of the blocks the cache dropped at each compaction's install within the
    /// invalidation window, with the read count then (kept only for policies that
    /// [want](CacheWarming::wants_cached_keys) them: a flush's lookup of its keys'
    /// previous versions, [`older_versions::OlderVersions`]).
    recent_drops: Mutex<std::collections::VecDeque<(u64, Arc<KeySet>)>>,
    reads: AtomicU64,
    invalidation_events: AtomicU64,
    invalidated_ranges: AtomicU64,
    unmapped_blocks: AtomicU64,
    invalidation_misses: AtomicU64,
}

impl Tracking {
    /// The cache dropped `dropped` of `file`. The first input of a compaction to go
    /// releases its prefetches, first (the output has replaced the inputs for readers);
    /// then each dropped block is remembered for the invalidation accounting.
    fn on_erase(&self, cache: &BlockCache, file: u64, dropped: &[(u64, Arc<Block>)]) {
        if self.published.lock().remove(&file) {
            return;
        }
        let pending = self
            .claim(file)
            .map(|d| (self.dropping(cache, dropped, file, &d.inputs), d));
        self.account(file, dropped);
        // After the accounting: the reads served while the policy judges the held blocks
        // are charged like any other.
        if let Some((dropping, d)) = pending {
            d.install(cache, &dropping);
        }
    }

    /// A compaction is about to publish its output: from then on reads of the inputs'
    /// keys go to the output, so the inputs' cached blocks count as dropped from now on,
    /// not from when their files are deleted (the purge thread does that later, after
    /// tens of milliseconds when it has a backlog: misses in between went uncounted, and
    /// the window was counted from a moment no reader notices). Returns those blocks.
    fn publish(&self, cache: &BlockCache, inputs: &[u64]) -> Vec<(Arc<Block>, u64)> {
        let mut all = Vec::new();
        for f in inputs {
            let blocks: Vec<(u64, Arc<Block>)> = {
                let files = self.files.lock();
                let Some(map) = files.get(f) else { continue };
                map.iter()
                    .filter_map(|(off, _, _)| {
                        let (b, idle) = cache.peek_idle(*f, *off)?;
                        all.push((b.clone(), idle));
                        Some((*off, b))
                    })
                    .collect()
            };
            self.published.lock().insert(*f);
            self.account(*f, &blocks);
        }
        all
    }

    /// Keeps the keys a compaction's install dropped, for the flushes within the window.
    fn remember_drops(&self, keys: &KeySet) {
        let now = self.reads.load(Relaxed);
        let mut q = self.recent_drops.lock();
        while q
            .front()
            .is_some_and(|(at, _)| now - at >= INVALIDATION_WINDOW_READS)
        {
            q.pop_front();
        }
        q.push_back((now, Arc::new(keys.clone())));
    }

    /// The keys compactions' installs dropped within the window, newest first.
    fn dropped_recently(&self) -> Vec<Arc<KeySet>> {
        let now = self.reads.load(Relaxed);
        self.recent_drops
            .lock()
            .iter()
            .rev()
            .take_while(|(at, _)| now - at < INVALIDATION_WINDOW_READS)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// Remembers `file`'s dropped blocks for the invalidation count (unless they were
    /// registered when the output replacing `file` was published).
    fn account(&self, file: u64, dropped: &[(u64, Arc<Block>)]) {
        let blocks = self.files.lock().remove(&file);
        if dropped.is_empty() {
            return;
        }
        self.invalidation_events.fetch_add(1, Relaxed);
        let (Some(blocks), Some(cut)) = (blocks, self.cut.read().clone()) else {
            self.unmapped_blocks
                .fetch_add(dropped.len() as u64, Relaxed);
            return;
        };
        let now = self.reads.load(Relaxed);
        let mut marked = 0;
        for (off, block) in dropped {
            let i = blocks.partition_point(|b| b.0 < *off);
            match blocks.get(i) {
                Some((o, lo, hi)) if o == off => marked += cut.invalidate(lo, hi, block, now),
                _ => {
                    self.unmapped_blocks.fetch_add(1, Relaxed);
                }
            }
        }
        self.invalidated_ranges.fetch_add(marked, Relaxed);
    }

    /// Takes the held prefetches of the compaction with input `file` (all its inputs'
    /// entries), if nobody has installed them yet.
    fn claim(&self, file: u64) -> Option<Arc<Deferred>> {
        let mut map = self.deferred.lock();
        let d = map.remove(&file)?;
        for f in &d.inputs {
            map.remove(f);
        }
        Some(d)
    }

    /// What the cache drops as a compaction's output replaces `inputs` (when the job was
    /// not installed before publication): the blocks of the first of them to go, `file`,
    /// just dropped (how long they sat unread is gone with them: counted as none), and
    /// the inputs' blocks it still holds (they go with the same version, a moment later).
    fn dropping(
        &self,
        cache: &BlockCache,
        dropped: &[(u64, Arc<Block>)],
        file: u64,
        inputs: &[u64],
    ) -> Dropping {
        let mut blocks: Vec<(Arc<Block>, u64)> =
            dropped.iter().map(|(_, b)| (b.clone(), 0)).collect();
        let files = self.files.lock();
        for f in inputs.iter().filter(|f| **f != file) {
            for (off, _, _) in files.get(f).into_iter().flatten() {
                blocks.extend(cache.peek_idle(*f, *off));
            }
        }
        Dropping::with_idle(blocks)
    }
}

/// The engine's cache-warming machinery: the policy, the invalidation accounting and the
/// hooks the read, write and job paths call.
pub struct Warming {
    policy: Box<dyn CacheWarming>,
    cache: Arc<BlockCache>,
    tracking: Arc<Tracking>,
    jobs: AtomicU64,
    jobs_planned: AtomicU64,
    counters: Arc<JobCounters>,
    /// How ranges are cut (the learned policy's knobs; defaults for the others).
    range_params: LearnedParams,
    /// Data block size, to estimate blocks from file sizes.
    block_size: usize,
    cuts: AtomicU64,
    /// Whether jobs map their input blocks to key ranges and the key space is cut into
    /// ranges (see [`Warming::new`]).
    accounting: bool,
}

#[derive(Default)]
struct JobCounters {
    considered: AtomicU64,
    /// Blocks put into the cache, and those of them flushes put.
    admitted: AtomicU64,
    flush_admitted: AtomicU64,
    /// Admitted blocks a compaction's budget held no room for (lowest priority first).
    displaced: AtomicU64,
    /// Held blocks the policy no longer wanted when the output was installed.
    withdrawn: AtomicU64,
}

impl std::fmt::Debug for Warming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warming")
            .field("policy", &self.policy.name())
            .finish_non_exhaustive()
    }
}

impl Warming {
    /// The machinery for `config` over `cache` (registers the cache's erase listener).
    ///
    /// Every policy but `None` needs the key ranges and the map of input blocks to them;
    /// `None` keeps them only with `accounting` (to count the misses invalidation causes,
    /// the baseline `halflife leaper` compares against). Off, an engine without warming
    /// holds no per-block state: the map keeps two user keys per data block of every
    /// compaction input (with 256-byte keys and 4 KiB values, one entry per block, about
    /// 0.5 KiB per record) and each re-cut copies every index key of the tree.
    pub fn new(
        config: &CacheWarmingConfig,
        cache: Arc<BlockCache>,
        block_size: usize,
        accounting: bool,
    ) -> Warming {
        let policy: Box<dyn CacheWarming> = match config {
            CacheWarmingConfig::None => Box::new(NoWarming),
            CacheWarmingConfig::IncrementalWarmup => Box::new(incremental::IncrementalWarmup),
            CacheWarmingConfig::Learned(p) => Box::new(learned::Learned::new(p.clone())),
            // Under the learned policy's budget: the bound on what its knowledge can win.
            CacheWarmingConfig::Oracle(o) => Box::new(oracle::OracleWarming::new(
                o.0.clone(),
                learned::budget(&LearnedParams::default()),
            )),
        };
        let mut w = Self::with_policy(policy, cache);
        w.block_size = block_size;
        w.accounting = accounting || !matches!(config, CacheWarmingConfig::None);
        if let CacheWarmingConfig::Learned(p) = config {
            w.range_params = p.clone();
        }
        w
    }

    /// The machinery around any policy.
    pub fn with_policy(policy: Box<dyn CacheWarming>, cache: Arc<BlockCache>) -> Warming {
        let tracking = Arc::new(Tracking {
            cut: RwLock::new(None),
            deferred: Mutex::new(HashMap::new()),
            files: Mutex::new(HashMap::new()),
            published: Mutex::default(),
            recent_drops: Mutex::default(),
            reads: AtomicU64::new(0),
            invalidation_events: AtomicU64::new(0),
            invalidated_ranges: AtomicU64::new(0),
            unmapped_blocks: AtomicU64::new(0),
            invalidation_misses: AtomicU64::new(0),
        });
        let (t, c) = (Arc::downgrade(&tracking), Arc::downgrade(&cache));
        cache.set_erase_listener(Box::new(move |file, blocks| {
            if let (Some(t), Some(c)) = (t.upgrade(), c.upgrade()) {
                t.on_erase(&c, file, blocks);
            }
        }));
        Warming {
            policy,
            cache,
            tracking,
            jobs: AtomicU64::new(0),
            jobs_planned: AtomicU64::new(0),
            counters: Arc::default(),
            range_params: LearnedParams::default(),
            block_size: 4096,
            cuts: AtomicU64::new(0),
            accounting: true,
        }
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// A client read of `key`; `missed` if it missed the block cache.
    pub fn record_read(&self, key: &[u8], missed: bool) {
        let t = &self.tracking;
        let n = t.reads.fetch_add(1, Relaxed) + 1;
        if missed {
            if let Some(cut) = t.cut.read().as_ref() {
                if cut.charge_miss(key, n) {
                    t.invalidation_misses.fetch_add(1, Relaxed);
                }
            }
        }
        self.policy.record_read(key);
    }

    /// A client write (put or delete) of `key`.
    pub fn record_write(&self, key: &[u8]) {
        self.policy.record_write(key);
    }

    /// A flush (no `inputs`) or compaction starts. Cuts the key ranges from `version`'s
    /// tables if not done yet, maps the inputs' blocks to ranges for the invalidation
    /// accounting, and asks the policy what to prefetch. Errors opening an input only cost
    /// its warming: the job itself will report them.
    pub fn begin_job<'a>(
        &self,
        kind: JobKind,
        version: &Version,
        inputs: impl IntoIterator<Item = &'a Arc<TableFile>>,
    ) -> Option<JobWarming> {
        self.jobs.fetch_add(1, Relaxed);
        if !self.accounting {
            return None;
        }
        self.cut_ranges(version);
        let mut blocks = Vec::new();
        let mut cached_keys = Vec::new();
        let want_keys = self.policy.wants_cached_keys();
        let mut input_files = Vec::new();
        for f in inputs {
            input_files.push(f.number());
            let Ok(table) = f.table() else { continue };
            let start = blocks.len();
            let mut lo = user_key(&table.properties().smallest_key).to_vec();
            let mut it = table.index_block().iter();
            it.seek_to_first();
            while it.valid() {
                let Ok(h) = table.index_handle(it.key(), it.value()) else {
                    break;
                };
                let hi = user_key(it.key()).to_vec();
                let cached = if want_keys {
                    let b = self.cache.peek(f.number(), h.offset);
                    if let Some(b) = &b {
                        cached_keys.extend(BlockKeys::of(b).iter().map(KeySet::hash));
                    }
                    b.is_some()
                } else {
                    self.cache.contains(f.number(), h.offset)
                };
                blocks.push(InputBlock {
                    file: f.number(),
                    offset: h.offset,
                    lo: std::mem::replace(&mut lo, hi.clone()),
                    hi,
                    cached,
                });
                it.next();
            }
            let map: FileBlocks = blocks[start..]
                .iter()
                .map(|b| (b.offset, b.lo.clone(), b.hi.clone()))
                .collect();
            self.tracking.files.lock().insert(f.number(), map);
        }
        let older = (want_keys && kind == JobKind::Flush).then(|| {
            Arc::new(older_versions::OlderVersions::new(
                version,
                self.cache.clone(),
                self.tracking.dropped_recently(),
            ))
        });
        let filter = self.policy.plan(&JobInputs {
            kind,
            blocks: &blocks,
            cached_keys: &KeySet::from_hashes(cached_keys),
            older,
        });
        if filter.is_some() {
            self.jobs_planned.fetch_add(1, Relaxed);
        } else if input_files.is_empty() {
            return None;
        }
        let budget = self.policy.budget();
        let fraction = match (budget, kind) {
            (Budget::CacheFraction(f), _) => f,
            (Budget::ReplaceDropped { flush_fraction, .. }, JobKind::Flush) => flush_fraction,
            // Held up to twice the cache (the more held, the more choice at install), cut
            // to the dropped blocks then.
            (Budget::ReplaceDropped { .. }, JobKind::Compaction) => 2.0,
        };
        let limit = (self.cache.capacity() as f64 * fraction) as usize;
        let deferred = filter
            .as_ref()
            .filter(|_| !input_files.is_empty())
            .map(|filter| {
                let d = Arc::new(Deferred {
                    inputs: input_files.clone(),
                    budget,
                    filter: filter.clone(),
                    counters: self.counters.clone(),
                    hold: Mutex::new(Hold::new(limit as u64)),
                });
                let mut map = self.tracking.deferred.lock();
                for f in &d.inputs {
                    map.insert(*f, d.clone());
                }
                d
            });
        Some(JobWarming {
            cache: self.cache.clone(),
            tracking: self.tracking.clone(),
            inputs: input_files,
            filter,
            counters: self.counters.clone(),
            deferred,
            budget: Arc::new(AtomicU64::new(limit as u64)),
            remember_drops: want_keys,
        })
    }

    fn cut_ranges(&self, version: &Version) {
        let LearnedParams {
            blocks_per_range,
            min_ranges,
            max_ranges,
            ..
        } = self.range_params;
        // Estimated from file sizes: cheap enough for every job.
        let blocks: u64 = version
            .levels
            .iter()
            .flatten()
            .map(|f| f.meta.size / self.block_size.max(1) as u64)
            .sum();
        let last = self.tracking.cut.read().as_ref().map(|c| c.blocks);
        if last.is_some_and(|b| blocks < 4 * b) || blocks < min_ranges as u64 {
            return;
        }
        let mut keys = Vec::new();
        for f in version.levels.iter().flatten() {
            let Ok(t) = f.table() else { continue };
            let mut it = t.index_block().iter();
            it.seek_to_first();
            while it.valid() {
                keys.push(user_key(it.key()).to_vec());
                it.next();
            }
        }
        // Too few blocks to say anything about the key space yet.
        if keys.len() < min_ranges {
            return;
        }
        keys.sort_unstable();
        let Some(r) = KeyRanges::from_sorted_keys(&keys, blocks_per_range, min_ranges, max_ranges)
        else {
            return;
        };
        let r = Arc::new(r);
        *self.tracking.cut.write() = Some(Arc::new(Cut::new(r.clone(), blocks)));
        self.cuts.fetch_add(1, Relaxed);
        let blocks_per_range = (blocks as f64 / r.len() as f64).max(1.0);
        let cache_blocks = self.cache.capacity() as f64 / self.block_size.max(1) as f64;
        let budget = cache_blocks * self.range_params.cache_fraction / blocks_per_range;
        self.policy.on_ranges(&r, budget as usize);
    }

    pub fn stats(&self) -> WarmingStats {
        let t = &self.tracking;
        let mut s = WarmingStats {
            policy: self.policy.name().to_string(),
            ranges: t.cut.read().as_ref().map_or(0, |c| c.ranges.len() as u64),
            range_cuts: self.cuts.load(Relaxed),
            reads: t.reads.load(Relaxed),
            invalidation_events: t.invalidation_events.load(Relaxed),
            invalidated_ranges: t.invalidated_ranges.load(Relaxed),
            unmapped_invalidated_blocks: t.unmapped_blocks.load(Relaxed),
            invalidation_misses: t.invalidation_misses.load(Relaxed),
            invalidation_window_reads: INVALIDATION_WINDOW_READS,
            jobs: self.jobs.load(Relaxed),
            jobs_planned: self.jobs_planned.load(Relaxed),
            blocks_considered: self.counters.considered.load(Relaxed),
            blocks_admitted: self.counters.admitted.load(Relaxed),
            flush_blocks_admitted: self.counters.flush_admitted.load(Relaxed),
            blocks_displaced: self.counters.displaced.load(Relaxed),
            blocks_withdrawn: self.counters.withdrawn.load(Relaxed),
            ..WarmingStats::default()
        };
        self.policy.stats(&mut s);
        s
    }
}

/// One job's prefetch plan.
///
/// A compaction's output is invisible to readers until the job installs it, and a large
/// job runs long enough for the cache to turn over many times: blocks inserted as they are
/// written would be evicted before anyone could read them. So the admitted blocks of a
/// compaction are held (already decoded: still no extra read), the highest priorities
/// within the policy's [`Budget`], and inserted, least valuable first, just before the
/// engine publishes the output to readers ([`JobWarming::install`]; failing that, when
/// its first input file is deleted, i.e. once the output has replaced the inputs). A flush's
/// output is inserted as written (a flush is short, and has no inputs to wait for), the
/// first blocks taking the budget.
pub struct JobWarming {
    cache: Arc<BlockCache>,
    tracking: Arc<Tracking>,
    /// The job's input files (none for a flush).
    inputs: Vec<u64>,
    /// `None`: the policy prefetches nothing for this job (its inputs are still counted).
    filter: Option<Arc<dyn BlockFilter>>,
    counters: Arc<JobCounters>,
    deferred: Option<Arc<Deferred>>,
    /// Bytes the job may still admit.
    budget: Arc<AtomicU64>,
    /// The install keeps the keys it drops for later flushes ([`Tracking::recent_drops`]).
    remember_drops: bool,
}

/// A compaction's admitted blocks, waiting for its inputs to go.
struct Deferred {
    inputs: Vec<u64>,
    budget: Budget,
    filter: Arc<dyn BlockFilter>,
    counters: Arc<JobCounters>,
    hold: Mutex<Hold>,
}

impl Deferred {
    /// The output replaces the inputs: the held blocks the policy still wants enter the
    /// cache, least valuable first, so that the most valuable are the last to be evicted.
    fn install(&self, cache: &BlockCache, dropping: &Dropping) {
        let held = std::mem::replace(&mut *self.hold.lock(), Hold::new(0)).heap;
        let room = match self.budget {
            Budget::ReplaceDropped { factor, .. } => {
                (dropping.len() as f64 * factor).ceil() as usize
            }
            Budget::CacheFraction(_) => usize::MAX,
        };
        let room = self
            .filter
            .limit()
            .map_or(room, |l| room.min(usize::try_from(l).unwrap_or(usize::MAX)));
        if room == 0 {
            // Nothing of the inputs was cached (nothing to replace, nothing to judge), or
            // the policy may load nothing more.
            self.filter.loaded(0);
            self.counters
                .displaced
                .fetch_add(held.len() as u64, Relaxed);
            return;
        }
        let mut keep: Vec<Held> = Vec::with_capacity(held.len());
        for std::cmp::Reverse(mut h) in held {
            let c = Candidate {
                block: &h.block,
                first: &h.first,
                last: &h.last,
                hashes: &h.hashes,
                priority: h.priority,
            };
            match self.filter.at_install(&c, dropping) {
                Some(p) => {
                    h.priority = p;
                    keep.push(h);
                }
                None => {
                    self.counters.withdrawn.fetch_add(1, Relaxed);
                }
            }
        }
        keep.sort_unstable();
        let over = keep.len().saturating_sub(room);
        self.counters.displaced.fetch_add(over as u64, Relaxed);
        keep.drain(..over);
        self.counters.admitted.fetch_add(keep.len() as u64, Relaxed);
        self.filter.loaded(keep.len() as u64);
        for h in keep {
            cache.insert_prefetched(h.file, h.offset, h.block);
        }
    }
}

/// An admitted block held for a compaction's install.
struct Held {
    priority: f64,
    first: Vec<u8>,
    last: Vec<u8>,
    hashes: Vec<u64>,
    /// Order of admission: of two blocks of equal priority the earlier is kept.
    seq: u64,
    file: u64,
    offset: u64,
    block: Arc<crate::sst::block::Block>,
}

impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.priority
            .total_cmp(&o.priority)
            .then_with(|| o.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}

impl Eq for Held {}

/// The blocks of highest priority a compaction admitted, at most `budget` bytes of them.
struct Hold {
    heap: std::collections::BinaryHeap<std::cmp::Reverse<Held>>,
    bytes: u64,
    budget: u64,
    next_seq: u64,
}

impl Hold {
    fn new(budget: u64) -> Hold {
        Hold {
            heap: Default::default(),
            bytes: 0,
            budget,
            next_seq: 0,
        }
    }

    /// Adds a block; returns how many blocks (possibly this one) no longer fit.
    fn push(
        &mut self,
        priority: f64,
        keys: &BlockKeys,
        file: u64,
        offset: u64,
        block: Arc<crate::sst::block::Block>,
    ) -> u64 {
        self.bytes += block.size_in_bytes() as u64;
        self.heap.push(std::cmp::Reverse(Held {
            priority,
            first: keys.first().unwrap_or_default().to_vec(),
            last: keys.last().unwrap_or_default().to_vec(),
            hashes: keys.iter().map(KeySet::hash).collect(),
            seq: self.next_seq,
            file,
            offset,
            block,
        }));
        self.next_seq += 1;
        let mut displaced = 0;
        while self.bytes > self.budget {
            let Some(std::cmp::Reverse(h)) = self.heap.pop() else {
                break;
            };
            self.bytes -= h.block.size_in_bytes() as u64;
            displaced += 1;
        }
        displaced
    }
}

impl std::fmt::Debug for JobWarming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobWarming").finish_non_exhaustive()
    }
}

impl JobWarming {
    /// A compaction's output is about to replace its inputs for readers (the engine calls
    /// this before it publishes the new version): the held blocks the policy still wants
    /// enter the cache now, judged against the input blocks the cache holds and is about
    /// to drop. Readers still read the inputs, which are cached, while the policy decides
    /// (the oracle's window of the future, the learned policy's list of dropped keys), and
    /// find the output's blocks cached from their first read of it.
    ///
    /// Without this call the blocks go in when the first input file is deleted, after
    /// the new version is visible: the reads in between miss, and the inserts run on the
    /// thread that drops the last reference to that file, a client's read among them.
    ///
    /// From this call on the inputs' cached blocks count as dropped for the invalidation
    /// count, whatever the policy ([`Tracking::publish`]).
    pub fn install(&self) {
        let t = &self.tracking;
        let claimed = self
            .deferred
            .as_ref()
            .and_then(|d| t.claim(*d.inputs.first()?));
        let dropping = Dropping::with_idle(t.publish(&self.cache, &self.inputs));
        if let Some(d) = claimed {
            d.install(&self.cache, &dropping);
        }
        if self.remember_drops && !dropping.is_empty() {
            t.remember_drops(dropping.keys());
        }
    }

    /// The sink for the table builder of output file `file_number`: each data block the
    /// filter admits goes into the cache as it is written.
    pub fn sink(&self, file_number: u64) -> BlockSink {
        let Some(filter) = self.filter.clone() else {
            return Box::new(|_, _| {});
        };
        let cache = self.cache.clone();
        let counters = self.counters.clone();
        let deferred = self.deferred.clone();
        let budget = self.budget.clone();
        Box::new(move |offset, block| {
            counters.considered.fetch_add(1, Relaxed);
            let keys = BlockKeys::of(block);
            if keys.is_empty() {
                return;
            }
            let Some(priority) = filter.admit(&keys) else {
                return;
            };
            if let Some(d) = &deferred {
                let displaced =
                    d.hold
                        .lock()
                        .push(priority, &keys, file_number, offset, Arc::clone(block));
                counters.displaced.fetch_add(displaced, Relaxed);
                return;
            }
            // A flush inserts as it writes, so its blocks are judged as installed at once
            // (no input was dropped), and the first blocks take the budget.
            let hashes: Vec<u64> = keys.iter().map(KeySet::hash).collect();
            let c = Candidate {
                block,
                first: keys.first().unwrap_or_default(),
                last: keys.last().unwrap_or_default(),
                hashes: &hashes,
                priority,
            };
            if filter.at_install(&c, &Dropping::default()).is_none() {
                counters.withdrawn.fetch_add(1, Relaxed);
                return;
            }
            let size = block.size_in_bytes() as u64;
            if budget
                .fetch_update(Relaxed, Relaxed, |b| b.checked_sub(size))
                .is_err()
            {
                counters.displaced.fetch_add(1, Relaxed);
                return;
            }
            counters.admitted.fetch_add(1, Relaxed);
            counters.flush_admitted.fetch_add(1, Relaxed);
            filter.loaded(1);
            cache.insert_prefetched(file_number, offset, Arc::clone(block));
        })
    }
}

#[cfg(test)]
mod tests;
