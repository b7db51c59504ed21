//! Synthetic YCSB-A-like block workloads (paper 004 sec. 4.3).
//!
//! A fill phase writes every block of the working set once, in address order; then
//! updates pick blocks by a Zipf law of exponent `alpha` (0 = uniform, up to 0.99). Ranks
//! are scattered over the address space by a fixed multiplicative permutation, as YCSB's
//! scrambled Zipfian does, so that hot blocks are not neighbours. Requests arrive as a
//! Poisson process of `rate` write requests per second of trace time: the access density
//! is what decides how often a chunk fills inside the 100 us SLA window. YCSB-A is half
//! reads; reads do not enter a log-structured replay, so `read_ratio` only matters for
//! trace files written for the readers.

use crate::error::{LssError, Result};
use crate::trace::{Record, Volume, BLOCK_BYTES};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Zipf};

#[derive(Clone, Debug, serde::Serialize)]
pub struct SynthConfig {
    /// Working set in 4 KiB blocks.
    pub blocks: u32,
    /// Update requests after the fill.
    pub updates: u64,
    pub alpha: f64,
    /// Write requests per second (trace time).
    pub rate: f64,
    /// Blocks per request.
    pub request_blocks: u32,
    /// Share of reads among requests written to trace files.
    pub read_ratio: f64,
    /// Smallest gap between two requests, in microseconds: gaps are `min_gap_us` plus an
    /// exponential with the rest of the mean `1 / rate`. Paper 004 sec. 4.3 defines
    /// light traffic as every gap above the 100 us window; 0 gives a Poisson stream.
    pub min_gap_us: f64,
    pub seed: u64,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            blocks: 1 << 18,
            updates: 10 << 18,
            alpha: 0.9,
            rate: 5000.0,
            request_blocks: 1,
            read_ratio: 0.0,
            min_gap_us: 0.0,
            seed: 42,
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

struct Gen {
    rng: SmallRng,
    zipf: Zipf<f64>,
    gap: Exp<f64>,
    n: u64,
    mult: u64,
    t: f64,
    cfg: SynthConfig,
}

impl Gen {
    fn new(cfg: &SynthConfig) -> Result<Gen> {
        if cfg.blocks < cfg.request_blocks.max(1) {
            return Err(LssError::Config(
                "working set smaller than one request".into(),
            ));
        }
        if !(0.0..1.0).contains(&cfg.alpha) {
            return Err(LssError::Config(format!(
                "zipf alpha {} not in [0, 1)",
                cfg.alpha
            )));
        }
        if cfg.rate.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return Err(LssError::Config("request rate must be positive".into()));
        }
        let mean_gap = 1e6 / cfg.rate;
        if !(0.0..mean_gap).contains(&cfg.min_gap_us) {
            return Err(LssError::Config(format!(
                "minimum gap {} us must be in [0, {mean_gap}) (the mean gap at {} req/s)",
                cfg.min_gap_us, cfg.rate
            )));
        }
        if !(0.0..1.0).contains(&cfg.read_ratio) {
            return Err(LssError::Config("read ratio must be in [0, 1)".into()));
        }
        // Request slots: the space is cut into request-sized extents.
        let n = (cfg.blocks / cfg.request_blocks.max(1)) as u64;
        let mut mult = 0x9E37_79B9_7F4A_7C15 % n.max(2);
        while n > 1 && (mult < 2 || gcd(mult, n) != 1) {
            mult += 1;
        }
        Ok(Gen {
            rng: SmallRng::seed_from_u64(cfg.seed),
            zipf: Zipf::new(n as f64, cfg.alpha).map_err(|e| LssError::Config(e.to_string()))?,
            gap: Exp::new(1.0 / (mean_gap - cfg.min_gap_us))
                .map_err(|e| LssError::Config(e.to_string()))?,
            n,
            mult: mult.max(1),
            t: 0.0,
            cfg: cfg.clone(),
        })
    }

    fn tick(&mut self) -> u64 {
        self.t += self.cfg.min_gap_us + self.gap.sample(&mut self.rng);
        self.t as u64
    }

    /// Extent index of the next update.
    fn pick(&mut self) -> u64 {
        let rank = self.zipf.sample(&mut self.rng) as u64 - 1;
        (rank.min(self.n - 1) * self.mult) % self.n
    }

