//! A process's I/O counters from `/proc/<pid>/io`.
//!
//! `wchar` counts write syscalls only (memory-mapped writes are invisible to it);
//! `write_bytes - cancelled_write_bytes` counts pages the process dirtied and did not
//! truncate before writeback. Both are reported beside the device figure, not instead of it.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcIo {
    #[serde(default)]
    pub rchar: u64,
    #[serde(default)]
    pub wchar: u64,
    #[serde(default)]
    pub syscr: u64,
    #[serde(default)]
    pub syscw: u64,
    #[serde(default)]
    pub read_bytes: u64,
    #[serde(default)]
    pub write_bytes: u64,
    #[serde(default)]
    pub cancelled_write_bytes: u64,
}

impl ProcIo {
    /// This process's counters.
    pub fn current() -> Result<ProcIo> {
        let text = std::fs::read_to_string("/proc/self/io").context("reading /proc/self/io")?;
        Ok(Self::parse(&text))
    }

    /// Parses the `name: value` lines; unknown names are ignored, missing ones are 0.
    pub fn parse(text: &str) -> ProcIo {
        let mut io = ProcIo::default();
        for line in text.lines() {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<u64>() else {
                continue;
            };
            match name.trim() {
                "rchar" => io.rchar = value,
                "wchar" => io.wchar = value,
                "syscr" => io.syscr = value,
                "syscw" => io.syscw = value,
                "read_bytes" => io.read_bytes = value,
                "write_bytes" => io.write_bytes = value,
                "cancelled_write_bytes" => io.cancelled_write_bytes = value,
                _ => {}
            }
        }
        io
    }

    /// Bytes of page cache this process dirtied and did not cancel by truncation.
    pub fn net_write_bytes(&self) -> u64 {
        self.write_bytes.saturating_sub(self.cancelled_write_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_io() {
        let io = ProcIo::parse(
            "rchar: 6976\nwchar: 395332310\nsyscr: 10\nsyscw: 46882\nread_bytes: 4096\n\
             write_bytes: 395513856\ncancelled_write_bytes: 201326592\nbogus line\n",
        );
        assert_eq!(io.rchar, 6976);
        assert_eq!(io.wchar, 395332310);
        assert_eq!(io.syscw, 46882);
        assert_eq!(io.net_write_bytes(), 395513856 - 201326592);
        assert!(ProcIo::current().is_ok() || !std::path::Path::new("/proc/self/io").exists());
    }
}
