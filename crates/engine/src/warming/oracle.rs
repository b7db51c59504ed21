//! The oracle bound: a warming policy that knows the future reads.
//!
//! No prefetcher can do better on the invalidation count than one that knows which keys
//! will be read next. Given the workload's read stream ([`ReadOracle`], built by the
//! benchmark that generated the ops, as the lifetime oracle is for writes), it admits
//! exactly the output blocks holding a key that will be read within its horizon
//! ([`ReadOracle::horizon`]: by default
//! [`INVALIDATION_WINDOW_READS`](super::INVALIDATION_WINDOW_READS) reads), and when the
//! job's budget cannot take them all it keeps those read soonest: under LRU the block
//! whose next read is furthest away is the one evicted first anyway (Belady's choice). A
//! compaction's blocks are judged again just before its output is published, against
//! the reads still to come then.
//!
//! **Judging is cheap**, so that the bound is one of knowledge and not of the judge's
//! speed. A compaction's install looks up every key of thousands of held blocks; done
//! key by key against the whole future (a hash probe and a search of the key's reads
//! each) it took a median of 4,211 reads' time, while the window it judges for moved on.
//! Now the oracle gives the keys read within the window, in order
//! ([`ReadOracle::keys_read`]); the install turns those (at most a horizon of them) into
//! one small map of each key's first read ([`Window`]), after listing the dropped keys,
//! which does not depend on the moment, and each held block is then judged by a probe of
//! that map per key: no block is decoded again and no key's whole history is searched.
//!
//! Time is the count of client reads, as everywhere in warming: read `n` is the `n`-th
//! (from 0) get the engine serves. The benchmark numbers reads in op order; with several
//! client threads the engine serves them out of that order by up to
//! [`ReadOracle::skew`] reads, and the oracle widens its window by that much on both
//! sides.

use super::{
    BlockFilter, BlockKeys, Budget, CacheWarming, Candidate, Dropping, JobInputs, KeyHashMap,
    KeySet, INVALIDATION_WINDOW_READS,
};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

/// Knows when each key will be read. Keys are named by their [`KeySet::hash`].
pub trait ReadOracle: Send + Sync {
    /// The numbers of the client reads of the key whose hash is `key`, ascending (counted
    /// from 0 at the engine's open; at most 2^32 reads).
    fn reads_of(&self, key: u64) -> &[u32];

    /// The keys (hashes) of reads `from..to`, in read order, clipped to the reads known.
    fn keys_read(&self, from: u64, to: u64) -> &[u64];

    /// How far ahead, in reads, a compaction's install looks: the invalidation window, by
    /// default, so that the oracle bounds what the invalidation-miss count can charge. A
    /// benchmark whose misses after a compaction last longer than the window (a cache
    /// holding all the data, refilled over a second or more) widens it, or the bound
    /// would stop where the count does and not where the misses do.
    fn horizon(&self) -> u64 {
        INVALIDATION_WINDOW_READS
    }

    /// How many reads the engine's count may run ahead of or behind the oracle's numbering
    /// (client threads interleaving their batches of ops); 0 with one client.
    fn skew(&self) -> u64 {
        0
    }

    /// The first read of `key` numbered `from` or later.
    fn next_read(&self, key: u64, from: u64) -> Option<u64> {
        let r = self.reads_of(key);
        r.get(r.partition_point(|&n| u64::from(n) < from))
            .map(|&n| u64::from(n))
    }

    /// How many reads of `key` have numbers in `[from, to)`.
    fn reads_in(&self, key: u64, from: u64, to: u64) -> u64 {
        let r = self.reads_of(key);
        let a = r.partition_point(|&n| u64::from(n) < from);
        let b = r.partition_point(|&n| u64::from(n) < to);
        b.saturating_sub(a) as u64
    }
}

/// How far ahead, in horizons, the oracle looks while the job is still writing: the job's
/// own duration plus the horizon (a read counted now may come before the output is
/// installed, when the block does not help; the install narrows to the horizon).
const BUILD_LOOKAHEAD: u64 = 4;

/// The policy.
pub struct OracleWarming {
    oracle: Arc<dyn ReadOracle>,
    reads: Arc<AtomicU64>,
    budget: Budget,
}

