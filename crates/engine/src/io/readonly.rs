//! A [`Storage`] that refuses every change: what `check` opens a database through, so that
//! inspecting a damaged database can never alter it (a version whose replay marks files
//! obsolete would otherwise delete them when dropped).

use super::cause::IoCause;
use super::stats::IoStats;
use super::storage::{ReadableFile, Storage, WritableFile};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct ReadOnlyStorage {
    inner: Arc<dyn Storage>,
}

impl ReadOnlyStorage {
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        ReadOnlyStorage { inner }
    }
}

fn refused(path: &Path) -> Error {
    Error::io(
        path,
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "the database is opened read-only",
        ),
    )
}

impl Storage for ReadOnlyStorage {
    fn create(&self, path: &Path, _: IoCause) -> Result<Box<dyn WritableFile>> {
        Err(refused(path))
    }
    fn open_append(&self, path: &Path, _: IoCause) -> Result<Box<dyn WritableFile>> {
        Err(refused(path))
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        self.inner.open(path)
    }
    fn truncate(&self, path: &Path, _: u64) -> Result<()> {
        Err(refused(path))
    }
    fn remove(&self, path: &Path) -> Result<()> {
        Err(refused(path))
    }
    fn rename(&self, from: &Path, _: &Path) -> Result<()> {
        Err(refused(from))
    }
    fn sync_dir(&self, _: &Path) -> Result<()> {
        Ok(())
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        Err(refused(dir))
    }
    fn list(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn stats(&self) -> &IoStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FileStorage;

    #[test]
    fn reads_pass_and_every_change_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        std::fs::write(&f, b"hello").unwrap();
        let ro = ReadOnlyStorage::new(Arc::new(FileStorage::new()));
        assert_eq!(
            ro.open(&f).unwrap().read_at(0, 5, IoCause::Other).unwrap(),
            b"hello"
        );
        assert!(ro.remove(&f).is_err());
        assert!(ro.create(&dir.path().join("b"), IoCause::Other).is_err());
        assert!(ro.rename(&f, &dir.path().join("c")).is_err());
        assert!(ro.truncate(&f, 0).is_err());
        assert_eq!(std::fs::read(&f).unwrap(), b"hello");
    }
}
