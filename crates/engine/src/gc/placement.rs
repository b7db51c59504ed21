//! Placement of values by predicted death: values expected to die at about the same time
//! share a value file, so that the file turns into garbage as a whole and GC copies little.
//!
//! This is SepBIT's idea (paper 004) applied to value files, and DumpKV's (paper 000)
//! applied where values are born instead of only where GC copies them:
//!
//! * A value's *remaining lifetime* `r` is the number of sequence numbers until its key is
//!   written again. It is predicted when flush first writes the value and again whenever GC
//!   copies it ([`Predictor`]).
//! * Its class is the number of doublings of `r` over the placement unit `u` (the writes of
//!   one memtable, measured at each flush): class 0 holds values predicted to die within
//!   `u`, class `k` those predicted to die within `u * 2^k`; values without a prediction
//!   (a key's first write) get a class of their own, [`UNKNOWN`]. Log-spaced classes keep
//!   the relative error within a class bounded (a factor of 2) with a handful of open files.
//! * Each class goes to its own file; the file records the class's horizon `u * 2^k` as
//!   its `FileLifetime::ttl`, so victim selection knows when its values should be dead
//!   ([`super::policy::SpaceAmp`]).
//!
//! Three places write value files, and all three ask one [`Placement`]: the write path
//! (the value log as the WAL, which logs each value into its class's file), flush and
//! compaction ([`JobHooks`]: flush separates values; compaction links the feature records
//! flush stored, paper 000 sec. 4.3) and the index-map GC job (each copy it keeps, and its
//! output files' lifetimes). The lifetime policies' runtime implements it
//! ([`super::runtime::LifetimeRuntime`]); the GC jobs' tests implement it with a map.

use crate::batch::WriteBatch;
use crate::error::Result;
use crate::internal_key::{seek_key, SeqNo, ValueKind};
use crate::io::IoCause;
use crate::lifetime::{FeatureRecord, Thresholds, TrainingSample};
use crate::version::Version;
use crate::vlog::{FileLifetime, ValuePointer};
use std::path::Path;
use std::time::Instant;

/// Where values go by predicted death, asked wherever a value file is written. A class is
/// a value file of its own (at most [`CLASSES`] open at once per writer); every method
/// has the answer of no placement (one class, no lifetime) as its default.
pub trait Placement: Sync {
    // The write path (the value log as the WAL).

    /// The deletes of `batch` (sequence numbers assigned) end their keys' values' lives.
    fn deleted(&self, _batch: &WriteBatch) {}
    /// The class of the value the write path logs for `key` at `seq`.
    fn at_write(&self, _key: &[u8], _seq: SeqNo) -> usize {
        0
    }

    // Flush and compaction.

    /// Whether flush looks up each key's previous write in the tree (to place values and
    /// to find garbage early).
    fn looks_up_previous(&self) -> bool {
        false
    }
    /// The class of a value flush separates: the key, the write's sequence number, the
    /// key's previous write (in the flushed memtable, else in the tree, if the policy looks
    /// it up), and the flush's clock.
    fn at_flush(
        &self,
        _key: &[u8],
        _seq: SeqNo,
        _previous: Option<&Previous>,
        _now: SeqNo,
    ) -> usize {
        0
    }
    /// The feature record flush stores after a new pointer.
    fn fresh_features(&self, _value_len: usize) -> FeatureRecord {
        FeatureRecord::new()
    }
    /// Whether compaction links flushed feature records to the key's previous write
    /// (sec. 4.3), which takes a tree lookup below the output for each key whose previous
    /// write is not in the job's input.
    fn links_features(&self) -> bool {
        false
    }
    /// A true lifetime compaction found: the write whose record was `prev` lived
    /// `lifetime` sequence numbers.
    fn observe(&self, _prev: &FeatureRecord, _lifetime: SeqNo) {}

    // The index-map GC job.

    /// A GC job starts at `now`.
    fn begin_gc(&self, now: SeqNo) -> GcRound {
        GcRound::new(now)
    }
    /// The class of a record the job keeps.
    fn at_gc(&self, _round: &mut GcRound, _kept: Kept<'_>) -> usize {
        0
    }
    /// The job has read its inputs, of which `gc_ratio` (bytes) was garbage.
    fn gc_inputs_read(&self, _round: &mut GcRound, _gc_ratio: f64) {}
    /// The job was installed.
    fn gc_installed(&self, _round: &GcRound, _tally: &JobTally) {}

    // Every writer.

    /// The lifetime a new value file of `class` records, created at `created` by the write
    /// path, a flush or a compaction (`round` is `None`), or by a GC job.
    fn file_lifetime(
        &self,
        _class: usize,
        _created: SeqNo,
        _round: Option<&GcRound>,
    ) -> Option<FileLifetime> {
        None
    }
}

/// An older write of a key, as feature linking and placement need it.
#[derive(Clone, Debug)]
pub struct Previous {
    pub seq: SeqNo,
    pub features: Option<FeatureRecord>,
    /// Where its value lives, if it is a separated value.
    pub pointer: Option<ValuePointer>,
}

