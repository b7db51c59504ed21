//! The typed key-value layer between commands and the engine ([`crate::record`] has the
//! layout): expiry-aware reads of metadata records, collection sub-key scans, per-key
//! locks that make read-modify-write commands (`INCR`, `HSET`, `LPUSH`, ...) atomic with
//! respect to every other write as they are in single-threaded Redis, the lock `EXEC`
//! takes to run a transaction alone, the `WATCH` registry, and the background sweep that
//! deletes expired keys and the sub-keys of deleted collections.
//!
//! Blind writes (a plain `SET`, `MSET`) take their keys' locks shared: they may run
//! together, since the engine orders them by sequence number and the last one wins, as it
//! would in Redis; they only wait for a read-modify-write of the same stripe, which takes
//! it exclusively. Holding an exclusive lock across a WAL sync would serialize every
//! pipeline that shares a stripe with another.

use crate::deferred::Hold;
use crate::record::{self, legacy, Head, Kind, Meta, RecordError};
use crate::repl_log::wire;
use crate::repl_log::Log;
use engine::internal_key::ValueKind;
use engine::{WriteBatch, WriteOptions, DB};
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Lock stripes: writes to keys in different stripes run (and group-commit) in parallel.
const STRIPES: usize = 1024;

/// Entries one migration batch rewrites.
const MIGRATION_BATCH: usize = 1000;

/// Members of an evicted collection deleted per batch ([`Store::evict`]).
pub const EVICT_CHUNK: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Engine(#[from] engine::Error),
    #[error(transparent)]
    Record(#[from] RecordError),
    /// Applying a transaction's held writes failed before its end ([`crate::deferred`]).
    #[error("a transaction's writes were not applied: {0}")]
    Deferred(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A page of `SCAN`: the live keys (user keys) among the metadata records examined, with
/// their type and expiry, in key order; and the last user key examined if the scan did not
/// reach the end (where the next page starts).
pub type Page = (Vec<(Vec<u8>, Head)>, Option<Vec<u8>>);

/// Who watches which key (`WATCH`), and which watchers saw a watched key change.
#[derive(Default)]
struct Watches {
    by_key: HashMap<Vec<u8>, HashSet<u64>>,
    by_client: HashMap<u64, Vec<Vec<u8>>>,
    dirty: HashSet<u64>,
}

/// What one migration batch has done so far.
#[derive(Default)]
struct Moved {
    moved: HashSet<Vec<u8>>,
    written: HashSet<Vec<u8>>,
}

pub struct Store {
    /// Replaced whole when a replica installs a full sync ([`Store::swap`]); every user
    /// of it holds [`Store::command_lock`], which the swap takes exclusively.
    db: RwLock<Option<Arc<DB>>>,
    /// The replication log, and the lock that orders writes: see [`Store::apply`].
    log: RwLock<Log>,
    /// A replica: expired keys are not deleted here (the primary's deletions arrive in
    /// the stream), so that its records stay the primary's.
    replica: AtomicBool,
    stripes: Box<[RwLock<()>]>,
    /// Every command holds this shared; `EXEC` holds it exclusively, so a transaction's
    /// commands run with no other client's command in between.
    exec: RwLock<()>,
    /// The last collection version handed out.
    last_version: AtomicU64,
    watches: Mutex<Watches>,
    /// Keys in `watches` (a write checks the registry only when some key is watched).
    watched: AtomicUsize,
    /// The engine's last sequence number when the database was opened, before any write:
    /// what a restarted primary recovered ([`crate::repl_log::history`]).
    recovered_seq: u64,
    /// Strings tracked for their `expired` event while that class of keyspace events is on.
    pub expiries: crate::notify::Expiries,
    /// Keys this store deleted because they expired, not yet announced: the dispatch and
    /// the sweep take them ([`Store::take_expired`]) and publish their `expired` events.
    expired: Mutex<Vec<(u8, Vec<u8>)>>,
    /// Whether `expired` holds anything (checked after every command).
    any_expired: AtomicBool,
    /// Bumped when the function libraries in the database changed under the server's
    /// registry (a replicated batch wrote one, a full sync replaced the database): the
    /// registry loads them again ([`crate::script`]).
    functions_epoch: AtomicU64,
    /// The writes of the transaction or script running, held back until it ends
    /// ([`Store::defer`]).
    deferred: crate::deferred::Slot,
    /// When each key was last read or written, and how often ([`crate::access`]).
    pub access: crate::access::AccessTable,
    /// The estimate of the live bytes `maxmemory` bounds ([`crate::maxmemory`]).
    pub usage: crate::maxmemory::Usage,
}

/// A transaction's held writes ([`Store::defer`]); [`Deferral::finish`] applies them as one
/// engine batch. Dropped unfinished (a panic), it applies them too.
pub struct Deferral<'a> {
    store: &'a Store,
    done: bool,
}

impl Deferral<'_> {
    /// Ends the transaction; the outermost applies its writes (synced if any of its
    /// commands asked for a sync).
    pub fn finish(mut self) -> Result<()> {
        self.done = true;
        self.end()
    }

    fn end(&self) -> Result<()> {
        match self.store.deferred.end() {
            None => Ok(()),
            Some(Ok((wb, _))) if wb.is_empty() => Ok(()),
            Some(Ok((wb, sync))) => self.store.apply_now(wb, sync),
            Some(Err(e)) => Err(StoreError::Deferred(e)),
        }
    }
}

impl Drop for Deferral<'_> {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = self.end() {
                tracing::error!("a transaction's writes were not applied: {e}");
            }
        }
    }
}

/// Held while keys are written (shared) or read and rewritten (exclusive).
pub enum KeyLocks<'a> {
    Shared(#[allow(dead_code)] Vec<RwLockReadGuard<'a, ()>>),
    Exclusive(#[allow(dead_code)] Vec<RwLockWriteGuard<'a, ()>>),
    /// Held already, for the whole run of commands this one belongs to
    /// ([`crate::combine`]).
    Held,
}

/// A command's writes, applied atomically by [`Store::write`]; remembers which user keys
/// it changes so that their watchers see it, and what it does to each (for the access
/// table and the memory estimate, [`crate::access`], [`crate::maxmemory`]).
#[derive(Default)]
pub struct Batch {
    wb: WriteBatch,
    touched: Vec<Vec<u8>>,
    /// The metadata keys it writes as strings with an expiry, and when they expire (for
    /// their `expired` event, [`crate::notify::Expiries`]).
    expiring: Vec<(Vec<u8>, u64)>,
    /// What it does to each of `touched`.
    changes: Vec<Change>,
    /// Bytes of the sub-keys it puts, less those it deletes whose size it knows.
    sub_bytes: i64,
}

/// What a batch does to one metadata key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// Puts a record of this many bytes (key and value).
    Put(u32),
    /// Deletes it; the record's size if the writer knows it.
    Delete(Option<u32>),
    /// Changes the key's sub-keys only.
    Touch,
}

