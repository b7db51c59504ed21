//! A key serialized whole (`DUMP`'s payload, what `MIGRATE` sends and `RESTORE` reads):
//! its type, a collection's size (and a list's head) and every sub-record, so that a key
//! moves between halflife servers as one value, restored by one atomic engine write.
//!
//! ```text
//! type u8 | string: value bytes
//!         | collection: size u64 BE | head u64 BE | entries: tag u8 | len u32 BE | member
//!                                                            | len u32 BE | value
//! trailer: PAYLOAD_VERSION u16 LE | xxh3-64 of all that precedes, u64 LE
//! ```
//!
//! The trailer is placed as in Redis's payload (version, then checksum), but this is not
//! Redis's RDB encoding: a payload of Redis is refused with Redis's error for a payload
//! of another version. The expiry is not in the payload: `RESTORE` takes it as an argument.
//!
//! The payload comes from the network: [`restore`] checks every length against what is
//! left before it slices, and the records against the collection they claim to be (member
//! counts, tags, order), so a forged one cannot write records no command would.

use crate::protocol::Reply;
use crate::record::{self, Kind, Meta};
use crate::store::{Batch, Store};

/// The trailer's version: above every RDB version Redis has used (its payloads carry 1..=11).
const PAYLOAD_VERSION: u16 = 0x4801;
const TRAILER: usize = 10;

fn bad_payload() -> Reply {
    Reply::err("DUMP payload version or checksum are wrong")
}

fn too_large(key: &[u8], max: usize) -> Reply {
    Reply::err(format!(
        "the serialized value of key '{}' is larger than {max} bytes (proto-max-bulk-len)",
        String::from_utf8_lossy(&key[..key.len().min(64)])
    ))
}

/// The tags of a collection's sub-records: members, and a sorted set's score index.
fn tags(kind: Kind) -> &'static [u8] {
    match kind {
        Kind::ZSet => &[0, 1],
        _ => &[0],
    }
}

/// A key's payload and its expiry (milliseconds since the epoch).
pub type Dumped = (Vec<u8>, Option<u64>);

