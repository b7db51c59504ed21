//! Logs: what the commands and the server report as they run (warnings, installs, a
//! replica's link, a failed sync) goes through `tracing` to stderr, one line per event
//! with its time (UTC) and level. A command's own output (tables, progress, results)
//! stays on stdout and stderr as it is.
//!
//! The level comes from `HALFLIFE_LOG` (an `EnvFilter` directive: `warn`, `debug`,
//! `halflife_server=debug,info`, ...; `info` when unset) and can be changed while the
//! process runs through [`LogLevel::set`] (the hook a server's `loglevel` setting takes).

use anyhow::{anyhow, Result};
use std::sync::OnceLock;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{fmt, reload, EnvFilter, Registry};

/// The environment variable holding the initial filter.
pub const ENV: &str = "HALFLIFE_LOG";

/// Changes the level of the installed subscriber at run time. (The server's `loglevel`
/// setting is to take it; until then only the tests call it.)
#[derive(Clone)]
pub struct LogLevel {
    handle: reload::Handle<EnvFilter, Registry>,
}

#[cfg_attr(not(test), allow(dead_code))]
impl LogLevel {
    /// Replaces the filter with `directive` (an `EnvFilter` directive such as `debug`).
    pub fn set(&self, directive: &str) -> Result<()> {
        let filter =
            EnvFilter::try_new(directive).map_err(|e| anyhow!("log level {directive:?}: {e}"))?;
        self.handle
            .reload(filter)
            .map_err(|e| anyhow!("changing the log level: {e}"))
    }

    /// The filter in force, as a directive.
    pub fn current(&self) -> String {
        self.handle
            .with_current(|f| f.to_string())
            .unwrap_or_default()
    }
}

static LEVEL: OnceLock<LogLevel> = OnceLock::new();

/// A subscriber writing to `writer` at `directive`, and the handle that changes its level.
fn subscriber<W>(directive: &str, writer: W, ansi: bool) -> (impl tracing::Subscriber, LogLevel)
where
    W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(directive).unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    let s = Registry::default()
        .with(filter)
        .with(fmt::layer().with_writer(writer).with_ansi(ansi));
    (s, LogLevel { handle })
}

/// Installs the process's subscriber (stderr, level from [`ENV`]). An invalid directive
/// in the environment is reported and `info` used.
pub fn init() {
    use std::io::IsTerminal;
    let directive = std::env::var(ENV).unwrap_or_else(|_| "info".to_string());
    let bad = EnvFilter::try_new(&directive).err();
    let (s, level) = subscriber(&directive, std::io::stderr, std::io::stderr().is_terminal());
    if tracing::subscriber::set_global_default(s).is_ok() {
        let _ = LEVEL.set(level);
    }
    if let Some(e) = bad {
        tracing::warn!("{ENV}={directive:?} is not a filter ({e}); logging at info");
    }
}

/// The handle of the subscriber [`init`] installed.
#[allow(dead_code)]
pub fn level() -> Option<&'static LogLevel> {
    LEVEL.get()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_carry_time_and_level_and_the_level_changes_at_run_time() {
        let buf = Buf::default();
        let out = buf.clone();
        let (s, level) = subscriber("warn", move || out.clone(), false);
        tracing::subscriber::with_default(s, || {
            tracing::info!("hidden at warn");
            tracing::warn!("shown at warn");
            level.set("debug").unwrap();
            assert_eq!(level.current(), "debug");
            tracing::debug!("shown at debug");
            assert!(level.set("halflife=loud").is_err());
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains(" WARN ") && lines[0].ends_with("shown at warn"),
            "{text}"
        );
        assert!(
            lines[1].contains("DEBUG") && lines[1].ends_with("shown at debug"),
            "{text}"
        );
        // An RFC 3339 time in UTC first: 2026-12-06T20:45:00.123456Z.
        for l in &lines {
            let t = l.split_whitespace().next().unwrap();
            assert!(
                t.len() >= 20 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
                "{l}"
            );
        }
    }
}
