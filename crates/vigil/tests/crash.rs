//! Crash test on the striped volume: a child process writes with `sync: true` through an
//! O-Vigil volume (WAL on the meta-set, tables and value files striped, internal writes in
//! the write cache) and reports each acknowledged write; the parent kills it with SIGKILL,
//! reopens the database on a fresh device over the same backing files and checks every
//! acknowledged write. Adapted from `crates/engine/tests/crash.rs`.

mod common;

use device::{Device, DeviceConfig, VirtualTime};
use engine::{Options, TreeOptions, ValueLogOptions, WalOptions, WriteOptions, DB};
use halflife_vigil::{Mode, VigilVolume};
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const DIR_VAR: &str = "HALFLIFE_VIGIL_CRASH_DIR";
const START_VAR: &str = "HALFLIFE_VIGIL_CRASH_START";

fn open(root: &Path) -> (Arc<VigilVolume>, DB) {
    let cfg = DeviceConfig {
        fsync_backing: true,
        ..common::device_config()
    };
    let dev = Device::new(cfg, root.join("device")).unwrap();
    let vol = VigilVolume::new(dev, root.join("db"), common::volume_config(Mode::OVigil)).unwrap();
    let opts = Options {
        storage: Some(vol.clone()),
        tree: TreeOptions {
            memtable_size: 32 << 10,
            level1_max_bytes: 128 << 10,
            target_file_size: 32 << 10,
            l0_compaction_trigger: 2,
            growth_factor: 4.0,
            num_levels: 4,
            ..Default::default()
        },
        wal: WalOptions {
            // The striped volume rewrites a file's partial last stripe on every sync, so a
            // crash between the truncate and the rewrite loses synced bytes: only files synced
            // once (tables, value files of flush and GC) are striped, and the WAL stays on the
            // meta-set. The value log as the WAL would sync value files per write group.
            value_log_wal: false,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            ..Default::default()
        },
        ..Options::default()
    };
    let db = DB::open(root.join("db"), opts).unwrap();
    (vol, db)
}

fn key(i: u64) -> Vec<u8> {
    format!("k{:06}", i % 3000).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("w{i}:").into_bytes();
    v.resize(40 + (i % 7) as usize * 60, b'x');
    v
}

#[test]
#[ignore = "child process of the crash test"]
fn vigil_crash_child_writer() {
    let dir = std::env::var(DIR_VAR).expect("run by crash_on_striped_volume");
    let start: u64 = std::env::var(START_VAR).unwrap().parse().unwrap();
    let (vol, db) = open(Path::new(&dir));
    let sync = WriteOptions { sync: true };
    let mut out = std::io::stdout().lock();
    for i in start.. {
        vol.begin_client_op(VirtualTime::from_nanos((i - start + 1) * 20_000))
            .unwrap();
        db.put_opt(&key(i), &value(i), &sync).unwrap();
        halflife_vigil::end_client_op();
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn crash_on_striped_volume() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut next = 0u64;
    let mut latest = std::collections::HashMap::new();
    for round in 0..4 {
        let mut child = Command::new(std::env::current_exe().unwrap());
        child
            .args([
                "--exact",
                "vigil_crash_child_writer",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(DIR_VAR, dir.path())
            .env(START_VAR, next.to_string());
        let acked = testkit::kill_after(child, Duration::from_millis(rng.random_range(300..900)));
        for &i in &acked {
            latest.insert(key(i), i);
            next = next.max(i + 1);
        }
        let (_vol, db) = open(dir.path());
        for (k, &i) in &latest {
            let got = db
                .get(k)
                .unwrap()
                .unwrap_or_else(|| panic!("round {round}: acknowledged write {i} of {k:?} lost"));
            let n: u64 = std::str::from_utf8(&got[1..got.iter().position(|&b| b == b':').unwrap()])
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                n >= i,
                "round {round}: {k:?} went back from write {i} to {n}"
            );
        }
        db.close().unwrap();
    }
    assert!(
        next > 500,
        "the child wrote too little to exercise flushes: {next}"
    );
}
