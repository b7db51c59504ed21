//! Key choosers: which key number a read, update or scan touches next.
//!
//! Every chooser draws from a [`WorkloadRng`] handed in by the caller, so one seeded generator
//! drives a whole run and the op stream is a pure function of the seed. The key space is
//! `0..item_count`; a workload with inserts widens it through
//! [`KeyChooser::set_item_count`], which is how new keys become eligible and how
//! [`Latest`] learns which key is newest.
//!
//! [`Distribution`] is the serializable, parseable name of a chooser
//! (`"uniform"`, `"zipfian:0.9"`, `"scrambled:0.99"`, `"latest"`, `"periodic:0.25"`), and
//! [`Distribution::chooser`] builds one.

mod latest;
pub mod periodic;
mod scrambled;
mod uniform;
pub mod zeta;
mod zipfian;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::rng::WorkloadRng;

pub use latest::Latest;
pub use periodic::Periodic;
pub use scrambled::{ScrambledZipfian, SCRAMBLED_ITEMS, SCRAMBLED_ZETA_099};
pub use uniform::Uniform;
pub use zipfian::Zipfian;

/// YCSB's default Zipfian exponent, used when a distribution string gives none.
pub const DEFAULT_THETA: f64 = 0.99;

/// Chooses key numbers in `0..item_count()`.
pub trait KeyChooser {
    /// The next key number.
    fn next(&mut self, rng: &mut WorkloadRng) -> u64;

    /// The number of live keys: draws are in `0..item_count()`.
    fn item_count(&self) -> u64;

    /// Announces that keys `0..items` now exist (called after each insert). A count of zero
    /// is treated as one, since a chooser must always have an answer.
    fn set_item_count(&mut self, items: u64);
}

impl<C: KeyChooser + ?Sized> KeyChooser for Box<C> {
    #[inline]
    fn next(&mut self, rng: &mut WorkloadRng) -> u64 {
        (**self).next(rng)
    }
    fn item_count(&self) -> u64 {
        (**self).item_count()
    }
    fn set_item_count(&mut self, items: u64) {
        (**self).set_item_count(items)
    }
}

/// What went wrong building a chooser or parsing a distribution name.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DistributionError {
    #[error(
        "unknown distribution {0:?}: expected uniform, zipfian[:theta], scrambled[:theta], latest[:theta] or periodic[:jitter]"
    )]
    Unknown(String),
    #[error("distribution {0:?}: its parameter is not a number")]
    BadParameter(String),
    #[error("uniform takes no parameter, got {0:?}")]
    UnexpectedParameter(String),
    #[error("zipfian theta must be in [0, 1), got {0}")]
    ThetaOutOfRange(f64),
    #[error("periodic jitter must be in [0, 1), got {0}")]
    JitterOutOfRange(f64),
    #[error("a key chooser needs at least one key")]
    EmptyKeySpace,
}

/// A request distribution by name. Serializes as its string form.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Distribution {
    /// Every live key equally likely.
    Uniform,
    /// Zipfian by key number: key 0 hottest ([`Zipfian`]).
    Zipfian { theta: f64 },
    /// Zipfian with the hot keys hashed over the key space ([`ScrambledZipfian`]); this is
    /// what YCSB means by `requestdistribution=zipfian`.
    Scrambled { theta: f64 },
    /// Zipfian by recency: the newest key hottest ([`Latest`]).
    Latest { theta: f64 },
    /// Each key in a class with its own write period, the next key the one whose turn
    /// comes first; periods vary by a relative `jitter` ([`Periodic`]).
    Periodic { jitter: f64 },
}

impl Distribution {
    /// The Zipfian exponent, if the distribution has one.
    pub fn theta(&self) -> Option<f64> {
        match *self {
            Distribution::Uniform | Distribution::Periodic { .. } => None,
            Distribution::Zipfian { theta }
            | Distribution::Scrambled { theta }
            | Distribution::Latest { theta } => Some(theta),
        }
    }

    /// Checks the parameters without building anything.
    pub fn validate(&self) -> Result<(), DistributionError> {
        match (self, self.theta()) {
            (Distribution::Periodic { jitter }, _) => periodic::check_jitter(*jitter),
            (_, Some(theta)) => zipfian::check_theta(theta),
            (_, None) => Ok(()),
        }
    }

    /// A chooser over keys `0..n`, all live.
    pub fn chooser(&self, n: u64) -> Result<Box<dyn KeyChooser + Send>, DistributionError> {
        self.chooser_with_capacity(n, n)
    }

