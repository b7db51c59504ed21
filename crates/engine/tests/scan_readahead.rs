//! A scan's read-ahead of separated values (`ReadOptions`, `db/readahead.rs`,
//! `vlog/batch_read.rs`) changes when values are read, never what a scan returns: over a
//! database with separated and inline values, deletes, several value files, GC and a
//! snapshot, every read-ahead setting returns exactly what a scan without read-ahead
//! returns, and what a model says; a damaged value record read through the read-ahead is
//! the same error, naming the file and the offset, at the same entry.

use halflife_engine::{
    Error, GcPolicyConfig, Options, ReadOptions, Snapshot, TreeOptions, ValueLogOptions, DB,
};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use testkit::files_with_ext;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// A scan's entries.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;
/// A range of keys.
type Range<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Every third value stays in the tree (below `min_blob_size`), the others are separated
/// and of varied sizes, so that neighbours in a scan are records of different lengths.
fn value(i: u32, version: u32) -> Vec<u8> {
    let len = if (i + version).is_multiple_of(3) {
        40
    } else {
        200 + (i * 37 + version * 101) as usize % 3000
    };
    (0..len)
        .map(|j| (i as usize * 7 + j + version as usize) as u8)
        .collect()
}

fn options(gc: GcPolicyConfig) -> Options {
    Options {
        tree: TreeOptions {
            memtable_size: 128 << 10,
            target_file_size: 64 << 10,
            level1_max_bytes: 256 << 10,
            l0_compaction_trigger: 2,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            gc,
            min_blob_size: 100,
            blob_file_size: 256 << 10,
            ..Default::default()
        },
        ..Options::default()
    }
}

/// The read-ahead settings checked against none: the default (auto, doubling to 256 KiB),
/// a small auto maximum, fixed windows from one entry at a time to the whole range.
fn settings() -> Vec<ReadOptions> {
    let fixed = |readahead_size| ReadOptions {
        readahead_size,
        auto_readahead: false,
        max_skipped: 0,
    };
    vec![
        ReadOptions::default(),
        ReadOptions {
            readahead_size: 8 << 10,
            auto_readahead: true,
            max_skipped: 0,
        },
        fixed(1),
        fixed(5000),
        fixed(64 << 10),
        fixed(64 << 20),
    ]
}

