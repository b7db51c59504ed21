//! `halflife repair`: rebuilds a manifest from the files that are intact (RocksDB's
//! `RepairDB`), for a database whose manifest or CURRENT is damaged or lost.
//!
//! 1. Value files are scanned record by record. A file whose header is damaged but whose
//!    records are intact gets its header rewritten (the original is kept in `lost/`); a file
//!    with no intact record is moved into `lost/`. Index maps that load (checksum, target
//!    number) are kept, the others moved aside.
//! 2. Every table is read whole. An intact table is an input as it is; a damaged one gives
//!    the entries before its first damaged block (the rest is lost and reported).
//! 3. Every WAL is replayed, skipping damaged records.
//! 4. All of it is merged into one sorted run at the bottom level, keeping the newest
//!    version of each key (sequence numbers are kept, so the merge is order-independent),
//!    pointers rewritten through the index maps as compaction does.
//! 5. Each value file's garbage is recounted against the new tree; a new manifest holds the
//!    whole state, and CURRENT is switched to it atomically.
//! 6. Only then are the files the new manifest supersedes (old tables, WALs, manifests)
//!    moved into `lost/repair-<time>/`. Repair deletes nothing; the operator removes
//!    `lost/` once `halflife check` is clean.
//!
//! A kill at any point is safe: before step 5 the old state is untouched (the new tables
//! are numbered above every old file and are simply inputs of the next repair); after it,
//! the next open sweeps what step 6 did not move.
//!
//! A record of a value file that is itself damaged cannot be recovered: the key that points
//! at it keeps its pointer, and reading it reports the corruption (an honest error, never an
//! older value); the report counts such keys.

use crate::check::{walk_tree, CheckReport};
use crate::compaction::{self, JobSpec};
use crate::db::recovery::{lock_dir, move_to_lost};
use crate::error::{Error, Result};
use crate::filename::{
    self, file_number_of, manifest_name, value_file_orig_name, wal_file_name, FileKind,
};
use crate::io::{read_all, FileStorage, IoCause, Storage};
use crate::lifetime::GbmModel;
use crate::memtable::Memtable;
use crate::options::{Options, WalRecoveryMode};
use crate::sst::{InternalIterator, MergingIterator, Table, VecIterator};
use crate::version::set::write_current;
use crate::version::{Version, VersionEdit};
use crate::vlog::file::{check_header, file_header, BlobMeta, FILE_HEADER};
use crate::vlog::{IndexMap, ValueFileReader};
use crate::wal::{LogReader, LogWriter, ReadOutcome};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a repair recovered and what it could not.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RepairReport {
    /// Tables read whole.
    pub tables_intact: u64,
    /// Damaged tables: (file, entries recovered before the damage, the damage).
    pub tables_damaged: Vec<(PathBuf, u64, String)>,
    pub wals_replayed: u64,
    pub wal_batches: u64,
    /// Damaged WAL records skipped: (file, what).
    pub wal_damage: Vec<(PathBuf, String)>,
    pub value_files: u64,
    /// Value files with damage: (file, intact records kept, the damage).
    pub value_files_damaged: Vec<(PathBuf, u64, String)>,
    pub index_maps: u64,
    /// Entries and tables of the rebuilt tree.
    pub entries: u64,
    pub tables_written: u64,
    pub last_sequence: u64,
    /// Pointers in the rebuilt tree whose value record is lost or damaged (reads of those
    /// keys report the corruption).
    pub keys_with_lost_values: u64,
    /// Files moved aside (damaged, or superseded by the new manifest).
    pub moved_to_lost: Vec<PathBuf>,
    /// The new manifest.
    pub manifest: PathBuf,
}

/// Called with (files done, files to do).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

