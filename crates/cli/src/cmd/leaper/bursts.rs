//! The spike setup (`halflife leaper --bursts N`): a run in which compactions are rarer
//! than the sampling intervals, so that the read latency before a compaction is a steady
//! state and the intervals after it can be compared with it (paper 002's "latency spikes
//! after compactions").
//!
//! In the mixed runs a compaction installs every 100-200 ms, in nearly every interval,
//! and the clients share the two cores with the background threads; no interval is free
//! of a compaction. Here instead:
//!
//! - **one reader thread reads without pause**, paced at `--read-rate` reads per second
//!   (so every interval holds about the same number of reads, and the reads' numbering,
//!   which the oracle's future is indexed by, maps to the same time in every policy's run).
//!   The read keys are the workload's reads, in its order and distribution;
//! - **writes come in bursts**: after a quiet period of `--burst-period-s` seconds of
//!   reads only, one writer thread puts `--burst-writes` of the workload's writes and
//!   flushes them, `--bursts` times. With `l0_compaction_trigger = 1` and all the data in
//!   one level, each burst makes exactly one flush and one compaction of that L0 file into
//!   the level; a compaction rewrites every file its key range overlaps (hashed keys: all
//!   of them), so the cache loses whatever it held of the data at the install;
//! - **the cache holds the data** (`--cache-mib`, chosen above the data size): before the
//!   run a pre-warming pass reads every record once, and between bursts the reads hit.
//!   Then steady p99.9 is a cache hit and a compaction's invalidations are what move it;
//! - **client reads reach the device** ([`super::direct`]): a miss is a 4 KiB `O_DIRECT`
//!   read (tens of microseconds on this machine's disk) instead of a copy from the OS page
//!   cache (a few), as in the paper's setting of data larger than memory. `--buffered-reads`
//!   turns this off, to show what the page cache hides;
//! - **one compaction thread** and one flush thread, so that the reader keeps a core while
//!   a burst's work runs on the other.
//!
//! The steady state is the `--steady-intervals` intervals before each burst's first write
//! (reads only, nothing installed for seconds); "after a compaction" is its install's
//! interval and the `--after-intervals` that follow (the time the cache takes to refill).

use super::direct::DirectClientReads;
use super::{
    cpu_seconds, draw_legend, err, finish, legend_line, load, sample, spike_threshold, Args,
    LeaperWorkload, PolicyResult, RunPhase, WorkloadReport, COLORS,
};
use anyhow::{anyhow, bail, Result};
use engine::{CacheWarmingConfig, Options, DB};
use harness::latency::Latencies;
use harness::ops::{ClientOp, INSERT, READ, RMW, UPDATE};
use harness::spikes::{self, IntervalLatencies, Windows};
use harness::table;
use plotters::prelude::*;
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::spec::WorkloadSpec;

/// The spike setup's schedule.
#[derive(Clone, Debug, Serialize)]
pub struct Setup {
    pub bursts: usize,
    pub period_s: f64,
    pub burst_writes: u64,
    pub read_rate: u64,
    pub direct_reads: bool,
    pub steady_intervals: usize,
    pub after_intervals: usize,
}

impl Setup {
    /// `None` unless `--bursts` is given.
    pub fn of(a: &Args, records: u64) -> Result<Option<Setup>> {
        let Some(bursts) = a.bursts else {
            return Ok(None);
        };
        if bursts == 0 || a.burst_period_s <= 0.0 || a.read_rate == 0 {
            bail!("--bursts, --burst-period-s and --read-rate must be positive");
        }
        let burst_writes = a.burst_writes.unwrap_or((records / 20).max(1));
        if burst_writes == 0 {
            bail!("--burst-writes must be positive");
        }
        let per_period = a.burst_period_s * 1000.0 / a.sample_ms.max(10) as f64;
        if (a.steady_intervals + a.after_intervals + 2) as f64 > per_period {
            bail!(
                "--steady-intervals ({}) and --after-intervals ({}) do not fit in a period of \
                 {} s at --sample-ms {}",
                a.steady_intervals,
                a.after_intervals,
                a.burst_period_s,
                a.sample_ms
            );
        }
        Ok(Some(Setup {
            bursts,
            period_s: a.burst_period_s,
            burst_writes,
            read_rate: a.read_rate,
            direct_reads: !a.buffered_reads,
            steady_intervals: a.steady_intervals,
            after_intervals: a.after_intervals,
        }))
    }

