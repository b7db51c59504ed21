//! Range scans: a merging iterator over the memtables and every level, reduced to the
//! newest visible version of each user key, tombstones hidden, pointers resolved (their
//! values read ahead of the caller in windows: [`super::readahead`]). Scans go either way
//! ([`Direction`]); a [`Cursor`] moves both ways and seeks anywhere.

use super::inner::{Inner, ReadView};
use super::readahead::{Entry, Readahead, Taken};
use super::Snapshot;
use crate::error::{Error, Result};
use crate::internal_key::{
    cmp_internal, pack_trailer, parse_internal_key, seek_key, SeqNo, ValueKind, MAX_SEQ,
    TRAILER_LEN,
};
use crate::io::IoCause;
use crate::options::ReadOptions;
use crate::sst::{InternalIterator, MergingIterator, TableIter};
use crate::version::{TableFile, Version};
use crate::vlog::{BlobFile, ValuePointer};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Concatenation of the disjoint, sorted files of one level >= 1, opening files lazily.
pub(crate) struct LevelIter {
    files: Vec<Arc<TableFile>>,
    idx: usize,
    cur: Option<TableIter>,
    cause: IoCause,
}

impl LevelIter {
    pub fn new(files: Vec<Arc<TableFile>>, cause: IoCause) -> Self {
        LevelIter {
            files,
            idx: 0,
            cur: None,
            cause,
        }
    }

    fn open(&mut self, idx: usize) -> Result<()> {
        self.idx = idx;
        self.cur = match self.files.get(idx) {
            Some(f) => Some(f.table()?.iter(self.cause)),
            None => None,
        };
        Ok(())
    }

    /// Moves to the next files while the current one is exhausted.
    fn skip_empty(&mut self) -> Result<()> {
        while self.cur.as_ref().is_some_and(|c| !c.valid()) {
            self.open(self.idx + 1)?;
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Moves to the files before while the current one is exhausted walking backward.
    fn skip_empty_backward(&mut self) -> Result<()> {
        while self.cur.as_ref().is_some_and(|c| !c.valid()) {
            if self.idx == 0 {
                self.cur = None;
                return Ok(());
            }
            self.open(self.idx - 1)?;
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.cur.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(c) = self.cur.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_empty()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = self
            .files
            .partition_point(|f| cmp_internal(&f.meta.largest, target).is_lt());
        self.open(i)?;
        if let Some(c) = self.cur.as_mut() {
            c.seek(target)?;
        }
        self.skip_empty()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.cur.as_mut() {
            c.next()?;
        }
        self.skip_empty()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        match self.files.len() {
            0 => self.cur = None,
            n => {
                self.open(n - 1)?;
                if let Some(c) = self.cur.as_mut() {
                    c.seek_to_last()?;
                }
            }
        }
        self.skip_empty_backward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.cur.as_mut() {
            c.prev()?;
        }
        self.skip_empty_backward()
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().expect("valid").key()
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().expect("valid").value()
    }
}

/// One iterator per memtable, per L0 file and per sorted run of a deeper level.
pub(crate) fn children(view: &ReadView, cause: IoCause) -> Result<Vec<Box<dyn InternalIterator>>> {
    let mut c: Vec<Box<dyn InternalIterator>> = Vec::new();
    for m in &view.mems {
        c.push(Box::new(m.iter()));
    }
    let v: &Version = &view.version;
    for f in &v.levels[0] {
        c.push(Box::new(f.table()?.iter(cause)));
    }
    for level in 1..v.num_levels() {
        for run in v.runs(level) {
            c.push(Box::new(LevelIter::new(run.clone(), cause)));
        }
    }
    Ok(c)
}

/// A visible entry: user key, kind, raw value (a pointer is not resolved).
type RawEntry = (Vec<u8>, ValueKind, Vec<u8>);

/// Versions of one user key stepped over one by one before the walk seeks past them
/// instead (RocksDB's `max_sequential_skip_in_iterations`, 8): a key rewritten many times
/// within a memtable (a counter, a hot key) would otherwise cost a scan one step per
/// version, and the server's expiry sweep scans all the time.
const MAX_SEQUENTIAL_SKIP: usize = 8;

/// Which way a walk goes over the keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Reverse,
}

/// The last internal key `user_key` can have (sequence number 0, the smallest kind): a
/// reverse seek to it lands on the key's oldest version, with every version of it ahead.
fn last_internal_key(user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&pack_trailer(0, ValueKind::Deletion).to_le_bytes());
    k
}

/// Walks the newest visible version of each user key, either way.
struct Visible {
    merged: MergingIterator,
    seq: SeqNo,
    /// The wall-clock time the walk judges expiry at (taken once, when the walk starts, so
    /// that one scan sees one state).
    now_ms: u64,
    /// Walking forward: the user key last passed (its older versions are skipped).
    last_key: Option<Vec<u8>>,
    /// Versions of the same user key skipped in a row, and that key.
    skipped: usize,
    skipping: Vec<u8>,
    /// Seeks made instead of stepping ([`MAX_SEQUENTIAL_SKIP`]).
    reseeks: u64,
    /// Walking backward: the value of the newest visible version met so far of the key
    /// being walked (versions come oldest first that way).
    value: Vec<u8>,
    /// The range walked: a step stops at its far end even while it passes over
    /// tombstones, instead of running on to the next live entry beyond it.
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    /// [`ReadOptions::max_skipped`]: entries the walk may pass over (0: any number), and
    /// how many it has since it was positioned.
    max_skipped: usize,
    passed: usize,
    /// The walk stopped at `max_skipped`, not at the end of the range.
    cut: bool,
}

impl Visible {
    fn new(merged: MergingIterator, seq: SeqNo, now_ms: u64) -> Visible {
        Visible {
            merged,
            seq,
            now_ms,
            last_key: None,
            skipped: 0,
            skipping: Vec::new(),
            reseeks: 0,
            value: Vec::new(),
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            max_skipped: 0,
            passed: 0,
            cut: false,
        }
    }

