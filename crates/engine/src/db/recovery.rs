//! Opening a database: lock, manifest, WAL replay, sweep of abandoned files.
//!
//! Order matters, because nothing may be lost to a recovery that fails half-way:
//!
//! 1. The manifest is read strictly (see [`crate::version::set`]): any damage fails the open
//!    before anything is written.
//! 2. Every WAL newer than the manifest's log number is read once to check it under the
//!    chosen [`WalRecoveryMode`]; damage the mode does not accept fails the open, still before
//!    anything is written.
//! 3. A new manifest is started, the WALs are replayed into memtables and written to L0
//!    tables, and one edit records the tables and moves the log number past the WALs.
//! 4. Only then are files swept, and only files the complete, clean manifest proves
//!    obsolete are deleted: table, value and index-map files no version refers to whose
//!    number is below the manifest's next file number (outputs of jobs that never
//!    installed), WALs whose records are now in tables, and older manifests. A file no edit
//!    accounts for (numbered at or above the next file number), and a WAL that point-in-time
//!    or skip mode did not fully replay, is moved into `lost/` instead: deleting nothing is
//!    always safe, deleting what might be data never is.
//!
//! What happened is kept in a [`RecoveryReport`] ([`super::DB::recovery_report`]).

use super::inner::{Inner, ReadView, State};
use super::recovery_report::RecoveryReport;
use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::compaction::{self, JobSpec};
use crate::error::{Error, Result};
use crate::filename::{self, file_number_of, wal_file_name, FileKind, CURRENT, LOCK, LOST_DIR};
use crate::gc::pacer::GcPacer;
use crate::gc::runtime::LifetimeRuntime;
use crate::io::{read_all, FileStorage, IoCause, Storage};
use crate::memtable::{ChunkPool, Memtable};
use crate::options::Options;
use crate::options::WalRecoveryMode;
use crate::stats::EngineCounters;
use crate::version::{VersionEdit, VersionSet};
use crate::vlog::value_wal;
use crate::wal::{LogReader, LogWriter, ReadOutcome};
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

/// Takes the database's lock file (held until the returned file is dropped).
pub(crate) fn lock_dir(dir: &Path) -> Result<std::fs::File> {
    let lock_path = dir.join(LOCK);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&lock_path, e)),
    }
}

/// How one WAL is to be replayed, decided by reading it once before anything is written.
struct WalPlan {
    number: u64,
    path: PathBuf,
    outcome: ReadOutcome,
    /// Records to replay (the log's records up to where the plan ends it).
    records: u64,
    /// The plan ends the log before a complete record: one whose values never reached
    /// their value file, or the first of a log that does not continue the one before.
    ends_early: bool,
}

/// Reads every WAL to replay under `mode`, and, with the value log as the WAL, every value
/// record their pointers lead to (`replay` scans the value files): an error names the
/// first damage the mode does not accept. The plan ends at the first log that does not
/// end cleanly (a torn append, a record whose values never reached their value file,
/// damage point-in-time mode stops at): what follows was never synced, or lies beyond the
/// point in time, and later logs are not replayed.
fn plan_wals(
    storage: &dyn Storage,
    wals: Vec<(u64, PathBuf)>,
    mode: WalRecoveryMode,
    replay: &mut value_wal::Replay<'_>,
    report: &mut RecoveryReport,
) -> Result<Vec<WalPlan>> {
    let mut plan = Vec::new();
    let mut stopped = false;
    // The sequence number the next record continues at, once a log was read.
    let mut next_seq: Option<u64> = None;
    for (i, (number, path)) in wals.into_iter().enumerate() {
        if stopped {
            report.wals_not_replayed.push(path);
            continue;
        }
        let data = read_all(storage, &path, IoCause::Other)?;
        let (mut records, mut ends_early) = (0, false);
        let outcome = LogReader::new(&path, data).for_each_until(mode, |rec| {
            let batch = WriteBatch::decode(&path, rec)?;
            if batch.is_empty() {
                // A log's start: after a gap (or after older logs that kept nothing, not
                // even their start), nothing from here on is replayed. The first log's
                // predecessors are in tables; logs of older versions have no start record
                // and are not checked.
                if records == 0 && i > 0 && next_seq != Some(batch.first_seq()) {
                    ends_early = true;
                    return Ok(false);
                }
            } else if !replay.check(&batch, mode)? {
                ends_early = true;
                return Ok(false);
            }
            next_seq = Some(batch.first_seq() + batch.len() as u64);
            records += 1;
            Ok(true)
        })?;
        stopped = !matches!(outcome, ReadOutcome::Clean | ReadOutcome::Skipped { .. });
        plan.push(WalPlan {
            number,
            path,
            outcome,
            records,
            ends_early,
        });
    }
    replay.check_tails()?;
    Ok(plan)
}

