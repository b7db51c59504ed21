//! The ordered in-memory table: a lock-free skip list (crossbeam) of internal keys.
//!
//! The members of a write group insert their batches concurrently (the skip list is
//! lock-free; the arena is sharded by thread, see [`Arena`]), and readers run
//! concurrently with them without locks, seeing only sequence numbers already published.
//!
//! Keys and values are copied into large chunks owned by the memtable (an arena, as in
//! LevelDB) rather than one heap buffer each: a memtable is filled by client threads and
//! dropped by the flush thread, and millions of value-sized cross-thread frees left the
//! allocator holding up to twice the memtable's size in abandoned pages.

use crate::batch::WriteBatch;
use crate::error::Result;
use crate::sst::InternalIterator;
/// Kept at this path for callers outside the crate (defined with the internal keys).
pub use crate::types::seek_key;
use crate::types::{
    append_internal_key, cmp_internal, make_internal_key, parse_internal_key, SeqNo, ValueKind,
    KIND_SEEK, MAX_SEQ, TRAILER_LEN,
};
use crate::vlog::file::BlobMeta;
use crate::vlog::value_wal::{LoggedMemtable, SealedValueFile};
use crate::vlog::ValuePointer;
use bytes::{Bytes, BytesMut};
use crossbeam_skiplist::SkipMap;
use parking_lot::Mutex;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Per-entry bookkeeping charged to the memtable size on top of key and value bytes.
const ENTRY_OVERHEAD: usize = 64;

/// Arena chunk size; larger entries get a chunk of their own.
const CHUNK: usize = 1 << 20;

/// Arena shards: concurrent inserters copy into different chunks. As RocksDB's
/// `ConcurrentArena` (per-core shards): with one chunk under one lock, 4 writers on 2 cores
/// queued on it, and a writer that took a page fault on a fresh chunk (zeroing a huge
/// page) did so holding the lock; parking_lot's spin-then-yield on that lock was 10 % of
/// the writers' context switches (docs/bench.md, "Writes with 4 threads").
const ARENA_SHARDS: usize = 8;

thread_local! {
    /// This thread's arena shard, assigned round robin on first use.
    static ARENA_SHARD: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % ARENA_SHARDS
    };
}

/// The chunks of dropped memtables, kept for the next ones (at most one memtable's worth).
///
/// Why: a fresh chunk is fresh memory, and the allocator returns freed memory to the
/// system within 10 ms (`halflife` sets mimalloc's purge delay so, to bound RSS). So every
/// memtable faulted its whole size in again, zeroing a huge page per 2 MiB and, inside a
/// memory cgroup at its limit, reclaiming page cache to charge it: at full scale a
/// fifth of the writing client thread's time went to those faults (docs/bench.md,
/// "Memtable chunks reused"). A chunk kept here stays resident and charged; the memtables
/// in use plus this pool stay within the two memtables' budget, since the pool fills only
/// as a flushed memtable is dropped and empties as the next one fills.
pub struct ChunkPool {
    chunks: Mutex<Vec<BytesMut>>,
    max_chunks: usize,
}

impl ChunkPool {
    /// A pool holding at most `bytes` of chunks (a memtable's size).
    pub fn new(bytes: usize) -> Arc<ChunkPool> {
        Arc::new(ChunkPool {
            chunks: Mutex::new(Vec::new()),
            max_chunks: bytes / CHUNK,
        })
    }

    fn take(&self) -> Option<BytesMut> {
        self.chunks.lock().pop()
    }

    /// Keeps `chunk` if nothing else refers to its memory any more (every key and value
    /// copied into it was dropped with its memtable) and the pool has room.
    fn give(&self, mut chunk: BytesMut) {
        chunk.clear();
        // Succeeds only for the unique owner of the chunk's allocation; then its whole
        // capacity is usable again from the start.
        if !chunk.try_reclaim(CHUNK) || chunk.capacity() != CHUNK {
            return;
        }
        let mut chunks = self.chunks.lock();
        if chunks.len() < self.max_chunks {
            chunks.push(chunk);
        }
    }

    /// Chunks held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.chunks.lock().len()
    }
}

/// Large chunks that keys and values are copied into, one current chunk per shard; a
/// thread always copies into its own shard's chunk, so two inserting threads contend on a
/// shard's lock only when more threads than shards insert. A chunk is only allocated when
/// a shard is first used, so a single writer fills one chunk at a time as before.
#[derive(Default)]
struct Arena {
    shards: [Shard; ARENA_SHARDS],
    /// Where chunks come from and go back to when the memtable is dropped.
    pool: Option<Arc<ChunkPool>>,
    /// The filled chunks (their empty tails, which share the chunk's memory with the keys
    /// and values split off it), to give back to the pool.
    filled: Mutex<Vec<BytesMut>>,
}

