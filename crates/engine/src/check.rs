//! `halflife check`: verifies a closed database without changing a byte of it.
//!
//! Every file is read whole and every checksum verified: CURRENT, the manifest (replayed
//! strictly, as open does), each WAL, every block of every table (data, index, filter,
//! properties, footer), every record of every value file and its header, every index map,
//! the lifetime model. Then the tree is walked in key order: the newest version of every
//! key that holds a value pointer must resolve (through the index maps) to an intact
//! record of that key, and each value file's garbage as the manifest counts it must equal a
//! recount (its records minus those some pointer in the tree still references).
//!
//! The database is opened through [`ReadOnlyStorage`], so nothing is written, renamed or
//! deleted whatever the damage (RocksDB's `ldb checkconsistency` and
//! `sst_dump --command=verify` together).

use crate::error::{Error, Result};
use crate::filename::{
    self, file_number_of, index_map_file_name, manifest_name, value_file_name, wal_file_name,
    FileKind, CURRENT,
};
use crate::internal_key::{parse_internal_key, ValueKind};
use crate::io::{read_all, FileStorage, IoCause, ReadOnlyStorage, Storage};
use crate::lifetime::GbmModel;
use crate::options::{Options, WalRecoveryMode};
use crate::sst::{InternalIterator, Table};
use crate::version::set::VersionSet;
use crate::version::Version;
use crate::vlog::{IndexMap, ValueFileReader, ValuePointer};
use crate::wal::{LogReader, ReadOutcome};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What kind of problem: damage in what was read, or a file that could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// Bytes that were read and are wrong: a checksum, a missing file the manifest names, a
    /// pointer to nothing, a garbage count that does not add up (`halflife repair`).
    Damage,
    /// An I/O error reading a file: its contents are unknown (the device, permissions).
    Unreadable,
}

/// One thing found wrong.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    pub file: PathBuf,
    /// What is wrong, with the offset where one is known.
    pub what: String,
    pub kind: ProblemKind,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.what)
    }
}

/// What `check` read and found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CheckReport {
    pub problems: Vec<Problem>,
    /// Facts worth knowing that are not damage (a torn WAL tail a crash left, files no
    /// edit refers to that the next open will sweep).
    pub notes: Vec<String>,
    pub files: u64,
    pub bytes: u64,
    pub tables: u64,
    pub table_entries: u64,
    pub value_files: u64,
    pub value_records: u64,
    pub index_maps: u64,
    pub wals: u64,
    pub wal_batches: u64,
    /// Newest versions of keys whose value pointer was followed and verified.
    pub pointers_verified: u64,
    /// Whether the manifest could be replayed (else the tree checks were skipped).
    pub manifest_ok: bool,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// Whether any problem is damage (rather than only files that could not be read).
    pub fn has_damage(&self) -> bool {
        self.problems.iter().any(|p| p.kind == ProblemKind::Damage)
    }

    fn problem(&mut self, file: &Path, what: impl Into<String>) {
        self.problems.push(Problem {
            file: file.to_path_buf(),
            what: what.into(),
            kind: ProblemKind::Damage,
        });
    }

    fn error(&mut self, e: Error) {
        match e {
            Error::Corruption { file, detail } => self.problem(&file, detail),
            Error::Io { path, source } => self.problems.push(Problem {
                file: path,
                what: format!("cannot read: {source}"),
                kind: ProblemKind::Unreadable,
            }),
            other => self.problem(Path::new("?"), other.to_string()),
        }
    }
}

/// Called with (bytes checked so far, bytes to check) as the check goes.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

/// A referenced record: its size and a hash of the key that points at it.
pub(crate) type Refs = HashMap<u64, HashMap<u64, (u32, u64)>>;