fn scan(
    db: &DB,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    snap: Option<&Snapshot>,
    o: &ReadOptions,
) -> Entries {
    db.scan_opt(lo, hi, snap, o)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn expected(m: &Model, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Entries {
    m.range::<[u8], _>((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Writes `keys` in a shuffled order (so that a value file's order is not the keys'),
/// each at `version`, recording them in `model`.
fn put_all(db: &DB, model: &mut Model, keys: &mut [u32], version: u32, rng: &mut StdRng) {
    keys.shuffle(rng);
    for &i in keys.iter() {
        db.put(&key(i), &value(i, version)).unwrap();
        model.insert(key(i), value(i, version));
    }
}

fn delete_all(db: &DB, model: &mut Model, keys: impl Iterator<Item = u32>) {
    for i in keys {
        db.delete(&key(i)).unwrap();
        model.remove(&key(i));
    }
}

#[test]
fn every_readahead_setting_returns_what_a_plain_scan_returns() {
    for gc in [GcPolicyConfig::titan(), GcPolicyConfig::default()] {
        let name = gc.to_string();
        let dir = tempfile::tempdir().unwrap();
        let db = DB::open(dir.path(), options(gc)).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let mut model = Model::new();
        let n = 2000;
        put_all(
            &db,
            &mut model,
            &mut (0..n).collect::<Vec<_>>(),
            0,
            &mut rng,
        );
        db.flush().unwrap();
        delete_all(&db, &mut model, (0..n).step_by(7));
        put_all(
            &db,
            &mut model,
            &mut (0..n).step_by(5).collect::<Vec<_>>(),
            1,
            &mut rng,
        );
        db.flush().unwrap();
        let snap = db.snapshot();
        let at_snap = model.clone();
        // After the snapshot: more deletes and overwrites (some values change between
        // inline and separated), flushed and compacted in part, the rest in the memtable;
        // GC may move values the snapshot still reads.
        delete_all(&db, &mut model, (3..n).step_by(11));
        put_all(
            &db,
            &mut model,
            &mut (0..n).step_by(3).collect::<Vec<_>>(),
            2,
            &mut rng,
        );
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        put_all(
            &db,
            &mut model,
            &mut (1..n).step_by(13).collect::<Vec<_>>(),
            3,
            &mut rng,
        );
        db.wait_idle().unwrap();
        let files = files_with_ext(dir.path(), "vlog").len();
        assert!(files >= 3, "{name}: {files} value files");

        let (k100, k1500, k5, k1999, k500, k505) =
            (key(100), key(1500), key(5), key(1999), key(500), key(505));
        let ranges: [Range; 5] = [
            (Bound::Unbounded, Bound::Unbounded),
            (Bound::Included(&k100), Bound::Excluded(&k1500)),
            (Bound::Excluded(&k5), Bound::Included(&k1999)),
            (Bound::Included(&k500), Bound::Included(&k505)),
            (Bound::Included(&k1999), Bound::Unbounded),
        ];
        let plain = ReadOptions::without_readahead();
        for (lo, hi) in ranges {
            for (snap, m) in [(None, &model), (Some(&snap), &at_snap)] {
                let want = scan(&db, lo, hi, snap, &plain);
                assert_eq!(want, expected(m, lo, hi), "{name}: plain scan vs model");
                for o in settings() {
                    let got = scan(&db, lo, hi, snap, &o);
                    assert!(got == want, "{name}: {o:?} {lo:?}..{hi:?} differs");
                    // A caller that stops early sees the same prefix.
                    let part: Vec<_> = db
                        .scan_opt(lo, hi, snap, &o)
                        .unwrap()
                        .take(37)
                        .map(|r| r.unwrap())
                        .collect();
                    assert!(part[..] == want[..want.len().min(37)], "{name}: {o:?}");
                }
            }
        }
        // The plain entry points use the default read-ahead.
        let all = (Bound::Unbounded, Bound::Unbounded);
        let got: Vec<_> = db.scan(all.0, all.1).unwrap().map(|r| r.unwrap()).collect();
        assert!(got == expected(&model, all.0, all.1), "{name}: scan");
        let got: Vec<_> = db
            .scan_at(all.0, all.1, &snap)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert!(got == expected(&at_snap, all.0, all.1), "{name}: scan_at");
        drop(snap);
        db.close().unwrap();
    }
}

/// The offset of record `index` of a value file and its length (header: 16 bytes;
/// record: crc u32, key length u32, value field u32 whose low 30 bits are the stored
/// value length, key, value).
fn record_at(file: &[u8], index: usize) -> (usize, usize) {
    let mut at = 16;
    for i in 0.. {
        let u = |o: usize| u32::from_le_bytes(file[o..o + 4].try_into().unwrap()) as usize;
        let len = 12 + u(at + 4) + (u(at + 8) & ((1 << 30) - 1));
        if i == index {
            return (at, len);
        }
        at += len;
    }
    unreachable!()
}

/// Scans everything: the entries before the first error, and that error.
fn scan_to_error(db: &DB, o: &ReadOptions) -> (Entries, Option<Error>) {
    let mut ok = Vec::new();
    for r in db
        .scan_opt(Bound::Unbounded, Bound::Unbounded, None, o)
        .unwrap()
    {
        match r {
            Ok(kv) => ok.push(kv),
            Err(e) => return (ok, Some(e)),
        }
    }
    (ok, None)
}

#[test]
fn a_damaged_value_read_ahead_is_an_error_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let gc = GcPolicyConfig::titan();
    let db = DB::open(dir.path(), options(gc.clone())).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = Model::new();
    put_all(
        &db,
        &mut model,
        &mut (0..600).collect::<Vec<_>>(),
        1,
        &mut rng,
    );
    db.flush().unwrap();
    db.close().unwrap();

    // A byte in the value of record 40 of the largest value file.
    let mut vlogs = files_with_ext(dir.path(), "vlog");
    vlogs.sort_by_key(|p| std::fs::metadata(p).unwrap().len());
    let vlog = vlogs.pop().unwrap();
    let mut bytes = std::fs::read(&vlog).unwrap();
    let (offset, len) = record_at(&bytes, 40);
    bytes[offset + len - 1] ^= 0x40;
    std::fs::write(&vlog, &bytes).unwrap();

    let db = DB::open(dir.path(), options(gc)).unwrap();
    let (want, err) = scan_to_error(&db, &ReadOptions::without_readahead());
    let err = err.expect("the damaged record fails the plain scan");
    match &err {
        Error::Corruption { file, detail } => {
            assert_eq!(file, &vlog);
            assert!(
                detail.contains(&format!("offset {offset}")) && detail.contains("checksum"),
                "{detail}"
            );
        }
        other => panic!("expected a corruption error, got {other:?}"),
    }
    // The entries before it are intact and every one is the model's.
    assert!(want.len() < model.len());
    assert!(want.iter().all(|(k, v)| model.get(k) == Some(v)));
    for o in settings() {
        let (got, e) = scan_to_error(&db, &o);
        assert!(got == want, "{o:?}: other entries before the error");
        let e = e.unwrap_or_else(|| panic!("{o:?}: no error"));
        assert_eq!(e.to_string(), err.to_string(), "{o:?}");
        assert!(matches!(&e, Error::Corruption { file, .. } if file == &vlog));
    }
    // A point read of that key names the same record.
    let bad_key = model.keys().nth(want.len()).unwrap();
    assert_eq!(
        db.get(bad_key).unwrap_err().to_string(),
        err.to_string(),
        "point read"
    );
    assert!(Path::new(&vlog).exists());
}
