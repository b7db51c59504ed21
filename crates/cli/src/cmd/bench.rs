//! `halflife bench`: run one workload on the engine and report throughput, latency per op
//! type, write amplification by cause, space amplification, tree size and stalls.
//!
//! The run: open the engine in a fresh directory; load phase (insert key numbers
//! `0..record_count`); run phase (the workload's ops, or an op file's with `--ops`); wait
//! until no background work is pending; final statistics. Client threads execute ops in
//! batches fed by a producer thread. About every 1/`--samples` of the ops, the main thread
//! samples the engine's counters and its live bytes for the amplification-over-time plot.
//!
//! Every option has a default: `halflife bench` alone runs paper 000's write-intensive
//! pattern (scrambled Zipfian 0.9 updates, 256-byte keys, 4 KiB values) scaled to about a
//! minute on a 2-core machine: 200,000 records (870 MB live), 600,000 updates (2.6 GB), which
//! is enough for value-file GC to run many times.

use crate::flags;
use anyhow::{anyhow, bail, Context, Result};
use engine::expiry::{Clock, ManualClock, SystemClock};
use engine::lifetime::ThresholdParams;
use engine::{
    CacheOptions, GcPolicyConfig, LifetimeMode, LifetimeOptions, Options, ReadOptions,
    TableOptions, TreeOptions, ValueLogOptions, WalOptions, DB,
};
use harness::client::Expiry;
use harness::latency::OP_NAMES;
use harness::ops::INSERT;
use harness::oracle::WorkloadOracle;
use harness::outpath;
use harness::phases;
use harness::plan::{build_spec, Plan, SpecChoice};
use harness::procio::ProcIo;
use harness::report::{self, Phase, RunReport, WorkloadInfo};
use harness::{plots, table};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod dbbench;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Workload preset: a, b, c, d, e, f (YCSB core workloads), write-intensive (alias
    /// zipfian; paper 000 section 5.2: updates only, 256-byte keys, 4 KiB values), shifting
    /// (the same with the hot set moved every quarter of the run), mixed (keys with their
    /// own write periods, 10% deletes), expiring (the write-intensive updates, 70% with a
    /// TTL log-uniform from 1/1000 to 1/2 of the run, see --expiry) or scan (YCSB E with 4 KiB values: 95% scans of
    /// 10-100 records from a Zipfian start key, 5% inserts; 100,000 records, 10,000 ops).
    #[arg(short, long, default_value = "write-intensive")]
    pub workload: String,
    /// Records loaded before the run phase [default: 200000 for write-intensive, else the
    /// preset's].
    #[arg(long)]
    pub records: Option<u64>,
    /// Operations in the run phase [default: three times the records for write-intensive,
    /// else the preset's].
    #[arg(long)]
    pub op_count: Option<u64>,
    /// Key size in bytes [default: the preset's].
    #[arg(long)]
    pub key_size: Option<u32>,
    /// Value size in bytes [default: the preset's].
    #[arg(long)]
    pub value_size: Option<u32>,
    /// Request distribution override: uniform, zipfian[:theta], scrambled[:theta],
    /// latest[:theta].
    #[arg(long)]
    pub distribution: Option<String>,
    /// Zipfian constant of the write-intensive preset.
    #[arg(long, default_value_t = 0.9)]
    pub theta: f64,
    /// Workload seed [default: the workload crate's].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Replay this op file (as written by `halflife compare`) instead of generating ops.
    #[arg(long, value_name = "FILE")]
    pub ops: Option<PathBuf>,

    /// Value placement and GC policy: inline, blobdb, titan, terark, lifetime,
    /// lifetime-nomodel, oracle or rate-oracle (the oracles need --threads 1: they know the
    /// op order).
    #[arg(short, long, default_value = "lifetime")]
    pub policy: String,
    /// blobdb: fraction of the oldest value files GC may collect.
    #[arg(long, default_value_t = 0.8)]
    pub age_cutoff: f64,
    /// blobdb: garbage ratio of those files that forces their collection.
    #[arg(long, default_value_t = 0.2)]
    pub force_threshold: f64,
    /// titan, terark: garbage ratio at which a value file is collected.
    #[arg(long, default_value_t = 0.2)]
    pub garbage_ratio: f64,
    /// lifetime policies: TTL of value files before the first GC job has set the
    /// thresholds, in writes [default: the paper's 2^22 scaled by records / 49M, the
    /// records of its 200 GB load].
    #[arg(long)]
    pub lifetime_initial_ttl: Option<u64>,
    /// lifetime: training samples per model. The paper uses 128k for a 200 GB load; at
    /// the scale of these benchmarks (1/50 to 1/500 of its data) that would fill once or
    /// never in a run, so the default is 16k.
    #[arg(long, default_value_t = 16384)]
    pub lifetime_dataset: usize,
    /// lifetime policies: target space amplification of the value files (GC runs while
    /// value-file bytes exceed this many times the live ones; values placed by predicted
    /// death at flush and GC); 0 for paper 000's TTL trigger.
    #[arg(long, default_value_t = engine::GcTrigger::DEFAULT_SPACE_AMP)]
    pub space_amp_target: f64,
    /// The value log is the WAL of separated values: each large value is written once,
    /// by its write, and the WAL logs a pointer (`false`: every value goes through the
    /// WAL as well; ignored with --policy inline).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub value_log_wal: bool,
    /// Value-file GC threads (the engine's `background_gc`) [default: the engine's, 1].
    #[arg(long, value_name = "N")]
    pub background_gc: Option<usize>,
    #[command(flatten)]
    pub sizes: flags::SizeArgs,
    /// Sync the WAL on every write.
    #[arg(long)]
    pub sync: bool,
    /// Scans read separated values ahead of the caller in windows of up to this many KiB,
    /// starting at 16 and doubling (the engine's `ReadOptions`); 0 reads each value when
    /// the scan reaches it [default: the engine's, 256].
    #[arg(long, value_name = "KIB")]
    pub scan_readahead_kib: Option<usize>,

    /// Who keeps expiring updates' expiries: `engine` (the engine is told each one and
    /// drops what expired) or `sweep` (the engine is never told; the client deletes each
    /// key at its expiry unless it was written since, as a server keeping expiries in its
    /// own records does; one thread only). Time is one millisecond per op either way.
    #[arg(long, value_enum, default_value_t = ExpiryArg::Engine)]
    pub expiry: ExpiryArg,

    /// Client threads.
    #[arg(short, long, default_value_t = 1)]
    pub threads: usize,
    /// Data directory (must be empty or absent) [default: a temporary directory, removed
    /// at the end].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Name of the run, used in the default report and plot paths.
    #[arg(long)]
    pub name: Option<String>,
    /// JSON report path [default: bench-out/<name>.json].
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// PNG plot of write and space amplification over the run [default:
    /// bench-out/<name>.png].
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Do not draw the plot.
    #[arg(long)]
    pub no_plot: bool,
    /// Statistics samples over the run (each one measures live bytes with a tree scan).
    #[arg(long, default_value_t = 50)]
    pub samples: u64,
    /// Samples record the engine's counters and disk bytes only, without the tree scan
    /// that measures live bytes (compare uses them for the space amplification over the
    /// run; scans pin memtables, which the peers do not).
    #[arg(long)]
    pub no_live_scans: bool,
    /// No progress bar and no table (the report is still written).
    #[arg(short, long)]
    pub quiet: bool,
    /// Print `progress DONE TOTAL` lines on stderr instead of a bar (used by compare).
    #[arg(long, hide = true)]
    pub progress_lines: bool,
    /// Block cache warming across flushes and compactions: none, incremental-warmup or
    /// learned (paper 002; `halflife leaper` compares them).
    #[arg(long, default_value = "none")]
    pub warming: String,
    #[command(flatten)]
    pub shape: ShapeArgs,

    /// Run db_bench's benchmarks instead of a workload, in this order, comma-separated:
    /// fillrandom, overwrite, readrandom, readwhilewriting, seekrandom. Takes db_bench's
    /// flags: --num, --threads, --key-size [16], --value-size [100], --compression-ratio.
    #[arg(long, value_name = "LIST")]
    pub benchmarks: Option<String>,
    /// db_bench mode: operations per thread, and the key space (keys 0..num).
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// db_bench mode: the fraction of its size a value compresses to (db_bench's
    /// --compression_ratio) [default: 0.5, db_bench's].
    #[arg(long)]
    pub compression_ratio: Option<f64>,
    /// Compression of table data blocks: none, lz4, zstd or zstd:LEVEL.
    #[arg(long, default_value = "none")]
    pub compression: String,
    /// Compression per level, L0 first, comma-separated (e.g. none,none,lz4,lz4,zstd);
    /// deeper levels take the last one. Overrides --compression.
    #[arg(long, value_name = "LIST")]
    pub compression_per_level: Option<String>,
    /// Compression of the values in value files (each record on its own): none, lz4, zstd
    /// or zstd:LEVEL.
    #[arg(long, default_value = "none")]
    pub value_compression: String,
}

