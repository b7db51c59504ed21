//! ADAPT (paper 004): access-density-aware placement with cross-group aggregation.
//!
//! Six groups: 0 (hot user), 1 (cold user), 2..=5 (GC-rewritten, SepBIT's classes).
//! - **Density-aware threshold adaptation** (sec. 3.2, [`search`], [`ghost`],
//!   [`sampler`]): sampled user writes feed ghost sets that replay the user groups at
//!   different hot/cold thresholds, padding included, so the chosen threshold weighs
//!   both popularity (reuse distance) and access density (how often chunks fill in time).
//!   SepBIT's `ell` is the threshold until a candidate passes [`Adoption::judge`]
//!   (two steady, agreeing wins by a margin, in sparse traffic only). Ghost thresholds
//!   are reuse distances (unique blocks); the real classifier compares the block's
//!   reuse time (user writes since its previous version), so the chosen distance is
//!   translated to the time with the same quantile over recent samples.
//! - **Cross-group dynamic aggregation** (sec. 3.3): when a hot chunk's SLA window ends
//!   unfilled and the hot group is sparse ([`Density`]), its blocks are shadow-appended
//!   into the cold group's open chunk, which is written at once together with every
//!   other waiting user block that fits (`DeadlineAction::Gather`), while the hot chunk
//!   stays open (lazy append). Step 2 of the condition uses Eq. 1 ([`avg_unfilled`]).
//! - **Proactive demotion** (sec. 3.4, [`bloom`]): GC rewrites that land back in their
//!   own GC group are recorded in that group's Bloom cascade (filters of half the
//!   group's size); in sparse traffic, a cold user write whose block scores at least
//!   `score_threshold` in some cascade goes straight to that GC group, its SLA met by a
//!   shadow in the cold user group's chunk.

pub mod bloom;
pub mod ghost;
pub mod sampler;
pub mod search;

use super::sepbit::{gc_class, Lifespan};
use super::{Collected, Deadline, DeadlineAction, Env, GcWrite, Placement, UserWrite};
use std::collections::VecDeque;

pub const GROUPS: usize = 6;
/// Relative WA gain a candidate threshold needs over the one in force.
const INCUMBENT_MARGIN: f64 = 0.05;
/// Largest relative change of the incumbent ghost's WA between two epochs for the
/// simulation to count as steady.
const STEADY: f64 = 0.03;
/// Smallest Bloom filter quota, in keys.
const MIN_QUOTA: usize = 1024;
const HOT: usize = 0;
const COLD: usize = 1;
const PAIRS: usize = 4096;

/// ADAPT's knobs; the defaults are the ones measured in docs/lss.md.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AdaptConfig {
    /// Fraction of blocks sampled for the ghost sets. The paper samples 0.001 of
    /// production volumes; synthetic volumes of a few GiB need far more samples for the
    /// ghost sets' WA to rise above noise (docs/lss.md).
    pub sample_rate: f64,
    /// Number of ghost sets (thresholds tried at once).
    pub ghost_sets: usize,
    /// Sampled writes per decision, as a fraction of the (sampled) capacity. The paper
    /// decides after 10 % of capacity; shorter epochs made the choice noisy here.
    pub epoch_fraction: f64,
    /// Bloom filters per GC group and the minimum score for demotion. Demoting on a
    /// score below the number of filters raised WA in every synthetic run (docs/lss.md).
    pub filters: usize,
    pub score_threshold: usize,
    pub bits_per_key: usize,
    /// Keys per Bloom filter, as a fraction of its group's size (live segments times
    /// segment blocks). At 1/2, one GC pass over the group fills two filters: a block
    /// GC moves back into the group in consecutive passes is in two filters (score 2),
    /// and 4 filters remember two passes. Measured (4 GiB light traffic): 1/2 demoted
    /// 3.4 M writes, 1/4 only 0.8 M (its cascade forgets a block before GC comes back
    /// to it), 1 demoted 3.3 M with 10 % more GC (docs/lss.md).
    pub filter_fraction: f64,
    /// Demote only while the cold user group is sparse (see `Adapt::user_group`).
    pub demotion_gate: bool,
    /// Windows ended per chunk's worth of blocks above which a user group counts as
    /// sparse (aggregation step 1, demotion gate).
    pub sparse_deadlines: f64,
    /// Ghost GC trigger: `true` keeps each ghost log within the user groups' current
    /// share of the (sampled) capacity, `false` triggers on the garbage proportion as
    /// the paper describes. See docs/lss.md for why the default is `true`.
    pub ghost_capacity: bool,
    /// Switches for ablations.
    pub adaptation: bool,
    pub aggregation: bool,
    pub demotion: bool,
}

