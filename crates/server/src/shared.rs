//! What every connection shares: the store, settings, the client registry, counters,
//! blocked clients, replication and cluster state. Commands reach it through
//! [`crate::cmd::Ctx`]; the network layer ([`crate::server`]) builds it.

use crate::blocked::Registry;
use crate::config::Settings;
use crate::session::Session;
use crate::store::Store;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

/// Counters INFO reports.
#[derive(Default)]
pub(crate) struct Stats {
    pub connections: AtomicU64,
    pub commands: AtomicU64,
    pub rejected: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Expired keys the active expiry sweep deleted.
    pub expired: AtomicU64,
}

impl Stats {
    pub fn count_lookup(&self, hit: bool) {
        if hit { &self.hits } else { &self.misses }.fetch_add(1, Relaxed);
    }

    pub fn reset(&self) {
        for c in [
            &self.connections,
            &self.commands,
            &self.rejected,
            &self.hits,
            &self.misses,
            &self.expired,
        ] {
            c.store(0, Relaxed);
        }
    }
}

/// A connected client, for `CLIENT LIST` and `CLIENT KILL`.
pub(crate) struct ClientEntry {
    pub addr: String,
    /// The server's end of the connection (`CLIENT LIST`'s `laddr`).
    pub laddr: String,
    pub name: Option<String>,
    pub since: Instant,
    /// When its last batch of commands ran (`idle`).
    pub active: Instant,
    pub last_command: String,
    /// The session's database, protocol and flags as of its last batch.
    pub db: u8,
    pub resp: u8,
    pub no_evict: bool,
    /// The connection became a replica's (`TYPE replica`).
    pub replica: bool,
    /// Its commands wait for a `CLIENT PAUSE` to end (flag `b`, blocked, as in Redis).
    pub paused: bool,
    /// Its pub/sub subscriptions: channels, patterns, shard channels.
    pub subscriptions: (usize, usize, usize),
    /// Closes the connection (`CLIENT KILL`, shutdown): its tasks watch this in place of
    /// the server's shutdown signal.
    pub kill: Arc<watch::Sender<bool>>,
}

impl ClientEntry {
    /// `CLIENT KILL` and `CLIENT LIST`'s type: `replica`, `pubsub` (it has subscriptions)
    /// or `normal` (a halflife replica's link to its primary is an outgoing connection, not
    /// a client, so no client is of type `master`).
    pub fn kind(&self) -> &'static str {
        if self.replica {
            "replica"
        } else if self.subscriptions != (0, 0, 0) {
            "pubsub"
        } else {
            "normal"
        }
    }

    pub fn kill(&self) {
        self.kill.send_replace(true);
    }
}

/// What every connection shares.
pub(crate) struct Shared {
    pub store: Store,
    /// Clients blocked in `BLPOP` and the like, by key.
    pub blocked: Registry,
    pub settings: Arc<Settings>,
    pub stats: Stats,
    /// `INFO commandstats`, `errorstats`, `latencystats`.
    pub cmdstats: crate::cmdstats::CommandStats,
    /// Pub/sub subscriptions and delivery.
    pub pubsub: crate::pubsub::Hub,
    /// `notify-keyspace-events`.
    pub notify: crate::notify::Notifier,
    /// `SLOWLOG`.
    pub slowlog: crate::slowlog::SlowLog,
    /// `LATENCY`'s event monitor.
    pub latency: crate::latency::Monitor,
    pub clients: Mutex<BTreeMap<u64, ClientEntry>>,
    pub started: Instant,
    pub tcp_port: u16,
    /// Cluster mode's state; `None` when it is off.
    pub cluster: Option<crate::cluster::Cluster>,
    /// Random, per start (INFO's `run_id`).
    pub run_id: u128,
    pub next_id: AtomicU64,
    pub shutdown: Arc<watch::Sender<bool>>,
    pub active_expire_keys_per_sec: usize,
    /// Role, replicas and link state ([`crate::repl_state`]).
    pub repl: crate::repl_state::Replication,
    /// The runtime, for the tasks commands start (a replica's link).
    pub runtime: tokio::runtime::Handle,
    /// This, for commands that start tasks holding it (they are handed a reference).
    pub me: std::sync::OnceLock<std::sync::Weak<Shared>>,
    /// `CLIENT PAUSE`'s state.
    pub pause: crate::pause::Pause,
    /// Lua scripts and function libraries ([`crate::script`]).
    pub scripting: crate::script::scripting::Scripting,
    /// `BGSAVE`, `BACKUP` and `backup-dir` ([`crate::backup`]).
    pub backups: Arc<crate::backup::Backups>,
    /// The config file `CONFIG REWRITE` writes ([`crate::conffile`]).
    pub conf: crate::conffile::Conf,
    /// `maxmemory` and its policy ([`crate::maxmemory`]).
    pub maxmemory: crate::maxmemory::MaxMemory,
}

