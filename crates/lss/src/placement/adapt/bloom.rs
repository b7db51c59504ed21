//! The re-access identifier of proactive demotion (paper 004 sec. 3.4): per GC group, a
//! cascade of Bloom filters filled with the blocks GC rewrote back into that group. A
//! block's score for the group is the number of filters that contain it, that is, how
//! many recent periods it was migrated back there. The cascade is bounded: when the
//! newest filter holds its quota, a fresh one starts and the oldest is dropped (FIFO).

use std::collections::VecDeque;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A Bloom filter with `k` probes derived by double hashing.
#[derive(Clone, Debug)]
pub struct Bloom {
    bits: Vec<u64>,
    mask: u64,
    k: u32,
    inserted: usize,
    /// Keys the filter was sized for.
    capacity: usize,
}

impl Bloom {
    /// A filter sized for `capacity` elements at `bits_per_key` bits each.
    pub fn new(capacity: usize, bits_per_key: usize) -> Self {
        let nbits = (capacity.max(64) * bits_per_key).next_power_of_two();
        let k = ((bits_per_key as f64) * std::f64::consts::LN_2)
            .round()
            .clamp(1.0, 12.0) as u32;
        Bloom {
            bits: vec![0; nbits / 64],
            mask: nbits as u64 - 1,
            k,
            inserted: 0,
            capacity,
        }
    }

    /// The key's hash; probes are derived from it by double hashing, so a cascade
    /// hashes a key once for all its filters.
    pub fn hash(key: u32) -> u64 {
        xxh3_64_with_seed(&key.to_le_bytes(), 0x5eed)
    }

    fn probe(&self, h: u64, i: u64) -> (usize, u64) {
        let b = h.wrapping_add(i.wrapping_mul((h >> 32) | 1)) & self.mask;
        ((b / 64) as usize, 1u64 << (b % 64))
    }

    /// Inserts `key`; returns whether any bit changed (false: probably present already).
    pub fn insert(&mut self, key: u32) -> bool {
        self.insert_hashed(Self::hash(key))
    }

    fn insert_hashed(&mut self, h: u64) -> bool {
        let mut changed = false;
        for i in 0..self.k as u64 {
            let (w, m) = self.probe(h, i);
            changed |= self.bits[w] & m == 0;
            self.bits[w] |= m;
        }
        if changed {
            self.inserted += 1;
        }
        changed
    }

    pub fn contains(&self, key: u32) -> bool {
        self.contains_hashed(Self::hash(key))
    }

    fn contains_hashed(&self, h: u64) -> bool {
        (0..self.k as u64).all(|i| {
            let (w, m) = self.probe(h, i);
            self.bits[w] & m != 0
        })
    }

    /// Distinct keys inserted (keys that changed no bit are not counted).
    pub fn len(&self) -> usize {
        self.inserted
    }

    pub fn is_empty(&self) -> bool {
        self.inserted == 0
    }

    pub fn bytes(&self) -> usize {
        self.bits.len() * 8
    }
}

/// A FIFO cascade of Bloom filters.
#[derive(Clone, Debug)]
pub struct Cascade {
    filters: VecDeque<Bloom>,
    per_filter: usize,
    max_filters: usize,
    bits_per_key: usize,
}

impl Cascade {
    pub fn new(max_filters: usize, per_filter: usize, bits_per_key: usize) -> Self {
        Cascade {
            filters: VecDeque::from([Bloom::new(per_filter, bits_per_key)]),
            per_filter,
            max_filters: max_filters.max(1),
            bits_per_key,
        }
    }

    /// Changes the quota of the filters: the newest one closes at the smaller of its own
    /// size and the new quota (a filter is never filled beyond what it was sized for,
    /// where its false positives would climb), the next ones are sized for the quota.
    pub fn set_quota(&mut self, per_filter: usize) {
        self.per_filter = per_filter.max(1);
    }

