//! Compression per level through the whole engine: flushes and compactions write each
//! level with its codec, everything reads back (also after reopening with other settings:
//! the codec is named per block), and compressible data takes less space.

use halflife_engine::{Compression, GcPolicyConfig, Options, TableOptions, ValueLogOptions, DB};

fn options(per_level: Vec<Compression>) -> Options {
    Options {
        tree: testkit::small_tree(),
        table: TableOptions {
            compression_per_level: per_level,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            gc: GcPolicyConfig::Inline,
            ..Default::default()
        },
        ..Options::default()
    }
}

fn value(i: u32) -> Vec<u8> {
    // Compressible: a short varying head, then a repeated pattern.
    let mut v = format!("value-{i}-").into_bytes();
    v.extend(b"abcdefgh".iter().cycle().take(300));
    v
}

fn load(dir: &std::path::Path, opts: Options) -> u64 {
    let db = DB::open(dir, opts).unwrap();
    for round in 0..3u32 {
        for i in 0..3000u32 {
            db.put(format!("key{i:06}").as_bytes(), &value(i + round))
                .unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    db.wait_idle().unwrap();
    let tree = db.stats().tree_bytes;
    check(&db);
    db.close().unwrap();
    tree
}

fn check(db: &DB) {
    for i in (0..3000u32).step_by(7) {
        assert_eq!(
            db.get(format!("key{i:06}").as_bytes()).unwrap(),
            Some(value(i + 2)),
            "key {i}"
        );
    }
    assert_eq!(
        db.scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
            .unwrap()
            .count(),
        3000
    );
}

#[test]
fn per_level_compression_round_trips_and_saves_space() {
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = load(plain_dir.path(), options(vec![]));
    let dir = tempfile::tempdir().unwrap();
    let per_level = vec![
        Compression::None,
        Compression::Lz4,
        Compression::Zstd { level: 3 },
    ];
    let compressed = load(dir.path(), options(per_level));
    assert!(
        compressed * 3 < plain,
        "compressed {compressed} vs plain {plain} bytes"
    );
    // Reopened with no compression configured: the blocks name their codec.
    let db = DB::open(dir.path(), options(vec![])).unwrap();
    check(&db);
    db.close().unwrap();
}

#[test]
fn compression_option_parses_and_validates() {
    assert_eq!("lz4".parse::<Compression>().unwrap(), Compression::Lz4);
    assert_eq!(
        "zstd:7".parse::<Compression>().unwrap(),
        Compression::Zstd { level: 7 }
    );
    assert_eq!(Compression::Zstd { level: 3 }.to_string(), "zstd");
    assert!("zstd:99".parse::<Compression>().is_err());
    assert!("snappy"
        .parse::<Compression>()
        .unwrap_err()
        .to_string()
        .contains("snappy"));
    let o = options(vec![Compression::None, Compression::Lz4]);
    assert_eq!(o.table.compression_for_level(0), Compression::None);
    assert_eq!(o.table.compression_for_level(5), Compression::Lz4);
    let bad = Options {
        table: TableOptions {
            compression: Compression::Zstd { level: 0 },
            ..Default::default()
        },
        ..Options::default()
    };
    assert!(bad.validate().is_err());
}
