//! [`Storage`] on the local file system, with metering.

use super::cause::IoCause;
use super::mapped::MappedWritable;
use super::stats::IoStats;
use super::storage::{ReadableFile, Storage, SyncHandle, WritableFile};
use super::sync::{sync_data, sync_handle};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Appends are buffered up to this many bytes before they reach the kernel.
const WRITE_BUFFER: usize = 256 * 1024;

/// Once this many bytes of a file reached the kernel since its last hint, their writeback
/// is started (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, RocksDB's `bytes_per_sync`), so
/// that the `fdatasync` that ends the file, or a GC job's sync of the logs, waits for the
/// last megabyte instead of every dirty page: at the `lifetime` preset GC's thread waited
/// 6 s of a 46 s run in the syncs of the value log and 5 s in those of its own outputs,
/// and flush 5 s; with this and GC's read-ahead the writers waited for GC 6 s instead of
/// 13-16 s (docs/results/2026-12-07-gc-writeback.md). It is a hint: what is durable is
/// still what a sync made durable.
const BYTES_PER_SYNC: u64 = 1 << 20;

/// Plain files in a directory tree.
#[derive(Default)]
pub struct FileStorage {
    stats: Arc<IoStats>,
}

impl FileStorage {
    pub fn new() -> Self {
        Self::default()
    }
}

struct FsWritable {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    len: u64,
    /// The file's bytes up to here have reached the kernel, and their writeback was started
    /// up to `hinted` ([`BYTES_PER_SYNC`]).
    written: u64,
    hinted: u64,
    cause: IoCause,
    stats: Arc<IoStats>,
}

impl FsWritable {
    fn new(path: &Path, file: File, len: u64, cause: IoCause, stats: Arc<IoStats>) -> Self {
        FsWritable {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(WRITE_BUFFER),
            len,
            written: len,
            hinted: len,
            cause,
            stats,
        }
    }

    fn write_out(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .write_all(&self.buf)
                .map_err(|e| Error::io(&self.path, e))?;
            self.wrote(self.buf.len());
            self.buf.clear();
        }
        Ok(())
    }

    /// Counts `n` bytes handed to the kernel, and starts the writeback of the last
    /// [`BYTES_PER_SYNC`] once that many are waiting.
    fn wrote(&mut self, n: usize) {
        self.stats.record_write(self.cause, n as u64);
        self.written += n as u64;
        if self.written - self.hinted >= BYTES_PER_SYNC {
            start_writeback(&self.file, self.hinted, self.written - self.hinted);
            self.hinted = self.written;
        }
    }
}

/// `sync_file_range(SYNC_FILE_RANGE_WRITE)`: queues the writeback of the dirty pages in the
/// range and returns without waiting for it. A hint: durability comes only from a sync, so
/// its error is ignored (a sync reports any that matters).
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for the life of `file`; the call reads no memory.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

