//! `halflife leaper`: the cache-warming evaluation of paper 002 (Leaper). For each of the
//! slides' three workloads (and a read-only control), it runs the engine once per warming
//! policy on the same generated ops, in this process, one policy after the other, and
//! reports per policy: invalidation misses (and the share `none`'s that a policy removed),
//! hit ratio, blocks prefetched and then hit, throughput, p99/p99.9 read latency, and the
//! model's overhead; plus a PNG per workload of the hit ratio over the run with the
//! compactions marked.
//!
//! Why a subcommand and not a `halflife compare` preset: compare runs engines and peers as
//! separate processes over one op file and its dimension is the engine, while here the
//! dimension is an option of one engine and the workload changes three times; running the
//! policies in one process on the same ops is the project's convention for comparing a
//! policy with its baselines. `halflife bench --warming` runs a single policy.
//!
//! Sampling: a thread reads `db.stats()` every `--sample-ms` (cheap counters only; the
//! bench's live-byte scan would read through the cache and disturb what is measured).

mod bursts;
mod direct;
mod future;
mod overhead;

use anyhow::{anyhow, bail, Context, Result};
use engine::{
    CacheOptions, CacheWarmingConfig, DbStats, GcPolicyConfig, Options, ReadOptions, TreeOptions,
    ValueLogOptions, DB,
};
use harness::client::{self, Clients, Counters, Values};
use harness::latency::Latencies;
use harness::ops::{self, ClientOp, READ};
use harness::outpath;
use harness::report::LatencySummary;
use harness::spikes::{self, Edge, Interval, IntervalLatencies, Spikes};
use harness::table;
use plotters::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::spec::{Proportions, WorkloadSpec};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Comma-separated: e-commerce, instant-messaging, synthetic, read-only, or all.
    #[arg(short, long, default_value = "all")]
    pub workloads: String,
    /// Comma-separated warming policies; `oracle` knows the run's future reads (the bound).
    #[arg(short, long, default_value = "none,incremental-warmup,learned,oracle")]
    pub policies: String,
    /// Multiplies every workload's records and ops (1.0: the slides' table sizes / 100).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Run-phase ops per loaded record.
    #[arg(long, default_value_t = 3.0)]
    pub ops_per_record: f64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 256)]
    pub value_size: u32,
    /// Block cache. At 8 MiB (below every workload's data) the cache turns over several
    /// times within the invalidation window and no prefetcher, the oracle included, can
    /// repair much; 32 MiB holds e-commerce's data and the hot part of the others'.
    #[arg(long = "cache-mib", alias = "cache-mb", default_value_t = 32)]
    pub cache_mib: u64,
    /// The learned policy's compaction budget: blocks per block the cache drops.
    #[arg(long)]
    pub replace_factor: Option<f64>,
    /// The learned policy's flush budget and hot-set cap, a share of the cache.
    #[arg(long)]
    pub flush_fraction: Option<f64>,
    /// The learned policy's loads stay within what incremental warm-up would load for the
    /// same compactions (`LearnedParams::loads_within_baseline`).
    #[arg(long)]
    pub loads_within_baseline: bool,
    /// The learned policy samples one client read (and write) in this many per thread;
    /// slots keep their length in reads.
    #[arg(long)]
    pub sample_every: Option<u64>,
    /// Memtable size in MiB.
    #[arg(long, default_value_t = 2)]
    pub memtable_mb: u64,
    /// Client threads.
    #[arg(short, long, default_value_t = 2)]
    pub threads: usize,
    /// Interval between hit-ratio and throughput samples, in milliseconds (at least 10).
    #[arg(long, default_value_t = 100)]
    pub sample_ms: u64,
    /// Workload seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Runs of each policy, interleaved (none, incremental, learned, none, ...); the
    /// report keeps the run of median throughput (in the spike setup: of median spikes
    /// removed, each repetition scored against its own `none`) and lists every run's.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Instead of whole runs one after another: open one engine per policy, side by side,
    /// and run the workload's ops this many rounds on each in turn (the overhead
    /// measure for the read-only control; the first policy must be `none`).
    #[arg(long)]
    pub paired_rounds: Option<usize>,
    /// The spike setup ([`bursts`]): this many bursts of writes, each followed by one flush
    /// and one compaction, between quiet periods of reads only from one paced reader; the
    /// cache should hold the data (`--cache-mib`), and client reads bypass the page cache.
    #[arg(long)]
    pub bursts: Option<usize>,
    /// Spike setup: seconds of reads only before each burst (and after the last).
    #[arg(long, default_value_t = 4.0)]
    pub burst_period_s: f64,
    /// Spike setup: writes per burst (default: 5% of the records).
    #[arg(long)]
    pub burst_writes: Option<u64>,
    /// Spike setup: reads per second of the one reader thread.
    #[arg(long, default_value_t = 50_000)]
    pub read_rate: u64,
    /// Spike setup: client reads through the OS page cache (default: O_DIRECT).
    #[arg(long)]
    pub buffered_reads: bool,
    /// Spike setup: intervals before each burst that make the steady state.
    #[arg(long, default_value_t = 10)]
    pub steady_intervals: usize,
    /// Spike setup: intervals after a compaction's install that count as after it.
    #[arg(long, default_value_t = 10)]
    pub after_intervals: usize,
    /// Directory for the JSON report and the plots.
    #[arg(long, default_value = "bench-out/leaper")]
    pub out: PathBuf,
    /// No progress output.
    #[arg(short, long)]
    pub quiet: bool,
}

