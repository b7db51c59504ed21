//! Every live key equally likely.

use super::{DistributionError, KeyChooser};
use crate::rng::WorkloadRng;

/// Uniform over `0..n`. Inserts widen the range, so new keys are eligible at once (YCSB's
/// uniform chooser keeps the load-phase range; including new keys is the more useful
/// baseline for an engine whose key space grows).
#[derive(Clone, Debug)]
pub struct Uniform {
    items: u64,
}

impl Uniform {
    /// Uniform over `0..items`; `items` must be positive.
    pub fn new(items: u64) -> Result<Self, DistributionError> {
        if items == 0 {
            return Err(DistributionError::EmptyKeySpace);
        }
        Ok(Self { items })
    }
}

impl KeyChooser for Uniform {
    #[inline]
    fn next(&mut self, rng: &mut WorkloadRng) -> u64 {
        rng.below(self.items)
    }

    fn item_count(&self) -> u64 {
        self.items
    }

    fn set_item_count(&mut self, items: u64) {
        self.items = items.max(1);
    }
}
