//! A benchmark run of a [`Plan`] on an open engine: the load phase (every record
//! inserted), the run phase (the plan's ops), then settling (no flush, compaction or GC
//! pending), with samples of the engine's counters throughout. `halflife bench` is this
//! plus its flags, the report and the printing.

use crate::client::{self, Clients, Counters, Expiry, PhaseResult, Values};
use crate::ops::{self, ClientOp};
use crate::plan::Plan;
use crate::report::Sample;
use crate::sampler::Sampler;
use anyhow::Result;
use engine::{ReadOptions, DB};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// How a plan runs.
pub struct Settings<'a> {
    /// Client threads.
    pub threads: usize,
    /// How scans read separated values ahead.
    pub read: ReadOptions,
    /// Samples of the engine's counters over the load and run phases (about).
    pub samples: u64,
    /// Measure live bytes with a tree scan in each sample (the final sample always does).
    pub live_scans: bool,
    /// How time passes and expiring updates reach the engine.
    pub expiry: Expiry<'a>,
}

/// Where a run is, for a display: the phase, then ops done (of load and run together).
pub trait Progress {
    fn phase(&self, name: &str);
    fn set(&self, done: u64);
}

/// What a run measured.
pub struct Measured {
    pub load: PhaseResult,
    pub run: PhaseResult,
    pub settle_seconds: f64,
    /// Live bytes when the engine was idle after the run.
    pub live_user_bytes: Option<u64>,
    pub samples: Vec<Sample>,
    /// Bytes the ops asked to write ([`Counters::user_bytes`]).
    pub user_bytes_written: u64,
}

/// Loads, runs and settles `plan` on `db`. Values are slices of a random pool
/// ([`Values::random_pool`]).
pub fn run(db: &DB, plan: &Plan, s: &Settings, progress: &dyn Progress) -> Result<Measured> {
    let values = Values::random_pool(plan.info.value_size as usize);
    let counters = Counters::default();
    let clients = Clients {
        threads: s.threads,
        key_size: plan.info.key_size as usize,
        values: &values,
        read: s.read,
        counters: &counters,
        epoch: None,
        expiry: s.expiry,
    };
    let sample_every = ((plan.info.record_count + plan.info.op_count) / s.samples.max(1)).max(1);
    let mut sampler = Sampler::new(sample_every, s.live_scans);
    sampler.take(db, &counters)?;

    progress.phase("load");
    let load_ops = ops::load(plan.info.record_count);
    let load = drive(db, &clients, load_ops, progress, &mut sampler)?;

    progress.phase("run");
    let run = drive(db, &clients, plan.run_ops()?, progress, &mut sampler)?;

    progress.phase("settle");
    let t = Instant::now();
    db.wait_idle()?;
    let settle_seconds = t.elapsed().as_secs_f64();
    let live_user_bytes = sampler.take_final(db, &counters);
    Ok(Measured {
        load,
        run,
        settle_seconds,
        live_user_bytes,
        samples: sampler.samples,
        user_bytes_written: counters.user_bytes.load(Relaxed),
    })
}

/// Runs one phase's `ops` on the clients while the calling thread drives the progress
/// display and the sampler.
fn drive<I>(
    db: &DB,
    clients: &Clients,
    ops: I,
    progress: &dyn Progress,
    sampler: &mut Sampler,
) -> Result<PhaseResult>
where
    I: Iterator<Item = Result<ClientOp>> + Send + 'static,
{
    let counters = clients.counters;
    let result = client::drive(db, ops, clients, || {
        let done = counters.ops_done.load(Relaxed);
        progress.set(done);
        if done >= sampler.next_at {
            sampler.take(db, counters)?;
        }
        Ok(())
    });
    progress.set(counters.ops_done.load(Relaxed));
    result
}