    /// Whether the walk has passed over as many entries as it may.
    fn skipped_enough(&mut self) -> bool {
        self.cut = self.max_skipped != 0 && self.passed >= self.max_skipped;
        self.cut
    }

    /// Positions the walk to go `dir` from `from` (from that end when unbounded).
    fn position(&mut self, dir: Direction, from: Bound<&[u8]>) -> Result<()> {
        self.last_key = None;
        self.skipped = 0;
        self.skipping.clear();
        self.passed = 0;
        self.cut = false;
        match (dir, from) {
            (Direction::Forward, Bound::Unbounded) => self.merged.seek_to_first(),
            (Direction::Forward, Bound::Included(k)) => self.merged.seek(&seek_key(k, self.seq)),
            (Direction::Forward, Bound::Excluded(k)) => {
                self.merged.seek(&seek_key(k, self.seq))?;
                self.last_key = Some(k.to_vec());
                Ok(())
            }
            (Direction::Reverse, Bound::Unbounded) => self.merged.seek_to_last(),
            (Direction::Reverse, Bound::Included(k)) => {
                self.merged.seek_for_prev(&last_internal_key(k))
            }
            // No entry has the largest sequence number: this lands before all of `k`.
            (Direction::Reverse, Bound::Excluded(k)) => {
                self.merged.seek_for_prev(&seek_key(k, MAX_SEQ))
            }
        }
    }

    /// Next live entry as (user key, kind, raw value), tombstones and expired entries
    /// skipped (an expired entry hides the older versions of its key, as a tombstone does);
    /// an expiring entry's time is split off (the kind is `Value` or `Pointer`).
    fn next_entry(&mut self) -> Result<Option<RawEntry>> {
        while self.merged.valid() {
            if self.skipped_enough() {
                return Ok(None);
            }
            let ikey = self.merged.key();
            let p = parse_internal_key(ikey)
                .ok_or_else(|| Error::corruption("<scan>", "malformed internal key"))?;
            if !within(&self.upper, p.user_key, true) {
                return Ok(None);
            }
            let newer = p.seq > self.seq;
            if newer || self.last_key.as_deref() == Some(p.user_key) {
                if self.skipping != p.user_key {
                    self.skipping.clear();
                    self.skipping.extend_from_slice(p.user_key);
                    self.skipped = 0;
                }
                self.skipped += 1;
                self.passed += 1;
                if self.skipped > MAX_SEQUENTIAL_SKIP {
                    // Versions sort newest first: past the snapshot's newer ones lies the
                    // version it sees; past sequence number 0, the next user key.
                    let target = seek_key(p.user_key, if newer { self.seq } else { 0 });
                    self.skipped = 0;
                    self.reseeks += 1;
                    self.merged.seek(&target)?;
                } else {
                    self.merged.next()?;
                }
                continue;
            }
            // The buffer is reused: a scan of short entries spent a tenth of its time in
            // the allocator.
            match &mut self.last_key {
                Some(k) => {
                    k.clear();
                    k.extend_from_slice(p.user_key);
                }
                None => self.last_key = Some(p.user_key.to_vec()),
            }
            let out = self.live(p.user_key, p.kind, self.merged.value())?;
            self.merged.next()?;
            if out.is_some() {
                return Ok(out);
            }
            self.passed += 1;
        }
        Ok(None)
    }

