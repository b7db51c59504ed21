//! The value log as the write-ahead log of separated values (`Options::wal.value_log_wal`;
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
//! memtable: it is handed to the memtable when cut at `blob_file_size` or when the
//! memtable is switched, and the memtable's flush syncs it and installs it in the same
//! manifest edit as its tables ([`SealedValueFile`]). A value file no edit names yet is
//! known only to the WAL records that point into it; open ([`Replay`]) reads the values
//! back through those pointers, verifying every record, and installs the files with the
//! replayed tables.
//!
//! The module knows the engine only through [`LogContext`] (where files go, their numbers,
//! the class of each value, [`ValuePlacement`]) and [`LoggedMemtable`] (the memtable a
//! write group or a replayed record goes to), so it can be read, and changed, on its own.

use super::file::{record_size, BlobMeta, FILE_HEADER};
use super::{BlobFile, FileExpiry, FileLifetime, ValueFileWriter, ValuePointer};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::value_file_name;
use crate::internal_key::{SeqNo, ValueKind};
use crate::io::{IoCause, Storage, SyncHandle};
use crate::options::{Compression, WalRecoveryMode};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the write path needs of the engine to log a group's values.
pub(crate) struct LogContext<'a> {
    pub dir: &'a Path,
    pub storage: &'a Arc<dyn Storage>,
    /// Values at least this long are logged (`Options::vlog.min_blob_size`).
    pub min_blob_size: usize,
    /// A file is cut once it reaches this size (`Options::vlog.blob_file_size`).
    pub blob_file_size: u64,
    pub compression: Compression,
    /// Where a value goes by its predicted death (the lifetime policies); `None`: class 0.
    pub placement: Option<ValuePlacement<'a>>,
    /// Allocates the number of a new file.
    pub new_file_number: &'a dyn Fn() -> u64,
    /// Set when a file is created: the next synced write syncs the directory.
    pub dir_unsynced: &'a AtomicBool,
    /// The engine's time, and `ValueLogOptions::expiry_window_divisor`: a value with an
    /// expiry goes to the file of its expiry window ([`crate::expiry::window`]), as flush
    /// would place it, so that it is written once and its file still dropped whole.
    pub now_ms: u64,
    pub expiry_window_divisor: u64,
}

/// What the value log is told of placement (by predicted death, `crate::gc::placement`):
/// each class has an active file of its own.
#[derive(Clone, Copy)]
pub(crate) struct ValuePlacement<'a> {
    /// The class of the value of `key` logged at `seq`.
    pub class: &'a dyn Fn(&[u8], SeqNo) -> usize,
    /// The lifetime a new file of `class` records, opened at `seq`.
    pub file_lifetime: &'a dyn Fn(usize, SeqNo) -> Option<FileLifetime>,
}

/// The memtable a write group or a replayed WAL record goes to, as the value log sees it.
pub(crate) trait LoggedMemtable {
    /// Adds one entry.
    fn add(&self, seq: SeqNo, kind: ValueKind, key: &[u8], value: &[u8]);
    /// Records where the values written at these sequence numbers were logged, so that
    /// flush writes their pointers instead of the values.
    fn log_values(&self, logged: Vec<(SeqNo, ValuePointer)>);
    /// Takes a value file the writer cut, holding values of this memtable; its flush syncs
    /// and installs it.
    fn add_value_file(&self, file: Arc<SealedValueFile>);
}

/// Follows the pointer of a logged value in a WAL record, telling it from the bare pointer
/// of a GC write-back (which may point into a file collected since).
const LOGGED: u8 = b'L';

/// The value files the write leader appends to, one per placement class (the lifetime
/// policies place a value by its predicted death when it is written, as flush does
/// without the value log as the WAL; the others use class 0).
#[derive(Default)]
pub(crate) struct ActiveValueFiles {
    by_class: Vec<Option<ActiveFile>>,
    /// The files of values with an expiry, by expiry window (at most
    /// [`crate::expiry::MAX_OPEN_WINDOWS`]).
    by_window: HashMap<(u64, u64), ActiveFile>,
    /// Files cut since the last synced group, perhaps not synced yet: a synced group (or
    /// `DB::sync_wal`) syncs them too, since its WAL sync makes durable the records that
    /// point into them.
    sealed: Vec<Arc<SealedValueFile>>,
}

