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
//! Time is the count of client reads, as everywhere in warming, in the oracle's numbering
//! (read `n` is the `n`-th get of the generated ops); which of them the engine has served
//! is tracked read by read ([`Clock`]), since with several clients the engine serves them
//! out of that order.

use super::{
    BlockFilter, BlockKeys, Budget, CacheWarming, Candidate, Dropping, JobInputs, KeyHashMap,
    KeySet, INVALIDATION_WINDOW_READS,
};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

pub use crate::options::warming::ReadOracle;

/// How far ahead, in reads, a compaction's install looks (see [`ReadOracle::horizon`]).
fn horizon(oracle: &dyn ReadOracle) -> u64 {
    oracle.horizon().unwrap_or(INVALIDATION_WINDOW_READS)
}

/// How far ahead, in horizons, the oracle looks while the job is still writing: the job's
/// own duration plus the horizon (a read counted now may come before the output is
/// installed, when the block does not help; the install narrows to the horizon).
const BUILD_LOOKAHEAD: u64 = 4;

/// Where the clients are in the oracle's numbering of the reads.
///
/// With one client the engine serves read `n` as its `n`-th read. With several, each
/// taking batches of ops, it does not: a client stalled on a write (or descheduled)
/// leaves its batch's reads behind while the others run batches ahead, so the engine's
/// count of reads says neither which reads are done nor which come next. So every read
/// the engine serves is matched to the first read of its key not yet served at or after
/// the frontier (below which all are served), and the window of reads to come is the
/// unserved ones from the frontier on: exact with one client, and with several off only
/// where two reads of one key are close enough to be matched the other way round.
struct Clock {
    /// One bit per read: served.
    served: Box<[AtomicU64]>,
    /// Every read below it is served.
    frontier: AtomicU64,
    /// One past the highest read served.
    ahead: AtomicU64,
}

impl Clock {
    fn new(reads: usize) -> Clock {
        Clock {
            served: (0..reads.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            frontier: AtomicU64::new(0),
            ahead: AtomicU64::new(0),
        }
    }

    fn is_served(&self, n: u64) -> bool {
        self.served
            .get((n / 64) as usize)
            .is_some_and(|w| w.load(Relaxed) & (1 << (n % 64)) != 0)
    }

    /// The engine served a read of `key`.
    fn serve(&self, oracle: &dyn ReadOracle, key: u64) {
        let r = oracle.reads_of(key);
        let from = self.frontier.load(Relaxed);
        for &n in &r[r.partition_point(|&n| u64::from(n) < from)..] {
            let n = u64::from(n);
            let Some(word) = self.served.get((n / 64) as usize) else {
                return;
            };
            let bit = 1 << (n % 64);
            if word.fetch_or(bit, Relaxed) & bit == 0 {
                self.ahead.fetch_max(n + 1, Relaxed);
                self.advance();
                return;
            }
        }
    }

    fn advance(&self) {
        loop {
            let f = self.frontier.load(Relaxed);
            if !self.is_served(f) {
                return;
            }
            let _ = self.frontier.compare_exchange(f, f + 1, Relaxed, Relaxed);
        }
    }

    /// The first read of `key` at or after the frontier that is not served yet.
    fn next_read(&self, oracle: &dyn ReadOracle, key: u64) -> Option<u64> {
        let r = oracle.reads_of(key);
        let from = self.frontier.load(Relaxed);
        r[r.partition_point(|&n| u64::from(n) < from)..]
            .iter()
            .map(|&n| u64::from(n))
            .find(|&n| !self.is_served(n))
    }
}

/// The policy.
pub struct OracleWarming {
    oracle: Arc<dyn ReadOracle>,
    clock: Arc<Clock>,
    budget: Budget,
}

impl OracleWarming {
    pub fn new(oracle: Arc<dyn ReadOracle>, budget: Budget) -> OracleWarming {
        let reads = oracle.keys_read(0, u64::MAX).len();
        OracleWarming {
            oracle,
            clock: Arc::new(Clock::new(reads)),
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
            clock: self.clock.clone(),
            window: OnceLock::new(),
        }))
    }

    /// Costs the oracle's clients a hash, a probe and a search per read (the oracle is a
    /// bound for the benchmark, not a policy to run).
    fn record_read(&self, key: &[u8]) {
        self.clock.serve(&*self.oracle, KeySet::hash(key));
    }

    fn budget(&self) -> Budget {
        self.budget
    }
}

