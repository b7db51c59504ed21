//! `halflife vigil`: paper 001's evaluation (sec. 7), scaled. Each workload of Table 2 is
//! loaded once on the emulated device, then run under each configuration of sec. 7.1 (Base,
//! SILK, PLM, I-PLM, R-Vigil, O-Vigil) from a copy of the same loaded state.
//!
//! Clients arrive open-loop at a fixed rate on the device's virtual clock; an op's latency
//! is its measured thread CPU time in the engine (less the emulator's own bookkeeping) plus
//! the device time of its requests. Background flushes and compactions run on the engine's
//! threads and issue their I/O at the volume's clock, so they interfere with reads exactly
//! as much as the device model and the volume's scheduling let them.

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use device::{Device, DeviceConfig, Geometry, PlmConfig};
use engine::{CacheOptions, Options, TreeOptions, ValueLogOptions, WalOptions, DB};
use harness::outpath;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use serde::Serialize;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vigil::context::thread_cpu_ns;
use vigil::{Mode, VigilVolume, VolumeConfig, VolumeStats};
use workload::{Distribution, Op, Proportions, Workload, WorkloadSpec};

#[derive(Parser, Debug)]
pub struct Args {
    /// Workloads: userdb, zippydb, and YCSB a, b, d, f, e (scans).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "userdb,zippydb,a,b,d,f,e"
    )]
    pub workloads: Vec<String>,
    /// Configurations (paper 001 sec. 7.1).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "base,silk,plm,i-plm,r-vigil,o-vigil"
    )]
    pub modes: Vec<String>,
    /// Keys loaded before each run.
    #[arg(long, default_value_t = 50_000)]
    pub records: u64,
    /// Operations per run (`--ops` is bench's op file; the old name is still accepted).
    #[arg(
        long = "op-count",
        alias = "ops",
        value_name = "OP_COUNT",
        default_value_t = 80_000
    )]
    pub ops: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 1000)]
    pub value_size: u32,
    /// Client arrival rate on the virtual clock (ops per virtual second).
    #[arg(long, default_value_t = 12_000)]
    pub qps: u64,
    /// Arrival rate of scan workloads: a scan reads up to 50 values one after another
    /// (about 4 ms of device time on average), so the point rate would saturate the device.
    #[arg(long, default_value_t = 200)]
    pub scan_qps: u64,
    /// minNDWIN and maxDTWIN of the device (paper: 4 s and 60 s; scaled with the run).
    #[arg(long, default_value_t = 50)]
    pub min_ndwin_ms: u64,
    /// maxDTWIN of the device (see --min-ndwin-ms).
    #[arg(long, default_value_t = 1500)]
    pub max_dtwin_ms: u64,
    /// Write-cache (plm_cache) memory limit.
    #[arg(long, default_value_t = 16)]
    pub cache_mib: u64,
    /// Where JSON and PNGs go (the figures in docs/vigil were copied from here).
    #[arg(long, default_value = "bench-out/vigil")]
    pub out: PathBuf,
    /// Scratch directory for the databases (a temporary directory by default).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Workload seed (same seed, same ops).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// Latency percentiles of one op type, in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
}

