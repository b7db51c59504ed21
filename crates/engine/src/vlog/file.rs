//! Value files.
//!
//! ```text
//! file   := header record*
//! header := magic "HLVALUE1" (8) | file number u64 LE                      (16 bytes)
//! record := masked crc32c u32 LE (over the rest of the record) | key_len u32 LE |
//!           value_field u32 LE | key | value
//! value_field := codec (top 2 bits) | stored value length (low 30 bits)
//! value  := the value as is                                   (codec 0)
//!         | varint32 value length | LZ4 block                 (codec 1)
//!         | varint32 value length | Zstandard frame            (codec 2)
//! ```
//!
//! Compression is per record (`Options::vlog.value_compression`), with the codecs and the
//! 1/8-saving rule of table blocks ([`crate::sst::compression`]): a value that does not
//! compress is stored as is, and files written without compression (codec bits zero) read
//! the same. The checksum covers the stored bytes, so a damaged compressed value is found
//! before it is decompressed.
//!
//! A pointer addresses a whole record, so a read verifies the checksum and that the record
//! belongs to the key that pointed at it. Records are only appended; a file is immutable
//! once its creator (flush, compaction or GC) synced it and the manifest recorded it.
//!
//! The grammar of every file in a database directory is in `docs/format.md`.

use super::ValuePointer;
use crate::checksum;
use crate::error::{Error, Result};
use crate::filename::value_file_name;
use crate::internal_key::SeqNo;
use crate::io::{IoCause, ReadableFile, Storage, SyncHandle, WritableFile};
use crate::lifetime::LifetimeClass;
use crate::sst::compression::{compress, decompress, Compression, BLOCK_TYPE_UNCOMPRESSED};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

pub const MAGIC: &[u8; 8] = b"HLVALUE1";
pub const FILE_HEADER: usize = 16;
pub use super::pointer::RECORD_HEADER;
/// Where the codec sits in a record's value field; below it, the stored value length.
const CODEC_SHIFT: u32 = 30;
const LEN_MASK: u32 = (1 << CODEC_SHIFT) - 1;
/// Stored values must fit the value field's length bits.
pub const MAX_STORED_VALUE: usize = LEN_MASK as usize;

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
    checksum::masked(body)
}

/// Writes one value file.
pub struct ValueFileWriter {
    file: Box<dyn WritableFile>,
    number: u64,
    entries: u64,
    scratch: Vec<u8>,
    compression: Compression,
}

impl ValueFileWriter {
    /// Creates value file `number` in `dir`, its values compressed with `compression` and
    /// its writes charged to `cause`: the one place a value file is created (by the write
    /// path, flush and compaction, and GC). A file whose header cannot be written is
    /// removed again.
    pub fn create(
        storage: &dyn Storage,
        dir: &Path,
        number: u64,
        cause: IoCause,
        compression: Compression,
    ) -> Result<(PathBuf, ValueFileWriter)> {
        let path = value_file_name(dir, number);
        let file = storage.create(&path, cause)?;
        match ValueFileWriter::new(file, number) {
            Ok(w) => Ok((path, w.with_compression(compression))),
            Err(e) => {
                let _ = storage.remove(&path);
                Err(e)
            }
        }
    }

    fn new(mut file: Box<dyn WritableFile>, number: u64) -> Result<Self> {
        file.append(&file_header(number))?;
        Ok(ValueFileWriter {
            file,
            number,
            entries: 0,
            scratch: Vec::new(),
            compression: Compression::None,
        })
    }

    /// Compresses the values of the records added from now on with `c` (each record
    /// says whether it is compressed, so a file may mix both).
    pub fn with_compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }

    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<ValuePointer> {
        let offset = self.file.len();
        let packed = compress(self.compression, value);
        let (codec, stored) = match &packed {
            Some((codec, body)) => (*codec, body.as_slice()),
            None => (BLOCK_TYPE_UNCOMPRESSED, value),
        };
        if stored.len() > MAX_STORED_VALUE {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: MAX_STORED_VALUE,
            });
        }
        let field = (u32::from(codec) << CODEC_SHIFT) | stored.len() as u32;
        let s = &mut self.scratch;
        s.clear();
        s.extend_from_slice(&[0u8; 4]);
        s.extend_from_slice(&(key.len() as u32).to_le_bytes());
        s.extend_from_slice(&field.to_le_bytes());
        s.extend_from_slice(key);
        s.extend_from_slice(stored);
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

    /// Hands the appended records to the operating system and returns a handle that makes
    /// them durable apart from this writer ([`WritableFile::sync_later`]).
    pub fn sync_later(&mut self) -> Result<Option<Box<dyn SyncHandle>>> {
        self.file.sync_later()
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
            expiry: FileExpiry::None,
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
    /// Whether the file holds values with an expiry ([`crate::expiry`]), and if it holds
    /// only such values, the latest of their times.
    pub expiry: FileExpiry,
}

