//! Blocking pops: `BLPOP`, `BRPOP`, `BLMOVE`, `BRPOPLPUSH`, `BLMPOP`, `BZPOPMIN`,
//! `BZPOPMAX`, `BZMPOP`; and the registry blocked stream reads (`XREAD`, `XREADGROUP`:
//! [`super::stream::read`]) wait in.
//!
//! A command that finds nothing to pop registers a [`Waiter`] on each of its keys in the
//! registry ([`crate::blocked::Registry`]) and hands the connection a [`Blocked`]: the connection task then waits
//! (asynchronously: no blocking-pool thread is held while a client is blocked) for its
//! reply, its timeout, the client's disconnection or the server's shutdown.
//!
//! Serving is Redis's: every write of a key with waiters marks it ready
//! ([`crate::blocked::Registry::signal`], from [`super::Ctx::write`]); after each command (after a whole
//! `EXEC`, so that `LPUSH k x` + `DEL k` in a transaction wakes nobody) the thread that ran
//! it serves the ready keys ([`serve_ready`]): each key's waiters in the order they
//! blocked (FIFO, as in Redis), each running its pop on that key until the key has
//! nothing left. A pop that pushes (`BLMOVE`) makes its destination ready in turn. A
//! stream read takes nothing from the others: every waiter of the key is tried.
//!
//! Races: a waiter registers *before* its command's first attempt and holds its own slot
//! during the attempt, so a push between the attempt and the registration cannot be
//! missed, and a key served while the attempt runs waits for it; a timeout and a serve
//! decide under the same slot which one answers the client.

use super::table::c;
use super::{list, stream, zset, CmdResult, Ctx};
use crate::blocked::{Blocked, Waiter};
use crate::protocol::Reply;
use crate::record::{self, Kind};
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("blpop", -3, [WRITE NOSCRIPT BLOCKING], 1, -2, 1, List, blpop),
    c!("brpop", -3, [WRITE NOSCRIPT BLOCKING], 1, -2, 1, List, brpop),
    c!("brpoplpush", 4, [WRITE DENYOOM NOSCRIPT BLOCKING], 1, 2, 1, List, brpoplpush),
    c!("blmove", 6, [WRITE DENYOOM NOSCRIPT BLOCKING], 1, 2, 1, List, blmove),
    c!("blmpop", -5, [WRITE BLOCKING], 0, 0, 0, List, blmpop),
    c!("bzpopmin", -3, [WRITE NOSCRIPT BLOCKING FAST], 1, -2, 1, SortedSet, bzpopmin),
    c!("bzpopmax", -3, [WRITE NOSCRIPT BLOCKING FAST], 1, -2, 1, SortedSet, bzpopmax),
    c!("bzmpop", -5, [WRITE BLOCKING], 0, 0, 0, SortedSet, bzmpop),
];

/// What a blocked client runs on a key that became ready.
#[derive(Clone, Debug)]
enum Op {
    /// `BLPOP`/`BRPOP` (`count` `None`: reply `[key, element]`) and `BLMPOP` (reply
    /// `[key, [element ...]]`).
    ListPop { left: bool, count: Option<u64> },
    /// `BLMOVE`/`BRPOPLPUSH`: reply the element moved.
    ListMove {
        dst: Bytes,
        from_left: bool,
        to_left: bool,
    },
    /// `BZPOPMIN`/`BZPOPMAX` (`count` `None`: reply `[key, member, score]`) and `BZMPOP`
    /// (reply `[key, [[member, score] ...]]`).
    ZPop { max: bool, count: Option<u64> },
    /// `XREAD`/`XREADGROUP`.
    Stream(stream::read::Wait),
}

impl Op {
    fn kind(&self) -> Kind {
        match self {
            Op::ListPop { .. } | Op::ListMove { .. } => Kind::List,
            Op::ZPop { .. } => Kind::ZSet,
            Op::Stream(_) => Kind::Stream,
        }
    }

    /// Whether serving this waiter takes what it gets from the waiters after it (a pop),
    /// so that one that finds nothing means the key has nothing for anyone.
    fn takes(&self) -> bool {
        !matches!(self, Op::Stream(_))
    }