/// Checks the database in `dir`; `opts` supplies `num_levels`. Problems are in the report;
/// an `Err` means the check itself could not run (the directory is unreadable).
pub fn check(dir: &Path, opts: &Options, progress: Progress<'_>) -> Result<CheckReport> {
    let storage: Arc<dyn Storage> = Arc::new(ReadOnlyStorage::new(Arc::new(FileStorage::new())));
    let mut r = CheckReport::default();
    let files: Vec<PathBuf> = storage
        .list(dir)?
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    let total: u64 = files.iter().filter_map(|p| storage.file_size(p).ok()).sum();
    let mut done = 0u64;
    let mut tick = |p: &Path, r: &mut CheckReport| {
        let n = storage.file_size(p).unwrap_or(0);
        done += n;
        r.files += 1;
        r.bytes += n;
        progress(done, total);
    };

    // The manifest and the tree it describes.
    let current = dir.join(CURRENT);
    let version = if !storage.exists(&current) {
        r.problem(&current, "missing: no manifest can be found");
        None
    } else {
        match VersionSet::recover(dir, storage.clone(), None, opts.tree.num_levels) {
            Ok(vs) => {
                r.manifest_ok = true;
                Some(vs)
            }
            Err(e) => {
                r.error(e);
                None
            }
        }
    };
    tick(&current, &mut r);

    let mut refs: Refs = HashMap::new();
    let mut live: HashSet<PathBuf> = HashSet::new();
    if let Some(vs) = &version {
        let v = vs.current();
        let manifest = dir.join(manifest_name(vs.manifest_number()));
        tick(&manifest, &mut r);
        live.insert(manifest);
        // (Replay already verified that every named file exists with its recorded size.)
        live.extend(v.levels.iter().flatten().map(|f| f.path().to_path_buf()));
        live.extend(v.blobs.values().map(|b| b.path.clone()));
        for m in v.maps.values() {
            live.insert(index_map_file_name(dir, m.target()));
        }
        let wal = wal_file_name(dir, vs.log_number);
        if !storage.exists(&wal) {
            r.problem(&wal, "missing: the manifest's log number names this WAL");
        }
        // The writes still in the WALs are newer than the tree: a GC write-back there
        // replaces a pointer into a file GC has since dropped.
        let logged = Arc::new(crate::memtable::Memtable::new(0));
        for p in files
            .iter()
            .filter(|p| filename::number_of(p, FileKind::Wal).is_some_and(|n| n >= vs.log_number))
        {
            let _ = read_all(&*storage, p, IoCause::Other).and_then(|data| {
                LogReader::new(p, data).for_each(
                    WalRecoveryMode::TolerateCorruptedTailRecords,
                    |rec| {
                        let batch = crate::batch::WriteBatch::decode(p, rec)?;
                        logged.insert_batch(&crate::vlog::value_wal::unresolved_logged(p, &batch));
                        Ok(())
                    },
                )
            });
        }
        walk_tree(&v, Some(&logged), opts.clock.now_ms(), &mut r, &mut refs);
    }

    // Every file on its own.
    let mut value_files = BTreeMap::new();
    for p in &files {
        // By extension, so that a misnamed `notes.sst` is examined, not passed over.
        let kind = filename::claimed_kind(p).or_else(|| filename::parse(p).map(|(k, _)| k));
        let number = file_number_of(p);
        match kind {
            Some(FileKind::Table) => check_table(&storage, p, number.unwrap_or(0), &mut r),
            Some(FileKind::ValueFile) => {
                if let Some(n) = number {
                    value_files.insert(n, p.clone());
                }
            }
            Some(FileKind::IndexMap) => {
                r.index_maps += 1;
                if let Some(n) = number {
                    if let Err(e) = IndexMap::load(dir, &storage, n) {
                        r.error(e);
                    }
                }
            }
            Some(FileKind::Wal) => check_wal(&storage, p, &mut r),
            Some(FileKind::LifetimeModel) => {
                if let Err(e) = GbmModel::load(p) {
                    r.error(e);
                }
            }
            _ => {}
        }
        if kind != Some(FileKind::ValueFile) {
            tick(p, &mut r);
        }
        let engine_file = matches!(
            kind,
            Some(FileKind::Table | FileKind::ValueFile | FileKind::IndexMap)
        );
        if engine_file && version.is_some() && !live.contains(p) {
            r.notes.push(format!(
                "{} is not referenced by the manifest (an abandoned job output, which the next open sweeps, or the values of unflushed writes when the value log is the WAL, which it installs)",
                p.display()
            ));
        }
    }
    let v = version.as_ref().map(|vs| vs.current());
    for (n, p) in value_files {
        check_value_file(
            p.as_path(),
            n,
            v.as_deref(),
            refs.remove(&n),
            &mut r,
            &storage,
        );
        tick(&p, &mut r);
    }
    // Pointers into value files that do not exist were reported by the tree walk.
    Ok(r)
}

fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// Walks every entry of every table (and of `logged`, the WALs' writes) in key order: the
/// newest version of each key that is a pointer must resolve (unless it expired at
/// `now_ms`: its value file may have been dropped whole, [`crate::expiry`]); every pointer
/// that resolves marks its record referenced.
pub(crate) fn walk_tree(
    v: &Version,
    logged: Option<&Arc<crate::memtable::Memtable>>,
    now_ms: u64,
    r: &mut CheckReport,
    refs: &mut Refs,
) {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    if let Some(m) = logged {
        children.push(Box::new(m.iter()));
    }
    for f in v.levels.iter().flatten() {
        match f.table() {
            Ok(t) => children.push(Box::new(t.iter(IoCause::Other))),
            // Reported again, with the block, by the per-file check.
            Err(e) => r.error(e),
        }
    }
    let mut it = crate::sst::MergingIterator::new(children);
    let mut last: Option<Vec<u8>> = None;
    let mut step = it.seek_to_first();
    while step.is_ok() && it.valid() {
        let Some(p) = parse_internal_key(it.key()) else {
            r.problem(Path::new("<tree>"), "malformed internal key");
            return;
        };
        let newest = last.as_deref() != Some(p.user_key);
        if newest {
            last = Some(p.user_key.to_vec());
        }
        let Some(s) = crate::expiry::split(p.kind, it.value()) else {
            r.problem(
                Path::new("<tree>"),
                "expiring entry shorter than its expiry time",
            );
            return;
        };
        let expired = s.expired(now_ms);
        if s.kind == ValueKind::Pointer {
            match ValuePointer::decode(Path::new("<tree>"), s.payload) {
                Err(e) => r.error(e),
                Ok((ptr, _)) => match v.resolve(&ptr) {
                    Some(at) => {
                        refs.entry(at.file)
                            .or_default()
                            .insert(at.offset, (at.size, key_hash(p.user_key)));
                        if newest {
                            r.pointers_verified += 1;
                        }
                    }
                    // An older version GC did not keep is garbage by design, and so is an
                    // expired value.
                    None if !newest || expired => {}
                    None => r.problem(
                        &value_file_name(Path::new(""), ptr.file),
                        format!(
                            "the newest value of key {:?} points at offset {} of a value file that neither exists nor is mapped",
                            String::from_utf8_lossy(p.user_key),
                            ptr.offset
                        ),
                    ),
                },
            }
        }
        step = it.next();
    }
    if let Err(e) = step {
        r.error(e);
    }
}

fn check_table(storage: &Arc<dyn Storage>, p: &Path, number: u64, r: &mut CheckReport) {
    r.tables += 1;
    let res = (|| -> Result<u64> {
        let t = Table::open(storage.open(p)?, number, None)?;
        let mut it = t.iter(IoCause::Other);
        it.seek_to_first()?;
        let mut n = 0u64;
        let mut prev: Option<Vec<u8>> = None;
        while it.valid() {
            if let Some(q) = &prev {
                if crate::internal_key::cmp_internal(q, it.key()) != std::cmp::Ordering::Less {
                    return Err(Error::corruption(
                        p,
                        format!("keys out of order at entry {n}"),
                    ));
                }
            }
            prev = Some(it.key().to_vec());
            n += 1;
            it.next()?;
        }
        if n != t.properties().num_entries {
            return Err(Error::corruption(
                p,
                format!(
                    "{n} entries, the properties block says {}",
                    t.properties().num_entries
                ),
            ));
        }
        Ok(n)
    })();
    match res {
        Ok(n) => r.table_entries += n,
        Err(e) => r.error(e),
    }
}

