//! The engine's shared state, as every job of the database sees it: [`Inner`] (the open
//! database's parts, shared by the handle and the background threads), [`State`] (what the
//! main mutex guards), the [`ReadView`] readers take, and the small accessors the jobs
//! share. The job files (`write.rs`, `background.rs`, `read.rs`, ...) import it from here,
//! and the public handle (`mod.rs`) sits on top: nothing here calls into a job.

use super::recovery_report::RecoveryReport;
use super::throttle;
use super::write_queue::WriteQueue;
use crate::cache::{BlockCache, CacheCharge};
use crate::error::{Error, Result};
use crate::gc::pacer::GcPacer;
use crate::gc::placement::Placement;
use crate::gc::runtime::LifetimeRuntime;
use crate::gc::GcPolicy;
use crate::internal_key::{seek_key, SeqNo};
use crate::io::{IoCause, Storage};
use crate::memtable::{Memtable, ValueCopy};
use crate::options::Options;
use crate::stats::EngineCounters;
use crate::version::{Found, Version, VersionSet};
use crate::vlog::value_wal;
use crate::wal::LogWriter;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// How long a background thread or a waiter sleeps before it looks at the state again
/// when nothing woke it.
pub(crate) const IDLE_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// State guarded by the main mutex.
pub(crate) struct State {
    pub mem: Arc<Memtable>,
    /// Oldest first.
    pub imm: VecDeque<Arc<Memtable>>,
    pub versions: VersionSet,
    /// Table files inputs of a running compaction.
    pub busy_tables: HashSet<u64>,
    /// Value files a running GC job reads.
    pub busy_blobs: HashSet<u64>,
    /// Live snapshots: sequence number -> count.
    pub snapshots: BTreeMap<SeqNo, usize>,
    /// Value files an edit deleted while snapshots were live, each with the sequence
    /// number visible at its deletion (Titan's obsolete sequence): a snapshot older than
    /// that may still read records in it that no GC copied (write-back GC judges records
    /// by the newest version only), and the file need not be among those the snapshot
    /// pinned when it was taken (a later flush or the value log's open file made it).
    /// Held until no snapshot older than the deletion is left ([`Inner::release_kept`]).
    pub kept_for_snapshots: Vec<(SeqNo, Arc<crate::vlog::BlobFile>)>,
    pub bg_error: Option<String>,
    pub flushing: bool,
    pub running_compactions: usize,
    /// GC jobs running ([`crate::Options::background_gc`] at most).
    pub running_gc: usize,
    /// A checkpoint holds new GC jobs back (`db/checkpoint.rs`).
    pub gc_paused: bool,
    /// Manual compactions in progress hold back automatic ones.
    pub manual: bool,
    pub live_user_bytes: Option<u64>,
    /// Pointers compactions dropped into files an index-map GC job is collecting (see
    /// `gc::job::IndexMapJob`).
    /// Each with the value file that holds its record now (the job collecting that file
    /// settles it).
    pub gc_drops: Vec<(crate::vlog::ValuePointer, u64)>,
    /// Flushed L0 tables whose keys' previous writes are still to be looked up, oldest
    /// first ([`crate::gc::superseded`]).
    pub superseding: VecDeque<u64>,
    /// The flushed table whose keys are being looked up.
    pub finding_superseded: Option<u64>,
}