/// A record a GC job keeps, as its placement is asked about it.
pub enum Kept<'a> {
    /// Its key's newest value, found by a lookup: written at `seq`, with the feature record
    /// stored after its pointer.
    Live {
        key: &'a [u8],
        seq: SeqNo,
        features: FeatureRecord,
    },
    /// Kept without a lookup, in a file whose dead records are all known
    /// ([`super::early_garbage::Coverage`]); `written` is its write's sequence number as
    /// far as the job knows it.
    Unlooked { key: &'a [u8], written: SeqNo },
    /// Only a snapshot still reads it.
    ForSnapshot,
}

/// One GC job's placement state: its clock and, under the TTL trigger, the thresholds it
/// started with (recomputed once it has read its inputs, Eq. 3-6) and the training
/// samples it keeps until it knows its garbage ratio (sec. 4.3).
pub struct GcRound {
    pub now: SeqNo,
    pub thresholds: Option<Thresholds>,
    pub samples: Vec<TrainingSample>,
}

impl GcRound {
    pub fn new(now: SeqNo) -> GcRound {
        GcRound {
            now,
            thresholds: None,
            samples: Vec::new(),
        }
    }
}

/// What one GC job read and found, for the policy's record of it.
pub struct JobTally {
    pub started: Instant,
    pub now: SeqNo,
    pub gc_ratio: f64,
    /// (input bytes, garbage bytes) per lifetime class of input file.
    pub by_class: [(u64, u64); 3],
    pub input_bytes: u64,
    pub skipped_known: u64,
    pub lookups: u64,
    pub unlooked: u64,
}

/// Placement as one flush or compaction sees it: the policy, with the version the job
/// started from, the level below its output (where a key's previous write is looked up;
/// 0 for a flush: anywhere) and its clock.
pub struct JobHooks<'a> {
    placement: &'a dyn Placement,
    dir: &'a Path,
    version: &'a Version,
    below_level: usize,
    now: SeqNo,
}

impl<'a> JobHooks<'a> {
    /// Hooks for a flush (`below_level` 0) or a compaction writing into
    /// `below_level - 1`, of the database in `dir`.
    pub fn new(
        placement: &'a dyn Placement,
        dir: &'a Path,
        version: &'a Version,
        below_level: usize,
        now: SeqNo,
    ) -> JobHooks<'a> {
        JobHooks {
            placement,
            dir,
            version,
            below_level,
            now,
        }
    }

    /// [`Placement::looks_up_previous`].
    pub fn looks_up_previous(&self) -> bool {
        self.placement.looks_up_previous()
    }

    /// The placement class of a value flush separates ([`Placement::at_flush`]).
    pub fn place(&self, key: &[u8], seq: SeqNo, previous: Option<&Previous>) -> usize {
        self.placement.at_flush(key, seq, previous, self.now)
    }

    /// The lifetime stamped on the value files of placement class `class` the job creates.
    pub fn file_lifetime(&self, class: usize) -> Option<FileLifetime> {
        self.placement.file_lifetime(class, self.now, None)
    }

    /// The feature record flush stores after a new pointer (marked pending a link if
    /// [`JobHooks::links_features`]).
    pub fn fresh_features(&self, value_len: usize) -> FeatureRecord {
        self.placement.fresh_features(value_len)
    }

    /// [`Placement::links_features`].
    pub fn links_features(&self) -> bool {
        self.placement.links_features()
    }

    /// [`Placement::observe`].
    pub fn observe(&self, prev: &FeatureRecord, lifetime: SeqNo) {
        self.placement.observe(prev, lifetime)
    }

    /// The key's newest write older than `seq` *below* the job's output level: its
    /// sequence number and, if it is a separated value, its pointer and feature record.
    pub fn previous_below(&self, key: &[u8], seq: SeqNo) -> Result<Option<Previous>> {
        if self.below_level >= self.version.num_levels() {
            return Ok(None);
        }
        let seek = seek_key(key, seq.saturating_sub(1));
        let Some(f) = self
            .version
            .get_from(self.below_level, key, &seek, IoCause::Lookup)?
        else {
            return Ok(None);
        };
        let (features, pointer) = if f.kind == ValueKind::Pointer {
            let (pointer, meta) = ValuePointer::decode(self.dir, &f.value)?;
            (
                Some(FeatureRecord::after_pointer(self.dir, meta)?),
                Some(pointer),
            )
        } else {
            (None, None)
        };
        Ok(Some(Previous {
            seq: f.seq,
            features,
            pointer,
        }))
    }
}

/// Classes with a predicted remaining lifetime: up to `u * 2^(PREDICTED - 1)` and beyond.
pub const PREDICTED: usize = 12;
/// The class of values without a prediction.
pub const UNKNOWN: usize = PREDICTED;
/// All classes: the number of value files a flush or a GC job may have open at once.
pub const CLASSES: usize = PREDICTED + 1;

/// How many of a key's most recent write intervals the history predictor averages. One
/// interval of a key written at a steady rate is exponentially distributed (its standard
/// deviation equals its mean); the mean of four has half that spread, while a key whose
/// rate changes is followed within four writes.
pub const HISTORY: usize = 4;

