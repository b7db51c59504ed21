//! Short, long and default lifetimes of value files (paper 000, sec. 4.3.1, Eq. 3-6).
//!
//! The GC ratio is the share of invalid (garbage) values found by the last GC job. When it
//! is low, GC wasted work copying live values, so the thresholds move up the lifetime
//! distributions; when it is high they move down. `l_s` is a percentile of the short
//! histogram (true lifetimes seen in L0-L1 compaction), `l_l` of the long histogram
//! (elapsed lifetimes of values found valid by GC), and `l_d`, the TTL of files written
//! by flush, lies between them.

use super::features::{EDWC_BASE_LOG2, NUM_EDWC};
use super::histogram::LifetimeHistogram;
use crate::error::{Error, Result};
use crate::internal_key::SeqNo;
use std::sync::atomic::{AtomicU64, Ordering};

/// The lifetime class of a value file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LifetimeClass {
    /// Written by flush; TTL `l_d`.
    Default = 0,
    /// Predicted short remaining lifetime by GC; TTL `l_s`.
    Short = 1,
    /// Predicted long remaining lifetime by GC; TTL `l_l`.
    Long = 2,
}

impl LifetimeClass {
    pub fn from_u8(b: u8) -> Option<LifetimeClass> {
        match b {
            0 => Some(LifetimeClass::Default),
            1 => Some(LifetimeClass::Short),
            2 => Some(LifetimeClass::Long),
            _ => None,
        }
    }

    /// The TTL, in sequence numbers, of a file of this class under `t`.
    pub fn ttl(self, t: &Thresholds) -> SeqNo {
        match self {
            LifetimeClass::Default => t.default,
            LifetimeClass::Short => t.short,
            LifetimeClass::Long => t.long,
        }
    }
}

/// Tuning of Eq. 3-6; the defaults are the paper's (sec. 5.1).
#[derive(Clone, Debug, PartialEq)]
pub struct ThresholdParams {
    pub alpha_s: f64,
    pub alpha_l: f64,
    pub beta_0: f64,
    pub beta_1: f64,
    /// Percent.
    pub ini_sp0: f64,
    pub ini_sp1: f64,
    pub ini_lp0: f64,
    pub ini_lp1: f64,
    /// Steepness inside Eq. 6's sigmoid. The paper prints Eq. 6 without one, i.e. 1.0.
    pub default_alpha: f64,
    /// `l_s`, `l_l` and `l_d` before the histograms hold anything, in sequence numbers.
    pub initial_ttl: SeqNo,
}

impl Default for ThresholdParams {
    fn default() -> Self {
        ThresholdParams {
            alpha_s: 10.0,
            alpha_l: 10.0,
            beta_0: 0.25,
            beta_1: 0.75,
            ini_sp0: 60.0,
            ini_sp1: 40.0,
            ini_lp0: 80.0,
            ini_lp1: 20.0,
            default_alpha: 1.0,
            initial_ttl: 1 << 22,
        }
    }
}

impl ThresholdParams {
    pub fn validate(&self) -> Result<()> {
        let bad = |name: &'static str, detail: String| Err(Error::InvalidOptions { name, detail });
        for (name, v) in [
            ("lifetime.alpha_s", self.alpha_s),
            ("lifetime.alpha_l", self.alpha_l),
            ("lifetime.beta_0", self.beta_0),
            ("lifetime.beta_1", self.beta_1),
            ("lifetime.default_alpha", self.default_alpha),
        ] {
            if !v.is_finite() {
                return bad(name, format!("{v} is not a finite number"));
            }
        }
        for (name, a, b) in [
            ("lifetime.ini_sp0+ini_sp1", self.ini_sp0, self.ini_sp1),
            ("lifetime.ini_lp0+ini_lp1", self.ini_lp0, self.ini_lp1),
        ] {
            if !(a >= 0.0 && b >= 0.0 && a + b <= 100.0) {
                return bad(
                    name,
                    format!("{a} and {b} must be >= 0 and sum to <= 100 percent"),
                );
            }
        }
        if self.initial_ttl == 0 {
            return bad("lifetime.initial_ttl", "must be > 0".into());
        }
        Ok(())
    }
}

/// Eq. 5.
#[inline]
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Eq. 3: the percentile of `H_s` that gives `l_s`, `sp_0 + sp_1`.
pub fn short_percentile(p: &ThresholdParams, gc_ratio: f64) -> f64 {
    let sp0 = p.ini_sp0 * sigmoid(p.alpha_s * (1.0 - gc_ratio - p.beta_0));
    let sp1 = p.ini_sp1 * sigmoid(p.alpha_s * (1.0 - gc_ratio - p.beta_1));
    sp0 + sp1
}

/// Eq. 4: the percentile of `H_l` that gives `l_l`, `lp_0 + lp_1`.
pub fn long_percentile(p: &ThresholdParams, gc_ratio: f64) -> f64 {
    let lp0 = p.ini_lp0 * sigmoid(p.alpha_l * (1.0 - gc_ratio - p.beta_0));
    let lp1 = p.ini_lp1 * sigmoid(p.alpha_l * (1.0 - gc_ratio - p.beta_1));
    lp0 + lp1
}

