//! The shape of the tree ([`Options::tree`](super::Options)): memtables, the L0 triggers
//! that start compactions and hold writers back, the levels and their sizes, and the
//! compaction style (RocksDB's `ColumnFamilyOptions` for the same settings); and
//! `growth_factor = auto` ([`AutoShapeConfig`]): what the tree-shape model needs to know
//! (the model and the choice it makes while the database runs are in
//! [`crate::compaction::auto_shape`]).

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// How levels below L0 are organised (paper 003 calls the two families leveling and
/// tiering).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStyle {
    /// One sorted run per level >= 1; a compaction merges files of a level with their
    /// overlaps in the next one (RocksDB's leveled compaction, per file).
    Leveled,
    /// Up to `growth_factor` overlapping sorted runs per level (L0 included); when a level
    /// holds that many runs, all of them are merged into one new run of the next level,
    /// without reading the next level (paper 003, sec. 2 and Eq. 9: merge amplification 0).
    /// See [`crate::compaction::tiered`].
    Tiered,
    /// Tiered when the key tree is a small share of the data and the GC policy's space
    /// target leaves room for its extra runs, leveled otherwise; re-derived from the
    /// database's measured sizes (see [`crate::compaction::auto_style`]). While tiered, L0 merges
    /// at the chosen run count, not at `l0_compaction_trigger`.
    #[default]
    Auto,
}

impl CompactionStyle {
    pub const NAMES: [&'static str; 3] = ["leveled", "tiered", "auto"];

    pub fn name(self) -> &'static str {
        match self {
            CompactionStyle::Leveled => "leveled",
            CompactionStyle::Tiered => "tiered",
            CompactionStyle::Auto => "auto",
        }
    }
}

impl fmt::Display for CompactionStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CompactionStyle {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "leveled" | "leveling" => Ok(CompactionStyle::Leveled),
            "tiered" | "tiering" => Ok(CompactionStyle::Tiered),
            "auto" => Ok(CompactionStyle::Auto),
            other => Err(Error::invalid_option(
                "compaction_style",
                format!("unknown style {other:?}; expected leveled, tiered or auto"),
            )),
        }
    }
}

/// Runs a tiered level holds when it is full: the growth factor, rounded, at least 2
/// (used by the compaction picker, [`crate::compaction::tiered`], and by validation).
pub fn run_trigger(growth_factor: f64) -> usize {
    (growth_factor.round() as usize).max(2)
}

/// Memtables, L0 triggers, levels and the compaction style. Defaults follow RocksDB where
/// the papers do not say otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeOptions {
    /// Bytes of user data a memtable holds before it is switched and flushed. 64 MiB,
    /// RocksDB's `write_buffer_size`: the size of an L0 table, and so of the unit every
    /// compaction starts from.
    pub memtable_size: usize,
    /// Immutable memtables waiting for flush before writers stall. 1, as RocksDB's
    /// `max_write_buffer_number = 2`: one memtable fills while the other flushes.
    pub max_immutable_memtables: usize,
    /// L0 files that start an L0 compaction. 4, RocksDB's
    /// `level0_file_num_compaction_trigger`: each read checks every L0 file.
    pub l0_compaction_trigger: usize,
    /// Writes are delayed (to `delayed_write_rate`) while L0 has this many files, before
    /// they stop at `l0_stop_writes_trigger`. 20, RocksDB's
    /// `level0_slowdown_writes_trigger`; at or above the stop trigger there is no slowdown.
    pub l0_slowdown_writes_trigger: usize,
    /// Writers stall while L0 has this many files. 36, RocksDB's
    /// `level0_stop_writes_trigger`: a lower value forces many small L0 merges into the
    /// large bottom level, each rewriting it and relocating its old values under BlobDB GC
    /// (measured in docs/bench.md).
    pub l0_stop_writes_trigger: usize,
    /// Bytes per second writes are held to while L0 is at its slowdown trigger, and while
    /// the active memtable is half full with a flush pending when no flush has been
    /// measured yet (then the measured flush rate is used: the writer fills the memtable
    /// as the flush empties the previous one, instead of stopping when it is full).
    /// 16 MiB/s, RocksDB's default `delayed_write_rate`.
    pub delayed_write_rate: u64,
    /// Leveled or tiered levels, or ([`CompactionStyle::Auto`], the default) chosen from
    /// the measured share of the key tree ([`crate::compaction::auto_style`]).
    pub compaction_style: CompactionStyle,
    /// Size ratio between adjacent levels. 10, RocksDB's
    /// `max_bytes_for_level_multiplier`; with `auto_shape`, only the value used before the
    /// first choice is made.
    pub growth_factor: f64,
    /// `growth_factor = auto`: the engine picks the growth factor from the VAT model with
    /// its measured merge amplification (see [`crate::compaction::auto_shape`]). `None`, the
    /// default: `growth_factor` as given. Leveled compaction only.
    pub auto_shape: Option<AutoShapeConfig>,
    /// Levels, L0 included. 7, RocksDB's `num_levels`: at growth factor 10 and a 256 MiB
    /// L1, room for far more data than one machine holds.
    pub num_levels: usize,
    /// Target size of L1 (static targets: L(n) = level1_max_bytes * growth_factor^(n-1));
    /// with dynamic targets, the largest target of the level L0 compacts into. 256 MiB,
    /// RocksDB's `max_bytes_for_level_base`: about L0's size at its compaction trigger.
    pub level1_max_bytes: u64,
    /// Derive level targets from the last level's actual size, so that most data sits in
    /// the last level whatever its size (true, RocksDB's default
    /// `level_compaction_dynamic_level_bytes`); see [`crate::compaction::leveled::targets`].
    pub dynamic_level_bytes: bool,
    /// Table files are cut at this size by flush and compaction. 64 MiB, RocksDB's
    /// `target_file_size_base`: a compaction's unit of work below L0.
    pub target_file_size: u64,
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            memtable_size: 64 << 20,
            max_immutable_memtables: 1,
            l0_compaction_trigger: 4,
            l0_slowdown_writes_trigger: 20,
            l0_stop_writes_trigger: 36,
            delayed_write_rate: 16 << 20,
            compaction_style: CompactionStyle::Auto,
            growth_factor: 10.0,
            auto_shape: None,
            num_levels: 7,
            level1_max_bytes: 256 << 20,
            dynamic_level_bytes: true,
            target_file_size: 64 << 20,
        }
    }
}

