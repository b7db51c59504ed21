//! PNG plots of benchmark results: amplification over a run, and bars per engine.

use super::report::Sample;
use anyhow::{anyhow, Context, Result};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing plot: {e}")
}

/// Two panels over user data written: write amplification (cumulative engine bytes / user
/// bytes) and space amplification (disk bytes / live user bytes).
/// A dashed vertical line marks the end of the load phase at `load_end` user bytes.
pub fn amplification_over_run(
    path: &Path,
    title: &str,
    samples: &[Sample],
    load_end: Option<u64>,
) -> Result<()> {
    crate::fonts::init_fonts()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let root = BitMapBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(err)?;
    let panels = root.split_evenly((1, 2));
    let max_user = samples
        .iter()
        .map(|s| s.user_bytes_written)
        .max()
        .unwrap_or(0) as f64;
    let (unit, unit_name) = if max_user >= 4.0 * GIB {
        (GIB, "GiB")
    } else {
        (MIB, "MiB")
    };
    let x_max = (max_user / unit).max(1e-9) * 1.02;
    let x_desc = format!("user data written ({unit_name})");

    let wa: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.user_bytes_written > 0)
        .map(|s| (s.user_bytes_written as f64 / unit, s.write_amplification))
        .collect();
    let sa: Vec<(f64, f64)> = samples
        .iter()
        .filter_map(|s| Some((s.user_bytes_written as f64 / unit, s.space_amplification?)))
        .filter(|(_, y)| y.is_finite())
        .collect();
    let load_end = load_end.map(|b| b as f64 / unit).filter(|x| *x < x_max);
    line_panel(
        &panels[0],
        "write amplification",
        &x_desc,
        x_max,
        &wa,
        &BLUE,
        load_end,
    )?;
    line_panel(
        &panels[1],
        "space amplification",
        &x_desc,
        x_max,
        &sa,
        &RED,
        load_end,
    )?;
    root.present().map_err(err)?;
    Ok(())
}

fn line_panel(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    name: &str,
    x_desc: &str,
    x_max: f64,
    points: &[(f64, f64)],
    color: &RGBColor,
    load_end: Option<f64>,
) -> Result<()> {
    let y_max = points.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(name, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(name)
        .x_label_formatter(&|x| short(*x))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()
        .map_err(err)?;
    if let Some(x) = load_end {
        let dashes = (0..40).map(|i| {
            let (a, b) = (i as f64 / 40.0 * y_max, (i as f64 + 0.5) / 40.0 * y_max);
            PathElement::new(vec![(x, a), (x, b)], BLACK.mix(0.5))
        });
        chart.draw_series(dashes).map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                "load | run",
                (x, y_max * 0.97),
                TextStyle::from(("sans-serif", 14).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            )))
            .map_err(err)?;
    }
    chart
        .draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))
        .map_err(err)?;
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
        .map_err(err)?;
    if let Some(&(x, y)) = points.last() {
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{y:.2}x"),
                (x * 0.86, y + y_max * 0.04),
                ("sans-serif", 16).into_font(),
            )))
            .map_err(err)?;
    }
    Ok(())
}

