//! The version set: the current [`Version`], the manifest that records every edit, and the
//! counters (next file number, last sequence, oldest live WAL) that survive restarts.
//!
//! The manifest is a [`crate::wal::log`] file of [`VersionEdit`]s. `CURRENT` names it and is
//! replaced atomically (write a temporary file, sync, rename, sync the directory). On every
//! open a new manifest is started with one edit describing the whole recovered state, so
//! manifests never grow without bound across restarts.

use super::{Version, VersionEdit};
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::io::{read_all, IoCause, Storage};
use crate::vlog::IndexMap;
use crate::wal::{LogReader, LogWriter};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const CURRENT: &str = "CURRENT";

/// Rotate the manifest once it grows past this size.
const MANIFEST_ROTATE_BYTES: u64 = 64 << 20;

pub fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

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
}

impl VersionSet {
    /// Recovers the state named by CURRENT, or an empty state if `create` and there is none.
    pub fn open(
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
        };
        let current = dir.join(CURRENT);
        if vs.storage.exists(&current) {
            let name = read_all(&*vs.storage, &current, IoCause::Manifest)?;
            let name = std::str::from_utf8(&name)
                .ok()
                .and_then(|s| s.strip_suffix('\n'))
                .filter(|s| s.starts_with("MANIFEST-"))
                .ok_or_else(|| Error::corruption(&current, "CURRENT does not name a manifest"))?
                .to_string();
            vs.replay(&dir.join(&name))?;
        }
        vs.rotate_manifest()?;
        Ok(vs)
    }

    fn replay(&mut self, path: &Path) -> Result<()> {
        let data = read_all(&*self.storage, path, IoCause::Manifest)?;
        let mut edits = Vec::new();
        // A torn tail is an edit whose writer crashed before syncing it: that edit never
        // took effect (its files are orphans and get removed), so it is ignored.
        LogReader::new(path, data).for_each(|rec| {
            edits.push(VersionEdit::decode(path, rec)?);
            Ok(())
        })?;
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
            loaded.insert(n, Arc::new(IndexMap::load(&self.dir, &self.storage, n)?));
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
        Ok(())
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
        let mut snap = VersionEdit {
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            ..Default::default()
        };
        for (level, files) in self.current.levels.iter().enumerate() {
            for f in files {
                snap.added.push((level, f.meta.clone()));
                if f.run != 0 {
                    snap.table_runs.push((f.number(), f.run));
                }
            }
        }
        for b in self.current.blobs.values() {
            snap.added_blobs.push(b.meta());
            if b.is_pending() {
                snap.gc_pending.push(b.number);
            }
        }
        for m in self.current.maps.values() {
            snap.added_maps.push((m.target(), m.sources().to_vec()));
        }
        w.add_record(&snap.encode())?;
        w.sync()?;
        self.set_current(&manifest_name(number))?;
        let old = self.manifest_number;
        self.manifest = Some(w);
        self.manifest_number = number;
        if old != 0 {
            let _ = self.storage.remove(&self.dir.join(manifest_name(old)));
        }
        Ok(())
    }

    fn set_current(&self, name: &str) -> Result<()> {
        let tmp = self.dir.join("CURRENT.tmp");
        let mut f = self.storage.create(&tmp, IoCause::Manifest)?;
        f.append(format!("{name}\n").as_bytes())?;
        f.sync()?;
        drop(f);
        self.storage.rename(&tmp, &self.dir.join(CURRENT))?;
        self.storage.sync_dir(&self.dir)
    }

    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
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
        let w = self.manifest.as_mut().ok_or(Error::Closed)?;
        w.add_record(&edit.encode())?;
        w.sync()?;
        self.absorb_counters(&edit);
        self.current = Arc::new(self.current.apply_with_maps(
            &edit,
            &self.dir,
            &self.storage,
            &self.cache,
            &loaded,
        ));
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
