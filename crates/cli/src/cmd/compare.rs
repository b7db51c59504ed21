//! `halflife compare`: one workload, several engines and policies, side by side.
//!
//! The workload is generated once into an op file. Then each engine runs alone, as its own
//! child process ([`harness::peers`]), in a memory-limited cgroup, and is measured
//! from outside (device sectors written between two `sync`s) and from inside (the
//! process's /proc/self/io and the engine's own counters, from its report). Live user bytes
//! are derived from the op file (the keys that exist at its end: loaded plus inserted, less
//! those deleted and not written since, times key + value size), the same denominator for
//! every engine's space amplification.

use anyhow::{bail, Context, Result};
use harness::device::BlockDevice;
use harness::isolate::{self, IsolateOptions, Outside};
use harness::opfile;
use harness::outpath;
use harness::peers::{self, EngineSettings, PeerContext, RunPaths};
use harness::plots::{self, BarPanel};
use harness::report::{ratio, RunReport};
use harness::table::{self, Table};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::path::{Path, PathBuf};
use workload::WorkloadSpec;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Engines to run, in this order, comma-separated. Known: halflife-inline,
    /// halflife-blobdb, halflife-titan, halflife-terark, halflife-lifetime,
    /// halflife-lifetime-nomodel, halflife-oracle, halflife-rate-oracle, halflife-dumpkv,
    /// halflife-dumpkv-oracle, rocksdb-native, rocksdb-native-blob (C++ on Debian's
    /// librocksdb), rocksdb, rocksdb-blob (Python, rocksdict), badger, fjall;
    /// halflife-lifetime@T (also -nomodel@T, oracle@T, rate-oracle@T) runs that policy at
    /// space-amplification target T (a curve on the write/space plane); a last
    /// +no-readahead makes a halflife engine's scans read each value when they reach it,
    /// and a last +gc<N> runs it with N value-file GC threads.
    #[arg(short, long, default_value = peers::DEFAULT_ENGINES)]
    pub engines: String,
    /// Ratios are to this engine [default: the first one].
    #[arg(long)]
    pub baseline: Option<String>,
    /// small: about 200 MB live and 400 MB of updates, a few minutes for all engines.
    /// write-intensive: paper 000 section 5.2 scaled to this machine (1M records of 256 B +
    /// 4 KiB, 4.3 GB live; 4M Zipfian 0.9 updates, 17 GB written). lifetime: the same at
    /// 1/10 of that (100k records, 400k updates), for paper 000's sweep over --theta.
    /// scan: the scan workload, 100k records of 24 B + 4 KiB (410 MB live), 5,000 ops
    /// (about 4,750 scans of 10-100 records, 250 inserts).
    #[arg(long, default_value = "small")]
    pub preset: String,
    /// Workload. write-intensive (alias zipfian): scrambled-Zipfian updates (--theta).
    /// shifting: the same, with the hot set moved to other keys every quarter of the run.
    /// mixed: keys in classes with their own write periods (hot, warm, cool, cold),
    /// 10% of ops deletes (a deleted key comes back at its next write). expiring: the
    /// write-intensive updates, 70% of them with a TTL log-uniform from 1/1000 to 1/2 of
    /// the run (time counted in ops); a halflife engine is told the expiries (+sweep: the
    /// client deletes expired keys instead), native RocksDB drops them in a compaction
    /// filter, the other peers cannot run it. scan: YCSB E with
    /// 4 KiB values (95% scans of 10-100 records from a scrambled-Zipfian start key, 5%
    /// inserts); the table adds scans/s and records/s. Or a YCSB core workload a-f. All
    /// take the preset's record and op counts [default: the preset's workload,
    /// write-intensive but for --preset scan].
    #[arg(short, long)]
    pub workload: Option<String>,
    /// Records loaded [default: the preset's].
    #[arg(long)]
    pub records: Option<u64>,
    /// Run-phase operations [default: the preset's].
    #[arg(long)]
    pub op_count: Option<u64>,
    /// Key size in bytes [default: the workload's].
    #[arg(long)]
    pub key_size: Option<u32>,
    /// Value size in bytes, e.g. 1024, 4096, 16384 [default: the workload's, 4096 for the
    /// write-intensive, shifting and mixed workloads].
    #[arg(long)]
    pub value_size: Option<u32>,
    /// Zipfian constant of the write-intensive workload.
    #[arg(long, default_value_t = 0.9)]
    pub theta: f64,
    /// Request distribution override (uniform, zipfian[:theta], scrambled[:theta], latest[:theta]).
    #[arg(long)]
    pub distribution: Option<String>,
    /// Replay this op file instead of generating one.
    #[arg(long, value_name = "FILE")]
    pub ops: Option<PathBuf>,

    /// Memtable (write buffer) size in MiB, for every engine.
    #[arg(long, default_value_t = 64)]
    pub memtable_mb: u64,
    /// Block cache in MiB [default: 32 small, 256 write-intensive].
    #[arg(long = "cache-mib", alias = "cache-mb")]
    pub cache_mib: Option<u64>,
    /// Values at least this large are separated (BlobDB min_blob_size, Badger value threshold).
    #[arg(long, default_value_t = 512)]
    pub min_blob_size: u64,
    /// Value (blob) file size in MiB.
    #[arg(long, default_value_t = 64)]
    pub blob_file_mb: u64,
    /// BlobDB GC age cutoff (ours and RocksDB's).
    #[arg(long, default_value_t = 0.8)]
    pub age_cutoff: f64,
    /// BlobDB GC force threshold (ours and RocksDB's).
    #[arg(long, default_value_t = 0.2)]
    pub force_threshold: f64,
    /// Titan GC garbage ratio, and Badger's RunValueLogGC discard ratio.
    #[arg(long, default_value_t = 0.2)]
    pub garbage_ratio: f64,
    /// Sync the WAL on every write.
    #[arg(long)]
    pub sync: bool,
    /// Memory limit of each engine's cgroup in MiB, page cache included; 0 for none
    /// [default: 512 small, 1024 write-intensive].
    #[arg(long)]
    pub memory_limit_mb: Option<u64>,

    /// Where the op file and the engines' data go (on the device to measure) [default: a
    /// temporary directory].
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Keep each engine's data directory after its run.
    #[arg(long)]
    pub keep: bool,
    /// JSON report [default: bench-out/compare-<preset>.json].
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// PNG bar plots [default: the report path with .png].
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// The peers/ directory of the source tree [default: ./peers, else the one this binary
    /// was built from].
    #[arg(long)]
    pub peers_dir: Option<PathBuf>,
    /// Run nothing: draw the write/space plane of this earlier compare report (JSON) next
    /// to it.
    #[arg(long, value_name = "REPORT")]
    pub replot: Option<PathBuf>,
}

