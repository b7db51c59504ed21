//! Range scans: a merging iterator over the memtables and every level, reduced to the
//! newest visible version of each user key, tombstones hidden, pointers resolved (their
//! values read ahead of the caller in windows: [`super::readahead`]).

use super::inner::{Inner, ReadView};
use super::readahead::{Entry, Readahead, Taken};
use super::Snapshot;
use crate::error::{Error, Result};
use crate::io::IoCause;
use crate::options::ReadOptions;
use crate::sst::{InternalIterator, MergingIterator, TableIter};
use crate::types::seek_key;
use crate::types::{cmp_internal, parse_internal_key, SeqNo, ValueKind};
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

/// Walks the newest visible version of each user key.
struct Visible {
    merged: MergingIterator,
    seq: SeqNo,
    /// The wall-clock time the walk judges expiry at (taken once, when the walk starts, so
    /// that one scan sees one state).
    now_ms: u64,
    last_key: Option<Vec<u8>>,
    /// Versions of the same user key skipped in a row, and that key.
    skipped: usize,
    skipping: Vec<u8>,
    /// Seeks made instead of stepping ([`MAX_SEQUENTIAL_SKIP`]).
    reseeks: u64,
}

impl Visible {
    fn new(merged: MergingIterator, seq: SeqNo, now_ms: u64, last_key: Option<Vec<u8>>) -> Visible {
        Visible {
            merged,
            seq,
            now_ms,
            last_key,
            skipped: 0,
            skipping: Vec::new(),
            reseeks: 0,
        }
    }

    /// Next live entry as (user key, kind, raw value), tombstones and expired entries
    /// skipped (an expired entry hides the older versions of its key, as a tombstone does);
    /// an expiring entry's time is split off (the kind is `Value` or `Pointer`).
    fn next_entry(&mut self) -> Result<Option<RawEntry>> {
        while self.merged.valid() {
            let ikey = self.merged.key();
            let p = parse_internal_key(ikey)
                .ok_or_else(|| Error::corruption("<scan>", "malformed internal key"))?;
            let newer = p.seq > self.seq;
            if newer || self.last_key.as_deref() == Some(p.user_key) {
                if self.skipping != p.user_key {
                    self.skipping.clear();
                    self.skipping.extend_from_slice(p.user_key);
                    self.skipped = 0;
                }
                self.skipped += 1;
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
            let s = crate::expiry::split(p.kind, self.merged.value()).ok_or_else(|| {
                Error::corruption("<scan>", "expiring entry shorter than its expiry time")
            })?;
            let live = s.kind != ValueKind::Deletion && !s.expired(self.now_ms);
            let out = live.then(|| (p.user_key.to_vec(), s.kind, s.payload.to_vec()));
            self.merged.next()?;
            if out.is_some() {
                return Ok(out);
            }
        }
        Ok(None)
    }
}

/// Iterator over `(key, value)` pairs of a range, in key order.
pub struct DbIter {
    inner: Arc<Inner>,
    visible: Visible,
    version: Arc<Version>,
    pinned: Option<Arc<BTreeMap<u64, Arc<BlobFile>>>>,
    upper: Bound<Vec<u8>>,
    /// Entries taken from the tree ahead of the caller, their values read.
    readahead: Readahead,
    /// The tree walk reached the end of the range (or an error): nothing more to take.
    walked: bool,
    done: bool,
}

impl DbIter {
    pub(crate) fn new(
        inner: &Arc<Inner>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        snap: Option<&Snapshot>,
        opts: &ReadOptions,
    ) -> Result<DbIter> {
        let view = ReadView::take(inner);
        let seq = snap.map_or_else(|| inner.visible_seq.load(Ordering::Acquire), |s| s.seq());
        let mut merged = MergingIterator::new(children(&view, IoCause::ClientRead)?);
        let mut last_key = None;
        match lower {
            Bound::Unbounded => merged.seek_to_first()?,
            Bound::Included(k) => merged.seek(&seek_key(k, seq))?,
            Bound::Excluded(k) => {
                merged.seek(&seek_key(k, seq))?;
                last_key = Some(k.to_vec());
            }
        }
        Ok(DbIter {
            inner: inner.clone(),
            visible: Visible::new(merged, seq, inner.now_ms(), last_key),
            version: view.version.clone(),
            pinned: snap.map(|s| Arc::new(s.blobs().clone())),
            upper: match upper {
                Bound::Included(k) => Bound::Included(k.to_vec()),
                Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
                Bound::Unbounded => Bound::Unbounded,
            },
            readahead: Readahead::new(opts),
            walked: false,
            done: false,
        })
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
            let (key, kind, value) = match self.visible.next_entry() {
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
            let within = match &self.upper {
                Bound::Included(u) => key <= *u,
                Bound::Excluded(u) => key < *u,
                Bound::Unbounded => true,
            };
            if !within {
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

impl Drop for DbIter {
    fn drop(&mut self) {
        crate::stats::EngineCounters::add(&self.inner.counters.scan_reseeks, self.visible.reseeks);
    }
}

impl Iterator for DbIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
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

/// Sum of key and value lengths of the newest visible versions, without reading values.
pub(crate) fn live_bytes(inner: &Arc<Inner>) -> Result<u64> {
    let view = ReadView::take(inner);
    let mut v = Visible::new(
        MergingIterator::new(children(&view, IoCause::Other)?),
        inner.visible_seq.load(Ordering::Acquire),
        inner.now_ms(),
        None,
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
