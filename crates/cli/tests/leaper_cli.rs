//! `halflife leaper --bursts` (the spike setup) end to end on a tiny workload: one flush
//! and one compaction per burst, the intervals around each compaction, warming removing
//! the compaction's invalidation misses, and repetitions scored each against their own
//! `none` run.

use std::process::Command;

#[test]
fn the_spike_setup_measures_each_compaction() {
    let out = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_halflife"))
        .args([
            "leaper",
            "--quiet",
            "-w",
            "e-commerce",
            "-p",
            "none,incremental-warmup",
            "--scale",
            "0.02",
            "--bursts",
            "2",
            "--burst-period-s",
            "0.6",
            "--sample-ms",
            "20",
            "--steady-intervals",
            "5",
            "--after-intervals",
            "10",
            "--read-rate",
            "50000",
            "--cache-mib",
            "16",
            "--repeat",
            "2",
            "--out",
        ])
        .arg(out.path())
        .status()
        .expect("running halflife leaper");
    assert!(status.success(), "halflife leaper failed: {status}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("e-commerce.json")).unwrap())
            .unwrap();
    assert_eq!(r["bursts"]["bursts"], 2);
    assert_eq!(r["bursts"]["direct_reads"], true);
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for p in results {
        assert_eq!(p["bursts"].as_array().unwrap().len(), 2, "{}", p["policy"]);
        assert_eq!(p["compactions"], 2, "one compaction per burst");
        assert_eq!(p["flushes"], 2, "one flush per burst");
        let around = p["around_compaction"].as_array().unwrap();
        assert_eq!(around.len(), 16, "5 before, the install, 10 after");
        assert_eq!(p["spikes"]["hit_dips"].as_array().unwrap().len(), 2);
        // Every repetition scored against its own `none` (null where that `none` had no
        // spike); the run kept is the median, of two the one that removed more.
        let runs: Vec<Option<f64>> = p["spikes_removed_runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64())
            .collect();
        assert_eq!(runs.len(), 2, "{}", p["policy"]);
        let key = |x: Option<f64>| x.unwrap_or(0.0);
        let kept = p["spikes_removed_vs_none"].as_f64();
        assert_eq!(key(kept), key(runs[0]).max(key(runs[1])), "{}", p["policy"]);
        if p["policy"] == "none" {
            assert!(runs.iter().all(|x| x.is_none_or(|x| x == 0.0)), "{runs:?}");
        }
    }
    let misses = |i: usize| results[i]["invalidation_misses"].as_u64().unwrap();
    assert!(
        misses(0) > 0,
        "the cache held the data, a compaction dropped it"
    );
    assert!(
        misses(1) * 2 < misses(0),
        "incremental warm-up repairs most: {} vs {}",
        misses(1),
        misses(0)
    );
    assert!(
        std::fs::metadata(out.path().join("e-commerce-around.png"))
            .unwrap()
            .len()
            > 1000
    );
}