/// A shard's current chunk, on its own cache line so that shards do not share one.
#[derive(Default)]
#[repr(align(64))]
struct Shard(Mutex<BytesMut>);

impl Arena {
    /// Copies the internal key (`key` with `seq` and `kind`) and `value` into the calling
    /// thread's shard.
    fn copy(&self, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> (Bytes, Bytes) {
        let shard = ARENA_SHARD.with(|s| *s);
        let mut chunk = self.shards[shard].0.lock();
        let need = key.len() + TRAILER_LEN + value.len();
        if chunk.capacity() - chunk.len() < need {
            let fresh = match &self.pool {
                Some(pool) if need <= CHUNK => pool.take(),
                _ => None,
            };
            let fresh = fresh.unwrap_or_else(|| BytesMut::with_capacity(need.max(CHUNK)));
            let filled = std::mem::replace(&mut *chunk, fresh);
            if self.pool.is_some() && filled.capacity() > 0 {
                self.filled.lock().push(filled);
            }
        }
        append_internal_key(&mut *chunk, key, seq, kind);
        let k = chunk.split().freeze();
        chunk.extend_from_slice(value);
        (k, chunk.split().freeze())
    }
}

impl Drop for Arena {
    /// Runs after the memtable's map (declared before the arena) dropped its keys and
    /// values, so the chunks nothing else refers to go back to the pool.
    fn drop(&mut self) {
        let Some(pool) = &self.pool else { return };
        for chunk in self.filled.get_mut().drain(..) {
            pool.give(chunk);
        }
        for shard in &mut self.shards {
            let chunk = std::mem::take(shard.0.get_mut());
            if chunk.capacity() > 0 {
                pool.give(chunk);
            }
        }
    }
}

/// An internal key stored in the arena, ordered as internal keys are.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MemKey(Bytes);

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        cmp_internal(&self.0, &other.0)
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

pub struct Memtable {
    /// Declared before `arena`: dropped first, so the arena can reuse its chunks.
    map: SkipMap<MemKey, Bytes>,
    arena: Arena,
    size: AtomicUsize,
    /// The WAL file holding this memtable's writes (0 when the WAL is off).
    wal_number: u64,
    /// With the value log as the WAL (`Options::wal.value_log_wal`): where each separated
    /// value of this memtable was logged, by sequence number, so that flush points at it
    /// instead of writing it again.
    logged: Mutex<HashMap<SeqNo, ValuePointer>>,
    /// The value files holding those values, cut by the write path and perhaps not yet
    /// synced; flush syncs and installs them with its tables.
    value_files: Mutex<Vec<Arc<SealedValueFile>>>,
}

/// The newest version of a key visible at a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub kind: ValueKind,
    pub seq: SeqNo,
    pub value: Vec<u8>,
}

impl Memtable {
    pub fn new(wal_number: u64) -> Self {
        Self::with_arena(wal_number, Arena::default())
    }

    /// A memtable whose chunks come from `pool` and go back to it when it is dropped.
    pub fn with_pool(wal_number: u64, pool: Arc<ChunkPool>) -> Self {
        let mut arena = Arena::default();
        arena.pool = Some(pool);
        Self::with_arena(wal_number, arena)
    }

    fn with_arena(wal_number: u64, arena: Arena) -> Self {
        Memtable {
            map: SkipMap::new(),
            arena,
            size: AtomicUsize::new(0),
            wal_number,
            logged: Mutex::new(HashMap::new()),
            value_files: Mutex::new(Vec::new()),
        }
    }

    /// Records where the values written at these sequence numbers were logged.
    pub fn log_values(&self, logged: impl IntoIterator<Item = (SeqNo, ValuePointer)>) {
        self.logged.lock().extend(logged);
    }

    /// Where the value written at `seq` was logged, if it was.
    pub fn logged(&self, seq: SeqNo) -> Option<ValuePointer> {
        self.logged.lock().get(&seq).copied()
    }

    /// Adds every entry of `batch` at consecutive sequence numbers from its first one;
    /// returns the last one used (replay of a WAL record).
    pub fn insert_batch(&self, batch: &WriteBatch) -> SeqNo {
        let mut seq = batch.first_seq();
        for e in batch.iter() {
            self.add(seq, e.kind, e.key, e.value);
            seq += 1;
        }
        seq - 1
    }

    /// Adds a value file, cut by the write path, that holds values of this memtable.
    pub(crate) fn add_value_file(&self, file: Arc<SealedValueFile>) {
        self.value_files.lock().push(file);
    }

