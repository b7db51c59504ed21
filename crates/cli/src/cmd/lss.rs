//! `halflife lss`: log-structured block storage on an SSD array (paper 004, ADAPT).
//!
//! - `simulate` replays block traces (or a synthetic YCSB-A stream) under every placement
//!   policy, in parallel, and reports write amplification by cause, with ratios to ADAPT,
//!   a JSON report and PNG plots;
//! - `prototype` drives the same policies against real files (one per device, XOR parity)
//!   and measures throughput and metadata memory;
//! - `gen-trace` writes synthetic traces in the public trace formats.

use anyhow::{bail, Context, Result};
use harness::outpath;
use indicatif::{ProgressBar, ProgressStyle};
use lss::placement;
use lss::report::{summarize, table, PolicySummary};
use lss::sim::{run_all, total_blocks, RunResult};
use lss::synth::{self, SynthConfig};
use lss::trace::{self, Format, Volume};
use lss::{Config, Selection};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(clap::Args)]
pub struct Args {
    // Boxed: the options are large and `Args` sits in the binary's command enum.
    #[command(subcommand)]
    cmd: Box<Cmd>,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Replay traces or a synthetic workload under every placement policy.
    Simulate(SimArgs),
    /// Run the policies on a file-backed array and measure throughput and memory.
    Prototype(ProtoArgs),
    /// Write a synthetic YCSB-A-like trace in one of the public formats.
    GenTrace(GenArgs),
}

/// Store geometry shared by `simulate` and `prototype`.
#[derive(clap::Args, Clone)]
struct StoreArgs {
    /// Victim selection: greedy or cost-benefit.
    #[arg(long, default_value = "greedy")]
    selection: Selection,
    /// Chunk size in KiB (a multiple of 4).
    #[arg(long, default_value_t = 64)]
    chunk_kib: u32,
    /// Devices in the RAID-5 array (one holds each stripe's parity).
    #[arg(long, default_value_t = 4)]
    devices: u32,
    /// Stripes per segment.
    #[arg(long, default_value_t = 64)]
    stripes: u32,
    /// SLA coalescing window in microseconds of trace time.
    #[arg(long, default_value_t = 100)]
    sla_us: u64,
    /// Switch the chunk model off: no padding, GC by garbage proportion, as in the
    /// SepBIT study (segments then default to 512 MiB unless --stripes is given).
    #[arg(long)]
    no_chunks: bool,
    /// Garbage proportion triggering GC without the chunk model.
    #[arg(long, default_value_t = 0.15)]
    gc_ratio: f64,
    /// Spare capacity of the chunk model: capacity = footprint / (1 - spare).
    #[arg(long, default_value_t = 0.15)]
    spare: f64,
}

impl StoreArgs {
    fn config(&self, stripes_given: bool) -> Result<Config> {
        if self.chunk_kib == 0 || self.chunk_kib / 4 * 4 != self.chunk_kib {
            bail!("--chunk-kib must be a positive multiple of 4");
        }
        if self.devices < 2 {
            bail!("--devices must be at least 2 (RAID-5 needs a parity device)");
        }
        let mut c = if self.no_chunks {
            Config::sepbit_study()
        } else {
            Config::default()
        };
        c.selection = self.selection;
        c.chunk_blocks = self.chunk_kib / 4;
        c.sla_window_us = self.sla_us;
        c.gc_garbage_ratio = self.gc_ratio;
        c.spare_ratio = self.spare;
        if !self.no_chunks {
            c.data_devices = self.devices - 1;
            c.stripes_per_segment = self.stripes;
        } else if stripes_given {
            c.data_devices = 1;
            c.stripes_per_segment = self.stripes;
        } else {
            // 512 MiB segments whatever the chunk size.
            c.stripes_per_segment = (512 << 10) / self.chunk_kib;
        }
        c.validate()?;
        Ok(c)
    }
}

