//! Lock-free per-cause I/O counters.

use super::cause::IoCause;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
struct Counters {
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    writes: AtomicU64,
    reads: AtomicU64,
    syncs: AtomicU64,
}

/// Bytes and operations per cause, updated by the storage on every call.
#[derive(Default)]
pub struct IoStats {
    by_cause: [Counters; IoCause::ALL.len()],
}

impl IoStats {
    pub fn record_write(&self, cause: IoCause, bytes: u64) {
        let c = &self.by_cause[cause.index()];
        c.bytes_written.fetch_add(bytes, Relaxed);
        c.writes.fetch_add(1, Relaxed);
    }

    pub fn record_read(&self, cause: IoCause, bytes: u64) {
        let c = &self.by_cause[cause.index()];
        c.bytes_read.fetch_add(bytes, Relaxed);
        c.reads.fetch_add(1, Relaxed);
    }

    pub fn record_sync(&self, cause: IoCause) {
        self.by_cause[cause.index()].syncs.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> IoStatsSnapshot {
        let mut by_cause = BTreeMap::new();
        for cause in IoCause::ALL {
            let c = &self.by_cause[cause.index()];
            let s = CauseCounters {
                bytes_written: c.bytes_written.load(Relaxed),
                bytes_read: c.bytes_read.load(Relaxed),
                writes: c.writes.load(Relaxed),
                reads: c.reads.load(Relaxed),
                syncs: c.syncs.load(Relaxed),
            };
            by_cause.insert(cause.name().to_string(), s);
        }
        IoStatsSnapshot { by_cause }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CauseCounters {
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub writes: u64,
    pub reads: u64,
    pub syncs: u64,
}

/// A point-in-time copy of the counters, keyed by cause name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoStatsSnapshot {
    pub by_cause: BTreeMap<String, CauseCounters>,
}

impl IoStatsSnapshot {
    pub fn cause(&self, cause: IoCause) -> CauseCounters {
        self.by_cause.get(cause.name()).copied().unwrap_or_default()
    }

    pub fn total_written(&self) -> u64 {
        self.by_cause.values().map(|c| c.bytes_written).sum()
    }

    pub fn total_read(&self) -> u64 {
        self.by_cause.values().map(|c| c.bytes_read).sum()
    }
}
