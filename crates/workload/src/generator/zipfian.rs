//! The Zipfian generator of Gray et al. ("Quickly generating billion-record synthetic
//! databases", SIGMOD 1994), in the form YCSB's `ZipfianGenerator` uses.
//!
//! Item i (0-based) has probability (1/(i+1)^theta) / zeta(n). The sampler is one uniform
//! draw u and a closed form that is exact for items 0 and 1 and a continuous approximation
//! for the rest:
//!
//! ```text
//! alpha = 1 / (1 - theta)
//! eta   = (1 - (2/n)^(1 - theta)) / (1 - zeta(2)/zeta(n))
//! uz = u · zeta(n)
//! uz < 1              -> 0
//! uz < 1 + 0.5^theta  -> 1
//! otherwise           -> floor(n · (eta·u - eta + 1)^alpha)
//! ```
//!
//! This needs theta < 1. Growing the item count (inserts) extends zeta(n) by the new terms
//! only, so a run with many inserts stays O(1) per insert.

use super::zeta::{zeta, zeta_range, EXACT_LIMIT};
use super::{DistributionError, KeyChooser};
use crate::rng::WorkloadRng;

/// A Zipfian distribution over items `0..n`, item 0 the most popular.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
    /// 1 + 0.5^theta: the bound of uz below which the draw is item 1.
    second_bound: f64,
}

impl Zipfian {
    /// A Zipfian over `0..items` with exponent `theta` in `[0, 1)`.
    pub fn new(items: u64, theta: f64) -> Result<Self, DistributionError> {
        check_theta(theta)?;
        if items == 0 {
            return Err(DistributionError::EmptyKeySpace);
        }
        Ok(Self::with_zeta(items, theta, zeta(items, theta)))
    }

    /// Like [`Zipfian::new`] with a precomputed zeta(items, theta) (the caller vouches for it).
    pub(crate) fn with_zeta(items: u64, theta: f64, zetan: f64) -> Self {
        let mut z = Self {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2: zeta(2, theta),
            zetan,
            eta: 0.0,
            second_bound: 1.0 + 0.5f64.powf(theta),
        };
        z.eta = z.compute_eta();
        z
    }