    /// Runs the pop on `key`: the reply, or `None` if the key has nothing to pop.
    fn run(&self, cx: &Ctx, key: &Bytes) -> Result<Option<Reply>, Reply> {
        match self {
            Op::ListPop { left, count } => {
                let Some(items) = list::pop_from(cx, key, *left, count.unwrap_or(1))? else {
                    return Ok(None);
                };
                Ok(Some(match count {
                    Some(_) => list::mpop_reply(key, items),
                    None => Reply::Array(
                        std::iter::once(key.to_vec())
                            .chain(items)
                            .map(super::bulk)
                            .collect(),
                    ),
                }))
            }
            Op::ListMove {
                dst,
                from_left,
                to_left,
            } => match list::move_one(cx, key, dst, *from_left, *to_left)? {
                Reply::Nil => Ok(None),
                r => Ok(Some(r)),
            },
            Op::Stream(w) => stream::read::serve(cx, key, w),
            Op::ZPop { max, count } => {
                let _g = cx.lock(&[key]);
                let Some(items) = zset::pop(cx, key, *max, count.unwrap_or(1))? else {
                    return Ok(None);
                };
                Ok(Some(match count {
                    Some(_) => zset::mpop_reply(key, items),
                    None => {
                        let (member, score) = items.into_iter().next().expect("a non-empty set");
                        Reply::Array(vec![
                            super::bulk(key.to_vec()),
                            super::bulk(member),
                            Reply::Double(score),
                        ])
                    }
                }))
            }
        }
    }
}

/// The op a waiter runs: every waiter is registered here, with an [`Op`].
fn op_of(w: &Waiter) -> &Op {
    w.op.downcast_ref()
        .expect("waiters are registered with a blocking::Op")
}

/// Serves the clients blocked on keys written since the last call (see the module's
/// documentation). Called after every command, outside `EXEC`'s exclusive lock.
pub fn serve_ready(sh: &Shared) {
    if !sh.blocked.has_ready.load(Ordering::Acquire) {
        return;
    }
    let _x = sh.store.command_lock();
    loop {
        let keys = sh.blocked.take_ready();
        if keys.is_empty() {
            return;
        }
        for mk in keys {
            serve_key(sh, &mk);
        }
    }
}

/// Serves the waiters of one metadata key in order while the key has something to pop.
fn serve_key(sh: &Shared, mk: &[u8]) {
    let Some((db, key)) = record::split_meta_key(mk) else {
        return;
    };
    let key = Bytes::copy_from_slice(key);
    for w in sh.blocked.queue(mk) {
        let mut slot = w.slot.lock();
        if slot.is_none() {
            continue;
        }
        let mut s = Session::new(w.client);
        s.ext.db = db;
        s.proto = w.proto;
        let cx = Ctx { sh, s: &mut s };
        // A key of another type (or none) serves no pop, as in Redis: they stay blocked.
        // A stream read decides for itself (XREADGROUP fails when its key is gone).
        let op = op_of(&w);
        if op.takes() {
            match cx.meta(&key) {
                Ok(Some(m)) if m.kind == op.kind() => {}
                _ => return,
            }
        }
        let reply = match op.run(&cx, &key) {
            Ok(Some(r)) => r,
            Ok(None) if op.takes() => return,
            Ok(None) => continue,
            Err(e) => e,
        };
        let tx = slot.take().expect("checked above");
        sh.blocked.remove(&w);
        // The client may be gone: then its reply is dropped, as Redis's would be.
        let _ = tx.send(reply);
    }
}

