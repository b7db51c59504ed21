//! halflife's embedded key-value store: an LSM-tree with key-value separation whose
//! background decisions are measured, not configured by guesswork.
//!
//! The data path, top-down: [`db`]. A put's group-commit leader first appends each value
//! of at least `min_blob_size` to the value file of its placement class ([`vlog`]; the
//! class from [`gc::placement`]; the value log as the WAL, `Options::wal.value_log_wal`,
//! on by default), then the WAL record carrying a pointer in the value's place ([`wal`]),
//! then inserts into the [`memtable`]; flush writes an [`sst`] table with those pointers,
//! and [`compaction`] merges tables. With the option off (or policy `inline`) the WAL
//! record carries the value and flush moves large values into value files. A get looks in
//! the memtables, then the levels, and follows a pointer into [`vlog`]. Value files are
//! collected by [`gc`], above the [`version`] that holds them. Every file operation goes
//! through [`io::Storage`] with a cause, so amplification is counted, not estimated.

pub mod backup;
pub mod batch;
pub mod cache;
pub mod check;
pub mod checksum;
pub mod compaction;
pub mod db;
pub use db::checkpoint;
pub mod error;
pub mod expiry;
pub mod filename;
pub mod gc;
pub mod internal_key;
pub mod io;
pub mod lifetime;
pub mod memtable;
pub mod options;
pub mod rate;
pub mod repair;
pub mod sst;
pub mod stats;
pub mod version;
pub mod vlog;
pub mod wal;
pub mod warming;

pub use batch::WriteBatch;
pub use db::{prefix_bounds, Cursor, DbIter, Direction, Snapshot, DB};
pub use error::{Error, Result};
pub use options::AutoShapeConfig;
pub use options::{
    CacheOptions, GcPolicyConfig, GcTrigger, LifetimeMode, LifetimeOptions, LifetimeOracle,
    Options, ReadOptions, TableOptions, TreeOptions, ValueLogOptions, WalOptions, WalRecoveryMode,
    WriteOptions,
};
pub use options::{CompactionStyle, Compression};
pub use stats::DbStats;
pub use warming::{CacheWarmingConfig, LearnedParams};

/// The README's example, compiled and run as a doctest so that it cannot drift from the API.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
