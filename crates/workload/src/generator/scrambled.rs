//! YCSB's default "zipfian": Zipfian popularity, but the popular items scattered over the
//! key space instead of clustered at the smallest key numbers.

use super::zeta::zeta;
use super::zipfian::check_theta;
use super::{DistributionError, KeyChooser, Zipfian};
use crate::rng::{fnv1a64, WorkloadRng};

/// The number of items of the underlying Zipfian, fixed as in YCSB so that the popularity
/// ranking does not depend on the record count.
pub const SCRAMBLED_ITEMS: u64 = 10_000_000_000;

/// YCSB's precomputed zeta(10^10, 0.99).
pub const SCRAMBLED_ZETA_099: f64 = 26.469_028_201_783_02;

/// After this many draws outside the live key range, fall back to `hash mod live` so a tiny
/// live range inside a large capacity cannot stall the generator.
const MAX_REJECTIONS: u32 = 64;

/// Draw v from a Zipfian over 10^10 items, return `fnv1a64(v) mod capacity`.
///
/// For theta = 0.99 the normalizer is YCSB's constant; for any other theta it is computed
/// with the Euler–Maclaurin formula (see [`super::zeta`]), milliseconds instead of the
/// minutes YCSB spends summing ten billion terms.
///
/// The modulus (`capacity`) is fixed at construction because changing it would reshuffle
/// which keys are hot. A workload with inserts therefore sizes it for the keys it expects to
/// exist (YCSB: records + 2 × expected inserts) and announces the live count with
/// [`KeyChooser::set_item_count`]; draws at or above the live count are redrawn, as YCSB does.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    zipf: Zipfian,
    capacity: u64,
    live: u64,
}

impl ScrambledZipfian {
    /// Scrambled Zipfian over `0..items`, all of them live.
    pub fn new(items: u64, theta: f64) -> Result<Self, DistributionError> {
        Self::with_capacity(items, items, theta)
    }

    /// Scrambled Zipfian hashing into `0..capacity`, of which `0..live` are live now.
    pub fn with_capacity(live: u64, capacity: u64, theta: f64) -> Result<Self, DistributionError> {
        check_theta(theta)?;
        if live == 0 {
            return Err(DistributionError::EmptyKeySpace);
        }
        let capacity = capacity.max(live);
        let zetan = if theta == 0.99 {
            SCRAMBLED_ZETA_099
        } else {
            zeta(SCRAMBLED_ITEMS, theta)
        };
        Ok(Self {
            zipf: Zipfian::with_zeta(SCRAMBLED_ITEMS, theta, zetan),
            capacity,
            live,
        })
    }

    /// The hash modulus.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

impl KeyChooser for ScrambledZipfian {
    #[inline]
    fn next(&mut self, rng: &mut WorkloadRng) -> u64 {
        let mut hash = 0;
        for _ in 0..MAX_REJECTIONS {
            hash = fnv1a64(self.zipf.next(rng));
            let key = hash % self.capacity;
            if key < self.live {
                return key;
            }
        }
        hash % self.live
    }

    fn item_count(&self) -> u64 {
        self.live
    }

    /// Moves the live boundary; past the capacity, the capacity grows with it (which
    /// reshuffles the hot set, so size the capacity generously).
    fn set_item_count(&mut self, items: u64) {
        self.live = items.max(1);
        self.capacity = self.capacity.max(self.live);
    }
}