fn check_wal(storage: &Arc<dyn Storage>, p: &Path, r: &mut CheckReport) {
    r.wals += 1;
    let res = read_all(&**storage, p, IoCause::Other).and_then(|data| {
        let mut batches = 0;
        let o = LogReader::new(p, data).for_each(
            WalRecoveryMode::TolerateCorruptedTailRecords,
            |rec| {
                crate::batch::WriteBatch::decode(p, rec)?;
                batches += 1;
                Ok(())
            },
        )?;
        Ok((o, batches))
    });
    match res {
        Ok((o, batches)) => {
            r.wal_batches += batches;
            if let ReadOutcome::TornTail { valid_len } = o {
                r.notes.push(format!(
                    "{}: incomplete record at offset {valid_len} (a write cut by a crash, never acknowledged as synced); open discards it",
                    p.display()
                ));
            }
        }
        Err(e) => r.error(e),
    }
}

/// Verifies every record of a value file, that the records the tree references are intact
/// records of the right keys, and (for a live file) the manifest's garbage count.
fn check_value_file(
    p: &Path,
    number: u64,
    v: Option<&Version>,
    mut refs: Option<HashMap<u64, (u32, u64)>>,
    r: &mut CheckReport,
    storage: &Arc<dyn Storage>,
) {
    r.value_files += 1;
    let data = match read_all(&**storage, p, IoCause::Other) {
        Ok(d) => d,
        Err(e) => return r.error(e),
    };
    let mut reader = match ValueFileReader::new(p, data, number) {
        Ok(x) => x,
        Err(e) => return r.error(e),
    };
    let (mut records, mut bytes, mut live_records, mut live_bytes) = (0u64, 0u64, 0u64, 0u64);
    loop {
        match reader.next_record() {
            Ok(None) => break,
            Ok(Some((ptr, key, _))) => {
                records += 1;
                bytes += ptr.size as u64;
                if let Some(want) = refs.as_mut().and_then(|m| m.remove(&ptr.offset)) {
                    if want != (ptr.size, key_hash(key)) {
                        r.problem(
                            p,
                            format!("record at offset {} is not the one the tree points at (size or key differ)", ptr.offset),
                        );
                    }
                    live_records += 1;
                    live_bytes += ptr.size as u64;
                }
            }
            Err(e) => {
                r.error(e);
                return;
            }
        }
    }
    r.value_records += records;
    if let Some(rest) = refs.filter(|m| !m.is_empty()) {
        let first = rest.keys().min().copied().unwrap_or(0);
        r.problem(
            p,
            format!(
                "{} pointers of the tree name no record start (the first at offset {first})",
                rest.len()
            ),
        );
    }
    let Some(b) = v.and_then(|v| v.blobs.get(&number)) else {
        return;
    };
    let m = b.meta();
    if m.entries != records {
        r.problem(
            p,
            format!("{records} records, the manifest says {}", m.entries),
        );
    } else if b.is_pending() {
        r.notes.push(format!(
            "{}: GC output whose pointers are not settled yet; its garbage is recounted at open",
            p.display()
        ));
    } else if (m.garbage_entries, m.garbage_bytes) != (records - live_records, bytes - live_bytes) {
        r.problem(
            p,
            format!(
                "garbage counted as {} records / {} bytes, recount finds {} / {}",
                m.garbage_entries,
                m.garbage_bytes,
                records - live_records,
                bytes - live_bytes
            ),
        );
    }
}
