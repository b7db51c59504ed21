//! Eviction under `maxmemory` ([`crate::maxmemory`]): Redis's approximate LRU, LFU, TTL
//! and random policies over keys that live on disk.
//!
//! As Redis (`evict.c`): before a command, while the estimate is over the bound, keys are
//! evicted one at a time until it is under ([`admit`], Redis's `performEvictions`); a
//! command that may grow the data (`denyoom`) is refused with `-OOM` when nothing could be
//! evicted (`noeviction`, or a `volatile-*` policy with no key that has an expiry). Each
//! victim is the best of a pool of [`crate::maxmemory::POOL_SIZE`] candidates kept across evictions and
//! refilled with `maxmemory-samples` keys per database on every pick (Redis's
//! `evictionPoolPopulate`): the idlest key for LRU, the least frequently used for LFU
//! (the access counters of [`crate::access`]), the nearest expiry for `volatile-ttl`; the
//! random policies take a random key of the sample.
//!
//! Where the sample comes from: Redis draws random hash-table buckets; a disk store has no
//! table in memory, and walking the key space to draw uniformly would read it all. So a
//! sample is the consecutive keys after a random seek ([`crate::store::Store::sample`]),
//! plus, for LRU and LFU, the least recently used key of a few shards of the access table
//! (the keys the table knows to be coldest, which a seek may miss). A key the table does
//! not hold counts as idle since its shard's horizon: older than every key it holds.
//!
//! Evicting a key deletes it as `DEL` does, members included ([`crate::store::Store::evict`]):
//! one engine write, which the replication stream carries to replicas like any other
//! (they apply the primary's deletions and evict nothing themselves, as Redis replicas
//! with `replica-ignore-maxmemory`). It publishes the `evicted` keyspace event (class `e`)
//! and counts in `INFO`'s `evicted_keys`.
//!
//! The background task ([`run`]) measures the data set again when something was written
//! since (which corrects the estimate) and evicts when nothing else does (after `CONFIG SET
//! maxmemory` lowered the bound, or between commands).

use super::table::{Flags, Spec};
use crate::maxmemory::{Candidate, Policy, Pool, MIN_INTERVAL};
use crate::protocol::Reply;
use crate::record::DATABASES;
use crate::session::Session;
use crate::shared::Shared;
use parking_lot::Mutex;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Keys one command evicts at most before it runs; the background task goes on from
/// there (Redis bounds the time instead, with `maxmemory-eviction-tenacity`).
pub const PER_COMMAND: usize = 64;
/// Pool refills without a victim before eviction gives up (nothing evictable).
const MAX_EMPTY_ROUNDS: usize = 3;
/// Records a sample looks at per wanted key, at most (for `volatile-*`, where keys with an
/// expiry may be few).
const EXAMINE_PER_SAMPLE: usize = 16;
/// Shards of the access table whose coldest key joins each refill.
const COLDEST_SHARDS: usize = 2;

/// Redis's error for a command refused over the bound.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The score of a key under `policy` (higher: a better victim).
fn score(sh: &Shared, policy: Policy, db: u8, key: &[u8], expire_at_ms: Option<u64>) -> u64 {
    match policy {
        Policy::VolatileTtl => u64::MAX - expire_at_ms.unwrap_or(u64::MAX),
        _ => {
            let a = sh.store.access.peek(&crate::record::meta_key(db, key));
            if policy.lfu() {
                255 - a.freq as u64
            } else {
                // Milliseconds would tie less, but the table's clock is in seconds as
                // Redis's is: ties go to the pool's order.
                a.idle_secs
            }
        }
    }
}

