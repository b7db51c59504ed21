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

use crate::harness::latency::{Latencies, OP_NAMES};
use crate::harness::ops::{
    self, ClientOp, SharedReceiver, DELETE, INSERT, READ, RMW, SCAN, UPDATE,
};
use crate::harness::oracle::WorkloadOracle;
use crate::harness::procio::ProcIo;
use crate::harness::report::{self, Phase, RunReport, Sample, WorkloadInfo};
use crate::harness::{flags, outpath};
use crate::harness::{plots, table};
use anyhow::{anyhow, bail, Context, Result};
use engine::lifetime::ThresholdParams;
use engine::{
    CacheOptions, GcPolicyConfig, LifetimeMode, LifetimeOptions, Options, ReadOptions,
    TableOptions, TreeOptions, ValueLogOptions, WalOptions, DB,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{RngCore, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::spec::WorkloadSpec;

mod dbbench;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Workload preset: a, b, c, d, e, f (YCSB core workloads), write-intensive (alias
    /// zipfian; paper 000 section 5.2: updates only, 256-byte keys, 4 KiB values), shifting
    /// (the same with the hot set moved every quarter of the run), mixed (keys with their
    /// own write periods, 10% deletes) or scan (YCSB E with 4 KiB values: 95% scans of
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

/// What runs: the sizes, and where the run-phase ops come from.
struct Plan {
    name: String,
    description: String,
    info: WorkloadInfo,
    source: Source,
    spec: Option<WorkloadSpec>,
}

enum Source {
    Spec(WorkloadSpec),
    OpFile(PathBuf),
}

impl Plan {
    fn from_args(a: &Args) -> Result<Plan> {
        if let Some(path) = &a.ops {
            let header = *workload::opfile::OpFileReader::open(path)
                .with_context(|| format!("reading op file {}", path.display()))?
                .header();
            let info = WorkloadInfo {
                record_count: header.record_count,
                op_count: header.op_count,
                key_size: header.key_size as u64,
                value_size: header.value_size as u64,
            };
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("ops")
                .to_string();
            return Ok(Plan {
                name: a
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{stem}-{}", a.policy)),
                description: format!("op file {}", path.display()),
                info,
                source: Source::OpFile(path.clone()),
                spec: None,
            });
        }
        let spec = build_spec(&a.spec_choice())?;
        let info = WorkloadInfo {
            record_count: spec.record_count,
            op_count: spec.operation_count,
            key_size: spec.key_size as u64,
            value_size: spec.value_size as u64,
        };
        Ok(Plan {
            name: a
                .name
                .clone()
                .unwrap_or_else(|| format!("{}-{}", spec.name, a.policy)),
            description: format!("{} ({})", spec.name, spec.request_distribution),
            info,
            source: Source::Spec(spec.clone()),
            spec: Some(spec),
        })
    }
}

/// Records of the default `halflife bench` (three updates per record follow): 870 MB live
/// and 2.6 GB of updates, a run of about a minute on 2 cores.
pub const DEFAULT_WRITE_INTENSIVE_RECORDS: u64 = 200_000;

/// Records of `--workload scan`: 410 MB of 4 KiB values.
pub const DEFAULT_SCAN_RECORDS: u64 = 100_000;
/// Ops of `--workload scan`: 9,500 scans of 55 records on average read 520,000 values
/// (2.1 GB), a run of seconds to a minute depending on how much of it is cached.
pub const DEFAULT_SCAN_OPS: u64 = 10_000;

/// The workload a run asks for: what [`build_spec`] needs, given by `bench`'s flags or by
/// `compare`'s preset and flags.
pub struct SpecChoice<'a> {
    pub workload: &'a str,
    pub records: Option<u64>,
    pub op_count: Option<u64>,
    pub key_size: Option<u32>,
    pub value_size: Option<u32>,
    pub distribution: Option<&'a str>,
    pub theta: f64,
    pub seed: Option<u64>,
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

pub fn build_spec(a: &SpecChoice) -> Result<WorkloadSpec> {
    let w = a.workload.to_ascii_lowercase();
    let mut spec = match w.as_str() {
        "write-intensive" | "wi" | "zipfian" | "shifting" | "mixed" => {
            let records = a.records.unwrap_or(DEFAULT_WRITE_INTENSIVE_RECORDS);
            let spec = match w.as_str() {
                "shifting" => WorkloadSpec::shifting(a.theta)?,
                "mixed" => WorkloadSpec::mixed()?,
                _ => WorkloadSpec::write_intensive(a.theta)?,
            };
            spec.with_record_count(records)
                .with_operation_count(a.op_count.unwrap_or(3 * records))
        }
        s if s.len() == 1 || s.starts_with("ycsb-") => {
            let c = s.chars().last().expect("non-empty");
            WorkloadSpec::ycsb(c)?
        }
        "scan" => WorkloadSpec::scan()?
            .with_record_count(a.records.unwrap_or(DEFAULT_SCAN_RECORDS))
            .with_operation_count(a.op_count.unwrap_or(DEFAULT_SCAN_OPS)),
        _ => bail!(
            "unknown workload {:?}: use write-intensive (alias zipfian), shifting, mixed, scan, or a YCSB workload a-f",
            a.workload
        ),
    };
    if let Some(n) = a.records {
        if n == 0 {
            bail!("--records must be at least 1: reads and updates need an existing key");
        }
        spec = spec.with_record_count(n);
    }
    if let Some(n) = a.op_count {
        spec = spec.with_operation_count(n);
    }
    if let Some(n) = a.key_size {
        spec = spec.with_key_size(n);
    }
    if let Some(n) = a.value_size {
        spec = spec.with_value_size(n);
    }
    if let Some(d) = a.distribution {
        spec.request_distribution = d.parse().map_err(|e| anyhow!("--distribution {d}: {e}"))?;
    }
    if let Some(seed) = a.seed {
        spec = spec.with_seed(seed);
    }
    spec.validate()?;
    Ok(spec)
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

fn engine_options(a: &Args, plan: &Plan) -> Result<Options> {
    let gc = gc_policy(a)?;
    let base = base_options(a)?;
    let lifetime_oracle = if gc.lifetime_mode().is_some_and(LifetimeMode::needs_oracle) {
        if a.threads != 1 {
            bail!("--policy oracle needs --threads 1 (it numbers writes in op order)");
        }
        let oracle = WorkloadOracle::build(
            plan.info.record_count,
            plan.info.key_size as usize,
            run_ops(plan)?,
        )?;
        Some(Arc::new(oracle) as Arc<dyn engine::LifetimeOracle>)
    } else {
        None
    };
    Ok(Options {
        wal: WalOptions {
            value_log_wal: a.value_log_wal,
            ..base.wal
        },
        vlog: ValueLogOptions {
            lifetime: lifetime_options(a, plan.info.record_count),
            lifetime_oracle,
            ..base.vlog
        },
        ..base
    })
}

/// The options every run takes from the flags (sizes, durability, placement policy).
fn base_options(a: &Args) -> Result<Options> {
    Ok(Options {
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
            ..Default::default()
        },
        vlog: ValueLogOptions {
            gc: gc_policy(a)?,
            min_blob_size: a.sizes.min_blob_size as usize,
            blob_file_size: a.sizes.blob_file_bytes(),
            value_compression: a.value_compression.parse()?,
            ..Default::default()
        },
        cache: CacheOptions {
            block_cache_capacity: a.sizes.cache_bytes(),
            cache_warming: a.warming.parse()?,
            ..Default::default()
        },
        ..Options::default()
    })
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
        let mut opts = base_options(&a)?;
        let info = WorkloadInfo {
            record_count: a.num,
            op_count: a.num * a.threads as u64,
            key_size: u64::from(a.key_size.unwrap_or(dbbench::DEFAULT_KEY_SIZE)),
            value_size: u64::from(a.value_size.unwrap_or(dbbench::DEFAULT_VALUE_SIZE)),
        };
        apply_shape(&a.shape, &info, &mut opts)?;
        return dbbench::run(&a, list, opts);
    }
    let plan = Plan::from_args(&a)?;
    let mut opts = engine_options(&a, &plan)?;
    apply_shape(&a.shape, &plan.info, &mut opts)?;
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

    let db = Arc::new(
        DB::open(&dir, opts).with_context(|| format!("opening the engine in {}", dir.display()))?,
    );
    let shared = Shared::new(plan.info.value_size as usize, read_options(&a));
    let sample_every = ((plan.info.record_count + plan.info.op_count) / a.samples.max(1)).max(1);
    let mut sampler = Sampler {
        every: sample_every,
        next_at: sample_every,
        samples: Vec::new(),
        start: Instant::now(),
        warned: false,
        scan: !a.no_live_scans,
    };
    sampler.take(&db, &shared)?;

    // Load phase.
    progress.phase("load");
    let record_count = plan.info.record_count;
    let load_ops = (0..record_count).map(|k| {
        Ok(ClientOp {
            code: INSERT,
            key: k,
            len: 0,
        })
    });
    let load = drive(
        &db,
        &plan,
        &shared,
        a.threads,
        load_ops,
        &progress,
        &mut sampler,
    )?;

    // Run phase.
    progress.phase("run");
    let run = drive(
        &db,
        &plan,
        &shared,
        a.threads,
        run_ops(&plan)?,
        &progress,
        &mut sampler,
    )?;

    // Settle: no flush, compaction or GC pending.
    progress.phase("settle");
    let t = Instant::now();
    db.wait_idle()?;
    let settle = t.elapsed().as_secs_f64();
    let live = sampler.take_final(&db, &shared);
    progress.finish();

    let stats = db.stats();
    let engine_stats = serde_json::to_value(&stats)?;
    let by_cause = bytes_by_cause(&stats);
    let db = Arc::try_unwrap(db).map_err(|_| anyhow!("engine handle still shared"))?;
    db.close()?;
    let disk_bytes = report::dir_bytes(&dir);

    let mut phases = BTreeMap::new();
    phases.insert("load".to_string(), Phase::new(record_count, load.seconds));
    phases.insert(
        "run".to_string(),
        Phase::new(plan.info.op_count, run.seconds),
    );
    phases.insert("settle".to_string(), Phase::new(0, settle));
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
        }),
        workload: plan.info.clone(),
        phases,
        latency_us: run.latencies.summaries(),
        load_latency_us: load.latencies.summary(INSERT as usize),
        not_found: load.not_found + run.not_found,
        scanned_entries: Some(run.scanned),
        user_bytes_written: shared.user_bytes.load(Relaxed),
        engine_bytes_written: stats.io.total_written(),
        engine_bytes_by_cause: by_cause,
        disk_bytes,
        tree_bytes: Some(stats.tree_bytes),
        value_file_bytes: Some(stats.value_file_bytes),
        live_user_bytes: live,
        stall_micros: stats.stall_micros,
        gc_delay_micros: stats.gc_delay_micros,
        proc_io: ProcIo::default(),
        max_rss_bytes: None,
        engine_stats,
        samples: sampler.samples,
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

/// Bytes written per cause, the causes that wrote any.
fn bytes_by_cause(stats: &engine::DbStats) -> BTreeMap<String, u64> {
    stats
        .io
        .by_cause
        .iter()
        .filter(|(_, c)| c.bytes_written > 0)
        .map(|(k, c)| (k.clone(), c.bytes_written))
        .collect()
}

/// The run-phase ops of `plan`, generated or read from its op file.
fn run_ops(plan: &Plan) -> Result<Box<dyn Iterator<Item = Result<ClientOp>> + Send>> {
    Ok(match &plan.source {
        Source::Spec(spec) => {
            let w = workload::Workload::new(spec.clone())?;
            Box::new(w.run_ops().map(|op| Ok(ClientOp::from(op))))
        }
        Source::OpFile(path) => {
            let reader = workload::opfile::OpFileReader::open(path)?;
            Box::new(reader.map(|op| op.map(ClientOp::from).map_err(anyhow::Error::from)))
        }
    })
}

/// The scans' read-ahead `--scan-readahead-kib` asks for.
fn read_options(a: &Args) -> ReadOptions {
    match a.scan_readahead_kib {
        None => ReadOptions::default(),
        Some(0) => ReadOptions::without_readahead(),
        Some(kib) => ReadOptions {
            readahead_size: kib << 10,
            auto_readahead: true,
        },
    }
}

/// State the client threads share.
struct Shared {
    /// How scans read separated values ahead.
    read: ReadOptions,
    values: Arc<[u8]>,
    value_size: usize,
    ops_done: AtomicU64,
    user_bytes: AtomicU64,
    stop: AtomicBool,
}

/// Values are slices of one random 1 MiB pool at varying offsets: compression is off, so
/// content does not change the bytes written, and copying is cheaper than generating.
const POOL: usize = 1 << 20;

impl Shared {
    fn new(value_size: usize, read: ReadOptions) -> Shared {
        let mut pool = vec![0u8; POOL + value_size];
        rand::rngs::StdRng::seed_from_u64(0x6861_6c66).fill_bytes(&mut pool);
        Shared {
            read,
            values: pool.into(),
            value_size,
            ops_done: AtomicU64::new(0),
            user_bytes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }
    }
}

struct PhaseResult {
    seconds: f64,
    latencies: Latencies,
    not_found: u64,
    /// Records the scans returned.
    scanned: u64,
}

/// Runs `ops` on `threads` clients while the calling thread drives the progress display
/// and the sampler.
fn drive<I>(
    db: &Arc<DB>,
    plan: &Plan,
    shared: &Shared,
    threads: usize,
    ops: I,
    progress: &Progress,
    sampler: &mut Sampler,
) -> Result<PhaseResult>
where
    I: Iterator<Item = Result<ClientOp>> + Send + 'static,
{
    let start = Instant::now();
    let (rx, producer) = ops::produce(ops, threads);
    let key_size = plan.info.key_size as usize;
    let result = std::thread::scope(|s| -> Result<PhaseResult> {
        let clients: Vec<_> = (0..threads)
            .map(|i| {
                let rx = rx.clone();
                let db = db.clone();
                std::thread::Builder::new()
                    .name(format!("client-{i}"))
                    .spawn_scoped(s, move || {
                        let r = client(&db, &rx, shared, key_size, i);
                        if r.is_err() {
                            shared.stop.store(true, Relaxed);
                        }
                        r
                    })
                    .expect("spawning a client thread")
            })
            .collect();
        while clients.iter().any(|c| !c.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            let done = shared.ops_done.load(Relaxed);
            progress.set(done);
            if done >= sampler.next_at {
                if let Err(e) = sampler.take(db, shared) {
                    shared.stop.store(true, Relaxed);
                    return Err(e);
                }
            }
        }
        let mut latencies = Latencies::new();
        let (mut not_found, mut scanned) = (0, 0);
        for c in clients {
            let r = c
                .join()
                .map_err(|_| anyhow!("a client thread panicked"))??;
            latencies.merge(&r.latencies);
            not_found += r.not_found;
            scanned += r.scanned;
        }
        Ok(PhaseResult {
            seconds: start.elapsed().as_secs_f64(),
            latencies,
            not_found,
            scanned,
        })
    });
    if result.is_err() {
        shared.stop.store(true, Relaxed);
    }
    drop(rx);
    producer
        .join()
        .map_err(|_| anyhow!("the op producer panicked"))??;
    progress.set(shared.ops_done.load(Relaxed));
    result
}

fn client(
    db: &DB,
    rx: &SharedReceiver,
    shared: &Shared,
    key_size: usize,
    id: usize,
) -> Result<ClientResult> {
    let mut lat = Latencies::new();
    let mut key = Vec::with_capacity(key_size);
    let (mut not_found, mut scanned) = (0u64, 0u64);
    let mut offset = (id * 7919) % POOL;
    let vs = shared.value_size;
    let write_bytes = (key_size + vs) as u64;
    while let Some(batch) = ops::next_batch(rx) {
        if shared.stop.load(Relaxed) {
            break;
        }
        for op in &batch {
            workload::keys::format_key(op.key, key_size, &mut key);
            let value = &shared.values[offset..offset + vs];
            let t = Instant::now();
            let done = exec(db, &shared.read, op, &key, value).with_context(|| {
                let n = shared.ops_done.load(Relaxed);
                let name = OP_NAMES.get(op.code as usize).unwrap_or(&"op");
                format!("{name} of key number {} (after {n} ops)", op.key)
            })?;
            lat.record(op.code as usize, t.elapsed().as_nanos() as u64);
            not_found += u64::from(!done.found);
            scanned += done.scanned;
            if op.code == INSERT || op.code == UPDATE || op.code == RMW {
                offset = (offset + 4093) % POOL;
                shared.user_bytes.fetch_add(write_bytes, Relaxed);
            } else if op.code == DELETE {
                // A delete writes its key (a tombstone), as in every peer driver.
                shared.user_bytes.fetch_add(key_size as u64, Relaxed);
            }
            // Per op, so that a sample's user bytes match the engine's counters to one op.
            shared.ops_done.fetch_add(1, Relaxed);
        }
    }
    Ok(ClientResult {
        latencies: lat,
        not_found,
        scanned,
    })
}

/// What one client thread counted over a phase.
struct ClientResult {
    latencies: Latencies,
    not_found: u64,
    scanned: u64,
}

/// What one op returned: whether a read found its key, how many records a scan returned.
struct Done {
    found: bool,
    scanned: u64,
}

/// Executes one op.
fn exec(db: &DB, read: &ReadOptions, op: &ClientOp, key: &[u8], value: &[u8]) -> Result<Done> {
    let found = |found| Done { found, scanned: 0 };
    Ok(match op.code {
        INSERT | UPDATE => found(db.put(key, value).map(|_| true)?),
        READ => found(db.get(key)?.is_some()),
        SCAN => {
            let iter = db.scan_opt(Bound::Included(key), Bound::Unbounded, None, read)?;
            let mut scanned = 0;
            for item in iter.take(op.len as usize) {
                item?;
                scanned += 1;
            }
            Done {
                found: true,
                scanned,
            }
        }
        RMW => {
            let was = db.get(key)?.is_some();
            db.put(key, value)?;
            found(was)
        }
        DELETE => found(db.delete(key).map(|_| true)?),
        c => bail!("unknown op code {c}"),
    })
}

struct Sampler {
    every: u64,
    next_at: u64,
    samples: Vec<Sample>,
    start: Instant,
    warned: bool,
    /// Measure live bytes with a tree scan in each sample.
    scan: bool,
}

impl Sampler {
    /// One sample. Live bytes are measured first (a tree scan, while clients keep going),
    /// then the counters, which are cheap and consistent with each other.
    fn take(&mut self, db: &DB, shared: &Shared) -> Result<()> {
        let live = if self.scan { self.live_bytes(db) } else { None };
        self.push(db, shared, live);
        Ok(())
    }

    fn push(&mut self, db: &DB, shared: &Shared, live: Option<u64>) {
        let ops_done = shared.ops_done.load(Relaxed);
        let user = shared.user_bytes.load(Relaxed);
        let stats = db.stats();
        let engine = stats.io.total_written();
        self.samples.push(Sample {
            seconds: self.start.elapsed().as_secs_f64(),
            ops_done,
            user_bytes_written: user,
            engine_bytes_written: engine,
            write_amplification: report::ratio(engine, user),
            disk_bytes: stats.disk_bytes,
            live_user_bytes: live,
            space_amplification: live
                .filter(|l| *l > 0)
                .map(|l| stats.disk_bytes as f64 / l as f64),
        });
        self.next_at = (ops_done / self.every + 1) * self.every;
    }

    /// The final sample, when the engine is idle.
    fn take_final(&mut self, db: &DB, shared: &Shared) -> Option<u64> {
        let live = match db.measure_live_bytes() {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("warning: measure_live_bytes failed after the run: {e}");
                None
            }
        };
        self.push(db, shared, live);
        live
    }

    /// Live bytes during the run; a scan that races with background work and fails is
    /// retried, then the sample goes without (with a warning: it is an engine bug).
    fn live_bytes(&mut self, db: &DB) -> Option<u64> {
        let mut last_err = None;
        for _ in 0..3 {
            match db.measure_live_bytes() {
                Ok(v) => return Some(v),
                Err(e) => last_err = Some(e),
            }
        }
        if !self.warned {
            self.warned = true;
            if let Some(e) = last_err {
                eprintln!(
                    "warning: measure_live_bytes failed during the run ({e}); \
                     such samples have no space amplification"
                );
            }
        }
        None
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

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
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

    let mut t = table::Table::new(["latency", "count", "mean", "p50", "p99", "p99.9", "max"]);
    let mut lat_row = |name: &str, s: &report::LatencySummary| {
        t.row([
            name.to_string(),
            table::count(s.count),
            table::micros(s.mean),
            table::micros(s.p50),
            table::micros(s.p99),
            table::micros(s.p999),
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
