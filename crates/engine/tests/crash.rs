//! Crash tests: a child process writes with `sync: true` and reports each acknowledged
//! write on stdout; the parent kills it with SIGKILL at a random moment, reopens the
//! database and checks that every acknowledged write is there. Small memtables and value
//! files make kills land inside flushes, compactions and GC jobs too.

use halflife_engine::lifetime::{GbmParams, ThresholdParams};
use halflife_engine::{
    GcPolicyConfig, GcTrigger, LifetimeOptions, Options, TreeOptions, ValueLogOptions, WalOptions,
    WriteOptions, DB,
};
use rand::{Rng, SeedableRng};

use std::process::Command;
use std::time::Duration;

const DIR_VAR: &str = "HALFLIFE_CRASH_DIR";
const START_VAR: &str = "HALFLIFE_CRASH_START";
const POLICY_VAR: &str = "HALFLIFE_CRASH_POLICY";
/// Set to "0" for writes without sync.
const SYNC_VAR: &str = "HALFLIFE_CRASH_SYNC";

/// `policy` is a policy name, with `+ttl` for paper 000's TTL trigger (else the
/// space-amplification trigger, at 1.1 so that GC jobs run often), and `+vwal` for the
/// value log as the WAL.
fn options(policy: &str) -> Options {
    let (policy, value_log_wal) = match policy.strip_suffix("+vwal") {
        Some(p) => (p, true),
        None => (policy, false),
    };
    let (name, trigger) = match policy.strip_suffix("+ttl") {
        Some(name) => (name, GcTrigger::Ttl),
        None => (policy, GcTrigger::SpaceAmp { target: 1.1 }),
    };
    Options {
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
            value_log_wal,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            gc: name.parse().unwrap(),
            // Lifetime policies: short TTLs and a small dataset, so that kills also land in
            // GC jobs, index-map writes and model training/saving.
            lifetime: LifetimeOptions {
                thresholds: ThresholdParams {
                    initial_ttl: if trigger == GcTrigger::Ttl { 150 } else { 400 },
                    ..ThresholdParams::default()
                },
                dataset_capacity: 32,
                gbm: GbmParams {
                    iterations: 5,
                    ..GbmParams::default()
                },
                trigger,
                ..LifetimeOptions::default()
            },
            ..Default::default()
        },
        ..Options::default()
    }
}

/// The key of write number `i`, out of `keys` keys.
fn key(i: u64, keys: u64) -> Vec<u8> {
    format!("k{:06}", i % keys).into_bytes()
}

/// How many keys the writer of `policy` cycles through. Index-map GC policies write fewer,
/// so that the thousand-odd synced writes of a test make garbage and GC jobs run.
fn keys_for(policy: &str) -> u64 {
    if options(policy).vlog.gc.uses_index_maps() {
        200
    } else {
        3000
    }
}

/// Value of write number `i`: the key is rewritten many times, so a reader can tell
/// which write it sees.
fn value(i: u64) -> Vec<u8> {
    let mut v = format!("w{i}:").into_bytes();
    v.resize(40 + (i % 7) as usize * 60, b'x');
    v
}

