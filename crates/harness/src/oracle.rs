//! The future of a generated workload, for the `oracle` GC policy (paper 000's lower
//! bound): when each key is written next, in the engine's sequence numbers.
//!
//! The bench drives the engine with one client thread, so writes get sequence numbers in
//! op order: the load phase's inserts take 1..=records, then every run-phase write (insert,
//! update, read-modify-write) and every delete takes the next one. Reads and scans take
//! none. A delete is listed among its key's writes: it is the death of the value written
//! before it (that value's next write is the delete's sequence number), and the update that
//! re-creates the key is the next write after the delete.

use super::ops::{ClientOp, DELETE, EXPIRING_UPDATE, INSERT, RMW, UPDATE};
use anyhow::Result;
use engine::LifetimeOracle;
use std::collections::HashMap;
use xxhash_rust::xxh3::xxh3_64;

/// Per key (by a 64-bit hash of its bytes), the sequence numbers of its writes and deletes,
/// ascending.
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
            if matches!(op.code, INSERT | UPDATE | RMW | EXPIRING_UPDATE | DELETE) {
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
        let op = |code, key| Ok(ClientOp::on(code, key));
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

    #[test]
    fn a_delete_is_the_death_of_the_value_before_it() {
        // One record (seq 1); update 0 (2), delete 0 (3), read 0 (none), update 0 (4).
        let op = |code, key| Ok(ClientOp::on(code, key));
        let ops = vec![
            op(UPDATE, 0),
            op(DELETE, 0),
            op(super::super::ops::READ, 0),
            op(UPDATE, 0),
        ];
        let o = WorkloadOracle::build(1, 24, ops.into_iter()).unwrap();
        let k0 = workload::keys::key(0, 24);
        assert_eq!(
            o.next_write(&k0, 2),
            Some(3),
            "the update dies at the delete"
        );
        assert_eq!(o.next_write(&k0, 3), Some(4), "the re-creating update");
        assert_eq!(o.next_write(&k0, 4), None);
    }

    #[test]
    fn names_each_writes_death_on_the_mixed_workload() {
        // Every op of the mixed workload is a write or a delete, so op i has sequence
        // number records + i + 1; the oracle must name the death a scan of the ops after
        // each write finds: the next write or delete of its key.
        let records = 200;
        let spec = workload::WorkloadSpec::mixed()
            .unwrap()
            .with_record_count(records)
            .with_operation_count(5000);
        let w = workload::Workload::new(spec.clone()).unwrap();
        let ops: Vec<workload::Op> = w.run_ops().collect();
        assert!(ops.iter().any(|o| matches!(o, workload::Op::Delete { .. })));
        let o = WorkloadOracle::build(
            records,
            spec.key_size as usize,
            ops.iter().map(|&op| Ok(ClientOp::from(op))),
        )
        .unwrap();
        let seq = |i: usize| records + i as u64 + 1;
        // The first op at or after `from` that ends a value of `key`.
        let death = |key: u64, from: usize| {
            ops[from..]
                .iter()
                .position(|o| o.ends_value() && o.key() == key)
                .map(|p| seq(from + p))
        };
        for (i, op) in ops.iter().enumerate().filter(|(_, op)| op.is_write()) {
            let key = workload::keys::key(op.key(), spec.key_size as usize);
            assert_eq!(
                o.next_write(&key, seq(i)),
                death(op.key(), i + 1),
                "op {i} {op:?}"
            );
        }
        // Load-phase values die at their key's first run-phase write or delete.
        for k in 0..records {
            let key = workload::keys::key(k, spec.key_size as usize);
            assert_eq!(o.next_write(&key, k + 1), death(k, 0), "key {k}");
        }
    }
}
