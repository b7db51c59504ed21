//! Versions: the set of live table files per level and live value files, replaced
//! atomically by applying a [`VersionEdit`] recorded in the manifest ([`set`]).

pub mod edit;
pub mod purge;
pub mod set;

pub use edit::{FileMeta, VersionEdit};
pub use set::VersionSet;

use crate::cache::BlockCache;
use crate::error::Result;
use crate::internal_key::{cmp_internal, parse_internal_key, user_key, SeqNo, ValueKind};
use crate::io::{IoCause, Storage};
use crate::sst::{DataBlockCache, Table};
use crate::vlog::{BlobFile, IndexMap, ValuePointer};
use purge::{ObsoleteFile, Purger};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

/// A table file as versions hold it; deleted from disk when obsolete and unreferenced.
pub struct TableFile {
    pub meta: FileMeta,
    /// The sorted run of its level the file belongs to (levels >= 1; 0 unless tiered
    /// compaction wrote it). Recorded in the manifest, fixed for the file's life.
    pub run: u64,
    path: PathBuf,
    table: OnceLock<Arc<Table>>,
    obsolete: AtomicBool,
    /// Deletes the file once obsolete and unreferenced; without one (tools, tests, a
    /// closing database) the thread that lets go of it does.
    purger: OnceLock<Arc<Purger>>,
    storage: Arc<dyn Storage>,
    cache: Option<Arc<BlockCache>>,
}

impl TableFile {
    pub fn new(
        meta: FileMeta,
        dir: &Path,
        storage: Arc<dyn Storage>,
        cache: Option<Arc<BlockCache>>,
    ) -> Self {
        TableFile {
            path: crate::filename::table_file_name(dir, meta.number),
            run: 0,
            meta,
            table: OnceLock::new(),
            obsolete: AtomicBool::new(false),
            purger: OnceLock::new(),
            storage,
            cache,
        }
    }

    pub fn number(&self) -> u64 {
        self.meta.number
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn smallest_user_key(&self) -> &[u8] {
        user_key(&self.meta.smallest)
    }

    pub fn largest_user_key(&self) -> &[u8] {
        user_key(&self.meta.largest)
    }

    /// The open table, opened on first use.
    pub fn table(&self) -> Result<&Arc<Table>> {
        if let Some(t) = self.table.get() {
            return Ok(t);
        }
        let f = self.storage.open(&self.path)?;
        let cache = self.cache.clone().map(|c| c as Arc<dyn DataBlockCache>);
        let t = Table::open(f, self.meta.number, cache)?;
        Ok(self.table.get_or_init(|| t))
    }

    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Relaxed);
    }

    /// Hands the deletion of this file, if it is obsolete, to `purger`'s thread.
    pub(crate) fn purge_through(&self, purger: &Arc<Purger>) {
        if self.obsolete.load(Relaxed) {
            let _ = self.purger.set(purger.clone());
        }
    }

    fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.largest_user_key() >= lo && self.smallest_user_key() <= hi
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        if !self.obsolete.load(Relaxed) {
            return;
        }
        let f = ObsoleteFile {
            number: self.meta.number,
            path: std::mem::take(&mut self.path),
            storage: self.storage.clone(),
            cache: self.cache.take(),
        };
        match self.purger.take() {
            Some(p) => p.submit(f),
            None => f.delete(),
        }
    }
}

/// An entry found by a point lookup: as stored ([`Version::get`]), or as readers see it
/// ([`Found::as_of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub kind: ValueKind,
    pub seq: SeqNo,
    pub value: Vec<u8>,
    /// When it expires, once [`Found::as_of`] split the time off the value.
    pub expire_at: Option<u64>,
}

impl Found {
    /// The entry as a reader sees it at `now_ms` ([`crate::expiry`]): the expiry time split
    /// off the value and the kind without expiry; an expired entry is a deletion at its
    /// sequence number, hiding older versions as one.
    pub fn as_of(mut self, dir: &Path, now_ms: u64) -> crate::Result<Found> {
        if !self.kind.expires() {
            return Ok(self);
        }
        let s = crate::expiry::split(self.kind, &self.value).ok_or_else(|| {
            crate::Error::corruption(dir, "expiring entry shorter than its expiry time")
        })?;
        let (kind, expire_at, expired) = (s.kind, s.expire_at, s.expired(now_ms));
        if expired {
            self.value.clear();
            self.kind = ValueKind::Deletion;
        } else {
            self.value.drain(..crate::expiry::EXPIRY_LEN);
            self.kind = kind;
            self.expire_at = expire_at;
        }
        Ok(self)
    }
}

