//! Garbage known record by record.
//!
//! A value file's garbage is counted exactly, but late: when a compaction drops the
//! overwritten pointer, which for a pointer in the last level can be most of a run after
//! the overwrite (measured in docs/lifetime.md: every policy then holds about twice the live
//! data during a run, and garbage-ratio triggers fire late). Flush, or the job after it
//! (the superseded finder, [`super::superseded`]), looks up each key's previous write; when
//! the new write hides that write from every reader, the record it points to is garbage as
//! soon as that flush is installed. This module remembers those records ("early": not yet counted
//! in the file's garbage) and also the records compaction counts, by position, until their
//! file is gone. Knowing dead records by position is what makes GC cheap: a GC job skips
//! their tree lookups, and a file whose every record is known dead is released without
//! being read (docs/lifetime.md, "Garbage known by position"). It is memory only: after a
//! reopen, garbage is as counted, and GC looks records up again.
//!
//! Complete knowledge: where every flushed key's previous write is found (by the finder
//! after the flush, or by the flush's own lookups where the write path does not log
//! values), a file written since the database opened has all of its dead records known by
//! position, except those hidden by writes not found yet (in memtables, or in tables the
//! finder has not reached).
//! GC then keeps a record of such a file without looking it up ([`Coverage`]). Keeping a
//! dead record is safe (the index map sends no reader to it; it is counted when its
//! pointer is dropped), so a gap in the knowledge costs space, never data.
//!
//! Memory: one map entry (about 16 bytes) per garbage record still on disk, so it is
//! bounded by the space-amplification target (at 1.5 and 4 KiB values, about 2 MiB per GiB
//! of live data).

use crate::version::Version;
use crate::vlog::ValuePointer;
use parking_lot::Mutex;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

/// Marks a record compaction counted (the high bit of its stored size; record sizes are
/// far below 2 GiB).
const COUNTED: u32 = 1 << 31;

/// Records known to be garbage, by file.
#[derive(Default)]
pub struct EarlyGarbage {
    files: Mutex<HashMap<u64, FileGarbage>>,
    /// Which files have every dead record known (as far as written writes were found).
    pub coverage: Coverage,
}

/// The value files whose dead records are all known by position, but for those hidden by
/// writes the finder has not reached yet. Nothing is covered until [`Coverage::cover_from`]
/// is called (after recovery, where every flush's hidden records are found); after a reopen the
/// knowledge is gone, so only files created since are covered.
pub struct Coverage {
    /// Files numbered from here on are covered, unless in `uncovered`.
    from: AtomicU64,
    /// Files numbered from `from` on holding records of files that are not covered (GC
    /// outputs of uncovered inputs).
    uncovered: Mutex<HashSet<u64>>,
}

impl Default for Coverage {
    fn default() -> Self {
        Coverage {
            from: AtomicU64::new(u64::MAX),
            uncovered: Mutex::new(HashSet::new()),
        }
    }
}

impl Coverage {
    /// Files numbered `next` and above (all created from now on) are covered.
    pub fn cover_from(&self, next: u64) {
        self.from.store(next, Ordering::Release);
    }

    /// Writes were flushed whose hidden records will not be found (their finder gave
    /// up): no file numbered below `next` (every file that could hold such a record) is
    /// covered any more.
    pub fn lose_below(&self, next: u64) {
        self.from.fetch_max(next, Ordering::AcqRel);
    }

    pub fn covers(&self, file: u64) -> bool {
        file >= self.from.load(Ordering::Acquire) && !self.uncovered.lock().contains(&file)
    }

    /// GC wrote `outputs` from `sources`: they are covered only if every source is.
    pub fn inherit(&self, sources: &[u64], outputs: &[u64]) {
        if !sources.iter().all(|&s| self.covers(s)) {
            self.uncovered.lock().extend(outputs);
        }
    }
}

#[derive(Default)]
struct FileGarbage {
    /// Bytes and records found early and not counted by compaction yet.
    early_bytes: u64,
    early_records: u64,
    /// Record offset -> size, with [`COUNTED`] set once compaction counted it.
    records: HashMap<u64, u32>,
}

