//! Scans over keys with many versions: past more than a few versions of one key the walk
//! seeks instead of stepping (`DbStats::scan_reseeks`), and returns exactly the newest
//! version each reader may see, with and without a snapshot, in memtables and tables.
//! Over long runs of tombstones a step stops at the far end of its range instead of
//! passing over tombstones beyond it, and `ReadOptions::max_skipped` ends a scan once it
//! passed over that many (`DbIter::cut_short` says so), in a memtable and in a table file,
//! either way.

use halflife_engine::{Direction, Options, ReadOptions, TreeOptions, DB};
use std::ops::Bound::{self, Excluded, Included, Unbounded};

/// A database whose memtable holds every write of these tests until they flush it.
fn open(dir: &std::path::Path) -> DB {
    DB::open(
        dir,
        Options {
            tree: TreeOptions {
                memtable_size: 64 << 20,
                ..Default::default()
            },
            ..Options::default()
        },
    )
    .unwrap()
}

fn scan(db: &DB, snap: Option<&halflife_engine::Snapshot>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let it = match snap {
        Some(s) => db.scan_at(Unbounded, Unbounded, s).unwrap(),
        None => db.scan(Unbounded, Unbounded).unwrap(),
    };
    it.map(Result::unwrap).collect()
}

fn kv(k: &str, v: String) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.into_bytes())
}

#[test]
fn a_key_with_many_versions_is_passed_by_a_seek_and_every_reader_sees_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put(b"a", b"first").unwrap();
    for i in 0..1000 {
        db.put(b"hot", format!("{i}").as_bytes()).unwrap();
    }
    let snap = db.snapshot();
    for i in 1000..2000 {
        db.put(b"hot", format!("{i}").as_bytes()).unwrap();
    }
    db.put(b"z", b"last").unwrap();
    let newest = vec![
        kv("a", "first".into()),
        kv("hot", "1999".into()),
        kv("z", "last".into()),
    ];
    let before = db.stats().scan_reseeks;
    assert_eq!(scan(&db, None), newest);
    assert!(
        db.stats().scan_reseeks > before,
        "the 1,999 older versions were stepped over"
    );
    // The snapshot skips 1,000 newer versions, then sees its own.
    assert_eq!(
        scan(&db, Some(&snap)),
        vec![kv("a", "first".into()), kv("hot", "999".into())]
    );
    // The same from a table: flushed, every version a snapshot may need is kept.
    db.flush().unwrap();
    assert_eq!(scan(&db, None), newest);
    assert_eq!(
        scan(&db, Some(&snap)),
        vec![kv("a", "first".into()), kv("hot", "999".into())]
    );
    // A delete among the versions hides the key at once.
    db.delete(b"hot").unwrap();
    for i in 0..20 {
        db.put(b"hot2", format!("{i}").as_bytes()).unwrap();
    }
    assert_eq!(
        scan(&db, None),
        vec![
            kv("a", "first".into()),
            kv("hot2", "19".into()),
            kv("z", "last".into())
        ]
    );
}

fn bounded(max_skipped: usize) -> ReadOptions {
    ReadOptions {
        max_skipped,
        ..ReadOptions::default()
    }
}

/// The keys of a scan and whether it was cut short.
fn keys(
    db: &DB,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    opts: &ReadOptions,
    dir: Direction,
) -> (Vec<String>, bool) {
    let mut it = db.scan_dir(lower, upper, None, opts, dir).unwrap();
    let keys = it
        .by_ref()
        .map(|kv| String::from_utf8(kv.unwrap().0).unwrap())
        .collect();
    (keys, it.cut_short())
}

#[test]
fn scans_stop_at_their_range_and_at_max_skipped_over_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put(b"a", b"live").unwrap();
    db.put(b"z", b"live").unwrap();
    for i in 0..2000 {
        db.put(format!("t:{i:05}").as_bytes(), b"gone").unwrap();
    }
    for i in 0..2000 {
        db.delete(format!("t:{i:05}").as_bytes()).unwrap();
    }
    use Direction::{Forward, Reverse};
    let (few, all) = (bounded(100), ReadOptions::default());
    let none: (Vec<String>, bool) = (vec![], false);
    for place in ["memtable", "table"] {
        // Ranges with no live key and the tombstones beyond their far end: the step
        // stops at the end, it does not pass over the tombstones (which would cut it).
        assert_eq!(
            keys(&db, Included(b"b"), Excluded(b"c"), &few, Forward),
            none,
            "{place}"
        );
        assert_eq!(
            keys(&db, Included(b"u"), Excluded(b"v"), &few, Reverse),
            none,
            "{place}"
        );
        // Ranges across the tombstones: cut after 100 passed over, past the first live
        // key only.
        let cut = |k: &str| (vec![k.to_string()], true);
        assert_eq!(
            keys(&db, Unbounded, Unbounded, &few, Forward),
            cut("a"),
            "{place}"
        );
        assert_eq!(
            keys(&db, Unbounded, Unbounded, &few, Reverse),
            cut("z"),
            "{place}"
        );
        // Without a bound, every live key.
        let both = (vec!["a".to_string(), "z".to_string()], false);
        assert_eq!(
            keys(&db, Unbounded, Unbounded, &all, Forward),
            both,
            "{place}"
        );
        // A bound above the run passes it.
        assert_eq!(
            keys(&db, Unbounded, Unbounded, &bounded(5000), Forward),
            both,
            "{place}"
        );
        db.flush().unwrap();
    }
}
