//! Samples of the engine's counters during a run, for the amplification-over-time plot:
//! ops done, bytes the clients asked to write and the engine wrote, disk bytes and, with a
//! tree scan, live bytes, about every `every` ops.

use crate::client::Counters;
use crate::report::{self, Sample};
use anyhow::Result;
use engine::DB;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// Takes the samples of one run.
pub struct Sampler {
    every: u64,
    /// The op count at which the next sample is due.
    pub next_at: u64,
    pub samples: Vec<Sample>,
    start: Instant,
    warned: bool,
    /// Measure live bytes with a tree scan in each sample.
    scan: bool,
}

impl Sampler {
    /// A sampler due every `every` ops; `scan` measures live bytes in each sample.
    pub fn new(every: u64, scan: bool) -> Sampler {
        Sampler {
            every,
            next_at: every,
            samples: Vec::new(),
            start: Instant::now(),
            warned: false,
            scan,
        }
    }

    /// One sample. Live bytes are measured first (a tree scan, while clients keep going),
    /// then the counters, which are cheap and consistent with each other.
    pub fn take(&mut self, db: &DB, counters: &Counters) -> Result<()> {
        let live = if self.scan { self.live_bytes(db) } else { None };
        self.push(db, counters, live);
        Ok(())
    }

    fn push(&mut self, db: &DB, counters: &Counters, live: Option<u64>) {
        let ops_done = counters.ops_done.load(Relaxed);
        let user = counters.user_bytes.load(Relaxed);
        let stats = db.stats();
        let engine = stats.io.total_written();
        self.samples.push(Sample {
            seconds: self.start.elapsed().as_secs_f64(),
            ops_done,
            user_bytes_written: user,
            engine_bytes_written: engine,
            write_amplification: report::ratio(engine, user),
            disk_bytes: stats.disk_bytes,
            live_user_bytes: live,
            space_amplification: live
                .filter(|l| *l > 0)
                .map(|l| stats.disk_bytes as f64 / l as f64),
        });
        self.next_at = (ops_done / self.every + 1) * self.every;
    }

    /// The final sample, when the engine is idle.
    pub fn take_final(&mut self, db: &DB, counters: &Counters) -> Option<u64> {
        let live = match db.measure_live_bytes() {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("measure_live_bytes failed after the run: {e}");
                None
            }
        };
        self.push(db, counters, live);
        live
    }

    /// Live bytes during the run; a scan that races with background work and fails is
    /// retried, then the sample goes without (with a warning: it is an engine bug).
    fn live_bytes(&mut self, db: &DB) -> Option<u64> {
        let mut last_err = None;
        for _ in 0..3 {
            match db.measure_live_bytes() {
                Ok(v) => return Some(v),
                Err(e) => last_err = Some(e),
            }
        }
        if !self.warned {
            self.warned = true;
            if let Some(e) = last_err {
                tracing::warn!(
                    "measure_live_bytes failed during the run ({e}); \
                     such samples have no space amplification"
                );
            }
        }
        None
    }
}
