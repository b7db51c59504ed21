//! Incremental backups (RocksDB's `BackupEngine`, with its `shared_checksum` layout).
//!
//! A backup directory holds:
//!
//! - `shared/`: tables, value files and index maps, each under its name with its crc32c and
//!   size added (`000012_1a2b3c4d_1048576.sst`). A database never rewrites a file under a
//!   number, so a file already backed up is found under the same name and is not copied
//!   again. The checksum in the name, not the file number alone, decides sharing: two
//!   databases (say, one restored from a backup and written to since) reuse numbers for
//!   different contents, and must not share those files. Deciding it takes a read of every
//!   live file; only new ones are written.
//! - `private/<id>/`: the files made for one backup: manifest, `CURRENT`, the WAL the
//!   manifest names, the lifetime model ([`crate::db::checkpoint::write_private`]).
//! - `meta/<id>`: the backup's description (JSON, [`BackupMeta`]): every file with its
//!   size and crc32c, the sequence number every write up to which it holds, and when it was
//!   made. A backup exists once its meta file does: it is written last, atomically
//!   (temporary file, sync, rename, directory sync), so a backup cut short leaves only
//!   files no meta names, which the next backup with that id replaces.
//!
//! A backup is a checkpoint ([`crate::db::checkpoint::pin`]: flush, then the live files pinned)
//! copied file by file instead of linked. `LOCK` keeps two processes from working on one
//! backup directory at once.

use crate::db::checkpoint::{parent_of, pin, refuse_existing, write_private};
use crate::error::{Error, Result};
use crate::io::{FileStorage, Storage};
use crate::DB;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const SHARED: &str = "shared";
const PRIVATE: &str = "private";
const META: &str = "meta";
/// The version of the meta files' format.
const FORMAT: u32 = 1;
const CHUNK: usize = 1 << 20;

/// One file of a backup.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BackupFile {
    /// Its name in the database (and in a restored one).
    pub name: String,
    /// Where it is, relative to the backup directory.
    pub path: String,
    pub size: u64,
    pub crc32c: u32,
}

/// What `meta/<id>` holds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BackupMeta {
    pub format: u32,
    pub id: u64,
    /// Seconds since the Unix epoch when the backup was made.
    pub timestamp: u64,
    /// Every write up to this sequence number is in the backup (every write acknowledged
    /// before the backup started is).
    pub sequence: u64,
    /// The database directory it was made from.
    pub source: String,
    pub files: Vec<BackupFile>,
}