/// A workload of the slides' table.
#[derive(Clone, Debug, Serialize)]
struct LeaperWorkload {
    name: &'static str,
    read: f64,
    update: f64,
    insert: f64,
    /// Zipfian theta ("skewness" in the table).
    theta: f64,
    /// Records at scale 1: the table size / 100.
    records: u64,
}

const WORKLOADS: [LeaperWorkload; 4] = [
    LeaperWorkload {
        name: "e-commerce",
        read: 0.85,
        update: 0.10,
        insert: 0.05,
        theta: 0.3,
        records: 100_000,
    },
    LeaperWorkload {
        name: "instant-messaging",
        read: 0.40,
        update: 0.35,
        insert: 0.25,
        theta: 0.9,
        records: 80_000,
    },
    LeaperWorkload {
        name: "synthetic",
        read: 0.75,
        update: 0.20,
        insert: 0.05,
        theta: 0.5,
        records: 200_000,
    },
    // The control for the overhead target: reads only, so no flush or compaction runs
    // after the load and warming has nothing to do but collect and predict.
    LeaperWorkload {
        name: "read-only",
        read: 1.0,
        update: 0.0,
        insert: 0.0,
        theta: 0.5,
        records: 100_000,
    },
];

/// Counters at one instant of the run phase.
#[derive(Clone, Debug, Default, Serialize)]
struct Point {
    seconds: f64,
    ops: u64,
    hits: u64,
    misses: u64,
    invalidated_blocks: u64,
    invalidation_misses: u64,
    prefetched: u64,
    /// Of those, the blocks flushes put in (the rest are compactions').
    flush_prefetched: u64,
    prefetch_hits: u64,
    compactions: u64,
    flushes: u64,
}

impl Point {
    fn of(s: &DbStats, seconds: f64, ops: u64) -> Point {
        Point {
            seconds,
            ops,
            hits: s.cache.hits,
            misses: s.cache.misses,
            invalidated_blocks: s.cache.invalidated_blocks,
            invalidation_misses: s.warming.invalidation_misses,
            prefetched: s.cache.prefetched,
            flush_prefetched: s.warming.flush_blocks_admitted,
            prefetch_hits: s.cache.prefetch_hits,
            compactions: s.compactions,
            flushes: s.flushes,
        }
    }
}

/// One policy's run of one workload.
#[derive(Clone, Debug, Serialize)]
struct PolicyResult {
    policy: String,
    run_seconds: f64,
    ops_per_sec: f64,
    hit_ratio: f64,
    invalidated_blocks: u64,
    invalidation_misses: u64,
    /// 1 - invalidation misses / those of `none` (when `none` ran).
    removed_vs_none: Option<f64>,
    prefetched: u64,
    flush_prefetched: u64,
    prefetch_hits: u64,
    compactions: u64,
    flushes: u64,
    /// Process CPU time (user + system, all threads: clients, background jobs, trainer)
    /// per run-phase op: the overhead measure that the shared machine's load disturbs
    /// least.
    cpu_us_per_op: f64,
    /// Wall time of the learned policy's training and predictions / CPU time of the
    /// process, in the run phase: an upper bound on the trainer's share of the CPU (wall
    /// time includes waiting for a core on the loaded machine).
    model_time_share: f64,
    /// Every repeat's throughput and CPU per op (the fields above are the median run's).
    ops_per_sec_runs: Vec<f64>,
    cpu_us_per_op_runs: Vec<f64>,
    read_latency_us: Option<LatencySummary>,
    latency_us: std::collections::BTreeMap<String, LatencySummary>,
    /// Run-phase counters sampled over time (from the start of the run phase).
    series: Vec<Point>,
    /// Read latency and hit ratio per sampling interval, and the spikes among them.
    intervals: Vec<Interval>,
    spikes: Spikes,
    /// 1 - post-compaction spikes / those of `none` (when `none` ran and had some); in the
    /// spike setup, against the `none` run of the same repetition.
    spikes_removed_vs_none: Option<f64>,
    /// The spike setup: every repetition's spikes removed vs that repetition's `none`
    /// (the run kept is the median of these; `None` where that `none` had no spike).
    spikes_removed_runs: Vec<Option<f64>>,
    /// The spike setup only: read latency and hit ratio per interval around compactions'
    /// installs (medians over the compactions), and each burst's times.
    around_compaction: Vec<spikes::AroundPoint>,
    bursts: Vec<bursts::BurstMark>,
    /// The spike setup only: which intervals are the steady state (before each burst).
    #[serde(skip)]
    steady_mask: Vec<bool>,
    /// The engine's statistics at the end.
    stats: DbStats,
}

