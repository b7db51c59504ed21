//! `halflife bench --benchmarks fillrandom,overwrite,...`: the db_bench workloads a RocksDB
//! user runs first, with db_bench's meaning of its flags, so that the two can be run side by
//! side (scripts/db-bench-side-by-side.sh) and compared per benchmark.
//!
//! As in db_bench: the benchmarks run in the order given on one database; `fillrandom`
//! starts from an empty one; with `--threads T` every thread performs `--num` operations
//! on keys drawn uniformly from `0..num` (so T x num operations in all); throughput is all
//! threads' operations over the wall time of the benchmark; `readwhilewriting` runs T
//! reader threads and one extra writer that writes until the readers are done, and reports
//! the readers; `seekrandom` positions a new iterator at a random key and reads the entry
//! found. Values come from a pool of the chosen compressibility (`--compression-ratio`,
//! db_bench's default 0.5). Keys are the workload crate's keys for the drawn numbers (not
//! db_bench's big-endian numbers): the same size and the same random order in the key
//! space.

use crate::latency::Latencies;
use crate::report::LatencySummary;
use crate::table;
use anyhow::{anyhow, bail, Result};
use engine::DB;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Instant;
use workload::rng::WorkloadRng;
use workload::{format_key, CompressibleValues};

/// The db_bench benchmarks this mode knows.
pub const BENCHMARKS: [&str; 5] = [
    "fillrandom",
    "overwrite",
    "readrandom",
    "readwhilewriting",
    "seekrandom",
];

/// db_bench's defaults for the key and value size.
pub const DEFAULT_KEY_SIZE: u32 = 16;
pub const DEFAULT_VALUE_SIZE: u32 = 100;

/// The result of one benchmark, as db_bench prints it plus tails and memory.
#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    pub name: String,
    pub threads: usize,
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub micros_per_op: f64,
    /// Key and value bytes per second of the measured operations.
    pub mb_per_sec: f64,
    /// Reads that found their key.
    pub found: u64,
    pub latency_us: Option<LatencySummary>,
    /// `readwhilewriting`: the writer's puts and latency.
    pub writer_ops: u64,
    pub writer_latency_us: Option<LatencySummary>,
    /// p99.9 of the measured operations in each second of the benchmark (microseconds;
    /// 0 for a second without any): the tail over time, where stalls show up.
    pub p999_per_second_us: Vec<f64>,
    /// Resident set size at the end of the benchmark and the peak so far (VmRSS, VmHWM).
    pub rss_bytes: Option<u64>,
    pub max_rss_bytes: Option<u64>,
}

/// The `halflife-dbbench/1` report of a run of benchmarks.
#[derive(Serialize)]
pub struct Report<'a> {
    pub schema: &'static str,
    pub engine: String,
    pub settings: serde_json::Value,
    pub benchmarks: &'a [BenchResult],
    pub engine_bytes_by_cause: std::collections::BTreeMap<String, u64>,
    pub disk_bytes: u64,
    pub engine_stats: serde_json::Value,
}

/// The parsed `--benchmarks` list.
pub fn parse_benchmarks(list: &str) -> Result<Vec<String>> {
    let names: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    for n in &names {
        if !BENCHMARKS.contains(&n.as_str()) {
            bail!(
                "--benchmarks: unknown benchmark {n:?}; known: {}",
                BENCHMARKS.join(", ")
            );
        }
    }
    if names.is_empty() {
        bail!("--benchmarks is empty; known: {}", BENCHMARKS.join(", "));
    }
    Ok(names)
}

/// What every thread of a benchmark needs.
pub struct Ctx<'a> {
    pub db: &'a DB,
    /// Keys are drawn from `0..num`; each thread performs `num` operations.
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub values: &'a CompressibleValues,
    pub seed: u64,
    /// seekrandom's read-ahead of separated values.
    pub read: engine::ReadOptions,
}

