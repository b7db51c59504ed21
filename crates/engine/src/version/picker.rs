//! Leveled compaction picking, per file as RocksDB does.
//!
//! Each level has a score: L0 is its file count over the L0 trigger, level n >= 1 is its
//! size over its target ([`targets`]: static, `level1_max_bytes * growth_factor^(n-1)`, or
//! dynamic as RocksDB's default `level_compaction_dynamic_level_bytes`, derived downward
//! from the last level's actual size, with L0 compacting into the shallowest level whose
//! target reaches `level1_max_bytes / growth_factor`). The level with the highest score of
//! at least 1 is compacted: all of L0 (its files overlap), or from level n >= 1 the one file
//! whose overlap with level n+1 is smallest relative to its size (RocksDB's
//! kMinOverlappingRatio), which keeps the rewritten bytes per compaction low. BlobDB's
//! force-GC targets come after size-driven compactions, as in RocksDB.
//!
//! Tiered compaction picks differently ([`super::tiered`]); both build [`Compaction`]s here.
//! A level that holds several overlapping runs (tiered, or left by a tiered run of the
//! database) always moves whole: moving part of a newer run below an older run would let
//! the older one shadow it.

use super::style::Resolved;
use super::{group_runs, TableFile, Version, VersionEdit};
use crate::options::Options;
use std::collections::HashSet;
use std::sync::Arc;

/// The sorted run a compaction's outputs join at the output level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputRun {
    /// The output level's existing run (under leveling there is at most one), or run 0.
    Existing(u64),
    /// A new run, numbered after its smallest output table (tiered merges).
    New,
}

/// One compaction: the inputs at `level` and their overlaps at `output_level`.
pub struct Compaction {
    pub level: usize,
    pub output_level: usize,
    pub inputs: Vec<Arc<TableFile>>,
    pub overlaps: Vec<Arc<TableFile>>,
    /// No level below `output_level` holds keys in the compaction's range, so tombstones
    /// and overwritten versions can be dropped for good.
    pub bottommost: bool,
    pub reason: &'static str,
    pub output_run: OutputRun,
}

impl Compaction {
    pub fn all_files(&self) -> impl Iterator<Item = &Arc<TableFile>> {
        self.inputs.iter().chain(self.overlaps.iter())
    }

    /// The files to merge as sorted runs (each sorted and disjoint, read by one iterator):
    /// each L0 file alone, the inputs' runs, then the overlaps' runs.
    pub fn input_runs(&self) -> Vec<Vec<Arc<TableFile>>> {
        let mut runs = group_runs(self.level, &self.inputs);
        runs.extend(group_runs(self.output_level, &self.overlaps));
        runs
    }

    /// Records in `edit` the run that the compaction's new tables at the output level
    /// belong to (tables moved by the edit keep theirs).
    pub fn tag_outputs(&self, edit: &mut VersionEdit) {
        if self.output_level == 0 {
            return;
        }
        let moved: HashSet<u64> = edit.deleted.iter().map(|d| d.1).collect();
        let outs: Vec<u64> = edit
            .added
            .iter()
            .filter(|(l, m)| *l == self.output_level && !moved.contains(&m.number))
            .map(|(_, m)| m.number)
            .collect();
        let run = match self.output_run {
            OutputRun::Existing(r) => r,
            OutputRun::New => outs.iter().copied().min().unwrap_or(0),
        };
        if run != 0 {
            edit.table_runs.extend(outs.into_iter().map(|n| (n, run)));
        }
    }

    pub fn input_bytes(&self) -> u64 {
        self.all_files().map(|f| f.meta.size).sum()
    }

    /// VAT's merge amplification of this compaction (paper 003, sec. 3.2): the fraction of
    /// the lower level read and written, relative to merging the whole upper level into the
    /// whole lower level. `k` of the upper level's `n_u` files overlap `m` of the lower
    /// level's `n_l` files: a = (m / n_l) / (k / n_u), at most 1; 0 when the lower level is
    /// empty or the compaction stays within one level.
    pub fn merge_amplification(&self, v: &Version) -> f64 {
        let n_u = v.levels[self.level].len();
        let n_l = v.levels[self.output_level].len();
        if self.output_level == self.level || n_l == 0 || n_u == 0 || self.inputs.is_empty() {
            return 0.0;
        }
        let lower = self.overlaps.len() as f64 / n_l as f64;
        let upper = self.inputs.len() as f64 / n_u as f64;
        (lower / upper).min(1.0)
    }