struct Preset {
    /// The workload run when `--workload` is not given.
    workload: &'static str,
    records: u64,
    op_count: u64,
    cache_mb: u64,
    memory_limit_mb: u64,
}

fn preset(name: &str) -> Result<Preset> {
    Ok(match name {
        "small" => Preset {
            workload: "write-intensive",
            records: 50_000,
            op_count: 100_000,
            cache_mb: 32,
            memory_limit_mb: 512,
        },
        "write-intensive" => Preset {
            workload: "write-intensive",
            records: 1_000_000,
            op_count: 4_000_000,
            cache_mb: 256,
            memory_limit_mb: 1024,
        },
        // Paper 000 sec. 5.2 at 1/500 of its 200 GB load: 100k records of 256 B + 4 KiB
        // (430 MB live), 400k updates; run once per --theta (0.2, 0.5, 0.9, 0.99).
        "lifetime" => Preset {
            workload: "write-intensive",
            records: 100_000,
            op_count: 400_000,
            cache_mb: 32,
            memory_limit_mb: 512,
        },
        // Range scans: 410 MB of 4 KiB values, more than the cgroup leaves the page cache
        // next to each engine's memtables and cache, so part of every scan's values come
        // from the device.
        "scan" => Preset {
            workload: "scan",
            records: 100_000,
            op_count: 5_000,
            cache_mb: 32,
            memory_limit_mb: 512,
        },
        other => bail!("unknown preset {other:?}: use small, write-intensive, lifetime or scan"),
    })
}

/// One engine's results in the compare report.
#[derive(Clone, Serialize, serde::Deserialize)]
struct EngineResult {
    name: String,
    about: String,
    report: RunReport,
    outside: Outside,
    /// Why the engine's run produced no report (killed, out of memory, a driver error);
    /// its metrics are then absent and the other engines' results stand.
    failed: Option<String>,
}

