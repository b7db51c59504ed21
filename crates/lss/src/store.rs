//! The log-structured store: segments made of chunks striped over an array, one open
//! segment per group, SLA-bounded chunk coalescing with zero padding, and GC.
//!
//! Blocks get their slot in a segment as soon as they are appended; a chunk (a run of
//! `chunk_blocks` consecutive slots) counts as written when it is full, or when its SLA
//! window ends and it is zero-padded. Padded slots are garbage from the start, so
//! padding costs twice: the padding bytes themselves and the extra GC they cause. A chunk
//! that only holds GC-migrated blocks has no SLA (GC is bulk work nobody waits for); a
//! chunk's window opens with the first user block it receives.
//!
//! Every counter is in blocks; the report converts to bytes. The invariants checked by
//! [`Store::check`] are the ones the tests assert after random traces.

use crate::config::{Config, Selection};
use crate::placement::{
    Collected, Deadline, DeadlineAction, Env, GcWrite, GroupStats, Placement, UserWrite,
};

const NONE: u32 = u32::MAX;
/// Slot marker of a zero-padding block.
const PAD: u32 = u32::MAX;
/// Slot marker of a shadow copy (ADAPT): persisted, but superseded by the lazy append.
const SHADOW: u32 = u32::MAX - 1;
const NO_DEADLINE: u64 = u64::MAX;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Free,
    Open,
    Sealed,
}

#[derive(Clone, Copy, Debug)]
struct Segment {
    group: u16,
    state: State,
    created: u64,
    sealed: u64,
    fill: u32,
    valid: u32,
    data: u32,
    padded_chunks: u32,
}

impl Segment {
    const FREE: Segment = Segment {
        group: 0,
        state: State::Free,
        created: 0,
        sealed: 0,
        fill: 0,
        valid: 0,
        data: 0,
        padded_chunks: 0,
    };
}

#[derive(Clone, Copy, Debug)]
struct Group {
    seg: u32,
    /// Offset in the open segment where the open chunk starts.
    chunk_start: u32,
    deadline: u64,
    /// Blocks of the open chunk already persisted by a shadow append.
    shadowed: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    User,
    Gc,
    Shadow,
}

/// Write counters, in blocks (chunks for `chunks` and `parity_chunks`).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, PartialEq, Eq)]
pub struct Counters {
    pub user: u64,
    pub gc: u64,
    pub padding: u64,
    pub shadow: u64,
    pub chunks: u64,
    pub parity_chunks: u64,
    pub gc_rounds: u64,
    pub segments_collected: u64,
    /// Segments added beyond the planned capacity because GC could not free enough.
    pub overflow_segments: u64,
}

impl Counters {
    fn minus(&self, o: &Counters) -> Counters {
        Counters {
            user: self.user - o.user,
            gc: self.gc - o.gc,
            padding: self.padding - o.padding,
            shadow: self.shadow - o.shadow,
            chunks: self.chunks - o.chunks,
            parity_chunks: self.parity_chunks - o.parity_chunks,
            gc_rounds: self.gc_rounds - o.gc_rounds,
            segments_collected: self.segments_collected - o.segments_collected,
            overflow_segments: self.overflow_segments - o.overflow_segments,
        }
    }

    /// Write amplification: everything written to data chunks over user blocks.
    pub fn wa(&self) -> f64 {
        if self.user == 0 {
            return 1.0;
        }
        (self.user + self.gc + self.padding + self.shadow) as f64 / self.user as f64
    }

    /// Share of padding in all data written.
    pub fn padding_ratio(&self) -> f64 {
        let all = self.user + self.gc + self.padding + self.shadow;
        if all == 0 {
            0.0
        } else {
            self.padding as f64 / all as f64
        }
    }
}

/// The simulated store of one volume under one placement policy.
pub struct Store {
    cfg: Config,
    seg_blocks: u32,
    chunk_blocks: u32,
    window: u64,
    slots: Vec<u32>,
    segs: Vec<Segment>,
    free: Vec<u32>,
    /// Chunk model: GC runs when fewer than `low_free` segments are free, up to `high_free`.
    low_free: usize,
    high_free: usize,
    loc: Vec<u32>,
    wtime: Vec<u64>,
    next: Vec<u64>,
    migr: Vec<u8>,
    groups: Vec<Group>,
    stats: Vec<GroupStats>,
    scratch_fill: Vec<u32>,
    scratch_unpersisted: Vec<u32>,
    shadow_fill: Vec<u32>,
    now: u64,
    t_us: u64,
    min_deadline: u64,
    used_slots: u64,
    valid_total: u64,
    live: u64,
    c: Counters,
    warm: Option<Counters>,
    /// Prototype hook: chunks written and segments reclaimed since the last take.
    recording: bool,
    flushed: Vec<Flushed>,
    reclaimed: Vec<u32>,
}

