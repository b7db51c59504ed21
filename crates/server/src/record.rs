//! How the server stores a value: a one-byte tag, an optional expiry, then the user's bytes.
//!
//! The engine has no notion of time-to-live, so `SET ... EX/PX` keeps the expiry inside the
//! stored value: tag `0` is a value without expiry, tag `1` is followed by the expiry as a
//! big-endian `u64` of milliseconds since the Unix epoch. Reads compare it with the clock
//! and treat an expired value as absent (and delete it); space is reclaimed by the engine's
//! GC once that delete, or an overwrite, has made the old value garbage. A database served
//! by `halflife serve` therefore holds tagged values; one written directly through the
//! engine API is rejected with [`RecordError`] instead of being misread.

use std::time::{SystemTime, UNIX_EPOCH};

const PLAIN: u8 = 0;
const EXPIRING: u8 = 1;

/// Bytes the header adds to a value at most.
pub const MAX_HEADER: usize = 9;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("stored value is not in the server's format (tag {tag:#x}, {len} bytes): was the database written by another program?")]
pub struct RecordError {
    tag: u8,
    len: usize,
}

/// A stored value, borrowed from its encoded form.
#[derive(Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub value: &'a [u8],
    /// Milliseconds since the Unix epoch after which the value is gone.
    pub expire_at_ms: Option<u64>,
}

impl<'a> Record<'a> {
    pub fn decode(raw: &'a [u8]) -> Result<Record<'a>, RecordError> {
        let err = || RecordError {
            tag: raw.first().copied().unwrap_or(0xff),
            len: raw.len(),
        };
        match raw.first() {
            Some(&PLAIN) => Ok(Record {
                value: &raw[1..],
                expire_at_ms: None,
            }),
            Some(&EXPIRING) if raw.len() >= 9 => Ok(Record {
                value: &raw[9..],
                expire_at_ms: Some(u64::from_be_bytes(raw[1..9].try_into().expect("8 bytes"))),
            }),
            _ => Err(err()),
        }
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms.is_some_and(|t| t <= now_ms)
    }
}

/// The stored form of `value` expiring at `expire_at_ms` (never if `None`).
pub fn encode(value: &[u8], expire_at_ms: Option<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 9);
    match expire_at_ms {
        None => out.push(PLAIN),
        Some(t) => {
            out.push(EXPIRING);
            out.extend_from_slice(&t.to_be_bytes());
        }
    }
    out.extend_from_slice(value);
    out
}

/// Wall-clock milliseconds since the Unix epoch (expiry is absolute, as in Redis, so that
/// it survives a restart).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_and_without_expiry() {
        let raw = encode(b"hello", None);
        assert_eq!(raw.len(), 6);
        let r = Record::decode(&raw).unwrap();
        assert_eq!((r.value, r.expire_at_ms), (&b"hello"[..], None));
        assert!(!r.is_expired(u64::MAX));

        let raw = encode(b"", Some(1234));
        let r = Record::decode(&raw).unwrap();
        assert_eq!((r.value, r.expire_at_ms), (&b""[..], Some(1234)));
        assert!(!r.is_expired(1233));
        assert!(r.is_expired(1234));
    }

    #[test]
    fn foreign_values_are_rejected() {
        assert!(Record::decode(b"").is_err());
        assert!(Record::decode(b"hello").is_err());
        // Tag 1 without a full expiry.
        assert!(Record::decode(&[1, 0, 0]).is_err());
    }
}