pub(crate) fn open(dir: &Path, opts: Options) -> Result<Inner> {
    let storage: Arc<dyn Storage> = opts
        .storage
        .clone()
        .unwrap_or_else(|| Arc::new(FileStorage::new()));
    if !dir.exists() {
        if !opts.create_if_missing {
            return Err(Error::NotFound(dir.to_path_buf()));
        }
        storage.create_dir_all(dir)?;
    }
    if !dir.is_dir() {
        return Err(Error::NotADatabase(dir.to_path_buf()));
    }
    let lock = lock_dir(dir)?;
    let has_current = storage.exists(&dir.join(CURRENT));
    if has_current && opts.error_if_exists {
        return Err(Error::InvalidOptions {
            name: "error_if_exists",
            detail: format!("a database exists at {}", dir.display()),
        });
    }
    if !has_current {
        // Files of ours without CURRENT are what an open that created the database left
        // when it was cut short (no write was acknowledged yet): created anew, they are
        // swept into `lost/`. Anything else is someone else's directory.
        let foreign = storage.list(dir)?.into_iter().any(|p| {
            let ours = matches!(
                filename::parse(&p),
                Some((FileKind::Lock | FileKind::CurrentTmp, _))
            ) || file_number_of(&p).is_some();
            let lost = p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n == LOST_DIR || n == filename::WAL_ARCHIVE_DIR);
            !(ours || lost)
        });
        if foreign {
            return Err(Error::NotADatabase(dir.to_path_buf()));
        }
        if !opts.create_if_missing {
            return Err(Error::NotFound(dir.to_path_buf()));
        }
    }
    let cache = BlockCache::new(opts.cache.block_cache_capacity);
    let mut report = RecoveryReport {
        mode: opts.wal.wal_recovery_mode,
        ..RecoveryReport::default()
    };
    // 1-2: read everything that decides the state, write nothing yet.
    let mut versions = VersionSet::recover(
        dir,
        storage.clone(),
        Some(cache.clone()),
        opts.tree.num_levels,
    )?;
    let old_manifest = versions.manifest_number();
    // The WAL the manifest's log number names always exists (open creates it, even without
    // a WAL in use, before any edit names it); if it is gone, acknowledged writes may be too.
    let oldest_wal = wal_file_name(dir, versions.log_number);
    if has_current && versions.log_number != 0 && !storage.exists(&oldest_wal) {
        return Err(Error::corruption(
            &oldest_wal,
            "missing: the manifest's log number names this WAL, whose writes would be lost",
        ));
    }
    let wals: Vec<(u64, PathBuf)> = {
        let mut w: Vec<_> = storage
            .list(dir)?
            .into_iter()
            .filter_map(|p| filename::number_of(&p, FileKind::Wal).map(|n| (n, p)))
            .filter(|(n, _)| *n >= versions.log_number)
            .collect();
        w.sort();
        w
    };
    // Pointers in WAL records into value files no edit names yet (the value log as the
    // WAL) are checked now and read back during replay; the files are installed with the
    // replayed tables.
    let mut replay = value_wal::Replay::new(dir, &storage);
    let plan = plan_wals(
        &*storage,
        wals,
        opts.wal.wal_recovery_mode,
        &mut replay,
        &mut report,
    )?;
    let policy = crate::gc::policy::from_options(&opts);
    let gc_target = policy.space_amp_target();
    let lifetime = LifetimeRuntime::open(dir, &opts)?;

    // 3: a new manifest, the WALs replayed into L0 tables.
    versions.start()?;
    let mut last_seq = versions.last_sequence;
    let mut mem = Arc::new(Memtable::new(0));
    let mut edit = VersionEdit::default();
    let mut incomplete_wals = HashSet::new();
    let mut dropped = Vec::new();
    for w in &plan {
        let data = read_all(&*storage, &w.path, IoCause::Other)?;
        let mut records = 0;
        let outcome =
            LogReader::new(&w.path, data).for_each_until(opts.wal.wal_recovery_mode, |rec| {
                if records == w.records {
                    return Ok(false);
                }
                records += 1;
                let batch = WriteBatch::decode(&w.path, rec)?;
                if !batch.is_empty() {
                    let last = replay.insert(&batch, &*mem)?;
                    last_seq = last_seq.max(last);
                    report.batches_replayed += 1;
                }
                Ok(true)
            })?;
        debug_assert_eq!(outcome, w.outcome, "a WAL changed between two reads");
        report.wals_replayed.push(w.path.clone());
        match &w.outcome {
            ReadOutcome::Clean => {}
            ReadOutcome::TornTail { valid_len } => {
                let len = storage.file_size(&w.path)?;
                report.torn_tail = Some((w.path.clone(), *valid_len, len - valid_len));
                // Complete records after the end (whose values never arrived, or that lie
                // beyond a gap) are kept aside, not deleted.
                if w.ends_early {
                    incomplete_wals.insert(w.number);
                }
            }
            ReadOutcome::Stopped { at } => {
                incomplete_wals.insert(w.number);
                report.damage.push((w.path.clone(), at.clone()));
            }
            ReadOutcome::Skipped { damages } => {
                incomplete_wals.insert(w.number);
                report
                    .damage
                    .extend(damages.iter().map(|d| (w.path.clone(), d.clone())));
            }
        }
        if mem.approximate_size() >= opts.tree.memtable_size {
            versions.last_sequence = last_seq;
            let full = std::mem::replace(&mut mem, Arc::new(Memtable::new(0)));
            dropped.extend(flush_recovered(
                dir,
                &storage,
                &opts,
                lifetime.as_ref(),
                &mut versions,
                &full,
                &mut edit,
            )?);
        }
    }
    if !mem.is_empty() {
        versions.last_sequence = last_seq;
        dropped.extend(flush_recovered(
            dir,
            &storage,
            &opts,
            lifetime.as_ref(),
            &mut versions,
            &mem,
            &mut edit,
        )?);
    }
    let (mut logged_files, cut) = replay.finish()?;
    report.value_tails_cut = cut;
    // The pointers the replayed flushes dropped: into the value files of logged values,
    // or into installed ones.
    let (_, installed) = value_wal::charge_dropped(&mut logged_files, dropped);
    edit.blob_garbage
        .extend(crate::gc::garbage::garbage_by_file(
            &versions.current(),
            &installed,
        ));
    edit.added_blobs.extend(logged_files);
    let wal_number = versions.new_file_number();
    let f = storage.create(&wal_file_name(dir, wal_number), IoCause::Wal)?;
    let wal = match opts.wal.use_wal {
        true => {
            let mut w = LogWriter::new(f);
            w.add_record(WriteBatch::log_start(last_seq + 1).encoded())?;
            Some(w)
        }
        false => None,
    };
    edit.log_number = Some(wal_number);
    versions.last_sequence = last_seq;
    // The new WAL and the replayed tables exist in the directory before an edit names them.
    storage.sync_dir(dir)?;
    versions.log_and_apply(edit)?;
    // 4: the state is durable; sweep what it proves obsolete.
    for path in &report.wals_not_replayed {
        if let Some(n) = filename::number_of(path, FileKind::Wal) {
            incomplete_wals.insert(n);
        }
    }
    sweep(
        dir,
        &storage,
        &versions,
        &Sweep {
            wal: wal_number,
            incomplete_wals: &incomplete_wals,
            replayed_manifest: old_manifest,
            opts: &opts,
        },
        &mut report,
    )?;

    if let Some(rt) = lifetime.as_ref().filter(|rt| rt.finds_every_superseded()) {
        // Every file created from now on is written, and its records hidden, under the
        // finder or the flush's lookups: its dead records will all be known
        // (`gc::early_garbage::Coverage`).
        rt.early.coverage.cover_from(versions.next_file_number());
    }
    let memtable_chunks = ChunkPool::new(opts.tree.memtable_size);
    let state = State {
        mem: Arc::new(Memtable::with_pool(
            if opts.wal.use_wal { wal_number } else { 0 },
            memtable_chunks.clone(),
        )),
        imm: VecDeque::new(),
        versions,
        busy_tables: HashSet::new(),
        busy_blobs: HashSet::new(),
        snapshots: BTreeMap::new(),
        kept_for_snapshots: Vec::new(),
        bg_error: None,
        flushing: false,
        running_compactions: 0,
        running_gc: 0,
        gc_paused: false,
        manual: false,
        live_user_bytes: None,
        gc_drops: Vec::new(),
        superseding: VecDeque::new(),
        finding_superseded: None,
    };
    let warming = crate::warming::Warming::new(
        &opts.cache.cache_warming,
        cache.clone(),
        opts.table.block_size,
        opts.cache.warming_accounting,
    );
    let compaction = crate::compaction::strategy_for(&opts.tree);
    Ok(Inner {
        memtable_chunks,
        dir: dir.to_path_buf(),
        opts,
        storage,
        memory_charge: cache.charge(0),
        cache,
        warming,
        gc: policy,
        compaction,
        lifetime,
        read_view: parking_lot::RwLock::new(Arc::new(ReadView::from_state(&state))),
        state: Mutex::new(state),
        bg_cv: Condvar::new(),
        writers: Default::default(),
        wal: Mutex::new(wal),
        older_wals: Mutex::new(Vec::new()),
        dir_unsynced: AtomicBool::new(false),
        value_wal: Mutex::new(Default::default()),
        clock_floor: AtomicU64::new(0),
        last_seq: AtomicU64::new(last_seq),
        visible_seq: AtomicU64::new(last_seq),
        durable_seq: AtomicU64::new(0),
        counters: EngineCounters::default(),
        value_space_amp: AtomicU64::new(0),
        throttle: super::throttle::WriteController::new(),
        gc_pacer: gc_target.map(GcPacer::new),
        shutdown: AtomicBool::new(false),
        bg_failed: AtomicBool::new(false),
        recovery: report,
        _lock: lock,
    })
}

