//! Checkpoints: a consistent, openable copy of a live database in a new directory, made of
//! hard links to its immutable files (RocksDB's `Checkpoint`).
//!
//! Tables, value files a version names and index maps never change once a manifest edit
//! names them, so a hard link is a copy that costs one directory entry. What a checkpoint
//! does ([`DB::checkpoint`](crate::DB::checkpoint)):
//!
//! 1. It holds off GC, then flushes the memtable (RocksDB's checkpoint with
//!    `log_size_for_flush` 0). Every write acknowledged before the call is then in a table,
//!    and with the value log as the WAL every value file its WAL records pointed into is
//!    named by the manifest, so no WAL needs copying. GC is held off because both GC kinds
//!    delete their input files relying on writes that may still be only in the WAL (Titan's
//!    written-back pointers, and the overwrites that made the records the lookups skipped
//!    garbage): a GC that finished between the flush and the capture would leave tables
//!    pointing into a deleted file, the fixes of which are in a WAL the checkpoint does
//!    not have. Flushes and compactions only ever rely on tables, and go on.
//! 2. Under the state lock, it takes the current [`Version`] and one snapshot edit of it
//!    (the garbage counts of value files are updated in place by later edits, so they are
//!    read under the lock). Holding the version's `Arc` pins its files: a table, value file
//!    or index map is deleted only when the last version naming it is dropped.
//! 3. It links every file the version names into a temporary sibling directory, copying
//!    instead where links are impossible (another file system: `EXDEV`), writes a fresh
//!    manifest holding the snapshot edit, the empty WAL that the manifest's log number
//!    names (open requires it), `CURRENT` and a copy of `LIFETIME-MODEL`, syncs them and the
//!    directory, and renames the directory into place: a checkpoint cut short by a crash
//!    leaves only the temporary directory, never a half-made database under the name.
//!
//! A linked file's data was synced before the manifest named it, so only its directory
//! entry is new, and the directory sync makes it durable. Writes after the flush are in
//! the checkpoint or not, as they raced it: it holds a prefix of the writes.
//!
//! [`pin`] and [`write_private`] are also what backups are made of ([`crate::backup`]).

use super::inner::Inner;
use super::write;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{
    index_map_file_name, manifest_name, wal_file_name, CURRENT, LIFETIME_MODEL as MODEL_FILE,
};
use crate::io::{FileStorage, IoCause, Storage};
use crate::version::set::{snapshot_edit, write_current};
use crate::version::{Version, VersionEdit};
use crate::wal::LogWriter;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// What a checkpoint made.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckpointInfo {
    pub dir: PathBuf,
    /// Every write up to this sequence number is in the checkpoint (every write
    /// acknowledged before the call is).
    pub sequence: u64,
    /// Tables, value files and index maps.
    pub data_files: usize,
    /// Of those, hard-linked; the rest were copied.
    pub linked: usize,
    /// Bytes of the data files.
    pub bytes: u64,
}

/// One immutable file a pinned version names.
#[derive(Clone, Debug)]
pub(crate) struct LiveFile {
    /// Its name in the database directory (`000012.sst`).
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
}

/// The live files of a database at one moment, kept from deletion while this is held,
/// and the snapshot edit a manifest describing them starts with.
pub(crate) struct Pinned {
    _version: Arc<Version>,
    pub files: Vec<LiveFile>,
    edit: VersionEdit,
    wal_number: u64,
    manifest_number: u64,
    pub sequence: u64,
    src: PathBuf,
}

/// Keeps new GC jobs from starting (and waits out running ones) while held
/// (`State::gc_paused`; see the module docs for why).
struct GcPause<'a>(&'a Inner);

impl<'a> GcPause<'a> {
    fn take(inner: &'a Inner) -> Result<GcPause<'a>> {
        let mut st = inner.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(e.clone()));
            }
            if inner.shutdown.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            if st.running_gc == 0 && !st.gc_paused {
                st.gc_paused = true;
                return Ok(GcPause(inner));
            }
            inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }
}

impl Drop for GcPause<'_> {
    fn drop(&mut self) {
        self.0.state.lock().gc_paused = false;
        self.0.bg_cv.notify_all();
    }
}

/// Flushes the database and pins the files of the resulting version (steps 1 and 2 of the
/// module docs). Takes the engine's state rather than the public `DB`, so that this module
/// sits below `db/mod.rs`, which calls it.
pub(crate) fn pin(inner: &Arc<Inner>) -> Result<Pinned> {
    let sequence = inner.visible_seq.load(Ordering::Acquire);
    let pause = GcPause::take(inner)?;
    write::force_switch(inner)?;
    inner.wait_flushed()?;
    let st = inner.state.lock();
    let v = st.versions.current();
    // Names in the checkpoint only, above every number its files use.
    let wal_number = st.versions.next_file_number();
    let manifest_number = wal_number + 1;
    let newest = v
        .levels
        .iter()
        .flatten()
        .map(|f| f.meta.largest_seq)
        .max()
        .unwrap_or(0);
    let last_sequence = st.versions.last_sequence.max(newest).max(sequence);
    let edit = snapshot_edit(&v, wal_number, manifest_number + 1, last_sequence);
    drop(st);
    drop(pause);
    let src = inner.dir.clone();
    let mut files = Vec::new();
    for f in v.levels.iter().flatten() {
        files.push(live(f.path(), f.meta.size));
    }
    for b in v.blobs.values() {
        files.push(live(&b.path, b.size));
    }
    for m in v.maps.values() {
        let path = index_map_file_name(&src, m.target());
        let size = inner.storage.file_size(&path)?;
        files.push(live(&path, size));
    }
    Ok(Pinned {
        _version: v,
        files,
        edit,
        wal_number,
        manifest_number,
        sequence,
        src,
    })
}

