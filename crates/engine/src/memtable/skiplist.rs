//! The memtable's ordered index: a concurrent skip list whose nodes live in an arena with
//! their internal key and value inline.
//!
//! Why hand-written (it replaced `crossbeam_skiplist`): a node there is its own heap
//! allocation holding a handle to the key, which lived in a second place (the arena), so
//! every comparison of a search loaded two unrelated cache lines. In a pipelined `ZADD` of
//! the server half of the time went to that search and a quarter of all samples were
//! `memcmp` waiting for key bytes (docs/results/2026-11-28-memtable-inline-skiplist.md).
//! Here a node is one piece of arena memory: its tower of next pointers, a header, the key
//! and the value, so a comparison reads the lines the search has just loaded. The design is
//! LevelDB's and RocksDB's inline skip list: nodes are never removed (a memtable only grows
//! until it is flushed and dropped whole), which keeps the lock-free insert simple (one
//! compare-and-swap per level, a search of that level again on a lost race), and readers
//! need no epochs or reference counts, only the memtable kept alive.
//!
//! A node's address points at its header; the tower sits just below it, level 0 nearest,
//! so the key is at a fixed offset whatever the node's height:
//!
//! ```text
//! [next[h-1]] ... [next[1]] [next[0]] | key_len: u32 | value_len: u32 | versions | oldest | key | value
//!                                     ^ node
//! ```
//!
//! **One node per user key; later versions in its chain.** The levels link one node per
//! user key (the first version inserted). Every other version of that key is a record of
//! height 1 (the same layout) in the node's `versions` chain, newest first, linked through
//! the record's level-0 pointer. Why: the server rewrites the same keys all the time (a
//! hash's field, a sorted set's member), and each rewrite searched the list from the top,
//! a cache miss per step once the memtable outgrew the caches: a pipelined `ZADD` spent a
//! third of the server's CPU in that search (docs/serve.md). A key already in the memtable
//! is found by the hash index ([`super::index`]) in a miss or two, and its new version is
//! pushed onto the chain by one compare-and-swap, with no search. Walks see each key's
//! versions in internal-key order (trailers descending), the node's own version in its
//! place among them. `oldest`, the smallest trailer among a key's versions, lets a seek
//! past all of them (a scan moving on from a key it has stepped over eight versions of,
//! `db::iter`) jump to the next key's node instead of walking the chain. A seek to a
//! snapshot older than a key's newest versions still walks past those newer ones: a read
//! at an old snapshot of a key rewritten many times since costs a step per rewrite.
//!
//! A value longer than [`INLINE_VALUE_MAX`] is not in the node: the node holds its address,
//! and the value is in separate chunks. Nodes then stay dense in memory, so that a search
//! among entries with 4 KiB values does not miss the cache and the TLB at every step.

use crate::internal_key::{user_key, TRAILER_LEN};
use parking_lot::Mutex;
use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Tallest tower; with a branching factor of 4 it indexes 4^12 = 16M entries well, more
/// than a memtable holds.
const MAX_HEIGHT: usize = 12;

/// Header bytes between a node's tower and its key: the two lengths, the head of the
/// versions chain and the oldest version's trailer (16 bytes more per entry than the
/// lengths alone: a memtable of 60-byte entries holds a fifth fewer of them).
const HEADER: usize = 24;

/// Offset of the versions chain's head in the header.
const VERSIONS: usize = 8;

/// Offset of the smallest trailer among the key's versions (the node's own included).
const OLDEST: usize = 16;

/// Longest value kept inside its node.
const INLINE_VALUE_MAX: usize = 128;

const WORD: usize = std::mem::size_of::<usize>();

/// Arena chunk size; larger nodes get a chunk of their own.
pub(super) const CHUNK: usize = 1 << 20;

/// Arena shards: concurrent inserters allocate from different chunks. As RocksDB's
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

/// A chunk of arena memory, in words so that every node is aligned for its pointers.
type Chunk = Box<[usize]>;

fn new_chunk(bytes: usize) -> Chunk {
    vec![0usize; bytes.div_ceil(WORD)].into_boxed_slice()
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
    chunks: Mutex<Vec<Chunk>>,
    max_chunks: usize,
    /// A dropped memtable's index, cleared, for the next memtable: a fresh one faults in
    /// its pages in the writer that switches memtables, and under a memory cgroup at its
    /// limit those faults waited in reclaim for up to 82 ms (docs/bench.md).
    spare_index: Mutex<Option<Box<[AtomicPtr<u8>]>>>,
}

impl ChunkPool {
    /// A pool holding at most `bytes` of chunks (a memtable's size).
    pub fn new(bytes: usize) -> Arc<ChunkPool> {
        Arc::new(ChunkPool {
            chunks: Mutex::new(Vec::new()),
            max_chunks: bytes / CHUNK,
            spare_index: Mutex::new(None),
        })
    }

    /// The memtable budget the pool was made for.
    pub(super) fn memtable_bytes(&self) -> usize {
        self.max_chunks * CHUNK
    }

