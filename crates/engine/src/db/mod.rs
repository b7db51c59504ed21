//! The database handle.
//!
//! Data path: a write is appended to the WAL and inserted into the memtable by the group-
//! commit leader ([`write`]); a full memtable becomes immutable and the flush thread writes
//! it to an L0 table (values split into value files by the GC policy); compaction threads
//! merge levels ([`background`]); a read looks in the memtable, the immutable memtables,
//! then the levels, and follows a value pointer into its value file ([`read`]). Opening
//! replays the manifest and the WALs and removes files no version refers to ([`recovery`]).

mod background;
pub mod checkpoint;
mod gc;
mod inner;
mod iter;
mod read;
mod readahead;
pub(crate) mod recovery;
mod recovery_report;
mod snapshot;
mod throttle;
pub mod updates;
mod wal_archive;
mod write;
mod write_queue;

/// Kept at these paths for the CLI and the tests (the names live in [`crate::filename`]).
pub use crate::filename::{LIFETIME_MODEL as MODEL_FILE, LOST_DIR};
pub use crate::stats::{GcJobRecord, LifetimeStats};
pub use iter::{Cursor, DbIter, Direction};
pub use recovery_report::RecoveryReport;
pub use snapshot::Snapshot;

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::internal_key::SeqNo;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::stats::{DbStats, EngineCounters, LevelStats, ValueFileStats};
use crate::version::Version;
use inner::Inner;
use parking_lot::Mutex;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

/// An open database. `Send + Sync`: share it between threads (e.g. in an `Arc`).
pub struct DB {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl DB {
    /// Opens (or creates) the database in `path`.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<DB> {
        opts.validate()?;
        let inner = Arc::new(recovery::open(path.as_ref(), opts)?);
        gc::settle_pending_gc(&inner)?;
        inner.charge_memory(&inner.state.lock().versions.current());
        let threads = background::start(&inner);
        Ok(DB {
            inner,
            threads: Mutex::new(threads),
        })
    }