#[derive(Serialize)]
struct CompareReport {
    schema: &'static str,
    command: String,
    preset: String,
    workload: Option<WorkloadSpec>,
    ops_file: PathBuf,
    record_count: u64,
    op_count: u64,
    key_size: u32,
    value_size: u32,
    /// Loaded plus inserted keys, times key + value size: the space-amplification denominator.
    live_user_bytes: u64,
    settings: EngineSettings,
    memory_limit: Option<u64>,
    device: Option<String>,
    baseline: String,
    engines: Vec<EngineResult>,
}

/// What `--replot` reads back from a compare report.
#[derive(serde::Deserialize)]
struct SavedReport {
    live_user_bytes: u64,
    engines: Vec<EngineResult>,
}

pub fn run(a: Args) -> Result<()> {
    if let Some(path) = &a.replot {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let saved: SavedReport = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a compare report", path.display()))?;
        let out = plane_path(&path.with_extension("png"));
        draw_plane(
            &out,
            &path.display().to_string(),
            &saved.engines,
            saved.live_user_bytes,
        )?;
        println!("plot:   {}", out.display());
        return Ok(());
    }
    let p = preset(&a.preset)?;
    let engines = peers::select(&a.engines)?;
    let baseline = a
        .baseline
        .clone()
        .unwrap_or_else(|| engines[0].name().to_string());
    if !engines.iter().any(|e| e.name() == baseline) {
        bail!("--baseline {baseline} is not among --engines");
    }
    let mut settings = EngineSettings {
        memtable_mb: a.memtable_mb,
        cache_mb: a.cache_mib.unwrap_or(p.cache_mb),
        sync: a.sync,
        min_blob_size: a.min_blob_size,
        blob_file_mb: a.blob_file_mb,
        age_cutoff: a.age_cutoff,
        force_threshold: a.force_threshold,
        garbage_ratio: a.garbage_ratio,
        expiry: false,
    };
    let memory_limit = match a.memory_limit_mb.unwrap_or(p.memory_limit_mb) {
        0 => None,
        mb => Some(mb << 20),
    };
    let report_path = a
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("bench-out/compare-{}.json", a.preset)));
    let plot_path = a
        .plot
        .clone()
        .unwrap_or_else(|| report_path.with_extension("png"));
    outpath::ensure_parent(&report_path)?;
    outpath::ensure_parent(&plot_path)?;

    let (_tmp, work) = match &a.work_dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .with_context(|| format!("creating --work-dir {}", d.display()))?;
            (None, d.canonicalize()?)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("halflife-compare-")
                .tempdir()?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };

    // Prepare every driver before anything is measured.
    let ctx = PeerContext::new(a.peers_dir.clone())?;
    for e in &engines {
        e.prepare(&ctx)
            .with_context(|| format!("preparing {}", e.name()))?;
    }

    // The op file, once.
    let (ops_path, spec, summary) = match &a.ops {
        Some(path) => (path.clone(), None, opfile::summarize(path)?),
        None => {
            let spec = build_spec(&a, &p)?;
            let path = work.join("workload.ops");
            tracing::info!(
                "generating {} ops ({}, {}) into {}",
                table::count(spec.operation_count),
                spec.name,
                spec.request_distribution,
                path.display()
            );
            let summary = opfile::write(&spec, &path)?;
            (path, Some(spec), summary)
        }
    };
    let header = summary.header;
    let live_user_bytes = summary.live_user_bytes();
    settings.expiry = summary.expiring_updates > 0;

    let device = match BlockDevice::of_path(&work) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::warn!(
                "no block device found for {} ({e:#}): device bytes written are not measured",
                work.display()
            );
            None
        }
    };
    if device.is_some() {
        tracing::info!(
            "device bytes are all writes to {} during each run; other processes writing to it add to them",
            device.as_ref().map(|d| d.name.as_str()).unwrap_or("")
        );
    }

    let mut results = Vec::new();
    for e in &engines {
        let dir = work.join(e.name());
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        let report = work.join(format!("{}.json", e.name()));
        let log = work.join(format!("{}.log", e.name()));
        let cmd = e.command(
            &ctx,
            &RunPaths {
                ops: &ops_path,
                dir: &dir,
                report: &report,
            },
            &settings,
        )?;
        let bar = ProgressBar::with_draw_target(
            Some(header.record_count + header.op_count),
            ProgressDrawTarget::stderr_with_hz(5),
        );
        bar.set_style(
            ProgressStyle::with_template("{prefix:>16} [{elapsed_precise}] {wide_bar:.cyan/blue} {human_pos}/{human_len} ops eta {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(e.name().to_string());
        let opts = IsolateOptions {
            name: e.name(),
            device: device.as_ref(),
            memory_limit,
            log: &log,
            data_dir: Some(&dir),
        };
        let (r, outside) = match isolate::run(cmd, &report, &opts, &bar) {
            Ok(done) => done,
            Err(err) => {
                // One engine's failure (an OOM kill under the memory limit, a crash) must
                // not lose the others' results: record it and go on.
                bar.finish_and_clear();
                let why = format!("{err:#} (log: {})", log.display());
                eprintln!("{:>16}: FAILED: {why}", e.name());
                if !a.keep {
                    std::fs::remove_dir_all(&dir).ok();
                }
                results.push(EngineResult {
                    name: e.name().to_string(),
                    about: e.about().to_string(),
                    report: RunReport::default(),
                    outside: Outside::default(),
                    failed: Some(why),
                });
                continue;
            }
        };
        bar.finish_and_clear();
        eprintln!(
            "{:>16}: {:.1} s, run {}, device WA {}",
            e.name(),
            outside.wall_seconds,
            table::rate(r.phases.get("run").map(|p| p.ops_per_sec).unwrap_or(0.0)),
            outside
                .device_bytes_written
                .map(|d| table::times(ratio(d, r.user_bytes_written)))
                .unwrap_or_else(|| "-".into())
        );
        if !a.keep {
            std::fs::remove_dir_all(&dir).ok();
        }
        results.push(EngineResult {
            name: e.name().to_string(),
            about: e.about().to_string(),
            report: r,
            outside,
            failed: None,
        });
    }

    let rows = metric_rows(&results, live_user_bytes);
    let base = results.iter().position(|r| r.name == baseline).unwrap_or(0);
    println!();
    println!(
        "{} records of {} B keys + {} B values, {} ops; live data {}; memtable {} MiB, cache {} MiB, memory limit {}",
        table::count(header.record_count),
        header.key_size,
        header.value_size,
        table::count(header.op_count),
        table::bytes(live_user_bytes),
        settings.memtable_mb,
        settings.cache_mb,
        memory_limit.map(table::bytes).unwrap_or_else(|| "none".into())
    );
    let names: Vec<String> = results.iter().map(|r| r.name.clone()).collect();
    let failed: Vec<Option<&str>> = results.iter().map(|r| r.failed.as_deref()).collect();
    print!("{}", render_comparison(&names, &failed, &rows, base));
    for (name, why) in names.iter().zip(&failed) {
        if let Some(why) = why {
            println!("{name} failed: {why}");
        }
    }
    println!("(ratios are to {baseline}; WA = bytes written / user bytes written; space amp. = bytes on disk / live user bytes)");
    if let Some(legend) = wal_legend(&names) {
        println!("{legend}");
    }

    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let compare = CompareReport {
        schema: "halflife-compare/1",
        command,
        preset: a.preset.clone(),
        workload: spec.clone(),
        ops_file: ops_path.clone(),
        record_count: header.record_count,
        op_count: header.op_count,
        key_size: header.key_size,
        value_size: header.value_size,
        live_user_bytes,
        settings,
        memory_limit,
        device: device.map(|d| d.name),
        baseline,
        engines: results,
    };
    std::fs::write(&report_path, serde_json::to_string_pretty(&compare)?)
        .with_context(|| format!("writing {}", report_path.display()))?;
    let title = format!(
        "{}: {} records x ({} + {} B), {} ops",
        spec.as_ref()
            .map(|s| format!("{} ({})", s.name, s.request_distribution))
            .unwrap_or_else(|| "op file".into()),
        table::count(header.record_count),
        header.key_size,
        header.value_size,
        table::count(header.op_count)
    );
    draw(&plot_path, &title, &names, &rows)?;
    println!("report: {}", report_path.display());
    println!("plot:   {}", plot_path.display());
    let plane = plane_path(&plot_path);
    if draw_plane(&plane, &title, &compare.engines, live_user_bytes)? {
        println!("plot:   {}", plane.display());
    }
    for e in &compare.engines {
        if let Some(points) = lifetime_points(&e.report.engine_stats) {
            let stem = plot_path.with_extension("");
            let p = PathBuf::from(format!("{}-{}-lifetime.png", stem.display(), e.name));
            plots::lifetime_over_run(&p, &format!("{} - {title}", e.name), &points)?;
            println!("plot:   {}", p.display());
        }
    }
    Ok(())
}

/// The GC history of a lifetime policy from an engine's report, if it has one.
fn lifetime_points(stats: &serde_json::Value) -> Option<Vec<plots::LifetimePoint>> {
    let h = stats.get("lifetime")?.get("gc_history")?.as_array()?;
    let f = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_f64());
    let points: Vec<_> = h
        .iter()
        .filter_map(|j| {
            let inv = j.get("invalid_ratio_by_class")?.as_array()?;
            Some(plots::LifetimePoint {
                seq: f(j, "seq")?,
                l_s: f(j, "l_s")?,
                l_l: f(j, "l_l")?,
                l_d: f(j, "l_d")?,
                invalid: [0, 1, 2].map(|i| inv.get(i).and_then(|x| x.as_f64())),
            })
        })
        .collect();
    (!points.is_empty()).then_some(points)
}