    /// The spare index table if it has `len` slots (all null).
    pub(super) fn take_index(&self, len: usize) -> Option<Box<[AtomicPtr<u8>]>> {
        let mut spare = self.spare_index.lock();
        if spare.as_ref().is_some_and(|s| s.len() == len) {
            spare.take()
        } else {
            None
        }
    }

    /// Keeps `slots` (cleared by the caller) as the spare index table.
    pub(super) fn give_index(&self, slots: Box<[AtomicPtr<u8>]>) {
        *self.spare_index.lock() = Some(slots);
    }

    fn take(&self) -> Option<Chunk> {
        self.chunks.lock().pop()
    }

    /// Keeps `chunk` if it is a standard one and the pool has room. Nothing refers to a
    /// dropped memtable's memory any more: readers hold the memtable itself.
    fn give(&self, chunk: Chunk) {
        let mut chunks = self.chunks.lock();
        if chunk.len() * WORD == CHUNK && chunks.len() < self.max_chunks {
            chunks.push(chunk);
        }
    }

    /// Whether a spare index table is held.
    #[cfg(test)]
    pub(super) fn has_spare_index(&self) -> bool {
        self.spare_index.lock().is_some()
    }

    /// Chunks held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.chunks.lock().len()
    }
}

/// A shard's free space in its current chunks (one for nodes, one for long values), on its
/// own cache line.
#[repr(align(64))]
struct Shard(Mutex<[Free; 2]>);

/// Which of a shard's chunks an allocation comes from.
#[derive(Clone, Copy)]
enum Region {
    Nodes = 0,
    Values = 1,
}

struct Free {
    at: *mut u8,
    left: usize,
}

// SAFETY: `at` points into a chunk owned by the arena, which outlives every shard's use of
// it; the mutex makes the bump exclusive.
unsafe impl Send for Free {}

impl Default for Shard {
    fn default() -> Self {
        let free = || Free {
            at: std::ptr::null_mut(),
            left: 0,
        };
        Shard(Mutex::new([free(), free()]))
    }
}

/// Word-aligned bump allocation from per-thread shards of large chunks (as in LevelDB's
/// arena); memory is freed only with the whole arena.
struct Arena {
    shards: [Shard; ARENA_SHARDS],
    /// Every chunk handed out, owned here until the arena is dropped.
    chunks: Mutex<Vec<Chunk>>,
    pool: Option<Arc<ChunkPool>>,
}

impl Arena {
    /// `bytes` (a multiple of the word size) of memory nothing else uses, valid until the
    /// arena is dropped. Its contents are unspecified.
    fn alloc(&self, region: Region, bytes: usize) -> *mut u8 {
        debug_assert_eq!(bytes % WORD, 0);
        let shard = ARENA_SHARD.with(|s| *s);
        let mut shard = self.shards[shard].0.lock();
        let free = &mut shard[region as usize];
        if free.left < bytes {
            if bytes > CHUNK / 4 {
                // A large node takes a chunk of its own; the shard keeps its free space.
                let mut chunk = new_chunk(bytes);
                let at = chunk.as_mut_ptr().cast::<u8>();
                self.chunks.lock().push(chunk);
                return at;
            }
            let mut chunk = self
                .pool
                .as_ref()
                .and_then(|p| p.take())
                .unwrap_or_else(|| new_chunk(CHUNK));
            free.at = chunk.as_mut_ptr().cast::<u8>();
            free.left = CHUNK;
            // Moving the box does not move the memory it owns.
            self.chunks.lock().push(chunk);
        }
        let at = free.at;
        // SAFETY: `bytes <= left`, so the result stays inside the current chunk.
        free.at = unsafe { at.add(bytes) };
        free.left -= bytes;
        at
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            for chunk in self.chunks.get_mut().drain(..) {
                pool.give(chunk);
            }
        }
    }
}

/// A node's address (its header), or null for the end of a level.
pub(super) type Node = *mut u8;

/// The slot of `node`'s next pointer at `level`.
///
/// # Safety
/// `node` is a node of this list whose height is above `level`.
#[inline]
unsafe fn slot<'a>(node: Node, level: usize) -> &'a AtomicPtr<u8> {
    &*node.cast::<AtomicPtr<u8>>().sub(level + 1)
}

/// # Safety
/// As [`slot`].
#[inline]
unsafe fn next(node: Node, level: usize) -> Node {
    slot(node, level).load(Ordering::Acquire)
}

/// The head of `node`'s versions chain (null if the key has one version).
///
/// # Safety
/// `node` is a node (or the head) of this list.
#[inline]
unsafe fn versions<'a>(node: Node) -> &'a AtomicPtr<u8> {
    &*node.add(VERSIONS).cast::<AtomicPtr<u8>>()
}

/// The smallest trailer among the versions of `node`'s key.
///
/// # Safety
/// As [`versions`].
#[inline]
unsafe fn oldest<'a>(node: Node) -> &'a AtomicU64 {
    &*node.add(OLDEST).cast::<AtomicU64>()
}

/// The trailer (sequence number and kind) of a published node's internal key.
///
/// # Safety
/// As [`key`].
#[inline]
pub(super) unsafe fn trailer(node: Node) -> u64 {
    let k = key(node);
    u64::from_le_bytes(k[k.len() - TRAILER_LEN..].try_into().expect("8 bytes"))
}

