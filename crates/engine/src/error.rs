//! The engine's typed error. Every failure names what was wrong and, where a file is
//! involved, which file, so that a user can act on it without reading the source.

use std::path::PathBuf;

/// Result alias used throughout the engine.
pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O error on a named file.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A checksum mismatch or a malformed structure inside a file.
    #[error("corruption in {file}: {detail}")]
    Corruption { file: PathBuf, detail: String },
    /// An option value that cannot work.
    #[error("invalid option {name}: {detail}")]
    InvalidOptions { name: &'static str, detail: String },
    #[error("key of {len} bytes exceeds the limit of {max} bytes")]
    KeyTooLarge { len: usize, max: usize },
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge { len: usize, max: usize },
    #[error("the empty key is not allowed")]
    EmptyKey,
    /// The directory exists, is not empty, and holds no halflife database.
    #[error("{0} is not a halflife database (no CURRENT file) and is not empty")]
    NotADatabase(PathBuf),
    /// The database does not exist and `create_if_missing` is off.
    #[error("no database at {0} and create_if_missing is false")]
    NotFound(PathBuf),
    /// Another process (or handle) holds the database lock.
    #[error("database at {0} is locked by another process or handle")]
    Locked(PathBuf),
    /// The handle was closed, or a background error made it read-only.
    #[error("database is closed")]
    Closed,
    /// The write group this write belonged to failed (the leader got the full error).
    #[error("write failed: {0}")]
    WriteFailed(String),
    /// `DB::updates_since` cannot give every write from the sequence number asked: the
    /// WALs (or the logged values) that held them are no longer retained.
    #[error("updates since sequence number {seq} are no longer retained: {detail}")]
    UpdatesGone { seq: u64, detail: String },
    /// A background job failed; writes are refused until reopen.
    #[error("background error, database is read-only until reopened: {0}")]
    Background(String),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn corruption(file: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            detail: detail.into(),
        }
    }

    /// An [`Error::InvalidOptions`]: the option `name` cannot take its value, `detail` says
    /// why.
    pub fn invalid_option(name: &'static str, detail: impl Into<String>) -> Self {
        Error::InvalidOptions {
            name,
            detail: detail.into(),
        }
    }

    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

/// The option a validation refused (for the option groups' tests).
#[cfg(test)]
pub(crate) fn refused_option(r: Result<()>) -> &'static str {
    match r {
        Err(Error::InvalidOptions { name, .. }) => name,
        other => panic!("{other:?}"),
    }
}