impl BackupMeta {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// What [`BackupEngine::create`] did.
#[derive(Clone, Debug)]
pub struct CreateReport {
    pub meta: BackupMeta,
    /// Data files copied into `shared/` by this backup.
    pub copied: usize,
    /// Data files an earlier backup had already copied.
    pub reused: usize,
    /// Bytes written (data files copied and private files).
    pub bytes_written: u64,
}

/// A backup directory, locked while this is held.
pub struct BackupEngine {
    dir: PathBuf,
    _lock: File,
}

impl BackupEngine {
    /// Opens the backup directory `dir`, creating it (and its subdirectories) if missing.
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupEngine> {
        let dir = dir.as_ref().to_path_buf();
        for sub in [SHARED, PRIVATE, META] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
        }
        // The same lock file as a database's: one writer at a time.
        let lock = crate::db::recovery::lock_dir(&dir)?;
        Ok(BackupEngine { dir, _lock: lock })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Backs up `db`: flushes it, pins its live files, copies into `shared/` those no
    /// earlier backup holds, writes its private files and then its meta file.
    pub fn create(&self, db: &DB) -> Result<CreateReport> {
        let id = self.ids()?.last().map_or(1, |n| n + 1);
        let private = self.dir.join(PRIVATE).join(id.to_string());
        let tmp = self.dir.join(PRIVATE).join(format!("{id}.tmp"));
        // No meta names `id` (it is above every one): these are a cut-short backup's.
        for d in [&private, &tmp] {
            if d.exists() {
                std::fs::remove_dir_all(d).map_err(|e| Error::io(d, e))?;
            }
        }
        std::fs::create_dir(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let r = self.fill(db, id, &tmp, &private);
        if r.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        r
    }

    fn fill(&self, db: &DB, id: u64, tmp: &Path, private: &Path) -> Result<CreateReport> {
        let storage = FileStorage::new();
        let pinned = pin(db.inner())?;
        let shared_dir = self.dir.join(SHARED);
        let (mut files, mut copied, mut reused, mut bytes_written) = (Vec::new(), 0, 0, 0);
        for f in &pinned.files {
            let (size, crc) = crc_of(&f.path)?;
            if size != f.size {
                return Err(Error::corruption(
                    &f.path,
                    format!("{size} bytes, the manifest recorded {}", f.size),
                ));
            }
            let shared_name = shared_name(&f.name, crc, size);
            let to = shared_dir.join(&shared_name);
            match std::fs::metadata(&to) {
                Ok(m) if m.len() == size => reused += 1,
                _ => {
                    copy_checked(&f.path, &to, crc)?;
                    copied += 1;
                    bytes_written += size;
                }
            }
            files.push(BackupFile {
                name: f.name.clone(),
                path: format!("{SHARED}/{shared_name}"),
                size,
                crc32c: crc,
            });
        }
        storage.sync_dir(&shared_dir)?;
        let sequence = pinned.sequence;
        for name in write_private(&pinned, tmp)? {
            let (size, crc) = crc_of(&tmp.join(&name))?;
            bytes_written += size;
            files.push(BackupFile {
                name: name.clone(),
                path: format!("{PRIVATE}/{id}/{name}"),
                size,
                crc32c: crc,
            });
        }
        drop(pinned);
        std::fs::rename(tmp, private).map_err(|e| Error::io(private, e))?;
        storage.sync_dir(&self.dir.join(PRIVATE))?;
        let meta = BackupMeta {
            format: FORMAT,
            id,
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            sequence,
            source: db.path().display().to_string(),
            files,
        };
        self.write_meta(&meta)?;
        Ok(CreateReport {
            meta,
            copied,
            reused,
            bytes_written,
        })
    }

    /// Writes `meta/<id>` atomically: the backup exists from the rename on.
    fn write_meta(&self, meta: &BackupMeta) -> Result<()> {
        let dir = self.dir.join(META);
        let path = dir.join(meta.id.to_string());
        let tmp = dir.join(format!("{}.tmp", meta.id));
        let json = serde_json::to_vec_pretty(meta)
            .map_err(|e| Error::io(&path, std::io::Error::other(e)))?;
        let mut f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(&json)
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::io(&tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        FileStorage::new().sync_dir(&dir)
    }

    /// The ids of the backups, ascending.
    fn ids(&self) -> Result<Vec<u64>> {
        let dir = self.dir.join(META);
        let mut ids: Vec<u64> = std::fs::read_dir(&dir)
            .map_err(|e| Error::io(&dir, e))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// The backups, oldest first.
    pub fn list(&self) -> Result<Vec<BackupMeta>> {
        self.ids()?.into_iter().map(|id| self.meta(id)).collect()
    }

    /// The description of backup `id`.
    pub fn meta(&self, id: u64) -> Result<BackupMeta> {
        let path = self.dir.join(META).join(id.to_string());
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound(path))
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        let meta: BackupMeta = serde_json::from_slice(&data)
            .map_err(|e| Error::corruption(&path, format!("not a backup description: {e}")))?;
        if meta.format != FORMAT || meta.id != id {
            return Err(Error::corruption(
                &path,
                format!(
                    "describes backup {} in format {}, expected backup {id} in format {FORMAT}",
                    meta.id, meta.format
                ),
            ));
        }
        Ok(meta)
    }

    /// Deletes every backup but the newest `keep` (RocksDB's `PurgeOldBackups`), oldest
    /// first: each one's meta file goes first (the backup no longer exists from then on),
    /// then what no remaining backup names ([`Self::collect_garbage`]). Cut short, it
    /// leaves only files no meta names, which the next purge removes. Returns the ids
    /// deleted.
    pub fn purge_old(&self, keep: usize) -> Result<Vec<u64>> {
        let ids = self.ids()?;
        let doomed: Vec<u64> = ids[..ids.len().saturating_sub(keep)].to_vec();
        let dir = self.dir.join(META);
        for id in &doomed {
            let path = dir.join(id.to_string());
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        }
        FileStorage::new().sync_dir(&dir)?;
        self.collect_garbage()?;
        Ok(doomed)
    }

    /// Removes what no backup's meta file names: shared files of purged backups, private
    /// directories of purged or cut-short backups, temporary meta files. Returns the
    /// number of files and directories removed.
    pub fn collect_garbage(&self) -> Result<usize> {
        let metas = self.list()?;
        let named: std::collections::HashSet<&str> = metas
            .iter()
            .flat_map(|m| m.files.iter().map(|f| f.path.as_str()))
            .collect();
        let ids: std::collections::HashSet<String> =
            metas.iter().map(|m| m.id.to_string()).collect();
        let entries = |sub: &str| -> Result<Vec<(String, PathBuf)>> {
            let d = self.dir.join(sub);
            Ok(std::fs::read_dir(&d)
                .map_err(|e| Error::io(&d, e))?
                .filter_map(|e| {
                    let e = e.ok()?;
                    Some((e.file_name().to_str()?.to_string(), e.path()))
                })
                .collect())
        };
        let mut removed = 0;
        for (name, path) in entries(SHARED)? {
            if !named.contains(format!("{SHARED}/{name}").as_str()) {
                std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                removed += 1;
            }
        }
        for (name, path) in entries(PRIVATE)? {
            if !ids.contains(&name) {
                std::fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
                removed += 1;
            }
        }
        for (name, path) in entries(META)? {
            if name.ends_with(".tmp") {
                std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The newest backup's id, or `NotFound` naming the meta directory.
    pub fn latest(&self) -> Result<u64> {
        self.ids()?
            .last()
            .copied()
            .ok_or_else(|| Error::NotFound(self.dir.join(META)))
    }

    /// Recomputes the size and crc32c of every file of backup `id`; the first that
    /// differs from its meta file (or is missing) fails it as corruption naming the file.
    pub fn verify(&self, id: u64) -> Result<BackupMeta> {
        let meta = self.meta(id)?;
        for f in &meta.files {
            let path = self.dir.join(&f.path);
            let (size, crc) = match crc_of(&path) {
                Ok(x) => x,
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::corruption(
                        &path,
                        format!("missing: backup {id} lists it as {}", f.name),
                    ))
                }
                Err(e) => return Err(e),
            };
            if (size, crc) != (f.size, f.crc32c) {
                return Err(Error::corruption(
                    &path,
                    format!(
                        "{size} bytes with crc32c {crc:08x}, backup {id} recorded {} bytes with {:08x}",
                        f.size, f.crc32c
                    ),
                ));
            }
        }
        Ok(meta)
    }

    /// Copies backup `id` (the newest if `None`) into `to`, which must not exist or be an
    /// empty directory, checking every file's checksum on the way. The copy is made in a
    /// sibling directory and renamed into place, so a restore cut short never leaves a
    /// partial database under `to` (which an open would take for a new one).
    pub fn restore(&self, id: Option<u64>, to: &Path) -> Result<BackupMeta> {
        let id = match id {
            Some(id) => id,
            None => self.latest()?,
        };
        let meta = self.meta(id)?;
        if to.exists() {
            let empty = std::fs::read_dir(to)
                .map_err(|e| Error::io(to, e))?
                .next()
                .is_none();
            if !empty {
                return Err(Error::io(
                    to,
                    std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "restore target is not empty",
                    ),
                ));
            }
        }
        let name = to
            .file_name()
            .ok_or_else(|| Error::io(to, std::io::Error::other("names no directory")))?;
        let tmp = to.with_file_name(format!("{}.restore-tmp", name.to_string_lossy()));
        refuse_existing(&tmp, "a restore's temporary directory")?;
        std::fs::create_dir(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let r = (|| -> Result<()> {
            for f in &meta.files {
                copy_checked(&self.dir.join(&f.path), &tmp.join(&f.name), f.crc32c)?;
            }
            let storage = FileStorage::new();
            storage.sync_dir(&tmp)?;
            // Replaces `to` if it is an empty directory (rename(2)).
            std::fs::rename(&tmp, to).map_err(|e| Error::io(to, e))?;
            storage.sync_dir(&parent_of(to))
        })();
        if r.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        r.map(|()| meta)
    }
}

/// `000012.sst` with crc `c` and size `n` -> `000012_<c>_<n>.sst`.
fn shared_name(name: &str, crc: u32, size: u64) -> String {
    match name.split_once('.') {
        Some((stem, ext)) => format!("{stem}_{crc:08x}_{size}.{ext}"),
        None => format!("{name}_{crc:08x}_{size}"),
    }
}

/// The size and crc32c of the file at `path`, read whole.
fn crc_of(path: &Path) -> Result<(u64, u32)> {
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut buf = vec![0u8; CHUNK];
    let (mut size, mut crc) = (0u64, 0u32);
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            return Ok((size, crc));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        size += n as u64;
    }
}

/// Copies `from` to the new file `to` through a temporary file that is synced and renamed
/// into place, failing if what was read does not have the crc32c `want` (then `from` is
/// damaged, or changed since its checksum was taken).
fn copy_checked(from: &Path, to: &Path, want: u32) -> Result<()> {
    let tmp = PathBuf::from(format!("{}.tmp", to.display()));
    let r = (|| -> Result<()> {
        let mut src = File::open(from).map_err(|e| Error::io(from, e))?;
        let mut dst = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let mut buf = vec![0u8; CHUNK];
        let mut crc = 0u32;
        loop {
            let n = src.read(&mut buf).map_err(|e| Error::io(from, e))?;
            if n == 0 {
                break;
            }
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            dst.write_all(&buf[..n]).map_err(|e| Error::io(&tmp, e))?;
        }
        if crc != want {
            return Err(Error::corruption(
                from,
                format!("read with crc32c {crc:08x}, expected {want:08x}"),
            ));
        }
        dst.sync_all().map_err(|e| Error::io(&tmp, e))?;
        drop(dst);
        std::fs::rename(&tmp, to).map_err(|e| Error::io(to, e))
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_names_carry_checksum_and_size() {
        assert_eq!(
            shared_name("000012.sst", 0x1a2b3c4d, 1024),
            "000012_1a2b3c4d_1024.sst"
        );
        assert_eq!(shared_name("000007.vmap", 1, 2), "000007_00000001_2.vmap");
    }
}
