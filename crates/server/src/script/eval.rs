//! `EVAL`'s script cache: scripts by SHA1, each compiled once into the eval interpreter,
//! with the flags of its `#!lua` shebang. `SCRIPT FLUSH` starts a new interpreter, as
//! Redis resets its Lua state.

use super::sandbox::{Interp, Kind, Outcome, RunOptions};
use super::{sha1hex, Activity, Flags, ScriptHost};
use crate::protocol::Reply;
use bytes::Bytes;
use mlua::Function;
use std::collections::HashMap;
use std::sync::Arc;

/// A cached script.
pub struct Script {
    pub flags: Flags,
    func: Function,
}

/// Parses a script's first line if it is a shebang (`#!lua flags=no-writes,...`):
/// the flags and the line's length (the script compiles from its newline on, so that line
/// numbers stay). A script without one has Redis 6's rules ([`Flags::compat`]).
pub fn shebang(body: &[u8]) -> Result<(Flags, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((
            Flags {
                compat: true,
                ..Flags::default()
            },
            0,
        ));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let parts = split_args(&line);
    let Some(engine) = parts.first() else {
        return Err("Invalid engine in script shebang".into());
    };
    if engine != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = Flags::default();
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {p}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            if !flags.set(f) {
                return Err(format!("Unexpected flag in script shebang: {f}"));
            }
        }
    }
    Ok((flags, end))
}

/// Words of a shebang line as Redis's `sdssplitargs` reads them: spaces separate, double
/// or single quotes group (and are dropped).
pub fn split_args(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quote, mut any) = (None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The eval interpreter and its scripts.
pub struct Scripts {
    interp: Interp,
    scripts: HashMap<String, Script>,
    /// Bytes of the scripts' sources, counted against the memory limit.
    bytes: usize,
    activity: Arc<Activity>,
    memory: usize,
}

impl Scripts {
    pub fn new(activity: Arc<Activity>, memory: usize) -> Scripts {
        Scripts {
            interp: Interp::new(Kind::Eval, activity.clone(), memory)
                .expect("a new interpreter starts"),
            scripts: HashMap::new(),
            bytes: 0,
            activity,
            memory,
        }
    }

    /// Compiles and caches `body` (`SCRIPT LOAD`, `EVAL` of a new script): its SHA1.
    pub fn load(&mut self, body: &[u8]) -> Result<String, Reply> {
        let sha = sha1hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, skip) = shebang(body).map_err(Reply::err)?;
        if self.bytes + body.len() > self.memory {
            return Err(Reply::err(format!(
                "Error compiling script (new function): the script cache holds {} bytes of scripts, the limit is {} (halflife-lua-memory-limit); SCRIPT FLUSH empties it",
                self.bytes, self.memory
            )));
        }
        let func = self
            .interp
            .compile("@user_script", &body[skip..])
            .map_err(|e| Reply::err(format!("Error compiling script (new function): {e}")))?;
        self.bytes += body.len();
        self.scripts.insert(sha.clone(), Script { flags, func });
        Ok(sha)
    }

    /// The cached script of `sha` (any case).
    pub fn get(&self, sha: &str) -> Option<&Script> {
        self.scripts.get(&sha.to_ascii_lowercase())
    }

    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    /// Bytes of the cached scripts' sources (`used_memory_scripts`).
    pub fn source_bytes(&self) -> usize {
        self.bytes
    }

    pub fn used_memory(&self) -> usize {
        self.interp.used_memory()
    }

    /// `SCRIPT FLUSH`: no scripts, a new interpreter.
    pub fn flush(&mut self) {
        *self = Scripts::new(self.activity.clone(), self.memory);
    }

    pub fn set_memory_limit(&mut self, bytes: usize) {
        self.memory = bytes;
        self.interp.set_memory_limit(bytes);
    }

    /// Runs the cached script `sha` (which the caller looked up).
    pub fn run(
        &self,
        host: &mut dyn ScriptHost,
        sha: &str,
        keys: &[Bytes],
        argv: &[Bytes],
        read_only: bool,
    ) -> Outcome {
        let sha = sha.to_ascii_lowercase();
        let Some(s) = self.scripts.get(&sha) else {
            return Outcome {
                reply: noscript(),
                counted: false,
            };
        };
        let opts = RunOptions {
            name: &sha,
            read_only,
        };
        self.interp.run(host, &s.func, keys, argv, &opts)
    }
}

pub fn noscript() -> Reply {
    Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs() {
        assert!(shebang(b"return 1").unwrap().0.compat);
        let (f, n) = shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(f.no_writes && f.allow_oom && !f.compat);
        assert_eq!(n, 31);
        assert!(shebang(b"#!lua").is_err());
        assert!(shebang(b"#!not-lua\nreturn 1")
            .unwrap_err()
            .contains("Unexpected engine"));
        assert!(shebang(b"#!lua badger=data\n")
            .unwrap_err()
            .contains("Unknown lua shebang option"));
        assert!(shebang(b"#!lua flags=allow-oom,what?\n")
            .unwrap_err()
            .contains("Unexpected flag"));
        assert_eq!(
            split_args("#!lua name=\"foo\"  x"),
            ["#!lua", "name=foo", "x"]
        );
    }
}
