//! Running a job: the loop shared by flush and compaction that writes sorted runs.
//!
//! It reads a stream of internal keys in order, keeps the versions some reader can still
//! see, drops the rest (counting dropped value pointers as garbage of their value files),
//! separates large values into value files (flush), relocates values the GC policy asks for
//! (compaction), and cuts output tables at the target size on user-key boundaries so that
//! the files of a level never share a user key.

use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::gc::placement::{JobHooks, Previous};
use crate::internal_key::{parse_internal_key, user_key, SeqNo, ValueKind};
use crate::io::{IoCause, Storage};
use crate::lifetime::FeatureRecord;
use crate::options::Options;
use crate::sst::iter::key_versions;
use crate::sst::{InternalIterator, TableBuilder, TableOptions};
use crate::version::{FileMeta, Version};
use crate::vlog::file::BlobMeta;
use crate::vlog::{FileExpiry, ValueFileWriter, ValuePointer};
use std::path::Path;
use std::sync::Arc;

/// What a job is allowed to do with the entries it reads.
pub struct JobSpec<'a> {
    pub dir: &'a Path,
    pub storage: &'a Arc<dyn Storage>,
    pub opts: &'a Options,
    /// The level the output tables go to (its compression is `opts.compression_for_level`).
    pub output_level: usize,
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
    /// The version the job started from: its value files (to read relocated values) and
    /// index maps (to rewrite pointers to collected files lazily).
    pub version: &'a Version,
    /// Lifetime policies: feature records, file lifetimes, lifetime samples.
    pub lifetime: Option<&'a JobHooks<'a>>,
    /// Allocates file numbers.
    pub new_file_number: &'a (dyn Fn() -> u64 + Sync),
    /// Which output blocks go into the block cache without being read (paper 002).
    pub warming: Option<&'a crate::warming::JobWarming>,
    /// Flush with the value log as the WAL: where the write at a sequence number logged
    /// its value (it is pointed at, not written again).
    pub logged: Option<&'a (dyn Fn(SeqNo) -> Option<ValuePointer> + Sync)>,
}

/// What a job produced, for the version edit and the counters.
#[derive(Debug, Default)]
pub struct JobOutput {
    pub tables: Vec<FileMeta>,
    pub blobs: Vec<BlobMeta>,
    /// Pointers the job removed from the tree: their records became garbage. They are
    /// charged when the job installs (see [`crate::gc::garbage::garbage_by_file`]),
    /// because a GC may have moved the records meanwhile.
    pub dropped: Vec<ValuePointer>,
    pub entries_in: u64,
    pub entries_out: u64,
    pub relocated_bytes: u64,
    /// Pointers to collected value files rewritten through index maps.
    pub lazy_rewrites: u64,
    /// Expired entries the job turned into deletions or dropped.
    pub expired: u64,
    /// Feature records linked to the key's previous write.
    pub links: u64,
    /// Flush: pointers of the keys' previous writes in the tree that this flush hides from
    /// every reader (none of them older than a snapshot): their records are garbage once
    /// the flush is installed, before any compaction counts them.
    pub superseded: Vec<ValuePointer>,
}

/// The open value file of an expiry window.
struct ExpiryWriter {
    writer: ValueFileWriter,
    /// The latest expiry of a value in it.
    latest: u64,
}

