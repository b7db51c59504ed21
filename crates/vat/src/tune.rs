//! From measurements to a tree shape: the entry point for an engine or a benchmark that has
//! measured `a` and `r` and knows its sizes.
//!
//! [`recommend`] turns byte sizes into the model's ratios (`C = data / memtable`,
//! `p = key / value`, `B / S_0 = table / memtable`), finds the best integer level count and
//! its growth factor, and explains the choice in plain text.

use crate::design::{Design, Evaluation};
use crate::error::{Result, VatError};
use crate::optimum::optimize;
use crate::params::{Params, Shape};
use serde::Serialize;
use std::fmt::Write as _;

/// Sizes of the workload and of the store's components, in bytes (averages for keys and
/// values).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Workload {
    /// Expected live data size, keys and values, `S_l`.
    pub data_bytes: f64,
    /// In-memory level (memtable) size, `S_0`.
    pub memtable_bytes: f64,
    pub key_bytes: f64,
    pub value_bytes: f64,
    /// Table (SST) file size `B`; only per-file compaction uses it.
    pub table_bytes: f64,
}

impl Workload {
    fn validate(&self) -> Result<()> {
        for (what, value) in [
            ("data size", self.data_bytes),
            ("memtable size", self.memtable_bytes),
            ("key size", self.key_bytes),
            ("value size", self.value_bytes),
            ("table file size", self.table_bytes),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(VatError::Size { what, value });
            }
        }
        if self.data_bytes <= self.memtable_bytes {
            return Err(VatError::SizeRatio(self.data_bytes / self.memtable_bytes));
        }
        Ok(())
    }

    /// `C = S_l / S_0`.
    pub fn size_ratio(&self) -> f64 {
        self.data_bytes / self.memtable_bytes
    }

    /// The model parameters for measured `a` and `r`.
    pub fn params(&self, a: f64, r: f64) -> Result<Params> {
        self.validate()?;
        Params::new(a, r)?
            .with_key_value_ratio(self.key_bytes / self.value_bytes)?
            .with_table_ratio(self.table_bytes / self.memtable_bytes)
    }
}

/// What to build, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    pub params: Params,
    pub workload: Workload,
    /// The best buildable shape: an integer level count and `f = C^(1/l)`.
    pub best: Evaluation,
    /// The real-valued optimum, a lower bound on any buildable shape's cost.
    pub continuous: Evaluation,
    /// One level fewer and one more than `best` (when they exist), for comparison.
    pub neighbours: Vec<Evaluation>,
    /// Bytes moved to and from the device to load `data_bytes` at `best`.
    pub data_moved_bytes: f64,
    /// A human-readable account of the choice.
    pub explanation: String,
}

impl Recommendation {
    /// Number of on-device levels to build.
    pub fn levels(&self) -> u32 {
        self.best.shape.levels() as u32
    }

    /// Growth factor between adjacent levels.
    pub fn growth_factor(&self) -> f64 {
        self.best.shape.growth()
    }
}

/// The shape minimising `T / T_opt` for `design`, given measured merge amplification `a` and
/// achieved throughput `r` (see [`Params`] for their ranges) and the workload's sizes.
pub fn recommend(design: Design, a: f64, r: f64, workload: &Workload) -> Result<Recommendation> {
    let params = workload.params(a, r)?;
    let c = workload.size_ratio();
    let opt = optimize(design, &params, c)?;
    let best = opt.integer;
    let l = best.shape.levels();
    let mut neighbours = Vec::new();
    for other in [l - 1.0, l + 1.0] {
        if other >= 1.0 {
            neighbours.push(design.evaluate(&params, &Shape::from_levels(c, other)?)?);
        }
    }
    let data_moved_bytes = best.data_ratio * workload.data_bytes;

    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        text,
        "design: {}; C = data/memtable = {}/{} = {:.1}",
        design.describe(),
        bytes(workload.data_bytes),
        bytes(workload.memtable_bytes),
        c
    );
    let mut inputs = format!("a = {:.3}, r = {:.3}", params.a, params.r);
    if design.uses_value_log() {
        let _ = write!(inputs, ", p = key/value = {:.4}", params.p);
    }
    if design == Design::Sst {
        let _ = write!(inputs, ", B/S_0 = {:.3}", params.table_ratio);
    }
    if !design.uses_merge_amplification() {
        inputs.push_str(" (tiering never rewrites the lower level, so a has no effect)");
    }
    let _ = writeln!(text, "inputs: {inputs}");
    let _ = writeln!(
        text,
        "build {} level(s) with growth factor {:.2}: T/T_opt = {:.2}, {} moved for {} of data, \
         space amplification {:.1}%",
        l as u32,
        best.shape.growth(),
        best.cost,
        bytes(data_moved_bytes),
        bytes(workload.data_bytes),
        100.0 * best.space_amplification
    );
    for n in &neighbours {
        let _ = writeln!(
            text,
            "  {} level(s), f = {:.2}: T/T_opt = {:.2} ({:+.1}%), space amplification {:.1}%",
            n.shape.levels() as u32,
            n.shape.growth(),
            n.cost,
            100.0 * (n.cost / best.cost - 1.0),
            100.0 * n.space_amplification
        );
    }
    let _ = writeln!(
        text,
        "unconstrained optimum: l = {:.2}, f = {:.2}, T/T_opt = {:.2}",
        opt.continuous.shape.levels(),
        opt.continuous.shape.growth(),
        opt.continuous.cost
    );
    if let Some(cf) = opt.closed_form {
        let _ = writeln!(
            text,
            "closed form (Lambert W): l = {:.2}, f = {:.2}",
            cf.levels(),
            cf.growth()
        );
    }
    let why = match design {
        Design::Tiering | Design::TieringLog => {
            "tiering pays 2l - 1 per byte whatever f is, so the fewest levels win; read cost, \
             which the model ignores, is what bounds f in practice"
        }
        _ if params.a == 0.0 => {
            "with a = 0 merges never rewrite the lower level, so one level is best"
        }
        _ => {
            "fewer levels mean larger merges (a*(f-1) per level), more levels mean more \
             rewrites (2 per level); the optimum balances the two, and erring towards more \
             levels costs less than erring towards fewer"
        }
    };
    let _ = writeln!(text, "why: {why}");

    Ok(Recommendation {
        params,
        workload: *workload,
        best,
        continuous: opt.continuous,
        neighbours,
        data_moved_bytes,
        explanation: text,
    })
}

