//! `maxmemory`: a bound on the data set's live bytes, and the policy that keeps it.
//!
//! What is bounded. Redis bounds the memory its allocator hands out, because its data
//! set is in memory. Here the data set is on disk and the server's memory is the
//! engine's (memtables, block cache: fixed by their own options), so `maxmemory` bounds
//! what Kvrocks' `max-db-size` bounds: the data set, measured as the engine measures live
//! bytes ([`engine::DB::measure_live_bytes`]: key and value of the newest version of
//! every engine record, metadata records and collection members alike, without space
//! amplification). `INFO`'s `used_memory` reports that same quantity, so that a client
//! comparing it with `maxmemory` (as Redis's own tests and tools do) compares like with
//! like; the engine's memory is `used_memory_engine` and the process's `used_memory_rss`.
//!
//! How it is measured without a scan per command. A measurement walks the whole tree, so
//! the bound is checked against an estimate ([`Usage`]): the last measurement, plus what
//! each write added since (a record put counts its key and value, less what the access
//! table knew the key's record held before, [`crate::access`]; a deleted key whose size
//! the table knows counts negative), less what evictions freed. It errs high where the
//! store cannot see what a write replaced (a collection member rewritten, a key the table
//! does not hold) and low where it cannot see what a deletion freed (a member removed), and
//! is corrected by a new measurement: the background task ([`crate::cmd::evict::run`]) measures
//! again whenever something was written since, at most every [`MIN_INTERVAL`] and at most
//! a tenth of the time (the interval is ten times what the last measurement took).
//!
//! Until the first measurement (a server started without `maxmemory` whose `INFO` was
//! not asked for) nothing is measured; while `maxmemory` is 0 the estimate is not measured
//! again, and drifts as said above.
//!
//! Where it is checked: in [`crate::dispatch::execute`], where Redis's `processCommand`
//! checks it, before every command while `maxmemory` is set ([`crate::cmd::evict::admit`]);
//! with `maxmemory 0` (the default) that is one atomic load per command.

use parking_lot::Mutex;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::time::Duration;

/// Shortest time between two measurements.
pub const MIN_INTERVAL: Duration = Duration::from_millis(500);

/// Redis's `maxmemory-policy` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    pub const ALL: [Policy; 8] = [
        Policy::NoEviction,
        Policy::AllkeysLru,
        Policy::AllkeysLfu,
        Policy::AllkeysRandom,
        Policy::VolatileLru,
        Policy::VolatileLfu,
        Policy::VolatileRandom,
        Policy::VolatileTtl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::NoEviction => "noeviction",
            Policy::AllkeysLru => "allkeys-lru",
            Policy::AllkeysLfu => "allkeys-lfu",
            Policy::AllkeysRandom => "allkeys-random",
            Policy::VolatileLru => "volatile-lru",
            Policy::VolatileLfu => "volatile-lfu",
            Policy::VolatileRandom => "volatile-random",
            Policy::VolatileTtl => "volatile-ttl",
        }
    }

    /// Only keys with an expiry may be evicted.
    pub fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    /// An LFU policy: `OBJECT FREQ` answers, `OBJECT IDLETIME` does not (as in Redis).
    pub fn lfu(self) -> bool {
        matches!(self, Policy::AllkeysLfu | Policy::VolatileLfu)
    }

    pub fn random(self) -> bool {
        matches!(self, Policy::AllkeysRandom | Policy::VolatileRandom)
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
                format!("argument must be one of: {}", names.join(", "))
            })
    }
}

/// The estimate of the data set's live bytes (see the module's doc). Kept by the store,
/// which sees every write (one atomic add per write); it has a base once the data set
/// was measured: when `maxmemory` is set, or the first time `INFO` asks.
#[derive(Default)]
pub struct Usage {
    measured: AtomicBool,
    /// Bytes written less bytes known freed since the start.
    delta: AtomicI64,
    /// The last measurement less `delta` as it was when the measurement started: the
    /// estimate is `base + delta`.
    base: AtomicI64,
    /// `delta` when the last measurement started (whether anything was written since).
    measured_at: AtomicI64,
}

impl Usage {
    /// Whether the data set was measured (else the estimate has no base).
    pub fn measured(&self) -> bool {
        self.measured.load(Relaxed)
    }

    /// Counts bytes a write added (negative: freed).
    pub fn add(&self, n: i64) {
        if n != 0 {
            self.delta.fetch_add(n, Relaxed);
        }
    }

    /// The estimate, in bytes.
    pub fn estimate(&self) -> u64 {
        (self.base.load(Relaxed) + self.delta.load(Relaxed)).max(0) as u64
    }

    /// Whether anything was written since the last measurement started.
    pub fn written_since(&self) -> bool {
        self.delta.load(Relaxed) != self.measured_at.load(Relaxed)
    }

    /// Measures the live bytes of `db` and makes the measurement the estimate's base.
    /// Writes that land while it runs may be counted twice (in the walk and in `delta`):
    /// the estimate errs high until the next one.
    pub fn measure(&self, db: &engine::DB) -> engine::Result<u64> {
        let at = self.delta.load(Relaxed);
        let n = db.measure_live_bytes()?;
        self.base.store(n as i64 - at, Relaxed);
        self.measured_at.store(at, Relaxed);
        self.measured.store(true, Relaxed);
        Ok(n)
    }
}

