//! VAT: the variable amplification-throughput model of the insert path of multi-level
//! key-value stores (paper 003).
//!
//! The model charges a store for every byte it moves to or from the device until all data
//! has reached the last level, and divides the time that takes at the store's achieved
//! throughput by the time a sequential append of the data would take. Two measured numbers
//! describe a store on a device: the merge amplification `a` (how much of the lower level a
//! merge rewrites) and the achieved throughput `r` (how close to sequential speed its I/O
//! runs). The tree's shape is the growth factor `f` and level count `l`, tied by
//! `f^l = C = S_l / S_0`.
//!
//! - [`Design`] holds the cost of each design: leveling and tiering, with values in place or
//!   in a log, and leveling with per-file compaction.
//! - [`optimize`] finds the best shape numerically, and [`closed_form`] analytically where
//!   the paper's appendix B derivation applies.
//! - [`recommend`] is what an engine calls with measured `a`, `r` and its sizes.
//! - [`lsm`] is the original LSM-tree cost the model generalises; [`figures`] gives the
//!   curves of the paper's model figures.
//!
//! The crate does not depend on the engine: it takes numbers and returns numbers.

mod design;
mod error;
pub mod figures;
pub mod lsm;
mod optimum;
mod params;
mod tune;

pub use design::{
    sst_traffic, sst_traffic_factors, stepped_traffic, stepped_traffic_factors, with_value_log,
    Design, Evaluation,
};
pub use error::{Result, VatError};
pub use optimum::{
    closed_form, lambert_w0, optimal_growth_factor, optimize, Optimum, GRID_POINTS, MIN_GROWTH,
};
pub use params::{Params, Shape};
pub use tune::{bytes, recommend, Recommendation, Workload};