impl EarlyGarbage {
    /// The record `r` (where it lives now) is garbage, found before compaction counts it.
    pub fn record(&self, r: &ValuePointer) {
        let mut files = self.files.lock();
        let f = files.entry(r.file).or_default();
        // A record known already (found twice, or counted) stays as it is.
        if let Entry::Vacant(e) = f.records.entry(r.offset) {
            e.insert(r.size);
            f.early_bytes += u64::from(r.size);
            f.early_records += 1;
        }
    }

    /// A flush that hid the records of `superseded` (pointers of the keys' previous
    /// writes) from every reader is installed: they are garbage (where `v` says they live).
    pub fn record_superseded(&self, v: &Version, superseded: &[ValuePointer]) {
        for r in superseded.iter().filter_map(|p| v.resolve(p)) {
            self.record(&r);
        }
    }

    /// Compaction counted the records `counted` (where they live now) in their files'
    /// garbage: no longer early, still known.
    pub fn counted<'a>(&self, counted: impl IntoIterator<Item = &'a ValuePointer>) {
        let mut files = self.files.lock();
        for r in counted {
            let f = files.entry(r.file).or_default();
            let v = f.records.entry(r.offset).or_insert(r.size | COUNTED);
            if *v & COUNTED == 0 {
                f.early_bytes -= u64::from(*v);
                f.early_records -= 1;
                *v |= COUNTED;
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
        self.files.lock().get(&file).map_or(0, |f| f.early_bytes)
    }

    /// Records of `file` known to be garbage and not counted yet.
    pub fn records(&self, file: u64) -> u64 {
        self.files.lock().get(&file).map_or(0, |f| f.early_records)
    }

    /// The parts of `file` (record bytes `start..end`) that may hold live records: what
    /// lies between the records known dead, with dead gaps shorter than `min_gap` read
    /// through (one larger read costs less than two requests). Sorted, disjoint.
    pub fn live_extents(&self, file: u64, start: u64, end: u64, min_gap: u64) -> Vec<(u64, u64)> {
        let mut dead: Vec<(u64, u64)> = self.files.lock().get(&file).map_or_else(Vec::new, |f| {
            f.records
                .iter()
                .map(|(&o, &s)| (o, o + u64::from(s & !COUNTED)))
                .collect()
        });
        dead.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut at = start;
        for (from, to) in dead.into_iter().chain([(end, end)]) {
            if from > at {
                match out.last_mut() {
                    Some(last) if at - last.1 < min_gap => last.1 = from,
                    _ => out.push((at, from)),
                }
            }
            at = at.max(to);
        }
        out
    }

    /// Forgets the files for which `live` is false (collected or dropped).
    pub fn retain(&self, live: impl Fn(u64) -> bool) {
        self.files.lock().retain(|&n, _| live(n));
        self.coverage.uncovered.lock().retain(|&n| live(n));
    }

    /// The records of `file` known to be garbage (early or counted), where they live now.
    pub fn records_of(&self, file: u64) -> Vec<ValuePointer> {
        self.files.lock().get(&file).map_or_else(Vec::new, |f| {
            f.records
                .iter()
                .map(|(&offset, &s)| ValuePointer {
                    file,
                    offset,
                    size: s & !COUNTED,
                })
                .collect()
        })
    }

    /// Records found early and not counted yet (for stats).
    pub fn len(&self) -> usize {
        self.files
            .lock()
            .values()
            .map(|f| f.early_records as usize)
            .sum()
    }

    /// Records known to be garbage, counted or not (for stats).
    pub fn known(&self) -> usize {
        self.files.lock().values().map(|f| f.records.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes its maps hold (their slots: entry and control byte).
    pub fn memory(&self) -> usize {
        const SLOT: usize = std::mem::size_of::<(u64, u32)>() + 1;
        self.files
            .lock()
            .values()
            .map(|f| f.records.capacity() * SLOT + std::mem::size_of::<FileGarbage>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(file: u64, offset: u64, size: u32) -> ValuePointer {
        ValuePointer { file, offset, size }
    }

    #[test]
    fn remembers_records_counted_or_not_without_counting_twice() {
        let g = EarlyGarbage::default();
        g.record(&p(1, 0, 100));
        g.record(&p(1, 100, 50));
        g.record(&p(1, 100, 50));
        g.record(&p(2, 0, 70));
        assert_eq!(g.bytes(1), 150);
        assert_eq!(g.records(1), 2);
        assert_eq!(g.len(), 3);
        assert!(g.contains(&p(1, 100, 50)) && !g.contains(&p(1, 50, 50)));
        // Compaction counts one of them, and one never found early.
        g.counted(&[p(1, 0, 100), p(1, 400, 10)]);
        assert_eq!((g.bytes(1), g.records(1)), (50, 1));
        // Both stay known, so GC skips them; neither is early any more.
        assert!(g.contains(&p(1, 0, 100)) && g.contains(&p(1, 400, 10)));
        // Found again after compaction counted it: still not early (not counted twice).
        g.record(&p(1, 0, 100));
        assert_eq!((g.bytes(1), g.records(1)), (50, 1));
        g.counted(&[p(1, 100, 50), p(1, 100, 50)]);
        assert_eq!((g.bytes(1), g.records(1)), (0, 0));
        assert_eq!(g.known(), 4);
        // File 2 was collected.
        g.retain(|n| n != 2);
        assert_eq!(g.bytes(2), 0);
        assert!(!g.contains(&p(2, 0, 70)));
        assert!(g.is_empty());
        assert_eq!(g.known(), 3);
    }

    #[test]
    fn coverage_starts_empty_is_inherited_and_only_shrinks() {
        let g = EarlyGarbage::default();
        let c = &g.coverage;
        assert!(!c.covers(1) && !c.covers(u64::MAX - 1));
        c.cover_from(10);
        assert!(!c.covers(9) && c.covers(10) && c.covers(11));
        // GC outputs are covered only if all their inputs are.
        c.inherit(&[10, 11], &[20]);
        c.inherit(&[9, 12], &[21]);
        assert!(c.covers(20) && !c.covers(21) && c.covers(22));
        // A finder gave up: every file existing then is no longer covered.
        c.lose_below(15);
        assert!(!c.covers(12) && c.covers(15) && c.covers(20));
        c.lose_below(12);
        assert!(!c.covers(14));
        // A collected output is forgotten; its number is never reused.
        g.retain(|n| n != 21);
        assert!(c.uncovered.lock().is_empty());
    }

    #[test]
    fn records_of_a_file_are_where_they_live() {
        let g = EarlyGarbage::default();
        g.record(&p(1, 0, 100));
        g.counted(&[p(1, 100, 50)]);
        let mut r = g.records_of(1);
        r.sort_by_key(|p| p.offset);
        assert_eq!(r, vec![p(1, 0, 100), p(1, 100, 50)]);
        assert!(g.records_of(2).is_empty());
    }

    #[test]
    fn live_extents_are_the_gaps_between_dead_records() {
        let g = EarlyGarbage::default();
        // Records of 100 bytes from offset 10: dead at 110, 210 (counted), 410, 510, 610.
        g.record(&p(1, 110, 100));
        g.counted(&[p(1, 210, 100)]);
        for o in [410, 510, 610] {
            g.record(&p(1, o, 100));
        }
        assert_eq!(
            g.live_extents(1, 10, 910, 1),
            vec![(10, 110), (310, 410), (710, 910)]
        );
        // A dead gap shorter than `min_gap` is read through.
        assert_eq!(g.live_extents(1, 10, 910, 201), vec![(10, 410), (710, 910)]);
        assert_eq!(g.live_extents(1, 10, 910, 1000), vec![(10, 910)]);
        // All dead, or nothing known.
        g.record(&p(2, 10, 100));
        assert!(g.live_extents(2, 10, 110, 1).is_empty());
        assert_eq!(g.live_extents(3, 10, 110, 1), vec![(10, 110)]);
    }
}
