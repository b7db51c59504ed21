//! What a workload is: sizes, counts, the operation mix and the request distribution.
//!
//! A [`WorkloadSpec`] is plain data (serde-serializable, so a benchmark report can embed the
//! exact workload it ran); [`WorkloadSpec::validate`] checks it and
//! [`crate::Workload::new`] refuses an invalid one. Presets: the YCSB core workloads
//! ([`WorkloadSpec::ycsb`]), paper 000's write-intensive workload
//! ([`WorkloadSpec::write_intensive`]), the same with a hot set that moves
//! ([`WorkloadSpec::shifting`]), keys with their own write rhythms plus deletes
//! ([`WorkloadSpec::mixed`]), and range scans over 4 KiB values ([`WorkloadSpec::scan`]).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::generator::periodic::DEFAULT_JITTER;
use crate::generator::{Distribution, DistributionError};
use crate::keys;

/// YCSB's key size: `"user"` + 20 digits.
pub const YCSB_KEY_SIZE: u32 = 24;
/// YCSB's value size: 10 fields of 100 bytes.
pub const YCSB_VALUE_SIZE: u32 = 1000;
/// Paper 000 section 5.2: 256-byte keys.
pub const WRITE_INTENSIVE_KEY_SIZE: u32 = 256;
/// Paper 000 section 5.2: 4 KiB values.
pub const WRITE_INTENSIVE_VALUE_SIZE: u32 = 4096;
/// Default records loaded: small enough for a laptop run (about 100 MB of YCSB records,
/// 435 MB write-intensive); experiments scale it with [`WorkloadSpec::with_record_count`].
pub const DEFAULT_RECORD_COUNT: u64 = 100_000;
/// Default run length: ten operations per record, enough for values to be overwritten many
/// times (the regime lifetime-aware GC is about).
pub const DEFAULT_OPERATION_COUNT: u64 = 1_000_000;
/// YCSB E: scan lengths are uniform in `1..=100`.
pub const DEFAULT_MAX_SCAN_LENGTH: u32 = 100;
/// YCSB E's shortest scan.
pub const DEFAULT_MIN_SCAN_LENGTH: u32 = 1;
/// [`WorkloadSpec::scan`]'s shortest scan: ten records, so that every scan crosses several
/// separated values (a one-record scan is a point read).
pub const SCAN_MIN_SCAN_LENGTH: u32 = 10;
/// Default seed ("halflife" in ASCII).
pub const DEFAULT_SEED: u64 = 0x6861_6c66_6c69_6665;
/// Shortest key accepted: `"user"` + 8 digits, i.e. 10^8 distinct keys.
pub const MIN_KEY_SIZE: u32 = 12;

/// Phases of [`WorkloadSpec::shifting`]: the hot set moves every quarter of the run.
pub const SHIFTING_PHASES: u32 = 4;
/// Share of [`WorkloadSpec::mixed`]'s ops that delete their key.
pub const MIXED_DELETE_PROPORTION: f64 = 0.1;

/// Tolerance on the sum of the proportions.
const SUM_TOLERANCE: f64 = 1e-9;

/// The operation mix: the probability of each op kind; they sum to 1.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Proportions {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
    /// Deletes of a key drawn from the request distribution. A delete that draws a key
    /// already deleted becomes the update that re-creates it, so deleted keys come back.
    pub delete: f64,
}

