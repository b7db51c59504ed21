//! Write pacing under a space-amplification target: GC debt in place of compaction debt
//! in RocksDB's delayed write rate, paid by a smooth delay per byte.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// The longest one write group waits for GC: what is owed beyond it is forgiven, so that
/// a writer never sees a stop, only a slower rate.
pub(crate) const MAX_GC_WAIT: Duration = Duration::from_millis(20);

/// Waits shorter than this are paid on the spot by giving the CPU away until they are
/// over ([`wait_out`]), longer ones are slept. A sleep cannot be shorter than the timer
/// slack (50 us) and a wakeup, so a delay of a few microseconds per write used to be owed
/// until it made a sleep: at the `lifetime` preset (2M updates, the writers owing about a
/// tenth of the run) waits owed up to 50 us made 3.8 % of the updates sleep, update p99
/// 3.3x titan's; up to 0.5 ms, 1.1 % and 10.5x (docs/results/2026-12-07-gc-pacer.md).
/// Paid where owed, the delay is spread over every write of a paced run, as the rate
/// wants. Only a write larger than the rate pays in this time (a batch, or a rate near
/// the floor) sleeps.
const SPIN_UNDER: Duration = Duration::from_micros(200);

/// How far the bucket may fill while writes go slower than the rate: the burst a writer
/// may take at once, and the credit for a sleep that overslept.
const BURST: Duration = Duration::from_millis(2);

/// RocksDB's floor on the delayed write rate (`kMinWriteRate`, 16 KiB/s).
const MIN_GC_RATE: f64 = 16.0 * 1024.0;

/// The rate a pacer engages at when no undelayed rate was measured yet (RocksDB's
/// default `delayed_write_rate`).
const DEFAULT_GC_RATE: f64 = 16.0 * 1024.0 * 1024.0;

/// The shortest window the undelayed write rate is measured over.
const RATE_WINDOW: Duration = Duration::from_millis(200);

/// How soon the debt should reach [`AIM`]: the pacer wants the debt `d` to move at
/// `(AIM - d) / TAU` per second, so it engages while still under the target once the
/// debt's slope would pass the aim within `TAU`, and holds it there once past it.
const TAU: f64 = 1.0;

/// The debt the pacer steers to: a little past the target, because GC collects only past
/// it. Steering to the target itself would slow writes ever more as the space neared it
/// from below, and GC would never start.
const AIM: f64 = 0.05;

/// The shortest interval the debt's slope is measured over, and so the shortest between
/// two steps of the rate: a GC job's end and a flush's garbage move the debt in jumps.
const SLOPE_WINDOW: Duration = Duration::from_millis(250);

/// RocksDB's steps of the delayed write rate: slower while the debt grows
/// (`kDecSlowdownRatio`), faster while it falls (`kIncSlowdownRatio`).
const SLOWER: f64 = 0.8;
const FASTER: f64 = 1.25;

/// Write pacing under a space-amplification target `t`: a token bucket at the rate GC
/// sustains (RocksDB's delayed write rate, with GC debt in place of compaction debt).
///
/// The debt is how far the value files' garbage is from what the target allows:
/// `d = (amp - t) / (t - 1)`, 0 at the target, 1 at twice the garbage it allows, negative
/// below it. GC measures it when it picks and when the finder records a table
/// ([`GcPacer::observe`]); the pacer smooths its slope `s` (per second). Writes are paced
/// while `s > (AIM - d) / TAU`, that is while the debt would pass [`AIM`] within `TAU`
/// (early, under the target, from the slope) or does not fall fast enough past it. Each
/// observation while paced moves the delayed rate one step as RocksDB does for compaction
/// debt: times 0.8 while the slope is above the one wanted, times 1.25 while it is below,
/// so the rate settles where GC keeps up, and that rate is where the next episode starts.
/// The delay is released once the rate is back at the undelayed rate measured before.
///
/// Each write group pays for its own bytes at the delayed rate (a bucket of [`BURST`])
/// before it starts, never more than [`MAX_GC_WAIT`], and short waits are not rounded up
/// to a sleep ([`wait_out`]): a writer sees a lower rate, not a tail of sleeps.
/// (Before, the rate was `(1 - d)` times the undelayed one, down to 16 KiB/s from
/// `d = 1` on, and paid in sleeps of at least 1 ms and at most 100 ms: 70 % of the
/// writer's time off the CPU was in those sleeps, and the update p99 was 1.2 ms where
/// titan's was 75 us.)
pub(crate) struct GcPacer {
    target: f64,
    state: Mutex<GcPace>,
}

