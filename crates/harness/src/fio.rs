//! VAT's achieved-throughput parameter `r` measured with fio (paper 003, sec. 3.2): random
//! writes of the table-file size at a queue depth around 30, over sequential writes, on a
//! scratch file in the directory whose device is of interest.
//!
//! fio is the standard tool for this; it is installed with apt-get when missing (as root,
//! or through `sudo -n`). Both runs use libaio with `direct=1` so that the page cache does
//! not absorb the writes; where the filesystem refuses O_DIRECT (tmpfs, some overlays) they
//! fall back to buffered I/O and say so, since `r` is then a statement about the page
//! cache rather than the device.

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What to measure.
#[derive(Clone, Debug)]
pub struct FioPlan {
    /// Directory for the scratch file (removed afterwards).
    pub dir: PathBuf,
    /// Request size of the random writes: the table-file size.
    pub block_bytes: u64,
    /// Request size of the sequential writes.
    pub seq_block_bytes: u64,
    /// Outstanding requests (the paper uses about 30).
    pub iodepth: u32,
    /// Size of the scratch file.
    pub file_bytes: u64,
    /// Seconds per run.
    pub runtime_secs: u32,
}

/// One fio run's result.
#[derive(Clone, Debug, Serialize)]
pub struct FioRun {
    pub rw: String,
    pub block_bytes: u64,
    pub iodepth: u32,
    pub direct: bool,
    pub bytes_per_sec: f64,
    pub iops: f64,
}

/// `r` and the two runs behind it.
#[derive(Clone, Debug, Serialize)]
pub struct RMeasurement {
    pub r: f64,
    pub random: FioRun,
    pub sequential: FioRun,
    pub fio_version: String,
    pub note: Option<String>,
}

