//! What replay does with damage it finds in a WAL ([`WalRecoveryMode`], an option).

/// How damage found while replaying the WAL is treated (RocksDB's `WALRecoveryMode`).
///
/// Only one kind of damage is innocent: a record cut short by the end of the file, which
/// is what a crash in the middle of an append leaves (the bytes of a `write` that never
/// completed are missing, never wrong). Everything else (a checksum mismatch, a length that
/// runs past its block, a fragment sequence that makes no sense, non-zero bytes after zero
/// padding) means bytes that were once written correctly have changed.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum WalRecoveryMode {
    /// Any damage, even an incomplete record at the end, is an error.
    AbsoluteConsistency,
    /// What a power cut leaves is recovered to the point in time where it cut: an
    /// incomplete record at the end of a log (an append cut short), or a record whose
    /// separated values never reached their value file, ends the replay there (newer
    /// logs are moved to `lost/`, reported); any other damage (a checksum mismatch, a bad
    /// length) is an error. The default: it never drops a synced write, since a synced
    /// write syncs every older log and value file before it is acknowledged.
    #[default]
    TolerateCorruptedTailRecords,
    /// Replay stops at the first damage of any kind; what follows it (including newer
    /// logs) is not applied. The state is the one of some moment before the damage. The
    /// logs that were cut are kept aside, and the recovery report says where it stopped.
    PointInTimeRecovery,
    /// Damaged records are skipped and replay goes on with the next intact record. The
    /// result may never have existed (a batch in the middle is missing); for salvage only.
    SkipAnyCorruptedRecords,
}

impl WalRecoveryMode {
    pub const ALL: [WalRecoveryMode; 4] = [
        WalRecoveryMode::AbsoluteConsistency,
        WalRecoveryMode::TolerateCorruptedTailRecords,
        WalRecoveryMode::PointInTimeRecovery,
        WalRecoveryMode::SkipAnyCorruptedRecords,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WalRecoveryMode::AbsoluteConsistency => "absolute-consistency",
            WalRecoveryMode::TolerateCorruptedTailRecords => "tolerate-corrupted-tail-records",
            WalRecoveryMode::PointInTimeRecovery => "point-in-time",
            WalRecoveryMode::SkipAnyCorruptedRecords => "skip-any-corrupted-records",
        }
    }
}

impl std::str::FromStr for WalRecoveryMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        WalRecoveryMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = WalRecoveryMode::ALL.iter().map(|m| m.name()).collect();
                format!("unknown recovery mode {s:?} (one of {})", names.join(", "))
            })
    }
}
