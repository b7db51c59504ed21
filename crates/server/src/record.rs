//! How the server lays Redis's data types out on the engine's flat, ordered key space.
//!
//! Every user key has one **metadata record** that says what it is:
//!
//! ```text
//! key:   'M' | db u8 | user key
//! value: FORMAT (2) | type u8 | expire_at_ms u64 BE (0: none) | body
//! body:  string:            the value's bytes
//!        hash / set / zset: version u64 BE | size u64 BE
//!        list:              version u64 BE | size u64 BE | head u64 BE
//!        stream:            version u64 BE | size u64 BE | the stream's state
//!                           ([`STREAM_STATE`] bytes, laid out by `cmd::stream::layout`)
//! ```
//!
//! A collection's members are **sub-keys** next to each other, prefixed by the user key
//! (length-prefixed, so that the sub-keys of `ab` and `a` never interleave) so that a later
//! cluster mode can keep them in the key's hash slot:
//!
//! ```text
//! 'S' | db u8 | user key length u32 BE | user key | version u64 BE | tag u8 | payload
//! hash:  tag 0 | field            -> value
//! set:   tag 0 | member           -> (empty)
//! list:  tag 0 | index u64 BE     -> element      (index = head + position)
//! zset:  tag 0 | member           -> score (order-preserving 8 bytes)
//!        tag 1 | score (8) | member -> (empty)   (the score index)
//! stream: tags 0 to 5: entries, nodes, consumer groups, consumers and pending entries
//!        (`cmd::stream::layout`)
//! ```
//!
//! The version is what makes `DEL`, an overwrite or the expiry of a collection O(1): they
//! delete or replace the metadata record only, and a new collection under the same name
//! gets a new version, so the old sub-keys no longer belong to anything. They are garbage
//! that the store's background sweep deletes ([`crate::store::Store::sweep_expired`]): the
//! engine has no compaction-filter hook through which Kvrocks-style cleanup could drop them
//! while compacting.
//!
//! Databases written before this layout hold string records under the raw user key with a
//! one-byte tag (`0`: no expiry; `1`: an 8-byte expiry follows) and no format marker;
//! [`crate::store::Store::open`] rewrites them into this layout once ([`legacy`]).

use std::time::{SystemTime, UNIX_EPOCH};

/// First byte of every metadata value in this layout; legacy values start with 0 or 1.
pub const FORMAT: u8 = 2;
/// Namespace of metadata records.
pub const META: u8 = b'M';
/// Namespace of collection sub-keys.
pub const SUB: u8 = b'S';
/// Marks a database as converted: its key cannot be a metadata or sub-key, and its value
/// (first byte 0xfe) cannot be a legacy record, so a legacy user key `F` is still migrated.
pub const MARKER_KEY: &[u8] = b"F";
pub const MARKER_VALUE: &[u8] = &[0xfe, b'h', b'l', FORMAT];
/// A replica's replication position ([`crate::repl_state::Position`]): the id, offset and
/// sequence number of the primary's stream its data holds. Neither a metadata key nor a sub-key, so no
/// walk of the key space meets it.
pub const REPL_KEY: &[u8] = b"R";
/// A primary's replication histories ([`crate::repl_log::history`]); like [`REPL_KEY`], no
/// walk of the key space meets it.
pub const HISTORY_KEY: &[u8] = b"H";
/// Namespace of function libraries (`FUNCTION LOAD`): `'L' | library name, lower case`
/// -> the library's code. Data, so replication and full syncs carry it, but neither a
/// metadata key nor a sub-key, so no walk of a database's keys (nor `FLUSHALL`) meets it.
pub const FUNCTION: u8 = b'L';
/// Databases `SELECT` accepts (Redis's default `databases 16`).
pub const DATABASES: u8 = 16;

