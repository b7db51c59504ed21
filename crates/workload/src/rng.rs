//! The workload's random number generator and the two hash functions the crate shares.
//!
//! A workload must be reproducible from its seed across machines and across upgrades of the
//! `rand` crate, whose own small generators are explicitly not value-stable between
//! versions. So the crate carries its own generator, xoshiro256** (Blackman and Vigna),
//! seeded through SplitMix64, and derives floats and bounded integers from it with fixed
//! rules. [`WorkloadRng`] still implements [`rand::RngCore`] and [`rand::SeedableRng`], so
//! callers can use `rand`'s distributions on it when exact stability does not matter.

use rand::rand_core::impls;
use rand::{RngCore, SeedableRng};

/// FNV-1a 64-bit offset basis.
const FNV_OFFSET_BASIS: u64 = 0xCBF2_9CE4_8422_2325;
/// FNV 64-bit prime (2^40 + 2^8 + 0xb3).
const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

/// FNV-1a 64 over the eight little-endian bytes of `v`.
///
/// This is YCSB's `fnvhash64` (xor the low octet, multiply, shift right by 8, eight times),
/// except that YCSB then takes `Math.abs` of the signed result; halflife keeps the full
/// unsigned value. It scatters key numbers for the hashed insert order ([`crate::keys`]) and
/// for [`crate::generator::ScrambledZipfian`].
#[inline]
pub fn fnv1a64(v: u64) -> u64 {
    fnv1a64_bytes(&v.to_le_bytes())
}

/// FNV-1a 64 over arbitrary bytes (used to pin [`fnv1a64`] to the published test vectors).
#[inline]
pub(crate) fn fnv1a64_bytes(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The SplitMix64 output function: a cheap bijective 64-bit mixer.
#[inline]
pub(crate) fn mix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256**: fast, 256 bits of state, good statistical quality, and a fixed output
/// sequence for a seed (the point of having it here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadRng {
    s: [u64; 4],
}

impl WorkloadRng {
    /// Seeds the four state words from successive SplitMix64 outputs of `seed`, as the
    /// xoshiro authors recommend; this never yields the forbidden all-zero state in practice.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            mix64(x)
        };
        Self {
            s: [next(), next(), next(), next()],
        }
    }

    /// Builds a generator from a raw state; all-zero is replaced because it is a fixed point.
    pub fn from_state(s: [u64; 4]) -> Self {
        if s == [0; 4] {
            Self::new(0)
        } else {
            Self { s }
        }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform double in `[0, 1)`: the top 53 bits scaled by 2^-53, so every value is an
    /// exact multiple of 2^-53 and 1.0 is never returned.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `0..n` without modulo bias (Lemire's multiply-and-reject).
    ///
    /// # Panics
    /// If `n == 0`, which has no valid answer.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "WorkloadRng::below(0)");
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            // Reject the few low products that would over-represent some outputs.
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }
}

impl RngCore for WorkloadRng {
    fn next_u32(&mut self) -> u32 {
        (WorkloadRng::next_u64(self) >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        WorkloadRng::next_u64(self)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        impls::fill_bytes_via_next(self, dst)
    }
}

impl SeedableRng for WorkloadRng {
    type Seed = [u8; 32];

    fn from_seed(seed: [u8; 32]) -> Self {
        let mut s = [0u64; 4];
        for (word, chunk) in s.iter_mut().zip(seed.chunks_exact(8)) {
            *word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        }
        Self::from_state(s)
    }

    fn seed_from_u64(seed: u64) -> Self {
        Self::new(seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_published_vectors() {
        // Test vectors from the FNV reference (Landon Curt Noll's test suite).
        assert_eq!(fnv1a64_bytes(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64_bytes(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64_bytes(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(fnv1a64(0x0102), fnv1a64_bytes(&[2, 1, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn xoshiro_matches_reference_sequence() {
        // First outputs of the reference C implementation from state {1, 2, 3, 4}.
        let mut rng = WorkloadRng::from_state([1, 2, 3, 4]);
        let got: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
        assert_eq!(got, [11520, 0, 1509978240, 1215971899390074240]);
    }

    #[test]
    fn seeding_is_deterministic_and_seed_sensitive() {
        let a: Vec<u64> = {
            let mut r = WorkloadRng::new(42);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = WorkloadRng::seed_from_u64(42);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = WorkloadRng::new(43);
            (0..8).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn floats_are_in_unit_interval_and_centered() {
        let mut rng = WorkloadRng::new(7);
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let u = rng.next_f64();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        let mean = sum / f64::from(n);
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    }

    #[test]
    fn below_is_bounded_and_roughly_uniform() {
        let mut rng = WorkloadRng::new(9);
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[rng.below(7) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(rng.below(1), 0);
        // Bounds near 2^64 exercise the rejection path.
        let big = u64::MAX - 3;
        for _ in 0..1000 {
            assert!(rng.below(big) < big);
        }
    }
}
