//! Holding writes to a rate: the step RocksDB's write controller takes for each delayed
//! write, as the flush's pacing takes it (`db/throttle.rs`). GC's pacing pays per byte
//! instead ([`crate::gc::pacer`]).

use std::time::{Duration, Instant};

/// Delays shorter than this are owed, not slept. RocksDB's write controller refills its
/// credit every millisecond (`kMicrosPerRefill`), so a delayed writer sleeps at least that
/// long. The total delay is set by the rate, not by this step; the step decides how many
/// writes share it. With 100 us, 0.15-0.2 % of the updates at the `write-intensive`
/// preset were delayed, and the update p99.9 was a delay (docs/bench.md).
pub(crate) const MIN_SLEEP: Duration = Duration::from_millis(1);

/// One step of a delayed write rate (both delays share it): `written` bytes at `rate`
/// bytes per second take the next slot after `next` (or after `now`, if that passed),
/// held to `cap` from now where given. Returns how long to sleep: zero below
/// [`MIN_SLEEP`], whose debt carries over to the next call.
pub(crate) fn pace(
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