/// The first read of each key among the next reads to come at a compaction's install:
/// built once per install from the reads in order, then probed once per held key.
struct Window {
    /// The frontier when taken.
    from: u64,
    first: KeyHashMap<u64>,
}

impl Window {
    /// The reads not yet served from the frontier to a horizon past the furthest served.
    fn new(oracle: &dyn ReadOracle, clock: &Clock) -> Window {
        let from = clock.frontier.load(Relaxed);
        let to = clock.ahead.load(Relaxed).max(from) + horizon(oracle);
        let keys = oracle.keys_read(from, to);
        let mut first = KeyHashMap::with_capacity_and_hasher(keys.len(), Default::default());
        for (i, k) in keys.iter().enumerate() {
            let n = from + i as u64;
            if !clock.is_served(n) {
                first.entry(*k).or_insert(n);
            }
        }
        Window { from, first }
    }
}

/// Admits a block if one of its keys is read within the horizon.
struct NextReads {
    oracle: Arc<dyn ReadOracle>,
    clock: Arc<Clock>,
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
        let now = self.clock.frontier.load(Relaxed);
        let end = now + BUILD_LOOKAHEAD * horizon(&*self.oracle);
        let n: u64 = keys
            .iter()
            .map(|k| self.oracle.reads_in(KeySet::hash(k), now, end))
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
            let now = self.clock.frontier.load(Relaxed);
            let first = held
                .hashes
                .iter()
                .filter_map(|h| self.clock.next_read(&*self.oracle, *h))
                .min()?;
            let ahead = first.saturating_sub(now);
            return (ahead < BUILD_LOOKAHEAD * horizon(&*self.oracle)).then_some(-(ahead as f64));
        }
        let dropped = dropping.keys();
        let w = self
            .window
            .get_or_init(|| Window::new(&*self.oracle, &self.clock));
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
            for (k, r) in reads {
                for n in *r {
                    order[*n as usize] = KeySet::hash(k.as_bytes());
                }
            }
            let mut map: HashMap<u64, Vec<u32>> = HashMap::new();
            for (n, h) in order.iter().enumerate() {
                map.entry(*h).or_default().push(n as u32);
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

        fn horizon(&self) -> Option<u64> {
            (self.horizon != 0).then_some(self.horizon)
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

    /// The client reads the schedule's reads `0..upto`, in order.
    fn serve(o: &OracleWarming, upto: u32) {
        for n in 0..upto {
            o.record_read(match n {
                5 => b"a".as_slice(),
                30 => b"b",
                _ => b"elsewhere",
            });
        }
    }

    /// Reads served out of order (two clients): the frontier stays at the oldest read
    /// not served, and the window holds the reads not served from there on.
    #[test]
    fn the_clock_follows_reads_served_out_of_order() {
        let o = oracle();
        // Reads 0..5 and 6..31 served, read 5 ("a") not yet: a client lags behind.
        for n in (0..31).filter(|&n| n != 5) {
            o.record_read(if n == 30 {
                b"b".as_slice()
            } else {
                b"elsewhere"
            });
        }
        assert_eq!(o.clock.frontier.load(Relaxed), 5);
        assert_eq!(o.clock.ahead.load(Relaxed), 31);
        let f = o.plan(&JobInputs::empty()).unwrap();
        let dropping = Dropping::new(vec![block(&["a", "b"])]);
        assert_eq!(
            at_install(&f, &dropping, "a").0,
            Some(-0.0),
            "the lagging read comes first"
        );
        assert_eq!(at_install(&f, &dropping, "b").0, None, "read 30 is served");
        o.record_read(b"a");
        assert_eq!(o.clock.frontier.load(Relaxed), 31, "caught up");
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
        serve(&o, 10);
        assert_eq!(p(&["a"]), Some(1.0), "read 5 is past");
    }

    fn block(keys: &[&str]) -> Arc<crate::sst::block::Block> {
        use crate::internal_key::{make_internal_key, ValueKind};
        use crate::sst::block::{Block, BlockBuilder};
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
        serve(&o, 40);
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
