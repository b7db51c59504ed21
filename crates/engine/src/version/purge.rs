//! Obsolete table files are deleted on a thread of their own (RocksDB's background purge of
//! obsolete files).
//!
//! An edit that removes a table file only marks it obsolete: the file is deleted when the
//! last version holding it goes, and that is whichever thread lets go of the last reference,
//! often a client's read that took its read view just before the new version was
//! published. Deleting there put the block cache's erase of the file's blocks, the erase
//! listener's work on them (cache warming's invalidation accounting, the oracle's judging)
//! and the unlink on that read: 0.3-0.5 ms a file and 10-30 ms for the first input of a
//! compaction, measured in `halflife leaper` (docs/leaper.md). With a [`Purger`] the
//! thread that lets go only queues the file.
//!
//! [`Purger::wait_idle`] returns once every queued file is deleted: `DB::wait_idle` and
//! `compact_range` call it, so that their callers still find the inputs gone from disk and
//! from the cache. Files let go of after the purger stopped (the versions a closing
//! database drops last) are deleted where they are let go of, as before.

use crate::cache::BlockCache;
use crate::io::Storage;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

/// What deleting an obsolete table file takes.
pub(crate) struct ObsoleteFile {
    pub number: u64,
    pub path: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub cache: Option<Arc<BlockCache>>,
}

impl ObsoleteFile {
    /// Drops the file's cached blocks, then the file. A failed unlink leaves an orphan that
    /// the next open does not reference (and `halflife check` reports); nothing to retry.
    pub fn delete(self) {
        if let Some(c) = &self.cache {
            c.erase_file(self.number);
        }
        let _ = self.storage.remove(&self.path);
    }
}

#[derive(Default)]
struct Queue {
    files: VecDeque<ObsoleteFile>,
    /// The thread is deleting a file it took off `files`.
    busy: bool,
    /// The thread runs and takes new files.
    running: bool,
    stop: bool,
}

/// The queue of obsolete table files and its thread's signals.
#[derive(Default)]
pub struct Purger {
    queue: Mutex<Queue>,
    /// Wakes the thread: a file was queued, or stop.
    work: Condvar,
    /// Wakes waiters: the queue emptied, or the thread stopped.
    idle: Condvar,
}

impl Purger {
    /// Queues `f` for the thread, or deletes it here if the thread is not running.
    pub(crate) fn submit(&self, f: ObsoleteFile) {
        let mut q = self.queue.lock();
        if !q.running {
            drop(q);
            f.delete();
            return;
        }
        q.files.push_back(f);
        self.work.notify_one();
    }

    /// Returns once every file queued so far is deleted.
    pub fn wait_idle(&self) {
        let mut q = self.queue.lock();
        while q.running && (q.busy || !q.files.is_empty()) {
            self.idle.wait(&mut q);
        }
    }

    fn run(&self) {
        let mut q = self.queue.lock();
        loop {
            if let Some(f) = q.files.pop_front() {
                q.busy = true;
                drop(q);
                f.delete();
                q = self.queue.lock();
                q.busy = false;
                if q.files.is_empty() {
                    self.idle.notify_all();
                }
            } else if q.stop {
                q.running = false;
                self.idle.notify_all();
                return;
            } else {
                self.work.wait(&mut q);
            }
        }
    }
}

/// The purger's thread: started by [`PurgeThread::start`]; on drop it deletes what is
/// queued, stops and is joined.
pub struct PurgeThread {
    purger: Arc<Purger>,
    thread: Option<JoinHandle<()>>,
}

impl PurgeThread {
    pub fn start() -> std::io::Result<PurgeThread> {
        let purger = Arc::new(Purger::default());
        purger.queue.lock().running = true;
        let p = purger.clone();
        let thread = std::thread::Builder::new()
            .name("halflife-purge".into())
            .spawn(move || p.run());
        match thread {
            Ok(t) => Ok(PurgeThread {
                purger,
                thread: Some(t),
            }),
            Err(e) => {
                purger.queue.lock().running = false;
                Err(e)
            }
        }
    }

    pub fn purger(&self) -> &Arc<Purger> {
        &self.purger
    }
}

impl Drop for PurgeThread {
    fn drop(&mut self) {
        self.purger.queue.lock().stop = true;
        self.purger.work.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_key::{make_internal_key, ValueKind};
    use crate::io::FileStorage;
    use crate::sst::block::{Block, BlockBuilder};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    fn file(dir: &std::path::Path, number: u64) -> PathBuf {
        let path = crate::filename::table_file_name(dir, number);
        std::fs::write(&path, b"x").unwrap();
        path
    }

    fn block() -> Arc<Block> {
        let mut b = BlockBuilder::new(16);
        b.add(&make_internal_key(b"k", 1, ValueKind::Value), b"v");
        Arc::new(Block::new(b.finish()).unwrap())
    }

    fn obsolete(
        path: PathBuf,
        number: u64,
        storage: &Arc<dyn Storage>,
        cache: &Arc<BlockCache>,
    ) -> ObsoleteFile {
        ObsoleteFile {
            number,
            path,
            storage: storage.clone(),
            cache: Some(cache.clone()),
        }
    }

    #[test]
    fn queued_files_are_deleted_on_the_purge_thread_and_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let cache = BlockCache::new(1 << 20);
        let erased_on = Arc::new(Mutex::new(Vec::new()));
        let on = erased_on.clone();
        cache.set_erase_listener(Box::new(move |_, _| {
            on.lock()
                .push(std::thread::current().name().map(str::to_string));
        }));
        let t = PurgeThread::start().unwrap();
        let mut paths = Vec::new();
        for n in 1..=20 {
            cache.insert(n, 0, block());
            let p = file(dir.path(), n);
            paths.push(p.clone());
            t.purger().submit(obsolete(p, n, &storage, &cache));
        }
        t.purger().wait_idle();
        assert!(paths.iter().all(|p| !p.exists()));
        assert!(cache.is_empty());
        let on = erased_on.lock();
        assert_eq!(on.len(), 20);
        assert!(on.iter().all(|n| n.as_deref() == Some("halflife-purge")));
    }

    #[test]
    fn a_stopped_purger_deletes_where_the_file_is_let_go_of() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let cache = BlockCache::new(1 << 20);
        let t = PurgeThread::start().unwrap();
        let purger = t.purger().clone();
        let queued = file(dir.path(), 1);
        purger.submit(obsolete(queued.clone(), 1, &storage, &cache));
        drop(t);
        // Stopping deleted what was queued; later files go at once, on this thread.
        assert!(!queued.exists());
        let later = file(dir.path(), 2);
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let here = std::thread::current().id();
        cache.set_erase_listener(Box::new(move |_, _| {
            assert_eq!(std::thread::current().id(), here);
            c.fetch_add(1, Relaxed);
        }));
        purger.submit(obsolete(later.clone(), 2, &storage, &cache));
        assert!(!later.exists());
        assert_eq!(count.load(Relaxed), 1);
        purger.wait_idle();
    }
}
