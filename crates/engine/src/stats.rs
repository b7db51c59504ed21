//! Counters every experiment reads: bytes by cause (from the I/O layer), user bytes, and
//! the shape of the tree and the value files.

use crate::cache::CacheStats;
pub use crate::gc::stats::{GcJobRecord, LifetimeStats};
use crate::io::IoStatsSnapshot;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Engine-side counters, updated lock-free.
#[derive(Default)]
pub(crate) struct EngineCounters {
    pub user_bytes_written: AtomicU64,
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub gets: AtomicU64,
    /// Seeks scans made past the versions of a key instead of stepping over them.
    pub scan_reseeks: AtomicU64,
    pub stall_micros: AtomicU64,
    pub stall_count: AtomicU64,
    /// Time user writes waited for value-file GC (back-pressure under a
    /// space-amplification target).
    pub gc_delay_micros: AtomicU64,
    pub gc_delay_count: AtomicU64,
    /// The longest single stop.
    pub stall_max_micros: AtomicU64,
    /// Delayed writes (slowdown before a stop): time slept and sleeps.
    pub delay_micros: AtomicU64,
    pub delay_count: AtomicU64,
    pub flushes: AtomicU64,
    pub compactions: AtomicU64,
    pub gc_jobs: AtomicU64,
    pub gc_relocated_bytes: AtomicU64,
    pub gc_log_syncs: AtomicU64,
    pub gc_log_syncs_skipped: AtomicU64,
    /// CPU time of the threads that ran GC jobs, spent in them.
    pub gc_cpu_micros: AtomicU64,
    pub gc_relocated_expiring_bytes: AtomicU64,
    pub gc_writeback_entries: AtomicU64,
    /// Expired entries flushes and compactions turned into deletions or dropped, and value
    /// files dropped whole because every value in them expired ([`crate::expiry`]).
    pub expired_entries: AtomicU64,
    pub expired_value_files: AtomicU64,
    pub write_groups: AtomicU64,
    /// Sum of per-compaction merge amplification, in millionths, and its count.
    pub merge_amp_micros: AtomicU64,
    pub merge_amp_count: AtomicU64,
    /// Sum of per-compaction merge amplification measured in bytes, in millionths.
    pub merge_amp_bytes_micros: AtomicU64,
}