    /// Merge amplification with the fractions taken in bytes instead of files: the share of
    /// the lower level's bytes the compaction rewrites over the share of the upper level's
    /// bytes it moves, at most 1. This is the paper's wording ("the percentage of the size
    /// of the lower level which is read and written"); counting files, as sec. 3.2 does
    /// for tables of tens of MiB, overstates it when tables are small, because a table
    /// that overlaps the inputs at one end counts whole.
    pub fn merge_amplification_bytes(&self, v: &Version) -> f64 {
        let size = |files: &[Arc<TableFile>]| files.iter().map(|f| f.meta.size).sum::<u64>();
        let (b_u, b_l) = (v.level_bytes(self.level), v.level_bytes(self.output_level));
        let moved = size(&self.inputs);
        if self.output_level == self.level || b_u == 0 || b_l == 0 || moved == 0 {
            return 0.0;
        }
        let lower = size(&self.overlaps) as f64 / b_l as f64;
        let upper = moved as f64 / b_u as f64;
        (lower / upper).min(1.0)
    }
}

/// The tree's shape targets: the level L0 compacts into and each level's target size.
#[derive(Clone, Debug, PartialEq)]
pub struct Targets {
    pub base: usize,
    /// Target bytes per level (index 0 unused; 0 for a level that should be empty).
    pub bytes: Vec<f64>,
}

/// Level targets for `v`. Dynamic targets start from the largest level's actual size and
/// divide by the growth factor upward until a level's target falls to
/// `level1_max_bytes`; that level is the base. Levels above the base should be empty: a
/// tree that shrank has them drained downward.
/// `chosen` is the growth factor `growth_factor = auto` chose, if any.
pub fn targets(v: &Version, opts: &Options, chosen: Option<f64>) -> Targets {
    let n = v.num_levels();
    let last = n - 1;
    let f = growth_factor(opts, chosen);
    let level1 = level1_max_bytes(opts, chosen);
    let mut bytes = vec![0.0; n];
    if !opts.tree.dynamic_level_bytes {
        for (l, b) in bytes.iter_mut().enumerate().skip(1) {
            *b = level1 * f.powi(l as i32 - 1);
        }
        return Targets { base: 1, bytes };
    }
    let largest = (1..n).map(|l| v.level_bytes(l)).max().unwrap_or(0) as f64;
    let mut base = last;
    let mut size = largest.max(level1);
    bytes[last] = size;
    while base > 1 && size > level1 {
        base -= 1;
        size /= f;
        bytes[base] = size;
    }
    Targets { base, bytes }
}

/// The growth factor in force: the configured one, or the engine's own choice under
/// `growth_factor = auto` once it has made one.
pub fn growth_factor(opts: &Options, chosen: Option<f64>) -> f64 {
    chosen.unwrap_or(opts.tree.growth_factor)
}

/// The largest target of the level L0 compacts into: `level1_max_bytes`, or under
/// `growth_factor = auto` once a choice is made, `f` times what L0 holds at its trigger
/// (`l0_compaction_trigger` memtables), so that every level below the memtable is `f`
/// times the one above it, as the model's shape has them.
pub fn level1_max_bytes(opts: &Options, chosen: Option<f64>) -> f64 {
    match chosen {
        Some(f) => f * (opts.tree.l0_compaction_trigger * opts.tree.memtable_size) as f64,
        None => opts.tree.level1_max_bytes as f64,
    }
}

/// Compaction scores per level (the last level has none: it has nowhere to go).
pub fn scores(v: &Version, opts: &Options, t: &Targets) -> Vec<f64> {
    let last = v.num_levels() - 1;
    (0..last)
        .map(|l| {
            let bytes = v.level_bytes(l);
            if l == 0 {
                v.levels[0].len() as f64 / opts.tree.l0_compaction_trigger as f64
            } else if t.bytes[l] == 0.0 {
                if bytes > 0 {
                    f64::INFINITY
                } else {
                    0.0
                }
            } else {
                bytes as f64 / t.bytes[l]
            }
        })
        .collect()
}

/// Where a compaction from `level` writes: L0 into the base level, others one level down,
/// the last level into itself.
pub fn output_level(v: &Version, t: &Targets, level: usize) -> usize {
    if level == 0 {
        t.base
    } else {
        (level + 1).min(v.num_levels() - 1)
    }
}