/// The size of a record for the memory estimate.
fn record_size(k: &[u8], v: &[u8]) -> u32 {
    (k.len() + v.len()).min(u32::MAX as usize) as u32
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    pub fn put_meta(&mut self, db: u8, key: &[u8], m: &Meta) {
        let k = record::meta_key(db, key);
        let raw = m.encode();
        if let Some(t) = put_record(&mut self.wb, &k, &raw) {
            self.expiring.push((k.clone(), t));
        }
        self.changes.push(Change::Put(record_size(&k, &raw)));
        self.touched.push(k);
    }

    pub fn del_meta(&mut self, db: u8, key: &[u8]) {
        self.del_meta_sized(db, key, None);
    }

    /// [`Batch::del_meta`] of a record of `size` bytes, if known.
    fn del_meta_sized(&mut self, db: u8, key: &[u8], size: Option<u32>) {
        let k = record::meta_key(db, key);
        self.wb.delete(&k);
        self.touched.push(k);
        self.changes.push(Change::Delete(size));
    }

    /// Tells the watchers of `key` that it changed, without rewriting its metadata: a
    /// command that only rewrites sub-keys of a collection whose metadata stays the same
    /// (an `HSET` or `ZADD` of existing members) saves a record and a memtable insert.
    pub fn touch_meta(&mut self, db: u8, key: &[u8]) {
        self.touched.push(record::meta_key(db, key));
        self.changes.push(Change::Touch);
    }

    /// A sub-key write (every command that writes one writes its key's metadata too, or
    /// [`Batch::touch_meta`]s it, which tells the key's watchers).
    pub fn put(&mut self, k: &[u8], v: &[u8]) {
        self.wb.put(k, v);
        self.sub_bytes += (k.len() + v.len()) as i64;
    }

    pub fn delete(&mut self, k: &[u8]) {
        self.wb.delete(k);
    }

    /// [`Batch::delete`] of a sub-key whose record is `size` bytes.
    fn delete_sized(&mut self, k: &[u8], size: usize) {
        self.wb.delete(k);
        self.sub_bytes -= size as i64;
    }

    pub fn is_empty(&self) -> bool {
        self.wb.is_empty()
    }

    /// The metadata keys it puts (a key it puts twice is listed twice).
    pub fn put_meta_keys(&self) -> impl Iterator<Item = &[u8]> {
        self.touched
            .iter()
            .zip(&self.changes)
            .filter(|(_, c)| matches!(c, Change::Put(_)))
            .map(|(k, _)| &k[..])
    }

    /// How many records the batch writes.
    pub fn len(&self) -> usize {
        self.wb.len()
    }

    /// Appends `other`'s records after this batch's (a later write of a key wins, as it
    /// would applied after it).
    pub fn append(&mut self, other: Batch) {
        self.wb.append(&other.wb);
        self.touched.extend(other.touched);
        self.expiring.extend(other.expiring);
        self.changes.extend(other.changes);
        self.sub_bytes += other.sub_bytes;
    }

    /// Drops every record of engine key `k` but the last (the batch is applied whole, so
    /// the others can never be read). A run of commands on one collection
    /// ([`crate::combine`]) rewrites its metadata record once per command; written once,
    /// the memtable and the WAL hold one version of it instead of one per command.
    pub fn keep_last_of(&mut self, k: &[u8]) {
        let (mut n, mut last) = (0, 0);
        for (i, e) in self.wb.iter().enumerate() {
            if e.key == k {
                (n, last) = (n + 1, i);
            }
        }
        if n < 2 {
            return;
        }
        let mut wb = WriteBatch::new();
        for (i, e) in self.wb.iter().enumerate() {
            if e.key == k && i != last {
                continue;
            }
            match (e.kind, e.expire_at()) {
                (ValueKind::Deletion, _) => wb.delete(e.key),
                (_, Some(t)) => wb.put_with_expiry(e.key, e.payload(), t),
                (_, None) => wb.put(e.key, e.payload()),
            }
        }
        self.wb = wb;
    }

    /// Each record as a read would see it once the batch is applied: the key and the
    /// value, or `None` for a deletion.
    pub fn records(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.wb.iter().map(|e| match e.kind {
            ValueKind::Deletion => (e.key, None),
            _ => (e.key, Some(e.payload())),
        })
    }
}

/// Adds a metadata record to `wb`, with the engine's expiry for a string that has one
/// ([`record::engine_expiry`]); the record's header keeps the expiry too, which is what the
/// server reads (and what databases written before the engine knew expiry hold).
/// Returns the engine's expiry it gave the record, if any.
fn put_record(wb: &mut WriteBatch, k: &[u8], raw: &[u8]) -> Option<u64> {
    let t = record::engine_expiry(raw);
    match t {
        Some(t) => wb.put_with_expiry(k, raw, t),
        None => wb.put(k, raw),
    }
    t
}

/// Eviction's sample of a database: keys and their headers ([`Store::sample`]).
pub type Sample = Vec<(Vec<u8>, Head)>;

/// Tombstones and expired records one scan of eviction's sample passes over at first
/// ([`Store::sample`]).
const SAMPLE_MAX_SKIPPED: usize = 256;

/// A key drawn between `lo` and `hi` (`lo <= hi`): their common prefix, a byte uniformly
/// between theirs at the first position they differ, then eight random bytes.
fn random_between(lo: &[u8], hi: &[u8]) -> Vec<u8> {
    use rand::Rng;
    let mut rng = rand::rng();
    let common = lo.iter().zip(hi).take_while(|(a, b)| a == b).count();
    let mut k = hi[..common].to_vec();
    let a = lo.get(common).copied().unwrap_or(0);
    let b = hi.get(common).copied().unwrap_or(0xff).max(a);
    k.push(rng.random_range(a..=b));
    k.extend((0..8).map(|_| rng.random::<u8>()));
    k
}

/// The metadata in the record `raw`, or `None` if it expired.
pub fn live_meta(raw: &[u8]) -> Result<Option<Meta>> {
    let m = Meta::decode(raw)?;
    Ok((!m.is_expired(record::now_ms())).then_some(m))
}

/// The stream's form of a batch's records (the body of `HLBATCH`, [`wire`]), but the
/// server's own records (only data is replicated: [`record::is_data_key`]).
pub fn stream_ops(wb: &WriteBatch) -> Vec<u8> {
    wire::encode_ops(
        wb.iter()
            .filter(|e| record::is_data_key(e.key))
            .map(|e| wire::Op {
                put: e.kind != ValueKind::Deletion,
                key: e.key,
                // The record without the engine's expiry: the replica derives it from the
                // record's header as the primary did ([`Store::apply_replicated`]).
                value: e.payload(),
            }),
    )
}

impl Store {
    /// Serves `db`, first rewriting records of the string-only layout into the typed one
    /// ([`record`]) if the database has not been converted yet.
    pub fn open(db: DB, backlog_bytes: usize) -> Result<Store> {
        let recovered_seq = db.latest_sequence_number();
        let s = Store {
            db: RwLock::new(Some(Arc::new(db))),
            log: RwLock::new(Log::new(backlog_bytes)),
            replica: AtomicBool::new(false),
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            exec: RwLock::new(()),
            last_version: AtomicU64::new(0),
            watches: Mutex::new(Watches::default()),
            watched: AtomicUsize::new(0),
            recovered_seq,
            expiries: Default::default(),
            expired: Default::default(),
            any_expired: AtomicBool::new(false),
            functions_epoch: AtomicU64::new(0),
            deferred: Default::default(),
            access: Default::default(),
            usage: Default::default(),
        };
        s.migrate()?;
        Ok(s)
    }

    /// The engine. Callers hold [`Store::command_lock`] (commands do) so that a replica's
    /// [`Store::swap`] never runs under them.
    pub fn db(&self) -> Arc<DB> {
        // Empty only inside `replace`, which holds the write lock all the while.
        self.db.read().clone().expect("the engine is in place")
    }

    /// The engine, for closing it; `None` while something else still holds it.
    pub fn into_db(self) -> Option<DB> {
        self.db.into_inner().and_then(Arc::into_inner)
    }

    /// Replaces the engine by what `f` makes of the current one (a replica installing a
    /// full sync closes it, swaps the directories, opens the new one). The caller holds
    /// [`Store::exec_lock`], so no command runs; a background job that still holds the
    /// engine (a WAL sync) is waited for, up to a minute.
    pub fn replace(&self, f: impl FnOnce(DB) -> DB) -> std::result::Result<(), String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let mut slot = self.db.write();
            let arc = slot.take().expect("the engine is in place");
            match Arc::try_unwrap(arc) {
                Ok(db) => {
                    *slot = Some(Arc::new(f(db)));
                    self.functions_epoch.fetch_add(1, Ordering::SeqCst);
                    return Ok(());
                }
                Err(arc) => {
                    *slot = Some(arc);
                    drop(slot);
                    if std::time::Instant::now() > deadline {
                        return Err("the database stayed in use for a minute".into());
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        }
    }

    /// The engine's last sequence number at open, before any write.
    pub fn recovered_seq(&self) -> u64 {
        self.recovered_seq
    }

    /// The replication log (INFO, PSYNC, WAIT read it; a change of role resets it).
    pub fn log(&self) -> RwLockReadGuard<'_, Log> {
        self.log.read()
    }

