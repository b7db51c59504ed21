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
//! A level that holds several overlapping runs (left by a tiered run of the database, or
//! by the auto style's tiered phase) is merged down whole first: moving part of a newer
//! run below an older run would let the older one shadow it.
//!
//! With `tree.auto_shape` the growth factor and the base level's target come from the
//! model's choice ([`super::auto_shape`]), re-derived after every compaction.

use super::auto_shape::AutoShape;
use super::choice::ShapeChoice;
use super::pick::{build, Compaction};
use super::strategy::{CompactionStrategy, PickContext};
use crate::options::TreeOptions;
use crate::version::{TableFile, Version};
use std::collections::HashSet;
use std::sync::Arc;

/// Leveled compaction (`CompactionStyle::Leveled`), with the growth factor chosen by VAT's
/// model under `tree.auto_shape`.
pub struct Leveled {
    tree: TreeOptions,
    shape: Option<AutoShape>,
}

impl Leveled {
    pub fn new(tree: &TreeOptions) -> Leveled {
        Leveled {
            shape: tree.auto_shape.as_ref().map(|c| AutoShape::new(c, tree)),
            tree: tree.clone(),
        }
    }

    /// The growth factor `tree.auto_shape` chose so far, if it is on and has chosen.
    pub fn chosen_growth_factor(&self) -> Option<f64> {
        self.shape.as_ref().and_then(|s| s.growth_factor())
    }

    /// The level targets of `v` under the growth factor in force.
    pub fn targets(&self, v: &Version) -> Targets {
        targets(v, &self.tree, self.chosen_growth_factor())
    }
}

impl CompactionStrategy for Leveled {
    fn pick(&self, v: &Version, cx: &PickContext<'_>) -> Option<Compaction> {
        pick(
            v,
            &self.tree,
            self.chosen_growth_factor(),
            cx.busy,
            cx.forced_gc,
        )
    }

    /// Re-derives the model's shape with one more measured `a`.
    fn observe(&self, merge_amplification: f64) {
        if let Some(s) = &self.shape {
            s.observe(merge_amplification, &self.tree);
        }
    }

    fn shape_choice(&self) -> Option<ShapeChoice> {
        self.shape.as_ref().and_then(|s| s.choice())
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
pub fn targets(v: &Version, tree: &TreeOptions, chosen: Option<f64>) -> Targets {
    let n = v.num_levels();
    let last = n - 1;
    let f = growth_factor(tree, chosen);
    let level1 = level1_max_bytes(tree, chosen);
    let mut bytes = vec![0.0; n];
    if !tree.dynamic_level_bytes {
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
pub fn growth_factor(tree: &TreeOptions, chosen: Option<f64>) -> f64 {
    chosen.unwrap_or(tree.growth_factor)
}

/// The largest target of the level L0 compacts into: `level1_max_bytes`, or under
/// `growth_factor = auto` once a choice is made, `f` times what L0 holds at its trigger
/// (`l0_compaction_trigger` memtables), so that every level below the memtable is `f`
/// times the one above it, as the model's shape has them.
pub fn level1_max_bytes(tree: &TreeOptions, chosen: Option<f64>) -> f64 {
    match chosen {
        Some(f) => f * (tree.l0_compaction_trigger * tree.memtable_size) as f64,
        None => tree.level1_max_bytes as f64,
    }
}

/// Compaction scores per level (the last level has none: it has nowhere to go).
pub fn scores(v: &Version, tree: &TreeOptions, t: &Targets) -> Vec<f64> {
    let last = v.num_levels() - 1;
    (0..last)
        .map(|l| {
            let bytes = v.level_bytes(l);
            if l == 0 {
                v.levels[0].len() as f64 / tree.l0_compaction_trigger as f64
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

/// Picks the most urgent compaction, if any: size-driven compactions first, then files
/// whose compaction would release garbage-heavy value files (`forced_gc`), last as in
/// RocksDB's level picker, so that GC never holds back the L0 compactions writers wait for.
/// `chosen` is the growth factor `tree.auto_shape` chose, if any.
pub fn pick(
    v: &Version,
    tree: &TreeOptions,
    chosen: Option<f64>,
    busy: &HashSet<u64>,
    forced_gc: &HashSet<u64>,
) -> Option<Compaction> {
    // A level of several runs (left by tiered compaction) is merged down whole first.
    for level in 1..v.num_levels() {
        if v.runs(level).len() > 1 {
            let out = (level + 1).min(v.num_levels() - 1);
            if let Some(c) = build(v, level, out, Vec::new(), busy, "runs") {
                return Some(c);
            }
        }
    }
    let t = targets(v, tree, chosen);
    let mut order: Vec<(usize, f64)> = scores(v, tree, &t).into_iter().enumerate().collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_key::{make_internal_key, ValueKind};
    use crate::io::{FileStorage, Storage};
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
        let opts = TreeOptions {
            level1_max_bytes: 256 << 20,
            growth_factor: 10.0,
            ..Default::default()
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
        let st = TreeOptions {
            dynamic_level_bytes: false,
            ..opts
        };
        let t = targets(&v, &st, None);
        assert_eq!(t.base, 1);
        assert_eq!(t.bytes[3], (256u64 << 20) as f64 * 100.0);
    }
}
