//! Leaper: the collector counts reads per key range per slot; a background thread trains a
//! gradient-boosting classifier on the history, and a flush or compaction asks for its
//! prediction of which ranges will be read in the next slot. What a job then caches
//! ([`Hybrid`]) starts from what the baseline knows, the keys of the input blocks that are
//! cached, and lets the model rank them and add the blocks of ranges it predicts hot; the
//! budget is the blocks the compaction drops from the cache ([`Budget::ReplaceDropped`]).
//! Until the first model is trained it is the baseline, per key, under that budget.
//!
//! Training runs on the trainer thread, the "resources the database does not use" of the
//! slides. Prediction runs when a flush or compaction asks for it, at most once per slot
//! (later jobs of the same slot reuse it), and training only once a job has asked since
//! the last one: a workload without writes, whose cache no job disturbs, pays for the
//! sampled collection only.

use super::collector::{self, Collector, Collectors};
use super::features::{write_row, TrainingSet, NUM_FEATURES, SLOTS_NEEDED};
use super::incremental::CachedIntervals;
use super::model::HotRangeModel;
use super::older_versions::OlderVersions;
use super::ranges::KeyRanges;
use super::{
    BlockFilter, BlockKeys, Budget, CacheWarming, Candidate, Dropping, JobInputs, JobKind, KeySet,
    WarmingStats, INVALIDATION_WINDOW_READS,
};
use crate::options::warming::LearnedParams;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The newest prediction: per key range, the probability that it is read in the next
/// slot, and the ranges a flush may warm (the most probable, at most what the flush budget
/// holds).
#[derive(Debug)]
pub struct RangeScores {
    pub ranges: Arc<KeyRanges>,
    pub probability: Vec<f32>,
    pub hot: Vec<bool>,
}

impl RangeScores {
    /// The highest probability among the ranges holding one of `keys`, and whether one of
    /// those ranges is hot. (Not every range the block's key interval spans: a block of a
    /// flush or of a small level is sparse, its keys spread over many ranges, and would be
    /// judged by ranges it holds nothing of.)
    pub fn of_keys(&self, keys: &BlockKeys) -> (f32, bool) {
        let mut keys = keys.iter();
        let Some(first) = keys.next() else {
            return (0.0, false);
        };
        let mut r = self.ranges.range_of(first);
        let (mut p, mut hot) = (self.probability[r], self.hot[r]);
        for k in keys {
            r = self.ranges.advance(r, k);
            p = p.max(self.probability[r]);
            hot |= self.hot[r];
        }
        (p, hot)
    }
}

/// The learned policy's decision for one job. It knows what the baseline knows, the input
/// blocks that are cached, and what the model predicts:
///
/// - a block holding a key of a cached input block (cached at the job's start, or at its
///   install: blocks read during the job count too) is admitted, ranked above every other
///   by [`CACHED_BONUS`] plus its ranges' probability: the baseline's knowledge, per key
///   rather than per key interval (a flush's block spans the key intervals of dozens of
///   deeper blocks, and holds keys of a few), with the model deciding which of it the
///   budget keeps;
/// - a block holding a key of a predicted-hot range is admitted with its probability as
///   its priority, and fills what room the budget leaves.
///
/// At a compaction's install the blocks holding a key the cache drops then are ranked by
/// how recently the dropped block was read (see [`BlockFilter::at_install`] below).
///
/// A flush has no input blocks; its baseline signal is a key whose previous version was
/// in a cached block ([`OlderVersions`]): the key was being read, and its reads go to the
/// flush's uncached L0 file from the flush's install on. Of those, a key whose cached
/// block a compaction dropped within the invalidation window ranks first ([`REPAIR`]).
///
/// With the loads held to the baseline's ([`LearnedParams::loads_within_baseline`]), a
/// compaction loads at most what incremental warm-up would load of its output plus what
/// earlier jobs left unspent, and a flush only what is unspent, but for [`REPAIR`]
/// blocks, which it loads on credit.
///
/// Without a model yet it is the baseline, under the learned policy's budget.
pub struct Hybrid {
    scores: Option<Arc<RangeScores>>,
    cached: KeySet,
    older: Option<Arc<OlderVersions>>,
    /// A compaction's: every block is held, so that the install can take the blocks of
    /// keys that were read into the cache while the job ran.
    hold_all: bool,
    /// With [`LearnedParams::loads_within_baseline`]: the blocks the policy may load
    /// beyond what incremental warm-up would have loaded so far, and for a compaction
    /// the key intervals of its cached input blocks, by which the output blocks
    /// incremental warm-up would load are counted as they are written.
    ledger: Option<Arc<AtomicI64>>,
    baseline: Option<CachedIntervals>,
    baseline_blocks: AtomicU64,
}

impl Hybrid {
    pub fn new(scores: Option<Arc<RangeScores>>, cached: KeySet) -> Hybrid {
        Hybrid {
            scores,
            cached,
            older: None,
            hold_all: false,
            ledger: None,
            baseline: None,
            baseline_blocks: AtomicU64::new(0),
        }
    }

