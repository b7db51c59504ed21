//! Opening a database: lock, manifest, WAL replay, orphan removal.
//!
//! WAL records are replayed into memtables that are written to L0 tables before the
//! handle is returned; the manifest edit that adds them also moves the log number past the
//! replayed WALs, which are then deleted. A torn WAL tail (a write that was never
//! acknowledged as durable) is ignored; damage followed by valid records is an error.
//! Files no version refers to (outputs of a flush, compaction or GC job that did not
//! finish) are removed, so an interrupted job leaves no trace.

use super::{wal_file_name, Inner, State};
use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::compaction::{self, JobSpec};
use crate::error::{Error, Result};
use crate::io::{read_all, FileStorage, IoCause, Storage};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::stats::EngineCounters;
use crate::version::set::{manifest_name, CURRENT};
use crate::version::{VersionEdit, VersionSet};
use crate::vlog::gc;
use crate::wal::{LogReader, LogWriter, ReadOutcome};
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

const LOCK: &str = "LOCK";

fn file_number(p: &Path, ext: &str) -> Option<u64> {
    if p.extension()? != ext {
        return None;
    }
    p.file_stem()?.to_str()?.parse().ok()
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
    let lock_path = dir.join(LOCK);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked(dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&lock_path, e)),
    }
    let has_current = storage.exists(&dir.join(CURRENT));
    if has_current && opts.error_if_exists {
        return Err(Error::InvalidOptions {
            name: "error_if_exists",
            detail: format!("a database exists at {}", dir.display()),
        });
    }
    if !has_current {
        let foreign = storage
            .list(dir)?
            .into_iter()
            .any(|p| p.file_name().is_some_and(|n| n != LOCK));
        if foreign {
            return Err(Error::NotADatabase(dir.to_path_buf()));
        }
        if !opts.create_if_missing {
            return Err(Error::NotFound(dir.to_path_buf()));
        }
    }
    let cache = BlockCache::new(opts.block_cache_capacity);
    let mut versions =
        VersionSet::open(dir, storage.clone(), Some(cache.clone()), opts.num_levels)?;
    let policy = gc::from_options(&opts);
    let lifetime = super::lifetime::LifetimeRuntime::open(dir, &opts)?;

    // Replay WALs newer than the manifest's log number, oldest first.
    let mut wals: Vec<(u64, std::path::PathBuf)> = storage
        .list(dir)?
        .into_iter()
        .filter_map(|p| file_number(&p, "wal").map(|n| (n, p)))
        .filter(|(n, _)| *n >= versions.log_number)
        .collect();
    wals.sort();
    let mut last_seq = versions.last_sequence;
    let mut mem = Arc::new(Memtable::new(0));
    let mut edit = VersionEdit::default();
    for (_, path) in &wals {
        let data = read_all(&*storage, path, IoCause::Other)?;
        let outcome = LogReader::new(path, data).for_each(|rec| {
            let b = WriteBatch::decode(path, rec)?;
            let mut seq = b.first_seq();
            for e in b.iter() {
                mem.add(seq, e.kind, e.key, e.value);
                seq += 1;
            }
            last_seq = last_seq.max(seq - 1);
            Ok(())
        })?;
        if let ReadOutcome::TornTail { valid_len } = outcome {
            storage.truncate(path, valid_len)?;
        }
        if mem.approximate_size() >= opts.memtable_size {
            versions.last_sequence = last_seq;
            let full = std::mem::replace(&mut mem, Arc::new(Memtable::new(0)));
            flush_recovered(
                dir,
                &storage,
                &opts,
                lifetime.as_ref(),
                &mut versions,
                &full,
                &mut edit,
            )?;
        }
    }
    if !mem.is_empty() {
        versions.last_sequence = last_seq;
        flush_recovered(
            dir,
            &storage,
            &opts,
            lifetime.as_ref(),
            &mut versions,
            &mem,
            &mut edit,
        )?;
    }
    let wal_number = versions.new_file_number();
    let wal = if opts.use_wal {
        let f = storage.create(&wal_file_name(dir, wal_number), IoCause::Wal)?;
        Some(LogWriter::new(f))
    } else {
        None
    };
    edit.log_number = Some(wal_number);
    versions.last_sequence = last_seq;
    versions.log_and_apply(edit)?;
    storage.sync_dir(dir)?;
    remove_orphans(dir, &storage, &versions, wal_number)?;

    let state = State {
        mem: Arc::new(Memtable::new(if opts.use_wal { wal_number } else { 0 })),
        imm: VecDeque::new(),
        versions,
        busy_tables: HashSet::new(),
        busy_blobs: HashSet::new(),
        snapshots: BTreeMap::new(),
        bg_error: None,
        flushing: false,
        running_compactions: 0,
        running_gc: false,
        manual: false,
        live_user_bytes: None,
        gc_drops: Vec::new(),
    };
    let warming = crate::warming::Warming::new(&opts.cache_warming, cache.clone(), opts.block_size);
    Ok(Inner {
        dir: dir.to_path_buf(),
        opts,
        storage,
        cache,
        warming,
        gc: policy,
        lifetime,
        read_view: parking_lot::RwLock::new(Arc::new(super::read::ReadView::from_state(&state))),
        state: Mutex::new(state),
        bg_cv: Condvar::new(),
        writers: Mutex::new(VecDeque::new()),
        wal: Mutex::new(wal),
        last_seq: AtomicU64::new(last_seq),
        visible_seq: AtomicU64::new(last_seq),
        counters: EngineCounters::default(),
        shutdown: AtomicBool::new(false),
        _lock: lock,
    })
}

