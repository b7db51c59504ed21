//! Logs: what the commands and the server report as they run (warnings, installs, a
//! replica's link, a failed sync) goes through `tracing` to stderr, one line per event
//! with its time (UTC) and level. A command's own output (tables, progress, results)
//! stays on stdout and stderr as it is.
//!
//! The level comes from `HALFLIFE_LOG` (an `EnvFilter` directive: `warn`, `debug`,
//! `halflife_server=debug,info`, ...; `info` when unset) and can be changed while the
//! process runs through [`LogLevel::set`]; the lines can be sent to a file instead of
//! stderr ([`Target`]). `halflife serve`'s `loglevel` and `logfile` settings take both
//! through [`control`].

use anyhow::{anyhow, Result};
use parking_lot::{Mutex, MutexGuard};
use std::fs::File;
use std::io::Write;
use std::sync::{Arc, OnceLock};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{fmt, reload, EnvFilter, Registry};

/// The environment variable holding the initial filter.
pub const ENV: &str = "HALFLIFE_LOG";

/// Changes the level of the installed subscriber at run time.
#[derive(Clone)]
pub struct LogLevel {
    handle: reload::Handle<EnvFilter, Registry>,
}

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
    #[cfg(test)]
    pub fn current(&self) -> String {
        self.handle
            .with_current(|f| f.to_string())
            .unwrap_or_default()
    }
}

/// Where the lines go: the file set last ([`Control`]), else the writer the subscriber
/// was made with (stderr). One line is written under the lock, whole.
struct Target<W> {
    file: Arc<Mutex<Option<File>>>,
    other: W,
}

/// One line's writer of a [`Target`].
struct LineOut<'a, O> {
    file: MutexGuard<'a, Option<File>>,
    other: O,
}

impl<O: Write> Write for LineOut<'_, O> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self.file.as_mut() {
            Some(f) => f.write(b),
            None => self.other.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => self.other.flush(),
        }
    }
}

impl<'a, W: fmt::MakeWriter<'a>> fmt::MakeWriter<'a> for Target<W> {
    type Writer = LineOut<'a, W::Writer>;
    fn make_writer(&'a self) -> Self::Writer {
        LineOut {
            file: self.file.lock(),
            other: self.other.make_writer(),
        }
    }
}

/// The level and the file of an installed subscriber: what `halflife serve` hands the
/// server for its `loglevel` and `logfile` settings.
#[derive(Clone)]
pub struct Control {
    level: LogLevel,
    file: Arc<Mutex<Option<File>>>,
}

impl server::LogControl for Control {
    fn set_filter(&self, directive: &str) -> std::result::Result<(), String> {
        self.level.set(directive).map_err(|e| e.to_string())
    }

    fn set_file(&self, path: &str) -> std::result::Result<(), String> {
        let f = match path {
            "" => None,
            p => Some(
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(p)
                    .map_err(|e| format!("opening the log file {p}: {e}"))?,
            ),
        };
        *self.file.lock() = f;
        Ok(())
    }
}

static CONTROL: OnceLock<Control> = OnceLock::new();

/// A subscriber writing to `writer` at `directive`, and the control of its level and file.
fn subscriber<W>(directive: &str, writer: W, ansi: bool) -> (impl tracing::Subscriber, Control)
where
    W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(directive).unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    let file = Arc::new(Mutex::new(None));
    let target = Target {
        file: file.clone(),
        other: writer,
    };
    let s = Registry::default()
        .with(filter)
        .with(fmt::layer().with_writer(target).with_ansi(ansi));
    (
        s,
        Control {
            level: LogLevel { handle },
            file,
        },
    )
}

/// Installs the process's subscriber (stderr, level from [`ENV`]). An invalid directive
/// in the environment is reported and `info` used. Colours only on a terminal (and so
/// never in a file a server's `logfile` names later, unless it started on one).
pub fn init() {
    use std::io::IsTerminal;
    let directive = std::env::var(ENV).unwrap_or_else(|_| "info".to_string());
    let bad = EnvFilter::try_new(&directive).err();
    let (s, control) = subscriber(&directive, std::io::stderr, std::io::stderr().is_terminal());
    if tracing::subscriber::set_global_default(s).is_ok() {
        let _ = CONTROL.set(control);
    }
    if let Some(e) = bad {
        tracing::warn!("{ENV}={directive:?} is not a filter ({e}); logging at info");
    }
}

/// The control of the subscriber [`init`] installed.
pub fn control() -> Option<&'static Control> {
    CONTROL.get()
}

#[cfg(test)]
mod tests {
    use super::*;
    use server::LogControl;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(b);
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
        let (s, control) = subscriber("warn", move || out.clone(), false);
        let level = control.level.clone();
        tracing::subscriber::with_default(s, || {
            tracing::info!("hidden at warn");
            tracing::warn!("shown at warn");
            level.set("debug").unwrap();
            assert_eq!(level.current(), "debug");
            tracing::debug!("shown at debug");
            assert!(level.set("halflife=loud").is_err());
        });
        let text = String::from_utf8(buf.0.lock().clone()).unwrap();
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

    #[test]
    fn lines_go_to_the_file_set_last_and_back_to_the_writer() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a.log"), t.path().join("b.log"));
        let buf = Buf::default();
        let out = buf.clone();
        let (s, control) = subscriber("info", move || out.clone(), false);
        tracing::subscriber::with_default(s, || {
            tracing::info!("to the writer");
            control.set_file(a.to_str().unwrap()).unwrap();
            tracing::info!("to a");
            control.set_filter("warn").unwrap();
            tracing::info!("dropped at warn");
            control.set_file(b.to_str().unwrap()).unwrap();
            tracing::warn!("to b");
            control.set_file("").unwrap();
            tracing::warn!("back to the writer");
            assert!(control.set_file("/nonexistent-dir/x.log").is_err());
        });
        let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
        let buf = String::from_utf8(buf.0.lock().clone()).unwrap();
        assert_eq!(buf.lines().count(), 2, "{buf}");
        assert!(buf.contains("to the writer") && buf.contains("back to the writer"));
        assert_eq!(read(&a).lines().count(), 1);
        assert!(read(&a).contains("to a"));
        assert_eq!(read(&b).lines().count(), 1);
        assert!(read(&b).contains("to b"));
    }
}