/// The payload of `key` in `db` as it is now (the caller holds the key's lock), or `None`
/// if it does not exist; refused beyond `max` bytes, checked as it grows.
pub fn dump(store: &Store, db: u8, key: &[u8], max: usize) -> Result<Option<Dumped>, Reply> {
    let Some(m) = store.read(db, key, false)? else {
        return Ok(None);
    };
    let mut out = vec![m.kind as u8];
    if m.kind == Kind::String {
        if m.value.len() + 1 + TRAILER > max {
            return Err(too_large(key, max));
        }
        out.extend_from_slice(&m.value);
    } else {
        out.extend_from_slice(&m.size.to_be_bytes());
        out.extend_from_slice(&m.head.to_be_bytes());
        for &tag in tags(m.kind) {
            let mut over = false;
            store.sub_range(
                &record::sub_prefix(db, key, m.version, tag),
                None,
                |k, v| {
                    if out.len() + 9 + k.len() + v.len() + TRAILER > max {
                        over = true;
                        return false;
                    }
                    out.push(tag);
                    out.extend_from_slice(&(k.len() as u32).to_be_bytes());
                    out.extend_from_slice(k);
                    out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                    out.extend_from_slice(v);
                    true
                },
            )?;
            if over {
                return Err(too_large(key, max));
            }
        }
    }
    out.extend_from_slice(&PAYLOAD_VERSION.to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    Ok(Some((out, m.expire_at_ms)))
}

/// Takes `n` bytes off the front of `b`, if it has them.
fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], Reply> {
    if b.len() < n {
        return Err(bad_payload());
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn u64_of(b: &mut &[u8]) -> Result<u64, Reply> {
    Ok(u64::from_be_bytes(take(b, 8)?.try_into().expect("8 bytes")))
}

fn u32_of(b: &mut &[u8]) -> Result<usize, Reply> {
    Ok(u32::from_be_bytes(take(b, 4)?.try_into().expect("4 bytes")) as usize)
}

/// Adds to `batch` the records of `payload` as key `key` of `db` expiring at
/// `expire_at_ms`; a collection gets a new version from `store`, so records of an older
/// key of that name are left to the sweep as after any overwrite.
pub fn restore(
    store: &Store,
    batch: &mut Batch,
    db: u8,
    key: &[u8],
    payload: &[u8],
    expire_at_ms: Option<u64>,
) -> Result<(), Reply> {
    if payload.len() < 1 + TRAILER {
        return Err(bad_payload());
    }
    let (body, trailer) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    let sum = u64::from_le_bytes(trailer.try_into().expect("8 bytes"));
    if version != PAYLOAD_VERSION || xxhash_rust::xxh3::xxh3_64(body) != sum {
        return Err(bad_payload());
    }
    let mut b = &body[1..body.len() - 2];
    let kind = Kind::from_u8(body[0]).ok_or_else(bad_payload)?;
    if kind == Kind::String {
        batch.put_meta(db, key, &Meta::string(b.to_vec(), expire_at_ms));
        return Ok(());
    }
    let mut m = Meta::collection(kind, store.new_version());
    m.expire_at_ms = expire_at_ms;
    m.size = u64_of(&mut b)?;
    m.head = u64_of(&mut b)?;
    if m.size == 0 || (kind != Kind::List && m.head != 0) {
        return Err(bad_payload());
    }
    // Members per tag, each tag's members in strictly increasing order (as a scan of the
    // source read them: no member twice).
    let mut counts = [0u64; 2];
    let mut last: [Option<&[u8]>; 2] = [None, None];
    while !b.is_empty() {
        let tag = take(&mut b, 1)?[0];
        if !tags(kind).contains(&tag) {
            return Err(bad_payload());
        }
        let len = u32_of(&mut b)?;
        let member = take(&mut b, len)?;
        let len = u32_of(&mut b)?;
        let value = take(&mut b, len)?;
        let t = tag as usize;
        if last[t].is_some_and(|l| l >= member) || !shape_ok(kind, tag, member, value) {
            return Err(bad_payload());
        }
        last[t] = Some(member);
        counts[t] += 1;
        batch.put(&record::sub_key(db, key, m.version, tag, member), value);
    }
    let want_index = if kind == Kind::ZSet { m.size } else { 0 };
    if counts != [m.size, want_index] {
        return Err(bad_payload());
    }
    batch.put_meta(db, key, &m);
    Ok(())
}

/// Whether a sub-record has the shape its type gives it ([`crate::record`]).
fn shape_ok(kind: Kind, tag: u8, member: &[u8], value: &[u8]) -> bool {
    match (kind, tag) {
        (Kind::List, _) => member.len() == 8,
        (Kind::Set, _) => value.is_empty(),
        (Kind::ZSet, 0) => value.len() == 8,
        (Kind::ZSet, _) => member.len() >= 8 && value.is_empty(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(body: &[u8]) -> Vec<u8> {
        let mut p = body.to_vec();
        p.extend_from_slice(&PAYLOAD_VERSION.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&p);
        p.extend_from_slice(&sum.to_le_bytes());
        p
    }

    #[test]
    fn forged_payloads_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = engine::DB::open(dir.path(), engine::Options::default()).unwrap();
        let store = Store::open(db, 1 << 20).unwrap();
        let try_one = |p: &[u8]| {
            let mut b = Batch::new();
            restore(&store, &mut b, 0, b"k", p, None)
        };
        let set_entry = |m: &[u8]| {
            let mut e = vec![0u8];
            e.extend_from_slice(&(m.len() as u32).to_be_bytes());
            e.extend_from_slice(m);
            e.extend_from_slice(&0u32.to_be_bytes());
            e
        };
        let set = |size: u64, members: &[&[u8]]| {
            let mut p = vec![Kind::Set as u8];
            p.extend_from_slice(&size.to_be_bytes());
            p.extend_from_slice(&0u64.to_be_bytes());
            for m in members {
                p.extend_from_slice(&set_entry(m));
            }
            sealed(&p)
        };
        assert!(try_one(&set(2, &[b"a", b"b"])).is_ok());
        assert!(try_one(&sealed(&[Kind::String as u8, b'v'])).is_ok());
        let mut flipped = set(2, &[b"a", b"b"]);
        flipped[12] ^= 1;
        let mut truncated = set(2, &[b"a", b"b"]);
        truncated.drain(20..22);
        for bad in [
            Vec::new(),
            b"short".to_vec(),
            flipped,
            truncated,
            set(3, &[b"a", b"b"]),
            set(2, &[b"b", b"a"]),
            set(2, &[b"a", b"a"]),
            set(0, &[]),
            sealed(&[9, 1, 2]),
            // A length past the end.
            sealed(
                &[
                    &[Kind::Set as u8][..],
                    &[0; 7],
                    &[1],
                    &[0; 8],
                    &[0],
                    &[0xff; 4],
                ]
                .concat(),
            ),
        ] {
            assert_eq!(
                try_one(&bad),
                Err(Reply::err("DUMP payload version or checksum are wrong")),
                "{bad:?}"
            );
        }
    }
}
