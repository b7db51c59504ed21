//! Value separation and value-file GC ([`Options::vlog`](super::Options)): which values
//! leave the tree, the value files they go to, the GC policy that collects those files and
//! the lifetime policies' parameters (fjall's blob options and `gc_with_space_amp_target`,
//! RocksDB's BlobDB options).

use crate::error::{Error, Result};
use crate::internal_key::SeqNo;
use crate::lifetime::{GbmParams, ThresholdParams};
use crate::sst::compression::Compression;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Which value-file garbage-collection policy runs (see [`crate::gc::policy`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum GcPolicyConfig {
    /// No key-value separation: values stay in the tree ("RocksDB-std" of paper 000).
    Inline,
    /// RocksDB's integrated BlobDB: compaction relocates values that live in the oldest
    /// `age_cutoff` fraction of value files; when the oldest files' garbage ratio reaches
    /// `force_threshold`, the table files pointing into them are compacted.
    BlobDb {
        age_cutoff: f64,
        force_threshold: f64,
    },
    /// Titan: a value file whose garbage ratio reaches `garbage_ratio` is collected; valid
    /// values (checked by a tree lookup) are rewritten and their new pointers written back
    /// through the write path.
    Titan { garbage_ratio: f64 },
    /// TerarkDB: garbage-ratio-triggered GC like Titan, but valid values are found again
    /// through value index maps instead of a pointer write-back.
    Terark { garbage_ratio: f64 },
    /// Lifetime-aware GC (paper 000, DumpKV): value files with a lifetime class and a TTL,
    /// collected when the TTL elapses, valid values placed by `mode`, index maps.
    Lifetime { mode: LifetimeMode },
}

/// How the lifetime policy places the valid values GC finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LifetimeMode {
    /// Learned from the workload: under the space-amplification trigger (the default) by
    /// each key's own write history (no model is trained); under the TTL trigger by
    /// paper 000's online-trained GBM classifier (DumpKV). `DbStats::placement` names which.
    Learned,
    /// Every valid value to the long class (the paper's ablation, sec. 5.6).
    NoModel,
    /// By the true next write of the key, from [`ValueLogOptions::lifetime_oracle`]: the lower
    /// bound the model aims at.
    Oracle,
    /// By the key's true mean write interval over the whole workload
    /// ([`LifetimeOracle::mean_interval`]), not its next write: the bound of any predictor
    /// that learns a key's write rate from its history, as `lifetime` does. Under the TTL
    /// trigger it places like `oracle` with the mean interval as the next write.
    RateOracle,
}

impl LifetimeMode {
    /// Whether the policy needs [`ValueLogOptions::lifetime_oracle`].
    pub fn needs_oracle(self) -> bool {
        matches!(self, LifetimeMode::Oracle | LifetimeMode::RateOracle)
    }
}

impl GcPolicyConfig {
    pub const NAMES: [&'static str; 8] = [
        "inline",
        "blobdb",
        "titan",
        "terark",
        "lifetime",
        "lifetime-nomodel",
        "oracle",
        "rate-oracle",
    ];

    pub fn name(&self) -> &'static str {
        match self {
            GcPolicyConfig::Inline => "inline",
            GcPolicyConfig::BlobDb { .. } => "blobdb",
            GcPolicyConfig::Titan { .. } => "titan",
            GcPolicyConfig::Terark { .. } => "terark",
            GcPolicyConfig::Lifetime { mode } => match mode {
                LifetimeMode::Learned => "lifetime",
                LifetimeMode::NoModel => "lifetime-nomodel",
                LifetimeMode::Oracle => "oracle",
                LifetimeMode::RateOracle => "rate-oracle",
            },
        }
    }

    /// Whether GC redirects reads through value index maps instead of writing pointers back.
    pub fn uses_index_maps(&self) -> bool {
        matches!(
            self,
            GcPolicyConfig::Terark { .. } | GcPolicyConfig::Lifetime { .. }
        )
    }

    pub fn lifetime_mode(&self) -> Option<LifetimeMode> {
        match self {
            GcPolicyConfig::Lifetime { mode } => Some(*mode),
            _ => None,
        }
    }

    pub fn blobdb() -> Self {
        GcPolicyConfig::BlobDb {
            age_cutoff: 0.8,
            force_threshold: 0.2,
        }
    }

    pub fn titan() -> Self {
        GcPolicyConfig::Titan { garbage_ratio: 0.2 }
    }

    /// Whether values at or above `min_blob_size` leave the tree.
    pub fn separates_values(&self) -> bool {
        !matches!(self, GcPolicyConfig::Inline)
    }

    fn validate(&self) -> Result<()> {
        let ratio = |name: &'static str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(Error::InvalidOptions {
                    name,
                    detail: format!("{v} is not a fraction in [0, 1]"),
                })
            }
        };
        match *self {
            GcPolicyConfig::Inline => Ok(()),
            GcPolicyConfig::BlobDb {
                age_cutoff,
                force_threshold,
            } => {
                ratio("gc.age_cutoff", age_cutoff)?;
                ratio("gc.force_threshold", force_threshold)
            }
            GcPolicyConfig::Lifetime { .. } => Ok(()),
            GcPolicyConfig::Titan { garbage_ratio } | GcPolicyConfig::Terark { garbage_ratio } => {
                ratio("gc.garbage_ratio", garbage_ratio)?;
                if garbage_ratio == 0.0 {
                    return Err(Error::InvalidOptions {
                        name: "gc.garbage_ratio",
                        detail: "0 would collect files with no garbage forever".into(),
                    });
                }
                Ok(())
            }
        }
    }
}