/// An immutable snapshot of the tree's shape.
#[derive(Clone)]
pub struct Version {
    /// Level 0 newest first (may overlap); levels 1.. sorted by smallest key. A level >= 1
    /// is one sorted run under leveled compaction and may hold several overlapping runs
    /// under tiered compaction; [`Version::runs`] groups them.
    pub levels: Vec<Vec<Arc<TableFile>>>,
    /// Per level, its sorted runs, newest first; each run's files sorted by key and
    /// disjoint. Level 0: one run per file.
    runs: Vec<Vec<Vec<Arc<TableFile>>>>,
    pub blobs: Arc<BTreeMap<u64, Arc<BlobFile>>>,
    /// Value index maps by target file (index-map GC policies only).
    pub maps: Arc<BTreeMap<u64, Arc<IndexMap>>>,
    /// Source value file -> the maps translating from it, oldest first.
    redirects: Arc<BTreeMap<u64, Vec<Arc<IndexMap>>>>,
}

/// Groups the files of one level into sorted runs, newest run first. L0 files are each
/// their own run (they overlap and arrive newest first); files of deeper levels are
/// grouped by their run number. Runs of one level hold disjoint sequence ranges (each is
/// the merge of everything the level above held at one moment), so the run holding the
/// largest sequence number is the newest.
pub(crate) fn group_runs(level: usize, files: &[Arc<TableFile>]) -> Vec<Vec<Arc<TableFile>>> {
    if level == 0 {
        return files.iter().map(|f| vec![f.clone()]).collect();
    }
    let mut by_run: BTreeMap<u64, Vec<Arc<TableFile>>> = BTreeMap::new();
    for f in files {
        by_run.entry(f.run).or_default().push(f.clone());
    }
    let mut runs: Vec<Vec<Arc<TableFile>>> = by_run.into_values().collect();
    for r in &mut runs {
        r.sort_by(|a, b| cmp_internal(&a.meta.smallest, &b.meta.smallest));
    }
    let newest = |r: &Vec<Arc<TableFile>>| r.iter().map(|f| f.meta.largest_seq).max();
    runs.sort_by_key(|r| std::cmp::Reverse(newest(r)));
    runs
}

