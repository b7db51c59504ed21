//! Key-value separation's format and I/O: values at or above `min_blob_size` live in
//! append-only value files ([`file`]) and the tree stores a [`ValuePointer`] ([`pointer`]);
//! a GC job's index map ([`index_map`]) redirects pointers into the files it collected;
//! the value log as the write-ahead log of separated values ([`value_wal`]); and the
//! batched reads of many values at once ([`batch_read`]).
//!
//! Nothing here decides anything: which file a value goes to, when a file is collected and
//! how its values move are the GC module's ([`crate::gc`]), above the version that holds
//! these files. The value-log WAL is told each value's placement class by its caller.

pub mod batch_read;
pub mod file;
pub mod index_map;
pub mod pointer;
pub mod value_wal;

pub use file::{BlobFile, FileExpiry, FileLifetime, ValueFileReader, ValueFileWriter};
pub use index_map::{IndexMap, IndexMapBuilder};
pub use pointer::ValuePointer;