/// Refills the pool from every database with keys; false if no database has any key the
/// policy may evict.
fn populate(sh: &Shared, pool: &mut Pool, policy: Policy) -> crate::store::Result<bool> {
    let n = sh.maxmemory.samples();
    let volatile = policy.volatile();
    let mut found = false;
    for db in 0..DATABASES {
        for (key, head) in sh.store.sample(db, n, volatile, n * EXAMINE_PER_SAMPLE)? {
            found = true;
            let score = score(sh, policy, db, &key, head.expire_at_ms);
            pool.offer(Candidate { score, db, key });
        }
    }
    if !volatile && policy != Policy::VolatileTtl {
        let from = pool.shard;
        pool.shard = (pool.shard + COLDEST_SHARDS) % crate::access::SHARDS;
        for mk in sh.store.access.coldest(from, COLDEST_SHARDS) {
            if let Some((db, key)) = crate::record::split_meta_key(&mk) {
                let score = score(sh, policy, db, key, None);
                pool.offer(Candidate {
                    score,
                    db,
                    key: key.to_vec(),
                });
            }
        }
    }
    Ok(found)
}

/// Evicts one key under `policy`; false if none could be.
fn evict_one(sh: &Shared, pool: &Mutex<Pool>, policy: Policy) -> crate::store::Result<bool> {
    let volatile = policy.volatile();
    let sync = sh.settings.appendfsync() == crate::config::AppendFsync::Always;
    for _ in 0..MAX_EMPTY_ROUNDS {
        if policy.random() {
            let mut keys = Vec::new();
            for db in 0..DATABASES {
                let n = sh.maxmemory.samples();
                for (k, _) in sh.store.sample(db, n, volatile, n * EXAMINE_PER_SAMPLE)? {
                    keys.push((db, k));
                }
            }
            if keys.is_empty() {
                return Ok(false);
            }
            let (db, key) = keys.swap_remove(rand::random_range(0..keys.len()));
            if let Some(freed) = sh.store.evict(db, &key, volatile, sync)? {
                announce(sh, db, key, freed);
                return Ok(true);
            }
            continue;
        }
        let mut p = pool.lock();
        let found = populate(sh, &mut p, policy)?;
        // As Redis's loop: the best candidate that still exists (with an expiry, under a
        // volatile policy); one gone since it joined leaves the pool, and the next is tried.
        while let Some((db, key)) = pick(sh, &mut p, policy) {
            if let Some(freed) = sh.store.evict(db, &key, volatile, sync)? {
                drop(p);
                announce(sh, db, key, freed);
                return Ok(true);
            }
        }
        if !found {
            return Ok(false);
        }
    }
    Ok(false)
}

/// Counts an eviction and publishes its `evicted` event.
fn announce(sh: &Shared, db: u8, key: Vec<u8>, freed: u64) {
    sh.maxmemory.evicted.fetch_add(1, Relaxed);
    tracing::debug!(db, freed, "evicted a key");
    if sh.notify.wants(crate::notify::Class::EVICTED) {
        sh.publish_events(&mut vec![crate::notify::Event {
            db,
            name: "evicted",
            key: key.into(),
        }]);
    }
}

/// The best candidate of the pool, taken out of it. A candidate accessed since it joined
/// goes back with its new score if that is no longer the best.
fn pick(sh: &Shared, p: &mut Pool, policy: Policy) -> Option<(u8, Vec<u8>)> {
    while let Some(c) = p.entries.pop() {
        if policy == Policy::VolatileTtl {
            return Some((c.db, c.key));
        }
        let now = score(sh, policy, c.db, &c.key, None);
        if now < c.score && p.entries.last().is_some_and(|next| next.score > now) {
            p.offer(Candidate { score: now, ..c });
            continue;
        }
        return Some((c.db, c.key));
    }
    None
}

/// Evicts until the estimate is under the bound, `limit` keys at most; whether it is.
pub fn perform(sh: &Shared, limit: usize) -> bool {
    let max = sh.maxmemory.bytes();
    let policy = sh.maxmemory.policy();
    for _ in 0..limit {
        let used = sh.store.usage.estimate();
        sh.maxmemory.seen(used);
        if max == 0 || used <= max {
            return true;
        }
        if policy == Policy::NoEviction || sh.store.is_replica() {
            return false;
        }
        match evict_one(sh, &sh.maxmemory.pool, policy) {
            Ok(true) => {}
            Ok(false) => return false,
            Err(e) => {
                tracing::error!("eviction: {e}");
                return false;
            }
        }
    }
    max == 0 || sh.store.usage.estimate() <= max
}

