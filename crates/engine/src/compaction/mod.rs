//! Compaction: choosing what to merge, and the loop that merges it.
//!
//! **Choosing** is a [`CompactionStrategy`] ([`strategy`]): given the current version it
//! returns the most urgent [`Compaction`] ([`pick`]: its input files, their overlaps one
//! level down, the output level and run), or none. Three implement it, selected by
//! `Options::tree.compaction_style` ([`strategy_for`]):
//!
//! - [`leveled::Leveled`]: one sorted run per level below L0, a level over its target size
//!   moves one file at a time into the next (RocksDB's leveled compaction); with
//!   `tree.auto_shape` its growth factor is chosen by VAT's model ([`auto_shape`],
//!   paper 003);
//! - [`tiered::Tiered`]: a level collects `f` overlapping runs, then merges them into one
//!   run of the next level without reading it (paper 003, sec. 2 and Eq. 9);
//! - [`auto_style::AutoStyle`] (the default): leveled or tiered, chosen from the measured
//!   share of the key tree in the database and VAT's traffic for each.
//!
//! The picking code only reads a [`Version`](crate::version::Version) and returns a plan;
//! it never touches a file, so it is tested as data: scripts of flushes and compactions
//! under `src/compaction/testdata/` print the levels after every step (see `tests.rs`).
//!
//! **Merging** is [`job::run`]: the loop shared by flush and compaction, which reads a
//! stream of internal keys in order and writes sorted runs ([`job`]).

pub mod auto_shape;
pub mod auto_style;
pub mod choice;
pub mod job;
pub mod leveled;
pub mod pick;
pub mod strategy;
pub mod tiered;

pub use choice::{ShapeChoice, StyleChoice};
pub use job::{run, JobOutput, JobSpec};
pub use pick::{build, files_in_range, Compaction, OutputRun};
pub use strategy::{CompactionStrategy, PickContext};

use crate::options::{CompactionStyle, TreeOptions};

/// The strategy `tree.compaction_style` selects. `Auto` with `tree.auto_shape` is leveled:
/// the growth factor the model chooses shapes a leveled tree (validation rejects
/// `auto_shape` with `Tiered`).
pub fn strategy_for(tree: &TreeOptions) -> Box<dyn CompactionStrategy> {
    match tree.compaction_style {
        CompactionStyle::Leveled => Box::new(leveled::Leveled::new(tree)),
        CompactionStyle::Tiered => Box::new(tiered::Tiered::new(tree)),
        CompactionStyle::Auto if tree.auto_shape.is_some() => Box::new(leveled::Leveled::new(tree)),
        CompactionStyle::Auto => Box::new(auto_style::AutoStyle::new(tree)),
    }
}

#[cfg(test)]
mod job_tests;
#[cfg(test)]
mod tests;
