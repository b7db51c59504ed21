use super::*;
use crate::lifetime::labels::SampleSource;
use crate::lifetime::sampling::Sampler;
use crate::lifetime::thresholds::ThresholdParams;

/// A key's record after `writes` writes `gap` apart, ending at `now`.
fn history(writes: u64, gap: u64, now: u64) -> FeatureRecord {
    let mut r = FeatureRecord::with_value_size(4096);
    let start = now - gap * writes.saturating_sub(1);
    for i in 1..writes {
        r.update(start + i * gap, start + (i - 1) * gap);
    }
    r
}

/// Hot keys (many writes, short gaps) have short remaining lifetimes, cold keys long;
/// 10% of labels flipped.
fn synthetic(n: usize, seed: u64) -> (Dataset, Vec<(Vec<f64>, bool)>) {
    let rng = Sampler::new(seed);
    let mut d = Dataset::new(n);
    let mut rows = Vec::new();
    for _ in 0..n {
        let hot = rng.accept(0.5);
        let r = if hot {
            history(
                5 + (rng.next_f64() * 25.0) as u64,
                1000 + (rng.next_f64() * 200_000.0) as u64,
                1 << 30,
            )
        } else {
            history(
                1 + (rng.next_f64() * 3.0) as u64,
                20_000_000 + (rng.next_f64() * 1e8) as u64,
                1 << 30,
            )
        };
        let elapsed = (1 << 22) + (rng.next_f64() * 1e6) as u64;
        let row = r.to_model_input(Some(elapsed));
        let y = !hot ^ rng.accept(0.1);
        d.push_row(&row, y);
        rows.push((row, y));
    }
    (d, rows)
}

fn small_params() -> GbmParams {
    GbmParams {
        iterations: 30,
        max_depth: 4,
        ..Default::default()
    }
}

fn accuracy(m: &dyn LifetimePredictor, rows: &[(Vec<f64>, bool)]) -> f64 {
    let ok = rows
        .iter()
        .filter(|(x, y)| (m.predict(x) == LifetimeClass::Long) == *y)
        .count();
    ok as f64 / rows.len() as f64
}

#[test]
fn learns_hot_versus_cold() {
    let (train, _) = synthetic(2000, 1);
    let (_, test) = synthetic(1000, 2);
    let m = GbmModel::train(&train, &small_params()).unwrap();
    assert!(m.num_trees() > 0);
    let acc = accuracy(&m, &test);
    // Labels are 10% noisy, so 0.9 is the ceiling.
    assert!(acc > 0.85, "accuracy {acc}");
    // The no-model baseline only gets the cold half right.
    assert!(accuracy(&AlwaysLong, &test) < 0.6);
}

#[test]
fn one_class_dataset_is_refused() {
    let mut d = Dataset::new(10);
    for _ in 0..10 {
        d.push_row(&FeatureRecord::new().to_model_input(Some(1)), true);
    }
    assert!(matches!(
        GbmModel::train(&d, &small_params()),
        Err(Error::InvalidOptions { .. })
    ));
    assert!(GbmModel::train(&Dataset::new(10), &small_params()).is_err());
}

#[test]
fn save_load_round_trip_and_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("LIFETIME_MODEL");
    assert!(GbmModel::load(&path).unwrap().is_none());
    let (train, test) = synthetic(600, 3);
    let m = GbmModel::train(&train, &small_params()).unwrap();
    m.save(&path).unwrap();
    let back = GbmModel::load(&path).unwrap().unwrap();
    for (x, _) in test.iter().take(200) {
        assert_eq!(m.probability_long(x), back.probability_long(x));
    }
    let h = ModelHandle::open(&path).unwrap();
    assert_eq!(h.generation(), 1);

    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    assert!(GbmModel::load(&path).unwrap_err().is_corruption());
    std::fs::write(&path, &bytes[..10]).unwrap();
    assert!(ModelHandle::open(&path).unwrap_err().is_corruption());
}

