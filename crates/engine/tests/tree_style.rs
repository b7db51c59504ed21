//! `CompactionStyle::Auto`, end to end: with large values in value files the key tree is
//! a small share of the data and is tiered (levels below L0 hold several runs); when the
//! values move into the tree its share grows and the tree goes back to leveled, merging
//! its multi-run levels down; every value survives both switches and a reopen.

use halflife_engine::{CompactionStyle, GcPolicyConfig, Options, TreeOptions, ValueLogOptions, DB};
use std::collections::BTreeMap;

fn options() -> Options {
    Options {
        tree: TreeOptions {
            compaction_style: CompactionStyle::Auto,
            memtable_size: 256 << 10,
            target_file_size: 64 << 10,
            level1_max_bytes: 256 << 10,
            l0_compaction_trigger: 2,
            num_levels: 5,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 256,
            blob_file_size: 1 << 20,
            // The learned default's knob: space amplification 1.5.
            gc: "lifetime".parse::<GcPolicyConfig>().unwrap(),
            ..Default::default()
        },
        ..Options::default()
    }
}

fn key(k: u32) -> Vec<u8> {
    format!("key{k:06}").into_bytes()
}

fn value(k: u32, round: u32, len: usize) -> Vec<u8> {
    let mut v = format!("{k}/{round}/").into_bytes();
    v.resize(len, b'a' + (round % 26) as u8);
    v
}

/// The most runs any level below L0 holds.
fn max_runs(db: &DB) -> usize {
    let v = db.version();
    (1..v.num_levels()).map(|l| v.runs(l).len()).max().unwrap()
}

fn check(db: &DB, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]), "key {k:?}");
    }
}

#[test]
fn the_tree_is_tiered_while_small_and_leveled_when_values_join_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), options()).unwrap();
    let mut model = BTreeMap::new();
    // 2,000 keys of 4 KiB values, rewritten: the tree holds keys and pointers only.
    let mut most_runs = 0;
    for round in 0..12 {
        for k in 0..2000 {
            let v = value(k, round, 4096);
            db.put(&key(k), &v).unwrap();
            model.insert(key(k), v);
        }
        most_runs = most_runs.max(max_runs(&db));
    }
    db.wait_idle().unwrap();
    let style = db.stats().tree_style.expect("a choice under auto");
    assert!(style.tiered, "{style:?}");
    assert!(style.tree_share < 0.1, "{style:?}");
    assert!(most_runs >= 2, "tiered levels never held two runs");
    check(&db, &model);

    // The same keys with 200-byte values, kept in the tree: it becomes the data.
    for round in 12..20 {
        for k in 0..2000 {
            let v = value(k, round, 200);
            db.put(&key(k), &v).unwrap();
            model.insert(key(k), v);
        }
    }
    db.wait_idle().unwrap();
    let style = db.stats().tree_style.unwrap();
    assert!(!style.tiered, "{style:?}");
    assert!(style.changes >= 1, "{style:?}");
    assert_eq!(
        max_runs(&db),
        1,
        "leveled levels must be merged to one run each"
    );
    check(&db, &model);

    drop(db);
    let db = DB::open(dir.path(), options()).unwrap();
    check(&db, &model);
}
