//! Value bytes with a chosen compressibility, as db_bench's `--compression_ratio` makes them,
//! so that block and value compression can be measured on data that compresses by a known
//! amount (the [`crate::keys::ValueGen`] pool is random and does not compress at all).
//!
//! The pool is built as db_bench's `RandomGenerator` builds its 1 MiB buffer: pieces of
//! [`PIECE`] bytes, each made of `ceil(PIECE * ratio)` random bytes repeated until the piece is
//! full. A general-purpose compressor finds the repetition and keeps about `ratio` of the
//! bytes; `ratio >= 1` gives incompressible random bytes. Unlike db_bench, the random bytes
//! span all 256 values rather than printable characters, so the entropy coder of Zstd gains
//! nothing beyond the repetition and the achieved ratio stays close to the one asked for.
//! Values are consecutive slices of the pool, wrapping to its start when a value would run
//! past its end.

use std::sync::Arc;

use thiserror::Error;

use crate::rng::WorkloadRng;

/// Bytes per repeated piece (db_bench's `CompressibleString` is called with 100).
pub const PIECE: usize = 100;

/// Pool size: db_bench's 1 MiB, or more for values longer than that.
pub const POOL_SIZE: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Error)]
#[error("compression ratio {0} is not in (0, 1] (the fraction of bytes compression keeps)")]
pub struct BadRatio(pub f64);

/// A shared pool of values of one compressibility; cheap to clone.
#[derive(Clone, Debug)]
pub struct CompressibleValues {
    pool: Arc<[u8]>,
    ratio: f64,
}

impl CompressibleValues {
    /// A pool whose slices compress to about `ratio` of their size, for values of up to
    /// `max_value` bytes.
    pub fn new(ratio: f64, max_value: usize, seed: u64) -> Result<Self, BadRatio> {
        if !(ratio > 0.0 && ratio <= 1.0) {
            return Err(BadRatio(ratio));
        }
        let size = POOL_SIZE.max(max_value);
        let raw = ((PIECE as f64 * ratio).ceil() as usize).clamp(1, PIECE);
        let mut rng = WorkloadRng::new(seed);
        let mut pool = Vec::with_capacity(size + PIECE);
        let mut random = vec![0u8; raw];
        while pool.len() < size {
            for chunk in random.chunks_mut(8) {
                let word = rng.next_u64().to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
            let start = pool.len();
            while pool.len() - start < PIECE {
                let take = raw.min(PIECE - (pool.len() - start));
                pool.extend_from_slice(&random[..take]);
            }
        }
        pool.truncate(size);
        Ok(Self {
            pool: pool.into(),
            ratio,
        })
    }

    /// The ratio asked for.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// The `len` bytes at the cursor `pos`, which advances (wrapping to the pool's start
    /// when the value would not fit), as db_bench's `RandomGenerator::Generate`.
    ///
    /// # Panics
    /// If `len` exceeds the `max_value` the pool was built for.
    pub fn next<'a>(&'a self, pos: &mut usize, len: usize) -> &'a [u8] {
        assert!(len <= self.pool.len(), "value of {len} bytes > pool");
        if *pos + len > self.pool.len() {
            *pos = 0;
        }
        let v = &self.pool[*pos..*pos + len];
        *pos += len;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distinct bytes in each piece: the repetition a compressor exploits.
    fn distinct_run(piece: &[u8]) -> usize {
        (1..=piece.len())
            .find(|&p| piece.iter().enumerate().all(|(i, b)| *b == piece[i % p]))
            .unwrap()
    }

    #[test]
    fn pieces_repeat_their_random_prefix() {
        let v = CompressibleValues::new(0.25, 1000, 7).unwrap();
        assert_eq!(distinct_run(&v.pool[..PIECE]), 25);
        assert_eq!(distinct_run(&v.pool[PIECE..2 * PIECE]), 25);
        assert_ne!(v.pool[..25], v.pool[PIECE..PIECE + 25]);
        let full = CompressibleValues::new(1.0, 1000, 7).unwrap();
        assert_eq!(distinct_run(&full.pool[..PIECE]), PIECE);
    }

    #[test]
    fn cursor_wraps_and_values_fit() {
        let v = CompressibleValues::new(0.5, 100, 1).unwrap();
        let mut pos = POOL_SIZE - 10;
        let a = v.next(&mut pos, 100).to_vec();
        assert_eq!(pos, 100);
        assert_eq!(a, v.pool[..100]);
        let big = CompressibleValues::new(0.5, 3 << 20, 1).unwrap();
        let mut pos = 0;
        assert_eq!(big.next(&mut pos, 3 << 20).len(), 3 << 20);
    }

    #[test]
    fn ratio_out_of_range_is_an_error() {
        for r in [0.0, -1.0, 1.5, f64::NAN] {
            assert!(CompressibleValues::new(r, 10, 1).is_err(), "{r}");
        }
        let msg = CompressibleValues::new(2.0, 10, 1).unwrap_err().to_string();
        assert!(msg.contains("compression ratio 2"), "{msg}");
    }
}