impl Shared {
    /// A server's shared state without listeners, for tests of the command layer.
    #[cfg(test)]
    pub fn for_test(db: engine::DB, config: &crate::config::Config) -> Shared {
        let (tx, _) = watch::channel(false);
        let backups =
            crate::backup::Backups::new(crate::backup::Backups::default_dir(db.path()), &db)
                .expect("no backup directory to recover");
        Shared {
            backups: Arc::new(backups),
            conf: Default::default(),
            store: Store::open(db, config.repl_backlog_bytes).expect("a new database opens"),
            blocked: Registry::default(),
            settings: Arc::new(Settings::new(config)),
            stats: Stats::default(),
            cmdstats: crate::cmdstats::CommandStats::new(crate::cmd::table::counted()),
            pubsub: Default::default(),
            notify: Default::default(),
            slowlog: Default::default(),
            latency: Default::default(),
            clients: Mutex::new(BTreeMap::new()),
            started: Instant::now(),
            tcp_port: 0,
            cluster: None,
            next_id: AtomicU64::new(1),
            shutdown: Arc::new(tx),
            active_expire_keys_per_sec: 0,
            run_id: 0,
            repl: Default::default(),
            me: Default::default(),
            pause: Default::default(),
            scripting: Default::default(),
            maxmemory: Default::default(),
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime")
                .handle()
                .clone(),
        }
    }

    /// Publishes keyspace events (`events` is emptied), and the `expired` events of keys
    /// the store deleted since the last call.
    pub fn publish_events(&self, events: &mut Vec<crate::notify::Event>) {
        for (db, key) in self.store.take_expired() {
            self.stats.expired.fetch_add(1, Relaxed);
            if self.notify.wants(crate::notify::Class::EXPIRED) {
                events.push(crate::notify::Event {
                    db,
                    name: "expired",
                    key: key.into(),
                });
            }
        }
        for e in events.drain(..) {
            for (ch, msg) in self.notify.messages(&e) {
                self.pubsub.publish(false, &ch, &msg);
            }
        }
    }

    /// Changes to the shutdown flag (`true`: the server is stopping).
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// The `Arc` this is in (`None` in command-layer tests, which have none).
    pub fn arc(&self) -> Option<Arc<Shared>> {
        self.me.get().and_then(std::sync::Weak::upgrade)
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    pub fn set_client_name(&self, s: &mut Session, name: Option<String>) {
        s.name = name.clone();
        if let Some(c) = self.clients.lock().get_mut(&s.id) {
            c.name = name;
        }
    }

    /// One `CLIENT LIST` line, with Redis's fields that mean something here (`user` is
    /// always `default`: there are no ACL users; `redir` -1: no client tracking).
    fn line(id: u64, c: &ClientEntry) -> String {
        let mut flags = String::new();
        let pubsub = c.subscriptions != (0, 0, 0);
        for (on, f) in [
            (c.replica, 'S'),
            (pubsub, 'P'),
            (c.paused, 'b'),
            (c.no_evict, 'e'),
        ] {
            if on {
                flags.push(f);
            }
        }
        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={id} addr={} laddr={} name={} age={} idle={} flags={flags} db={} sub={} psub={} ssub={} cmd={} user=default redir=-1 resp={}\n",
            c.addr,
            c.laddr,
            c.name.as_deref().unwrap_or(""),
            c.since.elapsed().as_secs(),
            c.active.elapsed().as_secs(),
            c.db,
            c.subscriptions.0,
            c.subscriptions.1,
            c.subscriptions.2,
            c.last_command,
            c.resp,
        )
    }

    /// `CLIENT LIST` of the clients `keep` selects.
    pub fn client_list(&self, keep: impl Fn(u64, &ClientEntry) -> bool) -> String {
        self.clients
            .lock()
            .iter()
            .filter(|(id, c)| keep(**id, c))
            .map(|(id, c)| Self::line(*id, c))
            .collect()
    }

    pub fn set_paused(&self, id: u64, on: bool) {
        if let Some(c) = self.clients.lock().get_mut(&id) {
            c.paused = on;
        }
    }

    /// Stops the server: the listeners, then every connection.
    pub fn trigger_shutdown(&self) {
        self.shutdown.send_replace(true);
        // A script running now would hold the server until it ends by itself.
        self.scripting.activity.kill_for_shutdown();
        // After the flag: a client admitted meanwhile starts with it set (see `admit`).
        for c in self.clients.lock().values() {
            c.kill();
        }
    }
}