/// What a value file holds of values with an expiry ([`crate::expiry`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FileExpiry {
    /// None: its records die only by being overwritten or deleted.
    #[default]
    None,
    /// Some, among values without one: a record may die by expiry without any write, so
    /// GC looks every record of it up (the early-garbage positions cannot cover it).
    Mixed,
    /// Only values with an expiry, none later than this time (ms since the Unix epoch):
    /// once the clock passes it, every value in the file has expired and the file is
    /// dropped whole, unread (an expiry window's file).
    AllBy(u64),
}

impl FileExpiry {
    /// Whether some record may die by expiry.
    pub fn holds_expiring(self) -> bool {
        self != FileExpiry::None
    }

    /// Whether every record has expired at `now_ms`.
    pub fn all_expired(self, now_ms: u64) -> bool {
        matches!(self, FileExpiry::AllBy(t) if t <= now_ms)
    }

    /// The expiry of a GC output: what its inputs `files` held (it holds copies of some of
    /// their records).
    pub fn of_copies(files: &[Arc<BlobFile>]) -> FileExpiry {
        let mut it = files.iter().map(|f| f.expiry);
        let first = it.next().unwrap_or_default();
        it.fold(first, FileExpiry::merge)
    }

    /// The expiry of a file holding the records of files with `self` and `other`.
    pub fn merge(self, other: FileExpiry) -> FileExpiry {
        match (self, other) {
            (FileExpiry::None, FileExpiry::None) => FileExpiry::None,
            (FileExpiry::AllBy(a), FileExpiry::AllBy(b)) => FileExpiry::AllBy(a.max(b)),
            _ => FileExpiry::Mixed,
        }
    }
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
    /// See [`BlobMeta::expiry`].
    pub expiry: FileExpiry,
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
            path: crate::filename::value_file_name(dir, meta.number),
            size: meta.size,
            entries: meta.entries,
            lifetime: meta.lifetime,
            expiry: meta.expiry,
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
            expiry: self.expiry,
        }
    }

    /// Record bytes (the file minus its header).
    pub fn record_bytes(&self) -> u64 {
        self.size.saturating_sub(FILE_HEADER as u64)
    }

    pub fn garbage_bytes(&self) -> u64 {
        self.garbage_bytes.load(Relaxed)
    }

    pub fn garbage_entries(&self) -> u64 {
        self.garbage_entries.load(Relaxed)
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
        let rec = self.read_range(ptr.offset, ptr.size as usize, cause)?;
        self.value_of(ptr, key, rec)
    }

    /// Asks the storage to start reading `len` bytes at `offset` ([`ReadableFile::will_need`]);
    /// a file that cannot be opened is left for the read to report.
    pub(crate) fn will_need(&self, offset: u64, len: usize) {
        if let Ok(r) = self.reader() {
            r.will_need(offset, len);
        }
    }

    /// Reads `len` bytes at `offset` (several records at once: [`super::batch_read`]).
    pub(crate) fn read_range(&self, offset: u64, len: usize, cause: IoCause) -> Result<Vec<u8>> {
        self.reader()?.read_at(offset, len, cause)
    }

    /// The value of the record `rec`, read where `ptr` points: its checksum verified, its
    /// key compared with `key`, its value decompressed. Every read of a value, alone or
    /// in a batch, ends here, so both report damage alike.
    pub(crate) fn value_of(&self, ptr: &ValuePointer, key: &[u8], rec: Vec<u8>) -> Result<Vec<u8>> {
        let (k, v, codec) = parse_stored(&self.path, ptr.offset, &rec)?;
        if k != key {
            return Err(Error::corruption(
                &self.path,
                format!("record at offset {} belongs to another key", ptr.offset),
            ));
        }
        if codec != BLOCK_TYPE_UNCOMPRESSED {
            return unpack(&self.path, ptr.offset, codec, v);
        }
        // The record without its header and key is the value.
        let skip = RECORD_HEADER + k.len();
        let mut rec = rec;
        rec.drain(..skip);
        Ok(rec)
    }

    /// Reads the file from start to end for garbage collection, [`SCAN_CHUNK`] bytes at a
    /// time: a GC job holds one chunk per input, not the input (value files are 64-256
    /// MiB, and reading them whole made each GC job's buffer the largest allocation of
    /// the process).
    pub fn scan(&self, cause: IoCause) -> Result<ValueFileReader> {
        let r = Arc::clone(self.reader()?);
        ValueFileReader::streaming(&self.path, r, self.number, cause, None)
    }

    /// Like [`Self::scan`], reading only `extents` (sorted, disjoint file ranges that each
    /// start and end at record boundaries): GC skips the records it knows are dead without
    /// reading them.
    pub fn scan_extents(
        &self,
        cause: IoCause,
        extents: Vec<(u64, u64)>,
    ) -> Result<ValueFileReader> {
        let r = Arc::clone(self.reader()?);
        ValueFileReader::streaming(&self.path, r, self.number, cause, Some(extents.into()))
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

/// Key length, stored value length and codec of a record header.
fn record_lengths(header: &[u8]) -> (usize, usize, u8) {
    let klen = u32::from_le_bytes(header[4..8].try_into().unwrap()) as usize;
    let field = u32::from_le_bytes(header[8..12].try_into().unwrap());
    (
        klen,
        (field & LEN_MASK) as usize,
        (field >> CODEC_SHIFT) as u8,
    )
}

/// Checks a whole record; returns its key, its stored value and the value's codec.
fn parse_stored<'a>(path: &Path, offset: u64, rec: &'a [u8]) -> Result<(&'a [u8], &'a [u8], u8)> {
    let bad =
        |what: &str| Error::corruption(path, format!("value record at offset {offset}: {what}"));
    if rec.len() < RECORD_HEADER {
        return Err(bad("shorter than its header"));
    }
    let crc = u32::from_le_bytes(rec[..4].try_into().unwrap());
    let (klen, vlen, codec) = record_lengths(rec);
    if RECORD_HEADER + klen + vlen != rec.len() {
        return Err(bad("length fields disagree with the record size"));
    }
    if checksum::unmask(crc) != checksum::crc(&rec[4..]) {
        return Err(bad("checksum mismatch"));
    }
    Ok((
        &rec[RECORD_HEADER..RECORD_HEADER + klen],
        &rec[RECORD_HEADER + klen..],
        codec,
    ))
}

