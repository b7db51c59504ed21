//! MiDA (Park et al., APSys 2021): a block's migration count stands for its age. User
//! writes enter group 0; each GC rewrite moves a block one group colder, up to group 7
//! (eight groups shared by user and GC writes, as configured in paper 004 sec. 4.1).

use super::{GcWrite, Placement, UserWrite};

pub const GROUPS: usize = 8;

pub struct Mida;

impl Placement for Mida {
    fn name(&self) -> &'static str {
        "mida"
    }
    fn groups(&self) -> usize {
        GROUPS
    }
    fn user_group(&mut self, _w: &UserWrite) -> usize {
        0
    }
    fn gc_group(&mut self, w: &GcWrite) -> usize {
        (w.migrations as usize + 1).min(GROUPS - 1)
    }
    fn metadata_bytes(&self) -> usize {
        0 // the count lives in the block's metadata, which the store keeps anyway
    }
}