/// Writes a replayed memtable to L0; the tables join `edit`, recorded after replay.
/// Returns the pointers it dropped.
fn flush_recovered(
    dir: &Path,
    storage: &Arc<dyn Storage>,
    opts: &Options,
    lifetime: Option<&LifetimeRuntime>,
    versions: &mut VersionSet,
    mem: &Arc<Memtable>,
    edit: &mut VersionEdit,
) -> Result<Vec<crate::vlog::ValuePointer>> {
    let next = AtomicU64::new(versions.next_file_number);
    let nf = || next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let v = versions.current();
    let hooks = lifetime.map(|rt| {
        rt.measure_unit(mem.len());
        rt.hooks(&v, 0, versions.last_sequence)
    });
    let spec = JobSpec {
        dir,
        storage,
        opts,
        output_level: 0,
        cause: IoCause::Flush,
        smallest_snapshot: u64::MAX,
        drop_tombstones: false,
        separate_values: opts.vlog.gc.separates_values(),
        split_outputs: false,
        relocate: None,
        version: &v,
        lifetime: hooks.as_ref(),
        new_file_number: &nf,
        warming: None,
        logged: Some(&|seq| mem.logged(seq)),
    };
    let out = compaction::run(&spec, &mut mem.iter())?;
    versions.next_file_number = next.into_inner();
    edit.added.extend(out.tables.into_iter().map(|t| (0, t)));
    edit.added_blobs.extend(out.blobs);
    // Charged once every replayed value file is known (see `open`).
    Ok(out.dropped)
}