struct GcPace {
    /// The debt and when it was measured, at the start of the slope's current interval.
    last: Option<(Instant, f64)>,
    /// The debt's smoothed slope, per second.
    slope: f64,
    /// While paced: the delayed rate (bytes per second).
    rate: Option<f64>,
    /// The rate the last episode ended at: where the next starts.
    sustained: Option<f64>,
    /// The user write rate measured while not delayed (bytes per second; 0 before).
    measured: f64,
    /// Start of the current measuring window and the user bytes then.
    window: Option<(Instant, u64)>,
    /// User bytes charged so far.
    seen: u64,
    /// The bucket's clock: the time the bytes charged so far are paid up to.
    paid: Option<Instant>,
}

impl GcPacer {
    pub fn new(target: f64) -> GcPacer {
        GcPacer {
            target,
            state: Mutex::new(GcPace {
                last: None,
                slope: 0.0,
                rate: None,
                sustained: None,
                measured: 0.0,
                window: None,
                seen: 0,
                paid: None,
            }),
        }
    }

    /// GC measured the value files' space amplification `amp` at `now`: updates the
    /// debt's slope and engages, steps or releases the delayed rate.
    pub fn observe(&self, amp: f64, now: Instant) {
        if self.target <= 1.0 {
            // A target of 1 allows no garbage: no debt can be measured against it.
            return;
        }
        let debt = (amp - self.target) / (self.target - 1.0);
        let mut p = self.state.lock();
        match p.last {
            None => p.last = Some((now, debt)),
            Some((t, d)) => {
                let dt = now.saturating_duration_since(t);
                if dt < SLOPE_WINDOW {
                    return;
                }
                let s = (debt - d) / dt.as_secs_f64();
                p.slope = 0.5 * p.slope + 0.5 * s;
                p.last = Some((now, debt));
            }
        }
        let too_fast = p.slope > (AIM - debt) / TAU;
        let free = if p.measured > 0.0 {
            p.measured
        } else {
            DEFAULT_GC_RATE
        };
        match p.rate {
            None if too_fast => {
                let start = p.sustained.map_or(free, |r| r.min(free));
                p.rate = Some(start);
                p.paid = None;
            }
            None => {}
            Some(r) if too_fast => p.rate = Some((r * SLOWER).max(MIN_GC_RATE)),
            Some(r) => {
                let r = r * FASTER;
                if r >= free && debt <= 0.0 {
                    p.sustained = p.rate;
                    p.rate = None;
                    p.paid = None;
                } else {
                    p.rate = Some(r.min(free));
                }
            }
        }
    }

    /// The delayed write rate in bytes per second; `None` while writes are not delayed.
    pub fn delayed_rate(&self) -> Option<u64> {
        self.state.lock().rate.map(|r| r as u64)
    }