/// Bytes the metadata header adds to a string value.
pub const STRING_HEADER: usize = 10;
/// Bytes of a stream's state after its version and size ([`Meta::value`]).
pub const STREAM_STATE: usize = 112;
/// Bytes a key's metadata key adds to the user key.
pub const META_KEY_OVERHEAD: usize = 2;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("stored value is not in the server's format (tag {tag:#x}, {len} bytes): was the database written by another program?")]
pub struct RecordError {
    tag: u8,
    len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String = 0,
    Hash = 1,
    List = 2,
    Set = 3,
    ZSet = 4,
    Stream = 5,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }

    pub fn from_name(n: &[u8]) -> Option<Kind> {
        [
            Kind::String,
            Kind::Hash,
            Kind::List,
            Kind::Set,
            Kind::ZSet,
            Kind::Stream,
        ]
        .into_iter()
        .find(|k| n.eq_ignore_ascii_case(k.name().as_bytes()))
    }

    pub fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            0 => Kind::String,
            1 => Kind::Hash,
            2 => Kind::List,
            3 => Kind::Set,
            4 => Kind::ZSet,
            5 => Kind::Stream,
            _ => return None,
        })
    }
}

/// A key's metadata record, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    /// Milliseconds since the Unix epoch after which the key is gone.
    pub expire_at_ms: Option<u64>,
    /// Strings: the value. Streams: their state ([`STREAM_STATE`] bytes). Other
    /// collections: empty.
    pub value: Vec<u8>,
    /// Collections: which generation of sub-keys belongs to this key.
    pub version: u64,
    /// Collections: number of members (elements, fields).
    pub size: u64,
    /// Lists: index of the first element.
    pub head: u64,
}

/// A new list's first index: the middle of the range, so both ends can grow by 2^63.
pub const LIST_START: u64 = 1 << 63;

impl Meta {
    pub fn string(value: Vec<u8>, expire_at_ms: Option<u64>) -> Meta {
        Meta {
            kind: Kind::String,
            expire_at_ms,
            value,
            version: 0,
            size: 0,
            head: 0,
        }
    }

    pub fn collection(kind: Kind, version: u64) -> Meta {
        Meta {
            kind,
            expire_at_ms: None,
            value: Vec::new(),
            version,
            size: 0,
            head: if kind == Kind::List { LIST_START } else { 0 },
        }
    }

    pub fn decode(raw: &[u8]) -> Result<Meta, RecordError> {
        let Head { kind, expire_at_ms } = Head::decode(raw)?;
        let mut m = Meta {
            kind,
            expire_at_ms,
            value: Vec::new(),
            version: 0,
            size: 0,
            head: 0,
        };
        let body = &raw[STRING_HEADER..];
        match kind {
            Kind::String => m.value = body.to_vec(),
            Kind::List => {
                (m.version, m.size, m.head) = (u64_at(body, 0), u64_at(body, 8), u64_at(body, 16))
            }
            Kind::Hash | Kind::Set | Kind::ZSet => {
                (m.version, m.size) = (u64_at(body, 0), u64_at(body, 8))
            }
            Kind::Stream => {
                (m.version, m.size) = (u64_at(body, 0), u64_at(body, 8));
                m.value = body[16..].to_vec();
            }
        }
        Ok(m)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(STRING_HEADER + self.value.len().max(24));
        out.push(FORMAT);
        out.push(self.kind as u8);
        out.extend_from_slice(&self.expire_at_ms.unwrap_or(0).to_be_bytes());
        match self.kind {
            Kind::String => out.extend_from_slice(&self.value),
            _ => {
                out.extend_from_slice(&self.version.to_be_bytes());
                out.extend_from_slice(&self.size.to_be_bytes());
                if self.kind == Kind::List {
                    out.extend_from_slice(&self.head.to_be_bytes());
                }
                if self.kind == Kind::Stream {
                    out.extend_from_slice(&self.value);
                }
            }
        }
        out
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms.is_some_and(|t| t <= now_ms)
    }
}

/// A key's type and expiry: what walks over many keys (`KEYS`, `DBSIZE`, `SCAN`, `INFO`'s
/// keyspace, the expiry sweep) need of a metadata record. Decoded from the record's
/// header; a string's value, which follows it, is not copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub kind: Kind,
    pub expire_at_ms: Option<u64>,
}

