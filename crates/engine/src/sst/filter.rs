//! A whole-table Bloom filter over user keys, so that a Get for a key a table does not hold
//! costs no block read at all.
//!
//! One filter covers the entire table (RocksDB's "full filter") rather than one filter per
//! data block: a point lookup then needs one probe sequence and, when it says "absent", no
//! index or data block. It is keyed by *user* key, because a Get asks "is any version of
//! this key here", whatever its sequence number.
//!
//! # Layout
//!
//! ```text
//! bits: [u8; m / 8] | num_probes: u8
//! ```
//!
//! Bit `i` is bit `i % 8` of byte `i / 8`. Every key is hashed once with 64-bit xxh3, and
//! its `k = num_probes` bit positions come from double hashing (Kirsch and Mitzenmacher):
//! `pos_j = (h + j * delta) mod m`, with `delta = h rotated by 32 bits`. With `b` bits per
//! key, `k = round(b * ln 2)` clamped to `1..=30` minimises the false-positive rate, about
//! 0.8% at `b = 10`. Empty filter contents mean "no filter": every key may be present.

use super::block::MalformedBlock;
use xxhash_rust::xxh3::xxh3_64;

/// Fewer bits than this make the rate degenerate for tiny tables.
const MIN_FILTER_BITS: u64 = 64;

/// The optimal number of probes for `bits_per_key`, clamped to `1..=30`.
pub fn num_probes(bits_per_key: u32) -> u32 {
    ((f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32).clamp(1, 30)
}

fn key_hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// The bit positions probed for hash `h` in a filter of `m` bits.
fn probes(h: u64, m: u64, k: u32) -> impl Iterator<Item = u64> {
    let delta = h.rotate_left(32);
    (0..u64::from(k)).map(move |j| h.wrapping_add(j.wrapping_mul(delta)) % m)
}

/// Collects user-key hashes while a table is written and produces the filter at the end.
#[derive(Debug)]
pub struct BloomFilterBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl BloomFilterBuilder {
    /// `bits_per_key == 0` builds no filter (empty contents).
    pub fn new(bits_per_key: u32) -> Self {
        BloomFilterBuilder {
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    /// Adds a user key. Consecutive repeats (versions of one key) are stored once.
    pub fn add_key(&mut self, user_key: &[u8]) {
        if self.bits_per_key == 0 {
            return;
        }
        let h = key_hash(user_key);
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    pub fn num_keys(&self) -> usize {
        self.hashes.len()
    }

    /// The filter contents, leaving the builder empty.
    pub fn finish(&mut self) -> Vec<u8> {
        if self.bits_per_key == 0 {
            return Vec::new();
        }
        let k = num_probes(self.bits_per_key);
        let bits = (self.hashes.len() as u64 * u64::from(self.bits_per_key)).max(MIN_FILTER_BITS);
        let bytes = bits.div_ceil(8) as usize;
        let m = bytes as u64 * 8;
        let mut out = vec![0u8; bytes + 1];
        for &h in &self.hashes {
            for pos in probes(h, m, k) {
                out[(pos / 8) as usize] |= 1 << (pos % 8);
            }
        }
        out[bytes] = k as u8;
        self.hashes.clear();
        out
    }
}

/// A parsed filter, ready for queries.
#[derive(Debug, Clone)]
pub struct BloomFilter {
    /// The bit array followed by the probe count; empty for "no filter".
    data: Vec<u8>,
}

impl BloomFilter {
    /// Parses filter contents as written by [`BloomFilterBuilder::finish`].
    pub fn new(data: Vec<u8>) -> Result<BloomFilter, MalformedBlock> {
        if let Some((&k, bits)) = data.split_last() {
            if bits.is_empty() {
                return Err(MalformedBlock("filter has no bit array".into()));
            }
            if !(1..=30).contains(&k) {
                return Err(MalformedBlock(format!(
                    "filter probe count {k} not in 1..=30"
                )));
            }
        }
        Ok(BloomFilter { data })
    }

    /// False means the key is certainly absent; true means it may be present.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let Some((&k, bits)) = self.data.split_last() else {
            return true;
        };
        let m = bits.len() as u64 * 8;
        probes(key_hash(user_key), m, u32::from(k))
            .all(|pos| bits[(pos / 8) as usize] & (1 << (pos % 8)) != 0)
    }

    /// Whether this is a real filter (false for a table written without one).
    pub fn is_present(&self) -> bool {
        !self.data.is_empty()
    }

    pub fn size_in_bytes(&self) -> usize {
        self.data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: impl Iterator<Item = Vec<u8>>, bits_per_key: u32) -> BloomFilter {
        let mut b = BloomFilterBuilder::new(bits_per_key);
        for k in keys {
            b.add_key(&k);
        }
        BloomFilter::new(b.finish()).unwrap()
    }

    #[test]
    fn probe_count_follows_bits_per_key() {
        assert_eq!(num_probes(10), 7);
        assert_eq!(num_probes(1), 1);
        assert_eq!(num_probes(0), 1);
        assert_eq!(num_probes(100), 30);
    }

    #[test]
    fn no_false_negatives_and_low_false_positive_rate() {
        let n = 100_000u32;
        let key = |i: u32| format!("user-key-{i:08}").into_bytes();
        let f = build((0..n).map(key), 10);
        for i in 0..n {
            assert!(f.may_contain(&key(i)), "false negative for key {i}");
        }
        let probes = 100_000u32;
        let fp = (n..n + probes).filter(|&i| f.may_contain(&key(i))).count();
        let rate = fp as f64 / f64::from(probes);
        assert!(rate < 0.015, "false-positive rate {rate}");
    }

    #[test]
    fn tiny_and_empty_filters_work() {
        let f = build(std::iter::once(b"k".to_vec()), 10);
        assert!(f.may_contain(b"k"));
        let empty = build(std::iter::empty(), 10);
        assert!(empty.is_present());
        assert!(!empty.may_contain(b"anything"));
        let none = build(std::iter::once(b"k".to_vec()), 0);
        assert!(!none.is_present());
        assert!(none.may_contain(b"whatever"));
    }

    #[test]
    fn malformed_filters_are_rejected() {
        assert!(BloomFilter::new(vec![7]).is_err());
        assert!(BloomFilter::new(vec![0xff, 0]).is_err());
        assert!(BloomFilter::new(vec![0xff, 31]).is_err());
    }
}
