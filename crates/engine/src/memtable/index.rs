//! A hash index beside the skip list: from a user key to the node of its newest entry.
//!
//! Why: a point lookup in the skip list visits about `4 * log4(n)` nodes spread over the
//! arena, and once the memtable outgrows the CPU caches most of them are cache misses
//! (a pipelined `ZADD` on the server spent 13 % of its CPU in memtable lookups, most of it
//! waiting for nodes). The index answers "the newest entry of this key" in one or two
//! misses, and "no entry of this key" (every lookup of a key that lives in the tables)
//! without a search, as RocksDB's hash-based memtables answer a prefix.
//!
//! What it holds: open addressing with linear probing over a fixed number of slots, each
//! null or a node of the list. A key's slot, once taken, is never cleared or given to
//! another key, and is replaced only by a newer entry of the same key; a key that finds
//! no slot within [`MAX_PROBES`] of its hash is not indexed. So a lookup that reaches a
//! null slot before finding its key proves the key has no entry (had it been indexed, its
//! slot would come first; had it failed to be, every slot it probed was taken, and still
//! is), and one that probes [`MAX_PROBES`] taken slots without finding it knows nothing
//! and searches the list. Entries are recorded after they are linked and before their
//! sequence numbers are published (`db::write`), so a reader at a published snapshot
//! finds in the index everything the list holds at or below it.

use super::skiplist::{self, ChunkPool, Node};
use crate::types::{user_key, TRAILER_LEN};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

/// Slots a key may probe. A table more than about three quarters full starts failing to
/// index keys at this bound; those are then found by searching the list.
const MAX_PROBES: usize = 16;

/// Fewest slots of an index.
const MIN_SLOTS: usize = 1 << 10;

/// What the index knows of a key.
pub(super) enum Lookup {
    /// The node of the key's newest entry.
    Newest(Node),
    /// The memtable has no entry of the key.
    Absent,
    /// Not indexed: search the list.
    Unknown,
}

pub(super) struct Index {
    slots: Box<[AtomicPtr<u8>]>,
    mask: usize,
    /// Where the table goes, cleared, when the memtable is dropped.
    pool: Option<Arc<ChunkPool>>,
}

impl Index {
    /// An index of at least `slots` slots (a power of two), its table from `pool`'s spare
    /// if it has one of that size.
    pub fn new(slots: usize, pool: Option<Arc<ChunkPool>>) -> Index {
        let n = slots.max(MIN_SLOTS).next_power_of_two();
        let table = pool.as_ref().and_then(|p| p.take_index(n));
        Index {
            slots: table.unwrap_or_else(|| {
                (0..n)
                    .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                    .collect()
            }),
            mask: n - 1,
            pool,
        }
    }

    /// Memory the index takes.
    pub fn bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<AtomicPtr<u8>>()
    }

    pub fn hash(user_key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(user_key)
    }

    /// Records `node`, just linked into the list and holding `key` (of hash `hash`) with
    /// `trailer`, as its key's newest entry unless a newer one is recorded (an equal
    /// trailer replaces: the list puts the later of two equal internal keys first).
    pub fn record(&self, hash: u64, key: &[u8], trailer: u64, node: Node) {
        let mut i = hash as usize & self.mask;
        for _ in 0..MAX_PROBES {
            let slot = &self.slots[i];
            let mut cur = slot.load(Ordering::Acquire);
            loop {
                if !cur.is_null() {
                    // SAFETY: a slot holds only nodes of this memtable's list, published.
                    let held = unsafe { skiplist::key(cur) };
                    if user_key(held) != key {
                        break;
                    }
                    if trailer_of(held) > trailer {
                        return;
                    }
                }
                match slot.compare_exchange(cur, node, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return,
                    Err(now) => cur = now,
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// What the index knows of `key` (of hash `hash`).
    pub fn lookup(&self, hash: u64, key: &[u8]) -> Lookup {
        let mut i = hash as usize & self.mask;
        for _ in 0..MAX_PROBES {
            let cur = self.slots[i].load(Ordering::Acquire);
            if cur.is_null() {
                return Lookup::Absent;
            }
            // SAFETY: as in `record`.
            if user_key(unsafe { skiplist::key(cur) }) == key {
                return Lookup::Newest(cur);
            }
            i = (i + 1) & self.mask;
        }
        Lookup::Unknown
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            for s in self.slots.iter() {
                s.store(std::ptr::null_mut(), Ordering::Relaxed);
            }
            pool.give_index(std::mem::take(&mut self.slots));
        }
    }
}

/// The trailer (sequence number and kind) of an internal key.
pub(super) fn trailer_of(ikey: &[u8]) -> u64 {
    let at = ikey.len() - TRAILER_LEN;
    u64::from_le_bytes(ikey[at..].try_into().expect("a trailer is 8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::pack_trailer;
    use crate::types::ValueKind;
    use skiplist::SkipList;

    fn insert(list: &SkipList, index: &Index, key: &[u8], seq: u64) -> Node {
        let trailer = pack_trailer(seq, ValueKind::Value);
        let (node, _) = list.insert(key, trailer, b"v");
        index.record(Index::hash(key), key, trailer, node);
        node
    }

    fn seq_of(lookup: Lookup) -> Option<u64> {
        match lookup {
            // SAFETY: nodes of the test's list, alive with it.
            Lookup::Newest(n) => Some(trailer_of(unsafe { skiplist::key(n) }) >> 8),
            Lookup::Absent => None,
            Lookup::Unknown => panic!("an index with room answers every key"),
        }
    }

    #[test]
    fn answers_the_newest_entry_and_proves_absence() {
        let list = SkipList::new(None);
        let index = Index::new(0, None);
        insert(&list, &index, b"a", 5);
        insert(&list, &index, b"a", 9);
        // An older entry recorded late (a relocation at its original sequence number)
        // does not replace the newer one.
        insert(&list, &index, b"a", 7);
        insert(&list, &index, b"b", 1);
        assert_eq!(seq_of(index.lookup(Index::hash(b"a"), b"a")), Some(9));
        assert_eq!(seq_of(index.lookup(Index::hash(b"b"), b"b")), Some(1));
        assert_eq!(seq_of(index.lookup(Index::hash(b"c"), b"c")), None);
    }

    #[test]
    fn keys_past_the_probe_bound_are_unknown_never_wrong() {
        // Every key of the same hash: the first MAX_PROBES take the slots from it on, the
        // rest are not indexed.
        let list = SkipList::new(None);
        let index = Index::new(0, None);
        let keys: Vec<Vec<u8>> = (0..MAX_PROBES as u32 + 4)
            .map(|i| i.to_be_bytes().to_vec())
            .collect();
        for (seq, k) in keys.iter().enumerate() {
            let trailer = pack_trailer(seq as u64 + 1, ValueKind::Value);
            let (node, _) = list.insert(k, trailer, b"v");
            index.record(42, k, trailer, node);
        }
        for (seq, k) in keys.iter().enumerate() {
            match index.lookup(42, k) {
                Lookup::Newest(n) => {
                    assert!(seq < MAX_PROBES);
                    // SAFETY: a node of `list`.
                    assert_eq!(trailer_of(unsafe { skiplist::key(n) }) >> 8, seq as u64 + 1);
                }
                Lookup::Unknown => assert!(seq >= MAX_PROBES),
                Lookup::Absent => panic!("key {seq} was inserted"),
            }
        }
        // A key not inserted, on that full run of slots: unknown, not absent.
        assert!(matches!(index.lookup(42, b"zz"), Lookup::Unknown));
    }
}
