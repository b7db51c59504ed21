//! Engine options, validated at open. Defaults follow RocksDB where the papers do not say
//! otherwise (64 MiB memtable, growth factor 10, L0 trigger 4, 10 Bloom bits per key).

use crate::error::{Error, Result};
use crate::io::Storage;
use crate::lifetime::{GbmParams, ThresholdParams};
/// Owned by the layers that use them (a table or value file names its codec, a log reader
/// takes the recovery mode), re-exported here as part of the options.
pub use crate::sst::compression::Compression;
use crate::types::SeqNo;
pub use crate::wal::WalRecoveryMode;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

pub mod shape;
pub mod warming;

pub use shape::AutoShapeConfig;
pub use warming::CacheWarmingConfig;

/// Which value-file garbage-collection policy runs (see [`crate::vlog::gc`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum GcPolicyConfig {
    /// No key-value separation: values stay in the tree ("RocksDB-std" of paper 000).
    Inline,
    /// RocksDB's integrated BlobDB: compaction relocates values that live in the oldest
    /// `age_cutoff` fraction of value files; when the oldest files' garbage ratio reaches
    /// `force_threshold`, the table files pointing into them are compacted.
    BlobDb {
        age_cutoff: f64,
        force_threshold: f64,
    },
    /// Titan: a value file whose garbage ratio reaches `garbage_ratio` is collected; valid
    /// values (checked by a tree lookup) are rewritten and their new pointers written back
    /// through the write path.
    Titan { garbage_ratio: f64 },
    /// TerarkDB: garbage-ratio-triggered GC like Titan, but valid values are found again
    /// through value index maps instead of a pointer write-back.
    Terark { garbage_ratio: f64 },
    /// Lifetime-aware GC (paper 000, DumpKV): value files with a lifetime class and a TTL,
    /// collected when the TTL elapses, valid values placed by `mode`, index maps.
    Lifetime { mode: LifetimeMode },
}

/// How the lifetime policy places the valid values GC finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LifetimeMode {
    /// Learned from the workload: under the space-amplification trigger (the default) by
    /// each key's own write history (no model is trained); under the TTL trigger by
    /// paper 000's online-trained GBM classifier (DumpKV). `DbStats::placement` names which.
    Learned,
    /// Every valid value to the long class (the paper's ablation, sec. 5.6).
    NoModel,
    /// By the true next write of the key, from [`Options::lifetime_oracle`]: the lower
    /// bound the model aims at.
    Oracle,
    /// By the key's true mean write interval over the whole workload
    /// ([`LifetimeOracle::mean_interval`]), not its next write: the bound of any predictor
    /// that learns a key's write rate from its history, as `lifetime` does. Under the TTL
    /// trigger it places like `oracle` with the mean interval as the next write.
    RateOracle,
}

impl LifetimeMode {
    /// Whether the policy needs [`Options::lifetime_oracle`].
    pub fn needs_oracle(self) -> bool {
        matches!(self, LifetimeMode::Oracle | LifetimeMode::RateOracle)
    }
}

impl GcPolicyConfig {
    pub const NAMES: [&'static str; 8] = [
        "inline",
        "blobdb",
        "titan",
        "terark",
        "lifetime",
        "lifetime-nomodel",
        "oracle",
        "rate-oracle",
    ];

