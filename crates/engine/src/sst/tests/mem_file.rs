//! In-memory files for table tests: fast, and easy to corrupt on purpose.

use crate::error::{Error, Result};
use crate::io::{IoCause, ReadableFile, WritableFile};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A growable byte buffer shared between a writer and later readers.
#[derive(Clone)]
pub struct MemFile {
    path: PathBuf,
    data: Arc<Mutex<Vec<u8>>>,
    pub syncs: Arc<Mutex<usize>>,
}

impl MemFile {
    pub fn new(name: &str) -> Self {
        MemFile {
            path: PathBuf::from(name),
            data: Arc::default(),
            syncs: Arc::default(),
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.data.lock().clone()
    }

    pub fn set_bytes(&self, bytes: Vec<u8>) {
        *self.data.lock() = bytes;
    }

    /// A reader over the current contents.
    pub fn reader(&self) -> Arc<dyn ReadableFile> {
        Arc::new(MemReader {
            path: self.path.clone(),
            data: self.bytes(),
        })
    }
}

impl WritableFile for MemFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.data.lock().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        *self.syncs.lock() += 1;
        Ok(())
    }
    fn len(&self) -> u64 {
        self.data.lock().len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

struct MemReader {
    path: PathBuf,
    data: Vec<u8>,
}

impl ReadableFile for MemReader {
    fn read_at(&self, offset: u64, len: usize, _cause: IoCause) -> Result<Vec<u8>> {
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?))
            .filter(|r| r.end <= self.data.len())
            .ok_or_else(|| Error::corruption(&self.path, "read past the end"))?;
        Ok(self.data[range].to_vec())
    }
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}