/// Repairs the database in `dir` (see the module docs). `opts` supplies the table format
/// and `num_levels`; the GC policy does not matter.
pub fn repair(dir: &Path, opts: &Options, progress: Progress<'_>) -> Result<RepairReport> {
    if !dir.is_dir() {
        return Err(Error::NotFound(dir.to_path_buf()));
    }
    let _lock = lock_dir(dir)?;
    let storage: Arc<dyn Storage> = opts
        .storage
        .clone()
        .unwrap_or_else(|| Arc::new(FileStorage::new()));
    let mut rep = RepairReport::default();
    let files: Vec<PathBuf> = storage
        .list(dir)?
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    let todo = files.len() as u64 + 2;
    let mut done = 0u64;
    let mut tick = || {
        done += 1;
        progress(done, todo);
    };
    let highest = files
        .iter()
        .filter_map(|p| file_number_of(p))
        .max()
        .unwrap_or(1);
    let next = AtomicU64::new(highest + 1);
    let of = |kind: FileKind| -> Vec<(u64, PathBuf)> {
        let mut v: Vec<_> = files
            .iter()
            .filter_map(|p| filename::number_of(p, kind).map(|n| (n, p.clone())))
            .collect();
        v.sort();
        v
    };
    let lose = |p: &Path, rep: &mut RepairReport| -> Result<()> {
        rep.moved_to_lost
            .push(move_to_lost(dir, &storage, p, "repair")?);
        Ok(())
    };

    // A CURRENT replacement a killed run never finished: out of the way of this run's.
    if let Some(tmp) = files
        .iter()
        .find(|p| matches!(filename::parse(p), Some((FileKind::CurrentTmp, _))))
    {
        lose(tmp, &mut rep)?;
    }

    // 1. Value files and index maps.
    let mut blobs = Vec::new();
    let mut record_offsets: HashMap<u64, HashMap<u64, u32>> = HashMap::new();
    for (n, p) in of(FileKind::ValueFile) {
        tick();
        match scan_value_file(&storage, &p, n)? {
            Scan::Intact(meta, offsets) => {
                blobs.push(meta);
                record_offsets.insert(n, offsets);
            }
            Scan::Damaged(meta, offsets, why) => {
                rep.value_files_damaged
                    .push((p.clone(), meta.entries, why.clone()));
                if meta.entries == 0 {
                    lose(&p, &mut rep)?;
                    continue;
                }
                if why.starts_with("header") {
                    // Keep the original, then give the working copy a correct header.
                    let copy = value_file_orig_name(dir, n);
                    std::fs::copy(&p, &copy).map_err(|e| Error::io(&copy, e))?;
                    lose(&copy, &mut rep)?;
                    rewrite_header(&p, n)?;
                }
                blobs.push(meta);
                record_offsets.insert(n, offsets);
            }
        }
        rep.value_files += 1;
    }
    let mut maps = HashMap::new();
    for (n, p) in of(FileKind::IndexMap) {
        tick();
        match IndexMap::load(dir, &storage, n) {
            // Kept even if its target was collected since: a pointer may resolve through
            // several generations of maps.
            Ok(m) => {
                maps.insert(n, Arc::new(m));
            }
            _ => lose(&p, &mut rep)?,
        }
    }
    rep.index_maps = maps.len() as u64;
    let values = Version::empty(opts.tree.num_levels).apply_with_maps(
        &VersionEdit {
            added_blobs: blobs.clone(),
            added_maps: maps
                .values()
                .map(|m| (m.target(), m.sources().to_vec()))
                .collect(),
            ..VersionEdit::default()
        },
        dir,
        &storage,
        &None,
        &maps,
    );

    // 2-3. Tables and WALs, as merge inputs.
    let mut inputs: Vec<Box<dyn InternalIterator>> = Vec::new();
    let mut superseded = Vec::new();
    let mut last_seq = 0u64;
    for (n, p) in of(FileKind::Table) {
        tick();
        match read_table(&storage, &p, n) {
            Ok((t, seq)) => {
                rep.tables_intact += 1;
                last_seq = last_seq.max(seq);
                inputs.push(Box::new(t.iter(IoCause::Compaction)));
                superseded.push(p);
            }
            Err((entries, why)) => {
                rep.tables_damaged
                    .push((p.clone(), entries.len() as u64, why));
                for (k, _) in &entries {
                    if let Some(pk) = crate::internal_key::parse_internal_key(k) {
                        last_seq = last_seq.max(pk.seq);
                    }
                }
                inputs.push(Box::new(VecIterator::new(entries)));
                lose(&p, &mut rep)?;
            }
        }
    }
    let mem = Arc::new(Memtable::new(0));
    for (_, p) in of(FileKind::Wal) {
        tick();
        let data = read_all(&*storage, &p, IoCause::Other)?;
        let outcome =
            LogReader::new(&p, data).for_each(WalRecoveryMode::SkipAnyCorruptedRecords, |rec| {
                let batch = crate::batch::WriteBatch::decode(&p, rec)?;
                let last = mem.insert_batch(&crate::vlog::value_wal::plain_pointers(&p, &batch));
                last_seq = last_seq.max(last);
                rep.wal_batches += 1;
                Ok(())
            });
        match outcome {
            Ok(ReadOutcome::Skipped { damages }) => rep.wal_damage.extend(
                damages
                    .into_iter()
                    .map(|d| (p.clone(), format!("offset {}: {}", d.offset, d.why))),
            ),
            Ok(_) => {}
            // A batch that does not decode although its checksum matched.
            Err(e) => rep.wal_damage.push((p.clone(), e.to_string())),
        }
        rep.wals_replayed += 1;
        superseded.push(p);
    }
    if !mem.is_empty() {
        inputs.insert(0, Box::new(mem.iter()));
    }

    // 4. One sorted run at the bottom level.
    let bottom = opts.tree.num_levels - 1;
    let new_number = || next.fetch_add(1, Ordering::Relaxed);
    let spec = JobSpec {
        dir,
        storage: &storage,
        opts,
        cause: IoCause::Compaction,
        output_level: bottom,
        smallest_snapshot: u64::MAX,
        // Kept: a repair cut short after CURRENT switched leaves the old tables beside the
        // new run for the next repair to merge again, where a dropped tombstone would let
        // an older value of the key come back. Compaction drops them later.
        drop_tombstones: false,
        separate_values: false,
        split_outputs: true,
        relocate: None,
        version: &values,
        lifetime: None,
        new_file_number: &new_number,
        warming: None,
        logged: None,
    };
    let mut merged = MergingIterator::new(inputs);
    let out = compaction::run(&spec, &mut merged)?;
    drop(merged);
    tick();
    rep.entries = out.entries_out;
    rep.tables_written = out.tables.len() as u64;
    rep.last_sequence = last_seq;

    // 5. Garbage recounted against the new tree, then the manifest.
    let mut edit = VersionEdit {
        added: out.tables.iter().map(|t| (bottom, t.clone())).collect(),
        ..VersionEdit::default()
    };
    let tree = values.apply_with_maps(&edit, dir, &storage, &None, &HashMap::new());
    let mut walk = CheckReport::default();
    let mut refs = HashMap::new();
    walk_tree(&tree, None, opts.clock.now_ms(), &mut walk, &mut refs);
    // Pointers that lead nowhere, or to a record that is not intact.
    rep.keys_with_lost_values = walk.problems.len() as u64;
    for b in &mut blobs {
        let offsets = &record_offsets[&b.number];
        let (mut live, mut live_bytes) = (0u64, 0u64);
        for (off, (size, _)) in refs.get(&b.number).into_iter().flatten() {
            if offsets.get(off) == Some(size) {
                live += 1;
                live_bytes += *size as u64;
            } else {
                rep.keys_with_lost_values += 1;
            }
        }
        let bytes: u64 = offsets.values().map(|&s| s as u64).sum();
        b.garbage_entries = b.entries - live;
        b.garbage_bytes = bytes - live_bytes;
    }
    drop((tree, values));
    if let Some(p) = files
        .iter()
        .find(|p| matches!(filename::parse(p), Some((FileKind::LifetimeModel, _))))
    {
        if GbmModel::load(p).is_err() {
            lose(p, &mut rep)?;
        }
    }
    let manifest_number = next.fetch_add(1, Ordering::Relaxed);
    let log_number = next.fetch_add(1, Ordering::Relaxed);
    edit.added_blobs = blobs;
    edit.added_maps = maps
        .values()
        .map(|m| (m.target(), m.sources().to_vec()))
        .collect();
    edit.log_number = Some(log_number);
    edit.next_file_number = Some(next.load(Ordering::Relaxed));
    edit.last_sequence = Some(last_seq);
    // Open requires the WAL the log number names: an empty one.
    let wal = wal_file_name(dir, log_number);
    storage.create(&wal, IoCause::Wal)?.sync()?;
    storage.sync_dir(dir)?;
    let manifest = dir.join(manifest_name(manifest_number));
    let mut w = LogWriter::new(storage.create(&manifest, IoCause::Manifest)?);
    w.add_record(&edit.encode())?;
    w.sync()?;
    drop(w);
    write_current(&*storage, dir, &manifest_name(manifest_number))?;
    rep.manifest = manifest;

    // 6. Move aside what the new manifest supersedes.
    for p in files.iter().filter(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(filename::is_manifest_like)
    }) {
        lose(p, &mut rep)?;
    }
    for p in superseded {
        lose(&p, &mut rep)?;
    }
    tick();
    Ok(rep)
}