    pub fn insert(&mut self, key: u32) {
        let newest = self.filters.back().unwrap();
        if newest.len() >= newest.capacity.min(self.per_filter) {
            self.filters
                .push_back(Bloom::new(self.per_filter, self.bits_per_key));
            if self.filters.len() > self.max_filters {
                self.filters.pop_front();
            }
        }
        self.filters.back_mut().unwrap().insert(key);
    }

    /// Number of filters containing `key`.
    pub fn score(&self, key: u32) -> usize {
        self.score_hashed(Bloom::hash(key))
    }

    /// Whether at least `t` filters contain the key (hash from [`Bloom::hash`]); stops as
    /// soon as the answer is known, newest filter first.
    pub fn score_at_least(&self, h: u64, t: usize) -> bool {
        let (mut hits, mut left) = (0, self.filters.len());
        for f in self.filters.iter().rev() {
            if hits >= t {
                return true;
            }
            if hits + left < t {
                return false;
            }
            hits += usize::from(f.contains_hashed(h));
            left -= 1;
        }
        hits >= t
    }

    /// [`Cascade::score`] with the key's [`Bloom::hash`] computed by the caller.
    pub fn score_hashed(&self, h: u64) -> usize {
        self.filters.iter().filter(|f| f.contains_hashed(h)).count()
    }

    pub fn filters(&self) -> usize {
        self.filters.len()
    }

    pub fn bytes(&self) -> usize {
        self.filters.iter().map(Bloom::bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_has_no_false_negatives_and_few_false_positives() {
        let mut b = Bloom::new(1000, 10);
        for k in 0..1000 {
            assert!(b.insert(k));
        }
        assert!(!b.insert(7), "re-inserting changes no bit");
        assert!((0..1000).all(|k| b.contains(k)));
        let fp = (100_000..110_000).filter(|&k| b.contains(k)).count();
        assert!(fp < 200, "false positive rate {fp}/10000");
    }

    #[test]
    fn cascade_scores_and_evicts_fifo() {
        let mut c = Cascade::new(3, 100, 10);
        // Each period fills exactly one filter. Key 1 is inserted in every period, key 2
        // only in the first.
        for period in 0..3u32 {
            c.insert(1);
            let mut n = 1;
            if period == 0 {
                c.insert(2);
                n += 1;
            }
            for k in 0..(100 - n) {
                c.insert(1000 + period * 1000 + k);
            }
        }
        assert_eq!(c.filters(), 3);
        assert_eq!(c.score(1), 3);
        assert_eq!(c.score(2), 1);
        assert_eq!(c.score(999_999), 0);
        let h = Bloom::hash(2);
        assert!(c.score_at_least(h, 1) && !c.score_at_least(h, 2));
        assert!(c.score_at_least(Bloom::hash(1), 3));
        // A fourth period evicts the first filter, and key 2 with it.
        for k in 0..100 {
            c.insert(9000 + k);
        }
        assert_eq!(c.filters(), 3);
        assert_eq!(c.score(2), 0);
        assert_eq!(c.score(1), 2);
    }

    #[test]
    fn quota_applies_to_the_next_filters() {
        let mut c = Cascade::new(4, 100, 10);
        for k in 0..50 {
            c.insert(k);
        }
        assert_eq!(c.filters(), 1);
        // Smaller quota: the newest filter (50 keys) is full, the next ones take 10.
        c.set_quota(10);
        for k in 50..70 {
            c.insert(k);
        }
        assert_eq!(c.filters(), 3);
        assert_eq!(c.score(0), 1);
        // FIFO still caps the cascade at 4 filters: the 50-key filter goes first.
        for k in 70..90 {
            c.insert(k);
        }
        assert_eq!(c.filters(), 4);
        assert_eq!(c.score(0), 0);
        // A larger quota does not overfill the newest filter (sized for 10): it closes
        // at 10 keys, and the next one is sized for 1000.
        c.set_quota(1000);
        for k in 90..110 {
            c.insert(k);
        }
        assert_eq!(c.filters(), 4);
        assert_eq!(c.score(95), 1);
        for k in 110..1000 {
            c.insert(k);
        }
        assert_eq!(c.filters(), 4, "a 1000-key filter holds the rest");
    }
}
