//! The device: NVM sets behind one handle, page-level commands, PLM controls, and a small
//! file table whose bytes live in real files under the backing directory ([`files`]: a
//! file's handle charges the device for its pages, so the two are one module).

pub mod files;

use crate::config::DeviceConfig;
use crate::error::{DeviceError, Result};
use crate::plm::{PlmLogPage, Window};
use crate::set::{Completion, NvmSet, SetStats};
use crate::time::VirtualTime;
use files::{DeviceFile, FileEntry};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Index of an NVM set, from 0.
pub type SetId = u32;

/// An emulated NVMe SSD. Cheap to clone (a shared handle); `Send + Sync`.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub cfg: DeviceConfig,
    pub root: PathBuf,
    pub sets: Vec<Mutex<NvmSet>>,
    pub files: Mutex<BTreeMap<PathBuf, Arc<FileEntry>>>,
}

impl Device {
    /// Creates a device whose file data lives under `backing_dir/set-<k>/`. Files already
    /// there (from an earlier run) are registered again and their pages placed on flash with
    /// no timing cost; the virtual clock starts at zero and every set starts with PLM off.
    pub fn new(cfg: DeviceConfig, backing_dir: impl Into<PathBuf>) -> Result<Device> {
        cfg.validate()?;
        let root = backing_dir.into();
        let sets = (0..cfg.sets)
            .map(|k| Mutex::new(NvmSet::new(k, &cfg)))
            .collect();
        let dev = Device {
            inner: Arc::new(Inner {
                cfg,
                root,
                sets,
                files: Mutex::new(BTreeMap::new()),
            }),
        };
        for k in 0..dev.inner.cfg.sets {
            let dir = dev.set_dir(k);
            std::fs::create_dir_all(&dir).map_err(|e| DeviceError::io(&dir, e))?;
            let mut found = Vec::new();
            walk(&dir, &dir, &mut found)?;
            found.sort();
            for name in found {
                DeviceFile::reopen(&dev, k, name)?;
            }
        }
        Ok(dev)
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.inner.cfg
    }

    pub fn backing_dir(&self) -> &Path {
        &self.inner.root
    }

    pub fn num_sets(&self) -> u32 {
        self.inner.cfg.sets
    }

    pub fn page_size(&self) -> u32 {
        self.inner.cfg.geometry.page_size
    }

    /// Logical pages a set exposes (physical pages less over-provisioning).
    pub fn logical_pages(&self) -> u64 {
        self.inner.cfg.geometry.logical_pages()
    }

    pub(crate) fn set(&self, set: SetId) -> Result<&Mutex<NvmSet>> {
        self.inner
            .sets
            .get(set as usize)
            .ok_or(DeviceError::NoSuchSet {
                set,
                sets: self.inner.cfg.sets,
            })
    }

    pub(crate) fn set_dir(&self, set: SetId) -> PathBuf {
        self.inner.root.join(format!("set-{set}"))
    }

    // ------------------------------------------------------------ page-level commands

    /// Reads logical pages of a set issued at `at`.
    pub fn read(
        &self,
        set: SetId,
        lpns: impl IntoIterator<Item = u64>,
        at: VirtualTime,
    ) -> Result<Completion> {
        let lpns: Vec<u64> = lpns.into_iter().collect();
        self.set(set)?.lock().read(&lpns, at)
    }

    /// Writes logical pages (timing only: the page-level interface carries no data). A write
    /// in DTWIN or lockdown returns the set to NDWIN.
    pub fn write(
        &self,
        set: SetId,
        lpns: impl IntoIterator<Item = u64>,
        at: VirtualTime,
    ) -> Result<Completion> {
        let lpns: Vec<u64> = lpns.into_iter().collect();
        self.set(set)?.lock().write(&lpns, at)
    }

    /// Deallocates logical pages; their flash pages become garbage for GC.
    pub fn trim(
        &self,
        set: SetId,
        lpns: impl IntoIterator<Item = u64>,
        at: VirtualTime,
    ) -> Result<Completion> {
        let lpns: Vec<u64> = lpns.into_iter().collect();
        self.set(set)?.lock().trim(&lpns, at)
    }

    /// Lets the set's virtual clock reach `at` with no request, so that internal work due by
    /// then (in NDWIN) is carried out.
    pub fn settle(&self, set: SetId, at: VirtualTime) -> Result<()> {
        self.set(set)?.lock().settle(at);
        Ok(())
    }

    // ------------------------------------------------------------ predictable latency mode

    /// PLM config (Set Features 0x13): enabling puts the set in NDWIN from `at`; disabling
    /// lets internal tasks run whenever they are due.
    pub fn set_plm(&self, set: SetId, enabled: bool, at: VirtualTime) -> Result<()> {
        self.set(set)?.lock().set_plm(enabled, at);
        Ok(())
    }