/// A chunk the store wrote, for the prototype: where it goes and what its slots hold
/// (a block id, or [`Flushed::PAD`] / [`Flushed::SHADOW`]).
#[derive(Clone, Debug)]
pub struct Flushed {
    pub segment: u32,
    /// Chunk index within the segment.
    pub chunk: u32,
    pub slots: Vec<u32>,
}

impl Flushed {
    pub const PAD: u32 = PAD;
    pub const SHADOW: u32 = SHADOW;
}

/// Groups any policy may use; capacity reserves one open segment for each.
const MAX_GROUPS: usize = 8;

impl Store {
    /// Sizes the store for a volume of `n_lbas` distinct blocks and `groups` groups.
    pub fn new(cfg: &Config, n_lbas: u32, groups: usize) -> Store {
        assert!(groups <= MAX_GROUPS && groups > 0);
        let seg_blocks = cfg.segment_blocks();
        let (nsegs, low, high) = if cfg.chunk_model {
            let data = (n_lbas as u64).div_ceil(seg_blocks as u64).max(1);
            let base = (data as f64 / (1.0 - cfg.spare_ratio)).ceil() as usize;
            let low = (MAX_GROUPS + 2).max((cfg.gc_free_ratio * base as f64).ceil() as usize);
            let high = low + 2.max(base / 100);
            (base + low, low, high)
        } else {
            (16, 0, 0)
        };
        Store {
            window: if cfg.chunk_model {
                cfg.sla_window_us
            } else {
                NO_DEADLINE
            },
            cfg: cfg.clone(),
            seg_blocks,
            chunk_blocks: cfg.chunk_blocks,
            slots: vec![NONE; nsegs * seg_blocks as usize],
            segs: vec![Segment::FREE; nsegs],
            free: (0..nsegs as u32).rev().collect(),
            low_free: low,
            high_free: high,
            loc: vec![NONE; n_lbas as usize],
            wtime: vec![0; n_lbas as usize],
            next: vec![u64::MAX; n_lbas as usize],
            migr: vec![0; n_lbas as usize],
            groups: vec![
                Group {
                    seg: NONE,
                    chunk_start: 0,
                    deadline: NO_DEADLINE,
                    shadowed: 0,
                };
                groups
            ],
            stats: vec![GroupStats::default(); groups],
            scratch_fill: vec![0; groups],
            scratch_unpersisted: vec![0; groups],
            shadow_fill: vec![0; groups],
            now: 0,
            t_us: 0,
            min_deadline: NO_DEADLINE,
            used_slots: 0,
            valid_total: 0,
            live: 0,
            c: Counters::default(),
            warm: if cfg.warmup_blocks == 0 {
                Some(Counters::default())
            } else {
                None
            },
            recording: false,
            flushed: Vec::new(),
            reclaimed: Vec::new(),
        }
    }

    /// The environment a policy is built with for this store.
    pub fn env(cfg: &Config, n_lbas: u32) -> Env {
        let probe = Store::new(cfg, 1, 1);
        let capacity_blocks = if cfg.chunk_model {
            let s = cfg.segment_blocks() as u64;
            let data = (n_lbas as u64).div_ceil(s).max(1);
            (data as f64 / (1.0 - cfg.spare_ratio)).ceil() as u64 * s
        } else {
            (n_lbas as f64 / (1.0 - cfg.gc_garbage_ratio)) as u64
        };
        Env {
            n_lbas,
            segment_blocks: cfg.segment_blocks(),
            chunk_blocks: cfg.chunk_blocks,
            sla_window_us: probe.window,
            capacity_blocks,
            gc_garbage_ratio: cfg.gc_garbage_ratio,
            chunk_model: cfg.chunk_model,
        }
    }

