//! What watches every command after it ran, besides its statistics
//! ([`crate::cmdstats`]): the slow log ([`crate::slowlog`]), the latency monitor
//! ([`crate::latency`]) and the connections in `MONITOR` ([`monitor`]). [`crate::cmd::dispatch`] calls [`ran`] once per command run, and the
//! pipelined plain `SET`s applied as one write call it for each of them.

use crate::cmd::table::{Flags, Spec};
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;
use std::time::Duration;

/// Command `spec` with `args` (name first) ran for `took` on session `s`.
pub fn ran(sh: &Shared, s: &Session, spec: &Spec, args: &[Bytes], took: Duration) {
    if spec.has(Flags::SKIP_SLOWLOG) {
        return;
    }
    let event = if spec.has(Flags::FAST) {
        "fast-command"
    } else {
        "command"
    };
    sh.latency.add(event, took);
    if sh.slowlog.wants(took) {
        let addr = sh
            .clients
            .lock()
            .get(&s.id)
            .map(|c| c.addr.clone())
            .unwrap_or_default();
        let name = s.name.clone().unwrap_or_default();
        sh.slowlog.push(took, args, addr, name);
    }
}

/// Shows the command `args` (name first) that session `s` ran to the connections in
/// `MONITOR`, as Redis's `replicationFeedMonitors` formats it: `<unix time>.<micros>
/// [<db> <client>] "arg" ...`, the client `lua` for a script's commands and
/// `unix:<path>` for a Unix socket's, passwords redacted as in the slow log. The
/// dispatch calls it after each command ran, except administrative ones (never shown)
/// and scripts (shown before they run: Redis's `admin` and `skip_monitor` commands).
pub fn monitor(sh: &Shared, s: &Session, args: &[Bytes]) {
    if !sh.pubsub.monitoring() {
        return;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let who = if s.ext.in_script {
        "lua".to_string()
    } else {
        match sh.clients.lock().get(&s.id) {
            Some(c) if c.addr == "unix" => {
                format!("unix:{}", c.laddr.strip_suffix(":0").unwrap_or(&c.laddr))
            }
            Some(c) => c.addr.clone(),
            None => String::new(),
        }
    };
    let mut line = format!(
        "{}.{:06} [{} {who}]",
        now.as_secs(),
        now.subsec_micros(),
        s.ext.db
    );
    for a in crate::slowlog::redact(args) {
        line.push(' ');
        line.push_str(&crate::args::repr(&a));
    }
    sh.pubsub.feed_monitors(line);
}