    pub fn name(&self) -> &'static str {
        match self {
            GcPolicyConfig::Inline => "inline",
            GcPolicyConfig::BlobDb { .. } => "blobdb",
            GcPolicyConfig::Titan { .. } => "titan",
            GcPolicyConfig::Terark { .. } => "terark",
            GcPolicyConfig::Lifetime { mode } => match mode {
                LifetimeMode::Learned => "lifetime",
                LifetimeMode::NoModel => "lifetime-nomodel",
                LifetimeMode::Oracle => "oracle",
                LifetimeMode::RateOracle => "rate-oracle",
            },
        }
    }

    /// Whether GC redirects reads through value index maps instead of writing pointers back.
    pub fn uses_index_maps(&self) -> bool {
        matches!(
            self,
            GcPolicyConfig::Terark { .. } | GcPolicyConfig::Lifetime { .. }
        )
    }

    pub fn lifetime_mode(&self) -> Option<LifetimeMode> {
        match self {
            GcPolicyConfig::Lifetime { mode } => Some(*mode),
            _ => None,
        }
    }

    pub fn blobdb() -> Self {
        GcPolicyConfig::BlobDb {
            age_cutoff: 0.8,
            force_threshold: 0.2,
        }
    }

    pub fn titan() -> Self {
        GcPolicyConfig::Titan { garbage_ratio: 0.2 }
    }

    /// Whether values at or above `min_blob_size` leave the tree.
    pub fn separates_values(&self) -> bool {
        !matches!(self, GcPolicyConfig::Inline)
    }

    fn validate(&self) -> Result<()> {
        let ratio = |name: &'static str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(Error::InvalidOptions {
                    name,
                    detail: format!("{v} is not a fraction in [0, 1]"),
                })
            }
        };
        match *self {
            GcPolicyConfig::Inline => Ok(()),
            GcPolicyConfig::BlobDb {
                age_cutoff,
                force_threshold,
            } => {
                ratio("gc.age_cutoff", age_cutoff)?;
                ratio("gc.force_threshold", force_threshold)
            }
            GcPolicyConfig::Lifetime { .. } => Ok(()),
            GcPolicyConfig::Titan { garbage_ratio } | GcPolicyConfig::Terark { garbage_ratio } => {
                ratio("gc.garbage_ratio", garbage_ratio)?;
                if garbage_ratio == 0.0 {
                    return Err(Error::InvalidOptions {
                        name: "gc.garbage_ratio",
                        detail: "0 would collect files with no garbage forever".into(),
                    });
                }
                Ok(())
            }
        }
    }
}

/// The learned lifetime policy: values placed by predicted death, GC under a
/// space-amplification target ([`GcTrigger::SpaceAmp`]).
impl Default for GcPolicyConfig {
    fn default() -> Self {
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::Learned,
        }
    }
}

impl fmt::Display for GcPolicyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GcPolicyConfig {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "inline" => Ok(GcPolicyConfig::Inline),
            "blobdb" => Ok(GcPolicyConfig::blobdb()),
            "titan" => Ok(GcPolicyConfig::titan()),
            "terark" => Ok(GcPolicyConfig::Terark { garbage_ratio: 0.2 }),
            "lifetime" => Ok(GcPolicyConfig::Lifetime {
                mode: LifetimeMode::Learned,
            }),
            "lifetime-nomodel" => Ok(GcPolicyConfig::Lifetime {
                mode: LifetimeMode::NoModel,
            }),
            "oracle" => Ok(GcPolicyConfig::Lifetime {
                mode: LifetimeMode::Oracle,
            }),
            "rate-oracle" => Ok(GcPolicyConfig::Lifetime {
                mode: LifetimeMode::RateOracle,
            }),
            other => Err(Error::InvalidOptions {
                name: "gc",
                detail: format!(
                    "unknown policy {other:?}; expected one of {}",
                    Self::NAMES.join(", ")
                ),
            }),
        }
    }
}

/// How levels below L0 are organised (paper 003 calls the two families leveling and
/// tiering).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStyle {
    /// One sorted run per level >= 1; a compaction merges files of a level with their
    /// overlaps in the next one (RocksDB's leveled compaction, per file).
    Leveled,
    /// Up to `growth_factor` overlapping sorted runs per level (L0 included); when a level
    /// holds that many runs, all of them are merged into one new run of the next level,
    /// without reading the next level (paper 003, sec. 2 and Eq. 9: merge amplification 0).
    /// See [`crate::version::tiered`].
    Tiered,
    /// Tiered when the key tree is a small share of the data and the GC policy's space
    /// target leaves room for its extra runs, leveled otherwise; re-derived from the
    /// database's measured sizes (see [`crate::version::style`]). While tiered, L0 merges
    /// at the chosen run count, not at `l0_compaction_trigger`.
    #[default]
    Auto,
}

impl CompactionStyle {
    pub const NAMES: [&'static str; 3] = ["leveled", "tiered", "auto"];

    pub fn name(self) -> &'static str {
        match self {
            CompactionStyle::Leveled => "leveled",
            CompactionStyle::Tiered => "tiered",
            CompactionStyle::Auto => "auto",
        }
    }
}

