use super::*;
use crate::cache::BlockCache;
use crate::internal_key::{cmp_internal, user_key, InternalKey, KIND_SEEK};
use crate::io::IoCause;
use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

fn small_blocks() -> TableOptions {
    TableOptions::new().block_size(256)
}

#[test]
fn round_trip_with_properties() {
    let mut entries = simple_entries(1000);
    // Mix in tombstones and pointers for the property counts.
    entries.push((
        make_internal_key(b"zz-del", 5000, ValueKind::Deletion),
        vec![],
    ));
    entries.push((
        make_internal_key(b"zz-del", 4000, ValueKind::Pointer),
        vec![1; 12],
    ));
    let (file, props) = build_table(&entries, small_blocks());
    assert_eq!(*file.syncs.lock(), 1);
    assert_eq!(props.file_size, file.bytes().len() as u64);
    assert_eq!(props.num_entries, 1002);
    assert_eq!((props.num_deletions, props.num_pointers), (1, 1));
    assert_eq!(props.smallest_key, entries[0].0);
    assert_eq!(props.largest_key, entries[1001].0);
    assert_eq!((props.smallest_seq, props.largest_seq), (1, 5000));
    let raw_keys: usize = entries.iter().map(|(k, _)| k.len()).sum();
    assert_eq!(props.raw_key_bytes, raw_keys as u64);
    assert!(props.num_data_blocks > 10);

    let table = Table::open(file.reader(), 42, None).unwrap();
    assert_eq!(table.properties(), &props);
    assert_eq!(table.file_number(), 42);
    let mut it = table.iter(IoCause::ClientRead);
    it.seek_to_first().unwrap();
    assert_eq!(collect(&mut it).unwrap(), entries);
    for (k, v) in &entries {
        let got = table.get(k, IoCause::ClientRead).unwrap();
        assert_eq!(got, Some((k.clone(), v.clone())));
    }
}

#[test]
fn get_returns_the_visible_version_only_for_the_same_user_key() {
    let entries = vec![
        (
            make_internal_key(b"a", 10, ValueKind::Value),
            b"a10".to_vec(),
        ),
        (make_internal_key(b"a", 4, ValueKind::Deletion), vec![]),
        (make_internal_key(b"b", 7, ValueKind::Value), b"b7".to_vec()),
    ];
    let (file, _) = build_table(&entries, TableOptions::new());
    let t = Table::open(file.reader(), 1, None).unwrap();
    let get = |k: &[u8], seq| t.get(&make_internal_key(k, seq, KIND_SEEK), IoCause::ClientRead);
    assert_eq!(get(b"a", 20).unwrap().unwrap().1, b"a10");
    assert_eq!(get(b"a", 5).unwrap().unwrap().0, entries[1].0);
    assert_eq!(
        get(b"a", 3).unwrap(),
        None,
        "next entry is another user key"
    );
    assert_eq!(get(b"b", 6).unwrap(), None);
    assert_eq!(get(b"c", 99).unwrap(), None);
}

#[test]
fn bloom_filter_saves_reads_and_is_counted() {
    let entries = simple_entries(2000);
    let (file, _) = build_table(&entries, small_blocks());
    let t = Table::open(file.reader(), 1, None).unwrap();
    assert!(t.may_contain(b"key-000007"));
    for i in 0..1000 {
        let k = make_internal_key(format!("absent-{i}").as_bytes(), 1 << 40, KIND_SEEK);
        assert_eq!(t.get(&k, IoCause::ClientRead).unwrap(), None);
    }
    let s = t.stats().snapshot();
    assert_eq!(s.filter_checked, 1000);
    assert_eq!(s.filter_useful + s.filter_false_positive, 1000);
    assert!(s.filter_useful > 950, "{s:?}");
    assert!(s.data_block_reads <= s.filter_false_positive);

    // Without a filter every lookup reads a block.
    let (file, _) = build_table(&entries, small_blocks().bloom_bits_per_key(0));
    let t = Table::open(file.reader(), 2, None).unwrap();
    assert!(t.may_contain(b"anything"));
    let k = make_internal_key(b"key-0000005", 1 << 40, KIND_SEEK);
    assert_eq!(t.get(&k, IoCause::ClientRead).unwrap(), None);
    assert_eq!(t.stats().snapshot().filter_checked, 0);
    assert_eq!(t.stats().snapshot().data_block_reads, 1);
}

