//! `halflife check` and `halflife repair` as an operator runs them: a clean database checks
//! OK; a flipped manifest byte makes check exit non-zero naming the manifest and the open
//! fail; repair brings every record back and check is clean again.

use engine::{GcPolicyConfig, Options, TreeOptions, ValueLogOptions, DB};
use std::path::Path;
use std::process::{Command, Output};

fn halflife(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halflife"))
        .args(args)
        .arg(dir)
        .output()
        .expect("running halflife")
}

fn opts() -> Options {
    Options {
        tree: TreeOptions {
            memtable_size: 64 << 10,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            gc: GcPolicyConfig::titan(),
            min_blob_size: 100,
            ..Default::default()
        },
        ..Options::default()
    }
}

#[test]
fn check_finds_a_damaged_manifest_and_repair_restores_every_record() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let db = DB::open(dir, opts()).unwrap();
    for i in 0..3000u32 {
        db.put(
            format!("k{i:05}").as_bytes(),
            &vec![(i % 251) as u8; 200 + (i % 7) as usize * 50],
        )
        .unwrap();
    }
    db.close().unwrap();

    let ok = halflife(&["check"], dir);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(stdout.contains("OK"), "{stdout}");

    testkit::damage_manifest(dir, 2);

    let bad = halflife(&["check"], dir);
    let stdout = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "damage exits 1: {stdout}");
    assert!(
        stdout.contains("PROBLEM") && stdout.contains("MANIFEST-"),
        "{stdout}"
    );
    assert!(DB::open(dir, opts()).is_err());

    let json = dir.join("repair.json");
    let fixed = halflife(&["repair", "--json", json.to_str().unwrap()], dir);
    assert!(
        fixed.status.success(),
        "{}{}",
        String::from_utf8_lossy(&fixed.stdout),
        String::from_utf8_lossy(&fixed.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["keys_with_lost_values"], 0);
    std::fs::remove_file(&json).unwrap();
    assert!(halflife(&["check"], dir).status.success());
    let db = DB::open(dir, opts()).unwrap();
    for i in 0..3000u32 {
        assert_eq!(
            db.get(format!("k{i:05}").as_bytes()).unwrap(),
            Some(vec![(i % 251) as u8; 200 + (i % 7) as usize * 50])
        );
    }
}

#[test]
fn check_names_a_missing_directory() {
    let d = tempfile::tempdir().unwrap();
    let out = halflife(&["check"], &d.path().join("nope"));
    assert_eq!(out.status.code(), Some(3), "the check could not run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

/// A file that cannot be read (an I/O error, here a directory in the place of CURRENT:
/// root reads past any permission) is told from damage by the exit code.
#[test]
fn check_tells_an_unreadable_file_from_damage() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let db = DB::open(dir, opts()).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i:05}").as_bytes(), &[7; 300]).unwrap();
    }
    db.close().unwrap();
    let current = dir.join("CURRENT");
    std::fs::remove_file(&current).unwrap();
    std::fs::create_dir(&current).unwrap();
    let out = halflife(&["check"], dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("cannot read"), "{stdout}");
}