    /// Replays one user block write at trace time `t_us`.
    pub fn write(&mut self, p: &mut dyn Placement, lba: u32, t_us: u64, next_write: u64) {
        self.t_us = t_us;
        if t_us >= self.min_deadline {
            self.expire(p, t_us);
        }
        let l = lba as usize;
        let old = self.loc[l];
        let prev_write = if old != NONE {
            // Unmap first: a GC run while placing this write must not migrate the old
            // version.
            self.invalidate(old);
            self.loc[l] = NONE;
            Some(self.wtime[l])
        } else {
            self.live += 1;
            None
        };
        let g = p.user_group(&UserWrite {
            lba,
            now: self.now,
            t_us,
            prev_write,
            next_write,
            log_blocks: self.log_blocks(),
        });
        self.wtime[l] = self.now;
        self.next[l] = next_write;
        self.migr[l] = 0;
        self.append(p, g, lba, Kind::User);
        self.c.user += 1;
        self.now += 1;
        if !self.cfg.chunk_model {
            self.gc_by_garbage(p);
        }
        if self.warm.is_none() && self.now >= self.cfg.warmup_blocks {
            self.warm = Some(self.c);
        }
    }

    /// Flushes every open chunk (zero-padded) at the end of the replay; without the
    /// chunk model there is nothing to flush.
    pub fn finish(&mut self, p: &mut dyn Placement) {
        if !self.cfg.chunk_model {
            return;
        }
        for g in 0..self.groups.len() {
            self.pad(p, g);
        }
        self.recompute_deadline();
    }

    /// Starts recording written chunks and reclaimed segments (the prototype's data path).
    pub fn set_recording(&mut self, on: bool) {
        self.recording = on;
    }

    /// Chunks written and segments reclaimed since the last call.
    pub fn take_events(&mut self) -> (Vec<Flushed>, Vec<u32>) {
        (
            std::mem::take(&mut self.flushed),
            std::mem::take(&mut self.reclaimed),
        )
    }

    /// Counters since the end of the warm-up.
    pub fn counters(&self) -> Counters {
        self.c.minus(&self.warm.unwrap_or(self.c))
    }

    /// Counters since the start, warm-up included.
    pub fn total_counters(&self) -> Counters {
        self.c
    }

    pub fn group_stats(&self) -> &[GroupStats] {
        &self.stats
    }

    pub fn chunk_blocks(&self) -> u32 {
        self.chunk_blocks
    }

    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    fn log_blocks(&self) -> u64 {
        self.c.user + self.c.gc + self.c.padding + self.c.shadow
    }

    fn invalidate(&mut self, slot: u32) {
        let s = (slot / self.seg_blocks) as usize;
        self.segs[s].valid -= 1;
        self.valid_total -= 1;
    }

    fn open_fill(&self, g: usize) -> u32 {
        let gr = &self.groups[g];
        if gr.seg == NONE {
            0
        } else {
            self.segs[gr.seg as usize].fill - gr.chunk_start
        }
    }

    fn open_segment(&mut self, p: &mut dyn Placement, g: usize, kind: Kind) {
        if self.cfg.chunk_model && kind == Kind::User && self.free.len() < self.low_free {
            self.gc_free(p);
            if self.groups[g].seg != NONE {
                return; // GC opened one for this group meanwhile.
            }
        }
        let s = match self.free.pop() {
            Some(s) => s,
            None => {
                let s = self.segs.len() as u32;
                self.segs.push(Segment::FREE);
                self.slots
                    .resize(self.slots.len() + self.seg_blocks as usize, NONE);
                if self.cfg.chunk_model {
                    self.c.overflow_segments += 1;
                }
                s
            }
        };
        self.segs[s as usize] = Segment {
            group: g as u16,
            state: State::Open,
            created: self.now,
            ..Segment::FREE
        };
        self.groups[g].seg = s;
        self.groups[g].chunk_start = 0;
        self.groups[g].shadowed = 0;
    }

    fn append(&mut self, p: &mut dyn Placement, g: usize, v: u32, kind: Kind) {
        if self.groups[g].seg == NONE {
            self.open_segment(p, g, kind);
        }
        let s = self.groups[g].seg as usize;
        let seg = &mut self.segs[s];
        let slot = s as u32 * self.seg_blocks + seg.fill;
        self.slots[slot as usize] = v;
        seg.fill += 1;
        self.used_slots += 1;
        match kind {
            Kind::Shadow => seg.data += 1,
            _ => {
                self.loc[v as usize] = slot;
                seg.valid += 1;
                seg.data += 1;
                self.valid_total += 1;
            }
        }
        let fill = seg.fill;
        let gr = &mut self.groups[g];
        if kind == Kind::User && gr.deadline == NO_DEADLINE && self.window != NO_DEADLINE {
            gr.deadline = self.t_us.saturating_add(self.window);
            self.min_deadline = self.min_deadline.min(gr.deadline);
        }
        if fill - gr.chunk_start == self.chunk_blocks {
            self.chunk_done(p, g, false);
        }
    }

