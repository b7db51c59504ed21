//! What `INFO commandstats`, `errorstats` and `latencystats` report, as Redis 7.0 does:
//! per command its calls, their time, and how many were rejected before running (wrong
//! arity, `NOAUTH`, a transaction's refused command, `READONLY`, a cluster redirect) or
//! failed while running (an error reply); per error code the error replies sent; and per
//! command the latency percentiles of its calls (`latency-tracking`, on by default, with
//! the percentiles of `latency-tracking-info-percentiles`). Monitoring (`redis_exporter`,
//! dashboards) reads these; `CONFIG RESETSTAT` clears them.
//!
//! Commands with subcommands (`CLIENT`, `CONFIG`...) count per subcommand under
//! `parent|sub`, as Redis does. Everything here is bounded by what the server itself can
//! answer: a command is counted only when the table knows it, a subcommand only when its
//! command did not answer "unknown subcommand" (and at most [`MAX_SUBCOMMANDS`]), an error
//! code is the first word of one of the server's own errors (at most [`MAX_ERROR_CODES`]).

use crate::protocol::Reply;
use bytes::Bytes;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// Most distinct `parent|sub` names counted (Redis 7.0 has fewer than 150 subcommands).
pub const MAX_SUBCOMMANDS: usize = 256;
/// Most distinct error codes counted; later codes still count in `total_error_replies`
/// (Redis stops at 128 too).
pub const MAX_ERROR_CODES: usize = 128;
/// Longest subcommand name counted (longer ones are cut; no Redis subcommand is).
const MAX_SUBCOMMAND_NAME: usize = 32;
/// Longest error code kept (longer first words are cut).
const MAX_CODE: usize = 32;

/// Redis's default `latency-tracking-info-percentiles`.
const DEFAULT_PERCENTILES: [f64; 3] = [50.0, 99.0, 99.9];

/// Copies of the counters, each written by the threads assigned to it: Redis runs
/// commands on one thread, here the network threads and the blocking pool run them at
/// once, and one shared counter (and histogram lock) per command would bounce between
/// their cores on every call of a hot command. `INFO` sums the copies.
const SHARDS: usize = 4;

/// Latencies kept, in nanoseconds, as Redis keeps them: 1 ns to 1 s (longer calls count
/// as 1 s), two significant digits.
const LATENCY_MAX_NS: u64 = 1_000_000_000;

fn new_histogram() -> Histogram<u32> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 2).expect("valid bounds")
}

/// One command's (or subcommand's) counters, under one lock: a call takes it once.
#[derive(Default)]
struct Entry(Mutex<Counts>);

#[derive(Default)]
struct Counts {
    calls: u64,
    nanos: u64,
    rejected: u64,
    failed: u64,
    /// Latency of each call, once a call was timed with tracking on.
    latency: Option<Histogram<u32>>,
}

impl Entry {
    fn reset(&self) {
        *self.0.lock() = Counts::default();
    }

    fn ran(&self, took: Duration, failed: bool, track: bool) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let mut c = self.0.lock();
        c.calls += 1;
        c.nanos = c.nanos.saturating_add(ns);
        c.failed += failed as u64;
        if track {
            c.latency
                .get_or_insert_with(new_histogram)
                .saturating_record(ns.clamp(1, LATENCY_MAX_NS));
        }
    }

    fn rejected(&self) {
        self.0.lock().rejected += 1;
    }

    fn failed(&self) {
        self.0.lock().failed += 1;
    }

    /// Adds this entry's counters and latencies into `sum`.
    fn add_to(&self, sum: &mut Counts) {
        let c = self.0.lock();
        sum.calls += c.calls;
        sum.nanos = sum.nanos.saturating_add(c.nanos);
        sum.rejected += c.rejected;
        sum.failed += c.failed;
        if let Some(h) = &c.latency {
            // Same bounds on both sides: adding cannot fail.
            let _ = sum.latency.get_or_insert_with(new_histogram).add(h);
        }
    }
}

