//! The typed error of the model: every variant names the parameter that was out of range,
//! the range it must lie in, and the value that was given.

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, VatError>;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VatError {
    /// `a` is the fraction of the lower level read and written per merge.
    #[error("merge amplification a must be a finite number in [0, 1], got {0}")]
    MergeAmplification(f64),
    /// `r` is achieved over sequential throughput; zero would mean the device never finishes.
    #[error("achieved throughput r must be a finite number in (0, 1], got {0}")]
    Throughput(f64),
    /// `C = S_l / S_0`: the data must be larger than the in-memory level.
    #[error("size ratio C = S_l/S_0 must be a finite number > 1, got {0}")]
    SizeRatio(f64),
    #[error("growth factor f must be a finite number > 1, got {0}")]
    GrowthFactor(f64),
    #[error("level count l must be a finite number >= 1, got {0}")]
    Levels(f64),
    /// A growth factor larger than C leaves less than one level for the data.
    #[error("growth factor f = {f} exceeds C = {c}: the data would fit in less than one level")]
    GrowthExceedsSizeRatio { f: f64, c: f64 },
    /// `p = K/V`, the key to value size ratio, used by the value-log designs.
    #[error("key/value size ratio p must be a finite number > 0, got {0}")]
    KeyValueRatio(f64),
    /// `B / S_0`, the table file size relative to the memtable, used by per-file compaction.
    #[error("table file size ratio B/S_0 must be a finite number > 0, got {0}")]
    TableRatio(f64),
    /// A byte size given to the tuning helper.
    #[error("{what} must be a finite number of bytes > 0, got {value}")]
    Size { what: &'static str, value: f64 },
    /// An unknown design name (see [`crate::Design::ALL`]).
    #[error(
        "unknown design {0:?}; expected one of leveling, leveling-log, tiering, tiering-log, sst"
    )]
    UnknownDesign(String),
}
