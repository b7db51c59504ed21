//! `halflife bench` end to end on a tiny workload: the report exists and its numbers are sane.

use std::process::Command;

fn run_bench(extra: &[&str]) -> serde_json::Value {
    let out = tempfile::tempdir().unwrap();
    let report = out.path().join("r.json");
    let plot = out.path().join("r.png");
    let status = Command::new(env!("CARGO_BIN_EXE_halflife"))
        .args(["bench", "--quiet", "--samples", "5", "--memtable-mb", "1"])
        .args(extra)
        .arg("--report")
        .arg(&report)
        .arg("--plot")
        .arg(&plot)
        .status()
        .expect("running halflife bench");
    assert!(status.success(), "halflife bench failed: {status}");
    assert!(
        std::fs::metadata(&plot).unwrap().len() > 1000,
        "plot written"
    );
    serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
}

#[test]
fn write_intensive_report_is_sane() {
    let r = run_bench(&[
        "--records",
        "1500",
        "--op-count",
        "3000",
        "--value-size",
        "1024",
    ]);
    assert_eq!(r["schema"], "halflife-run/1");
    assert_eq!(r["phases"]["load"]["ops"], 1500);
    assert_eq!(r["phases"]["run"]["ops"], 3000);
    assert_eq!(r["load_latency_us"]["count"], 1500);
    assert_eq!(r["latency_us"]["update"]["count"], 3000);
    let user = r["user_bytes_written"].as_u64().unwrap();
    assert_eq!(user, 4500 * (256 + 1024));
    let engine = r["engine_bytes_written"].as_u64().unwrap();
    assert!(
        engine >= user,
        "write amplification >= 1: {engine} < {user}"
    );
    let live = r["live_user_bytes"].as_u64().unwrap();
    assert_eq!(live, 1500 * (256 + 1024));
    assert!(r["disk_bytes"].as_u64().unwrap() > 0);
    assert!(r["samples"].as_array().unwrap().len() >= 2);
    assert!(r["proc_io"]["wchar"].as_u64().unwrap() > 0);
}

#[test]
fn mixed_workload_deletes_reach_the_engine_and_the_oracle() {
    // The oracle policy builds its future from the same ops (deletes included).
    let r = run_bench(&[
        "--workload",
        "mixed",
        "--records",
        "1500",
        "--op-count",
        "6000",
        "--value-size",
        "1024",
        "--policy",
        "oracle",
        "--threads",
        "1",
    ]);
    let spec = workload::WorkloadSpec::mixed()
        .unwrap()
        .with_record_count(1500)
        .with_operation_count(6000)
        .with_value_size(1024);
    let ops: Vec<workload::Op> = workload::Workload::new(spec).unwrap().run_ops().collect();
    let deletes = ops
        .iter()
        .filter(|o| matches!(o, workload::Op::Delete { .. }))
        .count() as u64;
    assert!(deletes > 300, "{deletes}");
    assert_eq!(r["latency_us"]["delete"]["count"], deletes);
    assert_eq!(r["latency_us"]["update"]["count"], 6000 - deletes);
    // Keys deleted at the end are gone from the engine: its live data (a tree scan after
    // the run) is exactly the keys the op stream leaves.
    let mut gone = std::collections::HashSet::new();
    for op in &ops {
        match *op {
            workload::Op::Delete { key } => gone.insert(key),
            other => gone.remove(&other.key()),
        };
    }
    assert!(!gone.is_empty());
    let live = r["live_user_bytes"].as_u64().unwrap();
    assert_eq!(live, (1500 - gone.len() as u64) * (256 + 1024));
    let user = r["user_bytes_written"].as_u64().unwrap();
    assert_eq!(
        user,
        (1500 + 6000 - deletes) * (256 + 1024) + deletes * 256,
        "a delete counts its key"
    );
}

#[test]
fn ycsb_mix_with_two_threads_counts_every_op() {
    let r = run_bench(&[
        "--workload",
        "e",
        "--records",
        "1000",
        "--op-count",
        "2000",
        "--threads",
        "2",
        "--policy",
        "inline",
    ]);
    let counted: u64 = r["latency_us"]
        .as_object()
        .unwrap()
        .values()
        .map(|l| l["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 2000);
    assert!(r["latency_us"]["scan"]["count"].as_u64().unwrap() > 1500);
    assert_eq!(r["not_found"], 0);
}

#[test]
fn an_unwritable_report_path_fails_before_the_run_and_names_the_path() {
    let out = tempfile::tempdir().unwrap();
    // A directory cannot be created under a plain file, even as root.
    let file = out.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let report = file.join("sub/r.json");
    let started = std::time::Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_halflife"))
        .args(["bench", "--quiet", "--records", "200000", "--report"])
        .arg(&report)
        .output()
        .expect("running halflife bench");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&file.join("sub").display().to_string()),
        "{err}"
    );
    // 200k records of 4 KiB would take far longer than this: nothing ran.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn invalid_values_are_reported_under_the_flag_name() {
    let o = Command::new(env!("CARGO_BIN_EXE_halflife"))
        .args(["bench", "--quiet", "--records", "0", "--no-plot"])
        .output()
        .expect("running halflife bench");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--records"), "{err}");
    let o = Command::new(env!("CARGO_BIN_EXE_halflife"))
        .args(["bench", "--quiet", "--records", "10", "--memtable-mb", "0"])
        .output()
        .expect("running halflife bench");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--memtable-mb") && !err.contains("memtable_size"),
        "{err}"
    );
}