enum Scan {
    Intact(BlobMeta, HashMap<u64, u32>),
    /// Records before the damage are intact (`entries` of the meta).
    Damaged(BlobMeta, HashMap<u64, u32>, String),
}

/// Reads a value file record by record: its metadata and the (offset, size) of each intact
/// record. A damaged header is reported as such if the records behind it are intact.
fn scan_value_file(storage: &Arc<dyn Storage>, p: &Path, n: u64) -> Result<Scan> {
    let mut data = read_all(&**storage, p, IoCause::Other)?;
    let size = data.len() as u64;
    let mut header_damage = None;
    if let Err(e) = check_header(p, &data, n) {
        header_damage = Some(format!("header: {e}"));
        if data.len() >= FILE_HEADER {
            data[..FILE_HEADER].copy_from_slice(&file_header(n));
        }
    }
    let mut meta = BlobMeta {
        number: n,
        size,
        entries: 0,
        garbage_bytes: 0,
        garbage_entries: 0,
        lifetime: None,
        expiry: crate::vlog::FileExpiry::None,
    };
    let mut offsets = HashMap::new();
    let mut reader = match ValueFileReader::new(p, data, n) {
        Ok(r) => r,
        Err(e) => return Ok(Scan::Damaged(meta, offsets, e.to_string())),
    };
    let mut damage = None;
    loop {
        match reader.next_record() {
            Ok(Some((ptr, _, _))) => {
                offsets.insert(ptr.offset, ptr.size);
                meta.entries += 1;
            }
            Ok(None) => break,
            Err(e) => {
                damage = Some(e.to_string());
                break;
            }
        }
    }
    Ok(match header_damage.or(damage) {
        None => Scan::Intact(meta, offsets),
        Some(why) => Scan::Damaged(meta, offsets, why),
    })
}

