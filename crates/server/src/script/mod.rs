//! Lua scripting as Redis 7.0 runs it: `EVAL`'s script cache ([`eval`]), Redis 7's
//! function libraries ([`library`]), both over a sandboxed Lua 5.1 interpreter
//! ([`sandbox`]) with the libraries Redis loads ([`cjson`], [`cmsgpack`], [`bit`],
//! [`structlib`]), and the conversion of values between Lua and replies ([`convert`]).
//!
//! The interpreter is Lua 5.1 (mlua's vendored build), the language Redis embeds: scripts
//! written for Redis depend on its number model (doubles only), `unpack`, `setfenv`,
//! `loadstring` and its error messages. A script reaches the server only through
//! [`ScriptHost`]: run one command and get its reply, look a command up, log. The server
//! implements it over its command table (`cmd.rs`); tests implement it over a map.
//!
//! What makes a script safe to run for a hostile client:
//! - the sandbox: no `io`, `os`, `debug`, `loadfile`, `dofile`, `print`, no bytecode,
//!   globals and library tables read-only ("Attempt to modify a readonly table"), reading
//!   an undeclared global an error;
//! - the clock: a hook every [`HOOK_EVERY`] instructions ends the script once `SCRIPT
//!   KILL`/`FUNCTION KILL` asked ([`Activity`]), and `FUNCTION LOAD`'s run after 500 ms;
//!   other clients see `-BUSY` once the script has run past `busy-reply-threshold`;
//! - memory: each interpreter has a cap (`halflife-lua-memory-limit`); an allocation past
//!   it is a script error, the server goes on;
//! - depth: every conversion and decoder bounds its nesting.

pub mod bit;
pub mod cjson;
// The server's commands; the fuzz target compiles the runtime without the server.
#[cfg(not(fuzzing))]
pub mod cmsgpack;
pub mod convert;
pub mod eval;
pub mod library;
pub mod sandbox;
pub mod scripting;
pub mod structlib;

use crate::protocol::Reply;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Instructions between two looks at the kill flag and the clock (Redis: 100,000).
pub const HOOK_EVERY: u32 = 100_000;

/// How long `FUNCTION LOAD`'s run of a library's code may take (Redis: 500 ms).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// Default cap of one interpreter's memory.
pub const DEFAULT_MEMORY_LIMIT: usize = 256 << 20;

/// A command as a script sees it: what the script rules need to know of it.
#[derive(Clone, Copy, Debug)]
pub struct CommandInfo {
    /// The table's name (lower case).
    pub name: &'static str,
    /// Redis's arity: `n` exactly `n` words with the name, `-n` at least `n`.
    pub arity: i32,
    /// Changes data (refused in read-only scripts, makes the script unkillable).
    pub write: bool,
    /// Refused inside scripts (`noscript`).
    pub noscript: bool,
}

impl CommandInfo {
    pub fn arity_ok(&self, words: usize) -> bool {
        let n = self.arity.unsigned_abs() as usize;
        if self.arity >= 0 {
            words == n
        } else {
            words >= n
        }
    }
}

/// Log levels of `redis.log` (0 and 1, debug and verbose, are not logged).
pub const LOG_NOTICE: u8 = 2;
pub const LOG_WARNING: u8 = 3;

/// What a script needs of the server.
pub trait ScriptHost {
    /// The command `name` (lower case), if the server has it.
    fn command(&self, name: &str) -> Option<CommandInfo>;
    /// The server's own refusals of a command the script rules let through (a write on a
    /// read-only replica, a key of another cluster node): `Err` is the error line.
    fn admit(&mut self, cmd: &CommandInfo, args: &[Bytes]) -> Result<(), String>;
    /// Runs `args` (arity, script rules and [`ScriptHost::admit`] passed) and returns the
    /// reply.
    fn call(&mut self, cmd: &CommandInfo, args: &[Bytes]) -> Reply;
    /// A command the script rules refused (`cmd` is `None` for an unknown one), answered
    /// with `error`: the host counts it as Redis does a rejected call.
    fn rejected(&mut self, cmd: Option<&CommandInfo>, args: &[Bytes], error: &str);
}

