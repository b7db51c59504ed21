//! Key and value bytes for a key number. Drivers in other languages reproduce these rules
//! byte for byte, so they are spelled out here exactly.
//!
//! # Keys: `format_key(keynum, key_size)`
//!
//! `fnv1a64(k)` is FNV-1a 64 over the 8 little-endian bytes of `k`: start from
//! `h = 0xcbf29ce484222325`; for each byte b, `h = (h XOR b) * 0x100000001b3 mod 2^64`.
//!
//! - `key_size >= 24`: `b"user"`, then `fnv1a64(keynum)` as an unsigned decimal zero-padded
//!   to 20 digits, then `b'x'` repeated `key_size - 24` times. Keynum 0 is
//!   `user12161962213042174405`, keynum 1 is `user09929646806074584996`. This is YCSB's
//!   `insertorder=hashed`: keys are loaded in key-number order but land all over the sorted
//!   key space. (YCSB itself prints `Math.abs` of the signed hash without padding; the fixed
//!   width here makes every key the same length.)
//! - `key_size < 24`: the 20 hash digits do not fit, and truncating them would make keys
//!   collide. Instead, with `d = key_size - 4`: `b"user"`, then the `d` lowest decimal digits
//!   of `keynum` itself (zero-padded to `d`) written in reverse, least significant digit
//!   first. Keynum 123 at `key_size` 12 is `user32100000`. Digit reversal is a bijection, so
//!   keys are unique for `keynum < 10^d`, and consecutive key numbers still land far apart in
//!   sorted order (keys 0..9 start with ten different digits). [`crate::spec::WorkloadSpec`]
//!   validation enforces `key_size >= 12` and that every key number of the workload fits.
//!   Below 5 bytes the key is just a prefix of `"user"` and not unique.
//!
//! # Values: [`ValueGen`]
//!
//! A value for `(keynum, version, size)` is
//!
//! - bytes 0..8: `keynum` as u64 little endian; bytes 8..16: `version` as u64 little endian
//!   (both cut off if `size < 16`). The header makes values of different versions differ,
//!   and lets a reader that got the wrong bytes say whose value it got.
//! - bytes 16..size: `pool[(offset + i) mod 2^20]` for `i = 0, 1, ...`, where `pool` is
//!   1 MiB of the [`WorkloadRng`] stream seeded with [`VALUE_SEED`] (each `next_u64` as 8
//!   little-endian bytes) and `offset = mix64(mix64(keynum) XOR version) mod 2^20`, with
//!   `mix64` the SplitMix64 finalizer
//!   (`z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27; z *= 0x94d049bb133111eb; z ^= z >> 31`).
//!
//! Copying from a pre-generated pool (as db_bench's `RandomGenerator` does) makes value
//! generation a memcpy rather than a random-number loop. The pool is random, so values are
//! incompressible; the experiments run with compression off, as in paper 000.

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use crate::rng::{fnv1a64, mix64, WorkloadRng};

/// The common key prefix.
pub const KEY_PREFIX: &[u8; 4] = b"user";

/// Key sizes from this size up use the hashed 20-digit form.
pub const HASHED_KEY_SIZE: usize = 24;

/// Size of the value pool ([`ValueGen`]).
pub const VALUE_POOL_SIZE: usize = 1 << 20;

/// Seed of the value pool.
pub const VALUE_SEED: u64 = 0x6861_6c66_6c69_6665; // "halflife"

/// Size of the `(keynum, version)` header at the start of every value.
pub const VALUE_HEADER_SIZE: usize = 16;

/// Writes the key for `keynum` into `out` (cleared first). See the module doc for the rule.
pub fn format_key(keynum: u64, key_size: usize, out: &mut Vec<u8>) {
    out.clear();
    out.reserve(key_size);
    if key_size >= HASHED_KEY_SIZE {
        out.extend_from_slice(KEY_PREFIX);
        push_decimal(fnv1a64(keynum), 20, out);
        out.resize(key_size, b'x');
    } else if key_size > KEY_PREFIX.len() {
        out.extend_from_slice(KEY_PREFIX);
        let mut k = keynum;
        for _ in 0..key_size - KEY_PREFIX.len() {
            out.push(b'0' + (k % 10) as u8);
            k /= 10;
        }
    } else {
        out.extend_from_slice(&KEY_PREFIX[..key_size]);
    }
}

/// The key for `keynum` as a new vector.
pub fn key(keynum: u64, key_size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(key_size);
    format_key(keynum, key_size, &mut out);
    out
}

