//! Value-file garbage collection policies, behind one trait so that they are
//! interchangeable and compared in one run.
//!
//! A policy decides; the engine acts. The three decisions are: which pointers a compaction
//! rewrites into new value files ([`GcPolicy::relocation_filter`]), which table files must
//! be compacted so that old value files can be released ([`GcPolicy::forced_compactions`]),
//! and which value files a standalone GC job collects ([`GcPolicy::pick_gc`]). The valid
//! values a GC job finds are found again either by a pointer write-back through the write
//! path (Titan) or through value index maps (TerarkDB, the lifetime policies; see
//! [`crate::vlog::index_map`]).

use super::early_garbage::EarlyGarbage;
use crate::internal_key::SeqNo;
use crate::options::{GcPolicyConfig, GcTrigger, Options};
use crate::version::Version;
use crate::vlog::{BlobFile, ValuePointer};
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

    /// [`GcPolicy::pick_gc`] knowing also the garbage flush found before compaction
    /// counted it ([`EarlyGarbage`]); policies that do not use it pick as without.
    fn pick_gc_with(
        &self,
        version: &Version,
        busy: &HashSet<u64>,
        now: SeqNo,
        _early: Option<&EarlyGarbage>,
    ) -> Vec<u64> {
        self.pick_gc(version, busy, now)
    }

    /// The space-amplification target the policy holds the value files to, if it has one:
    /// the write path slows down when collection falls behind it ([`super::pacer::GcPacer`]).
    fn space_amp_target(&self) -> Option<f64> {
        None
    }

    /// Under a target: the value files' space amplification now (counted and early
    /// garbage).
    fn space_amp(&self, _version: &Version, _early: Option<&EarlyGarbage>) -> Option<f64> {
        None
    }
}

/// Builds the policy the options name.
pub fn from_options(o: &Options) -> Box<dyn GcPolicy> {
    match o.vlog.gc {
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
        GcPolicyConfig::Lifetime { .. } => match o.vlog.lifetime.trigger {
            GcTrigger::Ttl => Box::new(Lifetime {
                max_batch_bytes: o.vlog.lifetime.max_gc_batch_bytes,
            }),
            GcTrigger::SpaceAmp { target } => Box::new(SpaceAmp {
                target,
                max_batch_bytes: o.vlog.lifetime.max_gc_batch_bytes,
            }),
        },
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

/// Collection driven by garbage under a space-amplification target ([`GcTrigger::SpaceAmp`]).
///
/// * **When.** Only while the value files hold more than `target` times their live bytes
///   (garbage as counted exactly by compaction, see `docs/engine.md`): space is the
///   budget, and every byte copied before it is needed is a byte that might have died.
/// * **Which.** Files with a garbage ratio of at least `1 - 1 / target` (the ratio at
///   which the whole log would sit at the target; 0.2 for 1.25, Titan's default), best
///   first by the bytes a copy reclaims per byte copied, `g / (1 - g)`, discounted by how
///   much of the file's predicted lifetime has passed: a file whose values were placed to
///   die within a horizon `h` ([`super::placement`]) and is younger than `h` is about to
///   turn into garbage by itself, and copying it now would copy values that die anyway.
///   Files without a horizon (unknown or unbounded lifetimes) count as fully aged.
/// * **How much.** Files in that order until the projected space amplification is back
///   at the target, at most `max_batch_bytes` per job (at least one file).
pub struct SpaceAmp {
    pub target: f64,
    pub max_batch_bytes: u64,
}

impl SpaceAmp {
    /// How much of the predicted lifetime of `b`'s values has passed at `now`, in [0, 1].
    fn aged(b: &BlobFile, now: SeqNo) -> f64 {
        match b.lifetime {
            Some(l) if l.ttl != SeqNo::MAX && l.ttl > 0 => {
                (now.saturating_sub(l.created_seq) as f64 / l.ttl as f64).min(1.0)
            }
            _ => 1.0,
        }
    }
}

impl GcPolicy for SpaceAmp {
    fn name(&self) -> &'static str {
        "lifetime"
    }

    fn pick_gc(&self, v: &Version, busy: &HashSet<u64>, now: SeqNo) -> Vec<u64> {
        self.pick_gc_with(v, busy, now, None)
    }

    fn space_amp_target(&self) -> Option<f64> {
        Some(self.target)
    }

    fn space_amp(&self, v: &Version, early: Option<&EarlyGarbage>) -> Option<f64> {
        let (total, live) = totals(v, early);
        Some(total as f64 / live.max(1) as f64)
    }

    /// Garbage is what compaction counted plus what flush found since (`early`).
    fn pick_gc_with(
        &self,
        v: &Version,
        busy: &HashSet<u64>,
        now: SeqNo,
        early: Option<&EarlyGarbage>,
    ) -> Vec<u64> {
        let garbage = |b: &BlobFile| garbage_of(b, early);
        let (mut total, live) = totals(v, early);
        // What running jobs collect is as good as gone: another job takes only what is
        // still needed beyond it.
        let collecting: u64 = busy
            .iter()
            .filter_map(|n| v.blobs.get(n))
            .map(|b| garbage(b))
            .sum();
        total -= collecting.min(total);
        let budget = self.target * live as f64;
        if (total as f64) <= budget {
            return Vec::new();
        }
        let min_ratio = 1.0 - 1.0 / self.target;
        let mut c: Vec<(f64, u64, &Arc<BlobFile>)> = v
            .blobs
            .values()
            .filter(|b| !busy.contains(&b.number))
            .filter_map(|b| {
                let (g, r) = (garbage(b), b.record_bytes().max(1));
                let ratio = g as f64 / r as f64;
                // Reclaimed bytes per copied byte, discounted while the file's values are
                // predicted to die by themselves.
                let score = ratio / (1.0 - ratio).max(1e-3) * Self::aged(b, now);
                (ratio >= min_ratio).then_some((score, g, b))
            })
            .collect();
        c.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.2.number.cmp(&b.2.number)));
        let mut out = Vec::new();
        let mut bytes = 0;
        for (_, g, b) in c {
            if (total as f64) <= budget || (bytes > 0 && bytes + b.size > self.max_batch_bytes) {
                break;
            }
            bytes += b.size;
            total -= g.min(total);
            out.push(b.number);
        }
        out
    }
}

