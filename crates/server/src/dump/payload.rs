//! The grammar of a `DUMP` payload, without the store: sealing one and reading one back.
//! Kept apart from [`super`] so that the fuzz target (`fuzz/fuzz_targets/dump_payload.rs`)
//! compiles it alone; a payload comes from the network (`RESTORE`, a `MIGRATE` peer).
//!
//! ```text
//! type u8 | string: value bytes
//!         | collection: size u64 BE | head u64 BE | [stream: its state, STREAM_STATE bytes]
//!                       | entries: tag u8 | len u32 BE | member | len u32 BE | value
//! trailer: VERSION u16 LE | xxh3-64 of all that precedes, u64 LE
//! ```
//!
//! The trailer is placed as in Redis's payload (version, then checksum), but this is not
//! Redis's RDB encoding: a payload of Redis is refused as one of another version.
//! Reading checks every length against what is left before it slices, and the records
//! against the collection they claim to be (member counts, tags, order, shapes), so a
//! forged payload cannot make records no command would. Nothing is allocated while
//! reading: entries are handed to the caller one at a time.

use crate::record::{Kind, STREAM_STATE};

/// The trailer's version: above every RDB version Redis has used (its payloads carry 1..=11).
pub const VERSION: u16 = 0x4801;
/// Bytes of the trailer.
pub const TRAILER: usize = 10;

/// A payload that is not one this server wrote: a wrong version or checksum, a length past
/// the end, or records that do not fit the collection they claim to be.
#[derive(Debug, PartialEq, Eq)]
pub struct BadPayload;

/// The tags of a collection's sub-records: members, a sorted set's score index, a
/// stream's entries, nodes, groups, consumers and pending entries.
pub fn tags(kind: Kind) -> &'static [u8] {
    match kind {
        Kind::ZSet => &[0, 1],
        Kind::Stream => &[0, 1, 2, 3, 4, 5],
        _ => &[0],
    }
}

/// Appends one sub-record to a payload being written.
pub fn push_entry(out: &mut Vec<u8>, tag: u8, member: &[u8], value: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(member.len() as u32).to_be_bytes());
    out.extend_from_slice(member);
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(value);
}

/// Bytes [`push_entry`] adds besides the member and the value.
pub const ENTRY_OVERHEAD: usize = 9;

/// Appends the trailer: the payload is complete.
pub fn seal(out: &mut Vec<u8>) {
    out.extend_from_slice(&VERSION.to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(out);
    out.extend_from_slice(&sum.to_le_bytes());
}

/// What a payload holds, once its trailer is checked.
pub enum Parsed<'a> {
    String(&'a [u8]),
    Collection {
        kind: Kind,
        size: u64,
        head: u64,
        /// A stream's state (empty for other collections).
        state: &'a [u8],
        /// The entries, read by [`Parsed::entries`].
        body: &'a [u8],
    },
}

/// Checks the trailer and reads the header of `payload`.
pub fn parse(payload: &[u8]) -> Result<Parsed<'_>, BadPayload> {
    if payload.len() < 1 + TRAILER {
        return Err(BadPayload);
    }
    let (body, trailer) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    let sum = u64::from_le_bytes(trailer.try_into().expect("8 bytes"));
    if version != VERSION || xxhash_rust::xxh3::xxh3_64(body) != sum {
        return Err(BadPayload);
    }
    let mut b = &body[1..body.len() - 2];
    let kind = Kind::from_u8(body[0]).ok_or(BadPayload)?;
    if kind == Kind::String {
        return Ok(Parsed::String(b));
    }
    let size = u64_of(&mut b)?;
    let head = u64_of(&mut b)?;
    // Only a stream may be empty (Redis keeps an empty stream, never another collection).
    if (size == 0 && kind != Kind::Stream) || (kind != Kind::List && head != 0) {
        return Err(BadPayload);
    }
    let state = if kind == Kind::Stream {
        take(&mut b, STREAM_STATE)?
    } else {
        &[]
    };
    Ok(Parsed::Collection {
        kind,
        size,
        head,
        state,
        body: b,
    })
}

