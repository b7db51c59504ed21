//! WAL recovery modes at open (RocksDB's `wal_recovery_mode`): what each does with a torn
//! tail and with a damaged record in the middle of the WAL, and that whatever a mode passes
//! over is reported and kept in `lost/`, never deleted.

use halflife_engine::{
    Error, GcPolicyConfig, Options, ValueLogOptions, WalOptions, WalRecoveryMode, WriteOptions, DB,
};
use std::path::{Path, PathBuf};

const N: u32 = 2000;

fn opts(mode: WalRecoveryMode) -> Options {
    Options {
        wal: WalOptions {
            wal_recovery_mode: mode,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            gc: GcPolicyConfig::Inline,
            ..Default::default()
        },
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// A database whose N synced writes are all in its WAL; returns the WAL.
fn build(dir: &Path) -> PathBuf {
    let db = DB::open(dir, opts(WalRecoveryMode::default())).unwrap();
    for i in 0..N {
        db.put_opt(&key(i), &[i as u8; 64], &WriteOptions { sync: true })
            .unwrap();
    }
    db.close().unwrap();
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "wal") && std::fs::metadata(p).unwrap().len() > 0
        })
        .unwrap()
}

fn flip_middle(wal: &Path) {
    let mut b = std::fs::read(wal).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0x01;
    std::fs::write(wal, b).unwrap();
}

fn cut_tail(wal: &Path) {
    let b = std::fs::read(wal).unwrap();
    std::fs::write(wal, &b[..b.len() - 5]).unwrap();
}

/// (keys read exactly, keys missing); panics on a wrong value.
fn read_all(db: &DB) -> (Vec<u32>, Vec<u32>) {
    let (mut ok, mut missing) = (Vec::new(), Vec::new());
    for i in 0..N {
        match db.get(&key(i)).unwrap() {
            Some(v) => {
                assert_eq!(v, vec![i as u8; 64]);
                ok.push(i)
            }
            None => missing.push(i),
        }
    }
    (ok, missing)
}

#[test]
fn strict_modes_refuse_a_damaged_record_and_leave_the_files_alone() {
    for mode in [
        WalRecoveryMode::TolerateCorruptedTailRecords,
        WalRecoveryMode::AbsoluteConsistency,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let wal = build(dir.path());
        flip_middle(&wal);
        let before = std::fs::read(&wal).unwrap();
        match DB::open(dir.path(), opts(mode)) {
            Err(Error::Corruption { file, detail }) => {
                assert_eq!(file, wal);
                assert!(detail.contains("offset"), "{detail}");
            }
            other => panic!("{mode:?}: {:?}", other.map(|_| "opened")),
        }
        assert_eq!(
            std::fs::read(&wal).unwrap(),
            before,
            "{mode:?} changed the WAL"
        );
    }
}

#[test]
fn a_torn_tail_is_dropped_by_default_and_refused_by_absolute_consistency() {
    let dir = tempfile::tempdir().unwrap();
    let wal = build(dir.path());
    cut_tail(&wal);
    assert!(matches!(
        DB::open(dir.path(), opts(WalRecoveryMode::AbsoluteConsistency)),
        Err(Error::Corruption { .. })
    ));
    let db = DB::open(dir.path(), opts(WalRecoveryMode::default())).unwrap();
    let r = db.recovery_report().clone();
    let (file, offset, bytes) = r.torn_tail.expect("the torn tail is reported");
    assert_eq!(file, wal);
    assert!(offset > 0 && bytes > 0);
    let (ok, missing) = read_all(&db);
    assert_eq!(missing, vec![N - 1], "only the cut write is gone");
    assert_eq!(ok.len() as u32, N - 1);
}

#[test]
fn point_in_time_stops_at_the_damage_and_keeps_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let wal = build(dir.path());
    flip_middle(&wal);
    let db = DB::open(dir.path(), opts(WalRecoveryMode::PointInTimeRecovery)).unwrap();
    let r = db.recovery_report().clone();
    assert_eq!(r.damage.len(), 1, "{:?}", r.damage);
    let (ok, missing) = read_all(&db);
    // A prefix of the writes: everything before the damage, nothing after.
    assert!(!ok.is_empty() && !missing.is_empty());
    assert_eq!(ok, (0..ok.len() as u32).collect::<Vec<_>>());
    assert!(
        r.moved_to_lost
            .iter()
            .any(|p| p.file_name() == wal.file_name()),
        "the cut WAL is kept in lost/: {:?}",
        r.moved_to_lost
    );
    assert!(!r.deleted.contains(&wal));
}

#[test]
fn skip_mode_drops_only_the_damaged_record() {
    let dir = tempfile::tempdir().unwrap();
    let wal = build(dir.path());
    flip_middle(&wal);
    let db = DB::open(dir.path(), opts(WalRecoveryMode::SkipAnyCorruptedRecords)).unwrap();
    let r = db.recovery_report().clone();
    assert_eq!(r.damage.len(), 1);
    let (_, missing) = read_all(&db);
    assert_eq!(missing.len(), 1, "one write (one record) lost: {missing:?}");
    assert!(r
        .moved_to_lost
        .iter()
        .any(|p| p.file_name() == wal.file_name()));
}
