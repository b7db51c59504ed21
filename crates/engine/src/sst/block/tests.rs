use super::*;
use crate::internal_key::{cmp_internal, make_internal_key, InternalKey, ValueKind};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

fn ikey(user: &str, seq: u64) -> Vec<u8> {
    make_internal_key(user.as_bytes(), seq, ValueKind::Value)
}

fn build(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Arc<Block> {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v) in entries {
        b.add(k, v);
    }
    Arc::new(Block::new(b.finish()).unwrap())
}

fn collect(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    out
}

#[test]
fn prefixes_are_shared_and_restarts_placed_every_interval() {
    let entries: Vec<_> = (0..40)
        .map(|i| (ikey(&format!("common-prefix-{i:04}"), 1), vec![i as u8]))
        .collect();
    let block = build(&entries, 16);
    assert_eq!(block.num_restarts(), 3);
    assert_eq!(block.num_entries(), 40);
    let raw: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert!(block.data().len() < raw, "prefix compression saved nothing");
    let mut it = block.iter();
    it.seek_to_first();
    assert_eq!(collect(&mut it), entries);
}

#[test]
fn newer_versions_of_a_key_come_first_and_seek_finds_visible_one() {
    let entries = vec![
        (ikey("a", 9), b"a9".to_vec()),
        (ikey("a", 5), b"a5".to_vec()),
        (ikey("a", 2), b"a2".to_vec()),
        (ikey("b", 1), b"b1".to_vec()),
    ];
    let block = build(&entries, 2);
    let mut it = block.iter();
    it.seek(&make_internal_key(b"a", 6, crate::internal_key::KIND_SEEK));
    assert_eq!(it.value(), b"a5");
    it.seek(&make_internal_key(b"a", 1, crate::internal_key::KIND_SEEK));
    assert_eq!(it.value(), b"b1");
    it.seek(&ikey("c", 100));
    assert!(!it.valid());
    assert_eq!(it.key(), b"");
}

#[test]
fn empty_block_round_trips() {
    let block = build(&[], 16);
    assert!(block.is_empty());
    let mut it = block.iter();
    it.seek_to_first();
    assert!(!it.valid());
    it.seek(&ikey("x", 1));
    assert!(!it.valid());
}

#[test]
fn malformed_blocks_are_rejected() {
    let good = {
        let mut b = BlockBuilder::new(2);
        for i in 0..5 {
            b.add(&ikey(&format!("key{i}"), 1), b"value");
        }
        b.finish()
    };
    assert!(Block::new(good.clone()).is_ok());
    assert!(Block::new(vec![]).is_err());
    assert!(Block::new(vec![1, 0, 0]).is_err());
    // Claims more restart points than fit.
    assert!(Block::new(vec![0xff, 0xff, 0, 0]).is_err());
    // Every truncation of a valid block is either rejected or parses safely.
    for cut in 0..good.len() {
        if let Ok(b) = Block::new(good[..cut].to_vec()) {
            let mut it = Arc::new(b).iter();
            it.seek_to_first();
            let _ = collect(&mut it);
        }
    }
    // A key shorter than an internal key trailer.
    let mut short = vec![0, 3, 0];
    short.extend_from_slice(b"abc");
    short.extend_from_slice(&0u32.to_le_bytes());
    short.extend_from_slice(&1u32.to_le_bytes());
    assert!(Block::new(short).is_err());
}

/// Sorted, distinct internal keys with long shared prefixes and several versions per key.
fn sorted_entries(max: usize) -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>)>> {
    let entry = (
        prop::collection::vec(prop::sample::select(b"abc".to_vec()), 0..6),
        0u64..50,
        0u8..3,
        prop::collection::vec(any::<u8>(), 0..20),
    );
    prop::collection::vec(entry, 0..max).prop_map(|raw| {
        let map: BTreeMap<InternalKey, Vec<u8>> = raw
            .into_iter()
            .map(|(uk, seq, kind, v)| {
                let kind = ValueKind::from_u8(kind).unwrap();
                (InternalKey::new(&uk, seq, kind), v)
            })
            .collect();
        map.into_iter().map(|(k, v)| (k.0, v)).collect()
    })
}

fn arbitrary_target() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(prop::sample::select(b"abcd".to_vec()), 0..7),
        0u64..55,
        0u8..3,
    )
        .prop_map(|(uk, seq, k)| make_internal_key(&uk, seq, ValueKind::from_u8(k).unwrap()))
}

proptest! {
    #[test]
    fn round_trip_and_seek_match_a_sorted_vec(
        entries in sorted_entries(200),
        interval in 1usize..20,
        targets in prop::collection::vec(arbitrary_target(), 1..30),
    ) {
        let block = build(&entries, interval);
        let mut it = block.iter();
        it.seek_to_first();
        prop_assert_eq!(collect(&mut it), entries.clone());
        for t in &targets {
            let want = entries.iter().find(|(k, _)| cmp_internal(k, t) != std::cmp::Ordering::Less);
            it.seek(t);
            match want {
                Some((k, v)) => {
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), &k[..]);
                    prop_assert_eq!(it.value(), &v[..]);
                }
                None => prop_assert!(!it.valid()),
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(b) = Block::new(bytes) {
            let b = Arc::new(b);
            let mut it = b.iter();
            it.seek_to_first();
            let n = collect(&mut it).len();
            prop_assert_eq!(n, b.num_entries());
            it.seek(&ikey("b", 3));
        }
    }
}
