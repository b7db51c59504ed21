//! Leaper: the collector counts reads per key range per slot; a background thread trains a
//! gradient-boosting classifier on the history and, after every slot, predicts which
//! ranges will be read in the next one; a flush or compaction then inserts the output
//! blocks of predicted-hot ranges into the cache as it writes them, and leaves cold ranges
//! out. Until the first model is trained nothing is prefetched.
//!
//! Training runs on the trainer thread, the "resources the database does not use" of the
//! slides. Prediction runs when a flush or compaction asks for it, at most once per slot
//! (later jobs of the same slot reuse it): a workload without writes, whose cache no job
//! disturbs, pays for collection and the occasional training only.

use super::collector::Collector;
use super::config::LearnedParams;
use super::features::{write_row, TrainingSet, NUM_FEATURES, SLOTS_NEEDED};
use super::model::HotRangeModel;
use super::ranges::KeyRanges;
use super::{BlockFilter, BlockKeys, CacheWarming, JobInputs, WarmingStats};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The ranges predicted to be read in the next slot.
#[derive(Debug)]
pub struct HotSet {
    pub ranges: Arc<KeyRanges>,
    pub hot: Vec<bool>,
}

impl BlockFilter for HotSet {
    /// A block is worth caching if one of its keys lies in a hot range. (Not every range
    /// its key interval spans: a block of a flush or of a small level is sparse, its keys
    /// spread over many ranges, and would be cached for ranges it holds nothing of.)
    fn admit(&self, keys: &BlockKeys) -> Option<f64> {
        let mut keys = keys.iter();
        let mut r = self.ranges.range_of(keys.next()?);
        if self.hot[r] {
            return Some(0.0);
        }
        for k in keys {
            r = self.ranges.advance(r, k);
            if self.hot[r] {
                return Some(0.0);
            }
        }
        None
    }
}

/// The prediction for the slot after the newest of `slots`: the ranges whose probability
/// of being read reaches `threshold`, the most probable first, at most `max_hot` of them
/// (what the cache can take: prefetching more than it holds only evicts the prefetched
/// blocks, and whatever readers had cached, before anyone reads them). `None` without
/// enough history.
pub fn predict_hot(
    slots: &VecDeque<crate::warming::collector::SlotCounts>,
    probability: impl Fn(&[f64]) -> f64,
    threshold: f64,
    max_hot: usize,
) -> Option<Vec<bool>> {
    if slots.len() < SLOTS_NEEDED {
        return None;
    }
    let t = slots.len() - 1;
    let n = slots[t].reads.len();
    let mut row = [0.0; NUM_FEATURES];
    let mut ranked: Vec<(f64, usize)> = (0..n)
        .map(|r| {
            write_row(slots, t, r, &mut row);
            (probability(&row), r)
        })
        .filter(|(p, _)| *p >= threshold)
        .collect();
    if ranked.len() > max_hot {
        ranked.select_nth_unstable_by(max_hot, |a, b| b.0.total_cmp(&a.0));
        ranked.truncate(max_hot);
    }
    let mut hot = vec![false; n];
    for (_, r) in ranked {
        hot[r] = true;
    }
    Some(hot)
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
    collector: RwLock<Option<Arc<Collector>>>,
    /// Most ranges a prediction may call hot (set with the ranges).
    max_hot: AtomicU64,
    /// The newest model, and the last prediction with the slot count it was made at.
    model: RwLock<Option<Arc<HotRangeModel>>>,
    hot: RwLock<Option<(u64, Arc<HotSet>)>>,
    wake: Mutex<bool>,
    cv: Condvar,
    stop: AtomicBool,
    counters: Counters,
}

