//! The inputs of the model: what the device and the store's merge policy do ([`Params`]) and
//! how the tree is shaped ([`Shape`]).
//!
//! The model fixes `C = S_l / S_0` (last level over the in-memory level) and ties the growth
//! factor `f` and the level count `l` by `f^l = C`: choosing one determines the other.
//! Both are real numbers here, as in the paper; an engine can only build an integer number of
//! levels, which [`crate::optimize`] reports separately.

use crate::error::{Result, VatError};
use serde::Serialize;

/// Device and design parameters, all dimensionless.
///
/// Fields are public so that measured values can be dropped in; every function of the crate
/// checks them with [`Params::validate`] before use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Params {
    /// Merge amplification `a` in [0, 1]: the fraction of the lower level that a merge reads
    /// and writes (1 for classic leveling over uniform keys, 0 for sorted input).
    pub a: f64,
    /// Achieved throughput `r` in (0, 1]: device throughput at the store's I/O size and queue
    /// depth, divided by its sequential throughput.
    pub r: f64,
    /// Key to value size ratio `p = K/V` (> 0). Only the value-log designs use it.
    pub p: f64,
    /// Table file size over memtable size, `B / S_0` (> 0). Only per-file compaction uses it.
    pub table_ratio: f64,
}

impl Default for Params {
    /// Classic leveling on a device at full throughput (`a = r = 1`), 1% keys, tables as
    /// large as the memtable.
    fn default() -> Self {
        Params {
            a: 1.0,
            r: 1.0,
            p: 0.01,
            table_ratio: 1.0,
        }
    }
}

impl Params {
    /// Parameters with the given `a` and `r` and the defaults for the rest.
    pub fn new(a: f64, r: f64) -> Result<Params> {
        let params = Params {
            a,
            r,
            ..Params::default()
        };
        params.validate()?;
        Ok(params)
    }

    /// Sets the key to value size ratio `p`.
    pub fn with_key_value_ratio(mut self, p: f64) -> Result<Params> {
        self.p = p;
        self.validate()?;
        Ok(self)
    }

    /// Sets the table file size relative to the memtable, `B / S_0`.
    pub fn with_table_ratio(mut self, table_ratio: f64) -> Result<Params> {
        self.table_ratio = table_ratio;
        self.validate()?;
        Ok(self)
    }

    /// Checks every field against its range.
    pub fn validate(&self) -> Result<()> {
        if !(self.a.is_finite() && (0.0..=1.0).contains(&self.a)) {
            return Err(VatError::MergeAmplification(self.a));
        }
        if !(self.r.is_finite() && self.r > 0.0 && self.r <= 1.0) {
            return Err(VatError::Throughput(self.r));
        }
        if !(self.p.is_finite() && self.p > 0.0) {
            return Err(VatError::KeyValueRatio(self.p));
        }
        if !(self.table_ratio.is_finite() && self.table_ratio > 0.0) {
            return Err(VatError::TableRatio(self.table_ratio));
        }
        Ok(())
    }
}

/// Slack allowed when checking `l >= 1`, so that `f = C` (exactly one level) is accepted
/// despite rounding in `ln C / ln f`.
const LEVEL_EPS: f64 = 1e-9;

/// The shape of the tree: size ratio `C`, level count `l` and growth factor `f`, with
/// `f^l = C`, `f > 1` and `l >= 1`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Shape {
    c: f64,
    levels: f64,
    growth: f64,
}

impl Shape {
    /// The shape with growth factor `f`: `l = ln C / ln f`.
    pub fn from_growth(c: f64, f: f64) -> Result<Shape> {
        check_c(c)?;
        if !(f.is_finite() && f > 1.0) {
            return Err(VatError::GrowthFactor(f));
        }
        let levels = c.ln() / f.ln();
        if levels < 1.0 - LEVEL_EPS {
            return Err(VatError::GrowthExceedsSizeRatio { f, c });
        }
        Ok(Shape {
            c,
            levels: levels.max(1.0),
            growth: f,
        })
    }

    /// The shape with `l` levels: `f = C^(1/l)`.
    pub fn from_levels(c: f64, l: f64) -> Result<Shape> {
        check_c(c)?;
        if !(l.is_finite() && l >= 1.0) {
            return Err(VatError::Levels(l));
        }
        Ok(Shape {
            c,
            levels: l,
            growth: c.powf(1.0 / l),
        })
    }