impl WritableFile for FsWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.write_out()?;
        }
        if data.len() >= WRITE_BUFFER {
            self.file
                .write_all(data)
                .map_err(|e| Error::io(&self.path, e))?;
            self.wrote(data.len());
        } else {
            self.buf.extend_from_slice(data);
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.write_out()
    }

    fn sync(&mut self) -> Result<()> {
        self.write_out()?;
        sync_data(&self.file, &self.path, &self.stats, self.cause)
    }

    fn sync_later(&mut self) -> Result<Option<Box<dyn SyncHandle>>> {
        self.write_out()?;
        sync_handle(&self.file, &self.path, &self.stats, self.cause).map(Some)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FsWritable {
    fn drop(&mut self) {
        // Best effort: an explicit flush/sync reports errors; a dropped file must not lose
        // bytes that were appended and counted.
        let _ = self.write_out();
    }
}

struct FsReadable {
    path: PathBuf,
    file: File,
    len: u64,
    stats: Arc<IoStats>,
}

impl ReadableFile for FsReadable {
    fn read_at(&self, offset: u64, len: usize, cause: IoCause) -> Result<Vec<u8>> {
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > self.len)
        {
            return Err(Error::corruption(
                &self.path,
                format!(
                    "read of {len} bytes at offset {offset} past the end of the file ({} bytes)",
                    self.len
                ),
            ));
        }
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Error::io(&self.path, e))?;
        self.stats.record_read(cause, len as u64);
        Ok(buf)
    }

    /// `posix_fadvise(WILLNEED)`: the kernel queues reads of the pages not yet cached and
    /// returns at once (pages already cached cost a lookup). A failed hint changes nothing
    /// a read returns, so its error is ignored.
    fn will_need(&self, offset: u64, len: usize) {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for the life of `self`; the call only advises.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                offset as libc::off_t,
                len as libc::off_t,
                libc::POSIX_FADV_WILLNEED,
            );
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Storage for FileStorage {
    fn create(&self, path: &Path, cause: IoCause) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .read(cause == IoCause::Wal)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        // The WAL is written in ~1 KiB appends, one per write group: through a mapping
        // they cost a page fault per page instead of a system call each (see `mapped`).
        if cause == IoCause::Wal && MappedWritable::supported(&file) {
            let stats = self.stats.clone();
            return Ok(Box::new(MappedWritable::new(path, file, cause, stats)));
        }
        Ok(Box::new(FsWritable::new(
            path,
            file,
            0,
            cause,
            self.stats.clone(),
        )))
    }

    fn open_append(&self, path: &Path, cause: IoCause) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(Box::new(FsWritable::new(
            path,
            file,
            len,
            cause,
            self.stats.clone(),
        )))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(Arc::new(FsReadable {
            path: path.to_path_buf(),
            file,
            len,
            stats: self.stats.clone(),
        }))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        f.set_len(len).map_err(|e| Error::io(path, e))?;
        f.sync_all().map_err(|e| Error::io(path, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io(from, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(dir, e))
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            out.push(e.map_err(|e| Error::io(dir, e))?.path());
        }
        out.sort();
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(std::fs::metadata(path)
            .map_err(|e| Error::io(path, e))?
            .len())
    }

    fn stats(&self) -> &IoStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bytes_per_cause_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileStorage::new();
        let p = dir.path().join("f");
        let mut w = fs.create(&p, IoCause::Flush).unwrap();
        w.append(b"hello ").unwrap();
        w.append(&vec![7u8; WRITE_BUFFER + 10]).unwrap();
        w.sync().unwrap();
        let total = 6 + WRITE_BUFFER as u64 + 10;
        assert_eq!(w.len(), total);
        let s = fs.stats().snapshot();
        assert_eq!(s.cause(IoCause::Flush).bytes_written, total);
        assert_eq!(s.cause(IoCause::Wal).bytes_written, 0);
        let r = fs.open(&p).unwrap();
        assert_eq!(r.read_at(0, 6, IoCause::ClientRead).unwrap(), b"hello ");
        let err = r.read_at(total - 2, 4, IoCause::ClientRead).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert_eq!(
            fs.stats().snapshot().cause(IoCause::ClientRead).bytes_read,
            6
        );
    }

    #[test]
    fn writeback_is_started_per_megabyte_and_changes_no_byte() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileStorage::new();
        let p = dir.path().join("f");
        std::fs::write(&p, b"head").unwrap();
        let file = OpenOptions::new().append(true).open(&p).unwrap();
        let mut w = FsWritable::new(&p, file, 4, IoCause::GcWrite, fs.stats.clone());
        let mut want = b"head".to_vec();
        for i in 0..40u32 {
            let chunk = vec![i as u8; 100_000 + i as usize];
            w.append(&chunk).unwrap();
            want.extend_from_slice(&chunk);
        }
        // Started up to the last whole megabyte handed to the kernel, never past it.
        assert!(w.hinted > 4 && w.written - w.hinted < BYTES_PER_SYNC);
        assert!(w.hinted <= w.written && w.written <= w.len);
        w.sync().unwrap();
        assert_eq!(w.written, w.len);
        assert_eq!(std::fs::read(&p).unwrap(), want);
    }
}
