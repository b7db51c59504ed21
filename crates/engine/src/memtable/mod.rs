//! The ordered in-memory table: a lock-free skip list of user keys ([`skiplist`]), whose
//! nodes hold their key and value in the memtable's own arena and chain the key's later
//! versions, and a hash index from each user key to its node ([`index`]) that answers
//! point lookups and lets a rewrite of a key skip the list's search.
//!
//! The members of a write group insert their batches concurrently (the arena is sharded
//! by thread), and readers run concurrently with them without locks, seeing only sequence
//! numbers already published. A reader holds the memtable (an `Arc`), which keeps every
//! node it may reach alive; the memory is freed (or its chunks given back to the
//! [`ChunkPool`]) only when the last holder drops it.

mod index;
mod skiplist;

use crate::batch::WriteBatch;
use crate::error::Result;
/// Kept at this path for callers outside the crate (defined with the internal keys).
pub use crate::internal_key::seek_key;
use crate::internal_key::{pack_trailer, parse_internal_key, SeqNo, ValueKind, KIND_SEEK, MAX_SEQ};
use crate::sst::InternalIterator;
use crate::vlog::file::BlobMeta;
use crate::vlog::value_wal::{LoggedMemtable, SealedValueFile};
use crate::vlog::ValuePointer;
use index::{Index, Lookup};
use parking_lot::Mutex;
pub use skiplist::ChunkPool;
use skiplist::{Node, Position, SkipList, Target};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

pub struct Memtable {
    list: SkipList,
    index: Index,
    /// Arena bytes taken by the entries.
    size: AtomicUsize,
    /// The largest sequence number added: once the memtable is flushed, every write up to
    /// it is durable (older memtables flush first).
    largest_seq: AtomicU64,
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

/// How much of a found entry's value a lookup copies out of the memtable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueCopy {
    /// All of it.
    Whole,
    /// Only an expiring entry's expiry time: enough to tell whether the key is live
    /// (`DB::contains`) without copying a value that may be kilobytes long.
    ExpiryOnly,
}

impl Memtable {
    pub fn new(wal_number: u64) -> Self {
        Self::with_list(wal_number, SkipList::new(None), Index::new(0, None))
    }

    /// A memtable whose chunks come from `pool` and go back to it when it is dropped.
    pub fn with_pool(wal_number: u64, pool: Arc<ChunkPool>) -> Self {
        // A slot per 128 bytes of the memtable's budget (an eighth of a word per byte):
        // room for every key of entries of 200 bytes or more at under three quarters full;
        // keys beyond that are found by the list's search.
        let index = Index::new(pool.memtable_bytes() / 128, Some(pool.clone()));
        Self::with_list(wal_number, SkipList::new(Some(pool)), index)
    }

