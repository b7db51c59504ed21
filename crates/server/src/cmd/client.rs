//! `CLIENT` (the connection's own settings and the other clients: list, kill, pause) and
//! `RESET`, over the server's client registry ([`crate::shared::Shared::clients`]).
//!
//! Client-side caching (`CLIENT TRACKING`) is not implemented: `GETREDIR` and
//! `TRACKINGINFO` answer what Redis answers for a client whose tracking is off, and
//! `TRACKING ON` is refused.

use super::table::c;
use super::{eq, int, syntax, text, wrong_args, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::session::Session;
use crate::shared::{ClientEntry, Shared};
use bytes::Bytes;
use std::time::Duration;

pub fn client_name(n: &[u8]) -> Result<String, Reply> {
    if n.iter().any(|&c| c <= b' ' || c > b'~') {
        return Err(Reply::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(text(n))
}

/// A `TYPE` filter's value: the type's name as [`ClientEntry::kind`] gives it.
fn client_type(b: &[u8]) -> Result<&'static str, Reply> {
    Ok(match text(b).to_ascii_lowercase().as_str() {
        "normal" => "normal",
        "replica" | "slave" => "replica",
        "master" => "master",
        "pubsub" => "pubsub",
        _ => return Err(Reply::err(format!("Unknown client type '{}'", text(b)))),
    })
}

fn on_off(b: &[u8]) -> Result<bool, Reply> {
    if eq(b, "on") {
        Ok(true)
    } else if eq(b, "off") {
        Ok(false)
    } else {
        Err(syntax())
    }
}

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("client", -2, [ADMIN NOSCRIPT LOADING STALE SUBCOMMANDS], 0, 0, 0, Connection, client),
    c!("reset", 1, [NOSCRIPT LOADING STALE FAST NO_AUTH ALLOW_BUSY NOT_QUEUED PUBSUB_CONTEXT], 0, 0, 0, Connection, reset),
];

fn client(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (sh, s) = (cx.sh, &mut *cx.s);
    let Some(sub) = a.first() else {
        return Err(wrong_args("client"));
    };
    let sub = text(sub).to_ascii_lowercase();
    match (sub.as_str(), &a[1..]) {
        ("setname", [n]) => {
            let n = client_name(n)?;
            sh.set_client_name(s, (!n.is_empty()).then_some(n));
            Ok(Reply::ok())
        }
        ("getname", []) => Ok(s.name.clone().map_or(Reply::Nil, Reply::bulk)),
        ("id", []) => Ok(Reply::Int(s.id as i64)),
        ("list", rest) => list(sh, rest),
        ("info", []) => Ok(Reply::Text(sh.client_list(|id, _| id == s.id))),
        ("kill", rest) if !rest.is_empty() => kill(sh, s, rest),
        // Client libraries announce themselves; accepted and not kept.
        ("setinfo", [_, _]) => Ok(Reply::ok()),
        ("unblock", [id, how @ ..]) if how.len() <= 1 => {
            let id = int(id)?;
            let error = match how.first() {
                None => false,
                Some(h) if eq(h, "timeout") => false,
                Some(h) if eq(h, "error") => true,
                Some(_) => {
                    return Err(Reply::err(
                        "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                    ))
                }
            };
            Ok(Reply::Int(
                u64::try_from(id).is_ok_and(|id| sh.blocked.unblock(id, error)) as i64,
            ))
        }
        ("pause", [t, mode @ ..]) if mode.len() <= 1 => {
            let all = match mode.first() {
                None => true,
                Some(m) if eq(m, "all") => true,
                Some(m) if eq(m, "write") => false,
                Some(_) => return Err(Reply::err("CLIENT PAUSE mode must be WRITE or ALL")),
            };
            let ms = crate::cmd::parse_int(t)
                .ok_or_else(|| Reply::err("timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(Reply::err("timeout is negative"));
            }
            sh.pause.pause(Duration::from_millis(ms as u64), all);
            Ok(Reply::ok())
        }
        ("unpause", []) => {
            sh.pause.unpause();
            Ok(Reply::ok())
        }
        ("no-evict", [v]) => {
            // Nothing is evicted (the data is on disk); the flag is kept and shown.
            let on = on_off(v)?;
            if let Some(c) = sh.clients.lock().get_mut(&s.id) {
                c.no_evict = on;
            }
            Ok(Reply::ok())
        }
        ("reply", [v]) => {
            if eq(v, "on") {
                s.replies = Default::default();
            } else if eq(v, "off") {
                s.replies.off = true;
            } else if eq(v, "skip") {
                s.replies.skip_next = !s.replies.off;
            } else {
                return Err(syntax());
            }
            Ok(Reply::ok())
        }
        ("getredir", []) => Ok(Reply::Int(-1)),
        ("trackinginfo", []) => Ok(Reply::Map(vec![
            (Reply::bulk("flags"), Reply::Array(vec![Reply::bulk("off")])),
            (Reply::bulk("redirect"), Reply::Int(-1)),
            (Reply::bulk("prefixes"), Reply::Array(Vec::new())),
        ])),
        ("tracking", [v, ..]) => match on_off(v)? {
            // Tracking is never on, so turning it off is already done.
            false => Ok(Reply::ok()),
            true => Err(Reply::err(
                "CLIENT TRACKING is not supported by halflife (no client-side caching)",
            )),
        },
        (
            "setname" | "getname" | "id" | "info" | "kill" | "setinfo" | "unblock" | "pause"
            | "unpause" | "no-evict" | "reply" | "getredir" | "trackinginfo" | "tracking",
            _,
        ) => Err(wrong_args(&format!("client|{sub}"))),
        _ => Err(Reply::err(format!(
            "unknown subcommand '{sub}'. Try CLIENT HELP."
        ))),
    }
}

/// `CLIENT LIST [TYPE type] | [ID id ...]`.
fn list(sh: &Shared, a: &[Bytes]) -> CmdResult {
    let text = match a {
        [] => sh.client_list(|_, _| true),
        [t, ty] if eq(t, "type") => {
            let ty = client_type(ty)?;
            sh.client_list(|_, c| c.kind() == ty)
        }
        [t, ids @ ..] if eq(t, "id") && !ids.is_empty() => {
            let ids = ids
                .iter()
                .map(|i| int(i).map_err(|_| Reply::err("Invalid client ID")))
                .collect::<Result<Vec<i64>, _>>()?;
            sh.client_list(|id, _| ids.contains(&(id as i64)))
        }
        _ => return Err(syntax()),
    };
    Ok(Reply::Text(text))
}

/// What `CLIENT KILL` kills.
#[derive(Default)]
struct Filter {
    addr: Option<String>,
    laddr: Option<String>,
    kind: Option<&'static str>,
    id: Option<u64>,
    skipme: bool,
}

impl Filter {
    fn matches(&self, me: u64, id: u64, c: &ClientEntry) -> bool {
        self.addr.as_ref().is_none_or(|a| *a == c.addr)
            && self.laddr.as_ref().is_none_or(|a| *a == c.laddr)
            && self.kind.is_none_or(|k| k == c.kind())
            && self.id.is_none_or(|i| i == id)
            && !(self.skipme && id == me)
    }
}

/// `CLIENT KILL addr` (OK, or an error if no client has it; it may kill the caller), or
/// `CLIENT KILL [ID id] [TYPE t] [ADDR a] [LADDR a] [USER u] [SKIPME yes|no] ...` (the
/// number killed). A killed connection closes once its current command has run; the
/// caller's own is closed after this reply.
fn kill(sh: &Shared, s: &Session, a: &[Bytes]) -> CmdResult {
    let old_form = a.len() == 1;
    let mut f = Filter {
        skipme: !old_form,
        ..Default::default()
    };
    if old_form {
        f.addr = Some(text(&a[0]));
    } else {
        if !a.len().is_multiple_of(2) {
            return Err(syntax());
        }
        for kv in a.chunks(2) {
            let (k, v) = (&kv[0], &kv[1]);
            if eq(k, "id") {
                let id = crate::cmd::parse_int(v)
                    .filter(|&i| i >= 1)
                    .ok_or_else(|| Reply::err("client-id should be greater than 0"))?;
                f.id = Some(id as u64);
            } else if eq(k, "type") {
                f.kind = Some(client_type(v)?);
            } else if eq(k, "addr") {
                f.addr = Some(text(v));
            } else if eq(k, "laddr") {
                f.laddr = Some(text(v));
            } else if eq(k, "user") {
                // The one user there is (no ACLs): every client is `default`'s.
                if text(v) != "default" {
                    return Err(Reply::err(format!("No such user '{}'", text(v))));
                }
            } else if eq(k, "skipme") {
                f.skipme = match on_off_yes_no(v) {
                    Some(b) => b,
                    None => return Err(syntax()),
                };
            } else {
                return Err(syntax());
            }
        }
    }
    let mut killed = 0;
    for (id, c) in sh.clients.lock().iter() {
        if f.matches(s.id, *id, c) {
            c.kill();
            killed += 1;
        }
    }
    match (old_form, killed) {
        (true, 0) => Err(Reply::err("No such client")),
        (true, _) => Ok(Reply::ok()),
        (false, n) => Ok(Reply::Int(n)),
    }
}

fn on_off_yes_no(b: &[u8]) -> Option<bool> {
    if eq(b, "yes") {
        Some(true)
    } else if eq(b, "no") {
        Some(false)
    } else {
        None
    }
}

/// `RESET`: the connection as it was when it connected: no transaction or watches,
/// database 0, RESP2, no name, replies on, not authenticated if a password is set.
fn reset(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    let (sh, s) = (cx.sh, &mut *cx.s);
    if !s.ext.watched.is_empty() {
        sh.store.unwatch(s.id);
    }
    let (id, name) = (s.id, s.name.is_some());
    sh.pubsub.forget(id);
    *s = Session::connected(id, sh.settings.requirepass().is_some());
    if name {
        sh.set_client_name(s, None);
    }
    if let Some(c) = sh.clients.lock().get_mut(&id) {
        c.no_evict = false;
        c.subscriptions = (0, 0, 0);
    }
    Ok(Reply::Simple("RESET"))
}

/// Whether a batch may write, for `CLIENT PAUSE WRITE` ([`crate::pause`]): a command flagged `write`, or an
/// `EXEC` of queued commands of which one is (Redis's "may replicate" commands).
pub fn may_write(s: &Session, batch: &[Vec<Bytes>]) -> bool {
    let flagged = |c: &Vec<Bytes>, f| super::table::find(&c[0]).is_some_and(|s| s.has(f));
    let write = |c: &Vec<Bytes>| flagged(c, super::table::Flags::WRITE);
    let exec = batch
        .iter()
        .any(|c| super::table::find(&c[0]).is_some_and(|s| s.name == "exec"));
    batch.iter().any(write) || (exec && s.ext.multi.iter().flatten().any(write))
}