/// The check before a command while `maxmemory` is set (Redis's `processCommand`): evicts
/// what the policy allows, then refuses a command that may grow the data if the estimate
/// is still over the bound: a `denyoom` command, `EXEC` of a transaction that queued one,
/// and any command queued inside `MULTI` but `EXEC`, `DISCARD`, `QUIT` and `RESET`.
/// A replica evicts nothing and refuses nothing (its primary decides).
pub fn admit(sh: &Shared, s: &Session, spec: Option<&Spec>) -> Option<Reply> {
    let max = sh.maxmemory.bytes();
    if sh.store.usage.estimate() <= max || sh.store.is_replica() {
        return None;
    }
    // A run of combined commands holds its key's lock: eviction, which takes keys' locks,
    // waits for the next command outside the run or the background task.
    // Engine users hold the command lock (a replica's full sync swaps the engine under
    // its exclusive hold); not had at once (a script runs), nothing is evicted now.
    let fits = match s.ext.combining {
        Some(_) => false,
        None => sh
            .store
            .try_command_lock_for(Duration::ZERO)
            .is_some_and(|_c| perform(sh, PER_COMMAND)),
    };
    if fits {
        return None;
    }
    let spec = spec?;
    let denyoom = spec.has(Flags::DENYOOM)
        || (spec.name == "exec" && s.ext.multi.as_ref().is_some_and(|q| queued_denyoom(q)))
        || (s.ext.multi.is_some() && !matches!(spec.name, "exec" | "discard" | "quit" | "reset"));
    denyoom.then(|| Reply::Error(OOM.into()))
}

/// Whether a transaction's queued commands include one that may grow the data.
fn queued_denyoom(queued: &[Vec<bytes::Bytes>]) -> bool {
    queued
        .iter()
        .any(|c| super::table::find(&c[0]).is_some_and(|spec| spec.has(Flags::DENYOOM)))
}

/// Whether a bound is set and the estimate is over it.
pub fn over(sh: &Shared) -> bool {
    let max = sh.maxmemory.bytes();
    max != 0 && sh.store.usage.estimate() > max
}

/// `CONFIG SET maxmemory`: the bound, and a measurement to start the estimate from.
pub fn set_maxmemory(sh: &Shared, bytes: u64) -> crate::store::Result<()> {
    sh.maxmemory.set_bytes(bytes);
    if bytes > 0 {
        sh.store.usage.measure(&sh.store.db())?;
    }
    Ok(())
}

/// The background task (see the module's doc): every 100 ms while a bound is set,
/// measures if due and evicts while over the bound.
pub async fn run(sh: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // When the last measurement ran and how long it took.
    let mut last: Option<(Instant, Duration)> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if sh.maxmemory.bytes() == 0 || sh.store.is_replica() {
            continue;
        }
        let due = sh.store.usage.written_since()
            && last.is_none_or(|(at, took)| at.elapsed() >= MIN_INTERVAL.max(took * 10));
        let over = sh.store.usage.estimate() > sh.maxmemory.bytes();
        if !due && !over {
            continue;
        }
        let s = sh.clone();
        let job = move || {
            let _c = s.store.command_lock();
            let mut measured = None;
            if due {
                let start = Instant::now();
                if let Err(e) = s.store.usage.measure(&s.store.db()) {
                    tracing::error!("measuring the data set: {e}");
                }
                measured = Some((start, start.elapsed()));
            }
            // Bounded per tick, so that shutdown is seen.
            perform(&s, 1024);
            measured
        };
        match tokio::task::spawn_blocking(job).await {
            Ok(Some(m)) => last = Some(m),
            Ok(None) => {}
            Err(e) => tracing::error!("eviction task failed: {e}"),
        }
    }
}