/// The synthetic workload.
#[derive(clap::Args, Clone)]
struct SynthArgs {
    /// Working set in 4 KiB blocks (filled once before measuring; 1 GiB by default).
    #[arg(long, default_value_t = 1 << 18)]
    blocks: u32,
    /// Updates after the fill, in multiples of the working set.
    #[arg(long, default_value_t = 10)]
    updates_factor: u64,
    /// Zipf exponent of the updates (0 = uniform, < 1).
    #[arg(long, default_value_t = 0.9)]
    alpha: f64,
    /// Write requests per second of trace time (5000 = light: mean gap 200 us).
    #[arg(long, default_value_t = 5000.0)]
    rate: f64,
    /// Blocks per request.
    #[arg(long, default_value_t = 1)]
    request_blocks: u32,
    /// Smallest gap between requests in microseconds (gaps are this plus an exponential
    /// keeping the mean rate). 101 with the default rate gives paper 004's light traffic,
    /// every gap above the 100 us window; 0 is a Poisson stream.
    #[arg(long, default_value_t = 0.0)]
    min_gap_us: f64,
    /// Seed of the generator (same seed, same stream).
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

impl SynthArgs {
    fn config(&self) -> SynthConfig {
        SynthConfig {
            blocks: self.blocks,
            updates: self.blocks as u64 * self.updates_factor / self.request_blocks.max(1) as u64,
            alpha: self.alpha,
            rate: self.rate,
            request_blocks: self.request_blocks,
            read_ratio: 0.0,
            min_gap_us: self.min_gap_us,
            seed: self.seed,
        }
    }
}

#[derive(clap::Args)]
struct SimArgs {
    /// Trace files to replay (each volume of each file is replayed separately).
    #[arg(long = "trace", value_name = "FILE")]
    traces: Vec<PathBuf>,
    /// Trace format (alibaba, tencent, msrc); guessed from the file name if omitted.
    #[arg(long)]
    format: Option<String>,
    /// Replay a synthetic YCSB-A-like workload (the default without --trace).
    #[arg(long)]
    synthetic: bool,
    #[command(flatten)]
    synth: SynthArgs,
    /// Skip the access-density and skew sweeps (the Fig. 11 curves) that a synthetic
    /// run adds by default.
    #[arg(long)]
    no_sweep: bool,
    /// Request rates of the density sweep.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "2000,5000,20000,100000,1000000"
    )]
    sweep_rates: Vec<f64>,
    /// Zipf exponents of the skew sweep.
    #[arg(long, value_delimiter = ',', default_value = "0,0.5,0.9,0.99")]
    sweep_alphas: Vec<f64>,
    /// Policies: `all` or a comma-separated list (sepgc, dac, warcip, mida, sepbit,
    /// adapt, fk, and the ablations adapt-noadapt, adapt-noagg, adapt-nodemote).
    #[arg(long, default_value = "all")]
    policy: String,
    #[command(flatten)]
    store: StoreArgs,
    /// Replay only the first N volumes of the traces (0 = all).
    #[arg(long, default_value_t = 0)]
    max_volumes: usize,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Output directory for report.json and the PNG plots.
    #[arg(long, default_value = "bench-out/lss")]
    out: PathBuf,
}

#[derive(clap::Args)]
struct GenArgs {
    /// Output trace file.
    #[arg(long)]
    out: PathBuf,
    /// Format: alibaba, tencent or msrc.
    #[arg(long)]
    format: String,
    /// Volumes in the file (each with its own working set and seed).
    #[arg(long, default_value_t = 2)]
    volumes: u32,
    #[command(flatten)]
    synth: SynthArgs,
    /// Share of reads (YCSB-A: 0.5); reads are parsed and counted, not replayed.
    #[arg(long, default_value_t = 0.5)]
    read_ratio: f64,
}