/// A value file the write path cut (at its size, or when its memtable was switched), with
/// its records handed to the operating system but perhaps not synced. The sync is left
/// to the memtable's flush, which needs it before the manifest may name the file: synced
/// by the write leader, a cut held the whole write queue (and, at a memtable switch, the
/// state lock) while up to `blob_file_size` of dirty pages went to disk: 35-114 ms at
/// every memtable switch on a busy disk (docs/bench.md, "Tails"). Nothing reads the file before it is
/// installed (its memtable holds the values), so only durability depends on the sync,
/// and a synced write group syncs it first ([`ActiveValueFiles::flush`]).
pub(crate) struct SealedValueFile(Mutex<Sealed>);

enum Sealed {
    Unsynced {
        writer: ValueFileWriter,
        lifetime: Option<FileLifetime>,
        expiry: FileExpiry,
    },
    Synced(BlobMeta),
}

impl SealedValueFile {
    fn new(writer: ValueFileWriter, lifetime: Option<FileLifetime>, expiry: FileExpiry) -> Self {
        SealedValueFile(Mutex::new(Sealed::Unsynced {
            writer,
            lifetime,
            expiry,
        }))
    }

    /// Syncs the file unless that was done, and returns its metadata for the manifest
    /// (closing it: nothing is appended after the cut).
    pub fn sync(&self) -> Result<BlobMeta> {
        let mut s = self.0.lock();
        if let Sealed::Unsynced {
            writer,
            lifetime,
            expiry,
        } = &mut *s
        {
            writer.sync()?;
            *s = Sealed::Synced(BlobMeta {
                number: writer.number(),
                size: writer.len(),
                entries: writer.entries(),
                garbage_bytes: 0,
                garbage_entries: 0,
                lifetime: *lifetime,
                expiry: *expiry,
            });
        }
        match &*s {
            Sealed::Synced(meta) => Ok(meta.clone()),
            Sealed::Unsynced { .. } => unreachable!("synced above"),
        }
    }

    fn is_synced(&self) -> bool {
        matches!(*self.0.lock(), Sealed::Synced(_))
    }
}

struct ActiveFile {
    writer: ValueFileWriter,
    /// The horizon of the file's class, from when it was opened.
    lifetime: Option<FileLifetime>,
    /// An expiry window's file: the latest expiry of a value in it.
    latest_expiry: Option<u64>,
    /// Appended to since the last flush, and since the last sync: a synced group must
    /// sync what earlier unsynced groups appended too, since syncing the WAL makes their
    /// records durable as well.
    unflushed: bool,
    unsynced: bool,
}

impl ActiveFile {
    fn create(
        cx: &LogContext<'_>,
        lifetime: Option<FileLifetime>,
        latest_expiry: Option<u64>,
    ) -> Result<ActiveFile> {
        let n = (cx.new_file_number)();
        let (_, writer) =
            ValueFileWriter::create(&**cx.storage, cx.dir, n, IoCause::ValueLog, cx.compression)?;
        cx.dir_unsynced.store(true, Ordering::SeqCst);
        Ok(ActiveFile {
            writer,
            lifetime,
            latest_expiry,
            unflushed: true,
            unsynced: true,
        })
    }
}