impl Proportions {
    /// The proportions by name, in the fixed order the run phase draws them.
    pub fn entries(&self) -> [(&'static str, f64); 6] {
        [
            ("read", self.read),
            ("update", self.update),
            ("insert", self.insert),
            ("scan", self.scan),
            ("read_modify_write", self.read_modify_write),
            ("delete", self.delete),
        ]
    }

    pub fn sum(&self) -> f64 {
        self.entries().iter().map(|(_, p)| p).sum()
    }
}

/// A complete workload description. The fields are public; presets and `with_*` builders
/// are conveniences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadSpec {
    /// A label for reports ("ycsb-a", "write-intensive-0.9", ...).
    pub name: String,
    /// Keys inserted by the load phase: key numbers `0..record_count`.
    pub record_count: u64,
    /// Operations in the run phase.
    pub operation_count: u64,
    pub key_size: u32,
    pub value_size: u32,
    pub proportions: Proportions,
    /// Which keys reads, updates, scans and read-modify-writes touch.
    pub request_distribution: Distribution,
    /// Scan lengths are uniform in `min_scan_length..=max_scan_length`.
    pub max_scan_length: u32,
    /// The shortest scan (YCSB's is 1).
    pub min_scan_length: u32,
    /// Seeds the run phase; the same spec always yields the same ops.
    pub seed: u64,
    /// The run is cut into this many equal phases, and in phase p every key the request
    /// distribution draws is moved p steps of a fixed rotation of the key space, so the
    /// hot set is a different set of keys in each phase (1: it never moves). See
    /// [`crate::workload::Workload::run_ops`].
    pub hot_set_phases: u32,
    /// Updates that carry an expiry (none: no op expires).
    pub expiry: Option<ExpirySpec>,
}

/// Which updates expire and when: a share `proportion` of the updates become
/// [`crate::Op::ExpiringUpdate`]s whose time to live, in ops, is drawn log-uniformly from
/// `min_ttl..=max_ttl`: as many TTLs between 1 and 10 times the shortest as between 100
/// and 1000 times it, the heavy tail of real expiries (a session of minutes, a cache
/// entry of hours).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpirySpec {
    pub proportion: f64,
    pub min_ttl: u32,
    pub max_ttl: u32,
}

/// Share of [`WorkloadSpec::expiring`]'s updates that carry an expiry.
pub const EXPIRING_PROPORTION: f64 = 0.7;

/// Why a spec is not runnable.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SpecError {
    #[error("unknown YCSB workload {0:?}: expected one of a..=f")]
    UnknownYcsb(char),
    #[error("proportion {name} = {value} is not in [0, 1]")]
    Proportion { name: &'static str, value: f64 },
    #[error("proportions sum to {sum}, expected 1")]
    ProportionSum { sum: f64 },
    #[error("record_count must be at least 1: reads and updates need an existing key")]
    NoRecords,
    #[error("value_size must be positive")]
    ZeroValueSize,
    #[error("key_size {key_size} is below the minimum {min}")]
    KeyTooShort { key_size: u32, min: u32 },
    #[error(
        "key_size {key_size} names only {capacity} distinct keys, the workload may need {needed}"
    )]
    KeySpaceTooSmall {
        key_size: u32,
        capacity: u64,
        needed: u64,
    },
    #[error("record_count + operation_count overflows u64")]
    TooManyKeys,
    #[error("scans are requested but max_scan_length is 0")]
    ZeroScanLength,
    #[error("scan lengths {min}..={max}: min_scan_length must be in 1..=max_scan_length")]
    ScanLengthRange { min: u32, max: u32 },
    #[error("hot_set_phases must be at least 1 (1: the hot set never moves)")]
    NoPhases,
    #[error("expiry: proportion {proportion} is not in [0, 1] or the TTLs {min}..={max} are not 1 <= min <= max")]
    Expiry { proportion: f64, min: u32, max: u32 },
    #[error("request distribution: {0}")]
    Distribution(#[from] DistributionError),
}

impl Default for WorkloadSpec {
    /// YCSB workload A.
    fn default() -> Self {
        Self::ycsb('a').expect("workload a exists")
    }
}

