//! Scans over keys with many versions: past more than a few versions of one key the walk
//! seeks instead of stepping (`DbStats::scan_reseeks`), and returns exactly the newest
//! version each reader may see, with and without a snapshot, in memtables and tables.

use halflife_engine::{Options, TreeOptions, DB};
use std::ops::Bound::Unbounded;

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
    let db = DB::open(
        dir.path(),
        Options {
            tree: TreeOptions {
                memtable_size: 64 << 20,
                ..Default::default()
            },
            ..Options::default()
        },
    )
    .unwrap();
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