/// Eq. 6: `l_d = l_s + (l_l - l_s) * sigmoid(a * (1 - gc_ratio - beta_1))`.
pub fn default_ttl(p: &ThresholdParams, short: SeqNo, long: SeqNo, gc_ratio: f64) -> SeqNo {
    let w = sigmoid(p.default_alpha * (1.0 - gc_ratio - p.beta_1));
    let (s, l) = (short as f64, long as f64);
    (s + (l - s) * w).round().max(1.0) as SeqNo
}

/// Index of the EDWC window that covers lifetime `l`: the smallest `i` with
/// `2^(19+i) >= l`, clamped to the ten counters. Gives `s_idx` and `l_idx` (Eq. 2, 8).
pub fn edwc_index(l: SeqNo) -> usize {
    let mut i = 0;
    while i + 1 < NUM_EDWC && (1u64 << (EDWC_BASE_LOG2 as usize + i)) < l {
        i += 1;
    }
    i
}

/// A consistent copy of the thresholds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// `l_s`.
    pub short: SeqNo,
    /// `l_l`.
    pub long: SeqNo,
    /// `l_d`.
    pub default: SeqNo,
    /// The GC ratio they were computed from (NaN before the first GC job).
    pub gc_ratio: f64,
}

impl Thresholds {
    /// `s_idx`: the EDWC window of `l_s`.
    pub fn s_idx(&self) -> usize {
        edwc_index(self.short)
    }
    /// `l_idx`: the EDWC window of `l_l`.
    pub fn l_idx(&self) -> usize {
        edwc_index(self.long)
    }
}

/// The live thresholds and the two histograms they come from. Readers never lock.
pub struct LifetimeThresholds {
    params: ThresholdParams,
    short_hist: LifetimeHistogram,
    long_hist: LifetimeHistogram,
    short: AtomicU64,
    long: AtomicU64,
    default: AtomicU64,
    gc_ratio: AtomicU64,
    /// Bumped around each recompute so `current` can retry a torn read.
    version: AtomicU64,
}

impl std::fmt::Debug for LifetimeThresholds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifetimeThresholds")
            .field("current", &self.current())
            .finish()
    }
}

impl LifetimeThresholds {
    pub fn new(params: ThresholdParams) -> Result<Self> {
        params.validate()?;
        let init = params.initial_ttl;
        Ok(LifetimeThresholds {
            params,
            short_hist: LifetimeHistogram::new(),
            long_hist: LifetimeHistogram::new(),
            short: AtomicU64::new(init),
            long: AtomicU64::new(init),
            default: AtomicU64::new(init),
            gc_ratio: AtomicU64::new(f64::NAN.to_bits()),
            version: AtomicU64::new(0),
        })
    }

    pub fn params(&self) -> &ThresholdParams {
        &self.params
    }

    /// A true lifetime found in L0-L1 compaction (feeds `H_s`).
    pub fn record_short(&self, lifetime: SeqNo) {
        self.short_hist.record(lifetime);
    }

    /// An elapsed lifetime of a value GC found valid (feeds `H_l`).
    pub fn record_long(&self, elapsed: SeqNo) {
        self.long_hist.record(elapsed);
    }

    pub fn short_histogram(&self) -> &LifetimeHistogram {
        &self.short_hist
    }

    pub fn long_histogram(&self) -> &LifetimeHistogram {
        &self.long_hist
    }

    /// Recomputes `l_s`, `l_l`, `l_d` from the GC ratio of the job that just finished
    /// (Eq. 3-6). A histogram that is still empty keeps its previous threshold. `l_l` is
    /// kept at or above `l_s`. Call from one thread at a time (the GC thread).
    pub fn recompute(&self, gc_ratio: f64) -> Thresholds {
        let g = if gc_ratio.is_nan() {
            0.0
        } else {
            gc_ratio.clamp(0.0, 1.0)
        };
        let p = &self.params;
        let short = self
            .short_hist
            .percentile(short_percentile(p, g))
            .unwrap_or_else(|| self.short.load(Ordering::Relaxed))
            .max(1);
        let long = self
            .long_hist
            .percentile(long_percentile(p, g))
            .unwrap_or_else(|| self.long.load(Ordering::Relaxed))
            .max(short);
        let default = default_ttl(p, short, long, g);
        self.version.fetch_add(1, Ordering::AcqRel);
        self.short.store(short, Ordering::Release);
        self.long.store(long, Ordering::Release);
        self.default.store(default, Ordering::Release);
        self.gc_ratio.store(g.to_bits(), Ordering::Release);
        self.version.fetch_add(1, Ordering::AcqRel);
        Thresholds {
            short,
            long,
            default,
            gc_ratio: g,
        }
    }

    /// The thresholds in force.
    pub fn current(&self) -> Thresholds {
        loop {
            let v0 = self.version.load(Ordering::Acquire);
            let t = Thresholds {
                short: self.short.load(Ordering::Acquire),
                long: self.long.load(Ordering::Acquire),
                default: self.default.load(Ordering::Acquire),
                gc_ratio: f64::from_bits(self.gc_ratio.load(Ordering::Acquire)),
            };
            if v0.is_multiple_of(2) && self.version.load(Ordering::Acquire) == v0 {
                return t;
            }
            std::hint::spin_loop();
        }
    }