#[derive(Serialize)]
struct WorkloadReport {
    workload: LeaperWorkload,
    spec: WorkloadSpec,
    cache_mb: u64,
    memtable_mb: u64,
    threads: usize,
    sample_ms: u64,
    /// The spike setup's schedule, when it ran.
    bursts: Option<bursts::Setup>,
    results: Vec<PolicyResult>,
}

fn parse_list<T>(s: &str, all: &[T], name: impl Fn(&T) -> &str) -> Result<Vec<T>>
where
    T: Clone,
{
    if s == "all" {
        return Ok(all.to_vec());
    }
    s.split(',')
        .map(|p| {
            let p = p.trim();
            all.iter().find(|w| name(w) == p).cloned().ok_or_else(|| {
                let names: Vec<&str> = all.iter().map(&name).collect();
                anyhow!("unknown name {p:?}: use {} or all", names.join(", "))
            })
        })
        .collect()
}

pub fn run(a: Args) -> Result<()> {
    if a.threads == 0 || a.scale <= 0.0 || a.ops_per_record <= 0.0 {
        bail!("--threads, --scale and --ops-per-record must be positive");
    }
    if a.bursts.is_some() && a.paired_rounds.is_some() {
        bail!("--bursts and --paired-rounds are different experiments: give one");
    }
    let workloads = parse_list(&a.workloads, &WORKLOADS, |w| w.name)?;
    // `None` stands for the oracle, which is built per workload from its ops.
    let policies: Vec<Option<CacheWarmingConfig>> = a
        .policies
        .split(',')
        .map(|p| match p.trim() {
            "oracle" => Ok(None),
            p => p.parse().map(Some).map_err(anyhow::Error::from),
        })
        .map(|p| {
            Ok(match p? {
                Some(CacheWarmingConfig::Learned(mut l)) => {
                    l.replace_factor = a.replace_factor.unwrap_or(l.replace_factor);
                    l.cache_fraction = a.flush_fraction.unwrap_or(l.cache_fraction);
                    l.loads_within_baseline |= a.loads_within_baseline;
                    if let Some(n) = a.sample_every {
                        l.slot_reads_per_range *= l.sample_every as f64 / n as f64;
                        l.sample_every = n;
                    }
                    // Checked when the engine opens.
                    Some(CacheWarmingConfig::Learned(l))
                }
                other => other,
            })
        })
        .collect::<Result<_>>()?;
    outpath::ensure_dir(&a.out)?;
    let mut summary = String::new();
    for w in &workloads {
        let records = ((w.records as f64) * a.scale).round().max(1000.0) as u64;
        let spec = WorkloadSpec::custom(
            Proportions {
                read: w.read,
                update: w.update,
                insert: w.insert,
                ..Proportions::default()
            },
            format!("zipfian:{}", w.theta)
                .parse()
                .map_err(|e| anyhow!("distribution: {e}"))?,
        )?
        .with_record_count(records);
        let setup = bursts::Setup::of(&a, records)?;
        let ops = match &setup {
            Some(s) => s.operation_count(w),
            None => (records as f64 * a.ops_per_record) as u64,
        };
        let spec = spec
            .with_operation_count(ops)
            .with_value_size(a.value_size)
            .with_seed(a.seed);
        let mut spec = spec;
        spec.name = w.name.to_string();
        spec.validate()?;
        let oracle = if policies.iter().any(Option::is_none) {
            let w = workload::Workload::new(spec.clone())?;
            let key_size = spec.key_size as usize;
            let f = match &setup {
                Some(s) => future::ReadFuture::with_horizon(
                    key_size,
                    bursts::oracle_reads(&spec, s)?,
                    s.oracle_horizon(a.sample_ms),
                )?,
                None => future::ReadFuture::build(
                    key_size,
                    w.run_ops().map(|op| Ok(ClientOp::from(op))),
                )?,
            };
            Some(CacheWarmingConfig::Oracle(
                engine::warming::ReadOracleHandle(Arc::new(f)),
            ))
        } else {
            None
        };
        let policies: Vec<&CacheWarmingConfig> = policies
            .iter()
            .map(|p| p.as_ref().or(oracle.as_ref()).expect("oracle built"))
            .collect();
        if let Some(rounds) = a.paired_rounds {
            let p = overhead::paired(&a, &spec, &policies, rounds.max(1))?;
            let json = a.out.join(format!("{}-paired.json", w.name));
            std::fs::write(&json, serde_json::to_vec_pretty(&p)?)
                .with_context(|| format!("writing {}", json.display()))?;
            let text = format!("{}: {}", w.name, overhead::render(&p));
            if !a.quiet {
                println!("{text}report: {}\n", json.display());
            }
            summary.push_str(&text);
            continue;
        }
        let mut runs: Vec<Vec<PolicyResult>> = vec![Vec::new(); policies.len()];
        for rep in 0..a.repeat.max(1) {
            for (i, &p) in policies.iter().enumerate() {
                if !a.quiet {
                    eprintln!(
                        "leaper: {} ({} records, {} ops) with {p}, run {}...",
                        w.name,
                        spec.record_count,
                        spec.operation_count,
                        rep + 1
                    );
                }
                runs[i].push(match &setup {
                    Some(s) => bursts::run_one(&a, s, &spec, p)?,
                    None => run_one(&a, &spec, p)?,
                });
            }
        }
        if let Some(s) = &setup {
            // Spikes are scored within each repetition, against that repetition's `none`:
            // its runs are minutes apart, so a machine episode (seconds to a whole run of
            // slow reads with no background work, docs/leaper.md) disturbs one repetition,
            // and the median over repetitions is the measure a single episode cannot move.
            for rep in 0..runs[0].len() {
                let mut one: Vec<PolicyResult> = runs.iter().map(|r| r[rep].clone()).collect();
                bursts::against_none(&mut one, s.after_intervals);
                compare_with_none(&mut one);
                for (r, scored) in runs.iter_mut().zip(one) {
                    r[rep] = scored;
                }
            }
        }
        let mut results = Vec::new();
        for mut r in runs {
            let tput: Vec<f64> = r.iter().map(|x| x.ops_per_sec).collect();
            let cpu: Vec<f64> = r.iter().map(|x| x.cpu_us_per_op).collect();
            let spikes_removed: Vec<Option<f64>> =
                r.iter().map(|x| x.spikes_removed_vs_none).collect();
            // The run kept: of median spikes removed in the spike setup (its throughput is
            // paced), of median throughput otherwise.
            let key = |x: &PolicyResult| match &setup {
                Some(_) => x.spikes_removed_vs_none.unwrap_or(0.0),
                None => x.ops_per_sec,
            };
            r.sort_by(|x, y| key(x).total_cmp(&key(y)));
            let mut median = r.swap_remove(r.len() / 2);
            median.ops_per_sec_runs = tput;
            median.cpu_us_per_op_runs = cpu;
            median.spikes_removed_runs = spikes_removed;
            results.push(median);
        }
        let kept_spikes: Vec<Option<f64>> =
            results.iter().map(|r| r.spikes_removed_vs_none).collect();
        compare_with_none(&mut results);
        if setup.is_some() {
            // Each kept run's spikes stay scored against its own repetition's `none`.
            for (r, kept) in results.iter_mut().zip(kept_spikes) {
                r.spikes_removed_vs_none = kept;
            }
        }
        let report = WorkloadReport {
            workload: w.clone(),
            spec: spec.clone(),
            cache_mb: a.cache_mib,
            memtable_mb: a.memtable_mb,
            threads: a.threads,
            sample_ms: a.sample_ms,
            bursts: setup,
            results,
        };
        let json = a.out.join(format!("{}.json", w.name));
        std::fs::write(&json, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", json.display()))?;
        let png = a.out.join(format!("{}.png", w.name));
        plot(&png, &report)?;
        if report.bursts.is_some() {
            let png = a.out.join(format!("{}-around.png", w.name));
            bursts::plot_around(&png, &report)?;
        }
        let text = render(&report);
        if !a.quiet {
            println!(
                "{text}report: {}\nplot:   {}\n",
                json.display(),
                png.display()
            );
        }
        summary.push_str(&text);
    }
    std::fs::write(a.out.join("summary.txt"), summary)?;
    Ok(())
}

fn options(a: &Args, warming: &CacheWarmingConfig) -> Options {
    Options {
        tree: TreeOptions {
            memtable_size: (a.memtable_mb << 20) as usize,
            target_file_size: 2 << 20,
            level1_max_bytes: 8 << 20,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            gc: GcPolicyConfig::Inline,
            ..Default::default()
        },
        cache: CacheOptions {
            block_cache_capacity: (a.cache_mib << 20) as usize,
            cache_warming: warming.clone(),
            // `none` is the baseline: its invalidation misses are what the others remove.
            warming_accounting: true,
        },
        ..Options::default()
    }
}

fn run_one(a: &Args, spec: &WorkloadSpec, warming: &CacheWarmingConfig) -> Result<PolicyResult> {
    let tmp = tempfile::Builder::new()
        .prefix("halflife-leaper-")
        .tempdir()?;
    let db = Arc::new(DB::open(tmp.path(), options(a, warming))?);
    let key_size = spec.key_size as usize;
    let value = vec![b'v'; spec.value_size as usize];
    load(&db, spec, a.threads, &value)?;

    let base = db.stats();
    let w = workload::Workload::new(spec.clone())?;
    let run_ops = w.run_ops().map(|op| Ok(ClientOp::from(op)));
    let values = Values::fixed(&value);
    let counters = Counters::default();
    let done = &counters.ops_done;
    let stop = AtomicBool::new(false);
    // The sampling interval the clients record read latencies into.
    let epoch = AtomicUsize::new(0);
    let clients = Clients {
        threads: a.threads,
        key_size,
        values: &values,
        read: ReadOptions::default(),
        counters: &counters,
        epoch: Some(&epoch),
        expiry: harness::client::Expiry::Ignore,
    };
    let cpu0 = cpu_seconds()?;
    let start = Instant::now();
    let (run, series) = std::thread::scope(|s| -> Result<_> {
        let sampler = s.spawn(|| sample(&db, &base, start, a.sample_ms, done, &epoch, &stop));
        let r = client::drive(&db, run_ops, &clients, || Ok(()));
        stop.store(true, Relaxed);
        let series = sampler.join().map_err(|_| anyhow!("sampler panicked"))?;
        Ok((r?, series))
    })?;
    let phase = RunPhase {
        run_seconds: start.elapsed().as_secs_f64(),
        cpu: cpu_seconds()? - cpu0,
        ops: spec.operation_count,
        base,
        series,
        lat: run.latencies,
        per_interval: run.per_interval,
    };
    finish(db, warming, phase, spikes::Windows::RUN)
}

/// Loads the spec's records and waits for the background work it caused.
fn load(db: &Arc<DB>, spec: &WorkloadSpec, threads: usize, value: &[u8]) -> Result<()> {
    let values = Values::fixed(value);
    let clients = Clients {
        threads,
        key_size: spec.key_size as usize,
        values: &values,
        read: ReadOptions::default(),
        counters: &Counters::default(),
        epoch: None,
        expiry: harness::client::Expiry::Ignore,
    };
    client::drive(db, ops::load(spec.record_count), &clients, || Ok(()))?;
    db.wait_idle()?;
    Ok(())
}

/// Takes a point of the engine's counters every `sample_ms` until `stop`, and after each
/// moves the clients to the next interval (`epoch`).
fn sample(
    db: &DB,
    base: &DbStats,
    start: Instant,
    sample_ms: u64,
    done: &AtomicU64,
    epoch: &AtomicUsize,
    stop: &AtomicBool,
) -> Vec<Point> {
    let mut series = vec![Point::of(base, 0.0, 0)];
    while !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(sample_ms.max(10)));
        let st = db.stats();
        series.push(Point::of(
            &st,
            start.elapsed().as_secs_f64(),
            done.load(Relaxed),
        ));
        epoch.fetch_add(1, Relaxed);
    }
    series
}

