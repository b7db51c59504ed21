//! halflife's embedded key-value store: an LSM-tree with key-value separation whose
//! background decisions are measured, not configured by guesswork.
//!
//! The data path, top-down: [`db`] (put -> [`wal`] -> [`memtable`] -> flush -> [`sst`] ->
//! [`compaction`]; get -> memtable -> levels -> [`vlog`]). Every file operation goes through
//! [`io::Storage`] with a cause, so amplification is counted, not estimated.

pub mod cache;
pub mod error;
pub mod io;
pub mod sst;
pub mod types;

pub use error::{Error, Result};
