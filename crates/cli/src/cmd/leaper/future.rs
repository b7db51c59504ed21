//! The future reads of a generated workload, for the `oracle` warming policy: for each key
//! (by a 64-bit hash of its bytes) the numbers of the run-phase reads of it, in op order.
//!
//! The engine numbers client reads from 0 at its open; the load phase of `halflife leaper`
//! reads nothing, so run-phase read `n` is the engine's read `n`. With several client
//! threads, each taking batches of [`BATCH`](crate::harness::ops::BATCH) ops, the engine
//! serves reads out of op order by up to about a batch per thread: the oracle's view of
//! "the next 10,000 reads" is off by that much at its edges.

use crate::harness::ops::{ClientOp, READ, RMW};
use anyhow::Result;
use engine::warming::ReadOracle;
use std::collections::HashMap;
use xxhash_rust::xxh3::xxh3_64;

pub struct ReadFuture {
    reads: HashMap<u64, Vec<u32>>,
    /// The oracle's lookahead at a compaction's install ([`ReadOracle::horizon`]).
    horizon: u64,
}

impl ReadFuture {
    /// Numbers the reads (gets, and the get of a read-modify-write) among `ops`.
    pub fn build(key_size: usize, ops: impl Iterator<Item = Result<ClientOp>>) -> Result<Self> {
        Self::with_horizon(key_size, ops, engine::warming::INVALIDATION_WINDOW_READS)
    }

    /// [`ReadFuture::build`], looking `horizon` reads ahead at an install.
    pub fn with_horizon(
        key_size: usize,
        ops: impl Iterator<Item = Result<ClientOp>>,
        horizon: u64,
    ) -> Result<Self> {
        let mut reads: HashMap<u64, Vec<u32>> = HashMap::new();
        let mut key = Vec::with_capacity(key_size);
        let mut n: u32 = 0;
        for op in ops {
            let op = op?;
            if matches!(op.code, READ | RMW) {
                key.clear();
                workload::keys::format_key(op.key, key_size, &mut key);
                reads.entry(xxh3_64(&key)).or_default().push(n);
                n = n
                    .checked_add(1)
                    .ok_or_else(|| anyhow::anyhow!("the read oracle supports up to 2^32 reads"))?;
            }
        }
        Ok(ReadFuture { reads, horizon })
    }
}

impl ReadOracle for ReadFuture {
    fn next_read(&self, key: &[u8], from: u64) -> Option<u64> {
        let r = self.reads.get(&xxh3_64(key))?;
        let i = r.partition_point(|&n| u64::from(n) < from);
        r.get(i).map(|&n| u64::from(n))
    }

    fn horizon(&self) -> u64 {
        self.horizon
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::ops::UPDATE;

    #[test]
    fn reads_are_numbered_in_op_order() {
        let op = |code, key| Ok(ClientOp { code, key, len: 0 });
        let ops = vec![
            op(READ, 3),
            op(UPDATE, 3),
            op(READ, 1),
            op(RMW, 3),
            op(READ, 3),
        ];
        let f = ReadFuture::build(24, ops.into_iter()).unwrap();
        let k = |n| workload::keys::key(n, 24);
        assert_eq!(f.next_read(&k(3), 0), Some(0));
        assert_eq!(f.next_read(&k(3), 1), Some(2), "the update is not a read");
        assert_eq!(f.next_read(&k(3), 3), Some(3));
        assert_eq!(f.next_read(&k(3), 4), None);
        assert_eq!(f.next_read(&k(1), 0), Some(1));
        assert_eq!(f.next_read(&k(9), 0), None);
    }
}
