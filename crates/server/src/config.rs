//! Server settings: fixed ones ([`Config`], given at start) and those `CONFIG SET` may
//! change while the server runs ([`Settings`]).

use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// When acknowledged writes reach the disk, in Redis's terms, mapped onto the WAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendFsync {
    /// Every write is acknowledged after its WAL record is synced (group commit: concurrent
    /// writers share one sync).
    Always,
    /// Writes are acknowledged once in the WAL file (the OS page cache); a background task
    /// syncs the WAL every second, so a machine crash loses at most about a second.
    EverySec,
    /// Writes are acknowledged once in the WAL file; the OS decides when it reaches the
    /// disk. A crash of the server process alone loses nothing.
    No,
}

impl AppendFsync {
    pub const NAMES: [&'static str; 3] = ["always", "everysec", "no"];

    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::EverySec => "everysec",
            AppendFsync::No => "no",
        }
    }

    fn from_u8(v: u8) -> AppendFsync {
        match v {
            0 => AppendFsync::Always,
            1 => AppendFsync::EverySec,
            _ => AppendFsync::No,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            AppendFsync::Always => 0,
            AppendFsync::EverySec => 1,
            AppendFsync::No => 2,
        }
    }
}

impl fmt::Display for AppendFsync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AppendFsync {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(AppendFsync::Always),
            "everysec" => Ok(AppendFsync::EverySec),
            "no" => Ok(AppendFsync::No),
            other => Err(format!(
                "unknown appendfsync {other:?}; expected one of {}",
                AppendFsync::NAMES.join(", ")
            )),
        }
    }
}

/// How the server is started.
#[derive(Clone, Debug)]
pub struct Config {
    /// TCP address to listen on; `None` for a Unix socket only.
    pub tcp: Option<SocketAddr>,
    /// Unix socket path, if any (an existing socket file there is replaced).
    pub unix_socket: Option<PathBuf>,
    pub appendfsync: AppendFsync,
    /// Clients must `AUTH` with this password first.
    pub requirepass: Option<String>,
    /// Connections beyond this are refused with an error.
    pub maxclients: usize,
    /// Longest bulk string of a request in bytes (`proto-max-bulk-len`).
    pub max_request_bytes: usize,
    /// Keys the active expiry sweep examines per second (0: expired keys are deleted only
    /// when read).
    pub active_expire_keys_per_sec: usize,
    /// Start as a replica of this primary (`--replicaof host:port`).
    pub replicaof: Option<(String, u16)>,
    /// The password a replica authenticates to its primary with (`masterauth`).
    pub masterauth: Option<String>,
    /// `repl-backlog-size` in bytes.
    pub repl_backlog_bytes: usize,
    /// Redis Cluster mode (`--cluster-enabled`): keys are routed by hash slot over the
    /// topology a controller pushes with `CLUSTERX` (see [`crate::cluster`]).
    pub cluster_enabled: bool,
    /// `enable-debug-command`: who may run `DEBUG` (fixed while the server runs, as in
    /// Redis, where it is a protected setting).
    pub enable_debug_command: Protection,
    /// What `INFO`'s `mem_allocator` says: the allocator of the program that embeds the
    /// server (`libc` unless it installs another; `halflife serve` runs on mimalloc).
    pub mem_allocator: &'static str,
    /// `backup-dir`: where `BGSAVE` and `BACKUP` write ([`crate::backup`]); `None`: the
    /// data directory's sibling `<dir>-backup`.
    pub backup_dir: Option<PathBuf>,
    /// The config file the server was started with, which `CONFIG REWRITE` writes.
    pub config_file: Option<PathBuf>,
    /// Settings applied at start as `CONFIG SET` applies them: name, value, and where
    /// they come from (`file:line`, named in the error if one is refused).
    pub settings: Vec<(String, String, String)>,
    /// The embedding program's log subscriber, which `loglevel` and `logfile` change
    /// ([`crate::logs`]); `None`: both are refused.
    pub log: Option<crate::logs::LogHandle>,
}

/// Redis's protected settings' values: a command allowed to no one, everyone, or
/// clients on a loopback address or the Unix socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    No,
    Yes,
    Local,
}

impl Protection {
    pub fn name(self) -> &'static str {
        match self {
            Protection::No => "no",
            Protection::Yes => "yes",
            Protection::Local => "local",
        }
    }
}

impl FromStr for Protection {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "no" => Ok(Protection::No),
            "yes" => Ok(Protection::Yes),
            "local" => Ok(Protection::Local),
            _ => Err("argument must be one of: no, yes, local".into()),
        }
    }
}