    /// Loads stay within incremental warm-up's: `ledger` is what earlier jobs left
    /// unspent; a compaction adds what the baseline would load of its output, counted
    /// against `baseline`, its cached input blocks' key intervals (`None` for a flush).
    pub fn within(mut self, ledger: Arc<AtomicI64>, baseline: Option<CachedIntervals>) -> Hybrid {
        self.ledger = Some(ledger);
        self.baseline = baseline;
        self
    }

    /// For a compaction: blocks neither cached at the start nor hot are held too, below
    /// every other ([`UNSEEN`]), and kept at the install only if they hold a key the cache
    /// drops then. A compaction runs for tens of thousands of reads while the cache turns
    /// over, and on the synthetic workload half the invalidation misses the learned policy
    /// left were keys of output blocks refused at the job's start whose input blocks were
    /// read into the cache while the job ran (docs/leaper.md, "Third pass").
    pub fn holding_all(mut self) -> Hybrid {
        self.hold_all = true;
        self
    }

    /// For a flush: blocks holding a key whose previous version was cached count as the
    /// baseline's.
    pub fn with_older(mut self, older: Option<Arc<OlderVersions>>) -> Hybrid {
        self.older = older;
        self
    }

    fn score(&self, keys: &BlockKeys) -> (f64, bool) {
        self.scores.as_ref().map_or((0.0, false), |s| {
            let (p, hot) = s.of_keys(keys);
            (f64::from(p), hot)
        })
    }
}

/// Slots in a row without a write after which reads are no longer sampled (until the next
/// write): more than the features' window ([`SLOTS_NEEDED`](super::features::SLOTS_NEEDED)
/// slots), so that the history a job finds after a quiet spell ends with its reads.
pub const QUIET_SLOTS: u64 = 8;

/// Added to the priority (a probability, at most 1) of a block the baseline would load.
const CACHED_BONUS: f64 = 2.0;

/// Added to the priority of a flush's block holding a key whose cached block a
/// compaction's install dropped within the invalidation window
/// ([`OlderVersions::dropped_recently`]): its reads would be that compaction's
/// invalidation misses, so it is warmed even on credit when loads are held to the
/// baseline's (the next compactions repay it).
const REPAIR: f64 = CACHED_BONUS + 2.0;

/// The weight of the model's probability beside [`freshness`] in the rank of a block
/// holding a dropped key: it orders blocks whose dropped blocks were read equally
/// recently.
const MODEL_TIE: f64 = 1.0 / 1024.0;

/// In (0, 1], falling with the lookups of the cache since a dropped block was last read;
/// one half at a window ([`INVALIDATION_WINDOW_READS`]) of them.
fn freshness(idle: u64) -> f64 {
    1.0 / (1.0 + idle as f64 / INVALIDATION_WINDOW_READS as f64)
}

/// Added to the priority of a compaction's block that is neither the baseline's nor hot
/// when written: held below every other, withdrawn at the install unless the cache drops
/// one of its keys then.
const UNSEEN: f64 = -1.0;

impl BlockFilter for Hybrid {
    fn admit(&self, keys: &BlockKeys) -> Option<f64> {
        if let (Some(b), Some(first), Some(last)) = (&self.baseline, keys.first(), keys.last()) {
            if b.overlaps(first, last) {
                self.baseline_blocks.fetch_add(1, Relaxed);
            }
        }
        let (p, hot) = self.score(keys);
        if let Some(o) = &self.older {
            if keys.iter().any(|k| o.dropped_recently(k)) {
                return Some(p + REPAIR);
            }
        }
        let cached = (!self.cached.is_empty() && keys.iter().any(|k| self.cached.contains(k)))
            || self
                .older
                .as_ref()
                .is_some_and(|o| keys.iter().any(|k| o.cached(k)));
        if cached {
            Some(p + CACHED_BONUS)
        } else if hot {
            Some(p)
        } else {
            self.hold_all.then_some(p + UNSEEN)
        }
    }

    /// A compaction's held block is ranked again at the install by what the cache drops
    /// then: a block holding a key of a dropped block ranks above every other, the more
    /// recently that block was read the higher ([`freshness`]), the model's probability
    /// breaking ties. A block of the baseline's whose keys' input blocks were evicted
    /// while the job ran (nobody read them) falls to the model's rank; a block neither
    /// the baseline's nor hot is withdrawn unless the cache drops one of its keys.
    ///
    /// (The rank by the model's probability alone, measured, cut blocks that were read
    /// when the loads were held to the baseline's; how recently a dropped block was read
    /// is what tells the blocks read within the window from the rest, docs/leaper.md,
    /// "Fourth pass".)
    fn at_install(&self, held: &Candidate<'_>, dropping: &Dropping) -> Option<f64> {
        if dropping.is_empty() {
            // A flush's block, judged as written (or a compaction that drops nothing,
            // which installs nothing). One that repairs a compaction's invalidation
            // ([`REPAIR`]) may borrow against the compactions to come; any other only
            // loads what the compactions saved.
            let unfunded = held.priority < REPAIR && self.limit() == Some(0);
            return (held.priority >= 0.0 && !unfunded).then_some(held.priority);
        }
        let p = if held.priority >= REPAIR {
            held.priority - REPAIR
        } else if held.priority >= CACHED_BONUS {
            held.priority - CACHED_BONUS
        } else if held.priority < 0.0 {
            held.priority - UNSEEN
        } else {
            held.priority
        };
        match dropping.idle(held.hashes) {
            Some(idle) => Some(CACHED_BONUS + freshness(idle) + p * MODEL_TIE),
            None => (held.priority >= 0.0).then_some(p),
        }
    }

