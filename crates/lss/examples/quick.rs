//! Quick synthetic comparison: `cargo run --release -p halflife-lss --example quick -- RATE ALPHA BLOCKS UPDATES_FACTOR`
//! (`POL`, `THREADS` and `MIN_GAP` in the environment: policies, threads, minimum gap in us).

use halflife_lss::report::{summarize, table};
use halflife_lss::sim::run_all;
use halflife_lss::synth::{volume, SynthConfig};
use halflife_lss::Config;
use std::sync::atomic::AtomicU64;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let rate: f64 = a.get(1).map_or(5000.0, |s| s.parse().unwrap());
    let alpha: f64 = a.get(2).map_or(0.9, |s| s.parse().unwrap());
    let blocks: u32 = a.get(3).map_or(1 << 18, |s| s.parse().unwrap());
    let factor: u64 = a.get(4).map_or(10, |s| s.parse().unwrap());
    let chunk_model = a.get(5).is_none_or(|s| s != "nochunk");
    let sc = SynthConfig {
        blocks,
        updates: blocks as u64 * factor,
        alpha,
        rate,
        min_gap_us: std::env::var("MIN_GAP").map_or(0.0, |g| g.parse().unwrap()),
        ..Default::default()
    };
    let t = std::time::Instant::now();
    let (v, fill) = volume(&sc).unwrap();
    eprintln!(
        "generated {} blocks in {:.1}s",
        v.block_writes(),
        t.elapsed().as_secs_f64()
    );
    let mut cfg = if chunk_model {
        Config::default()
    } else {
        Config {
            stripes_per_segment: 64,
            ..Config::sepbit_study()
        }
    };
    cfg.warmup_blocks = fill;
    let pols =
        halflife_lss::placement::parse_list(&std::env::var("POL").unwrap_or("all".into())).unwrap();
    let threads = std::env::var("THREADS").map_or(2, |t| t.parse().unwrap());
    let r = run_all(&[v], &pols, &cfg, threads, &AtomicU64::new(0)).unwrap();
    print!("{}", table(&summarize(&r)));
    for x in &r {
        if x.policy.starts_with("adapt") || x.policy == "sepbit" {
            println!("{}", x.diagnostics);
        }
    }
}
