//! Running one command: the checks every command passes before its handler runs
//! (authentication, cluster routing, `maxmemory`, a read-only replica, `MULTI`'s queue,
//! arity), the server-wide lock it runs under, and its statistics. What a command is and does is its
//! [`Spec`] in the command table ([`crate::cmd::table`]); nothing here names a command.
//!
//! Runs on the connection's task when cheap ([`crate::inline`]), on the script thread for
//! scripts ([`crate::server::lane`]), else on a blocking-pool thread (engine calls may
//! block).

use crate::cmd::table::{self, Flags, Spec};
use crate::cmd::Ctx;
use crate::protocol::Reply;
use crate::session::{Outcome, Session};
use crate::shared::Shared;
use bytes::Bytes;
use std::time::Instant;

/// Most characters of a client's bytes echoed into an error (Redis: 128).
const MAX_ECHO: usize = 128;

/// Runs one command.
pub fn execute(sh: &Shared, s: &mut Session, args: &[Bytes]) -> (Reply, Outcome) {
    let found = table::lookup(&args[0]);
    let spec = found.map(|(_, spec)| spec);
    let refuse = |r: Reply| {
        sh.cmdstats.rejected(spec.map(|s| s.name), args, &r);
        (r, Outcome::Continue)
    };
    // `authed` first: it is true for every connection while no password is set.
    if !s.authed
        && sh.settings.requirepass().is_some()
        && !spec.is_some_and(|s| s.has(Flags::NO_AUTH))
    {
        return refuse(Reply::Error("NOAUTH Authentication required.".into()));
    }
    // Held to the end of the command: see `cmd::cluster::route::Admitted`.
    let _moving = match crate::cmd::cluster::route::admit(sh, s, spec, args) {
        Ok(g) => g,
        Err(r) => return refuse(r),
    };
    // Where Redis checks it: after routing, before the replica's and the context's checks.
    if sh.maxmemory.bytes() != 0 {
        if let Some(r) = super::evict::admit(sh, s, spec) {
            return refuse(in_multi_rejected(sh, s, spec, r));
        }
    }
    if sh.store.is_replica()
        && sh.settings.replica_read_only()
        && spec.is_some_and(|s| s.has(Flags::WRITE))
    {
        // Refused when queued too, as Redis does: the transaction then fails as a whole.
        let r = Reply::Error("READONLY You can't write against a read only replica.".into());
        return refuse(in_multi_rejected(sh, s, spec, r));
    }
    if let Some(r) = spec.and_then(|spec| crate::cmd::pubsub::check_context(s, spec)) {
        return refuse(r);
    }
    // A command sent inside MULTI while a script is busy is refused as it would be outside,
    // and fails the transaction; `EXEC` then ends it.
    if s.ext.multi.is_some() {
        if let Some(r) = crate::cmd::script::busy_refusal(sh, spec) {
            return refuse(in_multi_rejected(sh, s, spec, r));
        }
    }
    match crate::cmd::multi::queue(s, spec, args) {
        Some(r @ Reply::Error(_)) => return refuse(r),
        Some(queued) => return (queued, Outcome::Continue),
        None => {}
    }
    // Commands flagged OWN_LOCK take the exec lock themselves or hold none while they
    // wait; a run of combined commands holds it for all of them (`combine::run`); every
    // other command holds it shared.
    let own = spec.is_some_and(|s| s.has(Flags::OWN_LOCK));
    let _g = match !own && s.ext.combining.is_none() {
        // -BUSY instead of waiting while a script runs past busy-reply-threshold.
        true => match crate::cmd::script::command_lock(sh, spec) {
            Ok(g) => g,
            Err(r) => return refuse(r),
        },
        false => None,
    };
    run_found(sh, s, found, args)
}

/// A refusal of a command before it runs: inside `MULTI` it also fails the transaction
/// ([`crate::cmd::multi::reject`]).
fn in_multi_rejected(sh: &Shared, s: &mut Session, spec: Option<&Spec>, r: Reply) -> Reply {
    match s.ext.multi.is_some() {
        true => crate::cmd::multi::reject(sh, s, spec, r),
        false => r,
    }
}