struct Outputs<'a> {
    spec: &'a JobSpec<'a>,
    table: Option<(TableBuilder, u64, Option<u64>)>,
    /// The open value file of each placement class (one, class 0, without placement).
    value_writers: Vec<Option<ValueFileWriter>>,
    /// Placement classes whose open value file holds a value with an expiry (placement
    /// by expiry off, or a relocated one): the file is marked [`FileExpiry::Mixed`].
    mixed_classes: Vec<bool>,
    /// The open value file of each expiry window ([`crate::expiry::window`]).
    expiry_writers: std::collections::HashMap<(u64, u64), ExpiryWriter>,
    /// The wall-clock time the job judges expiry at, taken when it starts.
    now_ms: u64,
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
                block_size: o.table.block_size,
                bloom_bits_per_key: o.table.bloom_bits_per_key,
                restart_interval: 16,
                compression: o.table.compression_for_level(self.spec.output_level),
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

    /// A new value file for the job's values, removed if the job fails.
    fn new_value_file(&mut self, cause: IoCause) -> Result<ValueFileWriter> {
        let (path, writer) = ValueFileWriter::create(
            &**self.spec.storage,
            self.spec.dir,
            (self.spec.new_file_number)(),
            cause,
            self.spec.opts.vlog.value_compression,
        )?;
        self.created.push(path);
        Ok(writer)
    }

    /// Appends a value to the current value file of placement class `class` (cut at
    /// `blob_file_size`).
    fn write_value(
        &mut self,
        class: usize,
        key: &[u8],
        value: &[u8],
        cause: IoCause,
    ) -> Result<ValuePointer> {
        if self.value_writers.len() <= class {
            self.value_writers.resize_with(class + 1, || None);
        }
        if self.value_writers[class]
            .as_ref()
            .is_some_and(|w| w.len() >= self.spec.opts.vlog.blob_file_size)
        {
            self.finish_value_file(class)?;
        }
        if self.value_writers[class].is_none() {
            self.value_writers[class] = Some(self.new_value_file(cause)?);
        }
        self.value_writers[class]
            .as_mut()
            .expect("opened above")
            .add(key, value)
    }

    fn finish_value_file(&mut self, class: usize) -> Result<()> {
        if let Some(w) = self.value_writers.get_mut(class).and_then(Option::take) {
            let mut meta = w.finish()?;
            meta.lifetime = self.spec.lifetime.and_then(|l| l.file_lifetime(class));
            if self.mixed_classes.get(class).is_some_and(|m| *m) {
                meta.expiry = FileExpiry::Mixed;
                self.mixed_classes[class] = false;
            }
            self.out.blobs.push(meta);
        }
        Ok(())
    }

    fn finish_value_files(&mut self) -> Result<()> {
        for class in 0..self.value_writers.len() {
            self.finish_value_file(class)?;
        }
        let windows: Vec<_> = self.expiry_writers.keys().copied().collect();
        for w in windows {
            self.finish_expiry_file(w)?;
        }
        Ok(())
    }

    /// Appends a value that expires at `expire_at` to the value file of its expiry window
    /// (cut at `blob_file_size`), or with the others if placement by expiry is off.
    fn write_expiring_value(
        &mut self,
        expire_at: u64,
        key: &[u8],
        value: &[u8],
        cause: IoCause,
    ) -> Result<ValuePointer> {
        let divisor = self.spec.opts.vlog.expiry_window_divisor;
        let Some(window) = crate::expiry::window(expire_at, self.now_ms, divisor) else {
            let ptr = self.write_value(0, key, value, cause)?;
            if self.mixed_classes.is_empty() {
                self.mixed_classes.push(false);
            }
            self.mixed_classes[0] = true;
            return Ok(ptr);
        };
        let window = crate::expiry::window_to_write(window, &self.expiry_writers);
        if self
            .expiry_writers
            .get(&window)
            .is_some_and(|w| w.writer.len() >= self.spec.opts.vlog.blob_file_size)
        {
            self.finish_expiry_file(window)?;
        }
        if !self.expiry_writers.contains_key(&window) {
            let writer = self.new_value_file(cause)?;
            self.expiry_writers.insert(
                window,
                ExpiryWriter {
                    writer,
                    latest: expire_at,
                },
            );
        }
        let w = self.expiry_writers.get_mut(&window).expect("opened above");
        w.latest = w.latest.max(expire_at);
        w.writer.add(key, value)
    }

    fn finish_expiry_file(&mut self, window: (u64, u64)) -> Result<()> {
        if let Some(w) = self.expiry_writers.remove(&window) {
            let mut meta = w.writer.finish()?;
            meta.expiry = FileExpiry::AllBy(w.latest);
            self.out.blobs.push(meta);
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
        value_writers: Vec::new(),
        mixed_classes: Vec::new(),
        expiry_writers: Default::default(),
        now_ms: spec.opts.clock.now_ms(),
        out: JobOutput::default(),
        created: Vec::new(),
    };
    let r = run_inner(spec, input, &mut o);
    match r {
        Ok(()) => Ok(o.out),
        Err(e) => {
            drop(o.table.take());
            o.value_writers.clear();
            o.expiry_writers.clear();
            for p in &o.created {
                let _ = spec.storage.remove(p);
            }
            Err(e)
        }
    }
}