/// The internal key of a published node.
///
/// # Safety
/// `node` is a published node (not the head) of a list that outlives `'a`.
#[inline]
pub(super) unsafe fn key<'a>(node: Node) -> &'a [u8] {
    let len = node.cast::<u32>().read() as usize;
    std::slice::from_raw_parts(node.add(HEADER), len)
}

/// The value of a published node.
///
/// # Safety
/// As [`key`].
#[inline]
pub(super) unsafe fn value<'a>(node: Node) -> &'a [u8] {
    let key_len = node.cast::<u32>().read() as usize;
    let len = node.cast::<u32>().add(1).read() as usize;
    let after_key = node.add(HEADER + key_len);
    let at = if len <= INLINE_VALUE_MAX {
        after_key
    } else {
        after_key.cast::<*mut u8>().read_unaligned()
    };
    std::slice::from_raw_parts(at, len)
}

/// What a search compares nodes with: an internal key given as its two parts, so that a
/// point lookup needs no buffer to build it in.
#[derive(Clone, Copy)]
pub(super) struct Target<'a> {
    pub user_key: &'a [u8],
    pub trailer: u64,
}

impl Target<'_> {
    /// The target of an internal key.
    pub fn of(ikey: &[u8]) -> Target<'_> {
        let n = ikey.len().saturating_sub(TRAILER_LEN);
        let mut t = [0u8; TRAILER_LEN];
        let tail = &ikey[n..];
        t[..tail.len()].copy_from_slice(tail);
        Target {
            user_key: &ikey[..n],
            trailer: u64::from_le_bytes(t),
        }
    }

    /// How the internal key `ikey` orders against the target (as `cmp_internal`: user keys
    /// ascending, then trailers descending, newest first).
    #[inline]
    fn order_of(&self, ikey: &[u8]) -> CmpOrdering {
        user_key(ikey).cmp(self.user_key).then_with(|| {
            let t = u64::from_le_bytes(ikey[ikey.len() - TRAILER_LEN..].try_into().unwrap());
            self.trailer.cmp(&t)
        })
    }
}

/// Where a walk stands: on one version of one key. The versions of a key are walked in
/// internal-key order: the records of its chain whose trailers are at least the node's own,
/// then the node, then the rest of the chain (a record inserted with the node's own trailer
/// is the later insert, and goes first).
#[derive(Clone, Copy)]
pub(super) struct Position {
    /// The key's node; null past the end.
    node: Node,
    /// The version stood on: `node` itself or a record of its chain; null past the end.
    pub at: Node,
    /// With `at == node`: the chain record after it in the walk (null if none).
    rest: Node,
    /// Whether the walk has passed the node's own version.
    node_done: bool,
}

impl Position {
    /// Past the end.
    pub const END: Position = Position {
        node: std::ptr::null_mut(),
        at: std::ptr::null_mut(),
        rest: std::ptr::null_mut(),
        node_done: false,
    };

    /// Whether it stands on a version (not past the end).
    pub fn valid(&self) -> bool {
        !self.at.is_null()
    }

    /// The node of the key it stands on (null past the end).
    pub fn node(&self) -> Node {
        self.node
    }

    /// The first version at `node` from chain record `chain` on (its own version if not
    /// `node_done` and its turn has come), moving on to the next keys' nodes if `node` has
    /// none left.
    ///
    /// # Safety
    /// `node` is null or a published node of a list alive while the position is used, and
    /// `chain` null or a record of its chain.
    unsafe fn settle(mut node: Node, mut chain: Node, mut node_done: bool) -> Position {
        loop {
            if node.is_null() {
                return Position::END;
            }
            if !node_done && (chain.is_null() || trailer(chain) < trailer(node)) {
                return Position {
                    node,
                    at: node,
                    rest: chain,
                    node_done: false,
                };
            }
            if !chain.is_null() {
                return Position {
                    node,
                    at: chain,
                    rest: std::ptr::null_mut(),
                    node_done,
                };
            }
            node = next(node, 0);
            node_done = false;
            if !node.is_null() {
                chain = versions(node).load(Ordering::Acquire);
            }
        }
    }

    /// The first version of `node` (null for the end).
    ///
    /// # Safety
    /// As [`Position::settle`].
    unsafe fn at_node(node: Node) -> Position {
        if node.is_null() {
            return Position::END;
        }
        Position::settle(node, versions(node).load(Ordering::Acquire), false)
    }

    /// The version after this one in internal-key order.
    ///
    /// # Safety
    /// The position is valid, in a list alive while it is used.
    pub unsafe fn advance(&mut self) {
        *self = if self.at == self.node {
            Position::settle(self.node, self.rest, true)
        } else {
            Position::settle(self.node, next(self.at, 0), self.node_done)
        };
    }
}

/// Where an entry goes: its predecessor and successor at each level.
struct Splice {
    prev: [Node; MAX_HEIGHT],
    succ: [Node; MAX_HEIGHT],
}

