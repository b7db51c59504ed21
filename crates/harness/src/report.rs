//! The run report every engine's run ends with (schema `halflife-run/1`).
//!
//! `halflife bench` writes it, and so does every peer driver in `peers/` (in its own
//! language): `halflife compare` reads one per engine and lines them up. Fields a driver
//! cannot know are `null`; engine-specific detail goes in `engine_stats`, free-form.

use super::procio::ProcIo;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const SCHEMA: &str = "halflife-run/1";

/// Latency of one operation type, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    /// Reported beside p99.9 because a run's slowest 0.01 % is where background work the
    /// writer waits for (a flush, a GC back-pressure step) shows first; 0 in reports made
    /// before it was recorded.
    #[serde(default)]
    pub p9999: f64,
    pub max: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
}

impl Phase {
    pub fn new(ops: u64, seconds: f64) -> Phase {
        let ops_per_sec = if seconds > 0.0 {
            ops as f64 / seconds
        } else {
            0.0
        };
        Phase {
            ops,
            seconds,
            ops_per_sec,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    pub record_count: u64,
    pub op_count: u64,
    pub key_size: u64,
    pub value_size: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunReport {
    pub schema: String,
    pub engine: String,
    #[serde(default)]
    pub settings: serde_json::Value,
    pub workload: WorkloadInfo,
    /// `load`, `run` and `settle` (waiting for background work after the run).
    pub phases: BTreeMap<String, Phase>,
    /// Run-phase latency per op type (`insert`, `update`, `read`, `scan`, `rmw`).
    pub latency_us: BTreeMap<String, LatencySummary>,
    #[serde(default)]
    pub load_latency_us: Option<LatencySummary>,
    #[serde(default)]
    pub not_found: u64,
    /// Records the run's scans returned (`null` from a driver that does not count them).
    #[serde(default)]
    pub scanned_entries: Option<u64>,
    /// Key and value bytes of every put the client issued.
    pub user_bytes_written: u64,
    /// Bytes written by the engine's own account (all causes).
    pub engine_bytes_written: u64,
    #[serde(default)]
    pub engine_bytes_by_cause: BTreeMap<String, u64>,
    /// Apparent size of every file under the data directory at the end.
    pub disk_bytes: u64,
    #[serde(default)]
    pub tree_bytes: Option<u64>,
    #[serde(default)]
    pub value_file_bytes: Option<u64>,
    /// Live user bytes as the engine measured them (null for peers: compare derives them
    /// from the op file, the same for everyone).
    #[serde(default)]
    pub live_user_bytes: Option<u64>,
    #[serde(default)]
    pub stall_micros: u64,
    /// Time user writes waited for value-file GC (back-pressure under a
    /// space-amplification target).
    #[serde(default)]
    pub gc_delay_micros: u64,
    /// The process's own /proc/self/io, read as the last thing before exiting.
    #[serde(default)]
    pub proc_io: ProcIo,
    /// Peak resident set size of the process (getrusage), page cache not included.
    #[serde(default)]
    pub max_rss_bytes: Option<u64>,
    #[serde(default)]
    pub engine_stats: serde_json::Value,
    /// Time series sampled during the run: by the halflife driver from its counters, or,
    /// for a peer, by the harness from the bytes of its data directory (`disk_bytes` and
    /// `ops_done` only; [`crate::isolate`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
}

/// One point of the amplification-over-time plot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub seconds: f64,
    pub ops_done: u64,
    pub user_bytes_written: u64,
    pub engine_bytes_written: u64,
    pub write_amplification: f64,
    pub disk_bytes: u64,
    pub live_user_bytes: Option<u64>,
    pub space_amplification: Option<f64>,
}

impl RunReport {
    pub fn write_amplification(&self) -> f64 {
        ratio(self.engine_bytes_written, self.user_bytes_written)
    }

    /// Seconds of the run phase, if it ran.
    fn run_seconds(&self) -> Option<f64> {
        self.phases
            .get("run")
            .map(|p| p.seconds)
            .filter(|&s| s > 0.0)
    }

    /// Scans completed per second of the run phase (its other ops included in the time,
    /// as YCSB E reports its mix), if the run scanned.
    pub fn scans_per_sec(&self) -> Option<f64> {
        let scans = self.latency_us.get("scan").map(|l| l.count)?;
        Some(scans as f64 / self.run_seconds()?)
    }

    /// Records the scans returned per second of the run phase, if the driver counted them.
    pub fn records_scanned_per_sec(&self) -> Option<f64> {
        self.scans_per_sec()?;
        Some(self.scanned_entries? as f64 / self.run_seconds()?)
    }

    pub fn load(path: &Path) -> Result<RunReport> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading report {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing report {}", path.display()))
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }
}

pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Peak resident set size of this process, from getrusage.
pub fn max_rss_bytes() -> Option<u64> {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (rc == 0).then(|| ru.ru_maxrss as u64 * 1024)
}

/// Apparent size of every file under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// Bytes written per cause, the causes that wrote any.
pub fn bytes_by_cause(stats: &engine::DbStats) -> BTreeMap<String, u64> {
    stats
        .io
        .by_cause
        .iter()
        .filter(|(_, c)| c.bytes_written > 0)
        .map(|(k, c)| (k.clone(), c.bytes_written))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_driver_report_with_missing_fields() {
        let text = r#"{"schema":"halflife-run/1","engine":"rocksdb",
            "workload":{"record_count":10,"op_count":20,"key_size":16,"value_size":100},
            "phases":{"load":{"ops":10,"seconds":0.5,"ops_per_sec":20.0}},
            "latency_us":{"update":{"count":20,"mean":3.0,"p50":2.0,"p99":9.0,"p999":9.5,"max":10.0}},
            "user_bytes_written":3480,"engine_bytes_written":7000,"disk_bytes":4000,
            "tree_bytes":null,"proc_io":{"wchar":9000,"write_bytes":8192},
            "unknown_field": 1}"#;
        let r: RunReport = serde_json::from_str(text).unwrap();
        assert_eq!(r.engine, "rocksdb");
        assert_eq!(r.latency_us["update"].count, 20);
        assert_eq!(r.proc_io.wchar, 9000);
        assert_eq!(r.tree_bytes, None);
        assert!((r.write_amplification() - 7000.0 / 3480.0).abs() < 1e-12);
        // No scans in the run: no scan rates.
        assert_eq!(
            (r.scans_per_sec(), r.records_scanned_per_sec()),
            (None, None)
        );
    }

    #[test]
    fn scan_rates_are_over_the_run_phase() {
        let text = r#"{"schema":"halflife-run/1","engine":"fjall",
            "workload":{"record_count":10,"op_count":20,"key_size":16,"value_size":100},
            "phases":{"run":{"ops":20,"seconds":2.0,"ops_per_sec":10.0}},
            "latency_us":{"scan":{"count":19,"mean":3.0,"p50":2.0,"p99":9.0,"p999":9.5,"max":10.0}},
            "scanned_entries":950,
            "user_bytes_written":116,"engine_bytes_written":200,"disk_bytes":4000}"#;
        let mut r: RunReport = serde_json::from_str(text).unwrap();
        assert_eq!(r.scans_per_sec(), Some(9.5));
        assert_eq!(r.records_scanned_per_sec(), Some(475.0));
        r.scanned_entries = None;
        assert_eq!(r.records_scanned_per_sec(), None);
    }
}
