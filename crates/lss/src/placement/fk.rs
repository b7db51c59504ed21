//! FK, future knowledge: the oracle of the SepBIT study. Each written block (user or GC)
//! goes to the group of its true residual lifetime, read from the trace, in six
//! geometric bands ending at the log capacity; blocks never overwritten go to the last
//! group. It bounds what any lifespan-based placement can achieve.

use super::{Env, GcWrite, Placement, UserWrite};

pub const GROUPS: usize = 6;

pub struct Fk {
    bounds: [u64; GROUPS - 1],
}

impl Fk {
    pub fn new(env: &Env) -> Self {
        let cap = env.capacity_blocks.max(64);
        let mut bounds = [0; GROUPS - 1];
        for (i, b) in bounds.iter_mut().enumerate() {
            *b = cap >> (2 * (GROUPS - 2 - i));
        }
        Fk { bounds }
    }

    fn band(&self, now: u64, next: u64) -> usize {
        if next == u64::MAX {
            return GROUPS - 1;
        }
        let residual = next.saturating_sub(now);
        self.bounds
            .iter()
            .position(|&b| residual < b)
            .unwrap_or(GROUPS - 1)
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
        self.band(w.now, w.next_write)
    }
    fn gc_group(&mut self, w: &GcWrite) -> usize {
        self.band(w.now, w.next_write)
    }
    fn metadata_bytes(&self) -> usize {
        0
    }
}
