//! The benchmark harness behind `halflife bench`, `halflife compare` and `halflife leaper`:
//! running ops on client threads, measuring bytes written the same way for every engine,
//! and showing the results as tables, JSON reports and plots.
//!
//! A library rather than part of the binary so that the one client loop, the reports and
//! the peers are shared: the `halflife` CLI is argument parsing and printing over it, and
//! the Python package or the server can drive the same workloads.

pub mod cgroup;
pub mod client;
pub mod dbbench;
pub mod device;
pub mod fio;
pub mod fonts;
pub mod isolate;
pub mod latency;
pub mod opfile;
pub mod ops;
pub mod oracle;
pub mod outpath;
pub mod peers;
pub mod phases;
pub mod plan;
pub mod plots;
pub mod procio;
pub mod report;
pub mod sampler;
pub mod spikes;
pub mod table;
