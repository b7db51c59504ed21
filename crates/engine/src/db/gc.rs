//! The engine side of value-file GC; what is collected, when, and where each value goes
//! is [`crate::gc`]'s, against the narrow hosts it defines.
//!
//! * A GC thread's turn ([`gc_one`]): the policy picks files, the policy's job
//!   ([`gc_job`]) collects them against the engine ([`EngineGcHost`]), whose write-back of
//!   relocated pointers goes through the write path ([`write_back`]).
//! * The superseded finder's thread ([`find_superseded`]): the garbage each flush made,
//!   found after it is installed.
//! * After every flush, compaction and GC job: value files whose every record is garbage
//!   are released unread ([`release_dead_value_files`]), index maps no table resolves
//!   through any more are dropped ([`drop_unneeded_maps`]), and the value files' space
//!   amplification is published to the write path's pacing
//!   ([`Inner::publish_space_amp`]).
//! * At open: the outputs of a write-back job a crash interrupted are settled
//!   ([`settle_pending_gc`]).

use super::inner::{Inner, ReadView, State};
use super::write_queue::CheckedWriteback;
use super::{read, write};
use crate::error::{Error, Result};
use crate::gc::job::{GcHost, GcJob, IndexMapJob, Install, Liveness, Record, WriteBack, Writeback};
use crate::gc::superseded::{Finder, FinderHost};
use crate::internal_key::{SeqNo, ValueKind};
use crate::io::{IoCause, Storage};
use crate::stats::EngineCounters;
use crate::version::{Version, VersionEdit};
use crate::vlog::{ValueFileWriter, ValuePointer};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// GC relocations are checked and installed this many at a time, each chunk a write of
/// its own, so that a user write queued behind one waits for one chunk, not a whole
/// file's relocations. With 1024, waits behind a chunk were a visible part of the update
/// p99.9 (docs/bench.md, "What the p99.9 is made of").
const WRITEBACK_CHUNK: usize = 256;

/// How the policy collects value files: with index maps where it has a lifetime runtime
/// (TerarkDB and the lifetime policies, which place the copies), else by write-back.
fn gc_job(inner: &Inner) -> Box<dyn GcJob + '_> {
    match &inner.lifetime {
        Some(rt) => Box::new(IndexMapJob {
            placement: rt,
            early: &rt.early,
            recent: &rt.recent,
        }),
        None => Box::new(WriteBack),
    }
}