/// The tree's shape (growth factor, compaction style).
#[derive(clap::Args, Clone, Debug)]
pub struct ShapeArgs {
    /// Growth factor between levels, or `auto`: the engine picks it with the VAT model
    /// (paper 003) from its measured merge amplification, r and the expected data size.
    #[arg(long, default_value = "10")]
    pub growth_factor: String,
    /// With `--growth-factor auto`: expected live data in MiB [default: records x (key +
    /// value size)].
    #[arg(long)]
    pub expected_data_mb: Option<u64>,
    /// With `--growth-factor auto`: the device's achieved throughput r (`halflife vat
    /// measure-r`) [default: the engine's DEFAULT_R].
    #[arg(long)]
    pub vat_r: Option<f64>,
    /// Compaction style: leveled, tiered, or auto (tiered when the key tree is a small
    /// share of the data and the space target leaves room, else leveled).
    #[arg(long, default_value = "auto")]
    pub compaction_style: String,
}

/// Applies `--growth-factor` and `--compaction-style` to `opts`.
fn apply_shape(s: &ShapeArgs, info: &WorkloadInfo, opts: &mut Options) -> Result<()> {
    opts.tree.compaction_style = s.compaction_style.parse()?;
    if s.growth_factor == "auto" {
        let expected = match s.expected_data_mb {
            Some(mb) => mb << 20,
            None => info.record_count * (info.key_size + info.value_size),
        };
        let mut shape = engine::AutoShapeConfig::new(expected);
        if let Some(r) = s.vat_r {
            shape = shape.with_r(r);
        }
        opts.tree.auto_shape = Some(shape);
    } else {
        opts.tree.growth_factor = s.growth_factor.parse().map_err(|_| {
            anyhow!(
                "--growth-factor {:?}: expected a number > 1 or `auto`",
                s.growth_factor
            )
        })?;
    }
    opts.validate().map_err(flags::user_facing)?;
    Ok(())
}