fn build_spec(a: &Args, p: &Preset) -> Result<WorkloadSpec> {
    harness::plan::build_spec(&harness::plan::SpecChoice {
        workload: a.workload.as_deref().unwrap_or(p.workload),
        records: Some(a.records.unwrap_or(p.records)),
        op_count: Some(a.op_count.unwrap_or(p.op_count)),
        key_size: a.key_size,
        value_size: a.value_size,
        distribution: a.distribution.as_deref(),
        theta: a.theta,
        seed: None,
    })
}

/// One line of the comparison: a value per engine, how to show it, and whether a ratio to
/// the baseline means something.
struct Row {
    name: String,
    values: Vec<Option<f64>>,
    fmt: fn(f64) -> String,
    ratio: bool,
}

fn fmt_bytes(v: f64) -> String {
    table::bytes(v as u64)
}
fn fmt_rate(v: f64) -> String {
    table::rate(v)
}
fn fmt_times(v: f64) -> String {
    table::times(v)
}
fn fmt_us(v: f64) -> String {
    table::micros(v)
}
fn fmt_secs(v: f64) -> String {
    format!("{v:.1} s")
}

fn metric_rows(results: &[EngineResult], live: u64) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut push = |name: &str,
                    fmt: fn(f64) -> String,
                    ratio: bool,
                    f: &dyn Fn(&EngineResult) -> Option<f64>| {
        rows.push(Row {
            name: name.to_string(),
            values: results
                .iter()
                .map(|r| if r.failed.is_some() { None } else { f(r) })
                .collect(),
            fmt,
            ratio,
        });
    };
    let phase = |r: &EngineResult, p: &str| r.report.phases.get(p).map(|p| p.ops_per_sec);
    push("load throughput", fmt_rate, true, &|r| phase(r, "load"));
    push("run throughput", fmt_rate, true, &|r| phase(r, "run"));
    // The run's operations over the run and the settle after it: background work an engine
    // put off past the last write (titan's GC lags its garbage by minutes at full scale)
    // is paid for here, where run throughput alone does not see it.
    push("run+settle throughput", fmt_rate, true, &|r| {
        let run = r.report.phases.get("run")?;
        let secs = run.seconds + phase_secs(r, "settle").unwrap_or(0.0);
        (secs > 0.0).then(|| run.ops as f64 / secs)
    });
    let mut op_types: Vec<String> = Vec::new();
    for r in results {
        for k in r.report.latency_us.keys() {
            if !op_types.contains(k) {
                op_types.push(k.clone());
            }
        }
    }
    if results.iter().any(|r| r.report.scans_per_sec().is_some()) {
        push("scans/s", fmt_rate, true, &|r| r.report.scans_per_sec());
        push("records scanned/s", fmt_rate, true, &|r| {
            r.report.records_scanned_per_sec()
        });
    }
    for op in &op_types {
        let lat = |r: &EngineResult| r.report.latency_us.get(op.as_str()).copied();
        push(&format!("{op} p50"), fmt_us, true, &|r| {
            lat(r).map(|l| l.p50)
        });
        push(&format!("{op} p99"), fmt_us, true, &|r| {
            lat(r).map(|l| l.p99)
        });
        push(&format!("{op} p99.9"), fmt_us, true, &|r| {
            lat(r).map(|l| l.p999)
        });
        push(&format!("{op} p99.99"), fmt_us, true, &|r| {
            lat(r).map(|l| l.p9999).filter(|&v| v > 0.0)
        });
    }
    let user = |r: &EngineResult| r.report.user_bytes_written;
    push("user bytes written", fmt_bytes, false, &|r| {
        Some(user(r) as f64)
    });
    push("WA device (headline)", fmt_times, true, &|r| {
        r.outside.device_bytes_written.map(|d| ratio(d, user(r)))
    });
    push("  device bytes written", fmt_bytes, true, &|r| {
        r.outside.device_bytes_written.map(|d| d as f64)
    });
    push("WA process write_bytes", fmt_times, true, &|r| {
        Some(ratio(r.report.proc_io.net_write_bytes(), user(r)))
    });
    push("WA process wchar", fmt_times, true, &|r| {
        Some(ratio(r.report.proc_io.wchar, user(r)))
    });
    push("WA engine counters", fmt_times, true, &|r| {
        Some(r.report.write_amplification())
    });
    let mut causes: Vec<String> = Vec::new();
    for r in results {
        for k in r.report.engine_bytes_by_cause.keys() {
            if !causes.contains(k) {
                causes.push(k.clone());
            }
        }
    }
    for c in &causes {
        push(&format!("  {c}"), fmt_bytes, false, &|r| {
            r.report
                .engine_bytes_by_cause
                .get(c.as_str())
                .map(|b| *b as f64)
        });
    }
    push("space amp. (disk/live)", fmt_times, true, &|r| {
        Some(ratio(r.report.disk_bytes, live))
    });
    push("space amp. over run, mean", fmt_times, true, &|r| {
        run_space_amp(r, live).map(|(mean, _)| mean)
    });
    push("space amp. over run, max", fmt_times, true, &|r| {
        run_space_amp(r, live).map(|(_, max)| max)
    });
    push("  bytes on disk", fmt_bytes, true, &|r| {
        Some(r.report.disk_bytes as f64)
    });
    push("  tree (SST) bytes", fmt_bytes, true, &|r| {
        r.report.tree_bytes.map(|b| b as f64)
    });
    push("  value file bytes", fmt_bytes, false, &|r| {
        r.report.value_file_bytes.map(|b| b as f64)
    });
    push("write stall time", fmt_secs, false, &|r| {
        Some(r.report.stall_micros as f64 / 1e6)
    });
    push("GC back-pressure wait", fmt_secs, false, &|r| {
        Some(r.report.gc_delay_micros as f64 / 1e6)
    });
    push("GC CPU per GiB moved", fmt_secs, false, &|r| {
        let s = &r.report.engine_stats;
        let moved = s.get("gc_relocated_bytes")?.as_u64().filter(|&b| b > 0)?;
        let cpu = s.get("gc_cpu_micros")?.as_u64()?;
        Some(cpu as f64 / 1e6 / (moved as f64 / (1u64 << 30) as f64))
    });
    push("settle time", fmt_secs, false, &|r| phase_secs(r, "settle"));
    push("max RSS (process)", fmt_bytes, false, &|r| {
        r.report.max_rss_bytes.map(|b| b as f64)
    });
    push("memory peak (cgroup)", fmt_bytes, false, &|r| {
        r.outside.memory_peak.map(|b| b as f64)
    });
    push("wall time", fmt_secs, true, &|r| {
        Some(r.outside.wall_seconds)
    });
    rows
}