impl WorkloadSpec {
    /// A YCSB core workload, `'a'..='f'` (case-insensitive), with YCSB's 24-byte keys and
    /// 1000-byte values. YCSB's `zipfian` request distribution is its *scrambled* Zipfian
    /// with theta 0.99, so that is what these presets use.
    pub fn ycsb(workload: char) -> Result<Self, SpecError> {
        let p = |read, update, insert, scan, read_modify_write| Proportions {
            read,
            update,
            insert,
            scan,
            read_modify_write,
            delete: 0.0,
        };
        let zipf = Distribution::Scrambled { theta: 0.99 };
        let (proportions, dist) = match workload.to_ascii_lowercase() {
            'a' => (p(0.5, 0.5, 0.0, 0.0, 0.0), zipf),
            'b' => (p(0.95, 0.05, 0.0, 0.0, 0.0), zipf),
            'c' => (p(1.0, 0.0, 0.0, 0.0, 0.0), zipf),
            'd' => (
                p(0.95, 0.0, 0.05, 0.0, 0.0),
                Distribution::Latest { theta: 0.99 },
            ),
            'e' => (p(0.0, 0.0, 0.05, 0.95, 0.0), zipf),
            'f' => (p(0.5, 0.0, 0.0, 0.0, 0.5), zipf),
            other => return Err(SpecError::UnknownYcsb(other)),
        };
        let mut spec = Self::custom(proportions, dist)?;
        spec.name = format!("ycsb-{}", workload.to_ascii_lowercase());
        Ok(spec)
    }

    /// Paper 000 section 5.2: an initially empty store is loaded with `record_count` keys,
    /// then every run-phase op is an update whose key follows a Zipfian with exponent
    /// `theta` (the paper uses 0.2, 0.5 and 0.9; lower theta sends more writes to cold
    /// keys). 256-byte keys, 4 KiB values. The paper drives YCSB, whose "zipfian" is the
    /// scrambled variant, so the hot keys are spread over the key space.
    pub fn write_intensive(theta: f64) -> Result<Self, SpecError> {
        let mut spec = Self::custom(
            Proportions {
                update: 1.0,
                ..Proportions::default()
            },
            Distribution::Scrambled { theta },
        )?;
        spec.name = format!("write-intensive-{theta}");
        spec.key_size = WRITE_INTENSIVE_KEY_SIZE;
        spec.value_size = WRITE_INTENSIVE_VALUE_SIZE;
        Ok(spec)
    }

    /// [`WorkloadSpec::write_intensive`] with a hot set that moves to other keys every
    /// quarter of the run ([`SHIFTING_PHASES`]): a threshold tuned to one phase's lifetimes
    /// is wrong for the next, and a key's history stops describing it at each shift.
    pub fn shifting(theta: f64) -> Result<Self, SpecError> {
        let mut spec = Self::write_intensive(theta)?;
        spec.name = format!("shifting-{theta}");
        spec.hot_set_phases = SHIFTING_PHASES;
        Ok(spec)
    }

    /// Keys with very different write rhythms plus deletes, with the write-intensive sizes:
    /// every op updates or (a share [`MIXED_DELETE_PROPORTION`]) deletes the key whose turn
    /// is next in a [`Distribution::Periodic`] schedule (hot keys every n/40 ops, warm,
    /// cool, cold never; periods within 25%); a deleted key comes back at its next turn.
    /// Unlike a scrambled Zipfian, whose intervals are memoryless, a key's last lifetime
    /// here predicts its next one: the case a history-based predictor is for.
    pub fn mixed() -> Result<Self, SpecError> {
        let mut spec = Self::custom(
            Proportions {
                update: 1.0 - MIXED_DELETE_PROPORTION,
                delete: MIXED_DELETE_PROPORTION,
                ..Proportions::default()
            },
            Distribution::Periodic {
                jitter: DEFAULT_JITTER,
            },
        )?;
        spec.name = "mixed".to_string();
        spec.key_size = WRITE_INTENSIVE_KEY_SIZE;
        spec.value_size = WRITE_INTENSIVE_VALUE_SIZE;
        Ok(spec)
    }

    /// [`WorkloadSpec::write_intensive`] where a share [`EXPIRING_PROPORTION`] of the
    /// updates expire, with TTLs log-uniform from 1/1000 to 1/2 of the run's length
    /// ([`WorkloadSpec::with_operation_count`] rescales them): seconds to hours, scaled to
    /// the run. A key whose last write expired is dead until its next update.
    pub fn expiring(theta: f64) -> Result<Self, SpecError> {
        let mut spec = Self::write_intensive(theta)?;
        spec.name = format!("expiring-{theta}");
        spec.expiry = Some(ExpirySpec {
            proportion: EXPIRING_PROPORTION,
            min_ttl: 0,
            max_ttl: 0,
        });
        Ok(spec.with_operation_count(DEFAULT_OPERATION_COUNT))
    }