/// A value file's garbage: counted by compaction, plus found early by flush.
fn garbage_of(b: &BlobFile, early: Option<&EarlyGarbage>) -> u64 {
    let e = early.map_or(0, |e| e.bytes(b.number));
    (b.garbage_bytes() + e).min(b.record_bytes())
}

/// Record bytes of all value files, and of their live records.
fn totals(v: &Version, early: Option<&EarlyGarbage>) -> (u64, u64) {
    v.blobs.values().fold((0u64, 0u64), |(t, l), b| {
        let r = b.record_bytes();
        (t + r, l + r - garbage_of(b, early))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FileStorage;
    use crate::lifetime::LifetimeClass;
    use crate::vlog::file::{BlobMeta, FILE_HEADER};
    use crate::vlog::FileLifetime;
    use std::collections::BTreeMap;

    /// A value file of 1000 record bytes: number, garbage bytes, lifetime as (created,
    /// horizon).
    type TestFile = (u64, u64, Option<(SeqNo, SeqNo)>);

    fn version(files: &[TestFile]) -> Version {
        let storage: Arc<dyn crate::io::Storage> = Arc::new(FileStorage::new());
        let mut blobs = BTreeMap::new();
        for &(number, garbage, life) in files {
            let meta = BlobMeta {
                number,
                size: 1000 + FILE_HEADER as u64,
                entries: 10,
                garbage_bytes: garbage,
                garbage_entries: garbage / 100,
                lifetime: life.map(|(created_seq, ttl)| FileLifetime {
                    class: LifetimeClass::Default,
                    created_seq,
                    ttl,
                }),
                expiry: crate::vlog::FileExpiry::None,
            };
            let f = BlobFile::new(&meta, std::path::Path::new("/nonexistent"), storage.clone());
            blobs.insert(number, Arc::new(f));
        }
        let mut v = Version::empty(2);
        v.blobs = Arc::new(blobs);
        v
    }

    #[test]
    fn space_amp_collects_only_above_the_target() {
        let p = SpaceAmp {
            target: 1.25,
            max_batch_bytes: 1 << 30,
        };
        let none = HashSet::new();
        // 4000 bytes, 3700 live: 1.08 <= 1.25, nothing to do.
        let v = version(&[(1, 300, None), (2, 0, None), (3, 0, None), (4, 0, None)]);
        assert!(p.pick_gc(&v, &none, 0).is_empty());
        // 4000 bytes, 2900 live: 1.38. The file with most garbage goes first, and it alone
        // brings the log to 3200 / 2900 = 1.10.
        let v = version(&[(1, 300, None), (2, 800, None), (3, 0, None), (4, 0, None)]);
        assert_eq!(p.pick_gc(&v, &none, 0), vec![2]);
        // Unless a running job collects it: that alone brings the space back.
        let busy: HashSet<u64> = [2].into();
        assert!(p.pick_gc(&v, &busy, 0).is_empty());
        // Where it does not, another job takes only what is needed beyond it: 4000 bytes,
        // 2400 live; without file 2's 800, 3200 / 2400 = 1.33, and file 3 brings it to
        // 1.13 (counting file 2's garbage, files 3 and 1 would be taken). A file below
        // 1 - 1/1.25 = 0.2 garbage is never taken.
        let v = version(&[(1, 300, None), (2, 800, None), (3, 500, None), (4, 0, None)]);
        assert_eq!(p.pick_gc(&v, &busy, 0), vec![3]);
        assert_eq!(p.pick_gc(&v, &none, 0), vec![2, 3]);
        let v = version(&[(1, 150, None), (2, 150, None), (3, 900, None)]);
        assert_eq!(p.pick_gc(&v, &[3].into(), 0), Vec::<u64>::new());
        // Enough files to come back to the target: 5000 bytes, 3000 live (1.67); each file
        // reclaims 400, so four are needed (after three, 3800 / 3000 = 1.27 is still above).
        let v = version(&[
            (1, 400, None),
            (2, 400, None),
            (3, 400, None),
            (4, 400, None),
            (5, 400, None),
        ]);
        assert_eq!(p.pick_gc(&v, &none, 0).len(), 4);
        // The batch cap stops earlier (but takes at least one file).
        let capped = SpaceAmp {
            target: 1.25,
            max_batch_bytes: 10,
        };
        assert_eq!(capped.pick_gc(&v, &none, 0).len(), 1);
    }

    #[test]
    fn space_amp_counts_garbage_flush_found() {
        let p = SpaceAmp {
            target: 1.25,
            max_batch_bytes: 1 << 30,
        };
        let none = HashSet::new();
        // Counted: 4000 bytes, 3900 live. Flush found 900 more bytes of file 3 dead.
        let v = version(&[(1, 100, None), (2, 0, None), (3, 0, None), (4, 0, None)]);
        assert!(p.pick_gc(&v, &none, 0).is_empty());
        let early = EarlyGarbage::default();
        for i in 0..9 {
            early.record(&ValuePointer {
                file: 3,
                offset: i * 100,
                size: 100,
            });
        }
        assert_eq!(p.pick_gc_with(&v, &none, 0, Some(&early)), vec![3]);
    }

    #[test]
    fn space_amp_waits_for_files_predicted_to_die() {
        let p = SpaceAmp {
            target: 1.25,
            max_batch_bytes: 1 << 30,
        };
        let none = HashSet::new();
        // File 1 has more garbage, but its values were placed to die by seq 1000 and only a
        // tenth of that has passed: file 2 (no horizon) goes first.
        let v = version(&[(1, 700, Some((0, 1000))), (2, 500, None), (3, 0, None)]);
        assert_eq!(p.pick_gc(&v, &none, 100)[0], 2);
        // Once its horizon has passed, its garbage ratio decides again.
        assert_eq!(p.pick_gc(&v, &none, 1000)[0], 1);
        // An unbounded horizon counts as fully aged.
        let v = version(&[
            (1, 700, Some((0, SeqNo::MAX))),
            (2, 500, None),
            (3, 0, None),
        ]);
        assert_eq!(p.pick_gc(&v, &none, 100)[0], 1);
    }
}
