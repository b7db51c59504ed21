//! Value-file garbage collection, above the version that holds the value files: which
//! files are collected and when ([`policy`]), how their values move ([`job`]), where every
//! value goes by its predicted death ([`placement`], with the lifetime policies' state in
//! [`runtime`]), the garbage known before compaction counts it ([`early_garbage`], found
//! after each flush by [`superseded`] with the help of [`recent_pointers`]), the keys'
//! write intervals the placement reads ([`write_history`]), and the write rate that keeps
//! collection at its space target ([`pacer`]).
//!
//! The engine side (the GC threads, the host a job runs against, releasing dead files) is
//! `db/gc.rs`; the format and I/O of what is collected is [`crate::vlog`].

pub mod early_garbage;
pub mod garbage;
pub(crate) mod job;
pub mod pacer;
pub mod placement;
pub mod policy;
pub mod recent_pointers;
pub(crate) mod runtime;
pub mod stats;
pub(crate) mod superseded;
pub mod write_history;

pub use policy::GcPolicy;
