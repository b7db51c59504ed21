//! Tiered compaction (paper 003, sec. 2 and Eq. 9-10): each level, L0 included, collects
//! sorted runs that may overlap; when it holds `growth_factor` of them (rounded, at least
//! 2) it is full, and its runs are merged into one new run of the next level (the oldest
//! `growth_factor` of them if writers got ahead and it holds more, see [`merge_level`]). The next
//! level is neither read nor rewritten, so VAT's merge amplification is 0 and every byte
//! is written once per level and read once per level it leaves: `2l - 1` in all.
//!
//! The last configured level has nowhere to go: when full, its runs are merged into one
//! run in place. Runs of a level are ordered by age (each is the merge of everything the
//! level above held at one moment, so their sequence ranges are disjoint), which is what
//! reads rely on ([`Version::get`] searches runs newest first).
//!
//! Tombstones are dropped only when neither a deeper level nor an older run of the output
//! level overlaps the merged range ([`super::pick::is_bottommost`]). A forced value-file
//! GC (BlobDB) compacts the whole level holding the forced file, since part of a newer run
//! must never move below an older one.

use super::pick::{assemble, build, Compaction, OutputRun};
use super::strategy::{CompactionStrategy, PickContext};
use crate::options::TreeOptions;
use crate::version::Version;
use std::collections::HashSet;

pub use crate::options::run_trigger;

/// Tiered compaction (`CompactionStyle::Tiered`) at `trigger` runs per level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiered {
    pub trigger: usize,
}

impl Tiered {
    /// Full at the growth factor's run count ([`run_trigger`]).
    pub fn new(tree: &TreeOptions) -> Tiered {
        Tiered {
            trigger: run_trigger(tree.growth_factor),
        }
    }
}

impl CompactionStrategy for Tiered {
    fn pick(&self, v: &Version, cx: &PickContext<'_>) -> Option<Compaction> {
        pick(v, self.trigger, cx.busy, cx.forced_gc)
    }

    /// L0's oldest `trigger` runs into one run of the next level, once L0 is full.
    fn pick_l0(&self, v: &Version, cx: &PickContext<'_>) -> Option<Compaction> {
        if v.runs(0).len() < self.trigger {
            return None;
        }
        merge_level(v, 0, self.trigger, cx.busy, "tiered-l0")
    }
}

/// Runs per level (L0: files).
pub fn run_counts(v: &Version) -> Vec<usize> {
    (0..v.num_levels()).map(|l| v.runs(l).len()).collect()
}

/// The oldest `max_runs` runs of `level` (all of them if it has fewer) merged into one new
/// run one level down; the last level merges all its runs in place. Taking the oldest runs
/// keeps the order of ages: they are newer than everything below and older than the runs
/// that stay. Capping the count keeps each merge the size the model describes (`f` runs)
/// when writers got ahead of compaction and the level collected more.
pub fn merge_level(
    v: &Version,
    level: usize,
    max_runs: usize,
    busy: &HashSet<u64>,
    reason: &'static str,
) -> Option<Compaction> {
    let last = v.num_levels() - 1;
    let out = (level + 1).min(last);
    let runs = v.runs(level);
    let take = if level == last {
        runs.len()
    } else {
        max_runs.min(runs.len())
    };
    let inputs: Vec<_> = runs[runs.len() - take..]
        .iter()
        .flatten()
        .cloned()
        .collect();
    assemble(
        v,
        (level, out),
        inputs,
        Vec::new(),
        OutputRun::New,
        busy,
        reason,
    )
}

