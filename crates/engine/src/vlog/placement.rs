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
//!   ([`super::gc::SpaceAmp`]).

use crate::lifetime::FeatureRecord;
use crate::types::SeqNo;

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