impl Default for AdaptConfig {
    fn default() -> Self {
        AdaptConfig {
            sample_rate: 1.0 / 8.0,
            ghost_sets: 8,
            epoch_fraction: 0.5,
            filters: 4,
            score_threshold: 2,
            bits_per_key: 10,
            filter_fraction: 0.5,
            demotion_gate: true,
            sparse_deadlines: 0.5,
            ghost_capacity: true,
            adaptation: true,
            aggregation: true,
            demotion: true,
        }
    }
}

/// Eq. 1: the average number of blocks in a group's unfilled (padded) chunks,
/// `C = (V - S_ck (k N_ck - P)) / P`, from the data blocks `V` written in `k` segments of
/// `N_ck` chunks of `S_ck` blocks, `P` of which were padded. `None` without padding.
pub fn avg_unfilled(v: f64, k: f64, p: f64, s_ck: f64, n_ck: f64) -> Option<f64> {
    if p <= 0.0 {
        return None;
    }
    Some(((v - s_ck * (k * n_ck - p)) / p).clamp(0.0, s_ck))
}

/// Whether two winning thresholds (reuse distances) point at the same region: within a
/// factor of two of each other, or both below one segment `unit`.
pub fn same_region(a: f64, b: f64, unit: f64) -> bool {
    let (lo, hi) = (a.min(b), a.max(b));
    hi < unit || (lo > 0.0 && hi <= 2.0 * lo)
}

/// What the adoption rule remembers between epochs.
#[derive(Clone, Copy, Debug, Default)]
pub struct AdoptionState {
    /// The distance of the best candidate if it beat the incumbent in the last epoch.
    won_last_epoch: Option<f64>,
    /// The incumbent ghost's WA in the last epoch.
    last_incumbent_wa: Option<f64>,
}

/// One epoch's evidence for replacing the threshold in force.
#[derive(Clone, Copy, Debug)]
pub struct Adoption {
    pub best_wa: f64,
    pub incumbent_wa: f64,
    /// The best candidate's threshold (reuse distance).
    pub distance: f64,
    /// One segment, in blocks.
    pub unit: f64,
    /// Whether a user group is sparse (its chunks do not fill within a window).
    pub sparse: bool,
}

/// The adoption rule's verdict for one epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub steady: bool,
    pub adopted: bool,
}

impl Adoption {
    /// A candidate replaces the threshold in force only when the best candidate beats
    /// the incumbent by `INCUMBENT_MARGIN` in two epochs in a row (ghost WA is noisy
    /// over one), the two winners agree (within a factor of two, or both below one
    /// segment: two different candidates each winning once by noise are evidence for
    /// neither), each epoch is steady (sec. 3.2: the ghosts' WA must have settled; the
    /// incumbent's WA moved by at most `STEADY` since the epoch before, whereas right
    /// after the fill it swings by tens of percent), and a user group is sparse. In
    /// dense traffic the ghosts, which only see the user groups, favoured thresholds
    /// that raised the real GC in every run measured (docs/lss.md): there the threshold
    /// stays SepBIT's `ell`.
    pub fn judge(&self, st: &mut AdoptionState) -> Verdict {
        let steady = st
            .last_incumbent_wa
            .is_some_and(|prev| ((self.incumbent_wa - prev) / prev).abs() <= STEADY);
        st.last_incumbent_wa = Some(self.incumbent_wa);
        let wins =
            self.sparse && steady && self.best_wa < self.incumbent_wa * (1.0 - INCUMBENT_MARGIN);
        let agrees = st
            .won_last_epoch
            .is_some_and(|prev| same_region(prev, self.distance, self.unit));
        let adopted = wins && agrees;
        st.won_last_epoch = (wins && !adopted).then_some(self.distance);
        Verdict { steady, adopted }
    }
}

#[derive(Clone, Debug, serde::Serialize)]
struct Decision {
    now: u64,
    /// Best candidate threshold (reuse distance) and its time equivalent.
    distance: f64,
    time: f64,
    wa: f64,
    /// WA of the ghost set running the threshold in force.
    incumbent_wa: f64,
    steady: bool,
    sparse: bool,
    adopted: bool,
}

