//! Writing sorted runs: the loop shared by flush and compaction.
//!
//! It reads a stream of internal keys in order, keeps the versions some reader can still
//! see, drops the rest (counting dropped value pointers as garbage of their value files),
//! separates large values into value files (flush), relocates values the GC policy asks for
//! (compaction), and cuts output tables at the target size on user-key boundaries so that
//! the files of a level never share a user key.

use crate::error::{Error, Result};
use crate::io::{IoCause, Storage};
use crate::options::Options;
use crate::sst::{InternalIterator, TableBuilder, TableOptions};
use crate::types::{parse_internal_key, SeqNo, ValueKind};
use crate::version::{table_file_name, FileMeta};
use crate::vlog::file::{value_file_name, BlobMeta};
use crate::vlog::{BlobFile, ValueFileWriter, ValuePointer};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

/// What a job is allowed to do with the entries it reads.
pub struct JobSpec<'a> {
    pub dir: &'a Path,
    pub storage: &'a Arc<dyn Storage>,
    pub opts: &'a Options,
    /// Flush or Compaction: the cause charged for table writes.
    pub cause: IoCause,
    /// Versions newer than this are kept for snapshot readers.
    pub smallest_snapshot: SeqNo,
    /// Nothing older lives below the output: tombstones can be dropped.
    pub drop_tombstones: bool,
    /// Move values of at least `min_blob_size` into value files (flush).
    pub separate_values: bool,
    /// Cut outputs at `target_file_size` (compaction) or write one table (flush).
    pub split_outputs: bool,
    /// Rewrite the value a pointer points to into a new value file (BlobDB-style GC).
    pub relocate: Option<&'a (dyn Fn(&ValuePointer) -> bool + Sync)>,
    /// Value files pointers may refer to (to read relocated values).
    pub blobs: &'a BTreeMap<u64, Arc<BlobFile>>,
    /// Allocates file numbers.
    pub new_file_number: &'a (dyn Fn() -> u64 + Sync),
    /// Which output blocks go into the block cache without being read (paper 002).
    pub warming: Option<&'a crate::warming::JobWarming>,
}

/// What a job produced, for the version edit and the counters.
#[derive(Debug, Default)]
pub struct JobOutput {
    pub tables: Vec<FileMeta>,
    pub blobs: Vec<BlobMeta>,
    /// Per value file: (bytes, entries) that became garbage.
    pub garbage: HashMap<u64, (u64, u64)>,
    pub entries_in: u64,
    pub entries_out: u64,
    pub relocated_bytes: u64,
}

struct Outputs<'a> {
    spec: &'a JobSpec<'a>,
    table: Option<(TableBuilder, u64, Option<u64>)>,
    value_writer: Option<ValueFileWriter>,
    out: JobOutput,
    created: Vec<std::path::PathBuf>,
}

impl Outputs<'_> {
    fn table(&mut self) -> Result<&mut (TableBuilder, u64, Option<u64>)> {
        if self.table.is_none() {
            let n = (self.spec.new_file_number)();
            let path = table_file_name(self.spec.dir, n);
            self.created.push(path.clone());
            let file = self.spec.storage.create(&path, self.spec.cause)?;
            let o = self.spec.opts;
            let topts = TableOptions {
                block_size: o.block_size,
                bloom_bits_per_key: o.bloom_bits_per_key,
                restart_interval: 16,
            };
            let mut builder = TableBuilder::new(file, topts);
            if let Some(w) = self.spec.warming {
                builder.set_block_sink(w.sink(n));
            }
            self.table = Some((builder, n, None));
        }
        Ok(self.table.as_mut().unwrap())
    }

    fn finish_table(&mut self) -> Result<()> {
        if let Some((b, number, oldest_blob)) = self.table.take() {
            let p = b.finish()?;
            self.out.tables.push(FileMeta {
                number,
                size: p.file_size,
                smallest: p.smallest_key,
                largest: p.largest_key,
                smallest_seq: p.smallest_seq,
                largest_seq: p.largest_seq,
                entries: p.num_entries,
                deletions: p.num_deletions,
                oldest_blob,
            });
        }
        Ok(())
    }

    /// Appends a value to the current value file (cut at `blob_file_size`).
    fn write_value(&mut self, key: &[u8], value: &[u8], cause: IoCause) -> Result<ValuePointer> {
        if self
            .value_writer
            .as_ref()
            .is_some_and(|w| w.len() >= self.spec.opts.blob_file_size)
        {
            self.finish_value_file()?;
        }
        if self.value_writer.is_none() {
            let n = (self.spec.new_file_number)();
            let path = value_file_name(self.spec.dir, n);
            self.created.push(path.clone());
            let f = self.spec.storage.create(&path, cause)?;
            self.value_writer = Some(ValueFileWriter::new(f, n)?);
        }
        self.value_writer.as_mut().unwrap().add(key, value)
    }

    fn finish_value_file(&mut self) -> Result<()> {
        if let Some(w) = self.value_writer.take() {
            self.out.blobs.push(w.finish()?);
        }
        Ok(())
    }

    fn emit(&mut self, ikey: &[u8], value: &[u8], ptr: Option<ValuePointer>) -> Result<()> {
        let t = self.table()?;
        t.0.add(ikey, value)?;
        if let Some(p) = ptr {
            t.2 = Some(t.2.map_or(p.file, |o| o.min(p.file)));
        }
        self.out.entries_out += 1;
        Ok(())
    }
}