    /// Closes the open chunk of `g` (full or padded) and seals the segment when full.
    fn chunk_done(&mut self, p: &mut dyn Placement, g: usize, padded: bool) {
        let s = self.groups[g].seg as usize;
        let fill = self.segs[s].fill;
        self.c.chunks += 1;
        if self.recording {
            let base = s * self.seg_blocks as usize;
            let start = (fill - self.chunk_blocks) as usize;
            self.flushed.push(Flushed {
                segment: s as u32,
                chunk: start as u32 / self.chunk_blocks,
                slots: self.slots[base + start..base + fill as usize].to_vec(),
            });
        }
        if (fill / self.chunk_blocks) % self.cfg.data_devices == 0 {
            self.c.parity_chunks += 1;
        }
        if padded {
            self.segs[s].padded_chunks += 1;
        }
        let gr = &mut self.groups[g];
        gr.chunk_start = fill;
        gr.shadowed = 0;
        let had_deadline = gr.deadline != NO_DEADLINE;
        gr.deadline = NO_DEADLINE;
        self.shadow_fill[g] = 0;
        if had_deadline && self.min_deadline != NO_DEADLINE {
            self.recompute_deadline();
        }
        if fill == self.seg_blocks {
            self.seal(g);
            p.sealed(g);
        }
    }

    fn seal(&mut self, g: usize) {
        let s = self.groups[g].seg as usize;
        let seg = &mut self.segs[s];
        seg.state = State::Sealed;
        seg.sealed = self.now;
        self.groups[g].seg = NONE;
        let st = &mut self.stats[g];
        if st.k >= 32.0 {
            // Exponential decay keeps Eq. 1 tracking the recent write rate.
            st.v *= 0.5;
            st.k *= 0.5;
            st.p *= 0.5;
            st.chunks *= 0.5;
        }
        st.v += seg.data as f64;
        st.k += 1.0;
        st.p += seg.padded_chunks as f64;
        st.chunks += (self.seg_blocks / self.chunk_blocks) as f64;
        st.segments_sealed += 1;
    }

    /// Zero-pads and writes the open chunk of `g`, if it holds anything.
    fn pad(&mut self, p: &mut dyn Placement, g: usize) {
        let gr = self.groups[g];
        if gr.seg == NONE {
            return;
        }
        let s = gr.seg as usize;
        let fill = self.segs[s].fill;
        if fill == gr.chunk_start {
            return;
        }
        let n = self.chunk_blocks - (fill - gr.chunk_start);
        let base = s * self.seg_blocks as usize + fill as usize;
        self.slots[base..base + n as usize].fill(PAD);
        self.segs[s].fill += n;
        self.used_slots += n as u64;
        self.c.padding += n as u64;
        self.stats[g].padding_blocks += n as u64;
        self.chunk_done(p, g, true);
    }

    fn recompute_deadline(&mut self) {
        self.min_deadline = self
            .groups
            .iter()
            .map(|g| g.deadline)
            .min()
            .unwrap_or(NO_DEADLINE);
    }

