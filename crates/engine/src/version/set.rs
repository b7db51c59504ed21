//! The version set: the current [`Version`], the manifest that records every edit, and the
//! counters (next file number, last sequence, oldest live WAL) that survive restarts.
//!
//! The manifest is a [`crate::wal::log`] file of [`VersionEdit`]s. `CURRENT` names it and is
//! replaced atomically (write a temporary file, sync, rename, sync the directory). On every
//! open a new manifest is started with one edit describing the whole recovered state, so
//! manifests never grow without bound across restarts.
//!
//! Replay is strict: the manifest is the only record of which files hold data, so any
//! damage in it (a checksum mismatch anywhere, the last record included, a manifest that is
//! missing, empty or does not start with a full snapshot) fails the open with
//! [`Error::Corruption`]. The one tolerated defect is an edit cut short by the end of the
//! file: its writer died before the edit was synced, so it never took effect.
//!
//! `CURRENT` := `MANIFEST-<number>\n` `crc32c:<8 hex digits>\n`, the checksum (masked
//! crc32c) of the first line without its newline. A file of the first line alone, as older
//! versions wrote it, is still read.
//!
//! The grammar of every file in a database directory is in `docs/format.md`.

use super::purge::{PurgeThread, Purger};
use super::{Version, VersionEdit};
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::filename::{self, file_number_of, manifest_name, FileKind, CURRENT, CURRENT_TMP};
use crate::io::{read_all, IoCause, Storage};
use crate::vlog::IndexMap;
use crate::wal::{LogReader, LogWriter, WalRecoveryMode};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rotate the manifest once it grows past this size.
const MANIFEST_ROTATE_BYTES: u64 = 64 << 20;

pub struct VersionSet {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    cache: Option<Arc<BlockCache>>,
    current: Arc<Version>,
    pub next_file_number: u64,
    pub last_sequence: u64,
    /// WAL files numbered below this hold nothing that is not in table files.
    pub log_number: u64,
    manifest: Option<LogWriter>,
    manifest_number: u64,
    recovered_next_file_number: u64,
    /// Deletes the table files edits remove (started by [`VersionSet::start`]); last, so
    /// that the files of the versions dropped with the set are queued before it stops.
    purge: Option<PurgeThread>,
}

impl VersionSet {
    /// Makes a recovered set writable: reserves every file number already used in the
    /// directory and starts a new manifest holding the whole state.
    pub fn start(&mut self) -> Result<()> {
        // A file numbered at or above the recovered counter belongs to no edit (an
        // unfinished job, or an edit lost to damage): never reuse its number.
        let highest = self
            .storage
            .list(&self.dir)?
            .iter()
            .filter_map(|p| file_number_of(p))
            .max()
            .unwrap_or(0);
        self.next_file_number = self.next_file_number.max(highest + 1);
        if self.purge.is_none() {
            let t = PurgeThread::start().map_err(|e| Error::io(&self.dir, e))?;
            self.purge = Some(t);
        }
        self.rotate_manifest()
    }

    /// The thread deleting obsolete table files, once [`VersionSet::start`] ran.
    pub fn purger(&self) -> Option<Arc<Purger>> {
        self.purge.as_ref().map(|p| p.purger().clone())
    }

    /// Reads the state named by CURRENT without writing anything: no new manifest, no
    /// counter changes. What `halflife check` inspects.
    pub fn recover(
        dir: &Path,
        storage: Arc<dyn Storage>,
        cache: Option<Arc<BlockCache>>,
        num_levels: usize,
    ) -> Result<VersionSet> {
        let mut vs = VersionSet {
            dir: dir.to_path_buf(),
            storage,
            cache,
            current: Arc::new(Version::empty(num_levels)),
            next_file_number: 2,
            last_sequence: 0,
            log_number: 0,
            manifest: None,
            manifest_number: 0,
            recovered_next_file_number: 2,
            purge: None,
        };
        let current = dir.join(CURRENT);
        if vs.storage.exists(&current) {
            let name = parse_current(
                &current,
                &read_all(&*vs.storage, &current, IoCause::Manifest)?,
            )?;
            let path = dir.join(&name);
            if !vs.storage.exists(&path) {
                return Err(Error::corruption(
                    &current,
                    format!("names {name}, which does not exist"),
                ));
            }
            vs.replay(&path)?;
            vs.manifest_number = filename::parse_name(&name).map_or(0, |(_, n)| n);
        }
        vs.recovered_next_file_number = vs.next_file_number;
        Ok(vs)
    }

