//! Expiry: a lifetime the application states. A write may carry the wall-clock time (ms
//! since the Unix epoch) after which its value is gone ([`crate::WriteBatch::put_with_expiry`]).
//!
//! The entry is stored under its own kinds ([`ValueKind::ExpiringValue`],
//! [`ValueKind::ExpiringPointer`]) with the time in front of the value:
//!
//! ```text
//! expiring value := expire_at_ms u64 LE | value            (kind 3)
//! expiring pointer := expire_at_ms u64 LE | value pointer  (kind 4)
//! ```
//!
//! New kinds rather than a flag on the old ones: every piece of code that predates expiry
//! takes an entry it does not know for a value it must not follow (a pointer it does not
//! recognise is not followed, not misread), and a database holding none of them is the
//! old format unchanged. Readers see an entry whose time has passed as a deletion at the
//! same sequence number: it hides older versions exactly as a tombstone written at that
//! time would (RocksDB's DBWithTTL instead hands a compaction filter the stale value and
//! leaves reads to the application; Cassandra, like this, reads an expired cell as a
//! tombstone).
//!
//! The clock is [`Clock`], in the options: the system clock unless a test injects a
//! [`ManualClock`].

use crate::internal_key::ValueKind;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of the expiry time in front of an expiring entry's value.
pub const EXPIRY_LEN: usize = 8;

/// Wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now_ms(&self) -> u64;
}

/// The system's wall clock (the default).
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that moves only when told (tests: no test sleeps to let a value expire).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(now_ms: u64) -> ManualClock {
        ManualClock(AtomicU64::new(now_ms))
    }

    pub fn set(&self, now_ms: u64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }

    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Narrowest expiry window (about a second, a power of two).
pub const MIN_WINDOW_MS: u64 = 1024;

/// The expiry window a separated value goes to when it is written out at `now_ms` with
/// expiry `expire_at` (see `ValueLogOptions::expiry_window_divisor`): `(width, index)`,
/// the window covering `[index * width, (index + 1) * width)`. `None` when placement by
/// expiry is off (`divisor` 0).
pub fn window(expire_at: u64, now_ms: u64, divisor: u64) -> Option<(u64, u64)> {
    if divisor == 0 {
        return None;
    }
    let ttl = expire_at.saturating_sub(now_ms);
    let width = (ttl / divisor).max(MIN_WINDOW_MS);
    // The largest power of two not above it: windows of different widths nest.
    let width = 1u64 << (63 - width.leading_zeros());
    Some((width, expire_at / width))
}

/// Expiry windows with a value file open at once, in one flush or compaction job and in
/// the write path (the value log as the WAL). Past it a value goes to an open window's
/// file ([`spill_window`]) rather than closing one: TTLs spanning nine octaves need about
/// 70 windows of `ttl / 8`, and values come in key order with their windows at random, so
/// closing the least recently used window to open another closed and reopened files for
/// almost every value (900 files, each synced and recorded in the manifest, per 64 MiB
/// flush of the expiring workload, which ran at a fifth of the throughput of the same
/// engine not told of expiries).
pub const MAX_OPEN_WINDOWS: usize = 32;

/// The open window a value of `window` goes to when no more can be opened: the one that
/// ends soonest at or after it, or else the one that ends last. The file records the
/// latest expiry it holds, so the value is never dropped early, only kept past its own
/// window by up to the gap to the next open one. `None` if none is open.
fn spill_window(window: (u64, u64), open: impl Iterator<Item = (u64, u64)>) -> Option<(u64, u64)> {
    let end = |(width, index): (u64, u64)| (index + 1).saturating_mul(width);
    let own_end = end(window);
    open.min_by_key(|&w| {
        let e = end(w);
        if e >= own_end {
            (0, e)
        } else {
            (1, u64::MAX - e)
        }
    })
}

/// The window whose file a value of `window` goes to, given the windows with a file open:
/// its own if open or if another may be opened, else [`spill_window`]'s pick.
pub fn window_to_write<V>(
    window: (u64, u64),
    open: &std::collections::HashMap<(u64, u64), V>,
) -> (u64, u64) {
    if open.contains_key(&window) || open.len() < MAX_OPEN_WINDOWS {
        return window;
    }
    spill_window(window, open.keys().copied()).expect("windows are open")
}