/// The learned lifetime policy: values placed by predicted death, GC under a
/// space-amplification target ([`GcTrigger::SpaceAmp`]).
impl Default for GcPolicyConfig {
    fn default() -> Self {
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::Learned,
        }
    }
}

impl fmt::Display for GcPolicyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GcPolicyConfig {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "inline" => Ok(GcPolicyConfig::Inline),
            "blobdb" => Ok(GcPolicyConfig::blobdb()),
            "titan" => Ok(GcPolicyConfig::titan()),
            "terark" => Ok(GcPolicyConfig::Terark { garbage_ratio: 0.2 }),
            "lifetime" => Ok(GcPolicyConfig::Lifetime {
                mode: LifetimeMode::Learned,
            }),
            "lifetime-nomodel" => Ok(GcPolicyConfig::Lifetime {
                mode: LifetimeMode::NoModel,
            }),
            "oracle" => Ok(GcPolicyConfig::Lifetime {
                mode: LifetimeMode::Oracle,
            }),
            "rate-oracle" => Ok(GcPolicyConfig::Lifetime {
                mode: LifetimeMode::RateOracle,
            }),
            other => Err(Error::InvalidOptions {
                name: "gc",
                detail: format!(
                    "unknown policy {other:?}; expected one of {}",
                    Self::NAMES.join(", ")
                ),
            }),
        }
    }
}

/// Knows when each key will be written next (for the `oracle` policy).
pub trait LifetimeOracle: Send + Sync {
    /// The sequence number of the first write of `key` after sequence number `after`.
    fn next_write(&self, key: &[u8], after: SeqNo) -> Option<SeqNo>;
    /// The key's mean interval between writes over the whole workload (the inverse of its
    /// write rate); `None` for a key written at most once.
    fn mean_interval(&self, key: &[u8]) -> Option<SeqNo>;
}

/// Parameters of the lifetime policies (paper 000). Thresholds follow
/// [`ThresholdParams`]'s defaults, the paper's.
#[derive(Clone, Debug, PartialEq)]
pub struct LifetimeOptions {
    pub thresholds: ThresholdParams,
    /// Training samples per model (the paper: 128k).
    pub dataset_capacity: usize,
    pub gbm: GbmParams,
    /// Store the value size as a static feature (sec. 4.2, optional).
    pub value_size_feature: bool,
    /// At most this many bytes of value files per GC job.
    pub max_gc_batch_bytes: u64,
    /// When value files are collected (see [`GcTrigger`]).
    pub trigger: GcTrigger,
    /// Slots of the in-memory write history the learned policy places new values by when
    /// the value log is the WAL (16 bytes each; a key per slot, the keys written most
    /// recently kept). Sized for the keys that are written more than once in a while:
    /// a key it forgets is placed as one never seen. 0, the default, sizes it from the
    /// block cache it is charged to: a fifth of [`CacheOptions::block_cache_capacity`](super::CacheOptions)
    /// rounded down to a power of two of slots, at most 2M slots (32 MiB, touched only as keys arrive, for up to about two million
    /// keys; reached from a 160 MiB cache).
    pub write_history_slots: usize,
    /// Memory for the newest flushed writes of recently flushed keys, so that the garbage
    /// their next flush makes is found without a tree lookup (`gc::recent_pointers`,
    /// 45 bytes per slot, about 51-103 per key held). A key it forgets is looked up in the
    /// tree. 0, the default, grows the table with the keys it sees, charged to the block
    /// cache: it holds every key while they fit half of
    /// [`CacheOptions::block_cache_capacity`](super::CacheOptions) (1.83M keys at a 256
    /// MiB cache), then keeps the recently flushed ones in two generations of half of
    /// that each. A size set here is a fixed table of two generations.
    pub recent_pointer_bytes: usize,
}