    fn replay(&mut self, path: &Path) -> Result<()> {
        let data = read_all(&*self.storage, path, IoCause::Manifest)?;
        let mut edits = Vec::new();
        // A torn tail is an edit whose writer crashed before syncing it: that edit never
        // took effect (its files are orphans), so it is ignored. Any other damage fails.
        LogReader::new(path, data).for_each(
            WalRecoveryMode::TolerateCorruptedTailRecords,
            |rec| {
                edits.push(VersionEdit::decode(path, rec)?);
                Ok(())
            },
        )?;
        // Every manifest starts with a snapshot of the whole state, synced before CURRENT
        // named it; without one the state is unknown.
        match edits.first() {
            None => return Err(Error::corruption(path, "manifest holds no edit")),
            Some(e)
                if e.next_file_number.is_none()
                    || e.log_number.is_none()
                    || e.last_sequence.is_none() =>
            {
                return Err(Error::corruption(
                    path,
                    "first edit at offset 0 is not a snapshot of the state",
                ))
            }
            Some(_) => {}
        }
        // Index maps still listed at the end of the log are loaded once; maps deleted by a
        // later edit are gone from disk and skipped.
        let mut live_maps = std::collections::BTreeSet::new();
        for e in &edits {
            live_maps.extend(e.added_maps.iter().map(|m| m.0));
            for n in &e.deleted_maps {
                live_maps.remove(n);
            }
        }
        let mut loaded = HashMap::new();
        for n in live_maps {
            let map = IndexMap::load(&self.dir, &self.storage, n).map_err(|e| match e {
                Error::Io { path: p, source } => Error::corruption(
                    p,
                    format!("index map named by the manifest cannot be read: {source}"),
                ),
                e => e,
            })?;
            loaded.insert(n, Arc::new(map));
        }
        let mut v = Version::empty(self.current.num_levels());
        for e in &edits {
            for (level, f) in &e.added {
                if *level >= v.num_levels() {
                    return Err(Error::corruption(
                        path,
                        format!("table {} at level {level} beyond num_levels", f.number),
                    ));
                }
            }
            v = v.apply_with_maps(e, &self.dir, &self.storage, &self.cache, &loaded);
            self.absorb_counters(e);
        }
        // Nothing was deleted by replaying: the apply above marks removed files obsolete,
        // but they were already deleted (or are orphans collected by the caller).
        self.current = Arc::new(v);
        self.verify_files(path)
    }

    /// Every file the state names exists with the size the manifest recorded (RocksDB's
    /// paranoid check at open): a missing or cut file is found now, not by a later read.
    fn verify_files(&self, manifest: &Path) -> Result<()> {
        let v = &self.current;
        let named = v
            .levels
            .iter()
            .flatten()
            .map(|f| (f.path().to_path_buf(), f.meta.size, "table"))
            .chain(
                v.blobs
                    .values()
                    .map(|b| (b.path.clone(), b.size, "value file")),
            );
        for (path, size, what) in named {
            match self.storage.file_size(&path) {
                Ok(n) if n == size => {}
                Ok(n) => {
                    return Err(Error::corruption(
                        &path,
                        format!("{what} of {n} bytes, the manifest recorded {size}"),
                    ))
                }
                Err(_) => {
                    return Err(Error::corruption(
                        &path,
                        format!("{what} named by {} is missing", manifest.display()),
                    ))
                }
            }
        }
        Ok(())
    }

