//! Runs one engine's driver as a child process, alone, in a memory-limited cgroup, and
//! measures the device's bytes written around it.
//!
//! Order of events: `sync`; read the device's sectors written; start the child (it joins
//! its cgroup before exec); relay its progress; wait for it; `sync`; read the counter again.
//! The child reports its own `/proc/self/io` as its last act, since a parent cannot read
//! `/proc/<pid>/io` of a child that has exited.
//!
//! A driver that takes no samples of its own (every peer but halflife) gets them from
//! here: the bytes of its data directory, read at its progress lines about
//! [`OUTSIDE_SAMPLES`] times over the whole run. Without them a peer's space is known only
//! at the end, after its settle, while halflife's is averaged over the run: comparing the
//! two would credit a peer for space it held only once its background work had finished.

use super::cgroup::MemoryCgroup;
use super::device::BlockDevice;
use super::report::{dir_bytes, RunReport, Sample};
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use serde::Serialize;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// What the harness measured from outside the engine.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Outside {
    /// Device bytes written between the syncs around the run (all processes on the device).
    pub device_bytes_written: Option<u64>,
    pub device: Option<String>,
    pub wall_seconds: f64,
    pub memory_limit: Option<u64>,
    pub memory_peak: Option<u64>,
    pub cgroup: Option<String>,
}

pub struct IsolateOptions<'a> {
    pub name: &'a str,
    pub device: Option<&'a BlockDevice>,
    /// `None`: no cgroup (the caller has already warned).
    pub memory_limit: Option<u64>,
    pub log: &'a Path,
    /// The engine's data directory, sampled from outside when the driver takes no samples.
    pub data_dir: Option<&'a Path>,
}

/// About how many samples of a driver's data directory are taken over its whole run (load
/// and updates), as the halflife driver samples its own counters.
pub const OUTSIDE_SAMPLES: u64 = 200;

/// Runs `cmd` and returns its report (read from `report`) and the outside measurements.
pub fn run(
    mut cmd: Command,
    report: &Path,
    opts: &IsolateOptions,
    bar: &ProgressBar,
) -> Result<(RunReport, Outside)> {
    let mut outside = Outside {
        device: opts.device.map(|d| d.name.clone()),
        ..Default::default()
    };
    let cgroup = match opts.memory_limit {
        Some(limit) => {
            let name = format!("halflife-{}-{}", opts.name, std::process::id());
            match MemoryCgroup::create(&name, limit) {
                Ok(cg) => {
                    cg.attach_on_spawn(&mut cmd)?;
                    outside.memory_limit = Some(limit);
                    outside.cgroup = Some(cg.dir().display().to_string());
                    Some(cg)
                }
                Err(e) => {
                    bar.suspend(|| {
                        tracing::warn!(
                            "{}: no memory-limited cgroup ({e:#}); the page cache may hide \
                             writes to short-lived files, so device bytes can be under-reported",
                            opts.name
                        )
                    });
                    None
                }
            }
        }
        None => None,
    };
    let log = std::fs::File::create(opts.log)
        .with_context(|| format!("creating {}", opts.log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(Stdio::piped());

    let before = match opts.device {
        Some(d) => Some(d.synced_bytes_written()?),
        None => None,
    };
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let stderr = child.stderr.take().expect("piped");
    let mut log_w = std::io::LineWriter::new(log);
    let mut samples: Vec<Sample> = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line?;
        if let Some((done, total)) = parse_progress(&line) {
            bar.set_length(total);
            bar.set_position(done);
            let step = (total / OUTSIDE_SAMPLES).max(1);
            let due = samples.last().map_or(0, |s| s.ops_done + step);
            if let (Some(dir), true) = (opts.data_dir, done >= due) {
                samples.push(Sample {
                    seconds: start.elapsed().as_secs_f64(),
                    ops_done: done,
                    disk_bytes: dir_bytes(dir),
                    ..Default::default()
                });
            }
        } else {
            use std::io::Write;
            writeln!(log_w, "{line}")?;
        }
    }
    let status = child.wait()?;
    outside.wall_seconds = start.elapsed().as_secs_f64();
    if let (Some(d), Some(b)) = (opts.device, before) {
        outside.device_bytes_written = Some(d.synced_bytes_written()?.saturating_sub(b));
    }
    if let Some(cg) = &cgroup {
        outside.memory_peak = cg.peak_bytes();
        if !status.success() && cg.oom_kills() > 0 {
            bail!(
                "{} was killed by the OOM killer at its memory limit of {} bytes (raise --memory-limit-mb); \
                 its output is in {}",
                opts.name,
                cg.limit(),
                opts.log.display()
            );
        }
    }
    if !status.success() {
        let tail = tail_of(opts.log, 15);
        bail!(
            "{} failed ({status}); last lines of {}:\n{tail}",
            opts.name,
            opts.log.display()
        );
    }
    let mut report = RunReport::load(report)?;
    if report.samples.is_empty() {
        report.samples = samples;
    }
    Ok((report, outside))
}

/// `progress DONE TOTAL`.
pub fn parse_progress(line: &str) -> Option<(u64, u64)> {
    let mut it = line.strip_prefix("progress ")?.split_whitespace();
    let done = it.next()?.parse().ok()?;
    let total = it.next()?.parse().ok()?;
    it.next().is_none().then_some((done, total))
}

fn tail_of(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_progress_lines() {
        assert_eq!(parse_progress("progress 10 200"), Some((10, 200)));
        assert_eq!(parse_progress("progress 10"), None);
        assert_eq!(parse_progress("progress 10 200 x"), None);
        assert_eq!(parse_progress("INFO progress 1 2"), None);
    }

    /// A driver without samples of its own gets its data directory's bytes (nested
    /// directories included) at its progress lines; one with samples keeps its own.
    #[test]
    fn samples_the_data_directory_of_a_driver_without_samples() {
        let t = tempfile::tempdir().unwrap();
        let data = t.path().join("data");
        std::fs::create_dir_all(data.join("sub")).unwrap();
        let report = t.path().join("report.json");
        let log = t.path().join("log");
        // The harness reads the driver's stderr on its own schedule, so the driver waits
        // until its next line has reached the log (the harness handles lines in order)
        // before it writes the second file: the first sample has been taken by then.
        let script = format!(
            "head -c 1000 /dev/zero > {d}/a; echo 'progress 5 10' >&2; \
             echo 'a line for the log' >&2; \
             until grep -q 'a line for the log' {l}; do sleep 0.01; done; \
             head -c 500 /dev/zero > {d}/sub/b; echo 'progress 10 10' >&2",
            d = data.display(),
            l = log.display()
        );
        let opts = IsolateOptions {
            name: "test",
            device: None,
            memory_limit: None,
            log: &log,
            data_dir: Some(&data),
        };
        let drive = |own: Vec<Sample>| {
            let r = RunReport {
                samples: own,
                ..Default::default()
            };
            r.save(&report).unwrap();
            let mut cmd = Command::new("sh");
            cmd.arg("-c").arg(&script);
            run(cmd, &report, &opts, &ProgressBar::hidden()).unwrap().0
        };
        let got: Vec<(u64, u64)> = drive(Vec::new())
            .samples
            .iter()
            .map(|s| (s.ops_done, s.disk_bytes))
            .collect();
        assert_eq!(got, [(5, 1000), (10, 1500)]);
        assert!(std::fs::read_to_string(&log)
            .unwrap()
            .contains("a line for the log"));

        let own = Sample {
            ops_done: 7,
            disk_bytes: 1,
            ..Default::default()
        };
        assert_eq!(drive(vec![own]).samples, [own]);
    }
}