pub(crate) fn key_range<'a>(
    files: impl Iterator<Item = &'a Arc<TableFile>> + Clone,
) -> (Vec<u8>, Vec<u8>) {
    let lo = files.clone().map(|f| f.smallest_user_key()).min().unwrap();
    let hi = files.map(|f| f.largest_user_key()).max().unwrap();
    (lo.to_vec(), hi.to_vec())
}

/// Whether nothing outside the compaction, at the output level or below, holds keys of
/// [lo, hi] (the range of all its files): only then may tombstones and shadowed versions
/// go for good. Under tiering the output level's other runs count: they are older.
pub(crate) fn is_bottommost(
    v: &Version,
    members: &HashSet<u64>,
    output_level: usize,
    lo: &[u8],
    hi: &[u8],
) -> bool {
    (output_level..v.num_levels()).all(|l| {
        v.overlapping(l, lo, hi)
            .iter()
            .all(|f| members.contains(&f.number()))
    })
}

/// Assembles a compaction of `inputs` and `overlaps`, unless a file involved is busy.
pub(crate) fn assemble(
    v: &Version,
    (level, output_level): (usize, usize),
    inputs: Vec<Arc<TableFile>>,
    overlaps: Vec<Arc<TableFile>>,
    output_run: OutputRun,
    busy: &HashSet<u64>,
    reason: &'static str,
) -> Option<Compaction> {
    if inputs.is_empty()
        || inputs
            .iter()
            .chain(overlaps.iter())
            .any(|f| busy.contains(&f.number()))
    {
        return None;
    }
    let members: HashSet<u64> = inputs
        .iter()
        .chain(overlaps.iter())
        .map(|f| f.number())
        .collect();
    let (lo, hi) = key_range(inputs.iter().chain(overlaps.iter()));
    Some(Compaction {
        level,
        output_level,
        bottommost: is_bottommost(v, &members, output_level, &lo, &hi),
        inputs,
        overlaps,
        reason,
        output_run,
    })
}

/// Expands `inputs` at `level` with their overlaps at `output_level` (nothing when a
/// last-level file is compacted into itself) unless a file involved is busy. A level of
/// several runs contributes all its files; an output level of several runs is taken whole,
/// so that the result is one run.
pub fn build(
    v: &Version,
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<TableFile>>,
    busy: &HashSet<u64>,
    reason: &'static str,
) -> Option<Compaction> {
    let inputs = if level > 0 && v.runs(level).len() > 1 {
        v.levels[level].clone()
    } else {
        inputs
    };
    if inputs.is_empty() {
        return None;
    }
    let single_run = |l: usize| match v.runs(l) {
        [] => Some(0),
        [run] => Some(run[0].run),
        _ => None,
    };
    let (overlaps, output_run) = if output_level == level {
        (
            Vec::new(),
            OutputRun::Existing(single_run(level).unwrap_or(0)),
        )
    } else {
        match single_run(output_level) {
            Some(run) => {
                let (lo, hi) = key_range(inputs.iter());
                (
                    v.overlapping(output_level, &lo, &hi),
                    OutputRun::Existing(run),
                )
            }
            None => (v.levels[output_level].clone(), OutputRun::Existing(0)),
        }
    };
    assemble(
        v,
        (level, output_level),
        inputs,
        overlaps,
        output_run,
        busy,
        reason,
    )
}

/// Picks the most urgent compaction, if any: size-driven compactions first, then files
/// whose compaction would release garbage-heavy value files (`forced_gc`), last as in
/// RocksDB's level picker, so that GC never holds back the L0 compactions writers wait for.
/// A merge of L0's runs alone, for the thread that serves only L0 under a tiered tree
/// (`None` under leveling, where L0 compacts into the base level and would wait for its
/// compactions anyway).
pub fn pick_l0(v: &Version, style: Resolved, busy: &HashSet<u64>) -> Option<Compaction> {
    match style {
        Resolved::Tiered { trigger } if v.runs(0).len() >= trigger => {
            super::tiered::merge_level(v, 0, trigger, busy, "tiered-l0")
        }
        _ => None,
    }
}