/// Makes sure fio can be run, installing the Debian package if needed.
pub fn ensure_fio() -> Result<String> {
    if let Some(v) = fio_version() {
        return Ok(v);
    }
    let root = unsafe { libc::geteuid() } == 0;
    let sudo = !root
        && Command::new("sudo")
            .args(["-n", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if !root && !sudo {
        bail!(
            "fio is not installed and cannot be installed from here (not root, no passwordless \
             sudo); install it with `apt-get install fio` and run again"
        );
    }
    tracing::info!("fio not found: installing the Debian package with apt-get");
    let apt = |args: &[&str]| -> Result<bool> {
        let mut c = if sudo {
            let mut c = Command::new("sudo");
            c.arg("-n").arg("apt-get");
            c
        } else {
            Command::new("apt-get")
        };
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        Ok(c.status().context("running apt-get")?.success())
    };
    // The package lists may be missing or stale in a fresh container.
    let installed =
        apt(&["install", "-y", "fio"])? || (apt(&["update"])? && apt(&["install", "-y", "fio"])?);
    if !installed {
        bail!("apt-get could not install fio");
    }
    fio_version().ok_or_else(|| anyhow!("fio was installed but does not run"))
}

fn fio_version() -> Option<String> {
    let out = Command::new("fio").arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Runs the random and the sequential write jobs and returns `r`.
pub fn measure_r(plan: &FioPlan) -> Result<RMeasurement> {
    let fio_version = ensure_fio()?;
    if plan.block_bytes == 0 || plan.seq_block_bytes == 0 || plan.iodepth == 0 {
        bail!("block sizes and iodepth must be positive");
    }
    if plan.file_bytes < 4 * plan.block_bytes {
        bail!(
            "the scratch file ({} bytes) must hold at least 4 random-write blocks of {} bytes",
            plan.file_bytes,
            plan.block_bytes
        );
    }
    std::fs::create_dir_all(&plan.dir)
        .with_context(|| format!("creating {}", plan.dir.display()))?;
    let file = plan
        .dir
        .join(format!("halflife-fio-{}.tmp", std::process::id()));
    let result = (|| {
        let (random, note) = run_with_fallback(plan, &file, "randwrite", plan.block_bytes)?;
        let (sequential, _) = run_job(plan, &file, "write", plan.seq_block_bytes, random.direct)?;
        Ok::<_, anyhow::Error>((random, sequential, note))
    })();
    let _ = std::fs::remove_file(&file);
    let (random, sequential, note) = result?;
    if sequential.bytes_per_sec <= 0.0 {
        bail!("fio reported no sequential throughput");
    }
    Ok(RMeasurement {
        r: random.bytes_per_sec / sequential.bytes_per_sec,
        random,
        sequential,
        fio_version,
        note,
    })
}

/// Direct I/O first; buffered if the filesystem refuses O_DIRECT.
fn run_with_fallback(
    plan: &FioPlan,
    file: &Path,
    rw: &str,
    bs: u64,
) -> Result<(FioRun, Option<String>)> {
    match run_job(plan, file, rw, bs, true) {
        Ok(r) => Ok(r),
        Err(e) => {
            let _ = std::fs::remove_file(file);
            let (run, _) = run_job(plan, file, rw, bs, false).with_context(|| {
                format!("fio failed with direct=1 ({e:#}) and with buffered I/O")
            })?;
            Ok((
                run,
                Some(format!(
                    "direct I/O failed on {} ({e:#}); buffered I/O measured instead, so r \
                     describes the page cache more than the device",
                    plan.dir.display()
                )),
            ))
        }
    }
}

fn run_job(
    plan: &FioPlan,
    file: &Path,
    rw: &str,
    bs: u64,
    direct: bool,
) -> Result<(FioRun, Option<String>)> {
    let out = Command::new("fio")
        .arg(format!("--name=halflife-{rw}"))
        .arg(format!("--filename={}", file.display()))
        .arg(format!("--rw={rw}"))
        .arg(format!("--bs={bs}"))
        .arg(format!("--size={}", plan.file_bytes))
        .arg(format!("--iodepth={}", plan.iodepth))
        .arg("--ioengine=libaio")
        .arg(format!("--direct={}", u8::from(direct)))
        .arg(format!("--runtime={}", plan.runtime_secs))
        .arg("--time_based")
        .arg("--end_fsync=1")
        .arg("--output-format=json")
        .output()
        .context("running fio")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "fio {rw} exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let (bytes_per_sec, iops) = parse_write_bandwidth(&stdout)?;
    Ok((
        FioRun {
            rw: rw.to_string(),
            block_bytes: bs,
            iodepth: plan.iodepth,
            direct,
            bytes_per_sec,
            iops,
        },
        None,
    ))
}

/// Write bandwidth (bytes/s) and IOPS summed over the jobs of a fio JSON report. fio may
/// print notes before the JSON document; they are skipped. Old fio versions report `bw` in
/// KiB/s only.
pub fn parse_write_bandwidth(output: &str) -> Result<(f64, f64)> {
    let start = output
        .find('{')
        .ok_or_else(|| anyhow!("no JSON object in fio's output"))?;
    let doc: serde_json::Value =
        serde_json::from_str(&output[start..]).context("parsing fio's JSON output")?;
    let jobs = doc["jobs"]
        .as_array()
        .filter(|j| !j.is_empty())
        .ok_or_else(|| anyhow!("fio's JSON output has no jobs"))?;
    let (mut bw, mut iops) = (0.0, 0.0);
    for job in jobs {
        if job["error"].as_i64().unwrap_or(0) != 0 {
            bail!(
                "fio job {} failed with error {}",
                job["jobname"],
                job["error"]
            );
        }
        let w = &job["write"];
        bw += match w["bw_bytes"].as_f64() {
            Some(b) => b,
            None => {
                w["bw"]
                    .as_f64()
                    .ok_or_else(|| anyhow!("fio job has no write bandwidth"))?
                    * 1024.0
            }
        };
        iops += w["iops"].as_f64().unwrap_or(0.0);
    }
    Ok((bw, iops))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio-3.33's JSON report of a 64 KiB random-write job on the development machine,
    /// latency histograms trimmed.
    const SAMPLE: &str = include_str!("fio-sample.json");

    #[test]
    fn parses_a_captured_report() {
        let (bw, iops) = parse_write_bandwidth(SAMPLE).unwrap();
        assert_eq!(bw, 288_109_860.0);
        assert!((iops - 4396.207585).abs() < 1e-9);
        // Notes printed before the document are skipped.
        let noisy = format!("note: both iodepth >= 1 and synchronous I/O engine\n{SAMPLE}");
        assert_eq!(parse_write_bandwidth(&noisy).unwrap().0, bw);
    }

    #[test]
    fn old_reports_in_kib_and_failures_are_handled() {
        let old = SAMPLE.replace("\"bw_bytes\": 288109860,", "");
        assert_eq!(parse_write_bandwidth(&old).unwrap().0, 281_357.0 * 1024.0);
        let failed = SAMPLE.replace("\"error\": 0", "\"error\": 5");
        assert!(parse_write_bandwidth(&failed).is_err());
        assert!(parse_write_bandwidth("fio: no such file").is_err());
        assert!(parse_write_bandwidth("{\"jobs\": []}").is_err());
    }
}
