//! The lifetime model (paper 000, sec. 4.4): a gradient-boosting binary classifier with
//! log-loss (`forust-ml`), trained in a background thread whenever the dataset is full,
//! swapped in atomically, saved after every training and loaded at open.
//!
//! # Model file
//!
//! ```text
//! magic "HLGBM\0\0\x01" (8 bytes) | u64 LE length n | n bytes of forust JSON | u32 LE crc32c
//! ```
//! The file is written to `<path>.tmp`, fsynced, renamed over `<path>` and the directory is
//! fsynced, so a crash leaves either the old model or the new one. It is written with
//! `std::fs` rather than the metered storage layer: it is a few hundred KB per training,
//! not data the user wrote.
//!
//! The grammar of every file in a database directory is in `docs/format.md`.

use super::features::{FeatureRecord, MODEL_INPUT_LEN};
use super::labels::{Dataset, PushOutcome, TrainingSample, DEFAULT_DATASET_CAPACITY};
use super::thresholds::{LifetimeClass, LifetimeThresholds};
use crate::error::{Error, Result};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use forust_ml::data::Matrix;
use forust_ml::gradientbooster::ImportanceMethod;
use forust_ml::objective::ObjectiveType;
use forust_ml::GradientBooster;
use parking_lot::{Mutex, RwLock};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

const MAGIC: &[u8; 8] = b"HLGBM\0\0\x01";

/// Decides the class of a value GC found valid.
pub trait LifetimePredictor: Send + Sync {
    /// Probability that the remaining lifetime is long, from a row built by
    /// [`FeatureRecord::write_model_input`].
    fn probability_long(&self, input: &[f64]) -> f64;

    /// Short or long (never [`LifetimeClass::Default`]).
    fn predict(&self, input: &[f64]) -> LifetimeClass {
        if self.probability_long(input) >= 0.5 {
            LifetimeClass::Long
        } else {
            LifetimeClass::Short
        }
    }
}

/// The policy before any model exists, and the paper's "without model" baseline
/// (sec. 5.6): every valid value goes to the long class.
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysLong;

impl LifetimePredictor for AlwaysLong {
    fn probability_long(&self, _input: &[f64]) -> f64 {
        1.0
    }
}

/// Training knobs of the GBM.
#[derive(Clone, Debug, PartialEq)]
pub struct GbmParams {
    pub iterations: usize,
    pub learning_rate: f32,
    pub max_depth: usize,
    pub nbins: u16,
    /// Threads used while training (the trainer is a background job: 1 by default).
    pub threads: usize,
    pub seed: u64,
}

impl Default for GbmParams {
    fn default() -> Self {
        GbmParams {
            iterations: 100,
            learning_rate: 0.1,
            max_depth: 6,
            nbins: 256,
            threads: 1,
            seed: 0,
        }
    }
}

/// A trained gradient-boosting classifier.
pub struct GbmModel {
    booster: GradientBooster,
}

impl std::fmt::Debug for GbmModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GbmModel")
            .field("trees", &self.booster.trees.len())
            .finish()
    }
}

impl GbmModel {
    /// Trains on `dataset`. Fails with `InvalidOptions` if the dataset is empty or holds
    /// one class only (log-loss has nothing to separate).
    pub fn train(dataset: &Dataset, params: &GbmParams) -> Result<GbmModel> {
        let bad = |detail: String| Error::InvalidOptions {
            name: "lifetime.dataset",
            detail,
        };
        let n = dataset.len();
        let pos = dataset.positives();
        if n == 0 || pos == 0 || pos == n {
            return Err(bad(format!(
                "{n} rows with {pos} labelled long: need both classes"
            )));
        }
        let (x, y) = dataset.to_column_major();
        let m = Matrix::new(&x, n, MODEL_INPUT_LEN);
        let mut booster = GradientBooster::default()
            .set_objective_type(ObjectiveType::LogLoss)
            .set_iterations(params.iterations)
            .set_learning_rate(params.learning_rate)
            .set_max_depth(params.max_depth)
            .set_nbins(params.nbins)
            .set_num_threads(Some(params.threads.max(1)))
            .set_seed(params.seed)
            .set_missing(f64::NAN)
            .set_allow_missing_splits(true);
        let w = vec![1.0; n];
        booster
            .fit(&m, &y, &w, None)
            .map_err(|e| bad(format!("training failed: {e}")))?;
        Ok(GbmModel { booster })
    }

    pub fn num_trees(&self) -> usize {
        self.booster.trees.len()
    }