/// The server's command, error and latency statistics (in [`crate::shared::Shared`]).
pub struct CommandStats {
    /// Per shard, an entry per command, by its number (its position in the command table,
    /// [`CommandStats::new`]).
    shards: Vec<Box<[Entry]>>,
    /// The commands' names by number, and their numbers by name.
    names: Box<[&'static str]>,
    numbers: HashMap<&'static str, usize>,
    /// The name of the command of that number if it counts per subcommand.
    container: Box<[Option<&'static str>]>,
    /// `parent|sub` entries (rare commands: one copy).
    subcommands: Mutex<BTreeMap<String, Entry>>,
    errors: Mutex<BTreeMap<String, u64>>,
    total_errors: AtomicU64,
    tracking: AtomicBool,
    percentiles: Mutex<Vec<f64>>,
}

impl CommandStats {
    /// Statistics of the commands `commands` (each name, and whether it counts per
    /// subcommand), numbered in that order (the command table's: the numbers the dispatch
    /// passes to [`CommandStats::ran`]).
    pub fn new(commands: impl IntoIterator<Item = (&'static str, bool)>) -> Self {
        let (names, per_sub): (Vec<&'static str>, Vec<bool>) = commands.into_iter().unzip();
        let names: Box<[&'static str]> = names.into();
        CommandStats {
            shards: (0..SHARDS)
                .map(|_| (0..names.len()).map(|_| Entry::default()).collect())
                .collect(),
            container: names
                .iter()
                .zip(per_sub)
                .map(|(&n, sub)| sub.then_some(n))
                .collect(),
            numbers: names.iter().enumerate().map(|(i, &n)| (n, i)).collect(),
            names,
            subcommands: Mutex::new(BTreeMap::new()),
            errors: Mutex::new(BTreeMap::new()),
            total_errors: AtomicU64::new(0),
            tracking: AtomicBool::new(true),
            percentiles: Mutex::new(DEFAULT_PERCENTILES.to_vec()),
        }
    }
}

/// Whether `r` answers "unknown subcommand" (its command then counts no call, as in Redis).
fn unknown_subcommand(r: &Reply) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with("ERR unknown subcommand"))
}

/// This thread's shard.
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static SHARD: usize = NEXT.fetch_add(1, Relaxed) % SHARDS);
    SHARD.with(|s| *s)
}

impl CommandStats {
    /// Applies `f` to the entry of command `number` called with `args`: its subcommand's
    /// for a container command with one.
    fn with_entry(&self, number: usize, args: &[Bytes], f: impl FnOnce(&Entry)) {
        match (args.get(1), self.container[number]) {
            (Some(sub), Some(parent)) => {
                let key = format!(
                    "{parent}|{}",
                    crate::args::text(&sub[..sub.len().min(MAX_SUBCOMMAND_NAME)])
                        .to_ascii_lowercase()
                        .replace(|c: char| !c.is_ascii_graphic(), "_")
                );
                let mut subs = self.subcommands.lock();
                if let Some(e) = subs.get(&key) {
                    f(e);
                } else if subs.len() < MAX_SUBCOMMANDS {
                    f(subs.entry(key).or_default());
                }
            }
            _ => f(&self.shards[shard()][number]),
        }
    }

    /// A command refused before it ran: `reply` is its error. `name`: its name in the
    /// table (`None`: an unknown command).
    pub fn rejected(&self, name: Option<&str>, args: &[Bytes], reply: &Reply) {
        self.replied(reply);
        let found = name.and_then(|n| self.numbers.get(n).copied());
        if let (Some(number), false) = (found, unknown_subcommand(reply)) {
            self.with_entry(number, args, Entry::rejected);
        }
    }

    /// Command `number` ran for `took` and answered `reply`
    /// (an error counts as failed).
    pub fn ran(&self, number: usize, args: &[Bytes], reply: &Reply, took: Duration) {
        self.replied(reply);
        self.ran_uncounted(number, args, reply, took);
    }

    /// [`CommandStats::ran`] of a reply whose error was counted in `errorstats` already
    /// (a script passing on the error of a command it ran): the call counts as failed.
    pub fn ran_uncounted(&self, number: usize, args: &[Bytes], reply: &Reply, took: Duration) {
        if unknown_subcommand(reply) {
            return;
        }
        let failed = matches!(reply, Reply::Error(_));
        let track = self.tracking.load(Relaxed);
        self.with_entry(number, args, |e| e.ran(took, failed, track));
    }

