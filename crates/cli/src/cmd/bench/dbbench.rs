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

use super::Args;
use anyhow::{anyhow, bail, Context, Result};
use engine::{Options, DB};
use harness::latency::Latencies;
use harness::report::{self, LatencySummary};
use harness::table;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::ops::Bound;
use std::path::{Path, PathBuf};
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
pub(super) const DEFAULT_KEY_SIZE: u32 = 16;
pub(super) const DEFAULT_VALUE_SIZE: u32 = 100;

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

#[derive(Serialize)]
struct Report<'a> {
    schema: &'static str,
    engine: String,
    settings: serde_json::Value,
    benchmarks: &'a [BenchResult],
    engine_bytes_by_cause: std::collections::BTreeMap<String, u64>,
    disk_bytes: u64,
    engine_stats: serde_json::Value,
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
struct Ctx<'a> {
    db: &'a DB,
    num: u64,
    key_size: usize,
    value_size: usize,
    values: &'a CompressibleValues,
    seed: u64,
}

pub fn run(a: &Args, list: &str, opts: Options) -> Result<()> {
    let names = parse_benchmarks(list)?;
    let num = a.num;
    if num == 0 {
        bail!("--num must be at least 1");
    }
    let key_size = a.key_size.unwrap_or(DEFAULT_KEY_SIZE) as usize;
    if let Some(cap) = workload::keys::key_capacity(key_size) {
        if num > cap {
            bail!("--num {num} does not fit in {key_size}-byte keys (at most {cap} keys)");
        }
    }
    let value_size = a.value_size.unwrap_or(DEFAULT_VALUE_SIZE) as usize;
    let ratio = a.compression_ratio.unwrap_or(0.5);
    let values = CompressibleValues::new(ratio, value_size, 0x0064_6262_656e_6368)
        .map_err(|e| anyhow!("--compression-ratio: {e}"))?;
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("dbbench-{}", a.policy));
    let report_path = a
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("bench-out/{name}.json")));
    let (_tmp, dir) = super::data_dir(a)?;
    if !a.quiet {
        eprintln!(
            "halflife bench (db_bench mode): {} keys of {key_size} B, values of {value_size} B \
             (compression ratio {ratio}), {} thread(s), policy {}, in {}",
            table::count(num),
            a.threads,
            a.policy,
            dir.display()
        );
    }
    let mut db = Some(open(&dir, &opts)?);
    let mut results = Vec::new();
    for (i, bench) in names.iter().enumerate() {
        if bench == "fillrandom" {
            // A fresh database, as db_bench's fill benchmarks.
            if let Some(old) = db.take() {
                old.close()?;
            }
            std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
            db = Some(open(&dir, &opts)?);
        }
        let ctx = Ctx {
            db: db.as_ref().expect("open"),
            num,
            key_size,
            value_size,
            values: &values,
            seed: a.seed.unwrap_or(301) ^ ((i as u64) << 32),
        };
        let r = run_one(&ctx, bench, a.threads)?;
        if !a.quiet {
            println!("{}", render(&r));
        }
        results.push(r);
    }
    let db = db.expect("open");
    // Space and bytes written are read once flushes and compactions are done (outside
    // every benchmark's timing), so that runs with different settings compare alike.
    db.wait_idle()?;
    let stats = db.stats();
    let by_cause = report::bytes_by_cause(&stats);
    let engine_stats = serde_json::to_value(&stats)?;
    db.close()?;
    let disk_bytes = report::dir_bytes(&dir);
    if !a.quiet {
        let written: u64 = stats.io.total_written();
        println!(
            "engine bytes written {} ({}), user bytes {}; on disk {} (tree {}, value files {})",
            table::bytes(written),
            by_cause
                .iter()
                .map(|(k, v)| format!("{k} {}", table::bytes(*v)))
                .collect::<Vec<_>>()
                .join(", "),
            table::bytes(stats.user_bytes_written),
            table::bytes(disk_bytes),
            table::bytes(stats.tree_bytes),
            table::bytes(stats.value_file_bytes),
        );
        println!(
            "write stalls {} ({} in all, longest {}); delayed writes {} ({} in all)",
            table::count(stats.stall_count),
            table::micros(stats.stall_micros as f64),
            table::micros(stats.stall_max_micros as f64),
            table::count(stats.delay_count),
            table::micros(stats.delay_micros as f64),
        );
    }
    let report = Report {
        schema: "halflife-dbbench/1",
        engine: format!("halflife-{}", a.policy),
        settings: serde_json::json!({
            "num": num, "threads": a.threads, "key_size": key_size, "value_size": value_size,
            "compression_ratio": ratio, "policy": a.policy, "memtable_mb": a.sizes.memtable_mb,
            "cache_mb": a.sizes.cache_mib, "sync": a.sync, "compression": a.compression,
            "compression_per_level": a.compression_per_level,
            "value_compression": a.value_compression,
        }),
        benchmarks: &results,
        engine_bytes_by_cause: by_cause,
        disk_bytes,
        engine_stats,
    };
    if let Some(parent) = report_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&report_path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", report_path.display()))?;
    let plot_path = (!a.no_plot).then(|| {
        a.plot
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("bench-out/{name}-tail.png")))
    });
    if let Some(p) = &plot_path {
        let title = format!("halflife {name}: p99.9 latency per second");
        tail_plot(p, &title, &results)?;
    }
    if !a.quiet {
        println!("report: {}", report_path.display());
        if let Some(p) = &plot_path {
            println!("plot:   {}", p.display());
        }
    }
    Ok(())
}

/// The tail over time: p99.9 per second of each benchmark, one after the other along the
/// time axis, on a log scale (a stall is orders of magnitude above the rest).
fn tail_plot(path: &Path, title: &str, results: &[BenchResult]) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    harness::fonts::init_fonts()?;
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

fn open(dir: &Path, opts: &Options) -> Result<DB> {
    DB::open(dir, opts.clone()).with_context(|| format!("opening the engine in {}", dir.display()))
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

fn run_one(ctx: &Ctx, bench: &str, threads: usize) -> Result<BenchResult> {
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
                let mut it = ctx.db.scan(Bound::Included(&key), Bound::Unbounded)?;
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
fn render(r: &BenchResult) -> String {
    let mut s = format!(
        "{:<16} : {:>11.3} micros/op {} ops/sec {:.3} seconds {} operations; {:>6.1} MB/s",
        r.name, r.micros_per_op, r.ops_per_sec as u64, r.seconds, r.ops, r.mb_per_sec
    );
    if r.name.starts_with("read") || r.name == "seekrandom" {
        s.push_str(&format!(" ({} of {} found)", r.found, r.ops));
    }
    if let Some(l) = &r.latency_us {
        s.push_str(&format!(
            "\n{:<16}   latency us: p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.0}",
            "", l.p50, l.p99, l.p999, l.max
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
