//! The latency monitor (Redis's `LATENCY LATEST|HISTORY|RESET|DOCTOR|GRAPH`): for each
//! kind of event that can make clients wait, the times it took `latency-monitor-threshold`
//! milliseconds or more, one sample per second (the largest of that second), the last
//! [`HISTORY`] of them, and the largest ever.
//!
//! The events here are those of this server, not Redis's fork, AOF and defrag ones:
//!
//! - `command` and `fast-command`: a command's run, as [`crate::cmd::dispatch`] times it
//!   (`fast-command` for commands flagged `fast`), as in Redis;
//! - `expire-cycle`: one step of the background sweep that deletes expired keys (it
//!   holds the command lock meanwhile).

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
pub const HISTORY: usize = 160;

/// The events that exist here (see the module's doc).
pub const EVENTS: &[&str] = &["command", "fast-command", "expire-cycle"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix time, seconds.
    pub time: i64,
    pub ms: u64,
}

#[derive(Default)]
struct Series {
    samples: std::collections::VecDeque<Sample>,
    max: u64,
}

#[derive(Default)]
pub struct Monitor {
    /// Milliseconds; 0: off (Redis's default).
    threshold: AtomicU64,
    events: Mutex<BTreeMap<&'static str, Series>>,
}

impl Monitor {
    pub fn threshold(&self) -> u64 {
        self.threshold.load(Relaxed)
    }

    pub fn set_threshold(&self, ms: u64) {
        self.threshold.store(ms, Relaxed)
    }

    /// Records that `event` (one of [`EVENTS`]) took `took`, if that is over the threshold.
    pub fn add(&self, event: &'static str, took: Duration) {
        let t = self.threshold.load(Relaxed);
        let ms = took.as_millis().min(u64::MAX as u128) as u64;
        if t == 0 || ms < t {
            return;
        }
        debug_assert!(EVENTS.contains(&event), "{event}");
        self.add_at(event, crate::record::now_ms() as i64 / 1000, ms);
    }

    fn add_at(&self, event: &'static str, time: i64, ms: u64) {
        let mut events = self.events.lock();
        let s = events.entry(event).or_default();
        s.max = s.max.max(ms);
        match s.samples.back_mut() {
            Some(last) if last.time == time => last.ms = last.ms.max(ms),
            _ => {
                s.samples.push_back(Sample { time, ms });
                if s.samples.len() > HISTORY {
                    s.samples.pop_front();
                }
            }
        }
    }

    /// `LATENCY LATEST`: per event with samples, its latest sample and its largest.
    pub fn latest(&self) -> Vec<(&'static str, Sample, u64)> {
        self.events
            .lock()
            .iter()
            .filter_map(|(e, s)| Some((*e, *s.samples.back()?, s.max)))
            .collect()
    }

    /// `LATENCY HISTORY event`: its samples, oldest first (none for an unknown event).
    pub fn history(&self, event: &str) -> Vec<Sample> {
        self.events
            .lock()
            .get(event)
            .map(|s| s.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// `LATENCY RESET [event ...]`: forgets the named events (every one if none is named);
    /// how many had samples.
    pub fn reset(&self, names: &[String]) -> usize {
        let mut events = self.events.lock();
        if names.is_empty() {
            let n = events.len();
            events.clear();
            return n;
        }
        let mut n = 0;
        for name in names {
            let name = name.to_ascii_lowercase();
            n += events.remove(name.as_str()).is_some() as usize;
        }
        n
    }

    /// `LATENCY DOCTOR`: a report for people, per event with samples: how many, the
    /// largest, the mean and the mean deviation, how often they came, and what to look at.
    pub fn doctor(&self) -> String {
        let events = self.events.lock();
        let mut out = String::new();
        if self.threshold() == 0 {
            out.push_str(
                "The latency monitor is off: set latency-monitor-threshold to a number of milliseconds (CONFIG SET latency-monitor-threshold 100) to record events that take that long or longer.\n",
            );
        }
        if events.is_empty() {
            out.push_str("No latency event over the threshold has been recorded.\n");
            return out;
        }
        for (i, (name, s)) in events.iter().enumerate() {
            let n = s.samples.len() as f64;
            let mean = s.samples.iter().map(|x| x.ms as f64).sum::<f64>() / n;
            let dev = s
                .samples
                .iter()
                .map(|x| (x.ms as f64 - mean).abs())
                .sum::<f64>()
                / n;
            let span = match (s.samples.front(), s.samples.back()) {
                (Some(a), Some(b)) if s.samples.len() > 1 => {
                    format!(
                        ", one every {} s on average",
                        (b.time - a.time) / (s.samples.len() as i64 - 1)
                    )
                }
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "{}. {name}: {} samples (latest {} ms), worst {} ms, mean {mean:.0} ms, mean deviation {dev:.0} ms{span}.",
                i + 1,
                s.samples.len(),
                s.samples.back().map_or(0, |x| x.ms),
                s.max,
            );
            let _ = writeln!(out, "   {}", advice(name));
        }
        out
    }

    /// `LATENCY GRAPH event`: its samples as a text chart, one row per sample (time,
    /// milliseconds, a bar scaled to the largest), oldest first.
    pub fn graph(&self, event: &str) -> Option<String> {
        let events = self.events.lock();
        let s = events.get(event)?;
        let mut out = format!(
            "{event} - high {} ms, low {} ms (all time high {} ms)\n",
            s.samples.iter().map(|x| x.ms).max().unwrap_or(0),
            s.samples.iter().map(|x| x.ms).min().unwrap_or(0),
            s.max
        );
        let top = s.samples.iter().map(|x| x.ms).max().unwrap_or(1).max(1);
        let now = crate::record::now_ms() as i64 / 1000;
        for x in &s.samples {
            let width = (x.ms * 60).div_ceil(top) as usize;
            let _ = writeln!(
                out,
                "{:>6}s ago {:>7} ms |{}",
                now - x.time,
                x.ms,
                "#".repeat(width)
            );
        }
        Some(out)
    }
}

/// What an operator looks at when `event` is slow.
fn advice(event: &str) -> &'static str {
    match event {
        "command" | "fast-command" => "Slow commands: see SLOWLOG GET for which; commands whose work grows with the data (KEYS, SMEMBERS, large ranges) and writes under appendfsync always wait for the disk.",
        "expire-cycle" => "The expiry sweep: lower halflife-active-expire-keys if its steps hold writes up.",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_one_sample_a_second_and_the_largest() {
        let m = Monitor::default();
        m.add("command", Duration::from_millis(500));
        assert!(m.latest().is_empty(), "off by default");
        m.set_threshold(100);
        m.add("command", Duration::from_millis(99));
        assert!(m.latest().is_empty(), "under the threshold");
        m.add_at("command", 10, 300);
        m.add_at("command", 10, 200);
        m.add_at("command", 11, 400);
        assert_eq!(
            m.history("command"),
            vec![Sample { time: 10, ms: 300 }, Sample { time: 11, ms: 400 }]
        );
        for t in 0..200 {
            m.add_at("expire-cycle", t, 150);
        }
        assert_eq!(m.history("expire-cycle").len(), HISTORY);
        let latest = m.latest();
        assert_eq!(latest[0], ("command", Sample { time: 11, ms: 400 }, 400));
        assert!(m.doctor().contains("command: 2 samples"));
        assert!(m.graph("command").unwrap().lines().count() == 3);
        assert!(m.graph("nothing").is_none());
        assert_eq!(m.reset(&["COMMAND".into(), "nothing".into()]), 1);
        assert_eq!(m.reset(&[]), 1);
        assert!(m.latest().is_empty());
    }
}
