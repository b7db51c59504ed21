//! The curves of the paper's model figures (2, 4, 5 and 6) as data, so that drawing them is a
//! plotting concern only and the numbers behind every picture are tested here.
//!
//! The paper does not print every parameter of its figures. Where it does not, the values
//! chosen are stated in the panel title: `C = 1000` throughout (section 6 quotes its numbers
//! for that ratio, and Fig. 2(a)'s "from about 25x to below 10x" matches it), the `a`, `r`,
//! `p` and `C` sets spanning the ranges the text discusses.

use crate::design::Design;
use crate::error::Result;
use crate::lsm;
use crate::optimum::optimize;
use crate::params::{Params, Shape};
use serde::Serialize;

/// Data-set to memory ratio used where a figure does not vary it.
pub const C: f64 = 1000.0;

/// One labelled curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// One panel: axes, ranges and curves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_range: (f64, f64),
    /// The visible y range; curves leaving it are clipped when drawn.
    pub y_range: (f64, f64),
    pub series: Vec<Series>,
    /// Whether to mark each curve's minimum (cost curves) or not (benefit curves).
    pub mark_minimum: bool,
}

/// A figure of one or more panels, saved as one image.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// File stem, e.g. `fig2`.
    pub name: String,
    pub caption: String,
    pub panels: Vec<Panel>,
}

/// All model figures, in paper order.
pub fn all() -> Result<Vec<Figure>> {
    Ok(vec![fig2()?, fig4()?, fig5()?, fig6()?])
}