pub struct Adapt {
    name: &'static str,
    cfg: AdaptConfig,
    sampler: sampler::Sampler,
    ghosts: Vec<ghost::GhostSet>,
    /// A ghost set running the threshold in force (SepBIT's `ell` until a candidate
    /// wins), the reference candidates must beat.
    incumbent: ghost::GhostSet,
    search: search::ThresholdSearch,
    ell: Lifespan,
    /// Reuse-time threshold in user writes, once the ghosts have decided.
    threshold: Option<f64>,
    adoption: AdoptionState,
    pairs: VecDeque<(u64, f64)>,
    sorted: (Vec<u64>, Vec<f64>),
    pairs_since_sort: usize,
    epoch_writes: u64,
    epoch_len: u64,
    cascades: Vec<bloom::Cascade>,
    /// Live (sealed, not reclaimed) segments per group.
    live_segments: [i64; GROUPS],
    capacity_blocks: u64,
    ghost_seg: u64,
    history: Vec<Decision>,
    chunk_blocks: f64,
    seg_blocks: f64,
    shadows: u64,
    demotions: u64,
    /// Access density of the two user groups (step 1 of aggregation, demotion gate).
    density: [Density; 2],
}

/// A user group's access density: SLA windows that ended with its chunk unfilled, per
/// block written to it, both decayed so that the measure follows the recent workload.
#[derive(Clone, Copy, Debug, Default)]
pub struct Density {
    blocks: f64,
    deadlines: f64,
}

impl Density {
    const HALF_LIFE: f64 = 4096.0;

    pub fn block(&mut self) {
        self.blocks += 1.0;
        if self.blocks >= Self::HALF_LIFE {
            self.blocks *= 0.5;
            self.deadlines *= 0.5;
        }
    }

    pub fn deadline(&mut self) {
        self.deadlines += 1.0;
    }

    /// Whether chunks of `chunk` blocks do not fill within a window: at least
    /// `per_chunk` windows ended per chunk's worth of blocks (after a few chunks).
    pub fn sparse(&self, chunk: f64, per_chunk: f64) -> bool {
        self.blocks >= 4.0 * chunk && self.deadlines * chunk >= per_chunk * self.blocks
    }
}

impl Adapt {
    pub fn new(env: &Env, cfg: AdaptConfig) -> Self {
        let rate = cfg.sample_rate;
        let ghost_seg =
            ((env.segment_blocks as f64 * rate / env.chunk_blocks as f64).round() as u32).max(2)
                * env.chunk_blocks;
        let window = if env.sla_window_us == u64::MAX {
            u64::MAX
        } else {
            (env.sla_window_us as f64 / rate) as u64
        };
        let unit = env.segment_blocks as f64;
        let search = search::ThresholdSearch::new(cfg.ghost_sets, unit);
        let make = |t| {
            ghost::GhostSet::new(
                t,
                ghost_seg,
                env.chunk_blocks,
                window,
                env.gc_garbage_ratio,
                cfg.aggregation,
            )
        };
        let incumbent = make(f64::MAX);
        let ghosts = search
            .thresholds()
            .iter()
            .map(|&t| {
                ghost::GhostSet::new(
                    t,
                    ghost_seg,
                    env.chunk_blocks,
                    window,
                    env.gc_garbage_ratio,
                    cfg.aggregation,
                )
            })
            .collect();
        let epoch_len = ((env.capacity_blocks as f64 * rate * cfg.epoch_fraction) as u64)
            .max(4 * ghost_seg as u64);
        let per_filter =
            ((env.segment_blocks as f64 * cfg.filter_fraction) as usize).max(MIN_QUOTA);
        Adapt {
            name: "adapt",
            sampler: sampler::Sampler::new(env.n_lbas, rate),
            ghosts,
            incumbent,
            search,
            ell: Lifespan::default(),
            threshold: None,
            adoption: AdoptionState::default(),
            pairs: VecDeque::with_capacity(PAIRS),
            sorted: (Vec::new(), Vec::new()),
            pairs_since_sort: 0,
            epoch_writes: 0,
            epoch_len,
            cascades: (0..GROUPS - 2)
                .map(|_| bloom::Cascade::new(cfg.filters, per_filter, cfg.bits_per_key))
                .collect(),
            live_segments: [0; GROUPS],
            capacity_blocks: env.capacity_blocks,
            ghost_seg: ghost_seg as u64,
            history: Vec::new(),
            shadows: 0,
            demotions: 0,
            density: [Density::default(); 2],
            chunk_blocks: env.chunk_blocks as f64,
            seg_blocks: env.segment_blocks as f64,
            cfg,
        }
    }