/// When the lifetime policies collect value files.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "trigger", rename_all = "snake_case")]
pub enum GcTrigger {
    /// Paper 000 as published: a file is collected once its TTL (`l_s`, `l_l`, `l_d`)
    /// elapses; values are placed by class only when GC copies them.
    Ttl,
    /// The one user-facing knob: keep value-file bytes / live value bytes near `target`.
    /// Values are placed by predicted death when flush first writes them and when GC copies
    /// them ([`crate::gc::placement`]); GC runs only while the value files' space
    /// amplification exceeds `target`, and collects the files that reclaim the most per
    /// byte copied, discounted while their values are predicted to die soon
    /// ([`crate::gc::policy::SpaceAmp`]). Like fjall's `gc_with_space_amp_target`.
    SpaceAmp { target: f64 },
}

impl GcTrigger {
    /// The default target: 1.5. Measured with the value log as the WAL (`docs/lifetime.md`,
    /// Zipfian 0.2-0.99, shifting and mixed workloads), the learned policy at 1.5 holds
    /// less space over a run than every static policy and writes fewer bytes; at 1.25
    /// (where titan and terark settle at rest with a 0.2 garbage ratio) it copies up to
    /// half again as much to hold the lower space.
    pub const DEFAULT_SPACE_AMP: f64 = 1.5;

    fn validate(&self) -> Result<()> {
        match *self {
            GcTrigger::Ttl => Ok(()),
            GcTrigger::SpaceAmp { target } if target > 1.0 && target.is_finite() => Ok(()),
            GcTrigger::SpaceAmp { target } => Err(Error::InvalidOptions {
                name: "lifetime.trigger.target",
                detail: format!("space amplification target {target} must be above 1"),
            }),
        }
    }
}

impl Default for GcTrigger {
    fn default() -> Self {
        GcTrigger::SpaceAmp {
            target: Self::DEFAULT_SPACE_AMP,
        }
    }
}

impl Default for LifetimeOptions {
    fn default() -> Self {
        LifetimeOptions {
            thresholds: ThresholdParams::default(),
            dataset_capacity: crate::lifetime::DEFAULT_DATASET_CAPACITY,
            gbm: GbmParams::default(),
            value_size_feature: false,
            max_gc_batch_bytes: 1 << 30,
            trigger: GcTrigger::default(),
            write_history_slots: 0,
            recent_pointer_bytes: 0,
        }
    }
}

/// Which values leave the tree, where they go, and how their files are collected.
#[derive(Clone)]
pub struct ValueLogOptions {
    /// Values at least this large go to value files (unless the policy is `inline`).
    /// 512 B, the separation threshold the benchmarks were measured with (docs/bench.md):
    /// a smaller value saves little of a compaction's rewrite by leaving the tree (its
    /// key and pointer stay) and costs a second read.
    pub min_blob_size: usize,
    /// Value files are cut at this size. 256 MiB, RocksDB's `blob_file_size`: GC's unit of
    /// work, and the granularity at which space comes back.
    pub blob_file_size: u64,
    /// Compression of the values in value files, one setting for all of them (flush,
    /// compaction and GC outputs): each record is compressed on its own (a read fetches
    /// one record) and kept as is when that saves less than 1/8. Records say which codec
    /// they use, so files written with any setting stay readable. Sizes the engine
    /// reports from pointers (live bytes) are the stored sizes. None by default, as
    /// RocksDB's `blob_compression_type`.
    pub value_compression: Compression,
    /// The GC policy; the default is the learned lifetime policy under a
    /// space-amplification target ([`GcPolicyConfig::default`]).
    pub gc: GcPolicyConfig,
    /// Parameters of the lifetime policies (defaults: [`LifetimeOptions::default`]).
    pub lifetime: LifetimeOptions,
    /// The future, for the `oracle` policies only: the benchmark that generated the
    /// workload knows each key's next write. `None` by default.
    pub lifetime_oracle: Option<Arc<dyn LifetimeOracle>>,
    /// Placement of separated values that carry an expiry ([`crate::expiry`]): they go to
    /// value files by expiry window, each file dropped whole once its latest expiry has
    /// passed. A value whose time to live is `t` when it is written out goes to a window
    /// of width `t / expiry_window_divisor` (rounded down to a power of two ms, at least
    /// 1 s, windows aligned on multiples of their width), so a value is kept at most
    /// 1/divisor of its time to live past its expiry, whatever the spread of TTLs (a width
    /// fixed from the largest TTL would hold a 10 s value as long as a one-day one).
    /// 8 by default; 0 turns the placement off (expiring values share files with the
    /// others and are reclaimed by GC only).
    pub expiry_window_divisor: u64,
}

