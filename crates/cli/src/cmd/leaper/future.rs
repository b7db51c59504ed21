//! The future reads of a generated workload, for the `oracle` warming policy: for each key
//! (by a 64-bit hash of its bytes) the numbers of the run-phase reads of it, in op order.
//!
//! The engine numbers client reads from 0 at its open; the load phase of `halflife leaper`
//! reads nothing, so run-phase read `n` is the engine's read `n` with one client. With
//! several client threads, each taking batches of
//! [`BATCH`](harness::ops::BATCH) ops, the engine serves reads out of op order; the
//! oracle matches each read it serves to the op stream's reads itself.

use anyhow::Result;
use engine::warming::{KeyHashMap, KeySet, ReadOracle};
use harness::ops::{ClientOp, READ, RMW};

pub struct ReadFuture {
    /// Each key's reads (by [`KeySet::hash`]), ascending.
    reads: KeyHashMap<Vec<u32>>,
    /// The key of each read, in order.
    order: Vec<u64>,
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
        let mut reads: KeyHashMap<Vec<u32>> = KeyHashMap::default();
        let mut order = Vec::new();
        let mut key = Vec::with_capacity(key_size);
        for op in ops {
            let op = op?;
            if matches!(op.code, READ | RMW) {
                key.clear();
                workload::keys::format_key(op.key, key_size, &mut key);
                let n = u32::try_from(order.len())
                    .map_err(|_| anyhow::anyhow!("the read oracle supports up to 2^32 reads"))?;
                let h = KeySet::hash(&key);
                reads.entry(h).or_default().push(n);
                order.push(h);
            }
        }
        Ok(ReadFuture {
            reads,
            order,
            horizon,
        })
    }
}

impl ReadOracle for ReadFuture {
    fn reads_of(&self, key: u64) -> &[u32] {
        self.reads.get(&key).map_or(&[], Vec::as_slice)
    }

    fn keys_read(&self, from: u64, to: u64) -> &[u64] {
        let end = self.order.len() as u64;
        &self.order[from.min(end) as usize..to.min(end) as usize]
    }

    fn horizon(&self) -> Option<u64> {
        Some(self.horizon)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::ops::UPDATE;

    #[test]
    fn reads_are_numbered_in_op_order() {
        let op = |code, key| Ok(ClientOp::on(code, key));
        let ops = vec![
            op(READ, 3),
            op(UPDATE, 3),
            op(READ, 1),
            op(RMW, 3),
            op(READ, 3),
        ];
        let f = ReadFuture::build(24, ops.into_iter()).unwrap();
        let k = |n| KeySet::hash(&workload::keys::key(n, 24));
        assert_eq!(f.next_read(k(3), 0), Some(0));
        assert_eq!(f.next_read(k(3), 1), Some(2), "the update is not a read");
        assert_eq!(f.next_read(k(3), 3), Some(3));
        assert_eq!(f.next_read(k(3), 4), None);
        assert_eq!(f.next_read(k(1), 0), Some(1));
        assert_eq!(f.next_read(k(9), 0), None);
        assert_eq!(
            f.keys_read(1, 9),
            &[k(1), k(3), k(3)],
            "clipped to the reads"
        );
    }
}
