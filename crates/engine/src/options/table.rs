//! How table files are built ([`Options::table`](super::Options)): block size, Bloom
//! filters and compression (RocksDB's `BlockBasedTableOptions` and the compression of its
//! `ColumnFamilyOptions`).

use crate::error::{Error, Result};
use crate::sst::compression::Compression;

/// Blocks, filters and compression of table files.
#[derive(Clone, Debug, PartialEq)]
pub struct TableOptions {
    /// Bytes of keys and values a data block holds before it is cut. 4 KiB, RocksDB's
    /// `block_size`: a point read fetches and decompresses one block.
    pub block_size: usize,
    /// Bloom filter bits per key. 10, RocksDB's usual setting: about a 1% false-positive
    /// rate, so that a point read skips nearly every table without its key.
    pub bloom_bits_per_key: u32,
    /// Compression of table data blocks at every level not named by
    /// `compression_per_level` (RocksDB's `compression`). None by default, so that a
    /// block read from the device is used as it is; `lz4` and `zstd` are available.
    pub compression: Compression,
    /// Compression per level, L0 first (RocksDB's `compression_per_level`): levels past the
    /// end of the list take its last entry; empty, the default, means `compression`
    /// everywhere. Index, filter and properties blocks are never compressed (they are read
    /// once per open table and kept in memory).
    pub compression_per_level: Vec<Compression>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            compression_per_level: Vec::new(),
        }
    }
}

impl TableOptions {
    /// The compression of tables written to `level` (see `compression_per_level`).
    pub fn compression_for_level(&self, level: usize) -> Compression {
        match self.compression_per_level.as_slice() {
            [] => self.compression,
            list => list[level.min(list.len() - 1)],
        }
    }

    /// Checks the group; the error names the first bad field.
    pub fn validate(&self) -> Result<()> {
        if !(256..=(16 << 20)).contains(&self.block_size) {
            return Err(Error::invalid_option(
                "block_size",
                "must be between 256 B and 16 MiB",
            ));
        }
        if self.bloom_bits_per_key > 64 {
            return Err(Error::invalid_option("bloom_bits_per_key", "at most 64"));
        }
        std::iter::once(&self.compression)
            .chain(&self.compression_per_level)
            .try_for_each(|c| c.validate("compression"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_level_compression_and_its_checks() {
        let t = TableOptions {
            compression_per_level: vec![Compression::None, Compression::Lz4],
            ..Default::default()
        };
        assert_eq!(t.compression_for_level(0), Compression::None);
        assert_eq!(t.compression_for_level(6), Compression::Lz4);
        assert_eq!(
            TableOptions::default().compression_for_level(3),
            Compression::None
        );
        let bad = TableOptions {
            compression_per_level: vec![Compression::Zstd { level: 23 }],
            ..Default::default()
        };
        assert!(matches!(
            bad.validate(),
            Err(Error::InvalidOptions {
                name: "compression",
                ..
            })
        ));
    }
}