pub fn pick(
    v: &Version,
    opts: &Options,
    chosen: Option<f64>,
    style: Resolved,
    busy: &HashSet<u64>,
    forced_gc: &HashSet<u64>,
) -> Option<Compaction> {
    if let Resolved::Tiered { trigger } = style {
        return super::tiered::pick(v, trigger, busy, forced_gc);
    }
    // A level of several runs (left by tiered compaction) is merged down whole first.
    for level in 1..v.num_levels() {
        if v.runs(level).len() > 1 {
            let out = (level + 1).min(v.num_levels() - 1);
            if let Some(c) = build(v, level, out, Vec::new(), busy, "runs") {
                return Some(c);
            }
        }
    }
    let t = targets(v, opts, chosen);
    let mut order: Vec<(usize, f64)> = scores(v, opts, &t).into_iter().enumerate().collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (level, score) in order {
        if score < 1.0 {
            break;
        }
        if level == 0 {
            // Never below a level that still holds keys: L0 is newer than everything in
            // the tree, and a level above the base is only non-empty while a compaction
            // (another thread's, or the merge-down of runs a tiered tree left) is moving it.
            let base = (1..t.base)
                .find(|&l| !v.levels[l].is_empty())
                .unwrap_or(t.base);
            if let Some(c) = build(v, 0, base, v.levels[0].clone(), busy, "l0") {
                return Some(c);
            }
            continue;
        }
        // Smallest overlap with the next level relative to the file's own size.
        let mut cands: Vec<(f64, &Arc<TableFile>)> = v.levels[level]
            .iter()
            .filter(|f| !busy.contains(&f.number()))
            .map(|f| {
                let o: u64 = v
                    .overlapping(level + 1, f.smallest_user_key(), f.largest_user_key())
                    .iter()
                    .map(|o| o.meta.size)
                    .sum();
                (o as f64 / f.meta.size.max(1) as f64, f)
            })
            .collect();
        cands.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, f) in cands {
            if let Some(c) = build(v, level, level + 1, vec![f.clone()], busy, "size") {
                return Some(c);
            }
        }
    }
    // The shallowest forced file with its overlaps (all of L0 for an L0 file).
    for (level, files) in v.levels.iter().enumerate() {
        for f in files.iter().filter(|f| forced_gc.contains(&f.number())) {
            let inputs = if level == 0 {
                v.levels[0].clone()
            } else {
                vec![f.clone()]
            };
            let out = output_level(v, &t, level);
            if let Some(c) = build(v, level, out, inputs, busy, "blob-gc") {
                return Some(c);
            }
        }
    }
    None
}

/// Files of `level` overlapping the user-key range [lo, hi] (None = unbounded), for manual
/// compaction.
pub fn files_in_range(
    v: &Version,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Vec<Arc<TableFile>> {
    v.levels[level]
        .iter()
        .filter(|f| {
            lo.is_none_or(|lo| f.largest_user_key() >= lo)
                && hi.is_none_or(|hi| f.smallest_user_key() <= hi)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FileStorage, Storage};
    use crate::types::{make_internal_key, ValueKind};
    use crate::version::{FileMeta, VersionEdit};
    use std::path::Path;

    fn meta(number: u64, lo: &str, hi: &str) -> FileMeta {
        FileMeta {
            number,
            size: 1000,
            smallest: make_internal_key(lo.as_bytes(), 1, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), 1, ValueKind::Value),
            smallest_seq: 1,
            largest_seq: 1,
            entries: 10,
            deletions: 0,
            oldest_blob: None,
        }
    }

    #[test]
    fn merge_amplification_follows_the_overlap() {
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let mut edit = VersionEdit::default();
        // Level 1: two files; level 2: four files, the first of them overlapping "a".."c".
        edit.added.push((1, meta(1, "a", "c")));
        edit.added.push((1, meta(2, "m", "p")));
        for (n, lo, hi) in [(3, "b", "d"), (4, "e", "g"), (5, "n", "o"), (6, "x", "z")] {
            edit.added.push((2, meta(n, lo, hi)));
        }
        let v = Version::empty(4).apply(&edit, Path::new("/nonexistent"), &storage, &None);
        let f = v.levels[1][0].clone();
        let c = build(&v, 1, 2, vec![f], &HashSet::new(), "test").unwrap();
        // k = 1 of n_u = 2 upper files meets m = 1 of n_l = 4 lower files: (1/4)/(1/2).
        assert_eq!(c.overlaps.len(), 1);
        assert!((c.merge_amplification(&v) - 0.5).abs() < 1e-12);
        // Both upper files span "a".."p", which covers three of the four lower files:
        // (3/4)/(2/2).
        let c = build(&v, 1, 2, v.levels[1].clone(), &HashSet::new(), "test").unwrap();
        assert_eq!(c.overlaps.len(), 3);
        assert!((c.merge_amplification(&v) - 0.75).abs() < 1e-12);
        // In bytes (all files 1000 bytes here) the same.
        assert!((c.merge_amplification_bytes(&v) - 0.75).abs() < 1e-12);
        // Into an empty level: nothing merged.
        let f = v.levels[2][0].clone();
        let c = build(&v, 2, 3, vec![f], &HashSet::new(), "test").unwrap();
        assert_eq!(c.merge_amplification(&v), 0.0);
        assert!(c.bottommost);
    }
}

#[cfg(test)]
mod bytes_tests {
    use super::*;
    use crate::io::{FileStorage, Storage};
    use crate::types::{make_internal_key, ValueKind};
    use crate::version::{FileMeta, VersionEdit};
    use std::path::Path;

    #[test]
    fn merge_amplification_in_bytes_weighs_partial_overlaps_by_size() {
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let m = |number, lo: &str, hi: &str, size| FileMeta {
            number,
            size,
            smallest: make_internal_key(lo.as_bytes(), 1, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), 1, ValueKind::Value),
            smallest_seq: 1,
            largest_seq: 1,
            entries: 1,
            deletions: 0,
            oldest_blob: None,
        };
        let mut edit = VersionEdit::default();
        // Upper: two 1000-byte files. Lower: a 100-byte file barely overlapping the first
        // upper file, and a 3900-byte file that does not.
        edit.added.push((1, m(1, "c", "f", 1000)));
        edit.added.push((1, m(2, "p", "s", 1000)));
        edit.added.push((2, m(3, "a", "c", 100)));
        edit.added.push((2, m(4, "x", "z", 3900)));
        let v = Version::empty(4).apply(&edit, Path::new("/nonexistent"), &storage, &None);
        let c = build(&v, 1, 2, vec![v.levels[1][0].clone()], &HashSet::new(), "t").unwrap();
        // Files: (1/2)/(1/2) = 1. Bytes: (100/4000)/(1000/2000) = 0.05.
        assert!((c.merge_amplification(&v) - 1.0).abs() < 1e-12);
        assert!((c.merge_amplification_bytes(&v) - 0.05).abs() < 1e-12);
    }
}

