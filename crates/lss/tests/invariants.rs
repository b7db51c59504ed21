//! Store invariants under random traces, for every policy and both store models:
//! each live block maps to exactly one valid slot, GC never drops a valid block, and the
//! counted bytes equal the chunks written (checked inside `Store::check`, run often).

use halflife_lss::placement::{ABLATIONS, NAMES};
use halflife_lss::sim::run_one;
use halflife_lss::trace::{Record, VolumeBuilder};
use halflife_lss::{Config, Selection};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::AtomicU64;

fn random_volume(seed: u64, n: usize) -> halflife_lss::trace::Volume {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut b = VolumeBuilder::default();
    let mut t = 0u64;
    for _ in 0..n {
        // Bursts and pauses around the 100 us window; sizes of 1 to 6 blocks, skewed
        // addresses so that some blocks are rewritten often.
        t += if rng.random_bool(0.3) {
            rng.random_range(0..20)
        } else {
            rng.random_range(50..400)
        };
        let hot = rng.random_bool(0.7);
        let block: u64 = if hot {
            rng.random_range(0..200)
        } else {
            rng.random_range(0..3000)
        };
        b.push(&Record {
            volume: "r".into(),
            write: rng.random_bool(0.9),
            offset: block * 4096 + 512 * rng.random_range(0..2),
            len: 4096 * rng.random_range(1..=6) - 512 * rng.random_range(0..2),
            t_us: t,
        });
    }
    b.finish().pop().unwrap()
}

fn small(chunk_model: bool, selection: Selection) -> Config {
    Config {
        chunk_blocks: 4,
        data_devices: 3,
        stripes_per_segment: 4,
        chunk_model,
        selection,
        ..Config::default()
    }
}

#[test]
fn invariants_hold_for_every_policy() {
    let vol = random_volume(7, 20_000);
    let next = vol.next_use();
    let progress = AtomicU64::new(0);
    for chunk_model in [true, false] {
        for sel in [Selection::Greedy, Selection::CostBenefit] {
            let cfg = small(chunk_model, sel);
            for p in NAMES.iter().chain(ABLATIONS) {
                let r = run_one(&vol, Some(&next), p, &cfg, &progress, 101)
                    .unwrap_or_else(|e| panic!("{p} chunk_model={chunk_model} {sel:?}: {e}"));
                assert!(r.counters.segments_collected > 0, "{p}: GC never ran");
                assert!(r.wa >= 1.0, "{p}: WA {}", r.wa);
                if !chunk_model {
                    assert_eq!(r.padding_bytes, 0, "{p}: padding without chunk model");
                    assert_eq!(r.shadow_bytes, 0);
                }
                assert_eq!(
                    r.user_bytes,
                    vol.block_writes() as u64 * 4096,
                    "{p}: every user block counted once"
                );
            }
        }
    }
}

#[test]
fn several_random_seeds_chunk_model() {
    let progress = AtomicU64::new(0);
    for seed in 1..4 {
        let vol = random_volume(seed, 6_000);
        let next = vol.next_use();
        let cfg = small(true, Selection::Greedy);
        for p in NAMES {
            run_one(&vol, Some(&next), p, &cfg, &progress, 37)
                .unwrap_or_else(|e| panic!("{p} seed {seed}: {e}"));
        }
    }
}

#[test]
fn unknown_policy_is_a_typed_error() {
    let vol = random_volume(1, 100);
    let e = run_one(&vol, None, "lru", &Config::default(), &AtomicU64::new(0), 0).unwrap_err();
    assert!(
        e.to_string().contains("unknown placement policy `lru`"),
        "{e}"
    );
}
