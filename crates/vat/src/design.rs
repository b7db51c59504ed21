//! The five designs of the paper and their insert-path cost.
//!
//! Every design is reduced to one number, the bytes moved to the device until all data reach
//! the last level, divided by the data size: `D / S_l`. The cost ratio is then
//! `T / T_opt = D / (r * S_l)` (paper Eq. 2 and 11): the time the store needs at its achieved
//! throughput over the time a plain sequential append of the data would need.
//!
//! Notation: `X(l, f) = 2l - 1 + a*l*(f - 1)` is the stepped-merge traffic of Eq. 4 (each item
//! is written once per level and read once per level below the in-memory one, `2l - 1`, and
//! each merge also rewrites on average a fraction `a` of the half-full lower level,
//! `a*(f - 1)` per level).

use crate::error::{Result, VatError};
use crate::params::{Params, Shape};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A point of the design space the model describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// Leveling, values stored with the keys (Eq. 4-5).
    Leveling,
    /// Leveling with key-value separation: the tree holds keys, values go once to a log
    /// (Eq. 7-8).
    LevelingLog,
    /// Tiering, values in place: a merge rewrites only the level that spills (Eq. 9).
    Tiering,
    /// Tiering with a value log (Eq. 10).
    TieringLog,
    /// Leveling with per-file compaction, one table of size `B` at a time, so that lower
    /// levels stay nearly full (SST-VAT, Eq. 12-13, derived in appendix A.4).
    Sst,
}

impl Design {
    /// Every design, in the order the paper introduces them.
    pub const ALL: [Design; 5] = [
        Design::Leveling,
        Design::LevelingLog,
        Design::Tiering,
        Design::TieringLog,
        Design::Sst,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Design::Leveling => "leveling",
            Design::LevelingLog => "leveling-log",
            Design::Tiering => "tiering",
            Design::TieringLog => "tiering-log",
            Design::Sst => "sst",
        }
    }

    /// One line saying what the design is and which equation models it.
    pub fn describe(self) -> &'static str {
        match self {
            Design::Leveling => "leveling, values in place (Eq. 4-5)",
            Design::LevelingLog => "leveling, values in a log (Eq. 7-8)",
            Design::Tiering => "tiering, values in place (Eq. 9)",
            Design::TieringLog => "tiering, values in a log (Eq. 10)",
            Design::Sst => "leveling with per-file compaction (SST-VAT, Eq. 12-13/17)",
        }
    }

    /// Whether `a` enters the cost (tiering has no merge with the lower level).
    pub fn uses_merge_amplification(self) -> bool {
        !matches!(self, Design::Tiering | Design::TieringLog)
    }

    /// Whether `p` enters the cost.
    pub fn uses_value_log(self) -> bool {
        matches!(self, Design::LevelingLog | Design::TieringLog)
    }

    /// `D / S_l`: bytes transferred to and from the device over the data size.
    pub fn data_ratio(self, params: &Params, shape: &Shape) -> Result<f64> {
        params.validate()?;
        let (l, f, a, p) = (shape.levels(), shape.growth(), params.a, params.p);
        Ok(match self {
            Design::Leveling => stepped_traffic(a, l, f),
            Design::LevelingLog => with_value_log(p, stepped_traffic(a, l, f)),
            Design::Tiering => stepped_traffic(0.0, l, f),
            Design::TieringLog => with_value_log(p, stepped_traffic(0.0, l, f)),
            // B / S_l = (B / S_0) / C.
            Design::Sst => sst_traffic(a, l, f, params.table_ratio / shape.size_ratio()),
        })
    }

    /// `T / T_opt = D / (r * S_l)`.
    pub fn cost(self, params: &Params, shape: &Shape) -> Result<f64> {
        Ok(self.data_ratio(params, shape)? / params.r)
    }

    /// Cost, data ratio and space amplification at one shape.
    pub fn evaluate(self, params: &Params, shape: &Shape) -> Result<Evaluation> {
        let data_ratio = self.data_ratio(params, shape)?;
        Ok(Evaluation {
            design: self,
            shape: *shape,
            data_ratio,
            cost: data_ratio / params.r,
            space_amplification: shape.space_amplification(),
        })
    }
}