impl ActiveValueFiles {
    /// Appends the large values of `batch` (sequence numbers assigned) and returns the
    /// batch the WAL gets: the same entries with pointers in their place, or `None` when
    /// the batch has no large value (the WAL gets it as it is). The memtable `mem` (the
    /// group's) learns where each value went.
    pub fn log_batch(
        &mut self,
        cx: &LogContext<'_>,
        mem: &dyn LoggedMemtable,
        batch: &WriteBatch,
    ) -> Result<Option<WriteBatch>> {
        // What a WAL entry is logged as: the value and, for one with an expiry, its time
        // and window (values with an expiry are logged only where they have a window).
        let target = |kind: ValueKind, value| {
            let s = crate::expiry::split(kind, value)?;
            if s.kind != ValueKind::Value || s.payload.len() < cx.min_blob_size {
                return None;
            }
            match s.expire_at {
                None => Some((s.payload, None)),
                Some(t) => crate::expiry::window(t, cx.now_ms, cx.expiry_window_divisor)
                    .map(|w| (s.payload, Some((t, w)))),
            }
        };
        if !batch.iter().any(|e| target(e.kind, e.value).is_some()) {
            return Ok(None);
        }
        let mut out = WriteBatch::new();
        let mut logged = Vec::new();
        for (seq, e) in (batch.first_seq()..).zip(batch.iter()) {
            let Some((value, expiry)) = target(e.kind, e.value) else {
                out.add(e.kind, e.key, e.value);
                continue;
            };
            let f = match expiry {
                None => {
                    let class = cx.placement.map_or(0, |p| (p.class)(e.key, seq));
                    self.class_file(cx, mem, class, seq)?
                }
                Some((t, window)) => self.window_file(cx, mem, window, t)?,
            };
            let ptr = f.writer.add(e.key, value)?;
            f.unflushed = true;
            f.unsynced = true;
            let mut v = Vec::new();
            let kind = crate::expiry::encode_into(
                &mut v,
                ValueKind::Pointer,
                expiry.map(|(t, _)| t),
                &ptr.encode(),
            );
            v.push(LOGGED);
            out.add(kind, e.key, &v);
            logged.push((seq, ptr));
        }
        out.set_first_seq(batch.first_seq());
        mem.log_values(logged);
        Ok(Some(out))
    }

    /// The active file of placement class `class`, cut first if full, opened if none.
    fn class_file(
        &mut self,
        cx: &LogContext<'_>,
        mem: &dyn LoggedMemtable,
        class: usize,
        seq: SeqNo,
    ) -> Result<&mut ActiveFile> {
        if self.by_class.len() <= class {
            self.by_class.resize_with(class + 1, || None);
        }
        let slot = &mut self.by_class[class];
        if slot
            .as_ref()
            .is_some_and(|f| f.writer.len() >= cx.blob_file_size)
        {
            self.sealed.retain(|s| !s.is_synced());
            seal(slot, mem, &mut self.sealed)?;
        }
        if slot.is_none() {
            let lifetime = cx.placement.and_then(|p| (p.file_lifetime)(class, seq));
            *slot = Some(ActiveFile::create(cx, lifetime, None)?);
        }
        Ok(slot.as_mut().expect("opened above"))
    }

