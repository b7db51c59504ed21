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
//! What may join a run: commands flagged [`Flags::COMBINABLE`], every one of which reads only its key's
//! metadata record and sub-keys by point lookups ([`crate::cmd::Ctx::meta`],
//! [`crate::cmd::Ctx::sub_get`]; pops only without a count) and writes only those; not in
//! a transaction, on a replica or in cluster mode (a slot move orders its own locks); list
//! pushes only while no client is blocked on a key (Redis serves a blocked client between
//! two pushes of a pipeline; a client that blocks while the run is under way waits for its
//! end, as if it had blocked after the pipeline). Another client's `FLUSHDB` is no more
//! atomic with a run than with a single command (`Store::flush`).

use crate::cmd::table::{self, Flags};
use crate::dispatch;
use crate::protocol::Reply;
use crate::record::Meta;
use crate::session::Session;
use crate::shared::Shared;
use crate::store::{self, Batch, Store};
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

/// Most commands in one run: bounds the batch a run builds (each command is already
/// bounded by the request's size).
pub const MAX_RUN: usize = 64;

/// The state of a run while its commands execute (kept in the session; see
/// [`crate::cmd::Ctx`]).
pub struct Pending {
    db: u8,
    key: Bytes,
    /// The run's writes so far.
    batch: RefCell<Batch>,
    /// Engine records as a read will see them once `batch` is applied: those the run wrote,
    /// and those it read (the run holds the key, so they cannot change).
    records: RefCell<HashMap<Vec<u8>, Option<Vec<u8>>>>,
}

impl Pending {
    /// Whether the run is on `key` of `db`.
    pub fn covers(&self, db: u8, key: &[u8]) -> bool {
        self.db == db && self.key[..] == *key
    }

    /// The engine record `k` as it will read once the run's writes are applied.
    pub fn get(&self, store: &Store, k: &[u8]) -> engine::Result<Option<Vec<u8>>> {
        if let Some(v) = self.records.borrow().get(k) {
            return Ok(v.clone());
        }
        let v = store.db().get(k)?;
        self.records.borrow_mut().insert(k.to_vec(), v.clone());
        Ok(v)
    }

    /// Whether the engine record `k` will exist once the run's writes are applied, without
    /// reading its value unless the run has it already.
    pub fn contains(&self, store: &Store, k: &[u8]) -> engine::Result<bool> {
        match self.records.borrow().get(k) {
            Some(v) => Ok(v.is_some()),
            None => store.db().contains(k),
        }
    }

    /// The key's live metadata as it will read once the run's writes are applied.
    pub fn meta(&self, store: &Store) -> store::Result<Option<Meta>> {
        match self.get(store, &crate::record::meta_key(self.db, &self.key))? {
            Some(raw) => store::live_meta(&raw),
            None => Ok(None),
        }
    }

    /// Adds a command's writes to the run.
    pub fn add(&self, b: Batch) {
        let mut records = self.records.borrow_mut();
        for (k, v) in b.records() {
            records.insert(k.to_vec(), v.map(<[u8]>::to_vec));
        }
        self.batch.borrow_mut().append(b);
    }

    fn writes(&self) -> usize {
        self.batch.borrow().len()
    }
}

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
    let Some(key) = cmds[0].get(1) else {
        return 0;
    };
    let blocked = sh.blocked.any();
    cmds.iter()
        .take(MAX_RUN)
        .take_while(|c| {
            c.get(1) == Some(key)
                && table::find(&c[0]).is_some_and(|s| {
                    s.runs_as(Flags::COMBINABLE, c) && !(blocked && s.has(Flags::WAKES))
                })
        })
        .count()
}

/// Runs `cmds` (a run found by [`run_len`]) as one engine write; their replies, in order.
/// If that write fails, every command that wrote replies with its error.
pub fn run(sh: &Shared, s: &mut Session, cmds: &[Vec<Bytes>]) -> Vec<Reply> {
    let db = s.ext.db;
    let key = cmds[0][1].clone();
    let _x = sh.store.command_lock();
    let _g = sh.store.lock(db, &[&key]);
    s.ext.combining = Some(Pending {
        db,
        key,
        batch: RefCell::new(Batch::new()),
        records: RefCell::new(HashMap::new()),
    });
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
    if let Err(e) = cx.write(pending.batch.into_inner()) {
        for i in wrote {
            replies[i] = e.clone();
        }
        // Nothing changed: no events.
        s.events.get_mut().clear();
    }
    sh.publish_events(s.events.get_mut());
    replies
}
