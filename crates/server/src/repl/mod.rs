//! Replication: a replica copies a primary's database over the network and then applies
//! the primary's writes as they happen (Redis's `REPLICAOF`, `PSYNC`, `WAIT`; the design
//! is Kvrocks': a full sync ships a checkpoint's files, not a serialized dump). See
//! `docs/replication.md` for how it is used and its limits.
//!
//! - [`crate::repl_log`] (below the store, outside this module): the primary's
//!   replication id, offset and backlog, kept by the store under the lock that orders
//!   writes; the ids of a primary's earlier runs ([`history`]), for replicas that
//!   continue from its WAL after a restart; the wire format of the handshake, the file
//!   transfer and the write records.
//! - [`files`]: the disk side of a full sync's transfer (the primary's reads, the
//!   replica's writes), each on one blocking thread.
//! - [`primary`]: serving a replica that sent `PSYNC` (a full sync or `+CONTINUE`, then
//!   the stream, reading its `REPLCONF ACK`s).
//! - [`replica`]: the replica's link to its primary.
//! - [`install`]: putting a received copy in place of the replica's database.
//!
//! This module holds the changes of role; the role itself and what `INFO replication`,
//! `ROLE` and `WAIT` report are [`crate::repl_state`], below the server's shared state,
//! and the commands are [`crate::cmd::repl`].

pub mod files;
pub mod install;
pub mod primary;
pub mod replica;

use crate::protocol::Reply;
use crate::record;
use crate::repl_log::history;
use crate::shared::Shared;
use std::sync::Arc;

/// Makes this server a replica of `host:port` (the caller holds the exec lock): its own
/// replicas are dropped, writes from clients are refused (`replica-read-only`), and a
/// link task connects.
pub fn become_replica(sh: &Arc<Shared>, host: String, port: u16) {
    sh.store.set_replica(true);
    let offset = sh.store.log().offset();
    sh.store.log_mut().reset(offset);
    // Its sequence numbers stop being a primary's: no replica may continue from them.
    if let Err(e) = history::History::remove(&sh.store.db()) {
        tracing::warn!("replication: deleting the replication histories: {e}");
    }
    let gen = sh.repl.change_role(Some((host.clone(), port)), 0);
    sh.runtime.spawn(replica::run(sh.clone(), host, port, gen));
}

/// Promotes a replica (the caller holds the exec lock): a new replication history starts
/// at the offset it had applied, with no past (its sequence numbers are its own, not its
/// old primary's), and its stored position is deleted, so that a later `REPLICAOF` to
/// any primary makes a full sync (its data may differ from then on).
pub(crate) fn become_primary(sh: &Shared) -> Result<(), Reply> {
    let offset = sh
        .repl
        .link_offset()
        .unwrap_or_else(|| sh.store.log().offset());
    sh.repl.change_role(None, 0);
    let db = sh.store.db();
    db.delete_opt(record::REPL_KEY, &engine::WriteOptions { sync: true })?;
    sh.store.set_replica(false);
    let h = sh.store.log_mut().reset(offset);
    h.save(&db)?;
    Ok(())
}

/// Starts the history of a primary that opened its database: the last run's id is kept
/// with what this open recovered ([`history`]). Called before the server serves.
pub fn start_primary(sh: &Shared) -> engine::Result<()> {
    let db = sh.store.db();
    let h = history::History::reopened(history::History::load(&db)?, sh.store.recovered_seq());
    h.save(&db)?;
    sh.store.log_mut().set_history(h);
    Ok(())
}
