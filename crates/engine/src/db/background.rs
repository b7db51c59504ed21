//! Background work: one flush thread, `background_compactions` compaction threads, and a
//! GC thread for policies with standalone GC jobs. Each job runs without the main lock and
//! installs its result with one version edit.

use super::gc::{drop_unneeded_maps, find_superseded, gc_one, release_dead_value_files};
use super::inner::{Inner, State, IDLE_WAIT};
use super::iter::LevelIter;
use crate::compaction::{self, Compaction, JobOutput, JobSpec, PickContext};
use crate::error::Result;
use crate::filename::{self, FileKind};
use crate::io::IoCause;
use crate::sst::{InternalIterator, MergingIterator};
use crate::stats::EngineCounters;
use crate::version::{Version, VersionEdit};
use crate::vlog::ValuePointer;
use crate::warming::JobKind;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

pub(crate) fn start(inner: &Arc<Inner>) -> Vec<JoinHandle<()>> {
    let mut t = Vec::new();
    let spawn = |name: &str, low: bool, f: fn(&Arc<Inner>) -> Result<bool>| {
        let inner = inner.clone();
        let low = low && inner.opts.lower_background_priority;
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                if low {
                    lower_cpu_priority();
                }
                worker(&inner, f)
            })
            .expect("spawn background thread")
    };
    t.push(spawn("halflife-flush", false, flush_one));
    for i in 0..inner.opts.background_compactions {
        t.push(spawn(&format!("halflife-compact-{i}"), true, compact_one));
    }
    if inner.opts.tree.compaction_style != crate::options::CompactionStyle::Leveled {
        t.push(spawn("halflife-compact-l0", true, compact_l0));
    }
    // Under a space-amplification target, writers wait for GC (back-pressure) as they
    // wait for the flush, so GC and the finder that feeds it keep normal priority too.
    let gc_low = inner.gc.space_amp_target().is_none();
    if inner.opts.vlog.gc.separates_values() {
        t.push(spawn("halflife-gc", gc_low, gc_one));
        // More jobs where the device allows, on other files; at the lowest priority, so
        // that they run in what flush, compaction and the first GC thread leave.
        for i in 1..inner.opts.background_gc {
            t.push(spawn(&format!("halflife-gc-{i}"), true, gc_one));
        }
    }
    if inner
        .lifetime
        .as_ref()
        .is_some_and(|rt| rt.finds_superseded_after_flush())
    {
        t.push(spawn("halflife-find", gc_low, find_superseded));
    }
    t
}

/// Lowers the calling thread to nice 19 ([`crate::Options::lower_background_priority`]).
/// On Linux a nice value belongs to the thread; elsewhere it would lower the whole
/// process, so this does nothing there. Failure only leaves the priority as it was.
fn lower_cpu_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on the calling thread's own id.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

fn worker(inner: &Arc<Inner>, job: fn(&Arc<Inner>) -> Result<bool>) {
    while !inner.shutdown.load(Ordering::SeqCst) {
        let done = job(inner);
        if !matches!(done, Ok(false)) {
            let v = inner.state.lock().versions.current();
            inner.charge_memory(&v);
        }
        match done {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => {
                let mut st = inner.state.lock();
                inner.set_bg_error(&mut st, &e);
            }
        }
        let mut st = inner.state.lock();
        if !inner.shutdown.load(Ordering::SeqCst) {
            inner.bg_cv.wait_for(&mut st, IDLE_WAIT);
        }
    }
}

fn job_spec<'a>(
    inner: &'a Arc<Inner>,
    cause: IoCause,
    smallest_snapshot: u64,
    version: &'a Version,
    new_file_number: &'a (dyn Fn() -> u64 + Sync),
) -> JobSpec<'a> {
    JobSpec {
        dir: &inner.dir,
        storage: &inner.storage,
        opts: &inner.opts,
        output_level: 0,
        cause,
        smallest_snapshot,
        drop_tombstones: false,
        separate_values: false,
        split_outputs: false,
        relocate: None,
        version,
        lifetime: None,
        new_file_number,
        warming: None,
        logged: None,
    }
}

/// Each pointer a job dropped with where its record was in `v`, to be brought up to date
/// by [`add_outputs`] under the main lock. Resolving means index-map lookups, and a large
/// compaction under the learned policy drops millions of pointers: resolved under the
/// lock, they held it for 2.5-3.2 s, and writers that needed it waited that long
/// (docs/bench.md, "What the p99.9 is made of"). So compactions resolve before they take it.
fn resolve_dropped(
    v: &Version,
    dropped: &[ValuePointer],
) -> Vec<(ValuePointer, Option<ValuePointer>)> {
    dropped.iter().map(|p| (*p, v.resolve(p))).collect()
}