fn summarize(h: &Histogram<u64>) -> Summary {
    if h.is_empty() {
        return Summary::default();
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    Summary {
        count: h.len(),
        mean: h.mean() / 1000.0,
        p50: us(h.value_at_quantile(0.50)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        p9999: us(h.value_at_quantile(0.9999)),
        max: us(h.max()),
    }
}

#[derive(Debug, Serialize)]
pub struct RunReport {
    pub workload: String,
    pub mode: String,
    /// Get latency (reads, and the read of a read-modify-write).
    pub get: Summary,
    pub put: Summary,
    pub scan: Summary,
    /// Mean CPU part and device part of a Get, microseconds.
    pub get_cpu_mean_us: f64,
    pub get_device_mean_us: f64,
    pub reconstructed_fraction: f64,
    pub cache_peak: u64,
    pub cache_limit: u64,
    pub wall_seconds: f64,
    pub virtual_seconds: f64,
    /// Virtual time at which the measured ops began (after warm-up).
    pub measured_from_ns: u64,
    /// Engine write stalls during the run (real time).
    pub write_stall_seconds: f64,
    pub volume: VolumeStats,
    /// (virtual seconds, Get latency microseconds) of every Get, for the time series.
    #[serde(skip)]
    pub series: Vec<(f64, f64)>,
    #[serde(skip)]
    pub get_hist: Option<Histogram<u64>>,
}

fn spec_for(name: &str, args: &Args) -> Result<WorkloadSpec> {
    let custom = |read, update, dist| -> Result<WorkloadSpec> {
        Ok(WorkloadSpec::custom(
            Proportions {
                read,
                update,
                ..Proportions::default()
            },
            dist,
        )?)
    };
    let mut spec = match name {
        // Table 2: UserDB, 54 % Get / 46 % Put, a low cache hit ratio (irregular keys).
        "userdb" => custom(0.54, 0.46, Distribution::Scrambled { theta: 0.6 })?,
        // ZippyDB, 42 % Get / 58 % Put, read-latest (86 % cache hits in the paper).
        "zippydb" => custom(0.42, 0.58, Distribution::Latest { theta: 0.99 })?,
        w if w.len() == 1 => WorkloadSpec::ycsb(w.chars().next().unwrap_or('?'))?,
        other => bail!("unknown workload {other:?} (userdb, zippydb, a..f)"),
    };
    spec.name = name.to_string();
    spec.record_count = args.records;
    spec.operation_count = args.ops;
    spec.value_size = args.value_size;
    spec.seed = args.seed;
    spec.max_scan_length = spec.max_scan_length.min(50);
    spec.validate()?;
    Ok(spec)
}

fn device_config(args: &Args) -> DeviceConfig {
    DeviceConfig {
        // Paper 001's split (2 channels x 8 dies per set); 16 blocks of 64 pages of 16 KiB
        // per die (256 MiB per set) so the device collects garbage during a short run.
        geometry: Geometry {
            blocks_per_die: 16,
            over_provisioning: 0.25,
            ..Geometry::default()
        },
        gc_free_blocks: 3,
        plm: PlmConfig {
            min_ndwin: Duration::from_millis(args.min_ndwin_ms),
            max_dtwin: Duration::from_millis(args.max_dtwin_ms),
            ..PlmConfig::default()
        },
        fsync_backing: false,
        ..DeviceConfig::default()
    }
}

fn volume_config(mode: Mode, args: &Args) -> VolumeConfig {
    VolumeConfig {
        cache_limit: args.cache_mib << 20,
        extend_step: Duration::from_millis((args.min_ndwin_ms / 4).max(1)),
        ..VolumeConfig::new(mode)
    }
}

fn engine_options(vol: &Arc<VigilVolume>) -> Options {
    Options {
        storage: Some(vol.clone()),
        tree: TreeOptions {
            memtable_size: 4 << 20,
            target_file_size: 4 << 20,
            level1_max_bytes: 16 << 20,
            ..Default::default()
        },
        wal: WalOptions {
            // The striped volume rewrites a file's partial last stripe on every sync, so a
            // crash between the truncate and the rewrite loses synced bytes: only files synced
            // once (tables, value files of flush and GC) are striped, and the WAL stays on the
            // meta-set. The value log as the WAL would sync value files per write group.
            value_log_wal: false,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            blob_file_size: 16 << 20,
            ..Default::default()
        },
        cache: CacheOptions {
            block_cache_capacity: 8 << 20,
            ..Default::default()
        },
        ..Options::default()
    }
}

fn open(root: &Path, mode: Mode, args: &Args) -> Result<(Arc<VigilVolume>, DB)> {
    let dev = Device::new(device_config(args), root.join("device"))?;
    let vol = VigilVolume::new(dev, root.join("db"), volume_config(mode, args))?;
    let db = DB::open(root.join("db"), engine_options(&vol))?;
    Ok((vol, db))
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &dst)?;
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), &dst)
                .with_context(|| format!("copying {} to {}", e.path().display(), dst.display()))?;
        }
    }
    Ok(())
}

