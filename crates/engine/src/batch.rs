//! Write batches: the unit of atomicity. A batch is applied entirely or not at all, and
//! one batch is one WAL record:
//!
//! ```text
//! batch := first_seq u64 LE | count u32 LE | entry*
//! entry := kind u8 | varint key_len | key | (varint value_len | value)   -- no value for Deletion
//! ```
//!
//! An expiring entry (kind 3, [`crate::expiry`]) holds its expiry time in front of its
//! value, within `value_len`.
//!
//! Entry i gets sequence number `first_seq + i`.
//!
//! The grammar of every file in a database directory is in `docs/format.md`.

use crate::error::{Error, Result};
use crate::internal_key::{SeqNo, ValueKind};
use integer_encoding::{VarInt, VarIntWriter};
use std::path::Path;

const HEADER: usize = 12;

/// An ordered group of puts and deletes applied atomically.
#[derive(Clone, Debug)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    user_bytes: u64,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

/// One decoded entry. `value` is as stored: an expiring entry's holds its expiry time in
/// front ([`BatchEntry::expire_at`], [`BatchEntry::payload`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    pub kind: ValueKind,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> BatchEntry<'a> {
    /// When the entry expires (ms since the Unix epoch), if it does.
    pub fn expire_at(&self) -> Option<u64> {
        crate::expiry::split(self.kind, self.value).and_then(|s| s.expire_at)
    }

    /// The value without its expiry time.
    pub fn payload(&self) -> &'a [u8] {
        crate::expiry::split(self.kind, self.value).map_or(self.value, |s| s.payload)
    }
}