#[derive(clap::Args)]
struct ProtoArgs {
    /// Directory holding the device files (a temporary directory by default).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Policies, as for `simulate`.
    #[arg(long, default_value = "sepgc,dac,warcip,mida,sepbit,adapt")]
    policy: String,
    /// Client thread counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    clients: Vec<usize>,
    /// Working set in 4 KiB blocks.
    #[arg(long, default_value_t = 1 << 15)]
    blocks: u32,
    /// Updates after the fill, in multiples of the working set.
    #[arg(long, default_value_t = 4)]
    updates_factor: u64,
    /// Zipf exponent of the updates (0 = uniform, < 1).
    #[arg(long, default_value_t = 0.9)]
    alpha: f64,
    /// Chunk writes in flight per device file.
    #[arg(long, default_value_t = 8)]
    io_depth: usize,
    #[command(flatten)]
    store: StoreArgs,
    /// Output directory for prototype.json and prototype.png.
    #[arg(long, default_value = "bench-out/lss")]
    out: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    match *args.cmd {
        Cmd::Simulate(a) => simulate(a),
        Cmd::Prototype(a) => prototype(a),
        Cmd::GenTrace(a) => gen_trace(a),
    }
}

fn stripes_given() -> bool {
    std::env::args().any(|a| a == "--stripes" || a.starts_with("--stripes="))
}

/// Runs all (volume, policy) pairs with a progress bar.
fn run_with_progress(
    vols: &[Volume],
    policies: &[String],
    cfg: &Config,
    threads: usize,
    label: &str,
) -> Result<Vec<RunResult>> {
    let total = total_blocks(vols, policies.len());
    let bar = ProgressBar::new(total).with_message(label.to_string());
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>24} [{bar:40}] {percent:>3}% {human_pos}/{human_len} blocks, {per_sec}, eta {eta}",
        )?
        .progress_chars("=> "),
    );
    let progress = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let res = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                bar.set_position(progress.load(Ordering::Relaxed));
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
        let r = run_all(vols, policies, cfg, threads, &progress);
        done.store(true, Ordering::Relaxed);
        r
    });
    bar.finish_and_clear();
    Ok(res?)
}

#[derive(serde::Serialize)]
struct SweepPoint {
    rate: f64,
    alpha: f64,
    summary: Vec<PolicySummary>,
}

#[derive(serde::Serialize)]
struct SimReport<'a> {
    command: String,
    config: &'a Config,
    synthetic: Option<SynthConfig>,
    traces: Vec<String>,
    volumes: Vec<VolumeInfo>,
    summary: Vec<PolicySummary>,
    results: Vec<RunResult>,
    density_sweep: Vec<SweepPoint>,
    skew_sweep: Vec<SweepPoint>,
    simulator_blocks_per_s_per_thread: f64,
    /// Block writes per CPU second of the replaying threads (per core, whatever the load).
    simulator_blocks_per_cpu_s: Option<f64>,
}

#[derive(serde::Serialize)]
struct VolumeInfo {
    name: String,
    block_writes: usize,
    distinct_blocks: u32,
    write_requests: u64,
    read_requests: u64,
    duration_s: f64,
    write_rate_per_s: f64,
}