/// Script flags (`#!lua flags=...`, `redis.register_function{flags=...}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot: bool,
    /// An `EVAL` without a shebang: Redis 6's rules (no flags declared).
    pub compat: bool,
}

impl Flags {
    /// Adds the flag named `f`; `false` if there is no such flag.
    pub fn set(&mut self, f: &str) -> bool {
        match f {
            "no-writes" => self.no_writes = true,
            "allow-oom" => self.allow_oom = true,
            "allow-stale" => self.allow_stale = true,
            "no-cluster" => self.no_cluster = true,
            "allow-cross-slot-keys" => self.allow_cross_slot = true,
            _ => return false,
        }
        true
    }

    /// The flags' names, as `FUNCTION LIST` shows them.
    pub fn names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (on, n) in [
            (self.no_writes, "no-writes"),
            (self.allow_oom, "allow-oom"),
            (self.allow_stale, "allow-stale"),
            (self.no_cluster, "no-cluster"),
            (self.allow_cross_slot, "allow-cross-slot-keys"),
        ] {
            if on {
                out.push(n);
            }
        }
        out
    }
}

/// The script running now, for `-BUSY`, `SCRIPT KILL` and `FUNCTION STATS`.
#[derive(Clone)]
pub struct Running {
    /// The script's SHA1 (`EVAL`) or function name (`FCALL`).
    pub name: String,
    pub eval: bool,
    /// The command that runs it (name, function and key count), for `FUNCTION STATS`.
    pub command: Vec<Bytes>,
    pub started: Instant,
}

/// Whether a script runs, how long it has, and whether it was asked to stop. Shared by
/// the interpreters' hooks and every connection.
#[derive(Default)]
pub struct Activity {
    running: Mutex<Option<Running>>,
    /// `SCRIPT KILL`/`FUNCTION KILL` (or `SHUTDOWN`) asked the running script to stop.
    killed: AtomicBool,
    /// The running script has run a write command: it cannot be killed.
    wrote: AtomicBool,
    /// While `FUNCTION LOAD` runs a library's code: when it must have ended.
    load_deadline: Mutex<Option<Instant>>,
    /// Called at each look of the hook (the server's script thread sheds its queue while
    /// a script is busy).
    on_check: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// The error a killed script ends with.
pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

impl Activity {
    /// Marks `r` running until the returned guard is dropped.
    pub fn start(&self, r: Running) -> RunGuard<'_> {
        self.killed.store(false, Relaxed);
        self.wrote.store(false, Relaxed);
        *self.running.lock() = Some(r);
        RunGuard(self)
    }

    pub fn running(&self) -> Option<Running> {
        self.running.lock().clone()
    }

    /// The running script if it has run past `busy-reply-threshold` (`t` ms; 0: never):
    /// other clients are answered `-BUSY` then.
    pub fn busy(&self, t: u64) -> Option<Running> {
        let r = self.running.lock();
        r.as_ref()
            .filter(|r| t > 0 && r.started.elapsed() >= Duration::from_millis(t))
            .cloned()
    }

    /// The `-BUSY` error for `r`.
    pub fn busy_error(r: &Running) -> Reply {
        let kill = if r.eval {
            "SCRIPT KILL"
        } else {
            "FUNCTION KILL"
        };
        Reply::Error(format!(
            "BUSY Redis is busy running a script. You can only call {kill} or SHUTDOWN NOSAVE."
        ))
    }

