//! A hash index beside the skip list: from a user key to its node (whose chain holds the
//! key's later versions, [`super::skiplist`]).
//!
//! Why: a point lookup in the skip list visits about `4 * log4(n)` nodes spread over the
//! arena, and once the memtable outgrows the CPU caches most of them are cache misses
//! (a pipelined `ZADD` on the server spent 13 % of its CPU in memtable lookups, most of it
//! waiting for nodes). The index answers "the newest entry of this key" in one or two
//! misses, and "no entry of this key" (every lookup of a key that lives in the tables)
//! without a search, as RocksDB's hash-based memtables answer a prefix; and a write of a
//! key the memtable holds goes onto its node's chain with no search either.
//!
//! What it holds: open addressing with linear probing over a fixed number of slots, each
//! null or a node of the list. A key's slot, once taken, is never cleared, replaced or
//! given to another key (the list has one node per user key); a key that finds no slot
//! within [`MAX_PROBES`] of its hash is not indexed. So a lookup that reaches a
//! null slot before finding its key proves the key has no entry (had it been indexed, its
//! slot would come first; had it failed to be, every slot it probed was taken, and still
//! is), and one that probes [`MAX_PROBES`] taken slots without finding it knows nothing
//! and searches the list. Entries are recorded after they are linked and before their
//! sequence numbers are published (`db::write`), so a reader at a published snapshot
//! finds in the index everything the list holds at or below it.

use super::skiplist::{self, ChunkPool, Node};
use crate::internal_key::user_key;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

/// Slots a key may probe. A table more than about three quarters full starts failing to
/// index keys at this bound; those are then found by searching the list.
const MAX_PROBES: usize = 16;

/// Fewest slots of an index.
const MIN_SLOTS: usize = 1 << 10;

/// What the index knows of a key.
pub(super) enum Lookup {
    /// The key's node.
    Node(Node),
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

    /// Records `node`, the list's node of `key` (of hash `hash`), unless it is recorded.
    pub fn record(&self, hash: u64, key: &[u8], node: Node) {
        let mut i = hash as usize & self.mask;
        for _ in 0..MAX_PROBES {
            let slot = &self.slots[i];
            let cur = match slot.compare_exchange(
                std::ptr::null_mut(),
                node,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => now,
            };
            // SAFETY: a slot holds only nodes of this memtable's list, published.
            if user_key(unsafe { skiplist::key(cur) }) == key {
                debug_assert_eq!(cur, node, "one node per user key");
                return;
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
                return Lookup::Node(cur);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_key::pack_trailer;
    use crate::internal_key::ValueKind;
    use skiplist::SkipList;

    fn insert(list: &SkipList, index: &Index, key: &[u8], seq: u64) -> Node {
        let (node, _) = list.insert(key, pack_trailer(seq, ValueKind::Value), b"v");
        index.record(Index::hash(key), key, node);
        node
    }

    #[test]
    fn answers_the_node_of_a_key_and_proves_absence() {
        let list = SkipList::new(None);
        let index = Index::new(0, None);
        let a = insert(&list, &index, b"a", 5);
        // Later versions join the key's node: the index keeps answering it.
        assert_eq!(insert(&list, &index, b"a", 9), a);
        assert_eq!(insert(&list, &index, b"a", 7), a);
        let b = insert(&list, &index, b"b", 1);
        assert!(matches!(index.lookup(Index::hash(b"a"), b"a"), Lookup::Node(n) if n == a));
        assert!(matches!(index.lookup(Index::hash(b"b"), b"b"), Lookup::Node(n) if n == b));
        assert!(matches!(
            index.lookup(Index::hash(b"c"), b"c"),
            Lookup::Absent
        ));
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
        let mut nodes = Vec::new();
        for (seq, k) in keys.iter().enumerate() {
            let trailer = pack_trailer(seq as u64 + 1, ValueKind::Value);
            let (node, _) = list.insert(k, trailer, b"v");
            index.record(42, k, node);
            nodes.push(node);
        }
        for (seq, k) in keys.iter().enumerate() {
            match index.lookup(42, k) {
                Lookup::Node(n) => {
                    assert!(seq < MAX_PROBES);
                    assert_eq!(n, nodes[seq]);
                }
                Lookup::Unknown => assert!(seq >= MAX_PROBES),
                Lookup::Absent => panic!("key {seq} was inserted"),
            }
        }
        // A key not inserted, on that full run of slots: unknown, not absent.
        assert!(matches!(index.lookup(42, b"zz"), Lookup::Unknown));
    }
}
