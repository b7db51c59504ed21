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
use crate::vlog::{ValueFileWriter, ValuePointer};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Appends the large values of `batch` (sequence numbers assigned) to the active value file
/// and returns the batch the WAL gets: the same entries with pointers in their place. The
/// memtable `mem` (the group's) learns where each value went.
pub(crate) fn log_batch(
    inner: &Inner,
    active: &mut Option<ValueFileWriter>,
    mem: &Memtable,
    batch: &WriteBatch,
) -> Result<WriteBatch> {
    let mut out = WriteBatch::new();
    let mut logged = Vec::new();
    for (seq, e) in (batch.first_seq()..).zip(batch.iter()) {
        if e.kind != ValueKind::Value || e.value.len() < inner.opts.min_blob_size {
            out.add(e.kind, e.key, e.value);
            continue;
        }
        if active
            .as_ref()
            .is_some_and(|w| w.len() >= inner.opts.blob_file_size)
        {
            seal(active, mem)?;
        }
        if active.is_none() {
            let n = inner.new_file_number();
            let f = inner
                .storage
                .create(&value_file_name(&inner.dir, n), IoCause::ValueLog)?;
            *active = Some(ValueFileWriter::new(f, n)?);
        }
        let ptr = active.as_mut().expect("opened above").add(e.key, e.value)?;
        out.add(ValueKind::Pointer, e.key, &ptr.encode());
        logged.push((seq, ptr));
    }
    out.set_first_seq(batch.first_seq());
    mem.log_values(logged);
    Ok(out)
}

/// Makes the active value file's records as durable as the WAL records that will point
/// into them: handed to the operating system, or synced.
pub(crate) fn flush(active: &mut Option<ValueFileWriter>, sync: bool) -> Result<()> {
    match active {
        Some(w) if sync => w.sync(),
        Some(w) => w.flush(),
        None => Ok(()),
    }
}

/// Syncs the active value file and hands it to `mem`, whose flush installs it. Called when
/// the file reaches its size and when `mem` is switched out.
pub(crate) fn seal(active: &mut Option<ValueFileWriter>, mem: &Memtable) -> Result<()> {
    if let Some(w) = active.take() {
        mem.add_value_file(w.finish()?);
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

    /// Inserts a replayed batch into `mem`: a pointer into a value file the manifest names
    /// (`installed`: a GC write-back) as it is, a pointer into an unnamed file as the value
    /// it points to, read back and verified. A pointer to a record that is missing or not
    /// intact is an error naming the value file and offset. Returns the last sequence
    /// number.
    pub fn insert(
        &mut self,
        batch: &WriteBatch,
        installed: impl Fn(u64) -> bool,
        mem: &Memtable,
    ) -> Result<SeqNo> {
        let mut seq = batch.first_seq();
        let mut logged = Vec::new();
        for e in batch.iter() {
            if e.kind == ValueKind::Pointer {
                let (ptr, _) = ValuePointer::decode(self.dir, e.value)?;
                if !installed(ptr.file) {
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
    pub fn finish(self) -> Result<(Vec<BlobMeta>, Vec<(PathBuf, u64, u64)>)> {
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
