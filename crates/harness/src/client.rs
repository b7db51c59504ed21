//! The one client loop: `threads` client threads execute a stream of ops on the engine and
//! time each one, while the calling thread watches their counters.
//!
//! Every experiment that replays ops on the engine runs them here (`halflife bench`'s load
//! and run phases, `halflife leaper`'s), so that an op means the same calls and its latency
//! the same span everywhere. What differs between experiments is a parameter of
//! [`Clients`]: the values written ([`Values`]), how scans read ahead, whether read
//! latencies are also kept per sampling interval (`epoch`), and what the watcher does
//! (a progress display and samples of the engine's counters, or nothing).

use crate::latency::{Latencies, OP_NAMES};
use crate::ops::{
    self, ClientOp, SharedReceiver, DELETE, EXPIRING_UPDATE, INSERT, READ, RMW, SCAN, UPDATE,
};
use crate::spikes::IntervalLatencies;
use anyhow::{anyhow, bail, Context, Result};
use engine::expiry::ManualClock;
use engine::{ReadOptions, DB};
use rand::{RngCore, SeedableRng};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the watcher runs while the clients work (and whenever a client finishes).
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Bytes of the random pool [`Values::random_pool`] cuts values from.
const POOL: usize = 1 << 20;

/// The values the clients write: slices of one buffer, each client starting at its own
/// offset and moving on after every write.
pub struct Values {
    bytes: Arc<[u8]>,
    size: usize,
    /// Offsets a value may start at.
    offsets: usize,
}

impl Values {
    /// Slices of one random 1 MiB pool at varying offsets: with compression off, content
    /// does not change the bytes written, and copying is cheaper than generating.
    pub fn random_pool(size: usize) -> Values {
        let mut pool = vec![0u8; POOL + size];
        rand::rngs::StdRng::seed_from_u64(0x6861_6c66).fill_bytes(&mut pool);
        Values {
            bytes: pool.into(),
            size,
            offsets: POOL,
        }
    }

    /// `value` for every write.
    pub fn fixed(value: &[u8]) -> Values {
        Values {
            bytes: value.into(),
            size: value.len(),
            offsets: 1,
        }
    }

    fn at(&self, offset: usize) -> &[u8] {
        &self.bytes[offset..offset + self.size]
    }
}

/// Counters the clients advance op by op, read by whoever watches the run (a progress
/// display, a sampler). A caller may share them across phases.
#[derive(Default)]
pub struct Counters {
    /// Ops executed.
    pub ops_done: AtomicU64,
    /// Bytes the ops asked to write: key and value per insert, update and read-modify-write,
    /// the key per delete (a tombstone), as every peer driver counts them.
    pub user_bytes: AtomicU64,
}

/// How the clients of a phase run.
pub struct Clients<'a> {
    pub threads: usize,
    /// Key numbers are formatted to keys of this many bytes.
    pub key_size: usize,
    pub values: &'a Values,
    /// How scans read separated values ahead.
    pub read: ReadOptions,
    pub counters: &'a Counters,
    /// When set, read latencies are also recorded per interval: the interval a read lands
    /// in is this counter's value when it finishes (a sampler advances it).
    pub epoch: Option<&'a AtomicUsize>,
    pub expiry: Expiry<'a>,
}

/// How time passes and expiring updates reach the engine. Time is counted in ops: an op's
/// tick is [`Counters::ops_done`] when it starts (the load's and the run's ops in one
/// count), and an expiring update at tick `t` with TTL `ttl` expires at tick `t + ttl`, so
/// every engine sees the same lifetimes whatever its speed (the op file's convention).
#[derive(Clone, Copy)]
pub enum Expiry<'a> {
    /// The engine is told each expiry (`put_with_expiry`) and reads the time from
    /// `clock` (its `Options::clock`), which the clients set to `start_ms` plus one
    /// millisecond per tick before each op.
    Engine {
        clock: &'a ManualClock,
        start_ms: u64,
    },
    /// The engine is never told: an expiring update is a plain write, and at its expiry
    /// tick the client deletes the key unless it was written or deleted since. This is a
    /// server that keeps expiries in its own records and sweeps them (as `halflife serve`
    /// did before the engine knew expiry), for which every expiry is a deletion the engine
    /// must write and a value GC may copy until then. One client thread only: the record
    /// of pending expiries is the thread's.
    Sweep,
    /// Time is not kept and an expiring update is a plain update (experiments whose ops
    /// never expire).
    Ignore,
}