impl Version {
    pub fn empty(num_levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); num_levels],
            runs: vec![Vec::new(); num_levels],
            blobs: Arc::new(BTreeMap::new()),
            maps: Arc::new(BTreeMap::new()),
            redirects: Arc::new(BTreeMap::new()),
        }
    }

    /// Where the record `ptr` names lives now: `ptr` itself if its file is live, else the
    /// location the index maps lead to (through as many GC generations as it moved), or
    /// `None` if GC did not keep the record (it was garbage when collected).
    pub fn resolve(&self, ptr: &ValuePointer) -> Option<ValuePointer> {
        let mut p = *ptr;
        // Each step moves to a strictly newer file, so this ends within `maps.len()` steps.
        for _ in 0..=self.maps.len() {
            if self.blobs.contains_key(&p.file) {
                return Some(p);
            }
            p = self
                .redirects
                .get(&p.file)?
                .iter()
                .find_map(|m| m.lookup(&p))?;
        }
        None
    }

    /// The smallest value file number any table points into (`u64::MAX` if none).
    pub fn oldest_referenced_blob(&self) -> u64 {
        self.levels
            .iter()
            .flatten()
            .filter_map(|f| f.meta.oldest_blob)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Index maps no pointer in the tree can resolve through any more.
    pub fn unneeded_maps(&self) -> Vec<u64> {
        let oldest = self.oldest_referenced_blob();
        self.maps
            .values()
            .filter(|m| m.newest_source() < oldest)
            .map(|m| m.target())
            .collect()
    }

    /// The sorted runs of `level`, newest first (see [`group_runs`]).
    pub fn runs(&self, level: usize) -> &[Vec<Arc<TableFile>>] {
        &self.runs[level]
    }

    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.meta.size).sum()
    }

    pub fn tree_bytes(&self) -> u64 {
        (0..self.levels.len()).map(|l| self.level_bytes(l)).sum()
    }

    pub fn blob_bytes(&self) -> u64 {
        self.blobs.values().map(|b| b.size).sum()
    }

    /// The newest entry for `key` visible at `seq`, searching level by level.
    pub fn get(&self, key: &[u8], seek: &[u8], cause: IoCause) -> Result<Option<Found>> {
        self.get_from(0, key, seek, cause)
    }

    /// Like [`Version::get`], searching only levels `first_level` and below.
    pub fn get_from(
        &self,
        first_level: usize,
        key: &[u8],
        seek: &[u8],
        cause: IoCause,
    ) -> Result<Option<Found>> {
        self.search(first_level, SeqNo::MAX, key, seek, cause)
    }

    /// Like [`Version::get`], skipping the L0 tables that hold a write at or after
    /// `before`. Each flush's table holds a later range of sequence numbers than every
    /// older one, so looking up the write before one in an installed flushed table (whose
    /// oldest write is `before`) need not read that table or the ones flushed since: the
    /// seek key would pass over their entries, but only after reading a block of each.
    pub fn get_before(
        &self,
        before: SeqNo,
        key: &[u8],
        seek: &[u8],
        cause: IoCause,
    ) -> Result<Option<Found>> {
        self.search(0, before, key, seek, cause)
    }

    fn search(
        &self,
        first_level: usize,
        l0_before: SeqNo,
        key: &[u8],
        seek: &[u8],
        cause: IoCause,
    ) -> Result<Option<Found>> {
        for (level, files) in self.levels.iter().enumerate().skip(first_level) {
            let candidates: Vec<&Arc<TableFile>> = if level == 0 {
                files
                    .iter()
                    .filter(|f| f.meta.largest_seq < l0_before && f.overlaps(key, key))
                    .collect()
            } else {
                // At most one file per run; runs newest first.
                self.runs[level]
                    .iter()
                    .filter_map(|run| {
                        let i = run.partition_point(|f| f.largest_user_key() < key);
                        run.get(i).filter(|f| f.smallest_user_key() <= key)
                    })
                    .collect()
            };
            for f in candidates {
                let t = f.table()?;
                if !t.may_contain(key) {
                    continue;
                }
                if let Some((ikey, value)) = t.get(seek, cause)? {
                    let p = parse_internal_key(&ikey).ok_or_else(|| {
                        crate::Error::corruption(&f.path, "malformed internal key")
                    })?;
                    return Ok(Some(Found {
                        kind: p.kind,
                        seq: p.seq,
                        value,
                        expire_at: None,
                    }));
                }
            }
        }
        Ok(None)
    }

    /// Files of `level` whose user-key range intersects [lo, hi].
    pub fn overlapping(&self, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<TableFile>> {
        self.levels[level]
            .iter()
            .filter(|f| f.overlaps(lo, hi))
            .cloned()
            .collect()
    }

    /// Builds the version that results from applying `edit`. Files removed by the edit are
    /// marked obsolete.
    pub fn apply(
        &self,
        edit: &VersionEdit,
        dir: &Path,
        storage: &Arc<dyn Storage>,
        cache: &Option<Arc<BlockCache>>,
    ) -> Version {
        self.apply_with_maps(edit, dir, storage, cache, &HashMap::new())
    }

    /// [`Version::apply`] for edits that add index maps: `loaded` holds the maps already
    /// read from disk (an added map missing from it was deleted by a later edit of the same
    /// manifest replay and is skipped).
    pub fn apply_with_maps(
        &self,
        edit: &VersionEdit,
        dir: &Path,
        storage: &Arc<dyn Storage>,
        cache: &Option<Arc<BlockCache>>,
        loaded: &HashMap<u64, Arc<IndexMap>>,
    ) -> Version {
        let mut levels = self.levels.clone();
        let mut removed = HashMap::new();
        for &(level, number) in &edit.deleted {
            if let Some(i) = levels[level].iter().position(|f| f.number() == number) {
                removed.insert(number, levels[level].remove(i));
            }
        }
        let runs_of: HashMap<u64, u64> = edit.table_runs.iter().copied().collect();
        for (level, meta) in &edit.added {
            // A file deleted and added by the same edit moved between levels: same file
            // (and same run).
            let f = removed.remove(&meta.number).unwrap_or_else(|| {
                let mut t = TableFile::new(meta.clone(), dir, storage.clone(), cache.clone());
                t.run = runs_of.get(&meta.number).copied().unwrap_or(0);
                Arc::new(t)
            });
            levels[*level].push(f);
        }
        for f in removed.values() {
            f.mark_obsolete();
        }
        for (level, files) in levels.iter_mut().enumerate() {
            if level == 0 {
                files.sort_by(|a, b| {
                    b.meta
                        .largest_seq
                        .cmp(&a.meta.largest_seq)
                        .then(b.number().cmp(&a.number()))
                });
            } else {
                files.sort_by(|a, b| cmp_internal(&a.meta.smallest, &b.meta.smallest));
            }
        }
        let mut blobs = (*self.blobs).clone();
        for b in &edit.added_blobs {
            blobs.insert(b.number, Arc::new(BlobFile::new(b, dir, storage.clone())));
        }
        for &(n, bytes, entries) in &edit.blob_garbage {
            if let Some(b) = blobs.get(&n) {
                b.add_garbage(bytes, entries);
            }
        }
        for n in &edit.gc_pending {
            if let Some(b) = blobs.get(n) {
                b.set_pending(true);
            }
        }
        for n in &edit.gc_settled {
            if let Some(b) = blobs.get(n) {
                b.set_pending(false);
            }
        }
        for n in &edit.deleted_blobs {
            if let Some(b) = blobs.remove(n) {
                b.mark_obsolete();
            }
        }
        let (maps, redirects) = if edit.added_maps.is_empty() && edit.deleted_maps.is_empty() {
            (self.maps.clone(), self.redirects.clone())
        } else {
            let mut maps = (*self.maps).clone();
            for (target, _) in &edit.added_maps {
                if let Some(m) = loaded.get(target) {
                    maps.insert(*target, m.clone());
                }
            }
            for n in &edit.deleted_maps {
                if let Some(m) = maps.remove(n) {
                    m.mark_obsolete();
                }
            }
            let mut redirects: BTreeMap<u64, Vec<Arc<IndexMap>>> = BTreeMap::new();
            for m in maps.values() {
                for s in m.sources() {
                    redirects.entry(*s).or_default().push(m.clone());
                }
            }
            (Arc::new(maps), Arc::new(redirects))
        };
        let runs = levels
            .iter()
            .enumerate()
            .map(|(level, files)| group_runs(level, files))
            .collect();
        Version {
            levels,
            runs,
            blobs: Arc::new(blobs),
            maps,
            redirects,
        }
    }

    /// Checks the invariants of levels >= 1: each sorted run is sorted with disjoint
    /// user-key ranges, and runs of one level hold disjoint sequence ranges, newest first.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        for (level, runs) in self.runs.iter().enumerate().skip(1) {
            for run in runs {
                for w in run.windows(2) {
                    if w[0].largest_user_key().cmp(w[1].smallest_user_key()) != Ordering::Less {
                        return Err(format!(
                            "level {level}: files {} and {} of run {} overlap",
                            w[0].number(),
                            w[1].number(),
                            w[0].run
                        ));
                    }
                }
            }
            let seqs = |r: &Vec<Arc<TableFile>>| {
                let lo = r.iter().map(|f| f.meta.smallest_seq).min().unwrap_or(0);
                let hi = r.iter().map(|f| f.meta.largest_seq).max().unwrap_or(0);
                (lo, hi)
            };
            for w in runs.windows(2) {
                let (newer, older) = (seqs(&w[0]), seqs(&w[1]));
                // Overlapping runs must be ordered by age; key-disjoint ones need not be.
                let key_overlap = w[0].iter().any(|a| {
                    w[1].iter()
                        .any(|b| a.overlaps(b.smallest_user_key(), b.largest_user_key()))
                });
                if key_overlap && newer.0 <= older.1 {
                    return Err(format!(
                        "level {level}: runs {} (seq {:?}) and {} (seq {:?}) share sequence numbers",
                        w[0][0].run, newer, w[1][0].run, older
                    ));
                }
            }
        }
        Ok(())
    }
}
