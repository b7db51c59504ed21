//! Damaged files: each is detected and reported with a typed error naming the file; nothing
//! panics and no wrong data is returned.

use halflife_engine::{Error, GcPolicyConfig, Options, TreeOptions, ValueLogOptions, DB};
use std::path::Path;
use testkit::files_with_ext as files;

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

fn opts(gc: GcPolicyConfig) -> Options {
    Options {
        vlog: ValueLogOptions {
            gc,
            min_blob_size: 100,
            ..Default::default()
        },
        ..Options::default()
    }
}

#[test]
fn torn_wal_tail_is_cut_and_earlier_writes_survive() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), opts(GcPolicyConfig::Inline)).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), &[i as u8; 50])
            .unwrap();
    }
    db.close().unwrap();
    let wal = files(dir.path(), "wal").pop().unwrap();
    let len = std::fs::metadata(&wal).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let db = DB::open(dir.path(), opts(GcPolicyConfig::Inline)).unwrap();
    for i in 0..99u32 {
        assert_eq!(
            db.get(format!("k{i:03}").as_bytes()).unwrap(),
            Some(vec![i as u8; 50])
        );
    }
    assert_eq!(db.get(b"k099").unwrap(), None, "the torn record is dropped");
}

#[test]
fn corrupt_record_in_the_middle_of_the_wal_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), opts(GcPolicyConfig::Inline)).unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[7u8; 100]).unwrap();
    }
    db.close().unwrap();
    let wal = files(dir.path(), "wal").pop().unwrap();
    flip(&wal, 100);
    match DB::open(dir.path(), opts(GcPolicyConfig::Inline)) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, wal),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("corruption in the middle of the WAL went unnoticed"),
    }
}

#[test]
fn flipped_byte_in_a_table_block_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), opts(GcPolicyConfig::Inline)).unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[3u8; 60]).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let sst = files(dir.path(), "sst").pop().unwrap();
    flip(&sst, 1000);
    let db = DB::open(dir.path(), opts(GcPolicyConfig::Inline)).unwrap();
    let mut errors = 0;
    for i in 0..2000u32 {
        match db.get(format!("k{i:05}").as_bytes()) {
            Ok(v) => assert_eq!(v, Some(vec![3u8; 60])),
            Err(Error::Corruption { file, .. }) => {
                assert_eq!(file, sst);
                errors += 1;
            }
            Err(e) => panic!("wrong error {e}"),
        }
    }
    assert!(errors > 0, "the damaged block was never reported");
    // The scan fails when it reaches the damaged block (here: at its first seek).
    let scan = db
        .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>());
    assert!(matches!(scan, Err(Error::Corruption { .. })));
}

#[test]
fn flipped_byte_in_a_value_record_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), opts(GcPolicyConfig::blobdb())).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), &[i as u8; 500])
            .unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let vlog = files(dir.path(), "vlog").pop().unwrap();
    flip(&vlog, 16 + 12 + 4 + 100); // inside the first record's value
    let db = DB::open(dir.path(), opts(GcPolicyConfig::blobdb())).unwrap();
    match db.get(b"k000") {
        Err(Error::Corruption { file, detail }) => {
            assert_eq!(file, vlog);
            assert!(detail.contains("checksum"), "{detail}");
        }
        other => panic!("expected a corruption error, got {other:?}"),
    }
    assert_eq!(db.get(b"k001").unwrap(), Some(vec![1u8; 500]));
}

#[test]
fn bad_input_gets_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"hello").unwrap();
    assert!(matches!(
        DB::open(dir.path(), Options::default()),
        Err(Error::NotADatabase(_))
    ));
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), Options::default()).unwrap();
    assert!(matches!(
        DB::open(dir.path(), Options::default()),
        Err(Error::Locked(_))
    ));
    let big = vec![0u8; (64 << 10) + 1];
    assert!(matches!(db.put(&big, b"v"), Err(Error::KeyTooLarge { .. })));
    assert!(matches!(db.put(b"", b"v"), Err(Error::EmptyKey)));
    let o = Options {
        max_value_size: 10,
        ..Options::default()
    };
    let d2 = tempfile::tempdir().unwrap();
    let db2 = DB::open(d2.path(), o).unwrap();
    assert!(matches!(
        db2.put(b"k", &[0; 11]),
        Err(Error::ValueTooLarge { .. })
    ));
    let missing = d2.path().join("nope");
    let o = Options {
        create_if_missing: false,
        ..Options::default()
    };
    assert!(matches!(DB::open(&missing, o), Err(Error::NotFound(_))));
    assert!(matches!(
        DB::open(
            d2.path().join("x"),
            Options {
                tree: TreeOptions {
                    growth_factor: 0.5,
                    ..Default::default()
                },
                ..Options::default()
            }
        ),
        Err(Error::InvalidOptions {
            name: "growth_factor",
            ..
        })
    ));
    drop(db);
}
