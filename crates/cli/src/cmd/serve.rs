//! `halflife serve`: the engine behind the Redis protocol (see `docs/serve.md`).

use anyhow::{anyhow, Context, Result};
use engine::{CacheOptions, GcPolicyConfig, Options, TreeOptions, ValueLogOptions, WalOptions, DB};
use server::{AppendFsync, Config};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Data directory (created if absent).
    #[arg(long)]
    pub dir: PathBuf,
    /// TCP port; 0 picks a free one (the address is printed when ready).
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Address to listen on. Anything but loopback exposes the data to the network: set
    /// --requirepass too.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Also listen on this Unix socket.
    #[arg(long, value_name = "PATH")]
    pub unix_socket: Option<PathBuf>,
    /// Listen on the Unix socket only.
    #[arg(long, requires = "unix_socket")]
    pub no_tcp: bool,
    /// When acknowledged writes are synced to disk: always (before the reply, group-committed),
    /// everysec (a background WAL sync each second) or no (left to the OS).
    #[arg(long, default_value = "everysec")]
    pub appendfsync: String,
    /// Clients must AUTH with this password (also settable with CONFIG SET requirepass).
    #[arg(long)]
    pub requirepass: Option<String>,
    /// Connections beyond this many are refused.
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: usize,
    /// Largest request (one command with its arguments) in MiB; larger ones close the
    /// connection with an error.
    #[arg(long, default_value_t = 512)]
    pub max_request_mib: usize,
    /// Value placement and GC policy: inline, blobdb, titan, terark, lifetime or
    /// lifetime-nomodel.
    #[arg(short, long, default_value = "lifetime")]
    pub policy: String,
    // --min-blob-size counts the server's 1- or 9-byte expiry header with the value.
    #[command(flatten)]
    pub sizes: crate::flags::SizeArgs,
    /// Keys the active expiry sweep examines per second, deleting expired ones so that GC
    /// can reclaim them (each examined key's value is read); 0 leaves expired keys until
    /// they are read.
    #[arg(long, default_value_t = 1000)]
    pub active_expire_keys: usize,
    /// lifetime policies: TTL of value files, in writes, before the first GC job has set
    /// the thresholds [default: the paper's 2^22, sized for a 200 GB load; scale it with the
    /// expected number of keys as `halflife bench` does].
    #[arg(long)]
    pub lifetime_initial_ttl: Option<u64>,
    /// Threads of the network runtime (point commands run on them, other engine calls on a
    /// separate blocking pool).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Start as a read-only replica of the halflife primary at HOST:PORT (REPLICAOF;
    /// see docs/replication.md): the data directory is replaced by the primary's copy.
    #[arg(long, value_name = "HOST:PORT")]
    pub replicaof: Option<String>,
    /// Password a replica authenticates to its primary with (masterauth).
    #[arg(long)]
    pub masterauth: Option<String>,
    /// Replication backlog in MiB (repl-backlog-size): how far behind a reconnecting
    /// replica may be and still continue without a full sync.
    #[arg(long, default_value_t = 1)]
    pub repl_backlog_mib: usize,
    /// Seconds an obsolete WAL is kept (the engine's wal_ttl_seconds), so that a replica
    /// can continue from it after this server restarts or when it fell out of the
    /// backlog, instead of copying the database (0: no bound by age).
    #[arg(long, default_value_t = 3600)]
    pub repl_wal_keep_seconds: u64,
    /// MiB of obsolete WALs kept, oldest dropped first (the engine's wal_size_limit; 0: no
    /// bound by size). With both bounds 0, no WAL is kept past its flush.
    #[arg(long, default_value_t = 1024)]
    pub repl_wal_keep_mib: u64,
    /// Redis Cluster mode: keys are routed by hash slot over the topology a controller
    /// pushes with CLUSTERX SETNODEID / SETNODES (see docs/cluster.md).
    #[arg(long)]
    pub cluster_enabled: bool,
    /// Who may run DEBUG (SLEEP): no, yes, or local (loopback and Unix-socket clients).
    #[arg(long, default_value = "no")]
    pub enable_debug_command: String,
}