    /// Renames the policy (ablation variants report under their own name).
    pub fn named(mut self, name: &str) -> Self {
        self.name = super::ABLATIONS
            .iter()
            .find(|&&n| n == name)
            .copied()
            .unwrap_or("adapt");
        self
    }

    /// The current reuse-time threshold between the hot and the cold user group.
    pub fn threshold(&self) -> f64 {
        self.threshold.unwrap_or_else(|| self.ell.ell())
    }

    fn observe(&mut self, w: &UserWrite) {
        let Some(s) = self.sampler.access(w.lba) else {
            return;
        };
        if let (Some(prev), Some(d)) = (w.prev_write, s.distance) {
            if self.pairs.len() == PAIRS {
                self.pairs.pop_front();
            }
            self.pairs.push_back((w.now - prev, d));
            self.pairs_since_sort += 1;
        }
        // The ghosts only run while a user group is sparse: in dense traffic no
        // threshold is adopted (see `Adoption::judge`), so simulating it is wasted work
        // (about a third of ADAPT's replay time). They resume where they stopped.
        if !self.sparse() {
            return;
        }
        for g in &mut self.ghosts {
            g.write(s.sid, s.distance, w.t_us);
        }
        self.incumbent.write(s.sid, s.distance, w.t_us);
        self.epoch_writes += 1;
        if self.epoch_writes >= self.epoch_len
            && self.ghosts.iter().all(|g| g.total_gcs > 0)
            && self.incumbent.total_gcs > 0
        {
            self.decide(w.now);
        }
    }

    /// Whether either user group is sparse (its chunks do not fill within a window).
    fn sparse(&self) -> bool {
        self.density[HOT].sparse(self.chunk_blocks, self.cfg.sparse_deadlines)
            || self.density[COLD].sparse(self.chunk_blocks, self.cfg.sparse_deadlines)
    }

    /// Ghost capacity: the user groups' share of live segments applied to the sampled
    /// capacity (at least four ghost segments).
    fn ghost_capacity(&self) -> Option<u64> {
        if !self.cfg.ghost_capacity {
            return None;
        }
        let total: i64 = self.live_segments.iter().sum();
        let user = self.live_segments[HOT] + self.live_segments[COLD];
        let share = if total <= 0 {
            1.0
        } else {
            user.max(1) as f64 / total as f64
        };
        let c = (self.capacity_blocks as f64 * self.cfg.sample_rate * share) as u64;
        Some(c.max(4 * self.ghost_seg))
    }

    fn decide(&mut self, now: u64) {
        let wa: Vec<f64> = self.ghosts.iter().map(|g| g.epoch.wa()).collect();
        let best_wa = wa.iter().copied().fold(f64::INFINITY, f64::min);
        let incumbent_wa = self.incumbent.epoch.wa();
        let distance = self.search.step(&wa);
        let cap = self.ghost_capacity();
        for (g, &t) in self.ghosts.iter_mut().zip(self.search.thresholds()) {
            g.threshold = t;
            g.epoch = ghost::Epoch::default();
            g.capacity = cap;
        }
        self.incumbent.capacity = cap;
        self.epoch_writes = 0;
        let time = self.distance_to_time(distance);
        let sparse = self.sparse();
        let v = Adoption {
            best_wa,
            incumbent_wa,
            distance,
            unit: self.search.unit(),
            sparse,
        }
        .judge(&mut self.adoption);
        let (steady, adopted) = (v.steady, v.adopted);
        if adopted {
            self.threshold = Some(time);
        }
        self.incumbent.threshold = self.time_to_distance(self.threshold());
        self.incumbent.epoch = ghost::Epoch::default();
        self.history.push(Decision {
            now,
            distance,
            time,
            wa: best_wa,
            incumbent_wa,
            steady,
            sparse,
            adopted,
        });
    }