    /// Calls `f(t_us, first_block, write)` for every request: the fill, then updates.
    fn run(&mut self, mut f: impl FnMut(u64, u64, bool)) {
        let rb = self.cfg.request_blocks.max(1) as u64;
        for e in 0..self.n {
            let t = self.tick();
            f(t, e * rb, true);
        }
        let mut updates = 0;
        while updates < self.cfg.updates {
            let t = self.tick();
            let e = self.pick();
            let write =
                self.cfg.read_ratio == 0.0 || self.rng.random::<f64>() >= self.cfg.read_ratio;
            f(t, e * rb, write);
            updates += u64::from(write);
        }
    }
}

/// Generates the replayable write stream of one volume; also returns the number of
/// fill blocks (the warm-up to exclude from measurements).
pub fn volume(cfg: &SynthConfig) -> Result<(Volume, u64)> {
    let mut g = Gen::new(cfg)?;
    let rb = cfg.request_blocks.max(1);
    let n_blocks = g.n * rb as u64;
    let total = (g.n + cfg.updates) * rb as u64;
    let mut v = Volume {
        name: format!("ycsb-a-{}-{}", cfg.alpha, cfg.rate),
        times: Vec::with_capacity(total as usize),
        lbas: Vec::with_capacity(total as usize),
        n_lbas: n_blocks as u32,
        ..Default::default()
    };
    g.run(|t, first, write| {
        if write {
            v.write_requests += 1;
            for b in 0..rb as u64 {
                v.times.push(t);
                v.lbas.push((first + b) as u32);
            }
        } else {
            v.read_requests += 1;
        }
    });
    Ok((v, n_blocks))
}

/// Generates trace records (reads included) for a trace file of the given volume name.
pub fn records(cfg: &SynthConfig, volume: &str, t0_us: u64) -> Result<Vec<Record>> {
    let mut g = Gen::new(cfg)?;
    let len = cfg.request_blocks.max(1) as u64 * BLOCK_BYTES;
    let mut out = Vec::new();
    g.run(|t, first, write| {
        out.push(Record {
            volume: volume.to_string(),
            write,
            offset: first * BLOCK_BYTES,
            len,
            t_us: t0_us + t,
        })
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_then_skewed_updates_at_the_requested_rate() {
        let cfg = SynthConfig {
            blocks: 10_000,
            updates: 100_000,
            alpha: 0.9,
            rate: 10_000.0,
            ..Default::default()
        };
        let (v, fill) = volume(&cfg).unwrap();
        assert_eq!(fill, 10_000);
        assert_eq!(v.block_writes(), 110_000);
        assert!(v.lbas[..10_000]
            .iter()
            .enumerate()
            .all(|(i, &l)| l == i as u32));
        // 110k requests at 10k/s: about 11 s.
        assert!((v.duration_s() - 11.0).abs() < 0.5, "{}", v.duration_s());
        // Skew: the most written 20 % of blocks take most updates.
        let mut counts = vec![0u32; 10_000];
        v.lbas[10_000..]
            .iter()
            .for_each(|&l| counts[l as usize] += 1);
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = counts[..2000].iter().sum();
        assert!(top as f64 > 0.6 * 100_000.0, "top 20% got {top}");
    }

    #[test]
    fn uniform_when_alpha_is_zero() {
        let cfg = SynthConfig {
            blocks: 1000,
            updates: 100_000,
            alpha: 0.0,
            ..Default::default()
        };
        let (v, _) = volume(&cfg).unwrap();
        let mut counts = vec![0u32; 1000];
        v.lbas[1000..].iter().for_each(|&l| counts[l as usize] += 1);
        assert!(counts.iter().all(|&c| (50..160).contains(&c)));
    }

    #[test]
    fn minimum_gap_keeps_the_mean_rate() {
        let cfg = SynthConfig {
            blocks: 1000,
            updates: 50_000,
            rate: 5000.0,
            min_gap_us: 101.0,
            ..Default::default()
        };
        let (v, _) = volume(&cfg).unwrap();
        // Every gap is above the 100 us window (timestamps are whole microseconds).
        assert!(v.times.windows(2).all(|w| w[1] - w[0] >= 100));
        // 51k requests at a mean of 200 us: about 10.2 s.
        assert!((v.duration_s() - 10.2).abs() < 0.3, "{}", v.duration_s());
        let too_big = SynthConfig {
            min_gap_us: 200.0,
            ..cfg
        };
        assert!(volume(&too_big).is_err());
    }

    #[test]
    fn bad_parameters_are_errors() {
        let bad = SynthConfig {
            alpha: 1.5,
            ..Default::default()
        };
        assert!(volume(&bad).is_err());
    }
}