/// Per-key state of the loop.
#[derive(Default)]
struct KeyState {
    cur_key: Vec<u8>,
    have_key: bool,
    /// Sequence number of the previous (newer) version of the current key, if any.
    last_seq: Option<SeqNo>,
    /// Under a lifetime policy: the key's write before the entry being processed (the
    /// next older version in the job's input, else, for a flush that looks it up, in the
    /// tree).
    previous: Option<Previous>,
    new_value: Vec<u8>,
    new_key: Vec<u8>,
}

fn run_inner(spec: &JobSpec<'_>, input: &mut dyn InternalIterator, o: &mut Outputs) -> Result<()> {
    input.seek_to_first()?;
    let mut ks = KeyState::default();
    // Under a lifetime policy every job sees all versions of a key before writing any:
    // compaction links each flushed feature record to the key's previous write (paper 000,
    // sec. 4.3), and flush places a value by the interval to its previous write when the
    // memtable holds that write too.
    let Some(hooks) = spec.lifetime else {
        while input.valid() {
            process(spec, o, &mut ks, input.key(), input.value(), None)?;
            input.next()?;
        }
        o.finish_table()?;
        return o.finish_value_files();
    };
    let mut below = if spec.separate_values && hooks.looks_up_previous() {
        look_up_below(spec, hooks, input)?.into_iter()
    } else {
        Vec::new().into_iter()
    };
    let mut group: Vec<Held> = Vec::new();
    input.seek_to_first()?;
    while input.valid() {
        let same = group
            .first()
            .is_some_and(|(k, ..)| user_key(k) == user_key(input.key()));
        if !same && !group.is_empty() {
            process_group(spec, hooks, o, &mut ks, &mut group, below.next().flatten())?;
        }
        let (k, v) = (input.key(), input.value());
        let logged = logged_value(spec, k, v)?;
        let bytes = if logged.is_some() {
            Vec::new()
        } else {
            v.to_vec()
        };
        group.push((k.to_vec(), bytes, logged));
        input.next()?;
    }
    if !group.is_empty() {
        process_group(spec, hooks, o, &mut ks, &mut group, below.next().flatten())?;
    }
    o.finish_table()?;
    o.finish_value_files()
}

/// One version of a key, held until the job has seen the key's every version: internal
/// key, value, and for a value the write path logged, [`logged_value`] (its value is then
/// left empty).
type Held = (Vec<u8>, Vec<u8>, Option<(ValuePointer, usize)>);

/// Where the write path logged `value` (a flush with the value log as the WAL), with the
/// value's length, if the flush will point at that record: a plain value large enough to be
/// separated. Why: the flush never reads such a value's bytes, and copying each one into
/// the key's group was a quarter of the flush thread's CPU at full scale (4 KiB values,
/// docs/results/2026-11-29-background-cpu.md).
fn logged_value(
    spec: &JobSpec<'_>,
    ikey: &[u8],
    value: &[u8],
) -> Result<Option<(ValuePointer, usize)>> {
    let Some(logged) = spec.logged else {
        return Ok(None);
    };
    if !spec.separate_values || value.len() < spec.opts.vlog.min_blob_size {
        return Ok(None);
    }
    let p = parse_internal_key(ikey)
        .ok_or_else(|| Error::corruption(spec.dir, "malformed internal key in job input"))?;
    if p.kind != ValueKind::Value {
        return Ok(None);
    }
    Ok(logged(p.seq).map(|ptr| (ptr, value.len())))
}