pub(super) struct SkipList {
    /// The head's tower (`MAX_HEIGHT` pointers, then a header of an empty node), which
    /// `head` points into.
    _head_memory: Box<[usize]>,
    head: Node,
    /// Levels in use; searches start at the top one.
    height: AtomicUsize,
    len: AtomicUsize,
    arena: Arena,
}

// SAFETY: nodes are immutable once published (only their next pointers change, atomically),
// and their memory lives as long as the list.
unsafe impl Send for SkipList {}
unsafe impl Sync for SkipList {}

impl SkipList {
    pub fn new(pool: Option<Arc<ChunkPool>>) -> SkipList {
        let mut head_memory = vec![0usize; MAX_HEIGHT + HEADER / WORD].into_boxed_slice();
        // SAFETY: the head's header starts after its tower, inside the allocation; the
        // zeroed tower is null at every level and the zeroed header an empty key.
        let head = unsafe { head_memory.as_mut_ptr().add(MAX_HEIGHT).cast::<u8>() };
        SkipList {
            _head_memory: head_memory,
            head,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            arena: Arena {
                shards: Default::default(),
                chunks: Mutex::default(),
                pool,
            },
        }
    }

    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// The node of the first user key at or after `user_key`, or null.
    pub fn seek_node(&self, user_key: &[u8]) -> Node {
        let target = Target {
            user_key,
            trailer: u64::MAX,
        };
        let mut x = self.head;
        let mut level = self.height.load(Ordering::Relaxed) - 1;
        loop {
            // SAFETY: `x` is the head or a node reached at `level`, so its height exceeds it.
            let n = unsafe { next(x, level) };
            // SAFETY: a non-null next pointer is a published node.
            if !n.is_null() && target.order_of(unsafe { key(n) }) == CmpOrdering::Less {
                x = n;
            } else if level == 0 {
                return n;
            } else {
                level -= 1;
            }
        }
    }

    /// The node of the last user key before `user_key`, or null if there is none. Nodes
    /// link forward only, so this is a search from the top (LevelDB's `FindLessThan`).
    pub fn node_before(&self, user_key: &[u8]) -> Node {
        let target = Target {
            user_key,
            trailer: u64::MAX,
        };
        let mut x = self.head;
        let mut level = self.height.load(Ordering::Relaxed) - 1;
        loop {
            // SAFETY: `x` is the head or a node reached at `level`, so its height exceeds it.
            let n = unsafe { next(x, level) };
            // SAFETY: a non-null next pointer is a published node.
            if !n.is_null() && target.order_of(unsafe { key(n) }) == CmpOrdering::Less {
                x = n;
            } else if level == 0 {
                return if x == self.head {
                    std::ptr::null_mut()
                } else {
                    x
                };
            } else {
                level -= 1;
            }
        }
    }

    /// The node of the last user key, or null for an empty list.
    pub fn last_node(&self) -> Node {
        let mut x = self.head;
        let mut level = self.height.load(Ordering::Relaxed) - 1;
        loop {
            // SAFETY: as in `node_before`.
            let n = unsafe { next(x, level) };
            if !n.is_null() {
                x = n;
            } else if level == 0 {
                return if x == self.head {
                    std::ptr::null_mut()
                } else {
                    x
                };
            } else {
                level -= 1;
            }
        }
    }

    /// Every version of `node`'s key, in the order a walk meets them (internal-key order),
    /// into `out` (cleared first).
    ///
    /// # Safety
    /// `node` is a published node of this list.
    pub unsafe fn versions_of(&self, node: Node, out: &mut Vec<Node>) {
        out.clear();
        let mut p = Position::at_node(node);
        while p.node == node {
            out.push(p.at);
            p.advance();
        }
    }

    /// The position standing on version `at` of `node`'s key (one of
    /// [`SkipList::versions_of`]), for a walk forward from it.
    ///
    /// # Safety
    /// As [`SkipList::versions_of`].
    pub unsafe fn position_of(&self, node: Node, at: Node) -> Position {
        let mut p = Position::at_node(node);
        while p.node == node && p.at != at {
            p.advance();
        }
        p
    }

    /// The node of `user_key`, or null if the list has no version of it.
    pub fn find(&self, user_key: &[u8]) -> Node {
        let n = self.seek_node(user_key);
        // SAFETY: a published node of this list.
        if !n.is_null() && crate::internal_key::user_key(unsafe { key(n) }) == user_key {
            n
        } else {
            std::ptr::null_mut()
        }
    }

    /// The first version at or after `target` in internal-key order.
    pub fn seek(&self, target: Target<'_>) -> Position {
        let node = self.seek_node(target.user_key);
        // SAFETY: a published node of this list (or null), alive with it.
        unsafe {
            if !node.is_null() && crate::internal_key::user_key(key(node)) == target.user_key {
                Self::within(node, target.trailer)
            } else {
                Position::at_node(node)
            }
        }
    }

