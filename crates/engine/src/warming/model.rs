//! The hot-range classifier: forust-ml gradient boosting with log-loss (the paper uses
//! LightGBM), target "the range is read in the next slot".

use super::features::{TrainingSet, NUM_FEATURES};
use crate::error::{Error, Result};
use forust_ml::data::Matrix;
use forust_ml::objective::ObjectiveType;
use forust_ml::GradientBooster;

/// A trained classifier.
pub struct HotRangeModel {
    booster: GradientBooster,
}

impl std::fmt::Debug for HotRangeModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HotRangeModel")
            .field("trees", &self.booster.trees.len())
            .finish()
    }
}

impl HotRangeModel {
    /// Trains on `set` (one thread: the trainer is a background job). Fails if the set is
    /// empty or has one class only.
    pub fn train(
        set: &TrainingSet,
        iterations: usize,
        max_depth: usize,
        learning_rate: f32,
    ) -> Result<HotRangeModel> {
        let n = set.len();
        let pos = set.positives();
        let bad = |detail: String| Error::InvalidOptions {
            name: "cache_warming.training_set",
            detail,
        };
        if n == 0 || pos == 0 || pos == n {
            return Err(bad(format!(
                "{n} rows, {pos} read next slot: need both classes"
            )));
        }
        let m = Matrix::new(&set.columns, n, NUM_FEATURES);
        let mut booster = GradientBooster::default()
            .set_objective_type(ObjectiveType::LogLoss)
            .set_iterations(iterations)
            .set_learning_rate(learning_rate)
            .set_max_depth(max_depth)
            .set_nbins(64)
            .set_num_threads(Some(1))
            .set_seed(0)
            .set_missing(f64::NAN)
            .set_allow_missing_splits(true);
        booster
            .fit(&m, &set.labels, &vec![1.0; n], None)
            .map_err(|e| bad(format!("training failed: {e}")))?;
        Ok(HotRangeModel { booster })
    }

    pub fn num_trees(&self) -> usize {
        self.booster.trees.len()
    }

    /// Probability that a range with this feature row is read in the next slot.
    pub fn probability(&self, row: &[f64]) -> f64 {
        debug_assert_eq!(row.len(), NUM_FEATURES);
        let missing = self.booster.missing;
        let mut score = self.booster.base_score;
        for t in &self.booster.trees {
            score += t.predict_row_from_row_slice(row, &missing);
        }
        1.0 / (1.0 + (-score).exp())
    }
}
