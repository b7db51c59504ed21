//! Op files (`HLOPS001`, the workload crate's format) as `halflife compare` hands them to
//! every engine's driver: written once from a spec, or read, and summarized by the keys
//! that exist after them, the denominator of space amplification.

use anyhow::{Context, Result};
use std::collections::{HashMap, HashSet};
use std::io::BufWriter;
use std::path::Path;
use workload::opfile::{Header, OpFileReader, OpFileWriter};
use workload::{Op, Workload, WorkloadSpec};

/// What an op file holds, for the report.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    pub header: Header,
    /// Keys that exist after the load and the ops: loaded and inserted, less the deleted
    /// ones not written since and those whose last write expired.
    pub live_keys: u64,
    /// Ops that write a value with an expiry.
    pub expiring_updates: u64,
}

impl Summary {
    /// Live keys times key + value size.
    pub fn live_user_bytes(&self) -> u64 {
        self.live_keys * (u64::from(self.header.key_size) + u64::from(self.header.value_size))
    }
}

/// Writes `spec`'s run-phase ops to a new op file at `path`.
pub fn write(spec: &WorkloadSpec, path: &Path) -> Result<Summary> {
    let w = Workload::new(spec.clone())?;
    let header = Header::for_workload(&w);
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut writer = OpFileWriter::new(BufWriter::new(file), header)?;
    let mut live = LiveKeys::new(header.record_count);
    for op in w.run_ops() {
        live.apply(&op);
        writer.write_op(&op)?;
    }
    writer.finish()?;
    Ok(Summary {
        header,
        live_keys: live.count(),
        expiring_updates: live.expiring_updates,
    })
}

/// Reads the op file at `path` through.
pub fn summarize(path: &Path) -> Result<Summary> {
    let reader = OpFileReader::open(path)?;
    let header = *reader.header();
    let mut live = LiveKeys::new(header.record_count);
    for op in reader {
        live.apply(&op?);
    }
    Ok(Summary {
        header,
        live_keys: live.count(),
        expiring_updates: live.expiring_updates,
    })
}

/// The keys that exist after an op stream: loaded and inserted, less the deleted ones not
/// written since, less those whose last write expired by the end (the op file's ticks:
/// run-phase op `i` at tick `i`, the end at tick `op_count`).
struct LiveKeys {
    created: u64,
    deleted: HashSet<u64>,
    /// Per key whose last write is an expiring update, the tick it expires at.
    expiring: HashMap<u64, u64>,
    /// Ticks so far (ops applied).
    tick: u64,
    expiring_updates: u64,
}

impl LiveKeys {
    fn new(record_count: u64) -> LiveKeys {
        LiveKeys {
            created: record_count,
            deleted: HashSet::new(),
            expiring: HashMap::new(),
            tick: 0,
            expiring_updates: 0,
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Insert { .. } => self.created += 1,
            Op::Delete { key } => {
                self.deleted.insert(key);
                self.expiring.remove(&key);
            }
            Op::Update { key } | Op::ReadModifyWrite { key } => {
                self.deleted.remove(&key);
                self.expiring.remove(&key);
            }
            Op::ExpiringUpdate { key, ttl } => {
                self.deleted.remove(&key);
                self.expiring.insert(key, self.tick + u64::from(ttl));
                self.expiring_updates += 1;
            }
            Op::Read { .. } | Op::Scan { .. } => {}
        }
        self.tick += 1;
    }

    fn count(&self) -> u64 {
        let expired = self
            .expiring
            .values()
            .filter(|&&at| at <= self.tick)
            .count();
        self.created - self.deleted.len() as u64 - expired as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_and_read_back_files_agree_on_live_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.ops");
        let spec = WorkloadSpec::mixed()
            .unwrap()
            .with_record_count(500)
            .with_operation_count(2_000);
        let written = write(&spec, &path).unwrap();
        let read = summarize(&path).unwrap();
        assert_eq!(read.header.op_count, 2_000);
        assert_eq!(read.live_keys, written.live_keys);
        let per_key = u64::from(read.header.key_size) + u64::from(read.header.value_size);
        assert_eq!(read.live_user_bytes(), read.live_keys * per_key);
    }

    #[test]
    fn live_keys_follow_inserts_deletes_and_re_creation() {
        let mut l = LiveKeys::new(10);
        for op in [
            Op::Delete { key: 3 },
            Op::Delete { key: 4 },
            Op::Read { key: 3 },
            Op::Insert { key: 10 },
            Op::Update { key: 4 },
            Op::Delete { key: 10 },
            Op::ReadModifyWrite { key: 10 },
            Op::Delete { key: 5 },
        ] {
            l.apply(&op);
        }
        // 11 keys created; 3 and 5 deleted at the end.
        assert_eq!(l.count(), 9);
        // The mixed workload ends with some keys deleted.
        let spec = crate::plan::build_spec(&crate::plan::SpecChoice {
            workload: "mixed",
            records: Some(1000),
            op_count: Some(4000),
            key_size: None,
            value_size: Some(1024),
            distribution: None,
            theta: 0.9,
            seed: None,
        })
        .unwrap();
        assert_eq!((spec.name.as_str(), spec.value_size), ("mixed", 1024));
        let mut l = LiveKeys::new(spec.record_count);
        let mut deletes = 0;
        for op in Workload::new(spec).unwrap().run_ops() {
            deletes += u64::from(matches!(op, Op::Delete { .. }));
            l.apply(&op);
        }
        assert!(
            l.count() < 1000 && l.count() > 1000 - deletes,
            "{}",
            l.count()
        );
    }

    #[test]
    fn a_key_whose_last_write_expired_by_the_end_is_not_live() {
        let mut l = LiveKeys::new(4);
        for op in [
            Op::ExpiringUpdate { key: 0, ttl: 2 }, // tick 0, expires at 2
            Op::ExpiringUpdate { key: 1, ttl: 9 }, // tick 1, expires at 10: live at 5
            Op::ExpiringUpdate { key: 2, ttl: 1 }, // tick 2, then written plainly
            Op::Update { key: 2 },
            Op::ExpiringUpdate { key: 3, ttl: 1 }, // tick 4, expires at 5 = the end
        ] {
            l.apply(&op);
        }
        assert_eq!(l.count(), 2, "keys 1 and 2");
    }
}
