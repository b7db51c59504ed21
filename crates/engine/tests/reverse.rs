//! Reverse scans, cursors and prefix scans where the model check rarely goes: a key with
//! many versions (the reverse walk seeks past them), expired entries, prefixes ending in
//! 0xff, separated values read ahead backward. The model check (tests/model.rs) covers
//! them against a BTreeMap under every policy.

use halflife_engine::expiry::ManualClock;
use halflife_engine::{prefix_bounds, Direction, Options, ReadOptions, ValueLogOptions, DB};
use std::ops::Bound;
use std::sync::Arc;

fn all(
    db: &DB,
    dir: Direction,
    snap: Option<&halflife_engine::Snapshot>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan_dir(
        Bound::Unbounded,
        Bound::Unbounded,
        snap,
        &ReadOptions::default(),
        dir,
    )
    .unwrap()
    .map(|r| r.unwrap())
    .collect()
}

#[test]
fn a_key_with_many_versions_is_walked_backward_by_seeking_past_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), Options::default()).unwrap();
    db.put(b"a", b"a").unwrap();
    db.put(b"z", b"z").unwrap();
    for i in 0..100u32 {
        db.put(b"hot", &i.to_be_bytes()).unwrap();
        if i == 40 {
            db.flush().unwrap();
        }
    }
    let snap = db.snapshot();
    for i in 100..200u32 {
        db.put(b"hot", &i.to_be_bytes()).unwrap();
    }
    let before = db.stats().scan_reseeks;
    let now = all(&db, Direction::Reverse, None);
    assert_eq!(
        now,
        vec![
            (b"z".to_vec(), b"z".to_vec()),
            (b"hot".to_vec(), 199u32.to_be_bytes().to_vec()),
            (b"a".to_vec(), b"a".to_vec()),
        ]
    );
    let then = all(&db, Direction::Reverse, Some(&snap));
    assert_eq!(then[1], (b"hot".to_vec(), 99u32.to_be_bytes().to_vec()));
    assert!(
        db.stats().scan_reseeks > before,
        "the walk stepped over every version"
    );
    // A cursor at the snapshot turns around on the hot key.
    let mut c = db
        .cursor(
            Bound::Unbounded,
            Bound::Unbounded,
            Some(&snap),
            &ReadOptions::default(),
        )
        .unwrap();
    c.seek_for_prev(b"m").unwrap();
    assert_eq!(c.key(), Some(&b"hot"[..]));
    assert_eq!(c.value(), Some(&99u32.to_be_bytes()[..]));
    c.next().unwrap();
    assert_eq!(c.key(), Some(&b"z"[..]));
    c.prev().unwrap();
    c.prev().unwrap();
    assert_eq!(c.key(), Some(&b"a"[..]));
    c.prev().unwrap();
    assert!(!c.valid());
}

#[test]
fn reverse_scans_hide_expired_and_deleted_keys_and_read_separated_values() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let db = DB::open(
        dir.path(),
        Options {
            clock: clock.clone(),
            vlog: ValueLogOptions {
                min_blob_size: 64,
                ..Default::default()
            },
            ..Options::default()
        },
    )
    .unwrap();
    let big = |i: u8| vec![i; 1000];
    for i in 0..50u8 {
        db.put(&[b'k', i], &big(i)).unwrap();
    }
    db.flush().unwrap();
    db.put_with_expiry(b"k\x05", &big(105), 1_000_100).unwrap();
    db.delete(b"k\x06").unwrap();
    clock.set(1_000_100);
    let got = all(&db, Direction::Reverse, None);
    let mut want: Vec<_> = (0..50u8)
        .filter(|&i| i != 5 && i != 6)
        .map(|i| (vec![b'k', i], big(i)))
        .collect();
    want.reverse();
    assert_eq!(got, want);
}

#[test]
fn prefix_scans_cover_prefixes_ending_in_0xff() {
    assert_eq!(
        prefix_bounds(b"a\xff"),
        (
            Bound::Included(b"a\xff".to_vec()),
            Bound::Excluded(b"b".to_vec())
        )
    );
    assert_eq!(prefix_bounds(b"\xff\xff").1, Bound::Unbounded);
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), Options::default()).unwrap();
    for k in [
        &b"a"[..],
        b"a\xff",
        b"a\xff\x00",
        b"a\xff\xff",
        b"b",
        b"\xff",
        b"\xff\x01",
    ] {
        db.put(k, k).unwrap();
    }
    let keys = |p: &[u8], dir| -> Vec<Vec<u8>> {
        db.scan_prefix(p, None, dir)
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect()
    };
    assert_eq!(
        keys(b"a\xff", Direction::Forward),
        vec![
            b"a\xff".to_vec(),
            b"a\xff\x00".to_vec(),
            b"a\xff\xff".to_vec()
        ]
    );
    assert_eq!(
        keys(b"\xff", Direction::Reverse),
        vec![b"\xff\x01".to_vec(), b"\xff".to_vec()]
    );
    assert_eq!(keys(b"c", Direction::Reverse), Vec::<Vec<u8>>::new());
}

#[test]
fn delete_range_removes_the_live_keys_of_the_range_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), Options::default()).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
        if i == 50 {
            db.flush().unwrap();
        }
    }
    db.delete(b"k015").unwrap();
    let snap = db.snapshot();
    let o = halflife_engine::WriteOptions::default();
    assert_eq!(db.delete_range(b"k010", b"k020", &o).unwrap(), 9);
    assert_eq!(db.delete_range(b"k010", b"k020", &o).unwrap(), 0);
    let keys: Vec<_> = all(&db, Direction::Forward, None)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys.len(), 90);
    assert!(keys
        .iter()
        .all(|k| !(b"k010".as_slice()..b"k020".as_slice()).contains(&k.as_slice())));
    assert_eq!(all(&db, Direction::Forward, Some(&snap)).len(), 99);
}
