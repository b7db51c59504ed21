//! YCSB-style workloads shared by every halflife benchmark and by the peer drivers.
//!
//! - [`generator`]: key choosers (uniform, Zipfian, scrambled Zipfian, latest).
//! - [`rng`]: the crate's own seeded generator, so a seed names the same run forever.

pub mod generator;
pub mod keys;
pub mod rng;