    pub fn log_mut(&self) -> RwLockWriteGuard<'_, Log> {
        self.log.write()
    }

    /// Marks the store a replica's (see [`Store::replica`]).
    pub fn set_replica(&self, on: bool) {
        self.replica.store(on, Ordering::SeqCst);
    }

    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::SeqCst)
    }

    /// Applies a batch of engine records; every write of the server goes through here.
    ///
    /// While the replication log is active, the batch is applied and appended to the log
    /// under the log's lock held exclusively: that lock is the point where writes are
    /// ordered, so the stream replicas apply is in the engine's order (two writes of one
    /// key cannot swap places). The WAL sync `appendfsync always` asks for runs after the
    /// lock is released, so that writers wait for one another's memtable inserts only,
    /// not for one another's syncs. While the log is inactive, writers hold the lock
    /// shared and write (and sync) as before; a full sync that activates the log waits
    /// for them.
    fn apply(&self, wb: WriteBatch, sync: bool) -> Result<()> {
        match self.deferred.hold(&wb, sync) {
            Hold::No => self.apply_now(wb, sync),
            Hold::Held => Ok(()),
            Hold::Full => self.settle_deferred(),
        }
    }

    /// Applies what the calling thread's transaction holds, if anything: before a write
    /// that cannot be held, and when it holds too much ([`crate::deferred`]).
    fn settle_deferred(&self) -> Result<()> {
        match self.deferred.settle() {
            Some((wb, sync)) => self.apply_now(wb, sync),
            None => Ok(()),
        }
    }

    /// Holds back the calling thread's writes until the returned guard's
    /// [`Deferral::finish`]: the commands of a transaction or a script run between, and
    /// their writes become one engine batch ([`crate::deferred`]). Nests.
    pub fn defer(&self) -> Deferral<'_> {
        self.deferred.begin();
        Deferral {
            store: self,
            done: false,
        }
    }

    /// The engine record `k` as the calling thread sees it: through its transaction's
    /// held writes, if any.
    pub fn get_raw(&self, k: &[u8]) -> Result<Option<Vec<u8>>> {
        match self
            .deferred
            .with(|o| o.get(k).map(|v| v.map(<[u8]>::to_vec)))
        {
            Some(Some(v)) => Ok(v),
            _ => Ok(self.db().get(k)?),
        }
    }

    /// Whether the engine record `k` exists as the calling thread sees it, without reading
    /// its value from the engine.
    pub fn contains(&self, k: &[u8]) -> Result<bool> {
        match self.deferred.with(|o| o.get(k).map(|v| v.is_some())) {
            Some(Some(held)) => Ok(held),
            _ => Ok(self.db().contains(k)?),
        }
    }

    /// The engine's records in a range as the calling thread sees them (its transaction's
    /// held writes merged in).
    fn scan_range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Result<impl Iterator<Item = engine::Result<(Vec<u8>, Vec<u8>)>>> {
        let held = self
            .deferred
            .with(|o| o.range(lower, upper))
            .unwrap_or_default();
        Ok(crate::deferred::merge(self.db().scan(lower, upper)?, held))
    }

    /// Writes `wb` to the engine now, and to the replication stream.
    fn apply_now(&self, wb: WriteBatch, sync: bool) -> Result<()> {
        let db = self.db();
        {
            let log = self.log.read();
            if !log.active() {
                db.write(wb, &WriteOptions { sync })?;
                return Ok(());
            }
        }
        // Encoded before the lock is taken, so that writers wait for one another's engine
        // writes only; the sequence number is known only under it.
        let mut entry = wire::batch_head(&stream_ops(&wb));
        let mut log = self.log.write();
        if !log.active() {
            db.write(wb, &WriteOptions { sync })?;
            return Ok(());
        }
        db.write(wb, &WriteOptions { sync: false })?;
        // Every write of data is ordered by this lock, so the last sequence number is this
        // batch's last, or past it by the engine's own writes (GC's), which hold no data:
        // a replica that applied this entry holds every write of data up to it.
        wire::push_arg(
            &mut entry,
            db.latest_sequence_number().to_string().as_bytes(),
        );
        log.append(&entry);
        drop(log);
        if sync {
            db.sync_wal()?;
        }
        Ok(())
    }

    /// Appends a command that changes no data to the replication stream (the primary's
    /// `REPLCONF GETACK`), if the log is active.
    pub fn log_command(&self, args: &[&[u8]]) {
        // The stream keeps the order: a transaction's writes before the command go first.
        if let Err(e) = self.settle_deferred() {
            self.deferred.failed(e.to_string());
        }
        let mut log = self.log.write();
        if log.active() {
            log.append(&wire::command(args));
        }
    }

    /// Checkpoints the database into `dir` for a full sync, with the writes ordered
    /// ([`Store::apply`]) held off meanwhile, so that the checkpoint holds exactly the
    /// stream before the returned offset; activates the log (the stream after the offset
    /// is kept from now on). Returns the replication id, the offset and the engine's
    /// sequence number that the checkpoint holds every write of data up to.
    pub fn checkpoint_at_offset(&self, dir: &Path) -> Result<(String, u64, u64)> {
        let mut log = self.log.write();
        log.activate();
        let db = self.db();
        let seq = db.latest_sequence_number();
        db.checkpoint(dir)?;
        Ok((log.replid().to_string(), log.offset(), seq))
    }

    /// The point a replica continuing from the WAL joins the stream at: activates the
    /// log and returns its offset and the engine's sequence number, taken together with
    /// writes held off, so that the stream from the offset holds exactly the writes of
    /// data after the sequence number.
    pub fn stream_point(&self) -> (u64, u64) {
        let mut log = self.log.write();
        log.activate();
        (log.offset(), self.db().latest_sequence_number())
    }

    /// Applies a batch that came from the primary's stream, as it was applied there
    /// (not logged: a replica serves no replicas), telling the watchers of the keys whose
    /// metadata it changes.
    pub fn apply_replicated(&self, wb: WriteBatch, sync: bool) -> Result<()> {
        // A sub-key written changes its collection even where the metadata was not
        // rewritten ([`Batch::touch_meta`]); sub-keys deleted alone are the sweep's, of
        // collections already gone.
        let mut touched: Vec<Vec<u8>> = wb
            .iter()
            .filter_map(|e| match record::split_sub_key(e.key) {
                Some((db, key, _)) if e.kind != ValueKind::Deletion => {
                    Some(record::meta_key(db, key))
                }
                Some(_) => None,
                None => record::split_meta_key(e.key).map(|_| e.key.to_vec()),
            })
            .collect();
        touched.dedup();
        // The stream carries records as the server wrote them; the engine's expiry of a
        // string is derived from its header, as on the primary.
        let mut with_expiry = WriteBatch::new();
        for e in wb.iter() {
            match e.kind {
                ValueKind::Deletion => with_expiry.delete(e.key),
                _ if record::split_meta_key(e.key).is_some() => {
                    put_record(&mut with_expiry, e.key, e.payload());
                }
                _ => with_expiry.put(e.key, e.payload()),
            }
        }
        let functions = wb.iter().any(|e| e.key.first() == Some(&record::FUNCTION));
        self.db().write(with_expiry, &WriteOptions { sync })?;
        if functions {
            self.functions_epoch.fetch_add(1, Ordering::SeqCst);
        }
        self.touch(&touched);
        Ok(())
    }

    /// See [`Store::functions_epoch`]'s field.
    pub fn functions_epoch(&self) -> u64 {
        self.functions_epoch.load(Ordering::SeqCst)
    }

    /// The function libraries' codes stored in the database.
    pub fn function_libraries(&self) -> Result<Vec<Vec<u8>>> {
        let prefix = [record::FUNCTION];
        let end = record::prefix_end(&prefix);
        let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        self.scan_range(Bound::Included(&prefix[..]), upper)?
            .map(|kv| Ok(kv?.1))
            .collect()
    }

    /// Converts legacy records (value tag 0 or 1 under the raw user key) into metadata
    /// records of database 0, in batches that each delete the old keys and write the new
    /// ones atomically, so that a crash mid-way resumes where it stopped: what is left to
    /// convert is exactly the entries that still decode as legacy records (metadata values
    /// start with [`record::FORMAT`], sub-keys do not exist before the conversion ends).
    /// Expired records are dropped. Finally writes the format marker.
    fn migrate(&self) -> Result<()> {
        let db = self.db();
        if db.get(record::MARKER_KEY)?.as_deref() == Some(record::MARKER_VALUE) {
            return Ok(());
        }
        let now = record::now_ms();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let lower = match &after {
                Some(k) => Bound::Excluded(k.as_slice()),
                None => Bound::Unbounded,
            };
            let page: Vec<(Vec<u8>, Vec<u8>)> = db
                .scan(lower, Bound::Unbounded)?
                .take(MIGRATION_BATCH)
                .collect::<std::result::Result<_, _>>()?;
            let Some(last) = page.last().map(|(k, _)| k.clone()) else {
                break;
            };
            let mut b = WriteBatch::new();
            // Keys this batch moved away, and keys it wrote.
            let mut done = Moved::default();
            for (k, raw) in page {
                if done.moved.contains(&k) || done.written.contains(&k) {
                    continue;
                }
                self.migrate_one(&mut b, &mut done, k, raw, now)?;
            }
            db.write(b, &WriteOptions { sync: true })?;
            after = Some(last);
        }
        db.put_opt(
            record::MARKER_KEY,
            record::MARKER_VALUE,
            &WriteOptions { sync: true },
        )?;
        Ok(())
    }

    /// Moves one legacy record to its metadata key. If that key holds another legacy
    /// record (a user key that starts with `M\0`), that one moves first, and so on.
    fn migrate_one(
        &self,
        b: &mut WriteBatch,
        done: &mut Moved,
        key: Vec<u8>,
        raw: Vec<u8>,
        now: u64,
    ) -> Result<()> {
        let Some((value, exp)) = legacy::decode(&raw) else {
            return Ok(());
        };
        let target = record::meta_key(0, &key);
        if !done.moved.contains(&target) && !done.written.contains(&target) {
            if let Some(next) = self.db().get(&target)? {
                if legacy::decode(&next).is_some() {
                    self.migrate_one(b, done, target.clone(), next, now)?;
                }
            }
        }
        b.delete(&key);
        done.moved.insert(key);
        if exp.is_none_or(|t| t > now) {
            put_record(b, &target, &Meta::string(value.to_vec(), exp).encode());
            done.written.insert(target);
        }
        Ok(())
    }

    fn stripe(db: u8, key: &[u8]) -> usize {
        ((xxhash_rust::xxh3::xxh3_64(key) ^ db as u64) % STRIPES as u64) as usize
    }

    /// The stripes of `keys`, sorted: locks are taken in this order so that two multi-key
    /// writers cannot deadlock.
    fn stripes_of<K: AsRef<[u8]>>(keys: &[(u8, K)]) -> Vec<usize> {
        let mut idx: Vec<usize> = keys
            .iter()
            .map(|(db, k)| Self::stripe(*db, k.as_ref()))
            .collect();
        idx.sort_unstable();
        idx.dedup();
        idx
    }

    /// Locks `keys` of `db` for a read-modify-write.
    pub fn lock<'a, K: AsRef<[u8]>>(&'a self, db: u8, keys: &[K]) -> KeyLocks<'a> {
        let pairs: Vec<(u8, &[u8])> = keys.iter().map(|k| (db, k.as_ref())).collect();
        self.lock_pairs(&pairs)
    }

    /// Locks keys of several databases (`MOVE`, `COPY ... DB`) for a read-modify-write.
    pub fn lock_pairs<'a>(&'a self, keys: &[(u8, &[u8])]) -> KeyLocks<'a> {
        KeyLocks::Exclusive(
            Self::stripes_of(keys)
                .into_iter()
                .map(|i| self.stripes[i].write())
                .collect(),
        )
    }

    /// Locks `keys` for a blind write.
    pub fn lock_shared<'a, K: AsRef<[u8]>>(&'a self, db: u8, keys: &[K]) -> KeyLocks<'a> {
        let pairs: Vec<(u8, &[u8])> = keys.iter().map(|k| (db, k.as_ref())).collect();
        KeyLocks::Shared(
            Self::stripes_of(&pairs)
                .into_iter()
                .map(|i| self.stripes[i].read())
                .collect(),
        )
    }

    /// Held by every command but `EXEC`.
    pub fn command_lock(&self) -> RwLockReadGuard<'_, ()> {
        self.exec.read()
    }

    /// [`Store::command_lock`], if it can be had within `d`.
    pub fn try_command_lock_for(&self, d: std::time::Duration) -> Option<RwLockReadGuard<'_, ()>> {
        self.exec.try_read_for(d)
    }

    /// [`Store::exec_lock`], if it can be had within `d`.
    pub fn try_exec_lock_for(&self, d: std::time::Duration) -> Option<RwLockWriteGuard<'_, ()>> {
        self.exec.try_write_for(d)
    }

    /// Held by `EXEC` while its queued commands run.
    pub fn exec_lock(&self) -> RwLockWriteGuard<'_, ()> {
        self.exec.write()
    }

    /// A version no collection has had: at least the clock in microseconds (so versions
    /// keep growing across restarts) and above every version handed out since the start.
    pub fn new_version(&self) -> u64 {
        let floor = record::now_us();
        let mut cur = self.last_version.load(Ordering::Relaxed);
        loop {
            let next = floor.max(cur + 1);
            match self.last_version.compare_exchange_weak(
                cur,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(seen) => cur = seen,
            }
        }
    }

    /// The live metadata of `key` in `db`, counted as an access to it ([`crate::access`]).
    /// An expired key reads as absent; it is deleted when `purge` is set (the caller must
    /// then not hold the key's lock).
    pub fn read(&self, db: u8, key: &[u8], purge: bool) -> Result<Option<Meta>> {
        self.read_opt(db, key, purge, true)
    }

    /// [`Store::read`] that does not count as an access (Redis's `LOOKUP_NOTOUCH`: `TTL`,
    /// `TYPE`, `EXISTS`, `OBJECT`).
    pub fn read_untouched(&self, db: u8, key: &[u8], purge: bool) -> Result<Option<Meta>> {
        self.read_opt(db, key, purge, false)
    }

    fn read_opt(&self, db: u8, key: &[u8], purge: bool, touch: bool) -> Result<Option<Meta>> {
        let mk = record::meta_key(db, key);
        let Some(raw) = self.get_raw(&mk)? else {
            // A string with an expiry the engine hides by itself: deleted (and announced)
            // here if it is tracked for its event.
            if purge && !self.is_replica() && self.expiries.take_if_due(&mk, record::now_ms()) {
                self.purge_hidden(&mk)?;
            }
            return Ok(None);
        };
        let live = live_meta(&raw)?;
        if live.is_none() && purge && !self.is_replica() {
            self.purge_expired(&mk)?;
        }
        if touch && live.is_some() {
            self.access.touch(&mk, Some(record_size(&mk, &raw)));
        }
        Ok(live)
    }

    /// Deletes the metadata key `mk` if it is (still) expired: a write in between may have
    /// revived it. Returns whether it deleted. A collection's sub-keys are left to the sweep.
    fn purge_expired(&self, mk: &[u8]) -> Result<bool> {
        let Some((db, key)) = record::split_meta_key(mk) else {
            return Ok(false);
        };
        let _g = self.lock(db, &[key]);
        if let Some(raw) = self.get_raw(mk)? {
            if Head::decode(&raw)?.is_expired(record::now_ms()) {
                let mut b = WriteBatch::new();
                b.delete(mk);
                self.apply(b, false)?;
                self.note_expired(db, key);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Deletes the metadata key `mk` of a string whose expiry passed and which the engine
    /// already reads as absent (the deletion keeps the engine's copy from reviving if it
    /// was dropped first), and notes it for its `expired` event.
    fn purge_hidden(&self, mk: &[u8]) -> Result<()> {
        let Some((db, key)) = record::split_meta_key(mk) else {
            return Ok(());
        };
        let _g = self.lock(db, &[key]);
        if self.get_raw(mk)?.is_none() {
            let mut b = WriteBatch::new();
            b.delete(mk);
            self.apply(b, false)?;
            self.note_expired(db, key);
        }
        Ok(())
    }

    fn note_expired(&self, db: u8, key: &[u8]) {
        self.expired.lock().push((db, key.to_vec()));
        self.any_expired.store(true, Ordering::Release);
    }

    /// Keys deleted because they expired since the last call, for their events.
    pub fn take_expired(&self) -> Vec<(u8, Vec<u8>)> {
        if !self.any_expired.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.expired.lock())
    }

    /// Deletes the tracked strings whose time has come (at most `limit`), for their
    /// events; how many.
    pub fn purge_due(&self, limit: usize) -> Result<u64> {
        if self.is_replica() {
            return Ok(0);
        }
        let due = self.expiries.take_due(record::now_ms(), limit);
        for mk in &due {
            self.purge_hidden(mk)?;
        }
        Ok(due.len() as u64)
    }

    /// One step of the background sweep: examines up to `limit` engine entries after
    /// `after`, deletes expired metadata records, and deletes sub-keys whose collection is
    /// gone or has another version (deleted, overwritten or expired collections: versions
    /// are never reused, so a stale sub-key can never become live again and is deleted
    /// without a lock). Returns where to continue (`None`: the end was reached, start over)
    /// and how many expired keys it deleted. Records that cannot be decoded are skipped
    /// (reads report them).
    pub fn sweep_expired(
        &self,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Option<Vec<u8>>, u64)> {
        let lower = match after {
            Some(k) => Bound::Excluded(k),
            None => Bound::Unbounded,
        };
        if self.is_replica() {
            return Ok((None, 0));
        }
        let engine = self.db();
        let now = record::now_ms();
        let (mut seen, mut purged) = (0, 0);
        let mut stale = WriteBatch::new();
        // The last collection looked up, and whether its sub-keys are live.
        let mut owner: Option<(u8, Vec<u8>, u64, bool)> = None;
        let mut next = None;
        for kv in engine.scan(lower, Bound::Unbounded)? {
            let (k, raw) = kv?;
            if record::split_meta_key(&k).is_some() {
                if Head::decode(&raw).is_ok_and(|h| h.is_expired(now)) && self.purge_expired(&k)? {
                    purged += 1;
                }
            } else if let Some((db, key, version)) = record::split_sub_key(&k) {
                let live = match &owner {
                    Some((d, o, v, live)) if *d == db && o == key && *v == version => *live,
                    _ => {
                        let live = engine
                            .get(&record::meta_key(db, key))?
                            .and_then(|raw| Meta::decode(&raw).ok())
                            .is_some_and(|m| m.kind != Kind::String && m.version == version);
                        owner = Some((db, key.to_vec(), version, live));
                        live
                    }
                };
                if !live {
                    stale.delete(&k);
                }
            }
            seen += 1;
            if seen == limit {
                next = Some(k);
                break;
            }
        }
        if !stale.is_empty() {
            self.apply(stale, false)?;
        }
        Ok((next, purged))
    }

    /// Applies `batch` atomically and tells the watchers of the keys it changed; returns
    /// those keys (the metadata keys the batch wrote).
    pub fn write(&self, batch: Batch, sync: bool) -> Result<Vec<Vec<u8>>> {
        if batch.wb.is_empty() {
            return Ok(Vec::new());
        }
        self.apply(batch.wb, sync)?;
        self.touch(&batch.touched);
        self.expiries.written(&batch.touched, &batch.expiring);
        self.accessed(&batch.touched, &batch.changes, batch.sub_bytes);
        Ok(batch.touched)
    }

    /// Tells the access table what a batch did to its keys, and counts the bytes it
    /// added for the memory estimate: a put adds its record less the
    /// record the table knew for the key; a deletion takes away the record's size if the
    /// writer or the table knows it.
    fn accessed(&self, keys: &[Vec<u8>], changes: &[Change], sub_bytes: i64) {
        let mut delta = sub_bytes;
        for (k, c) in keys.iter().zip(changes) {
            match *c {
                Change::Put(n) => {
                    delta += n as i64 - self.access.touch(k, Some(n)).unwrap_or(0) as i64;
                }
                Change::Delete(known) => {
                    let tracked = self.access.remove(k);
                    delta -= known.or(tracked).unwrap_or(0) as i64;
                }
                Change::Touch => {
                    self.access.touch(k, None);
                }
            }
        }
        self.usage.add(delta);
    }

    /// The user keys of `db`'s metadata records from `lower` on, each with its type and
    /// expiry, expired ones included, one at a time.
    ///
    /// What this reads: the engine's only iteration, [`DB::scan`], yields each entry's whole
    /// value, so a string's metadata record is read with its value in it (a large value
    /// kept in a value file is read from there); a collection's record is its small header
    /// (26 or 34 bytes) and none of its members (sub-keys live in another range). Only the
    /// header is decoded ([`Head`]): the value is not copied, and it is dropped as the walk
    /// passes it, so memory stays at one entry whatever the key space; the reads of string
    /// values remain. Skipping them needs an engine API that yields keys with the inline
    /// value or a handle on a separated one; see `docs/serve.md`.
    fn heads(
        &self,
        db: u8,
        after: Option<&[u8]>,
    ) -> Result<impl Iterator<Item = Result<(Vec<u8>, Head)>> + '_> {
        let lower = match after {
            Some(k) => Bound::Excluded(record::meta_key(db, k)),
            None => Bound::Included(record::meta_prefix(db)),
        };
        let upper = match record::prefix_end(&record::meta_prefix(db)) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        let range = (lower, upper);
        Ok(self
            .scan_range(
                range.0.as_ref().map(Vec::as_slice),
                range.1.as_ref().map(Vec::as_slice),
            )?
            .map(|kv| {
                let (mut k, raw) = kv?;
                let head = Head::decode(&raw)?;
                // The user key: the metadata key without its 2-byte prefix.
                k.drain(..record::META_KEY_OVERHEAD);
                Ok((k, head))
            }))
    }

    /// The live keys of `db` with their type and expiry, in key order, one at a time
    /// (`KEYS`, `DBSIZE`, `INFO`'s keyspace): see [`Store::heads`] for what is read.
    pub fn live_keys(&self, db: u8) -> Result<impl Iterator<Item = Result<(Vec<u8>, Head)>> + '_> {
        let now = record::now_ms();
        Ok(self.heads(db, None)?.filter(move |kv| match kv {
            Ok((_, h)) => !h.is_expired(now),
            Err(_) => true,
        }))
    }

    /// One page of `SCAN` in `db`: examines up to `limit` metadata records with user keys
    /// after `after` (from the start if `None`), expired ones included, so that a page
    /// costs at most `limit` entries even where every key has expired; it may then hold
    /// fewer keys than `limit`, or none, with the scan not done, as in Redis.
    pub fn scan(&self, db: u8, after: Option<&[u8]>, limit: usize) -> Result<Page> {
        let now = record::now_ms();
        let mut out = Vec::new();
        let mut last: Option<Vec<u8>> = None;
        for (seen, kv) in self.heads(db, after)?.enumerate() {
            let (k, head) = kv?;
            if seen == limit {
                // There is more: the next page starts after the last key examined.
                return Ok((out, last));
            }
            if !head.is_expired(now) {
                out.push((k.clone(), head));
            }
            last = Some(k);
        }
        Ok((out, None))
    }

    /// Up to `n` live keys of `db` with their headers, from a random point of its key
    /// space on (wrapping to its first key), looking at no more than `examine` records:
    /// eviction's sample ([`crate::cmd::evict`]). Only keys with an expiry if `volatile`.
    ///
    /// The point is drawn between the database's first and last keys (a forward and a
    /// reverse seek): their common prefix, then a byte drawn uniformly between theirs,
    /// then random bytes. Keys are not uniform in byte space, so keys after a sparse
    /// stretch are drawn more often than keys in a dense one; the sample is consecutive
    /// keys from there, as Redis's is consecutive buckets of its hash table.
    ///
    /// Each of its scans passes over at most [`SAMPLE_MAX_SKIPPED`] tombstones and expired
    /// records at first: deleted keys stay in the tree as tombstones until compaction drops
    /// them, and most samples need not step over many. One that finds no key within that
    /// bound is drawn again without it, so that a database with keys never answers none.
    /// (A bound alone does not hold: evictions leave runs of tombstones, and since a sample
    /// is the keys after a random point, the key after a long run is drawn in proportion to
    /// the run's length and evicted, so runs grow until compaction.)
    pub fn sample(&self, db: u8, n: usize, volatile: bool, examine: usize) -> Result<Sample> {
        match self.sample_within(db, n, volatile, examine, SAMPLE_MAX_SKIPPED)? {
            (out, true) if out.is_empty() => Ok(self.sample_within(db, n, volatile, examine, 0)?.0),
            (out, _) => Ok(out),
        }
    }

    /// [`Store::sample`] with its scans passing over `max_skipped` dead records at most (0:
    /// any number), and whether one of them was cut there.
    fn sample_within(
        &self,
        db: u8,
        n: usize,
        volatile: bool,
        examine: usize,
        max_skipped: usize,
    ) -> Result<(Sample, bool)> {
        let prefix = record::meta_prefix(db);
        let end = record::prefix_end(&prefix);
        let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let engine = self.db();
        let opts = engine::ReadOptions {
            max_skipped,
            ..engine::ReadOptions::without_readahead()
        };
        let lower = Bound::Included(prefix.as_slice());
        let mut cut = false;
        let mut edge = |dir| -> Result<Option<Vec<u8>>> {
            let mut it = engine.scan_dir(lower, upper, None, &opts, dir)?;
            let k = it.next().transpose()?.map(|(k, _)| k);
            cut |= it.cut_short();
            Ok(k)
        };
        let first = edge(engine::Direction::Forward)?;
        let last = edge(engine::Direction::Reverse)?;
        if first.is_none() && last.is_none() && !cut {
            return Ok((Vec::new(), false));
        }
        let lo = first.unwrap_or_else(|| prefix.clone());
        let hi = last.or_else(|| end.clone()).unwrap_or_else(|| lo.clone());
        let from = random_between(&lo, &hi.max(lo.clone()));
        let now = record::now_ms();
        let (mut out, mut seen) = (Vec::new(), 0);
        for (lo, hi) in [
            (Bound::Included(from.as_slice()), upper),
            (lower, Bound::Excluded(from.as_slice())),
        ] {
            let mut it = engine.scan_opt(lo, hi, None, &opts)?;
            for kv in it.by_ref() {
                let (k, raw) = kv?;
                seen += 1;
                if let Ok(h) = Head::decode(&raw) {
                    if !h.is_expired(now) && (!volatile || h.expire_at_ms.is_some()) {
                        out.push((k[record::META_KEY_OVERHEAD..].to_vec(), h));
                    }
                }
                if out.len() >= n || seen >= examine {
                    return Ok((out, cut));
                }
            }
            cut |= it.cut_short();
        }
        Ok((out, cut))
    }

    /// Deletes `key` of `db` for eviction ([`crate::cmd::evict`]) as `DEL` does, and its
    /// collection's members with it (`DEL` leaves them to the sweep; eviction deletes
    /// them at once, so that the bytes it freed are gone when the data set is measured):
    /// the metadata record and the first [`EVICT_CHUNK`] members in one batch, the rest
    /// (no longer reachable once the record is gone) in batches of that many. Returns the
    /// bytes freed, or `None` if the key is gone or expired, or has no expiry while
    /// `volatile` asks for one.
    pub fn evict(&self, db: u8, key: &[u8], volatile: bool, sync: bool) -> Result<Option<u64>> {
        let mk = record::meta_key(db, key);
        let _g = self.lock(db, &[key]);
        let Some(raw) = self.db().get(&mk)? else {
            return Ok(None);
        };
        let Some(m) = live_meta(&raw)? else {
            return Ok(None);
        };
        if volatile && m.expire_at_ms.is_none() {
            return Ok(None);
        }
        let size = record_size(&mk, &raw);
        let mut freed = size as u64;
        let mut b = Batch::new();
        b.del_meta_sized(db, key, Some(size));
        if m.kind != Kind::String {
            // Every tag's sub-keys of this version.
            let mut prefix = record::sub_prefix(db, key, m.version, 0);
            prefix.pop();
            let end = record::prefix_end(&prefix);
            let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let opts = engine::ReadOptions::without_readahead();
            let engine = self.db();
            for kv in engine.scan_opt(Bound::Included(prefix.as_slice()), upper, None, &opts)? {
                let (k, v) = kv?;
                b.delete_sized(&k, k.len() + v.len());
                freed += (k.len() + v.len()) as u64;
                if b.len() >= EVICT_CHUNK {
                    self.write(std::mem::take(&mut b), sync)?;
                }
            }
        }
        self.write(b, sync)?;
        Ok(Some(freed))
    }

    /// The entries (sub-key without `prefix`, value) whose keys start with `prefix`, from
    /// `from` (a suffix, inclusive) on, while `keep` says so. The value is handed over, so
    /// that a caller keeping it (a range's reply) does not copy it again.
    pub fn sub_range(
        &self,
        prefix: &[u8],
        from: Option<&[u8]>,
        mut keep: impl FnMut(&[u8], Vec<u8>) -> bool,
    ) -> Result<()> {
        let start = match from {
            Some(f) => [prefix, f].concat(),
            None => prefix.to_vec(),
        };
        let end = record::prefix_end(prefix);
        let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        for kv in self.scan_range(Bound::Included(start.as_slice()), upper)? {
            let (k, v) = kv?;
            if !keep(&k[prefix.len()..], v) {
                break;
            }
        }
        Ok(())
    }

    /// Deletes every key of `db` (every database if `None`), expired ones and sub-keys
    /// included, in batches. Not atomic with respect to concurrent writers: a key written
    /// during the flush may survive it.
    pub fn flush(&self, db: Option<u8>, sync: bool) -> Result<()> {
        let ranges: Vec<Vec<u8>> = match db {
            Some(d) => vec![vec![record::META, d], vec![record::SUB, d]],
            None => vec![vec![record::META], vec![record::SUB]],
        };
        self.touch_existing(db)?;
        // The flush reads the engine: what the transaction holds is applied first.
        self.settle_deferred()?;
        match db {
            Some(d) => self.access.remove_prefix(&record::meta_prefix(d)),
            None => self.access.remove_prefix(&[record::META]),
        }
        let mut deleted = false;
        for prefix in &ranges {
            let end = record::prefix_end(prefix);
            let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            // Each batch's scan starts after the last key deleted: from the prefix, it
            // would step again over every tombstone the batches before left.
            let mut after: Option<Vec<u8>> = None;
            loop {
                let lower = after
                    .as_deref()
                    .map_or(Bound::Included(prefix.as_slice()), Bound::Excluded);
                let mut b = WriteBatch::new();
                for kv in self.db().scan(lower, upper)?.take(1000) {
                    let k = kv?.0;
                    b.delete(&k);
                    after = Some(k);
                }
                if b.is_empty() {
                    break;
                }
                self.apply_now(b, sync)?;
                deleted = true;
            }
        }
        // The tombstones go at once: compacted away, they cost later scans of the range
        // (eviction's samples, SCAN, the expiry sweep) nothing, as Redis's emptied tables
        // cost nothing. The compaction reads what the flush deleted, as the flush did.
        if deleted {
            let db = self.db();
            for prefix in &ranges {
                db.compact_range(Some(prefix), record::prefix_end(prefix).as_deref())?;
            }
        }
        // What the flush freed is known only by measuring.
        if self.usage.measured() {
            self.usage.measure(&self.db())?;
        }
        Ok(())
    }

    /// Marks the watchers of the watched keys that exist in `db` (every database if
    /// `None`): what a flush of it changes. Watched keys that do not exist are untouched.
    fn touch_existing(&self, db: Option<u8>) -> Result<()> {
        if self.watched.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        let keys: Vec<Vec<u8>> = self.watches.lock().by_key.keys().cloned().collect();
        let mut hit = Vec::new();
        for mk in keys {
            let Some((d, key)) = record::split_meta_key(&mk) else {
                continue;
            };
            if db.is_none_or(|x| x == d) && self.read(d, key, false)?.is_some() {
                hit.push(mk);
            }
        }
        self.touch(&hit);
        Ok(())
    }

    /// `WATCH`: `client` is told (by [`Store::is_dirty`]) of changes to `key` in `db`.
    pub fn watch(&self, client: u64, db: u8, key: &[u8]) {
        let mut w = self.watches.lock();
        let mk = record::meta_key(db, key);
        let set = w.by_key.entry(mk.clone()).or_default();
        if set.is_empty() {
            self.watched.fetch_add(1, Ordering::Relaxed);
        }
        if set.insert(client) {
            w.by_client.entry(client).or_default().push(mk);
        }
    }

    /// Forgets every watch of `client` and whether its keys changed (`UNWATCH`, `EXEC`,
    /// `DISCARD`, and the connection's end).
    pub fn unwatch(&self, client: u64) {
        let mut w = self.watches.lock();
        for mk in w.by_client.remove(&client).unwrap_or_default() {
            if let Some(set) = w.by_key.get_mut(&mk) {
                set.remove(&client);
                if set.is_empty() {
                    w.by_key.remove(&mk);
                    self.watched.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        w.dirty.remove(&client);
    }

    /// Whether a key `client` watches changed since it was watched.
    pub fn is_dirty(&self, client: u64) -> bool {
        self.watches.lock().dirty.contains(&client)
    }

    /// Marks the watchers of the metadata keys `keys` dirty.
    fn touch(&self, keys: &[Vec<u8>]) {
        if self.watched.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut w = self.watches.lock();
        let w = &mut *w;
        for k in keys {
            if let Some(set) = w.by_key.get(k) {
                w.dirty.extend(set.iter().copied());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let t = tempfile::tempdir().unwrap();
        let db = DB::open(t.path(), engine::Options::default()).unwrap();
        (t, Store::open(db, 1 << 20).unwrap())
    }

    #[test]
    fn keep_last_of_writes_one_record_of_the_key_in_place_of_many() {
        let mut b = Batch::new();
        b.put(b"k", b"1");
        b.put(b"a", b"x");
        b.put(b"k", b"2");
        b.delete(b"b");
        b.put(b"k", b"3");
        b.put(b"c", b"y");
        b.keep_last_of(b"k");
        let got: Vec<_> = b.records().collect();
        assert_eq!(
            got,
            vec![
                (&b"a"[..], Some(&b"x"[..])),
                (b"b", None),
                (b"k", Some(b"3")),
                (b"c", Some(b"y"))
            ]
        );
        b.keep_last_of(b"a");
        assert_eq!(b.len(), 4);
    }

    fn put(s: &Store, db: u8, key: &[u8], m: &Meta) {
        let mut b = Batch::new();
        b.put_meta(db, key, m);
        s.write(b, false).unwrap();
    }

    #[test]
    fn writes_are_logged_once_a_full_sync_started_and_the_checkpoint_matches_the_offset() {
        let (_t, s) = store();
        let elsewhere = tempfile::tempdir().unwrap();
        let cp_dir = elsewhere.path().join("cp");
        put(&s, 0, b"before", &Meta::string(b"1".to_vec(), None));
        assert_eq!(s.log().offset(), 0, "no replica yet: nothing logged");
        let (_, at, seq) = s.checkpoint_at_offset(&cp_dir).unwrap();
        assert_eq!(at, 0);
        assert_eq!(seq, s.db().latest_sequence_number());
        put(&s, 0, b"after", &Meta::string(b"2".to_vec(), None));
        let logged = s.log().read(0, usize::MAX).unwrap();
        assert_eq!(logged.len() as u64, s.log().offset());
        // One entry: HLBATCH with the batch's one record.
        let mut buf = bytes::BytesMut::from(&logged[..]);
        let cmd = crate::protocol::Decoder::new()
            .next(
                &mut buf,
                &crate::protocol::Limits::new(1 << 20, 1 << 20, false),
            )
            .unwrap()
            .unwrap();
        assert!(buf.is_empty());
        assert_eq!(&cmd[0][..], wire::BATCH.as_bytes());
        let ops = wire::decode_ops(&cmd[1]).unwrap();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].key, record::meta_key(0, b"after"));
        // With the primary's sequence number of the batch: the WAL from the checkpoint's
        // number on holds exactly the streamed batch.
        let streamed: u64 = std::str::from_utf8(&cmd[2]).unwrap().parse().unwrap();
        assert_eq!(streamed, s.db().latest_sequence_number());
        let wal: Vec<_> = s
            .db()
            .updates_since(seq + 1)
            .unwrap()
            .map(|u| u.unwrap())
            .collect();
        assert_eq!(wal.len(), 1);
        assert_eq!(stream_ops(&wal[0].1), &cmd[1][..]);
        assert_eq!(wal[0].0, streamed);
        // The checkpoint holds the write before the offset and not the one after.
        let cp = DB::open(&cp_dir, engine::Options::default()).unwrap();
        assert!(cp.get(&record::meta_key(0, b"before")).unwrap().is_some());
        assert!(cp.get(&record::meta_key(0, b"after")).unwrap().is_none());
    }

    #[test]
    fn expired_values_read_as_absent_and_are_purged() {
        let (_t, s) = store();
        put(&s, 0, b"old", &Meta::string(b"v".to_vec(), Some(1)));
        put(&s, 0, b"new", &Meta::string(b"w".to_vec(), Some(u64::MAX)));
        assert_eq!(s.read(0, b"old", true).unwrap(), None);
        assert!(s.db().get(&record::meta_key(0, b"old")).unwrap().is_none());
        assert_eq!(s.read(0, b"new", false).unwrap().unwrap().value, b"w");
        assert_eq!(
            s.read(1, b"new", false).unwrap(),
            None,
            "databases are apart"
        );
        let (page, resume) = s.scan(0, None, 10).unwrap();
        assert_eq!(resume, None);
        assert_eq!(page.len(), 1);
        let live: Vec<_> = s.live_keys(0).unwrap().map(|k| k.unwrap().0).collect();
        assert_eq!(live, vec![b"new".to_vec()]);
    }

    #[test]
    fn a_string_expires_in_the_engine_and_a_collection_in_its_header() {
        let t = tempfile::tempdir().unwrap();
        let clock = Arc::new(engine::expiry::ManualClock::new(record::now_ms()));
        let opts = engine::Options {
            clock: clock.clone(),
            ..engine::Options::default()
        };
        let s = Store::open(DB::open(t.path(), opts).unwrap(), 1 << 20).unwrap();
        let later = record::now_ms() + 3_600_000;
        put(&s, 0, b"str", &Meta::string(b"v".to_vec(), Some(later)));
        let mut h = Meta::collection(Kind::Hash, 1);
        h.expire_at_ms = Some(later);
        put(&s, 0, b"hash", &h);
        put(&s, 0, b"plain", &Meta::string(b"p".to_vec(), None));
        // The engine's clock past the expiry (the server's is not): the engine no longer
        // returns the string's record, and keeps the others.
        clock.set(later);
        assert!(s.db().get(&record::meta_key(0, b"str")).unwrap().is_none());
        assert!(s.db().get(&record::meta_key(0, b"hash")).unwrap().is_some());
        assert!(s
            .db()
            .get(&record::meta_key(0, b"plain"))
            .unwrap()
            .is_some());
        // PERSIST's rewrite (no expiry) is a plain record again.
        clock.set(record::now_ms());
        put(&s, 0, b"str", &Meta::string(b"v".to_vec(), None));
        clock.set(later);
        assert!(s.db().get(&record::meta_key(0, b"str")).unwrap().is_some());
    }

    #[test]
    fn a_database_written_before_the_engine_knew_expiry_reads_as_before() {
        // Written by `halflife serve` before this change: `SET ttl1 val EX 100000000`,
        // `SET ttlpast val PX 1`, 20 small and 20 large strings, `HSET h f1 v1 f2 v2`,
        // `SET bigttl <701 bytes> EX 100000000`, `DEL s20`. The expiries are in the
        // records' headers only.
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/fixtures/before-expiry");
        let t = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(&fixture).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, t.path().join(p.file_name().unwrap())).unwrap();
        }
        let s = Store::open(
            DB::open(t.path(), engine::Options::default()).unwrap(),
            1 << 20,
        )
        .unwrap();
        let ttl = s.read(0, b"ttl1", false).unwrap().unwrap();
        assert_eq!(ttl.value, b"val");
        assert!(ttl.expire_at_ms.is_some_and(|t| t > record::now_ms()));
        assert!(s
            .read(0, b"bigttl", false)
            .unwrap()
            .unwrap()
            .expire_at_ms
            .is_some());
        assert_eq!(s.read(0, b"ttlpast", true).unwrap(), None);
        assert_eq!(s.read(0, b"s1", false).unwrap().unwrap().value, b"small1");
        assert_eq!(s.read(0, b"s20", false).unwrap(), None);
        assert_eq!(s.read(0, b"b7", false).unwrap().unwrap().value.len(), 701);
        assert_eq!(s.read(0, b"h", false).unwrap().unwrap().size, 2);
        let live = s.live_keys(0).unwrap().count();
        assert_eq!(live, 19 + 20 + 1 + 1 + 1);
    }

    #[test]
    fn the_sweep_deletes_expired_keys_and_stale_sub_keys() {
        let (_t, s) = store();
        for i in 0..10u8 {
            let expiry = if i % 2 == 0 { Some(1) } else { None };
            put(&s, 0, &[b'k', i], &Meta::string(b"v".to_vec(), expiry));
        }
        // A live hash with one field, and two fields of an older version of it.
        let mut h = Meta::collection(Kind::Hash, 5);
        h.size = 1;
        let mut b = Batch::new();
        b.put_meta(0, b"h", &h);
        b.put(&record::sub_key(0, b"h", 5, 0, b"f"), b"1");
        b.put(&record::sub_key(0, b"h", 4, 0, b"f"), b"0");
        b.put(&record::sub_key(0, b"h", 4, 0, b"g"), b"0");
        s.write(b, false).unwrap();
        // An expired hash: its expiry is in its header only (a collection's), the sweep
        // deletes its record.
        let mut gone = Meta::collection(Kind::Hash, 6);
        gone.expire_at_ms = Some(1);
        put(&s, 0, b"gone", &gone);
        // Pages of 3 entries: 16 entries (10 + 1 meta + 3 sub + marker + h... ) to the end.
        let (mut at, mut purged) = (None, 0);
        loop {
            let (next, n) = s.sweep_expired(at.as_deref(), 3).unwrap();
            purged += n;
            match next {
                Some(k) => at = Some(k),
                None => break,
            }
        }
        // The expired strings are the engine's to hide and reclaim: the sweep writes no
        // deletion for them (it never sees them).
        assert_eq!(purged, 1);
        for i in (0..10u8).filter(|i| i % 2 == 0) {
            assert!(s
                .db()
                .get(&record::meta_key(0, &[b'k', i]))
                .unwrap()
                .is_none());
        }
        let (page, _) = s.scan(0, None, 100).unwrap();
        let left: Vec<_> = page.iter().map(|(k, _)| k.clone()).collect();
        let mut want: Vec<Vec<u8>> = (0..10u8)
            .filter(|i| i % 2 == 1)
            .map(|i| vec![b'k', i])
            .collect();
        want.insert(0, b"h".to_vec());
        assert_eq!(left, want);
        let mut subs = Vec::new();
        s.sub_range(&[record::SUB], None, |k, _| {
            subs.push(k.to_vec());
            true
        })
        .unwrap();
        assert_eq!(subs.len(), 1, "only the live field is left");
    }

    #[test]
    fn scan_pages_resume_after_the_last_key() {
        let (_t, s) = store();
        for i in 0..5u8 {
            put(&s, 0, &[b'k', i], &Meta::string(vec![i], None));
        }
        put(&s, 1, b"other", &Meta::string(vec![], None));
        let (p1, resume) = s.scan(0, None, 3).unwrap();
        assert_eq!(resume.as_deref(), Some(&[b'k', 2][..]));
        let (p2, resume) = s.scan(0, resume.as_deref(), 3).unwrap();
        assert_eq!(resume, None);
        assert_eq!(p1.len() + p2.len(), 5);
        assert_eq!(p2[0].0, vec![b'k', 3]);
    }

    #[test]
    fn a_scan_page_examines_at_most_its_limit_expired_keys_included() {
        let (_t, s) = store();
        // Expired collections: their expiry is the server's (an expired string the engine
        // hides, so a page never examines it).
        for i in 0..10u8 {
            let mut m = Meta::collection(Kind::Hash, u64::from(i) + 1);
            m.expire_at_ms = Some(1);
            put(&s, 0, &[b'e', i], &m);
        }
        put(&s, 0, b"live", &Meta::string(vec![], None));
        // Ten expired keys first: a page of 4 holds none of them and is not the end.
        let (p1, resume) = s.scan(0, None, 4).unwrap();
        assert!(p1.is_empty());
        assert_eq!(resume.as_deref(), Some(&[b'e', 3][..]));
        let (p2, resume) = s.scan(0, resume.as_deref(), 4).unwrap();
        assert!(p2.is_empty() && resume.is_some());
        let (p3, resume) = s.scan(0, resume.as_deref(), 4).unwrap();
        assert_eq!(resume, None);
        assert_eq!(p3.len(), 1);
        assert_eq!(p3[0].0, b"live".to_vec());
        assert_eq!(p3[0].1.kind, Kind::String);
        assert_eq!(s.live_keys(0).unwrap().count(), 1);
    }

    #[test]
    fn legacy_records_are_migrated_once() {
        let t = tempfile::tempdir().unwrap();
        {
            let db = DB::open(t.path(), engine::Options::default()).unwrap();
            db.put(b"plain", &legacy::encode(b"v", None)).unwrap();
            db.put(b"ttl", &legacy::encode(b"w", Some(u64::MAX)))
                .unwrap();
            db.put(b"gone", &legacy::encode(b"x", Some(1))).unwrap();
            // A user key that looks like the metadata key of `a`, and `a` itself.
            db.put(b"M\x00a", &legacy::encode(b"tricky", None)).unwrap();
            db.put(b"a", &legacy::encode(b"A", None)).unwrap();
            db.put(b"F", &legacy::encode(b"f", None)).unwrap();
            db.close().unwrap();
        }
        let db = DB::open(t.path(), engine::Options::default()).unwrap();
        let s = Store::open(db, 1 << 20).unwrap();
        let get = |k: &[u8]| s.read(0, k, false).unwrap().map(|m| m.value);
        assert_eq!(get(b"plain"), Some(b"v".to_vec()));
        assert_eq!(
            s.read(0, b"ttl", false).unwrap().unwrap().expire_at_ms,
            Some(u64::MAX)
        );
        assert_eq!(get(b"gone"), None);
        assert_eq!(get(b"M\x00a"), Some(b"tricky".to_vec()));
        assert_eq!(get(b"a"), Some(b"A".to_vec()));
        assert_eq!(get(b"F"), Some(b"f".to_vec()));
        let (page, _) = s.scan(0, None, 100).unwrap();
        assert_eq!(page.len(), 5);
        // Reopening does not migrate again (the marker is there).
        let db = s.into_db().unwrap();
        assert_eq!(
            db.get(record::MARKER_KEY).unwrap().as_deref(),
            Some(record::MARKER_VALUE)
        );
    }

    #[test]
    fn foreign_values_are_an_error_not_garbage() {
        let (_t, s) = store();
        s.db().put(&record::meta_key(0, b"k"), b"raw").unwrap();
        assert!(matches!(s.read(0, b"k", false), Err(StoreError::Record(_))));
    }

    #[test]
    fn watchers_see_writes_to_their_keys_only() {
        let (_t, s) = store();
        s.watch(1, 0, b"a");
        s.watch(2, 0, b"b");
        put(&s, 0, b"a", &Meta::string(vec![], None));
        assert!(s.is_dirty(1) && !s.is_dirty(2));
        s.unwatch(1);
        assert!(!s.is_dirty(1));
        s.flush(Some(3), false).unwrap();
        assert!(
            !s.is_dirty(2),
            "b does not exist: the flush does not change it"
        );
        put(&s, 3, b"c", &Meta::string(vec![], None));
        s.watch(3, 3, b"c");
        s.flush(Some(3), false).unwrap();
        assert!(s.is_dirty(3));
    }

    /// What a scan of `prefix`'s keys finds, passing over one entry at most, and whether
    /// it was cut there.
    fn scan_passing_one(s: &Store, prefix: &[u8]) -> (usize, bool) {
        let end = record::prefix_end(prefix).unwrap();
        let opts = engine::ReadOptions {
            max_skipped: 1,
            ..engine::ReadOptions::without_readahead()
        };
        let db = s.db();
        let mut it = db
            .scan_opt(
                Bound::Included(prefix),
                Bound::Excluded(end.as_slice()),
                None,
                &opts,
            )
            .unwrap();
        let n = it.by_ref().count();
        (n, it.cut_short())
    }

    #[test]
    fn a_flush_leaves_no_tombstones_and_a_sample_passes_few_unless_it_must() {
        let (_t, s) = store();
        for i in 0..3000u32 {
            put(
                &s,
                2,
                format!("k{i:05}").as_bytes(),
                &Meta::string(vec![1], None),
            );
        }
        put(&s, 4, b"kept", &Meta::string(vec![], None));
        s.flush(Some(2), false).unwrap();
        assert_eq!(scan_passing_one(&s, &record::meta_prefix(2)), (0, false));
        assert_eq!(scan_passing_one(&s, &record::meta_prefix(4)), (1, false));
        // Deleted keys (not a flush) stay as tombstones: a sample passes over a bounded
        // number of them, and one that found nothing within the bound is drawn without it.
        let mut b = Batch::new();
        for i in 0..3000u32 {
            b.put_meta(
                5,
                format!("k{i:05}").as_bytes(),
                &Meta::string(vec![1], None),
            );
        }
        s.write(b, false).unwrap();
        let mut b = Batch::new();
        for i in 0..3000u32 {
            b.del_meta(5, format!("k{i:05}").as_bytes());
        }
        put(&s, 5, b"z-live", &Meta::string(vec![], None));
        s.write(b, false).unwrap();
        let (sample, cut) = s
            .sample_within(5, 5, false, 80, SAMPLE_MAX_SKIPPED)
            .unwrap();
        assert!(cut, "3000 tombstones, {SAMPLE_MAX_SKIPPED} passed at most");
        assert!(sample.len() <= 1);
        for _ in 0..20 {
            assert_eq!(s.sample(5, 5, false, 80).unwrap()[0].0, b"z-live");
        }
        let (sample, cut) = s
            .sample_within(4, 5, false, 80, SAMPLE_MAX_SKIPPED)
            .unwrap();
        assert_eq!((sample.len(), cut), (1, false));
        assert!(s.sample(6, 5, false, 80).unwrap().is_empty());
    }
}
