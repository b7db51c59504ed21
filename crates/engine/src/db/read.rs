//! Point reads: memtable, immutable memtables (newest first), then the levels; a pointer is
//! followed into its value file.

use super::inner::{Inner, ReadView};
use super::Snapshot;
use crate::error::{Error, Result};
use crate::internal_key::{SeqNo, ValueKind};
use crate::io::IoCause;
use crate::memtable::ValueCopy;
use crate::stats::EngineCounters;
use crate::version::{Found, Version};
use crate::vlog::{BlobFile, ValuePointer};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) fn get(inner: &Inner, key: &[u8], snap: Option<&Snapshot>) -> Result<Option<Vec<u8>>> {
    let Some((view, found)) = find(inner, key, snap, ValueCopy::Whole)? else {
        return Ok(None);
    };
    let pinned = snap.map(|s| s.blobs());
    resolve(inner, &view.version, pinned, key, found)
}

/// Whether `key` has a live value, found as [`get`] finds it but without following a
/// pointer into its value file.
pub(crate) fn contains(inner: &Inner, key: &[u8]) -> Result<bool> {
    let found = find(inner, key, None, ValueCopy::ExpiryOnly)?;
    Ok(found.is_some_and(|(_, f)| f.kind != ValueKind::Deletion))
}

/// The newest entry of `key` visible at `snap` (or now), with the view it was found in.
fn find(
    inner: &Inner,
    key: &[u8],
    snap: Option<&Snapshot>,
    copy: ValueCopy,
) -> Result<Option<(Arc<ReadView>, Found)>> {
    EngineCounters::add(&inner.counters.gets, 1);
    let view = ReadView::take(inner);
    let seq = snap.map_or_else(|| inner.visible_seq.load(Ordering::Acquire), |s| s.seq());
    let misses = crate::cache::thread_misses();
    let found = view.lookup_as(key, seq, inner.now_ms(), copy);
    let missed = crate::cache::thread_misses() != misses;
    inner.warming.record_read(key, missed);
    Ok(found?.map(|f| (view, f)))
}

/// Turns a found entry into the user's value.
pub(crate) fn resolve(
    inner: &Inner,
    version: &Version,
    pinned: Option<&BTreeMap<u64, Arc<BlobFile>>>,
    key: &[u8],
    found: Found,
) -> Result<Option<Vec<u8>>> {
    match found.kind {
        ValueKind::Deletion => Ok(None),
        ValueKind::Value => Ok(Some(found.value)),
        ValueKind::Pointer => {
            let (ptr, _) = ValuePointer::decode(&inner.dir, &found.value)?;
            read_pointer(inner, version, pinned, key, &ptr).map(Some)
        }
        ValueKind::ExpiringValue | ValueKind::ExpiringPointer => Err(Error::corruption(
            &inner.dir,
            "an expiring entry reached a read without its expiry split off",
        )),
    }
}

/// Reads the value `ptr` names, where [`locate`] finds it.
pub(crate) fn read_pointer(
    inner: &Inner,
    version: &Version,
    pinned: Option<&BTreeMap<u64, Arc<BlobFile>>>,
    key: &[u8],
    ptr: &ValuePointer,
) -> Result<Vec<u8>> {
    let (file, at) = locate(inner, version, pinned, ptr)?;
    file.read(&at, key, IoCause::ClientRead)
}

/// Where the value `ptr` names is: in its file if live, else where the index maps moved
/// it, else (for a snapshot's read) in a value file the snapshot pinned or one kept for
/// snapshots.
pub(crate) fn locate(
    inner: &Inner,
    version: &Version,
    pinned: Option<&BTreeMap<u64, Arc<BlobFile>>>,
    ptr: &ValuePointer,
) -> Result<(Arc<BlobFile>, ValuePointer)> {
    if let Some(r) = version.resolve(ptr) {
        if let Some(f) = version.blobs.get(&r.file) {
            return Ok((f.clone(), r));
        }
    }
    let file = match pinned {
        Some(p) => p
            .get(&ptr.file)
            .cloned()
            .or_else(|| inner.kept_for_snapshot(ptr.file)),
        None => None,
    }
    .ok_or_else(|| {
        Error::corruption(
            &inner.dir,
            format!("value pointer to value file {} which is not live", ptr.file),
        )
    })?;
    Ok((file, *ptr))
}

/// Whether the tree, as `view` sees it at `seq`, still points at the value record `ptr`
/// (directly or through index maps): GC's validity test. An expired entry points nowhere:
/// GC never copies an expired value, it is garbage.
pub(crate) fn points_at(
    inner: &Inner,
    view: &ReadView,
    key: &[u8],
    seq: SeqNo,
    ptr: &ValuePointer,
) -> Result<bool> {
    found_points_at(inner, view, &view.lookup(key, seq, inner.now_ms())?, ptr)
}

/// [`points_at`] for an entry already looked up.
pub(crate) fn found_points_at(
    inner: &Inner,
    view: &ReadView,
    found: &Option<Found>,
    ptr: &ValuePointer,
) -> Result<bool> {
    Ok(match found {
        Some(f) if f.kind == ValueKind::Pointer => {
            let (p, _) = ValuePointer::decode(&inner.dir, &f.value)?;
            view.version.resolve(&p).as_ref() == Some(ptr)
        }
        _ => false,
    })
}

/// Whether some live snapshot (by sequence number) still reads the record `ptr` of `key`.
pub(crate) fn needed_by_snapshot(
    inner: &Inner,
    view: &ReadView,
    key: &[u8],
    snapshots: &[SeqNo],
    ptr: &ValuePointer,
) -> Result<bool> {
    for &s in snapshots {
        if points_at(inner, view, key, s, ptr)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the entry found for a key is a pointer to `old` (as written, not resolved: a
/// relocation replaces exactly the pointer GC found), and if so its expiry time, which the
/// pointer written back keeps (`None` if it is not).
pub(crate) fn points_at_old(
    inner: &Inner,
    found: &Option<Found>,
    old: &ValuePointer,
) -> Result<Option<Option<u64>>> {
    Ok(match found {
        Some(f)
            if f.kind == ValueKind::Pointer
                && ValuePointer::decode(&inner.dir, &f.value)?.0 == *old =>
        {
            Some(f.expire_at)
        }
        _ => None,
    })
}