/// Adds a job's outputs to `edit`, charging the pointers it dropped to the files that hold
/// their records now (under the lock, so that a GC installed meanwhile is seen). Drops
/// into files a GC job is collecting are also kept for that job to settle. `resolved` is
/// [`resolve_dropped`] of the job's dropped pointers, in an earlier version of the state.
fn add_outputs(
    inner: &Inner,
    st: &mut State,
    edit: &mut VersionEdit,
    level: usize,
    out: JobOutput,
    resolved: Vec<(ValuePointer, Option<ValuePointer>)>,
) {
    EngineCounters::add(&inner.counters.expired_entries, out.expired);
    let v = st.versions.current();
    // (as the table had it, where the record is now). Resolving again from where the
    // record was costs one lookup while its file is live, and follows the maps on from
    // it if GC collected that file since. A record GC did not keep stays gone: value
    // files never come back, and a map is dropped only once no pointer in the tree can
    // lead through it.
    let dropped: Vec<(ValuePointer, ValuePointer)> = resolved
        .into_iter()
        .filter_map(|(p, r)| Some((p, v.resolve(&r?)?)))
        .collect();
    let now: Vec<ValuePointer> = dropped.iter().map(|d| d.1).collect();
    if let Some(rt) = &inner.lifetime {
        rt.count_job(out.links, out.lazy_rewrites, &now);
    }
    edit.added
        .extend(out.tables.into_iter().map(|t| (level, t)));
    edit.added_blobs.extend(out.blobs);
    edit.blob_garbage
        .extend(crate::gc::garbage::garbage_where(&now, |r| Some(*r)));
    if inner.lifetime.is_some() && st.running_gc > 0 {
        let busy = &st.busy_blobs;
        let in_gc = dropped.iter().filter(|(_, r)| busy.contains(&r.file));
        st.gc_drops.extend(in_gc.map(|(p, r)| (*p, r.file)));
    }
}

/// Flushes the oldest immutable memtable to L0.
fn flush_one(inner: &Arc<Inner>) -> Result<bool> {
    let (mem, snap, v) = {
        let mut st = inner.state.lock();
        if st.flushing || st.bg_error.is_some() {
            return Ok(false);
        }
        let Some(mem) = st.imm.front().cloned() else {
            return Ok(false);
        };
        st.flushing = true;
        (mem, inner.smallest_snapshot(&st), st.versions.current())
    };
    let started = std::time::Instant::now();
    let bytes = mem.approximate_size();
    inner.throttle.flush_started(bytes);
    let out = {
        let nf = || inner.new_file_number();
        let now = inner.last_seq.load(Ordering::Acquire);
        let hooks = inner.lifetime.as_ref().map(|rt| {
            rt.measure_unit(mem.len());
            rt.hooks(&v, 0, now)
        });
        let warm = inner.warming.begin_job(JobKind::Flush, &v, []);
        let logged = |seq| mem.logged(seq);
        let spec = JobSpec {
            separate_values: inner.gc.separates_values(),
            lifetime: hooks.as_ref(),
            warming: warm.as_ref(),
            logged: inner.opts.logs_values().then_some(&logged as _),
            ..job_spec(inner, IoCause::Flush, snap, &v, &nf)
        };
        compaction::run(&spec, &mut mem.iter())
    };
    // The value files the memtable's writes logged their values to are installed with
    // its table, charged with the values the flush dropped; synced here, off the write
    // path and outside the lock.
    let logged_files = mem.value_files();
    let flushed_seq = mem.largest_seq();
    drop((v, mem));
    let mut st = inner.state.lock();
    st.flushing = false;
    let mut out = out?;
    let mut logged_files = logged_files?;
    // The rate writes are held to while the next memtable fills (see `throttle`); the
    // install below is not part of it (it waits for the lock like any writer).
    inner.throttle.flushed(bytes, started.elapsed());
    let superseded = std::mem::take(&mut out.superseded);
    let mut edit = VersionEdit::default();
    if !logged_files.is_empty() {
        let (charged, rest) =
            crate::vlog::value_wal::charge_dropped(&mut logged_files, out.dropped);
        out.dropped = rest;
        if let Some(rt) = &inner.lifetime {
            // Known by position too, so that GC need not look them up.
            rt.early.counted(&charged);
        }
        edit.added_blobs.extend(logged_files);
    }
    let flushed: Vec<u64> = out.tables.iter().map(|t| t.number).collect();
    // A flush drops few pointers into older files (its own logged files are charged
    // above), so they are resolved here.
    let resolved = resolve_dropped(&st.versions.current(), &out.dropped);
    add_outputs(inner, &mut st, &mut edit, 0, out, resolved);
    let next_wal = st
        .imm
        .get(1)
        .map_or(st.mem.wal_number(), |m| m.wal_number());
    if inner.opts.wal.use_wal {
        edit.log_number = Some(next_wal);
    }
    st.versions.last_sequence = inner.last_seq.load(Ordering::Acquire);
    st.versions.log_and_apply(edit)?;
    // Its writes are in a synced table (their values in synced value files), and every
    // older memtable was flushed before it.
    inner.durable_seq.fetch_max(flushed_seq, Ordering::AcqRel);
    if let Some(rt) = &inner.lifetime {
        // Only now that the flush is installed are the records it hides garbage.
        rt.early
            .record_superseded(&st.versions.current(), &superseded);
        if rt.finds_superseded_after_flush() {
            st.superseding.extend(flushed);
        }
    }
    st.imm.pop_front();
    inner.publish(&st);
    EngineCounters::add(&inner.counters.flushes, 1);
    let released = release_dead_value_files(inner, &mut st);
    inner.bg_cv.notify_all();
    drop(st);
    // Outside the state lock, which every write group takes: unlinking a WAL of tens of
    // MiB held it for up to 52 ms on a busy disk (docs/bench.md, "Tails"). Every WAL
    // created from now on has a higher number.
    if inner.opts.wal.use_wal {
        remove_old_wals(inner, next_wal);
    }
    released?;
    Ok(true)
}