    /// PLM window (Set Features 0x14). NDWIN takes effect at once. DTWIN is refused before
    /// minNDWIN has elapsed; otherwise the buffer drains (lockdown) and DTWIN begins at the
    /// returned completion's `done_at`.
    pub fn set_window(&self, set: SetId, window: Window, at: VirtualTime) -> Result<Completion> {
        self.set(set)?.lock().set_window(window, at)
    }

    /// Log page 0x0a for a set, as of `at`.
    pub fn log_page(&self, set: SetId, at: VirtualTime) -> Result<PlmLogPage> {
        Ok(self.set(set)?.lock().log_page(at))
    }

    pub fn stats(&self, set: SetId) -> Result<SetStats> {
        Ok(self.set(set)?.lock().stats())
    }

    /// Free flash blocks of a set (over all its dies).
    pub fn free_blocks(&self, set: SetId) -> Result<usize> {
        Ok(self.set(set)?.lock().free_blocks())
    }

    /// Valid flash pages of a set.
    pub fn valid_pages(&self, set: SetId) -> Result<u64> {
        Ok(self.set(set)?.lock().valid_pages())
    }

    // ------------------------------------------------------------ files

    /// Creates (or truncates) file `name` on `set`. Its bytes go to
    /// `backing_dir/set-<set>/<name>`; its pages are logical pages of that set. Names are
    /// global: a name lives on exactly one set.
    pub fn create_file(&self, set: SetId, name: &Path, at: VirtualTime) -> Result<DeviceFile> {
        self.set(set)?;
        check_name(name)?;
        if self.inner.files.lock().contains_key(name) {
            self.remove_file(name, at)?;
        }
        DeviceFile::create(self, set, name.to_path_buf())
    }

    /// Opens an existing file.
    pub fn open_file(&self, name: &Path) -> Result<DeviceFile> {
        let entry = self
            .inner
            .files
            .lock()
            .get(name)
            .cloned()
            .ok_or_else(|| DeviceError::NoSuchFile(name.to_path_buf()))?;
        Ok(DeviceFile::from_entry(self, entry))
    }

    pub fn file_exists(&self, name: &Path) -> bool {
        self.inner.files.lock().contains_key(name)
    }

    /// The set a file lives on.
    pub fn file_set(&self, name: &Path) -> Option<SetId> {
        self.inner.files.lock().get(name).map(|e| e.set)
    }

    /// All file names, sorted.
    pub fn list_files(&self) -> Vec<PathBuf> {
        self.inner.files.lock().keys().cloned().collect()
    }

    /// Removes a file: its pages are trimmed and its backing file deleted.
    pub fn remove_file(&self, name: &Path, at: VirtualTime) -> Result<Completion> {
        let entry = self
            .inner
            .files
            .lock()
            .remove(name)
            .ok_or_else(|| DeviceError::NoSuchFile(name.to_path_buf()))?;
        DeviceFile::from_entry(self, entry).destroy(at)
    }

    /// Renames a file, replacing `to` if it exists. The file stays on its set (only the name
    /// changes; no data moves).
    pub fn rename_file(&self, from: &Path, to: &Path, at: VirtualTime) -> Result<()> {
        check_name(to)?;
        if from == to {
            return Ok(());
        }
        if !self.file_exists(from) {
            return Err(DeviceError::NoSuchFile(from.to_path_buf()));
        }
        if self.file_exists(to) {
            self.remove_file(to, at)?;
        }
        let mut files = self.inner.files.lock();
        let entry = files
            .remove(from)
            .ok_or_else(|| DeviceError::NoSuchFile(from.to_path_buf()))?;
        let res = DeviceFile::from_entry(self, entry.clone()).move_backing(to);
        match res {
            Ok(()) => {
                files.insert(to.to_path_buf(), entry);
                Ok(())
            }
            Err(e) => {
                files.insert(from.to_path_buf(), entry);
                Err(e)
            }
        }
    }
}

fn check_name(name: &Path) -> Result<()> {
    let ok = name.components().count() > 0
        && name.components().all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(DeviceError::BadName(name.to_path_buf()))
    }
}

fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| DeviceError::io(dir, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| DeviceError::io(dir, e))?;
        let path = ent.path();
        let ft = ent.file_type().map_err(|e| DeviceError::io(&path, e))?;
        if ft.is_dir() {
            walk(base, &path, out)?;
        } else if ft.is_file() {
            if let Ok(rel) = path.strip_prefix(base) {
                out.push(rel.to_path_buf());
            }
        }
    }
    Ok(())
}