fn key_bytes(spec: &WorkloadSpec, k: u64, out: &mut Vec<u8>) {
    workload::format_key(k, spec.key_size as usize, out);
}

fn load(root: &Path, spec: &WorkloadSpec, args: &Args) -> Result<()> {
    let (vol, db) = open(root, Mode::Base, args)?;
    let vals = workload::ValueGen::new();
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let interval = 1_000_000_000 / args.qps.max(1);
    for (i, op) in Workload::new(spec.clone())?.load_ops().enumerate() {
        vol.begin_client_op(device::VirtualTime::from_nanos(
            (i as u64 * interval).max(vol.now().as_nanos()),
        ))?;
        key_bytes(spec, op.key(), &mut k);
        vals.fill(op.key(), 0, spec.value_size as usize, &mut v);
        db.put(&k, &v)?;
        vol.end_client_op();
    }
    db.wait_idle()?;
    db.close()?;
    Ok(())
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds")
}

fn run_one(
    root: &Path,
    spec: &WorkloadSpec,
    mode: Mode,
    args: &Args,
    pb: &ProgressBar,
) -> Result<RunReport> {
    let started = Instant::now();
    let (vol, db) = open(root, mode, args)?;
    let qps = if spec.proportions.scan > 0.0 {
        args.scan_qps
    } else {
        args.qps
    };
    let interval = 1_000_000_000 / qps.max(1);
    // Warm-up, not measured: the engine's open (WAL replay, its flush) settles, then the
    // clock runs through several NDWIN rotations so that devd is past its boot and the
    // write cache has drained what the open wrote.
    // Background jobs are paced from here on, so none of them runs ahead of the clock
    // into the measured phase.
    db.wait_idle()?;
    vol.set_pacing(true);
    let t0 = 20 * args.min_ndwin_ms * 1_000_000;
    for t in (0..=t0).step_by(1_000_000) {
        vol.advance(device::VirtualTime::from_nanos(t))?;
        std::thread::sleep(Duration::from_micros(100));
    }
    let vals = workload::ValueGen::new();
    let (mut get_h, mut put_h, mut scan_h) = (hist(), hist(), hist());
    let (mut get_cpu, mut get_dev) = (0u128, 0u128);
    let mut series = Vec::new();
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let mut t = t0;
    let mut prev = t0.saturating_sub(interval);
    // The first ops warm the block and table caches (a reopened store starts cold and
    // every configuration would show the same cold-start burst of reads); not measured.
    let warm = (args.ops / 8) as usize;
    let mut measured_from: Option<u64> = None;
    for (i, op) in Workload::new(spec.clone())?.run_ops().enumerate() {
        // Open loop; after the clock moved on while the client was stalled (background
        // jobs it waited for), arrivals resume one interval apart from the new time, not
        // all at once.
        t = (t0 + i as u64 * interval)
            .max(prev + interval)
            .max(vol.now().as_nanos());
        prev = t;
        vol.begin_client_op(device::VirtualTime::from_nanos(t))?;
        key_bytes(spec, op.key(), &mut k);
        let c0 = thread_cpu_ns();
        match op {
            Op::Read { .. } => {
                db.get(&k)?;
            }
            // Vigil's workloads carry no expiries (an expiring update would be an update).
            Op::Update { key } | Op::Insert { key } | Op::ExpiringUpdate { key, .. } => {
                vals.fill(key, i as u64 + 1, spec.value_size as usize, &mut v);
                db.put(&k, &v)?;
            }
            Op::ReadModifyWrite { key } => {
                db.get(&k)?;
                vals.fill(key, i as u64 + 1, spec.value_size as usize, &mut v);
                db.put(&k, &v)?;
            }
            Op::Scan { len, .. } => {
                let it = db.scan(Bound::Included(&k[..]), Bound::Unbounded)?;
                for r in it.take(len as usize) {
                    r?;
                }
            }
            Op::Delete { .. } => db.delete(&k)?,
        }
        let cpu = thread_cpu_ns().saturating_sub(c0);
        let times = vol.end_client_op();
        let cpu = cpu.saturating_sub(times.emulator_cpu.as_nanos() as u64);
        let dev = times.device.as_nanos() as u64;
        let lat = (cpu + dev).max(1);
        if i < warm {
            continue;
        }
        let m = t - measured_from.get_or_insert(t).to_owned();
        match op {
            Op::Read { .. } | Op::ReadModifyWrite { .. } => {
                get_h.saturating_record(lat);
                get_cpu += cpu as u128;
                get_dev += dev as u128;
                series.push((m as f64 / 1e9, lat as f64 / 1000.0));
            }
            Op::Scan { .. } => scan_h.saturating_record(lat),
            _ => put_h.saturating_record(lat),
        }
        if i % 1000 == 0 {
            pb.inc(1000);
        }
    }
    // The volume's counters as of the end of the measured ops (closing flushes the
    // memtable through the cache with nobody driving the clock; that is not measured).
    let volume = vol.volume_stats();
    vol.set_pacing(false);
    let write_stall_seconds = db.stats().stall_micros as f64 / 1e6;
    db.close()?;
    let n = get_h.len().max(1) as f64;
    Ok(RunReport {
        workload: spec.name.clone(),
        mode: mode.name().to_string(),
        get: summarize(&get_h),
        put: summarize(&put_h),
        scan: summarize(&scan_h),
        get_cpu_mean_us: get_cpu as f64 / n / 1000.0,
        get_device_mean_us: get_dev as f64 / n / 1000.0,
        reconstructed_fraction: volume.reconstructed_fraction(),
        cache_peak: volume.cache_peak,
        cache_limit: volume.cache_limit,
        wall_seconds: started.elapsed().as_secs_f64(),
        virtual_seconds: (t - measured_from.unwrap_or(t)) as f64 / 1e9,
        measured_from_ns: measured_from.unwrap_or(t),
        write_stall_seconds,
        volume,
        series,
        get_hist: Some(get_h),
    })
}