/// The child process, started by `crash_rounds` with `--ignored`; ignored in normal runs
/// so that it never counts as a passing test.
#[test]
#[ignore = "child process of the crash tests"]
fn crash_child_writer() {
    let dir = std::env::var(DIR_VAR).expect("run by crash_rounds, which sets the directory");
    let start: u64 = std::env::var(START_VAR).unwrap().parse().unwrap();
    let policy = std::env::var(POLICY_VAR).unwrap();
    let db = DB::open(&dir, options(&policy)).unwrap();
    let sync = WriteOptions {
        sync: std::env::var(SYNC_VAR).map_or(true, |s| s != "0"),
    };
    let mut out = std::io::stdout().lock();
    let keys = keys_for(&policy);
    for i in start.. {
        db.put_opt(&key(i, keys), &value(i), &sync).unwrap();
        use std::io::Write;
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

fn crash_rounds(policy: &str, seed: u64, rounds: usize) {
    crash_rounds_with(policy, seed, rounds, true)
}

/// `sync: false`: the child is killed, the machine does not fail, so a write acknowledged
/// without sync must survive too (its WAL record reached the OS before the
/// acknowledgement; with the WAL written through a mapping, it is in the page cache).
fn crash_rounds_with(policy: &str, seed: u64, rounds: usize, sync: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut next = 0u64;
    // Newest acknowledged write per key.
    let mut latest = std::collections::HashMap::new();
    // Index-map GC policies: a GC job installed its maps in some round.
    let mut saw_gc = false;
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap());
        child
            .args([
                "--exact",
                "crash_child_writer",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(DIR_VAR, dir.path())
            .env(START_VAR, next.to_string())
            .env(POLICY_VAR, policy)
            .env(SYNC_VAR, if sync { "1" } else { "0" });
        let acked = testkit::kill_after(child, Duration::from_millis(rng.random_range(150..900)));
        for &i in &acked {
            latest.insert(key(i, keys_for(policy)), i);
            next = next.max(i + 1);
        }
        let db = DB::open(dir.path(), options(policy))
            .unwrap_or_else(|e| panic!("reopen after kill in round {round}: {e}"));
        for (k, &i) in &latest {
            let got = db
                .get(k)
                .unwrap()
                .unwrap_or_else(|| panic!("round {round}: acknowledged write {i} of {k:?} lost"));
            // A newer write than the last acknowledged one may have landed (it was in
            // flight when the child died); an older one may not.
            let n: u64 = std::str::from_utf8(&got[1..got.iter().position(|&b| b == b':').unwrap()])
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                n >= i,
                "round {round}: {k:?} went back from write {i} to {n}"
            );
            assert_eq!(got, value(n));
        }
        assert_eq!(db.version().check_invariants(), Ok(()));
        // (Maps go once compaction has rewritten every pointer through them; the TTL
        // trigger's GC outputs also keep their short or long class.)
        let v = db.version();
        saw_gc |= !v.maps.is_empty()
            || v.blobs.values().any(|b| {
                b.lifetime
                    .is_some_and(|l| l.class != halflife_engine::lifetime::LifetimeClass::Default)
            });
        drop(v);
        // A TTL job that finds only garbage leaves no file behind: after the last round,
        // the same writes continued in this process show that they make GC jobs.
        if round + 1 == rounds && !saw_gc && options(policy).vlog.gc.uses_index_maps() {
            for i in next..next + 1000 {
                db.put(&key(i, keys_for(policy)), &value(i)).unwrap();
            }
            db.wait_idle().unwrap();
            saw_gc = db.stats().gc_jobs > 0;
        }
        db.close().unwrap();
    }
    assert!(next > 100, "the child acknowledged only {next} writes");
    if options(policy).vlog.gc.uses_index_maps() {
        assert!(
            saw_gc,
            "no GC job was installed in {rounds} rounds ({next} writes)"
        );
    }
}

#[test]
fn crash_inline_unsynced() {
    crash_rounds_with("inline", 23, 5, false);
}

#[test]
fn crash_inline() {
    crash_rounds("inline", 11, 5);
}

#[test]
fn crash_blobdb() {
    crash_rounds("blobdb", 12, 5);
}

#[test]
fn crash_titan_during_gc() {
    crash_rounds("titan", 13, 5);
}

/// Values placed by predicted death at flush (one value file per class) and at GC.
#[test]
fn crash_lifetime_during_gc_with_birth_placement() {
    crash_rounds("lifetime", 14, 5);
}

#[test]
fn crash_dumpkv_during_gc_and_training() {
    crash_rounds("lifetime+ttl", 16, 4);
}

/// The value log as the WAL: kills land between a value append and its WAL record, in
/// value-file cuts and memtable switches, and in GC jobs over files the write path made.
#[test]
fn crash_titan_value_log_wal() {
    crash_rounds("titan+vwal", 17, 5);
}

#[test]
fn crash_lifetime_value_log_wal() {
    crash_rounds("lifetime+vwal", 18, 5);
}

#[test]
fn crash_terark_during_gc() {
    crash_rounds("terark", 15, 3);
}

#[test]
fn every_policy_name_is_accepted_by_the_child() {
    for p in GcPolicyConfig::NAMES {
        assert_eq!(options(p).vlog.gc.name(), p);
    }
}

/// The child of `crash_during_repair`: repairs the database over and over (the first pass
/// rebuilds a damaged manifest, the next ones an intact one), printing `ack` after each.
#[test]
#[ignore = "child process of the crash tests"]
fn crash_child_repairer() {
    let dir = std::env::var(DIR_VAR).expect("run by crash_during_repair");
    let policy = std::env::var(POLICY_VAR).unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        halflife_engine::repair::repair(
            std::path::Path::new(&dir),
            &options(&policy),
            &mut |_, _| {},
        )
        .unwrap();
        use std::io::Write;
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

/// A repair killed at any moment leaves a database that opens, or that the next repair
/// makes open, with every acknowledged write.
#[test]
fn crash_during_repair() {
    let policy = "terark";
    let dir = tempfile::tempdir().unwrap();
    let mut latest = std::collections::HashMap::new();
    {
        let db = DB::open(dir.path(), options(policy)).unwrap();
        for i in 0..12_000u64 {
            db.put(&key(i, 3000), &value(i)).unwrap();
            latest.insert(key(i, 3000), i);
        }
        db.wait_idle().unwrap();
        db.close().unwrap();
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let mut repairs = 0;
    for round in 0..6 {
        // Damage the manifest so that the database cannot open until repaired.
        testkit::damage_manifest(dir.path(), 3);
        assert!(DB::open(dir.path(), options(policy)).is_err());

        let mut child = Command::new(std::env::current_exe().unwrap());
        child
            .args([
                "--exact",
                "crash_child_repairer",
                "--ignored",
                "--nocapture",
            ])
            .env(DIR_VAR, dir.path())
            .env(POLICY_VAR, policy);
        repairs +=
            testkit::kill_after(child, Duration::from_millis(rng.random_range(30..400))).len();
        let db = match DB::open(dir.path(), options(policy)) {
            Ok(db) => db,
            Err(_) => {
                halflife_engine::repair::repair(dir.path(), &options(policy), &mut |_, _| {})
                    .unwrap_or_else(|e| panic!("round {round}: repair after a killed repair: {e}"));
                DB::open(dir.path(), options(policy))
                    .unwrap_or_else(|e| panic!("round {round}: open after repair: {e}"))
            }
        };
        for (k, &i) in &latest {
            assert_eq!(db.get(k).unwrap(), Some(value(i)), "round {round}: {k:?}");
        }
        db.close().unwrap();
    }
    assert!(
        repairs > 0,
        "no repair finished before a kill: the kills never landed late"
    );
}
