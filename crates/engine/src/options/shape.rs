//! The `growth_factor = auto` option: what the tree-shape model needs to know. The model
//! and the choice it makes while the database runs are in [`crate::version::shape`].

use super::{CompactionStyle, Options};
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

    pub(crate) fn validate(&self, opts: &Options) -> Result<()> {
        let bad = |detail: String| Error::InvalidOptions {
            name: "growth_factor=auto",
            detail,
        };
        if opts.compaction_style == CompactionStyle::Tiered {
            return Err(bad(
                "tiering's model cost only falls with f (one level is optimal), so auto \
                 applies to leveled compaction only"
                    .into(),
            ));
        }
        if self.expected_data_bytes <= opts.memtable_size as u64 {
            return Err(bad(format!(
                "expected data size {} must exceed the memtable size {}",
                self.expected_data_bytes, opts.memtable_size
            )));
        }
        if !(self.r > 0.0 && self.r <= 1.0) {
            return Err(bad(format!("r = {} is not in (0, 1]", self.r)));
        }
        if !(0.0..=1.0).contains(&self.initial_a) {
            return Err(bad(format!("a = {} is not in [0, 1]", self.initial_a)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_named() {
        let o = Options {
            memtable_size: 64 << 20,
            ..Options::default()
        };
        assert!(AutoShapeConfig::new(1 << 20).validate(&o).is_err());
        assert!(AutoShapeConfig::new(1 << 40)
            .with_r(0.0)
            .validate(&o)
            .is_err());
        let tiered = Options {
            compaction_style: CompactionStyle::Tiered,
            ..o.clone()
        };
        assert!(AutoShapeConfig::new(1 << 40).validate(&tiered).is_err());
        AutoShapeConfig::new(1 << 40).validate(&o).unwrap();
    }
}