impl OracleWarming {
    pub fn new(oracle: Arc<dyn ReadOracle>, budget: Budget) -> OracleWarming {
        OracleWarming {
            oracle,
            reads: Arc::default(),
            budget,
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
            window: OnceLock::new(),
        }))
    }

    fn record_read(&self, _key: &[u8]) {
        self.reads.fetch_add(1, Relaxed);
    }

    fn budget(&self) -> Budget {
        self.budget
    }
}

/// The first read of each key read within a compaction's install window: built once per
/// install from the reads in order, then probed once per held key.
struct Window {
    /// Read number at which the window starts (the engine's count at the install, less
    /// the skew).
    from: u64,
    first: KeyHashMap<u64>,
}

impl Window {
    fn new(oracle: &dyn ReadOracle, now: u64) -> Window {
        let from = now.saturating_sub(oracle.skew());
        let to = now + oracle.horizon() + oracle.skew();
        let keys = oracle.keys_read(from, to);
        let mut first = KeyHashMap::with_capacity_and_hasher(keys.len(), Default::default());
        for (i, k) in keys.iter().enumerate() {
            first.entry(*k).or_insert(from + i as u64);
        }
        Window { from, first }
    }
}

/// Admits a block if one of its keys is read within the horizon.
struct NextReads {
    oracle: Arc<dyn ReadOracle>,
    reads: Arc<AtomicU64>,
    /// The install's window (a filter serves one job, and a compaction installs once).
    window: OnceLock<Window>,
}

impl BlockFilter for NextReads {
    /// While the job writes, the install is still to come: a block read soon may be read
    /// only before it, so the hold ranks by how often the block is read over the whole
    /// lookahead (a block read often is read after the install too). Every block is held,
    /// those without a read in the lookahead last: a job that runs longer than the
    /// lookahead installs after it, when a block written early and not read by then may
    /// be read within the install's window (the install decides; a flush's block is
    /// judged at once, [`BlockFilter::at_install`]).
    fn admit(&self, keys: &BlockKeys) -> Option<f64> {
        let now = self.reads.load(Relaxed);
        let from = now.saturating_sub(self.oracle.skew());
        let end = now + BUILD_LOOKAHEAD * self.oracle.horizon();
        let n: u64 = keys
            .iter()
            .map(|k| self.oracle.reads_in(KeySet::hash(k), from, end))
            .sum();
        Some(n as f64)
    }