impl Head {
    /// The header of a metadata record, checked as [`Meta::decode`] checks the whole
    /// record (format, type, and a collection's body length).
    pub fn decode(raw: &[u8]) -> Result<Head, RecordError> {
        let err = || RecordError {
            tag: raw.first().copied().unwrap_or(0xff),
            len: raw.len(),
        };
        if raw.len() < STRING_HEADER || raw[0] != FORMAT {
            return Err(err());
        }
        let kind = Kind::from_u8(raw[1]).ok_or_else(err)?;
        let body = raw.len() - STRING_HEADER;
        match kind {
            Kind::String => {}
            Kind::List if body == 24 => {}
            Kind::Hash | Kind::Set | Kind::ZSet if body == 16 => {}
            Kind::Stream if body == 16 + STREAM_STATE => {}
            _ => return Err(err()),
        }
        let exp = u64_at(raw, 2);
        Ok(Head {
            kind,
            expire_at_ms: (exp != 0).then_some(exp),
        })
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms.is_some_and(|t| t <= now_ms)
    }
}

/// The expiry the engine is told of for a metadata record ([`engine::expiry`]): a
/// string's. The engine then reads an expired string as absent without the server writing
/// its deletion, drops it in compaction and never copies it in GC. A collection keeps its
/// expiry in its header only: its members are sub-keys the store's sweep deletes once it
/// finds the collection gone, and the sweep counts the expired keys it deletes.
pub fn engine_expiry(raw: &[u8]) -> Option<u64> {
    Head::decode(raw)
        .ok()
        .filter(|h| h.kind == Kind::String)
        .and_then(|h| h.expire_at_ms)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The metadata key of `key` in database `db`.
pub fn meta_key(db: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + META_KEY_OVERHEAD);
    k.push(META);
    k.push(db);
    k.extend_from_slice(key);
    k
}

/// Whether `k` holds data (a metadata record, a sub-key, a function library), which
/// replication carries, as
/// opposed to the server's own records (the format marker, a replica's position, the
/// replication histories), which it never does.
pub fn is_data_key(k: &[u8]) -> bool {
    matches!(k.first(), Some(&META | &SUB | &FUNCTION))
}

/// The record of function library `name`.
pub fn function_key(name: &str) -> Vec<u8> {
    let mut k = vec![FUNCTION];
    k.extend_from_slice(name.to_ascii_lowercase().as_bytes());
    k
}

/// The user key and database of a metadata key.
pub fn split_meta_key(k: &[u8]) -> Option<(u8, &[u8])> {
    match k {
        [META, db, rest @ ..] => Some((*db, rest)),
        _ => None,
    }
}

/// The first bytes shared by every metadata key of database `db`.
pub fn meta_prefix(db: u8) -> Vec<u8> {
    vec![META, db]
}

/// The prefix shared by the sub-keys of (`db`, `key`, `version`) with `tag`.
pub fn sub_prefix(db: u8, key: &[u8], version: u64, tag: u8) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 16);
    k.push(SUB);
    k.push(db);
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k.extend_from_slice(&version.to_be_bytes());
    k.push(tag);
    k
}

/// A sub-key: [`sub_prefix`] followed by `member`.
pub fn sub_key(db: u8, key: &[u8], version: u64, tag: u8, member: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(db, key, version, tag);
    k.extend_from_slice(member);
    k
}

/// The owner of a sub-key: database, user key and version.
pub fn split_sub_key(k: &[u8]) -> Option<(u8, &[u8], u64)> {
    let [SUB, db, rest @ ..] = k else { return None };
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let key = rest.get(4..4 + len)?;
    let version = u64::from_be_bytes(rest.get(4 + len..12 + len)?.try_into().ok()?);
    Some((*db, key, version))
}

/// The smallest key greater than every key starting with `prefix` (`None`: no bound).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A score as 8 bytes that sort as the numbers do (IEEE 754 with the sign bit flipped
/// for positives and every bit flipped for negatives). `-0.0` is stored as `0.0`.
pub fn score_bytes(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    ordered.to_be_bytes()
}

