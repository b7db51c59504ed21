//! A log file written through a shared memory mapping of preallocated windows (RocksDB's
//! `allow_mmap_writes`), for the WAL.
//!
//! Why: a WAL write group is about one put of ~1 KiB on a busy machine (groups rarely
//! form, docs/bench.md), and a buffered `write` of 1 KiB costs the kernel a page-cache
//! lookup and ext4's per-call block preparation every time, even when three of four calls
//! land in a page the previous call already created: measured with 4 writers, 31 % of the
//! client threads' time was inside `write`, 3 % of it the copy itself. Copying the record
//! into a mapping costs no system call. Each next window is reserved, mapped and faulted
//! in ahead by a short-lived thread while the current one fills (`fallocate`, `mmap`,
//! `madvise(MADV_POPULATE_WRITE)`), and the same thread unmaps the window the writer left,
//! so the writer makes none of these calls: `mmap` and `munmap` take the process's
//! memory-map lock for writing, behind every page fault in flight in any thread (the
//! writer's `munmap` was 204 of 1,695 of its blocking switch-outs in a trace,
//! docs/results/2026-11-27-bench-full-scale-against-fjall.md), and a copy rarely takes a
//! page fault itself.
//!
//! What is kept: bytes copied into the mapping are in the page cache at once, so an
//! appended record survives a process crash as it does after `write` (a `flush` has
//! nothing left to do), and [`WritableFile::sync`] is an `fdatasync` of the file, which
//! writes back the pages dirtied through the mapping before it returns.
//!
//! What changes: each window is reserved with `fallocate` before it is mapped, so a full
//! disk is an error returned by `fallocate` (not a `SIGBUS` on a page fault), and the file
//! is longer than its records until the writer is dropped, which cuts it to its length.
//! A process that dies first leaves the window's unwritten rest as zeros after the last
//! record; a record it was copying when it died is followed by zeros instead of by the end
//! of the file. The log reader (`wal::log`) treats both as the end of the log: zeros, and
//! an incomplete fragment that only zeros follow, are what an interrupted append leaves.

use super::cause::IoCause;
use super::stats::IoStats;
use super::storage::{SyncHandle, WritableFile};
use super::sync::{sync_data, sync_handle};
use crate::error::{Error, Result};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::sync::{Arc, OnceLock};

/// Bytes reserved and mapped at a time: large enough that the `fallocate`, `mmap` and
/// populating thread per window are rare (one per 4,000 puts of 1 KiB), small enough that
/// a crash leaves at most two windows of zeros for recovery to read.
pub(crate) const WINDOW: usize = 4 << 20;

/// Bytes of a window faulted in per `madvise` call (see [`Window::populate`]).
const POPULATE_STEP: usize = 256 << 10;

/// One mapped window of the file; unmapped when the writer and the thread populating it
/// are both done with it.
struct Window {
    ptr: *mut u8,
}

// SAFETY: the mapping stays valid until `drop`; the writer is the only one that writes
// through it, and the populating thread only asks the kernel to fault its pages in.
unsafe impl Send for Window {}
unsafe impl Sync for Window {}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: `ptr` is a live mapping of WINDOW bytes made by `map_window`.
        unsafe { libc::munmap(self.ptr.cast(), WINDOW) };
    }
}

impl Window {
    /// Faults every page in, writable (best effort: a kernel before 5.14 lacks
    /// `MADV_POPULATE_WRITE`, and a window cut off by the writer's drop fails with
    /// `EFAULT`, never `SIGBUS`; the copies then fault pages in as they touch them).
    ///
    /// In steps of [`POPULATE_STEP`]: each call holds the process's memory-map lock for
    /// reading while it faults its range in, and a `mmap`/`munmap` elsewhere in the
    /// process (value-file readers, thread stacks) waits for it, as does every page fault
    /// queued behind that writer; short steps keep those waits short.
    fn populate(&self) {
        for at in (0..WINDOW).step_by(POPULATE_STEP) {
            // SAFETY: the range lies inside the live mapping.
            let r = unsafe {
                libc::madvise(
                    self.ptr.add(at).cast(),
                    POPULATE_STEP,
                    libc::MADV_POPULATE_WRITE,
                )
            };
            if r != 0 {
                return;
            }
        }
    }
}

