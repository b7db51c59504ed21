//! The operations a workload issues, by key number (see [`crate::keys`] for the bytes).

use serde::{Deserialize, Serialize};

/// One operation. Keys are key numbers; [`crate::keys::format_key`] turns them into bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// Write a key that did not exist before (the key space grows by one).
    Insert { key: u64 },
    /// Write a new version of a key of the key space (re-creating it if it was deleted).
    Update { key: u64 },
    /// Point lookup.
    Read { key: u64 },
    /// Read `len` consecutive keys in sorted key order, starting at the key of `start`.
    Scan { start: u64, len: u32 },
    /// Read a key, then write a new version of it.
    ReadModifyWrite { key: u64 },
    /// Delete a key. The key number stays in the key space: a later update re-creates it.
    Delete { key: u64 },
    /// Write a new version of a key that expires `ttl` ops later: run-phase op `i` writes
    /// a value that is gone from op `i + ttl` on unless written again before. Time in a
    /// workload is counted in ops (each run-phase op is one tick), so every engine sees
    /// the same lifetimes whatever its speed.
    ExpiringUpdate { key: u64, ttl: u32 },
}

impl Op {
    /// The key the op addresses (the first key for a scan).
    pub fn key(&self) -> u64 {
        match *self {
            Op::Insert { key }
            | Op::Update { key }
            | Op::Read { key }
            | Op::ReadModifyWrite { key }
            | Op::Delete { key }
            | Op::ExpiringUpdate { key, .. } => key,
            Op::Scan { start, .. } => start,
        }
    }

    /// Whether the op writes a new version of its key (insert, update, read-modify-write,
    /// expiring update);
    /// these are the ops that end a previous value's lifetime.
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Op::Insert { .. }
                | Op::Update { .. }
                | Op::ReadModifyWrite { .. }
                | Op::ExpiringUpdate { .. }
        )
    }

    /// Whether the op ends the life of the key's current value: a write replaces it, a
    /// delete removes it. Oracles count both as the value's death.
    ///
    /// An expiring update's value may also end by expiring; that death is not an op (see
    /// [`Op::ttl`]).
    pub fn ends_value(&self) -> bool {
        self.is_write() || matches!(self, Op::Delete { .. })
    }

    /// The ops after which the value this op writes expires (`None`: it does not).
    pub fn ttl(&self) -> Option<u32> {
        match *self {
            Op::ExpiringUpdate { ttl, .. } => Some(ttl),
            _ => None,
        }
    }

    /// The op code used by [`crate::opfile`]: 0 insert, 1 update, 2 read, 3 scan, 4 rmw,
    /// 5 delete, 6 expiring update.
    pub fn code(&self) -> u8 {
        match self {
            Op::Insert { .. } => 0,
            Op::Update { .. } => 1,
            Op::Read { .. } => 2,
            Op::Scan { .. } => 3,
            Op::ReadModifyWrite { .. } => 4,
            Op::Delete { .. } => 5,
            Op::ExpiringUpdate { .. } => 6,
        }
    }
}
