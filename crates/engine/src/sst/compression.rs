//! Block compression: the codecs behind the `block_type` byte of the block trailer
//! ([`super::format`]).
//!
//! ```text
//! block_type 0: contents as is
//! block_type 1: varint32 uncompressed_len | LZ4 block (lz4_flex, no frame)
//! block_type 2: varint32 uncompressed_len | Zstandard frame
//! ```
//!
//! The length prefix (as RocksDB's format_version >= 2 stores it) lets the reader allocate
//! the output once and check that the codec produced exactly that many bytes. As RocksDB
//! does, a block is stored uncompressed when compression does not save at least 1/8 of it:
//! decompressing costs on every cache miss, and a small gain does not pay for it.

use crate::error::Error;
use integer_encoding::VarInt;

/// How table data blocks are compressed (RocksDB's `CompressionType`, for the codecs it
/// shares with halflife). The codec is named in each block's trailer, so tables written
/// with different settings, or levels with different codecs, are read alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    #[default]
    None,
    /// LZ4 (block format): fast, modest ratio; RocksDB's usual choice for upper levels.
    Lz4,
    /// Zstandard at `level` (1..=22; 3 is libzstd's default, which RocksDB uses too): slower,
    /// better ratio; RocksDB's usual choice for the bottommost level.
    Zstd { level: i32 },
}