    /// Handles every chunk whose SLA window ended by `t`, earliest first.
    fn expire(&mut self, p: &mut dyn Placement, t: u64) {
        while let Some((g, d)) = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| (i, g.deadline))
            .min_by_key(|&(_, d)| d)
            .filter(|&(_, d)| d <= t)
        {
            for i in 0..self.groups.len() {
                self.scratch_fill[i] = self.open_fill(i);
                self.scratch_unpersisted[i] = self.scratch_fill[i] - self.groups[i].shadowed;
            }
            let pending = self.scratch_unpersisted[g];
            let action = if pending == 0 {
                None
            } else {
                Some(p.deadline(&Deadline {
                    group: g,
                    t_us: d,
                    pending,
                    open_fill: &self.scratch_fill,
                    unpersisted: &self.scratch_unpersisted,
                    shadow_fill: &self.shadow_fill,
                    stats: &self.stats,
                    chunk_blocks: self.chunk_blocks,
                    segment_chunks: self.seg_blocks / self.chunk_blocks,
                }))
            };
            let n = self.groups.len();
            match action {
                None => self.groups[g].deadline = NO_DEADLINE,
                Some(DeadlineAction::Gather(c)) if c < n => self.gather(p, g, c),
                Some(_) => self.pad(p, g),
            }
            self.recompute_deadline();
        }
    }

    /// Gathers the unpersisted blocks of every group but `c` whose chunk runs an SLA
    /// window into `c`'s open chunk as shadow copies (the expiring group `g` first, then
    /// by deadline, while room lasts),
    /// then writes that chunk. If `g`'s blocks did not all fit, `g` keeps its deadline
    /// and is handled again at once.
    fn gather(&mut self, p: &mut dyn Placement, g: usize, c: usize) {
        // Only chunks holding user blocks under an SLA window: GC-migrated blocks wait
        // for their chunk to fill and need no shadow.
        let mut order: Vec<usize> = (0..self.groups.len())
            .filter(|&x| x != c && self.groups[x].deadline != NO_DEADLINE)
            .collect();
        order.sort_by_key(|&x| (x != g, self.groups[x].deadline));
        let mut room = self.chunk_blocks - self.open_fill(c);
        for x in order {
            let k = (self.open_fill(x) - self.groups[x].shadowed).min(room);
            if k > 0 {
                self.shadow_blocks(p, x, c, k);
                room -= k;
            }
        }
        self.pad(p, c);
        if g != c && self.open_fill(g) == self.groups[g].shadowed {
            self.groups[g].deadline = NO_DEADLINE;
        }
    }

    /// Appends shadow copies of the oldest `n` unpersisted blocks of `from`'s open chunk
    /// to `into`'s open chunk. When all of `from`'s blocks are persisted its SLA timer
    /// stops until the next user block arrives.
    fn shadow_blocks(&mut self, p: &mut dyn Placement, from: usize, into: usize, n: u32) {
        for _ in 0..n {
            self.append(p, into, SHADOW, Kind::Shadow);
            self.shadow_fill[into] += 1;
        }
        self.c.shadow += n as u64;
        let fill = self.open_fill(from);
        let gr = &mut self.groups[from];
        gr.shadowed += n;
        if gr.shadowed >= fill {
            gr.deadline = NO_DEADLINE;
        }
    }

    fn select_victim(&self) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        let cap = self.seg_blocks as f64;
        for (i, s) in self.segs.iter().enumerate() {
            if s.state != State::Sealed {
                continue;
            }
            let score = match self.cfg.selection {
                Selection::Greedy => -(s.valid as f64),
                Selection::CostBenefit => {
                    let u = s.valid as f64 / cap;
                    let age = (self.now - s.sealed) as f64 + 1.0;
                    (1.0 - u) / (1.0 + u) * age
                }
            };
            if best.is_none_or(|(_, b)| score > b) {
                best = Some((i, score));
            }
        }
        let (v, _) = best?;
        (self.segs[v].valid < self.seg_blocks).then_some(v)
    }

    /// Chunk model: collect victims until enough segments are free.
    fn gc_free(&mut self, p: &mut dyn Placement) {
        self.c.gc_rounds += 1;
        while self.free.len() < self.high_free {
            let Some(v) = self.select_victim() else { break };
            self.collect(p, v);
        }
    }

    /// SepBIT-study model: collect one segment at a time while the garbage proportion of
    /// the log exceeds the threshold.
    fn gc_by_garbage(&mut self, p: &mut dyn Placement) {
        let r = self.cfg.gc_garbage_ratio;
        let mut counted = false;
        while (self.used_slots - self.valid_total) as f64 > r * self.used_slots as f64 {
            let Some(v) = self.select_victim() else { break };
            if self.segs[v].valid == self.segs[v].fill {
                break;
            }
            if !counted {
                self.c.gc_rounds += 1;
                counted = true;
            }
            self.collect(p, v);
        }
    }

    fn collect(&mut self, p: &mut dyn Placement, v: usize) {
        let seg = self.segs[v];
        let group = seg.group as usize;
        let base = v as u32 * self.seg_blocks;
        for i in 0..seg.fill {
            let slot = base + i;
            let l = self.slots[slot as usize];
            if l >= SHADOW || self.loc[l as usize] != slot {
                continue;
            }
            let li = l as usize;
            let g = p.gc_group(&GcWrite {
                lba: l,
                now: self.now,
                from_group: group,
                write_time: self.wtime[li],
                migrations: self.migr[li],
                next_write: self.next[li],
                log_blocks: self.log_blocks(),
            });
            self.migr[li] = self.migr[li].saturating_add(1);
            self.segs[v].valid -= 1;
            self.valid_total -= 1;
            self.append(p, g, l, Kind::Gc);
            self.c.gc += 1;
        }
        debug_assert_eq!(self.segs[v].valid, 0);
        self.used_slots -= seg.fill as u64;
        self.segs[v] = Segment::FREE;
        self.free.push(v as u32);
        if self.recording {
            self.reclaimed.push(v as u32);
        }
        self.c.segments_collected += 1;
        p.collected(&Collected {
            group,
            created: seg.created,
            now: self.now,
            valid: seg.valid,
        });
    }

    /// Checks the store's invariants; returns a description of the first violation.
    pub fn check(&self) -> Result<(), String> {
        let mut live = 0u64;
        for (l, &slot) in self.loc.iter().enumerate() {
            if slot == NONE {
                continue;
            }
            live += 1;
            if self.slots[slot as usize] != l as u32 {
                return Err(format!("lba {l} maps to slot {slot} holding another block"));
            }
            if self.segs[(slot / self.seg_blocks) as usize].state == State::Free {
                return Err(format!("lba {l} maps into a free segment"));
            }
        }
        if live != self.live {
            return Err(format!(
                "{} blocks written but {live} mapped: GC dropped a valid block",
                self.live
            ));
        }
        let (mut valid, mut used) = (0u64, 0u64);
        for (s, seg) in self.segs.iter().enumerate() {
            if seg.state == State::Free {
                continue;
            }
            used += seg.fill as u64;
            let base = s * self.seg_blocks as usize;
            let n = (0..seg.fill as usize)
                .filter(|&i| {
                    let l = self.slots[base + i];
                    l < SHADOW && self.loc[l as usize] == (base + i) as u32
                })
                .count() as u32;
            if n != seg.valid {
                return Err(format!(
                    "segment {s} counts {} valid blocks, holds {n}",
                    seg.valid
                ));
            }
            valid += n as u64;
        }
        if valid != self.valid_total || valid != live {
            return Err(format!(
                "valid blocks: {valid} in segments, {} counted, {live} live",
                self.valid_total
            ));
        }
        if used != self.used_slots {
            return Err(format!("used slots {used} != counted {}", self.used_slots));
        }
        let written = self.c.user + self.c.gc + self.c.padding + self.c.shadow;
        let buffered: u64 = (0..self.groups.len())
            .map(|g| self.open_fill(g) as u64)
            .sum();
        if self.c.chunks * self.chunk_blocks as u64 + buffered != written {
            return Err(format!(
                "{} chunks + {buffered} buffered blocks != {written} blocks counted",
                self.c.chunks
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Groups 0 and 1 are user groups by LBA parity; every deadline gathers into 1.
    struct Two;
    impl Placement for Two {
        fn name(&self) -> &'static str {
            "two"
        }
        fn groups(&self) -> usize {
            3
        }
        fn user_group(&mut self, w: &UserWrite) -> usize {
            (w.lba % 2) as usize
        }
        fn gc_group(&mut self, _w: &crate::placement::GcWrite) -> usize {
            2
        }
        fn deadline(&mut self, _d: &Deadline<'_>) -> DeadlineAction {
            DeadlineAction::Gather(1)
        }
        fn metadata_bytes(&self) -> usize {
            0
        }
    }

    #[test]
    fn gather_persists_every_waiting_block_in_one_chunk() {
        let cfg = Config {
            chunk_blocks: 4,
            data_devices: 3,
            stripes_per_segment: 4,
            ..Config::default()
        };
        let mut s = Store::new(&cfg, 64, 3);
        let mut p = Two;
        // Two blocks of group 0 and one of group 1 within one window.
        s.write(&mut p, 0, 0, u64::MAX);
        s.write(&mut p, 2, 10, u64::MAX);
        s.write(&mut p, 1, 20, u64::MAX);
        // Group 0's window ends first: its two blocks are shadowed into group 1's chunk,
        // which is padded (1 block) and written; group 0's chunk stays open.
        s.write(&mut p, 3, 105, u64::MAX);
        let c = s.total_counters();
        assert_eq!((c.shadow, c.padding, c.chunks), (2, 1, 1));
        assert_eq!(s.open_fill(0), 2);
        assert_eq!(s.groups[0].shadowed, 2);
        assert_eq!(s.groups[0].deadline, NO_DEADLINE);
        s.check().unwrap();
        // Two more group-0 blocks fill its chunk: the lazy append, no padding.
        s.write(&mut p, 4, 110, u64::MAX);
        s.write(&mut p, 6, 120, u64::MAX);
        let c = s.total_counters();
        assert_eq!((c.padding, c.chunks), (1, 2));
        s.check().unwrap();
    }
}