fn live(path: &Path, size: u64) -> LiveFile {
    LiveFile {
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        path: path.to_path_buf(),
        size,
    }
}

/// Writes into `dir` the files of a pinned state that are not the database's own: the
/// WAL the manifest's log number names, the manifest, `CURRENT` (last: it makes the
/// directory a database) and a copy of the lifetime model if there is one, each synced,
/// then the directory. Returns their names.
pub(crate) fn write_private(p: &Pinned, dir: &Path) -> Result<Vec<String>> {
    // A storage of its own, so that the database's I/O counters (its amplification) do
    // not count the checkpoint.
    let storage = FileStorage::new();
    let wal = wal_file_name(dir, p.wal_number);
    let mut w = LogWriter::new(storage.create(&wal, IoCause::Wal)?);
    let last = p.edit.last_sequence.unwrap_or(0);
    w.add_record(WriteBatch::log_start(last + 1).encoded())?;
    w.sync()?;
    drop(w);
    let manifest = manifest_name(p.manifest_number);
    let mut m = LogWriter::new(storage.create(&dir.join(&manifest), IoCause::Manifest)?);
    m.add_record(&p.edit.encode())?;
    m.sync()?;
    drop(m);
    let mut names = vec![file_name(&wal), manifest];
    let model = p.src.join(MODEL_FILE);
    if model.exists() {
        // Replaced by rename, never rewritten in place: a copy reads one whole model.
        copy_synced(&model, &dir.join(MODEL_FILE))?;
        names.push(MODEL_FILE.to_string());
    }
    write_current(&storage, dir, &names[1])?;
    names.push(CURRENT.to_string());
    storage.sync_dir(dir)?;
    Ok(names)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Copies `from` to the new file `to` and syncs it.
pub(crate) fn copy_synced(from: &Path, to: &Path) -> Result<u64> {
    let n = std::fs::copy(from, to).map_err(|e| Error::io(from, e))?;
    std::fs::File::open(to)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(to, e))?;
    Ok(n)
}

/// Whether a failed `hard_link` means links cannot be made here (so copy), rather than
/// that something is wrong: another file system (`EXDEV`), one without hard links
/// (`EPERM`, `ENOTSUP`), or a file with too many links already (`EMLINK`).
fn links_impossible(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::CrossesDevices | ErrorKind::Unsupported | ErrorKind::TooManyLinks
    ) || e.raw_os_error() == Some(libc::EPERM)
}

/// A target that exists is refused: a checkpoint never writes into anything it did not
/// create.
pub(crate) fn refuse_existing(path: &Path, what: &str) -> Result<()> {
    if path.exists() {
        return Err(Error::io(
            path,
            std::io::Error::new(ErrorKind::AlreadyExists, format!("{what} already exists")),
        ));
    }
    Ok(())
}

/// The sibling directory a checkpoint of `target` is made in before it is renamed into
/// place.
fn staging(target: &Path) -> Result<PathBuf> {
    let name = target
        .file_name()
        .ok_or_else(|| Error::io(target, std::io::Error::other("names no directory")))?;
    Ok(target.with_file_name(format!("{}.checkpoint-tmp", name.to_string_lossy())))
}

/// The parent directory of `p`, for syncing the entry of `p` ("." when `p` is relative and
/// has none).
pub(crate) fn parent_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

pub(crate) fn create(inner: &Arc<Inner>, target: &Path) -> Result<CheckpointInfo> {
    refuse_existing(target, "checkpoint target")?;
    let tmp = staging(target)?;
    // A leftover from a checkpoint cut short is not removed: it is named in the error, for
    // whoever knows it is one to delete.
    std::fs::create_dir(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let made = fill(inner, &tmp).and_then(|info| {
        refuse_existing(target, "checkpoint target")?;
        std::fs::rename(&tmp, target).map_err(|e| Error::io(target, e))?;
        FileStorage::new().sync_dir(&parent_of(target))?;
        Ok(info)
    });
    match made {
        Ok(mut info) => {
            info.dir = target.to_path_buf();
            Ok(info)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

fn fill(inner: &Arc<Inner>, dir: &Path) -> Result<CheckpointInfo> {
    let p = pin(inner)?;
    let mut linked = 0;
    let mut can_link = true;
    let mut bytes = 0;
    for f in &p.files {
        let to = dir.join(&f.name);
        bytes += f.size;
        if can_link {
            match std::fs::hard_link(&f.path, &to) {
                Ok(()) => {
                    linked += 1;
                    continue;
                }
                // This file has too many links; the next may not.
                Err(e) if e.kind() == ErrorKind::TooManyLinks => {}
                Err(e) if links_impossible(&e) => can_link = false,
                Err(e) => return Err(Error::io(&f.path, e)),
            }
        }
        copy_synced(&f.path, &to)?;
    }
    write_private(&p, dir)?;
    Ok(CheckpointInfo {
        dir: dir.to_path_buf(),
        sequence: p.sequence,
        data_files: p.files.len(),
        linked,
        bytes,
    })
}
