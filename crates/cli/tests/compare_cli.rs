//! `halflife compare` end to end on the shifting and mixed workloads, with our engines only
//! (the peers need compilers and packages): every engine replays the same op file, deletes
//! included, and the report's live bytes are the keys the op stream leaves.

use std::process::Command;

fn compare(workload: &str, dir: &std::path::Path) -> serde_json::Value {
    compare_engines(workload, "halflife-titan,halflife-oracle", dir)
}

fn compare_engines(workload: &str, engines: &str, dir: &std::path::Path) -> serde_json::Value {
    let report = dir.join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_halflife"))
        .args(["compare", "--preset", "small", "--records", "800"])
        .args(["--op-count", "3000", "--value-size", "1024"])
        .args(["--workload", workload, "--memtable-mb", "1"])
        .args(["--engines", engines])
        .args(["--memory-limit-mb", "0"])
        .arg("--work-dir")
        .arg(dir.join("work"))
        .arg("--report")
        .arg(&report)
        .output()
        .expect("running halflife compare");
    assert!(
        out.status.success(),
        "halflife compare failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
}

#[test]
fn mixed_and_shifting_run_every_engine_on_the_same_ops() {
    let dir = tempfile::tempdir().unwrap();
    let r = compare("mixed", dir.path());
    assert_eq!(r["workload"]["name"], "mixed");
    let spec: workload::WorkloadSpec = serde_json::from_value(r["workload"].clone()).unwrap();
    let ops: Vec<workload::Op> = workload::Workload::new(spec).unwrap().run_ops().collect();
    let mut deleted = std::collections::HashSet::new();
    for op in &ops {
        match *op {
            workload::Op::Delete { key } => deleted.insert(key),
            other => deleted.remove(&other.key()),
        };
    }
    let deletes = ops
        .iter()
        .filter(|o| matches!(o, workload::Op::Delete { .. }))
        .count();
    assert!(!deleted.is_empty() && deletes > 100, "{deletes}");
    assert_eq!(
        r["live_user_bytes"],
        (800 - deleted.len() as u64) * (256 + 1024)
    );
    let engines = r["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2);
    for e in engines {
        assert!(e["failed"].is_null(), "{}: {}", e["name"], e["failed"]);
        assert_eq!(e["report"]["latency_us"]["delete"]["count"], deletes);
        assert_eq!(e["report"]["phases"]["run"]["ops"], 3000);
    }

    let r = compare("shifting", dir.path());
    assert_eq!(r["workload"]["name"], "shifting-0.9");
    assert_eq!(r["workload"]["hot_set_phases"], 4);
    assert_eq!(r["live_user_bytes"], 800 * (256 + 1024));
}

#[test]
fn expiring_updates_reach_the_engine_or_the_sweep_and_expired_keys_are_not_live() {
    let dir = tempfile::tempdir().unwrap();
    let r = compare_engines(
        "expiring",
        "halflife-lifetime,halflife-titan+sweep",
        dir.path(),
    );
    let spec: workload::WorkloadSpec = serde_json::from_value(r["workload"].clone()).unwrap();
    let ops: Vec<workload::Op> = workload::Workload::new(spec).unwrap().run_ops().collect();
    // Live at the end (tick 3000): keys whose last write carries no expiry or one after it.
    let mut expires = std::collections::HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        expires.insert(op.key(), op.ttl().map(|t| i as u64 + u64::from(t)));
    }
    let expired = expires
        .values()
        .filter(|e| e.is_some_and(|e| e <= 3000))
        .count() as u64;
    assert!(expired > 10, "{expired}");
    assert_eq!(r["live_user_bytes"], (800 - expired) * (256 + 1024));
    let engines = r["engines"].as_array().unwrap();
    for e in engines {
        assert!(e["failed"].is_null(), "{}: {}", e["name"], e["failed"]);
        assert_eq!(e["report"]["latency_us"]["update"]["count"], 3000);
    }
    let (told, swept) = (&engines[0]["report"], &engines[1]["report"]);
    assert_eq!(told["settings"]["expiry"], "engine");
    assert_eq!(told["settings"]["swept_expiries"], 0);
    assert!(told["engine_stats"]["expired_entries"].as_u64().unwrap() > 0);
    assert_eq!(swept["settings"]["expiry"], "sweep");
    assert!(swept["settings"]["swept_expiries"].as_u64().unwrap() >= expired);
    assert_eq!(swept["engine_stats"]["expired_entries"], 0);
}
