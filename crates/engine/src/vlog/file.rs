//! Value files.
//!
//! ```text
//! file   := header record*
//! header := magic "HLVALUE1" (8) | file number u64 LE                      (16 bytes)
//! record := masked crc32c u32 LE (over the rest of the record) | key_len u32 LE |
//!           value_len u32 LE | key | value
//! ```
//!
//! A pointer addresses a whole record, so a read verifies the checksum and that the record
//! belongs to the key that pointed at it. Records are only appended; a file is immutable
//! once its creator (flush, compaction or GC) synced it and the manifest recorded it.

use super::ValuePointer;
use crate::error::{Error, Result};
use crate::io::{IoCause, ReadableFile, Storage, WritableFile};
use crate::lifetime::LifetimeClass;
use crate::types::SeqNo;
use crate::wal::log::{mask_crc, unmask_crc};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

pub const MAGIC: &[u8; 8] = b"HLVALUE1";
pub const FILE_HEADER: usize = 16;
pub const RECORD_HEADER: usize = 12;

pub fn value_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.vlog"))
}

/// The header of value file `number`.
pub fn file_header(number: u64) -> [u8; FILE_HEADER] {
    let mut h = [0u8; FILE_HEADER];
    h[..8].copy_from_slice(MAGIC);
    h[8..].copy_from_slice(&number.to_le_bytes());
    h
}

/// Verifies the header of value file `number` at the start of `data`. The header holds
/// nothing a checksum could add to: a magic and the number the file name also carries.
/// Both are compared exactly, so no byte of it goes unverified.
pub fn check_header(path: &Path, data: &[u8], number: u64) -> Result<()> {
    if data.len() < FILE_HEADER || &data[..8] != MAGIC {
        return Err(Error::corruption(
            path,
            "header at offset 0: not a value file (bad magic)",
        ));
    }
    let named = u64::from_le_bytes(data[8..16].try_into().unwrap());
    if named != number {
        return Err(Error::corruption(
            path,
            format!("header at offset 8: names file {named}, expected {number}"),
        ));
    }
    Ok(())
}

fn record_crc(body: &[u8]) -> u32 {
    mask_crc(crc32c::crc32c(body))
}

/// Writes one value file.
pub struct ValueFileWriter {
    file: Box<dyn WritableFile>,
    number: u64,
    entries: u64,
    scratch: Vec<u8>,
}

impl ValueFileWriter {
    pub fn new(mut file: Box<dyn WritableFile>, number: u64) -> Result<Self> {
        file.append(&file_header(number))?;
        Ok(ValueFileWriter {
            file,
            number,
            entries: 0,
            scratch: Vec::new(),
        })
    }

    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<ValuePointer> {
        let offset = self.file.len();
        let s = &mut self.scratch;
        s.clear();
        s.extend_from_slice(&[0u8; 4]);
        s.extend_from_slice(&(key.len() as u32).to_le_bytes());
        s.extend_from_slice(&(value.len() as u32).to_le_bytes());
        s.extend_from_slice(key);
        s.extend_from_slice(value);
        let crc = record_crc(&s[4..]);
        s[..4].copy_from_slice(&crc.to_le_bytes());
        self.file.append(s)?;
        self.entries += 1;
        Ok(ValuePointer {
            file: self.number,
            offset,
            size: s.len() as u32,
        })
    }

    pub fn number(&self) -> u64 {
        self.number
    }

    /// Hands the appended records to the operating system (the value log as the WAL).
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Makes the appended records durable without finishing the file.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    pub fn len(&self) -> u64 {
        self.file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Syncs the file; returns its metadata for the manifest.
    pub fn finish(mut self) -> Result<BlobMeta> {
        self.file.sync()?;
        Ok(BlobMeta {
            number: self.number,
            size: self.file.len(),
            entries: self.entries,
            garbage_bytes: 0,
            garbage_entries: 0,
            lifetime: None,
        })
    }
}

/// The lifetime a value file was given at creation (lifetime-aware GC, paper 000): its
/// class and a TTL in sequence numbers counted from `created_seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLifetime {
    pub class: LifetimeClass,
    pub created_seq: SeqNo,
    pub ttl: SeqNo,
}

impl FileLifetime {
    /// Whether the TTL has elapsed at sequence number `now`.
    pub fn due(&self, now: SeqNo) -> bool {
        now >= self.created_seq.saturating_add(self.ttl)
    }
}

/// What the manifest knows of a value file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobMeta {
    pub number: u64,
    /// File size, header included.
    pub size: u64,
    pub entries: u64,
    /// Bytes of records no longer referenced by the tree (counted when compaction drops
    /// their pointers or GC relocates them).
    pub garbage_bytes: u64,
    pub garbage_entries: u64,
    /// Set for files of the lifetime-aware policies.
    pub lifetime: Option<FileLifetime>,
}