    /// `replies.len()` calls of `name` that ran together for `took` (a pipeline's plain
    /// `SET`s applied as one write): each gets an equal share of the time.
    pub fn ran_together(&self, name: &str, replies: &[Reply], took: Duration) {
        let Some(&number) = self.numbers.get(name) else {
            return;
        };
        let e = &self.shards[shard()][number];
        let share = took / replies.len().max(1) as u32;
        let track = self.tracking.load(Relaxed);
        for r in replies {
            self.replied(r);
            e.ran(share, matches!(r, Reply::Error(_)), track);
        }
    }

    /// The answer of a blocked command (`command` is its table name), given after it was
    /// counted as a call: an error counts as failed.
    pub fn answered(&self, command: &str, reply: &Reply) {
        if let Reply::Error(_) = reply {
            self.replied(reply);
            if let Some(&number) = self.numbers.get(command) {
                self.shards[shard()][number].failed();
            }
        }
    }

    /// Counts `reply` if it is an error (`errorstat_<CODE>`, `total_error_replies`).
    pub fn replied(&self, reply: &Reply) {
        let Reply::Error(line) = reply else {
            return;
        };
        self.total_errors.fetch_add(1, Relaxed);
        let code = line.split(' ').next().unwrap_or("ERR");
        let mut cut = code.len().min(MAX_CODE);
        while !code.is_char_boundary(cut) {
            cut -= 1;
        }
        let code = &code[..cut];
        let mut errors = self.errors.lock();
        if let Some(n) = errors.get_mut(code) {
            *n += 1;
        } else if errors.len() < MAX_ERROR_CODES {
            errors.insert(code.to_string(), 1);
        }
    }

    /// `CONFIG RESETSTAT`.
    pub fn reset(&self) {
        self.shards
            .iter()
            .flat_map(|s| s.iter())
            .for_each(Entry::reset);
        self.subcommands.lock().clear();
        self.errors.lock().clear();
        self.total_errors.store(0, Relaxed);
    }

    pub fn total_errors(&self) -> u64 {
        self.total_errors.load(Relaxed)
    }

    pub fn tracking(&self) -> bool {
        self.tracking.load(Relaxed)
    }

    pub fn set_tracking(&self, on: bool) {
        self.tracking.store(on, Relaxed)
    }