impl fmt::Display for CompactionStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CompactionStyle {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "leveled" | "leveling" => Ok(CompactionStyle::Leveled),
            "tiered" | "tiering" => Ok(CompactionStyle::Tiered),
            "auto" => Ok(CompactionStyle::Auto),
            other => Err(Error::InvalidOptions {
                name: "compaction_style",
                detail: format!("unknown style {other:?}; expected leveled, tiered or auto"),
            }),
        }
    }
}

/// Options fixed for the lifetime of an open database.
#[derive(Clone)]
pub struct Options {
    pub create_if_missing: bool,
    pub error_if_exists: bool,
    /// Bytes of user data a memtable holds before it is switched and flushed.
    pub memtable_size: usize,
    /// Immutable memtables waiting for flush before writers stall (1, as RocksDB's
    /// max_write_buffer_number = 2).
    pub max_immutable_memtables: usize,
    pub l0_compaction_trigger: usize,
    /// Writers stall while L0 has this many files (36, RocksDB's
    /// level0_stop_writes_trigger: a lower value forces many small L0 merges into the
    /// large bottom level, each rewriting it and relocating its old values under BlobDB GC;
    /// measured in docs/bench.md).
    pub l0_stop_writes_trigger: usize,
    /// Writes are delayed (to `delayed_write_rate`) while L0 has this many files, before
    /// they stop at `l0_stop_writes_trigger` (20, RocksDB's level0_slowdown_writes_trigger;
    /// at or above the stop trigger there is no slowdown).
    pub l0_slowdown_writes_trigger: usize,
    /// Bytes per second writes are held to while L0 is at its slowdown trigger, and while
    /// the active memtable is half full with a flush pending when no flush has been
    /// measured yet (then the measured flush rate is used: the writer fills the memtable
    /// as the flush empties the previous one, instead of stopping when it is full). 16 MiB/s,
    /// RocksDB's default delayed_write_rate.
    pub delayed_write_rate: u64,
    /// Size ratio between adjacent levels.
    pub growth_factor: f64,
    pub num_levels: usize,
    /// Target size of L1 (static targets: L(n) = level1_max_bytes * growth_factor^(n-1));
    /// with dynamic targets, the largest target of the level L0 compacts into.
    pub level1_max_bytes: u64,
    /// Derive level targets from the last level's actual size (RocksDB's default
    /// `level_compaction_dynamic_level_bytes`), see [`crate::version::picker::targets`].
    pub dynamic_level_bytes: bool,
    /// Table files are cut at this size by flush and compaction.
    pub target_file_size: u64,
    pub block_size: usize,
    pub bloom_bits_per_key: u32,
    /// Compression of table data blocks at every level not named by
    /// `compression_per_level` (RocksDB's `compression`).
    pub compression: Compression,
    /// Compression per level, L0 first (RocksDB's `compression_per_level`): levels past the
    /// end of the list take its last entry; empty means `compression` everywhere. Index,
    /// filter and properties blocks are never compressed (they are read once per open
    /// table and kept in memory).
    pub compression_per_level: Vec<Compression>,
    /// Compression of the values in value files, one setting for all of them (flush,
    /// compaction and GC outputs): each record is compressed on its own (a read fetches
    /// one record) and kept as is when that saves less than 1/8. Records say which codec
    /// they use, so files written with any setting stay readable. Sizes the engine
    /// reports from pointers (live bytes) are the stored sizes.
    pub value_compression: Compression,
    /// Bytes of table blocks the block cache holds.
    pub block_cache_capacity: usize,
    /// Background compaction threads (flush has its own thread).
    pub background_compactions: usize,
    /// Run compaction, value-file GC and the superseded finder at the lowest CPU priority
    /// (nice 19, Linux only), as RocksDB's `Env::LowerThreadPoolCPUPriority` does for its
    /// compaction pool. On a machine with fewer cores than busy threads, a client thread
    /// woken from a write or read then takes a core from them at once instead of waiting
    /// for a time slice. The flush keeps normal priority: writers wait for it. So do GC
    /// and the superseded finder under a space-amplification target (GC back-pressure).
    pub lower_background_priority: bool,
    /// Default for [`crate::WriteOptions::sync`].
    pub sync_writes: bool,
    /// Write-ahead logging. Off only for experiments that measure the tree alone (VAT).
    pub use_wal: bool,
    /// What WAL damage found at open does ([`WalRecoveryMode`]); the manifest is always
    /// read strictly.
    pub wal_recovery_mode: WalRecoveryMode,
    /// Obsolete WALs (their memtables flushed) are kept in `DIR/archive/` for
    /// [`crate::DB::updates_since`] while younger than this many seconds (RocksDB's
    /// `WAL_ttl_seconds`). With this and `wal_size_limit` both 0 (the default) they are
    /// deleted at once and the change stream holds only the live WALs.
    pub wal_ttl_seconds: u64,
    /// Archived WALs are dropped, oldest first, while they hold more than this many bytes
    /// (RocksDB's `WAL_size_limit_MB`); 0: no bound by size.
    pub wal_size_limit: u64,
    pub max_key_size: usize,
    pub max_value_size: usize,
    /// Values at least this large go to value files (unless the policy is `inline`).
    pub min_blob_size: usize,
    /// Value files are cut at this size.
    pub blob_file_size: u64,
    /// The value log is the write-ahead log of separated values (WiscKey's and Badger's
    /// design): a value of at least `min_blob_size` is appended to a value file by the
    /// write itself, and the WAL record carries only its pointer, so that the value is
    /// written once instead of twice (WAL, then flush). Durability is unchanged: the value
    /// file is flushed (or synced, for a synced write) before the WAL record that points
    /// into it, and open replays the pointers by reading the values back. Applies when the
    /// WAL is on and the policy separates values ([`Options::logs_values`]); off, every
    /// value goes through the WAL as well. On by default.
    pub value_log_wal: bool,
    pub gc: GcPolicyConfig,
    /// Parameters of the lifetime policies.
    pub lifetime: LifetimeOptions,
    /// The future, for the `oracle` policy only: the benchmark that generated the workload
    /// knows each key's next write.
    pub lifetime_oracle: Option<Arc<dyn LifetimeOracle>>,
    /// The device; `None` means plain files ([`crate::io::FileStorage`]).
    pub storage: Option<Arc<dyn Storage>>,
    /// Which output blocks of flushes and compactions are put into the block cache as they
    /// are written (paper 002, [`crate::warming`]).
    pub cache_warming: CacheWarmingConfig,
    /// With `cache_warming` `None`, still count the block-cache misses that compactions'
    /// invalidations cause (the baseline of the warming comparison). Off by default: the
    /// accounting keeps key ranges per data block of every compaction input, memory that
    /// grows with the data (the other warming policies need it and always keep it).
    pub warming_accounting: bool,
    /// Leveled or tiered levels, or (the default) chosen from the measured share of the key
    /// tree ([`crate::version::style`]).
    pub compaction_style: CompactionStyle,
    /// `growth_factor = auto`: the engine picks the growth factor from the VAT model with its
    /// measured merge amplification (see [`crate::version::shape`]); `growth_factor` is then
    /// only the value used before the first choice is made.
    pub auto_shape: Option<AutoShapeConfig>,
}