/// The learned policy and its trainer thread (stopped and joined on drop).
pub struct Learned {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Learned {
    pub fn new(params: LearnedParams) -> Learned {
        let shared = Arc::new(Shared {
            params,
            collector: RwLock::new(None),
            max_hot: AtomicU64::new(u64::MAX),
            model: RwLock::new(None),
            hot: RwLock::new(None),
            wake: Mutex::new(false),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
        });
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

    fn wake(&self) {
        *self.shared.wake.lock() = true;
        self.shared.cv.notify_one();
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
        *self.shared.collector.write() = Some(Arc::new(Collector::new(
            ranges.clone(),
            p.sample_every,
            p.slot_reads.max(per_ranges),
            p.history_slots,
        )));
    }

    fn record_read(&self, key: &[u8]) {
        if let Some(c) = self.shared.collector.read().as_ref() {
            if c.record_read(key) {
                self.wake();
            }
        }
    }

    fn record_write(&self, key: &[u8]) {
        if let Some(c) = self.shared.collector.read().as_ref() {
            c.record_write(key);
        }
    }

    fn plan(&self, _job: &JobInputs<'_>) -> Option<Arc<dyn BlockFilter>> {
        let s = &self.shared;
        let col = s.collector.read().clone()?;
        let model = s.model.read().clone()?;
        let completed = col.completed_slots();
        if let Some((at, hot)) = s.hot.read().as_ref() {
            if *at == completed {
                return Some(hot.clone());
            }
        }
        let c = &s.counters;
        let t0 = Instant::now();
        let slots = col.with_history(|h| h.slots.clone());
        let max_hot = s.max_hot.load(Relaxed).min(usize::MAX as u64) as usize;
        let hot = predict_hot(
            &slots,
            |row| model.probability(row),
            s.params.threshold,
            max_hot,
        );
        c.prediction_micros
            .fetch_add(t0.elapsed().as_micros() as u64, Relaxed);
        let hot = Arc::new(HotSet {
            ranges: col.ranges().clone(),
            hot: hot?,
        });
        c.predictions.fetch_add(1, Relaxed);
        c.hot_ranges
            .store(hot.hot.iter().filter(|&&h| h).count() as u64, Relaxed);
        *s.hot.write() = Some((completed, hot.clone()));
        Some(hot)
    }

    fn budget_fraction(&self) -> f64 {
        self.shared.params.cache_fraction
    }

    fn stats(&self, s: &mut WarmingStats) {
        let c = &self.shared.counters;
        if let Some(col) = self.shared.collector.read().as_ref() {
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
    let p = &s.params;
    let c = &s.counters;
    let mut seen = 0u64;
    let mut last_train: Option<u64> = None;
    let mut current: Option<Arc<Collector>> = None;
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
        let Some(col) = s.collector.read().clone() else {
            continue;
        };
        if !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &col)) {
            // New ranges: their history starts now (the model, trained on per-range
            // counts, stays usable once enough slots are in).
            current = Some(col.clone());
            seen = 0;
            last_train = None;
        }
        let (completed, len) = col.with_history(|h| (h.completed, h.slots.len()));
        if completed == seen {
            continue;
        }
        seen = completed;
        let due = match last_train {
            None => len >= p.min_train_slots,
            Some(t) => completed - t >= p.retrain_every_slots as u64,
        };
        if due {
            let t0 = Instant::now();
            let slots = col.with_history(|h| h.slots.clone());
            let set = TrainingSet::build(&slots, p.max_training_rows, completed);
            let r =
                HotRangeModel::train(&set, p.gbm_iterations, p.gbm_max_depth, p.gbm_learning_rate);
            c.training_micros
                .fetch_add(t0.elapsed().as_micros() as u64, Relaxed);
            c.last_training_rows.store(set.len() as u64, Relaxed);
            c.last_training_positives
                .store(set.positives() as u64, Relaxed);
            last_train = Some(completed);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warming::collector::SlotCounts;

    fn ranges(n: usize) -> Arc<KeyRanges> {
        let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("k{i:04}").into_bytes()).collect();
        Arc::new(KeyRanges::from_sorted_keys(&keys, 1, 2, n).unwrap())
    }

    #[test]
    fn hot_set_admits_blocks_touching_a_hot_range() {
        let r = ranges(10);
        let mut hot = vec![false; 10];
        hot[4] = true;
        let h = HotSet { ranges: r, hot };
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
        let hot = predict_hot(&slots, |row| m.probability(row), 0.5, n).unwrap();
        for (r, h) in hot.iter().enumerate() {
            assert_eq!(*h, r % 3 != 1, "range {r}");
        }
        slots.pop_back();
        let hot = predict_hot(&slots, |row| m.probability(row), 0.5, n).unwrap();
        for (r, h) in hot.iter().enumerate() {
            assert_eq!(*h, r % 3 == 0, "range {r} before an odd slot");
        }
        assert!(predict_hot(&slots.iter().take(3).cloned().collect(), |_| 1.0, 0.5, n).is_none());
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
        let hot = predict_hot(&slots, p, 0.25, 3).unwrap();
        let ids: Vec<usize> = (0..10).filter(|&r| hot[r]).collect();
        assert_eq!(ids, vec![7, 8, 9], "top three");
        let hot = predict_hot(&slots, p, 0.75, 3).unwrap();
        let ids: Vec<usize> = (0..10).filter(|&r| hot[r]).collect();
        assert_eq!(ids, vec![8, 9], "the threshold cuts first");
        assert!(predict_hot(&slots, p, 0.0, 0).unwrap().iter().all(|h| !h));
    }

    #[test]
    fn trainer_learns_from_recorded_reads_and_publishes_a_prediction() {
        let params = LearnedParams {
            slot_reads: 100,
            slot_reads_per_range: 0.0,
            sample_every: 1,
            min_train_slots: 8,
            history_slots: 12,
            ..LearnedParams::default()
        };
        let l = Learned::new(params);
        let r = ranges(20);
        l.on_ranges(&r, 20);
        assert!(l.plan(&JobInputs::empty()).is_none(), "no model yet");
        // Reads hit ranges 0..10 only.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut i = 0u64;
        while l.shared.model.read().is_none() {
            assert!(Instant::now() < deadline, "no prediction published");
            l.record_read(format!("k{:04}", i % 10).as_bytes());
            i += 1;
            if i.is_multiple_of(100) {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let f = l.plan(&JobInputs::empty()).unwrap();
        assert!(f.admit(&BlockKeys::from_keys(&["k0003"])).is_some());
        assert!(f.admit(&BlockKeys::from_keys(&["k0015", "k0019"])).is_none());
        let mut s = WarmingStats::default();
        l.stats(&mut s);
        assert!(s.trainings >= 1 && s.predictions >= 1 && s.slots >= 8);
        assert_eq!(s.hot_ranges, 10);
    }
}