/// What a run phase measured, before the analysis.
struct RunPhase {
    run_seconds: f64,
    cpu: f64,
    /// Ops the clients ran.
    ops: u64,
    /// The engine's statistics when the run phase started.
    base: DbStats,
    series: Vec<Point>,
    lat: Latencies,
    per_interval: IntervalLatencies,
}

/// Closes the engine and turns a run phase's measurements into the policy's result.
fn finish(
    db: Arc<DB>,
    warming: &CacheWarmingConfig,
    r: RunPhase,
    windows: spikes::Windows,
) -> Result<PolicyResult> {
    let end = db.stats();
    let base = &r.base;
    let model_time = ((end.warming.training_micros + end.warming.prediction_micros)
        - (base.warming.training_micros + base.warming.prediction_micros))
        as f64
        / 1e6;
    let mut series = r.series;
    series.push(Point::of(&end, r.run_seconds, r.ops));
    // Relative to the start of the run phase.
    let b = Point::of(base, 0.0, 0);
    for p in &mut series {
        p.hits -= b.hits;
        p.misses -= b.misses;
        p.invalidated_blocks -= b.invalidated_blocks;
        p.invalidation_misses -= b.invalidation_misses;
        p.prefetched -= b.prefetched;
        p.flush_prefetched -= b.flush_prefetched;
        p.prefetch_hits -= b.prefetch_hits;
        p.compactions -= b.compactions;
        p.flushes -= b.flushes;
    }
    let last = series.last().cloned().unwrap_or_default();
    let edges: Vec<Edge> = series
        .iter()
        .map(|p| Edge {
            seconds: p.seconds,
            hits: p.hits,
            misses: p.misses,
            compactions: p.compactions,
        })
        .collect();
    let intervals = spikes::intervals(&edges, &r.per_interval);
    let db = Arc::try_unwrap(db).map_err(|_| anyhow!("engine handle still shared"))?;
    let stats = db.stats();
    db.close()?;
    let lookups = last.hits + last.misses;
    let cpu = r.cpu;
    let steady = spikes::steady(&intervals, windows);
    Ok(PolicyResult {
        policy: warming.name().to_string(),
        run_seconds: r.run_seconds,
        ops_per_sec: r.ops as f64 / r.run_seconds,
        hit_ratio: if lookups == 0 {
            0.0
        } else {
            last.hits as f64 / lookups as f64
        },
        invalidated_blocks: last.invalidated_blocks,
        invalidation_misses: last.invalidation_misses,
        removed_vs_none: None,
        prefetched: last.prefetched,
        flush_prefetched: last.flush_prefetched,
        prefetch_hits: last.prefetch_hits,
        compactions: last.compactions,
        flushes: last.flushes,
        cpu_us_per_op: cpu * 1e6 / r.ops.max(1) as f64,
        model_time_share: if cpu > 0.0 { model_time / cpu } else { 0.0 },
        ops_per_sec_runs: Vec::new(),
        cpu_us_per_op_runs: Vec::new(),
        read_latency_us: r.lat.summary(READ as usize),
        latency_us: r.lat.summaries(),
        series,
        spikes: spikes::spikes(&intervals, windows, steady.p999_us),
        around_compaction: Vec::new(),
        intervals,
        spikes_removed_vs_none: None,
        spikes_removed_runs: Vec::new(),
        bursts: Vec::new(),
        steady_mask: Vec::new(),
        stats,
    })
}

