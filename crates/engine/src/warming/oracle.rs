//! The oracle bound: a warming policy that knows the future reads.
//!
//! No prefetcher can do better on the invalidation count than one that knows which keys
//! will be read next. Given the workload's read stream ([`ReadOracle`], built by the
//! benchmark that generated the ops, as the lifetime oracle is for writes), it admits
//! exactly the output blocks holding a key that will be read within
//! [`INVALIDATION_WINDOW_READS`](super::INVALIDATION_WINDOW_READS) reads, and when the
//! job's budget (the same as incremental warm-up's: the whole cache) cannot take them all
//! it keeps those read soonest: under LRU the block whose next read is furthest away is
//! the one evicted first anyway (Belady's choice). A compaction's blocks are judged again
//! when its output is installed, against the reads still to come then.
//!
//! Time is the count of client reads, as everywhere in warming: read `n` is the `n`-th
//! (from 0) get the engine serves. The benchmark numbers reads in op order; with several
//! client threads the engine serves them in nearly that order, so the oracle is exact with
//! one client and off by the threads' interleaving (a few reads) with more.

use super::{BlockFilter, BlockKeys, CacheWarming, JobInputs, INVALIDATION_WINDOW_READS};
use crate::sst::block::Block;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Knows when each key will be read.
pub trait ReadOracle: Send + Sync {
    /// The number of the first client read of `key` at or after read number `from`
    /// (counted from 0 at the engine's open).
    fn next_read(&self, key: &[u8], from: u64) -> Option<u64>;
}

/// How far ahead, in reads, the oracle looks while the job is still writing: the job's own
/// duration plus the window (a read counted now may come before the output is installed,
/// when the block does not help; the install narrows to the window).
const BUILD_LOOKAHEAD: u64 = 4 * INVALIDATION_WINDOW_READS;

/// The policy.
pub struct OracleWarming {
    oracle: Arc<dyn ReadOracle>,
    reads: Arc<AtomicU64>,
}

impl OracleWarming {
    pub fn new(oracle: Arc<dyn ReadOracle>) -> OracleWarming {
        OracleWarming {
            oracle,
            reads: Arc::default(),
        }
    }
}

impl CacheWarming for OracleWarming {
    fn name(&self) -> &'static str {
        "oracle"
    }

    fn plan(&self, _job: &JobInputs<'_>) -> Option<Arc<dyn BlockFilter>> {
        Some(Arc::new(NextReads {
            oracle: self.oracle.clone(),
            reads: self.reads.clone(),
        }))
    }

    fn record_read(&self, _key: &[u8]) {
        self.reads.fetch_add(1, Relaxed);
    }
}

/// Admits a block if one of its keys is read within the horizon; the sooner, the higher
/// its priority.
struct NextReads {
    oracle: Arc<dyn ReadOracle>,
    reads: Arc<AtomicU64>,
}

impl NextReads {
    /// Priority of a block whose keys are `keys`, if one is read within `horizon` reads
    /// of `now`: minus the distance to the first such read.
    fn judge(&self, keys: &BlockKeys, now: u64, horizon: u64) -> Option<f64> {
        let first = keys
            .iter()
            .filter_map(|k| self.oracle.next_read(k, now))
            .min()?;
        let ahead = first - now;
        (ahead < horizon).then_some(-(ahead as f64))
    }
}

impl BlockFilter for NextReads {
    fn admit(&self, keys: &BlockKeys) -> Option<f64> {
        self.judge(keys, self.reads.load(Relaxed), BUILD_LOOKAHEAD)
    }

    fn at_install(&self, block: &Arc<Block>, _priority: f64) -> Option<f64> {
        self.judge(
            &BlockKeys::of(block),
            self.reads.load(Relaxed),
            INVALIDATION_WINDOW_READS,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Reads of keys by read number.
    struct Schedule(HashMap<Vec<u8>, Vec<u64>>);

    impl ReadOracle for Schedule {
        fn next_read(&self, key: &[u8], from: u64) -> Option<u64> {
            let r = self.0.get(key)?;
            r.get(r.partition_point(|&n| n < from)).copied()
        }
    }

    fn oracle() -> OracleWarming {
        let mut m = HashMap::new();
        m.insert(b"a".to_vec(), vec![5, 20_000]);
        m.insert(b"b".to_vec(), vec![30]);
        m.insert(b"c".to_vec(), vec![INVALIDATION_WINDOW_READS + 100]);
        OracleWarming::new(Arc::new(Schedule(m)))
    }

    #[test]
    fn admits_blocks_read_soon_and_ranks_by_the_first_read() {
        let o = oracle();
        let f = o.plan(&JobInputs::empty()).unwrap();
        let p = |keys: &[&str]| f.admit(&BlockKeys::from_keys(keys));
        assert_eq!(p(&["a"]), Some(-5.0));
        assert_eq!(p(&["b", "z"]), Some(-30.0), "the key read soonest decides");
        assert_eq!(p(&["a", "b"]), Some(-5.0));
        assert_eq!(p(&["z"]), None, "never read");
        // While the job runs the oracle looks past the window; at install it does not.
        assert!(p(&["c"]).is_some());
        for _ in 0..10 {
            o.record_read(b"x");
        }
        assert_eq!(p(&["a"]), Some(-(20_000.0 - 10.0)), "read 5 is past");
    }

    #[test]
    fn install_judges_against_the_reads_still_to_come() {
        use crate::sst::block::BlockBuilder;
        use crate::types::{make_internal_key, ValueKind};
        let block = |k: &str| {
            let mut b = BlockBuilder::new(16);
            b.add(&make_internal_key(k.as_bytes(), 1, ValueKind::Value), b"v");
            Arc::new(Block::new(b.finish()).unwrap())
        };
        let o = oracle();
        let f = o.plan(&JobInputs::empty()).unwrap();
        assert_eq!(f.at_install(&block("b"), 0.0), Some(-30.0));
        assert_eq!(f.at_install(&block("c"), 0.0), None, "beyond the window");
        for _ in 0..40 {
            o.record_read(b"x");
        }
        assert_eq!(f.at_install(&block("b"), -30.0), None, "its read went by");
    }
}
