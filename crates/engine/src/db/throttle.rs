//! Delayed writes before a stop (RocksDB's write controller: `level0_slowdown_writes_trigger`
//! and `delayed_write_rate`).
//!
//! Without it, a writer faster than the flush fills the active memtable while the previous
//! one is still being flushed and then stops until the flush ends: one put waits for the
//! rest of a 64 MiB flush (100-200 ms measured). With it, while a flush is pending the
//! room left in the active memtable is spread over the time the flush has left (estimated
//! from the flush rate measured on the last flushes, with a margin): each write group is
//! delayed by its bytes divided by that rate, so the writer reaches the end of the
//! memtable as the flush finishes: many delays of about a millisecond instead of
//! one stop, at the throughput the flush allowed anyway. A writer slower than that rate is
//! never delayed. While L0 is at its slowdown trigger, writes are held to
//! `delayed_write_rate`, as in RocksDB.
//!
//! Value-file GC has its own pacing ([`GcPacer`]): under a space-amplification target,
//! writes are held to a delayed write rate while the value files' garbage is past the
//! target, as RocksDB holds them while compaction debt is past its soft limit.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Delays shorter than this are owed, not slept. RocksDB's write controller refills its
/// credit every millisecond (`kMicrosPerRefill`), so a delayed writer sleeps at least that
/// long. The total delay is set by the rate, not by this step; the step decides how many
/// writes share it. With 100 us, 0.15-0.2 % of the updates at the `write-intensive`
/// preset were delayed, and the update p99.9 was a delay (docs/bench.md).
const MIN_SLEEP: Duration = Duration::from_millis(1);

/// One step of a delayed write rate (both delays share it): `written` bytes at `rate`
/// bytes per second take the next slot after `next` (or after `now`, if that passed),
/// held to `cap` from now where given. Returns how long to sleep: zero below
/// [`MIN_SLEEP`], whose debt carries over to the next call.
fn pace(
    next: &mut Option<Instant>,
    now: Instant,
    written: u64,
    rate: f64,
    cap: Option<Duration>,
) -> Duration {
    let start = next.filter(|&t| t > now).unwrap_or(now);
    let mut slot = start + Duration::from_secs_f64(written as f64 / rate);
    if let Some(cap) = cap {
        slot = slot.min(now + cap);
    }
    *next = Some(slot);
    let wait = slot.saturating_duration_since(now);
    if wait >= MIN_SLEEP {
        wait
    } else {
        Duration::ZERO
    }
}

/// The flush is expected to take this much longer than the measured rate says (it shares
/// the cores with the writers and with compaction and GC).
const FLUSH_MARGIN: f64 = 1.25;

/// Weight of the newest flush in the measured rate.
const RATE_WEIGHT: f64 = 0.5;

pub(crate) struct WriteController {
    /// Flush throughput in memtable bytes per second (0 until the first flush).
    flush_rate: AtomicU64,
    /// The running flush: when it started and the memtable bytes it writes.
    flushing: Mutex<Option<(Instant, usize)>>,
    state: Mutex<Pacing>,
}

/// What the write leaders have been charged for (only a leader calls in, one at a time).
struct Pacing {
    /// The memtable (by WAL number) and its size when last seen.
    mem: u64,
    seen: usize,
    /// When writes are allowed to go on; later than now while delayed.
    next: Option<Instant>,
}

impl WriteController {
    pub fn new() -> WriteController {
        WriteController {
            flush_rate: AtomicU64::new(0),
            flushing: Mutex::new(None),
            state: Mutex::new(Pacing {
                mem: u64::MAX,
                seen: 0,
                next: None,
            }),
        }
    }

    /// A flush of `bytes` of memtable starts.
    pub fn flush_started(&self, bytes: usize) {
        *self.flushing.lock() = Some((Instant::now(), bytes));
    }

    /// The write rate (bytes per second) that fills the `room` left in the active
    /// memtable as the running flush ends; `None` before a flush was measured or while
    /// none runs. Past the expected end it is `floor`.
    pub fn pace_to_flush(&self, room: usize, floor: u64) -> Option<u64> {
        let rate = self.flush_rate()? as f64;
        let (start, bytes) = (*self.flushing.lock())?;
        let left = bytes as f64 / rate * FLUSH_MARGIN - start.elapsed().as_secs_f64();
        Some(if left <= 0.0 {
            floor
        } else {
            ((room as f64 / left) as u64).max(floor)
        })
    }