impl<'a> Parsed<'a> {
    /// Hands each entry `(tag, member, value)` of a collection to `each`, in order, and
    /// fails at the first that does not fit: members per tag in strictly increasing order
    /// (as a scan of the source read them: no member twice), each of its type's shape, and
    /// `size` members (and, for a sorted set, `size` index records) in all.
    pub fn entries(&self, mut each: impl FnMut(u8, &'a [u8], &'a [u8])) -> Result<(), BadPayload> {
        let Parsed::Collection {
            kind, size, body, ..
        } = *self
        else {
            return Ok(());
        };
        let mut b = body;
        let mut counts = [0u64; 6];
        let mut last: [Option<&[u8]>; 6] = [None; 6];
        while !b.is_empty() {
            let tag = take(&mut b, 1)?[0];
            if !tags(kind).contains(&tag) {
                return Err(BadPayload);
            }
            let len = u32_of(&mut b)?;
            let member = take(&mut b, len)?;
            let len = u32_of(&mut b)?;
            let value = take(&mut b, len)?;
            let t = tag as usize;
            if last[t].is_some_and(|l| l >= member) || !shape_ok(kind, tag, member, value) {
                return Err(BadPayload);
            }
            last[t] = Some(member);
            counts[t] += 1;
            each(tag, member, value);
        }
        let want_index = if kind == Kind::ZSet { size } else { 0 };
        if counts[0] != size || (kind != Kind::Stream && counts[1] != want_index) {
            return Err(BadPayload);
        }
        Ok(())
    }
}

/// Takes `n` bytes off the front of `b`, if it has them.
fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], BadPayload> {
    if b.len() < n {
        return Err(BadPayload);
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn u64_of(b: &mut &[u8]) -> Result<u64, BadPayload> {
    Ok(u64::from_be_bytes(take(b, 8)?.try_into().expect("8 bytes")))
}

fn u32_of(b: &mut &[u8]) -> Result<usize, BadPayload> {
    Ok(u32::from_be_bytes(take(b, 4)?.try_into().expect("4 bytes")) as usize)
}

/// Whether a sub-record has the shape its type gives it ([`crate::record`]).
fn shape_ok(kind: Kind, tag: u8, member: &[u8], value: &[u8]) -> bool {
    match (kind, tag) {
        (Kind::List, _) => member.len() == 8,
        (Kind::Set, _) => value.is_empty(),
        (Kind::ZSet, 0) => value.len() == 8,
        (Kind::ZSet, _) => member.len() >= 8 && value.is_empty(),
        (Kind::Stream, _) => stream_shape_ok(tag, member, value),
        _ => true,
    }
}

/// A stream's sub-records, as `cmd::stream::layout` lays them out: an entry's fields are
/// an even, non-zero number of length-prefixed strings; a node's record its live count, its
/// last ID and maybe its predecessor; the records of a group start with its length-prefixed name and
/// end, for pending entries, with a 16-byte ID.
fn stream_shape_ok(tag: u8, member: &[u8], value: &[u8]) -> bool {
    const ID: usize = 16;
    // The length of a length-prefixed name at the start of `m`, with its prefix.
    let named = |m: &[u8]| {
        m.get(..4)
            .map(|l| u32::from_be_bytes(l.try_into().expect("4 bytes")) as usize + 4)
            .filter(|&n| n <= m.len())
    };
    let fields_ok = |mut v: &[u8]| {
        let mut n = 0usize;
        while !v.is_empty() {
            match named(v) {
                Some(len) => v = &v[len..],
                None => return false,
            }
            n += 1;
        }
        n > 0 && n.is_multiple_of(2)
    };
    match tag {
        0 => member.len() == ID && fields_ok(value),
        1 => member.len() == ID && (value.len() == 8 + ID || value.len() == 8 + 2 * ID),
        2 => value.len() == 40,
        3 => named(member).is_some() && value.len() == 16,
        4 => named(member).is_some_and(|n| member.len() == n + ID) && value.len() >= 16,
        _ => {
            value.is_empty()
                && named(member).is_some_and(|n| {
                    named(&member[n..]).is_some_and(|c| member.len() == n + c + ID)
                })
        }
    }
}