    /// Range scans over separated values, YCSB E's mix with 4 KiB values: 95 % scans whose
    /// start key follows YCSB's scrambled Zipfian (theta 0.99) and whose length is uniform
    /// in `10..=100` records, 5 % inserts of new keys; 24-byte keys. With values this large
    /// every engine with key-value separation keeps them out of the tree, so each record a
    /// scan returns is a read in a value file: the cost Titan's users report scans pay.
    pub fn scan() -> Result<Self, SpecError> {
        let mut spec = Self::ycsb('e')?;
        spec.name = "scan".to_string();
        spec.value_size = WRITE_INTENSIVE_VALUE_SIZE;
        spec.min_scan_length = SCAN_MIN_SCAN_LENGTH;
        spec.validate()?;
        Ok(spec)
    }

    /// Any mix and distribution, with the YCSB sizes and the default counts and seed.
    pub fn custom(
        proportions: Proportions,
        request_distribution: Distribution,
    ) -> Result<Self, SpecError> {
        let spec = Self {
            name: "custom".to_string(),
            record_count: DEFAULT_RECORD_COUNT,
            operation_count: DEFAULT_OPERATION_COUNT,
            key_size: YCSB_KEY_SIZE,
            value_size: YCSB_VALUE_SIZE,
            proportions,
            request_distribution,
            max_scan_length: DEFAULT_MAX_SCAN_LENGTH,
            min_scan_length: DEFAULT_MIN_SCAN_LENGTH,
            seed: DEFAULT_SEED,
            hot_set_phases: 1,
            expiry: None,
        };
        spec.validate()?;
        Ok(spec)
    }

    pub fn with_record_count(mut self, record_count: u64) -> Self {
        self.record_count = record_count;
        self
    }

    /// Sets the run's length; an [`WorkloadSpec::expiring`] spec's TTLs follow it (1/1000
    /// to 1/2 of the run).
    pub fn with_operation_count(mut self, operation_count: u64) -> Self {
        self.operation_count = operation_count;
        if let Some(e) = &mut self.expiry {
            let ops = u32::try_from(operation_count).unwrap_or(u32::MAX);
            e.max_ttl = (ops / 2).max(1);
            e.min_ttl = (ops / 1000).clamp(1, e.max_ttl);
        }
        self
    }

    pub fn with_key_size(mut self, key_size: u32) -> Self {
        self.key_size = key_size;
        self
    }

    pub fn with_value_size(mut self, value_size: u32) -> Self {
        self.value_size = value_size;
        self
    }

    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn with_hot_set_phases(mut self, phases: u32) -> Self {
        self.hot_set_phases = phases;
        self
    }

    /// The most keys the workload can create: the load plus, if it inserts at all, one per
    /// run-phase op (`None` on overflow).
    pub fn max_keys(&self) -> Option<u64> {
        if self.proportions.insert > 0.0 {
            self.record_count.checked_add(self.operation_count)
        } else {
            Some(self.record_count)
        }
    }

    /// YCSB's sizing of the scrambled Zipfian's hash range: records plus twice the expected
    /// number of inserts, so that the hot set is stable while keys are added.
    pub fn expected_key_space(&self) -> u64 {
        let expected_inserts = self.operation_count as f64 * self.proportions.insert * 2.0;
        self.record_count.saturating_add(expected_inserts as u64)
    }

