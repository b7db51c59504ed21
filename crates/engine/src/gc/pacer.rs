//! Write pacing under a space-amplification target: GC debt in place of compaction debt
//! in RocksDB's delayed write rate.

use crate::rate::pace;
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// The longest a write group waits for GC at once: what is owed beyond it is forgiven,
/// so that a writer never sees a stop, only a slower rate.
pub(crate) const MAX_GC_WAIT: Duration = Duration::from_millis(100);

/// RocksDB's floor on the delayed write rate (`kMinWriteRate`, 16 KiB/s).
const MIN_GC_RATE: f64 = 16.0 * 1024.0;

/// The rate a pacer engages at when no undelayed rate was measured yet (RocksDB's
/// default `delayed_write_rate`).
const DEFAULT_GC_RATE: f64 = 16.0 * 1024.0 * 1024.0;

/// The shortest window the undelayed write rate is measured over.
const RATE_WINDOW: Duration = Duration::from_millis(200);

/// Write pacing under a space-amplification target `t` (RocksDB's delayed write rate, with
/// GC debt in place of compaction debt).
///
/// The debt is how far the value files' garbage is past what the target allows:
/// `d = (amp - t) / (t - 1)`, 0 at the target and 1 at twice the garbage it allows. While
/// `d > 0`, each write group waits for the bytes written before it at a delayed rate of
/// `base * (1 - d)`, where `base` is the undelayed user write rate measured when the debt
/// appeared: the rate shrinks as the debt grows and recovers as GC catches up, down to
/// RocksDB's floor from twice the allowed garbage on. At the target the delay is released.
/// No group waits more than [`MAX_GC_WAIT`] at once.
///
/// (Before, writes were slowed only from twice the garbage the target allows, and one GC
/// thread fell behind: the mean space over a full-scale run was 2.06-2.57 at a target of
/// 1.5, docs/results/2026-11-27-lifetime-full-scale.md.)
pub(crate) struct GcPacer {
    target: f64,
    state: Mutex<GcPace>,
}

struct GcPace {
    /// The latest debt published by GC ([`GcPacer::observe`]).
    debt: f64,
    /// While engaged: the undelayed rate the delayed rate is a share of.
    base: Option<f64>,
    /// The user write rate measured while not delayed (bytes per second; 0 before).
    measured: f64,
    /// Start of the current measuring window and the user bytes then.
    window: Option<(Instant, u64)>,
    /// User bytes charged so far.
    seen: u64,
    /// When writes may go on; later than now while delayed.
    next: Option<Instant>,
}

impl GcPacer {
    pub fn new(target: f64) -> GcPacer {
        GcPacer {
            target,
            state: Mutex::new(GcPace {
                debt: 0.0,
                base: None,
                measured: 0.0,
                window: None,
                seen: 0,
                next: None,
            }),
        }
    }

    /// GC measured the value files' space amplification `amp`: engages, adjusts or
    /// releases the delay.
    pub fn observe(&self, amp: f64) {
        let debt = if self.target > 1.0 {
            ((amp - self.target) / (self.target - 1.0)).max(0.0)
        } else {
            0.0
        };
        let mut p = self.state.lock();
        p.debt = debt;
        if debt <= 0.0 {
            p.base = None;
            p.next = None;
        } else if p.base.is_none() {
            let base = if p.measured > 0.0 {
                p.measured
            } else {
                DEFAULT_GC_RATE
            };
            p.base = Some(base);
        }
    }

    /// The delayed write rate in bytes per second; `None` while writes are not delayed.
    pub fn delayed_rate(&self) -> Option<u64> {
        let p = self.state.lock();
        p.base.map(|b| Self::rate(b, p.debt) as u64)
    }

    fn rate(base: f64, debt: f64) -> f64 {
        (base * (1.0 - debt)).max(MIN_GC_RATE)
    }

    /// Charges the user bytes written up to `user_bytes` (a running total) and returns how
    /// long the next write group waits: zero unless delayed and the debt reached
    /// [`crate::rate::MIN_SLEEP`]; at most [`MAX_GC_WAIT`].
    pub fn charge(&self, user_bytes: u64, now: Instant) -> Duration {
        let mut p = self.state.lock();
        let written = user_bytes.saturating_sub(p.seen);
        p.seen = user_bytes;
        let Some(base) = p.base else {
            // Not delayed: measure the rate writes go at.
            match p.window {
                Some((start, bytes)) if now.duration_since(start) >= RATE_WINDOW => {
                    let secs = now.duration_since(start).as_secs_f64();
                    p.measured = user_bytes.saturating_sub(bytes) as f64 / secs;
                    p.window = Some((now, user_bytes));
                }
                Some(_) => {}
                None => p.window = Some((now, user_bytes)),
            }
            return Duration::ZERO;
        };
        p.window = None;
        let rate = Self::rate(base, p.debt);
        pace(&mut p.next, now, written, rate, Some(MAX_GC_WAIT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_pacing_engages_past_the_target_and_releases_at_it() {
        let p = GcPacer::new(1.5);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Under the target: never delayed, the undelayed rate measured (1 MiB in 250 ms).
        p.observe(1.4);
        assert_eq!(p.delayed_rate(), None);
        assert_eq!(p.charge(0, at(0)), Duration::ZERO);
        assert_eq!(p.charge(1 << 20, at(250)), Duration::ZERO);
        assert_eq!(p.delayed_rate(), None);
        // Exactly at the target: still not delayed.
        p.observe(1.5);
        assert_eq!(p.delayed_rate(), None);
        // A tenth of the allowed garbage past it: engaged at 90 % of the measured 4 MiB/s.
        p.observe(1.55);
        let full = 4.0 * 1024.0 * 1024.0;
        let r = p.delayed_rate().unwrap() as f64;
        assert!((r - 0.9 * full).abs() < 1.0, "{r}");
        // The rate shrinks as the debt grows and recovers as it falls, from the same base.
        p.observe(1.75);
        let half = p.delayed_rate().unwrap() as f64;
        assert!((half - 0.5 * full).abs() < 1.0, "{half}");
        p.observe(1.6);
        assert!(p.delayed_rate().unwrap() as f64 > half);
        // From twice the allowed garbage: the floor, never a stop.
        p.observe(2.0);
        assert_eq!(p.delayed_rate(), Some(MIN_GC_RATE as u64));
        p.observe(9.0);
        assert_eq!(p.delayed_rate(), Some(MIN_GC_RATE as u64));
        // Writes wait for their bytes at the delayed rate, at most MAX_GC_WAIT at once.
        p.observe(1.75);
        let d = p.charge((1 << 20) + (1 << 20), at(300));
        assert!(d > Duration::from_millis(99), "{d:?}");
        assert!(d <= MAX_GC_WAIT, "{d:?}");
        // A small write is owed, not slept, until it is worth a sleep.
        let p2 = GcPacer::new(1.5);
        p2.observe(1.75);
        assert_eq!(p2.delayed_rate(), Some((DEFAULT_GC_RATE / 2.0) as u64));
        assert_eq!(p2.charge(100, at(0)), Duration::ZERO);
        // Back at the target: released, nothing owed.
        p.observe(1.5);
        assert_eq!(p.delayed_rate(), None);
        assert_eq!(p.charge(100 << 20, at(400)), Duration::ZERO);
        // A target of 1 allows no garbage: no debt can be measured against it.
        let p3 = GcPacer::new(1.0);
        p3.observe(3.0);
        assert_eq!(p3.delayed_rate(), None);
    }
}