    /// The entry before, walking backward, as [`Visible::next_entry`] gives them forward.
    /// Walking backward a key's versions come oldest first: the visible one is the last of
    /// them at or below the snapshot. Past [`MAX_SEQUENTIAL_SKIP`] versions of one key the
    /// walk seeks to the visible one and then before the key instead (RocksDB's
    /// `FindValueForCurrentKeyUsingSeek`).
    fn prev_entry(&mut self) -> Result<Option<RawEntry>> {
        let malformed = || Error::corruption("<scan>", "malformed internal key");
        while self.merged.valid() {
            let user_key = parse_internal_key(self.merged.key())
                .ok_or_else(malformed)?
                .user_key
                .to_vec();
            if !within(&self.lower, &user_key, false) || self.skipped_enough() {
                return Ok(None);
            }
            let mut found = None;
            let mut steps = 0;
            while self.merged.valid() {
                let p = parse_internal_key(self.merged.key()).ok_or_else(malformed)?;
                if p.user_key != user_key {
                    break;
                }
                if p.seq <= self.seq {
                    found = Some(p.kind);
                    self.value.clear();
                    self.value.extend_from_slice(self.merged.value());
                }
                steps += 1;
                if steps > MAX_SEQUENTIAL_SKIP {
                    self.reseeks += 1;
                    self.merged.seek(&seek_key(&user_key, self.seq))?;
                    found = None;
                    if self.merged.valid() {
                        let p = parse_internal_key(self.merged.key()).ok_or_else(malformed)?;
                        if p.user_key == user_key {
                            found = Some(p.kind);
                            self.value.clear();
                            self.value.extend_from_slice(self.merged.value());
                        }
                    }
                    self.merged.seek_for_prev(&seek_key(&user_key, MAX_SEQ))?;
                    break;
                }
                self.merged.prev()?;
            }
            if let Some(kind) = found {
                let value = std::mem::take(&mut self.value);
                let out = self.live(&user_key, kind, &value);
                self.value = value;
                if let Some(e) = out? {
                    // Its older versions were passed over.
                    self.passed += steps.saturating_sub(1);
                    return Ok(Some(e));
                }
            }
            self.passed += steps.max(1);
        }
        Ok(None)
    }

    /// The entry of the visible version `(kind, value)` of `user_key`, unless it is a
    /// tombstone or expired.
    fn live(&self, user_key: &[u8], kind: ValueKind, value: &[u8]) -> Result<Option<RawEntry>> {
        let s = crate::expiry::split(kind, value).ok_or_else(|| {
            Error::corruption("<scan>", "expiring entry shorter than its expiry time")
        })?;
        let live = s.kind != ValueKind::Deletion && !s.expired(self.now_ms);
        Ok(live.then(|| (user_key.to_vec(), s.kind, s.payload.to_vec())))
    }
}

/// Whether `key` lies on the inner side of bound `b` (an upper bound if `upper`).
fn within(b: &Bound<Vec<u8>>, key: &[u8], upper: bool) -> bool {
    match b {
        Bound::Unbounded => true,
        Bound::Included(k) if upper => key <= k.as_slice(),
        Bound::Excluded(k) if upper => key < k.as_slice(),
        Bound::Included(k) => key >= k.as_slice(),
        Bound::Excluded(k) => key > k.as_slice(),
    }
}

/// The tighter of a range's bound `range` and a start `from` on the same side (lower
/// bounds if `!upper`).
fn tighter<'a>(range: &'a Bound<Vec<u8>>, from: Bound<&'a [u8]>, upper: bool) -> Bound<&'a [u8]> {
    let range = match range {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    };
    let key = |b: &Bound<&'a [u8]>| match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(*k),
        Bound::Unbounded => None,
    };
    match (key(&range), key(&from)) {
        (None, _) => from,
        (_, None) => range,
        (Some(r), Some(f)) => {
            let pick_range = if r == f {
                matches!(range, Bound::Excluded(_))
            } else {
                (r < f) == upper
            };
            if pick_range {
                range
            } else {
                from
            }
        }
    }
}