#[test]
fn handle_without_model_says_long_then_swaps() {
    let h = ModelHandle::new();
    let hot = history(30, 1000, 1 << 30);
    assert_eq!(h.predict(&hot, 1 << 22), LifetimeClass::Long);
    let (train, _) = synthetic(1000, 4);
    h.install(Arc::new(GbmModel::train(&train, &small_params()).unwrap()));
    assert_eq!(h.generation(), 1);
    assert_eq!(h.predict(&hot, 1 << 22), LifetimeClass::Short);
    let cold = history(2, 50_000_000, 1 << 30);
    let (c, p) = h.predict_with_probability(&cold, 1 << 22);
    assert_eq!(c, LifetimeClass::Long);
    assert!(p > 0.5);
}

#[test]
fn trainer_labels_trains_installs_and_saves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("LIFETIME_MODEL");
    let thresholds = Arc::new(LifetimeThresholds::new(ThresholdParams::default()).unwrap());
    let handle = Arc::new(ModelHandle::new());
    let cfg = TrainerConfig {
        dataset_capacity: 400,
        gbm: small_params(),
        model_path: Some(path.clone()),
        queue_capacity: 10_000,
    };
    let trainer = Trainer::spawn(cfg, thresholds.clone(), handle.clone()).unwrap();
    let l_d = thresholds.current().default; // 4M before any GC
    let rng = Sampler::new(9);
    for i in 0..300u64 {
        // Compaction: hot keys die soon after l_d (label 0), cold ones long after (1).
        let hot = i % 2 == 0;
        let (rec, lifetime) = if hot {
            (
                history(20, 5000, 1 << 30),
                l_d + 1000 + (rng.next_f64() * 1000.0) as u64,
            )
        } else {
            (history(2, 80_000_000, 1 << 30), 5 * l_d)
        };
        assert!(trainer.submit(TrainingSample {
            source: SampleSource::Compaction,
            features: rec,
            lifetime,
        }));
        // One excluded sample (lifetime below l_d) per round.
        trainer.submit(TrainingSample {
            source: SampleSource::Compaction,
            features: FeatureRecord::new(),
            lifetime: 10,
        });
        // GC: written-once keys (1) and keys active in the short window (0).
        let (rec, elapsed) = if hot {
            (history(40, 1000, 1 << 30), 1000)
        } else {
            (FeatureRecord::new(), l_d)
        };
        trainer.submit(TrainingSample {
            source: SampleSource::Gc,
            features: rec,
            lifetime: elapsed,
        });
    }
    trainer.shutdown();
    assert_eq!(handle.generation(), 1, "one full dataset of 400");
    assert!(thresholds.short_histogram().count() >= 300);
    assert_eq!(thresholds.long_histogram().count(), 300);
    let loaded = GbmModel::load(&path).unwrap().unwrap();
    let hot = history(20, 5000, 1 << 30);
    assert_eq!(handle.predict(&hot, l_d), LifetimeClass::Short);
    let mut row = [0.0; MODEL_INPUT_LEN];
    hot.write_model_input(Some(l_d), &mut row);
    assert_eq!(loaded.predict(&row), LifetimeClass::Short);
}

/// Prints the single-row prediction latency; run with
/// `cargo test -p halflife-engine --release lifetime::model::tests::predict_latency -- --ignored --nocapture`.
#[test]
#[ignore]
fn predict_latency() {
    for (n, p) in [
        (20_000, GbmParams::default()),
        (DEFAULT_DATASET_CAPACITY, GbmParams::default()),
    ] {
        let (train, test) = synthetic(n, 5);
        let t = std::time::Instant::now();
        let m = GbmModel::train(&train, &p).unwrap();
        let train_time = t.elapsed();
        let handle = ModelHandle::new();
        handle.install(Arc::new(m));
        let recs: Vec<FeatureRecord> = (0..1000u64)
            .map(|i| history(1 + i % 33, 1000 + i * 37_000, 1 << 40))
            .collect();
        let t = std::time::Instant::now();
        let mut longs = 0;
        for _ in 0..20 {
            for r in &recs {
                longs += (handle.predict(r, 1 << 22) == LifetimeClass::Long) as usize;
            }
        }
        let per = t.elapsed().as_secs_f64() * 1e6 / 20_000.0;
        let size = handle.current().unwrap().to_bytes().unwrap().len();
        println!(
            "rows {n}: train {train_time:?}, {} trees, model {size} bytes, predict {per:.2} us/value (features + model), accuracy {:.3}, longs {longs}",
            handle.current().unwrap().num_trees(),
            accuracy(handle.current().unwrap().as_ref(), &test)
        );
    }
}