    /// The active file of expiry window `window` for a value expiring at `t` (its latest
    /// expiry raised to `t`), cut first if full, opened if none; past
    /// [`crate::expiry::MAX_OPEN_WINDOWS`], the open window
    /// [`crate::expiry::spill_window`] picks, as flush places them.
    fn window_file(
        &mut self,
        cx: &LogContext<'_>,
        mem: &dyn LoggedMemtable,
        window: (u64, u64),
        t: u64,
    ) -> Result<&mut ActiveFile> {
        let window = crate::expiry::window_to_write(window, &self.by_window);
        if self
            .by_window
            .get(&window)
            .is_some_and(|f| f.writer.len() >= cx.blob_file_size)
        {
            self.sealed.retain(|s| !s.is_synced());
            let mut slot = self.by_window.remove(&window);
            seal(&mut slot, mem, &mut self.sealed)?;
        }
        let f = match self.by_window.entry(window) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(ActiveFile::create(cx, None, Some(t))?)
            }
        };
        f.latest_expiry = f.latest_expiry.max(Some(t));
        Ok(f)
    }

    /// Every open file.
    fn open_files(&mut self) -> impl Iterator<Item = &mut ActiveFile> {
        self.by_class
            .iter_mut()
            .flatten()
            .chain(self.by_window.values_mut())
    }

    /// Makes the appended records as durable as the WAL records that will point into them:
    /// handed to the operating system, or (`sync`) synced, with the files cut since the
    /// last synced group.
    pub fn flush(&mut self, sync: bool) -> Result<()> {
        if sync {
            for s in &self.sealed {
                s.sync()?;
            }
            self.sealed.clear();
        }
        for f in self.open_files() {
            if sync && f.unsynced {
                f.writer.sync()?;
                (f.unflushed, f.unsynced) = (false, false);
            } else if f.unflushed {
                f.writer.flush()?;
                f.unflushed = false;
            }
        }
        Ok(())
    }

    /// The first half of a sync that does not hold the value log's lock while the disk
    /// works (`DB::sync_wal` and GC's `make_durable`; a synced write group syncs under the
    /// lock, as its writers wait for it anyway): hands every appended record to the
    /// operating system and returns what makes them durable. Run it with
    /// [`PendingSync::run`] after the lock is released, then give it back to
    /// [`Self::synced`].
    pub fn start_sync(&mut self) -> Result<PendingSync> {
        let mut p = PendingSync {
            sealed: self.sealed.clone(),
            active: Vec::new(),
        };
        for f in self.open_files().filter(|f| f.unsynced) {
            match f.writer.sync_later()? {
                Some(h) => p.active.push((f.writer.number(), f.writer.len(), h)),
                // A storage that cannot sync apart from the writer: synced here.
                None => {
                    f.writer.sync()?;
                    f.unsynced = false;
                }
            }
            f.unflushed = false;
        }
        Ok(p)
    }

    /// Marks what `done` synced: an active file counts as synced if nothing was appended
    /// to it since [`Self::start_sync`] (later records stay unsynced for the next sync).
    pub fn synced(&mut self, done: PendingSync) {
        for (number, len, _) in done.active {
            if let Some(f) = self.open_files().find(|f| f.writer.number() == number) {
                if f.writer.len() == len {
                    f.unsynced = false;
                }
            }
        }
        self.sealed.retain(|s| !s.is_synced());
    }

    /// Hands every file to `mem` (being switched out), whose flush syncs and installs them.
    pub fn seal_all(&mut self, mem: &dyn LoggedMemtable) -> Result<()> {
        self.sealed.retain(|s| !s.is_synced());
        for slot in &mut self.by_class {
            seal(slot, mem, &mut self.sealed)?;
        }
        for (_, f) in self.by_window.drain() {
            seal(&mut Some(f), mem, &mut self.sealed)?;
        }
        Ok(())
    }
}

/// A sync of the value log taken under its lock and run outside it
/// ([`ActiveValueFiles::start_sync`]).
pub(crate) struct PendingSync {
    sealed: Vec<Arc<SealedValueFile>>,
    /// Per active file: its number, length when the sync was taken, and handle.
    active: Vec<(u64, u64, Box<dyn SyncHandle>)>,
}

impl PendingSync {
    /// Makes durable every record appended when the sync was taken.
    pub fn run(&self) -> Result<()> {
        for s in &self.sealed {
            s.sync()?;
        }
        for (_, _, h) in &self.active {
            h.sync()?;
        }
        Ok(())
    }
}

/// Cuts a file and hands it to `mem`, unsynced (see [`SealedValueFile`]); its records
/// reach the operating system now, as after any group. Called when the file reaches its
/// size and when `mem` is switched out.
fn seal(
    slot: &mut Option<ActiveFile>,
    mem: &dyn LoggedMemtable,
    sealed: &mut Vec<Arc<SealedValueFile>>,
) -> Result<()> {
    if let Some(mut f) = slot.take() {
        f.writer.flush()?;
        let expiry = f.latest_expiry.map_or(FileExpiry::None, FileExpiry::AllBy);
        let s = Arc::new(SealedValueFile::new(f.writer, f.lifetime, expiry));
        if f.unsynced {
            sealed.push(s.clone());
        }
        mem.add_value_file(s);
    }
    Ok(())
}

