//! Listening, connections and shutdown.
//!
//! Each connection is a task that reads whatever the client has sent, decodes every
//! complete command in it (a pipeline arrives as many commands in one read), runs them
//! (on the task itself when every one is cheap, [`crate::inline`]; on the script thread
//! when every one runs a script, [`crate::server::lane`]; otherwise as one job on tokio's
//! blocking pool, since engine calls may block on I/O and a WAL sync can take
//! milliseconds), and writes all the replies back in one write. `SHUTDOWN`, SIGTERM and
//! SIGINT stop the listeners, close the connections, sync the WAL and close the engine.

mod lane;

use crate::blocked::{Blocked, Registry};
use crate::cmd::blocking;
use crate::cmd::dispatch;
use crate::config::{AppendFsync, Config, Settings};
use crate::protocol::{self, Reply};
use crate::session::{Outcome, Session};
use crate::shared::{ClientEntry, Shared, Stats};
use crate::store::Store;
use anyhow::{Context, Result};
use bytes::{Bytes, BytesMut};
use engine::DB;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Commands run in one blocking job at most; the rest of a long pipeline waits for the next.
const MAX_BATCH: usize = 1024;

/// A bound server, not yet running.
pub struct Server {
    shared: Arc<Shared>,
    tcp: Option<TcpListener>,
    unix: Option<(UnixListener, PathBuf)>,
    shutdown: watch::Receiver<bool>,
    replicaof: Option<(String, u16)>,
}