impl WriteBatch {
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0u8; HEADER],
            count: 0,
            user_bytes: 0,
        }
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.add(ValueKind::Value, key, value);
    }

    /// A put whose value is gone once the options' clock reaches `expire_at_ms`
    /// (milliseconds since the Unix epoch): reads then find nothing, and compaction and GC
    /// reclaim it ([`crate::expiry`]).
    ///
    /// On the batch rather than in `WriteOptions`: the expiry belongs to one key, and one
    /// atomic batch often mixes keys with and without one (a Redis `SET k v EX 10` writes
    /// the key's record and deletes what else the key held).
    pub fn put_with_expiry(&mut self, key: &[u8], value: &[u8], expire_at_ms: u64) {
        self.add_with_expiry(ValueKind::Value, key, value, Some(expire_at_ms));
    }

    /// [`WriteBatch::add`] for an entry that may carry an expiry time.
    pub(crate) fn add_with_expiry(
        &mut self,
        kind: ValueKind,
        key: &[u8],
        value: &[u8],
        expire_at_ms: Option<u64>,
    ) {
        let Some(t) = expire_at_ms else {
            return self.add(kind, key, value);
        };
        let mut v = Vec::with_capacity(crate::expiry::EXPIRY_LEN + value.len());
        let kind = crate::expiry::encode_into(&mut v, kind, Some(t), value);
        self.add(kind, key, &v);
        if kind != ValueKind::ExpiringPointer {
            self.user_bytes -= crate::expiry::EXPIRY_LEN as u64;
        }
    }

    pub fn delete(&mut self, key: &[u8]) {
        self.add(ValueKind::Deletion, key, &[]);
    }

    /// Adds an entry of any kind; `Pointer` entries are written only by the engine itself.
    pub(crate) fn add(&mut self, kind: ValueKind, key: &[u8], value: &[u8]) {
        self.rep.push(kind as u8);
        self.rep.write_varint(key.len() as u64).unwrap();
        self.rep.extend_from_slice(key);
        if kind != ValueKind::Deletion {
            self.rep.write_varint(value.len() as u64).unwrap();
            self.rep.extend_from_slice(value);
        }
        self.count += 1;
        if !kind.is_pointer() {
            self.user_bytes += (key.len() + value.len()) as u64;
        }
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
    }

    /// Adds `other`'s entries after this batch's, as they are encoded (applied, a later
    /// entry of a key wins as it would in a later batch).
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[HEADER..]);
        self.count += other.count;
        self.user_bytes += other.user_bytes;
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Key and value bytes handed in by the user (write amplification's denominator).
    pub fn user_bytes(&self) -> u64 {
        self.user_bytes
    }

    /// Size of the encoded batch.
    pub fn encoded_len(&self) -> usize {
        self.rep.len()
    }

    pub(crate) fn set_first_seq(&mut self, seq: SeqNo) {
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// A WAL's first record: no entries, the sequence number the log starts at. Recovery
    /// uses it to find a gap between two logs (the older one lost records at its end to a
    /// power cut, cleanly between two records, while the newer one kept some): replaying
    /// past a gap would mix writes from both sides of it.
    pub(crate) fn log_start(seq: SeqNo) -> WriteBatch {
        let mut b = WriteBatch::new();
        b.set_first_seq(seq);
        b
    }

    pub fn first_seq(&self) -> SeqNo {
        u64::from_le_bytes(self.rep[..8].try_into().unwrap())
    }

    pub(crate) fn encoded(&self) -> &[u8] {
        &self.rep
    }

    /// Parses an encoded batch (from the WAL); `file` names the source in errors.
    pub(crate) fn decode(file: &Path, data: &[u8]) -> Result<WriteBatch> {
        if data.len() < HEADER {
            return Err(Error::corruption(
                file,
                "write batch shorter than its header",
            ));
        }
        let count = u32::from_le_bytes(data[8..12].try_into().unwrap());
        let b = WriteBatch {
            rep: data.to_vec(),
            count,
            user_bytes: 0,
        };
        let mut n = 0u32;
        let mut user_bytes = 0u64;
        for e in b.iter_checked(file) {
            let e = e?;
            if !e.kind.is_pointer() {
                user_bytes += (e.key.len() + e.payload().len()) as u64;
            }
            n += 1;
        }
        if n != count {
            return Err(Error::corruption(
                file,
                format!("write batch says {count} entries but holds {n}"),
            ));
        }
        Ok(WriteBatch { user_bytes, ..b })
    }

    /// Entries in order. The batch was built or validated by the engine, so decoding cannot
    /// fail.
    pub fn iter(&self) -> impl Iterator<Item = BatchEntry<'_>> {
        self.iter_checked(Path::new("<batch>"))
            .map(|e| e.expect("validated batch"))
    }

    fn iter_checked<'a>(&'a self, file: &'a Path) -> impl Iterator<Item = Result<BatchEntry<'a>>> {
        let mut pos = HEADER;
        let data = &self.rep;
        std::iter::from_fn(move || {
            if pos >= data.len() {
                return None;
            }
            let bad =
                |what: &str| Some(Err(Error::corruption(file, format!("write batch: {what}"))));
            let Some(kind) = ValueKind::from_u8(data[pos]) else {
                return bad("unknown entry kind");
            };
            pos += 1;
            let mut field = || -> Option<&'a [u8]> {
                let (len, n) = u64::decode_var(&data[pos..])?;
                let start = pos + n;
                let end = start.checked_add(usize::try_from(len).ok()?)?;
                if end > data.len() {
                    return None;
                }
                pos = end;
                Some(&data[start..end])
            };
            let Some(key) = field() else {
                return bad("truncated key");
            };
            let value = if kind == ValueKind::Deletion {
                &[][..]
            } else {
                match field() {
                    Some(v) => v,
                    None => return bad("truncated value"),
                }
            };
            if crate::expiry::split(kind, value).is_none() {
                return bad("expiring entry shorter than its expiry time");
            }
            Some(Ok(BatchEntry { kind, key, value }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_appended_batch_reads_as_one_built_in_that_order() {
        let fill = |b: &mut WriteBatch, from: u8| {
            b.put(&[from], b"v");
            b.delete(&[from + 1]);
            b.put_with_expiry(&[from + 2], &[7u8; 40], 99);
        };
        let (mut first, mut second, mut whole) =
            (WriteBatch::new(), WriteBatch::new(), WriteBatch::new());
        fill(&mut first, 0);
        fill(&mut second, 10);
        fill(&mut whole, 0);
        fill(&mut whole, 10);
        first.append(&second);
        assert_eq!(first.encoded(), whole.encoded());
        assert_eq!(
            (first.len(), first.user_bytes()),
            (whole.len(), whole.user_bytes())
        );
        let d = WriteBatch::decode(Path::new("x"), first.encoded()).unwrap();
        assert_eq!(d.len(), 6);
    }

    #[test]
    fn encode_decode_round_trip_and_corruption() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.put(b"k3", &[9u8; 300]);
        b.put(b"k4", b"");
        b.put_with_expiry(b"k5", b"v5", 1234);
        b.set_first_seq(77);
        let d = WriteBatch::decode(Path::new("x"), b.encoded()).unwrap();
        assert_eq!(d.first_seq(), 77);
        assert_eq!(d.user_bytes(), b.user_bytes());
        let got: Vec<_> = d
            .iter()
            .map(|e| (e.kind, e.key.to_vec(), e.value.len()))
            .collect();
        assert_eq!(
            got,
            vec![
                (ValueKind::Value, b"k1".to_vec(), 2),
                (ValueKind::Deletion, b"k2".to_vec(), 0),
                (ValueKind::Value, b"k3".to_vec(), 300),
                (ValueKind::Value, b"k4".to_vec(), 0),
                (ValueKind::ExpiringValue, b"k5".to_vec(), 10),
            ]
        );
        let last = d.iter().last().unwrap();
        assert_eq!((last.expire_at(), last.payload()), (Some(1234), &b"v5"[..]));
        assert_eq!(b.user_bytes(), 2 + 2 + 2 + 2 + 300 + 2 + 2 + 2);
        let enc = b.encoded();
        assert!(WriteBatch::decode(Path::new("x"), &enc[..enc.len() - 1]).is_err());
        let mut bad = enc.to_vec();
        bad[8] = 9; // wrong count
        assert!(WriteBatch::decode(Path::new("x"), &bad).is_err());
    }
}