    /// What this open found and did: WALs replayed, a torn tail discarded, damage passed
    /// over (point-in-time and skip modes), files deleted or moved into `lost/`.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b, &self.default_write_options())
    }

    pub fn put_opt(&self, key: &[u8], value: &[u8], o: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b, o)
    }

    /// A put that reads as not found once the options' clock reaches `expire_at_ms`
    /// (see [`WriteBatch::put_with_expiry`]).
    pub fn put_with_expiry(&self, key: &[u8], value: &[u8], expire_at_ms: u64) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_with_expiry(key, value, expire_at_ms);
        self.write(b, &self.default_write_options())
    }

    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b, &self.default_write_options())
    }

    pub fn delete_opt(&self, key: &[u8], o: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b, o)
    }

    /// Deletes every key in `[lower, upper)`: a tombstone per key live when it starts, in
    /// one atomic batch (readers see all of them or none); returns how many. Not
    /// RocksDB's range tombstone: it walks the range's keys (without reading values) and
    /// holds them in memory, and a key written into the range after the walk survives.
    pub fn delete_range(&self, lower: &[u8], upper: &[u8], o: &WriteOptions) -> Result<u64> {
        let keys = iter::live_keys(&self.inner, lower, upper)?;
        if keys.is_empty() {
            return Ok(0);
        }
        let mut b = WriteBatch::new();
        for k in &keys {
            b.delete(k);
        }
        self.write(b, o)?;
        Ok(keys.len() as u64)
    }

    fn default_write_options(&self) -> WriteOptions {
        WriteOptions {
            sync: self.inner.opts.wal.sync_writes,
        }
    }

    /// Applies `batch` atomically; returns once it is in the WAL (synced if `o.sync`) and
    /// visible to readers.
    pub fn write(&self, batch: WriteBatch, o: &WriteOptions) -> Result<()> {
        self.check_batch(&batch)?;
        write::write(&self.inner, batch, o.sync)
    }

    fn check_batch(&self, b: &WriteBatch) -> Result<()> {
        let o = &self.inner.opts;
        for e in b.iter() {
            if e.key.is_empty() {
                return Err(Error::EmptyKey);
            }
            if e.key.len() > o.max_key_size {
                return Err(Error::KeyTooLarge {
                    len: e.key.len(),
                    max: o.max_key_size,
                });
            }
            if e.payload().len() > o.max_value_size {
                return Err(Error::ValueTooLarge {
                    len: e.payload().len(),
                    max: o.max_value_size,
                });
            }
        }
        Ok(())
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        read::get(&self.inner, key, None)
    }

    /// Whether `key` has a live value, without reading it: a value kept in a value file is
    /// not read (a caller that only needs to know, such as a server counting the new fields
    /// of a hash, saves that read).
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        read::contains(&self.inner, key)
    }

    /// Reads `key` as of `snap`.
    pub fn get_at(&self, key: &[u8], snap: &Snapshot) -> Result<Option<Vec<u8>>> {
        read::get(&self.inner, key, Some(snap))
    }

    /// A consistent point-in-time view for `get_at` and `scan_at`.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(&self.inner)
    }

    /// Forward scan of the newest versions with user keys in the given bounds, with the
    /// default read-ahead of separated values ([`ReadOptions`]).
    pub fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<DbIter> {
        self.scan_opt(lower, upper, None, &ReadOptions::default())
    }

    pub fn scan_at(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        snap: &Snapshot,
    ) -> Result<DbIter> {
        self.scan_opt(lower, upper, Some(snap), &ReadOptions::default())
    }

    /// A scan as of `snap` (else the newest versions) with the read-ahead `opts` asks for.
    pub fn scan_opt(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        snap: Option<&Snapshot>,
        opts: &ReadOptions,
    ) -> Result<DbIter> {
        self.scan_dir(lower, upper, snap, opts, Direction::Forward)
    }

    /// Reverse scan: the newest versions with user keys in the given bounds, in descending
    /// key order.
    pub fn scan_rev(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<DbIter> {
        self.scan_dir(
            lower,
            upper,
            None,
            &ReadOptions::default(),
            Direction::Reverse,
        )
    }

    /// A scan either way, as of `snap` (else the newest versions), with the read-ahead
    /// `opts` asks for.
    pub fn scan_dir(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        snap: Option<&Snapshot>,
        opts: &ReadOptions,
        dir: Direction,
    ) -> Result<DbIter> {
        iter::DbIter::new(&self.inner, lower, upper, snap, opts, dir)
    }

    /// The keys that start with `prefix`, either way ([`prefix_bounds`]).
    pub fn scan_prefix(
        &self,
        prefix: &[u8],
        snap: Option<&Snapshot>,
        dir: Direction,
    ) -> Result<DbIter> {
        let (lower, upper) = prefix_bounds(prefix);
        self.scan_dir(
            as_bound(&lower),
            as_bound(&upper),
            snap,
            &ReadOptions::default(),
            dir,
        )
    }

    /// A cursor over the given bounds as of `snap` (else the newest versions at this call):
    /// seeks to any key and moves both ways ([`Cursor`]); not positioned until a seek.
    pub fn cursor(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        snap: Option<&Snapshot>,
        opts: &ReadOptions,
    ) -> Result<Cursor> {
        iter::Cursor::new(&self.inner, lower, upper, snap, opts)
    }

    /// Estimated number of live keys, from counts kept in memory (no data is read): the
    /// entries of the memtables and table files, less two per deletion (the tombstone and
    /// the value it hides), as RocksDB's `estimate-num-keys`. Versions of a key not yet
    /// merged by compaction are counted once each.
    pub fn estimate_num_keys(&self) -> u64 {
        let st = self.inner.state.lock();
        let mut n = st.mem.len() as i64;
        n += st.imm.iter().map(|m| m.len() as i64).sum::<i64>();
        let v = st.versions.current();
        for level in 0..v.num_levels() {
            for f in v.runs(level).iter().flatten() {
                n += f.meta.entries as i64 - 2 * f.meta.deletions as i64;
            }
        }
        n.max(0) as u64
    }

    /// Makes every write acknowledged so far durable, as a synced write does (the value
    /// files of the value log as the WAL, every WAL not yet synced, the directory entries
    /// of new logs): for callers that write with `sync: false` and sync on their own
    /// schedule (a server's `appendfsync everysec`).
    pub fn sync_wal(&self) -> Result<()> {
        write::sync_logs(&self.inner)
    }

    /// Flushes the memtable to a table file and waits for it.
    pub fn flush(&self) -> Result<()> {
        write::force_switch(&self.inner)?;
        self.inner.wait_flushed()
    }

    /// Compacts every level overlapping [start, end] down to the last level it reaches.
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        background::compact_range(&self.inner, start, end)
    }

    /// Waits until no flush, compaction or GC is pending or running.
    pub fn wait_idle(&self) -> Result<()> {
        background::wait_idle(&self.inner)
    }

    /// Exact live user bytes (key + value of each newest visible version), by a scan of the
    /// tree that does not read value files. Also recorded for `stats()`.
    pub fn measure_live_bytes(&self) -> Result<u64> {
        let n = iter::live_bytes(&self.inner)?;
        self.inner.state.lock().live_user_bytes = Some(n);
        Ok(n)
    }

    pub fn stats(&self) -> DbStats {
        stats(&self.inner)
    }

    /// The write batches committed from sequence number `seq` on (the batch holding `seq`
    /// first), with their first sequence numbers, up to the last write visible now: the
    /// change stream a replica follows after copying a checkpoint ([`updates`]). Holds the
    /// live WALs, and the archived ones while `Options::wal.wal_ttl_seconds` or
    /// `wal_size_limit` keep them; a stream that cannot give every write from `seq` fails
    /// with [`Error::UpdatesGone`].
    pub fn updates_since(&self, seq: SeqNo) -> Result<updates::Updates> {
        updates::since(&self.inner, seq)
    }

    /// The sequence number of the last write visible to readers.
    pub fn latest_sequence_number(&self) -> SeqNo {
        self.inner
            .visible_seq
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Makes a consistent, openable copy of the database in the new directory `dir`, hard
    /// links where the file system allows: every write acknowledged before the call is in
    /// it ([`checkpoint`]).
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<checkpoint::CheckpointInfo> {
        checkpoint::create(&self.inner, dir.as_ref())
    }

    /// For checkpoints and backups, which pin the live files under the state lock.
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// The current version (for tools and tests).
    pub fn version(&self) -> Arc<Version> {
        self.inner.state.lock().versions.current()
    }

    /// Stops background work and closes the files. Unflushed writes stay in the WAL (or are
    /// flushed now if the WAL is off).
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        let inner = &self.inner;
        let mut result = Ok(());
        if !inner.opts.wal.use_wal && !inner.shutdown.load(Ordering::SeqCst) {
            result = self.flush();
        }
        {
            let _st = inner.state.lock();
            inner.shutdown.store(true, Ordering::SeqCst);
            inner.bg_cv.notify_all();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        if let Err(e) = inner.value_wal.lock().flush(false) {
            result = result.and(Err(e));
        }
        if let Some(w) = inner.wal.lock().as_mut() {
            if let Err(e) = w.flush() {
                result = result.and(Err(e));
            }
        }
        result
    }
}

