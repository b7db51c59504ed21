//! `XREAD` and `XREADGROUP`, blocking or not.
//!
//! A read that finds nothing and may block registers with the blocking registry
//! ([`crate::cmd::blocking`]) as the blocking pops do, with the same no-lost-wakeup order
//! (register, then attempt). `$` is resolved to the stream's last ID before that, so an
//! entry appended between the resolution and the registration is found by the attempt.
//! Unlike a pop, a served read does not take what it reads from the others: every
//! blocked `XREAD` whose ID the new entries pass is served, and a blocked `XREADGROUP`
//! that finds nothing new for its group (another consumer took it) stays blocked. An
//! `XREADGROUP` waiter whose key was deleted or changed type, or whose group was
//! destroyed, is answered with an error, as in Redis 7.0.

use super::id::{self, Id};
use super::{count_arg, entries_reply, no_group, Entry, Tx};
use crate::cmd::{blocking, eq, syntax, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::record::Kind;
use crate::store::Batch;
use bytes::Bytes;
use std::time::Duration;

/// Entries a blocked read is served at most when it gave no `COUNT` (Redis's
/// `XREAD_BLOCKED_DEFAULT_COUNT`).
const BLOCKED_DEFAULT_COUNT: u64 = 1000;

/// Where a read starts on one stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum From {
    /// After this ID (`XREAD`; `$` resolved).
    After(Id),
    /// `>`: what the group has not delivered yet.
    New,
    /// The consumer's own pending entries after this ID.
    History(Id),
}

/// A blocked read: what serving it on a key runs ([`serve`]).
#[derive(Clone, Debug)]
pub struct Wait {
    /// Each stream's start, for the first occurrence of each key.
    from: Vec<(Bytes, From)>,
    count: u64,
    /// `XREADGROUP`'s group, consumer and `NOACK`.
    group: Option<(Bytes, Bytes, bool)>,
}

/// The reply of a read that served `served` (key, entries) pairs: an array of pairs, or a
/// map in RESP3, as Redis.
fn reply(proto: u8, served: Vec<(Bytes, Reply)>) -> Reply {
    if proto >= 3 {
        Reply::Map(
            served
                .into_iter()
                .map(|(k, e)| (Reply::Bulk(k), e))
                .collect(),
        )
    } else {
        Reply::Array(
            served
                .into_iter()
                .map(|(k, e)| Reply::Array(vec![Reply::Bulk(k), e]))
                .collect(),
        )
    }
}

/// Entries of `tx` after `after`.
fn after(tx: &Tx, after: Id, count: u64) -> Result<Vec<Entry>, Reply> {
    match after.next() {
        Some(start) => tx.read_range(start, Id::MAX, count, false),
        None => Ok(Vec::new()),
    }
}

fn unblocked_gone() -> Reply {
    Reply::Error("UNBLOCKED the stream key no longer exists".into())
}

/// Serves the blocked read `w` on `key`, which was written: the reply, or `None` if it has
/// nothing for it (it stays blocked).
pub fn serve(cx: &Ctx, key: &Bytes, w: &Wait) -> Result<Option<Reply>, Reply> {
    let Some(&(_, from)) = w.from.iter().find(|(k, _)| k == key) else {
        return Ok(None);
    };
    let Some((group, consumer, noack)) = &w.group else {
        let From::After(gt) = from else {
            return Ok(None);
        };
        let tx = match cx.meta(key)? {
            Some(m) if m.kind == Kind::Stream => Tx::of(cx, key, m)?,
            _ => return Ok(None),
        };
        let entries = after(&tx, gt, w.count)?;
        if entries.is_empty() {
            return Ok(None);
        }
        return Ok(Some(reply(
            cx.s.proto,
            vec![(key.clone(), entries_reply(entries))],
        )));
    };
    let _g = cx.lock(&[key]);
    let mut tx = match cx.meta(key)? {
        Some(m) if m.kind == Kind::Stream => Tx::of(cx, key, m)?,
        _ => return Err(unblocked_gone()),
    };
    if tx.group(group)?.is_none() {
        return Err(Reply::Error(
            "NOGROUP the consumer group this client was blocked on no longer exists".into(),
        ));
    }
    let entries = tx.deliver(group, consumer, w.count, *noack)?;
    if entries.is_empty() {
        return Ok(None);
    }
    tx.commit()?;
    Ok(Some(reply(
        cx.s.proto,
        vec![(key.clone(), entries_reply(entries))],
    )))
}

