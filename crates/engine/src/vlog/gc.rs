//! Value-file garbage collection policies, behind one trait so that they are
//! interchangeable and compared in one run.
//!
//! A policy decides; the engine acts. The three decisions are: which pointers a compaction
//! rewrites into new value files ([`GcPolicy::relocation_filter`]), which table files must
//! be compacted so that old value files can be released ([`GcPolicy::forced_compactions`]),
//! and which value files a standalone GC job collects ([`GcPolicy::pick_gc`]). The valid
//! values a GC job finds are found again either by a pointer write-back through the write
//! path (Titan) or through value index maps (TerarkDB, the lifetime policies; see
//! [`super::index_map`]).

use super::{BlobFile, ValuePointer};
use crate::options::{GcPolicyConfig, Options};
use crate::types::SeqNo;
use crate::version::Version;
use std::collections::HashSet;
use std::sync::Arc;

pub type RelocationFilter = Box<dyn Fn(&ValuePointer) -> bool + Send + Sync>;

pub trait GcPolicy: Send + Sync {
    fn name(&self) -> &'static str;

    /// Whether flush moves large values into value files.
    fn separates_values(&self) -> bool {
        true
    }

    /// For one compaction over `version`: the pointers whose values it rewrites.
    fn relocation_filter(&self, _version: &Version) -> Option<RelocationFilter> {
        None
    }

    /// Table files whose compaction would release garbage-heavy value files.
    fn forced_compactions(&self, _version: &Version) -> HashSet<u64> {
        HashSet::new()
    }

    /// Value files a standalone GC job should collect now (none of them in `busy`); `now`
    /// is the last sequence number, the clock of lifetime TTLs.
    fn pick_gc(&self, _version: &Version, _busy: &HashSet<u64>, _now: SeqNo) -> Vec<u64> {
        Vec::new()
    }
}

/// Builds the policy the options name.
pub fn from_options(o: &Options) -> Box<dyn GcPolicy> {
    match o.gc {
        GcPolicyConfig::Inline => Box::new(Inline),
        GcPolicyConfig::BlobDb {
            age_cutoff,
            force_threshold,
        } => Box::new(BlobDb {
            age_cutoff,
            force_threshold,
        }),
        GcPolicyConfig::Titan { garbage_ratio } => Box::new(Titan { garbage_ratio }),
        GcPolicyConfig::Terark { garbage_ratio } => Box::new(Terark { garbage_ratio }),
        GcPolicyConfig::Lifetime { .. } => Box::new(Lifetime {
            max_batch_bytes: o.lifetime.max_gc_batch_bytes,
        }),
    }
}

/// No separation; nothing to collect.
pub struct Inline;

impl GcPolicy for Inline {
    fn name(&self) -> &'static str {
        "inline"
    }
    fn separates_values(&self) -> bool {
        false
    }
}

/// RocksDB's integrated BlobDB GC.
pub struct BlobDb {
    pub age_cutoff: f64,
    pub force_threshold: f64,
}

impl BlobDb {
    /// Value files numbered below this are in the oldest `age_cutoff` fraction.
    fn cutoff_number(&self, v: &Version) -> Option<u64> {
        let n = v.blobs.len();
        let idx = (self.age_cutoff * n as f64).floor() as usize;
        if idx == 0 {
            return None;
        }
        Some(v.blobs.keys().nth(idx).copied().unwrap_or(u64::MAX))
    }
}

impl GcPolicy for BlobDb {
    fn name(&self) -> &'static str {
        "blobdb"
    }

    fn relocation_filter(&self, v: &Version) -> Option<RelocationFilter> {
        let cutoff = self.cutoff_number(v)?;
        Some(Box::new(move |p: &ValuePointer| p.file < cutoff))
    }

    fn forced_compactions(&self, v: &Version) -> HashSet<u64> {
        let mut out = HashSet::new();
        let (Some(cutoff), Some(oldest)) = (self.cutoff_number(v), v.blobs.values().next()) else {
            return out;
        };
        // A file without garbage is never forced: relocating it would only move it.
        let ratio = oldest.garbage_ratio();
        if oldest.number >= cutoff || ratio == 0.0 || ratio < self.force_threshold {
            return out;
        }
        for files in &v.levels {
            for f in files {
                if f.meta.oldest_blob == Some(oldest.number) {
                    out.insert(f.number());
                }
            }
        }
        out
    }
}

/// Titan's garbage-ratio-triggered GC with write-back.
pub struct Titan {
    pub garbage_ratio: f64,
}

/// At most this many bytes of value files per garbage-ratio GC job.
const RATIO_MAX_BATCH_BYTES: u64 = 1 << 30;

/// Takes files in the given order until `max_bytes` (at least one file).
fn batch<'a>(files: impl Iterator<Item = &'a Arc<BlobFile>>, max_bytes: u64) -> Vec<u64> {
    let mut bytes = 0;
    let mut out = Vec::new();
    for b in files {
        if bytes > 0 && bytes + b.size > max_bytes {
            break;
        }
        bytes += b.size;
        out.push(b.number);
    }
    out
}

/// The files at or above `ratio` garbage, most garbage first.
fn pick_by_garbage_ratio(v: &Version, busy: &HashSet<u64>, ratio: f64) -> Vec<u64> {
    let mut c: Vec<_> = v
        .blobs
        .values()
        .filter(|b| !busy.contains(&b.number) && b.garbage_ratio() >= ratio)
        .collect();
    c.sort_by(|a, b| b.garbage_ratio().total_cmp(&a.garbage_ratio()));
    batch(c.into_iter(), RATIO_MAX_BATCH_BYTES)
}

impl GcPolicy for Titan {
    fn name(&self) -> &'static str {
        "titan"
    }

    fn pick_gc(&self, v: &Version, busy: &HashSet<u64>, _now: SeqNo) -> Vec<u64> {
        pick_by_garbage_ratio(v, busy, self.garbage_ratio)
    }
}

/// TerarkDB's GC: Titan's trigger, index maps instead of write-back.
pub struct Terark {
    pub garbage_ratio: f64,
}

impl GcPolicy for Terark {
    fn name(&self) -> &'static str {
        "terark"
    }

    fn pick_gc(&self, v: &Version, busy: &HashSet<u64>, _now: SeqNo) -> Vec<u64> {
        pick_by_garbage_ratio(v, busy, self.garbage_ratio)
    }
}

/// Lifetime-aware GC (paper 000, sec. 4.5): a file is collected once its TTL has elapsed;
/// one job takes every due file (of any class), oldest deadline first, up to a size cap.
pub struct Lifetime {
    pub max_batch_bytes: u64,
}

impl GcPolicy for Lifetime {
    fn name(&self) -> &'static str {
        "lifetime"
    }

    fn pick_gc(&self, v: &Version, busy: &HashSet<u64>, now: SeqNo) -> Vec<u64> {
        // A file without a lifetime (written under another policy) is due at once.
        let deadline = |b: &BlobFile| {
            b.lifetime
                .map_or(0, |l| l.created_seq.saturating_add(l.ttl))
        };
        let mut due: Vec<_> = v
            .blobs
            .values()
            .filter(|b| !busy.contains(&b.number) && deadline(b) <= now)
            .collect();
        due.sort_by_key(|b| (deadline(b), b.number));
        batch(due.into_iter(), self.max_batch_bytes)
    }
}
