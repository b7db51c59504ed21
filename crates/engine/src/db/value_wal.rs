//! The value log as the write-ahead log of separated values (`Options::value_log_wal`;
//! WiscKey's and Badger's design, paper 000's setting).
//!
//! Without it every large value is written twice before any GC: once into the WAL with its
//! write, once into a value file when its memtable is flushed. With it, the write leader
//! appends each value of at least `min_blob_size` to the *active value file* and the WAL
//! record carries a pointer in its place; the memtable still holds the value (reads never
//! touch an unflushed file) and remembers where it was logged, so that flush writes the
//! pointer instead of the value ([`crate::memtable::Memtable::logged`]).
//!
//! Durability is the WAL's: the leader flushes (for a synced group, syncs) the active value
//! file before it appends the group's WAL records, so a WAL record never reaches the
//! operating system before the values it points to. Each value file belongs to one
//! memtable: it is synced and handed to the memtable when cut at `blob_file_size` or when
//! the memtable is switched, and the memtable's flush installs it in the same manifest
//! edit as its tables. A value file no edit names yet is known only to the WAL records
//! that point into it; open ([`Replay`]) reads the values back through those pointers,
//! verifying every record, and installs the files with the replayed tables.

use super::Inner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::io::{read_all, IoCause, Storage};
use crate::memtable::Memtable;
use crate::types::{SeqNo, ValueKind};
use crate::vlog::file::{value_file_name, BlobMeta, ValueFileReader};
use crate::vlog::{FileLifetime, ValueFileWriter, ValuePointer};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Follows the pointer of a logged value in a WAL record, telling it from the bare pointer
/// of a GC write-back (which may point into a file collected since).
const LOGGED: u8 = b'L';

/// The value files the write leader appends to, one per placement class (the lifetime
/// policies place a value by its predicted death when it is written, as flush does
/// without the value log as the WAL; the others use class 0).
#[derive(Default)]
pub(crate) struct ActiveValueFiles {
    by_class: Vec<Option<ActiveFile>>,
}

struct ActiveFile {
    writer: ValueFileWriter,
    /// The horizon of the file's class, from when it was opened.
    lifetime: Option<FileLifetime>,
    /// Appended to since the last flush.
    dirty: bool,
}

impl ActiveValueFiles {
    /// Appends the large values of `batch` (sequence numbers assigned) and returns the
    /// batch the WAL gets: the same entries with pointers in their place. The memtable
    /// `mem` (the group's) learns where each value went.
    pub fn log_batch(
        &mut self,
        inner: &Inner,
        mem: &Memtable,
        batch: &WriteBatch,
    ) -> Result<WriteBatch> {
        let mut out = WriteBatch::new();
        let mut logged = Vec::new();
        let view = (inner.lifetime.is_some()).then(|| super::read::ReadView::take(inner));
        for (seq, e) in (batch.first_seq()..).zip(batch.iter()) {
            if e.kind != ValueKind::Value || e.value.len() < inner.opts.min_blob_size {
                out.add(e.kind, e.key, e.value);
                continue;
            }
            let class = match (&inner.lifetime, &view) {
                (Some(rt), Some(view)) => rt.place_logged(view, e.key, seq),
                _ => 0,
            };
            if self.by_class.len() <= class {
                self.by_class.resize_with(class + 1, || None);
            }
            let slot = &mut self.by_class[class];
            if slot
                .as_ref()
                .is_some_and(|f| f.writer.len() >= inner.opts.blob_file_size)
            {
                seal(slot, mem)?;
            }
            if slot.is_none() {
                let n = inner.new_file_number();
                let f = inner
                    .storage
                    .create(&value_file_name(&inner.dir, n), IoCause::ValueLog)?;
                *slot = Some(ActiveFile {
                    writer: ValueFileWriter::new(f, n)?
                        .with_compression(inner.opts.value_compression),
                    lifetime: match (&inner.lifetime, &view) {
                        (Some(rt), Some(view)) => rt.logged_file_lifetime(view, class, seq),
                        _ => None,
                    },
                    dirty: true,
                });
            }
            let f = slot.as_mut().expect("opened above");
            let ptr = f.writer.add(e.key, e.value)?;
            f.dirty = true;
            let mut v = ptr.encode();
            v.push(LOGGED);
            out.add(ValueKind::Pointer, e.key, &v);
            logged.push((seq, ptr));
        }
        out.set_first_seq(batch.first_seq());
        mem.log_values(logged);
        Ok(out)
    }