/// A `BLOCK` timeout in milliseconds (`None`: no timeout, `0`).
fn timeout_ms(b: &[u8]) -> Result<Option<Duration>, Reply> {
    let ms = crate::cmd::parse_int(b)
        .ok_or_else(|| Reply::err("timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(Reply::err("timeout is negative"));
    }
    if ms > i64::MAX - crate::cmd::now_ms() {
        return Err(Reply::err("timeout is out of range"));
    }
    Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
}

/// The keys of an `XREAD`/`XREADGROUP` (the whole command, name first): the first half of
/// what follows `STREAMS`.
pub fn stream_keys(args: &[Bytes]) -> Result<Vec<usize>, Reply> {
    let at = args
        .iter()
        .position(|a| eq(a, "streams"))
        .ok_or_else(syntax)?
        + 1;
    let n = args.len() - at;
    if n == 0 || !n.is_multiple_of(2) {
        return Err(Reply::err(
            "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
        ));
    }
    Ok((at..at + n / 2).collect())
}

pub fn xread(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    read_cmd(cx, a, false)
}

pub fn xreadgroup(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    read_cmd(cx, a, true)
}

/// Most entries a read without `BLOCK` may ask for (`COUNT`) and still run on the
/// connection's task and join a run of commands on its stream ([`crate::inline`],
/// [`crate::combine`]), as a short `LRANGE` does.
const SHORT_READ: i64 = 128;

/// Whether an `XREAD`/`XREADGROUP` (the whole command) is a bounded read of one stream
/// that does not wait: no `BLOCK`, a `COUNT` of at most [`SHORT_READ`]. Parses the options
/// as [`read_cmd`] does, so that it judges the command the handler runs.
pub fn short_read(cmd: &[Bytes]) -> bool {
    let a = cmd.get(1..).unwrap_or_default();
    let mut count = None;
    let mut i = 0;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let o = &a[i];
        if eq(o, "block") && more > 0 {
            return false;
        } else if eq(o, "count") && more > 0 {
            count = crate::cmd::parse_int(&a[i + 1]);
            i += 2;
        } else if eq(o, "streams") && more > 0 {
            return more == 2 && count.is_some_and(|n| (1..=SHORT_READ).contains(&n));
        } else if eq(o, "group") && more >= 2 {
            i += 3;
        } else if eq(o, "noack") {
            i += 1;
        } else {
            return false;
        }
    }
    false
}