    /// Checks everything a run relies on.
    pub fn validate(&self) -> Result<(), SpecError> {
        for (name, value) in self.proportions.entries() {
            if !(0.0..=1.0).contains(&value) {
                return Err(SpecError::Proportion { name, value });
            }
        }
        let sum = self.proportions.sum();
        if (sum - 1.0).abs() > SUM_TOLERANCE {
            return Err(SpecError::ProportionSum { sum });
        }
        if self.record_count == 0 {
            return Err(SpecError::NoRecords);
        }
        if self.value_size == 0 {
            return Err(SpecError::ZeroValueSize);
        }
        if self.key_size < MIN_KEY_SIZE {
            return Err(SpecError::KeyTooShort {
                key_size: self.key_size,
                min: MIN_KEY_SIZE,
            });
        }
        let needed = self.max_keys().ok_or(SpecError::TooManyKeys)?;
        if let Some(capacity) = keys::key_capacity(self.key_size as usize) {
            if needed > capacity {
                return Err(SpecError::KeySpaceTooSmall {
                    key_size: self.key_size,
                    capacity,
                    needed,
                });
            }
        }
        if self.proportions.scan > 0.0 {
            if self.max_scan_length == 0 {
                return Err(SpecError::ZeroScanLength);
            }
            if !(1..=self.max_scan_length).contains(&self.min_scan_length) {
                return Err(SpecError::ScanLengthRange {
                    min: self.min_scan_length,
                    max: self.max_scan_length,
                });
            }
        }
        if self.hot_set_phases == 0 {
            return Err(SpecError::NoPhases);
        }
        if let Some(e) = self.expiry {
            if !(0.0..=1.0).contains(&e.proportion) || e.min_ttl == 0 || e.min_ttl > e.max_ttl {
                return Err(SpecError::Expiry {
                    proportion: e.proportion,
                    min: e.min_ttl,
                    max: e.max_ttl,
                });
            }
        }
        self.request_distribution.validate()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ycsb_presets_follow_the_table() {
        let a = WorkloadSpec::ycsb('a').unwrap();
        assert_eq!((a.proportions.read, a.proportions.update), (0.5, 0.5));
        assert_eq!(a.key_size, 24);
        assert_eq!(a.name, "ycsb-a");
        let d = WorkloadSpec::ycsb('D').unwrap();
        assert_eq!(d.proportions.insert, 0.05);
        assert_eq!(d.request_distribution, Distribution::Latest { theta: 0.99 });
        let e = WorkloadSpec::ycsb('e').unwrap();
        assert_eq!((e.proportions.scan, e.max_scan_length), (0.95, 100));
        assert_eq!(e.min_scan_length, 1);
        let s = WorkloadSpec::scan().unwrap();
        assert_eq!(
            (
                s.proportions,
                s.request_distribution,
                s.key_size,
                s.value_size
            ),
            (e.proportions, e.request_distribution, 24, 4096)
        );
        assert_eq!((s.min_scan_length, s.max_scan_length), (10, 100));
        let f = WorkloadSpec::ycsb('f').unwrap();
        assert_eq!(f.proportions.read_modify_write, 0.5);
        for w in 'a'..='f' {
            let s = WorkloadSpec::ycsb(w).unwrap();
            assert!((s.proportions.sum() - 1.0).abs() < 1e-12, "{w}");
        }
        assert_eq!(WorkloadSpec::ycsb('g'), Err(SpecError::UnknownYcsb('g')));
    }

    #[test]
    fn write_intensive_is_all_zipfian_updates() {
        let s = WorkloadSpec::write_intensive(0.2).unwrap();
        assert_eq!(s.proportions.update, 1.0);
        assert_eq!((s.key_size, s.value_size), (256, 4096));
        assert_eq!(
            s.request_distribution,
            Distribution::Scrambled { theta: 0.2 }
        );
        assert!(matches!(
            WorkloadSpec::write_intensive(1.2),
            Err(SpecError::Distribution(DistributionError::ThetaOutOfRange(
                _
            )))
        ));
    }

    #[test]
    fn shifting_and_mixed_presets() {
        let s = WorkloadSpec::shifting(0.9).unwrap();
        assert_eq!(s.hot_set_phases, 4);
        assert_eq!(s.name, "shifting-0.9");
        assert_eq!((s.proportions, s.request_distribution), {
            let w = WorkloadSpec::write_intensive(0.9).unwrap();
            (w.proportions, w.request_distribution)
        });
        assert!(WorkloadSpec::shifting(1.0).is_err());
        let m = WorkloadSpec::mixed().unwrap();
        assert_eq!((m.proportions.update, m.proportions.delete), (0.9, 0.1));
        assert_eq!(
            m.request_distribution,
            Distribution::Periodic { jitter: 0.25 }
        );
        assert_eq!((m.key_size, m.value_size, m.hot_set_phases), (256, 4096, 1));
    }

    #[test]
    fn validation_catches_each_mistake() {
        let ok = WorkloadSpec::ycsb('a').unwrap();
        let bad = |f: &dyn Fn(&mut WorkloadSpec)| {
            let mut s = ok.clone();
            f(&mut s);
            s.validate().unwrap_err()
        };
        assert!(matches!(
            bad(&|s| s.proportions.read = 0.6),
            SpecError::ProportionSum { .. }
        ));
        assert!(matches!(
            bad(&|s| s.proportions.read = -0.5),
            SpecError::Proportion { name: "read", .. }
        ));
        assert!(matches!(
            bad(&|s| s.proportions.update = f64::NAN),
            SpecError::Proportion { name: "update", .. }
        ));
        assert_eq!(bad(&|s| s.record_count = 0), SpecError::NoRecords);
        assert_eq!(bad(&|s| s.value_size = 0), SpecError::ZeroValueSize);
        assert_eq!(bad(&|s| s.hot_set_phases = 0), SpecError::NoPhases);
        assert!(matches!(
            bad(&|s| {
                s.proportions.update = 0.0;
                s.proportions.delete = 0.3;
            }),
            SpecError::ProportionSum { .. }
        ));
        assert!(matches!(
            bad(&|s| s.request_distribution = Distribution::Periodic { jitter: 1.5 }),
            SpecError::Distribution(DistributionError::JitterOutOfRange(_))
        ));
        assert_eq!(
            bad(&|s| s.key_size = 11),
            SpecError::KeyTooShort {
                key_size: 11,
                min: 12
            }
        );
        assert!(matches!(
            bad(&|s| {
                s.key_size = 12;
                s.record_count = 100_000_001;
            }),
            SpecError::KeySpaceTooSmall { .. }
        ));
        let mut e = WorkloadSpec::ycsb('e').unwrap();
        e.max_scan_length = 0;
        assert_eq!(e.validate(), Err(SpecError::ZeroScanLength));
        let mut e = WorkloadSpec::scan().unwrap();
        e.max_scan_length = 9;
        assert_eq!(
            e.validate(),
            Err(SpecError::ScanLengthRange { min: 10, max: 9 })
        );
        e.min_scan_length = 0;
        assert!(matches!(
            e.validate(),
            Err(SpecError::ScanLengthRange { min: 0, .. })
        ));
        let mut d = WorkloadSpec::ycsb('d').unwrap();
        d.record_count = u64::MAX;
        assert_eq!(d.validate(), Err(SpecError::TooManyKeys));
        assert!(matches!(
            bad(&|s| s.request_distribution = Distribution::Zipfian { theta: 1.0 }),
            SpecError::Distribution(_)
        ));
        // Short keys are fine when the key space fits.
        let mut short = ok.clone();
        short.key_size = 12;
        assert_eq!(short.validate(), Ok(()));
    }

    #[test]
    fn serde_round_trip_and_defaults() {
        let s = WorkloadSpec::write_intensive(0.9).unwrap().with_seed(7);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"scrambled:0.9\""), "{json}");
        let back: WorkloadSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        // Missing fields take the defaults; unknown fields are refused.
        let partial: WorkloadSpec =
            serde_json::from_str(r#"{"record_count": 10, "request_distribution": "uniform"}"#)
                .unwrap();
        assert_eq!(partial.record_count, 10);
        assert_eq!(partial.proportions, WorkloadSpec::default().proportions);
        assert_eq!(partial.hot_set_phases, 1);
        let m = WorkloadSpec::mixed().unwrap().with_hot_set_phases(3);
        let json = serde_json::to_string(&m).unwrap();
        assert!(
            json.contains("\"periodic:0.25\"") && json.contains("\"delete\":0.1"),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<WorkloadSpec>(&json).unwrap(), m);
        assert!(serde_json::from_str::<WorkloadSpec>(r#"{"recordcount": 10}"#).is_err());
    }
}
