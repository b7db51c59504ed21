//! Write combining: a pipeline's consecutive commands on one key run as one engine write.
//!
//! Why: applications pipeline bursts on one hot key (a job queue's `LPUSH`es, a
//! leaderboard's `ZADD`s, a counter hash's `HINCRBY`s), and under `redis-benchmark -P 16`
//! such a burst paid, per command, a hand-off of the key's lock between network threads, a
//! lookup of the key's metadata record and a group-commit round of the engine: together
//! about half of the server's CPU (docs/serve.md, "Benchmark"). Redis runs the burst in one
//! pass of its event loop. Here the run takes the exec lock and the key's lock once; each
//! command reads through what the run has written so far, and what it read is kept for the
//! commands after it (nobody else can change the key meanwhile: every writer of a key holds
//! its lock, and `EXEC` the exec lock); the run's writes become one atomic engine batch,
//! applied (and, under `appendfsync always`, synced once) before any reply is sent, so a
//! client sees what it would have seen had the commands run one by one.
//!
//! What may join a run: commands flagged [`Flags::COMBINABLE`] with one key, every one of
//! which reads only that key's metadata record and sub-keys, by point lookups
//! ([`crate::cmd::Ctx::meta`], [`crate::cmd::Ctx::sub_get`]; pops only without a count)
//! or, for streams, by bounded scans that see the run's writes ([`crate::pending::Pending::range`]: an
//! `XADD` trimming whole nodes, an `XREAD`/`XREADGROUP` with a short `COUNT` and no
//! `BLOCK`), and writes only those; not in a transaction, on a replica or in cluster mode
//! (a slot move orders its own locks); list pushes and stream appends only while no
//! client is blocked on a key (Redis serves a blocked client between two pushes of a
//! pipeline; a client that blocks while the run is under way waits for its end, as if it
//! had blocked after the pipeline). Another client's `FLUSHDB` is no more atomic with a
//! run than with a single command (`Store::flush`).
//!
//! The run's batch keeps the last of the key's metadata records ([`crate::store::Batch::keep_last_of`]):
//! the record every command of the run rewrote is written once.

use crate::cmd::dispatch;
use crate::cmd::table::{self, Flags};
use crate::pending::Pending;
use crate::protocol::Reply;
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;

/// Most commands in one run: bounds the batch a run builds (each command is already
/// bounded by the request's size).
pub const MAX_RUN: usize = 64;

/// How many of `cmds`, from the first, run as one run (0 or 1: none).
pub fn run_len(sh: &Shared, s: &Session, cmds: &[Vec<Bytes>]) -> usize {
    if cmds.len() < 2
        || sh.cluster.is_some()
        || sh.store.is_replica()
        || s.ext.multi.is_some()
        || !s.replies.on()
        || !(s.authed || sh.settings.requirepass().is_none())
    {
        return 0;
    }
    let blocked = sh.blocked.any();
    let Some(key) = joining_key(&cmds[0], blocked) else {
        return 0;
    };
    cmds.iter()
        .take(MAX_RUN)
        .take_while(|c| joining_key(c, blocked) == Some(key))
        .count()
}

/// The key of `c` if it may join a run (`blocked`: some client is blocked on a key).
fn joining_key(c: &[Bytes], blocked: bool) -> Option<&Bytes> {
    table::find(&c[0])
        .filter(|s| s.runs_as(Flags::COMBINABLE, c) && !(blocked && s.has(Flags::WAKES)))
        .and_then(|s| s.sole_key(c))
}

/// Runs `cmds` (a run found by [`run_len`]) as one engine write; their replies, in order.
/// If that write fails, every command that wrote replies with its error.
pub fn run(sh: &Shared, s: &mut Session, cmds: &[Vec<Bytes>]) -> Vec<Reply> {
    let db = s.ext.db;
    let key = table::find(&cmds[0][0])
        .and_then(|spec| spec.sole_key(&cmds[0]))
        .expect("a run's commands have one key (run_len)")
        .clone();
    let _x = sh.store.command_lock();
    let _g = sh.store.lock(db, &[&key]);
    s.ext.combining = Some(Pending::new(db, key));
    let mut replies = Vec::with_capacity(cmds.len());
    let mut wrote = Vec::new();
    for c in cmds {
        sh.stats.commands.fetch_add(1, Relaxed);
        let before = s.ext.combining.as_ref().map_or(0, Pending::writes);
        let (reply, _) = dispatch::execute(sh, s, c);
        if s.ext.combining.as_ref().map_or(0, Pending::writes) > before {
            wrote.push(replies.len());
        }
        replies.push(reply);
    }
    let pending = s.ext.combining.take().expect("set above");
    let cx = crate::cmd::Ctx { sh, s };
    if let Err(e) = cx.write(pending.into_batch()) {
        for i in wrote {
            replies[i] = e.clone();
        }
        // Nothing changed: no events.
        s.events.get_mut().clear();
    }
    sh.publish_events(s.events.get_mut());
    replies
}