    fn with_list(wal_number: u64, list: SkipList, index: Index) -> Self {
        Memtable {
            list,
            index,
            size: AtomicUsize::new(0),
            largest_seq: AtomicU64::new(0),
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
        let trailer = pack_trailer(seq, kind);
        let hash = Index::hash(key);
        let bytes = match self.index.lookup(hash, key) {
            // SAFETY: the index holds published nodes of this memtable's list.
            Lookup::Node(node) => unsafe { self.list.insert_version(node, key, trailer, value) },
            Lookup::Absent | Lookup::Unknown => {
                let (node, bytes) = self.list.insert(key, trailer, value);
                self.index.record(hash, key, node);
                bytes
            }
        };
        self.size.fetch_add(bytes, Ordering::Relaxed);
        self.largest_seq.fetch_max(seq, Ordering::Relaxed);
    }

    /// The largest sequence number of an entry added (0 while empty).
    pub fn largest_seq(&self) -> SeqNo {
        self.largest_seq.load(Ordering::Relaxed)
    }

    /// Memory taken by the entries (their nodes in the arena), in bytes: what fills the
    /// memtable up to its budget.
    pub fn approximate_size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// Memory the memtable holds: its entries and its index.
    pub fn memory_bytes(&self) -> usize {
        self.approximate_size() + self.index.bytes()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The newest entry of `user_key` with a sequence number <= `snapshot`: its node's
    /// internal key and value, borrowed from the memtable.
    fn newest(&self, user_key: &[u8], snapshot: SeqNo) -> Option<(&[u8], &[u8])> {
        let node = match self.index.lookup(Index::hash(user_key), user_key) {
            Lookup::Absent => return None,
            Lookup::Node(node) => node,
            Lookup::Unknown => self.list.find(user_key),
        };
        if node.is_null() {
            return None;
        }
        // SAFETY: published nodes of this memtable's list, alive as long as `self`.
        unsafe {
            let v = self
                .list
                .version_at(node, pack_trailer(snapshot, KIND_SEEK));
            (!v.is_null()).then(|| (skiplist::key(v), skiplist::value(v)))
        }
    }

    /// The newest entry for `user_key` with sequence number <= `snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<Found> {
        self.get_as(user_key, snapshot, ValueCopy::Whole)
    }

    /// As [`Memtable::get`], copying only as much of the value as `copy` asks for.
    pub fn get_as(&self, user_key: &[u8], snapshot: SeqNo, copy: ValueCopy) -> Option<Found> {
        let (key, value) = self.newest(user_key, snapshot)?;
        let p = parse_internal_key(key)?;
        let value = match copy {
            ValueCopy::Whole => value,
            ValueCopy::ExpiryOnly if p.kind.expires() => {
                &value[..value.len().min(crate::expiry::EXPIRY_LEN)]
            }
            ValueCopy::ExpiryOnly => &[],
        };
        Some(Found {
            kind: p.kind,
            seq: p.seq,
            value: value.to_vec(),
        })
    }

    /// The sequence number of the newest entry for `user_key`, if it has one.
    pub fn newest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        let (key, _) = self.newest(user_key, MAX_SEQ)?;
        Some(parse_internal_key(key)?.seq)
    }

    pub fn iter(self: &Arc<Self>) -> MemtableIter {
        MemtableIter {
            mem: self.clone(),
            at: Position::END,
            back: None,
            versions: Vec::new(),
        }
    }
}

/// An owning cursor over the memtable: it holds the memtable, so the nodes it stands on
/// stay valid, and walks each key's versions, then the next key's node along the list's
/// bottom level. Entries inserted after the cursor passed their place are not seen;
/// entries inserted ahead of it may be, with sequence numbers above any snapshot taken
/// before they were published, which a reader skips anyway.
///
/// Walking backward it stands on one of the versions of a key, listed when it reached the
/// key (a key's chain links forward only), and finds the key before by a search from the
/// top of the list (nodes link forward only): a step back to the previous key costs a
/// search, as in LevelDB.
pub struct MemtableIter {
    mem: Arc<Memtable>,
    /// Where it stands walking forward (past the end before the first seek).
    at: Position,
    /// Walking backward: the key's node and the index in `versions` of the version it
    /// stands on (`None` walking forward).
    back: Option<(Node, usize)>,
    /// Walking backward: the versions of the key it stands on, in internal-key order.
    versions: Vec<Node>,
}

// SAFETY: the position's nodes are nodes of `mem`'s list, immutable once published and
// alive as long as `mem`, which the iterator holds.
unsafe impl Send for MemtableIter {}

impl MemtableIter {
    /// The version it stands on.
    fn entry(&self) -> *mut u8 {
        match self.back {
            Some((_, i)) => self.versions[i],
            None => {
                assert!(self.at.valid(), "valid iterator");
                self.at.at
            }
        }
    }

    /// Stands on the last version of `node`'s key (null: invalid).
    fn back_to_last(&mut self, node: Node) {
        self.at = Position::END;
        if node.is_null() {
            self.back = None;
            return;
        }
        // SAFETY: a published node of the list the iterator holds.
        unsafe { self.mem.list.versions_of(node, &mut self.versions) };
        self.back = Some((node, self.versions.len() - 1));
    }

