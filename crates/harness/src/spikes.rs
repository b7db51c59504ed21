//! Read-latency spikes and hit-ratio dips around compactions: what paper 002 promises to
//! remove ("99% of the latency spikes after compactions").
//!
//! The run phase is cut into the sampler's intervals (`--sample-ms`): the sampler takes a
//! point of the engine's counters, then moves every client to the next interval, so that
//! the reads recorded in interval `i` are those between points `i` and `i + 1`. Per
//! interval: the reads' p99 and p99.9 latency (HdrHistogram) and the cache hit ratio.
//! A compaction belongs to the interval in which the compaction counter moved (it was
//! installed, and its inputs' blocks dropped, then).
//!
//! - *Steady state*: the median, over the intervals outside every compaction's
//!   [`AFTER`] intervals, of p99, p99.9 and hit ratio (all intervals if fewer than
//!   [`MIN_QUIET`] are outside).
//! - *Spike*: an interval whose p99.9 exceeds twice the run's steady-state p99.9 (the
//!   policies run one after another on a shared machine, whose load moves all of a run's
//!   latencies; the steady state is reported beside the count, so that a policy raising
//!   its own is seen).
//! - *Post-compaction spike*: a spike within [`AFTER`] intervals from a compaction.
//! - *Hit-ratio dip* of a compaction: the steady hit ratio minus the lowest hit ratio of
//!   the intervals from the compaction's to [`AFTER`] later.
//!
//! Intervals with fewer than [`MIN_READS`] reads are left out (a p99.9 of a handful of
//! reads means nothing).
//!
//! The spike setup (`halflife leaper --bursts`) changes the windows ([`Windows`]): its
//! steady state is the intervals just before each burst of writes (reads only, nothing
//! installed for seconds), and "after" a compaction spans more intervals, as long as the
//! cache takes to refill.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Intervals after a compaction's (and its own) that count as "after" it.
pub const AFTER: usize = 2;
/// Reads an interval needs to be measured.
pub const MIN_READS: u64 = 500;
/// Quiet intervals needed for a steady state of quiet intervals only.
pub const MIN_QUIET: usize = 10;

/// One client's read latencies per interval.
#[derive(Default)]
pub struct IntervalLatencies {
    hists: Vec<Histogram<u64>>,
}

fn histogram() -> Histogram<u64> {
    // Nanoseconds up to 100 s, 2 significant digits: small enough for one per interval.
    Histogram::new_with_bounds(1, 100_000_000_000, 2).expect("valid bounds")
}

impl IntervalLatencies {
    pub fn record(&mut self, interval: usize, nanos: u64) {
        while self.hists.len() <= interval {
            self.hists.push(histogram());
        }
        self.hists[interval].saturating_record(nanos.max(1));
    }

    pub fn merge(&mut self, o: &IntervalLatencies) {
        while self.hists.len() < o.hists.len() {
            self.hists.push(histogram());
        }
        for (a, b) in self.hists.iter_mut().zip(&o.hists) {
            a.add(b).expect("same bounds");
        }
    }
}

/// The counters at an interval's edges that the analysis needs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Edge {
    pub seconds: f64,
    pub hits: u64,
    pub misses: u64,
    pub compactions: u64,
}

/// One measured interval.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Interval {
    pub start_s: f64,
    pub end_s: f64,
    pub reads: u64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub hit_ratio: Option<f64>,
    /// Compactions installed during the interval.
    pub compactions: u64,
}

/// Interval `i` lies between `edges[i]` and `edges[i + 1]`.
pub fn intervals(edges: &[Edge], lat: &IntervalLatencies) -> Vec<Interval> {
    edges
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let (a, b) = (w[0], w[1]);
            let h = lat.hists.get(i);
            let q = |x: f64| h.map_or(0.0, |h| h.value_at_quantile(x) as f64 / 1000.0);
            let lookups = (b.hits - a.hits) + (b.misses - a.misses);
            Interval {
                start_s: a.seconds,
                end_s: b.seconds,
                reads: h.map_or(0, |h| h.len()),
                p99_us: q(0.99),
                p999_us: q(0.999),
                hit_ratio: (lookups > 0).then(|| (b.hits - a.hits) as f64 / lookups as f64),
                compactions: b.compactions - a.compactions,
            }
        })
        .collect()
}

/// Steady state of a run's intervals.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Steady {
    pub p99_us: f64,
    pub p999_us: f64,
    pub hit_ratio: f64,
    /// Intervals the medians are of.
    pub intervals: usize,
}

/// Spikes and dips of one run against a reference steady-state p99.9.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Spikes {
    pub steady: Steady,
    pub reference_p999_us: f64,
    pub measured_intervals: usize,
    pub spike_intervals: usize,
    pub compactions: u64,
    pub post_compaction_intervals: usize,
    pub post_compaction_spikes: usize,
    /// p99 and p99.9 over the post-compaction intervals (medians).
    pub post_compaction_p99_us: f64,
    pub post_compaction_p999_us: f64,
    /// Per compaction interval, the spikes within its window.
    pub spikes_per_compaction: Vec<usize>,
    /// Per compaction interval, the hit-ratio dip; and their mean.
    pub hit_dips: Vec<f64>,
    pub mean_hit_dip: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Which intervals are the steady state and which count as after a compaction.
