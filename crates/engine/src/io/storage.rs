//! The storage interface every file operation goes through: [`Storage`] opens and creates
//! files whose reads and writes are tagged with an [`IoCause`] and counted in its
//! [`IoStats`].

use super::cause::IoCause;
use super::stats::IoStats;
use crate::error::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file open for appending. Bytes are counted when appended.
pub trait WritableFile: Send {
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system.
    fn flush(&mut self) -> Result<()>;
    /// Makes everything appended so far durable (fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Hands buffered bytes to the operating system and returns a handle that makes
    /// everything appended so far durable when called, from any thread, while this writer
    /// goes on appending: so that a sync need not hold the lock the writer is under (a GC
    /// job's sync held the value log's and the WAL's locks for the length of an fdatasync,
    /// and a user write waited behind it for up to 175 ms, docs/bench.md). `None` when the
    /// storage cannot sync apart from the writer; the caller then calls [`Self::sync`].
    fn sync_later(&mut self) -> Result<Option<Box<dyn SyncHandle>>> {
        Ok(None)
    }
    /// Bytes appended so far (the file's size once flushed).
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn path(&self) -> &Path;
}

/// Makes durable what a file's writer had appended when the handle was taken
/// ([`WritableFile::sync_later`]).
pub trait SyncHandle: Send {
    fn sync(&self) -> Result<()>;
}

/// A file open for positional reads, shared between threads.
pub trait ReadableFile: Send + Sync {
    /// Reads exactly `len` bytes at `offset`; a short read is a corruption error naming the
    /// file (the file is shorter than a pointer or handle says).
    fn read_at(&self, offset: u64, len: usize, cause: IoCause) -> Result<Vec<u8>>;
    /// A hint that `len` bytes at `offset` will be read soon: the storage may start reading
    /// them now, so that several reads are in flight while the caller waits for the first
    /// (a scan's read-ahead, `vlog/batch_read.rs`). Nothing is counted until they are read.
    /// The default does nothing: reads then simply wait their turn.
    fn will_need(&self, _offset: u64, _len: usize) {}
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn path(&self) -> &Path;
}

/// The storage device as the engine sees it: a directory of files.
pub trait Storage: Send + Sync + 'static {
    /// Creates (truncating) a file for appending; all its writes are charged to `cause`.
    fn create(&self, path: &Path, cause: IoCause) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for appending at its end (used to continue a WAL after a
    /// torn tail was cut off).
    fn open_append(&self, path: &Path, cause: IoCause) -> Result<Box<dyn WritableFile>>;
    fn open(&self, path: &Path) -> Result<Arc<dyn ReadableFile>>;
    /// Cuts a file to `len` bytes and syncs it.
    fn truncate(&self, path: &Path, len: u64) -> Result<()>;
    fn remove(&self, path: &Path) -> Result<()>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Makes directory entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    fn list(&self, dir: &Path) -> Result<Vec<PathBuf>>;
    fn exists(&self, path: &Path) -> bool;
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// The counters of this storage.
    fn stats(&self) -> &IoStats;
}

/// Reads a whole small file (CURRENT, a manifest, a WAL) through the storage.
pub fn read_all(storage: &dyn Storage, path: &Path, cause: IoCause) -> Result<Vec<u8>> {
    let f = storage.open(path)?;
    f.read_at(0, f.len() as usize, cause)
}