    /// `latency-tracking-info-percentiles` as `CONFIG GET` shows it (`50 99 99.9`).
    pub fn percentiles_text(&self) -> String {
        let p = self.percentiles.lock();
        p.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Parses `latency-tracking-info-percentiles`: numbers from 0 to 100, separated by
    /// spaces (none: no percentiles shown).
    pub fn parse_percentiles(text: &str) -> Result<Vec<f64>, String> {
        text.split_whitespace()
            .map(|w| match w.parse::<f64>() {
                Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
                _ => Err(format!("'{w}' is not a percentile between 0 and 100")),
            })
            .collect()
    }

    pub fn set_percentiles(&self, p: Vec<f64>) {
        *self.percentiles.lock() = p;
    }

    /// Every used entry's totals, in name order, subcommands included.
    fn totals(&self) -> Vec<(String, Counts)> {
        let mut out: Vec<(String, Counts)> = self
            .names
            .iter()
            .enumerate()
            .map(|(number, name)| {
                let mut t = Counts::default();
                for shard in &self.shards {
                    shard[number].add_to(&mut t);
                }
                (name.to_string(), t)
            })
            .collect();
        for (name, e) in self.subcommands.lock().iter() {
            let mut t = Counts::default();
            e.add_to(&mut t);
            out.push((name.clone(), t));
        }
        out.retain(|(_, t)| t.calls + t.rejected + t.failed > 0);
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// `# Commandstats`'s lines: `cmdstat_<name>:calls=...,failed_calls=...`.
    pub fn render_commands(&self, out: &mut String) {
        for (name, t) in self.totals() {
            let usec = t.nanos / 1000;
            let per_call = if t.calls == 0 {
                0.0
            } else {
                usec as f64 / t.calls as f64
            };
            let _ = write!(
                out,
                "cmdstat_{name}:calls={},usec={usec},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                t.calls, t.rejected, t.failed
            );
        }
    }

    /// `# Errorstats`'s lines: `errorstat_<CODE>:count=N`.
    pub fn render_errors(&self, out: &mut String) {
        for (code, n) in self.errors.lock().iter() {
            let _ = write!(out, "errorstat_{code}:count={n}\r\n");
        }
    }

    /// `# Latencystats`'s lines: `latency_percentiles_usec_<name>:p50=...,p99=...`, in
    /// microseconds with three decimals.
    pub fn render_latency(&self, out: &mut String) {
        let percentiles = self.percentiles.lock().clone();
        if percentiles.is_empty() {
            return;
        }
        for (name, t) in self.totals() {
            let Some(h) = t.latency.filter(|h| !h.is_empty()) else {
                continue;
            };
            let values: Vec<String> = percentiles
                .iter()
                .map(|&p| {
                    let us = h.value_at_quantile(p / 100.0) as f64 / 1000.0;
                    format!("p{p}={us:.3}")
                })
                .collect();
            let _ = write!(
                out,
                "latency_percentiles_usec_{name}:{}\r\n",
                values.join(",")
            );
        }
    }

    /// `LATENCY HISTOGRAM [name ...]`: per command with timed calls (those of `names`
    /// only, when given: a command, a `parent|sub`, or a container command meaning all
    /// its subcommands; unknown names are skipped), its calls and Redis's cumulative
    /// distribution: at bucket upper bounds doubling from 1024 ns, in microseconds, the
    /// calls that took up to that, for each bucket where the count grew.
    pub fn histograms(&self, names: &[String]) -> Vec<(String, u64, Cdf)> {
        let wanted = |name: &str| {
            names.is_empty()
                || names.iter().any(|n| {
                    let n = n.to_ascii_lowercase();
                    n == name || name.split_once('|').is_some_and(|(parent, _)| parent == n)
                })
        };
        self.totals()
            .into_iter()
            .filter(|(name, _)| wanted(name))
            .filter_map(|(name, t)| {
                let h = t.latency.filter(|h| !h.is_empty())?;
                let mut cdf = Vec::new();
                let mut cumulative = 0;
                for v in h.iter_log(1024, 2.0) {
                    let before = cumulative;
                    cumulative += v.count_since_last_iteration();
                    if cumulative > before {
                        cdf.push((
                            h.highest_equivalent(v.value_iterated_to()) / 1000,
                            cumulative,
                        ));
                    }
                }
                Some((name, t.calls, cdf))
            })
            .collect()
    }
}

/// A cumulative latency distribution: (bucket's upper bound in µs, calls up to it).
pub type Cdf = Vec<(u64, u64)>;

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cmd::table;

    fn number(name: &str) -> usize {
        table::lookup(name.as_bytes()).unwrap().0
    }

    fn stats() -> CommandStats {
        CommandStats::new(table::counted())
    }

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    /// The percentiles of `name`'s latency line, at two significant digits (the histogram's).
    fn percentiles(latency: &str, name: &str) -> Vec<(String, f64)> {
        let prefix = format!("latency_percentiles_usec_{name}:");
        let line = latency
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap();
        line.split(',')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                let v: f64 = v.parse().unwrap();
                (k.to_string(), format!("{v:.1e}").parse().unwrap())
            })
            .collect()
    }

    fn rendered(st: &CommandStats) -> (String, String, String) {
        let (mut c, mut e, mut l) = (String::new(), String::new(), String::new());
        st.render_commands(&mut c);
        st.render_errors(&mut e);
        st.render_latency(&mut l);
        (c, e, l)
    }