    /// A compaction may load what the baseline would load of its output, plus what the
    /// compactions before it saved against the baseline and no flush spent; a flush only
    /// those savings (the baseline loads nothing for a flush), but for its [`REPAIR`]
    /// blocks, loaded on credit that the next compactions repay (their least recently
    /// read blocks cut first). Otherwise a compaction is not held below the baseline's
    /// count: when every flush block borrowed, the blocks the repayments cut were read
    /// (docs/leaper.md, "Third pass", "Fourth pass").
    fn limit(&self) -> Option<u64> {
        let ledger = self.ledger.as_ref()?.load(Relaxed);
        let baseline = if self.baseline.is_some() {
            self.baseline_blocks.load(Relaxed) as i64
        } else {
            0
        };
        Some((ledger + baseline).max(0) as u64)
    }

    fn loaded(&self, blocks: u64) {
        if let Some(l) = &self.ledger {
            l.fetch_add(
                self.baseline_blocks.load(Relaxed) as i64 - blocks as i64,
                Relaxed,
            );
        }
    }
}

/// The model's probability for every range after the newest of `slots`; `None` without
/// enough history.
pub fn predict(
    slots: &VecDeque<crate::warming::collector::SlotCounts>,
    probability: impl Fn(&[f64]) -> f64,
) -> Option<Vec<f32>> {
    if slots.len() < SLOTS_NEEDED {
        return None;
    }
    let t = slots.len() - 1;
    let n = slots[t].reads.len();
    let mut row = [0.0; NUM_FEATURES];
    Some(
        (0..n)
            .map(|r| {
                write_row(slots, t, r, &mut row);
                probability(&row) as f32
            })
            .collect(),
    )
}

/// The ranges whose probability reaches `threshold`, the most probable first, at most
/// `max_hot` of them (what the cache can take: prefetching more than it holds only evicts
/// the prefetched blocks, and whatever readers had cached, before anyone reads them).
pub fn hot_ranges(probability: &[f32], threshold: f64, max_hot: usize) -> Vec<bool> {
    let mut ranked: Vec<(f32, usize)> = probability
        .iter()
        .enumerate()
        .filter(|(_, p)| f64::from(**p) >= threshold)
        .map(|(r, p)| (*p, r))
        .collect();
    if ranked.len() > max_hot {
        ranked.select_nth_unstable_by(max_hot, |a, b| b.0.total_cmp(&a.0));
        ranked.truncate(max_hot);
    }
    let mut hot = vec![false; probability.len()];
    for (_, r) in ranked {
        hot[r] = true;
    }
    hot
}

#[derive(Default)]
struct Counters {
    trainings: AtomicU64,
    training_failures: AtomicU64,
    training_micros: AtomicU64,
    last_training_rows: AtomicU64,
    last_training_positives: AtomicU64,
    model_trees: AtomicU64,
    predictions: AtomicU64,
    prediction_micros: AtomicU64,
    hot_ranges: AtomicU64,
}

struct Shared {
    params: LearnedParams,
    /// Replaced when the key space is cut again.
    collectors: Collectors,
    /// Most ranges a prediction may call hot (set with the ranges).
    max_hot: AtomicU64,
    /// The newest model, and the last prediction with the slot count it was made at.
    model: RwLock<Option<Arc<HotRangeModel>>>,
    hot: RwLock<Option<(u64, Arc<RangeScores>)>>,
    /// A job asked for a prediction since the last training. Training is skipped until
    /// one does: a workload that flushes and compacts nothing has no use for a model, and
    /// training on its history would take CPU from its reads.
    demand: AtomicBool,
    /// Reads are sampled: the workload wrote within the last [`QUIET_SLOTS`] slots (see
    /// [`Learned::record_read`]).
    sampling: AtomicBool,
    wake: Mutex<bool>,
    cv: Condvar,
    stop: AtomicBool,
    counters: Counters,
    /// Blocks incremental warm-up would have loaded for the jobs so far, less those this
    /// policy loaded ([`LearnedParams::loads_within_baseline`]).
    ledger: Arc<AtomicI64>,
}