impl Server {
    /// Binds the listeners of `config` over `db`. Must be called within a tokio runtime.
    pub async fn bind(config: &Config, db: DB) -> Result<Server> {
        let tcp = match config.tcp {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("listening on {addr}"))?,
            ),
            None => None,
        };
        let unix = match &config.unix_socket {
            Some(path) => {
                // A socket file left by a previous run would make bind fail.
                if std::fs::symlink_metadata(path).is_ok_and(|m| {
                    use std::os::unix::fs::FileTypeExt;
                    m.file_type().is_socket()
                }) {
                    std::fs::remove_file(path)
                        .with_context(|| format!("removing stale socket {}", path.display()))?;
                }
                let l = UnixListener::bind(path)
                    .with_context(|| format!("listening on unix socket {}", path.display()))?;
                Some((l, path.clone()))
            }
            None => None,
        };
        anyhow::ensure!(
            tcp.is_some() || unix.is_some(),
            "nothing to listen on: give a TCP address or a Unix socket"
        );
        let tcp_port = match &tcp {
            Some(l) => l.local_addr()?.port(),
            None => 0,
        };
        let cluster = match config.cluster_enabled {
            true => Some(crate::cluster::Cluster::open(db.path())?),
            false => None,
        };
        let (tx, rx) = watch::channel(false);
        let backup_dir = config
            .backup_dir
            .clone()
            .unwrap_or_else(|| crate::backup::Backups::default_dir(db.path()));
        let backups = crate::backup::Backups::new(backup_dir, &db)
            .context("recovering the BGSAVE checkpoint of backup-dir")?;
        let server = Server {
            shared: Arc::new(Shared {
                backups: Arc::new(backups),
                conf: crate::conffile::Conf {
                    path: config.config_file.clone(),
                    baseline: Default::default(),
                },
                store: Store::open(db, config.repl_backlog_bytes)?,
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
                tcp_port,
                cluster,
                run_id: rand::random(),
                next_id: AtomicU64::new(1),
                shutdown: Arc::new(tx),
                active_expire_keys_per_sec: config.active_expire_keys_per_sec,
                repl: Default::default(),
                runtime: tokio::runtime::Handle::current(),
                me: Default::default(),
                pause: Default::default(),
                scripting: Default::default(),
                maxmemory: Default::default(),
            }),
            replicaof: config.replicaof.clone(),
            tcp,
            unix,
            shutdown: rx,
        };
        let _ = server.shared.me.set(Arc::downgrade(&server.shared));
        // The config file's settings, each as CONFIG SET would set it.
        for (name, value, origin) in &config.settings {
            crate::cmd::config::set_at_start(&server.shared, name, value).map_err(|r| match r {
                Reply::Error(e) => anyhow::anyhow!("{origin}: {e}"),
                other => anyhow::anyhow!("{origin}: {other:?}"),
            })?;
        }
        let _ = server
            .shared
            .conf
            .baseline
            .set(crate::cmd::config::settable(&server.shared));
        Ok(server)
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// A handle that stops the server (as `SHUTDOWN` does) from outside.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.shared.shutdown.clone())
    }

    /// Serves until `SHUTDOWN`, SIGTERM or SIGINT, then closes the engine.
    pub async fn run(self) -> Result<()> {
        let Server {
            shared,
            tcp,
            unix,
            mut shutdown,
            replicaof,
        } = self;
        start_role(&shared, replicaof).await?;
        let mut conns = JoinSet::new();
        // The script thread of this server's connections (ends when the last one is gone).
        let lane = Arc::new(lane::Lane::default());
        let syncer = tokio::spawn(sync_every_second(shared.clone(), shutdown.clone()));
        let sweeper = tokio::spawn(sweep_expired(shared.clone(), shutdown.clone()));
        let evictor = tokio::spawn(crate::cmd::evict::run(shared.clone(), shutdown.clone()));
        let pinger = tokio::spawn(crate::repl::primary::ping_replicas(
            shared.clone(),
            shutdown.clone(),
        ));
        let saver = tokio::spawn(save_points(shared.clone(), shutdown.clone()));
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = sigterm.recv() => { tracing::info!("SIGTERM, shutting down"); break }
                _ = sigint.recv() => { tracing::info!("SIGINT, shutting down"); break }
                Some(done) = conns.join_next(), if !conns.is_empty() => {
                    if let Err(e) = done {
                        tracing::error!("connection task failed: {e}");
                    }
                }
                r = accept_tcp(&tcp) => match r {
                    Ok((stream, peer)) => {
                        stream.set_nodelay(true).ok();
                        keepalive(&stream, shared.settings.tcp_keepalive_secs());
                        let local = stream.local_addr().map_or_else(|_| String::new(), |a| a.to_string());
                        admit(&shared, &lane, &mut conns, stream, peer.to_string(), local, &shutdown).await;
                    }
                    Err(e) => accept_failed(e).await,
                },
                r = accept_unix(&unix) => match r {
                    Ok(stream) => {
                        let local = unix.as_ref().map_or_else(String::new, |(_, p)| format!("{}:0", p.display()));
                        admit(&shared, &lane, &mut conns, stream, "unix".to_string(), local, &shutdown).await
                    }
                    Err(e) => accept_failed(e).await,
                },
            }
        }
        shared.trigger_shutdown();
        drop(tcp);
        if let Some((l, path)) = unix {
            drop(l);
            std::fs::remove_file(&path).ok();
        }
        // Connections see the shutdown between commands; a command already running finishes.
        while conns.join_next().await.is_some() {}
        syncer.await.ok();
        sweeper.await.ok();
        evictor.await.ok();
        pinger.await.ok();
        saver.await.ok();
        close(shared).await
    }
}

/// Starts as a replica of `replicaof`, or as a primary: then a replication position left
/// by an earlier run as a replica is deleted, since writes it takes as a primary make its
/// data differ from that position (a later `REPLICAOF` makes a full sync), and a new
/// replication history starts ([`crate::repl_log::history`]).
async fn start_role(shared: &Arc<Shared>, replicaof: Option<(String, u16)>) -> Result<()> {
    match replicaof {
        Some((host, port)) => {
            let _x = shared.store.exec_lock();
            crate::repl::become_replica(shared, host, port);
        }
        None => {
            let sh = shared.clone();
            tokio::task::spawn_blocking(move || {
                let db = sh.store.db();
                if db.get(crate::record::REPL_KEY)?.is_some() {
                    db.delete_opt(
                        crate::record::REPL_KEY,
                        &engine::WriteOptions { sync: true },
                    )?;
                }
                crate::repl::start_primary(&sh)?;
                anyhow::Ok(())
            })
            .await??;
        }
    }
    Ok(())
}