impl TreeOptions {
    /// Checks the group; the error names the first bad field.
    pub fn validate(&self) -> Result<()> {
        if self.memtable_size < 4096 {
            return Err(Error::invalid_option(
                "memtable_size",
                "must be at least 4096 bytes",
            ));
        }
        if self.max_immutable_memtables == 0 {
            return Err(Error::invalid_option(
                "max_immutable_memtables",
                "must be at least 1",
            ));
        }
        if self.l0_compaction_trigger == 0 {
            return Err(Error::invalid_option(
                "l0_compaction_trigger",
                "must be at least 1",
            ));
        }
        if self.l0_stop_writes_trigger <= self.l0_compaction_trigger {
            return Err(Error::invalid_option(
                "l0_stop_writes_trigger",
                "must be larger than l0_compaction_trigger",
            ));
        }
        if self.delayed_write_rate == 0 {
            return Err(Error::invalid_option(
                "delayed_write_rate",
                "must be at least 1 byte per second",
            ));
        }
        if !(self.growth_factor > 1.0 && self.growth_factor.is_finite()) {
            return Err(Error::invalid_option(
                "growth_factor",
                format!("{} must be a finite number > 1", self.growth_factor),
            ));
        }
        if !(2..=20).contains(&self.num_levels) {
            return Err(Error::invalid_option(
                "num_levels",
                "must be between 2 and 20",
            ));
        }
        if self.level1_max_bytes == 0 {
            return Err(Error::invalid_option(
                "level1_max_bytes",
                "sizes must be positive",
            ));
        }
        if self.target_file_size == 0 {
            return Err(Error::invalid_option(
                "target_file_size",
                "sizes must be positive",
            ));
        }
        if self.compaction_style == CompactionStyle::Tiered
            && run_trigger(self.growth_factor) >= self.l0_stop_writes_trigger
        {
            return Err(Error::invalid_option(
                "growth_factor",
                format!(
                    "tiered compaction merges L0 at {} runs, which must stay below \
                     l0_stop_writes_trigger ({})",
                    run_trigger(self.growth_factor),
                    self.l0_stop_writes_trigger
                ),
            ));
        }
        if let Some(s) = &self.auto_shape {
            if self.compaction_style == CompactionStyle::Tiered {
                return Err(invalid_auto_shape(
                    "tiering's model cost only falls with f (one level is optimal), so auto \
                     applies to leveled compaction only"
                        .into(),
                ));
            }
            s.validate(self.memtable_size)?;
        }
        Ok(())
    }
}

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
    /// [`TreeOptions::validate`].
    pub(crate) fn validate(&self, memtable_size: usize) -> Result<()> {
        if self.expected_data_bytes <= memtable_size as u64 {
            return Err(invalid_auto_shape(format!(
                "expected data size {} must exceed the memtable size {}",
                self.expected_data_bytes, memtable_size
            )));
        }
        if !(self.r > 0.0 && self.r <= 1.0) {
            return Err(invalid_auto_shape(format!(
                "r = {} is not in (0, 1]",
                self.r
            )));
        }
        if !(0.0..=1.0).contains(&self.initial_a) {
            return Err(invalid_auto_shape(format!(
                "a = {} is not in [0, 1]",
                self.initial_a
            )));
        }
        Ok(())
    }
}

/// An invalid `growth_factor = auto` setting (the name its errors carry).
fn invalid_auto_shape(detail: String) -> Error {
    Error::invalid_option("growth_factor=auto", detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::refused_option as name_of;

    #[test]
    fn bad_fields_are_named() {
        TreeOptions::default().validate().unwrap();
        let bad = |t: TreeOptions| name_of(t.validate());
        assert_eq!(
            bad(TreeOptions {
                growth_factor: 1.0,
                ..Default::default()
            }),
            "growth_factor"
        );
        assert_eq!(
            bad(TreeOptions {
                target_file_size: 0,
                ..Default::default()
            }),
            "target_file_size"
        );
        // Tiered merges L0 at 10 runs: the stop trigger must stay above it.
        assert_eq!(
            bad(TreeOptions {
                compaction_style: CompactionStyle::Tiered,
                l0_stop_writes_trigger: 10,
                ..Default::default()
            }),
            "growth_factor"
        );
    }

    #[test]
    fn auto_shape_is_checked_with_the_style_and_memtable() {
        let auto = TreeOptions {
            auto_shape: Some(AutoShapeConfig::new(1 << 40)),
            ..Default::default()
        };
        auto.validate().unwrap();
        let tiered = TreeOptions {
            compaction_style: CompactionStyle::Tiered,
            ..auto.clone()
        };
        assert_eq!(name_of(tiered.validate()), "growth_factor=auto");
        let small = TreeOptions {
            auto_shape: Some(AutoShapeConfig::new(1 << 20)),
            ..auto
        };
        assert_eq!(name_of(small.validate()), "growth_factor=auto");
    }

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