/// Knows when each key will be written next (for the `oracle` policy).
pub trait LifetimeOracle: Send + Sync {
    /// The sequence number of the first write of `key` after sequence number `after`.
    fn next_write(&self, key: &[u8], after: SeqNo) -> Option<SeqNo>;
    /// The key's mean interval between writes over the whole workload (the inverse of its
    /// write rate); `None` for a key written at most once.
    fn mean_interval(&self, key: &[u8]) -> Option<SeqNo>;
}

/// Parameters of the lifetime policies (paper 000). Thresholds follow
/// [`ThresholdParams`]'s defaults, the paper's.
#[derive(Clone, Debug, PartialEq)]
pub struct LifetimeOptions {
    pub thresholds: ThresholdParams,
    /// Training samples per model (the paper: 128k).
    pub dataset_capacity: usize,
    pub gbm: GbmParams,
    /// Store the value size as a static feature (sec. 4.2, optional).
    pub value_size_feature: bool,
    /// At most this many bytes of value files per GC job.
    pub max_gc_batch_bytes: u64,
    /// When value files are collected (see [`GcTrigger`]).
    pub trigger: GcTrigger,
    /// Slots of the in-memory write history the learned policy places new values by when
    /// the value log is the WAL (16 bytes each; a key per slot, the keys written most
    /// recently kept). Sized for the keys that are written more than once in a while:
    /// a key it forgets is placed as one never seen. 0, the default, sizes it from the
    /// block cache it is charged to: a fifth of [`Options::block_cache_capacity`]
    /// rounded down to a power of two of slots, at most 2M slots (32 MiB, touched only as keys arrive, for up to about two million
    /// keys; reached from a 160 MiB cache).
    pub write_history_slots: usize,
    /// Memory for the newest flushed writes of recently flushed keys, so that the garbage
    /// their next flush makes is found without a tree lookup (`vlog::recent_pointers`,
    /// about 51 bytes per key held). A key it forgets is looked up in the tree. 0, the
    /// default, sizes it from the block cache it is charged to: a fifth of
    /// [`Options::block_cache_capacity`], at most 48 MiB (917K keys; reached from a
    /// 240 MiB cache).
    pub recent_pointer_bytes: usize,
}