/// The class of a value predicted to live `remaining` more sequence numbers.
pub fn class_of(remaining: Option<SeqNo>, unit: SeqNo) -> usize {
    let Some(r) = remaining else {
        return UNKNOWN;
    };
    let q = r / unit.max(1);
    let doublings = (u64::BITS - q.leading_zeros()) as usize;
    doublings.min(PREDICTED - 1)
}

/// The horizon of a class: its values are predicted dead this many sequence numbers after
/// the file was written (`u64::MAX` for [`UNKNOWN`] and the last predicted class, which
/// has no upper bound).
pub fn horizon(class: usize, unit: SeqNo) -> SeqNo {
    if class >= PREDICTED - 1 {
        return SeqNo::MAX;
    }
    unit.max(1).saturating_mul(1 << class)
}

/// Where a prediction comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predictor {
    /// No prediction: every value in one class (placement off; victim selection alone).
    None,
    /// The key's own history (SepBIT's rule): a new write lives about as long as the
    /// key's recent writes did; a value GC finds valid lives about as long again as it
    /// has already lived, unless the key's history says it is due sooner.
    History,
    /// The true next write of the key (the benchmark's op stream): the bound.
    Oracle,
    /// The key's true mean write interval over the workload: the bound of predictors that
    /// learn a key's rate, which cannot know when within its rate the next write falls.
    RateOracle,
}

/// Predicted remaining lifetime of a new write whose key was last written `interval`
/// sequence numbers before, with older intervals `older` (newest first; a feature record's
/// Deltas).
pub fn at_birth(interval: SeqNo, older: &[u64]) -> SeqNo {
    mean(std::iter::once(interval).chain(older.iter().copied().take(HISTORY - 1)))
}

/// Predicted remaining lifetime of a value GC finds valid, `age` sequence numbers after it
/// was written, its key's write history in `rec`. Without history (a key written once, or
/// not yet linked by compaction) the value is expected to live as long again as it has
/// (the age rule SepBIT applies to GC-rewritten blocks); with history, see
/// [`at_gc_from_mean`].
pub fn at_gc(rec: &FeatureRecord, age: SeqNo) -> SeqNo {
    let d = rec.deltas();
    if d.is_empty() {
        return age;
    }
    at_gc_from_mean(mean(d.iter().copied().take(HISTORY)), age)
}

/// [`at_gc`] for a key whose recent mean interval is `mean`: the mean, unless the value
/// has already outlived it: the key has cooled, and its age is the better guess. (The
/// Poisson estimate that weighs the open interval against the `n` closed ones, `mean +
/// age / n`, was tried too, with `halflife compare --preset lifetime` at Zipfian 0.9 and
/// 0.99 and on the shifting workload: at target 1.5 it copied less but held more space
/// over the run, a move along the write/space curve rather than below it.)
pub fn at_gc_from_mean(mean: SeqNo, age: SeqNo) -> SeqNo {
    mean.max(age)
}

fn mean(xs: impl Iterator<Item = u64>) -> u64 {
    let (sum, n) = xs.fold((0u128, 0u128), |(s, n), x| (s + x as u128, n + 1));
    sum.checked_div(n).map_or(0, |m| m as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_double_and_saturate() {
        assert_eq!(class_of(None, 100), UNKNOWN);
        assert_eq!(class_of(Some(0), 100), 0);
        assert_eq!(class_of(Some(99), 100), 0);
        assert_eq!(class_of(Some(100), 100), 1);
        assert_eq!(class_of(Some(199), 100), 1);
        assert_eq!(class_of(Some(200), 100), 2);
        assert_eq!(class_of(Some(399), 100), 2);
        assert_eq!(class_of(Some(400), 100), 3);
        assert_eq!(class_of(Some(u64::MAX), 100), PREDICTED - 1);
        // A zero unit does not divide by zero.
        assert_eq!(class_of(Some(5), 0), 3);
        // Every value of class k dies within the class's horizon.
        for r in [0u64, 1, 99, 100, 150, 1000, 12_345, 200_000] {
            let c = class_of(Some(r), 100);
            assert!(r < horizon(c, 100), "{r} in class {c}");
        }
        assert_eq!(horizon(UNKNOWN, 100), u64::MAX);
    }

    #[test]
    fn history_predictions() {
        // A new write: the mean of its interval and the three newest older ones.
        assert_eq!(at_birth(100, &[]), 100);
        assert_eq!(at_birth(100, &[300, 200, 400, 10_000]), 250);
        let mut rec = FeatureRecord::new();
        // Written once: as long again as it has lived.
        assert_eq!(at_gc(&rec, 700), 700);
        rec.update(1_100, 1_000);
        rec.update(1_400, 1_100);
        assert_eq!(rec.deltas(), &[300, 100]);
        // Young for its key: the key's mean interval; older than that: its age.
        assert_eq!(at_gc(&rec, 50), 200);
        assert_eq!(at_gc(&rec, 5_000), 5_000);
    }
}