pub fn run(args: Args) -> Result<()> {
    let modes: Vec<Mode> = args
        .modes
        .iter()
        .map(|m| m.parse::<Mode>().map_err(|e| anyhow!("{e}")))
        .collect::<Result<_>>()?;
    let specs: Vec<WorkloadSpec> = args
        .workloads
        .iter()
        .map(|w| spec_for(&w.to_ascii_lowercase(), &args))
        .collect::<Result<_>>()?;
    outpath::ensure_dir(&args.out)?;
    let scratch = match &args.dir {
        Some(d) => {
            outpath::ensure_dir(d)?;
            tempfile::tempdir_in(d)
                .with_context(|| format!("creating a scratch directory in {}", d.display()))?
        }
        None => tempfile::tempdir()?,
    };
    let pb = ProgressBar::new(specs.len() as u64 * modes.len() as u64 * args.ops);
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} ops {msg}")
            .map_err(|e| anyhow!("{e}"))?,
    );
    let mut reports = Vec::new();
    for spec in &specs {
        let template = scratch.path().join(format!("{}-template", spec.name));
        pb.set_message(format!("{} load", spec.name));
        load(&template, spec, &args).with_context(|| format!("loading {}", spec.name))?;
        for &mode in &modes {
            pb.set_message(format!("{} {}", spec.name, mode));
            let root = scratch.path().join(format!("{}-{}", spec.name, mode));
            copy_dir(&template, &root)?;
            let r = run_one(&root, spec, mode, &args, &pb)
                .with_context(|| format!("{} under {mode}", spec.name))?;
            std::fs::remove_dir_all(&root)
                .with_context(|| format!("removing {}", root.display()))?;
            reports.push(r);
        }
        std::fs::remove_dir_all(&template)
            .with_context(|| format!("removing {}", template.display()))?;
    }
    pb.finish_and_clear();
    print_table(&reports);
    let json = serde_json::json!({
        "args": format!("{args:?}"),
        "device": device_config(&args),
        "volume": volume_config(Mode::OVigil, &args),
        "runs": reports,
        "summary": summary(&reports),
    });
    let path = args.out.join("vigil.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!("report: {}", path.display());
    plots(&reports, &specs, &modes, &args.out)?;
    Ok(())
}

