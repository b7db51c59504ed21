//! `halflife serve` as a process, for the tests of the binary (each test file is its own
//! crate; `mod served;` shares this).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A `halflife serve` process on a free port; killed when dropped.
pub struct Served {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Served {
    /// `halflife serve --dir DIR --port 0 EXTRA...`, its stderr in `DIR.log`.
    pub fn start(dir: &Path, extra: &[&str]) -> Served {
        let mut args: Vec<&OsStr> = vec!["serve".as_ref(), "--dir".as_ref(), dir.as_ref()];
        args.extend(["--port", "0"].iter().map(OsStr::new));
        args.extend(extra.iter().map(OsStr::new));
        Served::spawn(&dir.with_extension("log"), &args)
    }

    /// `halflife ARGS...` (a serve command line), its stderr in `log`; waits for the line
    /// that says where it listens.
    pub fn spawn(log: &Path, args: &[&OsStr]) -> Served {
        let log = std::fs::File::create(log).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_halflife"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        // The first line says where it listens: `..., tcp 127.0.0.1:PORT`.
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .rsplit_once("tcp ")
            .and_then(|(_, a)| a.trim().split(',').next()?.parse().ok())
            .unwrap_or_else(|| panic!("halflife serve did not start: {line:?}"));
        Served { child, addr }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