fn simulate(a: SimArgs) -> Result<()> {
    let policies = placement::parse_list(&a.policy)?;
    let cfg = a.store.config(stripes_given())?;
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    outpath::ensure_dir(&a.out)?;
    let synthetic = a.synthetic || a.traces.is_empty();
    let mut vols = Vec::new();
    let mut cfg_main = cfg.clone();
    if synthetic {
        let sc = a.synth.config();
        let (v, fill) = synth::volume(&sc)?;
        cfg_main.warmup_blocks = fill;
        vols.push(v);
    }
    for path in &a.traces {
        let format = match &a.format {
            Some(f) => f.parse::<Format>()?,
            None => Format::guess(path).with_context(|| {
                format!(
                    "cannot guess the format of {}; pass --format",
                    path.display()
                )
            })?,
        };
        let mut vs = trace::read(path, format)?;
        for v in &mut vs {
            v.name = format!(
                "{}:{}",
                path.file_name().unwrap_or_default().to_string_lossy(),
                v.name
            );
        }
        vols.extend(vs);
    }
    if a.max_volumes > 0 {
        vols.truncate(a.max_volumes);
    }
    let infos: Vec<VolumeInfo> = vols
        .iter()
        .map(|v| VolumeInfo {
            name: v.name.clone(),
            block_writes: v.block_writes(),
            distinct_blocks: v.n_lbas,
            write_requests: v.write_requests,
            read_requests: v.read_requests,
            duration_s: v.duration_s(),
            write_rate_per_s: v.write_requests as f64 / v.duration_s().max(1e-6),
        })
        .collect();
    eprintln!(
        "{} volume(s), {} block writes, {} policies, {threads} threads, {}",
        vols.len(),
        vols.iter().map(|v| v.block_writes()).sum::<usize>(),
        policies.len(),
        if cfg.chunk_model {
            format!(
                "{} KiB chunks, {}+1 RAID-5, {} KiB segments, SLA {} us, {:?}",
                cfg.chunk_blocks * 4,
                cfg.data_devices,
                cfg.segment_blocks() * 4,
                cfg.sla_window_us,
                cfg.selection
            )
        } else {
            format!(
                "no chunk model, {} MiB segments, GC at {:.0}% garbage, {:?}",
                cfg.segment_blocks() / 256,
                cfg.gc_garbage_ratio * 100.0,
                cfg.selection
            )
        }
    );
    let results = run_with_progress(&vols, &policies, &cfg_main, threads, "main run")?;
    let summary = summarize(&results);
    println!("{}", table(&summary));
    let speed = {
        let (b, s) = results.iter().fold((0.0, 0.0), |(b, s), r| {
            (b + r.blocks_per_s * r.elapsed_s, s + r.elapsed_s)
        });
        b / f64::max(s, 1e-9)
    };
    let cpu_speed = lss::sim::blocks_per_cpu_s(&results);
    println!(
        "simulator speed: {:.2} M block writes/s per thread{}",
        speed / 1e6,
        cpu_speed.map_or(String::new(), |c| format!(
            ", {:.2} M per CPU second",
            c / 1e6
        ))
    );

    let (mut density, mut skew) = (Vec::new(), Vec::new());
    if synthetic && !a.no_sweep {
        for &rate in &a.sweep_rates {
            let sc = SynthConfig {
                rate,
                ..a.synth.config()
            };
            density.push(sweep_point(&sc, &policies, &cfg, threads)?);
        }
        for &alpha in &a.sweep_alphas {
            let sc = SynthConfig {
                alpha,
                ..a.synth.config()
            };
            skew.push(sweep_point(&sc, &policies, &cfg, threads)?);
        }
        print_sweep("density sweep (WA by request rate)", &density, |p| {
            format!("{:.0}/s", p.rate)
        });
        print_sweep("skew sweep (WA by Zipf alpha)", &skew, |p| {
            format!("a={}", p.alpha)
        });
    }

    let report = SimReport {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        config: &cfg,
        synthetic: synthetic.then(|| a.synth.config()),
        traces: a.traces.iter().map(|p| p.display().to_string()).collect(),
        volumes: infos,
        summary,
        results,
        density_sweep: density,
        skew_sweep: skew,
        simulator_blocks_per_s_per_thread: speed,
        simulator_blocks_per_cpu_s: cpu_speed,
    };
    let json = a.out.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    harness::fonts::init_fonts()?;
    plot_wa(&a.out.join("wa.png"), &report.summary)?;
    plot_padding_cdf(&a.out.join("padding_cdf.png"), &report.results)?;
    if !report.density_sweep.is_empty() {
        plot_sensitivity(
            &a.out.join("sensitivity.png"),
            &report.density_sweep,
            &report.skew_sweep,
        )?;
    }
    eprintln!("wrote {} and plots in {}", json.display(), a.out.display());
    Ok(())
}

