//! Where recently flushed keys' values live, so that their next write's garbage is found
//! without a tree lookup.
//!
//! The superseded finder ([`super::superseded`]) learns the garbage a flush made by looking
//! up each flushed key's previous write in the tree: one device read per key once the tree
//! is larger than memory (3.1M reads in a full-scale run, more than the rest of the run's reads
//! together, docs/lifetime.md). Under a skewed workload most of those keys were flushed a
//! few flushes earlier, and the finder itself saw their pointers then. This table keeps
//! them: per key the sequence number and pointer of its newest flushed write, as the finder
//! recorded it. When the key is flushed again, that write is the previous one (or an older
//! one, if a table was skipped in between), and it is hidden from every reader just as a
//! looked-up one is.
//!
//! Exactness matters here, not only in aggregate: a hit marks a record dead, and GC drops
//! dead records without looking them up. So keys are identified by a 128-bit hash
//! (XXH3-128): the chance that two of a billion distinct keys collide is below 2^-67, far
//! below the chance of an undetected device error. An entry can only ever be an older write
//! of the same key (its sequence number is checked against the new write's), so a stale entry
//! (a table the finder skipped) names a record that is dead anyway.
//!
//! Memory follows the keys the finder sees, within a budget
//! (`LifetimeOptions::recent_pointer_bytes`, 45 bytes per slot). While every key seen fits
//! the budget the table holds them all: it grows by doubling as keys arrive, so a
//! database of `n` keys costs about `n` slots, and a uniform workload over more keys than
//! a fixed table held still has every previous write in memory. (A fixed 48 MiB table
//! held 458K-917K keys; at full scale, 1M keys at low skew, the finder looked up half the
//! flushed keys in the tree, fell behind compaction and gave up on a third of the flushed
//! tables, docs/results/2026-11-27-lifetime-full-scale.md.) Past the budget it keeps two
//! generations of half of it each: new entries go to the young generation; a key found in
//! the old one moves to the young; when the young is full, the old is dropped and the
//! young becomes old. So a key is kept while it is written again within about `g` to `2g`
//! distinct keys, which is what a skewed workload's hot keys do. A key forgotten is looked
//! up in the tree, as before.

use crate::internal_key::SeqNo;
use crate::vlog::ValuePointer;
use std::collections::HashMap;
use xxhash_rust::xxh3::xxh3_128;

/// A key's newest flushed write, as the finder saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastWrite {
    pub seq: SeqNo,
    /// Where its value lives, if it has one in a value file (not a delete or an inline value).
    pub pointer: Option<ValuePointer>,
}

/// [`LastWrite`] as stored: 28 bytes instead of 40 (no `Option` tag; a size of
/// `u32::MAX`, which no record has, means no pointer), so that an entry with its 16-byte key
/// hash takes 44 bytes of a hash table slot.
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
struct Packed {
    seq: SeqNo,
    file: u64,
    offset: u64,
    size: u32,
}

impl Packed {
    fn pack(w: LastWrite) -> Packed {
        let p = w.pointer.unwrap_or(ValuePointer {
            file: 0,
            offset: 0,
            size: u32::MAX,
        });
        Packed {
            seq: w.seq,
            file: p.file,
            offset: p.offset,
            size: p.size,
        }
    }

    fn unpack(self) -> LastWrite {
        LastWrite {
            seq: self.seq,
            pointer: (self.size != u32::MAX).then_some(ValuePointer {
                file: self.file,
                offset: self.offset,
                size: self.size,
            }),
        }
    }
}

/// The hash table's load factor at which it grows (`std`'s is 7/8): a generation is sized
/// just under it, so that it never grows past the slots it was given.
const FILL: (usize, usize) = (7, 8);

/// Bytes per slot of a generation (key hash and [`Packed`], and the table's control byte).
pub const SLOT_BYTES: usize = std::mem::size_of::<(Hash, Packed)>() + 1;

/// The newest flushed write of recently flushed keys, bounded in memory.
pub struct RecentPointers {
    young: HashMap<Hash, Packed>,
    old: HashMap<Hash, Packed>,
    /// Slots of the young generation (a power of two); it holds [`FILL`] of them in keys.
    slots: usize,
    /// While growing: the most slots one generation may take within the budget. `None`
    /// once the table turns generations over.
    grow_to: Option<usize>,
    hits: u64,
    misses: u64,
}

/// The slots a growing table starts with (45 KiB).
const FIRST_SLOTS: usize = 1 << 10;