    /// The newest version of `node`'s key whose trailer is at most `max_trailer` (for a
    /// snapshot: its sequence number with [`crate::internal_key::KIND_SEEK`]), or null.
    ///
    /// # Safety
    /// `node` is a published node of this list.
    pub unsafe fn version_at(&self, node: Node, max_trailer: u64) -> Node {
        let p = Self::within(node, max_trailer);
        if p.node == node {
            p.at
        } else {
            std::ptr::null_mut()
        }
    }

    /// The first version of `node`'s key whose trailer is at most `max_trailer`, or, if
    /// none is, the first version of the next key: the versions newer than it are walked
    /// past, and past the oldest of them the walk jumps to the next key's node.
    ///
    /// # Safety
    /// `node` is a published node of this list.
    unsafe fn within(node: Node, max_trailer: u64) -> Position {
        if max_trailer < oldest(node).load(Ordering::Acquire) {
            return Position::at_node(next(node, 0));
        }
        let mut p = Position::at_node(node);
        while p.node == node && trailer(p.at) > max_trailer {
            p.advance();
        }
        p
    }

    /// The first version of the first key (invalid if the list is empty).
    pub fn first(&self) -> Position {
        // SAFETY: the head has every level; its next is null or a published node.
        unsafe { Position::at_node(next(self.head, 0)) }
    }

    /// Inserts an entry whose internal key is `user_key` followed by `trailer`. Safe to call
    /// from several threads at once; readers see the entry once this returns (and may see
    /// it earlier, complete). Returns the node of its user key (a new one, or the one it
    /// joined as a version) and the bytes the entry took from the arena.
    pub fn insert(&self, user_key: &[u8], trailer: u64, value: &[u8]) -> (Node, usize) {
        let height = random_height();
        let (node, taken) = self.new_node(user_key, trailer, value, height);
        let splice = self.splice(user_key, height);
        (self.link(node, height, user_key, splice), taken)
    }

    /// Inserts a version of the key of `node` (which holds `user_key`), with no search:
    /// onto its chain. As safe to call concurrently as [`SkipList::insert`]. Returns the
    /// bytes it took from the arena.
    ///
    /// # Safety
    /// `node` is a published node of this list.
    pub unsafe fn insert_version(
        &self,
        node: Node,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
    ) -> usize {
        debug_assert_eq!(crate::internal_key::user_key(key(node)), user_key);
        let (record, taken) = self.new_node(user_key, trailer, value, 1);
        self.push_version(node, record);
        taken
    }

    /// Links `record` (a fresh node, its own chain empty) into `node`'s chain, before the
    /// first record whose trailer is not above its own.
    ///
    /// # Safety
    /// `node` is a published node of this list; `record` a node of it not linked anywhere.
    unsafe fn push_version(&self, node: Node, record: Node) {
        let t = trailer(record);
        // Before the record is linked: a reader that finds it finds the bound lowered. (A
        // reader at a snapshot sees every version at or below it, and so this bound.)
        oldest(node).fetch_min(t, Ordering::AcqRel);
        let mut link = versions(node);
        loop {
            let cur = link.load(Ordering::Acquire);
            if !cur.is_null() && trailer(cur) > t {
                link = slot(cur, 0);
                continue;
            }
            slot(record, 0).store(cur, Ordering::Relaxed);
            if link
                .compare_exchange(cur, record, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                break;
            }
            // Another version was linked here first: look at this link again.
        }
        self.len.fetch_add(1, Ordering::Relaxed);
    }

    /// A node of `height` levels holding the entry, not yet linked, and the arena bytes it
    /// took.
    fn new_node(
        &self,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
        height: usize,
    ) -> (Node, usize) {
        let key_len = user_key.len() + TRAILER_LEN;
        let inline = value.len() <= INLINE_VALUE_MAX;
        let body = key_len + if inline { value.len() } else { WORD };
        let size = (height * WORD + HEADER + body).next_multiple_of(WORD);
        let base = self.arena.alloc(Region::Nodes, size);
        let mut taken = size;
        let value_at = if inline {
            None
        } else {
            let bytes = value.len().next_multiple_of(WORD);
            taken += bytes;
            Some(self.arena.alloc(Region::Values, bytes))
        };
        // SAFETY: `base` is `size` bytes (and `value_at` a value's length) of fresh,
        // word-aligned arena memory that nothing else refers to until the node is linked
        // below.
        let node = unsafe {
            let node = base.add(height * WORD);
            for level in 0..height {
                slot(node, level).store(std::ptr::null_mut(), Ordering::Relaxed);
            }
            node.cast::<u32>().write(len_u32(key_len));
            node.cast::<u32>().add(1).write(len_u32(value.len()));
            versions(node).store(std::ptr::null_mut(), Ordering::Relaxed);
            oldest(node).store(trailer, Ordering::Relaxed);
            let k = node.add(HEADER);
            std::ptr::copy_nonoverlapping(user_key.as_ptr(), k, user_key.len());
            std::ptr::copy_nonoverlapping(
                trailer.to_le_bytes().as_ptr(),
                k.add(user_key.len()),
                TRAILER_LEN,
            );
            let v = match value_at {
                None => k.add(key_len),
                Some(v) => {
                    k.add(key_len).cast::<*mut u8>().write_unaligned(v);
                    v
                }
            };
            std::ptr::copy_nonoverlapping(value.as_ptr(), v, value.len());
            node
        };
        (node, taken)
    }