    /// The next file number the manifest recorded (before this open reserved any): a file
    /// no edit refers to is provably an abandoned output only below it.
    pub fn recovered_next_file_number(&self) -> u64 {
        self.recovered_next_file_number
    }

    fn absorb_counters(&mut self, e: &VersionEdit) {
        if let Some(n) = e.log_number {
            self.log_number = self.log_number.max(n);
        }
        if let Some(n) = e.next_file_number {
            self.next_file_number = self.next_file_number.max(n);
        }
        if let Some(s) = e.last_sequence {
            self.last_sequence = self.last_sequence.max(s);
        }
        for (_, f) in &e.added {
            self.next_file_number = self.next_file_number.max(f.number + 1);
        }
        for b in &e.added_blobs {
            self.next_file_number = self.next_file_number.max(b.number + 1);
        }
    }

    /// Starts a new manifest holding one edit with the whole current state.
    fn rotate_manifest(&mut self) -> Result<()> {
        let number = self.new_file_number();
        let path = self.dir.join(manifest_name(number));
        let mut w = LogWriter::new(self.storage.create(&path, IoCause::Manifest)?);
        let snap = snapshot_edit(
            &self.current,
            self.log_number,
            self.next_file_number,
            self.last_sequence,
        );
        w.add_record(&snap.encode())?;
        w.sync()?;
        self.set_current(&manifest_name(number))?;
        let old = self.manifest_number;
        let runtime = self.manifest.is_some();
        self.manifest = Some(w);
        self.manifest_number = number;
        // At open the replayed manifest is left for the orphan sweep, which runs only
        // once recovery has finished; a runtime rotation's old manifest is obsolete now.
        if runtime && old != 0 {
            let _ = self.storage.remove(&self.dir.join(manifest_name(old)));
        }
        Ok(())
    }

    fn set_current(&self, name: &str) -> Result<()> {
        write_current(&*self.storage, &self.dir, name)
    }

    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// The number the next new file will get.
    pub fn next_file_number(&self) -> u64 {
        self.next_file_number
    }

    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Records `edit` durably in the manifest, then makes the resulting version current.
    pub fn log_and_apply(&mut self, edit: VersionEdit) -> Result<()> {
        self.log_and_apply_with_maps(edit, Vec::new())
    }

    /// [`VersionSet::log_and_apply`] for an edit that adds the index maps `maps`, already
    /// written and synced by the GC job that built them (so they are not read back).
    pub fn log_and_apply_with_maps(
        &mut self,
        mut edit: VersionEdit,
        maps: Vec<Arc<IndexMap>>,
    ) -> Result<()> {
        edit.next_file_number = Some(self.next_file_number);
        edit.last_sequence = Some(self.last_sequence);
        let loaded: HashMap<u64, Arc<IndexMap>> =
            maps.into_iter().map(|m| (m.target(), m)).collect();
        if let Some((n, _)) = edit.added_maps.iter().find(|m| !loaded.contains_key(&m.0)) {
            return Err(Error::corruption(
                &self.dir,
                format!("version edit adds index map {n} that was not handed over"),
            ));
        }
        // Files the edit names (tables, value files, index maps, and the WAL its log number
        // moves to) must outlive a power cut as directory entries too, before the manifest
        // refers to them (RocksDB's directory fsync before a manifest write).
        if !edit.added.is_empty()
            || !edit.added_blobs.is_empty()
            || !edit.added_maps.is_empty()
            || edit.log_number.is_some()
        {
            self.storage.sync_dir(&self.dir)?;
        }
        let w = self.manifest.as_mut().ok_or(Error::Closed)?;
        w.add_record(&edit.encode())?;
        w.sync()?;
        self.absorb_counters(&edit);
        let next =
            self.current
                .apply_with_maps(&edit, &self.dir, &self.storage, &self.cache, &loaded);
        if let Some(p) = &self.purge {
            for &(level, number) in &edit.deleted {
                if let Some(f) = self.current.levels[level]
                    .iter()
                    .find(|f| f.number() == number)
                {
                    f.purge_through(p.purger());
                }
            }
        }
        self.current = Arc::new(next);
        if self
            .manifest
            .as_ref()
            .is_some_and(|m| m.len() > MANIFEST_ROTATE_BYTES)
        {
            self.rotate_manifest()?;
        }
        Ok(())
    }
}