impl Shared {
    fn new(params: LearnedParams) -> Shared {
        Shared {
            params,
            collectors: Collectors::default(),
            max_hot: AtomicU64::new(u64::MAX),
            model: RwLock::new(None),
            hot: RwLock::new(None),
            demand: AtomicBool::new(false),
            sampling: AtomicBool::new(true),
            wake: Mutex::new(false),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            ledger: Arc::default(),
        }
    }
}

/// The learned policy and its trainer thread (stopped and joined on drop).
pub struct Learned {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Learned {
    pub fn new(params: LearnedParams) -> Learned {
        let shared = Arc::new(Shared::new(params));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("halflife-leaper".into())
            .spawn(move || trainer(&s))
            .expect("spawn the cache-warming trainer");
        Learned {
            shared,
            thread: Mutex::new(Some(thread)),
        }
    }

    /// The policy without its trainer thread: tests run the trainer's steps themselves.
    #[cfg(test)]
    fn without_trainer(params: LearnedParams) -> Learned {
        Learned {
            shared: Arc::new(Shared::new(params)),
            thread: Mutex::new(None),
        }
    }

    fn wake(&self) {
        *self.shared.wake.lock() = true;
        self.shared.cv.notify_one();
    }
}

impl Learned {
    /// The newest model's prediction for the slot after the last completed one (made at
    /// most once per slot: later jobs of the slot reuse it); `None` before the first model.
    fn scores(&self) -> Option<Arc<RangeScores>> {
        let s = &self.shared;
        let col = s.collectors.current()?.clone();
        s.demand.store(true, Relaxed);
        let model = s.model.read().clone()?;
        let completed = col.completed_slots();
        if let Some((at, scores)) = s.hot.read().as_ref() {
            if *at == completed {
                return Some(scores.clone());
            }
        }
        let c = &s.counters;
        let t0 = Instant::now();
        let slots = col.with_history(|h| h.slots.clone());
        let probability = predict(&slots, |row| model.probability(row));
        c.prediction_micros
            .fetch_add(t0.elapsed().as_micros() as u64, Relaxed);
        let probability = probability?;
        let max_hot = s.max_hot.load(Relaxed).min(usize::MAX as u64) as usize;
        let hot = hot_ranges(&probability, s.params.threshold, max_hot);
        c.predictions.fetch_add(1, Relaxed);
        c.hot_ranges
            .store(hot.iter().filter(|&&h| h).count() as u64, Relaxed);
        let scores = Arc::new(RangeScores {
            ranges: col.ranges().clone(),
            probability,
            hot,
        });
        *s.hot.write() = Some((completed, scores.clone()));
        Some(scores)
    }
}

impl Drop for Learned {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        self.wake();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl CacheWarming for Learned {
    fn name(&self) -> &'static str {
        "learned"
    }

    fn on_ranges(&self, ranges: &Arc<KeyRanges>, max_hot: usize) {
        let p = &self.shared.params;
        self.shared.max_hot.store(max_hot as u64, Relaxed);
        let per_ranges = (ranges.len() as f64 * p.slot_reads_per_range) as u64 * p.sample_every;
        self.shared.collectors.replace(Collector::new(
            ranges.clone(),
            p.sample_every,
            p.slot_reads.max(per_ranges),
            p.history_slots,
        ));
    }

    /// Unsampled reads touch nothing shared.
    ///
    /// Nor do any reads once [`QUIET_SLOTS`] slots in a row saw no write: without writes
    /// there is no flush or compaction, so no invalidation to prefetch for and no use for
    /// a prediction, and the sampled reads (a range search and a shared counter each)
    /// were the learned policy's whole cost on a read-only workload. The next write
    /// resumes sampling; the first job it leads to comes a memtable's worth of writes
    /// later, with the slots sampled since then on top of the history from before.
    fn record_read(&self, key: &[u8]) {
        let s = &self.shared;
        if !collector::sample_read(s.params.sample_every) || !s.sampling.load(Relaxed) {
            return;
        }
        if let Some(c) = s.collectors.current() {
            if c.record_sampled_read(key) {
                if c.with_history(|h| h.quiet) >= QUIET_SLOTS {
                    s.sampling.store(false, Relaxed);
                }
                // Only a trainer with something to do is woken (a futex wake and a
                // context switch per slot, on a client's read); it looks by itself
                // every 200 ms.
                if s.demand.load(Relaxed) {
                    self.wake();
                }
            }
        }
    }

    fn record_write(&self, key: &[u8]) {
        // A load first: the flag's cache line stays shared while it is set.
        if !self.shared.sampling.load(Relaxed) {
            self.shared.sampling.store(true, Relaxed);
        }
        if !collector::sample_write(self.shared.params.sample_every) {
            return;
        }
        if let Some(c) = self.shared.collectors.current() {
            c.record_sampled_write(key);
        }
    }