    /// The neighbours the node of `user_key` goes between at every level up to `height`,
    /// found by one search from the top (raising the list's height to `height` first).
    fn splice(&self, user_key: &[u8], height: usize) -> Splice {
        let target = Target {
            user_key,
            trailer: u64::MAX,
        };
        let mut top = self.height.load(Ordering::Relaxed);
        while height > top {
            match self.height.compare_exchange_weak(
                top,
                height,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => top = height,
                Err(now) => top = now,
            }
        }
        // The node's neighbours at every level, found by one search from the top.
        let mut prev = [self.head; MAX_HEIGHT];
        let mut succ = [std::ptr::null_mut(); MAX_HEIGHT];
        let mut x = self.head;
        for level in (0..top).rev() {
            (prev[level], succ[level]) = self.find_at(target, x, level);
            x = prev[level];
        }
        Splice { prev, succ }
    }

    /// Links `node` (of `height` levels, holding `user_key`) between the neighbours of
    /// `splice`, from the bottom up, so that a node reachable at a level is already in
    /// every level below it; or, if the list has a node of `user_key` already, into that
    /// node's chain. Returns the node of the key. The splice may be stale: other inserts
    /// may have linked nodes into it since.
    fn link(&self, node: Node, height: usize, user_key: &[u8], splice: Splice) -> Node {
        let target = Target {
            user_key,
            trailer: u64::MAX,
        };
        let Splice { mut prev, mut succ } = splice;
        for level in 0..height {
            loop {
                if level == 0 && !succ[0].is_null() {
                    // SAFETY: a published node of this list; `node` is linked nowhere yet.
                    unsafe {
                        if crate::internal_key::user_key(key(succ[0])) == user_key {
                            self.push_version(succ[0], node);
                            return succ[0];
                        }
                    }
                }
                // SAFETY: `node` has `height` levels; `prev[level]` is the head or a node
                // found at `level`.
                let won = unsafe {
                    slot(node, level).store(succ[level], Ordering::Relaxed);
                    slot(prev[level], level)
                        .compare_exchange(succ[level], node, Ordering::Release, Ordering::Relaxed)
                        .is_ok()
                };
                if won {
                    break;
                }
                // Another insert linked a node between them: search this level again from
                // the same predecessor, which still precedes the target.
                (prev[level], succ[level]) = self.find_at(target, prev[level], level);
            }
        }
        self.len.fetch_add(1, Ordering::Relaxed);
        node
    }

    /// At `level`, starting from `from` (which precedes `target`), the last node before
    /// `target` and the node after it (null at the end).
    fn find_at(&self, target: Target<'_>, from: Node, level: usize) -> (Node, Node) {
        let mut x = from;
        loop {
            // SAFETY: `x` is the head or a node reached at `level`.
            let n = unsafe { next(x, level) };
            // SAFETY: a non-null next pointer is a published node.
            if n.is_null() || target.order_of(unsafe { key(n) }) != CmpOrdering::Less {
                return (x, n);
            }
            x = n;
        }
    }
}

/// A key's or value's length as the node's header stores it. `Options::max_key_size` and
/// `max_value_size` are validated below 4 GiB, so a longer one is a bug, not an input.
fn len_u32(len: usize) -> u32 {
    u32::try_from(len).expect("a memtable entry's key or value is shorter than 4 GiB")
}

