//! The benchmark harness shared by `halflife bench` and `halflife compare`: running ops on
//! client threads, measuring bytes written the same way for every engine, and showing the
//! results as tables, JSON reports and plots.

pub mod cgroup;
pub mod device;
pub mod fio;
pub mod flags;
pub mod isolate;
pub mod latency;
pub mod ops;
pub mod oracle;
pub mod outpath;
pub mod peers;
pub mod plots;
pub mod procio;
pub mod report;
pub mod table;