    /// At install: the block is worth its place if it holds a key of a dropped block
    /// (only those keys' misses are charged to the compaction) that is read within the
    /// window; the sooner, the higher. The dropped keys are listed before the window is
    /// taken (listing them decodes the dropped blocks, and does not depend on the
    /// moment). A flush drops nothing: its blocks are judged by all their keys over the
    /// lookahead (a key rewritten after the compaction that dropped its block is read
    /// from a flush's output, which may be older than the window), as they are written.
    fn at_install(&self, held: &Candidate<'_>, dropping: &Dropping) -> Option<f64> {
        if dropping.is_empty() {
            let now = self.reads.load(Relaxed);
            let from = now.saturating_sub(self.oracle.skew());
            let first = held
                .hashes
                .iter()
                .filter_map(|h| self.oracle.next_read(*h, from))
                .min()?;
            let ahead = first.saturating_sub(now);
            return (ahead < BUILD_LOOKAHEAD * self.oracle.horizon())
                .then_some(-(ahead as f64));
        }
        let dropped = dropping.keys();
        let w = self
            .window
            .get_or_init(|| Window::new(&*self.oracle, self.reads.load(Relaxed)));
        let first = held
            .hashes
            .iter()
            .filter_map(|h| w.first.get(h).filter(|_| dropped.contains_hash(*h)))
            .min()?;
        Some(-((first - w.from) as f64))
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Reads of keys by read number (every other read is of a key never held), and the
    /// horizon (0: the default).
    struct Schedule {
        reads: HashMap<u64, Vec<u32>>,
        order: Vec<u64>,
        horizon: u64,
    }

    impl Schedule {
        fn new(reads: &[(&str, &[u32])], horizon: u64) -> Schedule {
            let end = reads.iter().flat_map(|r| r.1).max().map_or(0, |n| n + 1);
            let mut order = vec![KeySet::hash(b"elsewhere"); end as usize];
            let mut map = HashMap::new();
            for (k, r) in reads {
                let h = KeySet::hash(k.as_bytes());
                for n in *r {
                    order[*n as usize] = h;
                }
                map.insert(h, r.to_vec());
            }
            Schedule {
                reads: map,
                order,
                horizon,
            }
        }
    }

    impl ReadOracle for Schedule {
        fn reads_of(&self, key: u64) -> &[u32] {
            self.reads.get(&key).map_or(&[], Vec::as_slice)
        }

        fn keys_read(&self, from: u64, to: u64) -> &[u64] {
            let end = self.order.len();
            &self.order[(from as usize).min(end)..(to as usize).min(end)]
        }

        fn horizon(&self) -> u64 {
            if self.horizon == 0 {
                INVALIDATION_WINDOW_READS
            } else {
                self.horizon
            }
        }
    }

    fn oracle_with_horizon(horizon: u64) -> OracleWarming {
        let window = INVALIDATION_WINDOW_READS as u32;
        let s = Schedule::new(
            &[("a", &[5, 20_000]), ("b", &[30]), ("c", &[window + 100])],
            horizon,
        );
        OracleWarming::new(Arc::new(s), Budget::CacheFraction(1.0))
    }

    fn oracle() -> OracleWarming {
        oracle_with_horizon(0)
    }

    #[test]
    fn admits_blocks_read_within_the_lookahead_ranked_by_their_reads() {
        let o = oracle();
        let f = o.plan(&JobInputs::empty()).unwrap();
        let p = |keys: &[&str]| f.admit(&BlockKeys::from_keys(keys));
        // While the job runs: reads within the lookahead, counted.
        assert_eq!(p(&["a"]), Some(2.0));
        assert_eq!(p(&["b", "z"]), Some(1.0));
        assert_eq!(p(&["a", "b"]), Some(3.0));
        assert_eq!(p(&["z"]), Some(0.0), "never read: held, last");
        assert!(
            p(&["c"]).is_some(),
            "past the window but within the lookahead"
        );
        for _ in 0..10 {
            o.record_read(b"x");
        }
        assert_eq!(p(&["a"]), Some(1.0), "read 5 is past");
    }

    fn block(keys: &[&str]) -> Arc<crate::sst::block::Block> {
        use crate::sst::block::{Block, BlockBuilder};
        use crate::types::{make_internal_key, ValueKind};
        let mut b = BlockBuilder::new(16);
        for k in keys {
            b.add(&make_internal_key(k.as_bytes(), 1, ValueKind::Value), b"v");
        }
        Arc::new(Block::new(b.finish()).unwrap())
    }

    /// A one-key output block's priority at install, against `dropping` and as a flush's.
    fn at_install(
        f: &Arc<dyn BlockFilter>,
        dropping: &Dropping,
        k: &str,
    ) -> (Option<f64>, Option<f64>) {
        let b = block(&[k]);
        let hashes = [KeySet::hash(k.as_bytes())];
        let c = Candidate {
            block: &b,
            first: k.as_bytes(),
            last: k.as_bytes(),
            hashes: &hashes,
            priority: 1.0,
        };
        (
            f.at_install(&c, dropping),
            f.at_install(&c, &Dropping::default()),
        )
    }

    #[test]
    fn install_keeps_dropped_keys_read_within_the_window() {
        let o = oracle();
        let f = o.plan(&JobInputs::empty()).unwrap();
        let dropping = Dropping::new(vec![block(&["b", "c"])]);
        let at = |k: &str| at_install(&f, &dropping, k);
        assert_eq!(
            at("a"),
            (None, Some(-5.0)),
            "no dropped block held it; a flush's would do"
        );
        assert_eq!(at("b"), (Some(-30.0), Some(-30.0)));
        assert_eq!(
            at("c"),
            (None, Some(-10_100.0)),
            "beyond the window, not the lookahead"
        );
        for _ in 0..40 {
            o.record_read(b"x");
        }
        assert_eq!(at("b").0, Some(-30.0), "one window per install");
        let later = o.plan(&JobInputs::empty()).unwrap();
        assert_eq!(
            at_install(&later, &dropping, "b").0,
            None,
            "its read went by before this job's install"
        );
    }

    #[test]
    fn a_wider_horizon_keeps_blocks_read_later() {
        let o = oracle_with_horizon(2 * INVALIDATION_WINDOW_READS);
        let f = o.plan(&JobInputs::empty()).unwrap();
        let dropping = Dropping::new(vec![block(&["b", "c"])]);
        assert_eq!(
            at_install(&f, &dropping, "c").0,
            Some(-10_100.0),
            "past the window, within the horizon"
        );
    }
}