pub(crate) struct Inner {
    pub dir: PathBuf,
    pub opts: Options,
    pub storage: Arc<dyn Storage>,
    pub cache: Arc<BlockCache>,
    /// The index maps and the lifetime policies' tables, charged to `cache`
    /// ([`Inner::charge_memory`]).
    pub memory_charge: CacheCharge,
    /// Cache warming across flushes and compactions (paper 002).
    pub warming: crate::warming::Warming,
    pub gc: Box<dyn GcPolicy>,
    /// Chooses compactions (`tree.compaction_style`; under `Auto` the tree's current
    /// style, under `growth_factor = auto` the growth factor chosen so far).
    pub compaction: Box<dyn crate::compaction::CompactionStrategy>,
    /// Lifetime policies and TerarkDB: thresholds, model, trainer (else `None`).
    pub lifetime: Option<LifetimeRuntime>,
    pub state: Mutex<State>,
    /// Dropped memtables' chunks, for the next memtables.
    pub memtable_chunks: Arc<crate::memtable::ChunkPool>,
    /// The memtables and version readers use, republished by every change to them.
    pub read_view: parking_lot::RwLock<Arc<ReadView>>,
    /// Signalled whenever background work may have become possible or finished.
    pub bg_cv: Condvar,
    pub writers: WriteQueue,
    pub wal: Mutex<Option<LogWriter>>,
    /// WALs switched out whose last records may not be synced yet, with their numbers. A
    /// synced write syncs them before its own WAL (as RocksDB syncs every WAL not yet
    /// synced): otherwise a power cut could keep the synced record of the new WAL and lose
    /// the unsynced tail of the old one, a gap no recovery can bridge. Pruned once their
    /// memtables are flushed.
    pub older_wals: Mutex<Vec<(u64, LogWriter)>>,
    /// A WAL or value file was created since the directory was last synced: the next
    /// synced write syncs the directory too, or a power cut could take the new file's
    /// entry, and the synced records in it, with it.
    pub dir_unsynced: AtomicBool,
    /// With the value log as the WAL: the value file the write leader appends large values
    /// to ([`value_wal`]).
    pub value_wal: Mutex<value_wal::ActiveValueFiles>,
    /// Last sequence number assigned (only the write leader advances it).
    /// The latest time [`Inner::now_ms`] returned: expiry is judged by a clock that never
    /// goes back within a run (see there).
    pub clock_floor: AtomicU64,
    pub last_seq: AtomicU64,
    /// Last sequence number whose write is fully in the memtable.
    pub visible_seq: AtomicU64,
    /// Every write up to this sequence number is durable: the logs were synced after it
    /// was visible ([`super::write::sync_logs`]), or its memtable was flushed. A GC job
    /// whose dead records only such writes hide needs no sync of the logs
    /// ([`crate::gc::job::GcHost::make_durable`]). 0 at open: a replayed log may not have
    /// been synced before the process died.
    pub durable_seq: AtomicU64,
    pub counters: EngineCounters,
    /// The value files' space amplification when GC last picked (`f64` bits; 0 before),
    /// under a space-amplification target (also handed to `gc_pacer`).
    pub value_space_amp: AtomicU64,
    /// Delayed writes before a stop: the flush rate and the write leaders' pacing.
    pub throttle: throttle::WriteController,
    /// Writes paced to value-file GC, under a space-amplification target.
    pub gc_pacer: Option<GcPacer>,
    pub shutdown: AtomicBool,
    /// Set with `State::bg_error` (never cleared): the write path's check without the lock.
    pub bg_failed: AtomicBool,
    /// What the open that made this handle found and did.
    pub recovery: RecoveryReport,
    /// The lock file (`LOCK`), held while the database is open ([`super::recovery::lock_dir`]).
    pub(super) _lock: std::fs::File,
}

/// What a reader needs: the memtables (newest first) and the version, published together
/// (RocksDB's "super version") whenever one of them changes, so that a reader takes a
/// consistent set without the main lock, which flushes hold across manifest syncs.
pub(crate) struct ReadView {
    pub mems: Vec<Arc<crate::memtable::Memtable>>,
    pub version: Arc<Version>,
}

impl ReadView {
    pub fn take(inner: &Inner) -> Arc<ReadView> {
        inner.read_view.read().clone()
    }

    pub fn from_state(st: &State) -> ReadView {
        let mut mems = Vec::with_capacity(1 + st.imm.len());
        mems.push(st.mem.clone());
        mems.extend(st.imm.iter().rev().cloned());
        ReadView {
            mems,
            version: st.versions.current(),
        }
    }

    /// The newest version of `key` visible at `seq`, as a reader sees it at `now_ms`
    /// (an expired entry reads as a deletion: [`Found::as_of`]).
    pub fn lookup(&self, key: &[u8], seq: SeqNo, now_ms: u64) -> Result<Option<Found>> {
        self.lookup_as(key, seq, now_ms, ValueCopy::Whole)
    }

