//! Compressed value files through the whole engine: flush, compaction and GC write
//! compressed records under each GC policy that moves values, everything reads back (also
//! reopened without compression: each record names its codec), compressible values take
//! less space, and a damaged compressed record is a corruption error naming its file.

use halflife_engine::{
    Compression, GcPolicyConfig, LifetimeMode, Options, ValueLogOptions, WalOptions, DB,
};
use std::path::Path;

fn options(gc: GcPolicyConfig, value_compression: Compression) -> Options {
    Options {
        tree: testkit::small_tree(),
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            gc,
            value_compression,
            ..Default::default()
        },
        ..Options::default()
    }
}

/// 1000 bytes that compress to about a tenth: a varying head, then a repeated phrase.
fn value(k: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{k}/{round}/").into_bytes();
    v.extend(b"a compressible value ".iter().cycle().take(1000 - v.len()));
    v
}

fn vlog_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "vlog"))
        .collect();
    v.sort();
    v
}

fn check(db: &DB) {
    for k in 0..300u32 {
        assert_eq!(
            db.get(format!("key{k:04}").as_bytes()).unwrap(),
            Some(value(k, 5)),
            "key {k}"
        );
    }
}

/// Six rounds over 300 keys; returns the value-file bytes after background work.
fn load(dir: &Path, o: Options) -> u64 {
    let db = DB::open(dir, o).unwrap();
    for round in 0..6 {
        for k in 0..300u32 {
            db.put(format!("key{k:04}").as_bytes(), &value(k, round))
                .unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    db.wait_idle().unwrap();
    check(&db);
    let s = db.stats();
    db.close().unwrap();
    s.value_file_bytes
}

#[test]
fn compressed_values_round_trip_under_every_gc_policy() {
    for gc in [
        GcPolicyConfig::titan(),
        GcPolicyConfig::BlobDb {
            age_cutoff: 1.0,
            force_threshold: 0.2,
        },
        GcPolicyConfig::Lifetime {
            mode: LifetimeMode::NoModel,
        },
    ] {
        let plain_dir = tempfile::tempdir().unwrap();
        let plain = load(plain_dir.path(), options(gc.clone(), Compression::None));
        for c in [Compression::Lz4, Compression::Zstd { level: 3 }] {
            let dir = tempfile::tempdir().unwrap();
            let packed = load(dir.path(), options(gc.clone(), c));
            assert!(
                packed * 3 < plain,
                "{gc:?} {c}: {packed} vs {plain} value-file bytes"
            );
            // Reopened without compression, and writing plain records next to them.
            let db = DB::open(dir.path(), options(gc.clone(), Compression::None)).unwrap();
            check(&db);
            db.put(b"key9999", &value(9999, 0)).unwrap();
            db.flush().unwrap();
            assert_eq!(db.get(b"key9999").unwrap(), Some(value(9999, 0)));
            db.close().unwrap();
        }
    }
}

#[test]
fn a_damaged_compressed_record_names_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(GcPolicyConfig::titan(), Compression::Lz4);
    let db = DB::open(dir.path(), o.clone()).unwrap();
    for k in 0..300u32 {
        db.put(format!("key{k:04}").as_bytes(), &value(k, 5))
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    db.close().unwrap();
    // Flip a byte in the middle of the first value file's records.
    let files = vlog_files(dir.path());
    let victim = &files[0];
    let mut bytes = std::fs::read(victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(victim, &bytes).unwrap();
    let db = DB::open(dir.path(), o).unwrap();
    let name = victim.file_name().unwrap().to_string_lossy().to_string();
    let mut damaged = 0;
    for k in 0..300u32 {
        match db.get(format!("key{k:04}").as_bytes()) {
            Ok(v) => assert_eq!(v, Some(value(k, 5))),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                let msg = e.to_string();
                assert!(msg.contains(&name) && msg.contains("offset"), "{msg}");
                damaged += 1;
            }
        }
    }
    assert_eq!(damaged, 1, "exactly the record holding the flipped byte");
}

#[test]
fn value_compression_is_validated() {
    let bad = Options {
        vlog: ValueLogOptions {
            value_compression: Compression::Zstd { level: 40 },
            ..Default::default()
        },
        ..Options::default()
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("value_compression"), "{e}");
}

/// With the value log as the WAL, the write path appends compressed records and open
/// replays the logged pointers through them.
#[test]
fn compressed_values_in_the_value_log_wal_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let o = {
        let base = options(GcPolicyConfig::titan(), Compression::Lz4);
        Options {
            wal: WalOptions {
                value_log_wal: true,
                ..base.wal
            },
            ..base
        }
    };
    let db = DB::open(dir.path(), o.clone()).unwrap();
    for k in 0..40u32 {
        db.put(format!("key{k:04}").as_bytes(), &value(k, 5))
            .unwrap();
    }
    // Closed with the values only in the value log and the WAL (no flush).
    db.close().unwrap();
    let packed: u64 = vlog_files(dir.path())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(packed < 40 * 1000 / 3, "{packed} value-file bytes");
    let db = DB::open(dir.path(), o).unwrap();
    for k in 0..40u32 {
        assert_eq!(
            db.get(format!("key{k:04}").as_bytes()).unwrap(),
            Some(value(k, 5)),
            "key {k}"
        );
    }
    db.close().unwrap();
}