    fn compute_eta(&self) -> f64 {
        // For n <= 2 this is 0/0 or unused: every draw lands in the two exact branches.
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// The Zipfian exponent.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// zeta(n, theta) for the current item count.
    pub fn zeta(&self) -> f64 {
        self.zetan
    }

    /// Theoretical probability of item `i` (0-based); used by tests and by callers that want
    /// to compare an observed histogram against the model.
    pub fn probability(&self, i: u64) -> f64 {
        if i >= self.items {
            0.0
        } else {
            ((i + 1) as f64).powf(-self.theta) / self.zetan
        }
    }

    /// Maps a uniform `u` in `[0, 1)` to an item: the whole sampler as a pure function.
    #[inline]
    pub fn sample(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.second_bound {
            return 1;
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        // Rounding can land exactly on n for u near 1; the float-to-int cast saturates.
        v.min(self.items - 1)
    }
}

impl KeyChooser for Zipfian {
    #[inline]
    fn next(&mut self, rng: &mut WorkloadRng) -> u64 {
        self.sample(rng.next_f64())
    }

    fn item_count(&self) -> u64 {
        self.items
    }

    /// Growth adds only the new zeta terms (exactly, as YCSB does); a jump larger than
    /// [`EXACT_LIMIT`] or a shrink recomputes zeta from scratch.
    fn set_item_count(&mut self, items: u64) {
        let items = items.max(1);
        if items == self.items {
            return;
        }
        self.zetan = if items > self.items && items - self.items <= EXACT_LIMIT {
            self.zetan + zeta_range(self.items, items, self.theta)
        } else {
            zeta(items, self.theta)
        };
        self.items = items;
        self.eta = self.compute_eta();
    }
}

pub(crate) fn check_theta(theta: f64) -> Result<(), DistributionError> {
    if (0.0..1.0).contains(&theta) {
        Ok(())
    } else {
        Err(DistributionError::ThetaOutOfRange(theta))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(z: &mut Zipfian, draws: u32, seed: u64) -> Vec<u32> {
        let mut rng = WorkloadRng::new(seed);
        let mut h = vec![0u32; z.item_count() as usize];
        for _ in 0..draws {
            h[z.next(&mut rng) as usize] += 1;
        }
        h
    }

    #[test]
    fn head_frequencies_match_theory() {
        let draws = 1_000_000;
        for theta in [0.2, 0.5, 0.9, 0.99] {
            let mut z = Zipfian::new(1000, theta).unwrap();
            let h = histogram(&mut z, draws, 1);
            for item in [0u64, 1] {
                let p = z.probability(item);
                let expected = 1.0 / ((item + 1) as f64).powf(theta) / zeta(1000, theta);
                assert!((p - expected).abs() < 1e-15);
                let observed = f64::from(h[item as usize]) / f64::from(draws);
                // Five binomial standard deviations.
                let tol = 5.0 * (p * (1.0 - p) / f64::from(draws)).sqrt();
                assert!(
                    (observed - p).abs() < tol,
                    "theta {theta} item {item}: observed {observed} expected {p}"
                );
            }
        }
    }

    #[test]
    fn skew_orders_popularity() {
        let mut z = Zipfian::new(1000, 0.99).unwrap();
        let h = histogram(&mut z, 200_000, 2);
        let top10: u32 = h[..10].iter().sum();
        let last100: u32 = h[900..].iter().sum();
        assert!(top10 > 5 * last100, "top10 {top10} last100 {last100}");
        assert!(h[0] > h[1] && h[1] > h[3] && h[3] > h[20]);
    }

    #[test]
    fn theta_zero_is_uniform() {
        let mut z = Zipfian::new(10, 0.0).unwrap();
        let h = histogram(&mut z, 100_000, 3);
        for c in h {
            assert!((9_000..11_000).contains(&c), "{c}");
        }
    }

    #[test]
    fn stays_in_range_including_edges() {
        for n in [1, 2, 3, 17] {
            let z = Zipfian::new(n, 0.99).unwrap();
            for u in [0.0, 1e-9, 0.5, 0.999_999, 1.0 - f64::EPSILON] {
                assert!(z.sample(u) < n, "n {n} u {u}");
            }
        }
        let z = Zipfian::new(5, 0.5).unwrap();
        assert_eq!(z.sample(0.0), 0);
        assert_eq!(z.sample(1.0 - f64::EPSILON), 4);
    }

    #[test]
    fn growth_matches_fresh_construction() {
        let mut grown = Zipfian::new(10, 0.9).unwrap();
        for n in 11..=5000 {
            grown.set_item_count(n);
        }
        let fresh = Zipfian::new(5000, 0.9).unwrap();
        assert!((grown.zeta() - fresh.zeta()).abs() < 1e-9);
        assert!((grown.eta - fresh.eta).abs() < 1e-12);
        for u in [0.1, 0.3, 0.77, 0.95] {
            assert_eq!(grown.sample(u), fresh.sample(u));
        }
        // A big jump goes through the Euler-Maclaurin path and still agrees.
        grown.set_item_count(5_000_000);
        let exact = zeta_range(0, 5_000_000, 0.9);
        assert!((grown.zeta() - exact).abs() / exact < 1e-12);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(
            Zipfian::new(10, 1.0),
            Err(DistributionError::ThetaOutOfRange(_))
        ));
        assert!(Zipfian::new(10, -0.1).is_err());
        assert!(Zipfian::new(10, f64::NAN).is_err());
        assert!(matches!(
            Zipfian::new(0, 0.5),
            Err(DistributionError::EmptyKeySpace)
        ));
    }
}