/// The bounds of the keys that start with `prefix`: from the prefix itself up to (not
/// including) the first key past all of them, the prefix with its last byte below 0xff
/// incremented and what follows cut; unbounded above if every byte is 0xff.
pub fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let upper = match prefix.iter().rposition(|&b| b != 0xff) {
        Some(i) => {
            let mut u = prefix[..=i].to_vec();
            u[i] += 1;
            Bound::Excluded(u)
        }
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), upper)
}

fn as_bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Drop for DB {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn stats(inner: &Inner) -> DbStats {
    let st = inner.state.lock();
    let v = st.versions.current();
    let mem_bytes: usize =
        st.mem.memory_bytes() + st.imm.iter().map(|m| m.memory_bytes()).sum::<usize>();
    let live = st.live_user_bytes;
    drop(st);
    let c = &inner.counters;
    let io = inner.storage.stats().snapshot();
    let user = EngineCounters::get(&c.user_bytes_written);
    let wal_bytes = inner
        .storage
        .list(&inner.dir)
        .unwrap_or_default()
        .iter()
        .filter(|p| crate::filename::number_of(p, crate::filename::FileKind::Wal).is_some())
        .filter_map(|p| inner.storage.file_size(p).ok())
        .sum();
    let tree_bytes = v.tree_bytes();
    let value_file_bytes = v.blob_bytes();
    let index_map_bytes: u64 = v.maps.values().map(|m| m.memory_bytes()).sum();
    let disk_bytes = tree_bytes + value_file_bytes + wal_bytes + index_map_bytes;
    let (wal_archive_files, wal_archive_bytes) = wal_archive::usage(&*inner.storage, &inner.dir);
    DbStats {
        policy: inner.opts.vlog.gc.name().to_string(),
        placement: inner
            .lifetime
            .as_ref()
            .map_or("none", |rt| rt.placement_name())
            .to_string(),
        write_amplification: if user == 0 {
            0.0
        } else {
            io.total_written() as f64 / user as f64
        },
        io,
        user_bytes_written: user,
        puts: EngineCounters::get(&c.puts),
        deletes: EngineCounters::get(&c.deletes),
        gets: EngineCounters::get(&c.gets),
        scan_reseeks: EngineCounters::get(&c.scan_reseeks),
        live_user_bytes: live,
        space_amplification: live
            .filter(|&l| l > 0)
            .map(|l| disk_bytes as f64 / l as f64),
        disk_bytes,
        tree_bytes,
        value_file_bytes,
        index_map_bytes,
        wal_bytes,
        wal_archive_files,
        wal_archive_bytes,
        memtable_bytes: mem_bytes as u64,
        stall_micros: EngineCounters::get(&c.stall_micros),
        stall_count: EngineCounters::get(&c.stall_count),
        gc_delay_micros: EngineCounters::get(&c.gc_delay_micros),
        gc_delay_count: EngineCounters::get(&c.gc_delay_count),
        gc_write_rate: inner.gc_pacer.as_ref().and_then(|p| p.delayed_rate()),
        stall_max_micros: EngineCounters::get(&c.stall_max_micros),
        delay_micros: EngineCounters::get(&c.delay_micros),
        delay_count: EngineCounters::get(&c.delay_count),
        write_groups: EngineCounters::get(&c.write_groups),
        flushes: EngineCounters::get(&c.flushes),
        compactions: EngineCounters::get(&c.compactions),
        gc_jobs: EngineCounters::get(&c.gc_jobs),
        gc_relocated_bytes: EngineCounters::get(&c.gc_relocated_bytes),
        gc_log_syncs: EngineCounters::get(&c.gc_log_syncs),
        gc_log_syncs_skipped: EngineCounters::get(&c.gc_log_syncs_skipped),
        gc_cpu_micros: EngineCounters::get(&c.gc_cpu_micros),
        gc_relocated_expiring_bytes: EngineCounters::get(&c.gc_relocated_expiring_bytes),
        gc_writeback_entries: EngineCounters::get(&c.gc_writeback_entries),
        expired_entries: EngineCounters::get(&c.expired_entries),
        expired_value_files: EngineCounters::get(&c.expired_value_files),
        merge_amplification: match EngineCounters::get(&c.merge_amp_count) {
            0 => None,
            n => Some(EngineCounters::get(&c.merge_amp_micros) as f64 / 1e6 / n as f64),
        },
        merge_amplification_bytes: match EngineCounters::get(&c.merge_amp_count) {
            0 => None,
            n => Some(EngineCounters::get(&c.merge_amp_bytes_micros) as f64 / 1e6 / n as f64),
        },
        levels: v
            .levels
            .iter()
            .enumerate()
            .map(|(level, f)| LevelStats {
                level,
                files: f.len(),
                bytes: v.level_bytes(level),
            })
            .collect(),
        value_files: v
            .blobs
            .values()
            .map(|b| ValueFileStats {
                number: b.number,
                bytes: b.size,
                entries: b.entries,
                live_bytes: b.live_bytes(),
                garbage_bytes: b.garbage_bytes(),
            })
            .collect(),
        cache: inner.cache.stats(),
        lifetime: inner.lifetime.as_ref().map(|rt| rt.stats(&v)),
        warming: inner.warming.stats(),
        shape: inner.compaction.shape_choice(),
        tree_style: inner.compaction.style_choice(),
    }
}