impl Default for ValueLogOptions {
    fn default() -> Self {
        ValueLogOptions {
            min_blob_size: 512,
            blob_file_size: 256 << 20,
            value_compression: Compression::None,
            gc: GcPolicyConfig::default(),
            lifetime: LifetimeOptions::default(),
            lifetime_oracle: None,
            expiry_window_divisor: 8,
        }
    }
}

impl fmt::Debug for ValueLogOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValueLogOptions")
            .field("min_blob_size", &self.min_blob_size)
            .field("blob_file_size", &self.blob_file_size)
            .field("value_compression", &self.value_compression)
            .field("gc", &self.gc)
            .field("lifetime", &self.lifetime)
            .field("lifetime_oracle", &self.lifetime_oracle.is_some())
            .field("expiry_window_divisor", &self.expiry_window_divisor)
            .finish()
    }
}

impl ValueLogOptions {
    /// Checks the group; the error names the first bad field.
    pub fn validate(&self) -> Result<()> {
        if self.blob_file_size == 0 {
            return Err(Error::invalid_option(
                "blob_file_size",
                "sizes must be positive",
            ));
        }
        self.value_compression.validate("value_compression")?;
        self.gc.validate()?;
        if self.gc.uses_index_maps() || self.gc.lifetime_mode().is_some() {
            self.lifetime.thresholds.validate()?;
            if self.lifetime.dataset_capacity < 2 {
                return Err(Error::invalid_option(
                    "lifetime.dataset_capacity",
                    "must be at least 2",
                ));
            }
            self.lifetime.trigger.validate()?;
            let slots = self.lifetime.write_history_slots;
            if slots != 0 && !(2..=1 << 32).contains(&slots) {
                return Err(Error::invalid_option(
                    "lifetime.write_history_slots",
                    "must be 0 (sized from the block cache) or between 2 and 2^32",
                ));
            }
        }
        if self
            .gc
            .lifetime_mode()
            .is_some_and(LifetimeMode::needs_oracle)
            && self.lifetime_oracle.is_none()
        {
            return Err(Error::invalid_option(
                "lifetime_oracle",
                "the oracle policy needs the workload's future (ValueLogOptions::lifetime_oracle)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::refused_option as name_of;

    #[test]
    fn bad_gc_settings_are_named() {
        ValueLogOptions::default().validate().unwrap();
        let o = ValueLogOptions {
            gc: GcPolicyConfig::BlobDb {
                age_cutoff: 1.5,
                force_threshold: 0.2,
            },
            ..Default::default()
        };
        assert_eq!(name_of(o.validate()), "gc.age_cutoff");
        let o = ValueLogOptions {
            gc: "lifetime".parse().unwrap(),
            lifetime: LifetimeOptions {
                trigger: GcTrigger::SpaceAmp { target: 1.0 },
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(name_of(o.validate()), "lifetime.trigger.target");
        let o = ValueLogOptions {
            gc: "lifetime".parse().unwrap(),
            lifetime: LifetimeOptions {
                write_history_slots: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(name_of(o.validate()), "lifetime.write_history_slots");
        let o = ValueLogOptions {
            gc: "oracle".parse().unwrap(),
            ..Default::default()
        };
        assert_eq!(name_of(o.validate()), "lifetime_oracle");
        let o = ValueLogOptions {
            blob_file_size: 0,
            ..Default::default()
        };
        assert_eq!(name_of(o.validate()), "blob_file_size");
        assert!("nope".parse::<GcPolicyConfig>().is_err());
        for n in GcPolicyConfig::NAMES {
            assert_eq!(n.parse::<GcPolicyConfig>().unwrap().name(), n);
        }
    }
}