/// Eq. 4 divided by `S_l`: `2l - 1 - a*l + a*f*l`.
///
/// Appendix A.1 and Table 2 print the last term as `a*f`; Eq. 4, Eq. 16 with equal growth
/// factors, and the section 6 numbers (32 at f = 10) all need `a*f*l`, which is what is used.
pub fn stepped_traffic(a: f64, l: f64, f: f64) -> f64 {
    2.0 * l - 1.0 - a * l + a * f * l
}

/// Eq. 13 (with `2 a f l`, see docs/vat.md) divided by `S_l`: per-file compaction,
/// `2l - 1 + a f l B/S_l + 2 a f l - a f (1 - f^-l) / (1 - 1/f)`, for any real `l > 0`.
pub fn sst_traffic(a: f64, l: f64, f: f64, table_over_data: f64) -> f64 {
    let full_levels = (1.0 - f.powf(-l)) / (1.0 - 1.0 / f);
    2.0 * l - 1.0 + a * f * l * table_over_data + 2.0 * a * f * l - a * f * full_levels
}

/// Eq. 16: stepped traffic with a growth factor per level, `f_1 .. f_l` from the top
/// (`prod f_i = C`): `2l - 1 + a * sum (f_i - 1)`. This is how a store with an integer
/// number of levels holds a `C` that is not a power of `f`: one level takes the remainder.
pub fn stepped_traffic_factors(a: f64, factors: &[f64]) -> f64 {
    let l = factors.len() as f64;
    2.0 * l - 1.0 + a * factors.iter().map(|f| f - 1.0).sum::<f64>()
}

/// Eq. 12 with a growth factor per level (`f_1 .. f_l` from the top, `prod f_i = C`),
/// divided by `S_l`. Level `i` holds `s_i = f_1 ... f_i / C` of the data when full; the
/// merges into it touch `f_i (f_i s_(i-1) + B/S_l) / 2` while it fills and `f_i` tables per
/// table afterwards, read and written: `2l - 1 + sum_i a f_i (2 - f_i s_(i-1) + B/S_l)`.
/// With equal factors this is [`sst_traffic`].
pub fn sst_traffic_factors(a: f64, factors: &[f64], table_over_data: f64) -> f64 {
    let c: f64 = factors.iter().product();
    let mut upper = 1.0 / c;
    let mut d = 2.0 * factors.len() as f64 - 1.0;
    for &f in factors {
        d += a * f * (2.0 - f * upper + table_over_data);
        upper *= f;
    }
    d
}

/// Eq. 7-8: the tree moves only keys, `K_l = S_l * p / (1 + p)`, and every byte is appended
/// once to the log: `D / S_l = (p * X + p + 1) / (p + 1)`.
pub fn with_value_log(p: f64, key_traffic: f64) -> f64 {
    (p * key_traffic + p + 1.0) / (p + 1.0)
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Design {
    type Err = VatError;

    fn from_str(s: &str) -> Result<Design> {
        Design::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| VatError::UnknownDesign(s.to_string()))
    }
}