    fn plan(&self, job: &JobInputs<'_>) -> Option<Arc<dyn BlockFilter>> {
        let scores = self.scores();
        if job.kind == JobKind::Flush && scores.is_none() && job.older.is_none() {
            return None;
        }
        let mut h = Hybrid::new(scores, job.cached_keys.clone()).with_older(job.older.clone());
        if self.shared.params.loads_within_baseline {
            let baseline = (job.kind == JobKind::Compaction)
                .then(|| super::incremental::cached_intervals(job.blocks));
            h = h.within(self.shared.ledger.clone(), baseline);
        }
        Some(Arc::new(match job.kind {
            JobKind::Compaction => h.holding_all(),
            JobKind::Flush => h,
        }))
    }

    fn budget(&self) -> Budget {
        budget(&self.shared.params)
    }

    fn wants_cached_keys(&self) -> bool {
        true
    }

    fn stats(&self, s: &mut WarmingStats) {
        let c = &self.shared.counters;
        if let Some(col) = self.shared.collectors.current() {
            s.slots = col.completed_slots();
            (s.sampled_reads, s.sampled_writes) = col.sampled();
        }
        s.trainings = c.trainings.load(Relaxed);
        s.training_failures = c.training_failures.load(Relaxed);
        s.training_micros = c.training_micros.load(Relaxed);
        s.last_training_rows = c.last_training_rows.load(Relaxed);
        s.last_training_positives = c.last_training_positives.load(Relaxed);
        s.model_trees = c.model_trees.load(Relaxed);
        s.predictions = c.predictions.load(Relaxed);
        s.prediction_micros = c.prediction_micros.load(Relaxed);
        s.hot_ranges = c.hot_ranges.load(Relaxed);
    }
}

fn trainer(s: &Shared) {
    let mut state = TrainerState::default();
    loop {
        {
            let mut w = s.wake.lock();
            while !*w && !s.stop.load(Relaxed) {
                s.cv.wait_for(&mut w, Duration::from_millis(200));
            }
            *w = false;
        }
        if s.stop.load(Relaxed) {
            return;
        }
        train_if_due(s, &mut state);
    }
}

/// What the trainer remembers between its looks.
#[derive(Default)]
struct TrainerState {
    /// Completed slots at the last look, and at the last training, of `current`.
    seen: u64,
    last_train: Option<u64>,
    current: Option<Arc<Collector>>,
}

/// One look of the trainer (on its thread; tests call it directly): trains a model on
/// the current collector's history if a slot ended since the last look, enough slots
/// exist (or enough passed since the last training), and a job asked for a prediction.
fn train_if_due(s: &Shared, st: &mut TrainerState) {
    let p = &s.params;
    let c = &s.counters;
    let Some(col) = s.collectors.current().cloned() else {
        return;
    };
    if !st.current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &col)) {
        // New ranges: their history starts now (the model, trained on per-range
        // counts, stays usable once enough slots are in).
        st.current = Some(col.clone());
        st.seen = 0;
        st.last_train = None;
    }
    let (completed, len) = col.with_history(|h| (h.completed, h.slots.len()));
    if completed == st.seen {
        return;
    }
    st.seen = completed;
    let due = match st.last_train {
        None => len >= p.min_train_slots,
        Some(t) => completed - t >= p.retrain_every_slots as u64,
    };
    if due && s.demand.swap(false, Relaxed) {
        let t0 = Instant::now();
        let slots = col.with_history(|h| h.slots.clone());
        let set = TrainingSet::build(&slots, p.max_training_rows, completed);
        let r = HotRangeModel::train(&set, p.gbm_iterations, p.gbm_max_depth, p.gbm_learning_rate);
        c.training_micros
            .fetch_add(t0.elapsed().as_micros() as u64, Relaxed);
        c.last_training_rows.store(set.len() as u64, Relaxed);
        c.last_training_positives
            .store(set.positives() as u64, Relaxed);
        st.last_train = Some(completed);
        match r {
            Ok(m) => {
                c.trainings.fetch_add(1, Relaxed);
                c.model_trees.store(m.num_trees() as u64, Relaxed);
                *s.model.write() = Some(Arc::new(m));
                // The next job predicts with the new model.
                *s.hot.write() = None;
            }
            // One class only (nothing read, or everything read): keep the old model.
            Err(_) => {
                c.training_failures.fetch_add(1, Relaxed);
            }
        }
    }
}

