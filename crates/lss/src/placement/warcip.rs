//! WARCIP (Yang, Pei and Yang, SYSTOR 2019): clusters user writes by update interval.
//!
//! Five user groups, each a cluster with a centroid on the log2 of the update interval
//! (user writes since the block's previous write); a write joins the nearest centroid,
//! which then moves toward it (online k-means, so the clusters follow the workload).
//! First writes have no interval and join the coldest cluster. GC rewrites all go to one
//! GC group (group 5).

use super::{Env, GcWrite, Placement, UserWrite};

pub const USER_GROUPS: usize = 5;
const RATE: f64 = 1.0 / 1024.0;

pub struct Warcip {
    centroids: [f64; USER_GROUPS],
}

impl Warcip {
    pub fn new(env: &Env) -> Self {
        let base = (env.segment_blocks.max(2) as f64).log2();
        let mut centroids = [0.0; USER_GROUPS];
        for (i, c) in centroids.iter_mut().enumerate() {
            *c = base + 2.0 * i as f64;
        }
        Warcip { centroids }
    }

    pub fn centroids(&self) -> [f64; USER_GROUPS] {
        self.centroids
    }
}

impl Placement for Warcip {
    fn name(&self) -> &'static str {
        "warcip"
    }
    fn groups(&self) -> usize {
        USER_GROUPS + 1
    }
    fn user_group(&mut self, w: &UserWrite) -> usize {
        let Some(t) = w.prev_write else {
            return USER_GROUPS - 1;
        };
        let x = ((w.now - t) as f64 + 1.0).log2();
        let (i, _) = self
            .centroids
            .iter()
            .enumerate()
            .map(|(i, c)| (i, (c - x).abs()))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        self.centroids[i] += (x - self.centroids[i]) * RATE;
        // Keep groups ordered hot to cold even if centroids cross.
        self.centroids.sort_by(f64::total_cmp);
        i
    }
    fn gc_group(&mut self, _w: &GcWrite) -> usize {
        USER_GROUPS
    }
    fn metadata_bytes(&self) -> usize {
        USER_GROUPS * 8
    }
}