    /// `SCRIPT KILL` (`eval`) or `FUNCTION KILL`.
    pub fn kill(&self, eval: bool) -> Result<(), Reply> {
        let r = self.running.lock();
        let Some(r) = r.as_ref() else {
            return Err(Reply::Error(
                "NOTBUSY No scripts in execution right now.".into(),
            ));
        };
        if self.wrote.load(Relaxed) {
            return Err(Reply::Error("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into()));
        }
        if r.eval != eval {
            return Err(Activity::busy_error(r));
        }
        self.killed.store(true, Relaxed);
        Ok(())
    }

    /// Stops the running script whatever it did (`SHUTDOWN`).
    pub fn kill_for_shutdown(&self) {
        if self.running.lock().is_some() {
            self.killed.store(true, Relaxed);
        }
    }

    pub fn killed(&self) -> bool {
        self.killed.load(Relaxed)
    }

    pub fn note_write(&self) {
        self.wrote.store(true, Relaxed);
    }

    fn set_load_deadline(&self, d: Option<Instant>) {
        *self.load_deadline.lock() = d;
    }

    /// Sets what the hook calls at each look, besides its checks (once; later calls are
    /// ignored).
    pub fn on_check(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_check.set(f);
    }

    /// What the interpreter's hook does: an error ends the script.
    fn check(&self) -> Result<(), String> {
        if let Some(f) = self.on_check.get() {
            f();
        }
        if self.killed() {
            return Err(KILLED.into());
        }
        if let Some(d) = *self.load_deadline.lock() {
            if Instant::now() > d {
                return Err("ERR FUNCTION LOAD timeout".into());
            }
        }
        Ok(())
    }
}

/// Ends a script's run when dropped (whatever way it ends).
pub struct RunGuard<'a>(&'a Activity);

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        *self.0.running.lock() = None;
        self.0.killed.store(false, Relaxed);
    }
}

/// The lower-case hex SHA1 of `b` (`redis.sha1hex`, the script cache's names).
pub fn sha1hex(b: &[u8]) -> String {
    sha1_smol::Sha1::from(b).digest().to_string()
}

/// `v` as C's `%.{precision}g` prints it.
pub fn fmt_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let p = precision.max(1);
    let sci = format!("{v:.*e}", p - 1);
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= p as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim(mant), exp.abs());
    }
    let decimals = (p as i32 - 1 - exp).max(0) as usize;
    trim(&format!("{v:.decimals$}"))
}

/// The error table Redis builds from an error line (`luaPushErrorBuff`): `-CODE msg`
/// keeps its code, a line without `-` gets `ERR`; CR and LF around the message go.
pub fn error_text(line: &str) -> String {
    let (code, msg) = match line.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => (code, msg),
            None => ("ERR", rest),
        },
        None => ("ERR", line),
    };
    format!("{code} {}", msg.trim_matches(['\r', '\n']))
}

/// An error a Rust function of the sandbox raises with a Redis error line (`redis.call`'s
/// failed command, the kill): Lua code sees it as Redis's error table `{err=...}`.
#[derive(Debug, Clone)]
pub struct Raised {
    /// `CODE message`.
    pub text: String,
    /// The server counted this error already (a command's reply): the script's reply
    /// must not count it again in `errorstats`.
    pub counted: bool,
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Raised {}

/// A Lua error raised from Rust with Redis's error line `text`.
pub fn raise(text: impl Into<String>, counted: bool) -> mlua::Error {
    mlua::Error::external(Raised {
        text: text.into(),
        counted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g() {
        assert_eq!(fmt_g(100.0, 14), "100");
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(1e15, 14), "1e+15");
        assert_eq!(fmt_g(0.0003, 14), "0.0003");
        assert_eq!(fmt_g(0.00001, 14), "1e-05");
        assert_eq!(fmt_g(9007199254740991.0, 17), "9007199254740991");
        assert_eq!(fmt_g(-5000.0, 14), "-5000");
    }

    #[test]
    fn error_lines() {
        assert_eq!(error_text("-WRONGTYPE Operation"), "WRONGTYPE Operation");
        assert_eq!(error_text("-MY_ERR"), "ERR MY_ERR");
        assert_eq!(error_text("plain\r\n"), "ERR plain");
        assert_eq!(error_text("-"), "ERR ");
    }

    #[test]
    fn sha1() {
        assert_eq!(sha1hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            sha1hex(b"Pizza & Mandolino"),
            "74822d82031af7493c20eefa13bd07ec4fada82f"
        );
    }
}

#[cfg(test)]
mod runtime_tests;