/// How many distinct keys `key_size` can name (`None`: all of u64, up to hash collisions).
pub fn key_capacity(key_size: usize) -> Option<u64> {
    if key_size >= HASHED_KEY_SIZE {
        None
    } else {
        let digits = key_size.saturating_sub(KEY_PREFIX.len()) as u32;
        Some(10u64.pow(digits))
    }
}

fn push_decimal(mut v: u64, width: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + width, b'0');
    for slot in out[start..].iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
}

/// Deterministic value bytes for `(keynum, version)`; cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct ValueGen {
    pool: Arc<[u8]>,
}

impl fmt::Debug for ValueGen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValueGen")
            .field("pool_len", &self.pool.len())
            .finish()
    }
}

impl Default for ValueGen {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a value read back is not the one expected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueMismatch {
    #[error("value has {found} bytes, expected {expected}")]
    Length { expected: usize, found: usize },
    #[error("value differs from key {keynum} version {version} at byte {offset}{}", describe_header(*.found))]
    Content {
        keynum: u64,
        version: u64,
        /// First differing byte.
        offset: usize,
        /// The `(keynum, version)` header of the bytes found, if the value is long enough to
        /// carry one: tells a stale read (same key, older version) from a misdirected one.
        found: Option<(u64, u64)>,
    },
}

fn describe_header(found: Option<(u64, u64)>) -> String {
    match found {
        Some((k, v)) => format!("; it carries the header of key {k} version {v}"),
        None => String::new(),
    }
}

impl ValueGen {
    /// Generates the 1 MiB pool (about a millisecond).
    pub fn new() -> Self {
        let mut rng = WorkloadRng::new(VALUE_SEED);
        let mut pool = Vec::with_capacity(VALUE_POOL_SIZE);
        while pool.len() < VALUE_POOL_SIZE {
            pool.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        Self { pool: pool.into() }
    }

    fn offset(keynum: u64, version: u64) -> usize {
        (mix64(mix64(keynum) ^ version) as usize) & (VALUE_POOL_SIZE - 1)
    }

    /// Writes the value of `size` bytes for `(keynum, version)` into `out` (cleared first).
    pub fn fill(&self, keynum: u64, version: u64, size: usize, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(size);
        let header = Self::header(keynum, version);
        out.extend_from_slice(&header[..size.min(VALUE_HEADER_SIZE)]);
        let mut offset = Self::offset(keynum, version);
        while out.len() < size {
            let take = (size - out.len()).min(VALUE_POOL_SIZE - offset);
            out.extend_from_slice(&self.pool[offset..offset + take]);
            offset = 0;
        }
    }

    /// The value of `size` bytes for `(keynum, version)` as a new vector.
    pub fn expected(&self, keynum: u64, version: u64, size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        self.fill(keynum, version, size, &mut out);
        out
    }

    /// Checks that `value` is exactly the value of `size` bytes for `(keynum, version)`,
    /// without allocating.
    pub fn verify(
        &self,
        keynum: u64,
        version: u64,
        size: usize,
        value: &[u8],
    ) -> Result<(), ValueMismatch> {
        if value.len() != size {
            return Err(ValueMismatch::Length {
                expected: size,
                found: value.len(),
            });
        }
        let mismatch = |offset| ValueMismatch::Content {
            keynum,
            version,
            offset,
            found: Self::decode_header(value),
        };
        let header = Self::header(keynum, version);
        let head_len = size.min(VALUE_HEADER_SIZE);
        if let Some(i) = first_difference(&header[..head_len], &value[..head_len]) {
            return Err(mismatch(i));
        }
        let mut pos = head_len;
        let mut offset = Self::offset(keynum, version);
        while pos < size {
            let take = (size - pos).min(VALUE_POOL_SIZE - offset);
            let want = &self.pool[offset..offset + take];
            if let Some(i) = first_difference(want, &value[pos..pos + take]) {
                return Err(mismatch(pos + i));
            }
            pos += take;
            offset = 0;
        }
        Ok(())
    }

    /// The `(keynum, version)` a value claims to be, if it has a full header.
    pub fn decode_header(value: &[u8]) -> Option<(u64, u64)> {
        let k = value.get(0..8)?.try_into().ok()?;
        let v = value.get(8..16)?.try_into().ok()?;
        Some((u64::from_le_bytes(k), u64::from_le_bytes(v)))
    }

    fn header(keynum: u64, version: u64) -> [u8; VALUE_HEADER_SIZE] {
        let mut h = [0u8; VALUE_HEADER_SIZE];
        h[..8].copy_from_slice(&keynum.to_le_bytes());
        h[8..].copy_from_slice(&version.to_le_bytes());
        h
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    if a == b {
        None
    } else {
        a.iter().zip(b).position(|(x, y)| x != y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn hashed_keys_match_golden_bytes() {
        // Golden values for drivers in other languages.
        assert_eq!(key(0, 24), b"user12161962213042174405");
        assert_eq!(key(1, 24), b"user09929646806074584996");
        assert_eq!(key(42, 24), b"user18391255480883862255");
        let long = key(1, 30);
        assert_eq!(&long[..], b"user09929646806074584996xxxxxx");
        assert_eq!(key(7, 256).len(), 256);
        assert!(key(7, 256)[24..].iter().all(|&b| b == b'x'));
    }

    #[test]
    fn short_keys_use_reversed_digits() {
        assert_eq!(key(123, 12), b"user32100000");
        assert_eq!(key(0, 12), b"user00000000");
        assert_eq!(key(99_999_999, 12), b"user99999999");
        assert_eq!(key(5, 23).len(), 23);
        assert_eq!(key(5, 3), b"use");
        assert_eq!(key_capacity(12), Some(100_000_000));
        assert_eq!(key_capacity(24), None);
    }

    #[test]
    fn keys_are_unique_and_sized() {
        let mut out = Vec::new();
        for size in [12, 16, 24, 256] {
            let mut seen = HashSet::with_capacity(100_000);
            for k in 0..100_000 {
                format_key(k, size, &mut out);
                assert_eq!(out.len(), size);
                assert!(
                    seen.insert(out.clone()),
                    "duplicate key for {k} at size {size}"
                );
            }
        }
    }

    #[test]
    fn insert_order_is_scattered() {
        // Loading in key-number order must not be a sorted (append-only) load.
        let keys: Vec<Vec<u8>> = (0..1000).map(|k| key(k, 24)).collect();
        let ascending = keys.windows(2).filter(|w| w[0] < w[1]).count();
        assert!((300..700).contains(&ascending), "{ascending}");
        let short: Vec<Vec<u8>> = (0..10).map(|k| key(k, 12)).collect();
        let firsts: HashSet<u8> = short.iter().map(|k| k[4]).collect();
        assert_eq!(firsts.len(), 10);
    }

    #[test]
    fn values_are_deterministic_and_verifiable() {
        let g = ValueGen::new();
        let a = g.expected(5, 0, 4096);
        assert_eq!(a, ValueGen::new().expected(5, 0, 4096));
        assert_eq!(a.len(), 4096);
        assert_eq!(ValueGen::decode_header(&a), Some((5, 0)));
        assert!(g.verify(5, 0, 4096, &a).is_ok());
        // Larger than the pool: wraps around and still verifies.
        let big = g.expected(9, 3, VALUE_POOL_SIZE + 12_345);
        assert!(g.verify(9, 3, big.len(), &big).is_ok());
        // Tiny values are a header prefix.
        assert_eq!(g.expected(1, 2, 4), vec![1, 0, 0, 0]);
        assert!(g.expected(1, 2, 0).is_empty());
    }

    #[test]
    fn versions_and_keys_give_different_values() {
        let g = ValueGen::new();
        let mut seen = HashSet::new();
        for k in 0..50 {
            for v in 0..50 {
                assert!(seen.insert(g.expected(k, v, 64)));
            }
        }
        // The bodies differ too, not just the headers.
        let a = g.expected(3, 1, 256);
        let b = g.expected(3, 2, 256);
        assert_ne!(a[16..], b[16..]);
    }

    #[test]
    fn verify_reports_what_is_wrong() {
        let g = ValueGen::new();
        let stale = g.expected(7, 1, 100);
        assert_eq!(
            g.verify(7, 2, 100, &stale),
            Err(ValueMismatch::Content {
                keynum: 7,
                version: 2,
                offset: 8,
                found: Some((7, 1)),
            })
        );
        let mut flipped = g.expected(7, 2, 100);
        flipped[77] ^= 1;
        assert!(matches!(
            g.verify(7, 2, 100, &flipped),
            Err(ValueMismatch::Content { offset: 77, .. })
        ));
        assert_eq!(
            g.verify(7, 2, 99, &flipped),
            Err(ValueMismatch::Length {
                expected: 99,
                found: 100
            })
        );
        let msg = g.verify(7, 2, 100, &stale).unwrap_err().to_string();
        assert!(msg.contains("key 7 version 1"), "{msg}");
    }
}