pub(crate) fn remove_old_wals(inner: &Inner, below: u64) {
    // Their writers first, so that no synced write syncs a removed file (a storage may
    // refuse that); a sync in progress holds the lock until it is done.
    inner.older_wals.lock().retain(|(n, _)| *n >= below);
    for p in inner.storage.list(&inner.dir).unwrap_or_default() {
        if filename::number_of(&p, FileKind::Wal).is_some_and(|n| n < below) {
            // A WAL left behind is archived or deleted by the next open's sweep.
            let _ = super::wal_archive::retire(&*inner.storage, &inner.dir, &p, &inner.opts);
        }
    }
}

fn compact_one(inner: &Arc<Inner>) -> Result<bool> {
    compact(inner, |v, busy| inner.pick_compaction(v, busy))
}

/// The tiered tree's L0 merges, on their own thread. A deep merge of a tiered tree
/// rewrites whole levels and takes tens of seconds at full scale; behind it on one
/// thread, L0 filled to its slowdown trigger and writers were delayed (docs/lifetime.md,
/// "Garbage found after the flush, an L0 thread, a lookup pool"). L0 merges are small and
/// never read the level below, so they cannot conflict with a deeper merge's inputs.
fn compact_l0(inner: &Arc<Inner>) -> Result<bool> {
    compact(inner, |v, busy| {
        let cx = PickContext {
            busy,
            forced_gc: &HashSet::new(),
            space_amp_target: inner.gc.space_amp_target(),
        };
        inner.compaction.pick_l0(v, &cx)
    })
}

/// Runs the compaction `pick` chooses from the current version and the tables it may
/// take; `false` if there is none (or manual compaction or an error holds them).
fn compact(
    inner: &Arc<Inner>,
    pick: impl FnOnce(&Version, &HashSet<u64>) -> Option<Compaction>,
) -> Result<bool> {
    let st = inner.state.lock();
    if st.manual || st.bg_error.is_some() {
        return Ok(false);
    }
    let v = st.versions.current();
    let busy = unavailable_tables(inner, &st, &v);
    let Some(c) = pick(&v, &busy) else {
        return Ok(false);
    };
    drop(busy);
    execute(inner, st, c, v)?;
    Ok(true)
}

/// The tables a compaction may not take now: those another compaction is merging and,
/// until L0 is two files short of slowing writers down, the flushed tables
/// whose keys' previous writes are still being looked up. Merged before that, the
/// garbage their writes made is no longer early ([`crate::gc::superseded`] gives up on a
/// table once it leaves L0), and GC learns of it only when a compaction reaches the
/// previous writes, often a deep merge much later. Past that point writers come first.
fn unavailable_tables<'a>(
    inner: &Inner,
    st: &'a State,
    v: &Version,
) -> std::borrow::Cow<'a, HashSet<u64>> {
    let pending = st.superseding.iter().chain(&st.finding_superseded);
    if pending.clone().next().is_none()
        || v.levels[0].len() + 2 >= inner.opts.tree.l0_slowdown_writes_trigger
    {
        return std::borrow::Cow::Borrowed(&st.busy_tables);
    }
    let mut busy = st.busy_tables.clone();
    busy.extend(pending);
    std::borrow::Cow::Owned(busy)
}

