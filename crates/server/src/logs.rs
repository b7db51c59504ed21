//! The `loglevel` and `logfile` settings. The server logs through `tracing` and installs
//! no subscriber itself: the program that embeds it does (`halflife serve` does, with a
//! level filter it can reload and a writer it can point at a file), and hands the server
//! a [`LogControl`] to change them. Redis's four levels map onto `tracing`'s: `debug` is
//! TRACE, `verbose` DEBUG, `notice` (the default) INFO, `warning` WARN; `nothing` is off.

use parking_lot::RwLock;
use std::sync::Arc;

/// What the embedding program's log subscriber lets the server change.
pub trait LogControl: Send + Sync {
    /// Replaces the level filter with `directive` (`info`, `debug`, ...: an `EnvFilter`
    /// directive).
    fn set_filter(&self, directive: &str) -> Result<(), String>;
    /// Writes the log lines to the file at `path` from now on (appended; created if
    /// absent; opened again if it is the same path, so that a rotated file is let go),
    /// or to stderr if `path` is empty.
    fn set_file(&self, path: &str) -> Result<(), String>;
}

/// A [`LogControl`] in [`crate::Config`] (which is `Debug`).
#[derive(Clone)]
pub struct LogHandle(pub Arc<dyn LogControl>);

impl std::fmt::Debug for LogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogHandle")
    }
}

/// Redis's level names, least verbose last, with the `tracing` filter each maps onto.
pub const LEVELS: [(&str, &str); 5] = [
    ("debug", "trace"),
    ("verbose", "debug"),
    ("notice", "info"),
    ("warning", "warn"),
    ("nothing", "off"),
];

/// The settings and the control they go through.
pub struct Logs {
    control: Option<LogHandle>,
    level: RwLock<&'static str>,
    file: RwLock<String>,
}

impl Logs {
    pub fn new(control: Option<LogHandle>) -> Logs {
        Logs {
            control,
            level: RwLock::new("notice"),
            file: RwLock::new(String::new()),
        }
    }

    pub fn level(&self) -> &'static str {
        *self.level.read()
    }

    pub fn file(&self) -> String {
        self.file.read().clone()
    }

    fn control(&self) -> Result<&LogHandle, String> {
        self.control.as_ref().ok_or_else(|| {
            "the program running this server keeps its own logging (no log control given)"
                .to_string()
        })
    }

    /// Checks a level name; the value [`Logs::set_level`] takes.
    pub fn parse_level(name: &str) -> Result<(&'static str, &'static str), String> {
        let n = name.to_ascii_lowercase();
        LEVELS
            .iter()
            .find(|(r, _)| *r == n)
            .copied()
            .ok_or_else(|| {
                "argument(s) must be one of the following: debug, verbose, notice, warning, nothing"
                    .into()
            })
    }

    pub fn set_level(&self, name: &str) -> Result<(), String> {
        let (redis, filter) = Logs::parse_level(name)?;
        self.control()?.0.set_filter(filter)?;
        *self.level.write() = redis;
        Ok(())
    }

    /// Whether a `logfile` can be set (checked before any setting of a `CONFIG SET` is
    /// applied).
    pub fn can_set(&self) -> Result<(), String> {
        self.control().map(|_| ())
    }

    pub fn set_file(&self, path: &str) -> Result<(), String> {
        self.control()?.0.set_file(path)?;
        *self.file.write() = path.to_string();
        Ok(())
    }
}