pub fn score_from_bytes(b: &[u8]) -> f64 {
    let ordered = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    f64::from_bits(bits)
}

/// Records written before the typed layout: strings under the raw user key.
pub mod legacy {
    /// The value and expiry of a legacy record, or `None` if `raw` is not one.
    pub fn decode(raw: &[u8]) -> Option<(&[u8], Option<u64>)> {
        match raw.first() {
            Some(0) => Some((&raw[1..], None)),
            Some(1) if raw.len() >= 9 => Some((
                &raw[9..],
                Some(u64::from_be_bytes(raw[1..9].try_into().expect("8 bytes"))),
            )),
            _ => None,
        }
    }

    /// A legacy record (for tests of the migration).
    pub fn encode(value: &[u8], expire_at_ms: Option<u64>) -> Vec<u8> {
        let mut out = Vec::with_capacity(value.len() + 9);
        match expire_at_ms {
            None => out.push(0),
            Some(t) => {
                out.push(1);
                out.extend_from_slice(&t.to_be_bytes());
            }
        }
        out.extend_from_slice(value);
        out
    }
}

/// Wall-clock milliseconds since the Unix epoch (expiry is absolute, as in Redis, so that
/// it survives a restart).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Wall-clock microseconds, the floor of new collection versions.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips() {
        let s = Meta::string(b"hello".to_vec(), Some(1234));
        let raw = s.encode();
        assert_eq!(raw.len(), STRING_HEADER + 5);
        assert_eq!(Meta::decode(&raw).unwrap(), s);
        assert!(!s.is_expired(1233) && s.is_expired(1234));
        let mut l = Meta::collection(Kind::List, 77);
        l.size = 3;
        l.head = 5;
        assert_eq!(Meta::decode(&l.encode()).unwrap(), l);
        let h = Meta::collection(Kind::Hash, 9);
        assert_eq!(Meta::decode(&h.encode()).unwrap(), h);
        assert_eq!(
            Head::decode(&s.encode()).unwrap(),
            Head {
                kind: Kind::String,
                expire_at_ms: Some(1234)
            }
        );
        assert_eq!(Head::decode(&l.encode()).unwrap().kind, Kind::List);
        let mut short = h.encode();
        short.pop();
        assert!(Head::decode(&short).is_err() && Meta::decode(&short).is_err());
    }

    #[test]
    fn foreign_and_legacy_values_are_not_metadata() {
        assert!(Meta::decode(b"").is_err());
        assert!(Meta::decode(b"hello world").is_err());
        assert!(Meta::decode(&legacy::encode(b"0123456789", None)).is_err());
        assert_eq!(
            legacy::decode(&legacy::encode(b"v", Some(5))),
            Some((&b"v"[..], Some(5)))
        );
        assert_eq!(legacy::decode(&[1, 0]), None);
        assert_eq!(legacy::decode(MARKER_VALUE), None);
    }

    #[test]
    fn sub_keys_of_a_key_are_contiguous_and_parse_back() {
        let a = sub_key(3, b"a", 7, 0, b"zzz");
        let ab = sub_key(3, b"ab", 1, 0, b"");
        let a2 = sub_key(3, b"a", 8, 0, b"");
        // Every sub-key of `a` sorts before any of `ab`: the length prefix separates them.
        assert!(a < ab && a2 < ab);
        assert_eq!(split_sub_key(&a), Some((3, &b"a"[..], 7)));
        assert!(a.starts_with(&sub_prefix(3, b"a", 7, 0)));
        assert_eq!(split_meta_key(&meta_key(2, b"k")), Some((2, &b"k"[..])));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff]), None);
    }

    #[test]
    fn score_bytes_sort_as_numbers() {
        let xs = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -0.0,
            1e-300,
            1.0,
            3.5,
            f64::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(score_bytes(w[0]) <= score_bytes(w[1]), "{w:?}");
        }
        for x in xs {
            assert_eq!(score_from_bytes(&score_bytes(x)), x);
        }
        assert_eq!(score_bytes(-0.0), score_bytes(0.0));
    }
}