/// When the lifetime policies collect value files.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "trigger", rename_all = "snake_case")]
pub enum GcTrigger {
    /// Paper 000 as published: a file is collected once its TTL (`l_s`, `l_l`, `l_d`)
    /// elapses; values are placed by class only when GC copies them.
    Ttl,
    /// The one user-facing knob: keep value-file bytes / live value bytes near `target`.
    /// Values are placed by predicted death when flush first writes them and when GC copies
    /// them ([`crate::vlog::placement`]); GC runs only while the value files' space
    /// amplification exceeds `target`, and collects the files that reclaim the most per
    /// byte copied, discounted while their values are predicted to die soon
    /// ([`crate::vlog::gc::SpaceAmp`]). Like fjall's `gc_with_space_amp_target`.
    SpaceAmp { target: f64 },
}

impl GcTrigger {
    /// The default target: 1.5. Measured with the value log as the WAL (`docs/lifetime.md`,
    /// Zipfian 0.2-0.99, shifting and mixed workloads), the learned policy at 1.5 holds
    /// less space over a run than every static policy and writes fewer bytes; at 1.25
    /// (where titan and terark settle at rest with a 0.2 garbage ratio) it copies up to
    /// half again as much to hold the lower space.
    pub const DEFAULT_SPACE_AMP: f64 = 1.5;

    fn validate(&self) -> Result<()> {
        match *self {
            GcTrigger::Ttl => Ok(()),
            GcTrigger::SpaceAmp { target } if target > 1.0 && target.is_finite() => Ok(()),
            GcTrigger::SpaceAmp { target } => Err(Error::InvalidOptions {
                name: "lifetime.trigger.target",
                detail: format!("space amplification target {target} must be above 1"),
            }),
        }
    }
}

impl Default for GcTrigger {
    fn default() -> Self {
        GcTrigger::SpaceAmp {
            target: Self::DEFAULT_SPACE_AMP,
        }
    }
}