    /// Total split gain per input column, largest first, named as in
    /// [`super::features::column_name`] (paper 000 Fig. 7b).
    pub fn feature_importance(&self) -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = self
            .booster
            .calculate_feature_importance(ImportanceMethod::TotalGain, true)
            .into_iter()
            .map(|(c, g)| (super::features::column_name(c), f64::from(g)))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// The model as bytes of the file format in the module docs.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let json = self
            .booster
            .json_dump()
            .map_err(|e| Error::InvalidOptions {
                name: "lifetime.model",
                detail: format!("cannot serialize: {e}"),
            })?;
        let mut v = Vec::with_capacity(json.len() + 20);
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&(json.len() as u64).to_le_bytes());
        v.extend_from_slice(json.as_bytes());
        v.extend_from_slice(&crate::checksum::crc(json.as_bytes()).to_le_bytes());
        Ok(v)
    }

    /// Parses bytes written by [`GbmModel::to_bytes`]; `file` names them in errors.
    pub fn from_bytes(file: &Path, data: &[u8]) -> Result<GbmModel> {
        let bad = |d: &str| Error::corruption(file, format!("lifetime model: {d}"));
        if data.len() < 20 || &data[..8] != MAGIC {
            return Err(bad("bad magic or too short"));
        }
        let n = u64::from_le_bytes(data[8..16].try_into().unwrap());
        if n != (data.len() - 20) as u64 {
            return Err(bad("length mismatch"));
        }
        let json = &data[16..data.len() - 4];
        let crc = u32::from_le_bytes(data[data.len() - 4..].try_into().unwrap());
        if crate::checksum::crc(json) != crc {
            return Err(bad("checksum mismatch"));
        }
        let json = std::str::from_utf8(json).map_err(|_| bad("not UTF-8"))?;
        let booster = GradientBooster::from_json(json).map_err(|e| bad(&e.to_string()))?;
        Ok(GbmModel { booster })
    }

    /// Writes the model atomically (tmp file, fsync, rename, fsync of the directory).
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = self.to_bytes()?;
        let tmp = path.with_extension("tmp");
        {
            let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
            f.write_all(&bytes).map_err(|e| Error::io(&tmp, e))?;
            f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        }
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let d = std::fs::File::open(dir).map_err(|e| Error::io(dir, e))?;
            d.sync_all().map_err(|e| Error::io(dir, e))?;
        }
        Ok(())
    }

    /// Loads a model saved by [`GbmModel::save`]; `Ok(None)` if the file does not exist.
    pub fn load(path: &Path) -> Result<Option<GbmModel>> {
        match std::fs::read(path) {
            Ok(b) => Self::from_bytes(path, &b).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path, e)),
        }
    }
}

impl LifetimePredictor for GbmModel {
    fn probability_long(&self, input: &[f64]) -> f64 {
        debug_assert_eq!(input.len(), MODEL_INPUT_LEN);
        let missing = self.booster.missing;
        let mut score = self.booster.base_score;
        for t in &self.booster.trees {
            score += t.predict_row_from_row_slice(input, &missing);
        }
        1.0 / (1.0 + (-score).exp())
    }
}

/// The model in force, swapped atomically by the trainer. With no model yet every
/// prediction is [`LifetimeClass::Long`].
#[derive(Default)]
pub struct ModelHandle {
    model: RwLock<Option<Arc<GbmModel>>>,
    generation: AtomicU64,
}

impl std::fmt::Debug for ModelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelHandle")
            .field("generation", &self.generation())
            .finish()
    }
}

impl ModelHandle {
    pub fn new() -> Self {
        Self::default()
    }

    /// A handle holding the model saved at `path`, if any (call at open).
    pub fn open(path: &Path) -> Result<Self> {
        let h = Self::new();
        if let Some(m) = GbmModel::load(path)? {
            h.install(Arc::new(m));
        }
        Ok(h)
    }

    /// Replaces the model; readers holding the old one finish with it.
    pub fn install(&self, model: Arc<GbmModel>) {
        *self.model.write() = Some(model);
        self.generation.fetch_add(1, Ordering::Release);
    }

    pub fn current(&self) -> Option<Arc<GbmModel>> {
        self.model.read().clone()
    }

    /// How many models have been installed.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The class for a value GC found valid, `elapsed` sequence numbers after its write.
    pub fn predict(&self, features: &FeatureRecord, elapsed: u64) -> LifetimeClass {
        self.predict_with_probability(features, elapsed).0
    }

