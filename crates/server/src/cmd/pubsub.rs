//! Pub/sub commands: `SUBSCRIBE`, `UNSUBSCRIBE`, `PSUBSCRIBE`, `PUNSUBSCRIBE`, `SSUBSCRIBE`,
//! `SUNSUBSCRIBE`, `PUBLISH`, `SPUBLISH`, `PUBSUB`, over the server's [`crate::pubsub::Hub`];
//! and `MONITOR`, whose feed comes through the same mailbox.
//!
//! A RESP2 connection with subscriptions is in Redis's subscribed state: it may only
//! (un)subscribe, `PING`, `QUIT` and `RESET` ([`check_context`]); a RESP3 connection gets
//! messages as push frames between its replies and may run anything.

use super::table::{c, Flags, Spec};
use super::{eq, text, wrong_args, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::pubsub::{Kind, Mailbox};
use crate::session::Session;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    c!("subscribe", -2, [PUBSUB NOSCRIPT LOADING STALE CHEAP PUBSUB_CONTEXT], 0, 0, 0, Pubsub, subscribe),
    c!("unsubscribe", -1, [PUBSUB NOSCRIPT LOADING STALE CHEAP PUBSUB_CONTEXT], 0, 0, 0, Pubsub, unsubscribe),
    c!("psubscribe", -2, [PUBSUB NOSCRIPT LOADING STALE CHEAP PUBSUB_CONTEXT], 0, 0, 0, Pubsub, psubscribe),
    c!("punsubscribe", -1, [PUBSUB NOSCRIPT LOADING STALE CHEAP PUBSUB_CONTEXT], 0, 0, 0, Pubsub, punsubscribe),
    c!("ssubscribe", -2, [PUBSUB NOSCRIPT LOADING STALE CHEAP PUBSUB_CONTEXT], 1, -1, 1, Pubsub, ssubscribe),
    c!("sunsubscribe", -1, [PUBSUB NOSCRIPT LOADING STALE CHEAP PUBSUB_CONTEXT], 1, -1, 1, Pubsub, sunsubscribe),
    c!("publish", 3, [PUBSUB LOADING STALE FAST MAY_REPLICATE CHEAP], 0, 0, 0, Pubsub, publish),
    c!("spublish", 3, [PUBSUB LOADING STALE FAST MAY_REPLICATE CHEAP], 1, 1, 1, Pubsub, spublish),
    c!("pubsub", -2, [PUBSUB LOADING STALE SUBCOMMANDS], 0, 0, 0, Pubsub, pubsub),
    c!("monitor", 1, [ADMIN NOSCRIPT LOADING STALE], 0, 0, 0, Server, monitor),
];