    /// Charges the user bytes written up to `user_bytes` (a running total) and returns how
    /// long the next write group waits ([`wait_out`]): zero unless paced and owed; at most
    /// [`MAX_GC_WAIT`].
    pub fn charge(&self, user_bytes: u64, now: Instant) -> Duration {
        let mut p = self.state.lock();
        let written = user_bytes.saturating_sub(p.seen);
        p.seen = user_bytes;
        let Some(rate) = p.rate else {
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
        // The bucket: paid up to `paid`, never more than BURST behind now (the tokens a
        // quiet writer saved, and a sleep that overslept, count up to BURST).
        let floor = now.checked_sub(BURST).unwrap_or(now);
        let from = p.paid.map_or(now, |t| t.max(floor));
        let paid = (from + Duration::from_secs_f64(written as f64 / rate)).min(now + MAX_GC_WAIT);
        p.paid = Some(paid);
        paid.saturating_duration_since(now)
    }
}

/// Waits `wait` out and returns the time it took: a short wait by yielding the CPU until
/// it is over (`sched_yield`: GC and the other background threads run meanwhile, and the
/// writer resumes within microseconds of the end, where a sleep overshoots by the timer
/// slack), a long one ([`SPIN_UNDER`] or more) by sleeping.
pub(crate) fn wait_out(wait: Duration) -> Duration {
    let start = Instant::now();
    if wait >= SPIN_UNDER {
        std::thread::sleep(wait);
    } else {
        let end = start + wait;
        while Instant::now() < end {
            std::thread::yield_now();
        }
    }
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1024.0 * 1024.0;

    /// A pacer whose undelayed rate was measured at 4 MiB/s (1 MiB in 250 ms).
    fn measured(t0: Instant) -> GcPacer {
        let p = GcPacer::new(1.5);
        assert_eq!(p.charge(0, t0), Duration::ZERO);
        assert_eq!(
            p.charge(1 << 20, t0 + Duration::from_millis(250)),
            Duration::ZERO
        );
        p
    }

    /// [`measured`], then paced from a debt of 0.2 that rose from 0 in 300 ms.
    fn paced(t0: Instant) -> GcPacer {
        let p = measured(t0);
        p.observe(1.50, t0 + Duration::from_millis(300));
        p.observe(1.60, t0 + Duration::from_millis(600));
        assert!(p.delayed_rate().is_some());
        p
    }

    #[test]
    fn pacing_starts_under_the_target_from_the_debts_slope() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let p = measured(t0);
        // Far under the target and rising slowly: not paced.
        p.observe(1.10, at(300));
        p.observe(1.11, at(600));
        assert_eq!(p.delayed_rate(), None);
        // Still under the target, but rising fast enough to pass AIM within TAU: paced,
        // starting at the undelayed rate (4 MiB/s), then slower while it keeps rising.
        p.observe(1.30, at(900));
        let r = p.delayed_rate().expect("paced before the target") as f64;
        assert!((r - 4.0 * MIB).abs() < 1.0, "{r}");
        p.observe(1.45, at(1200));
        let slower = p.delayed_rate().unwrap() as f64;
        assert!((slower - 0.8 * r).abs() < 1.0, "{slower}");
        p.observe(1.49, at(1500));
        p.observe(1.52, at(1800));
        let slowest = p.delayed_rate().unwrap() as f64;
        assert!(slowest < slower, "{slowest}");
        // Past the target and falling fast (GC catching up): faster again, and released
        // once back at the undelayed rate and under the target.
        p.observe(1.40, at(2100));
        assert!(p.delayed_rate().unwrap() as f64 > slowest);
        for ms in [2400, 2700, 3000, 3300] {
            p.observe(1.30, at(ms));
        }
        assert_eq!(p.delayed_rate(), None);
        // A target of 1 allows no garbage: never paced.
        let p1 = GcPacer::new(1.0);
        p1.observe(1.0, at(0));
        p1.observe(3.0, at(100));
        assert_eq!(p1.delayed_rate(), None);
    }

    #[test]
    fn a_growing_debt_slows_writes_to_the_floor_never_to_a_stop() {
        let t0 = Instant::now();
        let p = measured(t0);
        for i in 0..100u64 {
            p.observe(
                1.6 + i as f64 * 0.01,
                t0 + Duration::from_millis(300 + 300 * i),
            );
        }
        assert_eq!(p.delayed_rate(), Some(MIN_GC_RATE as u64));
        // At the floor a 4 KiB write owes 250 ms: it waits MAX_GC_WAIT, the rest forgiven.
        let now = t0 + Duration::from_secs(60);
        assert_eq!(p.charge((1 << 20) + 4096, now), MAX_GC_WAIT);
        assert_eq!(p.charge((1 << 20) + 8192, now + MAX_GC_WAIT), MAX_GC_WAIT);
    }

    #[test]
    fn each_write_pays_its_own_bytes_at_the_rate() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let p = paced(t0);
        let rate = p.delayed_rate().unwrap() as f64;
        let mut user = 1u64 << 20;
        // The first write after engaging: the bucket starts empty, so 16 KiB at 4 MiB/s
        // waits about 3.9 ms, no more, no less: a delay per byte, not a chunk.
        let now = at(700_000);
        user += 16 << 10;
        let d = p.charge(user, now);
        let want = Duration::from_secs_f64((16 << 10) as f64 / rate);
        assert!(
            d.abs_diff(want) < Duration::from_micros(5),
            "{d:?} {want:?}"
        );
        // Writes that come exactly at the rate each wait for their own bytes, about the
        // same each time.
        let mut now = now + d;
        for _ in 0..10 {
            user += 16 << 10;
            let d = p.charge(user, now);
            assert!(
                d.abs_diff(want) < Duration::from_micros(5),
                "{d:?} {want:?}"
            );
            now += d;
        }
        // A small write waits for its own few bytes, not rounded to a sleep; after a
        // pause the bucket's credit (BURST) pays.
        let p2 = paced(t0);
        let small = p2.charge((1 << 20) + 100, at(700_000));
        let want = Duration::from_secs_f64(100.0 / rate);
        assert!(
            small.abs_diff(want) < Duration::from_micros(2),
            "{small:?} {want:?}"
        );
        let later = at(800_000);
        assert_eq!(p2.charge((1 << 20) + 200 + 4096, later), Duration::ZERO);
    }

    #[test]
    fn a_short_wait_is_paid_without_a_sleep_and_a_long_one_slept() {
        for wait in [Duration::ZERO, Duration::from_micros(30), SPIN_UNDER * 2] {
            assert!(wait_out(wait) >= wait);
        }
    }
}