/// The largest power of two of slots that fits `memory` bytes (at least 2; rounding up
/// could double the memory).
fn slots_in(memory: usize) -> usize {
    let slots = (memory / SLOT_BYTES).max(2);
    1usize << (usize::BITS - 1 - slots.leading_zeros())
}

impl RecentPointers {
    /// A table of at most about `memory` bytes from the start: two generations of a
    /// power-of-two number of slots each, filled to [`FILL`]. The slots are allocated as
    /// keys arrive.
    pub fn new(memory: usize) -> RecentPointers {
        RecentPointers {
            young: HashMap::new(),
            old: HashMap::new(),
            slots: slots_in(memory / 2),
            grow_to: None,
            hits: 0,
            misses: 0,
        }
    }

    /// A table that holds every key it is given while they fit `budget` bytes (one
    /// generation, grown by doubling), then turns over two generations of half the budget
    /// each. Past the budget, for one generation's time, it holds up to one and a half
    /// times it (the full generation just turned old, and the young one filling).
    pub fn growing(budget: usize) -> RecentPointers {
        let max = slots_in(budget);
        RecentPointers {
            slots: FIRST_SLOTS.min(max),
            grow_to: Some(max),
            ..RecentPointers::new(0)
        }
    }

    /// Keys the young generation holds before it grows or turns over.
    fn generation(&self) -> usize {
        (self.slots * FILL.0 / FILL.1).max(1)
    }

    /// The write before one at `seq` of `key`, if the table holds an older one; the entry
    /// stays (a caller records the new write with [`Self::record`]).
    pub fn before(&mut self, key: &[u8], seq: SeqNo) -> Option<LastWrite> {
        let h = hash(key);
        let found = self.young.get(&h).or_else(|| self.old.get(&h));
        match found.map(|p| p.unpack()) {
            Some(w) if w.seq < seq => {
                self.hits += 1;
                Some(w)
            }
            _ => {
                self.misses += 1;
                None
            }
        }
    }

    /// The newest flushed write of `key` the table holds (not counted as a hit or miss).
    pub fn newest(&self, key: &[u8]) -> Option<LastWrite> {
        let h = hash(key);
        let found = self.young.get(&h).or_else(|| self.old.get(&h));
        found.map(|p| p.unpack())
    }

