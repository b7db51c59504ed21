//! Recently inserted keys are the popular ones (YCSB workload D).

use super::{DistributionError, KeyChooser, Zipfian};
use crate::rng::WorkloadRng;

/// `max - zipfian(count)` where `max = count - 1` is the newest key number: the newest key is
/// the most popular, the one before it next, and so on.
///
/// YCSB's `SkewedLatestGenerator` draws from a Zipfian over `max` items and so can never
/// return key 0 (and returns `max` twice as often as it should relative to its model); here
/// the Zipfian spans all `count` keys so every live key is reachable. Each insert must be
/// announced with [`KeyChooser::set_item_count`]; the Zipfian's normalizer grows by one term.
#[derive(Clone, Debug)]
pub struct Latest {
    zipf: Zipfian,
}

impl Latest {
    /// Keys `0..items` are live, `items - 1` is the latest.
    pub fn new(items: u64, theta: f64) -> Result<Self, DistributionError> {
        Ok(Self {
            zipf: Zipfian::new(items, theta)?,
        })
    }
}

impl KeyChooser for Latest {
    #[inline]
    fn next(&mut self, rng: &mut WorkloadRng) -> u64 {
        let newest = self.zipf.item_count() - 1;
        newest - self.zipf.next(rng)
    }

    fn item_count(&self) -> u64 {
        self.zipf.item_count()
    }

    fn set_item_count(&mut self, items: u64) {
        self.zipf.set_item_count(items);
    }
}