impl EngineCounters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Relaxed)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LevelStats {
    pub level: usize,
    pub files: usize,
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ValueFileStats {
    pub number: u64,
    pub bytes: u64,
    pub entries: u64,
    pub live_bytes: u64,
    pub garbage_bytes: u64,
}

/// Everything `DB::stats` reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DbStats {
    /// The GC policy configured (`GcPolicyConfig::name`: `lifetime`, `lifetime-nomodel`,
    /// `oracle`, `rate-oracle`, `titan`, ...).
    pub policy: String,
    /// What decides where a value goes, by mechanism: `write-history` (each key's recent
    /// write intervals, the default), `gbm-classifier` (paper 000's model, under the TTL
    /// trigger), `single-class` (`lifetime-nomodel`: one class, victim selection alone), `next-write-oracle`,
    /// `mean-interval-oracle`, or `none` (policies that do not place values).
    pub placement: String,
    pub io: IoStatsSnapshot,
    /// Key and value bytes the user handed to put (and key bytes of deletes).
    pub user_bytes_written: u64,
    pub puts: u64,
    pub deletes: u64,
    pub gets: u64,
    /// Seeks scans made past more than 8 versions of one key instead of stepping over
    /// them (RocksDB's `NUMBER_OF_RESEEKS_IN_ITERATION`).
    pub scan_reseeks: u64,
    /// Bytes written to files (all causes) / user bytes.
    pub write_amplification: f64,
    /// Exact live user bytes, as last measured by `DB::measure_live_bytes`.
    pub live_user_bytes: Option<u64>,
    /// Bytes on disk / live user bytes (needs `live_user_bytes`).
    pub space_amplification: Option<f64>,
    pub disk_bytes: u64,
    pub tree_bytes: u64,
    pub value_file_bytes: u64,
    /// Value index maps (index-map GC policies).
    pub index_map_bytes: u64,
    pub wal_bytes: u64,
    /// Obsolete WALs kept for `DB::updates_since` (`Options::wal.wal_ttl_seconds`,
    /// `wal_size_limit`); not counted in `disk_bytes`.
    pub wal_archive_files: usize,
    pub wal_archive_bytes: u64,
    pub memtable_bytes: u64,
    pub stall_micros: u64,
    pub stall_count: u64,
    /// Time user writes waited for value-file GC to catch up with its
    /// space-amplification target, and how many waits (`gc::pacer::GcPacer`).
    #[serde(default)]
    pub gc_delay_micros: u64,
    #[serde(default)]
    pub gc_delay_count: u64,
    /// The delayed write rate (bytes per second) writes are held to now because the value
    /// files' garbage is past the target; `None` while they are not delayed.
    #[serde(default)]
    pub gc_write_rate: Option<u64>,
    /// The longest single stop, in microseconds.
    #[serde(default)]
    pub stall_max_micros: u64,
    /// Time writers were delayed (slowdown before a stop) and how many delays.
    #[serde(default)]
    pub delay_micros: u64,
    #[serde(default)]
    pub delay_count: u64,
    pub write_groups: u64,
    pub flushes: u64,
    pub compactions: u64,
    pub gc_jobs: u64,
    pub gc_relocated_bytes: u64,
    /// GC jobs that synced the write path's logs before deleting their inputs, and those
    /// that did not need to: every write hiding a record they dropped was already durable
    /// (synced, or flushed).
    #[serde(default)]
    pub gc_log_syncs: u64,
    #[serde(default)]
    pub gc_log_syncs_skipped: u64,
    /// CPU time GC jobs took on the threads that ran them (the kernel's copies, syncs and
    /// deletes included; not the lookup pool's, used only for files written before the
    /// last open, nor BlobDB's relocation inside compaction): over `gc_relocated_bytes`,
    /// GC's CPU per byte moved.
    #[serde(default)]
    pub gc_cpu_micros: u64,
    /// Of `gc_relocated_bytes`, those copied out of value files holding values with an
    /// expiry ([`crate::expiry`]: an expiry window's file, which is otherwise dropped
    /// whole once its last value expired, or a `Mixed` one).
    #[serde(default)]
    pub gc_relocated_expiring_bytes: u64,
    pub gc_writeback_entries: u64,
    /// Expired entries flushes and compactions turned into deletions or dropped.
    #[serde(default)]
    pub expired_entries: u64,
    /// Value files dropped whole, unread, because every value in them expired.
    #[serde(default)]
    pub expired_value_files: u64,
    /// Mean merge amplification `a` over all compactions (paper 003, sec. 3.2).
    pub merge_amplification: Option<f64>,
    /// The same mean with `a` measured in bytes instead of files (see
    /// `Compaction::merge_amplification_bytes`).
    #[serde(default)]
    pub merge_amplification_bytes: Option<f64>,
    pub levels: Vec<LevelStats>,
    pub value_files: Vec<ValueFileStats>,
    pub cache: CacheStats,
    /// Lifetime and TerarkDB policies only.
    pub lifetime: Option<LifetimeStats>,
    /// Cache warming and the invalidations it is measured against.
    #[serde(default)]
    pub warming: crate::warming::WarmingStats,
    /// Under `growth_factor = auto`: the shape the engine chose and why.
    #[serde(default)]
    pub shape: Option<crate::compaction::ShapeChoice>,
    /// Under `compaction_style = auto`: leveled or tiered, and why.
    #[serde(default)]
    pub tree_style: Option<crate::compaction::StyleChoice>,
}

impl DbStats {
    /// Bytes written for one cause.
    pub fn written(&self, cause: crate::io::IoCause) -> u64 {
        self.io.cause(cause).bytes_written
    }
}
