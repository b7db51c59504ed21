//! `halflife vat`: the VAT amplification model of paper 003.
//!
//! - `model` evaluates one or all designs at a given shape and prints the optimum;
//! - `recommend` turns measured `a`, `r` and byte sizes into a level count and growth factor;
//! - `plot` draws the model figures of the paper (2, 4, 5, 6) as PNG files.
//!
//! The model itself lives in the `vat` crate; this file parses, prints and draws.

use anyhow::{Context, Result};
use clap::{Subcommand, ValueEnum};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use vat::figures::{Figure, Panel};
use vat::{Design, Params, Shape};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate the model at one shape and print the optimal shape.
    Model(ModelArgs),
    /// Recommend levels and growth factor from measured a, r and the workload's sizes.
    Recommend(RecommendArgs),
    /// Draw the model figures of the paper (Fig. 2, 4, 5, 6) as PNG files.
    Plot(PlotArgs),
    /// Measure the achieved-throughput parameter r of a directory's device with fio.
    MeasureR(MeasureRArgs),
    /// Scaled-down sec. 4: measure the engine's amplification over growth factors and
    /// designs and compare with VAT and SST-VAT.
    Validate(super::vat_validate::ValidateArgs),
}

#[derive(clap::Args)]
struct MeasureRArgs {
    /// Directory on the device to measure (a scratch file is written there and removed).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Random-write request size in MiB: the table-file size (the engine's default is 64).
    #[arg(long, default_value_t = 64.0)]
    block_mib: f64,
    /// Sequential-write request size in MiB [default: --block-mib, so that r isolates the
    /// cost of random placement from that of the request size].
    #[arg(long)]
    seq_block_mib: Option<f64>,
    /// Outstanding requests (the paper uses about 30).
    #[arg(long, default_value_t = 30)]
    iodepth: u32,
    /// Scratch file size in MiB.
    #[arg(long, default_value_t = 2048)]
    file_mib: u64,
    /// Seconds per fio run.
    #[arg(long, default_value_t = 10)]
    runtime: u32,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DesignArg {
    /// Leveling, values in place (Eq. 4-5).
    Leveling,
    /// Leveling, values in a log (Eq. 7-8).
    LevelingLog,
    /// Tiering, values in place (Eq. 9).
    Tiering,
    /// Tiering, values in a log (Eq. 10).
    TieringLog,
    /// Leveling with per-file compaction (SST-VAT, Eq. 12-13).
    Sst,
    /// Every design, as a table.
    All,
}

impl DesignArg {
    fn designs(self) -> Vec<Design> {
        match self {
            DesignArg::Leveling => vec![Design::Leveling],
            DesignArg::LevelingLog => vec![Design::LevelingLog],
            DesignArg::Tiering => vec![Design::Tiering],
            DesignArg::TieringLog => vec![Design::TieringLog],
            DesignArg::Sst => vec![Design::Sst],
            DesignArg::All => Design::ALL.to_vec(),
        }
    }
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct ModelArgs {
    /// Design to evaluate.
    #[arg(long, value_enum, default_value = "leveling")]
    design: DesignArg,
    /// Merge amplification a in [0, 1] (fraction of the lower level a merge rewrites).
    #[arg(long, default_value_t = 1.0)]
    a: f64,
    /// Achieved throughput r in (0, 1] (over sequential).
    #[arg(long, default_value_t = 1.0)]
    r: f64,
    /// C = S_l / S_0, data size over memtable size.
    #[arg(long, default_value_t = 1000.0)]
    c: f64,
    /// Growth factor f (the level count follows from C); 10 if neither --f nor --levels.
    #[arg(long, conflicts_with = "levels")]
    f: Option<f64>,
    /// Number of levels l, real-valued (the growth factor follows from C).
    #[arg(long)]
    levels: Option<f64>,
    /// Key to value size ratio p (value-log designs).
    #[arg(long, default_value_t = 0.01)]
    p: f64,
    /// Table file size over memtable size, B / S_0 (per-file compaction).
    #[arg(long, default_value_t = 1.0)]
    table_ratio: f64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct RecommendArgs {
    /// Design the engine runs.
    #[arg(long, value_enum, default_value = "leveling-log")]
    design: DesignArg,
    /// Measured merge amplification a in [0, 1].
    #[arg(long, default_value_t = 1.0)]
    a: f64,
    /// Measured achieved throughput r in (0, 1].
    #[arg(long, default_value_t = 1.0)]
    r: f64,
    /// Expected live data size, GiB.
    #[arg(long, default_value_t = 64.0)]
    data_gib: f64,
    /// Memtable size, MiB.
    #[arg(long, default_value_t = 64.0)]
    memtable_mib: f64,
    /// Average key size, bytes.
    #[arg(long, default_value_t = 16.0)]
    key_bytes: f64,
    /// Average value size, bytes.
    #[arg(long, default_value_t = 1024.0)]
    value_bytes: f64,
    /// Table (SST) file size, MiB.
    #[arg(long, default_value_t = 64.0)]
    table_mib: f64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct PlotArgs {
    /// Directory for fig2.png, fig4.png, fig5.png and fig6.png (created if missing).
    #[arg(long, default_value = "bench-out/vat-plots")]
    out: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Model(a) => model(a),
        Command::Recommend(a) => recommend(a),
        Command::Plot(a) => plot(a),
        Command::MeasureR(a) => measure_r(a),
        Command::Validate(a) => super::vat_validate::run(a),
    }
}

fn measure_r(args: MeasureRArgs) -> Result<()> {
    const MIB: f64 = 1024.0 * 1024.0;
    let plan = harness::fio::FioPlan {
        dir: args.dir,
        block_bytes: (args.block_mib * MIB) as u64,
        seq_block_bytes: (args.seq_block_mib.unwrap_or(args.block_mib) * MIB) as u64,
        iodepth: args.iodepth,
        file_bytes: args.file_mib << 20,
        runtime_secs: args.runtime,
    };
    let m = harness::fio::measure_r(&plan)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&m)?);
        return Ok(());
    }
    println!("{} on {}", m.fio_version, plan.dir.display());
    for run in [&m.random, &m.sequential] {
        println!(
            "  {:<9} bs {:>9}  iodepth {:>2}  {}  {:8.1} MiB/s",
            run.rw,
            vat::bytes(run.block_bytes as f64),
            run.iodepth,
            if run.direct { "direct  " } else { "buffered" },
            run.bytes_per_sec / MIB
        );
    }
    println!("r = random / sequential = {:.3}", m.r);
    if m.r > 1.0 {
        println!(
            "note: random writes outran sequential ones; VAT's r is at most 1, so use r = 1 \
             (device caches and parallel channels can reorder large random writes)"
        );
    }
    if let Some(n) = &m.note {
        println!("note: {n}");
    }
    Ok(())
}

