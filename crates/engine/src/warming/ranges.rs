//! Key ranges: the unit the collector counts and the model predicts.
//!
//! The slides cut the key space into ranges ([0, 50), [50, 100), ...) because blocks are
//! the wrong unit: a compaction replaces them, while a key range keeps its identity and its
//! access history across compactions. Integer keys can be cut at fixed widths; byte-string
//! keys (here `user` + 20 hashed digits) cannot be cut evenly by width without knowing
//! their distribution, so the ranges are equi-depth: boundaries are taken from the index
//! blocks of the tables on disk (one index key per data block, in key order), every
//! `blocks_per_range`-th one, so a range holds about that many blocks' worth of keys when
//! it is cut. The boundaries are fixed once cut: ids must stay stable for the history to
//! mean anything. (The paper sizes ranges adaptively by doubling while ranges stay
//! informative; with hashed keys spread evenly, one cut at the data's density is what that
//! search would settle on, so it is not repeated here.)

/// Sorted boundaries: range `i` holds keys in `[bounds[i-1], bounds[i])`, the first range
/// everything below `bounds[0]`, the last everything from the last boundary up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRanges {
    bounds: Vec<Vec<u8>>,
    /// Each boundary's first 16 bytes as a number ([`prefix`]), in one contiguous array:
    /// a sampled client read searches these (in cache, no pointer per step) and compares
    /// whole keys only among boundaries sharing its prefix. Searching `bounds` directly
    /// followed a pointer to a separate allocation at each of its ~12 steps.
    prefixes: Vec<u128>,
}

/// The first 16 bytes of `key`, zero-padded, big-endian: `a <= b` implies
/// `prefix(a) <= prefix(b)`, so a strictly smaller prefix means a strictly smaller key.
fn prefix(key: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = key.len().min(16);
    b[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(b)
}

impl KeyRanges {
    /// Ranges cut from sorted user keys (index keys of data blocks), every `step`-th key a
    /// boundary, with the count kept within `[min, max]` ranges where the keys allow.
    /// `None` if the keys cannot make at least two ranges.
    pub fn from_sorted_keys(keys: &[Vec<u8>], step: usize, min: usize, max: usize) -> Option<Self> {
        debug_assert!(keys.windows(2).all(|w| w[0] <= w[1]), "keys must be sorted");
        if keys.is_empty() {
            return None;
        }
        let want = (keys.len() / step.max(1)).clamp(min.max(2), max.max(2));
        let mut bounds: Vec<Vec<u8>> = Vec::with_capacity(want);
        for i in 1..want {
            let k = &keys[i * keys.len() / want];
            if bounds.last().is_none_or(|b| b < k) {
                bounds.push(k.clone());
            }
        }
        let prefixes = bounds.iter().map(|b| prefix(b)).collect();
        (!bounds.is_empty()).then_some(KeyRanges { bounds, prefixes })
    }

    pub fn len(&self) -> usize {
        self.bounds.len() + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The range holding `key`.
    pub fn range_of(&self, key: &[u8]) -> usize {
        let p = prefix(key);
        // Boundaries with a smaller prefix are below `key`, those with a larger one above.
        let lo = self.prefixes.partition_point(|&b| b < p);
        let same = self.prefixes[lo..].partition_point(|&b| b == p);
        lo + self.bounds[lo..lo + same].partition_point(|b| b.as_slice() <= key)
    }

    /// The range of `key`, given that of a smaller key (walks forward: a block's keys in
    /// order cost one comparison each instead of a search).
    pub fn advance(&self, mut range: usize, key: &[u8]) -> usize {
        while range < self.bounds.len() && self.bounds[range].as_slice() <= key {
            range += 1;
        }
        range
    }

    /// The ranges a block with keys in `[first, last]` touches.
    pub fn span(&self, first: &[u8], last: &[u8]) -> std::ops::RangeInclusive<usize> {
        let lo = self.range_of(first);
        lo..=self.range_of(last).max(lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("k{i:05}").into_bytes()).collect()
    }

    #[test]
    fn equi_depth_cut_and_lookup() {
        let r = KeyRanges::from_sorted_keys(&keys(1000), 10, 2, 1000).unwrap();
        assert_eq!(r.len(), 100);
        assert_eq!(r.range_of(b"a"), 0, "below every boundary");
        assert_eq!(r.range_of(b"k00000"), 0);
        assert_eq!(r.range_of(b"k00009"), 0);
        assert_eq!(r.range_of(b"k00010"), 1, "a boundary starts its range");
        assert_eq!(r.range_of(b"k00999"), 99);
        assert_eq!(r.range_of(b"z"), 99, "above every boundary");
        assert_eq!(r.span(b"k00005", b"k00031"), 0..=3);
        assert_eq!(
            r.span(b"k00031", b"k00005"),
            3..=3,
            "a reversed span is one range"
        );
        for k in [b"k00009", b"k00010", b"k00500", b"z00000"] {
            assert_eq!(r.advance(0, k), r.range_of(k));
        }
        assert_eq!(r.advance(5, b"k00055"), 5);
    }

    #[test]
    fn the_prefix_search_finds_what_a_search_of_whole_keys_finds() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // Keys sharing long prefixes, shorter than the prefix, and with zero bytes, so
        // that every path (prefix decides, whole keys decide) is taken.
        let key = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
            let len = rng.random_range(0..24);
            let common = rng.random_range(0..20usize);
            (0..len)
                .map(|i| {
                    if i < common {
                        b'u'
                    } else {
                        rng.random_range(0..3u8)
                    }
                })
                .collect()
        };
        let mut sorted: Vec<Vec<u8>> = (0..2000).map(|_| key(&mut rng)).collect();
        sorted.sort();
        let r = KeyRanges::from_sorted_keys(&sorted, 4, 2, 1000).unwrap();
        for _ in 0..20_000 {
            let k = key(&mut rng);
            assert_eq!(
                r.range_of(&k),
                r.bounds.partition_point(|b| b.as_slice() <= k.as_slice()),
                "{k:?}"
            );
        }
        for b in &r.bounds {
            assert_eq!(r.range_of(b), r.bounds.partition_point(|x| x <= b));
        }
    }

    #[test]
    fn range_count_is_clamped_and_duplicates_merge() {
        let r = KeyRanges::from_sorted_keys(&keys(1000), 1, 2, 64).unwrap();
        assert_eq!(r.len(), 64);
        let r = KeyRanges::from_sorted_keys(&keys(1000), 500, 16, 64).unwrap();
        assert_eq!(r.len(), 16, "min wins over a coarse step");
        let same = vec![b"x".to_vec(); 100];
        let r = KeyRanges::from_sorted_keys(&same, 1, 2, 64).unwrap();
        assert_eq!(r.len(), 2, "equal keys give one boundary");
        assert!(KeyRanges::from_sorted_keys(&[], 1, 2, 64).is_none());
    }
}