#[test]
fn empty_table_round_trips() {
    let (file, props) = build_table(&vec![], TableOptions::new());
    assert_eq!(props.num_entries, 0);
    let t = Table::open(file.reader(), 1, None).unwrap();
    let mut it = t.iter(IoCause::ClientRead);
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek(&make_internal_key(b"a", 1, KIND_SEEK)).unwrap();
    assert!(!it.valid());
    assert_eq!(
        t.get(&make_internal_key(b"a", 1, KIND_SEEK), IoCause::ClientRead)
            .unwrap(),
        None
    );
}

#[test]
fn client_reads_fill_the_cache_and_compaction_reads_do_not() {
    let entries = simple_entries(500);
    let (file, props) = build_table(&entries, small_blocks());
    let cache = BlockCache::new(1 << 20);
    let t = Table::open(file.reader(), 9, Some(cache.clone())).unwrap();

    let mut it = t.iter(IoCause::Compaction);
    it.seek_to_first().unwrap();
    assert_eq!(collect(&mut it).unwrap().len(), 500);
    assert!(cache.is_empty(), "compaction reads must not fill the cache");

    let mut it = t.iter(IoCause::ClientRead);
    it.seek_to_first().unwrap();
    assert_eq!(collect(&mut it).unwrap().len(), 500);
    assert_eq!(cache.len() as u64, props.num_data_blocks);
    let reads = t.stats().snapshot().data_block_reads;

    // Now every read hits, whatever its cause.
    let mut it = t.iter(IoCause::Compaction);
    it.seek_to_first().unwrap();
    collect(&mut it).unwrap();
    assert_eq!(
        t.get(&entries[77].0, IoCause::ClientRead)
            .unwrap()
            .unwrap()
            .1,
        entries[77].1
    );
    assert_eq!(t.stats().snapshot().data_block_reads, reads);
    assert_eq!(cache.erase_file(9) as u64, props.num_data_blocks);
}

#[test]
fn block_sink_warms_the_cache_while_writing() {
    let entries = simple_entries(300);
    let cache = BlockCache::new(1 << 20);
    let file = MemFile::new("warm.sst");
    let mut b = TableBuilder::new(Box::new(file.clone()), small_blocks());
    let sink = cache.clone();
    b.set_block_sink(Box::new(move |offset, block| {
        sink.insert(5, offset, Arc::clone(block))
    }));
    for (k, v) in &entries {
        b.add(k, v).unwrap();
        assert!(b.estimated_size() > 0);
    }
    assert_eq!(b.num_entries(), 300);
    let props = b.finish().unwrap();
    assert_eq!(cache.len() as u64, props.num_data_blocks);

    let t = Table::open(file.reader(), 5, Some(cache.clone())).unwrap();
    let mut it = t.iter(IoCause::ClientRead);
    it.seek_to_first().unwrap();
    assert_eq!(collect(&mut it).unwrap(), entries);
    assert_eq!(
        t.stats().snapshot().data_block_reads,
        0,
        "all blocks came from the cache"
    );
}

#[test]
fn estimated_size_tracks_the_file() {
    let file = MemFile::new("size.sst");
    let mut b = TableBuilder::new(Box::new(file.clone()), small_blocks());
    for (k, v) in simple_entries(200) {
        b.add(&k, &v).unwrap();
    }
    let est = b.estimated_size();
    let props = b.finish().unwrap();
    assert!(est <= props.file_size && props.file_size < est + est / 4 + 1024);
}