/// Refuses a command a RESP2 connection may not run while subscribed (`None`: it may).
pub fn check_context(s: &Session, spec: &Spec) -> Option<Reply> {
    (s.proto == 2 && s.pubsub.subscribed() && !spec.has(Flags::PUBSUB_CONTEXT)).then(|| {
        Reply::err(format!(
            "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        ))
    })
}

/// The connection's mailbox, made at its first subscription (or `MONITOR`).
fn mailbox(cx: &mut Ctx) -> std::sync::Arc<Mailbox> {
    match &cx.s.pubsub.mailbox {
        Some(m) => m.clone(),
        None => {
            let kill = cx.sh.clients.lock().get(&cx.s.id).map(|c| c.kill.clone());
            let (m, inbox) = Mailbox::new(cx.s.id, kill);
            cx.s.pubsub.mailbox = Some(m.clone());
            cx.s.pubsub.inbox = Some(inbox);
            m
        }
    }
}

fn sub(cx: &mut Ctx, kind: Kind, a: &[Bytes]) -> CmdResult {
    let mailbox = mailbox(cx);
    let r = cx.sh.pubsub.subscribe(kind, &mailbox, a);
    note(cx);
    Ok(r)
}

fn unsub(cx: &mut Ctx, kind: Kind, a: &[Bytes]) -> CmdResult {
    let r = cx.sh.pubsub.unsubscribe(kind, cx.s.id, a);
    note(cx);
    Ok(r)
}

/// Keeps the session's count and the client registry's pub/sub flag (`CLIENT LIST`,
/// `CLIENT KILL TYPE pubsub`) in step with the hub.
fn note(cx: &mut Ctx) {
    let counts = cx.sh.pubsub.count(cx.s.id);
    cx.s.pubsub.counts = counts;
    if let Some(c) = cx.sh.clients.lock().get_mut(&cx.s.id) {
        c.subscriptions = counts;
    }
}

fn subscribe(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sub(cx, Kind::Channel, a)
}

fn unsubscribe(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    unsub(cx, Kind::Channel, a)
}

fn psubscribe(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sub(cx, Kind::Pattern, a)
}

fn punsubscribe(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    unsub(cx, Kind::Pattern, a)
}

fn ssubscribe(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sub(cx, Kind::Shard, a)
}

fn sunsubscribe(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    unsub(cx, Kind::Shard, a)
}

fn publish(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n = cx.sh.pubsub.publish(false, &a[0], &a[1]);
    if let Some(c) = &cx.sh.cluster {
        let password = cx.sh.settings.requirepass();
        c.forward_publish(&cx.sh.runtime, password, &a[0], &a[1]);
    }
    Ok(Reply::Int(n as i64))
}

fn spublish(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(cx.sh.pubsub.publish(true, &a[0], &a[1]) as i64))
}

/// `PUBSUB CHANNELS [pattern]`, `NUMSUB [channel ...]`, `NUMPAT`, `SHARDCHANNELS
/// [pattern]`, `SHARDNUMSUB [channel ...]`.
fn pubsub(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let hub = &cx.sh.pubsub;
    let (sub, rest) = (&a[0], &a[1..]);
    let channels = |shard| -> CmdResult {
        match rest {
            [] | [_] => Ok(Reply::Array(
                hub.channels(shard, rest.first().map(|p| &p[..]))
                    .into_iter()
                    .map(Reply::Bulk)
                    .collect(),
            )),
            _ => Err(wrong_args(&format!("pubsub|{}", text(sub).to_lowercase()))),
        }
    };
    let numsub = |shard| {
        let mut out = Vec::with_capacity(rest.len() * 2);
        for c in rest {
            out.push(Reply::Bulk(c.clone()));
            out.push(Reply::Int(hub.numsub(shard, c) as i64));
        }
        Ok(Reply::Array(out))
    };
    if eq(sub, "channels") {
        channels(false)
    } else if eq(sub, "shardchannels") {
        channels(true)
    } else if eq(sub, "numsub") {
        numsub(false)
    } else if eq(sub, "shardnumsub") {
        numsub(true)
    } else if eq(sub, "numpat") && rest.is_empty() {
        Ok(Reply::Int(hub.numpat() as i64))
    } else if eq(sub, "help") && rest.is_empty() {
        Ok(Reply::Array(
            [
                "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CHANNELS [<pattern>]",
                "NUMPAT",
                "NUMSUB [<channel> ...]",
                "SHARDCHANNELS [<pattern>]",
                "SHARDNUMSUB [<shardchannel> ...]",
                "HELP",
            ]
            .into_iter()
            .map(Reply::Simple)
            .collect(),
        ))
    } else {
        Err(Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            text(&sub[..sub.len().min(64)])
        )))
    }
}

/// `MONITOR`: from now on the connection receives a line for every command the server
/// runs ([`crate::cmd::observe::monitor`]), through the mailbox pub/sub messages take,
/// until it disconnects or sends `RESET`. Its own commands still run. Refused inside
/// `MULTI` and scripts, as Redis refuses it to a client that cannot block.
fn monitor(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    if cx.s.ext.in_exec {
        return Err(Reply::err("MONITOR isn't allowed for DENY BLOCKING client"));
    }
    let m = mailbox(cx);
    cx.sh.pubsub.monitor(&m);
    Ok(Reply::ok())
}