    /// Records `write` as `key`'s newest flushed write, unless a newer one is held.
    pub fn record(&mut self, key: &[u8], write: LastWrite) {
        let h = hash(key);
        let held = self.young.get(&h).or_else(|| self.old.get(&h));
        if held.is_some_and(|w| w.unpack().seq >= write.seq) {
            return;
        }
        // In place: `insert` reserves room for one more key first, and a full generation
        // would double its slots to update a key it holds.
        if let Some(held) = self.young.get_mut(&h) {
            *held = Packed::pack(write);
            return;
        }
        self.old.remove(&h);
        if self.young.len() >= self.generation() {
            match self.grow_to {
                Some(max) if self.slots < max => self.slots *= 2,
                _ => {
                    self.old = std::mem::take(&mut self.young);
                    // Turning over for the first time: two generations of half the
                    // budget from now on.
                    if let Some(max) = self.grow_to.take() {
                        self.slots = (max / 2).max(2);
                    }
                }
            }
        }
        self.young.insert(h, Packed::pack(write));
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes its two generations hold (slots allocated, used or not: a map's capacity is
    /// [`FILL`] of its slots).
    pub fn memory(&self) -> usize {
        let slots = |m: &HashMap<Hash, Packed>| m.capacity() * FILL.1 / FILL.0;
        (slots(&self.young) + slots(&self.old)) * SLOT_BYTES
    }

    /// Whether it still holds every key it was given (it has not turned generations over).
    pub fn holds_every_key(&self) -> bool {
        self.grow_to.is_some()
    }

    /// Lookups answered, and lookups the table could not answer.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

/// A key's 128-bit hash, as four words: aligned to 4 bytes like [`Packed`], so that a slot
/// takes 44 bytes, not 48.
type Hash = [u32; 4];

fn hash(key: &[u8]) -> Hash {
    let h = xxh3_128(key);
    [
        h as u32,
        (h >> 32) as u32,
        (h >> 64) as u32,
        (h >> 96) as u32,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(seq: SeqNo, offset: u64) -> LastWrite {
        LastWrite {
            seq,
            pointer: Some(ValuePointer {
                file: 1,
                offset,
                size: 10,
            }),
        }
    }

    #[test]
    fn gives_the_newest_older_write_only() {
        let mut t = RecentPointers::new(1 << 20);
        assert_eq!(t.before(b"a", 5), None);
        t.record(b"a", w(5, 0));
        t.record(b"a", w(3, 100)); // older than what is held: ignored
        assert_eq!(t.before(b"a", 9), Some(w(5, 0)));
        // A write at or before the held one has no previous write in the table.
        assert_eq!(t.before(b"a", 5), None);
        assert_eq!(t.before(b"a", 4), None);
        assert_eq!(t.before(b"b", 9), None);
        t.record(b"a", w(9, 200));
        assert_eq!(t.before(b"a", 12), Some(w(9, 200)));
        assert_eq!(t.hits_and_misses(), (2, 4));
    }

    #[test]
    fn bounded_and_keeps_keys_written_again() {
        // Two generations of 4 slots, 3 keys each.
        let mut t = RecentPointers::new(8 * SLOT_BYTES);
        assert_eq!(t.generation(), 3);
        for i in 0..4u64 {
            t.record(&i.to_be_bytes(), w(i + 1, i));
        }
        // Keys 0-2 are the old generation now; key 0 is written again and moves to young.
        t.record(&0u64.to_be_bytes(), w(10, 0));
        for i in 5..7u64 {
            t.record(&i.to_be_bytes(), w(i + 20, i));
        }
        // Key 6 turned the young generation over: keys 1 and 2 went with the old one, key
        // 0 (written again) stayed.
        assert_eq!(t.len(), 4);
        assert_eq!(t.before(&0u64.to_be_bytes(), 100), Some(w(10, 0)));
        assert_eq!(t.before(&1u64.to_be_bytes(), 100), None);
        assert_eq!(t.before(&6u64.to_be_bytes(), 100), Some(w(26, 6)));
        for i in 100..200u64 {
            t.record(&i.to_be_bytes(), w(i, i));
            assert!(t.len() <= 6, "{} keys held", t.len());
        }
    }

    #[test]
    fn the_default_memory_holds_what_the_options_say() {
        assert_eq!(SLOT_BYTES, 45);
        // The largest size taken from the cache (`LifetimeOptions::recent_pointer_bytes`).
        let t = RecentPointers::new(48 << 20);
        // Two generations of 2^19 slots (47.2 MB of 48 MiB), 7/8 of them filled.
        assert_eq!(2 * t.generation(), 917_504);
    }

    #[test]
    fn a_growing_table_holds_every_key_within_its_budget_then_turns_over() {
        // A budget of 16K slots: every one of 14K keys (7/8 of them) is held, though a
        // fixed table of the same memory (two generations of 8K slots) turns over at 7K.
        let budget = (16 << 10) * SLOT_BYTES;
        let keys: u64 = 14 << 10;
        let mut fixed = RecentPointers::new(budget);
        let mut t = RecentPointers::growing(budget);
        assert_eq!(t.slots, FIRST_SLOTS);
        for round in 0..3u64 {
            for i in 0..keys {
                let k = i.to_be_bytes();
                let seq = round * keys + i + 1;
                if round > 0 {
                    assert!(t.before(&k, seq).is_some(), "key {i} forgotten");
                    fixed.before(&k, seq);
                }
                t.record(&k, w(seq, i));
                fixed.record(&k, w(seq, i));
            }
        }
        assert!(t.holds_every_key());
        assert_eq!(t.len(), keys as usize);
        assert!(t.memory() <= budget, "{} bytes", t.memory());
        assert_eq!(t.hits_and_misses(), (2 * keys, 0));
        // The fixed table forgot most of each sweep.
        assert!(
            fixed.hits_and_misses().1 > keys,
            "{:?}",
            fixed.hits_and_misses()
        );
        // One key more than the budget holds: it turns over, to two generations of half
        // the budget, and never holds more than one and a half times it.
        for i in keys..4 * keys {
            t.record(&i.to_be_bytes(), w(4 * keys + i, i));
            assert!(t.memory() <= budget * 3 / 2, "{} bytes", t.memory());
        }
        assert!(!t.holds_every_key());
        assert_eq!(t.slots, 8 << 10);
        assert!(t.memory() <= budget, "{} bytes", t.memory());
    }

    #[test]
    fn deletes_and_inline_values_have_no_pointer() {
        let mut t = RecentPointers::new(1 << 20);
        t.record(
            b"k",
            LastWrite {
                seq: 4,
                pointer: None,
            },
        );
        assert_eq!(
            t.before(b"k", 5),
            Some(LastWrite {
                seq: 4,
                pointer: None
            })
        );
    }
}