#[cfg(test)]
mod target_tests {
    use super::*;
    use crate::io::{FileStorage, Storage};
    use crate::options::TreeOptions;
    use crate::types::{make_internal_key, ValueKind};
    use crate::version::{FileMeta, VersionEdit};
    use std::path::Path;

    fn version_with(level: usize, size: u64) -> Version {
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let mut edit = VersionEdit::default();
        edit.added.push((
            level,
            FileMeta {
                number: 1,
                size,
                smallest: make_internal_key(b"a", 1, ValueKind::Value),
                largest: make_internal_key(b"z", 1, ValueKind::Value),
                smallest_seq: 1,
                largest_seq: 1,
                entries: 1,
                deletions: 0,
                oldest_blob: None,
            },
        ));
        Version::empty(7).apply(&edit, Path::new("/nonexistent"), &storage, &None)
    }

    #[test]
    fn dynamic_targets_follow_the_last_level() {
        let opts = Options {
            tree: TreeOptions {
                level1_max_bytes: 256 << 20,
                growth_factor: 10.0,
                ..Default::default()
            },
            ..Options::default()
        };
        // An empty tree: L0 goes straight to the last level.
        let t = targets(&Version::empty(7), &opts, None);
        assert_eq!(t.base, 6);
        // 2.7 GB in L6: L5 gets 270 MB > 256 MB, so L4 (27 MB) is the base.
        let v = version_with(6, 2_700 << 20);
        let t = targets(&v, &opts, None);
        assert_eq!(t.base, 4);
        assert!((t.bytes[5] - (270 << 20) as f64).abs() < 1.0);
        assert!((t.bytes[4] - (27 << 20) as f64).abs() < 1.0);
        assert_eq!(output_level(&v, &t, 0), 4);
        // Data stranded above the base is drained down first.
        let v = version_with(2, 1 << 20);
        let t = targets(&v, &opts, None);
        assert_eq!(t.base, 6);
        assert_eq!(scores(&v, &opts, &t)[2], f64::INFINITY);
        // Static targets: L1 is the base, level n holds level1_max_bytes * f^(n-1).
        let st = Options {
            tree: TreeOptions {
                dynamic_level_bytes: false,
                ..opts.tree
            },
            ..opts
        };
        let t = targets(&v, &st, None);
        assert_eq!(t.base, 1);
        assert_eq!(t.bytes[3], (256u64 << 20) as f64 * 100.0);
    }
}
