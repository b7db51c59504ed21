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
use crate::ops::{self, ClientOp, SharedReceiver, DELETE, INSERT, READ, RMW, SCAN, UPDATE};
use crate::spikes::IntervalLatencies;
use anyhow::{anyhow, bail, Context, Result};
use engine::{ReadOptions, DB};
use rand::{RngCore, SeedableRng};
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
}

impl PhaseResult {
    fn new() -> PhaseResult {
        PhaseResult {
            seconds: 0.0,
            latencies: Latencies::new(),
            per_interval: IntervalLatencies::default(),
            not_found: 0,
            scanned: 0,
        }
    }

    fn merge(&mut self, o: &PhaseResult) {
        self.latencies.merge(&o.latencies);
        self.per_interval.merge(&o.per_interval);
        self.not_found += o.not_found;
        self.scanned += o.scanned;
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
    let values = c.values;
    let mut offset = (id * 7919) % values.offsets;
    let write_bytes = (c.key_size + values.size) as u64;
    while let Some(batch) = ops::next_batch(rx) {
        if stop.load(Relaxed) {
            break;
        }
        for op in &batch {
            workload::keys::format_key(op.key, c.key_size, &mut key);
            let value = values.at(offset);
            let t = Instant::now();
            let done = exec(db, &c.read, op, &key, value).with_context(|| {
                let n = c.counters.ops_done.load(Relaxed);
                let name = OP_NAMES.get(op.code as usize).unwrap_or(&"op");
                format!("{name} of key number {} (after {n} ops)", op.key)
            })?;
            let nanos = t.elapsed().as_nanos() as u64;
            r.latencies.record(op.code as usize, nanos);
            if let (READ, Some(e)) = (op.code, c.epoch) {
                r.per_interval.record(e.load(Relaxed), nanos);
            }
            r.not_found += u64::from(!done.found);
            r.scanned += done.scanned;
            if op.code == INSERT || op.code == UPDATE || op.code == RMW {
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

/// Executes one op.
fn exec(db: &DB, read: &ReadOptions, op: &ClientOp, key: &[u8], value: &[u8]) -> Result<Done> {
    let found = |found| Done { found, scanned: 0 };
    Ok(match op.code {
        INSERT | UPDATE => found(db.put(key, value).map(|_| true)?),
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
        Ok(ClientOp { code, key, len })
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
        };
        let ops = (0..10).map(|k| op(INSERT, k, 0));
        let Err(e) = drive(&db, ops, &c, || bail!("sampler failed")) else {
            panic!("the watcher's error was dropped");
        };
        assert_eq!(e.to_string(), "sampler failed");
    }
}
