//! The simulator driver: replays a volume's write stream through a [`Store`] under one
//! placement policy, and runs every (volume, policy) pair of an experiment in parallel.

use crate::config::Config;
use crate::error::{LssError, Result};
use crate::placement;
use crate::store::{Counters, Store};
use crate::trace::{Volume, BLOCK_BYTES};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The outcome of one policy on one volume. Byte fields are since the warm-up.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunResult {
    pub volume: String,
    pub policy: String,
    pub user_bytes: u64,
    pub gc_bytes: u64,
    pub padding_bytes: u64,
    pub shadow_bytes: u64,
    pub parity_bytes: u64,
    pub wa: f64,
    pub padding_ratio: f64,
    pub counters: Counters,
    pub metadata_bytes: usize,
    pub segments: usize,
    pub elapsed_s: f64,
    pub blocks_per_s: f64,
    /// CPU time of the replaying thread (`None` where the OS does not report it).
    /// On a loaded machine this, not the wall time, says what one core sustains.
    pub cpu_s: Option<f64>,
    pub diagnostics: serde_json::Value,
}

impl RunResult {
    fn new(
        vol: &Volume,
        name: &str,
        store: &Store,
        p: &dyn placement::Placement,
        secs: f64,
        cpu_s: Option<f64>,
    ) -> Self {
        let c = store.counters();
        let b = BLOCK_BYTES;
        RunResult {
            volume: vol.name.clone(),
            policy: name.to_string(),
            user_bytes: c.user * b,
            gc_bytes: c.gc * b,
            padding_bytes: c.padding * b,
            shadow_bytes: c.shadow * b,
            parity_bytes: c.parity_chunks * store_chunk_blocks(store) * b,
            wa: c.wa(),
            padding_ratio: c.padding_ratio(),
            counters: c,
            metadata_bytes: p.metadata_bytes(),
            segments: store.segments(),
            elapsed_s: secs,
            blocks_per_s: vol.block_writes() as f64 / secs.max(1e-9),
            cpu_s,
            diagnostics: p.diagnostics(),
        }
    }
}

/// CPU seconds the calling thread has run, from Linux's `/proc/thread-self/schedstat`
/// (nanoseconds on CPU); `None` elsewhere.
pub fn thread_cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

fn store_chunk_blocks(s: &Store) -> u64 {
    s.chunk_blocks() as u64
}

/// Replays `vol` under `policy`. `next_use` (from [`Volume::next_use`]) is the future
/// knowledge FK needs; other policies ignore it. `progress` counts replayed blocks.
/// With `check_every > 0` the store's invariants are verified that often (tests).
pub fn run_one(
    vol: &Volume,
    next_use: Option<&[u64]>,
    policy: &str,
    cfg: &Config,
    progress: &AtomicU64,
    check_every: u64,
) -> Result<RunResult> {
    cfg.validate()?;
    if vol.block_writes() == 0 {
        return Err(LssError::EmptyVolume(vol.name.clone()));
    }
    let env = Store::env(cfg, vol.n_lbas);
    let mut p = placement::build(policy, &env)?;
    if policy == "fk" && next_use.is_none() {
        return Err(LssError::Config(
            "FK needs the trace's future (next_use)".into(),
        ));
    }
    let mut store = Store::new(cfg, vol.n_lbas, p.groups());
    let start = Instant::now();
    let cpu0 = thread_cpu_s();
    const STEP: usize = 1 << 16;
    for (i, (&lba, &t)) in vol.lbas.iter().zip(&vol.times).enumerate() {
        let next = next_use.map_or(u64::MAX, |n| n[i]);
        store.write(p.as_mut(), lba, t, next);
        if i % STEP == STEP - 1 {
            progress.fetch_add(STEP as u64, Ordering::Relaxed);
        }
        if check_every > 0 && i as u64 % check_every == check_every - 1 {
            store
                .check()
                .map_err(|e| LssError::Config(format!("invariant broken: {e}")))?;
        }
    }
    progress.fetch_add((vol.block_writes() % STEP) as u64, Ordering::Relaxed);
    store.finish(p.as_mut());
    let cpu_s = thread_cpu_s().zip(cpu0).map(|(b, a)| b - a);
    if check_every > 0 {
        store
            .check()
            .map_err(|e| LssError::Config(format!("invariant broken: {e}")))?;
    }
    Ok(RunResult::new(
        vol,
        policy,
        &store,
        p.as_ref(),
        start.elapsed().as_secs_f64(),
        cpu_s,
    ))
}

/// Runs every policy on every volume on `threads` threads. Results are in
/// (volume, policy) order.
pub fn run_all(
    vols: &[Volume],
    policies: &[String],
    cfg: &Config,
    threads: usize,
    progress: &AtomicU64,
) -> Result<Vec<RunResult>> {
    let nexts: Vec<Option<Vec<u64>>> = vols
        .iter()
        .map(|v| policies.iter().any(|p| p == "fk").then(|| v.next_use()))
        .collect();
    let jobs: Vec<(usize, usize)> = (0..vols.len())
        .flat_map(|v| (0..policies.len()).map(move |p| (v, p)))
        .collect();
    let next_job = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunResult>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(jobs.len()) {
            s.spawn(|| loop {
                let j = next_job.fetch_add(1, Ordering::Relaxed);
                let Some(&(v, p)) = jobs.get(j) else { break };
                let r = run_one(
                    &vols[v],
                    nexts[v].as_deref(),
                    &policies[p],
                    cfg,
                    progress,
                    0,
                );
                results.lock().unwrap()[j] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// Replayed block writes per CPU second over `results` (`None` if a run has no CPU time).
pub fn blocks_per_cpu_s<'a>(results: impl IntoIterator<Item = &'a RunResult>) -> Option<f64> {
    let (mut blocks, mut cpu) = (0.0, 0.0);
    for r in results {
        blocks += r.blocks_per_s * r.elapsed_s;
        cpu += r.cpu_s?;
    }
    (cpu > 0.0).then(|| blocks / cpu)
}

/// Total blocks an experiment replays (for progress bars).
pub fn total_blocks(vols: &[Volume], policies: usize) -> u64 {
    vols.iter().map(|v| v.block_writes() as u64).sum::<u64>() * policies as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn thread_cpu_time_advances_with_work() {
        let a = thread_cpu_s().expect("Linux reports thread CPU time");
        let mut x = 0u64;
        let t = Instant::now();
        while t.elapsed().as_millis() < 30 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let b = thread_cpu_s().unwrap();
        assert!(b > a, "{a} -> {b}");
    }
}