fn rewrite_header(p: &Path, n: u64) -> Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(p)
        .map_err(|e| Error::io(p, e))?;
    f.seek(SeekFrom::Start(0))
        .and_then(|_| f.write_all(&file_header(n)))
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(p, e))
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Reads a whole table: the open table and its largest sequence number, or the entries
/// before the first damage and what the damage is.
fn read_table(
    storage: &Arc<dyn Storage>,
    p: &Path,
    n: u64,
) -> std::result::Result<(Arc<Table>, u64), (Entries, String)> {
    let t = storage
        .open(p)
        .and_then(|f| Table::open(f, n, None))
        .map_err(|e| (Vec::new(), e.to_string()))?;
    let mut it = t.iter(IoCause::Compaction);
    let mut entries = Vec::new();
    let mut max_seq = 0;
    let mut damage: Option<String> = None;
    let mut step = it.seek_to_first();
    loop {
        match step {
            Ok(()) if it.valid() => {
                if let Some(k) = crate::internal_key::parse_internal_key(it.key()) {
                    max_seq = max_seq.max(k.seq);
                }
                entries.push((it.key().to_vec(), it.value().to_vec()));
                step = it.next();
            }
            Ok(()) => break,
            // Salvage the blocks after a damaged one; the first damage names the table's.
            Err(e) => {
                damage.get_or_insert_with(|| e.to_string());
                step = it.skip_damaged_block();
            }
        }
    }
    match damage {
        None if entries.len() as u64 == t.properties().num_entries => Ok((t, max_seq)),
        None => Err((
            entries,
            "fewer entries than the properties block counts".into(),
        )),
        Some(why) => Err((entries, why)),
    }
}