    /// [`ReadView::lookup`], copying out of a memtable only what `copy` asks for.
    pub fn lookup_as(
        &self,
        key: &[u8],
        seq: SeqNo,
        now_ms: u64,
        copy: ValueCopy,
    ) -> Result<Option<Found>> {
        let found = match self.in_memtables(key, seq, copy) {
            Some(f) => Some(f),
            None => self
                .version
                .get(key, &seek_key(key, seq), IoCause::ClientRead)?,
        };
        found.map(|f| Self::as_read(f, now_ms)).transpose()
    }

    /// [`ReadView::lookup`] in the memtables only: `None` if none holds a version of `key`
    /// visible at `seq` (the tree may). A memtable read needs no device read, so GC asks
    /// it where the tree's answer is known without a lookup.
    pub fn lookup_memtables(&self, key: &[u8], seq: SeqNo, now_ms: u64) -> Result<Option<Found>> {
        self.in_memtables(key, seq, ValueCopy::Whole)
            .map(|f| Self::as_read(f, now_ms))
            .transpose()
    }

    fn in_memtables(&self, key: &[u8], seq: SeqNo, copy: ValueCopy) -> Option<Found> {
        let f = self.mems.iter().find_map(|m| m.get_as(key, seq, copy))?;
        Some(Found {
            kind: f.kind,
            seq: f.seq,
            value: f.value,
            expire_at: None,
        })
    }

    fn as_read(f: Found, now_ms: u64) -> Result<Found> {
        f.as_of(std::path::Path::new("<tree>"), now_ms)
    }
}

impl Inner {
    /// The time expiry is judged by: the options' clock, but never earlier than a time this
    /// engine already used. A file dropped whole at time `t` holds values that expired by
    /// `t`; if the wall clock then stepped back (NTP), reading its pointers with the earlier
    /// time would find them unexpired and their file missing (a false corruption error).
    /// Time stands still instead until the clock passes `t` again.
    pub fn now_ms(&self) -> u64 {
        let now = self.opts.clock.now_ms();
        self.clock_floor.fetch_max(now, Ordering::SeqCst).max(now)
    }

    /// The compaction the strategy picks now from `v`, taking no table in `busy`.
    pub fn pick_compaction(
        &self,
        v: &Version,
        busy: &std::collections::HashSet<u64>,
    ) -> Option<crate::compaction::Compaction> {
        let forced_gc = self.gc.forced_compactions(v);
        self.compaction.pick(
            v,
            &crate::compaction::PickContext {
                busy,
                forced_gc: &forced_gc,
                space_amp_target: self.gc.space_amp_target(),
            },
        )
    }

    /// Charges what the engine holds in memory besides memtables and blocks to the block
    /// cache: the index maps `v` names and the lifetime policies' tables (table index and
    /// filter blocks charge themselves, [`crate::sst::Table`]). Refreshed after every
    /// background job, as these change only with flushes, compactions and GC.
    pub fn charge_memory(&self, v: &Version) {
        let maps: usize = v.maps.values().map(|m| m.heap_bytes()).sum();
        let tables = self.lifetime.as_ref().map_or(0, |rt| rt.memory_bytes());
        self.memory_charge.set(maps + tables);
    }

    /// The smallest sequence number a reader may still read at.
    pub fn smallest_snapshot(&self, st: &State) -> SeqNo {
        st.snapshots
            .keys()
            .next()
            .copied()
            .unwrap_or_else(|| self.visible_seq.load(Ordering::Acquire))
    }

    /// Publishes the current memtables and version to readers. Called with the state lock
    /// held after every change to either.
    pub fn publish(&self, st: &State) {
        *self.read_view.write() = Arc::new(ReadView::from_state(st));
    }

    /// Records a version edit and publishes the result.
    pub fn apply_edit(&self, st: &mut State, edit: crate::version::VersionEdit) -> Result<()> {
        self.apply_edit_with_maps(st, edit, Vec::new())
    }

