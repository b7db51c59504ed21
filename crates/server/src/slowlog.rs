//! `SLOWLOG`: the commands that ran longer than `slowlog-log-slower-than` microseconds,
//! newest first, at most `slowlog-max-len` of them (Redis's slow log, with its entry
//! format: id, unix time, microseconds, arguments, client address, client name).
//!
//! A command's time is what [`crate::cmd::dispatch`] measures around its handler (the engine
//! work it does included, the time it waited for a lock included), as Redis measures
//! `call()`. Each entry's arguments are cut as Redis cuts them (at most
//! [`MAX_ARGS`] arguments and [`MAX_ARG_BYTES`] bytes of each, with a note of what was
//! left out) and passwords are replaced by `(redacted)` ([`redact`]), so the log holds at
//! most `slowlog-max-len` entries of a few KiB whatever clients send.

use crate::args::eq;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// Arguments of a command an entry keeps (the last one kept says how many more there were).
pub const MAX_ARGS: usize = 32;
/// Bytes of one argument an entry keeps.
pub const MAX_ARG_BYTES: usize = 128;
/// Redis's defaults of `slowlog-log-slower-than` (µs) and `slowlog-max-len`.
pub const DEFAULT_SLOWER_THAN: i64 = 10_000;
pub const DEFAULT_MAX_LEN: usize = 128;
/// Largest `slowlog-max-len` accepted: entries are bounded, so the log is.
pub const MAX_LEN_LIMIT: usize = 1 << 20;

/// One logged command.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: u64,
    /// Unix time, seconds, when it ended.
    pub time: i64,
    pub micros: u64,
    pub args: Vec<Bytes>,
    /// `ip:port` of the client (`unix` for a Unix socket), and its `CLIENT SETNAME`.
    pub addr: String,
    pub name: String,
}

pub struct SlowLog {
    /// -1: nothing is logged; 0: every command.
    slower_than: AtomicI64,
    max_len: AtomicUsize,
    next_id: AtomicU64,
    entries: Mutex<VecDeque<Entry>>,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            slower_than: AtomicI64::new(DEFAULT_SLOWER_THAN),
            max_len: AtomicUsize::new(DEFAULT_MAX_LEN),
            next_id: AtomicU64::new(0),
            entries: Mutex::new(VecDeque::new()),
        }
    }
}

impl SlowLog {
    pub fn slower_than(&self) -> i64 {
        self.slower_than.load(Relaxed)
    }

    pub fn set_slower_than(&self, us: i64) {
        self.slower_than.store(us, Relaxed)
    }

    pub fn max_len(&self) -> usize {
        self.max_len.load(Relaxed)
    }

    /// Sets the bound and drops the oldest entries past it.
    pub fn set_max_len(&self, n: usize) {
        self.max_len.store(n, Relaxed);
        let mut e = self.entries.lock();
        e.truncate(n);
    }

    /// Whether a command that took `took` is to be logged: the check callers make before
    /// they gather what [`SlowLog::push`] needs.
    pub fn wants(&self, took: Duration) -> bool {
        let t = self.slower_than.load(Relaxed);
        t >= 0 && took.as_micros() >= t as u128 && self.max_len.load(Relaxed) > 0
    }

    /// Logs a command (its arguments, name first, are cut and redacted here).
    pub fn push(&self, took: Duration, args: &[Bytes], addr: String, name: String) {
        let entry = Entry {
            id: self.next_id.fetch_add(1, Relaxed),
            time: crate::record::now_ms() as i64 / 1000,
            micros: took.as_micros().min(u64::MAX as u128) as u64,
            args: trimmed(&redact(args)),
            addr,
            name,
        };
        let max = self.max_len.load(Relaxed);
        let mut e = self.entries.lock();
        e.push_front(entry);
        e.truncate(max);
    }

