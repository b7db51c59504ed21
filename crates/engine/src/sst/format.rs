//! Block handles, the per-block trailer, and the footer: the framing that lets a reader find
//! and verify every block of a table.
//!
//! # Block trailer
//!
//! Every block (data, index, filter, properties) is stored as
//!
//! ```text
//! contents: [u8; n] | block_type: u8 | masked_crc32c: u32 LE
//! ```
//!
//! `block_type` names the compression of `contents` (0 none, 1 LZ4, 2 Zstandard; see
//! [`super::compression`]). The checksum covers the stored (compressed) `contents` and
//! `block_type`, and is masked (rotated and offset, as
//! LevelDB does) so that a CRC computed over data that itself embeds CRCs stays well spread.
//!
//! # Block handle
//!
//! `offset: varint64 | size: varint64`, where `size` is the length of the stored `contents`
//! (compressed, without the 5-byte trailer). Handles are the values of index-block entries.
//!
//! # Footer
//!
//! The last [`FOOTER_LEN`] = 64 bytes of the file, fixed width so a reader can find it
//! from the file length alone:
//!
//! ```text
//! index_offset: u64 LE | index_size: u64 LE
//! filter_offset: u64 LE | filter_size: u64 LE
//! properties_offset: u64 LE | properties_size: u64 LE
//! format_version: u32 LE | footer_crc: u32 LE (masked crc32c of the 52 bytes before it)
//! magic: u64 LE = TABLE_MAGIC
//! ```
//!
//! The footer carries its own checksum because its handles are trusted to size reads: a
//! flipped bit there must be reported as corruption, not turned into a huge allocation.
//!
//! The grammar of every file in a database directory is in `docs/format.md`.

use super::coding::{get_fixed32, get_fixed64, get_varint64, put_varint64};
use crate::checksum;

/// Identifies a halflife table file ("hlfsst01" read as little-endian bytes).
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"hlfsst01");

/// Bumped on any incompatible change of the layout documented here.
pub const FORMAT_VERSION: u32 = 1;

/// Bytes after each block's contents: type byte + checksum.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Size of the fixed footer at the end of every table file.
pub const FOOTER_LEN: usize = 64;

pub use super::compression::BLOCK_TYPE_UNCOMPRESSED;

/// The masked crc32c of a block's contents followed by its type byte.
pub fn block_checksum(contents: &[u8], block_type: u8) -> u32 {
    checksum::mask(checksum::extend(checksum::crc(contents), &[block_type]))
}

/// Where a block lives in the file: `size` counts the contents, not the trailer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    pub fn new(offset: u64, size: u64) -> Self {
        BlockHandle { offset, size }
    }

    /// Appends the varint encoding (the form stored in index entries).
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes a handle that must fill `src` exactly.
    pub fn decode(src: &[u8]) -> Option<BlockHandle> {
        let mut pos = 0;
        let offset = get_varint64(src, &mut pos)?;
        let size = get_varint64(src, &mut pos)?;
        (pos == src.len()).then_some(BlockHandle { offset, size })
    }

    /// First byte after this block's trailer, or `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// The decoded footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    pub index: BlockHandle,
    pub filter: BlockHandle,
    pub properties: BlockHandle,
}

/// Why a footer could not be decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum FooterError {
    BadMagic(u64),
    BadChecksum,
    UnsupportedVersion(u32),
}

impl std::fmt::Display for FooterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FooterError::BadMagic(m) => write!(
                f,
                "bad magic number {m:#018x} in the footer (expected {TABLE_MAGIC:#018x}): not a halflife table"
            ),
            FooterError::BadChecksum => write!(f, "footer checksum mismatch"),
            FooterError::UnsupportedVersion(v) => write!(
                f,
                "unsupported table format version {v} (this build reads {FORMAT_VERSION})"
            ),
        }
    }
}

impl Footer {
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = [0u8; FOOTER_LEN];
        let fields = [
            self.index.offset,
            self.index.size,
            self.filter.offset,
            self.filter.size,
            self.properties.offset,
            self.properties.size,
        ];
        for (i, v) in fields.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        out[48..52].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        let crc = checksum::masked(&out[..52]);
        out[52..56].copy_from_slice(&crc.to_le_bytes());
        out[56..64].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        out
    }

    /// Decodes the last [`FOOTER_LEN`] bytes of a file. The magic is checked first so that a
    /// file of another kind is reported as such rather than as a checksum failure.
    pub fn decode(src: &[u8; FOOTER_LEN]) -> Result<Footer, FooterError> {
        let field = |i: usize| get_fixed64(src, i * 8).unwrap_or(0);
        let magic = field(7);
        if magic != TABLE_MAGIC {
            return Err(FooterError::BadMagic(magic));
        }
        let stored = get_fixed32(src, 52).unwrap_or(0);
        if checksum::unmask(stored) != checksum::crc(&src[..52]) {
            return Err(FooterError::BadChecksum);
        }
        let version = get_fixed32(src, 48).unwrap_or(0);
        if version != FORMAT_VERSION {
            return Err(FooterError::UnsupportedVersion(version));
        }
        Ok(Footer {
            index: BlockHandle::new(field(0), field(1)),
            filter: BlockHandle::new(field(2), field(3)),
            properties: BlockHandle::new(field(4), field(5)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_round_trips_and_rejects_trailing_bytes() {
        let h = BlockHandle::new(1 << 40, 4096);
        let mut buf = Vec::new();
        h.encode_to(&mut buf);
        assert_eq!(BlockHandle::decode(&buf), Some(h));
        buf.push(0);
        assert_eq!(BlockHandle::decode(&buf), None);
    }

    #[test]
    fn footer_round_trips_and_detects_every_flipped_byte() {
        let f = Footer {
            index: BlockHandle::new(100, 20),
            filter: BlockHandle::new(0, 10),
            properties: BlockHandle::new(125, 40),
        };
        let bytes = f.encode();
        assert_eq!(Footer::decode(&bytes), Ok(f));
        for i in 0..FOOTER_LEN {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            assert!(Footer::decode(&bad).is_err(), "flip at {i} went unnoticed");
        }
        let mut other = bytes;
        other[56..].copy_from_slice(b"notatabl");
        assert!(matches!(
            Footer::decode(&other),
            Err(FooterError::BadMagic(_))
        ));
    }
}
