//! Runs one engine's driver as a child process, alone, in a memory-limited cgroup, and
//! measures the device's bytes written around it.
//!
//! Order of events: `sync`; read the device's sectors written; start the child (it joins
//! its cgroup before exec); relay its progress; wait for it; `sync`; read the counter again.
//! The child reports its own `/proc/self/io` as its last act, since a parent cannot read
//! `/proc/<pid>/io` of a child that has exited.

use super::cgroup::MemoryCgroup;
use super::device::BlockDevice;
use super::report::RunReport;
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
}

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
                        eprintln!(
                            "warning: {}: no memory-limited cgroup ({e:#}); the page cache may hide \
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
    for line in BufReader::new(stderr).lines() {
        let line = line?;
        if let Some((done, total)) = parse_progress(&line) {
            bar.set_length(total);
            bar.set_position(done);
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
    let report = RunReport::load(report)?;
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
}
