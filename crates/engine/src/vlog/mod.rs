//! Key-value separation: values at or above `min_blob_size` live in append-only value files
//! and the tree stores a [`ValuePointer`]. Garbage collection of value files is a policy
//! behind the [`gc::GcPolicy`] trait (which files) and a job behind [`gc_job::GcJob`] (how
//! their values move). The garbage is accounted here too: counted when pointers are dropped
//! ([`garbage`]), and known by position before that ([`early_garbage`], learned after each
//! flush by [`superseded`]).

pub mod batch_read;
pub mod early_garbage;
pub mod file;
pub mod garbage;
pub mod gc;
pub(crate) mod gc_job;
pub mod index_map;
pub mod placement;
pub mod pointer;
pub mod recent_pointers;
pub(crate) mod superseded;
pub mod value_wal;
pub mod write_history;

pub use file::{BlobFile, FileExpiry, FileLifetime, ValueFileReader, ValueFileWriter};
pub use index_map::{IndexMap, IndexMapBuilder};
pub use pointer::ValuePointer;
