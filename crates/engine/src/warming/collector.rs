//! The collector: reads and writes per key range per time slot, counted with sampled,
//! lock-free counters, and the history of completed slots the features are built from.
//!
//! Every client read passes through here, so the unsampled ones must cost next to
//! nothing: a read only bumps a counter of its own thread ([`sample_read`]). One read in
//! `sample_every` per thread maps its key to a range (a binary search over the
//! boundaries) and bumps that range's counter for the current slot; the thread adds what
//! it sampled to the global read count in batches. Nothing else on the path writes shared
//! memory: a cache line that every client thread writes bounces between cores, and a lock
//! taken per read and two global counters cost the read-only control 15-20% of its CPU.
//! The current collector is found without a lock ([`Collectors`]). The batch that takes
//! the read count across a multiple of `slot_reads` moves the current counters into the
//! history under a mutex that only slot ends and the trainer take, so the read path never
//! blocks on it.

use super::ranges::KeyRanges;
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{
    AtomicU32, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, OnceLock};

thread_local! {
    /// Reads and writes of this thread since its last sampled one (shared by every
    /// collector the thread feeds: the phase of sampling does not matter, its rate does).
    static READ_TICK: Cell<u64> = const { Cell::new(0) };
    static WRITE_TICK: Cell<u64> = const { Cell::new(0) };
    /// Sampled reads of this thread not yet added to a collector's read count.
    static PENDING: Cell<u64> = const { Cell::new(0) };
}

fn tick(c: &'static std::thread::LocalKey<Cell<u64>>, every: u64) -> bool {
    c.with(|c| {
        let n = c.get() + 1;
        let sampled = n >= every;
        c.set(if sampled { 0 } else { n });
        sampled
    })
}

/// Counts a client read on this thread; true for the one in `every` that is sampled
/// (then pass it to [`Collector::record_sampled_read`]).
pub fn sample_read(every: u64) -> bool {
    tick(&READ_TICK, every)
}

/// [`sample_read`] for writes ([`Collector::record_sampled_write`]).
pub fn sample_write(every: u64) -> bool {
    tick(&WRITE_TICK, every)
}

/// Counts of one completed slot, per range (saturating).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotCounts {
    pub reads: Vec<u16>,
    pub writes: Vec<u16>,
}

/// Completed slots, oldest first, at most `capacity`.
#[derive(Debug, Default)]
pub struct History {
    pub slots: VecDeque<SlotCounts>,
    /// Slots completed since the ranges were cut (ids of slots, for the trainer).
    pub completed: u64,
    /// Sampled reads and writes of the completed slots.
    pub sampled_reads: u64,
    pub sampled_writes: u64,
    /// The newest completed slots in a row without a sampled write.
    pub quiet: u64,
}

/// Per-range counters of the current slot.
pub struct RangeCounters {
    pub ranges: Arc<KeyRanges>,
    reads: Box<[AtomicU32]>,
    writes: Box<[AtomicU32]>,
}

