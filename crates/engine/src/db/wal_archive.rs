//! The archive of obsolete WALs: with `Options::wal.wal_ttl_seconds` or `wal_size_limit` set,
//! a WAL whose memtable was flushed is moved into `DIR/archive/` instead of being deleted,
//! so that [`super::updates`] can give the writes it held to a replica or a change
//! consumer that is behind (RocksDB's WAL archive, which Kvrocks' replication reads).
//!
//! Archived WALs are never replayed: open reads only the WALs in `DIR` itself. Losing an
//! archived WAL (the purge, or a power cut that undoes its rename, after which open
//! archives it again) only shortens the change stream, which says so
//! ([`crate::Error::UpdatesGone`]).

use crate::error::Result;
use crate::filename::{self, FileKind, WAL_ARCHIVE_DIR};
use crate::io::Storage;
use crate::options::Options;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub(crate) fn archive_dir(dir: &Path) -> PathBuf {
    dir.join(WAL_ARCHIVE_DIR)
}

/// The archived WALs, by number.
pub(crate) fn list(storage: &dyn Storage, dir: &Path) -> Vec<(u64, PathBuf)> {
    let a = archive_dir(dir);
    if !storage.exists(&a) {
        return Vec::new();
    }
    let mut v: Vec<(u64, PathBuf)> = storage
        .list(&a)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| filename::number_of(&p, FileKind::Wal).map(|n| (n, p)))
        .collect();
    v.sort_unstable();
    v
}

/// Files and bytes in the archive.
pub(crate) fn usage(storage: &dyn Storage, dir: &Path) -> (usize, u64) {
    let files = list(storage, dir);
    let bytes = files
        .iter()
        .filter_map(|(_, p)| storage.file_size(p).ok())
        .sum();
    (files.len(), bytes)
}

/// Moves the obsolete WAL `path` into the archive (or deletes it when the options keep no
/// archive), then drops what falls outside the retention.
pub(crate) fn retire(storage: &dyn Storage, dir: &Path, path: &Path, opts: &Options) -> Result<()> {
    if !opts.wal.archives_wals() {
        return storage.remove(path);
    }
    let a = archive_dir(dir);
    storage.create_dir_all(&a)?;
    let name = path.file_name().expect("a WAL path names a file");
    storage.rename(path, &a.join(name))?;
    purge(storage, dir, opts)
}

/// Drops archived WALs older than `wal_ttl_seconds` (by their last write), then the oldest
/// while the archive holds more than `wal_size_limit` bytes.
pub(crate) fn purge(storage: &dyn Storage, dir: &Path, opts: &Options) -> Result<()> {
    let mut files = list(storage, dir);
    if opts.wal.wal_ttl_seconds > 0 {
        let ttl = Duration::from_secs(opts.wal.wal_ttl_seconds);
        let now = SystemTime::now();
        // The age comes from the file system; a storage without real files gives none,
        // and then only the size bound applies.
        let expired = |p: &Path| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > ttl)
        };
        let mut kept = Vec::with_capacity(files.len());
        for (n, p) in files {
            if expired(&p) {
                storage.remove(&p)?;
            } else {
                kept.push((n, p));
            }
        }
        files = kept;
    }
    if opts.wal.wal_size_limit > 0 {
        let sizes: Vec<u64> = files
            .iter()
            .map(|(_, p)| storage.file_size(p).unwrap_or(0))
            .collect();
        let mut total: u64 = sizes.iter().sum();
        for ((_, p), size) in files.iter().zip(sizes) {
            if total <= opts.wal.wal_size_limit {
                break;
            }
            storage.remove(p)?;
            total -= size;
        }
    }
    Ok(())
}
