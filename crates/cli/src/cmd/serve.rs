//! `halflife serve`: the engine behind the Redis protocol (see `docs/serve.md`).

use anyhow::{anyhow, bail, Context, Result};
use engine::{CacheOptions, GcPolicyConfig, Options, TreeOptions, ValueLogOptions, WalOptions, DB};
use server::{AppendFsync, Config};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A config file in redis.conf syntax (docs/serve.md): its directives are these
    /// options (`port 6380`, `dir /data`, `replicaof host port`, ...) and the settings
    /// CONFIG SET changes (`timeout 300`, `loglevel warning`, ...); options given here
    /// override it, and CONFIG REWRITE writes the settings back into it.
    #[arg(value_name = "CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory (created if absent).
    #[arg(long, required_unless_present = "config")]
    pub dir: Option<PathBuf>,
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
    /// lifetime policies: target space amplification of the value files (GC runs while
    /// value-file bytes exceed this many times the live ones); 0 for paper 000's TTL
    /// trigger, under which --lifetime-initial-ttl applies. Fixed while the server runs
    /// (CONFIG GET halflife-space-amp-target).
    #[arg(long, default_value_t = engine::GcTrigger::DEFAULT_SPACE_AMP)]
    pub space_amp_target: f64,
    /// lifetime policies with --space-amp-target 0 (the TTL trigger): TTL of value files,
    /// in writes, before the first GC job has set the thresholds [default: the paper's
    /// 2^22, sized for a 200 GB load; scale it with the expected number of keys as
    /// `halflife bench` does].
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
    /// Where BGSAVE puts its checkpoint (DIR/bgsave) and BACKUP CREATE its incremental
    /// backups (docs/backup.md) [default: the data directory's sibling DIR-backup].
    #[arg(long, value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
    /// Log level, in Redis's names: debug, verbose, notice (tracing's info) or warning
    /// (CONFIG SET loglevel changes it while the server runs) [default: notice, or what
    /// HALFLIFE_LOG says].
    #[arg(long)]
    pub loglevel: Option<String>,
    /// Write the log to this file (appended) instead of stderr; empty: stderr (CONFIG SET
    /// logfile changes it, and opens the file again when it is the same path).
    #[arg(long, value_name = "PATH")]
    pub logfile: Option<String>,
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

/// `serve`'s command line alone, parsed again with a config file's directives before it
/// (later occurrences of an option win, so the command line overrides the file).
#[derive(clap::Parser)]
#[command(name = "halflife serve", args_override_self = true)]
struct ServeLine {
    #[command(flatten)]
    a: Args,
}

/// A config file's directives as `serve`'s options where one has the directive's name
/// (fixed while the server runs), and as settings applied as CONFIG SET applies them
/// (name, value, `file:line`) otherwise.
type FileSettings = Vec<(String, String, String)>;

fn from_file(path: &Path) -> Result<(Vec<String>, FileSettings)> {
    use clap::CommandFactory;
    let cmd = ServeLine::command();
    let mut flags = Vec::new();
    let mut settings = Vec::new();
    for d in server::conffile::parse(path).map_err(|e| anyhow!(e))? {
        let origin = format!("{}:{}", path.display(), d.line);
        let name = match d.name.as_str() {
            "slaveof" => "replicaof",
            "unixsocket" => "unix-socket",
            n => n,
        };
        if name == "include" {
            bail!("{origin}: include is not supported; put the settings in one file");
        }
        if name == "config" {
            bail!("{origin}: Bad directive or wrong number of arguments");
        }
        let Some(arg) = cmd.get_arguments().find(|a| a.get_long() == Some(name)) else {
            settings.push((d.name.clone(), d.args.join(" "), origin));
            continue;
        };
        let value = match (name, d.args.as_slice()) {
            ("replicaof", [host, port]) => format!("{host}:{port}"),
            ("replicaof", _) => bail!("{origin}: Bad directive or wrong number of arguments"),
            ("bind", [first, ..]) => first.clone(),
            (_, [v]) => v.clone(),
            _ => bail!("{origin}: Bad directive or wrong number of arguments"),
        };
        if arg.get_action().takes_values() {
            flags.push(format!("--{name}"));
            flags.push(value);
        } else {
            match value.to_ascii_lowercase().as_str() {
                "yes" => flags.push(format!("--{name}")),
                "no" => {}
                _ => bail!("{origin}: argument must be 'yes' or 'no'"),
            }
        }
    }
    Ok((flags, settings))
}

/// `a` with the config file's options under the command line's, and the file's settings.
fn with_file(a: Args) -> Result<(Args, FileSettings, Option<PathBuf>)> {
    use clap::Parser;
    let Some(path) = a.config.clone() else {
        return Ok((a, Vec::new(), None));
    };
    let path = std::fs::canonicalize(&path)
        .with_context(|| format!("the config file {}", path.display()))?;
    let (flags, settings) = from_file(&path)?;
    let line: Vec<std::ffi::OsString> = std::env::args_os()
        .skip_while(|s| s != "serve")
        .skip(1)
        .collect();
    let argv = std::iter::once("halflife serve".into())
        .chain(flags.into_iter().map(Into::into))
        .chain(line);
    let merged = ServeLine::try_parse_from(argv)
        .map_err(|e| anyhow!("{} and the command line: {e}", path.display()))?;
    Ok((merged.a, settings, Some(path)))
}

pub fn run(a: Args) -> Result<()> {
    let (a, mut settings, config_file) = with_file(a)?;
    for (name, v) in [("loglevel", &a.loglevel), ("logfile", &a.logfile)] {
        if let Some(v) = v {
            settings.push((
                name.into(),
                v.clone(),
                format!("--{name} (or {name} in the config file)"),
            ));
        }
    }
    let dir = a
        .dir
        .clone()
        .ok_or_else(|| anyhow!("no data directory: give --dir, or dir in the config file"))?;
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
    let mut lifetime = engine::LifetimeOptions {
        trigger: match a.space_amp_target {
            0.0 => engine::GcTrigger::Ttl,
            target => engine::GcTrigger::SpaceAmp { target },
        },
        ..Default::default()
    };
    if let Some(ttl) = a.lifetime_initial_ttl {
        anyhow::ensure!(
            a.space_amp_target == 0.0,
            "--lifetime-initial-ttl applies only under the TTL trigger (--space-amp-target 0)"
        );
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
        backup_dir: a.backup_dir.clone(),
        config_file,
        settings,
        log: crate::logging::control().map(|c| server::LogHandle(std::sync::Arc::new(c.clone()))),
    };
    // A replica's install of a full sync that a crash interrupted is finished or undone
    // before the directory is opened.
    server::recover_interrupted_sync(&dir).with_context(|| {
        format!(
            "recovering an interrupted replica sync of {}",
            dir.display()
        )
    })?;
    let db = DB::open(&dir, opts).with_context(|| format!("opening {}", dir.display()))?;
    let policy = a.policy.clone();
    server::run(&config, db, a.threads, |addr| {
        let mut out = std::io::stdout().lock();
        let _ = write!(
            out,
            "halflife serve: ready, data in {}, policy {policy}, appendfsync {appendfsync}",
            dir.display()
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