impl Default for LifetimeOptions {
    fn default() -> Self {
        LifetimeOptions {
            thresholds: ThresholdParams::default(),
            dataset_capacity: crate::lifetime::DEFAULT_DATASET_CAPACITY,
            gbm: GbmParams::default(),
            value_size_feature: false,
            max_gc_batch_bytes: 1 << 30,
            trigger: GcTrigger::default(),
            write_history_slots: 0,
            recent_pointer_bytes: 0,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            memtable_size: 64 << 20,
            max_immutable_memtables: 1,
            l0_compaction_trigger: 4,
            l0_stop_writes_trigger: 36,
            l0_slowdown_writes_trigger: 20,
            delayed_write_rate: 16 << 20,
            growth_factor: 10.0,
            num_levels: 7,
            level1_max_bytes: 256 << 20,
            dynamic_level_bytes: true,
            target_file_size: 64 << 20,
            block_size: 4096,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            compression_per_level: Vec::new(),
            value_compression: Compression::None,
            block_cache_capacity: 64 << 20,
            background_compactions: 1,
            lower_background_priority: true,
            sync_writes: false,
            use_wal: true,
            wal_recovery_mode: WalRecoveryMode::default(),
            wal_ttl_seconds: 0,
            wal_size_limit: 0,
            max_key_size: 64 << 10,
            max_value_size: 256 << 20,
            min_blob_size: 512,
            blob_file_size: 256 << 20,
            value_log_wal: true,
            gc: GcPolicyConfig::default(),
            lifetime: LifetimeOptions::default(),
            lifetime_oracle: None,
            storage: None,
            cache_warming: CacheWarmingConfig::None,
            warming_accounting: false,
            compaction_style: CompactionStyle::Auto,
            auto_shape: None,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("memtable_size", &self.memtable_size)
            .field("growth_factor", &self.growth_factor)
            .field("num_levels", &self.num_levels)
            .field("level1_max_bytes", &self.level1_max_bytes)
            .field("target_file_size", &self.target_file_size)
            .field("min_blob_size", &self.min_blob_size)
            .field("blob_file_size", &self.blob_file_size)
            .field("value_log_wal", &self.value_log_wal)
            .field("gc", &self.gc)
            .field("compression", &self.compression)
            .field("value_compression", &self.value_compression)
            .field("compression_per_level", &self.compression_per_level)
            .field("cache_warming", &self.cache_warming)
            .field("warming_accounting", &self.warming_accounting)
            .field("use_wal", &self.use_wal)
            .field("wal_ttl_seconds", &self.wal_ttl_seconds)
            .field("wal_size_limit", &self.wal_size_limit)
            .field("sync_writes", &self.sync_writes)
            .field("compaction_style", &self.compaction_style)
            .field("auto_shape", &self.auto_shape)
            .finish_non_exhaustive()
    }
}

fn invalid(name: &'static str, detail: impl Into<String>) -> Error {
    Error::InvalidOptions {
        name,
        detail: detail.into(),
    }
}

impl Options {
    /// Whether large values are logged in value files by their writes
    /// ([`Options::value_log_wal`], the WAL on, a policy that separates values).
    pub fn logs_values(&self) -> bool {
        self.value_log_wal && self.use_wal && self.gc.separates_values()
    }

    /// The compression of tables written to `level` (see `compression_per_level`).
    pub fn compression_for_level(&self, level: usize) -> Compression {
        match self.compression_per_level.as_slice() {
            [] => self.compression,
            list => list[level.min(list.len() - 1)],
        }
    }

    /// Checks every option; the error names the first bad one.
    /// Whether obsolete WALs go to the archive instead of being deleted.
    pub fn archives_wals(&self) -> bool {
        self.wal_ttl_seconds > 0 || self.wal_size_limit > 0
    }

