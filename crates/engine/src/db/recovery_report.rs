//! What an open found and did ([`super::DB::recovery_report`]), filled in by
//! [`super::recovery`].

use crate::options::WalRecoveryMode;
use crate::wal::Damage;
use std::path::PathBuf;

/// What an open found and did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// The WAL recovery mode in force.
    pub mode: WalRecoveryMode,
    /// WALs replayed (fully or up to damage), oldest first.
    pub wals_replayed: Vec<PathBuf>,
    /// Write batches replayed from them.
    pub batches_replayed: u64,
    /// Where replay ended a WAL before its end (an append cut short by a crash or power
    /// cut, or a record whose separated values never reached their value file), and the
    /// bytes not replayed: (file, offset, bytes).
    pub torn_tail: Option<(PathBuf, u64, u64)>,
    /// Damage that point-in-time or skip mode passed over: (file, damage).
    pub damage: Vec<(PathBuf, Damage)>,
    /// WALs not replayed at all because point-in-time recovery stopped before them.
    pub wals_not_replayed: Vec<PathBuf>,
    /// Files proven obsolete and deleted.
    pub deleted: Vec<PathBuf>,
    /// Value files of the value log as the WAL whose last append was cut short by the
    /// crash: (file, length kept, bytes cut). No WAL record pointed into the cut bytes.
    pub value_tails_cut: Vec<(PathBuf, u64, u64)>,
    /// Files no edit accounts for, moved into `lost/` (where they now are).
    pub moved_to_lost: Vec<PathBuf>,
}