/// A window being prepared by its thread: it arrives once reserved and mapped (before it
/// is populated), or as the error that reserving or mapping it met.
type NextWindow = Receiver<Result<Arc<Window>>>;

fn os_err(path: &Path, what: &str) -> Error {
    let e = std::io::Error::last_os_error();
    Error::io(path, std::io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// Reserves (`fallocate`, extending the file) and maps the window of `file` at `start`.
fn map_window(file: &File, path: &Path, start: u64) -> Result<Arc<Window>> {
    let fd = file.as_raw_fd();
    // SAFETY: system calls on an open descriptor; the mapping is checked before use.
    let ptr = unsafe {
        if libc::fallocate(fd, 0, start as libc::off_t, WINDOW as libc::off_t) != 0 {
            return Err(os_err(path, "reserving a WAL window (fallocate)"));
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            WINDOW,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            start as libc::off_t,
        );
        if p == libc::MAP_FAILED {
            return Err(os_err(path, "mapping a WAL window (mmap)"));
        }
        p.cast()
    };
    Ok(Arc::new(Window { ptr }))
}

pub(crate) struct MappedWritable {
    path: PathBuf,
    file: Arc<File>,
    /// The window `len` is in (none before the first append).
    current: Option<Arc<Window>>,
    /// The window after it, being prepared.
    next: Option<NextWindow>,
    /// Bytes appended: the file's logical length.
    len: u64,
    /// Bytes of `len` already counted in the I/O statistics.
    counted: u64,
    cause: IoCause,
    stats: Arc<IoStats>,
}

impl MappedWritable {
    /// Takes over `file`, which must be empty and open for reading and writing (a shared
    /// writable mapping needs both).
    pub(crate) fn new(path: &Path, file: File, cause: IoCause, stats: Arc<IoStats>) -> Self {
        MappedWritable {
            path: path.to_path_buf(),
            file: Arc::new(file),
            current: None,
            next: None,
            len: 0,
            counted: 0,
            cause,
            stats,
        }
    }

    /// Whether `file`'s file system can reserve space with `fallocate` (ext4, xfs, tmpfs):
    /// without it a page fault on a full disk would kill the process, so the caller falls
    /// back to buffered writes.
    pub(crate) fn supported(file: &File) -> bool {
        // SAFETY: plain system call on an open descriptor; reserves one block past the
        // (zero) size, which the first window reuses.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, 1) };
        r == 0
    }

    /// Has the mapping thread unmap `retired` (the window the writer left), then reserve,
    /// map and populate the window at `start`, handing it over once mapped. Without the
    /// thread (none could be started) the writer does it all itself: slower, not wrong.
    fn prepare(&self, start: u64, retired: Option<Arc<Window>>) -> NextWindow {
        let (tx, rx) = sync_channel(1);
        let (file, path) = (self.file.clone(), self.path.clone());
        let work = move || {
            drop(retired);
            let w = map_window(&file, &path, start);
            let ahead = w.as_ref().ok().cloned();
            let _ = tx.send(w);
            if let Some(w) = ahead {
                w.populate();
            }
        };
        let sent = mapper().is_some_and(|tx| tx.send(Box::new(work)).is_ok());
        if !sent {
            let (tx, rx) = sync_channel(1);
            let _ = tx.send(Err(Error::io(
                &self.path,
                std::io::Error::other("no thread to map the WAL's next window"),
            )));
            return rx;
        }
        rx
    }

    /// Moves to the window starting at `len` (a multiple of [`WINDOW`]) and starts
    /// preparing the one after it, which also unmaps the window left.
    fn advance(&mut self) -> Result<()> {
        debug_assert_eq!(self.len % WINDOW as u64, 0);
        let retired = self.current.take();
        let w = match self.next.take().map(|rx| rx.recv()) {
            Some(Ok(Ok(w))) => w,
            // The first window, or one whose preparation failed (a full disk, no thread):
            // mapped here, and its error, if any, is the writer's.
            _ => map_window(&self.file, &self.path, self.len)?,
        };
        self.current = Some(w);
        self.next = Some(self.prepare(self.len + WINDOW as u64, retired));
        Ok(())
    }

    fn count(&mut self) {
        if self.len > self.counted {
            self.stats.record_write(self.cause, self.len - self.counted);
            self.counted = self.len;
        }
    }
}

type MapJob = Box<dyn FnOnce() + Send>;

/// The one long-lived thread that prepares every mapped WAL's next window. A thread per
/// window, spawned by the writer that reached the window's end, made that writer fault in
/// the new thread's stack: under a memory cgroup at its limit, the spawn waited in reclaim
/// for up to 104 ms (docs/bench.md, "Where a thread waits"). `None` if it could not start.
fn mapper() -> Option<&'static Sender<MapJob>> {
    static MAPPER: OnceLock<Option<Sender<MapJob>>> = OnceLock::new();
    MAPPER
        .get_or_init(|| {
            let (tx, rx) = channel::<MapJob>();
            std::thread::Builder::new()
                .name("halflife-wal-map".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

impl WritableFile for MappedWritable {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let at = (self.len % WINDOW as u64) as usize;
            if at == 0 || self.current.is_none() {
                self.advance()?;
            }
            let w = self.current.as_ref().expect("a window is mapped");
            let n = data.len().min(WINDOW - at);
            // SAFETY: the window maps WINDOW bytes and `at + n <= WINDOW`; `data` is a
            // separate allocation, never part of a mapping.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), w.ptr.add(at), n) };
            self.len += n as u64;
            data = &data[n..];
        }
        Ok(())
    }

    /// Nothing to hand over: the bytes are in the page cache since they were copied.
    fn flush(&mut self) -> Result<()> {
        self.count();
        Ok(())
    }

    /// `fdatasync` also writes back the pages dirtied through the mapping (Linux's
    /// `msync(MS_SYNC)` is the same call).
    fn sync(&mut self) -> Result<()> {
        self.count();
        sync_data(&self.file, &self.path, &self.stats, self.cause)
    }

    fn sync_later(&mut self) -> Result<Option<Box<dyn SyncHandle>>> {
        self.count();
        sync_handle(&self.file, &self.path, &self.stats, self.cause).map(Some)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MappedWritable {
    fn drop(&mut self) {
        self.count();
        self.current = None;
        // The next window's thread reserves it (extending the file) before it sends it:
        // wait for that, so that the cut below comes after.
        if let Some(rx) = self.next.take() {
            let _ = rx.recv();
        }
        // Best effort: the zeros after the last record read as the end of the log anyway.
        let _ = self.file.set_len(self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn open(path: &Path) -> File {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .unwrap()
    }

    #[test]
    fn appends_across_windows_read_back_and_the_file_is_cut_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let f = open(&p);
        assert!(MappedWritable::supported(&f));
        let stats = Arc::new(IoStats::default());
        let mut w = MappedWritable::new(&p, f, IoCause::Wal, stats.clone());
        let mut expect = Vec::new();
        for i in 0..9000u32 {
            let rec = vec![(i % 251) as u8 + 1; 1000 + (i as usize % 7)];
            w.append(&rec).unwrap();
            expect.extend_from_slice(&rec);
        }
        let big = vec![9u8; WINDOW + 123];
        w.append(&big).unwrap();
        expect.extend_from_slice(&big);
        w.sync().unwrap();
        assert_eq!(w.len(), expect.len() as u64);
        // Before the drop the window's rest is zeros after the records.
        let on_disk = std::fs::read(&p).unwrap();
        assert_eq!(on_disk.len() % WINDOW, 0);
        assert!(
            on_disk.len() > expect.len() + WINDOW,
            "the next window is reserved"
        );
        assert_eq!(&on_disk[..expect.len()], &expect[..]);
        assert!(on_disk[expect.len()..].iter().all(|&b| b == 0));
        assert_eq!(
            stats.snapshot().cause(IoCause::Wal).bytes_written,
            expect.len() as u64
        );
        drop(w);
        assert_eq!(std::fs::read(&p).unwrap(), expect);
    }
}
