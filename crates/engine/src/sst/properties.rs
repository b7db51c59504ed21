//! Table properties: what a table holds, summarised when it is written so that compaction
//! picking, space accounting and garbage-collection estimates need not scan it.
//!
//! # Layout (the contents of the properties block)
//!
//! A sequence of records, each
//!
//! ```text
//! tag: varint32 | len: varint32 | payload: [u8; len]
//! ```
//!
//! Integers are varint64 payloads, keys are raw bytes. A reader skips tags it does not
//! know, so properties can be added without a format-version bump. `file_size` is not
//! stored: it is a fact of the file, filled in from its length when the table is opened.

use super::block::MalformedBlock;
use super::coding::{get_varint32, get_varint64, put_varint32, put_varint64};

/// What a table holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableProperties {
    /// Bytes of the whole file, footer included.
    pub file_size: u64,
    pub num_entries: u64,
    /// Entries whose kind is `Deletion`.
    pub num_deletions: u64,
    /// Entries whose kind is `Pointer` (values that live in a value file).
    pub num_pointers: u64,
    /// Sum of the internal-key lengths, before prefix compression.
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
    /// First and last internal keys; empty for a table without entries.
    pub smallest_key: Vec<u8>,
    pub largest_key: Vec<u8>,
    pub smallest_seq: u64,
    pub largest_seq: u64,
    pub num_data_blocks: u64,
    /// The earliest expiry time (ms since the Unix epoch) of the table's expiring entries;
    /// 0 when it has none (and in tables written before expiry existed). A compaction of
    /// the range down to the last level rewrites a last-level table only once this time
    /// has passed, as RocksDB's manual compaction rewrites the bottommost level only when a
    /// compaction filter may drop something.
    pub earliest_expiry: u64,
}

const TAG_NUM_ENTRIES: u32 = 1;
const TAG_NUM_DELETIONS: u32 = 2;
const TAG_NUM_POINTERS: u32 = 3;
const TAG_RAW_KEY_BYTES: u32 = 4;
const TAG_RAW_VALUE_BYTES: u32 = 5;
const TAG_SMALLEST_KEY: u32 = 6;
const TAG_LARGEST_KEY: u32 = 7;
const TAG_SMALLEST_SEQ: u32 = 8;
const TAG_LARGEST_SEQ: u32 = 9;
const TAG_NUM_DATA_BLOCKS: u32 = 10;
const TAG_EARLIEST_EXPIRY: u32 = 11;

fn put_record(dst: &mut Vec<u8>, tag: u32, payload: &[u8]) {
    put_varint32(dst, tag);
    put_varint32(dst, payload.len() as u32);
    dst.extend_from_slice(payload);
}

fn put_u64_record(dst: &mut Vec<u8>, tag: u32, v: u64) {
    let mut payload = Vec::with_capacity(10);
    put_varint64(&mut payload, v);
    put_record(dst, tag, &payload);
}

impl TableProperties {
    /// The properties block contents.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.smallest_key.len() + self.largest_key.len());
        put_u64_record(&mut out, TAG_NUM_ENTRIES, self.num_entries);
        put_u64_record(&mut out, TAG_NUM_DELETIONS, self.num_deletions);
        put_u64_record(&mut out, TAG_NUM_POINTERS, self.num_pointers);
        put_u64_record(&mut out, TAG_RAW_KEY_BYTES, self.raw_key_bytes);
        put_u64_record(&mut out, TAG_RAW_VALUE_BYTES, self.raw_value_bytes);
        put_record(&mut out, TAG_SMALLEST_KEY, &self.smallest_key);
        put_record(&mut out, TAG_LARGEST_KEY, &self.largest_key);
        put_u64_record(&mut out, TAG_SMALLEST_SEQ, self.smallest_seq);
        put_u64_record(&mut out, TAG_LARGEST_SEQ, self.largest_seq);
        put_u64_record(&mut out, TAG_NUM_DATA_BLOCKS, self.num_data_blocks);
        // Only when there is one: tables without expiring entries stay byte for byte what
        // earlier builds wrote.
        if self.earliest_expiry != 0 {
            put_u64_record(&mut out, TAG_EARLIEST_EXPIRY, self.earliest_expiry);
        }
        out
    }

    /// Parses a properties block; `file_size` is left at 0 for the caller to fill.
    pub fn decode(src: &[u8]) -> Result<TableProperties, MalformedBlock> {
        let bad = |what: &str| MalformedBlock(format!("properties block: {what}"));
        let mut p = TableProperties::default();
        let mut pos = 0;
        while pos < src.len() {
            let tag = get_varint32(src, &mut pos).ok_or_else(|| bad("bad tag"))?;
            let len = get_varint32(src, &mut pos).ok_or_else(|| bad("bad length"))? as usize;
            let payload = pos
                .checked_add(len)
                .and_then(|end| src.get(pos..end))
                .ok_or_else(|| bad("record runs past the block"))?;
            pos += len;
            let int = || {
                let mut at = 0;
                get_varint64(payload, &mut at)
                    .filter(|_| at == payload.len())
                    .ok_or_else(|| bad(&format!("tag {tag} is not a varint")))
            };
            match tag {
                TAG_NUM_ENTRIES => p.num_entries = int()?,
                TAG_NUM_DELETIONS => p.num_deletions = int()?,
                TAG_NUM_POINTERS => p.num_pointers = int()?,
                TAG_RAW_KEY_BYTES => p.raw_key_bytes = int()?,
                TAG_RAW_VALUE_BYTES => p.raw_value_bytes = int()?,
                TAG_SMALLEST_KEY => p.smallest_key = payload.to_vec(),
                TAG_LARGEST_KEY => p.largest_key = payload.to_vec(),
                TAG_SMALLEST_SEQ => p.smallest_seq = int()?,
                TAG_LARGEST_SEQ => p.largest_seq = int()?,
                TAG_NUM_DATA_BLOCKS => p.num_data_blocks = int()?,
                TAG_EARLIEST_EXPIRY => p.earliest_expiry = int()?,
                _ => {} // A property from a newer writer.
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_skips_unknown_tags() {
        let p = TableProperties {
            file_size: 0,
            num_entries: 10,
            num_deletions: 2,
            num_pointers: 3,
            raw_key_bytes: 170,
            raw_value_bytes: 1 << 40,
            smallest_key: b"a\0\0\0\0\0\0\0\0".to_vec(),
            largest_key: b"z\x01\0\0\0\0\0\0\0".to_vec(),
            smallest_seq: 1,
            largest_seq: u64::MAX >> 8,
            num_data_blocks: 4,
            earliest_expiry: 1_700_000_000_123,
        };
        let mut bytes = p.encode();
        put_record(&mut bytes, 999, b"future");
        assert_eq!(TableProperties::decode(&bytes), Ok(p));
    }

    #[test]
    fn truncated_properties_are_rejected() {
        let bytes = TableProperties::default().encode();
        // The last record is the 3-byte num_data_blocks; cutting into it must fail.
        assert!(TableProperties::decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(TableProperties::decode(&[1, 5, 0]).is_err());
        assert!(TableProperties::decode(&[1, 1, 0x80]).is_err());
    }
}
