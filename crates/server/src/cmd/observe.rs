//! What watches every command after it ran, besides its statistics
//! ([`crate::cmdstats`]): the slow log ([`crate::slowlog`]) and the latency monitor
//! ([`crate::latency`]). [`crate::cmd::dispatch`] calls [`ran`] once per command run, and the
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
