//! Engine options, validated at open. Defaults follow RocksDB where the papers do not say
//! otherwise (64 MiB memtable, growth factor 10, L0 trigger 4, 10 Bloom bits per key).
//!
//! [`Options`] holds the database-wide settings and one group per concern, each with its
//! own `Default` and validation (RocksDB splits the same settings into `DBOptions`,
//! `ColumnFamilyOptions` and `BlockBasedTableOptions`):
//!
//! | group | settings |
//! | --- | --- |
//! | [`TreeOptions`] (`tree.rs`) | memtables, L0 triggers and write stalls, levels, compaction style, `growth_factor = auto` |
//! | [`TableOptions`] (`table.rs`) | blocks, Bloom filters, compression of tables |
//! | [`WalOptions`] (`wal.rs`) | logging, syncing, recovery, archiving, the value log as the WAL |
//! | [`ValueLogOptions`] (`vlog.rs`) | value separation, value files, the GC policy and the lifetime policies |
//! | [`CacheOptions`] (`cache.rs`) | the block cache and cache warming |
//!
//! A field keeps its name inside its group (`opts.tree.memtable_size`), and errors name
//! it so (`memtable_size`), as the command line's flags map them. Nothing here is runtime
//! state: what the engine derives while running is created by `DB::open`.

use crate::error::{Error, Result};
use crate::io::Storage;
use std::fmt;
use std::sync::Arc;

pub mod cache;
pub mod table;
pub mod tree;
pub mod vlog;
pub mod wal;
pub mod warming;

pub use cache::CacheOptions;
pub use table::TableOptions;
pub use tree::{run_trigger, AutoShapeConfig, CompactionStyle, TreeOptions, DEFAULT_A, DEFAULT_R};
pub use vlog::{
    GcPolicyConfig, GcTrigger, LifetimeMode, LifetimeOptions, LifetimeOracle, ValueLogOptions,
};
pub use wal::WalOptions;
pub use warming::CacheWarmingConfig;

/// Owned by the layers that use them (a table or value file names its codec, a log reader
/// takes the recovery mode), re-exported here as part of the options.
pub use crate::sst::compression::Compression;
pub use crate::wal::WalRecoveryMode;

/// Options fixed for the lifetime of an open database.
#[derive(Clone)]
pub struct Options {
    /// Create the directory and an empty database when there is none. On by default.
    pub create_if_missing: bool,
    /// Fail the open when a database exists. Off by default.
    pub error_if_exists: bool,
    /// The device; `None`, the default, means plain files ([`crate::io::FileStorage`]).
    pub storage: Option<Arc<dyn Storage>>,
    /// Longest key a write accepts. 64 KiB: the limit bounds what one key costs in every
    /// structure that holds keys whole (memtables, index blocks, the write history).
    pub max_key_size: usize,
    /// Largest value a write accepts. 256 MiB; at most 4 GiB, as value records store
    /// their length in 32 bits.
    pub max_value_size: usize,
    /// Background compaction threads (flush has its own thread). 1, as RocksDB's default
    /// of two background jobs (one flush, one compaction).
    pub background_compactions: usize,
    /// Value-file GC threads, each running one job at a time on files no other job holds.
    /// The first runs at the priority [`Self::lower_background_priority`] gives GC; the
    /// others always at the lowest, so that they take only what flush, compaction and the
    /// first leave of the cores. 1 by default: a second on this project's 2-core machine
    /// measured in docs/results/2026-11-28-gc-pace.md.
    pub background_gc: usize,
    /// Run compaction, value-file GC and the superseded finder at the lowest CPU priority
    /// (nice 19, Linux only), as RocksDB's `Env::LowerThreadPoolCPUPriority` does for its
    /// compaction pool. On by default: on a machine with fewer cores than busy threads, a
    /// client thread woken from a write or read then takes a core from them at once
    /// instead of waiting for a time slice. The flush keeps normal priority: writers wait
    /// for it. So do GC and the superseded finder under a space-amplification target (GC
    /// back-pressure).
    pub lower_background_priority: bool,
    /// Memtables, L0 triggers, levels and the compaction style.
    pub tree: TreeOptions,
    /// Blocks, Bloom filters and compression of table files.
    pub table: TableOptions,
    /// The write-ahead log.
    pub wal: WalOptions,
    /// Value separation, value files and their GC.
    pub vlog: ValueLogOptions,
    /// The block cache and cache warming.
    pub cache: CacheOptions,
    /// The wall clock expiry times are compared with ([`crate::expiry`]): the system's by
    /// default; tests inject a [`crate::expiry::ManualClock`].
    pub clock: Arc<dyn crate::expiry::Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            storage: None,
            max_key_size: 64 << 10,
            max_value_size: 256 << 20,
            background_compactions: 1,
            background_gc: 1,
            lower_background_priority: true,
            tree: TreeOptions::default(),
            table: TableOptions::default(),
            wal: WalOptions::default(),
            vlog: ValueLogOptions::default(),
            cache: CacheOptions::default(),
            clock: Arc::new(crate::expiry::SystemClock),
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("create_if_missing", &self.create_if_missing)
            .field("error_if_exists", &self.error_if_exists)
            .field("max_key_size", &self.max_key_size)
            .field("max_value_size", &self.max_value_size)
            .field("background_compactions", &self.background_compactions)
            .field("background_gc", &self.background_gc)
            .field("lower_background_priority", &self.lower_background_priority)
            .field("tree", &self.tree)
            .field("table", &self.table)
            .field("wal", &self.wal)
            .field("vlog", &self.vlog)
            .field("cache", &self.cache)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// The most value-file GC threads an engine starts (a thread each).
pub const MAX_BACKGROUND_GC: usize = 16;

impl Options {
    /// Whether large values are logged in value files by their writes
    /// ([`WalOptions::value_log_wal`], the WAL on, a policy that separates values).
    pub fn logs_values(&self) -> bool {
        self.wal.value_log_wal && self.wal.use_wal && self.vlog.gc.separates_values()
    }

