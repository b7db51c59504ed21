//! Data placement: which group (stream of segments) each written block goes to.
//!
//! Every scheme of the comparison implements [`Placement`]: the simulator asks it for a
//! group on each user write and each GC rewrite, tells it when a segment is reclaimed,
//! and, at the end of a chunk's SLA window, asks whether to pad the chunk or to persist
//! its blocks in another group's chunk (ADAPT's shadow append). Everything else (chunks,
//! padding, GC, counting) belongs to the store, so the schemes differ only in placement.

pub mod adapt;
pub mod dac;
pub mod fk;
pub mod mida;
pub mod sepbit;
pub mod sepgc;
pub mod warcip;

use crate::error::{LssError, Result};

/// Names accepted by [`build`], in report order (ADAPT last, FK the oracle).
pub const NAMES: &[&str] = &["sepgc", "dac", "warcip", "mida", "sepbit", "adapt", "fk"];

/// What a policy knows about the store it places into, fixed for a run.
#[derive(Clone, Debug)]
pub struct Env {
    /// Distinct blocks of the volume (dense ids `0..n_lbas`).
    pub n_lbas: u32,
    pub segment_blocks: u32,
    pub chunk_blocks: u32,
    /// SLA window in trace microseconds (`u64::MAX` without the chunk model).
    pub sla_window_us: u64,
    /// Log capacity in blocks (an estimate without the chunk model).
    pub capacity_blocks: u64,
    /// Garbage proportion at which GC triggers (ghost simulations use it).
    pub gc_garbage_ratio: f64,
    pub chunk_model: bool,
}

/// A user write about to be placed. Times are in user block writes (the clock of the
/// SepBIT study) unless named `_us`.
#[derive(Clone, Copy, Debug)]
pub struct UserWrite {
    pub lba: u32,
    pub now: u64,
    pub t_us: u64,
    /// Write time of the version this write invalidates, if any.
    pub prev_write: Option<u64>,
    /// Oracle: time of the next write to this block (`u64::MAX` = never). Only FK reads it.
    pub next_write: u64,
    /// Blocks appended to the log so far (user, GC, padding, shadow): the log's own
    /// clock, which runs faster than `now` by the current write amplification.
    pub log_blocks: u64,
}

/// A valid block that GC is about to rewrite.
#[derive(Clone, Copy, Debug)]
pub struct GcWrite {
    pub lba: u32,
    pub now: u64,
    pub from_group: usize,
    /// User write time of the block (its age is `now - write_time`).
    pub write_time: u64,
    /// How many times GC has moved this version before.
    pub migrations: u8,
    pub next_write: u64,
    pub log_blocks: u64,
}

/// A reclaimed segment.
#[derive(Clone, Copy, Debug)]
pub struct Collected {
    pub group: usize,
    pub created: u64,
    pub now: u64,
    pub valid: u32,
}

/// Per-group chunk statistics kept by the store, the inputs of Eq. 1.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct GroupStats {
    /// Data blocks (user, GC and shadow) in the window of recent segments.
    pub v: f64,
    /// Segments in the window.
    pub k: f64,
    /// Padded chunks in the window.
    pub p: f64,
    /// Chunks written in the window.
    pub chunks: f64,
    /// Lifetime totals.
    pub blocks_written: u64,
    pub padding_blocks: u64,
    pub segments_sealed: u64,
}

/// What the store shows a policy when a chunk's SLA window ends unfilled.
pub struct Deadline<'a> {
    pub group: usize,
    pub t_us: u64,
    /// Blocks of the chunk not yet persisted anywhere.
    pub pending: u32,
    /// Blocks currently buffered in each group's open chunk.
    pub open_fill: &'a [u32],
    /// Blocks of each group's open chunk not yet persisted anywhere.
    pub unpersisted: &'a [u32],
    /// Shadow blocks already placed in each group's open chunk.
    pub shadow_fill: &'a [u32],
    pub stats: &'a [GroupStats],
    pub chunk_blocks: u32,
    pub segment_chunks: u32,
}

/// What to do with an unfilled chunk at its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadlineAction {
    /// Zero-pad the chunk and write it.
    Pad,
    /// Persist, in the given group's open chunk, shadow copies of the unpersisted blocks
    /// of every other group whose chunk runs an SLA window (the expiring group first,
    /// then by deadline, as many as fit), then pad and write that chunk; the other chunks stay open for their lazy
    /// appends. One chunk write then covers every user block waiting in the array.
    Gather(usize),
}

/// A data placement scheme.
pub trait Placement: Send {
    fn name(&self) -> &'static str;
    /// Number of groups; group ids are `0..groups()`.
    fn groups(&self) -> usize;
    fn user_group(&mut self, w: &UserWrite) -> usize;
    fn gc_group(&mut self, w: &GcWrite) -> usize;
    /// A segment was reclaimed by GC.
    fn collected(&mut self, _c: &Collected) {}
    /// A segment of `group` was filled and sealed.
    fn sealed(&mut self, _group: usize) {}
    /// An unfilled chunk reached the end of its SLA window.
    fn deadline(&mut self, _d: &Deadline<'_>) -> DeadlineAction {
        DeadlineAction::Pad
    }
    /// Bytes of metadata the scheme keeps (its memory overhead, Fig. 12b).
    fn metadata_bytes(&self) -> usize;
    /// Free-form diagnostics for the report (e.g. ADAPT's threshold history).
    fn diagnostics(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// Builds a policy by name.
pub fn build(name: &str, env: &Env) -> Result<Box<dyn Placement>> {
    let name = name.to_ascii_lowercase();
    let name = name.as_str();
    Ok(match name {
        "sepgc" => Box::new(sepgc::SepGc),
        "dac" => Box::new(dac::Dac::new(env)),
        "warcip" => Box::new(warcip::Warcip::new(env)),
        "mida" => Box::new(mida::Mida),
        "sepbit" => Box::new(sepbit::SepBit::new()),
        "adapt" => Box::new(adapt::Adapt::new(env, adapt::AdaptConfig::default())),
        // Ablations: ADAPT without one of its three mechanisms.
        "adapt-noadapt" | "adapt-noagg" | "adapt-nodemote" => {
            let mut c = adapt::AdaptConfig::default();
            match name {
                "adapt-noadapt" => c.adaptation = false,
                "adapt-noagg" => c.aggregation = false,
                _ => c.demotion = false,
            }
            Box::new(adapt::Adapt::new(env, c).named(name))
        }
        "fk" => Box::new(fk::Fk::new(env)),
        _ => return Err(unknown_policy(name)),
    })
}

/// ADAPT variants with one mechanism switched off, accepted by [`build`] and
/// [`parse_list`] but not part of `all`.
pub const ABLATIONS: &[&str] = &["adapt-noadapt", "adapt-noagg", "adapt-nodemote"];

/// Expands `all` and comma-separated lists into known names, checking each.
pub fn parse_list(spec: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for s in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if s.eq_ignore_ascii_case("all") {
            out.extend(NAMES.iter().map(|n| n.to_string()));
        } else if NAMES.contains(&s.to_ascii_lowercase().as_str())
            || ABLATIONS.contains(&s.to_ascii_lowercase().as_str())
        {
            out.push(s.to_ascii_lowercase());
        } else {
            return Err(unknown_policy(s));
        }
    }
    out.dedup();
    if out.is_empty() {
        return Err(unknown_policy(spec));
    }
    Ok(out)
}

/// The error for a policy name no implementation answers to, listing those that do.
fn unknown_policy(name: &str) -> LssError {
    LssError::UnknownPolicy {
        name: name.to_string(),
        known: NAMES.join(", "),
    }
}