    /// TTL of a new file of class `class`.
    pub fn ttl_for(&self, class: LifetimeClass) -> SeqNo {
        class.ttl(&self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() < eps
    }

    #[test]
    fn eq3_to_eq6_hand_computed() {
        let p = ThresholdParams::default();
        assert_eq!(sigmoid(0.0), 0.5);
        // gc_ratio 0.75: sp0 = 60 * s(10 * 0) = 30, sp1 = 40 * s(10 * -0.5) = 0.26771.
        assert!(close(
            short_percentile(&p, 0.75),
            30.0 + 40.0 / (1.0 + 5f64.exp()),
            1e-9
        ));
        assert!(close(short_percentile(&p, 0.75), 30.267_71, 1e-4));
        // gc_ratio 0.25: 60 * s(5) + 40 * s(0) = 59.59843 + 20.
        assert!(close(short_percentile(&p, 0.25), 79.598_43, 1e-4));
        // gc_ratio 0.0: 60 * s(7.5) + 40 * s(2.5) = 59.96684 + 36.96567.
        assert!(close(short_percentile(&p, 0.0), 96.932_51, 1e-4));
        // gc_ratio 1.0: 60 * s(-2.5) + 40 * s(-7.5) = 4.55148 + 0.02212.
        assert!(close(short_percentile(&p, 1.0), 4.573_60, 1e-4));
        // Eq. 4 at gc_ratio 0.75: 80 * 0.5 + 20 * s(-5) = 40.13386.
        assert!(close(long_percentile(&p, 0.75), 40.133_86, 1e-4));
        // Eq. 6 at gc_ratio 0.25: weight s(1 - 0.25 - 0.75) = 0.5.
        assert_eq!(default_ttl(&p, 1000, 3000, 0.25), 2000);
        // gc_ratio 0.0: weight s(0.25) = 0.562177 -> 1000 + 2000 * 0.562177.
        assert_eq!(default_ttl(&p, 1000, 3000, 0.0), 2124);
        // gc_ratio 1.0: weight s(-0.75) = 0.320821.
        assert_eq!(default_ttl(&p, 1000, 3000, 1.0), 1642);
    }

    #[test]
    fn edwc_windows() {
        assert_eq!(edwc_index(0), 0);
        assert_eq!(edwc_index(1 << 19), 0);
        assert_eq!(edwc_index((1 << 19) + 1), 1);
        assert_eq!(edwc_index(3 << 20), 3);
        assert_eq!(edwc_index(1 << 22), 3);
        assert_eq!(edwc_index(u64::MAX), 9);
    }

    #[test]
    fn recompute_reads_histogram_percentiles() {
        let t = LifetimeThresholds::new(ThresholdParams::default()).unwrap();
        let init = t.current();
        assert_eq!(init.short, 1 << 22);
        assert!(init.gc_ratio.is_nan());
        // Empty histograms keep the initial TTLs.
        let r = t.recompute(0.5);
        assert_eq!((r.short, r.long), (1 << 22, 1 << 22));
        for v in 1..=10_000u64 {
            t.record_short(v);
            t.record_long(v * 10);
        }
        let r = t.recompute(0.75);
        // ~p30.27 of 1..=10000 and ~p40.13 of 10..=100000.
        assert!(close(r.short as f64, 3_027.0, 60.0), "{r:?}");
        assert!(close(r.long as f64, 40_134.0, 800.0), "{r:?}");
        assert_eq!(r.default, default_ttl(t.params(), r.short, r.long, 0.75));
        assert_eq!(t.current(), r);
        assert_eq!(t.ttl_for(LifetimeClass::Short), r.short);
        assert_eq!(t.ttl_for(LifetimeClass::Long), r.long);
        assert_eq!(t.ttl_for(LifetimeClass::Default), r.default);
        // Low garbage ratio: longer lifetimes; high: shorter.
        let lo = t.recompute(0.0);
        let hi = t.recompute(0.95);
        assert!(lo.short > r.short && r.short > hi.short);
        assert!(lo.long > r.long && r.long > hi.long);
        assert!(lo.default > hi.default);
    }

    #[test]
    fn bad_params_are_rejected() {
        let p = ThresholdParams {
            ini_sp0: 70.0,
            ..Default::default()
        };
        assert!(matches!(
            LifetimeThresholds::new(p),
            Err(Error::InvalidOptions { .. })
        ));
        let p = ThresholdParams {
            alpha_s: f64::NAN,
            ..Default::default()
        };
        assert!(p.validate().is_err());
    }

    #[test]
    fn class_round_trip() {
        for c in [
            LifetimeClass::Default,
            LifetimeClass::Short,
            LifetimeClass::Long,
        ] {
            assert_eq!(LifetimeClass::from_u8(c as u8), Some(c));
        }
        assert_eq!(LifetimeClass::from_u8(3), None);
    }
}