impl RangeCounters {
    pub fn new(ranges: Arc<KeyRanges>) -> Self {
        let n = ranges.len();
        RangeCounters {
            ranges,
            reads: (0..n).map(|_| AtomicU32::new(0)).collect(),
            writes: (0..n).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Takes the counts of the slot just ended and starts the next at zero.
    fn drain(&self) -> SlotCounts {
        let take = |c: &[AtomicU32]| -> Vec<u16> {
            c.iter()
                // Most counters of a slot are zero (writes, in a read-mostly workload):
                // a load leaves their cache lines shared.
                .map(|a| match a.load(Relaxed) {
                    0 => 0,
                    _ => a.swap(0, Relaxed).min(u16::MAX as u32) as u16,
                })
                .collect()
        };
        SlotCounts {
            reads: take(&self.reads),
            writes: take(&self.writes),
        }
    }
}

/// Sampled access statistics per key range per slot.
pub struct Collector {
    counters: Arc<RangeCounters>,
    sample_every: u64,
    slot_reads: u64,
    capacity: usize,
    /// Client reads, counted `sample_every` per sampled read, added by each thread every
    /// `publish_every` sampled reads.
    reads: AtomicU64,
    publish_every: u64,
    history: Mutex<History>,
}

impl Collector {
    pub fn new(
        ranges: Arc<KeyRanges>,
        sample_every: u64,
        slot_reads: u64,
        history_slots: usize,
    ) -> Self {
        Collector {
            counters: Arc::new(RangeCounters::new(ranges)),
            sample_every: sample_every.max(1),
            slot_reads: slot_reads.max(1),
            capacity: history_slots.max(1),
            reads: AtomicU64::new(0),
            // A slot ends at most 1/16 of a slot late per client thread.
            publish_every: (slot_reads / (16 * sample_every.max(1))).clamp(1, 8),
            history: Mutex::new(History::default()),
        }
    }

    pub fn ranges(&self) -> &Arc<KeyRanges> {
        &self.counters.ranges
    }

    pub fn sample_every(&self) -> u64 {
        self.sample_every
    }

    /// Counts a client read of `key` (sampling it on this thread); true if it completed a
    /// slot.
    pub fn record_read(&self, key: &[u8]) -> bool {
        sample_read(self.sample_every) && self.record_sampled_read(key)
    }

    /// Counts a sampled read of `key`, standing for `sample_every` reads; true if it
    /// completed a slot.
    pub fn record_sampled_read(&self, key: &[u8]) -> bool {
        let r = self.counters.ranges.range_of(key);
        self.counters.reads[r].fetch_add(1, Relaxed);
        let pending = PENDING.with(|p| {
            let n = p.get() + 1;
            p.set(if n >= self.publish_every { 0 } else { n });
            n
        });
        if pending < self.publish_every {
            return false;
        }
        let add = pending * self.sample_every;
        let before = self.reads.fetch_add(add, Relaxed);
        if before / self.slot_reads != (before + add) / self.slot_reads {
            self.end_slot();
            return true;
        }
        false
    }

    /// Counts a client write of `key` (sampling it on this thread).
    pub fn record_write(&self, key: &[u8]) {
        if sample_write(self.sample_every) {
            self.record_sampled_write(key);
        }
    }

    /// Counts a sampled write of `key`.
    pub fn record_sampled_write(&self, key: &[u8]) {
        let r = self.counters.ranges.range_of(key);
        self.counters.writes[r].fetch_add(1, Relaxed);
    }

    /// Closes the current slot (called by the read that completes it; public for tests).
    pub fn end_slot(&self) {
        let mut h = self.history.lock();
        let counts = self.counters.drain();
        let sum = |c: &[u16]| c.iter().map(|&x| u64::from(x)).sum::<u64>();
        h.sampled_reads += sum(&counts.reads);
        let writes = sum(&counts.writes);
        h.sampled_writes += writes;
        h.quiet = if writes == 0 { h.quiet + 1 } else { 0 };
        if h.slots.len() == self.capacity {
            h.slots.pop_front();
        }
        h.slots.push_back(counts);
        h.completed += 1;
    }

    /// Runs `f` on the history (the trainer copies what it needs and lets go).
    pub fn with_history<T>(&self, f: impl FnOnce(&History) -> T) -> T {
        f(&self.history.lock())
    }

    pub fn completed_slots(&self) -> u64 {
        self.history.lock().completed
    }

    /// Sampled reads and writes of the completed slots.
    pub fn sampled(&self) -> (u64, u64) {
        let h = self.history.lock();
        (h.sampled_reads, h.sampled_writes)
    }

    /// Lets go of the history (the collector was replaced by one of a new cut).
    fn retire(&self) {
        let mut h = self.history.lock();
        h.slots = VecDeque::new();
    }
}

/// Most cuts of the key space a policy's lifetime takes (the engine cuts again when the
/// tree has grown fourfold: 4^15 times the first cut's size is beyond any tree); later
/// cuts keep the last collector.
const MAX_CUTS: usize = 16;

/// The collector of the current cut, read on every sampled read without a lock: a read
/// lock is a write to a shared counter too. Replaced collectors stay allocated (their
/// history emptied) until the policy is dropped, so a reader holding one is never left
/// with a dangling reference.
pub struct Collectors {
    all: [OnceLock<Arc<Collector>>; MAX_CUTS],
    /// Index of the current one, plus one (0: none yet).
    current: AtomicUsize,
    replacing: Mutex<()>,
}

impl Default for Collectors {
    fn default() -> Self {
        Collectors {
            all: std::array::from_fn(|_| OnceLock::new()),
            current: AtomicUsize::new(0),
            replacing: Mutex::new(()),
        }
    }
}

impl Collectors {
    pub fn current(&self) -> Option<&Arc<Collector>> {
        match self.current.load(Acquire) {
            0 => None,
            i => self.all[i - 1].get(),
        }
    }

    /// Makes `c` the current collector; false (and `c` dropped) if [`MAX_CUTS`] were used.
    pub fn replace(&self, c: Collector) -> bool {
        let _one_at_a_time = self.replacing.lock();
        let i = self.current.load(Acquire);
        if i == MAX_CUTS {
            return false;
        }
        let _ = self.all[i].set(Arc::new(c));
        self.current.store(i + 1, Release);
        if i > 0 {
            if let Some(old) = self.all[i - 1].get() {
                old.retire();
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collector(sample_every: u64, slot_reads: u64) -> Collector {
        let keys: Vec<Vec<u8>> = (0..100).map(|i| format!("k{i:03}").into_bytes()).collect();
        let ranges = KeyRanges::from_sorted_keys(&keys, 10, 2, 100).unwrap();
        Collector::new(Arc::new(ranges), sample_every, slot_reads, 3)
    }

    #[test]
    fn counts_per_range_per_slot_with_sampling() {
        let c = collector(2, 10);
        // Slot 1: 10 reads of k005 (range 0): every second one is sampled.
        for i in 0..10 {
            let ended = c.record_read(b"k005");
            assert_eq!(ended, i == 9, "slot ends at the 10th read");
        }
        // Slot 2: reads spread over ranges 3 and 7, writes to range 9.
        for i in 0..10 {
            c.record_write(b"k099");
            c.record_read(if i % 2 == 0 { b"k031" } else { b"k077" });
        }
        c.with_history(|h| {
            assert_eq!(h.completed, 2);
            assert_eq!(h.slots[0].reads[0], 5);
            assert_eq!(h.slots[0].reads.iter().map(|&x| x as u32).sum::<u32>(), 5);
            // Reads 11..20: the even-numbered ones (12, 14, ..) are sampled, and those
            // are the odd i, i.e. k077.
            assert_eq!(h.slots[1].reads[7], 5);
            assert_eq!(h.slots[1].reads[3], 0);
            assert_eq!(h.slots[1].writes[9], 5);
        });
        assert_eq!(c.sampled(), (10, 5));
    }

    #[test]
    fn collectors_replace_the_current_one_up_to_the_limit() {
        let cs = Collectors::default();
        assert!(cs.current().is_none());
        for i in 0..MAX_CUTS {
            let c = collector(1, 1);
            c.record_read(b"k001");
            assert!(cs.replace(c), "cut {i}");
            let cur = cs.current().unwrap();
            assert_eq!(cur.completed_slots(), 1, "the new one is current");
        }
        assert!(!cs.replace(collector(1, 1)), "beyond the limit");
        assert_eq!(
            cs.current().unwrap().completed_slots(),
            1,
            "the last one stays"
        );
        // A replaced collector let go of its history.
        assert!(cs.all[0]
            .get()
            .unwrap()
            .with_history(|h| h.slots.is_empty()));
    }

    #[test]
    fn history_keeps_the_newest_slots_and_counters_restart() {
        let c = collector(1, 1);
        for i in 0..5u8 {
            // One read per slot, in range i.
            c.record_read(format!("k{:03}", i * 10 + 1).as_bytes());
        }
        c.with_history(|h| {
            assert_eq!(h.completed, 5);
            assert_eq!(h.slots.len(), 3, "capacity 3");
            for (j, s) in h.slots.iter().enumerate() {
                let hot: Vec<usize> = (0..s.reads.len()).filter(|&r| s.reads[r] > 0).collect();
                assert_eq!(hot, vec![j + 2], "slot {j} holds only its own read");
            }
        });
    }
}
