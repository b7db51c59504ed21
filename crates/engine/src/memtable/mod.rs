//! The ordered in-memory table: a lock-free skip list (crossbeam) of internal keys.
//!
//! The members of a write group insert their batches concurrently (the skip list is
//! lock-free; the arena takes a short lock to carve out each entry's bytes), and readers
//! run concurrently with them without locks, seeing only sequence numbers already
//! published.
//!
//! Keys and values are copied into large chunks owned by the memtable (an arena, as in
//! LevelDB) rather than one heap buffer each: a memtable is filled by client threads and
//! dropped by the flush thread, and millions of value-sized cross-thread frees left the
//! allocator holding up to twice the memtable's size in abandoned pages.

use crate::error::Result;
use crate::sst::InternalIterator;
use crate::types::{
    append_internal_key, cmp_internal, make_internal_key, parse_internal_key, SeqNo, ValueKind,
    KIND_SEEK, TRAILER_LEN,
};
use crate::vlog::file::BlobMeta;
use crate::vlog::ValuePointer;
use bytes::{Bytes, BytesMut};
use crossbeam_skiplist::SkipMap;
use parking_lot::Mutex;
use std::cmp::Ordering as CmpOrdering;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Per-entry bookkeeping charged to the memtable size on top of key and value bytes.
const ENTRY_OVERHEAD: usize = 64;

/// Arena chunk size; larger entries get a chunk of their own.
const CHUNK: usize = 1 << 20;

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
    map: SkipMap<MemKey, Bytes>,
    arena: Mutex<BytesMut>,
    size: AtomicUsize,
    /// The WAL file holding this memtable's writes (0 when the WAL is off).
    wal_number: u64,
    /// With the value log as the WAL (`Options::value_log_wal`): where each separated
    /// value of this memtable was logged, by sequence number, so that flush points at it
    /// instead of writing it again.
    logged: Mutex<HashMap<SeqNo, ValuePointer>>,
    /// The value files holding those values, synced when they were cut or the memtable
    /// was switched; flush installs them with its tables.
    value_files: Mutex<Vec<BlobMeta>>,
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
        Memtable {
            map: SkipMap::new(),
            arena: Mutex::new(BytesMut::new()),
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

    /// Adds a synced value file that holds values of this memtable.
    pub fn add_value_file(&self, meta: BlobMeta) {
        self.value_files.lock().push(meta);
    }

    /// The value files holding this memtable's logged values.
    pub fn value_files(&self) -> Vec<BlobMeta> {
        self.value_files.lock().clone()
    }

    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    pub fn add(&self, seq: SeqNo, kind: ValueKind, key: &[u8], value: &[u8]) {
        self.size
            .fetch_add(key.len() + value.len() + ENTRY_OVERHEAD, Ordering::Relaxed);
        let (k, v) = {
            let mut arena = self.arena.lock();
            let need = key.len() + TRAILER_LEN + value.len();
            if arena.capacity() - arena.len() < need {
                *arena = BytesMut::with_capacity(need.max(CHUNK));
            }
            append_internal_key(&mut *arena, key, seq, kind);
            let k = arena.split().freeze();
            arena.extend_from_slice(value);
            (k, arena.split().freeze())
        };
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

    pub fn iter(self: &Arc<Self>) -> MemtableIter {
        MemtableIter {
            mem: self.clone(),
            cur: None,
        }
    }
}

/// An owning iterator. It re-seeks from the current key on each step (the skip list's
/// entries borrow the map, so an owning cursor would need unsafe code); each step is
/// O(log n) and shares the entry's arena bytes.
pub struct MemtableIter {
    mem: Arc<Memtable>,
    cur: Option<(Bytes, Bytes)>,
}

impl MemtableIter {
    /// Cloning `Bytes` only bumps a reference count.
    fn set(&mut self, bound: Bound<&MemKey>) {
        self.cur = self
            .mem
            .map
            .lower_bound(bound)
            .map(|e| (e.key().0.clone(), e.value().clone()));
    }
}

impl InternalIterator for MemtableIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.set(Bound::Unbounded);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.set(Bound::Included(&MemKey(Bytes::copy_from_slice(target))));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some((k, _)) = self.cur.take() {
            self.set(Bound::Excluded(&MemKey(k)));
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        &self.cur.as_ref().expect("valid iterator").0
    }

    fn value(&self) -> &[u8] {
        &self.cur.as_ref().expect("valid iterator").1
    }
}

/// The seek key positioning at the newest version of `user_key` visible at `seq`.
pub fn seek_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    make_internal_key(user_key, seq, KIND_SEEK)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
