//! Typed errors of the device.

use crate::time::VirtualTime;
use std::path::PathBuf;

pub type Result<T, E = DeviceError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("invalid device configuration: {0}")]
    Config(String),
    #[error("no NVM set {set} (the device has {sets})")]
    NoSuchSet { set: u32, sets: u32 },
    #[error("logical page {lpn} is outside set {set} ({pages} pages)")]
    LpnOutOfRange { set: u32, lpn: u64, pages: u64 },
    #[error("NVM set {set} is full: no free logical page for file {name:?}")]
    SetFull { set: u32, name: PathBuf },
    #[error("predictable latency mode is disabled on set {set}")]
    PlmDisabled { set: u32 },
    #[error("set {set} entered NDWIN at {since}; minNDWIN allows DTWIN from {earliest}, not {at}")]
    MinNdwinNotElapsed {
        set: u32,
        since: VirtualTime,
        earliest: VirtualTime,
        at: VirtualTime,
    },
    #[error("bad file name {0:?}: must be relative, without '..'")]
    BadName(PathBuf),
    #[error("no file {0:?} on the device")]
    NoSuchFile(PathBuf),
    #[error("file {0:?} already exists on the device")]
    FileExists(PathBuf),
    #[error("file {name:?} was removed")]
    FileRemoved { name: PathBuf },
    #[error("read of {len} bytes at {offset} past the end of {name:?} ({file_len} bytes)")]
    ShortRead {
        name: PathBuf,
        offset: u64,
        len: usize,
        file_len: u64,
    },
    #[error("I/O error on backing file {path:?}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl DeviceError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DeviceError::Io {
            path: path.into(),
            source,
        }
    }
}