fn model(args: ModelArgs) -> Result<()> {
    let params = Params {
        a: args.a,
        r: args.r,
        p: args.p,
        table_ratio: args.table_ratio,
    };
    params.validate()?;
    let shape = match (args.f, args.levels) {
        (_, Some(l)) => Shape::from_levels(args.c, l)?,
        (f, None) => Shape::from_growth(args.c, f.unwrap_or(10.0))?,
    };
    let designs = args.design.designs();
    let mut rows = Vec::new();
    for &d in &designs {
        rows.push((
            d.evaluate(&params, &shape)?,
            vat::optimize(d, &params, args.c)?,
        ));
    }
    if args.json {
        let out: Vec<_> = rows
            .iter()
            .map(|(at, opt)| serde_json::json!({ "params": params, "at": at, "optimum": opt }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }

    println!(
        "VAT model (paper 003): a = {}, r = {}, C = S_l/S_0 = {}, at f = {:.3}, l = {:.3}",
        params.a,
        params.r,
        args.c,
        shape.growth(),
        shape.levels()
    );
    if designs.iter().any(|d| d.uses_value_log()) {
        println!("  key/value size ratio p = {}", params.p);
    }
    if designs.contains(&Design::Sst) {
        println!("  table/memtable size ratio B/S_0 = {}", params.table_ratio);
    }
    println!(
        "  space amplification of intermediate levels (1/f + ... + 1/f^l) = {:.1}%",
        100.0 * shape.space_amplification()
    );
    if designs.len() == 1 {
        let (at, opt) = &rows[0];
        println!();
        println!("{}", at.design.describe());
        println!(
            "  D / S_l   = {:8.3}   bytes moved per byte of data",
            at.data_ratio
        );
        println!(
            "  T / T_opt = {:8.3}   time over a sequential append",
            at.cost
        );
        println!();
        println!("optimum for C = {}:", args.c);
        print_optimum("  continuous ", &opt.continuous);
        print_optimum("  integer l  ", &opt.integer);
        match opt.closed_form {
            Some(cf) => println!(
                "  closed form  l = {:6.2}  f = {:7.2}   ({})",
                cf.levels(),
                cf.growth(),
                if cf.levels() == 1.0 {
                    "boundary: the cost only grows with l"
                } else {
                    "Lambert W, appendix B"
                }
            ),
            None => println!("  closed form  none for this design (numerical only)"),
        }
    } else {
        println!();
        println!(
            "{:<13} {:>9} {:>9} | {:>7} {:>8} {:>9} | {:>5} {:>8} {:>9}",
            "design", "D/S_l", "T/T_opt", "opt l", "opt f", "T/T_opt", "int l", "f", "T/T_opt"
        );
        for (at, opt) in &rows {
            println!(
                "{:<13} {:>9.3} {:>9.3} | {:>7.2} {:>8.2} {:>9.3} | {:>5} {:>8.2} {:>9.3}",
                at.design.name(),
                at.data_ratio,
                at.cost,
                opt.continuous.shape.levels(),
                opt.continuous.shape.growth(),
                opt.continuous.cost,
                opt.integer.shape.levels(),
                opt.integer.shape.growth(),
                opt.integer.cost
            );
        }
    }
    Ok(())
}

fn print_optimum(label: &str, e: &vat::Evaluation) {
    println!(
        "{label} l = {:6.2}  f = {:7.2}  T/T_opt = {:7.3}  space amplification {:.1}%",
        e.shape.levels(),
        e.shape.growth(),
        e.cost,
        100.0 * e.space_amplification
    );
}

fn recommend(args: RecommendArgs) -> Result<()> {
    const MIB: f64 = 1024.0 * 1024.0;
    let workload = vat::Workload {
        data_bytes: args.data_gib * 1024.0 * MIB,
        memtable_bytes: args.memtable_mib * MIB,
        key_bytes: args.key_bytes,
        value_bytes: args.value_bytes,
        table_bytes: args.table_mib * MIB,
    };
    for design in args.design.designs() {
        let rec = vat::recommend(design, args.a, args.r, &workload)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&rec)?);
        } else {
            print!("{}", rec.explanation);
            println!();
        }
    }
    Ok(())
}

