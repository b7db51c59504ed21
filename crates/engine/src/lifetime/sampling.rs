//! Which observed lifetimes become training samples (paper 000, sec. 4.3).
//!
//! L0-L1 compaction sees the true lifetime of a key's previous write; hot keys would flood
//! the dataset, so such a sample is kept with probability `EDWC_{s_idx} / EDWC_{l_idx}`
//! (Eq. 2): close to 1 for a key written rarely (both counters near 1), small for a key
//! written often (the long window holds many more writes than the short one). GC keeps a
//! valid key's sample with probability equal to the job's valid ratio, `1 - gc_ratio`.

use super::features::FeatureRecord;
use std::sync::atomic::{AtomicU64, Ordering};

/// Eq. 2 on the record of the previous write, clamped to `[0, 1]`.
pub fn compaction_sample_probability(record: &FeatureRecord, s_idx: usize, l_idx: usize) -> f64 {
    let e = record.edwc();
    let (s, l) = (f64::from(e[s_idx]), f64::from(e[l_idx]));
    if l.is_finite() && l > 0.0 && s.is_finite() {
        (s / l).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

/// GC keeps a valid key's sample with the job's valid ratio, `1 - gc_ratio`.
pub fn gc_sample_probability(gc_ratio: f64) -> f64 {
    if gc_ratio.is_nan() {
        return 1.0;
    }
    (1.0 - gc_ratio).clamp(0.0, 1.0)
}

/// A lock-free coin for sampling decisions (SplitMix64 over an atomic counter).
#[derive(Debug)]
pub struct Sampler {
    state: AtomicU64,
}

impl Sampler {
    pub fn new(seed: u64) -> Self {
        Sampler {
            state: AtomicU64::new(seed),
        }
    }

    /// A uniform draw in `[0, 1)`.
    pub fn next_f64(&self) -> f64 {
        let mut z = self
            .state
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn accept(&self, p: f64) -> bool {
        p >= 1.0 || (p > 0.0 && self.next_f64() < p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq2_hand_computed() {
        // A key written once has every counter at 1: always sampled.
        assert_eq!(
            compaction_sample_probability(&FeatureRecord::new(), 0, 5),
            1.0
        );
        // Two writes 2^20 apart: EDWC_0 = 1 + 2^-2 = 1.25, EDWC_1 = 1 + 2^-1 = 1.5.
        let mut r = FeatureRecord::new();
        r.update(1 << 20, 0);
        let p = compaction_sample_probability(&r, 0, 1);
        assert!((p - 1.25 / 1.5).abs() < 1e-6, "{p}");
        assert_eq!(compaction_sample_probability(&r, 3, 3), 1.0);
        // A hot key: many writes 1000 apart make the short/long ratio small.
        let mut r = FeatureRecord::new();
        for i in 1..=5000u64 {
            r.update(i * 1000, (i - 1) * 1000);
        }
        assert!(compaction_sample_probability(&r, 0, 9) < 0.2);
    }

    #[test]
    fn gc_probability_is_valid_ratio() {
        assert_eq!(gc_sample_probability(0.25), 0.75);
        assert_eq!(gc_sample_probability(1.5), 0.0);
        assert_eq!(gc_sample_probability(f64::NAN), 1.0);
    }

    #[test]
    fn sampler_hits_its_rate() {
        let s = Sampler::new(42);
        assert!(s.accept(1.0) && !s.accept(0.0));
        let hits = (0..100_000).filter(|_| s.accept(0.3)).count();
        assert!((hits as f64 / 100_000.0 - 0.3).abs() < 0.01, "{hits}");
    }
}