    /// `C = S_l / S_0`.
    pub fn size_ratio(&self) -> f64 {
        self.c
    }

    /// `l`, the number of levels below the in-memory one (real-valued).
    pub fn levels(&self) -> f64 {
        self.levels
    }

    /// `f`, the size ratio of adjacent levels.
    pub fn growth(&self) -> f64 {
        self.growth
    }

    /// Space amplification of the intermediate levels (excluding the user data itself):
    /// `(S_0 + ... + S_{l-1}) / S_l = 1/f + 1/f^2 + ... + 1/f^l`, summed in closed form as
    /// `(1 - f^-l) / (f - 1)`. It assumes every intermediate level is full of data that a
    /// later merge will discard, so it is an upper bound for an update-heavy workload.
    pub fn space_amplification(&self) -> f64 {
        let f = self.growth;
        (1.0 - f.powf(-self.levels)) / (f - 1.0)
    }
}

pub(crate) fn check_c(c: f64) -> Result<()> {
    if c.is_finite() && c > 1.0 {
        Ok(())
    } else {
        Err(VatError::SizeRatio(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_and_levels_are_tied_by_c() {
        let s = Shape::from_growth(1000.0, 10.0).unwrap();
        assert!((s.levels() - 3.0).abs() < 1e-12);
        let s = Shape::from_levels(1000.0, 3.0).unwrap();
        assert!((s.growth() - 10.0).abs() < 1e-9);
        // f = C is exactly one level and must be accepted.
        let s = Shape::from_growth(64.0, 64.0).unwrap();
        assert_eq!(s.levels(), 1.0);
    }

    #[test]
    fn bad_shapes_are_typed_errors() {
        assert_eq!(
            Shape::from_growth(1000.0, 1.0),
            Err(VatError::GrowthFactor(1.0))
        );
        assert_eq!(
            Shape::from_growth(1000.0, 0.5),
            Err(VatError::GrowthFactor(0.5))
        );
        assert_eq!(
            Shape::from_growth(10.0, 20.0),
            Err(VatError::GrowthExceedsSizeRatio { f: 20.0, c: 10.0 })
        );
        assert_eq!(Shape::from_levels(1000.0, 0.5), Err(VatError::Levels(0.5)));
        assert_eq!(Shape::from_levels(1.0, 2.0), Err(VatError::SizeRatio(1.0)));
        assert!(matches!(
            Shape::from_levels(f64::NAN, 2.0),
            Err(VatError::SizeRatio(_))
        ));
    }

    #[test]
    fn bad_params_are_typed_errors() {
        assert_eq!(
            Params::new(-0.1, 1.0),
            Err(VatError::MergeAmplification(-0.1))
        );
        assert_eq!(
            Params::new(1.5, 1.0),
            Err(VatError::MergeAmplification(1.5))
        );
        assert_eq!(Params::new(1.0, 0.0), Err(VatError::Throughput(0.0)));
        assert_eq!(Params::new(1.0, 1.2), Err(VatError::Throughput(1.2)));
        let ok = Params::new(0.0, 0.5).unwrap();
        assert_eq!(
            ok.with_key_value_ratio(0.0),
            Err(VatError::KeyValueRatio(0.0))
        );
        assert_eq!(ok.with_table_ratio(-1.0), Err(VatError::TableRatio(-1.0)));
    }

    #[test]
    fn space_amplification_matches_section_6() {
        // Section 6: f = 4 costs more than 25% extra space, f = 10 about 10%, with C = 1000.
        let f4 = Shape::from_growth(1000.0, 4.0)
            .unwrap()
            .space_amplification();
        let f10 = Shape::from_growth(1000.0, 10.0)
            .unwrap()
            .space_amplification();
        assert!(f4 > 0.25 && f4 < 0.34, "{f4}");
        assert!((f10 - 0.111).abs() < 1e-3, "{f10}");
        // Against the explicit sum for an integer level count.
        let s = Shape::from_levels(1000.0, 3.0).unwrap();
        let sum: f64 = (1..=3).map(|i| 10f64.powi(-i)).sum();
        assert!((s.space_amplification() - sum).abs() < 1e-12);
    }
}