/// The prefetch budget of a job under `params`.
pub fn budget(params: &LearnedParams) -> Budget {
    Budget::ReplaceDropped {
        factor: params.replace_factor,
        flush_fraction: params.cache_fraction,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warming::collector::SlotCounts;

    fn ranges(n: usize) -> Arc<KeyRanges> {
        let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("k{i:04}").into_bytes()).collect();
        Arc::new(KeyRanges::from_sorted_keys(&keys, 1, 2, n).unwrap())
    }

    fn scores(hot_range: usize) -> Arc<RangeScores> {
        let mut hot = vec![false; 10];
        hot[hot_range] = true;
        Arc::new(RangeScores {
            ranges: ranges(10),
            probability: (0..10).map(|r| r as f32 / 20.0).collect(),
            hot,
        })
    }

    #[test]
    fn admits_blocks_touching_a_hot_range() {
        let h = Hybrid::new(Some(scores(4)), KeySet::default());
        let admit = |keys: &[&str]| h.admit(&BlockKeys::from_keys(keys)).is_some();
        assert!(admit(&["k0004"]));
        assert!(
            admit(&["k0002", "k0004x", "k0005"]),
            "a key in the hot range"
        );
        assert!(
            !admit(&["k0002", "k0005"]),
            "spans the hot range but holds none of it"
        );
        assert!(!admit(&["k0005", "k0009"]));
        assert!(!admit(&["k0000", "k0003x"]));
    }

    /// The baseline's blocks (holding a key of a cached input block) rank above every
    /// other, the model's probability orders each group, and a block whose keys were read
    /// during the job (cached at install) joins the baseline's group then; at a
    /// compaction's install that group is ranked by how recently the dropped blocks were
    /// read.
    #[test]
    fn hybrid_ranks_the_baselines_blocks_first_then_by_probability() {
        let set = |keys: &[&str]| KeySet::of(&BlockKeys::from_keys(keys));
        let h = Hybrid::new(Some(scores(4)), set(&["k0001x", "k0002"]));
        let p = |keys: &[&str]| h.admit(&BlockKeys::from_keys(keys));
        let cached_low = p(&["k0001x"]).unwrap();
        let hot = p(&["k0004"]).unwrap();
        assert!((cached_low - (CACHED_BONUS + 0.05)).abs() < 1e-6);
        assert!((hot - 0.2).abs() < 1e-6);
        assert!(cached_low > hot, "the baseline's signal first");
        assert_eq!(p(&["k0007"]), None, "neither cached nor hot");
        assert_eq!(
            p(&["k0001y"]),
            None,
            "in a cached block's interval, not among its keys"
        );
        // Without a model: exactly the baseline's knowledge.
        let base = Hybrid::new(None, set(&["k0001x", "k0002"]));
        assert_eq!(
            base.admit(&BlockKeys::from_keys(&["k0001x"])),
            Some(CACHED_BONUS)
        );
        assert_eq!(base.admit(&BlockKeys::from_keys(&["k0004"])), None);
        // At install: the hot block's interval was read into the cache meanwhile.
        let block = |keys: &[&str]| {
            use crate::internal_key::{make_internal_key, ValueKind};
            use crate::sst::block::{Block, BlockBuilder};
            let mut bb = BlockBuilder::new(16);
            for k in keys {
                bb.add(&make_internal_key(k.as_bytes(), 1, ValueKind::Value), b"v");
            }
            Arc::new(Block::new(bb.finish()).unwrap())
        };
        let b = block(&["k0004"]);
        let hashes = [KeySet::hash(b"k0004")];
        let c = Candidate {
            block: &b,
            first: b"k0004",
            last: b"k0004",
            hashes: &hashes,
            priority: hot,
        };
        let now = Dropping::new(vec![block(&["k0004", "k0009"])]);
        let fresh = CACHED_BONUS + 1.0;
        assert_eq!(h.at_install(&c, &now), Some(fresh + hot * MODEL_TIE));
        // A flush drops nothing: its blocks keep what they were admitted with.
        assert_eq!(h.at_install(&c, &Dropping::default()), Some(hot));
        let c = Candidate {
            priority: cached_low,
            ..c
        };
        assert_eq!(h.at_install(&c, &Dropping::default()), Some(cached_low));

        // At a compaction's install the blocks of dropped keys are ranked by how recently
        // their dropped block was read, before the model's probability: k0002's range is
        // the more probable, but its block sat unread for 50,000 lookups.
        let hash = |k: &str| [KeySet::hash(k.as_bytes())];
        let (h1, h2) = (hash("k0001x"), hash("k0002"));
        let read_recently = Candidate { hashes: &h1, ..c };
        let read_long_ago = Candidate {
            hashes: &h2,
            priority: p(&["k0002"]).unwrap(),
            ..c
        };
        assert!(read_long_ago.priority > read_recently.priority);
        let dropping = Dropping::with_idle(vec![
            (block(&["k0001x", "k0009"]), 100),
            (block(&["k0002"]), 50_000),
            (block(&["k0002", "k0003"]), 70_000),
        ]);
        assert_eq!(
            dropping.idle(&h2),
            Some(50_000),
            "the least idle block holding it"
        );
        assert_eq!(dropping.idle(&hash("k0004")), None);
        let recent = h.at_install(&read_recently, &dropping).unwrap();
        let long_ago = h.at_install(&read_long_ago, &dropping).unwrap();
        assert!(
            recent > long_ago && long_ago > CACHED_BONUS,
            "{recent} {long_ago}"
        );
        // A block of the baseline's whose input block was evicted while the job ran
        // falls to the model's rank, below the hot block.
        let evicted = Dropping::new(vec![block(&["k0009"])]);
        let demoted = h.at_install(&read_recently, &evicted).unwrap();
        assert!((demoted - 0.05).abs() < 1e-6 && demoted < hot, "{demoted}");

        // A compaction's filter holds the blocks it would refuse, below every other, and
        // keeps them at install only if the cache drops one of their keys then.
        let all = Hybrid::new(Some(scores(4)), set(&["k0001x", "k0002"])).holding_all();
        let cold = all.admit(&BlockKeys::from_keys(&["k0007"])).unwrap();
        assert!((cold - (0.35 + UNSEEN)).abs() < 1e-6);
        assert!(cold < 0.0, "below every hot block");
        assert_eq!(
            all.admit(&BlockKeys::from_keys(&["k0001x"])),
            h.admit(&BlockKeys::from_keys(&["k0001x"])),
            "the baseline's blocks as before"
        );
        // (The install judges a held block by its keys' hashes and its priority.)
        let hashes = [KeySet::hash(b"k0007")];
        let c = Candidate {
            hashes: &hashes,
            priority: cold,
            ..c
        };
        assert_eq!(all.at_install(&c, &Dropping::default()), None);
        let read_meanwhile = Dropping::new(vec![block(&["k0007"])]);
        let p = all.at_install(&c, &read_meanwhile).unwrap();
        assert!((p - (fresh + 0.35 * MODEL_TIE)).abs() < 1e-6, "{p}");
    }

    /// Loads stay within the baseline's: a compaction may load what incremental warm-up
    /// would load of its output plus what the compactions before it saved; a flush only
    /// those savings.
    #[test]
    fn flushes_load_what_the_compactions_saved() {
        let ledger = Arc::new(AtomicI64::new(0));
        let set = |keys: &[&str]| KeySet::of(&BlockKeys::from_keys(keys));
        let f = Hybrid::new(None, set(&["k0001"])).within(ledger.clone(), None);
        assert_eq!(
            f.limit(),
            Some(0),
            "nothing saved yet: a flush loads nothing"
        );
        // A compaction whose cached input block covered [k0001, k0003]: incremental
        // warm-up would load the two output blocks that overlap it.
        let baseline = CachedIntervals::new(vec![(b"k0001".to_vec(), b"k0003".to_vec())]);
        let c = Hybrid::new(None, set(&["k0001"]))
            .within(ledger.clone(), Some(baseline))
            .holding_all();
        for keys in [&["k0000", "k0001"][..], &["k0002"], &["k0005"], &["k0007"]] {
            assert!(
                c.admit(&BlockKeys::from_keys(keys)).is_some(),
                "held: {keys:?}"
            );
        }
        assert_eq!(c.limit(), Some(2), "the baseline's two");
        c.loaded(1);
        assert_eq!(ledger.load(Relaxed), 1, "one saved");
        assert_eq!(f.limit(), Some(1), "which a flush may spend");
        f.loaded(1);
        assert_eq!(f.limit(), Some(0));
        let c = Hybrid::new(None, KeySet::default())
            .within(ledger.clone(), Some(CachedIntervals::new(vec![])))
            .holding_all();
        assert!(c.admit(&BlockKeys::from_keys(&["k0002"])).is_some());
        assert_eq!(c.limit(), Some(0), "nothing the baseline would load");
        // Overspent (two flushes at once): no job loads until compactions repay it.
        ledger.store(-3, Relaxed);
        assert_eq!(f.limit(), Some(0));
    }

    /// A trained model separates ranges read steadily from ranges never read, and ranges
    /// read in alternate slots follow their phase.
    #[test]
    fn trained_model_predicts_steady_and_periodic_ranges() {
        let n = 60;
        let mut slots = VecDeque::new();
        for t in 0..24usize {
            let mut reads = vec![0u16; n];
            for (r, x) in reads.iter_mut().enumerate() {
                *x = match r % 3 {
                    0 => 5,                         // always read
                    1 => 0,                         // never read
                    _ => u16::from(t % 2 == 0) * 4, // read in even slots
                };
            }
            slots.push_back(SlotCounts {
                reads,
                writes: vec![0; n],
            });
        }
        let set = TrainingSet::build(&slots, 10_000, 7);
        let m = HotRangeModel::train(&set, 30, 4, 0.3).unwrap();
        // The newest slot (23) is odd: the next one is even, so periodic ranges are hot.
        let hot = |slots: &VecDeque<SlotCounts>| {
            hot_ranges(&predict(slots, |row| m.probability(row)).unwrap(), 0.5, n)
        };
        for (r, h) in hot(&slots).iter().enumerate() {
            assert_eq!(*h, r % 3 != 1, "range {r}");
        }
        slots.pop_back();
        for (r, h) in hot(&slots).iter().enumerate() {
            assert_eq!(*h, r % 3 == 0, "range {r} before an odd slot");
        }
        assert!(predict(&slots.iter().take(3).cloned().collect(), |_| 1.0).is_none());
    }

    #[test]
    fn the_budget_keeps_the_most_probable_ranges() {
        let slots: VecDeque<SlotCounts> = (0..6)
            .map(|_| SlotCounts {
                reads: (0..10).collect(),
                writes: vec![0; 10],
            })
            .collect();
        // Probability grows with the last slot's reads (= the range id here).
        let p = |row: &[f64]| row[SLOTS_NEEDED - 1] / 10.0;
        let probability = predict(&slots, p).unwrap();
        let hot = hot_ranges(&probability, 0.25, 3);
        let ids: Vec<usize> = (0..10).filter(|&r| hot[r]).collect();
        assert_eq!(ids, vec![7, 8, 9], "top three");
        let hot = hot_ranges(&probability, 0.75, 3);
        let ids: Vec<usize> = (0..10).filter(|&r| hot[r]).collect();
        assert_eq!(ids, vec![8, 9], "the threshold cuts first");
        assert!(hot_ranges(&probability, 0.0, 0).iter().all(|h| !h));
    }

    /// Slots of 100 reads, every read counted, the first training after 8 slots.
    fn small_slots() -> LearnedParams {
        LearnedParams {
            slot_reads: 100,
            slot_reads_per_range: 0.0,
            sample_every: 1,
            min_train_slots: 8,
            history_slots: 12,
            ..LearnedParams::default()
        }
    }

    /// Without a job asking for a prediction (no flush or compaction yet) the trainer
    /// spends nothing; the first job's request starts it.
    #[test]
    fn training_waits_for_a_job_to_ask() {
        let l = Learned::new(small_slots());
        l.on_ranges(&ranges(20), 20);
        let read_slots = |slots: u64| {
            for i in 0..slots * 100 {
                l.record_read(format!("k{:04}", i % 10).as_bytes());
                if i % 100 == 0 {
                    l.record_write(b"k0001");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        };
        read_slots(30);
        // The trainer wakes at every slot end and at least every 200 ms.
        std::thread::sleep(Duration::from_millis(400));
        let stats = || {
            let mut s = WarmingStats::default();
            l.stats(&mut s);
            s
        };
        assert!(stats().slots >= 30);
        assert_eq!(stats().trainings, 0, "nobody asked for a model");
        assert!(l.plan(&JobInputs::empty()).is_none(), "no model yet");
        let deadline = Instant::now() + Duration::from_secs(20);
        while stats().trainings == 0 {
            assert!(
                Instant::now() < deadline,
                "the request did not start training"
            );
            read_slots(1);
        }
    }

    /// A workload that stops writing stops being sampled after [`QUIET_SLOTS`] slots
    /// (no job will ask for a prediction), and its next write resumes sampling.
    #[test]
    fn reads_are_not_sampled_while_nothing_is_written() {
        let l = Learned::without_trainer(small_slots());
        l.on_ranges(&ranges(20), 20);
        let slots = || {
            let mut s = WarmingStats::default();
            l.stats(&mut s);
            s.slots
        };
        let read = |n: u64| {
            for i in 0..n {
                l.record_read(format!("k{:04}", i % 10).as_bytes());
            }
        };
        l.record_write(b"k0001");
        read(100 * (QUIET_SLOTS + 1));
        let quiet = slots();
        // The slot holding the write, then QUIET_SLOTS without.
        assert_eq!(quiet, QUIET_SLOTS + 1);
        read(1_000);
        assert_eq!(slots(), quiet, "nothing written: no slot ends");
        l.record_write(b"k0002");
        read(1_000);
        assert!(slots() >= quiet + 9, "a write resumed sampling");
    }

    /// The trainer's step, run here on the test's thread (no timing: the trainer thread's
    /// wake-ups are [`training_waits_for_a_job_to_ask`]'s subject).
    #[test]
    fn trainer_learns_from_recorded_reads_and_publishes_a_prediction() {
        let l = Learned::without_trainer(small_slots());
        let r = ranges(20);
        l.on_ranges(&r, 20);
        assert!(l.plan(&JobInputs::empty()).is_none(), "no model yet");
        let mut trainer = TrainerState::default();
        // Reads hit ranges 0..10 only: 7 slots of 100 reads, one short of a training.
        let read = |from: u64, to: u64| {
            for i in from..to {
                l.record_read(format!("k{:04}", i % 10).as_bytes());
                if i % 50 == 0 {
                    l.record_write(b"k0001");
                }
            }
        };
        read(0, 750);
        train_if_due(&l.shared, &mut trainer);
        assert!(l.shared.model.read().is_none(), "7 slots are too few");
        read(750, 1_000);
        train_if_due(&l.shared, &mut trainer);
        assert!(l.shared.model.read().is_some(), "trained at 9 slots");
        let f = l.plan(&JobInputs::empty()).unwrap();
        assert!(f.admit(&BlockKeys::from_keys(&["k0003"])).is_some());
        assert!(f
            .admit(&BlockKeys::from_keys(&["k0015", "k0019"]))
            .is_none());
        let mut s = WarmingStats::default();
        l.stats(&mut s);
        assert_eq!((s.trainings, s.training_failures, s.predictions), (1, 0, 1));
        assert!(s.slots >= 8);
        assert_eq!(s.hot_ranges, 10);
    }
}
