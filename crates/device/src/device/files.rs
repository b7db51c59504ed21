//! Files on the device: real bytes in a backing file, timing from the set's logical pages.
//!
//! A file is a list of logical pages of one set, one per `page_size` bytes. Appended bytes
//! go straight to the backing file (positional writes, so concurrent readers are safe); the
//! device is charged a page write when a page becomes full, and on `sync` for the partial
//! tail page (which is written again once it fills: small syncs cost real write
//! amplification, as on a real SSD). Until then the tail sits in host memory, and reading it
//! costs no device time. Reads are charged for the pages they touch.

use super::{Device, SetId};
use crate::error::{DeviceError, Result};
use crate::set::Completion;
use crate::time::VirtualTime;
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) struct FileEntry {
    pub set: SetId,
    state: Mutex<FileState>,
}

struct FileState {
    name: PathBuf,
    backing: PathBuf,
    file: File,
    len: u64,
    /// Logical page of each file page written to the device so far.
    pages: Vec<u64>,
    /// Leading file pages that are complete on the device.
    full_pages: u64,
    removed: bool,
}

/// A handle to a file on the device. Clones share the file.
#[derive(Clone)]
pub struct DeviceFile {
    dev: Device,
    entry: Arc<FileEntry>,
}

impl DeviceFile {
    pub(crate) fn from_entry(dev: &Device, entry: Arc<FileEntry>) -> Self {
        DeviceFile {
            dev: dev.clone(),
            entry,
        }
    }

    fn register(dev: &Device, set: SetId, state: FileState) -> DeviceFile {
        let name = state.name.clone();
        let entry = Arc::new(FileEntry {
            set,
            state: Mutex::new(state),
        });
        dev.inner.files.lock().insert(name, entry.clone());
        DeviceFile::from_entry(dev, entry)
    }