    /// [`Inner::apply_edit`] for an edit adding the index maps `maps` (a GC job's outputs).
    pub fn apply_edit_with_maps(
        &self,
        st: &mut State,
        edit: crate::version::VersionEdit,
        maps: Vec<Arc<crate::vlog::IndexMap>>,
    ) -> Result<()> {
        let kept: Vec<_> = if st.snapshots.is_empty() {
            Vec::new()
        } else {
            let v = st.versions.current();
            edit.deleted_blobs
                .iter()
                .filter_map(|n| v.blobs.get(n).cloned())
                .collect()
        };
        let r = st.versions.log_and_apply_with_maps(edit, maps);
        if r.is_ok() && !kept.is_empty() {
            let at = self.visible_seq.load(Ordering::Acquire);
            st.kept_for_snapshots
                .extend(kept.into_iter().map(|f| (at, f)));
        }
        self.publish(st);
        r
    }

    /// The value files kept for snapshots that no live snapshot needs any more (none is
    /// older than their deletion), taken out of the state for the caller to drop once it
    /// has let go of the state lock (dropping the last reference deletes a file).
    pub fn release_kept(&self, st: &mut State) -> Vec<Arc<crate::vlog::BlobFile>> {
        let oldest = st.snapshots.keys().next().copied();
        let mut released = Vec::new();
        st.kept_for_snapshots.retain(|(at, f)| {
            let needed = oldest.is_some_and(|o| o < *at);
            if !needed {
                released.push(f.clone());
            }
            needed
        });
        released
    }

    /// A value file kept for snapshots ([`State::kept_for_snapshots`]), by number.
    pub fn kept_for_snapshot(&self, number: u64) -> Option<Arc<crate::vlog::BlobFile>> {
        self.state
            .lock()
            .kept_for_snapshots
            .iter()
            .find(|(_, f)| f.number == number)
            .map(|(_, f)| f.clone())
    }

    /// Where values go by predicted death, under the lifetime policies (and TerarkDB's,
    /// which places nothing); `None` for the others.
    pub fn placement(&self) -> Option<&dyn Placement> {
        self.lifetime.as_ref().map(|rt| rt as &dyn Placement)
    }

    /// What the value log's write path needs of the engine ([`value_wal`]), with the
    /// placement of each value it logs.
    pub fn value_log_context<'a>(
        &'a self,
        new_file_number: &'a dyn Fn() -> u64,
        placement: Option<value_wal::ValuePlacement<'a>>,
    ) -> value_wal::LogContext<'a> {
        value_wal::LogContext {
            dir: &self.dir,
            storage: &self.storage,
            min_blob_size: self.opts.vlog.min_blob_size,
            blob_file_size: self.opts.vlog.blob_file_size,
            compression: self.opts.vlog.value_compression,
            placement,
            new_file_number,
            dir_unsynced: &self.dir_unsynced,
            now_ms: self.now_ms(),
            expiry_window_divisor: self.opts.vlog.expiry_window_divisor,
        }
    }

    pub fn new_file_number(&self) -> u64 {
        self.state.lock().versions.new_file_number()
    }

    /// Waits until `done` holds of the state (woken by background work, and looking again
    /// every [`IDLE_WAIT`]); fails on a background error or at shutdown.
    pub fn wait_until(&self, done: impl Fn(&State) -> bool) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(e.clone()));
            }
            if done(&st) {
                return Ok(());
            }
            if self.shutdown.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            self.bg_cv.notify_all();
            self.bg_cv.wait_for(&mut st, IDLE_WAIT);
        }
    }

    /// Waits until every immutable memtable is flushed.
    pub fn wait_flushed(&self) -> Result<()> {
        self.wait_until(|st| st.imm.is_empty() && !st.flushing)
    }

    pub fn set_bg_error(&self, st: &mut State, e: &Error) {
        if st.bg_error.is_none() {
            st.bg_error = Some(e.to_string());
            self.bg_failed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        self.bg_cv.notify_all();
    }
}