/// The write before each key's oldest version in `input` (one entry per user key, in
/// order), looked up below the job's output level several at a time
/// ([`crate::io::parallel`]).
fn look_up_below(
    spec: &JobSpec<'_>,
    hooks: &JobHooks<'_>,
    input: &mut dyn InternalIterator,
) -> Result<Vec<Option<Previous>>> {
    let keys = key_versions(input, spec.dir, "job input", |_, _| Ok(()))?;
    crate::io::parallel::map_in_parallel(
        crate::io::parallel::Pool::Lookup,
        &keys,
        |(k, seq, ())| hooks.previous_below(k, *seq),
    )
}

/// Writes the versions of one key (newest first), linked first in a compaction. `below`
/// is the write before the group's oldest version, if the job looked it up.
fn process_group(
    spec: &JobSpec<'_>,
    hooks: &JobHooks<'_>,
    o: &mut Outputs,
    ks: &mut KeyState,
    group: &mut Vec<Held>,
    below: Option<Previous>,
) -> Result<()> {
    // The write before the group's oldest version: looked up by a flush that places values
    // or finds garbage early, and then superseded if no reader can see it any more.
    if spec.separate_values && hooks.looks_up_previous() {
        let (oldest, ..) = group.last().expect("groups are not empty");
        let seq = seq_of(spec, oldest)?;
        if let Some(p) = below.as_ref().and_then(|b| b.pointer) {
            if seq <= spec.smallest_snapshot {
                o.out.superseded.push(p);
            }
        }
    } else if !spec.separate_values {
        link_group(spec, hooks, group, &mut o.out)?;
    }
    let mut previous = Vec::with_capacity(group.len());
    for (k, ..) in group.iter().skip(1) {
        previous.push(Some(Previous {
            seq: seq_of(spec, k)?,
            features: None,
            pointer: None,
        }));
    }
    previous.push(below);
    for ((k, v, logged), prev) in group.drain(..).zip(previous) {
        ks.previous = prev;
        process(spec, o, ks, &k, &v, logged)?;
    }
    Ok(())
}

fn seq_of(spec: &JobSpec<'_>, ikey: &[u8]) -> Result<SeqNo> {
    parse_internal_key(ikey)
        .map(|p| p.seq)
        .ok_or_else(|| Error::corruption(spec.dir, "malformed internal key in job input"))
}

/// Links the feature records of one key's versions (newest first) that flush left
/// pending: each gets the history of the version before it (in the group, else the
/// key's newest write below the output), and each interval found is a true lifetime.
fn link_group(
    spec: &JobSpec<'_>,
    hooks: &JobHooks<'_>,
    group: &mut [Held],
    out: &mut JobOutput,
) -> Result<()> {
    let parse = |k: &[u8]| {
        parse_internal_key(k)
            .map(|p| (p.seq, p.kind))
            .ok_or_else(|| Error::corruption(spec.dir, "malformed internal key in job input"))
    };
    // Oldest first, carrying the previous write's sequence number and record.
    let mut prev: Option<Previous> = None;
    for i in (0..group.len()).rev() {
        let (seq, kind) = parse(&group[i].0)?;
        if kind != ValueKind::Pointer {
            prev = Some(Previous {
                seq,
                features: None,
                pointer: None,
            });
            continue;
        }
        let (ptr, meta) = ValuePointer::decode(spec.dir, &group[i].1)?;
        let mut rec = FeatureRecord::after_pointer(spec.dir, meta)?;
        if rec.pending_link() {
            if prev.is_none() {
                // The oldest version in the input: its predecessor, if any, is below.
                let key = user_key(&group[i].0).to_vec();
                prev = hooks.previous_below(&key, seq)?;
            }
            let size = rec.value_size();
            rec = match &prev {
                Some(p) => {
                    let mut r = p.features.clone().unwrap_or_default();
                    if let Some(f) = &p.features {
                        hooks.observe(f, seq.saturating_sub(p.seq));
                    }
                    r.update(seq, p.seq);
                    r
                }
                None => FeatureRecord::new(),
            };
            rec.set_value_size(size);
            rec.set_pending_link(false);
            out.links += 1;
            let mut v = ptr.encode();
            rec.encode_into(&mut v);
            group[i].1 = v;
        }
        prev = Some(Previous {
            seq,
            features: Some(rec),
            pointer: Some(ptr),
        });
    }
    Ok(())
}