    /// A flush wrote `bytes` of memtable in `took`.
    pub fn flushed(&self, bytes: usize, took: Duration) {
        *self.flushing.lock() = None;
        let secs = took.as_secs_f64().max(1e-6);
        let rate = bytes as f64 / secs;
        let old = self.flush_rate.load(Relaxed) as f64;
        let new = if old == 0.0 {
            rate
        } else {
            RATE_WEIGHT * rate + (1.0 - RATE_WEIGHT) * old
        };
        self.flush_rate.store(new as u64, Relaxed);
    }

    /// The measured flush rate in bytes per second, if a flush has finished.
    pub fn flush_rate(&self) -> Option<u64> {
        Some(self.flush_rate.load(Relaxed)).filter(|&r| r > 0)
    }

    /// Charges the bytes written into memtable `mem` (now `size` bytes) since the last
    /// call, and returns how long the caller should wait before writing more: zero unless
    /// `slow` (writes are being delayed) and the debt reached [`MIN_SLEEP`]. `rate` is
    /// the delayed write rate in bytes per second.
    pub fn charge(&self, mem: u64, size: usize, slow: bool, rate: u64) -> Duration {
        let mut p = self.state.lock();
        let written = if p.mem == mem {
            size.saturating_sub(p.seen)
        } else {
            size
        };
        p.mem = mem;
        p.seen = size;
        if !slow || rate == 0 {
            p.next = None;
            return Duration::ZERO;
        }
        pace(
            &mut p.next,
            Instant::now(),
            written as u64,
            rate as f64,
            None,
        )
    }
}

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
    /// [`MIN_SLEEP`]; at most [`MAX_GC_WAIT`].
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
    fn delays_follow_the_rate_and_only_when_slow() {
        let c = WriteController::new();
        assert_eq!(c.flush_rate(), None);
        c.flushed(100 << 20, Duration::from_secs(1));
        assert_eq!(c.flush_rate(), Some(100 << 20));
        c.flushed(50 << 20, Duration::from_secs(1));
        assert_eq!(c.flush_rate(), Some(75 << 20));
        // Not slow: nothing owed, however much was written.
        assert_eq!(c.charge(1, 10 << 20, false, 1 << 20), Duration::ZERO);
        // Slow: 1 MiB more at 1 MiB/s is a second.
        let d = c.charge(1, 11 << 20, true, 1 << 20);
        assert!(
            d > Duration::from_millis(990) && d <= Duration::from_secs(1),
            "{d:?}"
        );
        // Small writes are owed until the debt is worth a sleep; the debt carries over.
        let c = WriteController::new();
        assert_eq!(c.charge(2, 0, true, 1 << 20), Duration::ZERO);
        assert_eq!(c.charge(2, 100, true, 1 << 20), Duration::ZERO);
        let d = c.charge(2, 4096, true, 1 << 20);
        assert!(d >= MIN_SLEEP, "{d:?}");
        // Pacing to a flush: the room spread over the flush time left (with the margin),
        // never below the floor; none without a running, measured flush.
        let c = WriteController::new();
        assert_eq!(c.pace_to_flush(1 << 20, 1), None);
        c.flushed(64 << 20, Duration::from_secs(1));
        assert_eq!(c.pace_to_flush(1 << 20, 1), None);
        c.flush_started(64 << 20);
        let r = c.pace_to_flush(10 << 20, 1).unwrap();
        assert!((8 << 20..9 << 20).contains(&r), "{r}");
        assert_eq!(c.pace_to_flush(0, 4096), Some(4096));
        c.flushed(64 << 20, Duration::from_secs(1));
        assert_eq!(c.pace_to_flush(1 << 20, 1), None);
        // A new memtable counts from zero; leaving the slow state forgets the debt.
        let c = WriteController::new();
        assert_eq!(c.charge(3, 0, false, 1 << 20), Duration::ZERO);
        assert_eq!(c.charge(3, 100, true, 1 << 20), Duration::ZERO);
    }

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
