//! Spatial sampling with reuse distances (SHARDS, Waldspurger et al., FAST 2015).
//!
//! A block is sampled when the hash of its address falls below `rate` of the hash
//! space, so a sampled block is sampled on every access. For each sampled access the
//! sampler returns the reuse distance: the number of distinct sampled blocks accessed
//! since the previous access to the same block, scaled by `1 / rate` to estimate the
//! distance over all blocks. Distances come from a Fenwick tree over access positions
//! holding a 1 at the latest access of each block (the "distance tree"): the distance is
//! the number of ones strictly between the previous and the current position.

use xxhash_rust::xxh3::xxh3_64_with_seed;

const NONE: u32 = u32::MAX;
/// Marks a block whose hash was checked and is not sampled (saves hashing it again).
const SKIP: u32 = u32::MAX - 1;

/// Fenwick tree over positions `0..n` of 0/1 markers.
#[derive(Clone, Debug)]
struct Fenwick {
    t: Vec<i32>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Fenwick { t: vec![0; n + 1] }
    }
    fn add(&mut self, i: usize, d: i32) {
        let mut i = i + 1;
        while i < self.t.len() {
            self.t[i] += d;
            i += i & i.wrapping_neg();
        }
    }
    /// Sum over `0..i`.
    fn prefix(&self, i: usize) -> i64 {
        let (mut i, mut s) = (i, 0i64);
        while i > 0 {
            s += self.t[i] as i64;
            i -= i & i.wrapping_neg();
        }
        s
    }
    fn len(&self) -> usize {
        self.t.len() - 1
    }
}

/// A sampled access.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Dense id of the sampled block among sampled blocks.
    pub sid: u32,
    /// Scaled reuse distance in blocks; `None` on a first access.
    pub distance: Option<f64>,
}

pub struct Sampler {
    threshold: u64,
    scale: f64,
    sid_of: Vec<u32>,
    last_pos: Vec<u32>,
    tree: Fenwick,
    pos: usize,
}

impl Sampler {
    /// Samples about `rate` of the `n_lbas` blocks.
    pub fn new(n_lbas: u32, rate: f64) -> Self {
        let rate = rate.clamp(1e-6, 1.0);
        Sampler {
            threshold: if rate >= 1.0 {
                u64::MAX
            } else {
                (rate * u64::MAX as f64) as u64
            },
            scale: 1.0 / rate,
            sid_of: vec![NONE; n_lbas as usize],
            last_pos: Vec::new(),
            tree: Fenwick::new(1024),
            pos: 0,
        }
    }

    pub fn is_sampled(&self, lba: u32) -> bool {
        xxh3_64_with_seed(&lba.to_le_bytes(), 0x5a4d) <= self.threshold
    }

    pub fn sampled_blocks(&self) -> usize {
        self.last_pos.len()
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Records an access; returns the sample if the block is sampled.
    pub fn access(&mut self, lba: u32) -> Option<Sample> {
        let l = lba as usize;
        let mut sid = self.sid_of[l];
        if sid == SKIP {
            return None;
        }
        if sid == NONE {
            if !self.is_sampled(lba) {
                self.sid_of[l] = SKIP;
                return None;
            }
            sid = self.last_pos.len() as u32;
            self.sid_of[l] = sid;
            self.last_pos.push(NONE);
        }
        if self.pos == self.tree.len() {
            self.compact();
        }
        let prev = self.last_pos[sid as usize];
        let distance = if prev == NONE {
            None
        } else {
            let p = prev as usize;
            let d = self.tree.prefix(self.pos) - self.tree.prefix(p + 1);
            self.tree.add(p, -1);
            Some(d as f64 * self.scale)
        };
        self.tree.add(self.pos, 1);
        self.last_pos[sid as usize] = self.pos as u32;
        self.pos += 1;
        Some(Sample { sid, distance })
    }

    /// Renumbers the latest accesses `0..m` in order, keeping every distance.
    fn compact(&mut self) {
        let mut live: Vec<(u32, usize)> = self
            .last_pos
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != NONE)
            .map(|(s, &p)| (p, s))
            .collect();
        live.sort_unstable();
        let n = (live.len() * 2).max(1024);
        self.tree = Fenwick::new(n);
        for (i, &(_, s)) in live.iter().enumerate() {
            self.last_pos[s] = i as u32;
            self.tree.add(i, 1);
        }
        self.pos = live.len();
    }

    pub fn bytes(&self) -> usize {
        self.sid_of.len() * 4 + self.last_pos.len() * 4 + self.tree.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_reuse_distances_at_full_rate() {
        let mut s = Sampler::new(10, 1.0);
        let d: Vec<Option<f64>> = [0u32, 1, 2, 1, 0, 0, 3, 2]
            .iter()
            .map(|&l| s.access(l).unwrap().distance)
            .collect();
        // a b c b a a d c: distances -, -, -, 1, 2, 0, -, 3
        assert_eq!(
            d,
            vec![
                None,
                None,
                None,
                Some(1.0),
                Some(2.0),
                Some(0.0),
                None,
                Some(3.0)
            ]
        );
    }

    #[test]
    fn distances_survive_compaction() {
        let mut s = Sampler::new(4, 1.0);
        for i in 0..5000u32 {
            let got = s.access(i % 4).unwrap().distance;
            if i >= 4 {
                assert_eq!(got, Some(3.0));
            }
        }
    }

    #[test]
    fn sampling_rate_is_respected() {
        let s = Sampler::new(100_000, 1.0 / 32.0);
        let n = (0..100_000).filter(|&l| s.is_sampled(l)).count();
        assert!((2800..3500).contains(&n), "{n}");
    }
}