#[derive(Clone, Copy, Debug)]
pub struct Windows<'a> {
    /// Intervals after a compaction's own that count as after it.
    pub after: usize,
    /// The steady intervals; `None`: those outside every compaction's window.
    pub steady: Option<&'a [bool]>,
}

impl Windows<'static> {
    /// Runs whose writes are spread over the run: [`AFTER`] intervals, steady outside.
    pub const RUN: Windows<'static> = Windows {
        after: AFTER,
        steady: None,
    };
}

/// Which measured intervals lie within `w.after` of a compaction.
fn after_compaction(iv: &[Interval], w: Windows) -> Vec<bool> {
    let mut after = vec![false; iv.len()];
    for (i, x) in iv.iter().enumerate() {
        if x.compactions > 0 {
            for a in after.iter_mut().skip(i).take(w.after + 1) {
                *a = true;
            }
        }
    }
    after
}

pub fn steady(iv: &[Interval], w: Windows) -> Steady {
    let after = after_compaction(iv, w);
    let measured = |i: &usize| iv[*i].reads >= MIN_READS;
    let quiet: Vec<usize> = (0..iv.len())
        .filter(|&i| match w.steady {
            Some(m) => m.get(i).copied().unwrap_or(false),
            None => !after[i],
        })
        .filter(measured)
        .collect();
    // An explicit steady set is the steady state however few; intervals that merely lie
    // outside the compactions' windows fall back to all when there are too few.
    let pick = if w.steady.is_some() || quiet.len() >= MIN_QUIET {
        quiet
    } else {
        (0..iv.len()).filter(measured).collect()
    };
    Steady {
        p99_us: median(pick.iter().map(|&i| iv[i].p99_us).collect()),
        p999_us: median(pick.iter().map(|&i| iv[i].p999_us).collect()),
        hit_ratio: median(pick.iter().filter_map(|&i| iv[i].hit_ratio).collect()),
        intervals: pick.len(),
    }
}

/// Spikes of `iv` above twice `reference_p999_us`.
pub fn spikes(iv: &[Interval], w: Windows, reference_p999_us: f64) -> Spikes {
    let st = steady(iv, w);
    let after = after_compaction(iv, w);
    let limit = 2.0 * reference_p999_us;
    let mut s = Spikes {
        steady: st,
        reference_p999_us,
        ..Spikes::default()
    };
    let (mut p99, mut p999) = (Vec::new(), Vec::new());
    for (i, x) in iv.iter().enumerate() {
        s.compactions += x.compactions;
        if x.compactions > 0 {
            let low = iv[i..(i + w.after + 1).min(iv.len())]
                .iter()
                .filter(|y| y.reads >= MIN_READS)
                .filter_map(|y| y.hit_ratio)
                .fold(f64::INFINITY, f64::min);
            if low.is_finite() {
                s.hit_dips.push(st.hit_ratio - low);
            }
            s.spikes_per_compaction.push(
                iv[i..(i + w.after + 1).min(iv.len())]
                    .iter()
                    .filter(|y| y.reads >= MIN_READS && y.p999_us > limit)
                    .count(),
            );
        }
        if x.reads < MIN_READS {
            continue;
        }
        s.measured_intervals += 1;
        let spike = x.p999_us > limit;
        s.spike_intervals += usize::from(spike);
        if after[i] {
            s.post_compaction_intervals += 1;
            s.post_compaction_spikes += usize::from(spike);
            p99.push(x.p99_us);
            p999.push(x.p999_us);
        }
    }
    s.post_compaction_p99_us = median(p99);
    s.post_compaction_p999_us = median(p999);
    s.mean_hit_dip = if s.hit_dips.is_empty() {
        0.0
    } else {
        s.hit_dips.iter().sum::<f64>() / s.hit_dips.len() as f64
    };
    s
}

/// Read latency and hit ratio at one offset from compactions' installs.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AroundPoint {
    /// Intervals from the install's (0); negative: before it.
    pub offset: i64,
    /// Compactions with a measured interval at this offset.
    pub compactions: usize,
    /// Medians over those compactions.
    pub p99_us: f64,
    pub p999_us: f64,
    pub hit_ratio: f64,
}

