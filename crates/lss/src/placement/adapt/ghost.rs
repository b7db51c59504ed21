//! Ghost sets (paper 004 sec. 3.2): miniature logs of the two user-written groups, fed
//! with the sampled blocks only, each separating hot from cold at its own threshold.
//!
//! A ghost set tracks block ids, not data. Its segments are the real segment size scaled
//! by the sampling rate (never below two chunks) and its SLA window is stretched by the
//! inverse rate, since the sampled stream is that much sparser. GC triggers on the
//! garbage proportion like the real log, but valid blocks of a victim are discarded and
//! counted instead of rewritten: in the real store they would leave the user groups for
//! the GC groups. With aggregation on, a ghost set merges the two groups' unfilled chunks
//! at a deadline the way the real store does (hot blocks shadowed in the cold chunk), so
//! that splitting is not charged padding the real store would avoid. Its write
//! amplification over an epoch is `(written + padding + shadow + discarded) / written`.

const NONE: u32 = u32::MAX;
const PAD: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, Default)]
struct GSeg {
    fill: u32,
    valid: u32,
    sealed: bool,
}

/// Write counters of one epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Epoch {
    pub written: u64,
    pub padding: u64,
    pub shadow: u64,
    pub discarded: u64,
    pub gcs: u64,
}

impl Epoch {
    pub fn wa(&self) -> f64 {
        if self.written == 0 {
            return f64::INFINITY;
        }
        (self.written + self.padding + self.shadow + self.discarded) as f64 / self.written as f64
    }
}

pub struct GhostSet {
    /// Hot/cold threshold in (scaled) reuse-distance blocks.
    pub threshold: f64,
    seg_blocks: u32,
    chunk: u32,
    window: u64,
    gp: f64,
    slots: Vec<u32>,
    segs: Vec<GSeg>,
    free: Vec<u32>,
    loc: Vec<u32>,
    open: [u32; 2],
    chunk_start: [u32; 2],
    deadline: [u64; 2],
    shadowed: [u32; 2],
    aggregation: bool,
    used: u64,
    valid: u64,
    /// When set, GC keeps the log within this many blocks instead of triggering on
    /// the garbage proportion.
    pub capacity: Option<u64>,
    pub epoch: Epoch,
    pub total_gcs: u64,
}

impl GhostSet {
    pub fn new(
        threshold: f64,
        seg_blocks: u32,
        chunk: u32,
        window: u64,
        gp: f64,
        aggregation: bool,
    ) -> Self {
        GhostSet {
            threshold,
            seg_blocks,
            chunk,
            window,
            gp,
            slots: Vec::new(),
            segs: Vec::new(),
            free: Vec::new(),
            loc: Vec::new(),
            open: [NONE; 2],
            chunk_start: [0; 2],
            deadline: [u64::MAX; 2],
            shadowed: [0; 2],
            aggregation,
            used: 0,
            valid: 0,
            capacity: None,
            epoch: Epoch::default(),
            total_gcs: 0,
        }
    }

    /// Places one sampled write of block `sid` with reuse distance `distance`.
    pub fn write(&mut self, sid: u32, distance: Option<f64>, t_us: u64) {
        loop {
            let g = usize::from(self.deadline[1] < self.deadline[0]);
            if self.deadline[g] > t_us {
                break;
            }
            self.expire(g);
        }
        let s = sid as usize;
        if s >= self.loc.len() {
            self.loc.resize(s + 1, NONE);
        }
        let old = self.loc[s];
        if old != NONE {
            self.segs[(old / self.seg_blocks) as usize].valid -= 1;
            self.valid -= 1;
            self.loc[s] = NONE;
        }
        let hot = distance.is_some_and(|d| d < self.threshold);
        let g = usize::from(!hot);
        self.append(g, sid);
        self.epoch.written += 1;
        if self.deadline[g] == u64::MAX && self.window != u64::MAX {
            self.deadline[g] = t_us.saturating_add(self.window);
        }
        loop {
            let over = match self.capacity {
                Some(c) => self.used > c,
                None => (self.used - self.valid) as f64 > self.gp * self.used as f64,
            };
            if !over || !self.gc() {
                break;
            }
        }
    }

    fn open_segment(&mut self, g: usize) {
        let s = self.free.pop().unwrap_or_else(|| {
            self.segs.push(GSeg::default());
            self.slots
                .resize(self.slots.len() + self.seg_blocks as usize, NONE);
            self.segs.len() as u32 - 1
        });
        self.segs[s as usize] = GSeg::default();
        self.open[g] = s;
        self.chunk_start[g] = 0;
    }

    fn append(&mut self, g: usize, v: u32) {
        if self.open[g] == NONE {
            self.open_segment(g);
        }
        let s = self.open[g];
        let seg = &mut self.segs[s as usize];
        let slot = s * self.seg_blocks + seg.fill;
        self.slots[slot as usize] = v;
        seg.fill += 1;
        self.used += 1;
        if v != PAD {
            seg.valid += 1;
            self.valid += 1;
            self.loc[v as usize] = slot;
        }
        if seg.fill - self.chunk_start[g] == self.chunk {
            self.chunk_start[g] = seg.fill;
            self.deadline[g] = u64::MAX;
            self.shadowed[g] = 0;
            if seg.fill == self.seg_blocks {
                seg.sealed = true;
                self.open[g] = NONE;
            }
        }
    }