/// The headline ratios: Base over O-Vigil for p99.9 and mean Get latency, per workload with
/// Gets and on average.
fn summary(reports: &[RunReport]) -> serde_json::Value {
    let mut per = Vec::new();
    for b in reports
        .iter()
        .filter(|r| r.mode == "base" && r.get.count > 0)
    {
        if let Some(o) = reports
            .iter()
            .find(|r| r.mode == "o-vigil" && r.workload == b.workload)
        {
            per.push((
                b.workload.clone(),
                b.get.p999 / o.get.p999.max(1e-9),
                o.get.mean / b.get.mean.max(1e-9),
            ));
        }
    }
    let n = per.len().max(1) as f64;
    serde_json::json!({
        "p999_base_over_ovigil": per.iter().map(|p| (p.0.clone(), p.1)).collect::<Vec<_>>(),
        "p999_ratio_mean": per.iter().map(|p| p.1).sum::<f64>() / n,
        "mean_ovigil_over_base": per.iter().map(|p| (p.0.clone(), p.2)).collect::<Vec<_>>(),
    })
}

fn print_table(reports: &[RunReport]) {
    println!(
        "| workload | config | Get p50 | p99 | p99.9 | p99.99 | mean (cpu+dev) | scan p99.9 | reconstructed | cache peak MiB | forced | ext |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in reports {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} ({:.0}+{:.0}) | {:.0} | {:.1} % | {:.1} | {} | {} |",
            r.workload,
            r.mode,
            r.get.p50,
            r.get.p99,
            r.get.p999,
            r.get.p9999,
            r.get.mean,
            r.get_cpu_mean_us,
            r.get_device_mean_us,
            r.scan.p999,
            100.0 * r.reconstructed_fraction,
            r.cache_peak as f64 / (1 << 20) as f64,
            r.volume.forced_writes,
            r.volume.ndwin_extensions,
        );
    }
    let s = summary(reports);
    println!("summary: {s}");
}

// ------------------------------------------------------------------------ plots

fn perr<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing plot: {e}")
}

fn plots(reports: &[RunReport], specs: &[WorkloadSpec], modes: &[Mode], out: &Path) -> Result<()> {
    harness::fonts::init_fonts()?;
    for spec in specs {
        let runs: Vec<&RunReport> = reports
            .iter()
            .filter(|r| r.workload == spec.name && r.get.count > 0)
            .collect();
        if !runs.is_empty() {
            cdf(
                &out.join(format!("cdf-{}.png", spec.name)),
                &spec.name,
                &runs,
            )?;
        }
    }
    if let Some(first) = specs.first() {
        let runs: Vec<&RunReport> = reports
            .iter()
            .filter(|r| r.workload == first.name)
            .collect();
        time_series(
            &out.join(format!("timeseries-{}.png", first.name)),
            &first.name,
            &runs,
        )?;
    }
    if modes.iter().any(|m| m.scheduled()) {
        cache_plot(&out.join("write-cache.png"), reports, specs)?;
    }
    Ok(())
}

/// The highest sample per `width` of virtual time (keeps plots small and peaks visible).
fn peaks_per(samples: &[(u64, u64)], width: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(t, v) in samples {
        let b = t / width * width;
        match out.last_mut() {
            Some(last) if last.0 == b => last.1 = last.1.max(v),
            _ => out.push((b, v)),
        }
    }
    out
}