/// Runs a job over `input` (positioned by the job). On failure the files it created are
/// removed.
pub fn run(spec: &JobSpec<'_>, input: &mut dyn InternalIterator) -> Result<JobOutput> {
    let mut o = Outputs {
        spec,
        table: None,
        value_writer: None,
        out: JobOutput::default(),
        created: Vec::new(),
    };
    let r = run_inner(spec, input, &mut o);
    match r {
        Ok(()) => Ok(o.out),
        Err(e) => {
            drop(o.table.take());
            drop(o.value_writer.take());
            for p in &o.created {
                let _ = spec.storage.remove(p);
            }
            Err(e)
        }
    }
}

fn run_inner(spec: &JobSpec<'_>, input: &mut dyn InternalIterator, o: &mut Outputs) -> Result<()> {
    input.seek_to_first()?;
    let mut cur_key: Vec<u8> = Vec::new();
    let mut have_key = false;
    // Sequence number of the previous (newer) version of the current key, if any.
    let mut last_seq_for_key: Option<SeqNo> = None;
    let mut new_value = Vec::new();
    let mut new_key = Vec::new();
    while input.valid() {
        let ikey = input.key();
        let p = parse_internal_key(ikey)
            .ok_or_else(|| Error::corruption(spec.dir, "malformed internal key in job input"))?;
        o.out.entries_in += 1;
        let first_of_key = !have_key || p.user_key != cur_key.as_slice();
        if first_of_key {
            // Cut the output between user keys only.
            if spec.split_outputs
                && o.table
                    .as_ref()
                    .is_some_and(|t| t.0.estimated_size() >= spec.opts.target_file_size)
            {
                o.finish_table()?;
            }
            cur_key.clear();
            cur_key.extend_from_slice(p.user_key);
            have_key = true;
            last_seq_for_key = None;
        }
        let shadowed = last_seq_for_key.is_some_and(|s| s <= spec.smallest_snapshot);
        let dead_tombstone = p.kind == ValueKind::Deletion
            && spec.drop_tombstones
            && p.seq <= spec.smallest_snapshot;
        last_seq_for_key = Some(p.seq);
        let value = input.value();
        if shadowed || dead_tombstone {
            if p.kind == ValueKind::Pointer {
                let (ptr, _) = ValuePointer::decode(spec.dir, value)?;
                let g = o.out.garbage.entry(ptr.file).or_default();
                g.0 += ptr.size as u64;
                g.1 += 1;
            }
            input.next()?;
            continue;
        }
        match p.kind {
            ValueKind::Value if spec.separate_values && value.len() >= spec.opts.min_blob_size => {
                let ptr = o.write_value(p.user_key, value, IoCause::ValueLog)?;
                new_value.clear();
                ptr.encode_into(&mut new_value);
                new_key.clear();
                crate::types::append_internal_key(
                    &mut new_key,
                    p.user_key,
                    p.seq,
                    ValueKind::Pointer,
                );
                o.emit(&new_key, &new_value, Some(ptr))?;
            }
            ValueKind::Pointer => {
                let (ptr, meta) = ValuePointer::decode(spec.dir, value)?;
                if spec.relocate.is_some_and(|f| f(&ptr)) {
                    let old = spec.blobs.get(&ptr.file).ok_or_else(|| {
                        Error::corruption(
                            spec.dir,
                            format!("pointer to missing value file {}", ptr.file),
                        )
                    })?;
                    let v = old.read(&ptr, p.user_key, IoCause::GcRead)?;
                    let np = o.write_value(p.user_key, &v, IoCause::GcWrite)?;
                    o.out.relocated_bytes += np.size as u64;
                    let g = o.out.garbage.entry(ptr.file).or_default();
                    g.0 += ptr.size as u64;
                    g.1 += 1;
                    new_value.clear();
                    np.encode_into(&mut new_value);
                    new_value.extend_from_slice(meta);
                    o.emit(ikey, &new_value, Some(np))?;
                } else {
                    o.emit(ikey, value, Some(ptr))?;
                }
            }
            _ => o.emit(ikey, value, None)?,
        }
        input.next()?;
    }
    o.finish_table()?;
    o.finish_value_file()
}