/// Writes a replayed memtable to L0; the tables join `edit`, recorded after replay.
fn flush_recovered(
    dir: &Path,
    storage: &Arc<dyn Storage>,
    opts: &Options,
    lifetime: Option<&super::lifetime::LifetimeRuntime>,
    versions: &mut VersionSet,
    mem: &Arc<Memtable>,
    edit: &mut VersionEdit,
) -> Result<()> {
    let next = AtomicU64::new(versions.next_file_number);
    let nf = || next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let v = versions.current();
    let hooks = lifetime.map(|rt| rt.hooks(&v, 0, versions.last_sequence));
    let spec = JobSpec {
        dir,
        storage,
        opts,
        output_level: 0,
        cause: IoCause::Flush,
        smallest_snapshot: u64::MAX,
        drop_tombstones: false,
        separate_values: opts.gc.separates_values(),
        split_outputs: false,
        relocate: None,
        version: &v,
        lifetime: hooks.as_ref().map(|h| h as &dyn compaction::LifetimeHooks),
        new_file_number: &nf,
        warming: None,
    };
    let out = compaction::run(&spec, &mut mem.iter())?;
    versions.next_file_number = next.into_inner();
    edit.added.extend(out.tables.into_iter().map(|t| (0, t)));
    edit.added_blobs.extend(out.blobs);
    edit.blob_garbage
        .extend(compaction::garbage_by_file(&v, &out.dropped));
    Ok(())
}

/// Deletes files that no version refers to: unfinished job outputs, replayed WALs, old
/// manifests.
fn remove_orphans(dir: &Path, storage: &Arc<dyn Storage>, vs: &VersionSet, wal: u64) -> Result<()> {
    let v = vs.current();
    let live_tables: HashSet<u64> = v.levels.iter().flatten().map(|f| f.number()).collect();
    let manifest = manifest_name(vs.manifest_number());
    for p in storage.list(dir)? {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let orphan = if let Some(n) = file_number(&p, "sst") {
            !live_tables.contains(&n)
        } else if let Some(n) = file_number(&p, "vlog") {
            !v.blobs.contains_key(&n)
        } else if let Some(n) = file_number(&p, "vmap") {
            !v.maps.contains_key(&n)
        } else if let Some(n) = file_number(&p, "wal") {
            n != wal
        } else {
            (name.starts_with("MANIFEST-") && name != manifest) || name == "CURRENT.tmp"
        };
        if orphan {
            storage.remove(&p)?;
        }
    }
    Ok(())
}
