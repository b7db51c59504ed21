//! The write-ahead log ([`Options::wal`](super::Options)): whether writes are logged and
//! synced, what open does with a damaged log, how long obsolete logs are kept for the
//! change stream, and whether large values are logged in value files instead.

use crate::error::{Error, Result};
use crate::wal::WalRecoveryMode;

/// Logging, syncing, recovery and archiving of the WAL.
#[derive(Clone, Debug, PartialEq)]
pub struct WalOptions {
    /// Write-ahead logging. On by default; off only for experiments that measure the tree
    /// alone (VAT): unflushed writes are then lost by a crash.
    pub use_wal: bool,
    /// Default for [`crate::WriteOptions::sync`]. Off by default, as in RocksDB: a write is
    /// acknowledged once in the operating system's cache, and survives a process crash but
    /// not a power cut (`DB::sync_wal` makes it durable).
    pub sync_writes: bool,
    /// What WAL damage found at open does ([`WalRecoveryMode`]; the default,
    /// `tolerate-corrupted-tail-records`, drops only a torn last record, as RocksDB's
    /// `kTolerateCorruptedTailRecords`). The manifest is always read strictly.
    pub wal_recovery_mode: WalRecoveryMode,
    /// Obsolete WALs (their memtables flushed) are kept in `DIR/archive/` for
    /// [`crate::DB::updates_since`] while younger than this many seconds (RocksDB's
    /// `WAL_ttl_seconds`). With this and `wal_size_limit` both 0 (the default) they are
    /// deleted at once and the change stream holds only the live WALs.
    pub wal_ttl_seconds: u64,
    /// Archived WALs are dropped, oldest first, while they hold more than this many bytes
    /// (RocksDB's `WAL_size_limit_MB`); 0, the default: no bound by size.
    pub wal_size_limit: u64,
    /// The value log is the write-ahead log of separated values (WiscKey's and Badger's
    /// design): a value of at least `min_blob_size` is appended to a value file by the
    /// write itself, and the WAL record carries only its pointer, so that the value is
    /// written once instead of twice (WAL, then flush). Durability is unchanged: the value
    /// file is flushed (or synced, for a synced write) before the WAL record that points
    /// into it, and open replays the pointers by reading the values back. Applies when the
    /// WAL is on and the policy separates values ([`crate::Options::logs_values`]); off,
    /// every value goes through the WAL as well. On by default.
    pub value_log_wal: bool,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            use_wal: true,
            sync_writes: false,
            wal_recovery_mode: WalRecoveryMode::default(),
            wal_ttl_seconds: 0,
            wal_size_limit: 0,
            value_log_wal: true,
        }
    }
}

impl WalOptions {
    /// Whether obsolete WALs go to the archive instead of being deleted.
    pub fn archives_wals(&self) -> bool {
        self.wal_ttl_seconds > 0 || self.wal_size_limit > 0
    }

    /// Checks the group; the error names the first bad field.
    pub fn validate(&self) -> Result<()> {
        if self.archives_wals() && !self.use_wal {
            return Err(Error::invalid_option(
                "wal_ttl_seconds",
                "keeping WALs for updates_since needs use_wal",
            ));
        }
        Ok(())
    }
}