/// Formats a byte count with a binary unit.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1024.0 * 1024.0;

    fn workload() -> Workload {
        Workload {
            data_bytes: 64_000.0 * MIB,
            memtable_bytes: 64.0 * MIB,
            key_bytes: 16.0,
            value_bytes: 1024.0,
            table_bytes: 64.0 * MIB,
        }
    }

    #[test]
    fn recommends_the_integer_optimum_with_its_neighbours() {
        let rec = recommend(Design::Leveling, 1.0, 1.0, &workload()).unwrap();
        // C = 1000, a = 1: 5 levels of f = 1000^(1/5) = 3.98 (23.9 against 23.97 for 6).
        assert_eq!(rec.levels(), 5);
        assert!((rec.growth_factor() - 1000f64.powf(0.2)).abs() < 1e-9);
        assert_eq!(rec.neighbours.len(), 2);
        assert!(rec.neighbours.iter().all(|n| n.cost > rec.best.cost));
        assert!(rec.continuous.cost <= rec.best.cost);
        assert!((rec.data_moved_bytes - rec.best.data_ratio * 64_000.0 * MIB).abs() < 1.0);
        assert!(rec
            .explanation
            .contains("build 5 level(s) with growth factor 3.98"));
        assert!(rec
            .explanation
            .contains("C = data/memtable = 62.5 GiB/64.0 MiB = 1000.0"));
    }

    #[test]
    fn low_merge_amplification_wants_fewer_larger_levels() {
        let full = recommend(Design::Leveling, 1.0, 1.0, &workload()).unwrap();
        let low = recommend(Design::Leveling, 0.25, 0.91, &workload()).unwrap();
        assert!(low.levels() < full.levels());
        assert!(low.growth_factor() > full.growth_factor());
    }

    #[test]
    fn value_log_uses_the_measured_key_value_ratio() {
        let rec = recommend(Design::LevelingLog, 0.8, 1.0, &workload()).unwrap();
        assert!((rec.params.p - 16.0 / 1024.0).abs() < 1e-15);
        assert!(rec.explanation.contains("p = key/value = 0.0156"));
        // Mostly the single append of the data: well under 2x.
        assert!(rec.best.cost < 2.0, "{}", rec.best.cost);
    }

    #[test]
    fn tiering_explains_why_one_level() {
        let rec = recommend(Design::Tiering, 1.0, 1.0, &workload()).unwrap();
        assert_eq!(rec.levels(), 1);
        assert_eq!(rec.neighbours.len(), 1);
        assert!(rec.explanation.contains("a has no effect"));
    }

    #[test]
    fn bad_sizes_are_typed_errors() {
        let mut w = workload();
        w.memtable_bytes = 0.0;
        assert_eq!(
            recommend(Design::Leveling, 1.0, 1.0, &w).unwrap_err(),
            VatError::Size {
                what: "memtable size",
                value: 0.0
            }
        );
        let mut w = workload();
        w.data_bytes = w.memtable_bytes / 2.0;
        assert_eq!(
            recommend(Design::Leveling, 1.0, 1.0, &w).unwrap_err(),
            VatError::SizeRatio(0.5)
        );
        assert_eq!(
            recommend(Design::Leveling, 1.0, 0.0, &workload()).unwrap_err(),
            VatError::Throughput(0.0)
        );
    }

    #[test]
    fn byte_formatting() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(64.0 * MIB), "64.0 MiB");
    }
}