/// `XREAD [COUNT count] [BLOCK ms] STREAMS key [key ...] id [id ...]` and `XREADGROUP
/// GROUP group consumer [COUNT count] [BLOCK ms] [NOACK] STREAMS key [key ...] id [id ...]`
/// (Redis's `xreadCommand`).
fn read_cmd(cx: &mut Ctx, a: &[Bytes], grouped: bool) -> CmdResult {
    let (mut block, mut count, mut streams, mut noack) = (None, 0u64, None, false);
    let mut group: Option<(Bytes, Bytes)> = None;
    let mut i = 0;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let o = &a[i];
        if eq(o, "block") && more > 0 {
            if cx.s.ext.in_script {
                let name = if grouped { "xreadgroup" } else { "xread" };
                return Err(Reply::err(format!(
                    "{name} command is not allowed with BLOCK option from scripts"
                )));
            }
            i += 1;
            block = Some(timeout_ms(&a[i])?);
        } else if eq(o, "count") && more > 0 {
            i += 1;
            count = count_arg(&a[i])?;
        } else if eq(o, "streams") && more > 0 {
            let n = a.len() - i - 1;
            if !n.is_multiple_of(2) {
                return Err(Reply::err("Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            streams = Some(i + 1);
            break;
        } else if eq(o, "group") && more >= 2 {
            if !grouped {
                return Err(Reply::err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((a[i + 1].clone(), a[i + 2].clone()));
            i += 2;
        } else if eq(o, "noack") {
            if !grouped {
                return Err(Reply::err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let Some(at) = streams else {
        return Err(syntax());
    };
    if grouped && group.is_none() {
        return Err(Reply::err("Missing GROUP option for XREADGROUP"));
    }
    let n = (a.len() - at) / 2;
    let (keys, ids) = (&a[at..at + n], &a[at + n..]);
    let mut from: Vec<(Bytes, From)> = Vec::with_capacity(n);
    for (key, arg) in keys.iter().zip(ids) {
        let m = cx.typed(key, Kind::Stream)?;
        if let Some((g, _)) = &group {
            let exists = match &m {
                Some(m) => Tx::of(cx, key, m.clone())?.group(g)?.is_some(),
                None => false,
            };
            if !exists {
                return Err(no_group(key, g, " in XREADGROUP with GROUP option"));
            }
        }
        let f = match &arg[..] {
            b"$" if grouped => return Err(Reply::err("The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")),
            b"$" => From::After(match &m {
                Some(m) => Tx::of(cx, key, m.clone())?.st.last_id,
                None => Id::MIN,
            }),
            b">" if !grouped => return Err(Reply::err("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")),
            b">" => From::New,
            _ if grouped => From::History(id::parse(arg, 0, true)?),
            _ => From::After(id::parse(arg, 0, true)?),
        };
        from.push((key.clone(), f));
    }
    let group = group.map(|(g, c)| (g, c, noack));
    let first = |cx: &Ctx| read_now(cx, &from, count, group.as_ref());
    let Some(timeout) = block else {
        return Ok(first(cx)?.unwrap_or(Reply::NilArray));
    };
    let mut distinct: Vec<(Bytes, From)> = Vec::new();
    for (k, f) in &from {
        if !distinct.iter().any(|(d, _)| d == k) {
            distinct.push((k.clone(), *f));
        }
    }
    let wait = Wait {
        from: distinct,
        count: if count > 0 {
            count
        } else {
            BLOCKED_DEFAULT_COUNT
        },
        group: group.clone(),
    };
    blocking::block_stream(cx, keys, wait, timeout, first)
}

/// One synchronous pass over the streams: the reply if any of them had something.
fn read_now(
    cx: &Ctx,
    from: &[(Bytes, From)],
    count: u64,
    group: Option<&(Bytes, Bytes, bool)>,
) -> Result<Option<Reply>, Reply> {
    let mut served = Vec::new();
    let Some((g, consumer, noack)) = group else {
        for (key, f) in from {
            let From::After(gt) = *f else { continue };
            let Some(tx) = Tx::open(cx, key)? else {
                continue;
            };
            let entries = after(&tx, gt, count)?;
            if !entries.is_empty() {
                served.push((key.clone(), entries_reply(entries)));
            }
        }
        return Ok((!served.is_empty()).then(|| reply(cx.s.proto, served)));
    };
    let keys: Vec<&Bytes> = from.iter().map(|(k, _)| k).collect();
    let _g = cx.lock(&keys);
    let mut batch = Batch::new();
    for (i, (key, f)) in from.iter().enumerate() {
        // A key named twice is read once (its first start counts).
        if from[..i].iter().any(|(k, _)| k == key) {
            continue;
        }
        let mut tx = match Tx::open(cx, key)? {
            Some(tx) if tx.group(g)?.is_some() => tx,
            _ => return Err(no_group(key, g, " in XREADGROUP with GROUP option")),
        };
        match *f {
            From::History(after) => {
                let items = tx.history(g, consumer, after, count)?;
                served.push((key.clone(), Reply::Array(items)));
            }
            _ => {
                let entries = tx.deliver(g, consumer, count, *noack)?;
                if entries.is_empty() {
                    continue;
                }
                served.push((key.clone(), entries_reply(entries)));
            }
        }
        batch.append(tx.batch());
    }
    if served.is_empty() {
        return Ok(None);
    }
    cx.write(batch)?;
    Ok(Some(reply(cx.s.proto, served)))
}
