//! FK, future knowledge: the oracle of the SepBIT study. Each written block goes to the
//! group of its true residual lifetime, read from the trace. Lifetimes are compared on
//! the log's clock (blocks appended, so padding and GC count), against fractions of the
//! log capacity: that is what decides whether a block dies before its segment is reclaimed.
//!
//! - Without the chunk model (the SepBIT study): six classes by residual lifetime for
//!   every write, bounds at 1/8, 1/4, 1/2, 1 and 4 capacities.
//! - With the chunk model: the same six groups but arranged like SepBIT and ADAPT, two
//!   for user writes (dies within half a capacity or not) and four for GC rewrites
//!   (bounds 1/2, 1, 4 capacities). Spreading user writes over six groups would cost the
//!   oracle the padding that separating user writes costs every scheme; knowing the
//!   future does not fill chunks.
//!
//! Blocks never overwritten go to the last group.

use super::{Env, GcWrite, Placement, UserWrite};

pub const GROUPS: usize = 6;

pub struct Fk {
    cap: f64,
    chunk_model: bool,
}

impl Fk {
    pub fn new(env: &Env) -> Self {
        Fk {
            cap: env.capacity_blocks.max(64) as f64,
            chunk_model: env.chunk_model,
        }
    }

    /// Residual lifetime in capacities, on the log clock.
    fn residual(&self, now: u64, next: u64, log_blocks: u64) -> f64 {
        if next == u64::MAX {
            return f64::INFINITY;
        }
        let speed = if now == 0 {
            1.0
        } else {
            log_blocks as f64 / now as f64
        };
        next.saturating_sub(now) as f64 * speed.max(1.0) / self.cap
    }

    fn band(r: f64, bounds: &[f64], first: usize) -> usize {
        first + bounds.iter().position(|&b| r < b).unwrap_or(bounds.len())
    }
}

impl Placement for Fk {
    fn name(&self) -> &'static str {
        "fk"
    }
    fn groups(&self) -> usize {
        GROUPS
    }
    fn user_group(&mut self, w: &UserWrite) -> usize {
        let r = self.residual(w.now, w.next_write, w.log_blocks);
        if self.chunk_model {
            Self::band(r, &[0.5], 0)
        } else {
            Self::band(r, &[0.125, 0.25, 0.5, 1.0, 4.0], 0)
        }
    }
    fn gc_group(&mut self, w: &GcWrite) -> usize {
        let r = self.residual(w.now, w.next_write, w.log_blocks);
        if self.chunk_model {
            Self::band(r, &[0.5, 1.0, 4.0], 2)
        } else {
            Self::band(r, &[0.125, 0.25, 0.5, 1.0, 4.0], 0)
        }
    }
    fn metadata_bytes(&self) -> usize {
        0
    }
}
