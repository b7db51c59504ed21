//! Transactions: `MULTI` queues a connection's commands, `EXEC` runs them with no other
//! client's command in between (it holds the store's exec lock exclusively; every other
//! command holds it shared), and `WATCH` makes `EXEC` fail if a watched key was written
//! by anyone, deleted, flushed, or expired since it was watched.

use super::table::c;
use super::table::{Flags, Spec};
use super::{wrong_args, CmdResult, Ctx};
use crate::cmd::dispatch;
use crate::protocol::Reply;
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;

/// Queues the command while a transaction is open: `QUEUED`, or the error that will make
/// `EXEC` fail. `None`: not in a transaction, or a command that runs at once.
#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("multi", 1, [NOSCRIPT LOADING STALE FAST ALLOW_BUSY NOT_QUEUED], 0, 0, 0, Transactions, multi),
    c!("exec", 1, [NOSCRIPT LOADING STALE SKIP_SLOWLOG OWN_LOCK NOT_QUEUED], 0, 0, 0, Transactions, exec),
    c!("discard", 1, [NOSCRIPT LOADING STALE FAST ALLOW_BUSY NOT_QUEUED], 0, 0, 0, Transactions, discard),
    c!("watch", -2, [NOSCRIPT LOADING STALE FAST ALLOW_BUSY NOT_QUEUED], 1, -1, 1, Transactions, watch),
    c!("unwatch", 1, [NOSCRIPT LOADING STALE FAST ALLOW_BUSY], 0, 0, 0, Transactions, unwatch),
];

pub fn queue(s: &mut Session, spec: Option<&Spec>, args: &[Bytes]) -> Option<Reply> {
    let queued = s.ext.multi.as_mut()?;
    if spec.is_some_and(|s| s.has(Flags::NOT_QUEUED)) {
        return None;
    }
    let Some(spec) = spec else {
        s.ext.multi_failed = true;
        return Some(dispatch::unknown(&args[0], &args[1..]));
    };
    if !spec.arity_ok(args.len()) {
        s.ext.multi_failed = true;
        return Some(wrong_args(spec.name));
    }
    if spec.has(Flags::NO_MULTI) {
        s.ext.multi_failed = true;
        return Some(Reply::err("Command not allowed inside a transaction"));
    }
    queued.push(args.to_vec());
    Some(Reply::Simple("QUEUED"))
}

/// A command of a transaction refused before it was queued (Redis's `rejectCommand`): the
/// transaction fails; refused `EXEC` ends it, answering why.
pub fn reject(sh: &Shared, s: &mut Session, spec: Option<&Spec>, r: Reply) -> Reply {
    s.ext.multi_failed = true;
    if spec.is_none_or(|spec| spec.name != "exec") {
        return r;
    }
    s.ext.multi = None;
    s.ext.multi_failed = false;
    forget_watches(sh, s);
    match r {
        Reply::Error(e) => Reply::Error(format!("EXECABORT Transaction discarded because of: {e}")),
        other => other,
    }
}

pub fn multi(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    if cx.s.ext.multi.is_some() {
        return Err(Reply::err("MULTI calls can not be nested"));
    }
    cx.s.ext.multi = Some(Vec::new());
    cx.s.ext.multi_failed = false;
    Ok(Reply::ok())
}

fn forget_watches(sh: &Shared, s: &mut Session) {
    if !s.ext.watched.is_empty() {
        sh.store.unwatch(s.id);
        s.ext.watched.clear();
    }
}

/// Whether a watched key changed: written (the store's registry says so), or expired
/// since it was watched.
fn watched_changed(cx: &Ctx) -> Result<bool, Reply> {
    if cx.sh.store.is_dirty(cx.s.id) {
        return Ok(true);
    }
    for (db, key, existed) in &cx.s.ext.watched {
        if *existed && cx.sh.store.read(*db, key, false)?.is_none() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Runs the queued commands under the exec lock. The caller holds no command lock.
pub fn exec(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    let Some(queued) = cx.s.ext.multi.take() else {
        return Err(Reply::err("EXEC without MULTI"));
    };
    let failed = std::mem::take(&mut cx.s.ext.multi_failed);
    let _x = cx.sh.store.exec_lock();
    let changed = watched_changed(cx);
    forget_watches(cx.sh, cx.s);
    if failed {
        return Err(Reply::Error(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    if changed? {
        // Redis answers an aborted transaction with the null array.
        return Ok(Reply::NilArray);
    }
    let mut out = Vec::with_capacity(queued.len());
    // The stream holds the transaction's writes as one batch, but one over the bound of
    // held writes is several (crate::deferred): a replica applies what the stream holds
    // between these in one engine batch; the exec lock keeps every other write out of it.
    let wrap = queued.len() > 1;
    if wrap {
        cx.sh.store.log_command(&[b"MULTI"]);
    }
    cx.s.ext.in_exec = true;
    // The commands' writes are held back and applied as one engine batch at the end
    // (crate::deferred), before the replies are sent.
    let held = cx.sh.store.defer();
    for c in &queued {
        out.push(dispatch::run(cx.sh, cx.s, c).0);
    }
    let applied = held.finish();
    cx.s.ext.in_exec = false;
    if wrap {
        cx.sh.store.log_command(&[b"EXEC"]);
    }
    applied?;
    Ok(Reply::Array(out))
}

pub fn discard(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    if cx.s.ext.multi.take().is_none() {
        return Err(Reply::err("DISCARD without MULTI"));
    }
    cx.s.ext.multi_failed = false;
    forget_watches(cx.sh, cx.s);
    Ok(Reply::ok())
}

pub fn watch(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if cx.s.ext.multi.is_some() {
        return Err(Reply::err("WATCH inside MULTI is not allowed"));
    }
    for k in a {
        let db = cx.db();
        cx.sh.store.watch(cx.s.id, db, k);
        let exists = cx.meta(k)?.is_some();
        cx.s.ext.watched.push((db, k.to_vec(), exists));
    }
    Ok(Reply::ok())
}

pub fn unwatch(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    forget_watches(cx.sh, cx.s);
    Ok(Reply::ok())
}
