//! Garbage counted by position: the records of dropped pointers, summed by the value file
//! that holds them, as a version edit's `blob_garbage` carries them. Flush and compaction
//! count the pointers they drop, GC the copies whose key moved on while it ran.

use crate::version::Version;
use crate::vlog::ValuePointer;
use std::collections::BTreeMap;

/// Charges dropped pointers to the files that hold their records under `v`:
/// (file, bytes, entries). A record GC did not keep (it was garbage when its file was
/// collected) is charged to nothing.
pub fn garbage_by_file(v: &Version, dropped: &[ValuePointer]) -> Vec<(u64, u64, u64)> {
    garbage_where(dropped, |p| v.resolve(p))
}

/// Charges each dropped pointer to the record `locate` finds for it, if any, summed by file.
pub fn garbage_where(
    dropped: &[ValuePointer],
    locate: impl Fn(&ValuePointer) -> Option<ValuePointer>,
) -> Vec<(u64, u64, u64)> {
    let mut g: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for p in dropped {
        if let Some(r) = locate(p) {
            let e = g.entry(r.file).or_default();
            e.0 += r.size as u64;
            e.1 += 1;
        }
    }
    g.into_iter().map(|(n, (b, e))| (n, b, e)).collect()
}