/// One bar chart panel: a value per engine.
pub struct BarPanel {
    pub title: String,
    pub values: Vec<Option<f64>>,
    /// Text drawn above each bar.
    pub labels: Vec<String>,
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// A grid of bar charts, one bar per engine in each, engines in the same colors.
pub fn bars(path: &Path, title: &str, engines: &[String], panels: &[BarPanel]) -> Result<()> {
    crate::fonts::init_fonts()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let cols = 2;
    let rows = panels.len().div_ceil(cols);
    let root = BitMapBackend::new(path, (1300, 480 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(err)?;
    let areas = root.split_evenly((rows, cols));
    // A discrete u32 range includes its end: 0..n-1 has n segments.
    let n = engines.len() as u32;
    for (panel, area) in panels.iter().zip(areas.iter()) {
        let y_max = panel
            .values
            .iter()
            .flatten()
            .copied()
            .fold(0.0f64, f64::max)
            .max(1e-9)
            * 1.18;
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d((0..n.saturating_sub(1)).into_segmented(), 0f64..y_max)
            .map_err(err)?;
        let label = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                engines.get(*i as usize).cloned().unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(engines.len())
            .x_label_formatter(&label)
            .x_label_style(("sans-serif", 14))
            .y_label_formatter(&|y| short(*y))
            .draw()
            .map_err(err)?;
        for (i, v) in panel.values.iter().enumerate() {
            let Some(v) = *v else { continue };
            let i = i as u32;
            let color = PALETTE[i as usize % PALETTE.len()];
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), v),
                ],
                color.filled(),
            );
            bar.set_margin(0, 0, 14, 14);
            chart.draw_series(std::iter::once(bar)).map_err(err)?;
            if let Some(text) = panel.labels.get(i as usize) {
                chart
                    .draw_series(std::iter::once(Text::new(
                        text.clone(),
                        (SegmentValue::CenterOf(i), v + y_max * 0.02),
                        TextStyle::from(("sans-serif", 15).into_font())
                            .pos(Pos::new(HPos::Center, VPos::Bottom)),
                    )))
                    .map_err(err)?;
            }
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Axis numbers: 1.5K, 2M, 0.25.
fn short(y: f64) -> String {
    if y >= 1e9 {
        format!("{:.1}G", y / 1e9)
    } else if y >= 1e6 {
        format!("{:.1}M", y / 1e6)
    } else if y >= 1e4 {
        format!("{:.0}K", y / 1e3)
    } else if y >= 10.0 {
        format!("{y:.0}")
    } else {
        format!("{y:.2}")
    }
}

/// One GC job of a lifetime policy, as the plot needs it (from the engine's report).
pub struct LifetimePoint {
    pub seq: f64,
    pub l_s: f64,
    pub l_l: f64,
    pub l_d: f64,
    /// Invalid share of the job's input per class (default, short, long).
    pub invalid: [Option<f64>; 3],
}

/// Paper 000 Fig. 8-9: the lifetime thresholds after each GC job, and the invalid ratio
/// GC found per file class, over the run (in sequence numbers).
pub fn lifetime_over_run(path: &Path, title: &str, points: &[LifetimePoint]) -> Result<()> {
    crate::fonts::init_fonts()?;
    let root = BitMapBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(err)?;
    let panels = root.split_evenly((1, 2));
    let x_max = points.iter().map(|p| p.seq).fold(1.0, f64::max) * 1.02;
    let y_max = points
        .iter()
        .map(|p| p.l_l.max(p.l_s).max(p.l_d))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&panels[0])
        .caption("lifetime thresholds", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(65)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("sequence number")
        .y_desc("TTL (sequence numbers)")
        .x_label_formatter(&|x| short(*x))
        .y_label_formatter(&|y| short(*y))
        .draw()
        .map_err(err)?;
    type Series = (&'static str, fn(&LifetimePoint) -> f64, RGBColor);
    let series: [Series; 3] = [
        ("l_s", |p| p.l_s, BLUE),
        ("l_l", |p| p.l_l, RED),
        ("l_d", |p| p.l_d, GREEN),
    ];
    for (name, f, color) in series {
        chart
            .draw_series(LineSeries::new(points.iter().map(|p| (p.seq, f(p))), color))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    let mut chart = ChartBuilder::on(&panels[1])
        .caption("GC invalid ratio per class", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..x_max, 0f64..1.05f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("sequence number")
        .y_desc("invalid ratio")
        .x_label_formatter(&|x| short(*x))
        .draw()
        .map_err(err)?;
    for (i, (name, color)) in [("default", GREEN), ("short", BLUE), ("long", RED)]
        .into_iter()
        .enumerate()
    {
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| Some((p.seq, p.invalid[i]?)))
            .collect();
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| Circle::new((x + 9, y), 3, color.filled()));
    }
    legend(&mut chart)?;
    root.present().map_err(err)?;
    Ok(())
}

/// The series labels, boxed, in the chart's corner.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// One engine on the write/space plane.
pub struct PlanePoint {
    pub name: String,
    /// Space amplification (x) and total bytes written / user bytes (y).
    pub space: f64,
    pub write: f64,
    /// The space-amplification target it ran at, if its policy has one.
    pub target: Option<f64>,
}

/// The write/space plane: every engine a labelled point; engines named `base@target`
/// (one policy at several space-amplification targets) joined into one curve per base, in
/// the order of their targets (`base` itself at the target it ran at), one curve per WAL
/// design (`+vwal`). Lower and further left is better.
pub fn write_space_plane(path: &Path, title: &str, points: &[PlanePoint]) -> Result<()> {
    crate::fonts::init_fonts()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let pts: Vec<&PlanePoint> = points
        .iter()
        .filter(|p| p.space.is_finite() && p.write.is_finite())
        .collect();
    if pts.is_empty() {
        return Ok(());
    }
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for p in &pts {
        x0 = x0.min(p.space);
        x1 = x1.max(p.space);
        y0 = y0.min(p.write);
        y1 = y1.max(p.write);
    }
    let pad = |a: f64, b: f64| ((b - a) * 0.15).max(0.05);
    let (px, py) = (pad(x0, x1), pad(y0, y1));
    let root = BitMapBackend::new(path, (1000, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((x0 - px)..(x1 + px), (y0 - py)..(y1 + py))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("space amplification (disk bytes / live bytes, mean over the run)")
        .y_desc("bytes written / user bytes (WAL included)")
        .draw()
        .map_err(err)?;
    // One curve per policy and design: `halflife-lifetime@1.5+vwal` is target 1.5 on the
    // curve `halflife-lifetime+vwal`, with the default target's point on it too.
    let split = |name: &str| -> (String, Option<f64>) {
        let (name, suffix) = match name.split_once('+') {
            Some((n, s)) => (n, format!("+{s}")),
            None => (name, String::new()),
        };
        match name.split_once('@') {
            Some((base, t)) => (format!("{base}{suffix}"), t.parse().ok()),
            None => (format!("{name}{suffix}"), None),
        }
    };
    let mut bases: Vec<String> = Vec::new();
    for p in &pts {
        let (base, target) = split(&p.name);
        if target.is_some() && !bases.contains(&base) {
            bases.push(base);
        }
    }
    for (i, base) in bases.iter().enumerate() {
        let mut curve: Vec<(f64, f64, f64)> = pts
            .iter()
            .filter_map(|p| {
                let (b, target) = split(&p.name);
                let t = p
                    .target
                    .or(target)
                    .unwrap_or(engine::GcTrigger::DEFAULT_SPACE_AMP);
                (&b == base).then_some((t, p.space, p.write))
            })
            .collect();
        curve.sort_by(|a, b| a.0.total_cmp(&b.0));
        let curve: Vec<(f64, f64)> = curve.into_iter().map(|(_, x, y)| (x, y)).collect();
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(curve, color.stroke_width(2)))
            .map_err(err)?
            .label(base.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    for p in &pts {
        chart
            .draw_series(std::iter::once(Circle::new(
                (p.space, p.write),
                5,
                BLACK.filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                p.name
                    .strip_prefix("halflife-")
                    .unwrap_or(&p.name)
                    .to_string(),
                (p.space, p.write),
                ("sans-serif", 14)
                    .into_font()
                    .into_text_style(&root)
                    .pos(Pos::new(HPos::Left, VPos::Bottom)),
            )))
            .map_err(err)?;
    }
    if !bases.is_empty() {
        legend(&mut chart)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