/// Spikes removed vs `none`, and every repetition's when there were several.
fn spikes_removed(p: &PolicyResult) -> String {
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let mut out = p.spikes_removed_vs_none.map_or(String::new(), pct);
    if p.spikes_removed_runs.len() > 1 {
        let runs: Vec<String> = p
            .spikes_removed_runs
            .iter()
            .map(|x| x.map_or("-".into(), pct))
            .collect();
        out.push_str(&format!(" ({})", runs.join(", ")));
    }
    out
}

/// The shares of `none`'s invalidation misses and post-compaction spikes each policy
/// removed. Each run's spikes are counted against its own steady state (in the
/// spike setup against `none`'s, `bursts::against_none`): the policies run
/// one after another on a shared machine whose load moves every latency of a run.
fn compare_with_none(results: &mut [PolicyResult]) {
    let Some(none) = results.iter().find(|r| r.policy == "none") else {
        return;
    };
    let (misses, spikes) = (
        none.invalidation_misses,
        none.spikes.post_compaction_spikes as u64,
    );
    let removed = |x: u64, base: u64| (base > 0).then(|| 1.0 - x as f64 / base as f64);
    for r in results.iter_mut() {
        r.removed_vs_none = removed(r.invalidation_misses, misses);
        r.spikes_removed_vs_none = removed(r.spikes.post_compaction_spikes as u64, spikes);
    }
}

