//! Future knowledge for oracle policies: when will the value a write puts down be
//! overwritten or deleted?
//!
//! Paper 000 measures a value's lifetime in sequence numbers, from the write that creates
//! it to the write that invalidates it. An oracle GC policy (the upper bound a learned
//! policy is compared against) needs that number for every write before it happens. Here
//! the run-phase op index stands in for the sequence number: for each write at index i,
//! [`NextWrites::next_write`] is the index of the next op that ends the value (a write to
//! the same key, or its delete: [`Op::ends_value`]), or `None` if the value survives the
//! run. A delete puts down no value, so it has no next write of its own.
//!
//! One backward pass with a map from key to the most recent (i.e. next, in forward order)
//! write index computes it in O(ops) time. Memory is 8 bytes per op (a
//! `Option<NonZeroU64>`: a next write is always at an index >= 1, so 0 can mean "none")
//! plus one map entry per distinct key written. After the pass the map holds, for every
//! key, its first run-phase write or delete: the lifetime of the load-phase value
//! ([`NextWrites::first_write`]).

use std::collections::HashMap;
use std::num::NonZeroU64;

use crate::op::Op;

/// Next-write indices for a run-phase op sequence.
#[derive(Debug, Clone, Default)]
pub struct NextWrites {
    next: Vec<Option<NonZeroU64>>,
    first_write: HashMap<u64, u64>,
}

/// Computes [`NextWrites`] for `ops` (indices count from the start of the run).
pub fn next_writes(ops: &[Op]) -> NextWrites {
    let mut next = vec![None; ops.len()];
    let mut upcoming: HashMap<u64, u64> = HashMap::new();
    for (i, op) in ops.iter().enumerate().rev() {
        if op.ends_value() {
            let later = upcoming.insert(op.key(), i as u64);
            if op.is_write() {
                // `later` > i >= 0, so it is never zero.
                next[i] = later.and_then(NonZeroU64::new);
            }
        }
    }
    NextWrites {
        next,
        first_write: upcoming,
    }
}

impl NextWrites {
    /// Index of the next write or delete of the key written at `index`; `None` if `index`
    /// is not a write, is the key's last write with no delete after it, or is out of range.
    pub fn next_write(&self, index: usize) -> Option<u64> {
        self.next.get(index).copied().flatten().map(NonZeroU64::get)
    }

    /// `next_write(index) - index`: the lifetime of the value written at `index`, in ops.
    pub fn lifetime(&self, index: usize) -> Option<u64> {
        self.next_write(index).map(|n| n - index as u64)
    }

    /// Index of the first run-phase write or delete of `key`: when its load-phase value
    /// dies.
    pub fn first_write(&self, key: u64) -> Option<u64> {
        self.first_write.get(&key).copied()
    }

    /// Number of ops covered.
    pub fn len(&self) -> usize {
        self.next.len()
    }

    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Workload, WorkloadSpec};

    #[test]
    fn links_each_write_to_the_next_write_of_its_key() {
        let ops = [
            Op::Update { key: 1 },          // 0 -> 3
            Op::Read { key: 1 },            // 1 not a write
            Op::Insert { key: 9 },          // 2 -> 5
            Op::ReadModifyWrite { key: 1 }, // 3 -> none
            Op::Scan { start: 9, len: 4 },  // 4 not a write
            Op::Update { key: 9 },          // 5 -> none
            Op::Update { key: 2 },          // 6 -> 7 (its delete)
            Op::Delete { key: 2 },          // 7 puts down no value
            Op::Delete { key: 4 },          // 8 ends key 4's load-phase value
            Op::Update { key: 2 },          // 9 re-creates key 2 -> none
        ];
        let nw = next_writes(&ops);
        let got: Vec<Option<u64>> = (0..ops.len()).map(|i| nw.next_write(i)).collect();
        assert_eq!(
            got,
            [
                Some(3),
                None,
                Some(5),
                None,
                None,
                None,
                Some(7),
                None,
                None,
                None
            ]
        );
        assert_eq!(nw.lifetime(0), Some(3));
        assert_eq!(nw.lifetime(2), Some(3));
        assert_eq!(nw.first_write(1), Some(0));
        assert_eq!(nw.first_write(9), Some(2));
        assert_eq!(nw.first_write(2), Some(6));
        assert_eq!(nw.first_write(4), Some(8));
        assert_eq!(nw.first_write(5), None);
        assert_eq!(nw.next_write(100), None);
        assert_eq!(nw.len(), 10);
    }

    #[test]
    fn matches_a_quadratic_reference_on_real_workloads() {
        // YCSB F (reads and read-modify-writes) and the mixed workload (updates and
        // deletes, keys re-created after their delete).
        for spec in [
            WorkloadSpec::ycsb('f').unwrap(),
            WorkloadSpec::mixed().unwrap(),
        ] {
            let w = Workload::new(spec.with_record_count(50).with_operation_count(2000)).unwrap();
            let ops: Vec<Op> = w.run_ops().collect();
            let nw = next_writes(&ops);
            for (i, op) in ops.iter().enumerate() {
                let want = if op.is_write() {
                    ops[i + 1..]
                        .iter()
                        .position(|o| o.ends_value() && o.key() == op.key())
                        .map(|p| (i + 1 + p) as u64)
                } else {
                    None
                };
                assert_eq!(nw.next_write(i), want, "op {i} {op:?}");
            }
            let deaths_by_delete = (0..ops.len())
                .filter_map(|i| nw.next_write(i))
                .filter(|&n| matches!(ops[n as usize], Op::Delete { .. }))
                .count();
            assert_eq!(
                deaths_by_delete > 0,
                w.spec().proportions.delete > 0.0,
                "{}",
                w.spec().name
            );
        }
        assert_eq!(std::mem::size_of::<Option<NonZeroU64>>(), 8);
    }

    #[test]
    fn empty_input() {
        let nw = next_writes(&[]);
        assert!(nw.is_empty());
        assert_eq!(nw.next_write(0), None);
    }
}