    /// A chooser over `0..n` live keys that expects the key space to grow to about
    /// `capacity`. Only [`ScrambledZipfian`] uses the capacity (as its hash modulus, so the
    /// hot set stays put while keys are inserted); the others grow exactly with inserts.
    pub fn chooser_with_capacity(
        &self,
        n: u64,
        capacity: u64,
    ) -> Result<Box<dyn KeyChooser + Send>, DistributionError> {
        Ok(match *self {
            Distribution::Uniform => Box::new(Uniform::new(n)?),
            Distribution::Zipfian { theta } => Box::new(Zipfian::new(n, theta)?),
            Distribution::Scrambled { theta } => {
                Box::new(ScrambledZipfian::with_capacity(n, capacity, theta)?)
            }
            Distribution::Latest { theta } => Box::new(Latest::new(n, theta)?),
            Distribution::Periodic { jitter } => Box::new(Periodic::new(n, jitter)?),
        })
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Uniform => f.write_str("uniform"),
            Distribution::Zipfian { theta } => write!(f, "zipfian:{theta}"),
            Distribution::Scrambled { theta } => write!(f, "scrambled:{theta}"),
            Distribution::Latest { theta } => write!(f, "latest:{theta}"),
            Distribution::Periodic { jitter } => write!(f, "periodic:{jitter}"),
        }
    }
}

impl FromStr for Distribution {
    type Err = DistributionError;

    /// `name[:param]`, case-insensitive, surrounding whitespace ignored. The parameter is
    /// theta for the Zipfians (default [`DEFAULT_THETA`]) and the jitter for `periodic`
    /// (default [`periodic::DEFAULT_JITTER`]). `scrambled_zipfian` is accepted as an alias
    /// of `scrambled`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim().to_ascii_lowercase();
        let (name, param) = match trimmed.split_once(':') {
            Some((name, param)) => (name.trim(), Some(param.trim())),
            None => (trimmed.as_str(), None),
        };
        let value = match param {
            None => None,
            Some(p) => Some(
                p.parse::<f64>()
                    .map_err(|_| DistributionError::BadParameter(s.to_string()))?,
            ),
        };
        let theta = value.unwrap_or(DEFAULT_THETA);
        let dist = match name {
            "uniform" if param.is_some() => {
                return Err(DistributionError::UnexpectedParameter(s.to_string()))
            }
            "uniform" => Distribution::Uniform,
            "zipfian" => Distribution::Zipfian { theta },
            "scrambled" | "scrambled_zipfian" => Distribution::Scrambled { theta },
            "latest" => Distribution::Latest { theta },
            "periodic" => Distribution::Periodic {
                jitter: value.unwrap_or(periodic::DEFAULT_JITTER),
            },
            _ => return Err(DistributionError::Unknown(s.to_string())),
        };
        dist.validate()?;
        Ok(dist)
    }
}

