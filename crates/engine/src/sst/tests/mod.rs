//! Table-level tests: round trips against a model, cache interplay, corruption handling,
//! and the merging iterator.

mod compression;
mod corruption;
mod merge;
mod table;

use super::test_util::MemFile;
use super::*;
use crate::types::{make_internal_key, ValueKind};

pub(super) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Writes `entries` (sorted) to an in-memory table file.
pub(super) fn build_table(entries: &Entries, opts: TableOptions) -> (MemFile, TableProperties) {
    let file = MemFile::new("test/000042.sst");
    let mut b = TableBuilder::new(Box::new(file.clone()), opts);
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    let props = b.finish().unwrap();
    (file, props)
}

/// `n` entries, user keys `key-000000..`, one version each, all values.
pub(super) fn simple_entries(n: usize) -> Entries {
    (0..n)
        .map(|i| {
            (
                make_internal_key(
                    format!("key-{i:06}").as_bytes(),
                    i as u64 + 1,
                    ValueKind::Value,
                ),
                format!("value-{i}").repeat(3).into_bytes(),
            )
        })
        .collect()
}

pub(super) fn collect(it: &mut dyn InternalIterator) -> crate::Result<Entries> {
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}