const COLORS: [RGBColor; 5] = [
    RGBColor(213, 94, 0),
    RGBColor(0, 114, 178),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(80, 80, 80),
];

fn plot(args: PlotArgs) -> Result<()> {
    harness::fonts::init_fonts()?;
    harness::outpath::ensure_dir(&args.out)?;
    for fig in vat::figures::all()? {
        let path = args.out.join(format!("{}.png", fig.name));
        draw_figure(&fig, &path).with_context(|| format!("drawing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn draw_figure(fig: &Figure, path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, (1500, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(&fig.caption, ("sans-serif", 28))?;
    let halves = root.split_evenly((1, fig.panels.len()));
    for (panel, area) in fig.panels.iter().zip(halves.iter()) {
        draw_panel(panel, area)?;
    }
    root.present()?;
    Ok(())
}

fn draw_panel(
    panel: &Panel,
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
) -> Result<()> {
    let (x0, x1) = panel.x_range;
    let (y0, y1) = panel.y_range;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 22))
        .margin(18)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (i, series) in panel.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let style = color.stroke_width(3);
        let pieces = clip(&series.points, x0, x1, y0, y1);
        for (k, piece) in pieces.into_iter().enumerate() {
            let drawn = chart.draw_series(LineSeries::new(piece, style))?;
            if k == 0 {
                drawn.label(&series.label).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                });
            }
        }
        if panel.mark_minimum {
            if let Some(&(x, y)) = series
                .points
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .filter(|(_, y)| *y <= y1)
            {
                chart.draw_series(std::iter::once(Circle::new((x, y), 6, color.filled())))?;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(legend_position(panel))
        .label_font(("sans-serif", 17))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Puts the legend in the top third (left, middle or right) that the curves cross least.
fn legend_position(panel: &Panel) -> SeriesLabelPosition {
    let (x0, x1) = panel.x_range;
    let (y0, y1) = panel.y_range;
    let band = y1 - 0.3 * (y1 - y0);
    let mut crossings = [0usize; 3];
    for (x, y) in panel.series.iter().flat_map(|s| s.points.iter()) {
        if *y >= band && *x >= x0 && *x <= x1 {
            let third = (((x - x0) / (x1 - x0)) * 3.0).floor() as usize;
            crossings[third.min(2)] += 1;
        }
    }
    // Prefer the right, then the middle, on ties.
    let best = [2, 1, 0]
        .into_iter()
        .min_by_key(|&i| crossings[i])
        .unwrap_or(2);
    match best {
        0 => SeriesLabelPosition::UpperLeft,
        1 => SeriesLabelPosition::UpperMiddle,
        _ => SeriesLabelPosition::UpperRight,
    }
}

/// Splits a polyline into the pieces that lie inside the box, cutting each crossing segment
/// at the border so that lines end on the frame instead of spilling past it.
fn clip(points: &[(f64, f64)], x0: f64, x1: f64, y0: f64, y1: f64) -> Vec<Vec<(f64, f64)>> {
    let inside = |p: (f64, f64)| p.0 >= x0 && p.0 <= x1 && p.1 >= y0 && p.1 <= y1;
    // Point where the segment p-q meets the horizontal line y = edge.
    let cut = |p: (f64, f64), q: (f64, f64), edge: f64| {
        let t = (edge - p.1) / (q.1 - p.1);
        (p.0 + t * (q.0 - p.0), edge)
    };
    let edge_of = |p: (f64, f64)| if p.1 > y1 { y1 } else { y0 };
    let mut pieces: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current: Vec<(f64, f64)> = Vec::new();
    for (i, &p) in points.iter().enumerate() {
        if !(p.0 >= x0 && p.0 <= x1) {
            continue;
        }
        let prev = i.checked_sub(1).map(|j| points[j]);
        match (inside(p), prev) {
            (true, Some(q)) if !inside(q) && q.0 >= x0 => {
                current.push(cut(q, p, edge_of(q)));
                current.push(p);
            }
            (true, _) => current.push(p),
            (false, Some(q)) if inside(q) => {
                current.push(cut(q, p, edge_of(p)));
                pieces.push(std::mem::take(&mut current));
            }
            (false, _) => {}
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces.retain(|p| p.len() >= 2);
    pieces
}

#[cfg(test)]
mod tests {
    use super::{clip, plot, PlotArgs};

    #[test]
    fn plot_writes_every_figure_as_png() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("figs");
        plot(PlotArgs { out: out.clone() }).unwrap();
        for name in ["fig2", "fig4", "fig5", "fig6"] {
            let bytes = std::fs::read(out.join(format!("{name}.png"))).unwrap();
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name}");
            assert!(bytes.len() > 20_000, "{name} is suspiciously small");
        }
    }

    #[test]
    fn clip_cuts_at_the_top_edge() {
        let pts = [(0.0, 200.0), (1.0, 50.0), (2.0, 10.0), (3.0, 150.0)];
        let pieces = clip(&pts, 0.0, 3.0, 0.0, 100.0);
        assert_eq!(pieces.len(), 1);
        let p = &pieces[0];
        assert_eq!(p.first().unwrap().1, 100.0);
        assert!((p.first().unwrap().0 - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(p.last().unwrap().1, 100.0);
        assert!(p.iter().all(|&(_, y)| y <= 100.0));
    }
}