/// Runs a picked compaction: marks its files busy, releases the lock for the job, then
/// installs the result and lets go of the inputs before reporting it done.
fn execute(
    inner: &Arc<Inner>,
    mut st: parking_lot::MutexGuard<'_, State>,
    c: Compaction,
    v: Arc<crate::version::Version>,
) -> Result<()> {
    mark_busy(&mut st, &c, true);
    st.running_compactions += 1;
    let a = c.merge_amplification(&v);
    EngineCounters::add(&inner.counters.merge_amp_micros, (a * 1e6).round() as u64);
    EngineCounters::add(&inner.counters.merge_amp_count, 1);
    let a_bytes = c.merge_amplification_bytes(&v);
    EngineCounters::add(
        &inner.counters.merge_amp_bytes_micros,
        (a_bytes * 1e6).round() as u64,
    );
    let snap = inner.smallest_snapshot(&st);
    let filter = inner.gc.relocation_filter(&v);
    drop(st);
    // Outside the state lock: re-deriving the shape evaluates the model a few hundred times.
    inner.compaction.observe(a_bytes);
    let r = run_compaction(inner, &c, snap, &v, filter.as_deref());
    drop((v, filter));
    mark_busy(&mut inner.state.lock(), &c, false);
    // Outside the state lock, which every write group takes: the inputs may hold the last
    // handles of deleted tables, and closing one has ext4 free the file's blocks, which
    // held the lock for up to 109 ms on a busy disk (docs/bench.md, scaled-down stall check).
    drop(c);
    let mut st = inner.state.lock();
    st.running_compactions -= 1;
    inner.bg_cv.notify_all();
    r?;
    release_dead_value_files(inner, &mut st)
}

fn mark_busy(st: &mut State, c: &Compaction, busy: bool) {
    for f in c.all_files() {
        if busy {
            st.busy_tables.insert(f.number());
        } else {
            st.busy_tables.remove(&f.number());
        }
    }
}

/// Runs one compaction and installs its result.
fn run_compaction(
    inner: &Arc<Inner>,
    c: &Compaction,
    snap: u64,
    v: &Version,
    filter: Option<&(dyn Fn(&ValuePointer) -> bool + Send + Sync)>,
) -> Result<()> {
    let mut edit = VersionEdit::default();
    for f in &c.inputs {
        edit.deleted.push((c.level, f.number()));
    }
    for f in &c.overlaps {
        edit.deleted.push((c.output_level, f.number()));
    }
    let trivial = c.inputs.len() == 1
        && c.overlaps.is_empty()
        && c.output_level != c.level
        && c.inputs[0].meta.deletions == 0
        && filter.is_none_or(|f| {
            c.inputs[0].meta.oldest_blob.is_none_or(|b| {
                !f(&ValuePointer {
                    file: b,
                    offset: 0,
                    size: 0,
                })
            })
        });
    let mut out = None;
    let mut warm = None;
    if trivial {
        edit.added.push((c.output_level, c.inputs[0].meta.clone()));
    } else {
        // One iterator per sorted run: each L0 file, each run of a deeper level.
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for run in c.input_runs() {
            children.push(Box::new(LevelIter::new(run, IoCause::Compaction)));
        }
        let mut merged = MergingIterator::new(children);
        let nf = || inner.new_file_number();
        let now = inner.last_seq.load(Ordering::Acquire);
        let hooks = inner
            .lifetime
            .as_ref()
            .map(|rt| rt.hooks(v, c.output_level + 1, now));
        warm = inner
            .warming
            .begin_job(JobKind::Compaction, v, c.inputs.iter().chain(&c.overlaps));
        let spec = JobSpec {
            output_level: c.output_level,
            warming: warm.as_ref(),
            drop_tombstones: c.bottommost,
            split_outputs: true,
            relocate: filter.map(|f| f as &(dyn Fn(&ValuePointer) -> bool + Sync)),
            lifetime: hooks.as_ref(),
            ..job_spec(inner, IoCause::Compaction, snap, v, &nf)
        };
        let o = compaction::run(&spec, &mut merged)?;
        EngineCounters::add(&inner.counters.gc_relocated_bytes, o.relocated_bytes);
        out = Some(o);
    }
    // Prefetched output blocks enter the cache before readers can see the output.
    if let Some(w) = &warm {
        w.install();
    }
    let resolved = out.as_ref().map(|o| {
        let now = inner.state.lock().versions.current();
        resolve_dropped(&now, &o.dropped)
    });
    let mut st = inner.state.lock();
    if let (Some(o), Some(resolved)) = (out, resolved) {
        add_outputs(inner, &mut st, &mut edit, c.output_level, o, resolved);
        c.tag_outputs(&mut edit);
    }
    inner.apply_edit(&mut st, edit)?;
    EngineCounters::add(&inner.counters.compactions, 1);
    if inner.lifetime.is_some() {
        // Lazy pointer rewrites may have released index maps.
        drop_unneeded_maps(inner, &mut st)?;
    }
    Ok(())
}

