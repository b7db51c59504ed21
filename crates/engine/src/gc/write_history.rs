//! The recent write history of keys, kept in memory for placement where values are born.
//!
//! SepBIT's rule (paper 004) places a new write by how long its key's previous version
//! lived. In the value log that interval is the distance from the key's previous write to
//! this one. The tree knows it for every key, but a tree lookup per write costs about a
//! quarter of the write throughput (`docs/lifetime.md`); the memtables know it only for keys
//! written again within about one memtable of writes. This table knows it for every key it
//! holds, at the cost of one hash and two cache-line reads per large value:
//!
//! * a fixed number of buckets of two slots each (set-associative, so that two keys whose
//!   hashes collide do not evict each other; a key that loses its slot is replaced by the
//!   one written less recently, which keeps the keys written most often);
//! * per slot a 15-bit tag of the key's hash, whether the last write was a delete, the
//!   sequence number of the key's last write (48 bits), and a smoothed mean of its recent
//!   intervals (an exponentially weighted mean with weight 1/4 for the newest, the spread
//!   of [`super::placement::at_birth`]'s mean of four).
//!
//! It is a hint: it is empty after open, a tag collision gives a wrong key's history (one
//! misplaced value), and nothing in it is durable. Its memory is fixed at open
//! (`LifetimeOptions::write_history_slots`, 16 bytes per slot).
//!
//! Written by the write-group leader only; the atomics are there so that the table can be
//! shared without a lock, not for concurrent updates (a lost update is a lost hint).

use crate::internal_key::SeqNo;
use std::sync::atomic::{AtomicU64, Ordering};

const SEQ_BITS: u32 = 48;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
const DELETED: u64 = 1 << SEQ_BITS;
const TAG_SHIFT: u32 = SEQ_BITS + 1;
// Slot words with tag 0 are empty (tags are forced non-zero): a zeroed table is empty.

/// What the table says about a key's write being recorded now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Not in the table: its first write, or one the table forgot.
    New,
    /// Written before; the smoothed interval including this one.
    Interval(SeqNo),
    /// Deleted at its last write; its mean interval before the delete, if it had one.
    AfterDelete(Option<SeqNo>),
}

pub struct WriteHistory {
    /// Per slot: tag << 49 | deleted << 48 | last seq.
    last: Box<[AtomicU64]>,
    /// Per slot: the smoothed interval, 0 if none yet.
    mean: Box<[AtomicU64]>,
    /// Buckets - 1 (a power of two minus one).
    mask: u64,
}

impl WriteHistory {
    /// A table of at least `slots` slots (rounded up to a power of two, at least two).
    pub fn new(slots: usize) -> WriteHistory {
        let slots = slots.max(2).next_power_of_two();
        // Zeroed by the allocator (a zero word is an empty slot): pages are touched, and
        // count in the process's memory, only as keys land on them, so a small database
        // does not pay for the default size.
        let words = || {
            let b = Box::<[AtomicU64]>::new_zeroed_slice(slots);
            // SAFETY: an all-zero AtomicU64 is a valid AtomicU64 (0).
            unsafe { b.assume_init() }
        };
        WriteHistory {
            last: words(),
            mean: words(),
            mask: (slots / 2 - 1) as u64,
        }
    }

    /// Bytes the table holds.
    pub fn memory(&self) -> usize {
        self.last.len() * 16
    }

    /// The key's smoothed interval, if the table holds one (without recording a write).
    pub fn mean(&self, key: &[u8]) -> Option<SeqNo> {
        let (tag, first) = self.locate(key);
        (first..first + 2)
            .find(|&i| self.last[i].load(Ordering::Relaxed) >> TAG_SHIFT == tag)
            .map(|i| self.mean[i].load(Ordering::Relaxed))
            .filter(|&m| m > 0)
    }

    /// The key's tag and the first slot of its bucket.
    fn locate(&self, key: &[u8]) -> (u64, usize) {
        let h = xxhash_rust::xxh3::xxh3_64(key);
        ((h >> TAG_SHIFT).max(1), ((h & self.mask) * 2) as usize)
    }