fn sweep_point(
    sc: &SynthConfig,
    policies: &[String],
    cfg: &Config,
    threads: usize,
) -> Result<SweepPoint> {
    let (v, fill) = synth::volume(sc)?;
    let cfg = Config {
        warmup_blocks: fill,
        ..cfg.clone()
    };
    let label = format!("rate {} alpha {}", sc.rate, sc.alpha);
    let r = run_with_progress(&[v], policies, &cfg, threads, &label)?;
    Ok(SweepPoint {
        rate: sc.rate,
        alpha: sc.alpha,
        summary: summarize(&r),
    })
}

fn print_sweep(title: &str, pts: &[SweepPoint], key: impl Fn(&SweepPoint) -> String) {
    println!("{title}");
    let Some(first) = pts.first() else { return };
    print!("{:>12}", "");
    for s in &first.summary {
        print!(" {:>14}", s.policy);
    }
    println!();
    for p in pts {
        print!("{:>12}", key(p));
        for s in &p.summary {
            print!(" {:>14.3}", s.wa);
        }
        println!();
    }
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(214, 39, 40),
    RGBColor(127, 127, 127),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(227, 119, 194),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Stacked bars: WA split into user (1.0), GC, padding and shadow parts, per policy.
fn plot_wa(path: &Path, sums: &[PolicySummary]) -> Result<()> {
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let ymax = sums.iter().map(|s| s.wa).fold(1.0, f64::max) * 1.15;
    let n = sums.len();
    let names: Vec<String> = sums.iter().map(|s| s.policy.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption("Write amplification by cause", ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("WA")
        .label_style(("sans-serif", 15))
        .draw()?;
    let parts: [(&str, RGBColor); 4] = [
        ("user", RGBColor(160, 160, 160)),
        ("GC", RGBColor(31, 119, 180)),
        ("padding", RGBColor(255, 127, 14)),
        ("shadow", RGBColor(44, 160, 44)),
    ];
    for (k, (label, c)) in parts.iter().enumerate() {
        let bars: Vec<Rectangle<(f64, f64)>> = sums
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let u = s.user_bytes.max(1) as f64;
                let vals = [
                    1.0,
                    s.gc_bytes as f64 / u,
                    s.padding_bytes as f64 / u,
                    s.shadow_bytes as f64 / u,
                ];
                let lo: f64 = vals[..k].iter().sum();
                let x = i as f64;
                Rectangle::new([(x - 0.35, lo), (x + 0.35, lo + vals[k])], c.filled())
            })
            .collect();
        let c = *c;
        chart
            .draw_series(bars)?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart.draw_series(sums.iter().enumerate().map(|(i, s)| {
        Text::new(
            format!("{:.2}", s.wa),
            (i as f64 - 0.2, s.wa + ymax * 0.02),
            ("sans-serif", 15),
        )
    }))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    root.present()?;
    Ok(())
}

/// CDF over volumes of the padding traffic ratio, one line per policy (Fig. 9).
fn plot_padding_cdf(path: &Path, results: &[RunResult]) -> Result<()> {
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut policies: Vec<&str> = Vec::new();
    for r in results {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let xmax = results
        .iter()
        .map(|r| r.padding_ratio * 100.0)
        .fold(1.0, f64::max)
        .min(100.0)
        * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "CDF of padding traffic ratio over volumes",
            ("sans-serif", 24),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..xmax, 0f64..1.02)?;
    chart
        .configure_mesh()
        .x_desc("padding traffic ratio (%)")
        .y_desc("fraction of volumes")
        .label_style(("sans-serif", 15))
        .draw()?;
    for (i, p) in policies.iter().enumerate() {
        let mut v: Vec<f64> = results
            .iter()
            .filter(|r| r.policy == *p)
            .map(|r| r.padding_ratio * 100.0)
            .collect();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mut pts = vec![(0.0, 0.0)];
        for (k, x) in v.iter().enumerate() {
            pts.push((*x, k as f64 / n));
            pts.push((*x, (k + 1) as f64 / n));
        }
        pts.push((xmax, 1.0));
        let c = color(i);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(*p)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    root.present()?;
    Ok(())
}

/// WA against request rate (log scale) and against Zipf alpha (Fig. 11).
fn plot_sensitivity(path: &Path, density: &[SweepPoint], skew: &[SweepPoint]) -> Result<()> {
    let root = BitMapBackend::new(path, (1300, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(650);
    let ymax = density
        .iter()
        .chain(skew)
        .flat_map(|p| p.summary.iter().map(|s| s.wa))
        .fold(1.0, f64::max)
        * 1.1;
    let policies: Vec<String> = density
        .first()
        .or(skew.first())
        .map(|p| p.summary.iter().map(|s| s.policy.clone()).collect())
        .unwrap_or_default();
    if !density.is_empty() {
        let lo = density.iter().map(|p| p.rate).fold(f64::INFINITY, f64::min) * 0.8;
        let hi = density.iter().map(|p| p.rate).fold(0.0, f64::max) * 1.25;
        let mut c = ChartBuilder::on(&left)
            .caption("WA vs access density", ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..ymax)?;
        c.configure_mesh()
            .x_desc("write requests per second (log)")
            .y_desc("WA")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .label_style(("sans-serif", 14))
            .draw()?;
        for (i, p) in policies.iter().enumerate() {
            let pts: Vec<(f64, f64)> = density
                .iter()
                .filter_map(|d| {
                    d.summary
                        .iter()
                        .find(|s| &s.policy == p)
                        .map(|s| (d.rate, s.wa))
                })
                .collect();
            let col = color(i);
            c.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?
                .label(p.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                });
            c.draw_series(pts.into_iter().map(|q| Circle::new(q, 3, col.filled())))?;
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    if !skew.is_empty() {
        let mut c = ChartBuilder::on(&right)
            .caption("WA vs workload skew", ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d(-0.02f64..1.01, 0f64..ymax)?;
        c.configure_mesh()
            .x_desc("Zipf alpha")
            .y_desc("WA")
            .label_style(("sans-serif", 14))
            .draw()?;
        for (i, p) in policies.iter().enumerate() {
            let pts: Vec<(f64, f64)> = skew
                .iter()
                .filter_map(|d| {
                    d.summary
                        .iter()
                        .find(|s| &s.policy == p)
                        .map(|s| (d.alpha, s.wa))
                })
                .collect();
            let col = color(i);
            c.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?
                .label(p.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                });
            c.draw_series(pts.into_iter().map(|q| Circle::new(q, 3, col.filled())))?;
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn gen_trace(a: GenArgs) -> Result<()> {
    let format: Format = a.format.parse()?;
    let mut records = Vec::new();
    // Start on 2020-01-01 so that every format's timestamps are plausible.
    let t0 = 1_577_836_800_000_000u64;
    for v in 0..a.volumes.max(1) {
        let sc = SynthConfig {
            read_ratio: a.read_ratio,
            seed: a.synth.seed + v as u64,
            ..a.synth.config()
        };
        let name = match format {
            Format::Msrc => format!("synth_{v}"),
            _ => format!("{}", v + 1),
        };
        records.extend(synth::records(&sc, &name, t0)?);
    }
    records.sort_by_key(|r| r.t_us);
    trace::write(&a.out, format, &records)?;
    eprintln!("wrote {} requests to {}", records.len(), a.out.display());
    Ok(())
}

fn prototype(a: ProtoArgs) -> Result<()> {
    let policies = placement::parse_list(&a.policy)?;
    if policies.iter().any(|p| p == "fk") {
        bail!("fk needs the future of the trace; the prototype runs online policies only");
    }
    let mut cfg = a.store.config(stripes_given())?;
    if !cfg.chunk_model {
        bail!("the prototype needs the chunk model");
    }
    let sc = SynthConfig {
        blocks: a.blocks,
        updates: a.blocks as u64 * a.updates_factor,
        alpha: a.alpha,
        rate: 1e9, // closed loop: clients issue as fast as the array takes them
        ..SynthConfig::default()
    };
    cfg.warmup_blocks = 0;
    outpath::ensure_dir(&a.out)?;
    let tmp;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let mut rows = Vec::new();
    for p in &policies {
        for &clients in &a.clients {
            let opts = lss::prototype::Options {
                dir: dir.join(format!("{p}-{clients}")),
                clients,
                io_depth: a.io_depth,
                gc_threads: clients,
            };
            let r = lss::prototype::run(&cfg, &sc, p, &opts)?;
            println!(
                "{p:<8} clients {clients}: {:>8.1} MiB/s user, WA {:.3}, {} parity stripes checked, metadata {:.1} KiB",
                r.user_mib_per_s,
                r.wa,
                r.stripes_checked,
                r.metadata_bytes as f64 / 1024.0
            );
            rows.push(r);
        }
    }
    std::fs::write(
        a.out.join("prototype.json"),
        serde_json::to_string_pretty(&rows)?,
    )?;
    harness::fonts::init_fonts()?;
    plot_prototype(&a.out.join("prototype.png"), &rows, &policies, &a.clients)?;
    eprintln!(
        "wrote prototype.json and prototype.png in {}",
        a.out.display()
    );
    Ok(())
}

fn plot_prototype(
    path: &Path,
    rows: &[lss::prototype::ProtoResult],
    policies: &[String],
    clients: &[usize],
) -> Result<()> {
    let root = BitMapBackend::new(path, (1300, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(650);
    let ymax = rows.iter().map(|r| r.user_mib_per_s).fold(1.0, f64::max) * 1.15;
    let groups = clients.len();
    let n = policies.len();
    let mut c = ChartBuilder::on(&left)
        .caption("Prototype throughput", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(groups as f64 - 0.5), 0f64..ymax)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(groups)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                clients
                    .get(i as usize)
                    .map(|c| format!("{c} clients"))
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("user MiB/s")
        .label_style(("sans-serif", 14))
        .draw()?;
    let w = 0.8 / n as f64;
    for (pi, p) in policies.iter().enumerate() {
        let col = color(pi);
        let bars: Vec<Rectangle<(f64, f64)>> = rows
            .iter()
            .filter(|r| &r.policy == p)
            .filter_map(|r| {
                let g = clients.iter().position(|&c| c == r.clients)?;
                let x = g as f64 - 0.4 + w * pi as f64;
                Some(Rectangle::new(
                    [(x, 0.0), (x + w * 0.9, r.user_mib_per_s)],
                    col.filled(),
                ))
            })
            .collect();
        c.draw_series(bars)?
            .label(p.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], col.filled()));
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    let mem: Vec<(String, f64)> = policies
        .iter()
        .map(|p| {
            let m = rows
                .iter()
                .filter(|r| &r.policy == p)
                .map(|r| r.metadata_bytes)
                .max()
                .unwrap_or(0);
            (p.clone(), m as f64 / 1024.0)
        })
        .collect();
    let mmax = mem.iter().map(|m| m.1).fold(1.0, f64::max) * 1.15;
    let mut c = ChartBuilder::on(&right)
        .caption("Placement metadata", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..mmax)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                policies.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("KiB")
        .label_style(("sans-serif", 14))
        .draw()?;
    c.draw_series(mem.iter().enumerate().map(|(i, (_, m))| {
        Rectangle::new(
            [(i as f64 - 0.35, 0.0), (i as f64 + 0.35, *m)],
            color(i).filled(),
        )
    }))?;
    root.present()?;
    Ok(())
}