/// Stops a running [`Server`] (it holds the signal only, not the engine, so that the
/// server can close the engine while handles exist).
#[derive(Clone)]
pub struct ShutdownHandle(Arc<watch::Sender<bool>>);

impl ShutdownHandle {
    pub fn shutdown(&self) {
        self.0.send_replace(true);
    }
}

async fn accept_tcp(
    l: &Option<TcpListener>,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match l {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

async fn accept_unix(
    l: &Option<(UnixListener, PathBuf)>,
) -> std::io::Result<tokio::net::UnixStream> {
    match l {
        Some((l, _)) => l.accept().await.map(|(s, _)| s),
        None => std::future::pending().await,
    }
}

/// `tcp-keepalive`: the kernel probes a connection silent for `secs` (Redis sets the
/// same idle time on its accepted sockets; 0 leaves keepalive off).
fn keepalive(stream: &tokio::net::TcpStream, secs: u64) {
    if secs == 0 {
        return;
    }
    let ka = socket2::TcpKeepalive::new().with_time(Duration::from_secs(secs));
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&ka) {
        tracing::debug!("setting tcp-keepalive: {e}");
    }
}

/// An accept error (out of file descriptors, most often) is logged and retried after a
/// pause rather than in a busy loop.
async fn accept_failed(e: std::io::Error) {
    tracing::warn!("accepting a connection: {e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Starts a connection task, or refuses the client when `maxclients` are connected.
async fn admit<S>(
    shared: &Arc<Shared>,
    lane: &Arc<lane::Lane>,
    conns: &mut JoinSet<()>,
    mut stream: S,
    addr: String,
    laddr: String,
    shutdown: &watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    shared.stats.connections.fetch_add(1, Relaxed);
    if shared.clients.lock().len() >= shared.settings.maxclients() {
        shared.stats.rejected.fetch_add(1, Relaxed);
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return;
    }
    let id = shared.next_id.fetch_add(1, Relaxed);
    let stop = {
        let mut clients = shared.clients.lock();
        // Read under the lock `trigger_shutdown` takes after setting the flag: either the
        // flag is seen here or this client is in the map it walks.
        let (kill, stop) = watch::channel(*shutdown.borrow());
        let now = Instant::now();
        clients.insert(
            id,
            ClientEntry {
                addr,
                laddr,
                name: None,
                since: now,
                active: now,
                last_command: "NULL".into(),
                db: 0,
                resp: 2,
                no_evict: false,
                replica: false,
                paused: false,
                subscriptions: (0, 0, 0),
                kill: Arc::new(kill),
            },
        );
        stop
    };
    let session = Session::connected(id, shared.settings.requirepass().is_some());
    conns.spawn(connection(
        shared.clone(),
        lane.clone(),
        stream,
        session,
        stop,
    ));
}

async fn connection<S>(
    shared: Arc<Shared>,
    lane: Arc<lane::Lane>,
    stream: S,
    session: Session,
    shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let id = session.id;
    // Halves, so that the connection can read requests while replies wait to be written.
    let (mut rd, mut wr) = tokio::io::split(stream);
    let served = serve_connection(&shared, &lane, &mut rd, &mut wr, session, shutdown).await;
    // The slot is freed before the socket is closed: a client that saw the close and
    // connects again is not refused for `maxclients` by its own old connection.
    shared.clients.lock().remove(&id);
    shared.store.unwatch(id);
    shared.pubsub.forget(id);
    let closed = match served {
        Ok(true) => wr.shutdown().await,
        Ok(false) => Ok(()),
        Err(e) => Err(e),
    };
    if let Err(e) = closed {
        // A client that goes away mid-reply is normal; anything else is worth a line.
        if e.kind() != std::io::ErrorKind::BrokenPipe
            && e.kind() != std::io::ErrorKind::ConnectionReset
        {
            tracing::info!("connection {id}: {e}");
        }
    }
}

/// Bytes read from a connection at a time at most.
const READ_CHUNK: usize = 16 << 10;

/// Serves a connection's commands until it ends; `true` when its write side is to be
/// closed (the client asked to quit, or sent a request that cannot be parsed).
///
/// Memory per connection is bounded: the input holds at most the unparsed part of one
/// request (the [`protocol::Decoder`] takes complete ones off it, within
/// [`protocol::Limits`]) plus one read, since reading stops while a full batch of complete
/// commands waits; the output holds the replies the client has not read yet, and a
/// connection whose unread replies pass `halflife-client-output-limit` is closed, as Redis
/// does at its `client-output-buffer-limit` (a client that sends without reading would
/// otherwise grow it without end).
async fn serve_connection<R, W>(
    shared: &Arc<Shared>,
    lane: &lane::Lane,
    rd: &mut R,
    wr: &mut W,
    mut session: Session,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<bool>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut output = BytesMut::new();
    let mut decoder = protocol::Decoder::new();
    // Commands after a blocking one in the same batch: they run once it is answered.
    let mut carry: Vec<Vec<Bytes>> = Vec::new();
    // A request that cannot be parsed: answered (and the connection closed) once the
    // commands before it have run.
    let mut bad = None;
    // Pub/sub messages for this connection, once it has subscribed.
    let mut inbox: Option<crate::pubsub::Inbox> = None;
    // When the client last sent something or took a reply (`timeout`), and the timer
    // that looks at it. The timer is set again only when it fires, not per request: a
    // timer per pass of the loop cost every command an entry in tokio's timer wheel.
    let mut last_io = Instant::now();
    let idle_check = tokio::time::sleep(IDLE_CHECK);
    tokio::pin!(idle_check);
    loop {
        let settings = &shared.settings;
        let unauthenticated = !session.authed && settings.requirepass().is_some();
        let limits = protocol::Limits::new(
            settings.max_request_bytes(),
            settings.max_query_bytes(),
            unauthenticated,
        );
        // Before authentication, one command at a time: an `AUTH` changes the limits the
        // next request is read with, as in Redis, which reads a request after running the
        // one before it.
        let most = if unauthenticated { 1 } else { MAX_BATCH };
        let mut batch: Vec<Vec<Bytes>> = std::mem::take(&mut carry);
        while batch.len() < most && bad.is_none() {
            match decoder.next(&mut input, &limits) {
                Ok(Some(cmd)) => batch.push(cmd),
                Ok(None) => break,
                Err(e) => {
                    bad = Some(e);
                    break;
                }
            }
        }
        let full = batch.len() == most;
        if !batch.is_empty() {
            // A pause in force holds writes at least; only then is the batch looked at.
            let paused = shared.pause.holds(true).is_some();
            let writes = paused && crate::cmd::client::may_write(&session, &batch);
            if paused && shared.pause.holds(writes).is_some() {
                shared.set_paused(session.id, true);
                let go_on = shared.pause.wait(writes, &mut shutdown).await;
                shared.set_paused(session.id, false);
                if !go_on {
                    return Ok(false);
                }
            }
            let max_output = settings.max_output_bytes();
            session.output_budget = max_output.saturating_sub(output.len());
            let (s, replies, outcome, rest) = if crate::inline::runs_inline(shared, &batch) {
                if full {
                    // A client that keeps a long pipeline coming would otherwise hold
                    // this network thread from the other connections on it.
                    tokio::task::yield_now().await;
                }
                run_batch(shared, session, batch)
            } else if lane::takes(shared, &session, &batch) {
                lane.run(shared, session, batch).await?
            } else {
                let sh = shared.clone();
                tokio::task::spawn_blocking(move || run_batch(&sh, session, batch))
                    .await
                    .map_err(std::io::Error::other)?
            };
            session = s;
            carry = rest;
            for r in replies {
                r.encode(session.proto, &mut output);
            }
            if let Some(i) = session.pubsub.inbox.take() {
                inbox = Some(i);
            }
            match outcome {
                Outcome::Continue => {}
                Outcome::Close => {
                    flush(wr, &mut output, &mut shutdown).await?;
                    return Ok(true);
                }
                Outcome::Shutdown => {
                    shared.trigger_shutdown();
                    return Ok(false);
                }
                Outcome::Replicate => {
                    // The connection is a replica's from here on.
                    flush(wr, &mut output, &mut shutdown).await?;
                    let ip = shared
                        .clients
                        .lock()
                        .get_mut(&session.id)
                        .map(|c| {
                            c.replica = true;
                            c.addr
                                .rsplit_once(':')
                                .map_or(c.addr.clone(), |(ip, _)| ip.to_string())
                        })
                        .unwrap_or_default();
                    let who = crate::repl::primary::Asker {
                        id: session.id,
                        ip,
                        port: session.repl_port,
                    };
                    let args = session.psync.take().unwrap_or_default();
                    crate::repl::primary::serve(shared, rd, wr, input, who, &args, shutdown)
                        .await?;
                    return Ok(false);
                }
            }
            if output.len() > max_output {
                // What the socket takes at once does not count against the client.
                tokio::select! {
                    biased;
                    r = wr.write_buf(&mut output) => { r?; }
                    _ = std::future::ready(()) => {}
                }
            }
            if output.len() > max_output {
                tracing::warn!(
                    "closing connection {}: {} bytes of replies unread, over halflife-client-output-limit {max_output}",
                    session.id,
                    output.len()
                );
                return Ok(false);
            }
            if let Some(mut b) = session.ext.blocked.take() {
                let (command, args, took) = (b.command, std::mem::take(&mut b.args), b.took);
                let waited =
                    wait_blocked(shared, b, rd, wr, &mut input, &mut output, &mut shutdown).await?;
                if let Some(r) = &waited {
                    shared.cmdstats.answered(command, r);
                    if let Some(spec) = crate::cmd::table::find(command.as_bytes()) {
                        crate::cmd::observe::ran(shared, &session, spec, &args, took);
                    }
                }
                match waited {
                    Some(_) if session.replies.blocked_silent => {}
                    Some(r) => r.encode(session.proto, &mut output),
                    None => return Ok(false),
                }
                continue;
            }
        }
        if !carry.is_empty() {
            continue;
        }
        if let Some(e) = bad.take() {
            // Replies to the commands before the bad one are in `output` already.
            let reply = Reply::err(e.to_string());
            shared.cmdstats.replied(&reply);
            reply.encode(session.proto, &mut output);
            flush(wr, &mut output, &mut shutdown).await?;
            return Ok(true);
        }
        if *shutdown.borrow() {
            if !shared.is_shutting_down() {
                // `CLIENT KILL` of this connection by itself: its reply first, as Redis
                // does, unless the client does not read it.
                let _ = tokio::time::timeout(Duration::from_secs(1), wr.write_all_buf(&mut output))
                    .await;
            }
            return Ok(false);
        }
        if full {
            // More complete commands may be buffered: write what the socket takes now,
            // without waiting, and run them.
            if !output.is_empty() {
                tokio::select! {
                    biased;
                    r = wr.write_buf(&mut output) => { r?; }
                    _ = std::future::ready(()) => {}
                }
            }
            continue;
        }
        // Messages already queued go out after the replies before them.
        while output.len() < PUSH_WINDOW {
            match inbox.as_mut().map(crate::pubsub::Inbox::try_recv) {
                Some(Some(crate::pubsub::Push(r, _))) => r.encode(session.proto, &mut output),
                Some(None) if session.pubsub.mailbox.is_none() => inbox = None,
                _ => break,
            }
        }
        input.reserve(READ_CHUNK);
        tokio::select! {
            n = rd.read_buf(&mut input) => {
                if n? == 0 {
                    // The client is done sending; it may still read the last replies.
                    flush(wr, &mut output, &mut shutdown).await?;
                    return Ok(false);
                }
                last_io = Instant::now();
            }
            r = wr.write_buf(&mut output), if !output.is_empty() => {
                if r? == 0 {
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                last_io = Instant::now();
            }
            _ = &mut idle_check => {
                // As Redis's clientsCronHandleTimeout: subscribers are never closed for
                // idling (a blocked client waits in `wait_blocked`, a replica's link in
                // `repl::primary`, neither of which comes here).
                let timeout = Duration::from_secs(settings.timeout_secs());
                let idle = last_io.elapsed();
                let spared = timeout.is_zero() || session.pubsub.subscribed();
                if !spared && idle >= timeout {
                    tracing::debug!("closing connection {}: idle past timeout {timeout:?}", session.id);
                    return Ok(false);
                }
                // At the timeout if it comes sooner; in a second at the latest, so that a
                // `CONFIG SET timeout` made meanwhile is seen within a second, as Redis's
                // once-a-second client cron sees it.
                let next = match spared {
                    true => IDLE_CHECK,
                    false => (timeout - idle).min(IDLE_CHECK),
                };
                idle_check.as_mut().reset(tokio::time::Instant::now() + next);
            }
            p = next_push(&mut inbox), if inbox.is_some() && output.len() < PUSH_WINDOW => match p {
                Some(crate::pubsub::Push(r, _)) => {
                    r.encode(session.proto, &mut output);
                    // The publishers running now add their messages meanwhile, and they
                    // go out in one write, as Redis writes a subscriber's messages once per
                    // pass of its event loop: a write per message was most of the CPU of a
                    // PUBLISH (each wakes the reader in the kernel).
                    tokio::task::yield_now().await;
                }
                // Its mailbox is gone (`RESET`): a later subscription makes a new one.
                None => inbox = None,
            },
            _ = shutdown.changed() => return Ok(false),
        }
    }
}

/// How often an idle connection looks at `timeout` at most.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Bytes of unwritten output past which a subscriber's messages stay in its mailbox, where
/// they count against `client-output-buffer-limit pubsub` ([`crate::pubsub`]).
const PUSH_WINDOW: usize = 64 << 10;

async fn next_push(inbox: &mut Option<crate::pubsub::Inbox>) -> Option<crate::pubsub::Push> {
    match inbox {
        Some(i) => i.recv().await,
        None => std::future::pending().await,
    }
}

/// Most bytes read ahead from a blocked client (its next commands) while it waits.
const MAX_READ_AHEAD: usize = 4 * READ_CHUNK;

/// Waits for the answer of a blocked command ([`blocking`]): the reply a push gave it,
/// or its timeout's. Meanwhile writes the replies before it and reads ahead what the
/// client sends next (up to [`MAX_READ_AHEAD`]). `None`: the connection ends (the client
/// closed it or the server shuts down); the client is unblocked then.
async fn wait_blocked<R, W>(
    sh: &Shared,
    b: Blocked,
    rd: &mut R,
    wr: &mut W,
    input: &mut BytesMut,
    output: &mut BytesMut,
    shutdown: &mut watch::Receiver<bool>,
) -> std::io::Result<Option<Reply>>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let timeout_reply = b.timeout_reply();
    let Blocked {
        waiter,
        mut reply,
        deadline,
        ..
    } = b;
    let until = async move {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until);
    let mut eof = false;
    // Every way out but an answer unblocks the client first.
    let leave = |r: std::io::Result<Option<Reply>>| {
        sh.blocked.cancel(&waiter);
        r
    };
    loop {
        input.reserve(READ_CHUNK);
        tokio::select! {
            r = &mut reply => {
                // The sender is only dropped unanswered by a cancel, which is ours.
                return Ok(Some(r.unwrap_or(timeout_reply)));
            }
            _ = &mut until => {
                if sh.blocked.cancel(&waiter) {
                    return Ok(Some(timeout_reply));
                }
                // Answered just before the timeout: the reply is in the channel.
                return Ok(Some((&mut reply).await.unwrap_or(timeout_reply)));
            }
            _ = shutdown.changed() => return leave(Ok(None)),
            n = rd.read_buf(input), if !eof && input.len() < MAX_READ_AHEAD => match n {
                Ok(0) => {
                    eof = true;
                    if sh.blocked.cancel(&waiter) {
                        return Ok(None);
                    }
                }
                Ok(_) => {}
                Err(e) => return leave(Err(e)),
            },
            r = wr.write_buf(output), if !output.is_empty() => match r {
                Ok(0) => return leave(Err(std::io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) => return leave(Err(e)),
            },
        }
    }
}

/// Writes all of `output`, unless the server shuts down first.
async fn flush<W: AsyncWrite + Unpin>(
    wr: &mut W,
    output: &mut BytesMut,
    shutdown: &mut watch::Receiver<bool>,
) -> std::io::Result<()> {
    if *shutdown.borrow() {
        return Ok(());
    }
    tokio::select! {
        r = wr.write_all_buf(output) => r,
        _ = shutdown.changed() => Ok(()),
    }
}

/// What a batch of a connection's commands gave: the session back, the replies, how the
/// connection goes on, and the commands after one that blocked.
pub(crate) type Ran = (Session, Vec<Reply>, Outcome, Vec<Vec<Bytes>>);

/// Runs a connection's commands in order; stops after one that closes the connection.
///
/// A blocking command that blocks ends the batch too: the commands after it are
/// returned, to run once it is answered.
pub(crate) fn run_batch(sh: &Shared, mut s: Session, mut batch: Vec<Vec<Bytes>>) -> Ran {
    let mut replies = Vec::with_capacity(batch.len());
    let mut outcome = Outcome::Continue;
    note_batch(sh, &s, batch.last());
    s.clock = Some(Instant::now());
    let mut i = 0;
    while i < batch.len() {
        let run = batch[i..]
            .iter()
            .take_while(|c| crate::cmd::string::is_plain_set(sh, &s, c))
            .count();
        if run > 1 {
            sh.stats.commands.fetch_add(run as u64, Relaxed);
            let start = s.clock.take().unwrap_or_else(Instant::now);
            let done = crate::cmd::string::set_many(sh, &s, &batch[i..i + run]);
            let end = Instant::now();
            s.clock = Some(end);
            sh.cmdstats.ran_together("set", &done, end - start);
            if let Some(set) = crate::cmd::table::find(b"set") {
                let share = (end - start) / run as u32;
                for c in &batch[i..i + run] {
                    crate::cmd::observe::ran(sh, &s, set, c, share);
                    crate::cmd::observe::monitor(sh, &s, c);
                }
            }
            replies.extend(done);
            i += run;
            continue;
        }
        let run = crate::combine::run_len(sh, &s, &batch[i..]);
        if run > 1 {
            replies.extend(crate::combine::run(sh, &mut s, &batch[i..i + run]));
            // The run's write, applied after its last command, is no one command's time.
            s.clock = Some(Instant::now());
            i += run;
            blocking::serve_ready(sh);
            continue;
        }
        sh.stats.commands.fetch_add(1, Relaxed);
        let (reply, o) = dispatch::execute(sh, &mut s, &batch[i]);
        let silent = s.replies.after_command();
        i += 1;
        // Clients blocked on keys this command wrote are answered before the next one
        // (in a script group, once the group's writes are applied: it holds the lock).
        if s.ext.script_group.is_none() {
            blocking::serve_ready(sh);
        }
        if s.ext.blocked.is_some() {
            s.replies.blocked_silent = silent;
            let rest = batch.split_off(i);
            s.clock = None;
            return (s, replies, outcome, rest);
        }
        // Pub/sub confirmations are pushes: they are sent even with replies off, as
        // Redis sends them.
        let push = matches!(reply, Reply::Many(_) | Reply::Push(_));
        if (!silent || push) && !matches!(o, Outcome::Shutdown | Outcome::Replicate) {
            replies.push(reply);
        }
        if o != Outcome::Continue {
            outcome = o;
            break;
        }
    }
    s.clock = None;
    (s, replies, outcome, Vec::new())
}

/// The client's `CLIENT LIST` entry as of a batch: its last command, database, protocol,
/// and the time (one registry update per batch).
fn note_batch(sh: &Shared, s: &Session, last: Option<&Vec<Bytes>>) {
    let mut clients = sh.clients.lock();
    let Some(c) = clients.get_mut(&s.id) else {
        return;
    };
    c.active = Instant::now();
    c.db = s.ext.db;
    c.resp = s.proto;
    if let Some(cmd) = last {
        // The client's bytes: cut short, and nothing that would break CLIENT LIST's lines.
        let name = &cmd[0][..cmd[0].len().min(64)];
        c.last_command = String::from_utf8_lossy(name)
            .chars()
            .map(|ch| {
                if ch.is_control() || ch == ' ' {
                    '?'
                } else {
                    ch
                }
            })
            .collect::<String>()
            .to_ascii_lowercase();
    }
}

/// The ticks of a background task of the server: every `period` (a tick missed while the
/// task worked is not made up for), until the server shuts down.
struct Ticks {
    tick: tokio::time::Interval,
    shutdown: watch::Receiver<bool>,
}

impl Ticks {
    fn new(period: Duration, shutdown: watch::Receiver<bool>) -> Ticks {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ticks { tick, shutdown }
    }

    /// Waits for the next tick; `false` once the server shuts down.
    async fn next(&mut self) -> bool {
        tokio::select! {
            _ = self.tick.tick() => true,
            _ = self.shutdown.changed() => false,
        }
    }
}

/// `save <seconds> <changes> ...`: a `BGSAVE` once a point is reached, checked each
/// second (Redis's `serverCron`).
async fn save_points(shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let mut ticks = Ticks::new(Duration::from_secs(1), shutdown);
    while ticks.next().await {
        let db = shared.store.db();
        if let Some((secs, changes)) = shared.backups.due(db.latest_sequence_number()) {
            tracing::info!("{changes} changes in {secs} seconds. Saving...");
            let _ = shared.backups.bgsave(db, false);
        }
    }
}

/// `appendfsync everysec`: syncs the WAL once a second while that is the setting.
async fn sync_every_second(shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let mut ticks = Ticks::new(Duration::from_secs(1), shutdown);
    while ticks.next().await {
        if shared.settings.appendfsync() != AppendFsync::EverySec {
            continue;
        }
        let sh = shared.clone();
        let sync = move || {
            let _c = sh.store.command_lock();
            sh.store.db().sync_wal()
        };
        match tokio::task::spawn_blocking(sync).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!("WAL sync failed: {e}"),
            Err(e) => tracing::error!("WAL sync task failed: {e}"),
        }
    }
}

/// Active expiry: walks the key space in key order, a tenth of the per-second budget ten
/// times a second, deleting expired keys so that their space goes to GC even if no client
/// reads them again (reads delete the expired keys they meet as well).
async fn sweep_expired(shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let per_tick = shared.active_expire_keys_per_sec.div_ceil(10);
    if per_tick == 0 {
        return;
    }
    let mut ticks = Ticks::new(Duration::from_millis(100), shutdown);
    let mut at: Option<Vec<u8>> = None;
    while ticks.next().await {
        let sh = shared.clone();
        let from = at.take();
        let sweep = move || {
            let _c = sh.store.command_lock();
            let start = Instant::now();
            let r = sh.store.sweep_expired(from.as_deref(), per_tick);
            sh.latency.add("expire-cycle", start.elapsed());
            // Strings tracked for their `expired` event whose time has come.
            let due = sh.store.purge_due(per_tick);
            // The sweep's and reads' deletions are counted and announced here when no
            // command has done so since.
            sh.publish_events(&mut Vec::new());
            due.and(r)
        };
        match tokio::task::spawn_blocking(sweep).await {
            Ok(Ok((next, _))) => at = next,
            Ok(Err(e)) => tracing::error!("expiry sweep: {e}"),
            Err(e) => tracing::error!("expiry sweep task failed: {e}"),
        }
    }
}

/// Syncs the WAL and closes the engine once nothing else holds it.
async fn close(mut shared: Arc<Shared>) -> Result<()> {
    // A BGSAVE or BACKUP CREATE holds the engine until it ends.
    let backups = shared.backups.clone();
    tokio::task::spawn_blocking(move || backups.wait_idle()).await?;
    // Blocking jobs of finished connections may still hold a reference for a moment.
    for _ in 0..600 {
        match Arc::try_unwrap(shared) {
            Ok(sh) => {
                let Some(db) = sh.store.into_db() else {
                    anyhow::bail!("the database is still in use at shutdown");
                };
                return tokio::task::spawn_blocking(move || {
                    db.sync_wal()?;
                    db.close()
                })
                .await?
                .context("closing the database");
            }
            Err(again) => {
                shared = again;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // Something still holds the engine: make the acknowledged writes durable at least.
    shared
        .store
        .db()
        .sync_wal()
        .context("syncing the WAL at shutdown")?;
    anyhow::bail!("the database was still in use 30 s after shutdown; the WAL is synced, the engine not closed")
}