/// The intervals from `before` ahead of each compaction's install to `after` past it,
/// aligned on the install and summarized (medians) over the compactions: what a reader
/// sees around a compaction, the profile the spike setup plots.
pub fn around(iv: &[Interval], before: usize, after: usize) -> Vec<AroundPoint> {
    let installs: Vec<usize> = (0..iv.len()).filter(|&i| iv[i].compactions > 0).collect();
    (-(before as i64)..=after as i64)
        .map(|offset| {
            let at: Vec<&Interval> = installs
                .iter()
                .filter_map(|&i| usize::try_from(i as i64 + offset).ok())
                .filter_map(|j| iv.get(j))
                .filter(|x| x.reads >= MIN_READS)
                .collect();
            AroundPoint {
                offset,
                compactions: at.len(),
                p99_us: median(at.iter().map(|x| x.p99_us).collect()),
                p999_us: median(at.iter().map(|x| x.p999_us).collect()),
                hit_ratio: median(at.iter().filter_map(|x| x.hit_ratio).collect()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(p999: f64, hit: f64, compactions: u64) -> Interval {
        Interval {
            start_s: 0.0,
            end_s: 0.1,
            reads: 1000,
            p99_us: p999 / 10.0,
            p999_us: p999,
            hit_ratio: Some(hit),
            compactions,
        }
    }

    #[test]
    fn intervals_split_counters_and_latencies() {
        let e = |s, h, m, c| Edge {
            seconds: s,
            hits: h,
            misses: m,
            compactions: c,
        };
        let edges = [e(0.0, 0, 0, 0), e(0.1, 30, 70, 1), e(0.2, 30, 70, 1)];
        let mut l = IntervalLatencies::default();
        for n in 1..=1000 {
            l.record(0, n * 1000);
        }
        let v = intervals(&edges, &l);
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].reads, v[0].compactions), (1000, 1));
        assert_eq!(v[0].hit_ratio, Some(0.3));
        assert!((v[0].p99_us - 990.0).abs() < 10.0, "{:?}", v[0]);
        assert_eq!((v[1].reads, v[1].hit_ratio), (0, None));
    }

    #[test]
    fn spikes_after_compactions_against_the_reference() {
        // 12 quiet intervals at 100 us and a hit ratio of 0.5; a compaction in interval
        // 12 followed by a spike and a dip; an unrelated spike at 20.
        let mut v: Vec<Interval> = (0..24).map(|_| iv(100.0, 0.5, 0)).collect();
        v[12] = iv(150.0, 0.4, 1);
        v[13] = iv(500.0, 0.2, 0);
        v[14] = iv(190.0, 0.45, 0);
        v[20] = iv(300.0, 0.5, 0);
        let s = spikes(&v, Windows::RUN, 100.0);
        assert_eq!(s.steady.intervals, 21, "quiet: all but 12..=14");
        assert_eq!((s.steady.p999_us, s.steady.hit_ratio), (100.0, 0.5));
        assert_eq!(s.spike_intervals, 2);
        assert_eq!(
            (s.post_compaction_intervals, s.post_compaction_spikes),
            (3, 1)
        );
        assert_eq!(s.compactions, 1);
        assert_eq!(s.hit_dips.len(), 1);
        assert_eq!(s.spikes_per_compaction, [1]);
        assert!((s.mean_hit_dip - 0.3).abs() < 1e-9);
        // Against a higher reference the spike at 13 is still one; the one at 20 not.
        assert_eq!(spikes(&v, Windows::RUN, 200.0).spike_intervals, 1);
    }

    #[test]
    fn steady_state_falls_back_to_all_intervals() {
        let v: Vec<Interval> = (0..6).map(|i| iv(100.0 + i as f64, 0.5, 1)).collect();
        let s = steady(&v, Windows::RUN);
        assert_eq!(s.intervals, 6);
        assert_eq!(s.p999_us, 103.0);
    }

    #[test]
    fn burst_windows_take_the_steady_state_before_the_bursts() {
        // Steady: intervals 0..4 (p99.9 50 us). A compaction at 6, slow reads at 7..=9,
        // quiet again from 10; with a window of 4 after the install all three are spikes.
        let mut v: Vec<Interval> = (0..14).map(|_| iv(50.0, 0.99, 0)).collect();
        v[4] = iv(400.0, 0.9, 0);
        v[5] = iv(400.0, 0.9, 0);
        v[6] = iv(60.0, 0.9, 1);
        for x in &mut v[7..=9] {
            *x = iv(500.0, 0.5, 0);
        }
        let mask: Vec<bool> = (0..14).map(|i| i < 4).collect();
        let w = Windows {
            after: 4,
            steady: Some(&mask),
        };
        let st = steady(&v, w);
        assert_eq!((st.intervals, st.p999_us, st.hit_ratio), (4, 50.0, 0.99));
        let s = spikes(&v, w, st.p999_us);
        assert_eq!(s.post_compaction_intervals, 5);
        assert_eq!(
            s.post_compaction_spikes, 3,
            "4 and 5 are before the install"
        );
        assert_eq!(s.spike_intervals, 5);
        assert_eq!(s.spikes_per_compaction, [3]);
        assert!((s.mean_hit_dip - 0.49).abs() < 1e-9);
        let a = around(&v, 2, 4);
        assert_eq!(a.len(), 7);
        assert_eq!((a[0].offset, a[0].p999_us), (-2, 400.0));
        assert_eq!((a[2].offset, a[2].compactions, a[2].p999_us), (0, 1, 60.0));
        assert_eq!((a[3].p999_us, a[3].hit_ratio), (500.0, 0.5));
    }
}