/// Charges the logged values a flush dropped (overwritten within the memtable) to the
/// memtable's value files, which the same edit installs; returns the pointers charged, and
/// the other dropped pointers, to be charged as usual.
pub(crate) fn charge_dropped(
    files: &mut [BlobMeta],
    dropped: Vec<ValuePointer>,
) -> (Vec<ValuePointer>, Vec<ValuePointer>) {
    let (mut charged, mut rest) = (Vec::new(), Vec::with_capacity(dropped.len()));
    for p in dropped {
        match files.iter_mut().find(|f| f.number == p.file) {
            Some(f) => {
                f.garbage_bytes += p.size as u64;
                f.garbage_entries += 1;
                charged.push(p);
            }
            None => rest.push(p),
        }
    }
    (charged, rest)
}

/// The pointer and expiry of a logged value, if a WAL record's entry is one (and not a
/// value, a tombstone, or the bare pointer of a GC write-back). Fails on a malformed
/// pointer.
pub(crate) fn logged(
    file: &Path,
    kind: ValueKind,
    value: &[u8],
) -> Result<Option<(ValuePointer, Option<u64>)>> {
    if !matches!(kind, ValueKind::Pointer | ValueKind::ExpiringPointer) {
        return Ok(None);
    }
    let s = crate::expiry::split(kind, value)
        .ok_or_else(|| Error::corruption(file, "expiring pointer shorter than its expiry time"))?;
    let (ptr, rest) = ValuePointer::decode(file, s.payload)?;
    Ok((rest == [LOGGED]).then_some((ptr, s.expire_at)))
}

/// The batch with the logged values' pointers as plain pointers: `repair` registers every
/// value file it finds, so the pointers resolve as any other.
pub(crate) fn plain_pointers(file: &Path, batch: &WriteBatch) -> WriteBatch {
    let mut out = WriteBatch::new();
    let mut v = Vec::new();
    for e in batch.iter() {
        match logged(file, e.kind, e.value) {
            Ok(Some((ptr, expire_at))) => {
                v.clear();
                let kind = crate::expiry::encode_into(
                    &mut v,
                    ValueKind::Pointer,
                    expire_at,
                    &ptr.encode(),
                );
                out.add(kind, e.key, &v)
            }
            _ => out.add(e.kind, e.key, e.value),
        }
    }
    out.set_first_seq(batch.first_seq());
    out
}