impl Compression {
    pub const NAMES: [&'static str; 3] = ["none", "lz4", "zstd"];
    /// Zstandard's level when none is given (libzstd's and RocksDB's default).
    pub const ZSTD_DEFAULT_LEVEL: i32 = 3;

    /// Checks a configured codec (a zstd level is 1 to 22); the error names the option
    /// `name` that set it.
    pub(crate) fn validate(self, name: &'static str) -> Result<(), Error> {
        match self {
            Compression::Zstd { level } if !(1..=22).contains(&level) => Err(
                Error::invalid_option(name, format!("zstd level {level}: 1 to 22")),
            ),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::None => f.write_str("none"),
            Compression::Lz4 => f.write_str("lz4"),
            Compression::Zstd { level } if *level == Self::ZSTD_DEFAULT_LEVEL => {
                f.write_str("zstd")
            }
            Compression::Zstd { level } => write!(f, "zstd:{level}"),
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = Error;
    /// `none`, `lz4`, `zstd` or `zstd:LEVEL`.
    fn from_str(s: &str) -> crate::error::Result<Self> {
        let bad = |detail: String| Error::InvalidOptions {
            name: "compression",
            detail,
        };
        match s.split_once(':') {
            None => match s {
                "none" | "no" => Ok(Compression::None),
                "lz4" => Ok(Compression::Lz4),
                "zstd" => Ok(Compression::Zstd {
                    level: Self::ZSTD_DEFAULT_LEVEL,
                }),
                other => Err(bad(format!(
                    "unknown compression {other:?}; expected none, lz4, zstd or zstd:LEVEL"
                ))),
            },
            Some(("zstd", level)) => {
                let level = level
                    .parse::<i32>()
                    .ok()
                    .filter(|l| (1..=22).contains(l))
                    .ok_or_else(|| bad(format!("zstd level {level:?}: expected 1 to 22")))?;
                Ok(Compression::Zstd { level })
            }
            Some(_) => Err(bad(format!("{s:?}: only zstd takes a level (zstd:LEVEL)"))),
        }
    }
}

/// Block type byte: contents stored as is.
pub const BLOCK_TYPE_UNCOMPRESSED: u8 = 0;
/// Block type byte: LZ4 block with a length prefix.
pub const BLOCK_TYPE_LZ4: u8 = 1;
/// Block type byte: Zstandard frame with a length prefix.
pub const BLOCK_TYPE_ZSTD: u8 = 2;

/// Uncompressed blocks larger than this are refused when reading: a corrupt length prefix
/// must not size a huge allocation (blocks are cut at `block_size`, at most 16 MiB, plus
/// one entry, at most a maximal value).
const MAX_UNCOMPRESSED: u64 = 1 << 30;

/// Compresses `raw` with `c`; returns the block type and the stored bytes, or `None` when
/// the block should be stored as is (no compression asked, or too little gained).
pub fn compress(c: Compression, raw: &[u8]) -> Option<(u8, Vec<u8>)> {
    let (block_type, body) = match c {
        Compression::None => return None,
        Compression::Lz4 => (BLOCK_TYPE_LZ4, lz4_flex::block::compress(raw)),
        Compression::Zstd { level } => (BLOCK_TYPE_ZSTD, zstd::bulk::compress(raw, level).ok()?),
    };
    let mut out = (raw.len() as u32).encode_var_vec();
    out.extend_from_slice(&body);
    (out.len() < raw.len() - raw.len() / 8).then_some((block_type, out))
}

/// The contents of a stored block of `block_type`; the error says what is wrong with it.
pub fn decompress(block_type: u8, stored: Vec<u8>) -> Result<Vec<u8>, String> {
    if block_type == BLOCK_TYPE_UNCOMPRESSED {
        return Ok(stored);
    }
    let (len, n) = u32::decode_var(&stored).ok_or("compressed block has no length prefix")?;
    if u64::from(len) > MAX_UNCOMPRESSED {
        return Err(format!("compressed block claims {len} uncompressed bytes"));
    }
    let body = &stored[n..];
    let out = match block_type {
        BLOCK_TYPE_LZ4 => lz4_flex::block::decompress(body, len as usize)
            .map_err(|e| format!("LZ4 block does not decompress: {e}"))?,
        BLOCK_TYPE_ZSTD => zstd::bulk::decompress(body, len as usize)
            .map_err(|e| format!("Zstandard block does not decompress: {e}"))?,
        other => return Err(format!("unknown block type {other}")),
    };
    if out.len() != len as usize {
        return Err(format!(
            "compressed block decompressed to {} bytes, its prefix says {len}",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressible(n: usize) -> Vec<u8> {
        (0..n).map(|i| b"halflife block "[i % 15]).collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let raw = compressible(4096);
        for c in [
            Compression::Lz4,
            Compression::Zstd { level: 3 },
            Compression::Zstd { level: 19 },
        ] {
            let (t, stored) = compress(c, &raw).expect("compressible");
            assert!(stored.len() < raw.len() / 4, "{c}: {}", stored.len());
            assert_eq!(decompress(t, stored).unwrap(), raw, "{c}");
        }
        assert_eq!(compress(Compression::None, &raw), None);
        assert_eq!(
            decompress(BLOCK_TYPE_UNCOMPRESSED, raw.clone()).unwrap(),
            raw
        );
    }

    #[test]
    fn incompressible_blocks_are_stored_as_is() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let random: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(compress(Compression::Lz4, &random), None);
        assert_eq!(compress(Compression::Zstd { level: 3 }, &random), None);
        assert_eq!(compress(Compression::Lz4, &[]), None);
    }

    #[test]
    fn damaged_blocks_are_errors_not_panics() {
        let raw = compressible(4096);
        for c in [Compression::Lz4, Compression::Zstd { level: 3 }] {
            let (t, stored) = compress(c, &raw).unwrap();
            // Every truncation, and a flipped byte at every position of the body.
            for cut in 0..stored.len() {
                let r = decompress(t, stored[..cut].to_vec());
                assert!(r.is_err() || r.unwrap() == raw, "{c}: cut at {cut}");
            }
            for i in 0..stored.len() {
                let mut bad = stored.clone();
                bad[i] ^= 0x55;
                // Either detected, or (a literal byte changed) a different block of the
                // right length: the block checksum is what catches the latter.
                if let Ok(out) = decompress(t, bad) {
                    assert_eq!(out.len(), raw.len(), "{c}: flip at {i}");
                }
            }
            let mut huge = (u32::MAX).encode_var_vec();
            huge.extend_from_slice(&stored[1..]);
            assert!(decompress(t, huge).unwrap_err().contains("claims"));
        }
        assert!(decompress(9, vec![1, 0])
            .unwrap_err()
            .contains("unknown block type 9"));
    }
}
