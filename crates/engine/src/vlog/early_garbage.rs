//! Garbage known before compaction counts it.
//!
//! A value file's garbage is counted exactly, but late: when a compaction drops the
//! overwritten pointer, which for a pointer in the last level can be most of a run after
//! the overwrite (measured in docs/lifetime.md: every policy then holds about twice the live
//! data during a run, and garbage-ratio triggers fire late). Flush already looks up each
//! key's previous write for placement; when the new write hides that write from every
//! reader, the record it points to is garbage as soon as that flush is installed (recorded
//! then, under the state lock, so a flush that fails records nothing). This module
//! remembers those records until compaction counts them (then they are forgotten, so
//! nothing is counted twice) or their file is gone; GC skips their tree lookups. It is
//! memory only: after a reopen, garbage is as counted.

use super::ValuePointer;
use parking_lot::Mutex;
use std::collections::HashMap;

/// Records known to be garbage that compaction has not counted yet, by file.
#[derive(Default)]
pub struct EarlyGarbage {
    files: Mutex<HashMap<u64, FileGarbage>>,
}

#[derive(Default)]
struct FileGarbage {
    bytes: u64,
    /// Record offset -> size.
    records: HashMap<u64, u32>,
}

impl EarlyGarbage {
    /// The record `r` (where it lives now) is garbage.
    pub fn record(&self, r: &ValuePointer) {
        let mut files = self.files.lock();
        let f = files.entry(r.file).or_default();
        if f.records.insert(r.offset, r.size).is_none() {
            f.bytes += u64::from(r.size);
        }
    }

    /// Compaction counted the records `counted` (where they live now): forget them.
    pub fn counted<'a>(&self, counted: impl IntoIterator<Item = &'a ValuePointer>) {
        let mut files = self.files.lock();
        for r in counted {
            if let Some(f) = files.get_mut(&r.file) {
                if let Some(size) = f.records.remove(&r.offset) {
                    f.bytes -= u64::from(size);
                    if f.records.is_empty() {
                        files.remove(&r.file);
                    }
                }
            }
        }
    }

    /// Whether the record `r` (where it lives now) is known to be garbage.
    pub fn contains(&self, r: &ValuePointer) -> bool {
        self.files
            .lock()
            .get(&r.file)
            .is_some_and(|f| f.records.contains_key(&r.offset))
    }

    /// Bytes of `file` known to be garbage and not counted yet.
    pub fn bytes(&self, file: u64) -> u64 {
        self.files.lock().get(&file).map_or(0, |f| f.bytes)
    }

    /// Forgets the files for which `live` is false (collected or dropped).
    pub fn retain(&self, live: impl Fn(u64) -> bool) {
        self.files.lock().retain(|&n, _| live(n));
    }

    /// Records remembered (for stats).
    pub fn len(&self) -> usize {
        self.files.lock().values().map(|f| f.records.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(file: u64, offset: u64, size: u32) -> ValuePointer {
        ValuePointer { file, offset, size }
    }

    #[test]
    fn remembers_until_counted_or_gone_without_counting_twice() {
        let g = EarlyGarbage::default();
        g.record(&p(1, 0, 100));
        g.record(&p(1, 100, 50));
        g.record(&p(1, 100, 50));
        g.record(&p(2, 0, 70));
        assert_eq!(g.bytes(1), 150);
        assert_eq!(g.len(), 3);
        assert!(g.contains(&p(1, 100, 50)) && !g.contains(&p(1, 50, 50)));
        // Compaction counts one of them (and one never recorded).
        g.counted(&[p(1, 0, 100), p(1, 400, 10)]);
        assert_eq!(g.bytes(1), 50);
        g.counted(&[p(1, 100, 50)]);
        assert_eq!(g.bytes(1), 0);
        // File 2 was collected.
        g.retain(|n| n != 2);
        assert_eq!(g.bytes(2), 0);
        assert!(g.is_empty());
    }
}
