use super::*;
use crate::internal_key::{cmp_internal, InternalKey};
use crate::io::IoCause;
use proptest::prelude::*;
use std::cmp::Ordering;

fn child_entries() -> impl Strategy<Value = Entries> {
    let entry = (
        prop::collection::vec(prop::sample::select(b"abc".to_vec()), 1..4),
        0u64..8,
        0u8..3,
    );
    prop::collection::vec(entry, 0..40).prop_map(|raw| {
        let set: std::collections::BTreeSet<InternalKey> = raw
            .into_iter()
            .map(|(uk, seq, k)| InternalKey::new(&uk, seq, ValueKind::from_u8(k).unwrap()))
            .collect();
        set.into_iter().map(|k| (k.0, Vec::new())).collect()
    })
}

/// Tags each value with its child index so ties can be checked.
fn tagged(children: &[Entries]) -> Vec<Entries> {
    children
        .iter()
        .enumerate()
        .map(|(i, c)| c.iter().map(|(k, _)| (k.clone(), vec![i as u8])).collect())
        .collect()
}

/// The reference answer: every entry, by internal key, then by child index.
fn expected(children: &[Entries]) -> Entries {
    let mut all: Vec<(usize, Vec<u8>, Vec<u8>)> = children
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.iter().map(move |(k, v)| (i, k.clone(), v.clone())))
        .collect();
    all.sort_by(|a, b| cmp_internal(&a.1, &b.1).then(a.0.cmp(&b.0)));
    all.into_iter().map(|(_, k, v)| (k, v)).collect()
}

fn merging(children: &[Entries]) -> MergingIterator {
    MergingIterator::new(
        children
            .iter()
            .map(|c| Box::new(VecIterator::new(c.clone())) as Box<dyn InternalIterator>)
            .collect(),
    )
}

#[test]
fn equal_keys_come_newest_child_first() {
    let k = make_internal_key(b"k", 5, ValueKind::Value);
    let children = tagged(&[vec![(k.clone(), vec![])], vec![(k.clone(), vec![])], vec![]]);
    let mut m = merging(&children);
    m.seek_to_first().unwrap();
    assert_eq!(
        collect(&mut m).unwrap(),
        vec![(k.clone(), vec![0]), (k, vec![1])]
    );
    let mut empty = MergingIterator::new(Vec::new());
    empty.seek_to_first().unwrap();
    assert!(!empty.valid());
    empty.next().unwrap();
}

#[test]
fn merges_table_iterators() {
    let all = simple_entries(300);
    let (even, odd): (Entries, Entries) = all.iter().cloned().partition(|(k, _)| k[9] % 2 == 0);
    let open = |e: &Entries| {
        let (f, _) = build_table(e, TableOptions::new().block_size(200));
        Table::open(f.reader(), 1, None).unwrap()
    };
    let (t1, t2) = (open(&even), open(&odd));
    let mut m = MergingIterator::new(vec![
        Box::new(t1.iter(IoCause::ClientRead)),
        Box::new(t2.iter(IoCause::ClientRead)),
    ]);
    m.seek_to_first().unwrap();
    assert_eq!(collect(&mut m).unwrap(), all);
    m.seek(&all[150].0).unwrap();
    assert_eq!(collect(&mut m).unwrap(), all[150..].to_vec());
}

proptest! {
    #[test]
    fn merge_matches_a_sorted_merge(
        raw in prop::collection::vec(child_entries(), 0..6),
        target in (prop::collection::vec(prop::sample::select(b"abcd".to_vec()), 0..4), 0u64..9),
    ) {
        let children = tagged(&raw);
        let want = expected(&children);
        let mut m = merging(&children);
        m.seek_to_first().unwrap();
        prop_assert_eq!(&collect(&mut m).unwrap(), &want);

        let t = make_internal_key(&target.0, target.1, crate::internal_key::KIND_SEEK);
        m.seek(&t).unwrap();
        let rest: Entries = want
            .into_iter()
            .filter(|(k, _)| cmp_internal(k, &t) != Ordering::Less)
            .collect();
        prop_assert_eq!(collect(&mut m).unwrap(), rest);
    }
}

proptest! {
    /// Walks both ways with turns and seeks from anywhere, over children that share
    /// internal keys: the reverse order is the exact reverse of the forward one.
    #[test]
    fn merge_walks_both_ways_like_a_sorted_merge(
        raw in prop::collection::vec(child_entries(), 0..5),
        moves in super::moves(b"abcd", 9),
    ) {
        let children = tagged(&raw);
        let want = expected(&children);
        let mut m = merging(&children);
        super::check_walk(&mut m, &want, &moves);
    }
}