    /// Makes the records appended since the last call as durable as the WAL records that
    /// will point into them: handed to the operating system, or synced.
    pub fn flush(&mut self, sync: bool) -> Result<()> {
        for f in self.by_class.iter_mut().flatten().filter(|f| f.dirty) {
            if sync {
                f.writer.sync()?;
            } else {
                f.writer.flush()?;
            }
            f.dirty = false;
        }
        Ok(())
    }

    /// Syncs every file and hands it to `mem` (being switched out), whose flush installs
    /// them.
    pub fn seal_all(&mut self, mem: &Memtable) -> Result<()> {
        for slot in &mut self.by_class {
            seal(slot, mem)?;
        }
        Ok(())
    }
}

/// Syncs a file and hands it to `mem`. Called when the file reaches its size and when
/// `mem` is switched out.
fn seal(slot: &mut Option<ActiveFile>, mem: &Memtable) -> Result<()> {
    if let Some(f) = slot.take() {
        let mut meta = f.writer.finish()?;
        meta.lifetime = f.lifetime;
        mem.add_value_file(meta);
    }
    Ok(())
}

/// Charges the logged values a flush dropped (overwritten within the memtable) to the
/// memtable's value files, which the same edit installs; returns the other dropped
/// pointers, charged as usual.
pub(crate) fn charge_dropped(
    files: &mut [BlobMeta],
    dropped: Vec<ValuePointer>,
) -> Vec<ValuePointer> {
    let mut rest = Vec::with_capacity(dropped.len());
    for p in dropped {
        match files.iter_mut().find(|f| f.number == p.file) {
            Some(f) => {
                f.garbage_bytes += p.size as u64;
                f.garbage_entries += 1;
            }
            None => rest.push(p),
        }
    }
    rest
}

/// The batch with the logged values' pointers as plain pointers: `repair` registers every
/// value file it finds, so the pointers resolve as any other.
pub(crate) fn plain_pointers(file: &Path, batch: &WriteBatch) -> WriteBatch {
    let mut out = WriteBatch::new();
    for e in batch.iter() {
        match ValuePointer::decode(file, e.value) {
            Ok((ptr, [LOGGED])) if e.kind == ValueKind::Pointer => {
                out.add(ValueKind::Pointer, e.key, &ptr.encode())
            }
            _ => out.add(e.kind, e.key, e.value),
        }
    }
    out.set_first_seq(batch.first_seq());
    out
}

/// A value-file tail open cut off: (file, length kept, bytes cut).
pub(crate) type CutTail = (PathBuf, u64, u64);

/// Open: resolves the pointers of replayed WAL records into value files no edit names yet.
pub(crate) struct Replay<'a> {
    dir: &'a Path,
    storage: &'a dyn Storage,
    /// Files read so far: their bytes, and the bytes and records some replayed pointer uses.
    files: BTreeMap<u64, (ValueFileData, u64, u64)>,
}

struct ValueFileData {
    path: PathBuf,
    data: Vec<u8>,
    /// Records by offset: (size, entries), from a scan that stopped at the first record
    /// that is not intact.
    records: HashMap<u64, u32>,
    /// Where the intact records end.
    valid_len: u64,
    /// Why the scan stopped before the end of the file, if it did.
    damage: Option<String>,
}

impl<'a> Replay<'a> {
    pub fn new(dir: &'a Path, storage: &'a dyn Storage) -> Self {
        Replay {
            dir,
            storage,
            files: BTreeMap::new(),
        }
    }

    /// Inserts a replayed batch into `mem`: a logged value as the value its pointer points
    /// to, read back and verified, anything else (a GC write-back's pointer too) as it is.
    /// A pointer to a record that is missing or not intact is an error naming the value
    /// file and offset. Returns the last sequence number.
    pub fn insert(&mut self, batch: &WriteBatch, mem: &Memtable) -> Result<SeqNo> {
        let mut seq = batch.first_seq();
        let mut logged = Vec::new();
        for e in batch.iter() {
            if e.kind == ValueKind::Pointer {
                let (ptr, rest) = ValuePointer::decode(self.dir, e.value)?;
                if rest == [LOGGED] {
                    let value = self.read(&ptr, e.key)?;
                    mem.add(seq, ValueKind::Value, e.key, &value);
                    logged.push((seq, ptr));
                    seq += 1;
                    continue;
                }
            }
            mem.add(seq, e.kind, e.key, e.value);
            seq += 1;
        }
        mem.log_values(logged);
        Ok(seq - 1)
    }

