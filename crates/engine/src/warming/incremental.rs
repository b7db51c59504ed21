//! Incremental warmup (X-Engine, the paper's baseline): after a compaction, load the
//! output blocks whose key ranges overlap blocks that were cached in the input files.
//! It knows nothing of the future: a block cached once, long ago, counts as much as one
//! read a moment ago, and a hot key range none of whose blocks happened to be cached is
//! left cold.

use super::{BlockFilter, BlockKeys, CacheWarming, InputBlock, JobInputs};
use std::sync::Arc;

/// Key intervals `[lo, hi]` of the input blocks that were cached, sorted and merged.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CachedIntervals {
    intervals: Vec<(Vec<u8>, Vec<u8>)>,
}

impl CachedIntervals {
    /// Merges possibly overlapping intervals.
    pub fn new(mut v: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        v.sort();
        let mut merged: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(v.len());
        for (lo, hi) in v {
            match merged.last_mut() {
                Some(last) if lo <= last.1 => {
                    if hi > last.1 {
                        last.1 = hi;
                    }
                }
                _ => merged.push((lo, hi)),
            }
        }
        CachedIntervals { intervals: merged }
    }

    pub fn len(&self) -> usize {
        self.intervals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// True if `[first, last]` overlaps a cached interval.
    pub fn overlaps(&self, first: &[u8], last: &[u8]) -> bool {
        // The first interval that does not end before `first`.
        let i = self
            .intervals
            .partition_point(|(_, hi)| hi.as_slice() < first);
        self.intervals
            .get(i)
            .is_some_and(|(lo, _)| lo.as_slice() <= last)
    }
}

impl BlockFilter for CachedIntervals {
    /// The block's key range `[first key, last key]` overlaps a cached input block. All
    /// such blocks are equal: over the budget, the first written are kept.
    fn admit(&self, keys: &BlockKeys) -> Option<f64> {
        let (first, last) = (keys.first()?, keys.last()?);
        self.overlaps(first, last).then_some(0.0)
    }
}

/// The key intervals of the cached ones among a job's input blocks.
pub fn cached_intervals(blocks: &[InputBlock]) -> CachedIntervals {
    CachedIntervals::new(
        blocks
            .iter()
            .filter(|b| b.cached)
            .map(|b| (b.lo.clone(), b.hi.clone()))
            .collect(),
    )
}

/// The policy.
#[derive(Debug, Default)]
pub struct IncrementalWarmup;

impl CacheWarming for IncrementalWarmup {
    fn name(&self) -> &'static str {
        "incremental-warmup"
    }

    fn plan(&self, job: &JobInputs<'_>) -> Option<Arc<dyn BlockFilter>> {
        let cached = cached_intervals(job.blocks);
        (!cached.is_empty()).then(|| Arc::new(cached) as Arc<dyn BlockFilter>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warming::{JobKind, KeySet};

    fn iv(lo: &str, hi: &str) -> (Vec<u8>, Vec<u8>) {
        (lo.as_bytes().to_vec(), hi.as_bytes().to_vec())
    }

    #[test]
    fn overlap_of_merged_intervals() {
        let c = CachedIntervals::new(vec![iv("m", "p"), iv("c", "e"), iv("d", "g"), iv("x", "x")]);
        assert_eq!(c.len(), 3, "[c,e] and [d,g] merge");
        assert!(c.overlaps(b"a", b"c"), "touches the start");
        assert!(c.overlaps(b"f", b"h"));
        assert!(!c.overlaps(b"h", b"l"), "the gap between g and m");
        assert!(c.overlaps(b"a", b"z"), "covers everything");
        assert!(c.overlaps(b"x", b"x"));
        assert!(!c.overlaps(b"y", b"z"));
    }

    #[test]
    fn plans_only_from_cached_input_blocks() {
        let block = |lo: &str, hi: &str, cached| InputBlock {
            file: 1,
            offset: 0,
            lo: lo.as_bytes().to_vec(),
            hi: hi.as_bytes().to_vec(),
            cached,
        };
        let blocks = [block("a", "c", false), block("d", "f", true)];
        let job = JobInputs {
            kind: JobKind::Compaction,
            blocks: &blocks,
            cached_keys: &KeySet::default(),
            older: None,
        };
        let f = IncrementalWarmup.plan(&job).unwrap();
        assert!(f.admit(&BlockKeys::from_keys(&["a", "b"])).is_none());
        assert!(f.admit(&BlockKeys::from_keys(&["e"])).is_some());
        assert!(
            f.admit(&BlockKeys::from_keys(&["a", "z"])).is_some(),
            "spans a cached block"
        );
        let none = [block("a", "c", false)];
        let job = JobInputs {
            kind: JobKind::Compaction,
            blocks: &none,
            cached_keys: &KeySet::default(),
            older: None,
        };
        assert!(IncrementalWarmup.plan(&job).is_none(), "nothing was cached");
    }
}