/// A walk over the visible entries of a range in one direction, taken from one view of
/// the tree (a snapshot's, or the newest at its creation), its separated values read
/// ahead of the caller in windows ([`super::readahead`]).
struct Walk {
    inner: Arc<Inner>,
    visible: Visible,
    version: Arc<Version>,
    pinned: Option<Arc<BTreeMap<u64, Arc<BlobFile>>>>,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    dir: Direction,
    opts: ReadOptions,
    /// Entries taken from the tree ahead of the caller, their values read.
    readahead: Readahead,
    /// The tree walk reached the end of the range (or an error): nothing more to take.
    walked: bool,
}

impl Walk {
    /// A walk over `[lower, upper]` (as the bounds say), not positioned yet.
    fn new(
        inner: &Arc<Inner>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        snap: Option<&Snapshot>,
        opts: &ReadOptions,
    ) -> Result<Walk> {
        let view = ReadView::take(inner);
        let seq = snap.map_or_else(|| inner.visible_seq.load(Ordering::Acquire), |s| s.seq());
        let merged = MergingIterator::new(children(&view, IoCause::ClientRead)?);
        let mut visible = Visible::new(merged, seq, inner.now_ms());
        visible.lower = lower.map(<[u8]>::to_vec);
        visible.upper = upper.map(<[u8]>::to_vec);
        visible.max_skipped = opts.max_skipped;
        Ok(Walk {
            inner: inner.clone(),
            visible,
            version: view.version.clone(),
            pinned: snap.map(|s| Arc::new(s.blobs().clone())),
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
            dir: Direction::Forward,
            opts: *opts,
            readahead: Readahead::new(opts),
            walked: true,
        })
    }

    /// Starts walking `dir` from `from`, kept within the range.
    fn start(&mut self, dir: Direction, from: Bound<&[u8]>) -> Result<()> {
        self.dir = dir;
        self.readahead = Readahead::new(&self.opts);
        self.walked = true;
        let from = match dir {
            Direction::Forward => tighter(&self.lower, from, false),
            Direction::Reverse => tighter(&self.upper, from, true),
        };
        self.visible.position(dir, from)?;
        self.walked = false;
        Ok(())
    }

    fn step(&mut self) -> Result<Option<Entry>> {
        if let Some(e) = self.readahead.pop() {
            return e.map(Some);
        }
        if self.walked {
            return Ok(None);
        }
        self.refill();
        self.readahead.pop().transpose()
    }

    /// Takes the next window of entries within the range from the tree (at least one) and
    /// reads their values. Entries whose values are in the tree have nothing to read ahead:
    /// until the window holds a separated value it ends after one entry, so a short scan
    /// over inline values (a list pop, a small range) walks no further than it returns.
    fn refill(&mut self) {
        let window = self.readahead.window();
        let mut taken: Vec<Taken> = Vec::new();
        let mut bytes = 0;
        let mut separated = false;
        let mut error = None;
        while taken.is_empty() || (separated && bytes < window) {
            let next = match self.dir {
                Direction::Forward => self.visible.next_entry(),
                Direction::Reverse => self.visible.prev_entry(),
            };
            let (key, kind, value) = match next {
                Ok(Some(e)) => e,
                Ok(None) => {
                    self.walked = true;
                    break;
                }
                Err(e) => {
                    error = Some(e);
                    self.walked = true;
                    break;
                }
            };
            let inside = match self.dir {
                Direction::Forward => within(&self.upper, &key, true),
                Direction::Reverse => within(&self.lower, &key, false),
            };
            if !inside {
                self.walked = true;
                break;
            }
            let t = Taken::new(&self.inner, key, kind, value);
            bytes += t.bytes();
            separated |= t.is_separated();
            taken.push(t);
        }
        self.readahead.fill(
            &self.inner,
            &self.version,
            self.pinned.as_deref(),
            taken,
            error,
        );
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        crate::stats::EngineCounters::add(&self.inner.counters.scan_reseeks, self.visible.reseeks);
    }
}

/// Iterator over `(key, value)` pairs of a range, in key order (ascending, or descending
/// for a reverse scan).
pub struct DbIter {
    walk: Walk,
    done: bool,
}

impl DbIter {
    pub(crate) fn new(
        inner: &Arc<Inner>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        snap: Option<&Snapshot>,
        opts: &ReadOptions,
        dir: Direction,
    ) -> Result<DbIter> {
        let mut walk = Walk::new(inner, lower, upper, snap, opts)?;
        walk.start(dir, Bound::Unbounded)?;
        Ok(DbIter { walk, done: false })
    }