    /// Checks every option, the database-wide ones and then each group; the error names
    /// the first bad one.
    pub fn validate(&self) -> Result<()> {
        if self.background_compactions == 0 {
            return Err(Error::invalid_option(
                "background_compactions",
                "must be at least 1",
            ));
        }
        if self.background_gc == 0 || self.background_gc > MAX_BACKGROUND_GC {
            return Err(Error::invalid_option(
                "background_gc",
                format!("must be between 1 and {MAX_BACKGROUND_GC}"),
            ));
        }
        if self.max_key_size == 0 || self.max_key_size > (1 << 30) {
            return Err(Error::invalid_option(
                "max_key_size",
                "must be in 1..=1 GiB",
            ));
        }
        if self.max_value_size > u32::MAX as usize {
            return Err(Error::invalid_option(
                "max_value_size",
                "must fit in 32 bits",
            ));
        }
        self.cache.validate()?;
        self.tree.validate()?;
        self.table.validate()?;
        self.wal.validate()?;
        self.vlog.validate()
    }
}

/// Per-write options.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// fsync the WAL before the write is acknowledged.
    pub sync: bool,
}

/// The first window of an auto read-ahead: four 4 KiB values. A scan that stops early has
/// read up to its last window beyond what it returns, and windows double, so a larger
/// start costs reads: at 64 KiB a scan of 55 records read 110 values, and where values lie
/// in key order (a separate WAL) scans ran at 0.65x of no read-ahead
/// (docs/results/2026-11-28-scans.md).
pub const INITIAL_READAHEAD: usize = 16 << 10;
/// The default largest window, RocksDB's `max_auto_readahead_size`.
pub const DEFAULT_READAHEAD: usize = 256 << 10;

/// Per-scan options: how far a scan reads separated values ahead of its caller.
///
/// A scan returns keys in the tree's order while their separated values lie wherever
/// their writes put them; read as the caller reaches them, each is a random read waited
/// for alone. With read-ahead the scan takes the next entries of the tree up to a window
/// of bytes and reads their values together (sorted by file and offset, neighbours merged,
/// all of them requested from the device before the first is waited for:
/// `vlog/batch_read.rs`). What the scan returns does not change, only when
/// its values are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// The largest window, in bytes of keys and values (a separated value counts its
    /// record's size); 0 reads each value when the caller reaches it, as a point read.
    pub readahead_size: usize,
    /// Start at [`INITIAL_READAHEAD`] and double the window at each refill up to
    /// `readahead_size` (RocksDB's auto read-ahead), so that a short scan reads few values
    /// it does not return; `false`: every window is `readahead_size`.
    pub auto_readahead: bool,
    /// Entries the scan may pass over in all (tombstones, expired entries, versions
    /// hidden by newer ones) before it ends there; 0: any number. RocksDB's
    /// `max_skippable_internal_keys` bounds each step instead; a bound on the whole scan
    /// suits its callers here, which want what a bounded amount of work finds (a sample of
    /// keys) rather than every entry. [`crate::DbIter::cut_short`] tells such an end from
    /// the range's.
    pub max_skipped: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            readahead_size: DEFAULT_READAHEAD,
            auto_readahead: true,
            max_skipped: 0,
        }
    }
}