/// An entry's value as the tree stores it, split into what it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split<'a> {
    /// The kind without expiry: `Deletion`, `Value` or `Pointer`.
    pub kind: ValueKind,
    /// When the entry expires, if it does.
    pub expire_at: Option<u64>,
    /// The value (or the value pointer) without the expiry time.
    pub payload: &'a [u8],
}

impl Split<'_> {
    /// Whether the entry has expired at `now_ms` (an entry expires *at* its time, as a
    /// Redis key whose time has come is gone).
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire_at.is_some_and(|t| t <= now_ms)
    }
}

/// Splits a stored entry; `None` if an expiring entry is too short to hold its time.
pub fn split(kind: ValueKind, value: &[u8]) -> Option<Split<'_>> {
    if !kind.expires() {
        return Some(Split {
            kind,
            expire_at: None,
            payload: value,
        });
    }
    let (t, payload) = value.split_at_checked(EXPIRY_LEN)?;
    Some(Split {
        kind: kind.without_expiry(),
        expire_at: Some(u64::from_le_bytes(t.try_into().expect("8 bytes"))),
        payload,
    })
}

/// Appends a stored value: `payload` behind the expiry time if there is one. Returns the
/// kind to store it under (`kind` with expiry if `expire_at` is set).
pub fn encode_into(
    dst: &mut Vec<u8>,
    kind: ValueKind,
    expire_at: Option<u64>,
    payload: &[u8],
) -> ValueKind {
    match expire_at {
        Some(t) if kind != ValueKind::Deletion => {
            dst.extend_from_slice(&t.to_le_bytes());
            dst.extend_from_slice(payload);
            kind.with_expiry()
        }
        _ => {
            dst.extend_from_slice(payload);
            kind
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spilled_value_goes_to_the_open_window_ending_soonest_after_its_own() {
        // Windows of width 1024: index 10 ends at 11264.
        let open = [(1024, 8), (1024, 12), (2048, 7), (1024, 20)];
        // Ends at or after 11264: (1024, 12) ends at 13312, (2048, 7) at 16384.
        assert_eq!(spill_window((1024, 10), open.into_iter()), Some((1024, 12)));
        // Nothing ends after it: the one ending last.
        assert_eq!(spill_window((1024, 30), open.into_iter()), Some((1024, 20)));
        assert_eq!(spill_window((1024, 30), std::iter::empty()), None);
    }

    #[test]
    fn split_round_trips_and_refuses_a_short_time() {
        let mut v = Vec::new();
        let kind = encode_into(&mut v, ValueKind::Pointer, Some(77), b"ptr");
        assert_eq!(kind, ValueKind::ExpiringPointer);
        let s = split(kind, &v).unwrap();
        assert_eq!(
            (s.kind, s.expire_at, s.payload),
            (ValueKind::Pointer, Some(77), &b"ptr"[..])
        );
        assert!(!s.expired(76));
        assert!(s.expired(77));
        let plain = split(ValueKind::Value, b"v").unwrap();
        assert_eq!(plain.expire_at, None);
        assert!(!plain.expired(u64::MAX));
        assert!(split(ValueKind::ExpiringValue, b"short").is_none());
        let mut d = Vec::new();
        assert_eq!(
            encode_into(&mut d, ValueKind::Deletion, Some(5), b""),
            ValueKind::Deletion
        );
        assert!(d.is_empty());
    }

    #[test]
    fn windows_scale_with_the_time_to_live() {
        assert_eq!(window(5_000, 0, 0), None);
        // A short TTL gets the narrowest window.
        assert_eq!(window(5_000, 0, 8), Some((1024, 4)));
        // An hour: about 7.5 minutes, rounded down to a power of two.
        let (w, i) = window(3_600_000 + 10, 10, 8).unwrap();
        assert_eq!(w, 1 << 18);
        assert_eq!(i, 3_600_010 / w);
        // An expired value (the caller never places one) still gets a window.
        assert_eq!(window(5, 10, 8).unwrap().0, 1024);
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(10);
        assert_eq!(c.now_ms(), 10);
        c.advance(5);
        assert_eq!(c.now_ms(), 15);
        c.set(3);
        assert_eq!(c.now_ms(), 3);
        assert!(SystemClock.now_ms() > 1_600_000_000_000);
    }
}