/// Runs one command without the exec lock (`EXEC` runs its queued commands this way).
pub fn run(sh: &Shared, s: &mut Session, args: &[Bytes]) -> (Reply, Outcome) {
    run_found(sh, s, table::lookup(&args[0]), args)
}

/// Runs the command and counts it ([`crate::cmdstats`]): an unknown command or a wrong
/// number of arguments as rejected, anything else as a call that took its time.
fn run_found(
    sh: &Shared,
    s: &mut Session,
    found: Option<(usize, &'static Spec)>,
    args: &[Bytes],
) -> (Reply, Outcome) {
    let Some((number, spec)) = found else {
        let r = unknown(&args[0], &args[1..]);
        sh.cmdstats.rejected(None, args, &r);
        return (r, Outcome::Continue);
    };
    if !spec.arity_ok(args.len()) {
        let r = crate::cmd::wrong_args(spec.name);
        sh.cmdstats.rejected(Some(spec.name), args, &r);
        return (r, Outcome::Continue);
    }
    let start = s.clock.take().unwrap_or_else(Instant::now);
    // Set for each command, so that a script's or a transaction's commands are counted by
    // their own flags.
    s.ext.reading = spec.has(Flags::READONLY);
    // `MONITOR` sees a command once it ran, a script before it runs (so that the
    // commands it runs come after it), an administrative command never.
    let shown = !spec.has(Flags::ADMIN);
    if shown && spec.has(Flags::SKIP_MONITOR) {
        crate::cmd::observe::monitor(sh, s, args);
    }
    let reply = {
        let mut cx = Ctx { sh, s };
        (spec.handler)(&mut cx, &args[1..])
    };
    if shown && !spec.has(Flags::SKIP_MONITOR) {
        crate::cmd::observe::monitor(sh, s, args);
    }
    // A command that failed changed nothing to announce (its writes are one batch,
    // applied last); a run of combined commands publishes its events once its write is
    // applied.
    let reply = match reply {
        Ok(r) => r,
        Err(e) => {
            if s.ext.combining.is_none() {
                s.events.get_mut().clear();
            }
            e
        }
    };
    if s.ext.combining.is_none() {
        sh.publish_events(s.events.get_mut());
    }
    let end = Instant::now();
    s.clock = Some(end);
    // A script's reply may be the error of a command it ran, counted already.
    if std::mem::take(&mut s.error_counted) {
        sh.cmdstats.ran_uncounted(number, args, &reply, end - start);
    } else {
        sh.cmdstats.ran(number, args, &reply, end - start);
    }
    match s.ext.blocked.as_mut() {
        Some(b) => {
            b.command = spec.name;
            b.args = args.to_vec();
            b.took = end - start;
        }
        None => crate::cmd::observe::ran(sh, s, spec, args, end - start),
    }
    (reply, std::mem::replace(&mut s.outcome, Outcome::Continue))
}

/// Redis's reply to an unknown command. The name and the arguments are the client's bytes:
/// they are cut to [`MAX_ECHO`] characters (the arguments together, as Redis) and carry no
/// CR or LF (an error is one line; [`crate::protocol::one_line`] makes sure of it for every
/// error, and [`echo`] does here already so that the cut counts what is shown).
pub fn unknown(cmd: &[u8], a: &[Bytes]) -> Reply {
    let mut shown = String::new();
    for arg in a {
        let room = MAX_ECHO.saturating_sub(shown.chars().count());
        if room == 0 {
            break;
        }
        shown.push_str(&format!("'{}' ", echo(arg, room)));
    }
    Reply::err(format!(
        "unknown command '{}', with args beginning with: {shown}",
        echo(cmd, MAX_ECHO)
    ))
}

/// At most `max` characters of `b` for an error line, CR and LF as spaces.
fn echo(b: &[u8], max: usize) -> String {
    // Only the shown prefix is converted: a name of megabytes is not copied whole.
    let head = &b[..b.len().min(max * 4)];
    String::from_utf8_lossy(head)
        .chars()
        .take(max)
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}
