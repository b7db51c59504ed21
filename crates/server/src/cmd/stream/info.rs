//! `XINFO STREAM|GROUPS|CONSUMERS|HELP`, and a group's lag (Redis 7.0's
//! `streamReplyWithCGLag` and the estimates it rests on).

use super::groups::subcommand;
use super::id::Id;
use super::layout::{in_group, Consumer, Group, Nack, CONSUMER, GROUP, UNKNOWN_READ};
use super::{entries_reply, entry_reply, Tx};
use crate::cmd::{eq, now_ms, CmdResult, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;

/// Whether entries between `start` and `end` (the stream's ends if `None`) may have been
/// deleted: the last deletion falls in the range (Redis's `streamRangeHasTombstones`).
pub fn has_tombstones(tx: &Tx, start: Id, end: Option<Id>) -> bool {
    let st = &tx.st;
    if tx.m.size == 0 || st.max_deleted.is_zero() || st.first_id > st.max_deleted {
        return false;
    }
    start <= st.max_deleted && st.max_deleted <= end.unwrap_or(Id::MAX)
}

/// The number of entries added up to `id` (its logical read counter), where it can be
/// known (Redis's `streamEstimateDistanceFromFirstEverEntry`); [`UNKNOWN_READ`] otherwise.
pub fn estimate_read(tx: &Tx, id: Id) -> i64 {
    let st = &tx.st;
    let added = st.entries_added as i64;
    if st.entries_added == 0 {
        return 0;
    }
    if tx.m.size == 0 && id <= st.last_id {
        return added;
    }
    if id == st.last_id {
        return added;
    }
    if id > st.last_id {
        return UNKNOWN_READ;
    }
    if st.max_deleted.is_zero() || st.max_deleted < st.first_id {
        if id < st.first_id {
            return added - tx.m.size as i64;
        }
        if id == st.first_id {
            return added - tx.m.size as i64 + 1;
        }
    }
    UNKNOWN_READ
}

/// A group's lag: entries not delivered to it yet, or null where it cannot be known.
fn lag(tx: &Tx, g: &Group) -> Reply {
    let added = tx.st.entries_added as i64;
    if added == 0 {
        return Reply::Int(0);
    }
    if g.entries_read != UNKNOWN_READ && !has_tombstones(tx, g.last_id, None) {
        return Reply::Int(added - g.entries_read);
    }
    match estimate_read(tx, g.last_id) {
        UNKNOWN_READ => Reply::Nil,
        read => Reply::Int(added - read),
    }
}

fn entries_read(g: &Group) -> Reply {
    if g.entries_read == UNKNOWN_READ {
        Reply::Nil
    } else {
        Reply::Int(g.entries_read)
    }
}

fn field(name: &'static str) -> Reply {
    Reply::bulk(name)
}

/// Every group of the stream (name, record), in name order.
fn groups(tx: &Tx) -> Result<Vec<(Vec<u8>, Group)>, Reply> {
    let mut out = Vec::new();
    tx.scan(GROUP, &[], |m, v| {
        let g = Group::decode(v)
            .ok_or_else(|| Reply::err("stored consumer group is not in the server's format"))?;
        out.push((m.to_vec(), g));
        Ok(out.len() as u64 <= crate::cmd::MAX_REPLY_ITEMS)
    })?;
    Ok(out)
}

/// Every consumer of `group` (name, record), in name order.
fn consumers(tx: &Tx, group: &[u8]) -> Result<Vec<(Vec<u8>, Consumer)>, Reply> {
    let prefix = in_group(group);
    let mut out = Vec::new();
    tx.scan(CONSUMER, &prefix, |m, v| {
        if !m.starts_with(&prefix) {
            return Ok(false);
        }
        let c = Consumer::decode(v)
            .ok_or_else(|| Reply::err("stored consumer is not in the server's format"))?;
        out.push((m[prefix.len()..].to_vec(), c));
        Ok(out.len() as u64 <= crate::cmd::MAX_REPLY_ITEMS)
    })?;
    Ok(out)
}

fn xinfo_help() -> Reply {
    Reply::Array(
        [
            "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
            "HELP",
            "    Print this help.",
        ]
        .into_iter()
        .map(Reply::bulk)
        .collect(),
    )
}

/// `XINFO STREAM key [FULL [COUNT count]]`, `XINFO GROUPS key`, `XINFO CONSUMERS key
/// group`, `XINFO HELP`
pub fn xinfo(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sub = subcommand(
        "xinfo",
        a,
        &[("stream", -3), ("groups", 3), ("consumers", 4), ("help", 2)],
    )?;
    if sub == "help" {
        return Ok(xinfo_help());
    }
    let key = &a[1];
    let Some(tx) = Tx::open(cx, key)? else {
        return Err(Reply::err("no such key"));
    };
    match sub.as_str() {
        "consumers" => {
            let group = &a[2];
            if tx.group(group)?.is_none() {
                return Err(Reply::Error(format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    crate::cmd::text(group),
                    crate::cmd::text(key)
                )));
            }
            let now = now_ms();
            Ok(Reply::Array(
                consumers(&tx, group)?
                    .into_iter()
                    .map(|(name, c)| {
                        Reply::Map(vec![
                            (field("name"), Reply::bulk(name)),
                            (field("pending"), Reply::Int(c.pending as i64)),
                            (field("idle"), Reply::Int((now - c.seen_ms as i64).max(0))),
                        ])
                    })
                    .collect(),
            ))
        }
        "groups" => Ok(Reply::Array(
            groups(&tx)?
                .into_iter()
                .map(|(name, g)| {
                    Reply::Map(vec![
                        (field("name"), Reply::bulk(name)),
                        (field("consumers"), Reply::Int(g.consumers as i64)),
                        (field("pending"), Reply::Int(g.pending as i64)),
                        (field("last-delivered-id"), g.last_id.reply()),
                        (field("entries-read"), entries_read(&g)),
                        (field("lag"), lag(&tx, &g)),
                    ])
                })
                .collect(),
        )),
        _ => stream_info(&tx, &a[2..]),
    }
}