impl TryFrom<String> for Distribution {
    type Error = DistributionError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Distribution> for String {
    fn from(d: Distribution) -> String {
        d.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(dist: &str, n: u64, count: usize, seed: u64) -> Vec<u64> {
        let d: Distribution = dist.parse().unwrap();
        let mut c = d.chooser(n).unwrap();
        let mut rng = WorkloadRng::new(seed);
        (0..count).map(|_| c.next(&mut rng)).collect()
    }

    #[test]
    fn parses_and_round_trips() {
        let cases = [
            ("uniform", Distribution::Uniform),
            ("zipfian", Distribution::Zipfian { theta: 0.99 }),
            ("zipfian:0.2", Distribution::Zipfian { theta: 0.2 }),
            (" Scrambled:0.5 ", Distribution::Scrambled { theta: 0.5 }),
            ("scrambled_zipfian", Distribution::Scrambled { theta: 0.99 }),
            ("latest", Distribution::Latest { theta: 0.99 }),
            ("latest:0.9", Distribution::Latest { theta: 0.9 }),
            ("periodic", Distribution::Periodic { jitter: 0.25 }),
            ("Periodic:0.1", Distribution::Periodic { jitter: 0.1 }),
        ];
        for (s, want) in cases {
            let got: Distribution = s.parse().unwrap();
            assert_eq!(got, want, "{s}");
            assert_eq!(got.to_string().parse::<Distribution>().unwrap(), got);
        }
        let json = serde_json::to_string(&Distribution::Scrambled { theta: 0.9 }).unwrap();
        assert_eq!(json, "\"scrambled:0.9\"");
        assert_eq!(
            serde_json::from_str::<Distribution>(&json).unwrap(),
            Distribution::Scrambled { theta: 0.9 }
        );
        assert!(serde_json::from_str::<Distribution>("\"zipfian:2\"").is_err());
    }

    #[test]
    fn rejects_bad_strings_with_typed_errors() {
        let err = |s: &str| s.parse::<Distribution>().unwrap_err();
        assert!(matches!(err("hotspot"), DistributionError::Unknown(_)));
        assert!(matches!(err(""), DistributionError::Unknown(_)));
        assert!(matches!(
            err("zipfian:abc"),
            DistributionError::BadParameter(_)
        ));
        assert!(matches!(
            err("zipfian:"),
            DistributionError::BadParameter(_)
        ));
        assert!(matches!(
            err("uniform:0.5"),
            DistributionError::UnexpectedParameter(_)
        ));
        assert_eq!(err("zipfian:1"), DistributionError::ThetaOutOfRange(1.0));
        assert!(matches!(
            err("latest:-0.5"),
            DistributionError::ThetaOutOfRange(_)
        ));
        assert!(matches!(
            err("zipfian:nan"),
            DistributionError::ThetaOutOfRange(_)
        ));
        assert_eq!(err("periodic:1"), DistributionError::JitterOutOfRange(1.0));
        assert!(matches!(
            err("periodic:x"),
            DistributionError::BadParameter(_)
        ));
        assert!(matches!(
            Distribution::Uniform.chooser(0).err(),
            Some(DistributionError::EmptyKeySpace)
        ));
    }

    #[test]
    fn every_chooser_is_deterministic_for_a_seed() {
        for d in [
            "uniform",
            "zipfian:0.5",
            "scrambled:0.99",
            "scrambled:0.2",
            "latest",
            "periodic",
        ] {
            let a = draws(d, 10_000, 1000, 11);
            assert_eq!(a, draws(d, 10_000, 1000, 11), "{d}");
            assert_ne!(a, draws(d, 10_000, 1000, 12), "{d}");
            assert!(a.iter().all(|&k| k < 10_000), "{d}");
        }
    }

    #[test]
    fn scrambled_covers_the_key_space() {
        let n = 1000;
        for theta in [0.5, 0.99] {
            let mut seen = vec![false; n as usize];
            let mut count_low_half = 0;
            for k in draws(&format!("scrambled:{theta}"), n, 200_000, 5) {
                seen[k as usize] = true;
                count_low_half += usize::from(k < n / 2);
            }
            let covered = seen.iter().filter(|&&s| s).count();
            assert!(covered > 950, "theta {theta}: covered {covered}");
            // Hot keys are spread out, not clustered at the low key numbers.
            assert!(
                (60_000..140_000).contains(&count_low_half),
                "{count_low_half}"
            );
        }
    }

    #[test]
    fn scrambled_is_skewed() {
        let mut h = vec![0u32; 1000];
        for k in draws("scrambled:0.99", 1000, 100_000, 6) {
            h[k as usize] += 1;
        }
        h.sort_unstable_by(|a, b| b.cmp(a));
        let top10: u32 = h[..10].iter().sum();
        // Uniform would give 1% to any ten keys.
        assert!(top10 > 10_000, "top10 {top10}");
    }

    #[test]
    fn scrambled_respects_live_count() {
        let mut c = Distribution::Scrambled { theta: 0.99 }
            .chooser_with_capacity(100, 1000)
            .unwrap();
        let mut rng = WorkloadRng::new(1);
        assert!((0..10_000).all(|_| c.next(&mut rng) < 100));
        c.set_item_count(1000);
        assert!((0..10_000).any(|_| c.next(&mut rng) >= 900));
        // Even a single live key in a huge capacity answers.
        let mut c = ScrambledZipfian::with_capacity(1, 1 << 40, 0.99).unwrap();
        assert_eq!(c.next(&mut rng), 0);
    }

    #[test]
    fn latest_favours_recent_keys() {
        let mut c = Distribution::Latest { theta: 0.99 }.chooser(1000).unwrap();
        let mut rng = WorkloadRng::new(3);
        // The ten newest keys carry zeta(10)/zeta(1000) of the mass (~39%), not 1%.
        let recent = (0..10_000).filter(|_| c.next(&mut rng) >= 990).count() as f64 / 1e4;
        let expected = zeta::zeta(10, 0.99) / zeta::zeta(1000, 0.99);
        assert!(
            (recent - expected).abs() < 0.03,
            "recent {recent} expected {expected}"
        );
        // After inserts the newest key becomes the hottest.
        c.set_item_count(2000);
        let mut h = vec![0u32; 2000];
        for _ in 0..50_000 {
            h[c.next(&mut rng) as usize] += 1;
        }
        let hottest = (0..2000).max_by_key(|&i| h[i]).unwrap();
        assert_eq!(hottest, 1999);
        assert!(h[1000..].iter().sum::<u32>() > 4 * h[..1000].iter().sum::<u32>());
    }
}
