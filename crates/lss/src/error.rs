//! Typed errors: every failure names what was wrong and where.

use std::path::PathBuf;

/// Errors of the `lss` crate.
#[derive(Debug, thiserror::Error)]
pub enum LssError {
    /// A trace file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A trace line does not follow its format; nothing is skipped silently.
    #[error("{path}:{line}: {msg}")]
    Parse {
        path: PathBuf,
        line: u64,
        msg: String,
    },
    /// A policy name that no implementation answers to.
    #[error("unknown placement policy `{name}` (known: {known})")]
    UnknownPolicy { name: String, known: String },
    /// A trace format name that no reader answers to.
    #[error("unknown trace format `{0}` (known: alibaba, tencent, msrc)")]
    UnknownFormat(String),
    /// A configuration that cannot describe a working store.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A trace volume without any write.
    #[error("volume `{0}` has no write request")]
    EmptyVolume(String),
}

pub type Result<T> = std::result::Result<T, LssError>;