/// User + system CPU seconds of this process so far (/proc/self/stat, clock ticks of 10 ms).
fn cpu_seconds() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name (which may hold spaces) start at state, field 3.
    let rest = stat
        .rsplit_once(')')
        .map(|x| x.1)
        .ok_or_else(|| anyhow!("unexpected /proc/self/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<f64> {
        Ok(f.get(i - 3)
            .ok_or_else(|| anyhow!("short /proc/self/stat"))?
            .parse::<f64>()?)
    };
    Ok((ticks(14)? + ticks(15)?) / 100.0)
}

fn render(r: &WorkloadReport) -> String {
    let w = &r.workload;
    let mut out = format!(
        "{}: {:.0}% reads, {:.0}% updates, {:.0}% inserts, zipfian {}, {} records of {} B, {} ops, cache {} MiB\n",
        w.name,
        w.read * 100.0,
        w.update * 100.0,
        w.insert * 100.0,
        w.theta,
        table::count(r.spec.record_count),
        r.spec.value_size,
        table::count(r.spec.operation_count),
        r.cache_mb
    );
    let mut t = table::Table::new([
        "policy",
        "compactions",
        "invalidated blocks",
        "invalidation misses",
        "removed vs none",
        "hit ratio",
        "prefetched",
        "by flushes",
        "prefetch hits",
        "throughput",
        "CPU/op",
        "read p99",
        "read p99.9",
    ]);
    for p in &r.results {
        let (p99, p999) = p
            .read_latency_us
            .as_ref()
            .map_or((String::new(), String::new()), |l| {
                (table::micros(l.p99), table::micros(l.p999))
            });
        t.row([
            p.policy.clone(),
            table::count(p.compactions),
            table::count(p.invalidated_blocks),
            table::count(p.invalidation_misses),
            p.removed_vs_none
                .map_or(String::new(), |x| format!("{:.1}%", x * 100.0)),
            format!("{:.4}", p.hit_ratio),
            table::count(p.prefetched),
            table::count(p.flush_prefetched),
            table::count(p.prefetch_hits),
            table::rate(p.ops_per_sec),
            format!("{:.1} us", p.cpu_us_per_op),
            p99,
            p999,
        ]);
    }
    out.push_str(&t.render());
    let mut t = table::Table::new([
        "policy",
        "steady p99",
        "steady p99.9",
        "p99.9 after compactions",
        "intervals",
        "spikes",
        "after compactions",
        "spikes removed vs none",
        "mean hit dip",
        "blocks displaced",
        "withdrawn",
    ]);
    for p in &r.results {
        let s = &p.spikes;
        t.row([
            p.policy.clone(),
            table::micros(s.steady.p99_us),
            table::micros(s.steady.p999_us),
            table::micros(s.post_compaction_p999_us),
            s.measured_intervals.to_string(),
            s.spike_intervals.to_string(),
            format!(
                "{} of {}",
                s.post_compaction_spikes, s.post_compaction_intervals
            ),
            spikes_removed(p),
            format!("{:.4}", s.mean_hit_dip),
            table::count(p.stats.warming.blocks_displaced),
            table::count(p.stats.warming.blocks_withdrawn),
        ]);
    }
    let after = r
        .bursts
        .as_ref()
        .map_or(spikes::AFTER, |b| b.after_intervals);
    if let Some(b) = &r.bursts {
        out.push_str(&bursts::describe(b));
    }
    let reference = if r.bursts.is_some() {
        "none's steady p99.9 (the intervals before each burst)"
    } else {
        "the run's steady p99.9"
    };
    out.push_str(&format!(
        "spikes: intervals of {} ms whose read p99.9 exceeds 2 x {reference}; \"after compactions\": within {} intervals of one\n",
        r.sample_ms, after
    ));
    out.push_str(&t.render());
    if r.bursts.is_some() {
        out.push_str(&bursts::render_around(r));
    }
    for p in r.results.iter().filter(|p| p.policy == "learned") {
        let s = &p.stats.warming;
        out.push_str(&format!(
            "learned model: {} ranges, {} slots, {} trainings ({:.2} s wall total, last on {} rows), {} predictions ({:.1} ms wall total), model time {:.1}% of the run phase's process CPU (upper bound), {} ranges hot at the end, {} of {} output blocks admitted\n",
            s.ranges,
            s.slots,
            s.trainings,
            s.training_micros as f64 / 1e6,
            s.last_training_rows,
            s.predictions,
            s.prediction_micros as f64 / 1e3,
            p.model_time_share * 100.0,
            s.hot_ranges,
            s.blocks_admitted,
            s.blocks_considered
        ));
    }
    if r.results.iter().any(|p| p.ops_per_sec_runs.len() > 1) {
        for p in &r.results {
            let f = |v: &[f64], unit: &str| {
                v.iter()
                    .map(|x| format!("{x:.1}{unit}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push_str(&format!(
                "{} runs: throughput {} ; CPU per op {}\n",
                p.policy,
                f(
                    &p.ops_per_sec_runs
                        .iter()
                        .map(|x| x / 1000.0)
                        .collect::<Vec<_>>(),
                    "K/s"
                ),
                f(&p.cpu_us_per_op_runs, " us")
            ));
        }
    }
    out.push('\n');
    out
}

/// Lookups a point of the hit-ratio plot stands for, at least.
const MIN_LOOKUPS_PER_POINT: u64 = 2000;

const COLORS: [RGBColor; 4] = [
    RGBColor(200, 40, 40),
    RGBColor(40, 110, 200),
    RGBColor(30, 150, 60),
    RGBColor(140, 80, 160),
];

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing plot: {e}")
}

