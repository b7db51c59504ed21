//! What the strategies that decide from a model report of their choice
//! ([`crate::DbStats::shape`], [`crate::DbStats::tree_style`]).

use serde::{Deserialize, Serialize};

/// One choice of `growth_factor = auto` (`tree.auto_shape`) and the reasoning behind it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShapeChoice {
    /// Mean `a` the choice used, over `compactions` compactions (0: the default).
    pub a: f64,
    pub compactions: u64,
    pub r: f64,
    /// `C = expected data / memtable size`.
    pub size_ratio: f64,
    pub growth_factor: f64,
    /// The model's level count below the memtable.
    pub levels: u32,
    /// Model cost `T / T_opt` of the choice.
    pub cost: f64,
    /// How many times the choice changed since open.
    pub changes: u64,
    /// The model's account of the choice.
    pub explanation: String,
}

/// One choice of the auto style (`CompactionStyle::Auto`) and the measurements behind it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StyleChoice {
    pub tiered: bool,
    /// Runs per level when tiered.
    pub trigger: usize,
    /// Table bytes over table bytes plus the value files' live bytes.
    pub tree_share: f64,
    /// `C`: table bytes over the mean size of the newest flushed tables.
    pub size_ratio: f64,
    /// VAT traffic per byte of tree, read and written: the best leveled shape, and tiering
    /// at `trigger`.
    pub leveled_traffic: f64,
    pub tiered_traffic: f64,
    /// How many times the style changed since open.
    pub changes: u64,
    pub explanation: String,
}
