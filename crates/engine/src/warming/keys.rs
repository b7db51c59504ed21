//! The user keys of blocks: listed ([`BlockKeys`]), and as sets and maps of their 64-bit
//! hashes ([`KeySet`]): which keys a set of blocks held.

use crate::internal_key::user_key;
use crate::sst::block::Block;
use std::collections::HashMap;
use std::sync::Arc;

/// The user keys of a data block, copied once into one buffer.
#[derive(Debug, Default)]
pub struct BlockKeys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl BlockKeys {
    /// The user keys of `block` (versions of one key appear once).
    pub fn of(block: &Arc<Block>) -> BlockKeys {
        let mut k = BlockKeys::default();
        let mut it = block.iter();
        it.seek_to_first();
        while it.valid() {
            let u = user_key(it.key());
            if k.last() != Some(u) {
                k.bytes.extend_from_slice(u);
                k.ends.push(k.bytes.len());
            }
            it.next();
        }
        k
    }

    /// Keys from a list (tests, and policies that build their own).
    pub fn from_keys<K: AsRef<[u8]>>(keys: &[K]) -> BlockKeys {
        let mut k = BlockKeys::default();
        for u in keys {
            k.bytes.extend_from_slice(u.as_ref());
            k.ends.push(k.bytes.len());
        }
        k
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    pub fn first(&self) -> Option<&[u8]> {
        (!self.is_empty()).then(|| self.get(0))
    }

    pub fn last(&self) -> Option<&[u8]> {
        (!self.is_empty()).then(|| self.get(self.len() - 1))
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Hashes of user keys, sorted: which keys a set of blocks held. (64-bit hashes: a false
/// match is a one-in-2^64 event per pair.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeySet(Vec<u64>);

impl KeySet {
    pub const EMPTY: KeySet = KeySet(Vec::new());

    pub fn hash(key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(key)
    }

    pub fn from_hashes(mut v: Vec<u64>) -> KeySet {
        v.sort_unstable();
        v.dedup();
        KeySet(v)
    }

    pub fn of(keys: &BlockKeys) -> KeySet {
        KeySet::from_hashes(keys.iter().map(KeySet::hash).collect())
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(KeySet::hash(key))
    }

    pub fn contains_hash(&self, h: u64) -> bool {
        self.0.binary_search(&h).is_ok()
    }

    /// True if one of `hashes` is in the set.
    pub fn any(&self, hashes: &[u64]) -> bool {
        !self.0.is_empty() && hashes.iter().any(|h| self.contains_hash(*h))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Hashes a [`KeySet::hash`] for a `HashMap`: it is uniform already, so it is its own
/// hash (a second hash of every probe would cost the oracle's judging more than its map).
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyHashHasher(u64);

impl std::hash::Hasher for KeyHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by [`KeySet::hash`]es.
pub type KeyHashMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<KeyHashHasher>>;