/// One edit describing the whole of `v` with the given counters: what every manifest
/// starts with. Shared with checkpoints and backups (`crate::db::checkpoint`), whose manifests
/// must be the ones open replays. Value files' garbage counts are read from `v`'s files,
/// which later edits update in place: call it under the state lock.
pub(crate) fn snapshot_edit(
    v: &Version,
    log_number: u64,
    next_file_number: u64,
    last_sequence: u64,
) -> VersionEdit {
    let mut snap = VersionEdit {
        log_number: Some(log_number),
        next_file_number: Some(next_file_number),
        last_sequence: Some(last_sequence),
        ..Default::default()
    };
    for (level, files) in v.levels.iter().enumerate() {
        for f in files {
            snap.added.push((level, f.meta.clone()));
            if f.run != 0 {
                snap.table_runs.push((f.number(), f.run));
            }
        }
    }
    for b in v.blobs.values() {
        snap.added_blobs.push(b.meta());
        if b.is_pending() {
            snap.gc_pending.push(b.number);
        }
    }
    for m in v.maps.values() {
        snap.added_maps.push((m.target(), m.sources().to_vec()));
    }
    snap
}

fn current_crc(name: &str) -> u32 {
    crate::checksum::masked(name.as_bytes())
}

/// Parses CURRENT (format in the module docs); `path` names it in errors.
pub fn parse_current(path: &Path, data: &[u8]) -> Result<String> {
    let bad = |what: &str| Error::corruption(path, format!("CURRENT {what}"));
    let text = std::str::from_utf8(data).map_err(|_| bad("is not text"))?;
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    if !text.ends_with('\n') || lines.is_empty() || lines.len() > 2 {
        return Err(bad("is not one or two lines"));
    }
    let name = lines[0];
    if !matches!(filename::parse_name(name), Some((FileKind::Manifest, _))) {
        return Err(bad("does not name a manifest"));
    }
    if let Some(sum) = lines.get(1) {
        let want = format!("crc32c:{:08x}", current_crc(name));
        if *sum != want {
            return Err(bad(&format!(
                "checksum mismatch ({sum:?}, expected {want:?})"
            )));
        }
    }
    Ok(name.to_string())
}

/// Points CURRENT at manifest `name` atomically: temporary file, sync, rename, sync dir.
pub(crate) fn write_current(storage: &dyn Storage, dir: &Path, name: &str) -> Result<()> {
    let tmp = dir.join(CURRENT_TMP);
    let mut f = storage.create(&tmp, IoCause::Manifest)?;
    f.append(format!("{name}\ncrc32c:{:08x}\n", current_crc(name)).as_bytes())?;
    f.sync()?;
    drop(f);
    storage.rename(&tmp, &dir.join(CURRENT))?;
    storage.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_round_trips_and_every_flipped_byte_is_caught() {
        let name = "MANIFEST-000042";
        let text = format!("{name}\ncrc32c:{:08x}\n", current_crc(name));
        let p = Path::new("CURRENT");
        assert_eq!(parse_current(p, text.as_bytes()).unwrap(), name);
        assert_eq!(
            parse_current(p, b"MANIFEST-000042\n").unwrap(),
            name,
            "old format"
        );
        for i in 0..text.len() {
            for bit in [0x01u8, 0x10, 0x40] {
                let mut b = text.clone().into_bytes();
                b[i] ^= bit;
                if let Ok(n) = parse_current(p, &b) {
                    panic!("flip {bit:#x} at {i} read as {n}");
                }
            }
        }
    }
}
