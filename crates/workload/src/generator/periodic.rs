//! Keys with their own write rhythm: each key belongs to a class with a fixed period, and
//! the next key drawn is the one whose turn comes first.
//!
//! A scrambled Zipfian draws every op independently, so the time to a key's next write is
//! memoryless: a key's previous interval says nothing about its next one beyond the key's
//! rate. Real write streams have rhythm (a sensor reporting every minute, a session
//! refreshed on each request, a table rewritten nightly), and that is the structure a
//! lifetime predictor built on a key's history can learn. This chooser produces it.
//!
//! Each key number belongs to one of [`CLASSES`] by a hash of the number (so a key keeps
//! its class for the whole run, and classes are spread over the key space). A class holds
//! a share `k` of the keys and receives a share `w` of the draws, so each of its keys comes
//! up every `P = k * n / w` draws (`n` keys in all; `k * n` is the class's actual size in
//! the key space at construction): over all keys these rates add up to one key per draw. A class with `w = 0` is never drawn (its keys keep their loaded
//! value). The keys wait in a min-heap by due time; a draw pops the earliest, answers it,
//! and puts it back due `P * (1 + jitter * (2u - 1))` later, u uniform in [0, 1). Initial
//! due times are spread uniformly over one period by a hash of the key, so the run does not
//! start with every key due at once.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use super::{DistributionError, KeyChooser};
use crate::rng::{mix64, WorkloadRng};

/// A class of keys that share a write period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyClass {
    pub name: &'static str,
    /// Share of the key space in this class.
    pub key_share: f64,
    /// Share of all draws that go to this class's keys.
    pub draw_share: f64,
}

/// The classes of [`Periodic`]. With `n` keys and `4n` draws (the write-intensive
/// workload's four updates per record), a hot key is written about 160 times (every
/// n/40 draws), a warm one about 18 times (every 0.225n), a cool one two or three times
/// (every 1.5n), and a cold one never after the load.
pub const CLASSES: [KeyClass; 4] = [
    KeyClass {
        name: "hot",
        key_share: 0.01,
        draw_share: 0.40,
    },
    KeyClass {
        name: "warm",
        key_share: 0.09,
        draw_share: 0.40,
    },
    KeyClass {
        name: "cool",
        key_share: 0.30,
        draw_share: 0.20,
    },
    KeyClass {
        name: "cold",
        key_share: 0.60,
        draw_share: 0.0,
    },
];

/// Default relative jitter of a key's period.
pub const DEFAULT_JITTER: f64 = 0.25;

/// Salts the hashes that pick a key's class and its first due time, so the two are
/// independent of each other and of the key bytes (which hash the key number with FNV).
const CLASS_SALT: u64 = 0x636c_6173_7365_7321;
const PHASE_SALT: u64 = 0x7068_6173_6573_2121;

/// A due time in draws. Due times are finite and non-negative, so `total_cmp` orders them
/// as numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Due(f64);

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The periodic chooser (see the module documentation).
#[derive(Debug, Clone)]
pub struct Periodic {
    /// (due time, key), earliest first; keys of classes that are never drawn are absent.
    heap: BinaryHeap<Reverse<(Due, u64)>>,
    /// Period of each class of [`CLASSES`] in draws (infinite for a class never drawn).
    periods: [f64; CLASSES.len()],
    jitter: f64,
    live: u64,
}

/// Checks a jitter: in [0, 1), so a period never shrinks to zero.
pub(crate) fn check_jitter(jitter: f64) -> Result<(), DistributionError> {
    if (0.0..1.0).contains(&jitter) {
        Ok(())
    } else {
        Err(DistributionError::JitterOutOfRange(jitter))
    }
}