/// The size of the record whose header starts `header`, if a whole header is there.
pub(crate) fn record_size(header: &[u8]) -> Option<usize> {
    let h = header.get(..RECORD_HEADER)?;
    let (klen, vlen, _) = record_lengths(h);
    Some(RECORD_HEADER + klen + vlen)
}

/// The value of a compressed record; the error names the file and the record.
fn unpack(path: &Path, offset: u64, codec: u8, stored: &[u8]) -> Result<Vec<u8>> {
    decompress(codec, stored.to_vec()).map_err(|e| {
        Error::corruption(
            path,
            format!("value record at offset {offset}: compressed value: {e}"),
        )
    })
}

/// How much of a value file a scan reads at once (more when one record is larger).
pub const SCAN_CHUNK: usize = 1 << 20;

/// Where a [`ValueFileReader`] refills its window from.
struct ScanSource {
    file: Arc<dyn ReadableFile>,
    len: u64,
    cause: IoCause,
}

/// Sequential reader over a value file: over a copy held in memory ([`Self::new`]) or
/// streaming the file through a window of [`SCAN_CHUNK`] bytes ([`BlobFile::scan`]).
pub struct ValueFileReader {
    path: PathBuf,
    /// The bytes at file offsets `base..base + data.len()`.
    data: Vec<u8>,
    base: u64,
    number: u64,
    /// Index into `data` of the next record.
    pos: usize,
    source: Option<ScanSource>,
    /// The last compressed value, decompressed.
    unpacked: Vec<u8>,
    /// The file ranges left to read ([`BlobFile::scan_extents`]); `None`: all of it.
    extents: Option<std::collections::VecDeque<(u64, u64)>>,
}

