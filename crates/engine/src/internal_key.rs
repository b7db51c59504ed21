//! Internal keys: the user key followed by an 8-byte trailer `(seq << 8) | kind`, little
//! endian. Entries sort by user key ascending, then by trailer descending, so the newest
//! version of a key comes first and a seek to `(key, snapshot_seq, KIND_SEEK)` lands on the
//! newest version visible at that snapshot.

use std::cmp::Ordering;

/// Sequence numbers are the engine's clock (paper 000 measures lifetimes in them).
pub type SeqNo = u64;

/// Largest sequence number that fits in the 56 bits of the trailer.
pub const MAX_SEQ: SeqNo = (1 << 56) - 1;

/// What an entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone.
    Deletion = 0,
    /// The value itself.
    Value = 1,
    /// A pointer to a record in a value file (see `vlog::ValuePointer`).
    Pointer = 2,
    /// A value with an expiry time in front of it ([`crate::expiry`]).
    ExpiringValue = 3,
    /// A value pointer with an expiry time in front of it ([`crate::expiry`]).
    ExpiringPointer = 4,
}

/// The kind used in seek keys: the largest, so it sorts before every real entry of the same
/// sequence number.
pub const KIND_SEEK: ValueKind = ValueKind::ExpiringPointer;

impl ValueKind {
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::Pointer),
            3 => Some(ValueKind::ExpiringValue),
            4 => Some(ValueKind::ExpiringPointer),
            _ => None,
        }
    }

    /// Whether the entry carries an expiry time in front of its value.
    pub fn expires(self) -> bool {
        matches!(self, ValueKind::ExpiringValue | ValueKind::ExpiringPointer)
    }

    /// Whether the entry's value is a value pointer (behind its expiry time, if any).
    pub fn is_pointer(self) -> bool {
        matches!(self, ValueKind::Pointer | ValueKind::ExpiringPointer)
    }

    /// The kind of the same entry without an expiry time.
    pub fn without_expiry(self) -> ValueKind {
        match self {
            ValueKind::ExpiringValue => ValueKind::Value,
            ValueKind::ExpiringPointer => ValueKind::Pointer,
            k => k,
        }
    }

    /// The kind of the same entry with an expiry time (a deletion has none).
    pub fn with_expiry(self) -> ValueKind {
        match self {
            ValueKind::Value => ValueKind::ExpiringValue,
            ValueKind::Pointer => ValueKind::ExpiringPointer,
            k => k,
        }
    }
}

pub const TRAILER_LEN: usize = 8;

#[inline]
pub fn pack_trailer(seq: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQ);
    (seq << 8) | kind as u64
}

/// Builds an internal key into a fresh buffer.
pub fn make_internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, kind);
    v
}

/// The seek key positioning at the newest version of `user_key` visible at `seq`.
pub fn seek_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    make_internal_key(user_key, seq, KIND_SEEK)
}

/// Appends an internal key to a buffer (a `Vec<u8>`, or the memtable's arena).
pub fn append_internal_key(
    dst: &mut impl bytes::BufMut,
    user_key: &[u8],
    seq: SeqNo,
    kind: ValueKind,
) {
    dst.put_slice(user_key);
    dst.put_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// A borrowed, already validated view of an internal key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub seq: SeqNo,
    pub kind: ValueKind,
}

/// Splits an internal key; `None` if it is too short or the kind byte is unknown.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    if ikey.len() < TRAILER_LEN {
        return None;
    }
    let (user_key, t) = ikey.split_at(ikey.len() - TRAILER_LEN);
    let trailer = u64::from_le_bytes(t.try_into().unwrap());
    Some(ParsedKey {
        user_key,
        seq: trailer >> 8,
        kind: ValueKind::from_u8((trailer & 0xff) as u8)?,
    })
}

/// The user-key part of an internal key. Panics in debug builds on a key shorter than the
/// trailer; callers only pass keys the engine built or validated.
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    debug_assert!(ikey.len() >= TRAILER_LEN);
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

#[inline]
fn trailer(ikey: &[u8]) -> u64 {
    let n = ikey.len();
    if n < TRAILER_LEN {
        return 0;
    }
    u64::from_le_bytes(ikey[n - TRAILER_LEN..].try_into().unwrap())
}

/// The total order of internal keys.
#[inline]
pub fn cmp_internal(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a)
        .cmp(user_key(b))
        .then_with(|| trailer(b).cmp(&trailer(a)))
}

/// An owned internal key with the internal ordering, for ordered containers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InternalKey(pub Vec<u8>);

impl InternalKey {
    pub fn new(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Self {
        InternalKey(make_internal_key(user_key, seq, kind))
    }
    pub fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }
    pub fn parsed(&self) -> Option<ParsedKey<'_>> {
        parse_internal_key(&self.0)
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_internal(&self.0, &other.0)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first_and_seek_key_precedes_same_seq() {
        let a5 = make_internal_key(b"a", 5, ValueKind::Value);
        let a3 = make_internal_key(b"a", 3, ValueKind::Deletion);
        let ab = make_internal_key(b"ab", 9, ValueKind::Value);
        let seek = make_internal_key(b"a", 5, KIND_SEEK);
        assert_eq!(cmp_internal(&a5, &a3), Ordering::Less);
        assert_eq!(cmp_internal(&a3, &ab), Ordering::Less);
        assert_eq!(cmp_internal(&seek, &a5), Ordering::Less);
        let p = parse_internal_key(&a3).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"a"[..], 3, ValueKind::Deletion)
        );
        assert!(parse_internal_key(b"short").is_none());
    }
}
