//! A Redis-protocol server over the halflife engine (`halflife serve`).
//!
//! Clients speak RESP2, or RESP3 after `HELLO 3`, over TCP or a Unix socket. Strings map
//! onto engine keys and values one to one (the value carries a small header with its
//! expiry, [`record`]); `appendfsync` maps onto WAL syncs ([`AppendFsync`]). See
//! `docs/serve.md` for the command list and the measurements.

mod access;
mod args;
mod backup;
mod blocked;
mod cluster;
mod cmd;
mod cmdstats;
mod combine;
pub mod conffile;
mod config;
mod deferred;
mod dump;
mod info;
mod inline;
mod latency;
mod logs;
mod maxmemory;
mod notify;
mod pattern;
mod pause;
mod pending;
#[cfg(test)]
mod proptests;
pub mod protocol;
mod pubsub;
pub mod record;
// The runtime lands before its commands (EVAL, FUNCTION) are wired into the table.
mod repl;
mod repl_log;
mod repl_state;
mod script;
mod server;
mod session;
mod shared;
mod slowlog;
mod store;

pub use config::{AppendFsync, Config, Protection};
pub use logs::{LogControl, LogHandle};
pub use repl::install::recover as recover_interrupted_sync;
pub use server::{Server, ShutdownHandle};

/// Opens nothing itself: serves `db` with `config` on a new multi-threaded runtime until
/// shutdown, calling `ready` with the TCP address once the listeners are bound.
pub fn run(
    config: &Config,
    db: engine::DB,
    worker_threads: usize,
    ready: impl FnOnce(Option<std::net::SocketAddr>),
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads.max(1))
        .enable_all()
        .build()?;
    rt.block_on(async {
        let server = Server::bind(config, db).await?;
        ready(server.local_addr());
        server.run().await
    })
}
