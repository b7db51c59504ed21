//! Making written bytes durable, counted: `fdatasync` now, or a handle that does it
//! later from another thread. Shared by plain and mapped writable files.

use super::cause::IoCause;
use super::stats::IoStats;
use super::storage::SyncHandle;
use crate::error::{Error, Result};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `fdatasync`, counted as a sync of `cause`.
pub(super) fn sync_data(file: &File, path: &Path, stats: &IoStats, cause: IoCause) -> Result<()> {
    file.sync_data().map_err(|e| Error::io(path, e))?;
    stats.record_sync(cause);
    Ok(())
}

/// A handle that `fdatasync`s `file` through a second descriptor of it: that makes durable
/// every byte written to the file (or through a shared mapping of it) before the call,
/// whoever wrote it.
pub(super) fn sync_handle(
    file: &File,
    path: &Path,
    stats: &Arc<IoStats>,
    cause: IoCause,
) -> Result<Box<dyn SyncHandle>> {
    let file = file.try_clone().map_err(|e| Error::io(path, e))?;
    Ok(Box::new(FsSync {
        file,
        path: path.to_path_buf(),
        cause,
        stats: stats.clone(),
    }))
}

struct FsSync {
    file: File,
    path: PathBuf,
    cause: IoCause,
    stats: Arc<IoStats>,
}

impl SyncHandle for FsSync {
    fn sync(&self) -> Result<()> {
        sync_data(&self.file, &self.path, &self.stats, self.cause)
    }
}