    /// The recent samples' reuse times and distances, each sorted; re-sorted after 512
    /// new samples (the mapping moves slowly and is asked at every hot reclaim).
    fn sorted_pairs(&mut self) -> &(Vec<u64>, Vec<f64>) {
        if self.pairs_since_sort >= 512 || self.sorted.0.len() != self.pairs.len() {
            let mut t: Vec<u64> = self.pairs.iter().map(|p| p.0).collect();
            let mut d: Vec<f64> = self.pairs.iter().map(|p| p.1).collect();
            t.sort_unstable();
            d.sort_by(f64::total_cmp);
            self.sorted = (t, d);
            self.pairs_since_sort = 0;
        }
        &self.sorted
    }

    /// The reuse time below which the same share of recent samples falls as below the
    /// reuse distance `d`.
    fn distance_to_time(&mut self, d: f64) -> f64 {
        if self.pairs.is_empty() {
            return d;
        }
        let (times, dists) = self.sorted_pairs();
        let n = times.len();
        match dists.partition_point(|&x| x < d) {
            0 => 0.0,
            b if b >= n => times[n - 1] as f64 + 1.0,
            b => times[b] as f64,
        }
    }

    /// Inverse of [`Adapt::distance_to_time`].
    fn time_to_distance(&mut self, t: f64) -> f64 {
        if self.pairs.is_empty() || !t.is_finite() {
            return if t.is_finite() { t } else { f64::MAX };
        }
        let (times, dists) = self.sorted_pairs();
        let n = times.len();
        match times.partition_point(|&x| (x as f64) < t) {
            0 => 0.0,
            b if b >= n => dists[n - 1] + 1.0,
            b => dists[b],
        }
    }

    /// The GC group whose cascade holds the block in at least `score_threshold` filters
    /// (the highest score, then the coldest group, wins).
    fn demotion_target(&self, lba: u32) -> Option<usize> {
        let h = bloom::Bloom::hash(lba);
        let t = self.cfg.score_threshold;
        let (k, score) = self
            .cascades
            .iter()
            .enumerate()
            .filter(|(_, c)| c.score_at_least(h, t))
            .map(|(k, c)| (k, c.score_hashed(h)))
            .max_by_key(|&(k, s)| (s, k))?;
        (score >= t).then_some(k + 2)
    }
}