/// `n` points from `lo` to `hi`, evenly spaced.
fn linspace(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = f64> {
    (0..n).map(move |i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
}

const N: usize = 400;

/// `T/T_opt` of `design` against the level count, `f = C^(1/l)`.
fn cost_vs_levels(design: Design, params: &Params, c: f64, max_l: f64) -> Result<Vec<(f64, f64)>> {
    linspace(1.0, max_l, N)
        .map(|l| Ok((l, design.cost(params, &Shape::from_levels(c, l)?)?)))
        .collect()
}

/// `T/T_opt` of `design` against the growth factor, `l = log_f C`.
fn cost_vs_growth(
    design: Design,
    params: &Params,
    c: f64,
    f: (f64, f64),
) -> Result<Vec<(f64, f64)>> {
    linspace(f.0, f.1.min(c), N)
        .map(|f| Ok((f, design.cost(params, &Shape::from_growth(c, f)?)?)))
        .collect()
}

/// Fig. 2: leveling cost against levels, (a) for several `a` at `r = 1`, (b) for several
/// `r` at `a = 1`.
pub fn fig2() -> Result<Figure> {
    let mut a_series = Vec::new();
    for a in [1.0, 0.7, 0.5, 0.3, 0.1] {
        let p = Params::new(a, 1.0)?;
        a_series.push(Series {
            label: format!("a = {a}"),
            points: cost_vs_levels(Design::Leveling, &p, C, 14.0)?,
        });
    }
    let mut r_series = Vec::new();
    for r in [1.0, 0.9, 0.7, 0.5, 0.3] {
        let p = Params::new(1.0, r)?;
        r_series.push(Series {
            label: format!("r = {r}"),
            points: cost_vs_levels(Design::Leveling, &p, C, 14.0)?,
        });
    }
    let panel = |title: &str, y_max: f64, series| Panel {
        title: title.to_string(),
        x_label: "number of levels l".into(),
        y_label: "T / T_opt".into(),
        x_range: (1.0, 14.0),
        y_range: (0.0, y_max),
        series,
        mark_minimum: true,
    };
    Ok(Figure {
        name: "fig2".into(),
        caption: "Fig. 2: VAT cost of leveling (Eq. 5)".into(),
        panels: vec![
            panel("(a) r = 1, C = 1000", 100.0, a_series),
            panel("(b) a = 1, C = 1000", 130.0, r_series),
        ],
    })
}

/// Fig. 4: (a) gain of a value log over values in place against `a`, each at the optimal
/// shape (the same for both), for several `p`; (b) gain of tiering over leveling against `a`
/// at the same growth factor, for several `f`.
pub fn fig4() -> Result<Figure> {
    let a_values: Vec<f64> = linspace(0.02, 1.0, 99).collect();
    let mut log_series = Vec::new();
    for p in [1.0, 0.1, 0.01] {
        let mut points = Vec::new();
        for &a in &a_values {
            let params = Params::new(a, 1.0)?.with_key_value_ratio(p)?;
            let shape = optimize(Design::Leveling, &params, C)?.continuous.shape;
            let gain = Design::Leveling.cost(&params, &shape)?
                / Design::LevelingLog.cost(&params, &shape)?;
            points.push((a, gain));
        }
        log_series.push(Series {
            label: format!("p = {p}"),
            points,
        });
    }
    let mut tier_series = Vec::new();
    for f in [4.0, 8.0, 10.0, 16.0] {
        let shape = Shape::from_growth(C, f)?;
        let mut points = Vec::new();
        for &a in &a_values {
            let params = Params::new(a, 1.0)?;
            let gain =
                Design::Leveling.cost(&params, &shape)? / Design::Tiering.cost(&params, &shape)?;
            points.push((a, gain));
        }
        tier_series.push(Series {
            label: format!("f = {f}"),
            points,
        });
    }
    Ok(Figure {
        name: "fig4".into(),
        caption: "Fig. 4: amplification gain of a value log and of tiering".into(),
        panels: vec![
            Panel {
                title: "(a) in place / value log, optimal l, r = 1, C = 1000".into(),
                x_label: "merge amplification a".into(),
                y_label: "gain (x)".into(),
                x_range: (0.0, 1.0),
                y_range: (0.0, 20.0),
                series: log_series,
                mark_minimum: false,
            },
            Panel {
                title: "(b) leveling / tiering, same f, r = 1, C = 1000".into(),
                x_label: "merge amplification a".into(),
                y_label: "gain (x)".into(),
                x_range: (0.0, 1.0),
                y_range: (0.0, 12.0),
                series: tier_series,
                mark_minimum: false,
            },
        ],
    })
}

/// Fig. 5: tiering cost against the growth factor, (a) values in place for several `C`,
/// (b) values in a log for several `p`.
pub fn fig5() -> Result<Figure> {
    let params = Params::new(1.0, 1.0)?;
    let mut in_place = Vec::new();
    for c in [1e2, 1e3, 1e4, 1e5] {
        in_place.push(Series {
            label: format!("C = {c}"),
            points: cost_vs_growth(Design::Tiering, &params, c, (2.0, 40.0))?,
        });
    }
    let mut log = Vec::new();
    for p in [1.0, 0.1, 0.01] {
        let params = params.with_key_value_ratio(p)?;
        log.push(Series {
            label: format!("p = {p}"),
            points: cost_vs_growth(Design::TieringLog, &params, C, (2.0, 40.0))?,
        });
    }
    Ok(Figure {
        name: "fig5".into(),
        caption: "Fig. 5: VAT cost of tiering (Eq. 9-10), r = 1".into(),
        panels: vec![
            Panel {
                title: "(a) tiering, values in place".into(),
                x_label: "growth factor f".into(),
                y_label: "T / T_opt".into(),
                x_range: (2.0, 40.0),
                y_range: (0.0, 35.0),
                series: in_place,
                mark_minimum: false,
            },
            Panel {
                title: "(b) tiering, values in a log, C = 1000".into(),
                x_label: "growth factor f".into(),
                y_label: "T / T_opt".into(),
                x_range: (2.0, 40.0),
                y_range: (0.0, 12.0),
                series: log,
                mark_minimum: false,
            },
        ],
    })
}

/// Fig. 6: cost against levels for several `C`, (a) the LSM-tree cost `2lf + 2l - 1`,
/// (b) VAT leveling with `a = r = 1`.
pub fn fig6() -> Result<Figure> {
    let params = Params::default();
    let mut lsm_series = Vec::new();
    let mut vat_series = Vec::new();
    for c in [1e1, 1e2, 1e3, 1e4, 1e5] {
        let mut points = Vec::new();
        for l in linspace(1.0, 20.0, N) {
            points.push((l, lsm::cost(&Shape::from_levels(c, l)?)));
        }
        lsm_series.push(Series {
            label: format!("C = {c}"),
            points,
        });
        vat_series.push(Series {
            label: format!("C = {c}"),
            points: cost_vs_levels(Design::Leveling, &params, c, 20.0)?,
        });
    }
    let panel = |title: &str, y_max: f64, series| Panel {
        title: title.to_string(),
        x_label: "number of levels l".into(),
        y_label: "amplification".into(),
        x_range: (1.0, 20.0),
        y_range: (0.0, y_max),
        series,
        mark_minimum: true,
    };
    Ok(Figure {
        name: "fig6".into(),
        caption: "Fig. 6: amplification against levels for several C = S_l / S_0".into(),
        panels: vec![
            panel("(a) LSM-tree: 2lf + 2l - 1", 200.0, lsm_series),
            panel("(b) VAT leveling, a = r = 1", 100.0, vat_series),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn min_point(s: &Series) -> (f64, f64) {
        s.points
            .iter()
            .copied()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap()
    }

    #[test]
    fn every_figure_has_two_populated_panels() {
        for fig in all().unwrap() {
            assert_eq!(fig.panels.len(), 2, "{}", fig.name);
            for p in &fig.panels {
                assert!(p.series.len() >= 3, "{}: {}", fig.name, p.title);
                for s in &p.series {
                    assert!(s.points.len() > 50);
                    assert!(s.points.iter().all(|(x, y)| x.is_finite() && y.is_finite()));
                }
            }
        }
    }

    #[test]
    fn fig2a_minima_fall_with_a() {
        let fig = fig2().unwrap();
        let minima: Vec<(f64, f64)> = fig.panels[0].series.iter().map(min_point).collect();
        // a = 1 first: ~23.8 at ~5.4 levels; each lower a has a lower, earlier minimum.
        assert!((minima[0].1 - 23.8).abs() < 0.1, "{minima:?}");
        assert!((minima[0].0 - 5.4).abs() < 0.05, "{minima:?}");
        for w in minima.windows(2) {
            assert!(w[1].1 < w[0].1 && w[1].0 <= w[0].0, "{minima:?}");
        }
        // The left branch is steeper: two levels cost more than 50x at a = 1.
        let at_2 = fig.panels[0].series[0]
            .points
            .iter()
            .find(|(l, _)| *l >= 2.0)
            .unwrap();
        assert!(at_2.1 > 50.0);
    }

    #[test]
    fn fig2b_scales_by_one_over_r() {
        let fig = fig2().unwrap();
        let s = &fig.panels[1].series;
        for (p1, p05) in s[0].points.iter().zip(&s[3].points) {
            assert!((p05.1 - p1.1 / 0.5).abs() < 1e-9);
        }
    }

    #[test]
    fn fig5a_tiering_flattens_past_f_10() {
        // Section 6: around f = 10 further growth buys little.
        let s = &fig5().unwrap().panels[0].series[1]; // C = 1000
        let at = |f: f64| s.points.iter().find(|(x, _)| *x >= f).unwrap().1;
        let drop_before = at(2.0) - at(10.0);
        let drop_after = at(10.0) - at(40.0);
        assert!(
            drop_before > 4.0 * drop_after,
            "{drop_before} vs {drop_after}"
        );
    }

    #[test]
    fn fig6_optimal_levels_grow_with_c_but_f_does_not() {
        for panel in &fig6().unwrap().panels {
            let minima: Vec<(f64, f64)> = panel.series.iter().map(min_point).collect();
            for w in minima.windows(2) {
                assert!(w[1].0 > w[0].0, "{}: {minima:?}", panel.title);
            }
            // f = C^(1/l) at each minimum is about the same (3.59 for both panels).
            for (s, (l, _)) in [1e1f64, 1e2, 1e3, 1e4, 1e5].iter().zip(&minima) {
                let f = s.powf(1.0 / l);
                if *l > 1.0 {
                    assert!((f - 3.59).abs() < 0.1, "{}: C={s} f={f}", panel.title);
                }
            }
        }
    }
}