/// The pending expiries of [`Expiry::Sweep`].
#[derive(Default)]
struct Sweep {
    /// (expiry tick, key, tick of the write), earliest first.
    due: BinaryHeap<Reverse<(u64, u64, u64)>>,
    /// Per key with a pending expiry, the tick of the expiring write; removed by any later
    /// write or delete of the key, so an expiry that was overtaken deletes nothing.
    pending: HashMap<u64, u64>,
}

impl Sweep {
    /// Notes `op` at `tick` (before it runs).
    fn note(&mut self, op: &ClientOp, tick: u64) {
        match op.code {
            EXPIRING_UPDATE => {
                self.pending.insert(op.key, tick);
                self.due
                    .push(Reverse((tick + u64::from(op.ttl), op.key, tick)));
            }
            INSERT | UPDATE | RMW | DELETE => {
                self.pending.remove(&op.key);
            }
            _ => {}
        }
    }

    /// Deletes every key whose expiry tick is at or before `tick` and still pending.
    fn run(&mut self, db: &DB, tick: u64, key_size: usize, key: &mut Vec<u8>) -> Result<u64> {
        let mut deleted = 0;
        while let Some(&Reverse((at, k, written))) = self.due.peek() {
            if at > tick {
                break;
            }
            self.due.pop();
            if self.pending.get(&k) == Some(&written) {
                self.pending.remove(&k);
                workload::keys::format_key(k, key_size, key);
                db.delete(key)
                    .with_context(|| format!("sweeping the expired key number {k}"))?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

/// What the clients of a phase measured together.
pub struct PhaseResult {
    /// From the first op handed out to the last client's end.
    pub seconds: f64,
    pub latencies: Latencies,
    /// Read latencies per interval (empty without [`Clients::epoch`]).
    pub per_interval: IntervalLatencies,
    /// Reads and read-modify-writes that found no value.
    pub not_found: u64,
    /// Records the scans returned.
    pub scanned: u64,
    /// Keys deleted at their expiry by [`Expiry::Sweep`].
    pub swept: u64,
}

impl PhaseResult {
    fn new() -> PhaseResult {
        PhaseResult {
            seconds: 0.0,
            latencies: Latencies::new(),
            per_interval: IntervalLatencies::default(),
            not_found: 0,
            scanned: 0,
            swept: 0,
        }
    }

    fn merge(&mut self, o: &PhaseResult) {
        self.latencies.merge(&o.latencies);
        self.per_interval.merge(&o.per_interval);
        self.not_found += o.not_found;
        self.scanned += o.scanned;
        self.swept += o.swept;
    }
}

/// Runs `ops` on `c.threads` clients, fed in batches by a producer thread. The calling
/// thread runs `watch` every [`WATCH_EVERY`] and whenever a client finishes; an error
/// from it, from a client or from the op source stops the clients and is returned.
pub fn drive<I>(
    db: &DB,
    ops: I,
    c: &Clients,
    mut watch: impl FnMut() -> Result<()>,
) -> Result<PhaseResult>
where
    I: Iterator<Item = Result<ClientOp>> + Send + 'static,
{
    if matches!(c.expiry, Expiry::Sweep) && c.threads != 1 {
        bail!("expiries swept by the client need one client thread");
    }
    let start = Instant::now();
    let stop = AtomicBool::new(false);
    let (rx, producer) = ops::produce(ops, c.threads);
    let result = std::thread::scope(|s| -> Result<PhaseResult> {
        let (finished_tx, finished) = mpsc::channel::<()>();
        let clients: Vec<_> = (0..c.threads)
            .map(|i| {
                let rx = rx.clone();
                let finished = finished_tx.clone();
                let stop = &stop;
                std::thread::Builder::new()
                    .name(format!("client-{i}"))
                    .spawn_scoped(s, move || {
                        let r = client(db, &rx, c, stop, i);
                        if r.is_err() {
                            stop.store(true, Relaxed);
                        }
                        let _ = finished.send(());
                        r
                    })
                    .expect("spawning a client thread")
            })
            .collect();
        drop(finished_tx);
        let mut running = c.threads;
        while running > 0 {
            match finished.recv_timeout(WATCH_EVERY) {
                Ok(()) => running -= 1,
                Err(RecvTimeoutError::Timeout) => {}
                // A client panicked before it could say so: the join below reports it.
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if let Err(e) = watch() {
                stop.store(true, Relaxed);
                return Err(e);
            }
        }
        let mut all = PhaseResult::new();
        for t in clients {
            let r = t
                .join()
                .map_err(|_| anyhow!("a client thread panicked"))??;
            all.merge(&r);
        }
        all.seconds = start.elapsed().as_secs_f64();
        Ok(all)
    });
    if result.is_err() {
        stop.store(true, Relaxed);
    }
    drop(rx);
    producer
        .join()
        .map_err(|_| anyhow!("the op producer panicked"))??;
    result
}

/// One client: executes batches until the producer is done or the phase stops.
fn client(
    db: &DB,
    rx: &SharedReceiver,
    c: &Clients,
    stop: &AtomicBool,
    id: usize,
) -> Result<PhaseResult> {
    let mut r = PhaseResult::new();
    let mut key = Vec::with_capacity(c.key_size);
    let mut sweep = Sweep::default();
    let values = c.values;
    let mut offset = (id * 7919) % values.offsets;
    let write_bytes = (c.key_size + values.size) as u64;
    while let Some(batch) = ops::next_batch(rx) {
        if stop.load(Relaxed) {
            break;
        }
        for op in &batch {
            let tick = c.counters.ops_done.load(Relaxed);
            let expire_at = match c.expiry {
                Expiry::Engine { clock, start_ms } => {
                    clock.set(start_ms + tick);
                    (op.code == EXPIRING_UPDATE).then(|| start_ms + tick + u64::from(op.ttl))
                }
                Expiry::Sweep => {
                    r.swept += sweep.run(db, tick, c.key_size, &mut key)?;
                    sweep.note(op, tick);
                    None
                }
                Expiry::Ignore => None,
            };
            workload::keys::format_key(op.key, c.key_size, &mut key);
            let value = values.at(offset);
            let t = Instant::now();
            let done = exec(db, &c.read, op, &key, value, expire_at).with_context(|| {
                let n = c.counters.ops_done.load(Relaxed);
                let name = OP_NAMES.get(op.code as usize).unwrap_or(&"op");
                format!("{name} of key number {} (after {n} ops)", op.key)
            })?;
            let nanos = t.elapsed().as_nanos() as u64;
            // An expiring update is an update to whoever reads the latencies.
            let kind = if op.code == EXPIRING_UPDATE {
                UPDATE
            } else {
                op.code
            };
            r.latencies.record(kind as usize, nanos);
            if let (READ, Some(e)) = (op.code, c.epoch) {
                r.per_interval.record(e.load(Relaxed), nanos);
            }
            r.not_found += u64::from(!done.found);
            r.scanned += done.scanned;
            if matches!(op.code, INSERT | UPDATE | RMW | EXPIRING_UPDATE) {
                offset = (offset + 4093) % values.offsets;
                c.counters.user_bytes.fetch_add(write_bytes, Relaxed);
            } else if op.code == DELETE {
                c.counters.user_bytes.fetch_add(c.key_size as u64, Relaxed);
            }
            // Per op, so that a sample's user bytes match the engine's counters to one op.
            c.counters.ops_done.fetch_add(1, Relaxed);
        }
    }
    Ok(r)
}

/// What one op returned: whether a read found its key, how many records a scan returned.
struct Done {
    found: bool,
    scanned: u64,
}

/// Executes one op; `expire_at` is the engine time an expiring update expires at (none:
/// the engine is not told, it is a plain update).
fn exec(
    db: &DB,
    read: &ReadOptions,
    op: &ClientOp,
    key: &[u8],
    value: &[u8],
    expire_at: Option<u64>,
) -> Result<Done> {
    let found = |found| Done { found, scanned: 0 };
    Ok(match op.code {
        INSERT | UPDATE | EXPIRING_UPDATE => found(
            match expire_at {
                Some(at) => db.put_with_expiry(key, value, at),
                None => db.put(key, value),
            }
            .map(|_| true)?,
        ),
        READ => found(db.get(key)?.is_some()),
        SCAN => {
            let iter = db.scan_opt(Bound::Included(key), Bound::Unbounded, None, read)?;
            let mut scanned = 0;
            for item in iter.take(op.len as usize) {
                item?;
                scanned += 1;
            }
            Done {
                found: true,
                scanned,
            }
        }
        RMW => {
            let was = db.get(key)?.is_some();
            db.put(key, value)?;
            found(was)
        }
        DELETE => found(db.delete(key).map(|_| true)?),
        c => bail!("unknown op code {c}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spikes::{intervals, Edge};

    fn op(code: u8, key: u64, len: u32) -> Result<ClientOp> {
        Ok(ClientOp {
            len,
            ..ClientOp::on(code, key)
        })
    }

    #[test]
    fn every_op_runs_once_and_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let db = DB::open(dir.path(), engine::Options::default()).unwrap();
        let values = Values::random_pool(100);
        let counters = Counters::default();
        let epoch = AtomicUsize::new(3);
        let c = Clients {
            threads: 3,
            key_size: 16,
            values: &values,
            read: ReadOptions::default(),
            counters: &counters,
            epoch: Some(&epoch),
            expiry: Expiry::Ignore,
        };
        let load = drive(&db, (0..1000).map(|k| op(INSERT, k, 0)), &c, || Ok(())).unwrap();
        assert_eq!(load.latencies.summary(INSERT as usize).unwrap().count, 1000);
        assert_eq!(load.not_found, 0);
        // Reads of keys 500..1500 (half absent), one delete, one scan of 10.
        let ops = (500..1500)
            .map(|k| op(READ, k, 0))
            .chain([op(DELETE, 0, 0), op(SCAN, 990, 10)]);
        let mut watched = 0;
        let run = drive(&db, ops, &c, || {
            watched += 1;
            Ok(())
        })
        .unwrap();
        assert!(watched >= 3, "the watcher runs as each client finishes");
        assert_eq!(run.latencies.summary(READ as usize).unwrap().count, 1000);
        assert_eq!(run.not_found, 500);
        assert_eq!(run.scanned, 10);
        // Every read landed in interval 3, the epoch's value.
        let by_interval = intervals(&[Edge::default(); 5], &run.per_interval);
        let reads: Vec<u64> = by_interval.iter().map(|i| i.reads).collect();
        assert_eq!(reads, [0, 0, 0, 1000]);
        assert_eq!(counters.ops_done.load(Relaxed), 2002);
        assert_eq!(counters.user_bytes.load(Relaxed), 1000 * 116 + 16);
        assert!(db.get(&keys(0)).unwrap().is_none());
        assert_eq!(db.get(&keys(999)).unwrap().unwrap().len(), 100);
    }

    /// Keys 0..4 loaded (ticks 0-3); then at tick 4 key 0 is written to expire in 3 ticks
    /// (at 7), at tick 5 key 1 in 2 (at 7) but written plainly at tick 6, at tick 7 key 2
    /// in 100; reads of keys 0, 1 and 2 at ticks 8-10.
    fn expiring_run(mode: &str) -> (PhaseResult, Vec<Option<Vec<u8>>>) {
        use engine::expiry::Clock as _;
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_000));
        let mut opts = engine::Options::default();
        let expiry = match mode {
            "engine" => {
                opts.clock = clock.clone();
                Expiry::Engine {
                    clock: &clock,
                    start_ms: 1_000,
                }
            }
            _ => Expiry::Sweep,
        };
        let db = DB::open(dir.path(), opts).unwrap();
        let values = Values::fixed(b"v");
        let counters = Counters::default();
        let c = Clients {
            threads: 1,
            key_size: 16,
            values: &values,
            read: ReadOptions::default(),
            counters: &counters,
            epoch: None,
            expiry,
        };
        drive(&db, (0..4).map(|k| op(INSERT, k, 0)), &c, || Ok(())).unwrap();
        let expiring = |key, ttl| {
            Ok(ClientOp {
                ttl,
                ..ClientOp::on(EXPIRING_UPDATE, key)
            })
        };
        let ops = vec![
            expiring(0, 3),
            expiring(1, 2),
            op(UPDATE, 1, 0),
            expiring(2, 100),
            op(READ, 0, 0),
            op(READ, 1, 0),
            op(READ, 2, 0),
        ];
        let run = drive(&db, ops.into_iter(), &c, || Ok(())).unwrap();
        if mode == "engine" {
            assert_eq!(
                clock.now_ms(),
                1_000 + 10,
                "the clock is at the last op's tick"
            );
        }
        let found = (0..4).map(|k| db.get(&keys(k)).unwrap()).collect();
        (run, found)
    }

    #[test]
    fn an_expiring_update_is_gone_at_its_tick_whoever_keeps_the_expiry() {
        for mode in ["engine", "sweep"] {
            let (run, found) = expiring_run(mode);
            assert_eq!(run.not_found, 1, "{mode}: the read of key 0 at tick 8");
            assert!(found[0].is_none(), "{mode}: key 0 expired");
            assert!(found[1].is_some(), "{mode}: key 1 was written again");
            assert!(found[2].is_some(), "{mode}: key 2 expires at tick 107");
            assert!(found[3].is_some(), "{mode}: key 3 never expires");
            assert_eq!(
                run.swept,
                u64::from(mode == "sweep"),
                "{mode}: only the sweep deletes, and only key 0"
            );
            assert_eq!(
                run.latencies.summary(UPDATE as usize).unwrap().count,
                4,
                "{mode}: expiring updates count as updates"
            );
        }
    }

    fn keys(k: u64) -> Vec<u8> {
        let mut key = Vec::new();
        workload::keys::format_key(k, 16, &mut key);
        key
    }

    #[test]
    fn an_op_error_stops_the_phase_and_names_the_op() {
        let dir = tempfile::tempdir().unwrap();
        let db = DB::open(dir.path(), engine::Options::default()).unwrap();
        let values = Values::fixed(b"v");
        let counters = Counters::default();
        let c = Clients {
            threads: 2,
            key_size: 16,
            values: &values,
            read: ReadOptions::default(),
            counters: &counters,
            epoch: None,
            expiry: Expiry::Ignore,
        };
        let ops = (0..10).map(|k| op(INSERT, k, 0)).chain([op(9, 7, 0)]);
        let Err(e) = drive(&db, ops, &c, || Ok(())) else {
            panic!("an unknown op code ran");
        };
        assert_eq!(
            format!("{e:#}"),
            "op of key number 7 (after 10 ops): unknown op code 9"
        );
    }

    #[test]
    fn a_watcher_error_ends_the_phase() {
        let dir = tempfile::tempdir().unwrap();
        let db = DB::open(dir.path(), engine::Options::default()).unwrap();
        let values = Values::fixed(b"v");
        let counters = Counters::default();
        let c = Clients {
            threads: 1,
            key_size: 8,
            values: &values,
            read: ReadOptions::default(),
            counters: &counters,
            epoch: None,
            expiry: Expiry::Ignore,
        };
        let ops = (0..10).map(|k| op(INSERT, k, 0));
        let Err(e) = drive(&db, ops, &c, || bail!("sampler failed")) else {
            panic!("the watcher's error was dropped");
        };
        assert_eq!(e.to_string(), "sampler failed");
    }
}