/// The plan `--ops` or the workload flags ask for.
fn plan(a: &Args) -> Result<Plan> {
    Ok(match &a.ops {
        Some(path) => Plan::op_file(path, a.name.clone(), &a.policy)?,
        None => Plan::generated(build_spec(&a.spec_choice())?, a.name.clone(), &a.policy),
    })
}

impl Args {
    fn spec_choice(&self) -> SpecChoice<'_> {
        SpecChoice {
            workload: &self.workload,
            records: self.records,
            op_count: self.op_count,
            key_size: self.key_size,
            value_size: self.value_size,
            distribution: self.distribution.as_deref(),
            theta: self.theta,
            seed: self.seed,
        }
    }
}

pub fn gc_policy(a: &Args) -> Result<GcPolicyConfig> {
    Ok(match a.policy.to_ascii_lowercase().as_str() {
        "inline" => GcPolicyConfig::Inline,
        "blobdb" => GcPolicyConfig::BlobDb {
            age_cutoff: a.age_cutoff,
            force_threshold: a.force_threshold,
        },
        "titan" => GcPolicyConfig::Titan {
            garbage_ratio: a.garbage_ratio,
        },
        "terark" => GcPolicyConfig::Terark {
            garbage_ratio: a.garbage_ratio,
        },
        other => match other.parse::<GcPolicyConfig>() {
            Ok(g @ GcPolicyConfig::Lifetime { .. }) => g,
            _ => bail!(
                "unknown policy {other:?}: use one of {}",
                GcPolicyConfig::NAMES.join(", ")
            ),
        },
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExpiryArg {
    Engine,
    Sweep,
}

/// Records of paper 000's 200 GB load of 256 B keys and 4 KiB values.
const PAPER_RECORDS: u64 = 200_000_000_000 / (256 + 4096);

fn lifetime_options(a: &Args, records: u64) -> LifetimeOptions {
    let paper = ThresholdParams::default();
    let ttl = a.lifetime_initial_ttl.unwrap_or_else(|| {
        ((paper.initial_ttl as f64 * records as f64 / PAPER_RECORDS as f64) as u64).max(1024)
    });
    LifetimeOptions {
        thresholds: ThresholdParams {
            initial_ttl: ttl,
            ..paper
        },
        dataset_capacity: a.lifetime_dataset,
        trigger: if a.space_amp_target == 0.0 {
            engine::GcTrigger::Ttl
        } else {
            engine::GcTrigger::SpaceAmp {
                target: a.space_amp_target,
            }
        },
        ..LifetimeOptions::default()
    }
}

/// The engine options every engine flag sets, the same in both modes. `info` sizes the
/// workload (the lifetime policy's initial TTL and `--growth-factor auto` scale with it);
/// `lifetime_oracle` is what an oracle policy knows of the future (only a workload's op
/// order gives it).
fn engine_options(
    a: &Args,
    info: &WorkloadInfo,
    lifetime_oracle: Option<Arc<dyn engine::LifetimeOracle>>,
) -> Result<Options> {
    let defaults = Options::default();
    let mut opts = Options {
        background_gc: a.background_gc.unwrap_or(defaults.background_gc),
        tree: TreeOptions {
            memtable_size: a.sizes.memtable_bytes(),
            ..Default::default()
        },
        table: TableOptions {
            compression: a.compression.parse()?,
            compression_per_level: match &a.compression_per_level {
                Some(list) => list
                    .split(',')
                    .map(|c| c.trim().parse())
                    .collect::<engine::Result<_>>()?,
                None => Vec::new(),
            },
            ..Default::default()
        },
        wal: WalOptions {
            sync_writes: a.sync,
            use_wal: true,
            value_log_wal: a.value_log_wal,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            gc: gc_policy(a)?,
            min_blob_size: a.sizes.min_blob_size as usize,
            blob_file_size: a.sizes.blob_file_bytes(),
            value_compression: a.value_compression.parse()?,
            lifetime: lifetime_options(a, info.record_count),
            lifetime_oracle,
            ..Default::default()
        },
        cache: CacheOptions {
            block_cache_capacity: a.sizes.cache_bytes(),
            cache_warming: a.warming.parse()?,
            ..Default::default()
        },
        ..defaults
    };
    apply_shape(&a.shape, info, &mut opts)?;
    Ok(opts)
}

/// The options of a workload run: the engine flags, and an oracle policy's knowledge of
/// the workload's future.
fn workload_options(a: &Args, plan: &Plan) -> Result<Options> {
    let gc = gc_policy(a)?;
    let lifetime_oracle = if gc.lifetime_mode().is_some_and(LifetimeMode::needs_oracle) {
        if a.threads != 1 {
            bail!("--policy oracle needs --threads 1 (it numbers writes in op order)");
        }
        if a.expiry == ExpiryArg::Sweep {
            bail!("--policy oracle needs --expiry engine (the sweep's deletions are writes the oracle does not know)");
        }
        let oracle = WorkloadOracle::build(
            plan.info.record_count,
            plan.info.key_size as usize,
            plan.run_ops()?,
        )?;
        Some(Arc::new(oracle) as Arc<dyn engine::LifetimeOracle>)
    } else {
        None
    };
    engine_options(a, &plan.info, lifetime_oracle)
}

/// The options of db_bench mode: the engine flags over db_bench's key space.
fn dbbench_options(a: &Args) -> Result<Options> {
    let gc = gc_policy(a)?;
    if gc.lifetime_mode().is_some_and(LifetimeMode::needs_oracle) {
        bail!(
            "--policy {} needs a workload's op order to know the future; db_bench mode (--benchmarks) has none",
            a.policy
        );
    }
    let info = dbbench_info(a);
    engine_options(a, &info, None)
}

/// db_bench mode's key space as a workload's sizes.
fn dbbench_info(a: &Args) -> WorkloadInfo {
    WorkloadInfo {
        record_count: a.num,
        op_count: a.num * a.threads as u64,
        key_size: u64::from(a.key_size.unwrap_or(harness::dbbench::DEFAULT_KEY_SIZE)),
        value_size: u64::from(a.value_size.unwrap_or(harness::dbbench::DEFAULT_VALUE_SIZE)),
    }
}

/// `--dir`, which must be empty or absent, or a temporary directory removed when the
/// returned guard is dropped.
fn data_dir(a: &Args) -> Result<(Option<tempfile::TempDir>, PathBuf)> {
    Ok(match &a.dir {
        Some(d) => {
            let nonempty = d.exists()
                && std::fs::read_dir(d)
                    .with_context(|| format!("reading --dir {}", d.display()))?
                    .next()
                    .is_some();
            if nonempty {
                bail!("--dir {} is not empty", d.display());
            }
            (None, d.clone())
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("halflife-bench-")
                .tempdir()?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    })
}

pub fn run(a: Args) -> Result<()> {
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if let Some(list) = &a.benchmarks {
        return dbbench::run(&a, list, dbbench_options(&a)?);
    }
    let plan = plan(&a)?;
    let mut opts = workload_options(&a, &plan)?;
    let report_path = a
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("bench-out/{}.json", plan.name)));
    let plot_path = (!a.no_plot).then(|| {
        a.plot
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("bench-out/{}.png", plan.name)))
    });
    outpath::ensure_parent(&report_path)?;
    if let Some(p) = &plot_path {
        outpath::ensure_parent(p)?;
    }

    let (_tmp, dir) = data_dir(&a)?;

    let progress = Progress::new(&a, plan.info.record_count + plan.info.op_count);
    if !a.quiet && !a.progress_lines {
        eprintln!(
            "halflife bench {}: {} records of {} B keys and {} B values, {} ops, policy {}, {} thread(s), in {}",
            plan.description,
            table::count(plan.info.record_count),
            plan.info.key_size,
            plan.info.value_size,
            table::count(plan.info.op_count),
            a.policy,
            a.threads,
            dir.display()
        );
    }

    // The engine's time is the op count (one millisecond per op from now), so every
    // engine of a compare sees the same lifetimes whatever its speed.
    let start_ms = SystemClock.now_ms();
    let clock = Arc::new(ManualClock::new(start_ms));
    let expiry = match a.expiry {
        ExpiryArg::Engine => {
            opts.clock = clock.clone();
            Expiry::Engine {
                clock: &clock,
                start_ms,
            }
        }
        ExpiryArg::Sweep => Expiry::Sweep,
    };
    let db = Arc::new(
        DB::open(&dir, opts).with_context(|| format!("opening the engine in {}", dir.display()))?,
    );
    let settings = phases::Settings {
        threads: a.threads,
        read: read_options(&a),
        samples: a.samples,
        live_scans: !a.no_live_scans,
        expiry,
    };
    let m = phases::run(&db, &plan, &settings, &progress)?;
    let record_count = plan.info.record_count;
    progress.finish();

    let stats = db.stats();
    let engine_stats = serde_json::to_value(&stats)?;
    let by_cause = report::bytes_by_cause(&stats);
    let db = Arc::try_unwrap(db).map_err(|_| anyhow!("engine handle still shared"))?;
    db.close()?;
    let disk_bytes = report::dir_bytes(&dir);

    let mut phases = BTreeMap::new();
    phases.insert("load".to_string(), Phase::new(record_count, m.load.seconds));
    phases.insert(
        "run".to_string(),
        Phase::new(plan.info.op_count, m.run.seconds),
    );
    phases.insert("settle".to_string(), Phase::new(0, m.settle_seconds));
    let mut report = RunReport {
        schema: report::SCHEMA.to_string(),
        engine: a
            .name
            .clone()
            .unwrap_or_else(|| format!("halflife-{}", a.policy)),
        settings: serde_json::json!({
            "policy": a.policy, "gc": gc_policy(&a)?.to_string(), "memtable_mb": a.sizes.memtable_mb,
            "cache_mb": a.sizes.cache_mib, "min_blob_size": a.sizes.min_blob_size,
            "blob_file_mb": a.sizes.blob_file_mb,
            "sync": a.sync, "threads": a.threads, "samples": a.samples,
            "workload": plan.spec, "ops_file": a.ops, "warming": a.warming,
            "growth_factor": a.shape.growth_factor, "compaction_style": a.shape.compaction_style,
            "compression": a.compression, "compression_per_level": a.compression_per_level,
            "value_compression": a.value_compression,
            "space_amp_target": a.space_amp_target, "value_log_wal": a.value_log_wal,
            "scan_readahead_kib": read_options(&a).readahead_size >> 10,
            "expiry": match a.expiry { ExpiryArg::Engine => "engine", ExpiryArg::Sweep => "sweep" },
            "swept_expiries": m.run.swept,
        }),
        workload: plan.info.clone(),
        phases,
        latency_us: m.run.latencies.summaries(),
        load_latency_us: m.load.latencies.summary(INSERT as usize),
        not_found: m.load.not_found + m.run.not_found,
        scanned_entries: Some(m.run.scanned),
        user_bytes_written: m.user_bytes_written,
        engine_bytes_written: stats.io.total_written(),
        engine_bytes_by_cause: by_cause,
        disk_bytes,
        tree_bytes: Some(stats.tree_bytes),
        value_file_bytes: Some(stats.value_file_bytes),
        live_user_bytes: m.live_user_bytes,
        stall_micros: stats.stall_micros,
        gc_delay_micros: stats.gc_delay_micros,
        proc_io: ProcIo::default(),
        max_rss_bytes: None,
        engine_stats,
        samples: m.samples,
    };
    report.max_rss_bytes = report::max_rss_bytes();
    report.proc_io = ProcIo::current().unwrap_or_default();
    // Tables first: if a write below fails after all, the results are on the screen.
    if !a.quiet && !a.progress_lines {
        print!("{}", render_summary(&report));
        if let Some(choice) = &stats.shape {
            println!();
            println!(
                "growth factor auto: f = {:.2} ({} levels below the memtable), a = {:.3} over {} compactions, changed {} time(s)",
                choice.growth_factor, choice.levels, choice.a, choice.compactions, choice.changes
            );
            print!("{}", choice.explanation);
        }
        if let Some(style) = &stats.tree_style {
            println!();
            println!(
                "compaction style auto, changed {} time(s): {}",
                style.changes, style.explanation
            );
        }
        println!();
    }
    report.save(&report_path)?;
    if let Some(p) = &plot_path {
        let title = format!("halflife {} - {}", report.engine, plan.description);
        let load_end = record_count * (plan.info.key_size + plan.info.value_size);
        plots::amplification_over_run(p, &title, &report.samples, Some(load_end))
            .with_context(|| format!("drawing {}", p.display()))?;
    }
    if !a.quiet && !a.progress_lines {
        println!("report: {}", report_path.display());
        if let Some(p) = &plot_path {
            println!("plot:   {}", p.display());
        }
    }
    Ok(())
}