    /// The value files holding this memtable's logged values, synced (by the caller, the
    /// flush, unless a synced write did it first).
    pub(crate) fn value_files(&self) -> Result<Vec<BlobMeta>> {
        let files = self.value_files.lock().clone();
        files.iter().map(|f| f.sync()).collect()
    }

    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    pub fn add(&self, seq: SeqNo, kind: ValueKind, key: &[u8], value: &[u8]) {
        self.size
            .fetch_add(key.len() + value.len() + ENTRY_OVERHEAD, Ordering::Relaxed);
        let (k, v) = self.arena.copy(key, seq, kind, value);
        self.map.insert(MemKey(k), v);
    }

    /// Approximate memory use in bytes.
    pub fn approximate_size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The newest entry for `user_key` with sequence number <= `snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<Found> {
        let seek = MemKey(Bytes::from(make_internal_key(
            user_key, snapshot, KIND_SEEK,
        )));
        let e = self.map.lower_bound(Bound::Included(&seek))?;
        let p = parse_internal_key(&e.key().0)?;
        (p.user_key == user_key).then(|| Found {
            kind: p.kind,
            seq: p.seq,
            value: e.value().to_vec(),
        })
    }

    /// The sequence number of the newest entry for `user_key`, if it has one.
    pub fn newest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        let seek = MemKey(Bytes::from(make_internal_key(user_key, MAX_SEQ, KIND_SEEK)));
        let e = self.map.lower_bound(Bound::Included(&seek))?;
        let p = parse_internal_key(&e.key().0)?;
        (p.user_key == user_key).then_some(p.seq)
    }

    pub fn iter(self: &Arc<Self>) -> MemtableIter {
        MemtableIter {
            mem: self.clone(),
            ahead: VecDeque::new(),
            batch: 1,
        }
    }
}

/// Entries an iterator reads ahead at most per search of the skip list.
const READ_AHEAD_MAX: usize = 256;

/// An owning iterator. The skip list's entries borrow the map, so an owning cursor cannot
/// hold one (without unsafe code); instead each search reads the entries after it ahead,
/// as shared `Bytes` (a reference count each, no copy). Stepping at every entry by a new
/// search from the current key cost flush a quarter of its time in the skip list's search
/// (docs/bench.md, "Pipelined groups"). The read-ahead starts at one entry after a seek (a
/// point seek reads one entry, as before) and doubles at each refill up to
/// [`READ_AHEAD_MAX`], so a full scan searches once per 256 entries. Entries inserted after
/// a read-ahead are not seen by it; they carry sequence numbers above any snapshot taken
/// before they were published, which a reader skips anyway.
pub struct MemtableIter {
    mem: Arc<Memtable>,
    /// The current entry, then the entries read ahead after it.
    ahead: VecDeque<(Bytes, Bytes)>,
    /// Entries the next refill reads.
    batch: usize,
}

impl MemtableIter {
    /// Positions at the first entry within `bound`, reading `batch` entries.
    fn fill(&mut self, bound: Bound<&MemKey>) {
        self.ahead.clear();
        let entries = self.mem.map.range((bound, Bound::Unbounded));
        self.ahead.extend(
            entries
                .take(self.batch)
                .map(|e| (e.key().0.clone(), e.value().clone())),
        );
        self.batch = (self.batch * 2).min(READ_AHEAD_MAX);
    }

    fn seek_bound(&mut self, bound: Bound<&MemKey>) {
        self.batch = 1;
        self.fill(bound);
    }
}

impl InternalIterator for MemtableIter {
    fn valid(&self) -> bool {
        !self.ahead.is_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.seek_bound(Bound::Unbounded);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.seek_bound(Bound::Included(&MemKey(Bytes::copy_from_slice(target))));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some((k, _)) = self.ahead.pop_front() {
            if self.ahead.is_empty() {
                self.fill(Bound::Excluded(&MemKey(k)));
            }
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        &self.ahead.front().expect("valid iterator").0
    }

    fn value(&self) -> &[u8] {
        &self.ahead.front().expect("valid iterator").1
    }
}

impl LoggedMemtable for Memtable {
    fn add(&self, seq: SeqNo, kind: ValueKind, key: &[u8], value: &[u8]) {
        Memtable::add(self, seq, kind, key, value)
    }

    fn log_values(&self, logged: Vec<(SeqNo, ValuePointer)>) {
        Memtable::log_values(self, logged)
    }

    fn add_value_file(&self, file: Arc<SealedValueFile>) {
        Memtable::add_value_file(self, file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MAX_SEQ;

    #[test]
    fn dropped_memtables_chunks_are_reused_only_when_unreferenced() {
        let pool = ChunkPool::new(3 * CHUNK);
        let value = vec![7u8; 100 << 10];
        let fill = |m: &Memtable, tag: u8| {
            for i in 0..50u32 {
                let mut v = value.clone();
                v[0] = tag;
                m.add(u64::from(i) + 1, ValueKind::Value, &i.to_be_bytes(), &v);
            }
        };
        // 50 values of 100 KiB fill 5 chunks; the pool keeps 3 of them.
        let m = Memtable::with_pool(1, pool.clone());
        fill(&m, 1);
        assert_eq!(pool.len(), 0);
        drop(m);
        assert_eq!(pool.len(), 3);
        // The next memtable takes them, and what it holds is its own data.
        let m = Memtable::with_pool(2, pool.clone());
        fill(&m, 2);
        assert_eq!(pool.len(), 0);
        for i in 0..50u32 {
            let got = m.get(&i.to_be_bytes(), MAX_SEQ).unwrap().value;
            assert_eq!((got[0], got.len()), (2, value.len()));
            assert!(got[1..].iter().all(|&b| b == 7));
        }
        drop(m);
        assert_eq!(pool.len(), 3);

        // A chunk whose bytes are still referenced is not given back.
        let pool = ChunkPool::new(4 * CHUNK);
        let mut arena = Arena::default();
        arena.pool = Some(pool.clone());
        let (k, v) = arena.copy(b"key", 1, ValueKind::Value, b"value");
        drop(arena);
        assert_eq!(pool.len(), 0, "the chunk is still referenced");
        assert_eq!((&k[..3], &v[..]), (&b"key"[..], &b"value"[..]));
    }

    #[test]
    fn get_respects_snapshots_and_iter_is_ordered() {
        let m = Arc::new(Memtable::new(1));
        m.add(1, ValueKind::Value, b"a", b"a1");
        m.add(2, ValueKind::Value, b"b", b"b2");
        m.add(3, ValueKind::Deletion, b"a", b"");
        m.add(4, ValueKind::Value, b"a", b"a4");
        assert_eq!(m.get(b"a", 4).unwrap().value, b"a4");
        assert_eq!(m.get(b"a", 3).unwrap().kind, ValueKind::Deletion);
        assert_eq!(m.get(b"a", 2).unwrap().value, b"a1");
        assert!(m.get(b"a", 0).is_none());
        assert!(m.get(b"c", 9).is_none());
        assert!(m.get(b"", 9).is_none());
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut seen = vec![];
        while it.valid() {
            let p = parse_internal_key(it.key()).unwrap();
            seen.push((p.user_key.to_vec(), p.seq));
            it.next().unwrap();
        }
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), 4),
                (b"a".to_vec(), 3),
                (b"a".to_vec(), 1),
                (b"b".to_vec(), 2)
            ]
        );
        it.seek(&seek_key(b"a", 2)).unwrap();
        assert_eq!(parse_internal_key(it.key()).unwrap().seq, 1);
        assert!(m.approximate_size() > 0);
    }

    #[test]
    fn iteration_across_read_ahead_refills_sees_every_entry_once() {
        let m = Arc::new(Memtable::new(1));
        let n = 3 * READ_AHEAD_MAX + 7;
        for i in 0..n {
            m.add(
                i as SeqNo + 1,
                ValueKind::Value,
                format!("k{i:05}").as_bytes(),
                b"v",
            );
        }
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut keys = vec![];
        while it.valid() {
            keys.push(parse_internal_key(it.key()).unwrap().user_key.to_vec());
            it.next().unwrap();
        }
        let want: Vec<Vec<u8>> = (0..n).map(|i| format!("k{i:05}").into_bytes()).collect();
        assert_eq!(keys, want);
        // A seek in the middle of a scan starts the read-ahead over from the target.
        it.seek(&seek_key(b"k00500", MAX_SEQ)).unwrap();
        for i in 500..510 {
            let user_key = parse_internal_key(it.key()).unwrap().user_key.to_vec();
            assert_eq!(user_key, format!("k{i:05}").into_bytes());
            it.next().unwrap();
        }
    }

    #[test]
    fn threads_copying_into_different_shards_keep_every_entry() {
        let m = Arc::new(Memtable::new(1));
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let m = &m;
                s.spawn(move || {
                    for i in 0..2000u64 {
                        let key = format!("t{t}-{i:05}");
                        m.add(
                            t * 10_000 + i + 1,
                            ValueKind::Value,
                            key.as_bytes(),
                            key.as_bytes(),
                        );
                    }
                });
            }
        });
        assert_eq!(m.len(), 8000);
        for t in 0..4u64 {
            for i in (0..2000u64).step_by(97) {
                let key = format!("t{t}-{i:05}");
                let f = m.get(key.as_bytes(), MAX_SEQ).expect("written");
                assert_eq!(f.value, key.as_bytes());
            }
        }
    }
}