/// One standalone GC job: collects the value files the policy picks ([`gc_job`]).
pub(super) fn gc_one(inner: &Arc<Inner>) -> Result<bool> {
    let files = {
        let mut st = inner.state.lock();
        if st.gc_paused || st.bg_error.is_some() {
            return Ok(false);
        }
        // Expired files go whole first: GC never picks them to copy what is left.
        release_dead_value_files(inner, &mut st)?;
        let v = st.versions.current();
        let mut picked = inner.pick_gc(&v, &st.busy_blobs);
        // Index-map GC scans its inputs in file-number order (maps are sorted by source).
        picked.sort_unstable();
        if picked.is_empty() {
            return Ok(false);
        }
        st.running_gc += 1;
        st.busy_blobs.extend(picked.iter().copied());
        let files = picked
            .iter()
            .filter_map(|n| v.blobs.get(n).cloned())
            .collect::<Vec<_>>();
        (files, st.snapshots.keys().copied().collect::<Vec<_>>())
    };
    let (files, snapshots) = files;
    let numbers: Vec<u64> = files.iter().map(|f| f.number).collect();
    let host = EngineGcHost {
        inner,
        snapshots: &snapshots,
        files: &numbers,
    };
    let cpu = thread_cpu_micros();
    let r = gc_job(inner).run(&host, &files);
    EngineCounters::add(
        &inner.counters.gc_cpu_micros,
        thread_cpu_micros().saturating_sub(cpu),
    );
    // Let go of the collected files before reporting the job done, so that a waiter sees
    // them gone from disk.
    drop(files);
    let mut st = inner.state.lock();
    st.running_gc -= 1;
    // Drops into its files a failed job did not settle have no job to settle them.
    st.gc_drops.retain(|d| !numbers.contains(&d.1));
    for n in numbers {
        st.busy_blobs.remove(&n);
    }
    inner.bg_cv.notify_all();
    r?;
    EngineCounters::add(&inner.counters.gc_jobs, 1);
    release_dead_value_files(inner, &mut st)?;
    Ok(true)
}

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`), in microseconds.
fn thread_cpu_micros() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec the call writes; the clock id is a constant.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
}

/// The engine as a GC job sees it ([`GcHost`]), with the snapshots live when the job
/// started (a record only they read is kept) and the files it collects.
struct EngineGcHost<'a> {
    inner: &'a Arc<Inner>,
    snapshots: &'a [SeqNo],
    files: &'a [u64],
}

impl GcHost for EngineGcHost<'_> {
    fn is_live(&self, key: &[u8], ptr: &ValuePointer) -> Result<bool> {
        let inner = self.inner;
        let seq = inner.visible_seq.load(Ordering::Acquire);
        let view = ReadView::take(inner);
        read::points_at(inner, &view, key, seq, ptr)
    }

    fn create_value_file(&self) -> Result<(PathBuf, ValueFileWriter)> {
        let inner = self.inner;
        ValueFileWriter::create(
            &*inner.storage,
            &inner.dir,
            inner.new_file_number(),
            IoCause::GcWrite,
            inner.opts.vlog.value_compression,
        )
    }

    fn remove_file(&self, path: &Path) {
        let _ = self.inner.storage.remove(path);
    }

    fn apply(&self, edit: VersionEdit) -> Result<()> {
        self.inner.apply_edit(&mut self.inner.state.lock(), edit)
    }

    fn write_back(&self, entries: Vec<Writeback>) -> Result<Vec<bool>> {
        write_back(self.inner, entries)
    }

    fn make_durable(&self, hidden_by: SeqNo) -> Result<()> {
        let c = &self.inner.counters;
        if hidden_by <= self.inner.durable_seq.load(Ordering::Acquire) {
            EngineCounters::add(&c.gc_log_syncs_skipped, 1);
            return Ok(());
        }
        EngineCounters::add(&c.gc_log_syncs, 1);
        // The pointers went through the WAL unsynced, and the lookups saw writes not yet
        // synced. Without a WAL, only a flushed table keeps them.
        if self.inner.opts.wal.use_wal {
            write::sync_logs(self.inner)
        } else {
            write::force_switch(self.inner)?;
            self.inner.wait_flushed()
        }
    }

    fn relocated(&self, bytes: u64, from_expiring: bool) {
        let c = &self.inner.counters;
        EngineCounters::add(&c.gc_relocated_bytes, bytes);
        if from_expiring {
            EngineCounters::add(&c.gc_relocated_expiring_bytes, bytes);
        }
    }

    fn blob_file_size(&self) -> u64 {
        self.inner.opts.vlog.blob_file_size
    }

    fn dir(&self) -> &Path {
        &self.inner.dir
    }

    fn storage(&self) -> &Arc<dyn Storage> {
        &self.inner.storage
    }

    fn visible_seq(&self) -> SeqNo {
        self.inner.visible_seq.load(Ordering::Acquire)
    }

    fn version(&self) -> Arc<Version> {
        self.inner.state.lock().versions.current()
    }

    fn liveness(&self, records: &[Record], seq: SeqNo) -> Result<Vec<Liveness>> {
        let inner = self.inner;
        let view = ReadView::take(inner);
        let now = inner.now_ms();
        let found = crate::io::parallel::map_in_parallel(
            crate::io::parallel::Pool::Gc,
            records,
            |(_, key, _)| view.lookup(key, seq, now),
        )?;
        let mut out = Vec::with_capacity(records.len());
        for ((ptr, key, _), latest) in records.iter().zip(found) {
            out.push(if read::found_points_at(inner, &view, &latest, ptr)? {
                Liveness::Live(latest.expect("points_at implies found"))
            } else if read::needed_by_snapshot(inner, &view, key, self.snapshots, ptr)? {
                Liveness::ForSnapshot
            } else {
                Liveness::Dead(latest.map_or(0, |f| f.seq))
            });
        }
        Ok(out)
    }

    fn hidden_by_memtable(
        &self,
        key: &[u8],
        ptr: &ValuePointer,
        seq: SeqNo,
    ) -> Result<Option<SeqNo>> {
        let inner = self.inner;
        let view = ReadView::take(inner);
        let Some(newest) = view.lookup_memtables(key, seq, inner.now_ms())? else {
            return Ok(None);
        };
        let by = newest.seq;
        let hidden = !read::found_points_at(inner, &view, &Some(newest), ptr)?
            && !read::needed_by_snapshot(inner, &view, key, self.snapshots, ptr)?;
        Ok(hidden.then_some(by))
    }

    fn install_with_maps(&self, install: &mut Install) -> Result<()> {
        let inner = self.inner;
        let mut st = inner.state.lock();
        let (drops, others): (Vec<_>, Vec<_>) = std::mem::take(&mut st.gc_drops)
            .into_iter()
            .partition(|d| self.files.contains(&d.1));
        st.gc_drops = others;
        let drops = drops.into_iter().map(|d| d.0).collect();
        let current = st.versions.current();
        install(&current, drops, &mut |edit, maps| {
            inner.apply_edit_with_maps(&mut st, edit, maps)
        })?;
        drop_unneeded_maps(inner, &mut st)
    }
}

/// Writes back relocated pointers; returns which ones were installed (a key rewritten
/// by the user since GC read it keeps its newer value).
///
/// Whether a key still points at the old record takes a point lookup, which may read
/// table blocks from disk. Made in the WAL stage, where no write may overtake the check,
/// the lookups of one value file's relocations (thousands) held every user write queued
/// behind them: 80-640 ms per GC job (docs/bench.md, "Tails"). So the lookups run here,
/// outside the queue, as of a sequence number; in the WAL stage only the writes made
/// since are looked for, in the memtables, which hold all of them unless one was flushed
/// meanwhile (then the chunk is looked up again in full, as before).
pub(crate) fn write_back(inner: &Arc<Inner>, entries: Vec<Writeback>) -> Result<Vec<bool>> {
    let mut flags = Vec::with_capacity(entries.len());
    let mut rest = entries.into_iter().peekable();
    while rest.peek().is_some() {
        let chunk = check_writebacks(inner, rest.by_ref().take(WRITEBACK_CHUNK).collect())?;
        flags.extend(write::write_checked_back(inner, chunk)?);
    }
    Ok(flags)
}

/// Looks up, outside the write queue, whether each key still points at its old record.
fn check_writebacks(inner: &Inner, entries: Vec<Writeback>) -> Result<CheckedWriteback> {
    // The active memtable before the sequence number: a write after `seq` was published
    // after it, so into this memtable or a later one (a switch publishes every write
    // before it first). The lookups use a view taken after `seq`, which holds every
    // write up to it.
    let mem = ReadView::take(inner).mems[0].clone();
    let seq = inner.visible_seq.load(Ordering::Acquire);
    let view = ReadView::take(inner);
    let now = inner.now_ms();
    let mut checked = Vec::with_capacity(entries.len());
    for e in entries {
        let still = read::points_at_old(inner, &view.lookup(&e.0, seq, now)?, &e.1)?;
        checked.push((e, still));
    }
    Ok(CheckedWriteback {
        entries: checked,
        seq,
        mem,
    })
}

/// Looks up the previous writes of the oldest queued flushed table's keys
/// ([`crate::gc::superseded`]); `false` when nothing is queued.
pub(super) fn find_superseded(inner: &Arc<Inner>) -> Result<bool> {
    let Some(rt) = inner.lifetime.as_ref() else {
        return Ok(false);
    };
    let (table, v) = {
        let mut st = inner.state.lock();
        if st.finding_superseded.is_some() || st.bg_error.is_some() {
            return Ok(false);
        }
        let Some(number) = st.superseding.pop_front() else {
            return Ok(false);
        };
        let v = st.versions.current();
        let Some(table) = v.levels[0].iter().find(|f| f.number() == number).cloned() else {
            // Compacted before its turn: compaction counts what it hid, when it reaches
            // the previous writes; until then, no file existing now has all its garbage
            // known.
            rt.count_superseded_table(false);
            rt.early.coverage.lose_below(st.versions.next_file_number());
            return Ok(true);
        };
        st.finding_superseded = Some(number);
        (table, v)
    };
    let result = (|| -> Result<()> {
        let finder = Finder {
            early: &rt.early,
            recent: &rt.recent,
        };
        let gone = !finder.find(&**inner, &table, &v)?;
        rt.count_superseded_table(!gone);
        if gone {
            let st = inner.state.lock();
            rt.early.coverage.lose_below(st.versions.next_file_number());
        }
        // Files the table's writes left wholly dead go now, not at the next job.
        let mut st = inner.state.lock();
        release_dead_value_files(inner, &mut st)?;
        inner.publish_space_amp(&st.versions.current());
        Ok(())
    })();
    let mut st = inner.state.lock();
    st.finding_superseded = None;
    inner.bg_cv.notify_all();
    drop(st);
    result.map(|()| true)
}

/// The engine as the superseded finder sees it.
impl FinderHost for Inner {
    fn dir(&self) -> &Path {
        &self.dir
    }

    fn with_current(&self, f: &mut dyn FnMut(&Version, SeqNo)) {
        let st = self.state.lock();
        f(&st.versions.current(), self.smallest_snapshot(&st));
    }
}

/// Drops value files whose every record is garbage (no reader can reach any of them):
/// counted by compaction, known by position to the lifetime runtime, or expired (the
/// file holds only values with an expiry and the clock passed the latest of them: every
/// entry pointing into it reads as a deletion, so it goes unread, [`crate::expiry`]).
/// The edit is synced to the manifest before the file is unlinked (when its last reader
/// lets go), so recovery never finds a file gone that the manifest still names.
pub(crate) fn release_dead_value_files(inner: &Inner, st: &mut State) -> Result<()> {
    let v = st.versions.current();
    let now = inner.now_ms();
    let dead_by_position =
        |b: &crate::vlog::BlobFile| inner.lifetime.as_ref().is_some_and(|rt| rt.all_garbage(b));
    let expired = |b: &crate::vlog::BlobFile| b.expiry.all_expired(now);
    let mut expired_files = 0;
    let dead: Vec<u64> = v
        .blobs
        .values()
        .filter(|b| !st.busy_blobs.contains(&b.number))
        .filter(|b| {
            let e = expired(b);
            expired_files += u64::from(e);
            e || b.all_garbage() || dead_by_position(b)
        })
        .map(|b| b.number)
        .collect();
    EngineCounters::add(&inner.counters.expired_value_files, expired_files);
    if dead.is_empty() {
        return Ok(());
    }
    inner.apply_edit(
        st,
        VersionEdit {
            deleted_blobs: dead,
            ..Default::default()
        },
    )?;
    inner.bg_cv.notify_all();
    Ok(())
}

/// Drops index maps no table can resolve through any more.
pub(crate) fn drop_unneeded_maps(inner: &Inner, st: &mut State) -> Result<()> {
    let unneeded = st.versions.current().unneeded_maps();
    if unneeded.is_empty() {
        return Ok(());
    }
    inner.apply_edit(
        st,
        VersionEdit {
            deleted_maps: unneeded,
            ..Default::default()
        },
    )
}

impl Inner {
    /// The value files the GC policy collects next, knowing the garbage flush found early.
    pub(crate) fn pick_gc(&self, v: &Version, busy: &std::collections::HashSet<u64>) -> Vec<u64> {
        let now = self.last_seq.load(Ordering::Acquire);
        let early = self.lifetime.as_ref().map(|rt| &rt.early);
        if let Some(e) = early {
            e.retain(|n| v.blobs.contains_key(&n));
        }
        self.publish_space_amp(v);
        self.gc.pick_gc_with(v, busy, now, early)
    }

    /// Measures the value files' space amplification in `v` (under a target) for the write
    /// path's pacing: when GC picks, and when the finder has found a table's garbage
    /// (a GC job can run for seconds; the garbage the flushes make meanwhile counts).
    pub(crate) fn publish_space_amp(&self, v: &Version) {
        let early = self.lifetime.as_ref().map(|rt| &rt.early);
        if let Some(amp) = self.gc.space_amp(v, early) {
            self.value_space_amp.store(amp.to_bits(), Ordering::Relaxed);
            if let Some(p) = &self.gc_pacer {
                p.observe(amp, std::time::Instant::now());
            }
        }
    }
}

/// Settles GC outputs left pending by a process that died between installing them and
/// finishing the write-back: every record the tree does not point at is garbage. Runs at
/// open, before background threads start.
pub(crate) fn settle_pending_gc(inner: &Arc<Inner>) -> Result<()> {
    let pending: Vec<_> = {
        let st = inner.state.lock();
        st.versions
            .current()
            .blobs
            .values()
            .filter(|b| b.is_pending())
            .cloned()
            .collect()
    };
    if pending.is_empty() {
        return Ok(());
    }
    // Every version of a key counts, not only the newest: a written-back pointer that a
    // later write superseded is garbage that compaction counts when it drops it. Open has
    // flushed everything it replayed, so the tables hold every write still there.
    let v = inner.state.lock().versions.current();
    let mut tables: Vec<Box<dyn crate::sst::InternalIterator>> = Vec::new();
    for f in v.levels.iter().flatten() {
        tables.push(Box::new(f.table()?.iter(IoCause::GcRead)));
    }
    let mut tree = crate::sst::MergingIterator::new(tables);
    let mut edit = VersionEdit::default();
    for f in &pending {
        let (mut bytes, mut entries) = (0u64, 0u64);
        let mut r = f.scan(IoCause::GcRead)?;
        while let Some((ptr, key, _)) = r.next_record()? {
            if !written_back(inner, &mut tree, key, &ptr)? {
                bytes += ptr.size as u64;
                entries += 1;
            }
        }
        // No version points at these: never written back, or written back and dropped
        // since by a flush or compaction, which counted them already (a record is pointed
        // at by its one write-back at most). The file's garbage becomes this count.
        edit.blob_garbage.push((
            f.number,
            bytes.saturating_sub(f.garbage_bytes()),
            entries.saturating_sub(f.garbage_entries()),
        ));
        edit.gc_settled.push(f.number);
    }
    let mut st = inner.state.lock();
    inner.apply_edit(&mut st, edit)?;
    release_dead_value_files(inner, &mut st)
}

/// Whether some version of `key` in `tree` is a pointer to `ptr`.
fn written_back(
    inner: &Inner,
    tree: &mut crate::sst::MergingIterator,
    key: &[u8],
    ptr: &ValuePointer,
) -> Result<bool> {
    use crate::internal_key::{make_internal_key, parse_internal_key, KIND_SEEK, MAX_SEQ};
    use crate::sst::InternalIterator;
    tree.seek(&make_internal_key(key, MAX_SEQ, KIND_SEEK))?;
    while tree.valid() {
        let Some(p) = parse_internal_key(tree.key()) else {
            break;
        };
        if p.user_key != key {
            break;
        }
        let s = crate::expiry::split(p.kind, tree.value()).ok_or_else(|| {
            Error::corruption(&inner.dir, "expiring entry shorter than its expiry time")
        })?;
        if s.kind == ValueKind::Pointer && ValuePointer::decode(&inner.dir, s.payload)?.0 == *ptr {
            return Ok(true);
        }
        tree.next()?;
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{GcPolicyConfig, Options, ValueLogOptions};
    use crate::vlog::BlobFile;
    use crate::DB;

    /// Titan's write-back GC collecting files from `garbage_ratio` on, every value of 100
    /// bytes or more separated; at a ratio of 1 no GC job runs (a wholly dead file is
    /// released, not collected).
    fn db(dir: &Path, garbage_ratio: f64) -> DB {
        let o = Options {
            vlog: ValueLogOptions {
                min_blob_size: 100,
                gc: GcPolicyConfig::Titan { garbage_ratio },
                ..Default::default()
            },
            ..Options::default()
        };
        DB::open(dir, o).unwrap()
    }

    fn value(tag: &str) -> Vec<u8> {
        let mut v = tag.as_bytes().to_vec();
        v.resize(200, b'.');
        v
    }

    /// The only value file of the current version.
    fn only_file(db: &DB) -> Arc<BlobFile> {
        let v = db.inner.state.lock().versions.current();
        assert_eq!(v.blobs.len(), 1, "{:?}", v.blobs.keys().collect::<Vec<_>>());
        v.blobs.values().next().unwrap().clone()
    }

    fn records(f: &BlobFile) -> Vec<Record> {
        let mut r = f.scan(IoCause::GcRead).unwrap();
        let mut out = Vec::new();
        while let Some((p, k, v)) = r.next_record().unwrap() {
            out.push((p, k.to_vec(), v.to_vec()));
        }
        out
    }

    /// Copies `records` into a new value file through the host, as a write-back job does,
    /// and installs it pending; returns the write-backs.
    fn copy(host: &EngineGcHost, records: &[Record]) -> Vec<Writeback> {
        let (_, mut w) = host.create_value_file().unwrap();
        let copies: Vec<Writeback> = records
            .iter()
            .map(|(p, k, v)| (k.clone(), *p, w.add(k, v).unwrap()))
            .collect();
        let meta = w.finish().unwrap();
        host.apply(VersionEdit {
            gc_pending: vec![meta.number],
            added_blobs: vec![meta],
            ..Default::default()
        })
        .unwrap();
        copies
    }

    fn host<'a>(db: &'a DB, snapshots: &'a [SeqNo], files: &'a [u64]) -> EngineGcHost<'a> {
        EngineGcHost {
            inner: &db.inner,
            snapshots,
            files,
        }
    }

    #[test]
    fn liveness_tells_live_records_from_those_only_a_snapshot_reads_and_dead_ones() {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path(), 1.0);
        for k in ["a", "b", "c", "d"] {
            db.put(k.as_bytes(), &value(k)).unwrap();
        }
        db.flush().unwrap();
        db.delete(b"c").unwrap();
        db.put(b"d", b"small").unwrap();
        let snap = db.snapshot();
        db.put(b"b", b"small").unwrap();
        let f = only_file(&db);
        let recs = records(&f);
        let snapshots: Vec<SeqNo> = db.inner.state.lock().snapshots.keys().copied().collect();
        let h = host(&db, &snapshots, &[]);
        let found = h.liveness(&recs, h.visible_seq()).unwrap();
        let got: Vec<(&[u8], &str)> = recs
            .iter()
            .zip(&found)
            .map(|((_, k, _), l)| {
                let l = match l {
                    Liveness::Live(_) => "live",
                    Liveness::ForSnapshot => "snapshot",
                    Liveness::Dead(_) => "dead",
                };
                (k.as_slice(), l)
            })
            .collect();
        assert_eq!(
            got,
            [
                (&b"a"[..], "live"),
                (b"b", "snapshot"),
                (b"c", "dead"),
                (b"d", "dead")
            ]
        );
        // A write still in a memtable hides `b` from every reader but the snapshot, and
        // `d` from all of them.
        let seq = h.visible_seq();
        assert_eq!(h.hidden_by_memtable(b"b", &recs[1].0, seq).unwrap(), None);
        let by = h.hidden_by_memtable(b"d", &recs[3].0, seq).unwrap();
        assert!(by.is_some_and(|s| s < seq), "{by:?}");
        assert_eq!(h.hidden_by_memtable(b"a", &recs[0].0, seq).unwrap(), None);
        drop(snap);
    }

    #[test]
    fn logs_are_synced_for_a_job_only_when_a_write_it_relied_on_may_not_be_durable() {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path(), 1.0);
        let h = host(&db, &[], &[]);
        let syncs = |db: &DB| {
            let s = db.stats();
            (s.gc_log_syncs, s.gc_log_syncs_skipped)
        };
        db.put(b"a", &value("a")).unwrap();
        let a = h.visible_seq();
        // Nothing is known durable after open: a job relying on `a` syncs, and then a job
        // relying on it again need not.
        h.make_durable(a).unwrap();
        assert_eq!(syncs(&db), (1, 0));
        h.make_durable(a).unwrap();
        assert_eq!(syncs(&db), (1, 1));
        // A write since is not durable until a sync or a flush covers it.
        db.put(b"b", &value("b")).unwrap();
        let b = h.visible_seq();
        h.make_durable(b).unwrap();
        assert_eq!(syncs(&db), (2, 1));
        db.put(b"c", &value("c")).unwrap();
        let c = h.visible_seq();
        db.sync_wal().unwrap();
        h.make_durable(c).unwrap();
        assert_eq!(syncs(&db), (2, 2));
        db.put(b"d", &value("d")).unwrap();
        let d = h.visible_seq();
        db.flush().unwrap();
        h.make_durable(d).unwrap();
        assert_eq!(syncs(&db), (2, 3));
        // A written-back pointer is newer than anything durable.
        h.make_durable(SeqNo::MAX).unwrap();
        assert_eq!(syncs(&db), (3, 3));
    }

    #[test]
    fn write_back_points_keys_at_their_copies_unless_written_since() {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path(), 1.0);
        db.put(b"a", &value("a")).unwrap();
        db.put(b"b", &value("b")).unwrap();
        db.flush().unwrap();
        let old = only_file(&db).number;
        let recs = records(&only_file(&db));
        let h = host(&db, &[], &[]);
        let copies = copy(&h, &recs);
        db.put(b"b", &value("b2")).unwrap();
        assert_eq!(h.write_back(copies).unwrap(), [true, false]);
        // `a` reads from the copy once the old file is gone; `b` keeps its newer value.
        h.make_durable(SeqNo::MAX).unwrap();
        h.apply(VersionEdit {
            deleted_blobs: vec![old],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(db.get(b"a").unwrap(), Some(value("a")));
        assert_eq!(db.get(b"b").unwrap(), Some(value("b2")));
    }

    #[test]
    fn settling_counts_the_copies_no_write_back_reached_as_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path(), 1.0);
        db.put(b"a", &value("a")).unwrap();
        db.put(b"b", &value("b")).unwrap();
        db.flush().unwrap();
        let recs = records(&only_file(&db));
        let h = host(&db, &[], &[]);
        let copies = copy(&h, &recs);
        let output = copies[0].2.file;
        // The process dies after writing back only `a`'s pointer.
        assert_eq!(h.write_back(copies[..1].to_vec()).unwrap(), [true]);
        db.flush().unwrap();
        let pending = |db: &DB| db.inner.state.lock().versions.current().blobs[&output].clone();
        assert!(pending(&db).is_pending());
        settle_pending_gc(&db.inner).unwrap();
        let f = pending(&db);
        assert!(!f.is_pending());
        assert_eq!(
            (f.garbage_entries(), f.garbage_bytes()),
            (1, copies[1].2.size as u64)
        );
    }

    #[test]
    fn dead_files_are_released_unless_a_job_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path(), 1.0);
        db.put(b"a", &value("a1")).unwrap();
        db.flush().unwrap();
        let first = only_file(&db).number;
        // While a GC job reads it, the file stays, however dead.
        db.inner.state.lock().busy_blobs.insert(first);
        db.put(b"a", &value("a2")).unwrap();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        let has = |db: &DB, n| {
            db.inner
                .state
                .lock()
                .versions
                .current()
                .blobs
                .contains_key(&n)
        };
        assert!(has(&db, first));
        let mut st = db.inner.state.lock();
        st.busy_blobs.remove(&first);
        release_dead_value_files(&db.inner, &mut st).unwrap();
        drop(st);
        assert!(!has(&db, first));
        assert_eq!(db.get(b"a").unwrap(), Some(value("a2")));
    }

    #[test]
    fn a_paused_gc_picks_nothing_and_an_unpaused_one_collects() {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path(), 0.4);
        db.inner.state.lock().gc_paused = true;
        for k in ["a", "b", "c"] {
            db.put(k.as_bytes(), &value(k)).unwrap();
        }
        db.flush().unwrap();
        let file = only_file(&db).number;
        db.put(b"a", b"small").unwrap();
        db.put(b"b", b"small").unwrap();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert!(!gc_one(&db.inner).unwrap());
        let v = db.inner.state.lock().versions.current();
        assert!(v.blobs[&file].garbage_ratio() > 0.4);
        // Unpaused, the GC thread (or this call) collects the file; `c` moves.
        db.inner.state.lock().gc_paused = false;
        let _ = gc_one(&db.inner).unwrap();
        db.wait_idle().unwrap();
        let v = db.inner.state.lock().versions.current();
        assert!(!v.blobs.contains_key(&file));
        assert_eq!(db.get(b"c").unwrap(), Some(value("c")));
    }

    #[test]
    fn writes_are_paced_while_gc_lags_its_target_and_released_once_it_catches_up() {
        // The default policy (lifetime at target 1.5), every value of 100 bytes or more
        // separated; GC paused, so that each round, which overwrites every key, adds its
        // bytes as garbage.
        let dir = tempfile::tempdir().unwrap();
        let o = Options {
            vlog: ValueLogOptions {
                min_blob_size: 100,
                ..Options::default().vlog
            },
            ..Options::default()
        };
        let db = DB::open(dir.path(), o).unwrap();
        db.inner.state.lock().gc_paused = true;
        let round = |n: usize| {
            for k in 0..200 {
                db.put(format!("k{k}").as_bytes(), &value(&n.to_string()))
                    .unwrap();
            }
            db.flush().unwrap();
        };
        // GC measures the space as it would when it picks, once per slope window.
        let observe = || {
            let v = db.inner.state.lock().versions.current();
            db.inner.publish_space_amp(&v);
            std::thread::sleep(std::time::Duration::from_millis(300));
        };
        let mut n = 0;
        while db.stats().gc_write_rate.is_none() {
            n += 1;
            assert!(n < 50, "writes were never paced");
            round(n);
            observe();
        }
        // Paced, writes still go (each group waits at most MAX_GC_WAIT).
        db.put(b"k7", &value("paced")).unwrap();
        assert_eq!(db.get(b"k7").unwrap(), Some(value("paced")));
        // Unpaused, GC releases the dead files and the pacer lets go.
        db.inner.state.lock().gc_paused = false;
        let mut tries = 0;
        while db.stats().gc_write_rate.is_some() {
            tries += 1;
            assert!(tries < 400, "pacing was never released");
            observe();
        }
        round(n + 2);
        assert_eq!(db.get(b"k7").unwrap(), Some(value(&(n + 2).to_string())));
    }
}