    fn fill(&self, g: usize) -> u32 {
        let s = self.open[g];
        if s == NONE {
            0
        } else {
            self.segs[s as usize].fill - self.chunk_start[g]
        }
    }

    /// The SLA window of `g`'s chunk ended: merge with the other group's chunk when
    /// aggregation allows (group 0 is hot, 1 cold), else pad.
    fn expire(&mut self, g: usize) {
        self.deadline[g] = u64::MAX;
        if !self.aggregation {
            return self.pad(g);
        }
        let (hot, cold) = (0, 1);
        let unpersisted = |s: &Self, x: usize| s.fill(x) - s.shadowed[x];
        if g == hot && self.fill(cold) > 0 && self.fill(cold) + unpersisted(self, hot) <= self.chunk
        {
            let n = unpersisted(self, hot);
            self.shadow(hot, cold, n);
            self.pad(cold);
        } else if g == cold && unpersisted(self, hot) > 0 {
            let n = unpersisted(self, hot).min(self.chunk - self.fill(cold));
            self.shadow(hot, cold, n);
            self.pad(cold);
        } else {
            self.pad(g);
        }
    }

    fn shadow(&mut self, from: usize, into: usize, n: u32) {
        for _ in 0..n {
            self.append(into, PAD);
        }
        self.epoch.shadow += n as u64;
        self.shadowed[from] += n;
        if self.shadowed[from] >= self.fill(from) {
            self.deadline[from] = u64::MAX;
        }
    }

    fn pad(&mut self, g: usize) {
        self.deadline[g] = u64::MAX;
        let s = self.open[g];
        if s == NONE {
            return;
        }
        let fill = self.segs[s as usize].fill;
        if fill == self.chunk_start[g] {
            return;
        }
        let n = self.chunk - (fill - self.chunk_start[g]);
        for _ in 0..n {
            self.append(g, PAD);
        }
        self.epoch.padding += n as u64;
    }

    /// Greedy GC of one sealed segment, discarding its valid blocks.
    fn gc(&mut self) -> bool {
        let victim = self
            .segs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.sealed)
            .min_by_key(|(_, s)| s.valid)
            .map(|(i, _)| i);
        let Some(v) = victim else { return false };
        let seg = self.segs[v];
        if seg.valid == seg.fill {
            return false;
        }
        let base = v as u32 * self.seg_blocks;
        for i in 0..seg.fill {
            let l = self.slots[(base + i) as usize];
            if l != PAD && self.loc[l as usize] == base + i {
                self.loc[l as usize] = NONE;
            }
        }
        self.epoch.discarded += seg.valid as u64;
        self.valid -= seg.valid as u64;
        self.used -= seg.fill as u64;
        self.segs[v] = GSeg::default();
        self.free.push(v as u32);
        self.epoch.gcs += 1;
        self.total_gcs += 1;
        true
    }

    pub fn bytes(&self) -> usize {
        self.slots.len() * 4 + self.loc.len() * 4 + self.segs.len() * 12
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_padding_and_discards() {
        // Segments of 4 blocks, chunks of 2, window 10 us.
        let mut g = GhostSet::new(5.0, 4, 2, 10, 0.2, false);
        g.write(0, None, 0); // cold chunk opens
        g.write(1, None, 20); // window over: block 0 padded with one block
        assert_eq!(g.epoch.padding, 1);
        g.write(1, Some(0.0), 21); // hot; invalidates the cold copy of 1
        assert_eq!(g.epoch.written, 3);
        assert!(g.epoch.wa() > 1.0);
    }

    #[test]
    fn aggregation_merges_hot_into_cold_chunk() {
        // Chunks of 4, window 10: a cold block then a hot block inside one window.
        let mut g = GhostSet::new(5.0, 8, 4, 10, 0.5, true);
        g.write(0, None, 0);
        g.write(1, Some(1.0), 5);
        // Past both deadlines: one merged chunk (cold block, hot shadow, 2 padding).
        g.write(2, None, 100);
        assert_eq!((g.epoch.shadow, g.epoch.padding), (1, 2));
        let mut n = GhostSet::new(5.0, 8, 4, 10, 0.5, false);
        n.write(0, None, 0);
        n.write(1, Some(1.0), 5);
        n.write(2, None, 100);
        assert_eq!((n.epoch.shadow, n.epoch.padding), (0, 6));
    }

    #[test]
    fn gc_discards_valid_blocks() {
        let mut g = GhostSet::new(0.0, 4, 1, u64::MAX, 0.25, false);
        // Everything cold. Fill two segments, then overwrite so garbage passes 25 %.
        for sid in 0..8 {
            g.write(sid, None, 0);
        }
        for sid in 0..3 {
            g.write(sid, Some(100.0), 0);
        }
        assert!(g.total_gcs >= 1);
        assert!(g.epoch.discarded >= 1);
    }
}
