//! YCSB-style workloads shared by every halflife benchmark and by the peer drivers.
//!
//! A [`WorkloadSpec`] (a YCSB preset, paper 000's write-intensive workload and its shifting
//! and mixed variants, or a custom mix) becomes a [`Workload`], which yields a load phase and
//! a seeded run phase of [`Op`]s.
//! Ops name keys by number; [`keys`] turns numbers into key bytes and values, [`opfile`]
//! writes the op stream for drivers in other languages.
//!
//! - [`generator`]: key choosers (uniform, Zipfian, scrambled Zipfian, latest, periodic).
//! - [`spec`]: workload descriptions, presets and validation.
//! - [`keys`]: key formatting and verifiable value bytes.
//! - [`compressible`]: value bytes of a chosen compressibility (db_bench's `--compression_ratio`).
//! - [`opfile`]: the binary op-stream format.
//! - [`rng`]: the crate's own seeded generator, so a seed names the same run forever.

pub mod compressible;
pub mod generator;
pub mod keys;
pub mod op;
pub mod opfile;
pub mod rng;
pub mod spec;
pub mod workload;

pub use compressible::CompressibleValues;
pub use generator::{Distribution, DistributionError, KeyChooser};
pub use keys::{format_key, ValueGen};
pub use op::Op;
pub use spec::{ExpirySpec, Proportions, SpecError, WorkloadSpec};
pub use workload::{RunOps, Workload};