/// A value file as a version holds it. When a version edit removes it, it is marked
/// obsolete and the file is deleted when the last reader lets go of it, so reads never see
/// a missing value.
pub struct BlobFile {
    pub number: u64,
    pub path: PathBuf,
    pub size: u64,
    pub entries: u64,
    pub lifetime: Option<FileLifetime>,
    garbage_bytes: AtomicU64,
    garbage_entries: AtomicU64,
    obsolete: AtomicBool,
    /// A GC output whose write-back has not finished (see `VersionEdit::gc_pending`).
    pending: AtomicBool,
    reader: OnceLock<Arc<dyn ReadableFile>>,
    storage: Arc<dyn Storage>,
}

impl BlobFile {
    pub fn new(meta: &BlobMeta, dir: &Path, storage: Arc<dyn Storage>) -> Self {
        BlobFile {
            number: meta.number,
            path: value_file_name(dir, meta.number),
            size: meta.size,
            entries: meta.entries,
            lifetime: meta.lifetime,
            garbage_bytes: AtomicU64::new(meta.garbage_bytes),
            garbage_entries: AtomicU64::new(meta.garbage_entries),
            obsolete: AtomicBool::new(false),
            pending: AtomicBool::new(false),
            reader: OnceLock::new(),
            storage,
        }
    }

    pub fn meta(&self) -> BlobMeta {
        BlobMeta {
            number: self.number,
            size: self.size,
            entries: self.entries,
            garbage_bytes: self.garbage_bytes(),
            garbage_entries: self.garbage_entries.load(Relaxed),
            lifetime: self.lifetime,
        }
    }

    /// Record bytes (the file minus its header).
    pub fn record_bytes(&self) -> u64 {
        self.size.saturating_sub(FILE_HEADER as u64)
    }

    pub fn garbage_bytes(&self) -> u64 {
        self.garbage_bytes.load(Relaxed)
    }

    pub fn live_bytes(&self) -> u64 {
        self.record_bytes().saturating_sub(self.garbage_bytes())
    }

    /// Fraction of record bytes that are garbage.
    pub fn garbage_ratio(&self) -> f64 {
        let total = self.record_bytes();
        if total == 0 {
            return 1.0;
        }
        self.garbage_bytes() as f64 / total as f64
    }

    /// Whether every record is garbage (nothing in the tree points here any more).
    pub fn all_garbage(&self) -> bool {
        self.garbage_entries.load(Relaxed) >= self.entries
    }

    pub(crate) fn add_garbage(&self, bytes: u64, entries: u64) {
        self.garbage_bytes.fetch_add(bytes, Relaxed);
        self.garbage_entries.fetch_add(entries, Relaxed);
    }

    pub fn is_pending(&self) -> bool {
        self.pending.load(Relaxed)
    }

    pub(crate) fn set_pending(&self, pending: bool) {
        self.pending.store(pending, Relaxed);
    }

    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Relaxed);
    }

    fn reader(&self) -> Result<&Arc<dyn ReadableFile>> {
        if let Some(r) = self.reader.get() {
            return Ok(r);
        }
        let r = self.storage.open(&self.path)?;
        Ok(self.reader.get_or_init(|| r))
    }

    /// Reads the value `ptr` points to and checks it belongs to `key`.
    pub fn read(&self, ptr: &ValuePointer, key: &[u8], cause: IoCause) -> Result<Vec<u8>> {
        let r = self.reader()?;
        let rec = r.read_at(ptr.offset, ptr.size as usize, cause)?;
        let (k, v) = parse_record(&self.path, ptr.offset, &rec)?;
        if k != key {
            return Err(Error::corruption(
                &self.path,
                format!("record at offset {} belongs to another key", ptr.offset),
            ));
        }
        Ok(v.to_vec())
    }

    /// Reads the whole file for garbage collection.
    pub fn scan(&self, cause: IoCause) -> Result<ValueFileReader> {
        let r = self.reader()?;
        ValueFileReader::new(
            &self.path,
            r.read_at(0, r.len() as usize, cause)?,
            self.number,
        )
    }
}

impl Drop for BlobFile {
    fn drop(&mut self) {
        if self.obsolete.load(Relaxed) {
            // Nothing can point here any more; a failed delete leaves an orphan that the
            // next open removes.
            let _ = self.storage.remove(&self.path);
        }
    }
}

