//! A connection's state: who it is, its protocol, authentication, selected database,
//! transaction, cursors, blocking and reply settings. Commands read and change it through
//! [`crate::cmd::Ctx`]; the connection's task owns it and hands it to whichever thread
//! runs its commands.

use bytes::Bytes;
use std::collections::BTreeMap;
use std::time::Instant;

/// What the connection does after a command's reply is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    /// `QUIT`: send the reply, then close.
    Close,
    /// `SHUTDOWN`: close without a reply and stop the server.
    Shutdown,
    /// `PSYNC`: the connection becomes a replica's ([`crate::repl::primary`]), with the
    /// arguments in [`Session::psync`].
    Replicate,
}

/// Per-connection state.
pub struct Session {
    pub id: u64,
    pub name: Option<String>,
    /// Protocol version: 2 until `HELLO 3`.
    pub proto: u8,
    pub authed: bool,
    /// SCAN cursor -> last key returned under it (cursors are numbers on the wire; keys are
    /// not, so the position stays here).
    pub cursors: BTreeMap<u64, Vec<u8>>,
    pub next_cursor: u64,
    /// Reply bytes the connection may still buffer (set before each batch): commands whose
    /// reply grows with the data (`MGET`, `KEYS`) stop with an error rather than build a
    /// reply the connection would be closed for.
    pub output_budget: usize,
    /// Database, transaction and watch state of the data-type commands.
    pub ext: SessionExt,
    /// A replica's `REPLCONF listening-port`.
    pub repl_port: u16,
    /// The arguments of the `PSYNC` that made this connection a replica's.
    pub psync: Option<Vec<Bytes>>,
    /// `CLIENT REPLY`'s state.
    pub replies: Replies,
    /// When the last command ended, while the connection runs a batch of them: the next
    /// command's time counts from there, so that each command reads the clock once
    /// ([`crate::cmdstats`]). `None` outside a batch.
    pub clock: Option<Instant>,
    /// What the connection does once the current command's reply is sent (`QUIT`,
    /// `SHUTDOWN`, `PSYNC` set it; the dispatch takes it after each command).
    pub outcome: Outcome,
    /// Its pub/sub mailbox and subscription counts.
    pub pubsub: Subscriber,
    /// Keyspace events of the command running, published once its writes are applied.
    pub events: std::cell::RefCell<Vec<crate::notify::Event>>,
    /// The command's error reply was counted in `errorstats` already (a script's reply
    /// that is the error of a command it ran): the dispatch counts the call as failed only.
    pub error_counted: bool,
}

impl Session {
    pub fn new(id: u64) -> Session {
        Session {
            id,
            name: None,
            proto: 2,
            authed: false,
            cursors: BTreeMap::new(),
            next_cursor: 0,
            output_budget: usize::MAX,
            ext: Default::default(),
            repl_port: 0,
            psync: None,
            replies: Default::default(),
            clock: None,
            outcome: Outcome::Continue,
            pubsub: Subscriber::default(),
            events: Default::default(),
            error_counted: false,
        }
    }

    /// A new connection's session (and `RESET`'s): as in Redis, authenticated when no
    /// password is set, and it stays so when `CONFIG SET requirepass` sets one later (or
    /// an `AUTH` of it fails).
    pub fn connected(id: u64, password_set: bool) -> Session {
        Session {
            authed: !password_set,
            ..Session::new(id)
        }
    }
}

/// The data-type commands' part of a session.
#[derive(Default)]
pub struct SessionExt {
    /// `SELECT`ed database.
    pub db: u8,
    /// Commands queued since `MULTI` (`None`: not in a transaction).
    pub multi: Option<Vec<Vec<Bytes>>>,
    /// A command queued after `MULTI` was refused: `EXEC` fails with `EXECABORT`.
    pub multi_failed: bool,
    /// `WATCH`ed keys and whether each existed (unexpired) when watched.
    pub watched: Vec<(u8, Vec<u8>, bool)>,
    /// `HSCAN`/`SSCAN`/`ZSCAN` cursors: number -> (key, last member returned).
    pub coll_cursors: std::collections::BTreeMap<u64, (Vec<u8>, Vec<u8>)>,
    pub next_coll_cursor: u64,
    /// `EXEC` is running this connection's queued commands (blocking commands do not
    /// block then).
    pub in_exec: bool,
    /// A script runs this session's commands (as `EXEC` does: `in_exec` is set too).
    pub in_script: bool,
    /// Set by a blocking command that found nothing: the connection waits on it before
    /// it runs anything else.
    pub blocked: Option<crate::blocked::Blocked>,
    /// Cluster mode's `READONLY`: reads of the slots of this node's master are served.
    pub cluster_readonly: bool,
    /// Cluster mode's `ASKING`: the next command (or transaction) may run on a slot this
    /// node imports.
    pub cluster_asking: bool,
    /// The run of commands on one key this connection is executing as one engine write
    /// ([`crate::combine`]).
    pub combining: Option<crate::pending::Pending>,
    /// The command running is a read (`readonly`): its key lookups count as hits and misses
    /// ([`crate::cmd::Ctx::looked_up`]).
    pub reading: bool,
    /// The batch runs in a group of the script thread ([`crate::server::lane`]).
    pub script_group: Option<ScriptGroup>,
}

/// Set on the session of each batch of a script thread's group while it runs: the group
/// holds the exec lock and the held writes, and writes the replication stream's
/// `MULTI`/`EXEC` ([`crate::server::lane`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct ScriptGroup {
    /// The group's `MULTI` is in the stream (a script of it wrote).
    pub wrapped: bool,
}

/// `CLIENT REPLY`'s state: which replies the connection sends.
#[derive(Default)]
pub struct Replies {
    /// `CLIENT REPLY OFF`: none until `ON`.
    pub off: bool,
    /// `CLIENT REPLY SKIP` ran: the next command's reply is dropped.
    pub skip_next: bool,
    /// The current command's reply is dropped.
    skip_this: bool,
    /// The reply of the command the connection is blocked in is dropped when it comes.
    pub blocked_silent: bool,
}

impl Replies {
    /// Whether replies are sent as usual (nothing is off or skipped).
    pub fn on(&self) -> bool {
        !(self.off || self.skip_next || self.skip_this)
    }

    /// Called once per command after it ran: whether its reply is dropped, and moves a
    /// `SKIP` on to the next command (`SKIP`'s own reply is dropped too, as in Redis).
    pub fn after_command(&mut self) -> bool {
        let silent = self.off || self.skip_this || self.skip_next;
        self.skip_this = std::mem::take(&mut self.skip_next);
        silent
    }
}

/// A session's side of pub/sub ([`crate::pubsub`]).
#[derive(Default)]
pub struct Subscriber {
    /// Where messages for this connection are queued, made at its first subscription.
    pub mailbox: Option<std::sync::Arc<crate::pubsub::Mailbox>>,
    /// The receiving end, until the connection's task takes it.
    pub inbox: Option<crate::pubsub::Inbox>,
    /// Its subscriptions: channels, patterns, shard channels.
    pub counts: (usize, usize, usize),
}

impl Subscriber {
    /// Whether it has any subscription.
    pub fn subscribed(&self) -> bool {
        self.counts != (0, 0, 0)
    }
}