fn syntax_sub() -> Reply {
    Reply::err("unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.")
}

/// `XINFO STREAM`'s reply: the summary, or with `FULL` the entries, groups, consumers and
/// pending entries (at most `COUNT` of each list, 10 by default, 0 for all).
fn stream_info(tx: &Tx, opts: &[Bytes]) -> CmdResult {
    let (full, count) = match opts {
        [] => (false, 10),
        [f] if eq(f, "full") => (true, 10),
        [f, c, n] if eq(f, "full") && eq(c, "count") => {
            let n = crate::cmd::int(n)?;
            (true, if n < 0 { 10 } else { n as u64 })
        }
        _ => return Err(syntax_sub()),
    };
    let st = &tx.st;
    let mut out = vec![
        (field("length"), Reply::Int(tx.m.size as i64)),
        (field("radix-tree-keys"), Reply::Int(st.nodes as i64)),
        // A radix tree over 128-bit keys has at least one node per key and a root.
        (field("radix-tree-nodes"), Reply::Int(st.nodes as i64 + 1)),
        (field("last-generated-id"), st.last_id.reply()),
        (field("max-deleted-entry-id"), st.max_deleted.reply()),
        (field("entries-added"), Reply::Int(st.entries_added as i64)),
        (field("recorded-first-entry-id"), st.first_id.reply()),
    ];
    if !full {
        let first = tx.read_range(Id::MIN, Id::MAX, 1, false)?;
        let last = tx.read_range(Id::MIN, Id::MAX, 1, true)?;
        out.push((field("groups"), Reply::Int(st.groups as i64)));
        for (name, e) in [("first-entry", first), ("last-entry", last)] {
            let r = e.into_iter().next().map_or(Reply::Nil, entry_reply);
            out.push((field(name), r));
        }
        return Ok(Reply::Map(out));
    }
    let limit = |n: usize| count == 0 || (n as u64) < count;
    out.push((
        field("entries"),
        entries_reply(tx.read_range(Id::MIN, Id::MAX, count, false)?),
    ));
    let mut groups_out = Vec::new();
    for (name, g) in groups(tx)? {
        let mut pel = Vec::new();
        tx.pending(&name, None, Id::MIN, Id::MAX, |id, n: Nack| {
            if !limit(pel.len()) {
                return Ok(false);
            }
            pel.push(Reply::Array(vec![
                id.reply(),
                Reply::bulk(n.consumer),
                Reply::Int(n.delivered_ms as i64),
                Reply::Int(n.deliveries as i64),
            ]));
            Ok(true)
        })?;
        let mut cons = Vec::new();
        for (cname, c) in consumers(tx, &name)? {
            let mut cpel = Vec::new();
            tx.pending(&name, Some(&cname), Id::MIN, Id::MAX, |id, n| {
                if !limit(cpel.len()) {
                    return Ok(false);
                }
                cpel.push(Reply::Array(vec![
                    id.reply(),
                    Reply::Int(n.delivered_ms as i64),
                    Reply::Int(n.deliveries as i64),
                ]));
                Ok(true)
            })?;
            cons.push(Reply::Map(vec![
                (field("name"), Reply::bulk(cname)),
                (field("seen-time"), Reply::Int(c.seen_ms as i64)),
                (field("pel-count"), Reply::Int(c.pending as i64)),
                (field("pending"), Reply::Array(cpel)),
            ]));
        }
        groups_out.push(Reply::Map(vec![
            (field("name"), Reply::bulk(name)),
            (field("last-delivered-id"), g.last_id.reply()),
            (field("entries-read"), entries_read(&g)),
            (field("lag"), lag(tx, &g)),
            (field("pel-count"), Reply::Int(g.pending as i64)),
            (field("pending"), Reply::Array(pel)),
            (field("consumers"), Reply::Array(cons)),
        ]));
    }
    out.push((field("groups"), Reply::Array(groups_out)));
    Ok(Reply::Map(out))
}