    /// Whether the scan ended because it passed over [`ReadOptions::max_skipped`] entries
    /// (tombstones, expired entries, older versions) rather than at the end of its range:
    /// live entries may remain beyond where it stopped.
    pub fn cut_short(&self) -> bool {
        self.walk.visible.cut
    }
}

impl Iterator for DbIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.walk.step() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// A cursor over the visible entries of a range that moves both ways and seeks to any key
/// (RocksDB's `Iterator`: `Seek`, `SeekForPrev`, `Next`, `Prev`), all from one view of the
/// tree: every move sees the same state, whatever is written meanwhile. Not positioned
/// until the first seek. Turning around repositions the walk just past the current key.
pub struct Cursor {
    walk: Walk,
    current: Option<Entry>,
}

impl Cursor {
    pub(crate) fn new(
        inner: &Arc<Inner>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        snap: Option<&Snapshot>,
        opts: &ReadOptions,
    ) -> Result<Cursor> {
        Ok(Cursor {
            walk: Walk::new(inner, lower, upper, snap, opts)?,
            current: None,
        })
    }

    fn go(&mut self, dir: Direction, from: Bound<&[u8]>) -> Result<()> {
        self.current = None;
        self.walk.start(dir, from)?;
        self.current = self.walk.step()?;
        Ok(())
    }

    /// To the first entry of the range.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.go(Direction::Forward, Bound::Unbounded)
    }

    /// To the last entry of the range.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.go(Direction::Reverse, Bound::Unbounded)
    }

    /// To the first entry at or after `key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.go(Direction::Forward, Bound::Included(key))
    }

    /// To the last entry at or before `key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        self.go(Direction::Reverse, Bound::Included(key))
    }

    /// To the entry after the current one (invalid past the last; nothing happens if it is
    /// not valid). A cursor move, as RocksDB names it, not `Iterator::next`: it returns no
    /// entry and pairs with [`Cursor::prev`].
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        self.step(Direction::Forward)
    }

    /// To the entry before the current one (invalid before the first).
    pub fn prev(&mut self) -> Result<()> {
        self.step(Direction::Reverse)
    }

    fn step(&mut self, dir: Direction) -> Result<()> {
        let Some((key, _)) = self.current.take() else {
            return Ok(());
        };
        if self.walk.dir == dir {
            self.current = self.walk.step()?;
            Ok(())
        } else {
            self.go(dir, Bound::Excluded(&key))
        }
    }

    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    /// The current key (`None` when not valid).
    pub fn key(&self) -> Option<&[u8]> {
        self.current.as_ref().map(|(k, _)| k.as_slice())
    }

    /// The current value (`None` when not valid).
    pub fn value(&self) -> Option<&[u8]> {
        self.current.as_ref().map(|(_, v)| v.as_slice())
    }
}

/// The user keys with a live value in `[lower, upper)`, without reading values.
pub(crate) fn live_keys(inner: &Arc<Inner>, lower: &[u8], upper: &[u8]) -> Result<Vec<Vec<u8>>> {
    let view = ReadView::take(inner);
    let mut v = Visible::new(
        MergingIterator::new(children(&view, IoCause::ClientRead)?),
        inner.visible_seq.load(Ordering::Acquire),
        inner.now_ms(),
    );
    v.position(Direction::Forward, Bound::Included(lower))?;
    let mut keys = Vec::new();
    while let Some((key, _, _)) = v.next_entry()? {
        if key.as_slice() >= upper {
            break;
        }
        keys.push(key);
    }
    Ok(keys)
}

/// Sum of key and value lengths of the newest visible versions, without reading values.
pub(crate) fn live_bytes(inner: &Arc<Inner>) -> Result<u64> {
    let view = ReadView::take(inner);
    let mut v = Visible::new(
        MergingIterator::new(children(&view, IoCause::Other)?),
        inner.visible_seq.load(Ordering::Acquire),
        inner.now_ms(),
    );
    v.merged.seek_to_first()?;
    let mut total = 0u64;
    while let Some((key, kind, value)) = v.next_entry()? {
        total += key.len() as u64;
        total += match kind {
            ValueKind::Pointer => ValuePointer::decode(&inner.dir, &value)?
                .0
                .value_len(key.len()),
            _ => value.len() as u64,
        };
    }
    Ok(total)
}
