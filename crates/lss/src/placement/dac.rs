//! DAC, dynamic data clustering (Chiang, Lee and Chang 1999): five regions ordered by
//! temperature, driven by access counts. A new block starts in the coldest region; each
//! update promotes it one region hotter, and each GC migration demotes it one region
//! colder. Group 0 is the coldest, group 4 the hottest; user and GC writes share them.

use super::{Env, GcWrite, Placement, UserWrite};

pub const GROUPS: usize = 5;

pub struct Dac {
    region: Vec<u8>,
}

impl Dac {
    pub fn new(env: &Env) -> Self {
        Dac {
            region: vec![0; env.n_lbas as usize],
        }
    }
}

impl Placement for Dac {
    fn name(&self) -> &'static str {
        "dac"
    }
    fn groups(&self) -> usize {
        GROUPS
    }
    fn user_group(&mut self, w: &UserWrite) -> usize {
        let r = &mut self.region[w.lba as usize];
        if w.prev_write.is_some() {
            *r = (*r + 1).min(GROUPS as u8 - 1);
        } else {
            *r = 0;
        }
        *r as usize
    }
    fn gc_group(&mut self, w: &GcWrite) -> usize {
        let r = &mut self.region[w.lba as usize];
        *r = r.saturating_sub(1);
        *r as usize
    }
    fn metadata_bytes(&self) -> usize {
        self.region.len()
    }
}