/// `host:port` of `--replicaof` (the host may be a name or an address; the port is last).
fn host_port(s: &str) -> Result<(String, u16)> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("--replicaof {s:?}: expected HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| anyhow!("--replicaof {s:?}: bad port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    anyhow::ensure!(!host.is_empty(), "--replicaof {s:?}: empty host");
    Ok((host.to_string(), port))
}

pub fn run(a: Args) -> Result<()> {
    let appendfsync: AppendFsync = a
        .appendfsync
        .parse()
        .map_err(|e| anyhow!("--appendfsync: {e}"))?;
    let gc: GcPolicyConfig = a.policy.parse().map_err(crate::flags::user_facing)?;
    if gc.lifetime_mode() == Some(engine::LifetimeMode::Oracle) {
        anyhow::bail!(
            "--policy oracle needs the future of the workload, which a server does not know"
        );
    }
    let mut lifetime = engine::LifetimeOptions::default();
    if let Some(ttl) = a.lifetime_initial_ttl {
        lifetime.thresholds.initial_ttl = ttl;
    }
    let opts = Options {
        tree: TreeOptions {
            memtable_size: a.sizes.memtable_bytes(),
            ..Default::default()
        },
        wal: WalOptions {
            // Durability is chosen per write from --appendfsync.
            sync_writes: false,
            wal_ttl_seconds: a.repl_wal_keep_seconds,
            wal_size_limit: a.repl_wal_keep_mib.saturating_mul(1 << 20),
            ..Default::default()
        },
        vlog: ValueLogOptions {
            gc,
            lifetime,
            min_blob_size: a.sizes.min_blob_size as usize,
            blob_file_size: a.sizes.blob_file_bytes(),
            ..Default::default()
        },
        cache: CacheOptions {
            block_cache_capacity: a.sizes.cache_bytes(),
            ..Default::default()
        },
        ..Options::default()
    };
    opts.validate().map_err(crate::flags::user_facing)?;
    let config = Config {
        tcp: (!a.no_tcp).then_some(SocketAddr::new(a.bind, a.port)),
        unix_socket: a.unix_socket.clone(),
        appendfsync,
        requirepass: a.requirepass.clone(),
        maxclients: a.maxclients,
        max_request_bytes: a.max_request_mib << 20,
        active_expire_keys_per_sec: a.active_expire_keys,
        replicaof: a.replicaof.as_deref().map(host_port).transpose()?,
        masterauth: a.masterauth.clone(),
        repl_backlog_bytes: a.repl_backlog_mib.max(1) << 20,
        cluster_enabled: a.cluster_enabled,
        // The binary's global allocator (main.rs).
        mem_allocator: "mimalloc",
        enable_debug_command: a
            .enable_debug_command
            .parse()
            .map_err(|e| anyhow!("--enable-debug-command: {e}"))?,
    };
    // A replica's install of a full sync that a crash interrupted is finished or undone
    // before the directory is opened.
    server::recover_interrupted_sync(&a.dir).with_context(|| {
        format!(
            "recovering an interrupted replica sync of {}",
            a.dir.display()
        )
    })?;
    let db = DB::open(&a.dir, opts).with_context(|| format!("opening {}", a.dir.display()))?;
    let policy = a.policy.clone();
    server::run(&config, db, a.threads, |addr| {
        let mut out = std::io::stdout().lock();
        let _ = write!(
            out,
            "halflife serve: ready, data in {}, policy {policy}, appendfsync {appendfsync}",
            a.dir.display()
        );
        if let Some(addr) = addr {
            let _ = write!(out, ", tcp {addr}");
        }
        if let Some(p) = &a.unix_socket {
            let _ = write!(out, ", unix {}", p.display());
        }
        let _ = writeln!(out);
        let _ = out.flush();
    })
}