/// The entries of a WAL record as `check` reads them: a logged value (a pointer into a
/// value file no edit names yet, installed by the next open) as an empty value (with its
/// expiry), which hides the key's older versions without being resolved.
pub(crate) fn unresolved_logged(file: &Path, batch: &WriteBatch) -> WriteBatch {
    let mut out = WriteBatch::new();
    let mut v = Vec::new();
    for e in batch.iter() {
        match logged(file, e.kind, e.value) {
            Ok(Some((_, expire_at))) => {
                v.clear();
                let kind = crate::expiry::encode_into(&mut v, ValueKind::Value, expire_at, b"");
                out.add(kind, e.key, &v)
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
    storage: &'a Arc<dyn Storage>,
    files: BTreeMap<u64, ReplayedFile>,
}

/// A value file of logged values, as replay found it.
struct ReplayedFile {
    file: BlobFile,
    /// Its length on disk.
    len: u64,
    /// Intact records by offset (their sizes), from a scan that stopped at the first
    /// record that is not intact.
    records: HashMap<u64, u32>,
    /// Where the intact records end (0: not even the file header is intact, or the file
    /// is missing).
    valid_len: u64,
    /// Why the scan stopped before the end of the file, if it did.
    damage: Option<String>,
    /// What follows the intact records is what a power cut leaves of appends: a record
    /// cut short by the end of the file, zeros, or nothing at all (a file whose
    /// directory entry or header never reached the disk). Anything else is damage.
    torn: bool,
    /// Bytes and records some replayed pointer uses.
    used_bytes: u64,
    used_entries: u64,
    /// Some replayed pointer into it carries an expiry.
    expiring: bool,
}

impl<'a> Replay<'a> {
    pub fn new(dir: &'a Path, storage: &'a Arc<dyn Storage>) -> Self {
        Replay {
            dir,
            storage,
            files: BTreeMap::new(),
        }
    }

    /// Checks, before anything is written, that the logged values of a WAL record are
    /// intact records of their value files. `Ok(false)`: they never reached the disk
    /// whole (a torn append, a lost file), so the record's write was never synced (a
    /// synced write syncs its value files first) and the log ends before it; under
    /// point-in-time recovery a damaged record ends it too. Other damage is an error
    /// naming the value file and offset.
    pub fn check(&mut self, batch: &WriteBatch, mode: WalRecoveryMode) -> Result<bool> {
        for e in batch.iter() {
            let Some((ptr, _)) = logged(self.dir, e.kind, e.value)? else {
                continue;
            };
            let f = self.file(ptr.file)?;
            if f.records.get(&ptr.offset) == Some(&ptr.size) {
                continue;
            }
            let torn = f.torn && ptr.offset >= f.valid_len;
            return match mode {
                WalRecoveryMode::TolerateCorruptedTailRecords if torn => Ok(false),
                WalRecoveryMode::PointInTimeRecovery => Ok(false),
                _ => Err(not_intact(f, &ptr)),
            };
        }
        Ok(true)
    }

    /// Fails on a value file whose bytes after its intact records are damage rather than
    /// a torn append: open must not cut it off. Called before anything is written.
    pub fn check_tails(&self) -> Result<()> {
        for f in self.files.values() {
            if f.valid_len >= FILE_HEADER as u64 && f.valid_len < f.len && !f.torn {
                return Err(Error::corruption(
                    &f.file.path,
                    format!(
                        "value record at offset {} is damaged ({})",
                        f.valid_len,
                        f.damage.as_deref().unwrap_or("unreadable")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Inserts a replayed batch into `mem`: a logged value as the value its pointer points
    /// to, read back and verified, anything else (a GC write-back's pointer too) as it is.
    /// The batch was checked ([`Replay::check`]). Returns the last sequence number.
    pub fn insert(&mut self, batch: &WriteBatch, mem: &dyn LoggedMemtable) -> Result<SeqNo> {
        let mut seq = batch.first_seq();
        let mut logged_values = Vec::new();
        let mut v = Vec::new();
        for e in batch.iter() {
            if let Some((ptr, expire_at)) = logged(self.dir, e.kind, e.value)? {
                let value = self.read(&ptr, e.key)?;
                v.clear();
                let kind = crate::expiry::encode_into(&mut v, ValueKind::Value, expire_at, &value);
                mem.add(seq, kind, e.key, &v);
                if expire_at.is_some() {
                    self.file(ptr.file)?.expiring = true;
                }
                logged_values.push((seq, ptr));
                seq += 1;
                continue;
            }
            mem.add(seq, e.kind, e.key, e.value);
            seq += 1;
        }
        mem.log_values(logged_values);
        Ok(seq - 1)
    }

    fn file(&mut self, number: u64) -> Result<&mut ReplayedFile> {
        if !self.files.contains_key(&number) {
            let f = self.scan(number)?;
            self.files.insert(number, f);
        }
        Ok(self.files.get_mut(&number).expect("scanned above"))
    }

    fn read(&mut self, ptr: &ValuePointer, key: &[u8]) -> Result<Vec<u8>> {
        let f = self.file(ptr.file)?;
        if f.records.get(&ptr.offset) != Some(&ptr.size) {
            return Err(not_intact(f, ptr));
        }
        let v = f.file.read(ptr, key, IoCause::Other)?;
        f.used_bytes += ptr.size as u64;
        f.used_entries += 1;
        Ok(v)
    }

    /// Scans value file `number` for its intact records.
    fn scan(&self, number: u64) -> Result<ReplayedFile> {
        let path = value_file_name(self.dir, number);
        let exists = self.storage.exists(&path);
        let len = if exists {
            self.storage.file_size(&path)?
        } else {
            0
        };
        let meta = BlobMeta {
            number,
            size: len,
            entries: 0,
            garbage_bytes: 0,
            garbage_entries: 0,
            lifetime: None,
            expiry: crate::vlog::FileExpiry::None,
        };
        let file = BlobFile::new(&meta, self.dir, self.storage.clone());
        let mut records = HashMap::new();
        let mut valid_len = 0;
        let mut damage = None;
        match exists.then(|| file.scan(IoCause::Other)).transpose() {
            Ok(None) => damage = Some("missing".to_string()),
            Ok(Some(mut reader)) => {
                valid_len = FILE_HEADER as u64;
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
            }
            Err(e) => damage = Some(e.to_string()),
        }
        let torn = if !exists || valid_len == len {
            true
        } else {
            let rest = self.storage.open(&path)?.read_at(
                valid_len,
                (len - valid_len) as usize,
                IoCause::Other,
            )?;
            torn_append(&rest, valid_len == 0)
        };
        Ok(ReplayedFile {
            file,
            len,
            records,
            valid_len,
            damage,
            torn,
            used_bytes: 0,
            used_entries: 0,
            expiring: false,
        })
    }

    /// The value files the replayed records point into, for the edit that installs them
    /// with the replayed tables. Their records no replayed pointer uses (a write whose WAL
    /// record was never written, or lies past the point recovery stopped at) are garbage;
    /// a tail that is not a whole record (a value append cut by the crash, which no
    /// replayed WAL record points to) is cut off, and reported. A file with no intact
    /// header (lost to a power cut, or never written) is not installed.
    pub fn finish(self) -> Result<(Vec<BlobMeta>, Vec<CutTail>)> {
        let mut metas = Vec::new();
        let mut cut = Vec::new();
        for (number, f) in self.files {
            if f.valid_len < FILE_HEADER as u64 {
                continue;
            }
            if f.valid_len < f.len {
                self.storage.truncate(&f.file.path, f.valid_len)?;
                cut.push((f.file.path.clone(), f.valid_len, f.len - f.valid_len));
            }
            let record_bytes = f.valid_len - FILE_HEADER as u64;
            let entries = f.records.len() as u64;
            metas.push(BlobMeta {
                number,
                size: f.valid_len,
                entries,
                garbage_bytes: record_bytes - f.used_bytes,
                garbage_entries: entries - f.used_entries,
                lifetime: None,
                // Replay does not know the latest expiry of every record (a record whose
                // WAL record was lost is garbage but still in the file), so a file of
                // values with an expiry is never dropped by time; GC collects it.
                expiry: if f.expiring {
                    FileExpiry::Mixed
                } else {
                    FileExpiry::None
                },
            });
        }
        Ok((metas, cut))
    }
}

/// The error for a WAL record whose logged value is not an intact record.
fn not_intact(f: &ReplayedFile, ptr: &ValuePointer) -> Error {
    let why = match &f.damage {
        Some(why) if ptr.offset >= f.valid_len => format!(": {why}"),
        _ => String::new(),
    };
    Error::corruption(
        &f.file.path,
        format!(
            "a WAL record points to a value record at offset {} ({} bytes) that is not \
             intact{why}",
            ptr.offset, ptr.size
        ),
    )
}

/// Whether `rest`, the bytes after the last intact record (after nothing, if `header`:
/// the file header is not intact), is what an append cut short leaves: a record (or the
/// header) running past the end of the file, or into zeros that reach the end (a file
/// whose size reached the disk before its data). Anything else, a whole record with a bad
/// checksum, is damage, which open must not cut off. As in the WAL's reader, a record
/// whose last bytes were damaged *to zeros* reads as torn too.
fn torn_append(rest: &[u8], header: bool) -> bool {
    let written = rest.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    if header {
        return written <= FILE_HEADER;
    }
    written == 0 || record_size(&rest[..written]).is_none_or(|size| size > written)
}