    #[test]
    fn counts_calls_rejections_failures_and_error_codes() {
        let st = stats();
        let ms = Duration::from_millis(1);
        st.ran(number("set"), &args(&["set", "k", "v"]), &Reply::ok(), ms);
        st.ran(
            number("set"),
            &args(&["set", "k", "v"]),
            &Reply::err("x"),
            ms,
        );
        st.rejected(Some("set"), &args(&["set"]), &Reply::err("wrong number"));
        st.rejected(None, &args(&["nosuch"]), &Reply::err("unknown command"));
        st.ran(
            number("exec"),
            &args(&["exec"]),
            &Reply::Error("EXECABORT x".into()),
            ms,
        );
        let (c, e, l) = rendered(&st);
        assert!(c.contains(
            "cmdstat_set:calls=2,usec=2000,usec_per_call=1000.00,rejected_calls=1,failed_calls=1\r\n"
        ));
        assert!(c.contains("cmdstat_exec:calls=1,"));
        assert!(!c.contains("nosuch"), "{c}");
        assert_eq!(
            e,
            "errorstat_ERR:count=3\r\nerrorstat_EXECABORT:count=1\r\n"
        );
        assert_eq!(st.total_errors(), 4);
        assert_eq!(
            percentiles(&l, "exec"),
            [
                ("p50".into(), 1000.0),
                ("p99".into(), 1000.0),
                ("p99.9".into(), 1000.0)
            ]
        );
        assert_eq!(percentiles(&l, "set")[0], ("p50".into(), 1000.0));

        st.reset();
        assert_eq!(rendered(&st), Default::default());
        assert_eq!(st.total_errors(), 0);
    }

    #[test]
    fn subcommands_count_apart_and_unknown_ones_do_not_count() {
        let st = stats();
        let t = Duration::from_micros(5);
        st.ran(
            number("client"),
            &args(&["client", "ID"]),
            &Reply::Int(1),
            t,
        );
        st.ran(
            number("config"),
            &args(&["config", "set", "a", "b"]),
            &Reply::ok(),
            t,
        );
        st.ran(
            number("command"),
            &args(&["command"]),
            &Reply::Array(vec![]),
            t,
        );
        for i in 0..(MAX_SUBCOMMANDS + 10) {
            let sub = format!("bogus{i}");
            let no = Reply::err(format!("unknown subcommand '{sub}'. Try CLIENT HELP."));
            st.ran(number("client"), &args(&["client", &sub]), &no, t);
        }
        let (c, e, _) = rendered(&st);
        let names: Vec<&str> = c.lines().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(
            names,
            ["cmdstat_client|id", "cmdstat_command", "cmdstat_config|set"]
        );
        assert_eq!(
            e,
            format!("errorstat_ERR:count={}\r\n", MAX_SUBCOMMANDS + 10)
        );
    }

    #[test]
    fn error_codes_are_bounded() {
        let st = stats();
        for i in 0..(MAX_ERROR_CODES + 5) {
            st.replied(&Reply::Error(format!("CODE{i} message")));
        }
        st.replied(&Reply::Error("X".repeat(100)));
        let (_, e, _) = rendered(&st);
        assert_eq!(e.lines().count(), MAX_ERROR_CODES);
        assert_eq!(st.total_errors(), MAX_ERROR_CODES as u64 + 6);
    }

    #[test]
    fn latency_follows_tracking_and_the_percentiles_set() {
        let st = stats();
        st.set_tracking(false);
        st.ran(
            number("get"),
            &args(&["get", "k"]),
            &Reply::Nil,
            Duration::from_micros(3),
        );
        assert_eq!(rendered(&st).2, "");
        st.set_tracking(true);
        st.set_percentiles(CommandStats::parse_percentiles("0.0 50.0 100").unwrap());
        assert_eq!(st.percentiles_text(), "0 50 100");
        st.ran(
            number("get"),
            &args(&["get", "k"]),
            &Reply::Nil,
            Duration::from_micros(3),
        );
        let l = rendered(&st).2;
        assert_eq!(
            percentiles(&l, "get"),
            [
                ("p0".into(), 3.0),
                ("p50".into(), 3.0),
                ("p100".into(), 3.0)
            ]
        );
        assert!(CommandStats::parse_percentiles("10 50 a").is_err());
        assert!(CommandStats::parse_percentiles("10 101").is_err());
        assert_eq!(
            CommandStats::parse_percentiles("").unwrap(),
            Vec::<f64>::new()
        );
    }
}