/// Candidates kept between evictions (Redis's `EVPOOL_SIZE`).
pub const POOL_SIZE: usize = 16;
/// A candidate: its score (higher: evicted first), database and key.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub score: u64,
    pub db: u8,
    pub key: Vec<u8>,
}

/// The eviction pool, in ascending score order.
#[derive(Default)]
pub struct Pool {
    pub entries: Vec<Candidate>,
    /// Where the next refill's coldest shards start.
    pub shard: usize,
}

impl Pool {
    /// Redis's pool insertion: a candidate goes in if the pool has room or it beats the
    /// worst one there, which then leaves.
    pub fn offer(&mut self, c: Candidate) {
        if self.entries.iter().any(|e| e.db == c.db && e.key == c.key) {
            return;
        }
        if self.entries.len() == POOL_SIZE {
            if c.score <= self.entries[0].score {
                return;
            }
            self.entries.remove(0);
        }
        let at = self.entries.partition_point(|e| e.score <= c.score);
        self.entries.insert(at, c);
    }
}

/// The `maxmemory` settings, and what eviction counts.
pub struct MaxMemory {
    /// `maxmemory` in bytes (0: no bound).
    bytes: AtomicU64,
    policy: AtomicU8,
    /// `maxmemory-samples`.
    samples: AtomicU32,
    /// Keys evicted (`INFO`'s `evicted_keys`).
    pub evicted: AtomicU64,
    /// The largest estimate seen (`used_memory_peak`).
    pub peak: AtomicU64,
    /// Eviction's candidates ([`crate::cmd::evict`]).
    pub pool: Mutex<Pool>,
}

impl Default for MaxMemory {
    fn default() -> Self {
        MaxMemory {
            bytes: AtomicU64::new(0),
            policy: AtomicU8::new(0),
            samples: AtomicU32::new(5),
            evicted: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            pool: Default::default(),
        }
    }
}

impl MaxMemory {
    /// The bound (0: none): the one load a command pays while none is set.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    /// Sets the bound; the caller measures ([`crate::cmd::evict::set_maxmemory`]).
    pub fn set_bytes(&self, n: u64) {
        self.bytes.store(n, Relaxed)
    }

    pub fn policy(&self) -> Policy {
        Policy::ALL[self.policy.load(Relaxed) as usize]
    }

    /// Sets the policy; the pool's candidates, scored under the old one, are dropped.
    pub fn set_policy(&self, p: Policy) {
        let i = Policy::ALL.iter().position(|q| *q == p).unwrap_or(0);
        if self.policy.swap(i as u8, Relaxed) != i as u8 {
            self.pool.lock().entries.clear();
        }
    }

    pub fn samples(&self) -> usize {
        self.samples.load(Relaxed) as usize
    }

    pub fn set_samples(&self, n: u32) {
        self.samples.store(n, Relaxed)
    }

    /// Notes an estimate for the peak.
    pub fn seen(&self, used: u64) {
        self.peak.fetch_max(used, Relaxed);
    }
}

/// Most `maxmemory-samples` accepted (Redis: 64).
pub const MAX_SAMPLES: u32 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_round_trip() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>().unwrap(), p);
            let m = MaxMemory::default();
            m.set_policy(p);
            assert_eq!(m.policy(), p);
        }
        assert_eq!("ALLKEYS-LRU".parse::<Policy>().unwrap(), Policy::AllkeysLru);
        assert!("lru"
            .parse::<Policy>()
            .unwrap_err()
            .contains("volatile-ttl"));
    }

    #[test]
    fn the_estimate_is_the_measurement_plus_what_was_written_since() {
        let t = tempfile::tempdir().unwrap();
        let db = engine::DB::open(t.path(), engine::Options::default()).unwrap();
        let u = Usage::default();
        u.add(500);
        db.put(b"key", b"value").unwrap();
        assert_eq!(u.measure(&db).unwrap(), 8);
        assert_eq!(u.estimate(), 8);
        assert!(!u.written_since());
        u.add(100);
        assert_eq!(u.estimate(), 108);
        assert!(u.written_since());
        u.add(-1000);
        assert_eq!(u.estimate(), 0, "never below zero");
    }

    fn c(score: u64, key: &str) -> Candidate {
        Candidate {
            score,
            db: 0,
            key: key.as_bytes().to_vec(),
        }
    }

    #[test]
    fn the_pool_keeps_the_best_candidates_in_order() {
        let mut p = Pool::default();
        for i in 0..40u64 {
            p.offer(c((i * 7) % 40, &format!("k{i}")));
        }
        assert_eq!(p.entries.len(), POOL_SIZE);
        let scores: Vec<u64> = p.entries.iter().map(|e| e.score).collect();
        assert_eq!(scores, (24..40).collect::<Vec<_>>());
        // A repeat is not a second candidate, a worse one does not get in.
        p.offer(c(39, "k17"));
        p.offer(c(3, "new"));
        assert_eq!(p.entries.len(), POOL_SIZE);
        assert_eq!(p.entries[0].score, 24);
    }
}