/// A legend entry: a short line in the series' colour.
fn legend_line(c: RGBColor, width: u32) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(width))
}

/// The legend box of a panel, at `at`.
fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    at: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(at)
        .draw()
        .map_err(err)
}

/// Two panels over run-phase ops: the hit ratio per sampling interval, with each policy's
/// compactions marked as ticks along the top in its colour; and invalidation misses so far.
fn plot(path: &Path, r: &WorkloadReport) -> Result<()> {
    harness::fonts::init_fonts()?;
    let root = BitMapBackend::new(path, (1200, 1150)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let title = format!(
        "{}: block cache hit ratio and invalidation misses by warming policy",
        r.workload.name
    );
    let root = root.titled(&title, ("sans-serif", 22)).map_err(err)?;
    let (top, rest) = root.split_vertically(480);
    let (bottom, spikes_panel) = rest.split_vertically(320);
    let x_max = r
        .results
        .iter()
        .filter_map(|p| p.series.last().map(|s| s.ops))
        .max()
        .unwrap_or(1) as f64
        / 1000.0;
    let ratios: Vec<Vec<(f64, f64)>> = r
        .results
        .iter()
        .map(|p| {
            // Samples are merged until an interval holds enough lookups for its ratio to
            // mean something (a 100 ms sample may hold a handful).
            let mut pts = Vec::new();
            let mut from = p.series.first();
            for s in &p.series {
                let Some(f) = from else { break };
                let (h, m) = (s.hits - f.hits, s.misses - f.misses);
                if h + m >= MIN_LOOKUPS_PER_POINT {
                    pts.push((s.ops as f64 / 1000.0, h as f64 / (h + m) as f64));
                    from = Some(s);
                }
            }
            pts
        })
        .collect();
    let y_min = ratios
        .iter()
        .flatten()
        .map(|p| p.1)
        .fold(1.0f64, f64::min)
        .clamp(0.0, 0.95);
    let y_lo = (y_min * 20.0).floor() / 20.0;
    let n = r.results.len() as f64;
    let y_hi = 1.0 + 0.03 * (n + 1.0);
    let mut chart = ChartBuilder::on(&top)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max.max(1e-6), y_lo..y_hi)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("run-phase ops (thousands)")
        .y_desc("hit ratio per interval")
        .draw()
        .map_err(err)?;
    for (i, (p, pts)) in r.results.iter().zip(&ratios).enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "{} (compactions: ticks at y={:.2})",
                p.policy,
                1.0 + 0.03 * (i as f64 + 1.0)
            ))
            .legend(legend_line(c, 2));
        // A tick wherever a sampling interval completed a compaction.
        let y = 1.0 + 0.03 * (i as f64 + 1.0);
        let ticks: Vec<f64> = p
            .series
            .windows(2)
            .filter(|w| w[1].compactions > w[0].compactions)
            .map(|w| w[1].ops as f64 / 1000.0)
            .collect();
        chart
            .draw_series(ticks.iter().map(|&x| {
                PathElement::new(vec![(x, y - 0.012), (x, y + 0.012)], c.stroke_width(2))
            }))
            .map_err(err)?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;

    let y_max = r
        .results
        .iter()
        .filter_map(|p| p.series.last().map(|s| s.invalidation_misses))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.05;
    let mut chart = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max.max(1e-6), 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("run-phase ops (thousands)")
        .y_desc("invalidation misses so far")
        .draw()
        .map_err(err)?;
    for (i, p) in r.results.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                p.series
                    .iter()
                    .map(|s| (s.ops as f64 / 1000.0, s.invalidation_misses as f64)),
                c.stroke_width(2),
            ))
            .map_err(err)?
            .label(p.policy.clone())
            .legend(legend_line(c, 2));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    plot_p999(&spikes_panel, r, x_max)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Twice `none`'s reference p99.9 (the spike bar drawn in the plots).
