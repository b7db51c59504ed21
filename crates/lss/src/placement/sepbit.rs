//! SepBIT (Wang et al., FAST 2022): separates blocks by inferred invalidation time.
//!
//! User writes: a block whose previous version lived less than `ell` user writes is
//! short-lived (group 0), otherwise long-lived (group 1); `ell` is the average lifespan
//! of the last 16 reclaimed group-0 segments (infinite until the first one).
//! GC rewrites: blocks from group 0 go to group 2; others go by age to group 3
//! (`< 4 ell`), 4 (`< 16 ell`) or 5.

use super::{Collected, GcWrite, Placement, UserWrite};
use std::collections::VecDeque;

pub const GROUPS: usize = 6;

/// The running average lifespan of reclaimed hot segments (SepBIT's `ell`).
#[derive(Clone, Debug, Default)]
pub struct Lifespan {
    recent: VecDeque<u64>,
    sum: u64,
}

impl Lifespan {
    const WINDOW: usize = 16;

    pub fn push(&mut self, lifespan: u64) {
        self.recent.push_back(lifespan);
        self.sum += lifespan;
        if self.recent.len() > Self::WINDOW {
            self.sum -= self.recent.pop_front().unwrap();
        }
    }

    /// `ell`, infinite before the first reclaimed segment.
    pub fn ell(&self) -> f64 {
        if self.recent.is_empty() {
            f64::INFINITY
        } else {
            self.sum as f64 / self.recent.len() as f64
        }
    }
}

/// SepBIT's GC classes (groups 2..=5) for a block of the given origin and age.
pub fn gc_class(from_group: usize, age: u64, ell: f64) -> usize {
    if from_group == 0 {
        2
    } else if (age as f64) < 4.0 * ell {
        3
    } else if (age as f64) < 16.0 * ell {
        4
    } else {
        5
    }
}

pub struct SepBit {
    ell: Lifespan,
}

impl SepBit {
    pub fn new() -> Self {
        SepBit {
            ell: Lifespan::default(),
        }
    }
}

impl Default for SepBit {
    fn default() -> Self {
        Self::new()
    }
}

impl Placement for SepBit {
    fn name(&self) -> &'static str {
        "sepbit"
    }
    fn groups(&self) -> usize {
        GROUPS
    }
    fn user_group(&mut self, w: &UserWrite) -> usize {
        match w.prev_write {
            Some(t) if ((w.now - t) as f64) < self.ell.ell() => 0,
            _ => 1,
        }
    }
    fn gc_group(&mut self, w: &GcWrite) -> usize {
        gc_class(w.from_group, w.now - w.write_time, self.ell.ell())
    }
    fn collected(&mut self, c: &Collected) {
        if c.group == 0 {
            self.ell.push(c.now - c.created);
        }
    }
    fn metadata_bytes(&self) -> usize {
        Lifespan::WINDOW * 8
    }
    fn diagnostics(&self) -> serde_json::Value {
        serde_json::json!({ "ell": self.ell.ell() })
    }
}
