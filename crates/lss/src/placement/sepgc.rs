//! SepGC: user writes in one group, GC rewrites in another (Van Houdt 2014). The simplest
//! separation, and the one key-value stores with value logs use.

use super::{GcWrite, Placement, UserWrite};

pub struct SepGc;

impl Placement for SepGc {
    fn name(&self) -> &'static str {
        "sepgc"
    }
    fn groups(&self) -> usize {
        2
    }
    fn user_group(&mut self, _w: &UserWrite) -> usize {
        0
    }
    fn gc_group(&mut self, _w: &GcWrite) -> usize {
        1
    }
    fn metadata_bytes(&self) -> usize {
        0
    }
}