/// The tail over time: p99.9 per second of each benchmark, one after the other along the
/// time axis, on a log scale (a stall is orders of magnitude above the rest).
pub fn tail_plot(path: &Path, title: &str, results: &[BenchResult]) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    crate::fonts::init_fonts()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let total: usize = results.iter().map(|r| r.p999_per_second_us.len()).sum();
    let y_max = results
        .iter()
        .flat_map(|r| r.p999_per_second_us.iter().copied())
        .fold(10.0, f64::max)
        * 2.0;
    let root = BitMapBackend::new(path, (1200, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..total.max(1) as f64, (1f64..y_max).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("second")
        .y_desc("p99.9 (us)")
        .draw()
        .map_err(|e| err(&e))?;
    let mut offset = 0usize;
    for (i, r) in results.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = r
            .p999_per_second_us
            .iter()
            .enumerate()
            .filter(|(_, v)| **v > 0.0)
            .map(|(s, v)| ((offset + s) as f64 + 0.5, v.max(1.0)))
            .collect();
        offset += r.p999_per_second_us.len();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(r.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// One thread's share: its latencies (overall and per second), reads found, and ops done.
struct ThreadResult {
    lat: Latencies,
    per_second: PerSecond,
    found: u64,
    ops: u64,
}

impl ThreadResult {
    fn new(start: Instant) -> ThreadResult {
        ThreadResult {
            lat: Latencies::new(),
            per_second: PerSecond::new(start),
            found: 0,
            ops: 0,
        }
    }

    fn record(&mut self, began: Instant) {
        let nanos = began.elapsed().as_nanos() as u64;
        self.lat.record(OP, nanos);
        self.per_second.record(began, nanos);
        self.ops += 1;
    }
}

/// Latency histograms per second since the benchmark started (2 significant digits: a
/// tail over time needs the order of magnitude, not the third digit).
struct PerSecond {
    start: Instant,
    hists: Vec<Histogram<u64>>,
}

impl PerSecond {
    fn new(start: Instant) -> PerSecond {
        PerSecond {
            start,
            hists: Vec::new(),
        }
    }

    fn hist() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 3_600_000_000_000, 2).expect("valid bounds")
    }

    fn record(&mut self, at: Instant, nanos: u64) {
        let s = at.saturating_duration_since(self.start).as_secs() as usize;
        while self.hists.len() <= s {
            self.hists.push(Self::hist());
        }
        self.hists[s].saturating_record(nanos.max(1));
    }

    fn merge(&mut self, other: &PerSecond) {
        while self.hists.len() < other.hists.len() {
            self.hists.push(Self::hist());
        }
        for (a, b) in self.hists.iter_mut().zip(&other.hists) {
            a.add(b).expect("same bounds");
        }
    }

    fn p999_us(&self) -> Vec<f64> {
        self.hists
            .iter()
            .map(|h| {
                if h.is_empty() {
                    0.0
                } else {
                    h.value_at_quantile(0.999) as f64 / 1000.0
                }
            })
            .collect()
    }
}

const OP: usize = 0;

/// Runs benchmark `bench` on `threads` threads (and `readwhilewriting`'s writer).
pub fn run_one(ctx: &Ctx, bench: &str, threads: usize) -> Result<BenchResult> {
    let readers_done = AtomicBool::new(false);
    let start = Instant::now();
    let (main, writer) = std::thread::scope(|s| -> Result<_> {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let seed = ctx.seed ^ (t as u64 + 1);
                s.spawn(move || thread_ops(ctx, bench, seed, t, start))
            })
            .collect();
        let writer = (bench == "readwhilewriting").then(|| {
            let done = &readers_done;
            s.spawn(move || writer_until(ctx, done, ctx.seed ^ 0xffff, start))
        });
        let mut all = ThreadResult::new(start);
        let mut first_err = None;
        for w in workers {
            match w.join().map_err(|_| anyhow!("a {bench} thread panicked"))? {
                Ok(r) => {
                    all.lat.merge(&r.lat);
                    all.per_second.merge(&r.per_second);
                    all.found += r.found;
                    all.ops += r.ops;
                }
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        readers_done.store(true, Relaxed);
        let writer = match writer {
            Some(w) => Some(w.join().map_err(|_| anyhow!("the writer panicked"))??),
            None => None,
        };
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok((all, writer))
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let bytes_per_op = match bench {
        "fillrandom" | "overwrite" => ctx.key_size + ctx.value_size,
        "seekrandom" => ctx.key_size,
        _ => ctx.key_size + ctx.value_size,
    };
    let mem = memory();
    Ok(BenchResult {
        name: bench.to_string(),
        threads,
        ops: main.ops,
        seconds,
        ops_per_sec: main.ops as f64 / seconds,
        micros_per_op: seconds * 1e6 / main.ops.max(1) as f64,
        mb_per_sec: (main.ops as f64 * bytes_per_op as f64) / seconds / 1048576.0,
        found: main.found,
        latency_us: main.lat.summary(OP),
        writer_ops: writer.as_ref().map_or(0, |w| w.ops),
        writer_latency_us: writer.and_then(|w| w.lat.summary(OP)),
        p999_per_second_us: main.per_second.p999_us(),
        rss_bytes: mem.0,
        max_rss_bytes: mem.1,
    })
}

/// `num` operations of `bench` on uniformly random keys.
fn thread_ops(
    ctx: &Ctx,
    bench: &str,
    seed: u64,
    thread: usize,
    start: Instant,
) -> Result<ThreadResult> {
    let mut rng = WorkloadRng::new(seed);
    let mut r = ThreadResult::new(start);
    let mut key = Vec::with_capacity(ctx.key_size);
    let mut pos = thread * 7919;
    for _ in 0..ctx.num {
        format_key(rng.below(ctx.num), ctx.key_size, &mut key);
        let t = Instant::now();
        match bench {
            "fillrandom" | "overwrite" => ctx
                .db
                .put(&key, ctx.values.next(&mut pos, ctx.value_size))?,
            "readrandom" | "readwhilewriting" => r.found += u64::from(ctx.db.get(&key)?.is_some()),
            "seekrandom" => {
                let mut it =
                    ctx.db
                        .scan_opt(Bound::Included(&key), Bound::Unbounded, None, &ctx.read)?;
                if let Some(kv) = it.next() {
                    kv?;
                    r.found += 1;
                }
            }
            other => bail!("unknown benchmark {other}"),
        }
        r.record(t);
    }
    Ok(r)
}

/// `readwhilewriting`'s writer: random puts until the readers are done.
fn writer_until(ctx: &Ctx, done: &AtomicBool, seed: u64, start: Instant) -> Result<ThreadResult> {
    let mut rng = WorkloadRng::new(seed);
    let mut r = ThreadResult::new(start);
    let mut key = Vec::with_capacity(ctx.key_size);
    let mut pos = 0;
    while !done.load(Relaxed) {
        format_key(rng.below(ctx.num), ctx.key_size, &mut key);
        let t = Instant::now();
        ctx.db
            .put(&key, ctx.values.next(&mut pos, ctx.value_size))?;
        r.record(t);
    }
    Ok(r)
}

/// VmRSS and VmHWM of this process.
pub fn memory() -> (Option<u64>, Option<u64>) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// db_bench's result line, then tails and memory.
pub fn render(r: &BenchResult) -> String {
    let mut s = format!(
        "{:<16} : {:>11.3} micros/op {} ops/sec {:.3} seconds {} operations; {:>6.1} MB/s",
        r.name, r.micros_per_op, r.ops_per_sec as u64, r.seconds, r.ops, r.mb_per_sec
    );
    if r.name.starts_with("read") || r.name == "seekrandom" {
        s.push_str(&format!(" ({} of {} found)", r.found, r.ops));
    }
    if let Some(l) = &r.latency_us {
        s.push_str(&format!(
            "\n{:<16}   latency us: p50 {:.2} p99 {:.2} p99.9 {:.2} p99.99 {:.2} max {:.0}",
            "", l.p50, l.p99, l.p999, l.p9999, l.max
        ));
    }
    if let Some(w) = &r.writer_latency_us {
        s.push_str(&format!(
            "\n{:<16}   writer: {} puts, p50 {:.2} p99 {:.2} p99.9 {:.2} us",
            "", r.writer_ops, w.p50, w.p99, w.p999
        ));
    }
    let tail = &r.p999_per_second_us;
    if let Some((worst, at)) = tail.iter().zip(0..).max_by(|a, b| a.0.total_cmp(b.0)) {
        let mut sorted = tail.clone();
        sorted.sort_by(f64::total_cmp);
        s.push_str(&format!(
            "\n{:<16}   p99.9 per second: median {:.0} us, worst {:.0} us (second {at} of {})",
            "",
            sorted[sorted.len() / 2],
            worst,
            tail.len()
        ));
    }
    if let (Some(rss), Some(hwm)) = (r.rss_bytes, r.max_rss_bytes) {
        s.push_str(&format!(
            "\n{:<16}   RSS {} (peak {})",
            "",
            table::bytes(rss),
            table::bytes(hwm)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_list_is_checked() {
        assert_eq!(
            parse_benchmarks("fillrandom, readrandom").unwrap(),
            ["fillrandom", "readrandom"]
        );
        let e = parse_benchmarks("fillseq").unwrap_err().to_string();
        assert!(
            e.contains("fillseq") && e.contains("readwhilewriting"),
            "{e}"
        );
        assert!(parse_benchmarks(" , ").is_err());
    }
}