impl Placement for Adapt {
    fn name(&self) -> &'static str {
        self.name
    }
    fn groups(&self) -> usize {
        GROUPS
    }

    fn user_group(&mut self, w: &UserWrite) -> usize {
        if self.cfg.adaptation {
            self.observe(w);
        }
        let hot = matches!(w.prev_write, Some(t) if ((w.now - t) as f64) < self.threshold());
        if hot {
            self.density[HOT].block();
            return HOT;
        }
        self.density[COLD].block();
        // Demotion only concerns blocks the lifespan test already calls cold: those the
        // identifier has seen migrated back into the same GC group skip the user groups.
        // It is gated on sparse traffic (the cold group's chunks do not fill within a
        // window): there a demoted block lands in a dense GC segment instead of a padded
        // user one; in dense traffic it raised GC in every run measured (docs/lss.md).
        if self.cfg.demotion
            && w.prev_write.is_some()
            && (!self.cfg.demotion_gate
                || self.density[COLD].sparse(self.chunk_blocks, self.cfg.sparse_deadlines))
        {
            if let Some(g) = self.demotion_target(w.lba) {
                self.demotions += 1;
                return g;
            }
        }
        COLD
    }

    fn gc_group(&mut self, w: &GcWrite) -> usize {
        let g = gc_class(w.from_group, w.now - w.write_time, self.ell.ell());
        if self.cfg.demotion && w.from_group >= 2 && g == w.from_group {
            // Filters are sized on the group: a pass of GC over the group spans about
            // two filters, so the cascade remembers the last two passes, and a block
            // migrated back in consecutive passes lands in two different filters.
            let size = self.live_segments[g].max(1) as f64 * self.seg_blocks;
            self.cascades[g - 2]
                .set_quota(((size * self.cfg.filter_fraction) as usize).max(MIN_QUOTA));
            self.cascades[g - 2].insert(w.lba);
        }
        g
    }

    fn sealed(&mut self, group: usize) {
        self.live_segments[group] += 1;
        if self.history.is_empty() && self.live_segments.iter().sum::<i64>() % 16 == 0 {
            // Before the first decision, keep the ghost capacity current.
            let cap = self.ghost_capacity();
            self.ghosts.iter_mut().for_each(|g| g.capacity = cap);
            self.incumbent.capacity = cap;
        }
    }

    fn collected(&mut self, c: &Collected) {
        self.live_segments[c.group] -= 1;
        if c.group == HOT {
            self.ell.push(c.now - c.created);
            if self.threshold.is_none() {
                // The incumbent follows `ell` until a candidate is adopted.
                self.incumbent.threshold = self.time_to_distance(self.ell.ell());
            }
        }
    }

    fn deadline(&mut self, d: &Deadline<'_>) -> DeadlineAction {
        if !self.cfg.aggregation {
            return DeadlineAction::Pad;
        }
        let ck = d.chunk_blocks as f64;
        let nck = d.segment_chunks as f64;
        match d.group {
            HOT => {
                // Step 1: predict from the hot group's recent access intervals whether
                // its chunks fill within a window. The measure is SLA windows ended per
                // chunk's worth of hot blocks, not padded chunks: aggregation itself
                // removes the hot group's padding, which must not switch it off.
                self.density[HOT].deadline();
                if !self.density[HOT].sparse(ck, self.cfg.sparse_deadlines) {
                    return DeadlineAction::Pad;
                }
                // The colder group lends its open chunk, empty or not (an open chunk that
                // is not full is an unfilled chunk; when it is empty the shadow blocks
                // take the place of the hot chunk's padding)...
                let cold_fill = d.open_fill[COLD];
                if cold_fill + d.pending > d.chunk_blocks {
                    return DeadlineAction::Pad;
                }
                // Step 2: ...as long as the blocks aggregated into it stay within the
                // average padding of that group (Eq. 1), the space it would waste. A
                // cold group that never pads has no such space.
                let cold = &d.stats[COLD];
                let room = avg_unfilled(cold.v, cold.k, cold.p, ck, nck).map_or(0.0, |c| ck - c);
                if (d.shadow_fill[COLD] + d.pending) as f64 > room {
                    return DeadlineAction::Pad;
                }
                self.shadows += 1;
                DeadlineAction::Gather(COLD)
            }
            COLD if d.open_fill[COLD] < d.chunk_blocks => {
                self.density[COLD].deadline();
                // The cold chunk is about to be padded: its padding space carries the
                // waiting blocks of the hot group and of the GC groups (demoted user
                // blocks) instead of zeros, at no extra chunk.
                let waiting =
                    (0..GROUPS).any(|g| g != COLD && d.unpersisted.get(g).is_some_and(|&u| u > 0));
                if waiting {
                    self.shadows += 1;
                    DeadlineAction::Gather(COLD)
                } else {
                    DeadlineAction::Pad
                }
            }
            g if g >= 2 && d.open_fill[COLD] + d.pending <= d.chunk_blocks => {
                // A demoted user block waits in a GC group's chunk: persist it (with any
                // other waiting user blocks) in the cold user group's chunk instead of
                // padding a GC segment, whose space stays dense; the GC chunk is
                // completed by the next GC migrations (lazy append).
                self.shadows += 1;
                DeadlineAction::Gather(COLD)
            }
            _ => DeadlineAction::Pad,
        }
    }

    fn metadata_bytes(&self) -> usize {
        self.sampler.bytes()
            + self.ghosts.iter().map(|g| g.bytes()).sum::<usize>()
            + self.incumbent.bytes()
            + self.cascades.iter().map(|c| c.bytes()).sum::<usize>()
            + self.pairs.len() * 16
    }

    fn diagnostics(&self) -> serde_json::Value {
        serde_json::json!({
            "threshold_time": self.threshold(),
            "sepbit_ell": self.ell.ell(),
            "decisions": self.history.len(),
            "last_decisions": self.history.iter().rev().take(8).collect::<Vec<_>>(),
            "shadow_appends": self.shadows,
            "demotions": self.demotions,
            "sampled_blocks": self.sampler.sampled_blocks(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq1_average_fill_of_padded_chunks() {
        // 2 segments of 4 chunks of 16 blocks: 6 full chunks and 2 padded ones holding
        // 3 and 5 blocks: V = 6*16 + 8 = 104, P = 2 -> C = 4.
        assert_eq!(avg_unfilled(104.0, 2.0, 2.0, 16.0, 4.0), Some(4.0));
        assert_eq!(avg_unfilled(128.0, 2.0, 0.0, 16.0, 4.0), None);
        // Every chunk padded with one block each.
        assert_eq!(avg_unfilled(8.0, 2.0, 8.0, 16.0, 4.0), Some(1.0));
    }

    fn stats(v: f64, k: f64, p: f64, chunks: f64) -> crate::placement::GroupStats {
        crate::placement::GroupStats {
            v,
            k,
            p,
            chunks,
            ..Default::default()
        }
    }

    fn env() -> Env {
        Env {
            n_lbas: 1000,
            segment_blocks: 64,
            chunk_blocks: 16,
            sla_window_us: 100,
            capacity_blocks: 2048,
            gc_garbage_ratio: 0.15,
            chunk_model: true,
        }
    }

    #[test]
    fn aggregation_condition() {
        let mut a = Adapt::new(&env(), AdaptConfig::default());
        // The cold group pads chunks holding 4 blocks on average, so it has 12 blocks
        // of room (Eq. 1).
        let st = [stats(8.0, 1.0, 4.0, 4.0), stats(16.0, 1.0, 4.0, 4.0)];
        // A sparse hot group: one window ended per block written.
        a.density[HOT] = Density {
            blocks: 64.0,
            deadlines: 64.0,
        };
        let ask = |a: &mut Adapt, group, fill: [u32; 3], unp: [u32; 3]| {
            let mut all = vec![crate::placement::GroupStats::default(); GROUPS];
            all[..2].copy_from_slice(&st);
            let mut f = [0u32; GROUPS];
            f[..3].copy_from_slice(&fill);
            let mut u = [0u32; GROUPS];
            u[..3].copy_from_slice(&unp);
            a.deadline(&Deadline {
                group,
                t_us: 0,
                pending: u[group],
                open_fill: &f,
                unpersisted: &u,
                shadow_fill: &[0; GROUPS],
                stats: &all,
                chunk_blocks: 16,
                segment_chunks: 4,
            })
        };
        assert_eq!(
            ask(&mut a, 0, [2, 3, 0], [2, 3, 0]),
            DeadlineAction::Gather(1)
        );
        // An empty cold chunk is an unfilled chunk too: the hot blocks take the place
        // of the hot chunk's padding, and the hot chunk stays open.
        assert_eq!(
            ask(&mut a, 0, [2, 0, 0], [2, 0, 0]),
            DeadlineAction::Gather(1)
        );
        // Cold chunk too full to take the hot blocks.
        assert_eq!(ask(&mut a, 0, [2, 15, 0], [2, 15, 0]), DeadlineAction::Pad);
        // More shadow blocks than the cold group's average padding (12).
        assert_eq!(ask(&mut a, 0, [13, 1, 0], [13, 1, 0]), DeadlineAction::Pad);
        // Lazily appended blocks do not count again.
        assert_eq!(
            ask(&mut a, 0, [9, 3, 0], [2, 3, 0]),
            DeadlineAction::Gather(1)
        );
        // The cold group's deadline gathers the hot group's and the GC groups' waiting
        // blocks; with none waiting it pads.
        assert_eq!(
            ask(&mut a, 1, [2, 3, 0], [2, 3, 0]),
            DeadlineAction::Gather(1)
        );
        assert_eq!(
            ask(&mut a, 1, [2, 3, 1], [0, 3, 1]),
            DeadlineAction::Gather(1)
        );
        assert_eq!(ask(&mut a, 1, [2, 3, 0], [0, 3, 0]), DeadlineAction::Pad);
        // A demoted block waiting in a GC chunk is persisted through the cold chunk.
        assert_eq!(
            ask(&mut a, 2, [0, 3, 1], [0, 3, 1]),
            DeadlineAction::Gather(1)
        );
        assert_eq!(ask(&mut a, 2, [0, 15, 2], [0, 15, 2]), DeadlineAction::Pad);
        // A dense hot group (its chunks fill within a window) pads as usual, even
        // though aggregation left it without padded chunks.
        a.density[HOT] = Density {
            blocks: 640.0,
            deadlines: 0.0,
        };
        assert_eq!(ask(&mut a, 0, [2, 3, 0], [2, 3, 0]), DeadlineAction::Pad);
    }

    #[test]
    fn density_counts_windows_per_chunk() {
        let mut d = Density::default();
        // Too few blocks to judge.
        d.deadline();
        assert!(!d.sparse(16.0, 0.5));
        // 64 blocks, 1 window each: sparse.
        for _ in 0..64 {
            d.block();
            d.deadline();
        }
        assert!(d.sparse(16.0, 0.5));
        // Then 4096 blocks filling chunks within windows: dense (the old windows decay).
        for _ in 0..4096 {
            d.block();
        }
        assert!(!d.sparse(16.0, 0.5));
        // Exactly the boundary: 1 window per 2 chunks' worth is 0.5 per chunk.
        let d = Density {
            blocks: 64.0,
            deadlines: 2.0,
        };
        assert!(d.sparse(16.0, 0.5));
        assert!(!d.sparse(16.0, 0.6));
    }

    #[test]
    fn adoption_needs_two_steady_agreeing_sparse_wins() {
        let ep = |best_wa, incumbent_wa, distance, sparse| Adoption {
            best_wa,
            incumbent_wa,
            distance,
            unit: 1000.0,
            sparse,
        };
        let mut st = AdoptionState::default();
        // First epoch: nothing to compare steadiness with.
        assert!(!ep(1.0, 1.2, 4000.0, true).judge(&mut st).steady);
        // Steady win, then a steady agreeing win: adopted.
        let v = ep(1.0, 1.2, 4000.0, true).judge(&mut st);
        assert_eq!((v.steady, v.adopted), (true, false));
        assert!(ep(1.0, 1.2, 6000.0, true).judge(&mut st).adopted);
        // Two wins that disagree (4000 then 12000) are not adopted.
        let mut st = AdoptionState::default();
        ep(1.0, 1.2, 0.0, true).judge(&mut st);
        ep(1.0, 1.2, 4000.0, true).judge(&mut st);
        assert!(!ep(1.0, 1.2, 12000.0, true).judge(&mut st).adopted);
        // A win by less than the margin (5 %) does not count.
        let mut st = AdoptionState::default();
        for _ in 0..3 {
            assert!(!ep(1.0, 1.04, 4000.0, true).judge(&mut st).adopted);
        }
        // Unsteady epochs (the incumbent's WA jumps 20 %) do not count.
        let mut st = AdoptionState::default();
        for w in [1.0, 1.2, 1.44, 1.73] {
            assert!(!ep(w * 0.8, w, 4000.0, true).judge(&mut st).adopted);
        }
        // Dense traffic: never adopted.
        let mut st = AdoptionState::default();
        for _ in 0..4 {
            assert!(!ep(1.0, 1.2, 4000.0, false).judge(&mut st).adopted);
        }
    }

    #[test]
    fn consecutive_wins_must_agree() {
        assert!(same_region(3000.0, 5000.0, 1000.0));
        assert!(!same_region(768.0, 3840.0, 100.0));
        assert!(same_region(0.0, 500.0, 1000.0));
        assert!(!same_region(0.0, 5000.0, 1000.0));
    }

    #[test]
    fn demotion_after_repeated_migrations() {
        let mut a = Adapt::new(&env(), AdaptConfig::default());
        // Sparse traffic: the demotion gate is open.
        a.density[COLD] = Density {
            blocks: 64.0,
            deadlines: 64.0,
        };
        let gc = |lba| GcWrite {
            lba,
            now: 10_000,
            from_group: 5,
            write_time: 0,
            migrations: 3,
            next_write: u64::MAX,
            log_blocks: 0,
        };
        // Without any hot segment reclaimed, ell is infinite: old blocks stay in group 3
        // (age < 4 ell), so seed ell with a small lifespan to make group 5 the oldest.
        a.collected(&Collected {
            group: 0,
            created: 0,
            now: 10,
            valid: 0,
        });
        assert_eq!(a.gc_group(&gc(7)), 5);
        let w = UserWrite {
            lba: 7,
            now: 10_001,
            t_us: 0,
            prev_write: Some(0),
            next_write: 0,
            log_blocks: 0,
        };
        assert_ne!(a.user_group(&w), 5, "one migration is not enough");
        // Fill the newest filter (quota 1024) so the next insertion starts another one.
        for l in 1000..(1000 + 1024) {
            a.gc_group(&gc(l));
        }
        assert_eq!(a.gc_group(&gc(7)), 5);
        assert_eq!(a.user_group(&w), 5);
        // Dense traffic (the cold group's chunks fill within a window): no demotion.
        a.density[COLD] = Density {
            blocks: 4000.0,
            deadlines: 0.0,
        };
        assert_eq!(a.user_group(&w), COLD);
        // Without the gate the same block is demoted in dense traffic too.
        a.cfg.demotion_gate = false;
        assert_eq!(a.user_group(&w), 5);
    }
}