    /// Reads of the run phase: a quiet period before each burst and one after the last.
    pub fn run_reads(&self) -> u64 {
        (self.read_rate as f64 * self.period_s * (self.bursts + 1) as f64) as u64
    }

    /// The oracle's lookahead at an install: the reads of the after-window (the misses of
    /// a cache that held all the data last as long as it takes to refill, beyond the
    /// invalidation count's window; the bound should reach as far as the spikes are
    /// counted).
    pub fn oracle_horizon(&self, sample_ms: u64) -> u64 {
        let seconds = (self.after_intervals + 1) as f64 * sample_ms.max(10) as f64 / 1000.0;
        ((self.read_rate as f64 * seconds) as u64).max(engine::warming::INVALIDATION_WINDOW_READS)
    }

    /// Reads before burst `k` (from 0) starts.
    fn reads_before(&self, k: usize) -> u64 {
        (self.read_rate as f64 * self.period_s * (k + 1) as f64) as u64
    }

    /// Ops to generate so that the reads and the writes among them both suffice.
    pub fn operation_count(&self, w: &LeaperWorkload) -> u64 {
        let writes = (self.bursts as u64 * self.burst_writes) as f64;
        let n = (self.run_reads() as f64 / w.read).max(writes / (w.update + w.insert));
        (n * 1.02).ceil() as u64 + 1000
    }
}

/// When one burst ran, in seconds from the start of the run phase.
#[derive(Clone, Debug, Serialize)]
pub struct BurstMark {
    pub start_s: f64,
    /// When its flush had finished (the compaction follows in the background).
    pub flushed_s: f64,
    pub writes: u64,
}

/// Keys of the workload's run-phase reads, in op order.
fn run_reads(spec: &WorkloadSpec) -> Result<impl Iterator<Item = u64>> {
    let w = workload::Workload::new(spec.clone())?;
    Ok(w.run_ops()
        .map(ClientOp::from)
        .filter(|op| matches!(op.code, READ | RMW))
        .map(|op| op.key))
}

/// Every read the engine will serve, in order, for the oracle's future: the pre-warming
/// pass (records in key-number order), then the run's reads. One reader thread issues them,
/// so the engine's read numbers are these exactly.
pub fn oracle_reads(
    spec: &WorkloadSpec,
    setup: &Setup,
) -> Result<impl Iterator<Item = Result<ClientOp>>> {
    Ok((0..spec.record_count)
        .chain(run_reads(spec)?.take(setup.run_reads() as usize))
        .map(move |k| Ok(ClientOp::on(READ, k))))
}

fn options(a: &Args, setup: &Setup, warming: &CacheWarmingConfig) -> Options {
    let mut o = super::options(a, warming);
    // A burst is flushed explicitly, and the memtable never fills before it is.
    o.tree.memtable_size = 256 << 20;
    // Every flush is compacted at once, into the one level that holds the data.
    o.tree.l0_compaction_trigger = 1;
    o.tree.level1_max_bytes = 1 << 30;
    o.background_compactions = 1;
    if setup.direct_reads {
        o.storage = Some(Arc::new(DirectClientReads::default()));
    }
    o
}