/// A timeout in seconds (`0`: none), as Redis's `getTimeoutFromObjectOrReply` reads it.
fn timeout(b: &[u8]) -> Result<Option<Duration>, Reply> {
    let secs = super::parse_float(b)
        .filter(|v| v.is_finite())
        .ok_or_else(|| Reply::err("timeout is not a float or out of range"))?;
    let ms = (secs * 1000.0).ceil();
    if ms < 0.0 {
        return Err(Reply::err("timeout is negative"));
    }
    // Beyond what Redis's millisecond clock holds (i64 ms since the epoch).
    if ms > (i64::MAX as f64) - super::now_ms() as f64 {
        return Err(Reply::err("timeout is out of range"));
    }
    Ok((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

/// Runs `op` on the first of `keys` that exists (an error if one of another type comes
/// first, as in Redis).
fn attempt(cx: &Ctx, keys: &[Bytes], op: &Op) -> Result<Option<Reply>, Reply> {
    for k in keys {
        if cx.typed(k, op.kind())?.is_some() {
            if let Some(r) = op.run(cx, k)? {
                return Ok(Some(r));
            }
        }
    }
    Ok(None)
}

/// The blocking command's common part: pop now if there is something, else (outside a
/// transaction) register and leave the connection a [`Blocked`].
fn block_on(
    cx: &mut Ctx,
    keys: &[Bytes],
    op: Op,
    timeout: Option<Duration>,
    timeout_reply: Reply,
) -> CmdResult {
    block_with(cx, keys, op, timeout, timeout_reply, |cx, op| {
        attempt(cx, keys, op)
    })
}

/// A blocked stream read's registration ([`block_on`] with the read's own first attempt,
/// which reads every stream it names at once).
pub fn block_stream(
    cx: &mut Ctx,
    keys: &[Bytes],
    wait: stream::read::Wait,
    timeout: Option<Duration>,
    first: impl Fn(&Ctx) -> Result<Option<Reply>, Reply>,
) -> CmdResult {
    block_with(
        cx,
        keys,
        Op::Stream(wait),
        timeout,
        Reply::NilArray,
        |cx, _| first(cx),
    )
}

fn block_with(
    cx: &mut Ctx,
    keys: &[Bytes],
    op: Op,
    timeout: Option<Duration>,
    timeout_reply: Reply,
    attempt: impl Fn(&Ctx, &Op) -> Result<Option<Reply>, Reply>,
) -> CmdResult {
    if cx.s.ext.in_exec {
        // Inside MULTI a blocking command does not block: as if it timed out at once.
        return Ok(attempt(cx, &op)?.unwrap_or(timeout_reply));
    }
    let mut distinct: Vec<Bytes> = Vec::with_capacity(keys.len());
    for k in keys {
        if !distinct.contains(k) {
            distinct.push(k.clone());
        }
    }
    let (tx, rx) = oneshot::channel();
    let w = Arc::new(Waiter {
        client: cx.s.id,
        db: cx.db(),
        proto: cx.s.proto,
        keys: distinct,
        op: Box::new(op),
        timeout_reply,
        slot: Mutex::new(Some(tx)),
    });
    {
        let mut slot = w.slot.lock();
        cx.sh.blocked.register(&w);
        let now = attempt(cx, op_of(&w));
        if !matches!(now, Ok(None)) {
            slot.take();
            cx.sh.blocked.remove(&w);
            return now.map(|r| r.expect("matched above"));
        }
    }
    cx.s.ext.blocked = Some(Blocked {
        waiter: w,
        reply: rx,
        // A deadline past what the clock can hold (centuries away) is no deadline.
        deadline: timeout.and_then(|t| Instant::now().checked_add(t)),
        command: "",
        args: Vec::new(),
        took: Duration::ZERO,
    });
    // Not sent: the connection answers with what the wait gives.
    Ok(Reply::Nil)
}

/// `BLPOP`/`BRPOP key [key ...] timeout`
fn bpop(cx: &mut Ctx, a: &[Bytes], left: bool) -> CmdResult {
    let (keys, t) = a.split_at(a.len() - 1);
    let t = timeout(&t[0])?;
    block_on(
        cx,
        keys,
        Op::ListPop { left, count: None },
        t,
        Reply::NilArray,
    )
}

fn blpop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bpop(cx, a, true)
}

fn brpop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bpop(cx, a, false)
}

fn bmove(
    cx: &mut Ctx,
    src: &Bytes,
    dst: &Bytes,
    from_left: bool,
    to_left: bool,
    t: &[u8],
) -> CmdResult {
    let t = timeout(t)?;
    let op = Op::ListMove {
        dst: dst.clone(),
        from_left,
        to_left,
    };
    block_on(cx, std::slice::from_ref(src), op, t, Reply::Nil)
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`
fn blmove(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (from, to) = (list::side(&a[2])?, list::side(&a[3])?);
    bmove(cx, &a[0], &a[1], from, to, &a[4])
}

/// `BRPOPLPUSH source destination timeout`
fn brpoplpush(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bmove(cx, &a[0], &a[1], false, true, &a[2])
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`
fn blmpop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let t = timeout(&a[0])?;
    let (keys, right, count) = super::mpop_args(&a[1..], "left", "right")?;
    let op = Op::ListPop {
        left: !right,
        count: Some(count),
    };
    block_on(cx, keys, op, t, Reply::NilArray)
}

/// `BZPOPMIN`/`BZPOPMAX key [key ...] timeout`
fn bzpop(cx: &mut Ctx, a: &[Bytes], max: bool) -> CmdResult {
    let (keys, t) = a.split_at(a.len() - 1);
    let t = timeout(&t[0])?;
    block_on(cx, keys, Op::ZPop { max, count: None }, t, Reply::NilArray)
}

fn bzpopmin(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bzpop(cx, a, false)
}

fn bzpopmax(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bzpop(cx, a, true)
}

/// `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]`
fn bzmpop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let t = timeout(&a[0])?;
    let (keys, max, count) = super::mpop_args(&a[1..], "min", "max")?;
    let op = Op::ZPop {
        max,
        count: Some(count),
    };
    block_on(cx, keys, op, t, Reply::NilArray)
}