    /// Stands on the last version of the key before `node`'s.
    fn back_before(&mut self, node: Node) {
        // SAFETY: a published node of the list the iterator holds.
        let uk = crate::internal_key::user_key(unsafe { skiplist::key(node) });
        let before = self.mem.list.node_before(uk);
        self.back_to_last(before);
    }

    /// Stands on version `i` of `node`'s key (its versions listed in `versions`), or on
    /// the last version of the key before if `i` is 0 and the walk steps back from it.
    fn back_from(&mut self, node: Node, i: usize) {
        self.at = Position::END;
        if i == 0 {
            self.back_before(node);
        } else {
            self.back = Some((node, i - 1));
        }
    }
}

impl InternalIterator for MemtableIter {
    fn valid(&self) -> bool {
        self.back.is_some() || self.at.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.back = None;
        self.at = self.mem.list.first();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.back = None;
        self.at = self.mem.list.seek(Target::of(target));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some((node, i)) = self.back.take() {
            // SAFETY: a published node of the list the iterator holds, and one of its
            // versions.
            self.at = unsafe { self.mem.list.position_of(node, self.versions[i]) };
        }
        if self.at.valid() {
            // SAFETY: a valid position in the list the iterator holds.
            unsafe { self.at.advance() };
        }
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let last = self.mem.list.last_node();
        self.back_to_last(last);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let t = Target::of(target);
        let node = self.mem.list.seek_node(t.user_key);
        // SAFETY: published nodes of the list the iterator holds.
        unsafe {
            if !node.is_null() && crate::internal_key::user_key(skiplist::key(node)) == t.user_key {
                self.mem.list.versions_of(node, &mut self.versions);
                // Versions ascend in internal order (trailers descend): those at or before
                // the target.
                let n = self
                    .versions
                    .partition_point(|&v| skiplist::trailer(v) >= t.trailer);
                if n > 0 {
                    self.at = Position::END;
                    self.back = Some((node, n - 1));
                    return Ok(());
                }
            }
        }
        let before = self.mem.list.node_before(t.user_key);
        self.back_to_last(before);
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        match self.back {
            Some((node, i)) => self.back_from(node, i),
            None if self.at.valid() => {
                let (node, at) = (self.at.node(), self.at.at);
                // SAFETY: a published node of the list the iterator holds.
                unsafe { self.mem.list.versions_of(node, &mut self.versions) };
                let i = self
                    .versions
                    .iter()
                    .position(|&v| v == at)
                    .expect("the version stood on is among its key's versions");
                self.back_from(node, i);
            }
            None => {}
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        // SAFETY: a published node of the list the iterator holds; the slice borrows
        // `self`, which holds the memtable.
        unsafe { skiplist::key(self.entry()) }
    }

    fn value(&self) -> &[u8] {
        // SAFETY: as for `key`.
        unsafe { skiplist::value(self.entry()) }
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
    use crate::internal_key::MAX_SEQ;
    use proptest::prelude::*;

    proptest! {
        /// Point lookups (answered by the index, or by the list when the newest entry is
        /// above the snapshot) agree with a model at every snapshot, with entries recorded
        /// out of sequence order (relocations insert at their original sequence numbers)
        /// and deletions among them.
        #[test]
        fn lookups_match_a_model_at_every_snapshot(
            ops in proptest::collection::vec((0u8..12, 1u64..200, any::<bool>()), 1..150),
        ) {
            let m = Memtable::new(0);
            let mut model: Vec<(u8, u64, bool)> = Vec::new();
            for &(k, seq, delete) in &ops {
                if model.iter().any(|&(mk, ms, _)| mk == k && ms == seq) {
                    continue;
                }
                let kind = if delete { ValueKind::Deletion } else { ValueKind::Value };
                m.add(seq, kind, &[k], &seq.to_le_bytes());
                model.push((k, seq, delete));
            }
            for k in 0u8..13 {
                for snapshot in [0, 1, 50, 100, 150, 199, MAX_SEQ] {
                    let want = model
                        .iter()
                        .filter(|&&(mk, ms, _)| mk == k && ms <= snapshot)
                        .max_by_key(|&&(_, ms, _)| ms)
                        .map(|&(_, ms, del)| (ms, del));
                    let got = m.get(&[k], snapshot).map(|f| (f.seq, f.kind == ValueKind::Deletion));
                    prop_assert_eq!(got, want, "key {} at snapshot {}", k, snapshot);
                }
                let newest = model.iter().filter(|&&(mk, _, _)| mk == k).map(|&(_, s, _)| s).max();
                prop_assert_eq!(m.newest_seq(&[k]), newest);
            }
        }
    }

    proptest! {
        /// Walks both ways with turns and seeks from anywhere over keys with chains of
        /// versions (recorded out of sequence order), against the sorted entries.
        #[test]
        fn walks_both_ways_like_the_sorted_entries(
            ops in proptest::collection::vec((0u8..6, 1u64..40, 0u8..3), 0..80),
            moves in crate::sst::tests::moves(&[0, 1, 2, 3, 4, 5, 6], 41),
        ) {
            let m = Arc::new(Memtable::new(0));
            let mut want = std::collections::BTreeMap::new();
            for &(k, seq, kind) in &ops {
                let ikey = crate::internal_key::InternalKey::new(&[k], seq, ValueKind::from_u8(kind).unwrap());
                if want.contains_key(&ikey) {
                    continue;
                }
                let value = format!("{k}@{seq}").into_bytes();
                m.add(seq, ValueKind::from_u8(kind).unwrap(), &[k], &value);
                want.insert(ikey, value);
            }
            let want: Vec<_> = want.into_iter().map(|(k, v)| (k.0, v)).collect();
            let mut it = m.iter();
            crate::sst::tests::check_walk(&mut it, &want, &moves);
        }
    }

    #[test]
    fn a_dropped_memtables_index_is_reused_cleared() {
        let pool = ChunkPool::new(1 << 20);
        let m = Memtable::with_pool(1, pool.clone());
        m.add(1, ValueKind::Value, b"a", b"1");
        assert!(!pool.has_spare_index());
        drop(m);
        assert!(pool.has_spare_index());
        let m = Memtable::with_pool(2, pool.clone());
        assert!(!pool.has_spare_index(), "the new memtable took the spare");
        assert_eq!(
            m.get(b"a", MAX_SEQ),
            None,
            "nothing of the old memtable is left"
        );
        m.add(5, ValueKind::Value, b"b", b"2");
        assert_eq!(m.get(b"b", MAX_SEQ).map(|f| f.seq), Some(5));
    }

    #[test]
    fn dropped_memtables_chunks_are_reused() {
        use skiplist::CHUNK;
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
        let m = Arc::new(Memtable::with_pool(2, pool.clone()));
        fill(&m, 2);
        assert_eq!(pool.len(), 0);
        for i in 0..50u32 {
            let got = m.get(&i.to_be_bytes(), MAX_SEQ).unwrap().value;
            assert_eq!((got[0], got.len()), (2, value.len()));
            assert!(got[1..].iter().all(|&b| b == 7));
        }
        // An iterator keeps the memtable's memory: its chunks go back only when it is
        // dropped too.
        let mut it = m.iter();
        drop(m);
        assert_eq!(pool.len(), 0);
        it.seek_to_first().unwrap();
        assert_eq!(it.value()[0], 2);
        drop(it);
        assert_eq!(pool.len(), 3);
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
    fn iteration_sees_every_entry_once_and_seeks_mid_scan() {
        let m = Arc::new(Memtable::new(1));
        let n = 1000;
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
        // A seek in the middle of a scan moves the cursor to the target.
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