fn parse_record<'a>(path: &Path, offset: u64, rec: &'a [u8]) -> Result<(&'a [u8], &'a [u8])> {
    let bad =
        |what: &str| Error::corruption(path, format!("value record at offset {offset}: {what}"));
    if rec.len() < RECORD_HEADER {
        return Err(bad("shorter than its header"));
    }
    let crc = u32::from_le_bytes(rec[..4].try_into().unwrap());
    let klen = u32::from_le_bytes(rec[4..8].try_into().unwrap()) as usize;
    let vlen = u32::from_le_bytes(rec[8..12].try_into().unwrap()) as usize;
    if RECORD_HEADER + klen + vlen != rec.len() {
        return Err(bad("length fields disagree with the record size"));
    }
    if unmask_crc(crc) != crc32c::crc32c(&rec[4..]) {
        return Err(bad("checksum mismatch"));
    }
    Ok((
        &rec[RECORD_HEADER..RECORD_HEADER + klen],
        &rec[RECORD_HEADER + klen..],
    ))
}

/// The size of the record whose header starts `header`, if a whole header is there.
pub(crate) fn record_size(header: &[u8]) -> Option<usize> {
    let h = header.get(..RECORD_HEADER)?;
    let klen = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
    let vlen = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
    Some(RECORD_HEADER + klen + vlen)
}

/// Sequential reader over a whole value file held in memory.
pub struct ValueFileReader {
    path: PathBuf,
    data: Vec<u8>,
    number: u64,
    pos: usize,
}

impl ValueFileReader {
    pub fn new(path: &Path, data: Vec<u8>, number: u64) -> Result<Self> {
        check_header(path, &data, number)?;
        Ok(ValueFileReader {
            path: path.to_path_buf(),
            data,
            number,
            pos: FILE_HEADER,
        })
    }

    /// The next record as (pointer, key, value), or `None` at the end.
    #[allow(clippy::type_complexity)]
    pub fn next_record(&mut self) -> Result<Option<(ValuePointer, &[u8], &[u8])>> {
        if self.pos >= self.data.len() {
            return Ok(None);
        }
        let off = self.pos;
        let rest = &self.data[off..];
        if rest.len() < RECORD_HEADER {
            return Err(Error::corruption(
                &self.path,
                format!("truncated record at offset {off}"),
            ));
        }
        let klen = u32::from_le_bytes(rest[4..8].try_into().unwrap()) as usize;
        let vlen = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
        let size = RECORD_HEADER
            .checked_add(klen)
            .and_then(|s| s.checked_add(vlen))
            .filter(|&s| s <= rest.len())
            .ok_or_else(|| {
                Error::corruption(
                    &self.path,
                    format!("record at offset {off} runs past the end"),
                )
            })?;
        let (k, v) = parse_record(&self.path, off as u64, &self.data[off..off + size])?;
        self.pos += size;
        Ok(Some((
            ValuePointer {
                file: self.number,
                offset: off as u64,
                size: size as u32,
            },
            k,
            v,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FileStorage;

    #[test]
    fn write_read_scan_and_detect_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let meta;
        let mut ptrs = vec![];
        {
            let p = value_file_name(dir.path(), 7);
            let mut w = ValueFileWriter::new(fs.create(&p, IoCause::ValueLog).unwrap(), 7).unwrap();
            for i in 0..100u32 {
                let v = vec![i as u8; 100 + i as usize];
                ptrs.push(w.add(format!("key{i}").as_bytes(), &v).unwrap());
            }
            meta = w.finish().unwrap();
        }
        assert_eq!(meta.entries, 100);
        let f = BlobFile::new(&meta, dir.path(), fs.clone());
        assert_eq!(
            f.read(&ptrs[5], b"key5", IoCause::ClientRead).unwrap(),
            vec![5u8; 105]
        );
        assert!(f
            .read(&ptrs[5], b"key6", IoCause::ClientRead)
            .unwrap_err()
            .is_corruption());
        assert_eq!(ptrs[5].value_len(4), 105);
        let mut r = f.scan(IoCause::GcRead).unwrap();
        let mut n = 0;
        while let Some((p, k, _)) = r.next_record().unwrap() {
            assert_eq!(p, ptrs[n]);
            assert_eq!(k, format!("key{n}").as_bytes());
            n += 1;
        }
        assert_eq!(n, 100);
        // Flip a byte of record 3's value.
        let mut bytes = std::fs::read(&f.path).unwrap();
        bytes[(ptrs[3].offset + 20) as usize] ^= 1;
        std::fs::write(&f.path, &bytes).unwrap();
        let f2 = BlobFile::new(&meta, dir.path(), fs.clone());
        let e = f2.read(&ptrs[3], b"key3", IoCause::ClientRead).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        // Obsolete files are deleted when dropped.
        f2.mark_obsolete();
        let path = f2.path.clone();
        drop(f2);
        assert!(!path.exists());
    }
}