/// What the sweep needs to know besides the version.
struct Sweep<'a> {
    /// The WAL this open writes to.
    wal: u64,
    /// WALs whose records were not all replayed (point-in-time or skip mode).
    incomplete_wals: &'a HashSet<u64>,
    /// The manifest that was read completely (0 if the database is new).
    replayed_manifest: u64,
    /// Whether obsolete WALs are archived ([`super::wal_archive`]) instead of deleted.
    opts: &'a Options,
}

/// Deletes what the recovered manifest proves obsolete and moves what it cannot account
/// for into `lost/` (see the module docs). Runs only after a complete, clean recovery.
fn sweep(
    dir: &Path,
    storage: &Arc<dyn Storage>,
    vs: &VersionSet,
    s: &Sweep<'_>,
    report: &mut RecoveryReport,
) -> Result<()> {
    let v = vs.current();
    let live_tables: HashSet<u64> = v.levels.iter().flatten().map(|f| f.number()).collect();
    // Below this, a file no edit refers to is an abandoned job output.
    let accounted = vs.recovered_next_file_number();
    let current_manifest = vs.manifest_number();
    for p in storage.list(dir)? {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let unreferenced = |live: bool, n: u64| match (live, n < accounted) {
            (true, _) => None,
            (false, true) => Some(Fate::Delete),
            (false, false) => Some(Fate::Lose),
        };
        let fate = match filename::parse(&p) {
            Some((FileKind::Table, n)) => unreferenced(live_tables.contains(&n), n),
            Some((FileKind::ValueFile, n)) => unreferenced(v.blobs.contains_key(&n), n),
            Some((FileKind::IndexMap, n)) => unreferenced(v.maps.contains_key(&n), n),
            Some((FileKind::Wal, n)) => match (n == s.wal, s.incomplete_wals.contains(&n)) {
                (true, _) => None,
                (false, true) => Some(Fate::Lose),
                // Below the new log number: replayed and in tables, or older than the
                // manifest's log number.
                (false, false) if n < vs.log_number => Some(Fate::Retire),
                (false, false) => Some(Fate::Lose),
            },
            Some((FileKind::Manifest, n)) if n == current_manifest => None,
            Some((FileKind::Manifest, n)) if n <= s.replayed_manifest => Some(Fate::Delete),
            // CURRENT itself was read; this is a replacement that never happened.
            Some((FileKind::CurrentTmp, _)) => Some(Fate::Delete),
            // A manifest not replayed, or whose name is damaged: kept aside.
            _ if filename::is_manifest_like(name) => Some(Fate::Lose),
            _ => None,
        };
        match fate {
            None => {}
            Some(Fate::Delete) => {
                storage.remove(&p)?;
                report.deleted.push(p);
            }
            Some(Fate::Retire) => {
                super::wal_archive::retire(&**storage, dir, &p, s.opts)?;
                if !s.opts.wal.archives_wals() {
                    report.deleted.push(p);
                }
            }
            Some(Fate::Lose) => report
                .moved_to_lost
                .push(move_to_lost(dir, storage, &p, "open")?),
        }
    }
    Ok(())
}

enum Fate {
    Delete,
    /// An obsolete WAL: archived or deleted ([`super::wal_archive::retire`]).
    Retire,
    Lose,
}

/// Moves `path` into `dir/lost/<tag>-<unix seconds>/`, keeping its name; returns where it
/// went. Used by open and by repair for files they must not delete.
pub(crate) fn move_to_lost(
    dir: &Path,
    storage: &Arc<dyn Storage>,
    path: &Path,
    tag: &str,
) -> Result<PathBuf> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let into = dir.join(LOST_DIR).join(format!("{tag}-{secs}"));
    storage.create_dir_all(&into)?;
    let name = path
        .file_name()
        .ok_or_else(|| Error::corruption(path, "a file to move aside has no name"))?;
    let mut to = into.join(name);
    let mut k = 1;
    while storage.exists(&to) {
        to = into.join(format!("{}.{k}", name.to_string_lossy()));
        k += 1;
    }
    storage.rename(path, &to)?;
    storage.sync_dir(&into)?;
    storage.sync_dir(dir)?;
    Ok(to)
}
