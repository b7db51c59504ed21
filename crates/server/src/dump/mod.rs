//! A key serialized whole (`DUMP`'s payload, what `MIGRATE` sends and `RESTORE` reads):
//! its type, a collection's size (and a list's head) and every sub-record, so that a key
//! moves between halflife servers as one value, restored by one atomic engine write. The
//! payload's grammar is [`payload`]; the expiry is not in it: `RESTORE` takes it as an
//! argument.

pub mod payload;

use crate::protocol::Reply;
use crate::record::{self, Kind, Meta};
use crate::store::{Batch, Store};
use payload::{Parsed, ENTRY_OVERHEAD, TRAILER};

fn bad_payload() -> Reply {
    Reply::err("DUMP payload version or checksum are wrong")
}

fn too_large(key: &[u8], max: usize) -> Reply {
    Reply::err(format!(
        "the serialized value of key '{}' is larger than {max} bytes (proto-max-bulk-len)",
        String::from_utf8_lossy(&key[..key.len().min(64)])
    ))
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
        if m.kind == Kind::Stream {
            out.extend_from_slice(&m.value);
        }
        for &tag in payload::tags(m.kind) {
            let mut over = false;
            store.sub_range(
                &record::sub_prefix(db, key, m.version, tag),
                None,
                |k, v| {
                    if out.len() + ENTRY_OVERHEAD + k.len() + v.len() + TRAILER > max {
                        over = true;
                        return false;
                    }
                    payload::push_entry(&mut out, tag, k, &v);
                    true
                },
            )?;
            if over {
                return Err(too_large(key, max));
            }
        }
    }
    payload::seal(&mut out);
    Ok(Some((out, m.expire_at_ms)))
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
    let parsed = payload::parse(payload).map_err(|_| bad_payload())?;
    let (kind, size, head, state) = match parsed {
        Parsed::String(value) => {
            batch.put_meta(db, key, &Meta::string(value.to_vec(), expire_at_ms));
            return Ok(());
        }
        Parsed::Collection {
            kind,
            size,
            head,
            state,
            ..
        } => (kind, size, head, state),
    };
    let mut m = Meta::collection(kind, store.new_version());
    m.expire_at_ms = expire_at_ms;
    m.size = size;
    m.head = head;
    m.value = state.to_vec();
    parsed
        .entries(|tag, member, value| {
            batch.put(&record::sub_key(db, key, m.version, tag, member), value)
        })
        .map_err(|_| bad_payload())?;
    batch.put_meta(db, key, &m);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(body: &[u8]) -> Vec<u8> {
        let mut p = body.to_vec();
        payload::seal(&mut p);
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
