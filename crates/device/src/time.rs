//! The virtual clock.
//!
//! Nothing in this crate reads the wall clock. A [`VirtualTime`] is a count of nanoseconds
//! since the device was created; the caller says when each request is issued and the device
//! answers when it completes. Two runs that issue the same requests at the same virtual times
//! get the same completion times, whatever the load of the machine running them.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// An instant on the device's virtual clock, in nanoseconds since the device was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct VirtualTime(u64);

impl VirtualTime {
    pub const ZERO: VirtualTime = VirtualTime(0);

    pub const fn from_nanos(ns: u64) -> Self {
        VirtualTime(ns)
    }

    pub const fn from_micros(us: u64) -> Self {
        VirtualTime(us * 1_000)
    }

    pub const fn from_millis(ms: u64) -> Self {
        VirtualTime(ms * 1_000_000)
    }

    pub const fn from_secs(s: u64) -> Self {
        VirtualTime(s * 1_000_000_000)
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self` (zero if `earlier` is later).
    pub fn since(self, earlier: VirtualTime) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for VirtualTime {
    type Output = VirtualTime;
    fn add(self, d: Duration) -> VirtualTime {
        VirtualTime(self.0.saturating_add(nanos(d)))
    }
}

impl Sub<VirtualTime> for VirtualTime {
    type Output = Duration;
    fn sub(self, rhs: VirtualTime) -> Duration {
        self.since(rhs)
    }
}

impl fmt::Display for VirtualTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} ms", self.0 as f64 / 1e6)
    }
}

/// A duration as whole nanoseconds, saturating (the model works in `u64` nanoseconds).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
