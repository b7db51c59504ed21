//! The seam between choosing a compaction and running it.
//!
//! A [`CompactionStrategy`] looks at a version and names the most urgent compaction, if
//! any; the background threads run what it names ([`super::job`]) and install the result.
//! It decides from the version alone (file sizes, key ranges, runs, the value files' live
//! bytes) and from what the engine tells it in a [`PickContext`], so that leveled, tiered
//! and the auto style are interchangeable behind `tree.compaction_style` and testable on
//! versions built by hand (`src/compaction/testdata/`).
//!
//! A pick runs under the engine's state lock, on every compaction thread's wake-up and in
//! `wait_idle`: it must be cheap and must not block. A strategy that learns (the auto
//! style, `tree.auto_shape`) keeps its state behind its own lock.

use super::choice::{ShapeChoice, StyleChoice};
use super::pick::Compaction;
use crate::version::Version;
use std::collections::HashSet;

/// What a pick is told besides the version.
pub struct PickContext<'a> {
    /// Tables it may not take: another compaction is merging them, or (for a while) the
    /// lookup of their keys' previous writes is still running.
    pub busy: &'a HashSet<u64>,
    /// Tables whose compaction would release garbage-heavy value files (BlobDB's forced
    /// GC, the GC policy's `forced_compactions`); picked after size-driven compactions.
    pub forced_gc: &'a HashSet<u64>,
    /// The GC policy's space-amplification target, if it has one: the room the auto style
    /// may spend on a tiered tree's extra runs.
    pub space_amp_target: Option<f64>,
}

/// Chooses compactions.
pub trait CompactionStrategy: Send + Sync {
    /// The most urgent compaction of `v`, if any, taking no table in `cx.busy`.
    fn pick(&self, v: &Version, cx: &PickContext<'_>) -> Option<Compaction>;

    /// A merge of L0 alone, for the thread that serves only L0. A tiered tree's L0 merges
    /// never read the level below, so they cannot conflict with a deeper merge running on
    /// the other thread. `None` (the default) where L0 compacts into the level below and
    /// would wait for that level's compactions anyway.
    fn pick_l0(&self, _v: &Version, _cx: &PickContext<'_>) -> Option<Compaction> {
        None
    }

    /// Told the byte-based merge amplification of every compaction that runs (picked by
    /// this strategy or manual): what `tree.auto_shape` learns its `a` from.
    fn observe(&self, _merge_amplification: f64) {}

    /// The growth factor `tree.auto_shape` chose and why ([`crate::DbStats::shape`]).
    fn shape_choice(&self) -> Option<ShapeChoice> {
        None
    }

    /// Leveled or tiered and why, for the strategy that chooses between them
    /// ([`crate::DbStats::tree_style`]).
    fn style_choice(&self) -> Option<StyleChoice> {
        None
    }
}
