//! Table-level tests: round trips against a model, cache interplay, corruption handling,
//! and the merging iterator.

mod compression;
mod corruption;
mod mem_file;
mod merge;
mod table;

use super::*;
use crate::internal_key::{make_internal_key, ValueKind};
use mem_file::MemFile;

pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

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

/// A move of an iterator, for walks checked against a model ([`check_walk`]).
#[derive(Clone, Debug)]
pub(crate) enum Move {
    First,
    Last,
    Seek(Vec<u8>),
    SeekForPrev(Vec<u8>),
    Next,
    Prev,
}

/// Random moves, seeks among internal keys of user keys over `alphabet` with sequence
/// numbers below `max_seq`, and steps both ways (several in a row, and turns).
pub(crate) fn moves(
    alphabet: &'static [u8],
    max_seq: u64,
) -> impl proptest::strategy::Strategy<Value = Vec<Move>> {
    use proptest::prelude::*;
    let target = (
        prop::collection::vec(prop::sample::select(alphabet), 0..4),
        0..max_seq,
        0u8..5,
    )
        .prop_map(|(uk, seq, k)| make_internal_key(&uk, seq, ValueKind::from_u8(k).unwrap()));
    let m = prop_oneof![
        1 => Just(Move::First),
        1 => Just(Move::Last),
        2 => target.clone().prop_map(Move::Seek),
        2 => target.prop_map(Move::SeekForPrev),
        4 => Just(Move::Next),
        4 => Just(Move::Prev),
    ];
    prop::collection::vec(m, 1..60)
}

/// Applies `moves` to `it` and to a position in `want` (every entry the iterator holds,
/// in its order), checking after each that both stand on the same entry or both are
/// invalid. A step from an invalid position is not made (it means nothing).
pub(crate) fn check_walk(it: &mut dyn InternalIterator, want: &Entries, moves: &[Move]) {
    use crate::internal_key::cmp_internal;
    let mut at: Option<usize> = None;
    for (n, m) in moves.iter().enumerate() {
        match m {
            Move::First => {
                it.seek_to_first().unwrap();
                at = (!want.is_empty()).then_some(0);
            }
            Move::Last => {
                it.seek_to_last().unwrap();
                at = want.len().checked_sub(1);
            }
            Move::Seek(t) => {
                it.seek(t).unwrap();
                let i = want.partition_point(|(k, _)| cmp_internal(k, t).is_lt());
                at = (i < want.len()).then_some(i);
            }
            Move::SeekForPrev(t) => {
                it.seek_for_prev(t).unwrap();
                let i = want.partition_point(|(k, _)| cmp_internal(k, t).is_le());
                at = i.checked_sub(1);
            }
            Move::Next => {
                let Some(i) = at else { continue };
                it.next().unwrap();
                at = (i + 1 < want.len()).then_some(i + 1);
            }
            Move::Prev => {
                let Some(i) = at else { continue };
                it.prev().unwrap();
                at = i.checked_sub(1);
            }
        }
        match at {
            None => assert!(!it.valid(), "move {n} ({m:?}): valid, the model is not"),
            Some(i) => {
                assert!(it.valid(), "move {n} ({m:?}): invalid, the model is at {i}");
                assert_eq!(
                    (it.key(), it.value()),
                    (want[i].0.as_slice(), want[i].1.as_slice()),
                    "move {n} ({m:?}), model at {i}"
                );
            }
        }
    }
}