    pub fn validate(&self) -> Result<()> {
        self.cache_warming.validate()?;
        if self.memtable_size < 4096 {
            return Err(invalid("memtable_size", "must be at least 4096 bytes"));
        }
        if self.max_immutable_memtables == 0 {
            return Err(invalid("max_immutable_memtables", "must be at least 1"));
        }
        if self.l0_compaction_trigger == 0 {
            return Err(invalid("l0_compaction_trigger", "must be at least 1"));
        }
        if self.l0_stop_writes_trigger <= self.l0_compaction_trigger {
            return Err(invalid(
                "l0_stop_writes_trigger",
                "must be larger than l0_compaction_trigger",
            ));
        }
        if self.delayed_write_rate == 0 {
            return Err(invalid(
                "delayed_write_rate",
                "must be at least 1 byte per second",
            ));
        }
        if !(self.growth_factor > 1.0 && self.growth_factor.is_finite()) {
            return Err(invalid(
                "growth_factor",
                format!("{} must be a finite number > 1", self.growth_factor),
            ));
        }
        if !(2..=20).contains(&self.num_levels) {
            return Err(invalid("num_levels", "must be between 2 and 20"));
        }
        if self.level1_max_bytes == 0 || self.target_file_size == 0 || self.blob_file_size == 0 {
            return Err(invalid(
                "level1_max_bytes/target_file_size/blob_file_size",
                "sizes must be positive",
            ));
        }
        if !(256..=(16 << 20)).contains(&self.block_size) {
            return Err(invalid("block_size", "must be between 256 B and 16 MiB"));
        }
        if self.bloom_bits_per_key > 64 {
            return Err(invalid("bloom_bits_per_key", "at most 64"));
        }
        let tables = std::iter::once(&self.compression).chain(&self.compression_per_level);
        let all = tables
            .map(|c| ("compression", c))
            .chain([("value_compression", &self.value_compression)]);
        for (name, c) in all {
            if let Compression::Zstd { level } = c {
                if !(1..=22).contains(level) {
                    return Err(invalid(name, format!("zstd level {level}: 1 to 22")));
                }
            }
        }
        if self.background_compactions == 0 {
            return Err(invalid("background_compactions", "must be at least 1"));
        }
        if self.max_key_size == 0 || self.max_key_size > (1 << 30) {
            return Err(invalid("max_key_size", "must be in 1..=1 GiB"));
        }
        if self.max_value_size > u32::MAX as usize {
            return Err(invalid("max_value_size", "must fit in 32 bits"));
        }
        if self.compaction_style == CompactionStyle::Tiered
            && run_trigger(self.growth_factor) >= self.l0_stop_writes_trigger
        {
            return Err(invalid(
                "growth_factor",
                format!(
                    "tiered compaction merges L0 at {} runs, which must stay below \
                     l0_stop_writes_trigger ({})",
                    run_trigger(self.growth_factor),
                    self.l0_stop_writes_trigger
                ),
            ));
        }
        if self.archives_wals() && !self.use_wal {
            return Err(invalid(
                "wal_ttl_seconds",
                "keeping WALs for updates_since needs use_wal",
            ));
        }
        if let Some(s) = &self.auto_shape {
            s.validate(self)?;
        }
        self.gc.validate()?;
        if self.gc.uses_index_maps() || self.gc.lifetime_mode().is_some() {
            self.lifetime.thresholds.validate()?;
            if self.lifetime.dataset_capacity < 2 {
                return Err(invalid("lifetime.dataset_capacity", "must be at least 2"));
            }
            self.lifetime.trigger.validate()?;
            let slots = self.lifetime.write_history_slots;
            if slots != 0 && !(2..=1 << 32).contains(&slots) {
                return Err(invalid(
                    "lifetime.write_history_slots",
                    "must be 0 (sized from the block cache) or between 2 and 2^32",
                ));
            }
        }
        if self
            .gc
            .lifetime_mode()
            .is_some_and(LifetimeMode::needs_oracle)
            && self.lifetime_oracle.is_none()
        {
            return Err(invalid(
                "lifetime_oracle",
                "the oracle policy needs the workload's future (Options::lifetime_oracle)",
            ));
        }
        Ok(())
    }
}

/// Per-write options.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// fsync the WAL before the write is acknowledged.
    pub sync: bool,
}

/// Runs a tiered level holds when it is full: the growth factor, rounded, at least 2
/// (used by the compaction picker, [`crate::version::tiered`], and by validation).
pub fn run_trigger(growth_factor: f64) -> usize {
    (growth_factor.round() as usize).max(2)
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
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            readahead_size: DEFAULT_READAHEAD,
            auto_readahead: true,
        }
    }
}

impl ReadOptions {
    /// Each value read when the caller reaches it.
    pub fn without_readahead() -> Self {
        ReadOptions {
            readahead_size: 0,
            auto_readahead: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_are_named() {
        Options::default().validate().unwrap();
        let o = Options {
            growth_factor: 1.0,
            ..Default::default()
        };
        match o.validate() {
            Err(Error::InvalidOptions { name, .. }) => assert_eq!(name, "growth_factor"),
            other => panic!("{other:?}"),
        }
        let o = Options {
            gc: GcPolicyConfig::BlobDb {
                age_cutoff: 1.5,
                force_threshold: 0.2,
            },
            ..Default::default()
        };
        assert!(o.validate().is_err());
        let o = Options {
            gc: "lifetime".parse().unwrap(),
            lifetime: LifetimeOptions {
                trigger: GcTrigger::SpaceAmp { target: 1.0 },
                ..Default::default()
            },
            ..Default::default()
        };
        match o.validate() {
            Err(Error::InvalidOptions { name, .. }) => assert_eq!(name, "lifetime.trigger.target"),
            other => panic!("{other:?}"),
        }
        let o = Options {
            gc: "lifetime".parse().unwrap(),
            lifetime: LifetimeOptions {
                write_history_slots: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        match o.validate() {
            Err(Error::InvalidOptions { name, .. }) => {
                assert_eq!(name, "lifetime.write_history_slots")
            }
            other => panic!("{other:?}"),
        }
        assert!("nope".parse::<GcPolicyConfig>().is_err());
        for n in GcPolicyConfig::NAMES {
            assert_eq!(n.parse::<GcPolicyConfig>().unwrap().name(), n);
        }
    }
}