/// A tower height: 1 with probability 3/4, each level above with 1/4 of the one below
/// (LevelDB's branching factor).
fn random_height() -> usize {
    thread_local! {
        /// A per-thread xorshift state: heights need no more than independent fair bits.
        static STATE: std::cell::Cell<u64> = {
            static SEED: AtomicUsize = AtomicUsize::new(0);
            let n = SEED.fetch_add(1, Ordering::Relaxed) as u64;
            std::cell::Cell::new((n + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        };
    }
    let bits = STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    });
    (1 + (bits as u32).trailing_zeros() as usize / 2).min(MAX_HEIGHT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_key::{cmp_internal, make_internal_key, pack_trailer, ValueKind};
    use proptest::prelude::*;

    fn walk(list: &SkipList) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = vec![];
        let mut p = list.first();
        while p.valid() {
            // SAFETY: published nodes of `list`.
            unsafe {
                out.push((key(p.at).to_vec(), value(p.at).to_vec()));
                p.advance();
            }
        }
        out
    }

    proptest! {
        /// Any inserts read back in internal-key order, and a seek lands where a sorted
        /// model's lower bound does.
        #[test]
        fn matches_a_sorted_model(
            entries in proptest::collection::vec(
                (proptest::collection::vec(0u8..4, 0..6), 1u64..50, proptest::collection::vec(any::<u8>(), 0..300)),
                0..200,
            ),
            seeks in proptest::collection::vec((proptest::collection::vec(0u8..4, 0..6), 0u64..60), 1..20),
        ) {
            let list = SkipList::new(None);
            let mut model: Vec<(Vec<u8>, Vec<u8>)> = vec![];
            for (i, (k, seq, v)) in entries.iter().enumerate() {
                // Distinct sequence numbers, as the write path assigns them.
                let seq = seq * 1000 + i as u64;
                list.insert(k, pack_trailer(seq, ValueKind::Value), v);
                model.push((make_internal_key(k, seq, ValueKind::Value), v.clone()));
            }
            model.sort_by(|a, b| cmp_internal(&a.0, &b.0));
            prop_assert_eq!(walk(&list), model.clone());
            prop_assert_eq!(list.len(), model.len());
            for (k, seq) in seeks {
                let t = make_internal_key(&k, seq * 1000, ValueKind::Pointer);
                let want = model.iter().find(|(m, _)| cmp_internal(m, &t) != CmpOrdering::Less);
                let got = list.seek(Target::of(&t));
                // SAFETY: a published node of `list`.
                let got = got.valid().then(|| unsafe { key(got.at).to_vec() });
                prop_assert_eq!(got, want.map(|(k, _)| k.clone()));
                // The newest version at or below the seek's sequence number, by the key's
                // node: what a point lookup at that snapshot answers.
                let node = list.find(&k);
                let want = model
                    .iter()
                    .find(|(m, _)| user_key(m) == k.as_slice() && cmp_internal(m, &t) != CmpOrdering::Less);
                // SAFETY: a published node of `list`, when not null.
                let got = (!node.is_null())
                    .then(|| unsafe { list.version_at(node, Target::of(&t).trailer) })
                    .filter(|v| !v.is_null())
                    // SAFETY: as above.
                    .map(|v| unsafe { key(v).to_vec() });
                prop_assert_eq!(got, want.map(|(k, _)| k.clone()));
            }
        }
    }

    #[test]
    fn concurrent_inserts_keep_every_entry_in_order() {
        let list = SkipList::new(None);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let list = &list;
                s.spawn(move || {
                    for i in 0..5000u64 {
                        // Interleaved keys, so that threads race for the same neighbours.
                        let k = format!("{:06}", i * 4 + t);
                        let seq = t * 10_000 + i + 1;
                        list.insert(
                            k.as_bytes(),
                            pack_trailer(seq, ValueKind::Value),
                            k.as_bytes(),
                        );
                    }
                });
            }
        });
        let got = walk(&list);
        assert_eq!(got.len(), 20_000);
        for (i, (k, v)) in got.iter().enumerate() {
            assert_eq!(user_key(k), format!("{i:06}").as_bytes());
            assert_eq!(v.as_slice(), user_key(k));
        }
    }

    #[test]
    fn readers_during_inserts_see_an_ordered_list_holding_every_published_entry() {
        const N: u64 = 50_000;
        let list = SkipList::new(None);
        let name = |i: u64, t: u64| format!("{:08}", i * 2 + t);
        // Per writer, how many of its entries are inserted (published after each insert).
        let done = [AtomicUsize::new(0), AtomicUsize::new(0)];
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (list, done) = (&list, &done);
                s.spawn(move || {
                    // Interleaved keys in the same order: the two race for the same
                    // neighbours all along.
                    for i in 0..N {
                        let n = i;
                        let k = name(i, t);
                        let v = vec![t as u8; (i % 300) as usize];
                        list.insert(
                            k.as_bytes(),
                            pack_trailer(i * 2 + t + 1, ValueKind::Value),
                            &v,
                        );
                        done[t as usize].store(n as usize + 1, Ordering::Release);
                    }
                });
            }
            let (list, done) = (&list, &done);
            s.spawn(move || {
                let mut probe = 1u64;
                while done.iter().any(|d| d.load(Ordering::Acquire) < N as usize) {
                    // Every entry a writer published is found by a seek, whole.
                    for t in 0..2u64 {
                        let n = done[t as usize].load(Ordering::Acquire) as u64;
                        if n == 0 {
                            continue;
                        }
                        probe = probe.wrapping_mul(6364136223846793005).wrapping_add(1);
                        let i = probe % n;
                        let k = name(i, t);
                        let p = list.seek(Target {
                            user_key: k.as_bytes(),
                            trailer: u64::MAX,
                        });
                        assert!(p.valid(), "published entry {k} not found");
                        // SAFETY: a published node of `list`.
                        let (got_k, got_v) = unsafe { (key(p.at), value(p.at)) };
                        assert_eq!(user_key(got_k), k.as_bytes());
                        assert_eq!(got_v, vec![t as u8; (i % 300) as usize].as_slice());
                    }
                    // A walk sees strictly ascending keys at any moment.
                    let mut n = list.first();
                    let mut prev: Option<&[u8]> = None;
                    while n.valid() {
                        // SAFETY: published nodes of `list`.
                        let k = unsafe { key(n.at) };
                        if let Some(p) = prev {
                            assert_eq!(cmp_internal(p, k), CmpOrdering::Less);
                        }
                        prev = Some(k);
                        // SAFETY: as above.
                        unsafe { n.advance() };
                    }
                }
            });
        });
        assert_eq!(walk(&list).len(), 2 * N as usize);
    }

    #[test]
    fn an_insert_whose_neighbours_changed_after_its_search_still_links_in_order() {
        let list = SkipList::new(None);
        let t = |k: &'static [u8]| Target {
            user_key: k,
            trailer: pack_trailer(1, ValueKind::Value),
        };
        for k in [&b"a"[..], b"d"] {
            list.insert(k, t(k).trailer, k);
        }
        // `b` searches, finding `a` and `d` around it at every level...
        let (b, _) = list.new_node(b"b", t(b"b").trailer, b"b", 3);
        let stale = list.splice(b"b", 3);
        // ... then `c` (after `b`) and `a0` (before it) are linked between them first.
        for k in [&b"c"[..], b"a0"] {
            let (n, _) = list.new_node(k, t(k).trailer, k, 3);
            let splice = list.splice(k, 3);
            list.link(n, 3, k, splice);
        }
        list.link(b, 3, b"b", stale);
        let keys: Vec<Vec<u8>> = walk(&list)
            .into_iter()
            .map(|(k, _)| user_key(&k).to_vec())
            .collect();
        assert_eq!(keys, [&b"a"[..], b"a0", b"b", b"c", b"d"]);
        // Every level is in order too: a seek from the top finds each key.
        for k in [&b"a"[..], b"a0", b"b", b"c", b"d"] {
            // SAFETY: a published node of `list`.
            assert_eq!(unsafe { user_key(key(list.seek(t(k)).at)) }, k);
        }
    }

    #[test]
    fn an_insert_that_finds_its_key_linked_since_its_search_joins_its_chain() {
        let list = SkipList::new(None);
        list.insert(b"a", pack_trailer(1, ValueKind::Value), b"a1");
        // The second `b` searches before the first is linked...
        let (late, _) = list.new_node(b"b", pack_trailer(3, ValueKind::Value), b"b3", 2);
        let stale = list.splice(b"b", 2);
        let (first, _) = list.insert(b"b", pack_trailer(2, ValueKind::Value), b"b2");
        // ... and becomes a version of it, ahead of the older one.
        assert_eq!(list.link(late, 2, b"b", stale), first);
        let got: Vec<(Vec<u8>, Vec<u8>)> = walk(&list);
        let want: Vec<(Vec<u8>, Vec<u8>)> = [
            (&b"a"[..], 1, &b"a1"[..]),
            (b"b", 3, b"b3"),
            (b"b", 2, b"b2"),
        ]
        .into_iter()
        .map(|(k, s, v)| (make_internal_key(k, s, ValueKind::Value), v.to_vec()))
        .collect();
        assert_eq!(got, want);
        assert_eq!(list.len(), 3);
    }

    #[test]
    fn a_seek_below_a_keys_oldest_version_lands_on_the_next_key() {
        let list = SkipList::new(None);
        for seq in [5u64, 9, 7, 3] {
            list.insert(b"a", pack_trailer(seq, ValueKind::Value), b"");
        }
        list.insert(b"b", pack_trailer(1, ValueKind::Value), b"");
        let at = |seq| {
            let p = list.seek(Target::of(&make_internal_key(
                b"a",
                seq,
                ValueKind::Pointer,
            )));
            // SAFETY: a published node of `list`.
            let k = unsafe { key(p.at) };
            (
                user_key(k).to_vec(),
                u64::from_le_bytes(k[k.len() - 8..].try_into().unwrap()) >> 8,
            )
        };
        assert_eq!(at(0), (b"b".to_vec(), 1));
        assert_eq!(at(2), (b"b".to_vec(), 1));
        assert_eq!(at(3), (b"a".to_vec(), 3));
        assert_eq!(at(8), (b"a".to_vec(), 7));
        // SAFETY: the node of `a`.
        assert!(
            unsafe { list.version_at(list.find(b"a"), pack_trailer(2, ValueKind::Pointer)) }
                .is_null()
        );
    }

    #[test]
    fn concurrent_versions_of_the_same_keys_keep_their_order() {
        let list = SkipList::new(None);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let list = &list;
                s.spawn(move || {
                    for i in 0..3000u64 {
                        // Ten keys, each written by every thread: new keys race to be
                        // linked, versions race onto the same chains.
                        let k = format!("{:02}", (i * 7 + t) % 10);
                        let seq = i * 4 + t + 1;
                        list.insert(k.as_bytes(), pack_trailer(seq, ValueKind::Value), b"");
                    }
                });
            }
        });
        let got = walk(&list);
        assert_eq!(got.len(), 12_000);
        assert_eq!(list.len(), 12_000);
        for w in got.windows(2) {
            assert_eq!(cmp_internal(&w[0].0, &w[1].0), CmpOrdering::Less);
        }
    }

    #[test]
    fn a_large_value_gets_a_chunk_of_its_own_and_reads_back() {
        let list = SkipList::new(None);
        let big = vec![9u8; 3 * CHUNK];
        list.insert(b"b", pack_trailer(2, ValueKind::Value), &big);
        list.insert(b"a", pack_trailer(1, ValueKind::Value), b"small");
        let got = walk(&list);
        assert_eq!(got[0].1, b"small");
        assert_eq!(got[1].1, big);
    }
}