    pub(crate) fn create(dev: &Device, set: SetId, name: PathBuf) -> Result<DeviceFile> {
        let backing = dev.set_dir(set).join(&name);
        if let Some(parent) = backing.parent() {
            std::fs::create_dir_all(parent).map_err(|e| DeviceError::io(parent, e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&backing)
            .map_err(|e| DeviceError::io(&backing, e))?;
        Ok(Self::register(
            dev,
            set,
            FileState {
                name,
                backing,
                file,
                len: 0,
                pages: Vec::new(),
                full_pages: 0,
                removed: false,
            },
        ))
    }

    /// Registers a backing file found at start-up and places its pages on flash untimed.
    pub(crate) fn reopen(dev: &Device, set: SetId, name: PathBuf) -> Result<DeviceFile> {
        let backing = dev.set_dir(set).join(&name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&backing)
            .map_err(|e| DeviceError::io(&backing, e))?;
        let len = file
            .metadata()
            .map_err(|e| DeviceError::io(&backing, e))?
            .len();
        let ps = dev.page_size() as u64;
        let mut pages = Vec::new();
        {
            let mut s = dev.set(set)?.lock();
            for _ in 0..len.div_ceil(ps) {
                let lpn = s.alloc_lpn().ok_or_else(|| DeviceError::SetFull {
                    set,
                    name: name.clone(),
                })?;
                pages.push(lpn);
            }
            s.place(&pages);
        }
        Ok(Self::register(
            dev,
            set,
            FileState {
                name,
                backing,
                file,
                len,
                pages,
                full_pages: len / ps,
                removed: false,
            },
        ))
    }

    pub fn set(&self) -> SetId {
        self.entry.set
    }

    pub fn name(&self) -> PathBuf {
        self.entry.state.lock().name.clone()
    }

    /// Path of the backing file holding the bytes.
    pub fn backing_path(&self) -> PathBuf {
        self.entry.state.lock().backing.clone()
    }

    pub fn len(&self) -> u64 {
        self.entry.state.lock().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn page_size(&self) -> u64 {
        self.dev.page_size() as u64
    }

    fn live(&self, st: &FileState) -> Result<()> {
        if st.removed {
            return Err(DeviceError::FileRemoved {
                name: st.name.clone(),
            });
        }
        Ok(())
    }

    /// Writes file pages `[from, to)` to the device, allocating logical pages as needed.
    fn write_pages(
        &self,
        st: &mut FileState,
        from: u64,
        to: u64,
        at: VirtualTime,
    ) -> Result<Completion> {
        if from >= to {
            return Ok(Completion::instant(at));
        }
        let mut set = self.dev.set(self.entry.set)?.lock();
        while (st.pages.len() as u64) < to {
            let lpn = set.alloc_lpn().ok_or_else(|| DeviceError::SetFull {
                set: self.entry.set,
                name: st.name.clone(),
            })?;
            st.pages.push(lpn);
        }
        set.write(&st.pages[from as usize..to as usize], at)
    }

    /// Appends bytes; returns the device time of the pages this append completed.
    pub fn append(&self, data: &[u8], at: VirtualTime) -> Result<Completion> {
        let mut st = self.entry.state.lock();
        self.live(&st)?;
        st.file
            .write_all_at(data, st.len)
            .map_err(|e| DeviceError::io(&st.backing, e))?;
        st.len += data.len() as u64;
        let full = st.len / self.page_size();
        let from = st.full_pages;
        let c = self.write_pages(&mut st, from, full, at)?;
        st.full_pages = full;
        Ok(c)
    }

    /// Appends bytes to the backing file without charging the device: the caller keeps the
    /// bytes in a host-side write cache and charges their pages later with
    /// [`DeviceFile::program`] (paper 001's plm_cache holds internal writes until the set's
    /// NDWIN). Until they are programmed, reads of these pages cost no device time.
    pub fn append_deferred(&self, data: &[u8]) -> Result<()> {
        let mut st = self.entry.state.lock();
        self.live(&st)?;
        st.file
            .write_all_at(data, st.len)
            .map_err(|e| DeviceError::io(&st.backing, e))?;
        st.len += data.len() as u64;
        Ok(())
    }

    /// Charges page writes for the file pages covering bytes `[offset, offset + len)`
    /// (appended earlier with [`DeviceFile::append_deferred`]), issued at `at`.
    pub fn program(&self, offset: u64, len: u64, at: VirtualTime) -> Result<Completion> {
        let mut st = self.entry.state.lock();
        self.live(&st)?;
        let end = offset.saturating_add(len).min(st.len);
        if end <= offset {
            return Ok(Completion::instant(at));
        }
        let ps = self.page_size();
        let from = offset / ps;
        let to = end.div_ceil(ps);
        let c = self.write_pages(&mut st, from, to, at)?;
        st.full_pages = st.full_pages.max(end / ps);
        Ok(c)
    }

    /// Fsyncs the backing file if the device is configured to (no device time: the caller
    /// charges pages with [`DeviceFile::program`] or [`DeviceFile::sync`]).
    pub fn sync_backing(&self) -> Result<()> {
        let st = self.entry.state.lock();
        self.live(&st)?;
        if self.dev.config().fsync_backing {
            st.file
                .sync_data()
                .map_err(|e| DeviceError::io(&st.backing, e))?;
        }
        Ok(())
    }

    /// Makes the file durable: writes the partial tail page to the device and, if the device
    /// is configured so, fsyncs the backing file.
    pub fn sync(&self, at: VirtualTime) -> Result<Completion> {
        let mut st = self.entry.state.lock();
        self.live(&st)?;
        let ps = self.page_size();
        let from = st.full_pages;
        let to = st.len.div_ceil(ps);
        let c = self.write_pages(&mut st, from, to, at)?;
        if self.dev.config().fsync_backing {
            st.file
                .sync_data()
                .map_err(|e| DeviceError::io(&st.backing, e))?;
        }
        Ok(c)
    }

    /// Reads exactly `len` bytes at `offset`.
    pub fn read_at(
        &self,
        offset: u64,
        len: usize,
        at: VirtualTime,
    ) -> Result<(Vec<u8>, Completion)> {
        let st = self.entry.state.lock();
        self.live(&st)?;
        let end = offset.checked_add(len as u64).filter(|&e| e <= st.len);
        let Some(end) = end else {
            return Err(DeviceError::ShortRead {
                name: st.name.clone(),
                offset,
                len,
                file_len: st.len,
            });
        };
        let ps = self.page_size();
        let c = if len == 0 {
            Completion::instant(at)
        } else {
            let first = (offset / ps) as usize;
            let last = end.div_ceil(ps) as usize;
            let lpns: Vec<u64> = st
                .pages
                .get(first..last.min(st.pages.len()))
                .unwrap_or(&[])
                .to_vec();
            self.dev.set(self.entry.set)?.lock().read(&lpns, at)?
        };
        let mut buf = vec![0u8; len];
        st.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| DeviceError::io(&st.backing, e))?;
        Ok((buf, c))
    }

    /// Cuts the file to `len` bytes (no-op if it is shorter); pages past the end are trimmed.
    pub fn truncate(&self, len: u64, at: VirtualTime) -> Result<Completion> {
        let mut st = self.entry.state.lock();
        self.live(&st)?;
        if len >= st.len {
            return Ok(Completion::instant(at));
        }
        st.file
            .set_len(len)
            .map_err(|e| DeviceError::io(&st.backing, e))?;
        if self.dev.config().fsync_backing {
            st.file
                .sync_all()
                .map_err(|e| DeviceError::io(&st.backing, e))?;
        }
        let ps = self.page_size();
        let keep = len.div_ceil(ps) as usize;
        st.len = len;
        st.full_pages = st.full_pages.min(len / ps);
        let keep = keep.min(st.pages.len());
        let cut: Vec<u64> = st.pages.split_off(keep);
        let mut set = self.dev.set(self.entry.set)?.lock();
        let c = set.trim(&cut, at)?;
        for l in cut {
            set.free_lpn(l);
        }
        Ok(c)
    }

    /// Trims every page, frees the logical pages and deletes the backing file.
    pub(crate) fn destroy(&self, at: VirtualTime) -> Result<Completion> {
        let mut st = self.entry.state.lock();
        if st.removed {
            return Ok(Completion::instant(at));
        }
        st.removed = true;
        let pages = std::mem::take(&mut st.pages);
        let c = {
            let mut set = self.dev.set(self.entry.set)?.lock();
            let c = set.trim(&pages, at)?;
            for l in pages {
                set.free_lpn(l);
            }
            c
        };
        match std::fs::remove_file(&st.backing) {
            Ok(()) => Ok(c),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(c),
            Err(e) => Err(DeviceError::io(&st.backing, e)),
        }
    }

    pub(crate) fn move_backing(&self, to: &Path) -> Result<()> {
        let mut st = self.entry.state.lock();
        let dst = self.dev.set_dir(self.entry.set).join(to);
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(|e| DeviceError::io(parent, e))?;
        }
        std::fs::rename(&st.backing, &dst).map_err(|e| DeviceError::io(&st.backing, e))?;
        st.backing = dst;
        st.name = to.to_path_buf();
        Ok(())
    }
}
