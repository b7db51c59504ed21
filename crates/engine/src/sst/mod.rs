//! Sorted tables: the immutable files a memtable flush or a compaction writes.
//!
//! # File layout
//!
//! ```text
//! data block 0 .. data block n-1   entries in internal-key order, ~block_size each
//! filter block                     whole-table Bloom filter over user keys (filter.rs)
//! index block                      one entry per data block: last key -> block handle
//! properties block                 counts, key range, sequence range (properties.rs)
//! footer (64 bytes)                handles of index/filter/properties, version, magic
//! ```
//!
//! Data blocks may be compressed (LZ4 or Zstandard, per level: [`compression`]). Every
//! block is followed by a 5-byte trailer (type byte + masked crc32c) and the footer
//! has its own checksum ([`format`](mod@format)). The layout of a block's contents is in [`block`].
//!
//! Why this shape: a point lookup needs at most the (in-memory) filter and index and one
//! data block; a scan reads data blocks in file order; a reader finds everything from the
//! fixed-size footer, and any flipped bit is caught by a checksum before it is trusted.
//!
//! The index key of a data block is its last internal key, unshortened: the first index
//! entry >= a target names the only block that can hold the target's position. (LevelDB
//! shortens these keys to save index space; with internal keys that would add a subtle
//! ordering corner for little gain at our block sizes.)

pub mod block;
mod builder;
mod coding;
pub mod compression;
pub mod filter;
pub mod format;
pub mod iter;
mod merge;
mod properties;
mod stats;
mod table;
mod table_iter;

pub use builder::{BlockSink, TableBuilder, TableOptions};
pub use iter::{InternalIterator, VecIterator};
pub use merge::MergingIterator;
pub use properties::TableProperties;
pub use stats::{TableStats, TableStatsSnapshot};
pub use table::{DataBlockCache, Table};
pub use table_iter::TableIter;

#[cfg(test)]
pub(crate) mod tests;
