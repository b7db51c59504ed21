//! What a benchmark runs: the workload a run asks for by name ([`build_spec`]), the ops of
//! its load and run phases ([`Plan`]), generated or replayed from an op file.

use crate::ops::ClientOp;
use crate::report::WorkloadInfo;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use workload::spec::WorkloadSpec;

/// What runs: the sizes, and where the run-phase ops come from.
pub struct Plan {
    pub name: String,
    pub description: String,
    pub info: WorkloadInfo,
    pub source: Source,
    /// The generating spec (none for an op file).
    pub spec: Option<WorkloadSpec>,
}

/// Where the run-phase ops come from.
pub enum Source {
    Spec(WorkloadSpec),
    OpFile(PathBuf),
}

impl Plan {
    /// The ops of the op file at `path`; `name` defaults to the file's stem, `-` and
    /// `suffix`.
    pub fn op_file(path: &Path, name: Option<String>, suffix: &str) -> Result<Plan> {
        let header = *workload::opfile::OpFileReader::open(path)
            .with_context(|| format!("reading op file {}", path.display()))?
            .header();
        let info = WorkloadInfo {
            record_count: header.record_count,
            op_count: header.op_count,
            key_size: header.key_size as u64,
            value_size: header.value_size as u64,
        };
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("ops")
            .to_string();
        Ok(Plan {
            name: name.unwrap_or_else(|| format!("{stem}-{suffix}")),
            description: format!("op file {}", path.display()),
            info,
            source: Source::OpFile(path.to_path_buf()),
            spec: None,
        })
    }

    /// The ops `spec` generates; `name` defaults to the spec's name, `-` and `suffix`.
    pub fn generated(spec: WorkloadSpec, name: Option<String>, suffix: &str) -> Plan {
        let info = WorkloadInfo {
            record_count: spec.record_count,
            op_count: spec.operation_count,
            key_size: spec.key_size as u64,
            value_size: spec.value_size as u64,
        };
        Plan {
            name: name.unwrap_or_else(|| format!("{}-{suffix}", spec.name)),
            description: format!("{} ({})", spec.name, spec.request_distribution),
            info,
            source: Source::Spec(spec.clone()),
            spec: Some(spec),
        }
    }

    /// The run-phase ops, generated or read from the op file.
    pub fn run_ops(&self) -> Result<Box<dyn Iterator<Item = Result<ClientOp>> + Send>> {
        Ok(match &self.source {
            Source::Spec(spec) => {
                let w = workload::Workload::new(spec.clone())?;
                Box::new(w.run_ops().map(|op| Ok(ClientOp::from(op))))
            }
            Source::OpFile(path) => {
                let reader = workload::opfile::OpFileReader::open(path)?;
                Box::new(reader.map(|op| op.map(ClientOp::from).map_err(anyhow::Error::from)))
            }
        })
    }
}

/// Records of the default `halflife bench` (three updates per record follow): 870 MB live
/// and 2.6 GB of updates, a run of about a minute on 2 cores.
pub const DEFAULT_WRITE_INTENSIVE_RECORDS: u64 = 200_000;

/// Records of `--workload scan`: 410 MB of 4 KiB values.
pub const DEFAULT_SCAN_RECORDS: u64 = 100_000;
/// Ops of `--workload scan`: 9,500 scans of 55 records on average read 520,000 values
/// (2.1 GB), a run of seconds to a minute depending on how much of it is cached.
pub const DEFAULT_SCAN_OPS: u64 = 10_000;

/// The workload a run asks for: what [`build_spec`] needs, given by `bench`'s flags or by
/// `compare`'s preset and flags.
pub struct SpecChoice<'a> {
    pub workload: &'a str,
    pub records: Option<u64>,
    pub op_count: Option<u64>,
    pub key_size: Option<u32>,
    pub value_size: Option<u32>,
    pub distribution: Option<&'a str>,
    pub theta: f64,
    pub seed: Option<u64>,
}

pub fn build_spec(a: &SpecChoice) -> Result<WorkloadSpec> {
    let w = a.workload.to_ascii_lowercase();
    let mut spec = match w.as_str() {
        "write-intensive" | "wi" | "zipfian" | "shifting" | "mixed" | "expiring" => {
            let records = a.records.unwrap_or(DEFAULT_WRITE_INTENSIVE_RECORDS);
            let spec = match w.as_str() {
                "shifting" => WorkloadSpec::shifting(a.theta)?,
                "expiring" => WorkloadSpec::expiring(a.theta)?,
                "mixed" => WorkloadSpec::mixed()?,
                _ => WorkloadSpec::write_intensive(a.theta)?,
            };
            spec.with_record_count(records)
                .with_operation_count(a.op_count.unwrap_or(3 * records))
        }
        s if s.len() == 1 || s.starts_with("ycsb-") => {
            let c = s.chars().last().expect("non-empty");
            WorkloadSpec::ycsb(c)?
        }
        "scan" => WorkloadSpec::scan()?
            .with_record_count(a.records.unwrap_or(DEFAULT_SCAN_RECORDS))
            .with_operation_count(a.op_count.unwrap_or(DEFAULT_SCAN_OPS)),
        _ => bail!(
            "unknown workload {:?}: use write-intensive (alias zipfian), shifting, mixed, expiring, scan, or a YCSB workload a-f",
            a.workload
        ),
    };
    if let Some(n) = a.records {
        if n == 0 {
            bail!("--records must be at least 1: reads and updates need an existing key");
        }
        spec = spec.with_record_count(n);
    }
    if let Some(n) = a.op_count {
        spec = spec.with_operation_count(n);
    }
    if let Some(n) = a.key_size {
        spec = spec.with_key_size(n);
    }
    if let Some(n) = a.value_size {
        spec = spec.with_value_size(n);
    }
    if let Some(d) = a.distribution {
        spec.request_distribution = d.parse().map_err(|e| anyhow!("--distribution {d}: {e}"))?;
    }
    if let Some(seed) = a.seed {
        spec = spec.with_seed(seed);
    }
    spec.validate()?;
    Ok(spec)
}