/// Disk bytes over the run phase (the samples taken after the load), relative to `live`:
/// (mean, max). `live` is the data at the end, so this holds for workloads whose live
/// data does not change after the load (updates only, as the write-intensive and shifting
/// ones), and nearly for the mixed one (about 4% of its keys are deleted at any time); the
/// final disk bytes alone depend on where each engine's GC and WAL happen to stand when
/// the run ends.
fn run_space_amp(r: &EngineResult, live: u64) -> Option<(f64, f64)> {
    let load = r.report.workload.record_count;
    let sa: Vec<f64> = r
        .report
        .samples
        .iter()
        .filter(|s| s.ops_done > load)
        .map(|s| ratio(s.disk_bytes, live))
        .collect();
    if sa.len() < 2 || live == 0 {
        return None;
    }
    let mean = sa.iter().sum::<f64>() / sa.len() as f64;
    Some((mean, sa.iter().copied().fold(0.0, f64::max)))
}

/// The write/space plane: every engine with samples over the run, at its mean space
/// amplification and its total write amplification (engine counters, WAL included).
fn plane_points(results: &[EngineResult], live: u64) -> Vec<plots::PlanePoint> {
    results
        .iter()
        .filter_map(|r| {
            Some(plots::PlanePoint {
                name: r.name.clone(),
                space: run_space_amp(r, live)?.0,
                write: r.report.write_amplification(),
                // The target the engine ran at (older reports: the name's, else the
                // default of the time).
                target: r.report.settings["space_amp_target"].as_f64(),
            })
        })
        .collect()
}

