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
//! Value-file GC has its own pacing ([`crate::gc::pacer::GcPacer`]).

use crate::rate::pace;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

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
    /// `slow` (writes are being delayed) and the debt reached [`crate::rate::MIN_SLEEP`]. `rate` is
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::MIN_SLEEP;

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
}