pub(crate) fn wait_idle(inner: &Inner) -> Result<()> {
    wait_idle_jobs(inner)?;
    wait_purged(inner);
    Ok(())
}

/// Waits until the table files that finished jobs removed are deleted (they are deleted on
/// the purge thread, `version::purge`), so that callers find them gone from disk and cache.
fn wait_purged(inner: &Inner) {
    let purger = inner.state.lock().versions.purger();
    if let Some(p) = purger {
        p.wait_idle();
    }
}

fn wait_idle_jobs(inner: &Inner) -> Result<()> {
    inner.wait_until(|st| {
        let v = st.versions.current();
        st.imm.is_empty()
            && !st.flushing
            && st.running_compactions == 0
            && st.running_gc == 0
            && st.superseding.is_empty()
            && st.finding_superseded.is_none()
            && inner.pick_compaction(&v, &st.busy_tables).is_none()
            && (!inner.opts.vlog.gc.separates_values()
                || inner.pick_gc(&v, &st.busy_blobs).is_empty())
    })
}

/// Manual compaction of [start, end] level by level down to the deepest level holding keys
/// of the range.
pub(crate) fn compact_range(
    inner: &Arc<Inner>,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Result<()> {
    {
        let mut st = inner.state.lock();
        st.manual = true;
    }
    let r = (|| -> Result<()> {
        inner.wait_until(|st| st.running_compactions == 0)?;
        let deepest = {
            let st = inner.state.lock();
            let v = st.versions.current();
            (0..v.num_levels())
                .rev()
                .find(|&l| !compaction::files_in_range(&v, l, start, end).is_empty())
        };
        let Some(deepest) = deepest else {
            return Ok(());
        };
        for level in 0..deepest.max(1) {
            {
                let st = inner.state.lock();
                let v = st.versions.current();
                // L0 files overlap each other: moving only some of them below the others
                // could put an older version above a newer one, so L0 goes whole.
                let files = if level == 0 {
                    v.levels[0].clone()
                } else {
                    compaction::files_in_range(&v, level, start, end)
                };
                // Straight to the next level holding data: walking through empty levels
                // would rewrite the same data once per level.
                let out = (level + 1..=deepest)
                    .find(|&l| !v.levels[l].is_empty())
                    .unwrap_or(deepest.max(level + 1))
                    .min(v.num_levels() - 1);
                let Some(c) = compaction::build(&v, level, out, files, &st.busy_tables, "manual")
                else {
                    continue;
                };
                execute(inner, st, c, v)?;
            }
        }
        rewrite_expired_bottom(inner, start, end)
    })();
    let mut st = inner.state.lock();
    st.manual = false;
    inner.bg_cv.notify_all();
    drop(st);
    wait_purged(inner);
    r
}

/// The last step of [`compact_range`]: the range's tables at the last level holding data
/// are rewritten into that level when one of their entries has expired (the table's
/// `earliest_expiry` has passed), which drops the expired entries as a compaction to the
/// bottom drops tombstones. Other last-level tables are left alone: rewriting them would
/// change nothing. RocksDB's manual compaction does the same with its default
/// `BottommostLevelCompaction::kIfHaveCompactionFilter`, expiry being our filter.
fn rewrite_expired_bottom(
    inner: &Arc<Inner>,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Result<()> {
    let now = inner.now_ms();
    let st = inner.state.lock();
    let v = st.versions.current();
    let Some(bottom) = (0..v.num_levels())
        .rev()
        .find(|&l| !compaction::files_in_range(&v, l, start, end).is_empty())
    else {
        return Ok(());
    };
    if bottom == 0 {
        // Level 0 is never the last level after the steps above.
        return Ok(());
    }
    let mut expired = Vec::new();
    for f in compaction::files_in_range(&v, bottom, start, end) {
        let e = f.table()?.properties().earliest_expiry;
        if e != 0 && e <= now {
            expired.push(f);
        }
    }
    match compaction::build(
        &v,
        bottom,
        bottom,
        expired,
        &st.busy_tables,
        "manual-expired",
    ) {
        Some(c) => execute(inner, st, c, v),
        None => Ok(()),
    }
}
