//! A lock-free lifetime histogram (paper 000, sec. 4.3.1: `H_s` and `H_l`).
//!
//! Buckets are log-linear: values below 8 have a bucket each, and every power of two above
//! is split into 8 equal sub-ranges, so a bucket is at most 12.5% wide relative to its
//! lower bound and 496 buckets cover all of `u64`. Recording is one relaxed atomic add;
//! readers walk the counters without a lock and may see a slightly stale total, which is
//! harmless for a threshold that is recomputed after every GC job.

use std::sync::atomic::{AtomicU64, Ordering};

const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Number of buckets.
pub const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) * SUB as usize;

/// Bucket index of `v`.
#[inline]
fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let mantissa = (v >> (e - SUB_BITS)) - SUB;
    ((e - SUB_BITS + 1) as usize) * SUB as usize + mantissa as usize
}

/// `[lo, hi]`, inclusive, of bucket `i`.
#[inline]
fn bounds(i: usize) -> (u64, u64) {
    if (i as u64) < SUB {
        return (i as u64, i as u64);
    }
    let e = (i as u64 / SUB) as u32 + SUB_BITS - 1;
    let m = i as u64 % SUB;
    let lo = (SUB + m) << (e - SUB_BITS);
    let width = 1u64 << (e - SUB_BITS);
    (lo, lo + (width - 1))
}

/// Counts of lifetimes (in sequence numbers) by range.
pub struct LifetimeHistogram {
    counts: Box<[AtomicU64]>,
    total: AtomicU64,
}

impl Default for LifetimeHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for LifetimeHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifetimeHistogram")
            .field("count", &self.count())
            .field("p50", &self.percentile(50.0))
            .finish()
    }
}

impl LifetimeHistogram {
    pub fn new() -> Self {
        LifetimeHistogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            total: AtomicU64::new(0),
        }
    }

    /// Adds one lifetime.
    pub fn record(&self, lifetime: u64) {
        self.counts[index(lifetime)].fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    /// Number of recorded lifetimes.
    pub fn count(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The lifetime below or at which `pct` percent (0..=100) of the recorded lifetimes
    /// fall, interpolated linearly inside its bucket; `None` while empty.
    pub fn percentile(&self, pct: f64) -> Option<u64> {
        let pct = if pct.is_nan() {
            0.0
        } else {
            pct.clamp(0.0, 100.0)
        };
        let snapshot: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = snapshot.iter().sum();
        if total == 0 {
            return None;
        }
        let target = ((pct / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, &c) in snapshot.iter().enumerate() {
            if c == 0 {
                continue;
            }
            if seen + c >= target {
                let (lo, hi) = bounds(i);
                let k = (target - seen) as f64 / c as f64;
                return Some(lo + ((hi - lo) as f64 * k) as u64);
            }
            seen += c;
        }
        // Unreachable with a consistent snapshot; be safe.
        Some(u64::MAX)
    }

    /// Halves every counter, so that old lifetimes weigh less after a workload shift.
    pub fn halve(&self) {
        let mut removed = 0;
        for c in self.counts.iter() {
            let old = c
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v - v / 2))
                .unwrap();
            removed += old / 2;
        }
        self.total.fetch_sub(removed, Ordering::Relaxed);
    }

    pub fn clear(&self) {
        for c in self.counts.iter() {
            c.store(0, Ordering::Relaxed);
        }
        self.total.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_u64() {
        let mut next = 0u64;
        for i in 0..BUCKETS {
            let (lo, hi) = bounds(i);
            assert_eq!(lo, next, "bucket {i}");
            assert_eq!(index(lo), i);
            assert_eq!(index(hi), i);
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    #[test]
    fn percentiles_of_a_uniform_range() {
        let h = LifetimeHistogram::new();
        assert_eq!(h.percentile(50.0), None);
        for v in 1..=10_000u64 {
            h.record(v);
        }
        assert_eq!(h.count(), 10_000);
        for (p, want) in [(10.0, 1_000.0), (50.0, 5_000.0), (90.0, 9_000.0)] {
            let got = h.percentile(p).unwrap() as f64;
            assert!((got - want).abs() / want < 0.02, "p{p}: {got}");
        }
        assert_eq!(h.percentile(0.0), Some(1));
        assert!(h.percentile(100.0).unwrap() >= 10_000);
    }

    #[test]
    fn small_values_are_exact_and_halving_keeps_shape() {
        let h = LifetimeHistogram::new();
        for _ in 0..4 {
            h.record(3);
            h.record(5);
        }
        assert_eq!(h.percentile(50.0), Some(3));
        assert_eq!(h.percentile(51.0), Some(5));
        h.halve();
        assert_eq!(h.count(), 4);
        assert_eq!(h.percentile(50.0), Some(3));
        h.clear();
        assert_eq!(h.percentile(50.0), None);
    }

    #[test]
    fn concurrent_records_are_not_lost() {
        let h = std::sync::Arc::new(LifetimeHistogram::new());
        let ts: Vec<_> = (0..4)
            .map(|t| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for v in 0..10_000u64 {
                        h.record(v * (t + 1));
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(h.count(), 40_000);
    }
}