pub fn run_one(
    a: &Args,
    setup: &Setup,
    spec: &WorkloadSpec,
    warming: &CacheWarmingConfig,
) -> Result<PolicyResult> {
    let tmp = tempfile::Builder::new()
        .prefix("halflife-leaper-")
        .tempdir()?;
    let db = Arc::new(DB::open(tmp.path(), options(a, setup, warming))?);
    let key_size = spec.key_size as usize;
    let value = vec![b'v'; spec.value_size as usize];
    load(&db, spec, a.threads, &value)?;
    db.compact_range(None, None)?;
    db.wait_idle()?;
    // The cache starts holding the data: read every record once (the oracle's future
    // counts these reads too).
    let mut key = Vec::with_capacity(key_size);
    for k in 0..spec.record_count {
        workload::keys::format_key(k, key_size, &mut key);
        db.get(&key)?;
    }

    let base = db.stats();
    let total_reads = setup.run_reads();
    let mut reads = run_reads(spec)?.take(total_reads as usize);
    let w = workload::Workload::new(spec.clone())?;
    let mut writes = w
        .run_ops()
        .map(ClientOp::from)
        .filter(|op| matches!(op.code, INSERT | UPDATE));
    let done = AtomicU64::new(0);
    let reads_done = AtomicU64::new(0);
    let reader_finished = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let epoch = AtomicUsize::new(0);
    let cpu0 = cpu_seconds()?;
    let start = Instant::now();
    let (reader, writer, series) = std::thread::scope(|s| -> Result<_> {
        let sampler = s.spawn(|| sample(&db, &base, start, a.sample_ms, &done, &epoch, &stop));
        let writer = s.spawn(|| -> Result<(Latencies, Vec<BurstMark>)> {
            let mut lat = Latencies::new();
            let mut marks = Vec::new();
            let mut key = Vec::with_capacity(key_size);
            for k in 0..setup.bursts {
                while reads_done.load(Relaxed) < setup.reads_before(k) {
                    if reader_finished.load(Relaxed) {
                        return Ok((lat, marks));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                let start_s = start.elapsed().as_secs_f64();
                let mut n = 0;
                for op in writes.by_ref().take(setup.burst_writes as usize) {
                    workload::keys::format_key(op.key, key_size, &mut key);
                    let t = Instant::now();
                    db.put(&key, &value)?;
                    lat.record(op.code as usize, t.elapsed().as_nanos() as u64);
                    done.fetch_add(1, Relaxed);
                    n += 1;
                }
                db.flush()?;
                marks.push(BurstMark {
                    start_s,
                    flushed_s: start.elapsed().as_secs_f64(),
                    writes: n,
                });
            }
            Ok((lat, marks))
        });
        let reader = (|| -> Result<(Latencies, IntervalLatencies)> {
            let mut lat = Latencies::new();
            let mut per_interval = IntervalLatencies::default();
            let mut key = Vec::with_capacity(key_size);
            let rate = setup.read_rate as f64;
            for (i, k) in reads.by_ref().enumerate() {
                // Paced: read i is due at i / rate; a reader that fell behind catches up
                // (latency is each get's own time). It waits spinning, not sleeping: the
                // first read after a sleep pays the core's wake-up (10-30 us in this VM),
                // which made the steady p99.9 flip between 4 and 25 us with no miss.
                let due = Duration::from_secs_f64(i as f64 / rate);
                while start.elapsed() < due {
                    std::hint::spin_loop();
                }
                workload::keys::format_key(k, key_size, &mut key);
                let t = Instant::now();
                db.get(&key)?;
                let nanos = t.elapsed().as_nanos() as u64;
                lat.record(READ as usize, nanos);
                per_interval.record(epoch.load(Relaxed), nanos);
                reads_done.fetch_add(1, Relaxed);
                done.fetch_add(1, Relaxed);
            }
            Ok((lat, per_interval))
        })();
        reader_finished.store(true, Relaxed);
        let writer = writer.join().map_err(|_| anyhow!("the writer panicked"));
        stop.store(true, Relaxed);
        let series = sampler.join().map_err(|_| anyhow!("sampler panicked"))?;
        Ok((reader, writer, series))
    })?;
    let (mut lat, per_interval) = reader?;
    let (wlat, marks) = writer??;
    if marks.len() < setup.bursts {
        bail!(
            "only {} of {} bursts ran: the reads ran out first",
            marks.len(),
            setup.bursts
        );
    }
    lat.merge(&wlat);
    let run_seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds()? - cpu0;
    let mask = steady_mask(
        &series.iter().map(|p| p.seconds).collect::<Vec<_>>(),
        &marks,
        setup.steady_intervals,
    );
    let phase = RunPhase {
        run_seconds,
        cpu,
        ops: done.load(Relaxed),
        base,
        series,
        lat,
        per_interval,
    };
    let windows = Windows {
        after: setup.after_intervals,
        steady: Some(&mask),
    };
    let mut r = finish(db, warming, phase, windows)?;
    r.around_compaction =
        spikes::around(&r.intervals, setup.steady_intervals, setup.after_intervals);
    r.bursts = marks;
    r.steady_mask = mask;
    Ok(r)
}

/// Counts every policy's spikes against `none`'s steady p99.9. Here the steady states are
/// quiet reads only, a few microseconds in every policy's run, and one reference is what
/// "a spike" means to a reader; against its own, a policy that leaves misses in its
/// steady state (the oracle, which loads only what is read within its horizon) would get
/// a higher bar.
pub fn against_none(results: &mut [PolicyResult], after: usize) {
    let Some(reference) = results
        .iter()
        .find(|r| r.policy == "none")
        .map(|r| r.spikes.steady.p999_us)
    else {
        return;
    };
    for r in results.iter_mut() {
        let w = Windows {
            after,
            steady: Some(&r.steady_mask),
        };
        r.spikes = spikes::spikes(&r.intervals, w, reference);
    }
}

/// The schedule, as a line of the report.
pub fn describe(s: &Setup) -> String {
    format!(
        "spike setup: {} bursts of {} writes (one flush, one compaction each) every {} s of reads only, 1 reader at {} reads/s, client reads {}; steady = {} intervals before each burst\n",
        s.bursts,
        s.burst_writes,
        s.period_s,
        s.read_rate,
        if s.direct_reads { "O_DIRECT" } else { "buffered" },
        s.steady_intervals
    )
}

/// Read p99.9 by interval from the compactions' installs (medians over compactions), and
/// each compaction's spikes and hit-ratio dip.
pub fn render_around(r: &WorkloadReport) -> String {
    let Some(first) = r.results.first() else {
        return String::new();
    };
    let offsets: Vec<i64> = first
        .around_compaction
        .iter()
        .map(|p| p.offset)
        .filter(|&o| {
            (-2..=6).contains(&o) || o == first.around_compaction.last().map_or(0, |p| p.offset)
        })
        .collect();
    let mut head = vec!["policy".to_string()];
    head.extend(offsets.iter().map(|o| format!("{o:+}")));
    let mut t = table::Table::new(head);
    let mut lines = String::new();
    for p in &r.results {
        let mut row = vec![p.policy.clone()];
        for o in &offsets {
            let v = p.around_compaction.iter().find(|x| x.offset == *o);
            row.push(v.map_or(String::new(), |v| table::micros(v.p999_us)));
        }
        t.row(row);
        lines.push_str(&format!(
            "{}: spikes per compaction {:?}, hit-ratio dips [{}]\n",
            p.policy,
            p.spikes.spikes_per_compaction,
            p.spikes
                .hit_dips
                .iter()
                .map(|d| format!("{d:.3}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    format!(
        "read p99.9 by interval from a compaction's install (0), median over compactions:\n{}{}",
        t.render(),
        lines
    )
}

/// Two panels over the intervals around a compaction's install (medians over the
/// compactions): read p99.9 (log scale) with twice `none`'s steady p99.9 dashed, and the
/// hit ratio.
pub fn plot_around(path: &Path, r: &WorkloadReport) -> Result<()> {
    harness::fonts::init_fonts()?;
    let root = BitMapBackend::new(path, (1100, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let title = format!(
        "{}: reads around a compaction's install (median over compactions)",
        r.workload.name
    );
    let root = root.titled(&title, ("sans-serif", 22)).map_err(err)?;
    let (top, bottom) = root.split_vertically(480);
    let step = r.sample_ms as f64 / 1000.0;
    let xs = |p| measured(p, step);
    let (x_lo, x_hi) = r
        .results
        .iter()
        .flat_map(|p| xs(p).into_iter().map(|x| x.0))
        .fold((0.0f64, step), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let threshold = spike_threshold(r);
    let lat = r
        .results
        .iter()
        .flat_map(|p| xs(p).into_iter().map(|x| x.1.p999_us))
        .filter(|&v| v > 0.0);
    let y_lo = lat.clone().fold(threshold, f64::min).max(1.0) / 1.5;
    let y_hi = lat.fold(threshold, f64::max).max(2.0) * 1.5;
    let mut chart = ChartBuilder::on(&top)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_lo..x_hi, (y_lo..y_hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds from the compaction's install")
        .y_desc("read p99.9 per interval (us)")
        .draw()
        .map_err(err)?;
    for (i, p) in r.results.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = xs(p)
            .into_iter()
            .filter(|x| x.1.p999_us > 0.0)
            .map(|(x, v)| (x, v.p999_us))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "{}: {} spikes after {} compactions",
                p.policy, p.spikes.post_compaction_spikes, p.spikes.compactions
            ))
            .legend(legend_line(c, 2));
    }
    chart
        .draw_series(DashedLineSeries::new(
            [(x_lo, threshold), (x_hi, threshold)],
            6,
            4,
            BLACK.stroke_width(1),
        ))
        .map_err(err)?
        .label("2 x none's steady p99.9")
        .legend(legend_line(BLACK, 1));
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;

    let mut chart = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_lo..x_hi, 0.0..1.02)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds from the compaction's install")
        .y_desc("hit ratio per interval")
        .draw()
        .map_err(err)?;
    for (i, p) in r.results.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = xs(p).into_iter().map(|(x, v)| (x, v.hit_ratio)).collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "{}: mean dip {:.3}",
                p.policy, p.spikes.mean_hit_dip
            ))
            .legend(legend_line(c, 2));
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present().map_err(err)?;
    Ok(())
}

/// A policy's profile around the installs, at its offsets in seconds.
fn measured(p: &PolicyResult, step: f64) -> Vec<(f64, &spikes::AroundPoint)> {
    p.around_compaction
        .iter()
        .filter(|x| x.compactions > 0)
        .map(|x| (x.offset as f64 * step, x))
        .collect()
}

/// The steady intervals: the `n` before the one in which each burst started. Interval `i`
/// lies between `edges[i]` and `edges[i + 1]` (seconds).
fn steady_mask(edges: &[f64], marks: &[BurstMark], n: usize) -> Vec<bool> {
    let mut mask = vec![false; edges.len()];
    for m in marks {
        // The interval holding the burst's start.
        let i = edges.partition_point(|&e| e <= m.start_s).saturating_sub(1);
        for x in mask.iter_mut().take(i).skip(i.saturating_sub(n)) {
            *x = true;
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_intervals_end_where_a_burst_starts() {
        let edges: Vec<f64> = (0..30).map(|i| i as f64 * 0.1).collect();
        let mark = |s| BurstMark {
            start_s: s,
            flushed_s: s + 0.05,
            writes: 1,
        };
        // Bursts in interval 10 (1.0-1.1 s) and 25.
        let m = steady_mask(&edges, &[mark(1.03), mark(2.55)], 3);
        let on: Vec<usize> = (0..m.len()).filter(|&i| m[i]).collect();
        assert_eq!(on, [7, 8, 9, 22, 23, 24]);
    }

    #[test]
    fn the_schedule_has_enough_reads_and_writes() {
        let s = Setup {
            bursts: 6,
            period_s: 4.0,
            burst_writes: 10_000,
            read_rate: 50_000,
            direct_reads: true,
            steady_intervals: 10,
            after_intervals: 10,
        };
        assert_eq!(s.run_reads(), 1_400_000);
        assert_eq!(s.reads_before(0), 200_000);
        let w = &super::super::WORKLOADS[2];
        let ops = s.operation_count(w);
        assert!(ops as f64 * w.read >= 1_400_000.0);
        assert!(ops as f64 * (w.update + w.insert) >= 60_000.0);
    }
}