    /// Records a write of `key` at `seq` (`delete` for a deletion) and says what the table
    /// knew of the key before it.
    pub fn record(&self, key: &[u8], seq: SeqNo, delete: bool) -> Seen {
        let (tag, first) = self.locate(key);
        let word = (tag << TAG_SHIFT) | if delete { DELETED } else { 0 } | (seq & SEQ_MASK);
        let slot_tag = |i: usize| self.last[i].load(Ordering::Relaxed) >> TAG_SHIFT;
        let hit = (first..first + 2).find(|&i| slot_tag(i) == tag);
        let Some(i) = hit else {
            // Replace the slot written least recently (an empty one first).
            let seq_of = |i: usize| self.last[i].load(Ordering::Relaxed) & SEQ_MASK;
            let i = if seq_of(first) <= seq_of(first + 1) {
                first
            } else {
                first + 1
            };
            self.last[i].store(word, Ordering::Relaxed);
            self.mean[i].store(0, Ordering::Relaxed);
            return Seen::New;
        };
        let old = self.last[i].swap(word, Ordering::Relaxed);
        let mean = self.mean[i].load(Ordering::Relaxed);
        let known = (mean > 0).then_some(mean);
        if old & DELETED != 0 {
            // The time the key was absent is not a lifetime; keep the mean as it was.
            return Seen::AfterDelete(known);
        }
        let interval = (seq & SEQ_MASK).saturating_sub(old & SEQ_MASK).max(1);
        let mean = match known {
            None => interval,
            Some(m) => (interval + 3 * m) / 4,
        };
        self.mean[i].store(mean, Ordering::Relaxed);
        Seen::Interval(mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_smoothed_per_key() {
        let h = WriteHistory::new(1 << 10);
        assert_eq!(h.record(b"a", 100, false), Seen::New);
        assert_eq!(h.record(b"b", 150, false), Seen::New);
        assert_eq!(h.mean(b"a"), None);
        assert_eq!(h.record(b"a", 300, false), Seen::Interval(200));
        assert_eq!(h.mean(b"a"), Some(200));
        assert_eq!(h.mean(b"c"), None);
        // (600 + 3 * 200) / 4
        assert_eq!(h.record(b"a", 900, false), Seen::Interval(300));
        assert_eq!(h.mean(b"a"), Some(300));
        assert_eq!(h.record(b"b", 160, false), Seen::Interval(10));
    }

    #[test]
    fn a_delete_ends_a_lifetime_and_the_gap_after_it_is_not_one() {
        let h = WriteHistory::new(1 << 10);
        h.record(b"k", 0, false);
        h.record(b"k", 100, false);
        // The delete is the value's death: an interval of 100 again.
        assert_eq!(h.record(b"k", 200, true), Seen::Interval(100));
        // Re-inserted long after: the mean before, not the 10,000 of absence.
        assert_eq!(h.record(b"k", 10_200, false), Seen::AfterDelete(Some(100)));
        assert_eq!(h.record(b"k", 10_300, false), Seen::Interval(100));
    }

    #[test]
    fn a_full_bucket_keeps_its_most_recently_written_keys() {
        // One bucket of two slots: every key lands in it.
        let h = WriteHistory::new(2);
        assert_eq!(h.memory(), 32);
        h.record(b"x", 10, false);
        h.record(b"y", 20, false);
        // A third key replaces the one written least recently (x).
        assert_eq!(h.record(b"z", 30, false), Seen::New);
        assert!(matches!(h.record(b"y", 40, false), Seen::Interval(20)));
        assert_eq!(h.record(b"x", 50, false), Seen::New);
        // x took z's slot (z, at 30, was older than y at 40).
        assert!(matches!(h.record(b"y", 60, false), Seen::Interval(_)));
        assert_eq!(h.record(b"z", 70, false), Seen::New);
    }

    #[test]
    fn many_keys_within_capacity_are_remembered() {
        let h = WriteHistory::new(1 << 14);
        let keys: Vec<Vec<u8>> = (0..2_000u32)
            .map(|i| format!("key{i}").into_bytes())
            .collect();
        for (i, k) in keys.iter().enumerate() {
            h.record(k, i as u64, false);
        }
        let known = keys
            .iter()
            .enumerate()
            .filter(|(i, k)| h.record(k, 10_000 + *i as u64, false) == Seen::Interval(10_000))
            .count();
        // 2,000 keys in 8,192 buckets of two: a bucket overflows only when three of them
        // share it (about 16 buckets); the second pass's misses evict once more.
        assert!(known >= 1_950, "{known} of 2000 remembered");
    }
}