fn plane_path(plot: &Path) -> PathBuf {
    PathBuf::from(format!("{}-plane.png", plot.with_extension("").display()))
}

/// Draws the write/space plane if some engine has samples over the run.
fn draw_plane(path: &Path, title: &str, results: &[EngineResult], live: u64) -> Result<bool> {
    let plane = plane_points(results, live);
    if plane.is_empty() {
        return Ok(false);
    }
    plots::write_space_plane(path, &format!("write/space plane - {title}"), &plane)?;
    Ok(true)
}

fn phase_secs(r: &EngineResult, p: &str) -> Option<f64> {
    r.report.phases.get(p).map(|p| p.seconds)
}

/// The side-by-side table: one column per engine, `value (ratio to baseline)`.
/// The comparison table; with a `status` row first when an engine failed (`failed[i]`).
fn render_comparison(
    names: &[String],
    failed: &[Option<&str>],
    rows: &[Row],
    base: usize,
) -> String {
    let mut header = vec!["".to_string()];
    header.extend(names.iter().cloned());
    let mut t = Table::new(header);
    if failed.iter().any(Option::is_some) {
        let mut cells = vec!["status".to_string()];
        cells.extend(
            failed
                .iter()
                .map(|f| if f.is_some() { "FAILED" } else { "ok" }.to_string()),
        );
        t.row(cells);
    }
    for row in rows {
        let mut cells = vec![row.name.clone()];
        for (i, v) in row.values.iter().enumerate() {
            let cell = match v {
                None => "-".to_string(),
                Some(v) => {
                    let shown = (row.fmt)(*v);
                    match row.values.get(base).copied().flatten() {
                        Some(b) if row.ratio && i != base && b > 0.0 => {
                            format!("{shown} ({:.2}x)", v / b)
                        }
                        _ => shown,
                    }
                }
            };
            cells.push(cell);
        }
        t.row(cells);
    }
    t.render()
}