impl ValueFileReader {
    /// A reader over the whole file in `data`.
    pub fn new(path: &Path, data: Vec<u8>, number: u64) -> Result<Self> {
        check_header(path, &data, number)?;
        Ok(ValueFileReader {
            path: path.to_path_buf(),
            data,
            base: 0,
            number,
            pos: FILE_HEADER,
            source: None,
            unpacked: Vec::new(),
            extents: None,
        })
    }

    fn streaming(
        path: &Path,
        file: Arc<dyn ReadableFile>,
        number: u64,
        cause: IoCause,
        extents: Option<std::collections::VecDeque<(u64, u64)>>,
    ) -> Result<Self> {
        let len = file.len();
        let mut r = ValueFileReader {
            path: path.to_path_buf(),
            data: Vec::new(),
            base: 0,
            number,
            pos: 0,
            source: Some(ScanSource { file, len, cause }),
            unpacked: Vec::new(),
            extents,
        };
        r.fill(FILE_HEADER)?;
        check_header(path, &r.data, number)?;
        r.pos = FILE_HEADER;
        Ok(r)
    }

    /// Makes `data[pos..]` hold at least `need` bytes, or all that is left of the file:
    /// drops the bytes before `pos` and reads the next chunk.
    fn fill(&mut self, need: usize) -> Result<()> {
        let Some(src) = &self.source else {
            return Ok(());
        };
        let have = self.data.len() - self.pos;
        let end = self.base + self.data.len() as u64;
        if have >= need || end >= src.len {
            return Ok(());
        }
        // Within an extent, read no further than its end (a record never crosses it).
        let limit = self
            .extents
            .as_ref()
            .and_then(|e| e.front())
            .map_or(src.len, |&(_, to)| {
                to.min(src.len).max(end + (need - have) as u64)
            });
        let want = need.max(SCAN_CHUNK) - have;
        let n = want.min((limit.min(src.len) - end) as usize);
        let more = src.file.read_at(end, n, src.cause)?;
        self.data.drain(..self.pos);
        self.base += self.pos as u64;
        self.pos = 0;
        self.data.extend_from_slice(&more);
        Ok(())
    }

    /// The next record as (pointer, key, value), or `None` at the end.
    #[allow(clippy::type_complexity)]
    pub fn next_record(&mut self) -> Result<Option<(ValuePointer, &[u8], &[u8])>> {
        if !self.next_extent() {
            return Ok(None);
        }
        self.fill(RECORD_HEADER)?;
        if self.pos >= self.data.len() {
            return Ok(None);
        }
        let off = self.base + self.pos as u64;
        let rest = &self.data[self.pos..];
        if rest.len() < RECORD_HEADER {
            return Err(Error::corruption(
                &self.path,
                format!("truncated record at offset {off}"),
            ));
        }
        let (klen, vlen, _) = record_lengths(rest);
        let size = RECORD_HEADER
            .checked_add(klen)
            .and_then(|s| s.checked_add(vlen));
        let run_past = |path: &Path| {
            Error::corruption(path, format!("record at offset {off} runs past the end"))
        };
        let size = size
            .filter(|&s| off + s as u64 <= self.file_len())
            .ok_or_else(|| run_past(&self.path))?;
        self.fill(size)?;
        let at = self.pos;
        let rec = self
            .data
            .get(at..at + size)
            .ok_or_else(|| run_past(&self.path))?;
        let (k, v, codec) = parse_stored(&self.path, off, rec)?;
        self.pos += size;
        let v = if codec == BLOCK_TYPE_UNCOMPRESSED {
            v
        } else {
            self.unpacked = unpack(&self.path, off, codec, v)?;
            self.unpacked.as_slice()
        };
        Ok(Some((
            ValuePointer {
                file: self.number,
                offset: off,
                size: size as u32,
            },
            k,
            v,
        )))
    }

    /// Under [`BlobFile::scan_extents`]: moves to the start of the extent the next record
    /// is in, dropping the buffer when that lies beyond it; `false` when none is left.
    fn next_extent(&mut self) -> bool {
        let Some(extents) = &mut self.extents else {
            return true;
        };
        let at = self.base + self.pos as u64;
        while extents.front().is_some_and(|&(_, to)| to <= at) {
            extents.pop_front();
        }
        let Some(&(from, _)) = extents.front() else {
            return false;
        };
        if from > at {
            let end = self.base + self.data.len() as u64;
            if from <= end {
                self.pos = (from - self.base) as usize;
            } else {
                self.data.clear();
                self.base = from;
                self.pos = 0;
            }
        }
        true
    }

