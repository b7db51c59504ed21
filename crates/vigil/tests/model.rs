//! The engine's model check on the striped volume: random operations against the DB and a
//! BTreeMap, with flushes, compactions, GC, scans, snapshots and reopenings, while the
//! volume's clock advances so that devd rotates windows, the write cache drains and client
//! reads of the NDWIN set are reconstructed. Adapted from `crates/engine/tests/model.rs`
//! (engine tests are not a library); at the end the database is reopened on a fresh device
//! over the same backing files.

mod common;

use device::{Device, VirtualTime};
use engine::{
    CacheOptions, GcPolicyConfig, Options, TreeOptions, ValueLogOptions, WalOptions, WriteBatch, DB,
};
use halflife_vigil::{end_client_op, Mode, VigilVolume};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use testkit::{check_scan, key, value};

fn options(vol: &Arc<VigilVolume>) -> Options {
    Options {
        storage: Some(vol.clone()),
        tree: TreeOptions {
            memtable_size: 16 << 10,
            level1_max_bytes: 64 << 10,
            target_file_size: 16 << 10,
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
            min_blob_size: 64,
            blob_file_size: 32 << 10,
            gc: GcPolicyConfig::default(),
            ..Default::default()
        },
        cache: CacheOptions {
            block_cache_capacity: 16 << 10,
            ..Default::default()
        },
        ..Options::default()
    }
}

fn run_model(mode: Mode, seed: u64, steps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let vol = common::volume(dir.path(), mode, false);
    let db_dir = dir.path().join("db");
    let mut db = DB::open(&db_dir, options(&vol)).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut snaps = Vec::new();
    let mut version = 0u32;
    let mut t = 0u64;
    let (mut flushes, mut compactions) = (0, 0);
    for step in 0..steps {
        version += 1;
        t += 50_000;
        vol.begin_client_op(VirtualTime::from_nanos(t)).unwrap();
        let i = rng.random_range(0..400u32);
        match rng.random_range(0..100) {
            0..=49 => {
                let v = value(&mut rng, i, version);
                db.put(&key(i), &v).unwrap();
                model.insert(key(i), v);
            }
            50..=59 => {
                db.delete(&key(i)).unwrap();
                model.remove(&key(i));
            }
            60..=64 => {
                let mut b = WriteBatch::new();
                for j in 0..rng.random_range(1..10u32) {
                    let k = key((i + j * 7) % 400);
                    if rng.random_bool(0.2) {
                        b.delete(&k);
                        model.remove(&k);
                    } else {
                        let v = value(&mut rng, i + j, version);
                        b.put(&k, &v);
                        model.insert(k, v);
                    }
                }
                db.write(b, &engine::WriteOptions::default()).unwrap();
            }
            65..=79 => {
                assert_eq!(
                    db.get(&key(i)).unwrap(),
                    model.get(&key(i)).cloned(),
                    "get {i} at step {step}"
                );
            }
            80..=84 => {
                let j = rng.random_range(i..=400);
                check_scan(&db, &model, &key(i), &key(j));
            }
            85..=88 => {
                if snaps.len() < 3 {
                    snaps.push((db.snapshot(), model.clone()));
                } else {
                    let (s, m): (_, BTreeMap<_, _>) =
                        snaps.remove(rng.random_range(0..snaps.len()));
                    for probe in 0..20 {
                        let k = key((i + probe * 19) % 400);
                        assert_eq!(db.get_at(&k, &s).unwrap(), m.get(&k).cloned());
                    }
                }
            }
            89..=91 => db.flush().unwrap(),
            92..=93 => {
                let j = rng.random_range(i..=400);
                db.compact_range(Some(&key(i)), Some(&key(j))).unwrap();
            }
            94..=95 => db.wait_idle().unwrap(),
            _ => {
                snaps.clear();
                flushes += db.stats().flushes;
                compactions += db.stats().compactions;
                db.close().unwrap();
                db = DB::open(&db_dir, options(&vol)).unwrap();
            }
        }
        end_client_op();
    }
    db.wait_idle().unwrap();
    check_scan(&db, &model, b"", b"\xff");
    assert_eq!(db.version().check_invariants(), Ok(()));
    let live: u64 = model.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    assert_eq!(db.measure_live_bytes().unwrap(), live);
    let s = db.stats();
    flushes += s.flushes;
    compactions += s.compactions;
    assert!(flushes > 5 && compactions > 2, "{flushes} {compactions}");
    drop(snaps);
    db.close().unwrap();
    let vs = vol.volume_stats();
    if mode.scheduled() {
        assert_eq!(vs.invariant_violations, 0, "{vs:?}");
        assert!(vs
            .dtwin_exits
            .iter()
            .all(|e| e.write == 0 && e.lockdown_broken == 0));
        assert!(vs.client_pieces_reconstructed > 0, "{vs:?}");
        assert!(vs.drained_or_forced() > 0);
    }
    drop(vol);
    // A fresh device over the same backing files (as after a restart) serves everything.
    let dev = Device::new(common::device_config(), dir.path().join("device")).unwrap();
    let vol = VigilVolume::new(dev, &db_dir, common::volume_config(mode)).unwrap();
    let db = DB::open(&db_dir, options(&vol)).unwrap();
    check_scan(&db, &model, b"", b"\xff");
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
}

#[test]
fn model_o_vigil() {
    run_model(Mode::OVigil, 1, 2500);
}

#[test]
fn model_base() {
    run_model(Mode::Base, 2, 1500);
}

#[test]
fn model_plm() {
    run_model(Mode::Plm, 3, 1000);
}
