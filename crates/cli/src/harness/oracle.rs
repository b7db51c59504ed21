//! The future of a generated workload, for the `oracle` GC policy (paper 000's lower
//! bound): when each key is written next, in the engine's sequence numbers.
//!
//! The bench drives the engine with one client thread, so writes get sequence numbers in
//! op order: the load phase's inserts take 1..=records, then every run-phase write (insert,
//! update, read-modify-write) takes the next one. Reads and scans take none.

use super::ops::{ClientOp, INSERT, RMW, UPDATE};
use anyhow::Result;
use engine::LifetimeOracle;
use std::collections::HashMap;
use xxhash_rust::xxh3::xxh3_64;

/// Per key (by a 64-bit hash of its bytes), the sequence numbers of its writes, ascending.
pub struct WorkloadOracle {
    writes: HashMap<u64, Vec<u32>>,
}

impl WorkloadOracle {
    /// Replays the key numbers of the load phase and the run-phase `ops`.
    pub fn build(
        record_count: u64,
        key_size: usize,
        ops: impl Iterator<Item = Result<ClientOp>>,
    ) -> Result<WorkloadOracle> {
        let mut writes: HashMap<u64, Vec<u32>> = HashMap::new();
        let mut key = Vec::with_capacity(key_size);
        let mut seq: u64 = 0;
        let mut add = |keynum: u64, key: &mut Vec<u8>| -> Result<()> {
            seq += 1;
            let s = u32::try_from(seq)
                .map_err(|_| anyhow::anyhow!("the oracle supports up to 2^32 writes"))?;
            key.clear();
            workload::keys::format_key(keynum, key_size, key);
            writes.entry(xxh3_64(key)).or_default().push(s);
            Ok(())
        };
        for k in 0..record_count {
            add(k, &mut key)?;
        }
        for op in ops {
            let op = op?;
            if matches!(op.code, INSERT | UPDATE | RMW) {
                add(op.key, &mut key)?;
            }
        }
        Ok(WorkloadOracle { writes })
    }
}

impl LifetimeOracle for WorkloadOracle {
    fn next_write(&self, key: &[u8], after: u64) -> Option<u64> {
        let w = self.writes.get(&xxh3_64(key))?;
        let i = w.partition_point(|&s| u64::from(s) <= after);
        w.get(i).map(|&s| u64::from(s))
    }

    fn mean_interval(&self, key: &[u8]) -> Option<u64> {
        let w = self.writes.get(&xxh3_64(key))?;
        let (first, last) = (*w.first()?, *w.last()?);
        (w.len() > 1).then(|| u64::from(last - first) / (w.len() as u64 - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_write_follows_op_order() {
        // Two records loaded (seq 1, 2); then update 1 (3), read 0 (none), update 1 (4),
        // update 0 (5).
        let op = |code, key| Ok(ClientOp { code, key, len: 0 });
        let ops = vec![
            op(UPDATE, 1),
            op(super::super::ops::READ, 0),
            op(UPDATE, 1),
            op(UPDATE, 0),
        ];
        let o = WorkloadOracle::build(2, 24, ops.into_iter()).unwrap();
        let k = |n| workload::keys::key(n, 24);
        assert_eq!(o.next_write(&k(0), 1), Some(5));
        assert_eq!(o.next_write(&k(1), 2), Some(3));
        assert_eq!(o.next_write(&k(1), 3), Some(4));
        assert_eq!(o.next_write(&k(1), 4), None);
        assert_eq!(o.next_write(&k(7), 0), None);
        // Key 1: writes 2, 3, 4; key 0: 1, 5.
        assert_eq!(o.mean_interval(&k(1)), Some(1));
        assert_eq!(o.mean_interval(&k(0)), Some(4));
        assert_eq!(o.mean_interval(&k(7)), None);
    }
}