/// The fullest level whose run count reached `trigger` runs, then BlobDB's forced GC
/// targets.
pub fn pick(
    v: &Version,
    trigger: usize,
    busy: &HashSet<u64>,
    forced_gc: &HashSet<u64>,
) -> Option<Compaction> {
    let last = v.num_levels() - 1;
    let counts = run_counts(v);
    let mut full: Vec<usize> = (0..v.num_levels())
        .filter(|&l| counts[l] >= trigger)
        .collect();
    // Fullest first; on a tie the shallower level, whose merge unblocks writers sooner.
    full.sort_by_key(|&l| (std::cmp::Reverse(counts[l]), l));
    for level in full {
        if let Some(c) = merge_level(v, level, trigger, busy, "tiered") {
            return Some(c);
        }
    }
    for (level, files) in v.levels.iter().enumerate() {
        for f in files.iter().filter(|f| forced_gc.contains(&f.number())) {
            let c = if level == last && counts[level] == 1 {
                // One run in the last level: rewrite the file within its run.
                build(v, level, level, vec![f.clone()], busy, "blob-gc")
            } else {
                merge_level(v, level, usize::MAX, busy, "blob-gc")
            };
            if c.is_some() {
                return c;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_key::{make_internal_key, ValueKind};
    use crate::io::{FileStorage, Storage};
    use crate::version::{FileMeta, VersionEdit};
    use std::path::Path;
    use std::sync::Arc;

    fn meta(number: u64, lo: &str, hi: &str, seq: u64) -> FileMeta {
        FileMeta {
            number,
            size: 1000,
            smallest: make_internal_key(lo.as_bytes(), seq, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), seq, ValueKind::Value),
            smallest_seq: seq,
            largest_seq: seq,
            entries: 10,
            deletions: 0,
            oldest_blob: None,
        }
    }

    /// Adds one run per (level, files) with run ids as a compaction would tag them.
    fn version(runs: &[(usize, Vec<FileMeta>)]) -> Version {
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let mut v = Version::empty(4);
        for (level, files) in runs {
            let mut edit = VersionEdit::default();
            let run = files.iter().map(|f| f.number).min().unwrap();
            for f in files {
                edit.added.push((*level, f.clone()));
                if *level > 0 {
                    edit.table_runs.push((f.number, run));
                }
            }
            v = v.apply(&edit, Path::new("/nonexistent"), &storage, &None);
        }
        v
    }

    #[test]
    fn a_level_merges_only_when_it_holds_f_runs() {
        let none = HashSet::new();
        // Three overlapping L0 files with f = 4: not full.
        let mut runs: Vec<(usize, Vec<FileMeta>)> =
            (1..=3).map(|n| (0, vec![meta(n, "a", "z", n)])).collect();
        assert!(pick(&version(&runs), run_trigger(4.0), &none, &none).is_none());
        // The fourth fills it: all four go to level 1 as one new run, nothing of level 1
        // is read.
        runs.push((0, vec![meta(4, "c", "x", 4)]));
        runs.insert(0, (1, vec![meta(10, "a", "m", 0), meta(11, "n", "z", 0)]));
        let v = version(&runs);
        let c = pick(&v, run_trigger(4.0), &none, &none).unwrap();
        assert_eq!((c.level, c.output_level), (0, 1));
        assert_eq!(c.inputs.len(), 4);
        assert!(c.overlaps.is_empty());
        assert_eq!(c.output_run, OutputRun::New);
        assert_eq!(c.merge_amplification(&v), 0.0);
        // An older run of level 1 overlaps: tombstones must stay.
        assert!(!c.bottommost);
        // Each L0 file is merged as its own run.
        assert_eq!(c.input_runs().len(), 4);
    }

    #[test]
    fn runs_of_a_level_are_grouped_ordered_and_merged_together() {
        let none = HashSet::new();
        // Level 1: two overlapping runs of two files each (older: seq 1-2, newer: 5-6).
        let runs = vec![
            (1, vec![meta(20, "a", "k", 1), meta(21, "l", "z", 2)]),
            (1, vec![meta(30, "b", "j", 5), meta(31, "m", "y", 6)]),
        ];
        let v = version(&runs);
        assert_eq!(v.runs(1).len(), 2);
        assert_eq!(v.runs(1)[0][0].number(), 30, "newest run first");
        assert_eq!(v.check_invariants(), Ok(()));
        // f = 3: two runs are not full.
        assert!(pick(&v, run_trigger(3.0), &none, &none).is_none());
        // f = 2: full; both runs (four files) go to level 2, read as two runs.
        let c = pick(&v, run_trigger(2.0), &none, &none).unwrap();
        assert_eq!((c.level, c.output_level), (1, 2));
        assert_eq!(c.inputs.len(), 4);
        assert_eq!(c.input_runs().len(), 2);
        assert!(c.bottommost, "nothing below level 1");
        // The outputs form one new run numbered after the smallest output.
        let mut edit = VersionEdit::default();
        for f in &c.inputs {
            edit.deleted.push((1, f.number()));
        }
        edit.added.push((2, meta(41, "a", "m", 6)));
        edit.added.push((2, meta(40, "n", "z", 6)));
        c.tag_outputs(&mut edit);
        assert_eq!(edit.table_runs, vec![(41, 40), (40, 40)]);
        // A busy file holds the merge back.
        let busy: HashSet<u64> = [21].into_iter().collect();
        assert!(pick(&v, run_trigger(2.0), &busy, &none).is_none());
    }

    #[test]
    fn the_last_level_merges_into_itself_and_fuller_levels_go_first() {
        let none = HashSet::new();
        let runs = vec![
            (3, vec![meta(50, "a", "z", 1)]),
            (3, vec![meta(51, "a", "z", 2)]),
            (0, vec![meta(60, "a", "z", 9)]),
        ];
        let v = version(&runs);
        let c = pick(&v, run_trigger(2.0), &none, &none).unwrap();
        assert_eq!((c.level, c.output_level), (3, 3));
        assert!(c.bottommost);
        // Three L0 runs against two last-level runs: L0 first.
        let mut runs = runs;
        runs.push((0, vec![meta(61, "a", "z", 10)]));
        runs.push((0, vec![meta(62, "a", "z", 11)]));
        let c = pick(&version(&runs), run_trigger(2.0), &none, &none).unwrap();
        assert_eq!((c.level, c.output_level), (0, 1));
    }

    #[test]
    fn a_level_with_more_runs_than_f_merges_its_oldest_f() {
        let none = HashSet::new();
        let runs: Vec<(usize, Vec<FileMeta>)> =
            (1..=6).map(|n| (0, vec![meta(n, "a", "z", n)])).collect();
        let c = pick(&version(&runs), run_trigger(4.0), &none, &none).unwrap();
        let mut taken: Vec<u64> = c.inputs.iter().map(|f| f.number()).collect();
        taken.sort();
        assert_eq!(taken, vec![1, 2, 3, 4]);
    }

    #[test]
    fn trigger_rounds_the_growth_factor() {
        assert_eq!(run_trigger(10.0), 10);
        assert_eq!(run_trigger(3.6), 4);
        assert_eq!(run_trigger(1.2), 2);
    }
}