    fn file_len(&self) -> u64 {
        self.source
            .as_ref()
            .map_or(self.data.len() as u64, |s| s.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filename::value_file_name;
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

    /// A scan streams the file in chunks: records that straddle a chunk boundary, and one
    /// larger than a chunk, come out whole; a file cut short is a corruption error naming
    /// the offset of the record it cut.
    #[test]
    fn scan_extents_reads_only_the_records_in_them() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let p = value_file_name(dir.path(), 4);
        let mut w = ValueFileWriter::new(fs.create(&p, IoCause::ValueLog).unwrap(), 4).unwrap();
        // Records of 5 KiB to 10 KiB, so that 400 of them span several scan chunks.
        let value = |i: usize| vec![i as u8; 5_000 + (i * 13) % 5_000];
        let ptrs: Vec<_> = (0..400)
            .map(|i| w.add(format!("k{i}").as_bytes(), &value(i)).unwrap())
            .collect();
        let meta = w.finish().unwrap();
        let f = BlobFile::new(&meta, dir.path(), fs.clone());
        let span = |a: usize, b: usize| {
            (
                ptrs[a].offset,
                ptrs[b - 1].offset + u64::from(ptrs[b - 1].size),
            )
        };
        // Records 0..3, 10..200 (crossing chunks), 201, 399.
        let extents = vec![span(0, 3), span(10, 200), span(201, 202), span(399, 400)];
        let want: Vec<usize> = (0..3).chain(10..200).chain([201, 399]).collect();
        let bytes_read = || fs.stats().snapshot().cause(IoCause::GcRead).bytes_read;
        let read_before = bytes_read();
        let mut r = f.scan_extents(IoCause::GcRead, extents).unwrap();
        let mut got = Vec::new();
        while let Some((ptr, k, v)) = r.next_record().unwrap() {
            let i = ptrs
                .iter()
                .position(|q| *q == ptr)
                .expect("a record's own pointer");
            assert_eq!(k, format!("k{i}").as_bytes());
            assert!(v == value(i).as_slice(), "value {i}");
            got.push(i);
        }
        assert_eq!(got, want);
        // Only the extents (and the header) were read.
        let wanted: u64 = want.iter().map(|&i| u64::from(ptrs[i].size)).sum();
        let read = bytes_read() - read_before;
        assert!(
            read <= wanted + FILE_HEADER as u64,
            "read {read} of {wanted}"
        );
        // Nothing left to read: no record.
        let mut r = f.scan_extents(IoCause::GcRead, vec![]).unwrap();
        assert!(r.next_record().unwrap().is_none());
    }

    #[test]
    fn scan_streams_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let p = value_file_name(dir.path(), 9);
        let mut w = ValueFileWriter::new(fs.create(&p, IoCause::ValueLog).unwrap(), 9).unwrap();
        let value = |i: usize| -> Vec<u8> {
            let n = if i == 150 {
                SCAN_CHUNK * 3 / 2
            } else {
                10_000 + i
            };
            (0..n).map(|j| (i * 7 + j) as u8).collect()
        };
        let ptrs: Vec<_> = (0..300)
            .map(|i| w.add(format!("k{i}").as_bytes(), &value(i)).unwrap())
            .collect();
        let meta = w.finish().unwrap();
        assert!(meta.size > 3 * SCAN_CHUNK as u64);
        let f = BlobFile::new(&meta, dir.path(), fs.clone());
        let mut r = f.scan(IoCause::GcRead).unwrap();
        let mut n = 0;
        while let Some((ptr, k, v)) = r.next_record().unwrap() {
            assert_eq!(ptr, ptrs[n]);
            assert_eq!(k, format!("k{n}").as_bytes());
            assert!(v == value(n).as_slice(), "value {n}");
            n += 1;
        }
        assert_eq!(n, 300);
        // Cut the file in the middle of record 200.
        let cut = ptrs[200].offset + 30;
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..cut as usize]).unwrap();
        let short = BlobMeta { size: cut, ..meta };
        let f = BlobFile::new(&short, dir.path(), fs);
        let mut r = f.scan(IoCause::GcRead).unwrap();
        let e = loop {
            match r.next_record() {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("a cut record went unnoticed"),
                Err(e) => break e,
            }
        };
        assert!(e.is_corruption(), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("offset {}", ptrs[200].offset)),
            "{msg}"
        );
        assert!(msg.contains("000009.vlog"), "{msg}");
    }

    fn text(i: usize, n: usize) -> Vec<u8> {
        (0..n)
            .map(|j| b"value of a record "[(i + j) % 18])
            .collect()
    }

    /// Compressed records read back through both paths, next to records stored as is in
    /// the same file (incompressible values, and a writer without compression).
    #[test]
    fn compressed_records_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Storage> = Arc::new(FileStorage::new());
        for (n, c) in [(1, Compression::Lz4), (2, Compression::Zstd { level: 3 })] {
            let p = value_file_name(dir.path(), n);
            let file = fs.create(&p, IoCause::ValueLog).unwrap();
            let mut w = ValueFileWriter::new(file, n).unwrap().with_compression(c);
            let mut x = n as u32;
            let random: Vec<u8> = (0..4096)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    (x >> 16) as u8
                })
                .collect();
            let values: Vec<Vec<u8>> = (0..50)
                .map(|i| {
                    if i % 5 == 4 {
                        random.clone()
                    } else {
                        text(i, 4096)
                    }
                })
                .collect();
            let ptrs: Vec<_> = values
                .iter()
                .enumerate()
                .map(|(i, v)| w.add(format!("k{i}").as_bytes(), v).unwrap())
                .collect();
            let meta = w.finish().unwrap();
            // 40 values compress to a small fraction; 10 random ones are stored whole.
            assert!(
                meta.size < 10 * 4200 + 40 * 1024,
                "{c}: {} bytes",
                meta.size
            );
            assert!(
                ptrs[4].size as usize > 4096,
                "{c}: random value stored as is"
            );
            let f = BlobFile::new(&meta, dir.path(), fs.clone());
            for (i, v) in values.iter().enumerate() {
                let key = format!("k{i}");
                assert!(
                    f.read(&ptrs[i], key.as_bytes(), IoCause::ClientRead)
                        .unwrap()
                        == *v
                );
            }
            let mut r = f.scan(IoCause::GcRead).unwrap();
            let mut i = 0;
            while let Some((ptr, _, v)) = r.next_record().unwrap() {
                assert_eq!(ptr, ptrs[i]);
                assert!(v == values[i].as_slice(), "{c}: record {i}");
                i += 1;
            }
            assert_eq!(i, 50);
        }
    }

    /// A damaged compressed record is a corruption error naming the file and the record's
    /// offset: caught by the checksum, or (checksum made to match) by the codec.
    #[test]
    fn corrupt_compressed_records_are_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let p = value_file_name(dir.path(), 5);
        let file = fs.create(&p, IoCause::ValueLog).unwrap();
        let mut w = ValueFileWriter::new(file, 5)
            .unwrap()
            .with_compression(Compression::Lz4);
        let ptrs: Vec<_> = (0..3)
            .map(|i| w.add(format!("k{i}").as_bytes(), &text(i, 4096)).unwrap())
            .collect();
        let meta = w.finish().unwrap();
        let good = std::fs::read(&p).unwrap();
        let at = ptrs[1].offset as usize;
        let body = at + RECORD_HEADER + 2;
        for fix_crc in [false, true] {
            let mut bad = good.clone();
            // Claim more uncompressed bytes than the LZ4 block holds.
            bad[body] ^= 0x7f;
            if fix_crc {
                let end = at + ptrs[1].size as usize;
                let crc = record_crc(&bad[at + 4..end]);
                bad[at..at + 4].copy_from_slice(&crc.to_le_bytes());
            }
            std::fs::write(&p, &bad).unwrap();
            let f = BlobFile::new(&meta, dir.path(), fs.clone());
            let e = f.read(&ptrs[1], b"k1", IoCause::ClientRead).unwrap_err();
            let msg = e.to_string();
            assert!(e.is_corruption(), "{msg}");
            assert!(msg.contains("000005.vlog"), "{msg}");
            assert!(msg.contains(&format!("offset {at}")), "{msg}");
            let expected = if fix_crc {
                "compressed value"
            } else {
                "checksum"
            };
            assert!(msg.contains(expected), "{msg}");
            assert!(f.read(&ptrs[0], b"k0", IoCause::ClientRead).unwrap() == text(0, 4096));
            let mut r = f.scan(IoCause::GcRead).unwrap();
            r.next_record().unwrap().unwrap();
            let e = r.next_record().unwrap_err();
            assert!(e.to_string().contains(&format!("offset {at}")), "{e}");
        }
    }
}