/// A uniform number in [0, 1) from a hash of `key` under `salt`.
fn unit_hash(key: u64, salt: u64) -> f64 {
    (mix64(key ^ salt) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The index in [`CLASSES`] of `key`'s class.
pub fn class_of(key: u64) -> usize {
    let u = unit_hash(key, CLASS_SALT);
    let mut acc = 0.0;
    for (i, c) in CLASSES.iter().enumerate() {
        acc += c.key_share;
        if u < acc {
            return i;
        }
    }
    CLASSES.len() - 1
}

impl Periodic {
    /// Keys `0..items`, each with the period of its class, periods `jitter`-randomized.
    pub fn new(items: u64, jitter: f64) -> Result<Self, DistributionError> {
        check_jitter(jitter)?;
        if items == 0 {
            return Err(DistributionError::EmptyKeySpace);
        }
        // Periods from the classes' actual sizes (the hash splits the keys only about
        // as the shares say), so the draw shares come out as specified.
        let mut sizes = [0u64; CLASSES.len()];
        for key in 0..items {
            sizes[class_of(key)] += 1;
        }
        let periods = std::array::from_fn(|c| {
            if CLASSES[c].draw_share > 0.0 && sizes[c] > 0 {
                sizes[c] as f64 / CLASSES[c].draw_share
            } else {
                f64::INFINITY
            }
        });
        let mut p = Self {
            heap: BinaryHeap::new(),
            periods,
            jitter,
            live: 0,
        };
        p.add_keys(0, items, 0.0);
        Ok(p)
    }

    /// The period in draws of `key`'s class.
    pub fn period(&self, key: u64) -> f64 {
        self.periods[class_of(key)]
    }

    /// Schedules keys `from..to`, first due somewhere in the period after `now`.
    fn add_keys(&mut self, from: u64, to: u64, now: f64) {
        for key in from..to {
            let p = self.period(key);
            if p.is_finite() {
                let due = now + p * unit_hash(key, PHASE_SALT);
                self.heap.push(Reverse((Due(due), key)));
            }
        }
        self.live = self.live.max(to);
    }
}

impl KeyChooser for Periodic {
    fn next(&mut self, rng: &mut WorkloadRng) -> u64 {
        // Keys above a lowered live count are passed over; one round through the heap
        // finds a live key if there is one.
        for _ in 0..self.heap.len() {
            let Reverse((Due(due), key)) = self.heap.pop().expect("non-empty heap");
            let stretch = 1.0 + self.jitter * (2.0 * rng.next_f64() - 1.0);
            let next = due + self.period(key) * stretch;
            self.heap.push(Reverse((Due(next), key)));
            if key < self.live {
                return key;
            }
        }
        // No live key is ever drawn (a tiny key space, all cold): any key will do.
        rng.below(self.live)
    }

    fn item_count(&self) -> u64 {
        self.live
    }

    /// New keys join their class's rhythm from the current time on. A smaller count leaves
    /// the keys above it scheduled but never answered, until the count grows past them.
    fn set_item_count(&mut self, items: u64) {
        let items = items.max(1);
        if items > self.live {
            let now = self.heap.peek().map_or(0.0, |Reverse((Due(d), _))| *d);
            self.add_keys(self.live, items, now);
        } else {
            self.live = items;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_shares_add_up_and_keys_split_by_them() {
        let keys: f64 = CLASSES.iter().map(|c| c.key_share).sum();
        let draws: f64 = CLASSES.iter().map(|c| c.draw_share).sum();
        assert!((keys - 1.0).abs() < 1e-12 && (draws - 1.0).abs() < 1e-12);
        let n = 100_000;
        let mut count = [0u64; CLASSES.len()];
        for k in 0..n {
            count[class_of(k)] += 1;
        }
        for (c, got) in CLASSES.iter().zip(count) {
            let share = got as f64 / n as f64;
            assert!((share - c.key_share).abs() < 0.005, "{}: {share}", c.name);
        }
    }

    #[test]
    fn each_class_gets_its_share_of_draws_and_keeps_its_rhythm() {
        let n = 20_000u64;
        let draws = 4 * n;
        let mut p = Periodic::new(n, DEFAULT_JITTER).unwrap();
        let mut rng = WorkloadRng::new(9);
        let mut per_class = [0u64; CLASSES.len()];
        let mut last: Vec<Option<u64>> = vec![None; n as usize];
        // Per class: sum and count of |interval / period - 1|.
        let mut dev = [(0.0f64, 0u64); CLASSES.len()];
        for i in 0..draws {
            let k = p.next(&mut rng);
            let c = class_of(k);
            per_class[c] += 1;
            if let Some(prev) = last[k as usize] {
                let rel = (i - prev) as f64 / p.period(k);
                dev[c].0 += (rel - 1.0).abs();
                dev[c].1 += 1;
            }
            last[k as usize] = Some(i);
        }
        for (i, c) in CLASSES.iter().enumerate() {
            let share = per_class[i] as f64 / draws as f64;
            assert!(
                (share - c.draw_share).abs() < 0.02,
                "{}: {share} of draws",
                c.name
            );
        }
        assert_eq!(per_class[3], 0, "cold keys are never drawn");
        // Intervals of hot and warm keys stay within the jitter of their period (mean
        // absolute deviation of a uniform +-25% is 12.5%; allow for the heap's queueing).
        // A memoryless chooser at the same rate would give a mean deviation near 0.74.
        for c in [0, 1] {
            let mean = dev[c].0 / dev[c].1 as f64;
            assert!(mean < 0.2, "{}: mean deviation {mean}", CLASSES[c].name);
        }
    }

    #[test]
    fn deterministic_and_within_the_live_range() {
        let run = |seed| {
            let mut p = Periodic::new(1000, 0.1).unwrap();
            let mut rng = WorkloadRng::new(seed);
            (0..5000).map(|_| p.next(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        assert!(run(3).iter().all(|&k| k < 1000));
    }

    #[test]
    fn inserted_keys_join_and_a_lower_count_is_respected() {
        let mut p = Periodic::new(100, 0.0).unwrap();
        let mut rng = WorkloadRng::new(4);
        p.set_item_count(10_000);
        assert!((0..50_000).any(|_| p.next(&mut rng) >= 100));
        p.set_item_count(50);
        assert_eq!(p.item_count(), 50);
        assert!((0..10_000).all(|_| p.next(&mut rng) < 50));
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert_eq!(
            Periodic::new(10, 1.0).err(),
            Some(DistributionError::JitterOutOfRange(1.0))
        );
        assert!(Periodic::new(10, -0.1).is_err());
        assert!(Periodic::new(10, f64::NAN).is_err());
        assert_eq!(
            Periodic::new(0, 0.1).err(),
            Some(DistributionError::EmptyKeySpace)
        );
        // A single key, cold by its hash or not, still gets an answer.
        let mut p = Periodic::new(1, 0.1).unwrap();
        assert_eq!(p.next(&mut WorkloadRng::new(1)), 0);
    }
}