/// Which WAL each halflife column wrote, in words: `+vwal` is the value log as the WAL
/// (each large value written once, the WAL logging a pointer), the others a separate WAL
/// as RocksDB's BlobDB, Badger's memtable log and fjall have. Two columns that differ only
/// in this are two designs, not two settings of one: the table says which is which.
fn wal_legend(names: &[String]) -> Option<String> {
    let ours: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("halflife-") && !n.starts_with("halflife-inline"))
        .collect();
    if ours.is_empty() {
        return None;
    }
    let (vwal, separate): (Vec<&String>, Vec<&String>) =
        ours.into_iter().partition(|n| n.contains("+vwal"));
    let list = |v: &[&String]| v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ");
    let mut parts = Vec::new();
    if !vwal.is_empty() {
        parts.push(format!(
            "value log as the WAL (+vwal: each large value written once): {}",
            list(&vwal)
        ));
    }
    if !separate.is_empty() {
        parts.push(format!(
            "a separate WAL (every value written twice, as in RocksDB's BlobDB): {}",
            list(&separate)
        ));
    }
    Some(format!("(halflife WAL: {})", parts.join("; ")))
}

fn draw(path: &Path, title: &str, names: &[String], rows: &[Row]) -> Result<()> {
    let pick = |name: &str, title: &str| -> Option<BarPanel> {
        let row = rows.iter().find(|r| r.name == name)?;
        Some(BarPanel {
            title: title.to_string(),
            values: row.values.clone(),
            labels: row
                .values
                .iter()
                .map(|v| v.map(|v| (row.fmt)(v)).unwrap_or_default())
                .collect(),
        })
    };
    let panels: Vec<BarPanel> = [
        (
            "WA device (headline)",
            "write amplification (device bytes / user bytes)",
        ),
        (
            "WA engine counters",
            "write amplification (engine's own counters)",
        ),
        ("run throughput", "run-phase throughput (ops/s)"),
        (
            "space amp. (disk/live)",
            "space amplification (bytes on disk / live bytes)",
        ),
    ]
    .iter()
    .filter_map(|(n, t)| pick(n, t))
    .collect();
    plots::bars(path, title, names, &panels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::report::Phase;

    #[test]
    fn the_legend_names_each_halflife_columns_wal() {
        let names: Vec<String> = [
            "halflife-titan+vwal",
            "fjall",
            "halflife-blobdb",
            "halflife-inline",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let l = wal_legend(&names).unwrap();
        assert!(
            l.contains(
                "value log as the WAL (+vwal: each large value written once): halflife-titan+vwal;"
            ),
            "{l}"
        );
        assert!(l.ends_with("BlobDB): halflife-blobdb)"), "{l}");
        assert!(
            wal_legend(&["rocksdb-native".to_string(), "halflife-inline".to_string()]).is_none()
        );
    }

    #[test]
    fn comparison_shows_ratios_to_the_baseline_only_where_meaningful() {
        let names = vec!["a".to_string(), "b".to_string()];
        let rows = vec![
            Row {
                name: "run throughput".into(),
                values: vec![Some(1000.0), Some(500.0)],
                fmt: fmt_rate,
                ratio: true,
            },
            Row {
                name: "  wal".into(),
                values: vec![Some(2048.0), None],
                fmt: fmt_bytes,
                ratio: false,
            },
        ];
        let s = render_comparison(&names, &[None, None], &rows, 0);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[2].starts_with("run throughput"), "{s}");
        assert!(lines[2].ends_with("1.0K/s  500/s (0.50x)"), "{s}");
        assert!(lines[3].ends_with("2.00 KiB              -"), "{s}");
        // Baseline in the second column.
        let s = render_comparison(&names, &[None, None], &rows, 1);
        assert!(s.lines().nth(2).unwrap().contains("1.0K/s (2.00x)"), "{s}");
    }

    #[test]
    fn run_and_settle_throughput_charges_deferred_work() {
        let with = |run_secs: f64, settle_secs: f64| {
            let mut report = RunReport::default();
            report
                .phases
                .insert("run".into(), Phase::new(1000, run_secs));
            report
                .phases
                .insert("settle".into(), Phase::new(0, settle_secs));
            EngineResult {
                name: "a".into(),
                about: String::new(),
                report,
                outside: Outside::default(),
                failed: None,
            }
        };
        // The same run throughput; the second engine left as much work again for after it.
        let results = [with(10.0, 0.0), with(10.0, 10.0)];
        let rows = metric_rows(&results, 1000);
        let row = |name: &str| rows.iter().find(|r| r.name == name).unwrap().values.clone();
        assert_eq!(row("run throughput"), vec![Some(100.0), Some(100.0)]);
        assert_eq!(row("run+settle throughput"), vec![Some(100.0), Some(50.0)]);
    }

    #[test]
    fn a_failed_engine_is_marked_and_the_others_kept() {
        let ok = EngineResult {
            name: "a".into(),
            about: String::new(),
            report: RunReport {
                user_bytes_written: 100,
                ..RunReport::default()
            },
            outside: Outside::default(),
            failed: None,
        };
        let dead = EngineResult {
            name: "b".into(),
            failed: Some("killed by SIGKILL".into()),
            ..ok.clone()
        };
        let results = [ok, dead];
        let rows = metric_rows(&results, 1000);
        assert!(
            rows.iter().all(|r| r.values[1].is_none()),
            "a failed engine has no values"
        );
        let user = rows
            .iter()
            .find(|r| r.name == "user bytes written")
            .unwrap();
        assert_eq!(user.values, vec![Some(100.0), None]);
        let names = vec!["a".to_string(), "b".to_string()];
        let s = render_comparison(&names, &[None, Some("killed")], &rows, 0);
        let status = s.lines().nth(2).unwrap();
        assert!(status.starts_with("status"), "{s}");
        assert!(status.ends_with("ok  FAILED"), "{s}");
    }

    #[test]
    fn presets_exist() {
        assert!(preset("small").is_ok());
        assert_eq!(preset("scan").unwrap().workload, "scan");
        assert_eq!(preset("write-intensive").unwrap().records, 1_000_000);
        assert!(preset("huge").is_err());
    }
}
