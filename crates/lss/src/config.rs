//! Store geometry and GC settings.

use crate::error::{LssError, Result};

/// How GC picks its victim among sealed segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Selection {
    /// Fewest valid blocks first.
    Greedy,
    /// Highest `(1 - u) * age / (1 + u)` (Rosenblum and Ousterhout's LFS cleaner).
    CostBenefit,
}

impl std::str::FromStr for Selection {
    type Err = LssError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "greedy" => Ok(Selection::Greedy),
            "cost-benefit" | "costbenefit" | "cb" => Ok(Selection::CostBenefit),
            _ => Err(LssError::Config(format!(
                "unknown victim selection `{s}` (greedy, cost-benefit)"
            ))),
        }
    }
}

/// Geometry of the array and of the log, and GC policy.
///
/// Two models share one code path:
/// - the chunk model (`chunk_model = true`, the default): user blocks coalesce into
///   chunks for at most `sla_window_us` of trace time, after which an unfilled chunk is
///   zero-padded and written; GC runs when free segments fall below `gc_free_ratio` of a
///   capacity sized from the volume's footprint;
/// - the SepBIT-study model (`chunk_model = false`): no padding, an unbounded log, GC of
///   one segment at a time whenever the garbage proportion of the whole log passes
///   `gc_garbage_ratio`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Config {
    /// Blocks per chunk (64 KiB / 4 KiB = 16 by default).
    pub chunk_blocks: u32,
    /// Data devices per stripe (RAID-5 over 4 devices: 3 data + 1 parity).
    pub data_devices: u32,
    /// Stripes per segment.
    pub stripes_per_segment: u32,
    /// SLA coalescing window in trace microseconds.
    pub sla_window_us: u64,
    pub chunk_model: bool,
    pub selection: Selection,
    /// Garbage proportion that triggers GC in the SepBIT-study model.
    pub gc_garbage_ratio: f64,
    /// Spare capacity of the chunk model: capacity = footprint / (1 - spare).
    pub spare_ratio: f64,
    /// Free-segment fraction below which the chunk model runs GC.
    pub gc_free_ratio: f64,
    /// User block writes replayed before the counters start (a fill phase).
    pub warmup_blocks: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            chunk_blocks: 16,
            data_devices: 3,
            stripes_per_segment: 64,
            sla_window_us: 100,
            chunk_model: true,
            selection: Selection::Greedy,
            gc_garbage_ratio: 0.15,
            spare_ratio: 0.15,
            gc_free_ratio: 0.02,
            warmup_blocks: 0,
        }
    }
}

impl Config {
    /// The conventions of the SepBIT study: 512 MiB segments, no chunks, GC at 15 %.
    pub fn sepbit_study() -> Self {
        Config {
            chunk_model: false,
            chunk_blocks: 16,
            data_devices: 1,
            stripes_per_segment: 8192,
            ..Config::default()
        }
    }

    pub fn segment_blocks(&self) -> u32 {
        self.chunk_blocks * self.data_devices * self.stripes_per_segment
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(LssError::Config(m.to_string()));
        if self.chunk_blocks == 0 || self.data_devices == 0 || self.stripes_per_segment == 0 {
            return bad("chunk, device and stripe counts must be positive");
        }
        if (self.segment_blocks() as u64) > (1 << 24) {
            return bad("segments above 64 GiB are not supported");
        }
        if !(0.0..0.9).contains(&self.gc_garbage_ratio) || self.gc_garbage_ratio == 0.0 {
            return bad("gc garbage ratio must be in (0, 0.9)");
        }
        if !(0.01..0.9).contains(&self.spare_ratio) {
            return bad("spare ratio must be in [0.01, 0.9)");
        }
        if !(0.0..0.5).contains(&self.gc_free_ratio) {
            return bad("gc free ratio must be in [0, 0.5)");
        }
        Ok(())
    }
}