/// The scans' read-ahead `--scan-readahead-kib` asks for.
fn read_options(a: &Args) -> ReadOptions {
    match a.scan_readahead_kib {
        None => ReadOptions::default(),
        Some(0) => ReadOptions::without_readahead(),
        Some(kib) => ReadOptions {
            readahead_size: kib << 10,
            auto_readahead: true,
            max_skipped: 0,
        },
    }
}

/// The terminal progress display: a bar, `progress` lines for a parent process, or nothing.
struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
    total: u64,
    last_line: parking_lot::Mutex<Instant>,
}

impl Progress {
    fn new(a: &Args, total: u64) -> Progress {
        let bar = (!a.quiet && !a.progress_lines).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(5));
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix:>6} [{elapsed_precise}] {wide_bar:.cyan/blue} {human_pos}/{human_len} ops {per_sec} eta {eta}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar
        });
        Progress {
            bar,
            lines: a.progress_lines,
            total,
            last_line: parking_lot::Mutex::new(Instant::now()),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl phases::Progress for Progress {
    fn phase(&self, name: &str) {
        if let Some(b) = &self.bar {
            b.set_prefix(name.to_string());
        }
    }

    fn set(&self, done: u64) {
        if let Some(b) = &self.bar {
            b.set_position(done);
        }
        if self.lines {
            let mut last = self.last_line.lock();
            if last.elapsed() >= Duration::from_millis(200) || done >= self.total {
                *last = Instant::now();
                eprintln!("progress {done} {}", self.total);
            }
        }
    }
}

/// The tables printed after a run.
pub fn render_summary(r: &RunReport) -> String {
    let mut out = String::new();
    let mut t = table::Table::new(["phase", "ops", "seconds", "throughput"]);
    for name in ["load", "run", "settle"] {
        if let Some(p) = r.phases.get(name) {
            let rate = if p.ops > 0 {
                table::rate(p.ops_per_sec)
            } else {
                String::new()
            };
            let ops = if p.ops > 0 {
                table::count(p.ops)
            } else {
                String::new()
            };
            t.row([name.to_string(), ops, format!("{:.1}", p.seconds), rate]);
        }
    }
    out.push_str(&t.render());
    out.push('\n');

    let mut t = table::Table::new([
        "latency", "count", "mean", "p50", "p99", "p99.9", "p99.99", "max",
    ]);
    let mut lat_row = |name: &str, s: &report::LatencySummary| {
        t.row([
            name.to_string(),
            table::count(s.count),
            table::micros(s.mean),
            table::micros(s.p50),
            table::micros(s.p99),
            table::micros(s.p999),
            table::micros(s.p9999),
            table::micros(s.max),
        ]);
    };
    if let Some(l) = &r.load_latency_us {
        lat_row("load insert", l);
    }
    for name in OP_NAMES {
        if let Some(s) = r.latency_us.get(name) {
            lat_row(name, s);
        }
    }
    out.push_str(&t.render());
    out.push('\n');
    if let Some(scans) = r.scans_per_sec() {
        let records = r
            .records_scanned_per_sec()
            .map(|x| format!(", {} records/s", table::rate(x)))
            .unwrap_or_default();
        out.push_str(&format!(
            "scans: {} scans/s{records} over the run\n\n",
            table::rate(scans)
        ));
    }

    let mut t = table::Table::new(["bytes written", "bytes", "per user byte"]);
    t.row([
        "user (key + value)".to_string(),
        table::bytes(r.user_bytes_written),
        String::new(),
    ]);
    for (cause, b) in &r.engine_bytes_by_cause {
        t.row([
            format!("  {cause}"),
            table::bytes(*b),
            format!("{:.3}", report::ratio(*b, r.user_bytes_written)),
        ]);
    }
    t.row([
        "engine total (write amp.)".to_string(),
        table::bytes(r.engine_bytes_written),
        table::times(r.write_amplification()),
    ]);
    out.push_str(&t.render());
    out.push('\n');

    let mut t = table::Table::new(["space", "bytes", ""]);
    if let Some(live) = r.live_user_bytes {
        t.row([
            "live user data".to_string(),
            table::bytes(live),
            String::new(),
        ]);
        t.row([
            "on disk (space amp.)".to_string(),
            table::bytes(r.disk_bytes),
            table::times(report::ratio(r.disk_bytes, live)),
        ]);
    } else {
        t.row([
            "on disk".to_string(),
            table::bytes(r.disk_bytes),
            String::new(),
        ]);
    }
    if let Some(tree) = r.tree_bytes {
        t.row([
            "  tree (SSTs)".to_string(),
            table::bytes(tree),
            String::new(),
        ]);
    }
    if let Some(v) = r.value_file_bytes {
        t.row(["  value files".to_string(), table::bytes(v), String::new()]);
    }
    out.push_str(&t.render());
    let stat = |k: &str| r.engine_stats.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    out.push_str(&format!(
        "\nwrite stalls: {} in {} stall(s), longest {}; delayed writes: {} in {} delay(s); \
         waits for value-file GC: {}\n",
        table::micros(r.stall_micros as f64),
        table::count(stat("stall_count")),
        table::micros(stat("stall_max_micros") as f64),
        table::micros(stat("delay_micros") as f64),
        table::count(stat("delay_count")),
        table::micros(r.gc_delay_micros as f64)
    ));
    out.push_str(&cache_summary(&r.engine_stats));
    if let Some(rss) = r.max_rss_bytes {
        let mb = |k: &str| r.settings.get(k).and_then(|v| v.as_u64()).unwrap_or(0) << 20;
        out.push_str(&format!(
            "peak RSS: {} (budgets: memtable {} x 2 with the one being flushed, block cache {})\n",
            table::bytes(rss),
            table::bytes(mb("memtable_mb")),
            table::bytes(mb("cache_mb")),
        ));
    }
    out
}

/// Block cache and warming counters (paper 002) from the engine's statistics.
fn cache_summary(stats: &serde_json::Value) -> String {
    let n = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    let (c, w) = (&stats["cache"], &stats["warming"]);
    let (hits, misses) = (n(c, "hits"), n(c, "misses"));
    let ratio = if hits + misses == 0 {
        0.0
    } else {
        hits as f64 / (hits + misses) as f64
    };
    format!(
        "block cache: {} hits, {} misses (hit ratio {:.4}); {} blocks invalidated by compactions, \
         {} invalidation misses (within {} reads); warming {}: {} blocks prefetched, {} then hit\n",
        table::count(hits),
        table::count(misses),
        ratio,
        table::count(n(c, "invalidated_blocks")),
        table::count(n(w, "invalidation_misses")),
        table::count(n(w, "invalidation_window_reads")),
        w.get("policy").and_then(|p| p.as_str()).unwrap_or("none"),
        table::count(n(c, "prefetched")),
        table::count(n(c, "prefetch_hits")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    /// Every engine flag with a value other than its default, after the flags it needs.
    const CASES: &[(&[&str], &[&str])] = &[
        (&[], &["--policy", "blobdb"]),
        (&["--policy", "blobdb"], &["--age-cutoff", "0.5"]),
        (&["--policy", "blobdb"], &["--force-threshold", "0.5"]),
        (&["--policy", "titan"], &["--garbage-ratio", "0.5"]),
        (&[], &["--lifetime-initial-ttl", "5000"]),
        (&[], &["--lifetime-dataset", "1000"]),
        (&[], &["--space-amp-target", "2"]),
        (&[], &["--space-amp-target", "0"]),
        (&[], &["--value-log-wal", "false"]),
        (&[], &["--background-gc", "2"]),
        (&[], &["--memtable-mb", "8"]),
        (&[], &["--cache-mib", "8"]),
        (&[], &["--min-blob-size", "1024"]),
        (&[], &["--blob-file-mb", "8"]),
        (&[], &["--sync"]),
        (&[], &["--warming", "incremental-warmup"]),
        (&[], &["--growth-factor", "4"]),
        // A small memtable, so that `auto` has more data than it to shape.
        (&["--memtable-mb", "1"], &["--growth-factor", "auto"]),
        (
            &["--memtable-mb", "1", "--growth-factor", "auto"],
            &["--expected-data-mb", "100"],
        ),
        (
            &["--memtable-mb", "1", "--growth-factor", "auto"],
            &["--vat-r", "0.5"],
        ),
        (&[], &["--compaction-style", "leveled"]),
        (&[], &["--compression", "lz4"]),
        (&[], &["--compression-per-level", "none,lz4"]),
        (&[], &["--value-compression", "lz4"]),
    ];

    /// Flags that are not engine options: the workload, the run and its outputs, and the
    /// scans' read-ahead (a read option, checked on its own below).
    const NOT_ENGINE: &[&str] = &[
        "workload",
        "records",
        "op_count",
        "key_size",
        "value_size",
        "distribution",
        "theta",
        "seed",
        "ops",
        "expiry",
        "threads",
        "dir",
        "name",
        "report",
        "plot",
        "no_plot",
        "samples",
        "no_live_scans",
        "quiet",
        "progress_lines",
        "benchmarks",
        "num",
        "compression_ratio",
        "scan_readahead_kib",
        "help",
    ];

    fn args(mode: &[&str], extra: &[&[&str]]) -> Args {
        let mut v = vec!["bench"];
        v.extend_from_slice(mode);
        for e in extra {
            v.extend_from_slice(e);
        }
        Cli::try_parse_from(v).expect("valid flags").args
    }

    fn options(mode: &[&str], extra: &[&[&str]]) -> String {
        let a = args(mode, extra);
        let o = if a.benchmarks.is_some() {
            dbbench_options(&a).unwrap()
        } else {
            workload_options(&a, &plan(&a).unwrap()).unwrap()
        };
        format!("{o:?}")
    }

    #[test]
    fn every_engine_flag_changes_the_options_in_both_modes() {
        let covered: Vec<String> = CASES
            .iter()
            .map(|(_, f)| f[0].trim_start_matches("--").replace('-', "_"))
            .collect();
        for arg in Cli::command().get_arguments() {
            let id = arg.get_id().as_str();
            assert!(
                NOT_ENGINE.contains(&id) || covered.iter().any(|c| c == id),
                "--{id} is neither checked here nor listed as not an engine option"
            );
        }
        let modes: [&[&str]; 2] = [
            &["--benchmarks", "fillrandom", "--num", "100000"],
            &["--records", "1000", "--op-count", "1000"],
        ];
        for mode in modes {
            for (needs, flag) in CASES {
                assert_ne!(
                    options(mode, &[needs]),
                    options(mode, &[needs, flag]),
                    "{mode:?}: {flag:?} left the options as they were"
                );
            }
        }
    }

    #[test]
    fn scan_readahead_is_taken_in_both_modes() {
        let a = args(
            &["--benchmarks", "seekrandom"],
            &[&["--scan-readahead-kib", "0"]],
        );
        assert_eq!(read_options(&a).readahead_size, 0);
        assert_ne!(
            read_options(&a).readahead_size,
            ReadOptions::default().readahead_size
        );
    }

    #[test]
    fn an_oracle_policy_is_refused_in_db_bench_mode() {
        let a = args(&["--benchmarks", "fillrandom"], &[&["--policy", "oracle"]]);
        let e = dbbench_options(&a).unwrap_err().to_string();
        assert!(e.contains("db_bench mode"), "{e}");
    }
}
