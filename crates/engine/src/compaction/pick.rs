//! What a strategy's pick is: a [`Compaction`] (input files at one level, their overlaps at
//! the output level, the run its outputs join), and how one is assembled from files
//! without breaking the tree's invariants: a level of several runs moves whole, an output
//! level of several runs is taken whole, and tombstones go only where nothing older lies
//! below ([`is_bottommost`]). Shared by every strategy and by manual compaction.

use crate::version::{group_runs, TableFile, Version, VersionEdit};
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
    use crate::internal_key::{make_internal_key, ValueKind};
    use crate::io::{FileStorage, Storage};
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