    /// The newest `count` entries (all with `None`), newest first.
    pub fn get(&self, count: Option<usize>) -> Vec<Entry> {
        let e = self.entries.lock();
        e.iter()
            .take(count.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}

/// A command's arguments with passwords replaced by `(redacted)`, as Redis shows them in
/// the slow log and to `MONITOR`: every argument of `AUTH`, the user and password of
/// `HELLO ... AUTH` and `MIGRATE ... AUTH|AUTH2`, the value of `CONFIG SET requirepass|
/// masterauth`.
pub fn redact(args: &[Bytes]) -> Vec<Bytes> {
    const HIDDEN: Bytes = Bytes::from_static(b"(redacted)");
    let mut out = args.to_vec();
    let Some(cmd) = args.first() else {
        return out;
    };
    let mut hide = |from: usize, n: usize| {
        for a in out.iter_mut().skip(from).take(n) {
            *a = HIDDEN;
        }
    };
    if eq(cmd, "auth") {
        hide(1, usize::MAX);
    } else if eq(cmd, "hello") || eq(cmd, "migrate") {
        let mut i = 1;
        while i < args.len() {
            if eq(&args[i], "auth") {
                // HELLO's AUTH takes a user and a password; MIGRATE's a password.
                let n = if eq(cmd, "hello") { 2 } else { 1 };
                hide(i + 1, n);
                i += n;
            } else if eq(&args[i], "auth2") {
                hide(i + 1, 2);
                i += 2;
            }
            i += 1;
        }
    } else if eq(cmd, "config") && args.get(1).is_some_and(|s| eq(s, "set")) {
        let mut i = 2;
        while i + 1 < args.len() {
            if eq(&args[i], "requirepass") || eq(&args[i], "masterauth") {
                hide(i + 1, 1);
            }
            i += 2;
        }
    }
    out
}

/// The arguments an entry keeps: at most [`MAX_ARGS`] (the last of them then says how many
/// more there were) and [`MAX_ARG_BYTES`] of each (with how many more bytes it had).
fn trimmed(args: &[Bytes]) -> Vec<Bytes> {
    let keep = if args.len() > MAX_ARGS {
        MAX_ARGS - 1
    } else {
        args.len()
    };
    let mut out: Vec<Bytes> = args[..keep]
        .iter()
        .map(|a| {
            if a.len() > MAX_ARG_BYTES {
                let mut s = a[..MAX_ARG_BYTES].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes(),
                );
                Bytes::from(s)
            } else {
                a.clone()
            }
        })
        .collect();
    if keep < args.len() {
        out.push(Bytes::from(format!(
            "... ({} more arguments)",
            args.len() - keep
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<Bytes> {
        w.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    fn shown(v: &[Bytes]) -> Vec<String> {
        v.iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    #[test]
    fn keeps_the_newest_within_the_bound() {
        let log = SlowLog::default();
        log.set_slower_than(0);
        log.set_max_len(3);
        for i in 0..5 {
            assert!(log.wants(Duration::ZERO));
            log.push(
                Duration::from_micros(i),
                &words(&["ping"]),
                "a".into(),
                String::new(),
            );
        }
        let got = log.get(None);
        assert_eq!(got.len(), 3);
        assert_eq!(
            got.iter().map(|e| e.id).collect::<Vec<_>>(),
            vec![4, 3, 2],
            "newest first"
        );
        assert_eq!(log.get(Some(1)).len(), 1);
        log.set_max_len(1);
        assert_eq!(log.len(), 1);
        log.set_slower_than(-1);
        assert!(!log.wants(Duration::from_secs(100)));
        log.set_slower_than(1000);
        assert!(!log.wants(Duration::from_micros(999)));
        assert!(log.wants(Duration::from_micros(1000)));
        log.reset();
        assert_eq!(log.len(), 0);
    }

    #[test]
    fn cuts_arguments_as_redis() {
        let mut many = vec!["sadd", "set"];
        let nums: Vec<String> = (3..=33).map(|n| n.to_string()).collect();
        many.extend(nums.iter().map(String::as_str));
        let t = shown(&trimmed(&words(&many)));
        assert_eq!(t.len(), 32);
        assert_eq!(t[30], "31");
        assert_eq!(t[31], "... (2 more arguments)");
        let long = "A".repeat(129);
        let t = shown(&trimmed(&words(&["sadd", "set", "foo", &long])));
        assert_eq!(t[3], format!("{}... (1 more bytes)", "A".repeat(128)));
    }

    #[test]
    fn passwords_are_redacted() {
        let r = |w: &[&str]| shown(&redact(&words(w))).join(" ");
        assert_eq!(r(&["AUTH", "u", "p"]), "AUTH (redacted) (redacted)");
        assert_eq!(
            r(&["hello", "3", "AUTH", "u", "p", "SETNAME", "n"]),
            "hello 3 AUTH (redacted) (redacted) SETNAME n"
        );
        assert_eq!(
            r(&["migrate", "h", "1", "k", "0", "10", "AUTH", "p"]),
            "migrate h 1 k 0 10 AUTH (redacted)"
        );
        assert_eq!(
            r(&["migrate", "h", "1", "k", "0", "10", "AUTH2", "u", "p"]),
            "migrate h 1 k 0 10 AUTH2 (redacted) (redacted)"
        );
        assert_eq!(
            r(&["config", "set", "masterauth", "x", "maxmemory", "1"]),
            "config set masterauth (redacted) maxmemory 1"
        );
        assert_eq!(r(&["get", "k"]), "get k");
    }
}