/// Writes an unexpired expiring entry: a large value is separated (into the value file of
/// its expiry window), a pointer is rewritten through the index maps or relocated as
/// [`process`] does for others; the expiry time stays in front. Expiring values carry no
/// feature record: their lifetime is the one the application stated.
fn process_expiring(
    spec: &JobSpec<'_>,
    o: &mut Outputs,
    ks: &mut KeyState,
    user_key: &[u8],
    seq: SeqNo,
    s: crate::expiry::Split<'_>,
    logged: Option<ValuePointer>,
) -> Result<()> {
    let expire_at = s.expire_at.expect("an expiring entry");
    let ptr = match s.kind {
        // Logged by the write path into its expiry window's file (the value log as the
        // WAL): the flush points at it.
        ValueKind::Value if logged.is_some() => logged.expect("matched"),
        ValueKind::Value
            if spec.separate_values && s.payload.len() >= spec.opts.vlog.min_blob_size =>
        {
            o.write_expiring_value(expire_at, user_key, s.payload, IoCause::ValueLog)?
        }
        ValueKind::Pointer => {
            let (stored, _) = ValuePointer::decode(spec.dir, s.payload)?;
            let mut ptr = match spec.version.resolve(&stored) {
                Some(r) if r != stored => {
                    o.out.lazy_rewrites += 1;
                    r
                }
                _ => stored,
            };
            if spec.relocate.is_some_and(|f| f(&ptr)) {
                let v = read_for_relocation(spec, &ptr, user_key)?;
                let np = o.write_expiring_value(expire_at, user_key, &v, IoCause::GcWrite)?;
                o.out.relocated_bytes += np.size as u64;
                o.out.dropped.push(ptr);
                ptr = np;
            }
            ptr
        }
        _ => {
            ks.new_key.clear();
            crate::internal_key::append_internal_key(
                &mut ks.new_key,
                user_key,
                seq,
                ValueKind::ExpiringValue,
            );
            ks.new_value.clear();
            crate::expiry::encode_into(
                &mut ks.new_value,
                ValueKind::Value,
                Some(expire_at),
                s.payload,
            );
            return o.emit(&ks.new_key, &ks.new_value, None);
        }
    };
    ks.new_key.clear();
    crate::internal_key::append_internal_key(
        &mut ks.new_key,
        user_key,
        seq,
        ValueKind::ExpiringPointer,
    );
    ks.new_value.clear();
    crate::expiry::encode_into(
        &mut ks.new_value,
        ValueKind::Pointer,
        Some(expire_at),
        &ptr.encode(),
    );
    o.emit(&ks.new_key, &ks.new_value, Some(ptr))
}

/// Reads the value `ptr` names from the job's version, to write it again elsewhere.
fn read_for_relocation(spec: &JobSpec<'_>, ptr: &ValuePointer, user_key: &[u8]) -> Result<Vec<u8>> {
    let old = spec.version.blobs.get(&ptr.file).ok_or_else(|| {
        Error::corruption(
            spec.dir,
            format!("pointer to missing value file {}", ptr.file),
        )
    })?;
    old.read(ptr, user_key, IoCause::GcRead)
}

