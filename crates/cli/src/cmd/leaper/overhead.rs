//! The overhead target measured in pairs (`--paired-rounds`): every policy's engine is
//! opened and loaded once, side by side, and the same block of reads is then run on each
//! in turn, round after round, the order rotating. A policy's cost is its throughput
//! against `none`'s in the same round, and the report keeps the median over rounds.
//!
//! Why not runs one after another: on the shared machine the throughput of one policy's
//! runs moved by a factor of two within minutes (for `none` as much as for the others),
//! which buries a 1% target under the machine's phases. A round lasts about a second per
//! policy, far shorter than those phases, so both sides of a pair see the same machine.
//! Every engine is compacted into one shape after the load. Interference only ever slows
//! a round down, so each policy's best round is reported beside the paired median.

use super::{options, Args};
use anyhow::Result;
use engine::{CacheWarmingConfig, ReadOptions, DB};
use harness::client::{self, Clients, Counters, Values};
use harness::ops::{self, ClientOp};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;
use workload::spec::WorkloadSpec;

/// One policy's rounds.
#[derive(Clone, Debug, Serialize)]
pub struct PairedPolicy {
    pub policy: String,
    /// Throughput per round, ops/s.
    pub ops_per_sec: Vec<f64>,
    /// Throughput / `none`'s in the same round.
    pub vs_none: Vec<f64>,
    pub median_ops_per_sec: f64,
    /// Median over rounds of `vs_none`, minus one: the cost is its negative.
    pub median_change_vs_none: f64,
    /// The best round's throughput, and its change against `none`'s best round.
    pub best_ops_per_sec: f64,
    pub best_change_vs_none: f64,
    /// The learned policy's trainings and predictions during the rounds.
    pub trainings: u64,
    pub predictions: u64,
}

#[derive(Debug, Serialize)]
pub struct Paired {
    pub rounds: usize,
    pub ops_per_round: u64,
    pub policies: Vec<PairedPolicy>,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

/// Runs `rounds` rounds of `spec`'s run ops on one engine per policy (`policies[0]` must
/// be `none`). The first round warms the engines and is not counted.
pub fn paired(
    a: &Args,
    spec: &WorkloadSpec,
    policies: &[&CacheWarmingConfig],
    rounds: usize,
) -> Result<Paired> {
    anyhow::ensure!(
        policies
            .first()
            .is_some_and(|p| **p == CacheWarmingConfig::None),
        "--paired-rounds needs none as the first policy"
    );
    let key_size = spec.key_size as usize;
    let values = Values::fixed(&vec![b'v'; spec.value_size as usize]);
    let run = |db: &Arc<DB>, ops: Box<dyn Iterator<Item = Result<ClientOp>> + Send>| {
        let clients = Clients {
            threads: a.threads,
            key_size,
            values: &values,
            read: ReadOptions::default(),
            counters: &Counters::default(),
            epoch: None,
            expiry: harness::client::Expiry::Ignore,
        };
        client::drive(db, ops, &clients, || Ok(()))
    };
    let mut dirs = Vec::new();
    let mut dbs = Vec::new();
    for p in policies {
        let tmp = tempfile::Builder::new()
            .prefix("halflife-leaper-")
            .tempdir()?;
        let db = Arc::new(DB::open(tmp.path(), options(a, p))?);
        run(&db, Box::new(ops::load(spec.record_count)))?;
        // One shape for every engine: loads by two threads leave different trees (files
        // per level), which could move read cost between engines whose read paths are
        // the same (none and incremental warm-up).
        db.flush()?;
        db.compact_range(None, None)?;
        db.wait_idle()?;
        dirs.push(tmp);
        dbs.push(db);
    }
    let base: Vec<_> = dbs.iter().map(|d| d.stats().warming).collect();
    let n = dbs.len();
    let mut tput = vec![Vec::new(); n];
    for round in 0..=rounds {
        for k in 0..n {
            let i = (round + k) % n;
            let w = workload::Workload::new(spec.clone())?;
            let ops = w.run_ops().map(|op| Ok(ClientOp::from(op)));
            let t = Instant::now();
            run(&dbs[i], Box::new(ops))?;
            if round > 0 {
                tput[i].push(spec.operation_count as f64 / t.elapsed().as_secs_f64());
            }
        }
    }
    let policies = policies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let vs_none: Vec<f64> = tput[i].iter().zip(&tput[0]).map(|(x, y)| x / y).collect();
            let end = dbs[i].stats().warming;
            PairedPolicy {
                policy: p.name().to_string(),
                median_ops_per_sec: median(&tput[i]),
                median_change_vs_none: median(&vs_none) - 1.0,
                best_ops_per_sec: best(&tput[i]),
                best_change_vs_none: best(&tput[i]) / best(&tput[0]) - 1.0,
                ops_per_sec: tput[i].clone(),
                vs_none,
                trainings: end.trainings - base[i].trainings,
                predictions: end.predictions - base[i].predictions,
            }
        })
        .collect();
    for db in dbs {
        if let Ok(db) = Arc::try_unwrap(db) {
            db.close()?;
        }
    }
    drop(dirs);
    Ok(Paired {
        rounds,
        ops_per_round: spec.operation_count,
        policies,
    })
}

/// The table of a paired measurement.
pub fn render(p: &Paired) -> String {
    let mut t = harness::table::Table::new([
        "policy",
        "median throughput",
        "median vs none (paired)",
        "min .. max vs none",
        "best round",
        "best vs none's best",
        "trainings",
        "predictions",
    ]);
    for x in &p.policies {
        let lo = x.vs_none.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = x.vs_none.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        t.row([
            x.policy.clone(),
            harness::table::rate(x.median_ops_per_sec),
            format!("{:+.2}%", x.median_change_vs_none * 100.0),
            format!("{:+.1}% .. {:+.1}%", (lo - 1.0) * 100.0, (hi - 1.0) * 100.0),
            harness::table::rate(x.best_ops_per_sec),
            format!("{:+.2}%", x.best_change_vs_none * 100.0),
            x.trainings.to_string(),
            x.predictions.to_string(),
        ]);
    }
    format!(
        "paired overhead: {} rounds of {} ops per policy, order rotating\n{}",
        p.rounds,
        p.ops_per_round,
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