fn spike_threshold(r: &WorkloadReport) -> f64 {
    r.results
        .iter()
        .find(|p| p.policy == "none")
        .or(r.results.first())
        .map_or(0.0, |p| 2.0 * p.spikes.reference_p999_us)
}

/// Read p99.9 per interval (log scale), with the spike threshold (2 x `none`'s steady
/// p99.9) as a dashed line.
fn plot_p999<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    r: &WorkloadReport,
    x_max: f64,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let points: Vec<Vec<(f64, f64)>> = r
        .results
        .iter()
        .map(|p| {
            let ops_at = |t: f64| {
                let i = p.series.partition_point(|s| s.seconds < t);
                p.series.get(i).map_or(0, |s| s.ops) as f64 / 1000.0
            };
            p.intervals
                .iter()
                .filter(|x| x.reads >= spikes::MIN_READS && x.p999_us > 0.0)
                .map(|x| (ops_at(x.end_s), x.p999_us))
                .collect()
        })
        .collect();
    let threshold = spike_threshold(r);
    let all = points.iter().flatten().map(|p| p.1);
    let y_lo = all
        .clone()
        .fold(f64::INFINITY, f64::min)
        .min(threshold)
        .max(1.0)
        / 1.5;
    let y_hi = all.fold(1.0, f64::max).max(threshold) * 1.5;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max.max(1e-6), (y_lo..y_hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("run-phase ops (thousands)")
        .y_desc("read p99.9 per interval (us)")
        .draw()
        .map_err(err)?;
    for (i, (p, pts)) in r.results.iter().zip(&points).enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(1)))
            .map_err(err)?
            .label(format!(
                "{}: {} spikes after compactions",
                p.policy, p.spikes.post_compaction_spikes
            ))
            .legend(legend_line(c, 2));
    }
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, threshold), (x_max, threshold)],
            6,
            4,
            BLACK.stroke_width(1),
        ))
        .map_err(err)?
        .label("2 x none's steady p99.9")
        .legend(legend_line(BLACK, 1));
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_table_matches_the_slides() {
        let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
        assert_eq!(
            names,
            ["e-commerce", "instant-messaging", "synthetic", "read-only"]
        );
        for w in &WORKLOADS {
            assert!(
                (w.read + w.update + w.insert - 1.0).abs() < 1e-9,
                "{}",
                w.name
            );
        }
        assert_eq!((WORKLOADS[1].update, WORKLOADS[1].theta), (0.35, 0.9));
        assert!(parse_list("e-commerce,synthetic", &WORKLOADS, |w| w.name).is_ok());
        assert!(parse_list("tpcc", &WORKLOADS, |w| w.name).is_err());
    }
}