    /// Like [`ModelHandle::predict`], also returning the probability of "long".
    pub fn predict_with_probability(
        &self,
        features: &FeatureRecord,
        elapsed: u64,
    ) -> (LifetimeClass, f64) {
        let Some(m) = self.current() else {
            return (LifetimeClass::Long, 1.0);
        };
        let mut row = [0.0; MODEL_INPUT_LEN];
        features.write_model_input(Some(elapsed), &mut row);
        let p = m.probability_long(&row);
        let class = if p >= 0.5 {
            LifetimeClass::Long
        } else {
            LifetimeClass::Short
        };
        (class, p)
    }
}

/// Configuration of the background trainer.
#[derive(Clone, Debug)]
pub struct TrainerConfig {
    pub dataset_capacity: usize,
    pub gbm: GbmParams,
    /// Where each trained model is saved; `None` keeps it in memory only.
    pub model_path: Option<PathBuf>,
    /// Samples waiting for the consumer; producers drop samples beyond this.
    pub queue_capacity: usize,
}

impl Default for TrainerConfig {
    fn default() -> Self {
        TrainerConfig {
            dataset_capacity: DEFAULT_DATASET_CAPACITY,
            gbm: GbmParams::default(),
            model_path: None,
            queue_capacity: 64 * 1024,
        }
    }
}

/// Counters of the trainer, for stats and tests.
#[derive(Debug, Default)]
pub struct TrainerStats {
    pub samples_received: AtomicU64,
    pub samples_dropped: AtomicU64,
    pub samples_excluded: AtomicU64,
    pub trainings: AtomicU64,
    pub training_failures: AtomicU64,
    /// Microseconds spent in the last training.
    pub last_training_micros: AtomicU64,
}

/// The consumer thread of sec. 4.3: it takes samples from compaction and GC, feeds the
/// histograms (`H_s` from compaction lifetimes, `H_l` from GC elapsed lifetimes), labels
/// the samples with the thresholds in force, and trains, installs and saves a new model
/// each time the dataset fills.
pub struct Trainer {
    tx: Option<Sender<TrainingSample>>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<TrainerStats>,
    last_error: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Trainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("stats", &self.stats)
            .finish()
    }
}

impl Trainer {
    pub fn spawn(
        config: TrainerConfig,
        thresholds: Arc<LifetimeThresholds>,
        model: Arc<ModelHandle>,
    ) -> Result<Trainer> {
        let (tx, rx) = crossbeam_channel::bounded(config.queue_capacity.max(1));
        let stats = Arc::new(TrainerStats::default());
        let last_error = Arc::new(Mutex::new(None));
        let (s, e) = (stats.clone(), last_error.clone());
        let thread = std::thread::Builder::new()
            .name("halflife-lifetime-trainer".into())
            .spawn(move || consume(rx, config, thresholds, model, s, e))
            .map_err(|e| Error::io("<trainer thread>", e))?;
        Ok(Trainer {
            tx: Some(tx),
            thread: Some(thread),
            stats,
            last_error,
        })
    }

    /// Hands a sample to the consumer without blocking; false if it was dropped because
    /// the queue is full or the trainer stopped.
    pub fn submit(&self, sample: TrainingSample) -> bool {
        let Some(tx) = &self.tx else { return false };
        match tx.try_send(sample) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.samples_dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    pub fn stats(&self) -> &TrainerStats {
        &self.stats
    }

    /// The last training or save failure, if any.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// Stops the consumer after it has processed the samples already queued.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Trainer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn consume(
    rx: Receiver<TrainingSample>,
    config: TrainerConfig,
    thresholds: Arc<LifetimeThresholds>,
    model: Arc<ModelHandle>,
    stats: Arc<TrainerStats>,
    last_error: Arc<Mutex<Option<String>>>,
) {
    let mut dataset = Dataset::new(config.dataset_capacity);
    for sample in rx.iter() {
        stats.samples_received.fetch_add(1, Ordering::Relaxed);
        match sample.source {
            super::labels::SampleSource::Compaction => thresholds.record_short(sample.lifetime),
            super::labels::SampleSource::Gc => thresholds.record_long(sample.lifetime),
        }
        if dataset.push(&sample, &thresholds.current()) == PushOutcome::Excluded {
            stats.samples_excluded.fetch_add(1, Ordering::Relaxed);
        }
        if !dataset.is_full() {
            continue;
        }
        let full = std::mem::replace(&mut dataset, Dataset::new(config.dataset_capacity));
        let start = std::time::Instant::now();
        let result = GbmModel::train(&full, &config.gbm).and_then(|m| {
            if let Some(p) = &config.model_path {
                m.save(p)?;
            }
            Ok(m)
        });
        stats
            .last_training_micros
            .store(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        match result {
            Ok(m) => {
                model.install(Arc::new(m));
                stats.trainings.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                stats.training_failures.fetch_add(1, Ordering::Relaxed);
                *last_error.lock() = Some(e.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests;
