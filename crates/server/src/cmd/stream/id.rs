//! Stream entry IDs: `<ms>-<seq>`, a pair of unsigned 64-bit numbers ordered as the pair,
//! stored as 16 big-endian bytes so that sub-keys sort as the IDs do. Parsing follows
//! Redis 7.0's `streamGenericParseIDOrReply`.

use crate::protocol::Reply;
use std::fmt;

/// Bytes of a stored ID.
pub const LEN: usize = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id {
    pub ms: u64,
    pub seq: u64,
}

impl Id {
    pub const MIN: Id = Id { ms: 0, seq: 0 };
    pub const MAX: Id = Id {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> Id {
        Id { ms, seq }
    }

    pub fn bytes(self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// The ID in the first [`LEN`] bytes of `b`.
    pub fn from_bytes(b: &[u8]) -> Option<Id> {
        let b = b.get(..LEN)?;
        Some(Id {
            ms: u64::from_be_bytes(b[..8].try_into().ok()?),
            seq: u64::from_be_bytes(b[8..].try_into().ok()?),
        })
    }

    /// The smallest ID above this one (`None` past [`Id::MAX`]).
    pub fn next(self) -> Option<Id> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(Id::new(ms + 1, 0)),
            (ms, seq) => Some(Id::new(ms, seq + 1)),
        }
    }

    /// The largest ID below this one (`None` below [`Id::MIN`]).
    pub fn prev(self) -> Option<Id> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(Id::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(Id::new(ms, seq - 1)),
        }
    }

    pub fn is_zero(self) -> bool {
        self == Id::MIN
    }

    pub fn reply(self) -> Reply {
        Reply::bulk(self.to_string())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

pub fn invalid() -> Reply {
    Reply::err("Invalid stream ID specified as stream command argument")
}

/// A part of an ID as Redis's `string2ull` reads it: digits, an optional `+`, no more than
/// fits in 64 bits.
fn number(s: &[u8]) -> Option<u64> {
    let digits = s.strip_prefix(b"+").unwrap_or(s);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The form of an argument: `<ms>-<seq>`, `<ms>` (the sequence is `missing_seq`), and,
/// unless `strict`, `-` and `+` for the smallest and largest IDs. With `auto_seq`,
/// `<ms>-*` too: the second value says whether the sequence was given.
fn parse_with(
    b: &[u8],
    missing_seq: u64,
    strict: bool,
    auto_seq: bool,
) -> Result<(Id, bool), Reply> {
    if b.len() > 127 {
        return Err(invalid());
    }
    match b {
        b"-" | b"+" if strict => return Err(invalid()),
        b"-" => return Ok((Id::MIN, true)),
        b"+" => return Ok((Id::MAX, true)),
        _ => {}
    }
    let (ms, seq) = match b.iter().position(|&c| c == b'-') {
        Some(dash) => (&b[..dash], Some(&b[dash + 1..])),
        None => (b, None),
    };
    let ms = number(ms).ok_or_else(invalid)?;
    match seq {
        Some(b"*") if auto_seq => Ok((Id::new(ms, 0), false)),
        Some(s) => Ok((Id::new(ms, number(s).ok_or_else(invalid)?), true)),
        None => Ok((Id::new(ms, missing_seq), true)),
    }
}

/// An ID argument; `strict` refuses `-` and `+`.
pub fn parse(b: &[u8], missing_seq: u64, strict: bool) -> Result<Id, Reply> {
    Ok(parse_with(b, missing_seq, strict, false)?.0)
}

/// `XADD`'s explicit ID: strict, and `<ms>-*` leaves the sequence to the stream (the
/// second value is whether the sequence was given).
pub fn parse_add(b: &[u8]) -> Result<(Id, bool), Reply> {
    parse_with(b, 0, true, true)
}

/// A range bound (`XRANGE`, `XPENDING`, `XAUTOCLAIM`): a lone `<ms>` starts at sequence 0
/// and ends at the largest; a leading `(` excludes the ID (then strict).
pub fn parse_bound(b: &[u8], start: bool) -> Result<Id, Reply> {
    let missing = if start { 0 } else { u64::MAX };
    if b.len() > 1 && b[0] == b'(' {
        let id = parse(&b[1..], missing, true)?;
        return if start {
            id.next()
                .ok_or_else(|| Reply::err("invalid start ID for the interval"))
        } else {
            id.prev()
                .ok_or_else(|| Reply::err("invalid end ID for the interval"))
        };
    }
    parse(b, missing, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_print_and_sort_as_their_bytes() {
        assert_eq!(parse(b"5-3", 0, true).unwrap(), Id::new(5, 3));
        assert_eq!(parse(b"5", 7, true).unwrap(), Id::new(5, 7));
        assert_eq!(parse(b"+5-+3", 0, true).unwrap(), Id::new(5, 3));
        assert_eq!(parse(b"-", 0, false).unwrap(), Id::MIN);
        assert_eq!(parse(b"+", 0, false).unwrap(), Id::MAX);
        for bad in [
            &b"-"[..],
            b"+",
            b"",
            b"a",
            b"1-",
            b"-1",
            b"1-2-3",
            b"18446744073709551616",
        ] {
            assert!(parse(bad, 0, true).is_err(), "{bad:?}");
        }
        assert_eq!(parse_add(b"7-*").unwrap(), (Id::new(7, 0), false));
        assert_eq!(parse_add(b"7-1").unwrap(), (Id::new(7, 1), true));
        assert!(parse(b"7-*", 0, true).is_err());
        assert_eq!(parse_bound(b"(1-0", true).unwrap(), Id::new(1, 1));
        assert_eq!(parse_bound(b"(1-0", false).unwrap(), Id::new(0, u64::MAX));
        assert_eq!(parse_bound(b"3", false).unwrap(), Id::new(3, u64::MAX));
        assert!(parse_bound(b"(-", true).is_err());
        assert!(parse_bound(b"(0-0", false).is_err());
        let (a, b) = (Id::new(1, u64::MAX), Id::new(2, 0));
        assert!(a < b && a.bytes() < b.bytes());
        assert_eq!(a.next(), Some(b));
        assert_eq!(b.prev(), Some(a));
        assert_eq!(Id::MAX.next(), None);
        assert_eq!(Id::from_bytes(&b.bytes()), Some(b));
        assert_eq!(Id::new(12, 3).to_string(), "12-3");
    }
}
