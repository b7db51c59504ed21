//! halflife's embedded key-value store: an LSM-tree with key-value separation whose
//! background decisions are measured, not configured by guesswork.
//!
//! The data path, top-down: [`db`] (put -> [`wal`] -> [`memtable`] -> flush -> [`sst`] ->
//! [`compaction`]; get -> memtable -> levels -> [`vlog`]). Every file operation goes through
//! [`io::Storage`] with a cause, so amplification is counted, not estimated.

pub mod batch;
pub mod cache;
pub mod check;
pub mod compaction;
pub mod db;
pub mod error;
pub mod io;
pub mod lifetime;
pub mod memtable;
pub mod options;
pub mod repair;
pub mod sst;
pub mod stats;
pub mod types;
pub mod version;
pub mod vlog;
pub mod wal;
pub mod warming;

pub use batch::WriteBatch;
pub use db::{DbIter, Snapshot, DB};
pub use error::{Error, Result};
pub use options::{CompactionStyle, Compression};
pub use options::{
    GcPolicyConfig, GcTrigger, LifetimeMode, LifetimeOptions, LifetimeOracle, Options,
    WalRecoveryMode, WriteOptions,
};
pub use stats::DbStats;
pub use version::shape::AutoShape;
pub use warming::{CacheWarmingConfig, LearnedParams};

/// The README's example, compiled and run as a doctest so that it cannot drift from the API.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