    fn read(&mut self, ptr: &ValuePointer, key: &[u8]) -> Result<Vec<u8>> {
        if !self.files.contains_key(&ptr.file) {
            let d = self.load(ptr.file)?;
            self.files.insert(ptr.file, (d, 0, 0));
        }
        let (d, used, used_entries) = self.files.get_mut(&ptr.file).expect("loaded above");
        if d.records.get(&ptr.offset) != Some(&ptr.size) {
            let why = match &d.damage {
                Some(why) if ptr.offset >= d.valid_len => format!(": {why}"),
                _ => String::new(),
            };
            return Err(Error::corruption(
                &d.path,
                format!(
                    "a WAL record points to a value record at offset {} ({} bytes) that is not \
                     intact{why}",
                    ptr.offset, ptr.size
                ),
            ));
        }
        let at = ptr.offset as usize;
        let (k, v) = crate::vlog::file::parse_record(
            &d.path,
            ptr.offset,
            &d.data[at..at + ptr.size as usize],
        )?;
        if k != key {
            return Err(Error::corruption(
                &d.path,
                format!("record at offset {} belongs to another key", ptr.offset),
            ));
        }
        *used += ptr.size as u64;
        *used_entries += 1;
        Ok(v.to_vec())
    }

    fn load(&self, number: u64) -> Result<ValueFileData> {
        let path = value_file_name(self.dir, number);
        if !self.storage.exists(&path) {
            return Err(Error::corruption(
                &path,
                "missing: a WAL record points into this value file",
            ));
        }
        let data = read_all(self.storage, &path, IoCause::Other)?;
        let mut reader = ValueFileReader::new(&path, data.clone(), number)?;
        let mut records = HashMap::new();
        let mut valid_len = crate::vlog::file::FILE_HEADER as u64;
        let mut damage = None;
        loop {
            match reader.next_record() {
                Ok(Some((p, _, _))) => {
                    records.insert(p.offset, p.size);
                    valid_len = p.offset + p.size as u64;
                }
                Ok(None) => break,
                Err(e) => {
                    damage = Some(e.to_string());
                    break;
                }
            }
        }
        Ok(ValueFileData {
            path,
            data,
            records,
            valid_len,
            damage,
        })
    }

    /// The value files the replayed records point into, for the edit that installs them
    /// with the replayed tables. Their records no replayed pointer uses (a write whose WAL
    /// record was never written) are garbage; a tail that is not a whole record (a value
    /// append cut by the crash, which no WAL record can point to) is cut off, and reported
    /// as (file, valid length, bytes cut).
    pub fn finish(self) -> Result<(Vec<BlobMeta>, Vec<CutTail>)> {
        let mut metas = Vec::new();
        let mut cut = Vec::new();
        for (number, (d, used, used_entries)) in self.files {
            let len = d.data.len() as u64;
            if d.valid_len < len {
                if !torn_append(&d.data[d.valid_len as usize..]) {
                    return Err(Error::corruption(
                        &d.path,
                        format!(
                            "value record at offset {} is damaged ({})",
                            d.valid_len,
                            d.damage.as_deref().unwrap_or("unreadable")
                        ),
                    ));
                }
                self.storage.truncate(&d.path, d.valid_len)?;
                cut.push((d.path.clone(), d.valid_len, len - d.valid_len));
            }
            let record_bytes = d.valid_len - crate::vlog::file::FILE_HEADER as u64;
            let entries = d.records.len() as u64;
            metas.push(BlobMeta {
                number,
                size: d.valid_len,
                entries,
                garbage_bytes: record_bytes - used,
                garbage_entries: entries - used_entries,
                lifetime: None,
            });
        }
        Ok((metas, cut))
    }
}

/// Whether `tail` (the bytes after the last intact record) is an append cut short: too
/// short for a record header, or a header whose record runs past the end. Anything else
/// (a whole record with a bad checksum) is damage, which open must not cut off.
fn torn_append(tail: &[u8]) -> bool {
    use crate::vlog::file::RECORD_HEADER;
    if tail.len() < RECORD_HEADER {
        return true;
    }
    let klen = u32::from_le_bytes(tail[4..8].try_into().unwrap()) as usize;
    let vlen = u32::from_le_bytes(tail[8..12].try_into().unwrap()) as usize;
    RECORD_HEADER + klen + vlen > tail.len()
}