/// Whether a client's `CLIENT LIST` address is local: a loopback address or the Unix
/// socket.
pub fn is_local_addr(addr: &str) -> bool {
    if addr == "unix" {
        return true;
    }
    addr.parse::<SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback())
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tcp: Some(SocketAddr::from(([127, 0, 0, 1], 6379))),
            unix_socket: None,
            appendfsync: AppendFsync::EverySec,
            requirepass: None,
            maxclients: 10_000,
            max_request_bytes: 512 << 20,
            active_expire_keys_per_sec: 1000,
            replicaof: None,
            masterauth: None,
            repl_backlog_bytes: crate::repl_log::DEFAULT_BACKLOG,
            cluster_enabled: false,
            enable_debug_command: Protection::No,
            mem_allocator: "libc",
            backup_dir: None,
            config_file: None,
            settings: Vec::new(),
            log: None,
        }
    }
}

/// Redis parameters that `CONFIG SET` accepts and `CONFIG GET` reports but that change
/// nothing here, with Redis 7.0's defaults: encoding thresholds (the layout has no
/// encodings), latency tracking and the like. The stream node sizes are the exception: they bound the nodes
/// that approximate trimming removes whole (`cmd::stream::layout`). Test suites and client setups set them; refusing would stop
/// them before they test anything.
pub const COMPAT_PARAMS: &[(&str, &str)] = &[
    ("active-expire-effort", "1"),
    ("hash-max-listpack-entries", "128"),
    ("hash-max-listpack-value", "64"),
    ("hash-max-ziplist-entries", "128"),
    ("hash-max-ziplist-value", "64"),
    ("hll-sparse-max-bytes", "3000"),
    ("hz", "10"),
    ("lazyfree-lazy-user-del", "no"),
    ("lazyfree-lazy-user-flush", "no"),
    ("list-compress-depth", "0"),
    ("list-max-listpack-size", "-2"),
    ("list-max-ziplist-size", "-2"),
    ("set-max-intset-entries", "512"),
    ("set-max-listpack-entries", "128"),
    ("stream-node-max-bytes", "4096"),
    ("stream-node-max-entries", "100"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("zset-max-ziplist-entries", "128"),
    ("zset-max-ziplist-value", "64"),
];

/// Whether `value` fits the [`COMPAT_PARAMS`] parameter `name`: a number (memory units
/// allowed) where Redis's default is one, anything otherwise.
pub fn compat_value_ok(name: &str, value: &str) -> bool {
    let numeric = COMPAT_PARAMS
        .iter()
        .find(|(k, _)| *k == name)
        .is_some_and(|(_, d)| d.parse::<i64>().is_ok());
    if !numeric {
        return true;
    }
    let v = value.to_ascii_lowercase();
    let digits = ["kb", "mb", "gb", "k", "m", "g", "b"]
        .iter()
        .find_map(|u| v.strip_suffix(u))
        .unwrap_or(&v);
    digits.parse::<i64>().is_ok()
}

/// A memory amount as Redis reads one (`memtoull`): bytes, or with `k`/`m`/`g` (powers of
/// 1000) or `kb`/`mb`/`gb` (powers of 1024), any case.
pub fn memory(s: &str) -> Option<u64> {
    let v = s.to_ascii_lowercase();
    for (unit, mul) in [
        ("kb", 1u64 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1_000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
        ("b", 1),
    ] {
        if let Some(d) = v.strip_suffix(unit) {
            return d.parse::<u64>().ok()?.checked_mul(mul);
        }
    }
    v.parse().ok()
}

/// `client-output-buffer-limit`'s value: `<class> <hard> <soft> <seconds>` groups, for
/// the classes `normal`, `replica` (`slave`) and `pubsub`; each group found, by class.
pub fn output_limits(s: &str) -> Result<Vec<(&'static str, u64, u64, u64)>, String> {
    let words: Vec<&str> = s.split_ascii_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut out = Vec::new();
    for g in words.chunks(4) {
        let class = match g[0].to_ascii_lowercase().as_str() {
            "normal" => "normal",
            "replica" | "slave" => "replica",
            "pubsub" => "pubsub",
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let (Some(hard), Some(soft), Ok(secs)) = (memory(g[1]), memory(g[2]), g[3].parse::<u64>())
        else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.".into(),
            );
        };
        out.push((class, hard, soft, secs));
    }
    Ok(out)
}

/// The settings `CONFIG SET` can change at run time.
pub struct Settings {
    /// Values of [`COMPAT_PARAMS`].
    compat: RwLock<BTreeMap<&'static str, String>>,
    appendfsync: AtomicU8,
    requirepass: RwLock<Option<String>>,
    maxclients: AtomicUsize,
    max_request_bytes: AtomicUsize,
    /// `client-query-buffer-limit`: the largest request, all its bulks and headers.
    max_query_bytes: AtomicUsize,
    max_output_bytes: AtomicUsize,
    masterauth: RwLock<Option<String>>,
    replica_read_only: AtomicBool,
    repl_backlog_bytes: AtomicUsize,
    /// `client-output-buffer-limit replica`: kept and shown only (see
    /// [`crate::cmd::config`]).
    replica_output_limit: RwLock<(u64, u64, u64)>,
    enable_debug_command: Protection,
    mem_allocator: &'static str,
    /// `timeout`: seconds after which an idle client is closed (0: never).
    timeout_secs: AtomicU64,
    /// `tcp-keepalive`: seconds of silence before the kernel probes an accepted TCP
    /// connection (0: no keepalive); applied to connections accepted after it is set.
    tcp_keepalive_secs: AtomicU64,
    /// `busy-reply-threshold` (alias `lua-time-limit`): milliseconds a script runs before
    /// other clients are answered `-BUSY` (0: at once).
    busy_reply_ms: AtomicU64,
    /// `loglevel` and `logfile`.
    pub logs: crate::logs::Logs,
}

/// Default of `halflife-client-output-limit`: replies a connection may leave unread before
/// it is closed. Above the largest value the engine stores (256 MiB), so that one `GET`
/// never trips it; a client that reads its replies never comes near it.
pub const DEFAULT_MAX_OUTPUT: usize = 512 << 20;

/// Redis's default `client-query-buffer-limit` (1 GiB), and its least (1 MiB).
pub const DEFAULT_QUERY_BUFFER: usize = 1 << 30;
pub const MIN_QUERY_BUFFER: usize = 1 << 20;

/// Redis's default `busy-reply-threshold`, in milliseconds.
pub const DEFAULT_BUSY_REPLY_MS: u64 = 5000;

impl Settings {
    pub fn new(c: &Config) -> Settings {
        Settings {
            compat: RwLock::new(
                COMPAT_PARAMS
                    .iter()
                    .map(|(k, v)| (*k, v.to_string()))
                    .collect(),
            ),
            appendfsync: AtomicU8::new(c.appendfsync.to_u8()),
            requirepass: RwLock::new(c.requirepass.clone().filter(|p| !p.is_empty())),
            maxclients: AtomicUsize::new(c.maxclients),
            max_request_bytes: AtomicUsize::new(c.max_request_bytes),
            max_query_bytes: AtomicUsize::new(DEFAULT_QUERY_BUFFER),
            max_output_bytes: AtomicUsize::new(DEFAULT_MAX_OUTPUT),
            masterauth: RwLock::new(c.masterauth.clone().filter(|p| !p.is_empty())),
            replica_read_only: AtomicBool::new(true),
            repl_backlog_bytes: AtomicUsize::new(c.repl_backlog_bytes),
            replica_output_limit: RwLock::new((256 << 20, 64 << 20, 60)),
            enable_debug_command: c.enable_debug_command,
            mem_allocator: c.mem_allocator,
            timeout_secs: AtomicU64::new(0),
            tcp_keepalive_secs: AtomicU64::new(300),
            busy_reply_ms: AtomicU64::new(DEFAULT_BUSY_REPLY_MS),
            logs: crate::logs::Logs::new(c.log.clone()),
        }
    }

    /// The [`COMPAT_PARAMS`] and their values.
    pub fn compat(&self) -> Vec<(&'static str, String)> {
        self.compat
            .read()
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    /// Sets a [`COMPAT_PARAMS`] parameter (others are ignored), and its alias: Redis 7.0
    /// reads `*-ziplist-*` as the `*-listpack-*` parameter of the same name.
    pub fn set_compat(&self, name: &str, value: String) {
        let alias = match name {
            n if n.contains("ziplist") => n.replace("ziplist", "listpack"),
            n => n.replace("listpack", "ziplist"),
        };
        let mut c = self.compat.write();
        for n in [name, alias.as_str()] {
            if let Some((k, _)) = COMPAT_PARAMS.iter().find(|(k, _)| *k == n) {
                c.insert(k, value.clone());
            }
        }
    }

    /// A numeric [`COMPAT_PARAMS`] value (0 if unset or not a number).
    pub fn compat_num(&self, name: &str) -> i64 {
        self.compat
            .read()
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    pub fn appendfsync(&self) -> AppendFsync {
        AppendFsync::from_u8(self.appendfsync.load(Ordering::Relaxed))
    }

    pub fn set_appendfsync(&self, v: AppendFsync) {
        self.appendfsync.store(v.to_u8(), Ordering::Relaxed)
    }

    pub fn requirepass(&self) -> Option<String> {
        self.requirepass.read().clone()
    }

    pub fn set_requirepass(&self, p: Option<String>) {
        *self.requirepass.write() = p.filter(|p| !p.is_empty());
    }

    pub fn maxclients(&self) -> usize {
        self.maxclients.load(Ordering::Relaxed)
    }

    pub fn set_maxclients(&self, n: usize) {
        self.maxclients.store(n, Ordering::Relaxed)
    }

    pub fn max_request_bytes(&self) -> usize {
        self.max_request_bytes.load(Ordering::Relaxed)
    }

    pub fn set_max_request_bytes(&self, n: usize) {
        self.max_request_bytes.store(n, Ordering::Relaxed)
    }

    pub fn max_query_bytes(&self) -> usize {
        self.max_query_bytes.load(Ordering::Relaxed)
    }

    pub fn set_max_query_bytes(&self, n: usize) {
        self.max_query_bytes.store(n, Ordering::Relaxed)
    }

    pub fn max_output_bytes(&self) -> usize {
        self.max_output_bytes.load(Ordering::Relaxed)
    }

    pub fn replica_output_limit(&self) -> (u64, u64, u64) {
        *self.replica_output_limit.read()
    }

    pub fn set_replica_output_limit(&self, l: (u64, u64, u64)) {
        *self.replica_output_limit.write() = l;
    }

    pub fn set_max_output_bytes(&self, n: usize) {
        self.max_output_bytes.store(n, Ordering::Relaxed)
    }

    pub fn masterauth(&self) -> Option<String> {
        self.masterauth.read().clone()
    }

    pub fn set_masterauth(&self, p: Option<String>) {
        *self.masterauth.write() = p.filter(|p| !p.is_empty());
    }

    /// `replica-read-only`: a replica refuses writes from clients (the default).
    pub fn replica_read_only(&self) -> bool {
        self.replica_read_only.load(Ordering::Relaxed)
    }

    pub fn set_replica_read_only(&self, on: bool) {
        self.replica_read_only.store(on, Ordering::Relaxed)
    }

    pub fn mem_allocator(&self) -> &'static str {
        self.mem_allocator
    }

    pub fn enable_debug_command(&self) -> Protection {
        self.enable_debug_command
    }

    pub fn timeout_secs(&self) -> u64 {
        self.timeout_secs.load(Ordering::Relaxed)
    }

    pub fn set_timeout_secs(&self, n: u64) {
        self.timeout_secs.store(n, Ordering::Relaxed)
    }

    pub fn tcp_keepalive_secs(&self) -> u64 {
        self.tcp_keepalive_secs.load(Ordering::Relaxed)
    }

    pub fn set_tcp_keepalive_secs(&self, n: u64) {
        self.tcp_keepalive_secs.store(n, Ordering::Relaxed)
    }

    pub fn busy_reply_ms(&self) -> u64 {
        self.busy_reply_ms.load(Ordering::Relaxed)
    }

    pub fn set_busy_reply_ms(&self, n: u64) {
        self.busy_reply_ms.store(n, Ordering::Relaxed)
    }

    pub fn repl_backlog_bytes(&self) -> usize {
        self.repl_backlog_bytes.load(Ordering::Relaxed)
    }

    pub fn set_repl_backlog_bytes(&self, n: usize) {
        self.repl_backlog_bytes.store(n, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appendfsync_names_round_trip() {
        for n in AppendFsync::NAMES {
            let v: AppendFsync = n.parse().unwrap();
            assert_eq!(v.name(), n);
            assert_eq!(AppendFsync::from_u8(v.to_u8()), v);
        }
        assert!("sometimes"
            .parse::<AppendFsync>()
            .unwrap_err()
            .contains("everysec"));
    }

    #[test]
    fn empty_password_means_none() {
        let s = Settings::new(&Config {
            requirepass: Some(String::new()),
            ..Config::default()
        });
        assert_eq!(s.requirepass(), None);
        s.set_requirepass(Some("pw".into()));
        assert_eq!(s.requirepass().as_deref(), Some("pw"));
    }
}
