//! Test support shared by the engine's model and crash tests and by the tests of crates
//! that run the engine on another storage (the vigil volume): the model check's keys,
//! values and scan comparison, and the crash tests' kill-and-collect-acknowledgements.
//! Integration tests are not libraries, so these live in a crate of their own.

pub mod powercut;

use engine::DB;
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::ops::Bound;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Key `i` of the model check.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A value of the model check: half below any `min_blob_size` used in the tests (stays in
/// the tree), half above (goes to value files).
pub fn value(rng: &mut StdRng, i: u32, version: u32) -> Vec<u8> {
    let len = if rng.random_bool(0.5) {
        10
    } else {
        100 + rng.random_range(0..400)
    };
    let mut v = format!("v{i}.{version}.").into_bytes();
    v.resize(len, b'a' + (version % 26) as u8);
    v
}

/// Asserts that a scan of [lo, hi) returns exactly the model's pairs; on a mismatch,
/// prints both key lists and what `get` says for each expected key.
pub fn check_scan(db: &DB, model: &BTreeMap<Vec<u8>, Vec<u8>>, lo: &[u8], hi: &[u8]) {
    let got: Vec<_> = db
        .scan(Bound::Included(lo), Bound::Excluded(hi))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let want: Vec<_> = model
        .range::<[u8], _>((Bound::Included(lo), Bound::Excluded(hi)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if got != want {
        let names = |v: &[(Vec<u8>, Vec<u8>)]| -> Vec<String> {
            v.iter()
                .map(|(k, _)| String::from_utf8_lossy(k).to_string())
                .collect()
        };
        eprintln!("got  {:?}\nwant {:?}", names(&got), names(&want));
        for (k, v) in &want {
            eprintln!(
                "get {:?} -> {:?}",
                String::from_utf8_lossy(k),
                db.get(k).unwrap().map(|x| x == *v)
            );
        }
    }
    assert_eq!(got.len(), want.len(), "scan length [{lo:?}, {hi:?})");
    assert!(got == want, "scan contents differ");
}

/// Starts `child` (a writer printing `ack N` per acknowledged write on stdout), SIGKILLs it
/// after `after`, and returns the write numbers it acknowledged.
pub fn kill_after(mut child: Command, after: Duration) -> Vec<u64> {
    let mut child = child
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the crash child");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("ack ") {
                acked.push(n.parse::<u64>().unwrap());
            }
        }
        acked
    });
    let t = Instant::now();
    while t.elapsed() < after {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) on the child's pid, which we own and have not reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    reader.join().unwrap()
}

/// Flips one bit in the middle of the database's manifest (a damage only `repair` undoes);
/// returns the manifest's path.
pub fn damage_manifest(dir: &std::path::Path, bit: u8) -> std::path::PathBuf {
    let manifest = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST-")
        })
        .expect("the database has a manifest");
    let mut b = std::fs::read(&manifest).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 1 << bit;
    std::fs::write(&manifest, b).unwrap();
    manifest
}

/// The files of `dir` with extension `ext`, sorted by name.
pub fn files_with_ext(dir: &std::path::Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// A tree small enough that a test's few hundred writes flush, compact and spread over
/// levels: 64 KiB memtables and tables, a 256 KiB first level, compaction at two L0
/// tables, four levels.
pub fn small_tree() -> engine::TreeOptions {
    engine::TreeOptions {
        memtable_size: 64 << 10,
        level1_max_bytes: 256 << 10,
        target_file_size: 64 << 10,
        l0_compaction_trigger: 2,
        num_levels: 4,
        ..Default::default()
    }
}
