//! The `growth_factor = auto` option: what the tree-shape model needs to know. The model
//! and the choice it makes while the database runs are in [`crate::version::shape`].

use crate::error::{Error, Result};

/// `a` assumed before any compaction measured it: the mean this engine measured under
/// leveled compaction over uniform keys in `halflife vat validate`, 0.68 to 0.72 for growth
/// factors 3 to 10 (docs/vat.md).
pub const DEFAULT_A: f64 = 0.7;
/// `r` assumed when none is configured: on the development machine fio's random writes of
/// 64 MiB (the default table size) at queue depth 30 ran as fast as sequential ones
/// (docs/vat.md, `halflife vat measure-r`), as the paper assumes for large tables.
pub const DEFAULT_R: f64 = 1.0;

/// Settings of `growth_factor = auto`.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoShapeConfig {
    /// Live data the database is expected to hold, `S_l`.
    pub expected_data_bytes: u64,
    /// Achieved device throughput `r` in (0, 1] (default [`DEFAULT_R`]).
    pub r: f64,
    /// `a` before the first compaction, in [0, 1] (default [`DEFAULT_A`]).
    pub initial_a: f64,
}

impl AutoShapeConfig {
    pub fn new(expected_data_bytes: u64) -> Self {
        AutoShapeConfig {
            expected_data_bytes,
            r: DEFAULT_R,
            initial_a: DEFAULT_A,
        }
    }

    pub fn with_r(mut self, r: f64) -> Self {
        self.r = r;
        self
    }

    /// Checks the settings against the memtable the expected data must outgrow. That auto
    /// applies to leveled compaction only is checked with the style, by
    /// [`TreeOptions::validate`](super::TreeOptions).
    pub(crate) fn validate(&self, memtable_size: usize) -> Result<()> {
        if self.expected_data_bytes <= memtable_size as u64 {
            return Err(invalid(format!(
                "expected data size {} must exceed the memtable size {}",
                self.expected_data_bytes, memtable_size
            )));
        }
        if !(self.r > 0.0 && self.r <= 1.0) {
            return Err(invalid(format!("r = {} is not in (0, 1]", self.r)));
        }
        if !(0.0..=1.0).contains(&self.initial_a) {
            return Err(invalid(format!("a = {} is not in [0, 1]", self.initial_a)));
        }
        Ok(())
    }
}

/// An invalid `growth_factor = auto` setting (the name its errors carry).
pub(crate) fn invalid(detail: String) -> Error {
    Error::invalid_option("growth_factor=auto", detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_named() {
        let memtable = 64 << 20;
        assert!(AutoShapeConfig::new(1 << 20).validate(memtable).is_err());
        let e = AutoShapeConfig::new(1 << 40)
            .with_r(0.0)
            .validate(memtable)
            .unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidOptions {
                name: "growth_factor=auto",
                ..
            }
        ));
        AutoShapeConfig::new(1 << 40).validate(memtable).unwrap();
    }
}