/// Keeps or drops one entry (newest versions of a key first) and writes what is kept.
/// `known` is [`logged_value`] if the caller looked it up (`value` is then empty).
fn process(
    spec: &JobSpec<'_>,
    o: &mut Outputs,
    ks: &mut KeyState,
    ikey: &[u8],
    value: &[u8],
    known: Option<(ValuePointer, usize)>,
) -> Result<()> {
    let p = parse_internal_key(ikey)
        .ok_or_else(|| Error::corruption(spec.dir, "malformed internal key in job input"))?;
    o.out.entries_in += 1;
    let first_of_key = !ks.have_key || p.user_key != ks.cur_key.as_slice();
    if first_of_key {
        // Cut the output between user keys only.
        if spec.split_outputs
            && o.table
                .as_ref()
                .is_some_and(|t| t.0.estimated_size() >= spec.opts.tree.target_file_size)
        {
            o.finish_table()?;
        }
        ks.cur_key.clear();
        ks.cur_key.extend_from_slice(p.user_key);
        ks.have_key = true;
        ks.last_seq = None;
    }
    let s = crate::expiry::split(p.kind, value).ok_or_else(|| {
        Error::corruption(spec.dir, "expiring entry shorter than its expiry time")
    })?;
    // An expired entry is a deletion to every reader, whatever its snapshot (expiry is
    // judged by the clock, not the sequence number): it is written as one, so that it
    // keeps hiding older versions below the output (RocksDB's compaction filter turns a
    // removed entry into a deletion marker for the same reason), and dropped where a
    // tombstone would be. Its value, if separated, is garbage now.
    let expired = s.expired(o.now_ms);
    let shadowed = ks.last_seq.is_some_and(|s| s <= spec.smallest_snapshot);
    let dead_tombstone = (p.kind == ValueKind::Deletion || expired)
        && spec.drop_tombstones
        && p.seq <= spec.smallest_snapshot;
    ks.last_seq = Some(p.seq);
    let (logged, len) = match (known, p.kind, spec.logged) {
        (Some((ptr, len)), ..) => (Some(ptr), len),
        (None, ValueKind::Value | ValueKind::ExpiringValue, Some(f)) => (f(p.seq), value.len()),
        _ => (None, value.len()),
    };
    if shadowed || dead_tombstone || expired {
        if s.kind == ValueKind::Pointer {
            o.out
                .dropped
                .push(ValuePointer::decode(spec.dir, s.payload)?.0);
        }
        o.out.dropped.extend(logged);
        if expired {
            o.out.expired += 1;
        }
        if expired && !shadowed && !dead_tombstone {
            ks.new_key.clear();
            crate::internal_key::append_internal_key(
                &mut ks.new_key,
                p.user_key,
                p.seq,
                ValueKind::Deletion,
            );
            return o.emit(&ks.new_key, &[], None);
        }
        return Ok(());
    }
    if p.kind.expires() {
        return process_expiring(spec, o, ks, p.user_key, p.seq, s, logged);
    }
    match p.kind {
        ValueKind::Value if spec.separate_values && len >= spec.opts.vlog.min_blob_size => {
            let ptr = match logged {
                Some(ptr) => ptr,
                None => {
                    let class = match spec.lifetime {
                        Some(h) => h.place(p.user_key, p.seq, ks.previous.as_ref()),
                        None => 0,
                    };
                    o.write_value(class, p.user_key, value, IoCause::ValueLog)?
                }
            };
            ks.new_value.clear();
            ptr.encode_into(&mut ks.new_value);
            if let Some(h) = spec.lifetime {
                let mut rec = h.fresh_features(len);
                rec.set_pending_link(h.links_features());
                rec.encode_into(&mut ks.new_value);
            }
            ks.new_key.clear();
            crate::internal_key::append_internal_key(
                &mut ks.new_key,
                p.user_key,
                p.seq,
                ValueKind::Pointer,
            );
            o.emit(&ks.new_key, &ks.new_value, Some(ptr))
        }
        ValueKind::Pointer => {
            let (stored, meta) = ValuePointer::decode(spec.dir, value)?;
            // A pointer into a collected file is rewritten to where the index maps say the
            // record lives now (paper 000, sec. 4.5: lazy pointer update).
            let mut ptr = match spec.version.resolve(&stored) {
                Some(r) if r != stored => {
                    o.out.lazy_rewrites += 1;
                    r
                }
                _ => stored,
            };
            if spec.relocate.is_some_and(|f| f(&ptr)) {
                let v = read_for_relocation(spec, &ptr, p.user_key)?;
                let np = o.write_value(0, p.user_key, &v, IoCause::GcWrite)?;
                o.out.relocated_bytes += np.size as u64;
                o.out.dropped.push(ptr);
                ptr = np;
            }
            if ptr == stored {
                return o.emit(ikey, value, Some(ptr));
            }
            ks.new_value.clear();
            ptr.encode_into(&mut ks.new_value);
            ks.new_value.extend_from_slice(meta);
            o.emit(ikey, &ks.new_value, Some(ptr))
        }
        _ => o.emit(ikey, value, None),
    }
}