impl ReadOptions {
    /// Each value read when the caller reaches it.
    pub fn without_readahead() -> Self {
        ReadOptions {
            readahead_size: 0,
            auto_readahead: false,
            max_skipped: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults of every field, as they were while `Options` was one flat struct: the
    /// grouping changed where they live, not what they are.
    #[test]
    fn defaults_are_unchanged() {
        let o = Options::default();
        assert!(o.create_if_missing);
        assert!(!o.error_if_exists);
        assert!(o.storage.is_none());
        assert_eq!(o.max_key_size, 64 << 10);
        assert_eq!(o.max_value_size, 256 << 20);
        assert_eq!(o.background_compactions, 1);
        assert!(o.lower_background_priority);

        let t = &o.tree;
        assert_eq!(t.memtable_size, 64 << 20);
        assert_eq!(t.max_immutable_memtables, 1);
        assert_eq!(t.l0_compaction_trigger, 4);
        assert_eq!(t.l0_stop_writes_trigger, 36);
        assert_eq!(t.l0_slowdown_writes_trigger, 20);
        assert_eq!(t.delayed_write_rate, 16 << 20);
        assert_eq!(t.growth_factor, 10.0);
        assert_eq!(t.num_levels, 7);
        assert_eq!(t.level1_max_bytes, 256 << 20);
        assert!(t.dynamic_level_bytes);
        assert_eq!(t.target_file_size, 64 << 20);
        assert_eq!(t.compaction_style, CompactionStyle::Auto);
        assert_eq!(t.auto_shape, None);

        let b = &o.table;
        assert_eq!(b.block_size, 4096);
        assert_eq!(b.bloom_bits_per_key, 10);
        assert_eq!(b.compression, Compression::None);
        assert!(b.compression_per_level.is_empty());

        let w = &o.wal;
        assert!(!w.sync_writes);
        assert!(w.use_wal);
        assert_eq!(w.wal_recovery_mode, WalRecoveryMode::default());
        assert_eq!(w.wal_ttl_seconds, 0);
        assert_eq!(w.wal_size_limit, 0);
        assert!(w.value_log_wal);

        let v = &o.vlog;
        assert_eq!(v.min_blob_size, 512);
        assert_eq!(v.blob_file_size, 256 << 20);
        assert_eq!(v.value_compression, Compression::None);
        assert_eq!(
            v.gc,
            GcPolicyConfig::Lifetime {
                mode: LifetimeMode::Learned
            }
        );
        assert!(v.lifetime_oracle.is_none());
        let l = &v.lifetime;
        assert_eq!(l.thresholds, crate::lifetime::ThresholdParams::default());
        assert_eq!(
            l.dataset_capacity,
            crate::lifetime::DEFAULT_DATASET_CAPACITY
        );
        assert_eq!(l.gbm, crate::lifetime::GbmParams::default());
        assert!(!l.value_size_feature);
        assert_eq!(l.max_gc_batch_bytes, 1 << 30);
        assert_eq!(l.trigger, GcTrigger::SpaceAmp { target: 1.5 });
        assert_eq!(l.write_history_slots, 0);
        assert_eq!(l.recent_pointer_bytes, 0);

        let c = &o.cache;
        assert_eq!(c.block_cache_capacity, 64 << 20);
        assert_eq!(c.cache_warming, CacheWarmingConfig::None);
        assert!(!c.warming_accounting);

        o.validate().unwrap();
    }

    #[test]
    fn each_group_is_validated_and_names_the_field() {
        let name_of = |o: Options| match o.validate() {
            Err(Error::InvalidOptions { name, .. }) => name,
            other => panic!("{other:?}"),
        };
        let o = Options {
            max_key_size: 0,
            ..Default::default()
        };
        assert_eq!(name_of(o), "max_key_size");
        let o = Options {
            tree: TreeOptions {
                memtable_size: 0,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(name_of(o), "memtable_size");
        let o = Options {
            table: TableOptions {
                block_size: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(name_of(o), "block_size");
        let o = Options {
            wal: WalOptions {
                use_wal: false,
                wal_ttl_seconds: 60,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(name_of(o), "wal_ttl_seconds");
        let o = Options {
            vlog: ValueLogOptions {
                value_compression: Compression::Zstd { level: 0 },
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(name_of(o), "value_compression");
        let o = Options {
            cache: CacheOptions {
                cache_warming: CacheWarmingConfig::Learned(warming::LearnedParams {
                    slot_reads: 0,
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(name_of(o), "cache_warming.learned");
    }

    #[test]
    fn values_are_logged_only_with_the_wal_and_separation() {
        assert!(Options::default().logs_values());
        let inline = Options {
            vlog: ValueLogOptions {
                gc: GcPolicyConfig::Inline,
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(!inline.logs_values());
        let no_wal = Options {
            wal: WalOptions {
                use_wal: false,
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(!no_wal.logs_values());
    }
}