/// Random sorted entries with several versions per user key and every kind.
fn model_entries() -> impl Strategy<Value = BTreeMap<InternalKey, Vec<u8>>> {
    let entry = (
        prop::collection::vec(prop::sample::select(b"abcde".to_vec()), 1..8),
        0u64..100,
        0u8..3,
        prop::collection::vec(any::<u8>(), 0..64),
    );
    prop::collection::vec(entry, 0..400).prop_map(|raw| {
        raw.into_iter()
            .map(|(uk, seq, kind, v)| {
                (
                    InternalKey::new(&uk, seq, ValueKind::from_u8(kind).unwrap()),
                    v,
                )
            })
            .collect()
    })
}

fn target() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(prop::sample::select(b"abcdef".to_vec()), 0..9),
        0u64..110,
    )
        .prop_map(|(uk, seq)| make_internal_key(&uk, seq, KIND_SEEK))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn table_matches_a_btreemap_model(
        model in model_entries(),
        block_size in 32usize..1024,
        restart_interval in 1usize..20,
        targets in prop::collection::vec(target(), 1..40),
        use_cache in any::<bool>(),
    ) {
        let entries: Entries = model.iter().map(|(k, v)| (k.0.clone(), v.clone())).collect();
        let opts = TableOptions::new().block_size(block_size).restart_interval(restart_interval);
        let (file, props) = build_table(&entries, opts);
        prop_assert_eq!(props.num_entries, entries.len() as u64);
        let cache = use_cache.then(|| BlockCache::new(64 * 1024) as Arc<dyn DataBlockCache>);
        let t = Table::open(file.reader(), 3, cache).unwrap();

        let mut it = t.iter(IoCause::ClientRead);
        it.seek_to_first().unwrap();
        prop_assert_eq!(&collect(&mut it).unwrap(), &entries);

        for (k, v) in &entries {
            prop_assert_eq!(t.get(k, IoCause::ClientRead).unwrap(), Some((k.clone(), v.clone())));
        }
        for tgt in &targets {
            let first = model.range(InternalKey(tgt.clone())..).next();
            it.seek(tgt).unwrap();
            match first {
                Some((k, v)) => {
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), &k.0[..]);
                    prop_assert_eq!(it.value(), &v[..]);
                    prop_assert_ne!(cmp_internal(it.key(), tgt), Ordering::Less);
                }
                None => prop_assert!(!it.valid()),
            }
            let want = first
                .filter(|(k, _)| k.user_key() == user_key(tgt))
                .map(|(k, v)| (k.0.clone(), v.clone()));
            prop_assert_eq!(t.get(tgt, IoCause::ClientRead).unwrap(), want);
        }
        // Iteration continues correctly after a seek.
        if let Some(tgt) = targets.first() {
            it.seek(tgt).unwrap();
            let rest: Entries = model
                .range(InternalKey(tgt.clone())..)
                .map(|(k, v)| (k.0.clone(), v.clone()))
                .collect();
            prop_assert_eq!(collect(&mut it).unwrap(), rest);
        }
    }
}

#[test]
fn readers_are_shareable_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<BlockCache>();
    assert_send_sync::<crate::sst::block::Block>();
    fn assert_send<T: Send>() {}
    assert_send::<TableIter>();
    assert_send::<TableBuilder>();
}

proptest! {
    /// A table of many small blocks (restart points every 3 entries) walked both ways:
    /// across block boundaries and restart intervals, seeks landing between keys.
    #[test]
    fn table_walks_both_ways(
        raw in prop::collection::btree_set(
            (prop::collection::vec(prop::sample::select(b"abc".to_vec()), 1..4), 0u64..6),
            0..120,
        ),
        moves in super::moves(b"abcd", 7),
    ) {
        let entries: Entries = raw
            .into_iter()
            .map(|(uk, seq)| InternalKey::new(&uk, seq, ValueKind::Value))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k.0, format!("v{i}").into_bytes()))
            .collect();
        let (file, _) = build_table(&entries, TableOptions::new().block_size(64).restart_interval(3));
        let table = Table::open(file.reader(), 1, None).unwrap();
        let mut it = table.iter(IoCause::ClientRead);
        super::check_walk(&mut it, &entries, &moves);
    }
}