fn color(mode: &str) -> RGBColor {
    match mode {
        "base" => RGBColor(0, 0, 0),
        "silk" => RGBColor(128, 128, 128),
        "plm" => RGBColor(230, 159, 0),
        "i-plm" => RGBColor(86, 180, 233),
        "r-vigil" => RGBColor(0, 158, 115),
        _ => RGBColor(213, 94, 0),
    }
}

/// Get latency CDF (left) and its tail as 1 - CDF on a log scale (right).
fn cdf(path: &Path, name: &str, runs: &[&RunReport]) -> Result<()> {
    let root = BitMapBackend::new(path, (1200, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(perr)?;
    let root = root
        .titled(
            &format!("{name}: Get latency (CPU + device time)"),
            ("sans-serif", 22),
        )
        .map_err(perr)?;
    let panels = root.split_evenly((1, 2));
    let curves: Vec<(String, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| {
            let h = r.get_hist.as_ref().expect("histogram kept");
            let pts = h
                .iter_quantiles(4)
                .map(|v| {
                    (
                        v.value_iterated_to() as f64 / 1000.0,
                        v.quantile_iterated_to(),
                    )
                })
                .filter(|(x, _)| *x > 0.0)
                .collect();
            (r.mode.clone(), pts)
        })
        .collect();
    let xmax = curves
        .iter()
        .flat_map(|c| c.1.iter().map(|p| p.0))
        .fold(1.0f64, f64::max)
        * 1.2;
    let xmin = curves
        .iter()
        .flat_map(|c| c.1.iter().map(|p| p.0))
        .fold(f64::MAX, f64::min)
        .max(0.1)
        * 0.8;
    let mut left = ChartBuilder::on(&panels[0])
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((xmin..xmax).log_scale(), 0.0f64..1.0)
        .map_err(perr)?;
    left.configure_mesh()
        .light_line_style(WHITE)
        .x_desc("latency (us)")
        .y_desc("CDF")
        .draw()
        .map_err(perr)?;
    for (mode, pts) in &curves {
        let c = color(mode);
        left.draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(perr)?
            .label(mode.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    left.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(perr)?;
    let mut right = ChartBuilder::on(&panels[1])
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((xmin..xmax).log_scale(), (1e-5f64..1.0).log_scale())
        .map_err(perr)?;
    right
        .configure_mesh()
        .light_line_style(WHITE)
        .x_desc("latency (us)")
        .y_desc("1 - CDF (fraction slower)")
        .draw()
        .map_err(perr)?;
    for (mode, pts) in &curves {
        let c = color(mode);
        right
            .draw_series(LineSeries::new(
                pts.iter().map(|&(x, q)| (x, (1.0 - q).max(1e-5))),
                c.stroke_width(2),
            ))
            .map_err(perr)?;
    }
    root.present().map_err(perr)?;
    Ok(())
}

/// Fig. 12-like: per configuration, the Get latency over virtual time (worst per 20 ms) and
/// the write throughput to the kv-sets (red, per 100 ms).
fn time_series(path: &Path, name: &str, runs: &[&RunReport]) -> Result<()> {
    let rows = runs.len().div_ceil(2);
    let root = BitMapBackend::new(path, (1100, 230 * rows as u32 + 40)).into_drawing_area();
    root.fill(&WHITE).map_err(perr)?;
    let root = root
        .titled(
            &format!("{name}: worst Get latency per 50 ms (black) and kv-set write MB/s (red)"),
            ("sans-serif", 20),
        )
        .map_err(perr)?;
    let panels = root.split_evenly((rows, 2));
    let ymax = runs
        .iter()
        .flat_map(|r| r.series.iter().map(|p| p.1))
        .fold(100.0f64, f64::max)
        / 1000.0;
    for (r, area) in runs.iter().zip(panels.iter()) {
        let tmax = r.virtual_seconds.max(0.1);
        let mut worst: Vec<f64> = vec![-1.0; (tmax / 0.05) as usize + 1];
        for &(t, l) in &r.series {
            let b = ((t / 0.05) as usize).min(worst.len() - 1);
            worst[b] = worst[b].max(l / 1000.0);
        }
        // The volume's buckets start at its clock's zero; the measured ops later.
        let t0 = r.measured_from_ns as f64 / 1e9;
        let bucket = vigil::stats::BUCKET_NS as f64 / 1e9;
        let writes: Vec<(f64, f64)> = r
            .volume
            .written_per_bucket
            .iter()
            .enumerate()
            .map(|(i, &b)| (i as f64 * bucket - t0, b as f64 / 1e6 / bucket))
            .filter(|(t, _)| *t >= 0.0 && *t <= tmax)
            .collect();
        let wmax = writes.iter().map(|w| w.1).fold(1.0, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(r.mode.as_str(), ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .right_y_label_area_size(50)
            .build_cartesian_2d(0.0..tmax, 0.0..ymax * 1.05)
            .map_err(perr)?
            .set_secondary_coord(0.0..tmax, 0.0..wmax);
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .x_desc("virtual time (s)")
            .y_desc("Get latency (ms)")
            .draw()
            .map_err(perr)?;
        chart
            .configure_secondary_axes()
            .y_desc("write MB/s")
            .draw()
            .map_err(perr)?;
        chart
            .draw_secondary_series(LineSeries::new(writes, RED.mix(0.7)))
            .map_err(perr)?;
        chart
            .draw_series(LineSeries::new(
                // Buckets with no Get (the clock jumped over a client stall) are skipped.
                worst
                    .iter()
                    .enumerate()
                    .filter(|(_, &l)| l >= 0.0)
                    .map(|(i, &l)| (i as f64 * 0.05, l)),
                BLACK,
            ))
            .map_err(perr)?;
    }
    root.present().map_err(perr)?;
    Ok(())
}

/// Write-cache memory over the measured ops' virtual time for the scheduled configurations,
/// one panel per workload, with the limit dashed.
fn cache_plot(path: &Path, reports: &[RunReport], specs: &[WorkloadSpec]) -> Result<()> {
    let rows = specs.len().div_ceil(2);
    let root = BitMapBackend::new(path, (1100, 200 * rows as u32 + 40)).into_drawing_area();
    root.fill(&WHITE).map_err(perr)?;
    let root = root
        .titled(
            "write cache (plm_cache) memory, R-Vigil and O-Vigil",
            ("sans-serif", 20),
        )
        .map_err(perr)?;
    let panels = root.split_evenly((rows, 2));
    for (spec, area) in specs.iter().zip(panels.iter()) {
        let runs: Vec<&RunReport> = reports
            .iter()
            .filter(|r| r.workload == spec.name && (r.mode == "r-vigil" || r.mode == "o-vigil"))
            .collect();
        let Some(limit) = runs.first().map(|r| r.cache_limit as f64 / 1048576.0) else {
            continue;
        };
        // The measured ops only (time from their start).
        let tmax = runs.iter().map(|r| r.virtual_seconds).fold(0.1, f64::max);
        let mut chart = ChartBuilder::on(area)
            .caption(spec.name.as_str(), ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..tmax, 0.0..limit * 1.1)
            .map_err(perr)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .x_desc("virtual time (s)")
            .y_desc("MiB")
            .draw()
            .map_err(perr)?;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, limit), (tmax, limit)],
                6,
                4,
                BLACK.stroke_width(1),
            ))
            .map_err(perr)?;
        for r in runs {
            let c = color(&r.mode);
            chart
                .draw_series(LineSeries::new(
                    peaks_per(&r.volume.cache_samples, 50_000_000)
                        .into_iter()
                        .filter(|&(t, _)| t >= r.measured_from_ns)
                        .map(|(t, b)| {
                            ((t - r.measured_from_ns) as f64 / 1e9, b as f64 / 1048576.0)
                        }),
                    c.stroke_width(2),
                ))
                .map_err(perr)?
                .label(r.mode.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(perr)?;
    }
    root.present().map_err(perr)?;
    Ok(())
}