/// The model evaluated at one shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Evaluation {
    pub design: Design,
    pub shape: Shape,
    /// `D / S_l`: multiply by the data size for bytes moved.
    pub data_ratio: f64,
    /// `T / T_opt`.
    pub cost: f64,
    /// `1/f + ... + 1/f^l`, see [`Shape::space_amplification`].
    pub space_amplification: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, want: f64, tol: f64) {
        assert!((x - want).abs() <= tol, "got {x}, want {want} ± {tol}");
    }

    #[test]
    fn section_6_leveling_numbers() {
        // a = r = 1, C = 1000: 32 at f = 10 and 23.91 at f = 4.
        let p = Params::default();
        let f10 = Shape::from_growth(1000.0, 10.0).unwrap();
        let f4 = Shape::from_growth(1000.0, 4.0).unwrap();
        close(Design::Leveling.cost(&p, &f10).unwrap(), 32.0, 1e-9);
        close(Design::Leveling.cost(&p, &f4).unwrap(), 23.91, 0.005);
        // ... so going from f = 4 to f = 10 costs "about 1.33x".
        let ratio =
            Design::Leveling.cost(&p, &f10).unwrap() / Design::Leveling.cost(&p, &f4).unwrap();
        close(ratio, 1.338, 0.001);
    }

    #[test]
    fn stepped_traffic_matches_the_merge_sum_of_eq_3() {
        // Eq. 3 written out for integer l, f: level i contributes its own write-out (S_l, or
        // 2 S_l below memory) plus 2a * sum_{j=1}^{f^(l-i)} ((j-1) mod f) * S_i.
        for &(a, f, l) in &[(1.0, 10u64, 3u32), (0.3, 4, 5), (0.68, 8, 2)] {
            let s_l = (f as f64).powi(l as i32);
            let mut d = 0.0;
            for i in 0..l {
                let s_i = (f as f64).powi(i as i32);
                let merges = f.pow(l - i);
                d += if i == 0 { s_l } else { 2.0 * s_l };
                let excess: u64 = (1..=merges).map(|j| (j - 1) % f).sum();
                d += 2.0 * a * excess as f64 * s_i;
            }
            close(stepped_traffic(a, l as f64, f as f64), d / s_l, 1e-9);
        }
    }

    #[test]
    fn sst_traffic_matches_the_per_file_sum_of_eq_12() {
        // Eq. 12 written out with n_i = S_i / B tables in level i: during the first f*n_i
        // one-table merges the lower level holds k tables and a merge touches k/n_i of them;
        // afterwards every merge touches f tables.
        let (a, f, l, s0, b) = (0.7, 4u32, 4u32, 8.0, 2.0);
        let s_l = s0 * (f as f64).powi(l as i32);
        let mut d = 0.0;
        for i in 0..l {
            let s_i = s0 * (f as f64).powi(i as i32);
            let n_i = s_i / b;
            let filling = (f as f64 * n_i) as u64;
            let moves = s_l / b;
            d += if i == 0 { s_l } else { 2.0 * s_l };
            let fill: f64 = (1..=filling).map(|k| k as f64 / n_i).sum();
            d += 2.0 * a * (fill + f as f64 * (moves - filling as f64)) * b;
        }
        let params = Params::new(a, 1.0)
            .unwrap()
            .with_table_ratio(b / s0)
            .unwrap();
        let shape = Shape::from_levels(s_l / s0, l as f64).unwrap();
        close(
            Design::Sst.data_ratio(&params, &shape).unwrap(),
            d / s_l,
            1e-9,
        );
    }

    #[test]
    fn per_level_factors_reduce_to_the_equal_factor_formulas() {
        for &(a, f, l, b) in &[
            (1.0, 10.0, 3usize, 0.001),
            (0.6, 4.0, 5, 0.01),
            (0.3, 7.5, 2, 0.0),
        ] {
            let factors = vec![f; l];
            close(
                stepped_traffic_factors(a, &factors),
                stepped_traffic(a, l as f64, f),
                1e-9,
            );
            close(
                sst_traffic_factors(a, &factors, b),
                sst_traffic(a, l as f64, f, b),
                1e-9,
            );
        }
        // Unequal factors: only their sum matters to stepped merging (Eq. 16), while
        // per-file merging charges a level by how full the level above it gets.
        close(
            stepped_traffic_factors(1.0, &[2.0, 10.0]),
            3.0 + 10.0,
            1e-12,
        );
        close(
            stepped_traffic_factors(1.0, &[10.0, 2.0]),
            3.0 + 10.0,
            1e-12,
        );
        // [2, 10]: s_0 = 1/20, s_1 = 1/10: 3 + 2(2 - 0.1) + 10(2 - 1) = 16.8.
        close(sst_traffic_factors(1.0, &[2.0, 10.0], 0.0), 16.8, 1e-12);
    }

    #[test]
    fn sst_compaction_costs_more_than_stepped_leveling() {
        // Section 8: merging one table at a time keeps levels nearly full, which costs more.
        let p = Params::default();
        for f in [3.0, 4.0, 10.0, 30.0] {
            let s = Shape::from_growth(1000.0, f).unwrap();
            let sst = Design::Sst.cost(&p, &s).unwrap();
            let lev = Design::Leveling.cost(&p, &s).unwrap();
            assert!(sst > lev, "f={f}: sst {sst} <= leveling {lev}");
        }
        // With a = 0 nothing of the lower level is touched: the same 2l - 1 as stepped.
        let p0 = Params::new(0.0, 1.0).unwrap();
        let s = Shape::from_growth(1000.0, 10.0).unwrap();
        close(Design::Sst.cost(&p0, &s).unwrap(), 5.0, 1e-12);
    }

    #[test]
    fn value_log_and_tiering_equations() {
        let params = Params::new(0.5, 0.8)
            .unwrap()
            .with_key_value_ratio(0.1)
            .unwrap();
        let s = Shape::from_growth(1000.0, 10.0).unwrap(); // l = 3
        let x = 2.0 * 3.0 - 1.0 - 0.5 * 3.0 + 0.5 * 10.0 * 3.0; // 18.5
        close(
            Design::LevelingLog.cost(&params, &s).unwrap(),
            (0.1 * x + 1.1) / (0.8 * 1.1),
            1e-12,
        );
        // Tiering ignores a: (2 log_f C - 1) / r.
        close(Design::Tiering.cost(&params, &s).unwrap(), 5.0 / 0.8, 1e-12);
        close(
            Design::TieringLog.cost(&params, &s).unwrap(),
            (0.1 * 5.0 + 1.1) / (0.8 * 1.1),
            1e-12,
        );
        // The log design's D counts the full data once: with p -> small it tends to 1.
        let tiny = params.with_key_value_ratio(1e-9).unwrap();
        close(
            Design::LevelingLog.data_ratio(&tiny, &s).unwrap(),
            1.0,
            1e-6,
        );
    }

    #[test]
    fn key_value_separation_limit_eq_15() {
        // a = 0, l = 1: in-place over log tends to (p + 1) / (2p + 1) < 1 for every p.
        let one_level = Shape::from_levels(1000.0, 1.0).unwrap();
        for p in [1.0, 0.1, 0.01, 0.001] {
            let params = Params::new(0.0, 0.9)
                .unwrap()
                .with_key_value_ratio(p)
                .unwrap();
            let in_place = Design::Leveling.cost(&params, &one_level).unwrap();
            let log = Design::LevelingLog.cost(&params, &one_level).unwrap();
            close(in_place / log, (p + 1.0) / (2.0 * p + 1.0), 1e-12);
            assert!(in_place < log);
        }
    }

    #[test]
    fn value_log_benefit_exceeds_10x_for_a_at_least_0_3() {
        // Section 6 / Fig. 4(a): with p = 1% a value log gains more than 10x once a >= 0.3
        // (each design at its own optimum; both optima coincide, see optimum.rs).
        for a in [0.3, 0.5, 1.0] {
            let params = Params::new(a, 1.0).unwrap();
            let best = crate::optimize(Design::Leveling, &params, 1000.0).unwrap();
            let s = best.continuous.shape;
            let gain = Design::Leveling.cost(&params, &s).unwrap()
                / Design::LevelingLog.cost(&params, &s).unwrap();
            assert!(gain > 10.0, "a={a}: gain {gain}");
        }
        let params = Params::new(0.1, 1.0).unwrap();
        let s = crate::optimize(Design::Leveling, &params, 1000.0)
            .unwrap()
            .continuous
            .shape;
        let gain = Design::Leveling.cost(&params, &s).unwrap()
            / Design::LevelingLog.cost(&params, &s).unwrap();
        assert!(gain < 10.0, "a=0.1: gain {gain}");
    }

    #[test]
    fn tiering_is_about_5x_cheaper_at_f_8() {
        // Conclusions: tiering cuts amplification ~5x against leveling (a = 1, f = 8 as in
        // Table 1); Fig. 4(b): the gain shrinks as a falls.
        let s = Shape::from_growth(1000.0, 8.0).unwrap();
        let gain = |a: f64| {
            let p = Params::new(a, 1.0).unwrap();
            Design::Leveling.cost(&p, &s).unwrap() / Design::Tiering.cost(&p, &s).unwrap()
        };
        close(gain(1.0), 5.1, 0.1);
        assert!(gain(0.25) < gain(0.5) && gain(0.5) < gain(1.0));
    }

    #[test]
    fn names_round_trip_and_unknown_is_an_error() {
        for d in Design::ALL {
            assert_eq!(d.name().parse::<Design>().unwrap(), d);
        }
        assert_eq!(
            "lsm".parse::<Design>(),
            Err(VatError::UnknownDesign("lsm".into()))
        );
    }

    #[test]
    fn invalid_params_are_rejected_by_every_design() {
        let bad = Params {
            a: 2.0,
            ..Params::default()
        };
        let s = Shape::from_growth(1000.0, 10.0).unwrap();
        for d in Design::ALL {
            assert_eq!(d.cost(&bad, &s), Err(VatError::MergeAmplification(2.0)));
        }
    }
}
