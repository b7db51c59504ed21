//! Log-structured block storage on an SSD array, and data placement for it (paper 004,
//! ADAPT).
//!
//! A log of 4 KiB blocks is cut into segments of chunks striped over an array (RAID-5
//! by default). Each placement *group* appends to its own open segment; user blocks wait
//! at most an SLA window for their chunk to fill, after which the chunk is zero-padded.
//! GC reclaims segments and rewrites their valid blocks into groups chosen by the
//! placement policy. The crate replays block traces (or synthetic YCSB-A streams)
//! through this model under every policy and counts each byte by cause.
//!
//! Modules, top-down: [`trace`] and [`synth`] produce write streams; [`sim`] replays a
//! stream through a [`store::Store`] (segments, chunks, padding, GC and victim
//! selection) that asks a [`placement::Placement`] where each block goes; [`report`]
//! sums the results; [`prototype`] drives the same policies against real files.

pub mod config;
pub mod error;
pub mod placement;
pub mod prototype;
pub mod report;
pub mod sim;
pub mod store;
pub mod synth;
pub mod trace;

pub use config::{Config, Selection};
pub use error::{LssError, Result};
