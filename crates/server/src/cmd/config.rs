//! `CONFIG GET|SET|RESETSTAT`: the settings `CONFIG SET` may change ([`crate::config`]),
//! the engine's options (fixed while the database is open), and the settings Redis has
//! that mean nothing here, accepted for clients that set them.

use super::table::c;
use super::{eq, text, wrong_args, CmdResult, Ctx};
use crate::pattern;
use crate::protocol::Reply;
use crate::record;
use crate::shared::Shared;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("config", -2, [ADMIN NOSCRIPT LOADING STALE SUBCOMMANDS], 0, 0, 0, Server, config),
];

fn yes_no(on: bool) -> &'static str {
    if on {
        "yes"
    } else {
        "no"
    }
}

/// `client-output-buffer-limit` as Redis shows it: `normal` is the bound on a
/// connection's unread replies (`halflife-client-output-limit`), `pubsub` is enforced by
/// [`crate::pubsub`], `replica` is kept and shown (a replica's stream is bounded by the
/// replication backlog instead).
fn output_limits(sh: &Shared) -> String {
    let p = sh.pubsub.limits();
    let (rh, rs, rt) = sh.settings.replica_output_limit();
    format!(
        "normal {} 0 0 replica {rh} {rs} {rt} pubsub {} {} {}",
        sh.settings.max_output_bytes(),
        p.hard,
        p.soft,
        p.soft_seconds
    )
}

/// The parameters CONFIG GET shows: name, current value, and whether CONFIG SET may
/// change it.
fn config_params(sh: &Shared) -> Vec<(&'static str, String, bool)> {
    let engine = sh.store.db();
    let o = engine.options();
    let st = &sh.settings;
    let compat = st.compat().into_iter().map(|(k, v)| (k, v, true));
    let mut params = vec![
        ("appendfsync", st.appendfsync().name().to_string(), true),
        ("appendonly", "yes".into(), false),
        ("databases", record::DATABASES.to_string(), false),
        ("requirepass", st.requirepass().unwrap_or_default(), true),
        ("maxclients", st.maxclients().to_string(), true),
        (
            "proto-max-bulk-len",
            st.max_request_bytes().to_string(),
            true,
        ),
        (
            "client-query-buffer-limit",
            st.max_query_bytes().to_string(),
            true,
        ),
        (
            "halflife-client-output-limit",
            st.max_output_bytes().to_string(),
            true,
        ),
        (
            "halflife-lua-memory-limit",
            sh.scripting.memory_limit().to_string(),
            true,
        ),
        ("masterauth", st.masterauth().unwrap_or_default(), true),
        (
            "replica-read-only",
            yes_no(st.replica_read_only()).into(),
            true,
        ),
        (
            "slave-read-only",
            yes_no(st.replica_read_only()).into(),
            true,
        ),
        (
            "repl-backlog-size",
            st.repl_backlog_bytes().to_string(),
            true,
        ),
        (
            "latency-tracking",
            yes_no(sh.cmdstats.tracking()).into(),
            true,
        ),
        (
            "latency-tracking-info-percentiles",
            sh.cmdstats.percentiles_text(),
            true,
        ),
        (
            "notify-keyspace-events",
            crate::notify::render(sh.notify.classes()),
            true,
        ),
        ("client-output-buffer-limit", output_limits(sh), true),
        (
            "slowlog-log-slower-than",
            sh.slowlog.slower_than().to_string(),
            true,
        ),
        ("slowlog-max-len", sh.slowlog.max_len().to_string(), true),
        ("timeout", st.timeout_secs().to_string(), true),
        ("loglevel", st.logs.level().into(), true),
        ("save", sh.backups.points_text(), true),
        ("logfile", st.logs.file(), true),
        ("maxmemory", sh.maxmemory.bytes().to_string(), true),
        (
            "maxmemory-policy",
            sh.maxmemory.policy().name().into(),
            true,
        ),
        (
            "maxmemory-samples",
            sh.maxmemory.samples().to_string(),
            true,
        ),
        (
            "lfu-log-factor",
            sh.store.access.log_factor().to_string(),
            true,
        ),
        (
            "lfu-decay-time",
            sh.store.access.decay_minutes().to_string(),
            true,
        ),
        ("tcp-keepalive", st.tcp_keepalive_secs().to_string(), true),
        ("busy-reply-threshold", st.busy_reply_ms().to_string(), true),
        ("lua-time-limit", st.busy_reply_ms().to_string(), true),
        (
            "latency-monitor-threshold",
            sh.latency.threshold().to_string(),
            true,
        ),
        (
            "enable-debug-command",
            st.enable_debug_command().name().into(),
            false,
        ),
        ("halflife-gc-policy", o.vlog.gc.to_string(), false),
        (
            "halflife-space-amp-target",
            match o.vlog.lifetime.trigger {
                engine::GcTrigger::Ttl => "0".to_string(),
                engine::GcTrigger::SpaceAmp { target } => target.to_string(),
            },
            false,
        ),
        ("backup-dir", sh.backups.dir().display().to_string(), false),
        (
            "halflife-memtable-size",
            o.tree.memtable_size.to_string(),
            false,
        ),
        (
            "halflife-block-cache-size",
            o.cache.block_cache_capacity.to_string(),
            false,
        ),
        (
            "halflife-min-blob-size",
            o.vlog.min_blob_size.to_string(),
            false,
        ),
        (
            "halflife-blob-file-size",
            o.vlog.blob_file_size.to_string(),
            false,
        ),
        (
            "halflife-growth-factor",
            o.tree.growth_factor.to_string(),
            false,
        ),
        (
            "halflife-cache-warming",
            o.cache.cache_warming.to_string(),
            false,
        ),
    ];
    params.extend(compat);
    params
}

fn config(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sh = cx.sh;
    let Some(sub) = a.first() else {
        return Err(wrong_args("config"));
    };
    let args = &a[1..];
    if eq(sub, "get") {
        if args.is_empty() {
            return Err(wrong_args("config|get"));
        }
        let params = config_params(sh);
        let pairs = params
            .into_iter()
            .filter(|(n, _, _)| {
                args.iter()
                    .any(|p| pattern::matches(&p.to_ascii_lowercase(), n.as_bytes()))
            })
            .map(|(n, v, _)| (Reply::bulk(n), Reply::bulk(v)))
            .collect();
        Ok(Reply::Map(pairs))
    } else if eq(sub, "set") {
        if args.is_empty() || !args.len().is_multiple_of(2) {
            return Err(wrong_args("config|set"));
        }
        let pairs: Vec<(String, String)> = args
            .chunks(2)
            .map(|kv| (text(&kv[0]).to_ascii_lowercase(), text(&kv[1])))
            .collect();
        set(sh, pairs)?;
        Ok(Reply::ok())
    } else if eq(sub, "rewrite") {
        rewrite(sh).map_err(Reply::err)?;
        Ok(Reply::ok())
    } else if eq(sub, "resetstat") {
        sh.stats.reset();
        sh.cmdstats.reset();
        Ok(Reply::ok())
    } else {
        Err(Reply::err(format!(
            "unknown subcommand '{}'. Try CONFIG HELP.",
            text(sub)
        )))
    }
}

/// `CONFIG SET`'s pairs (names lower-cased), also the settings of a config file at start:
/// every pair is checked before any is applied, as Redis does.
pub(crate) fn set(sh: &Shared, pairs: Vec<(String, String)>) -> Result<(), Reply> {
    let params = config_params(sh);
    let mut apply: Vec<Box<dyn Fn() + '_>> = Vec::new();
    for (name, value) in pairs {
        let bad = |why: String| {
            Reply::err(format!(
                "CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ))
        };
        match params.iter().find(|(n, _, _)| *n == name) {
            None => {
                return Err(Reply::err(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{name}'"
                )))
            }
            Some((_, _, false)) => {
                // The engine takes its options at open and has no way to change
                // these while it runs (the GC policy and its target included).
                let flag = match name.as_str() {
                    "halflife-gc-policy" => " (--policy)",
                    "halflife-space-amp-target" => " (--space-amp-target)",
                    "backup-dir" => " (--backup-dir)",
                    _ => "",
                };
                return Err(bad(format!(
                        "fixed while the database is open; restart halflife serve with the matching option{flag}"
                    )));
            }
            Some(_) => {}
        }
        let settings = sh.settings.clone();
        match name.as_str() {
            "appendfsync" => {
                let v: crate::AppendFsync = value.parse().map_err(bad)?;
                apply.push(Box::new(move || settings.set_appendfsync(v)));
            }
            "masterauth" => {
                apply.push(Box::new(move || {
                    settings.set_masterauth(Some(value.clone()))
                }));
            }
            "replica-read-only" | "slave-read-only" | "latency-tracking" => {
                let on = match value.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(bad("argument must be 'yes' or 'no'".into())),
                };
                if name == "latency-tracking" {
                    apply.push(Box::new(move || sh.cmdstats.set_tracking(on)));
                } else {
                    apply.push(Box::new(move || settings.set_replica_read_only(on)));
                }
            }
            "notify-keyspace-events" => {
                let c = crate::notify::parse(&value).ok_or_else(|| {
                    bad("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
                })?;
                apply.push(Box::new(move || sh.notify.set(c, &sh.store.expiries)));
            }
            "client-output-buffer-limit" => {
                for (class, hard, soft, secs) in
                    crate::config::output_limits(&value).map_err(bad)?
                {
                    let settings = settings.clone();
                    match class {
                        "pubsub" => apply.push(Box::new(move || {
                            sh.pubsub.set_limits(crate::pubsub::Limits {
                                hard: hard as usize,
                                soft: soft as usize,
                                soft_seconds: secs,
                            })
                        })),
                        // A connection's unread replies are always bounded here: 0
                        // (Redis's "no limit") is the default bound.
                        "normal" => apply.push(Box::new(move || {
                            settings.set_max_output_bytes(match hard {
                                0 => crate::config::DEFAULT_MAX_OUTPUT,
                                n => n as usize,
                            })
                        })),
                        _ => apply.push(Box::new(move || {
                            settings.set_replica_output_limit((hard, soft, secs))
                        })),
                    }
                }
            }
            "latency-tracking-info-percentiles" => {
                let p = crate::cmdstats::CommandStats::parse_percentiles(&value).map_err(bad)?;
                apply.push(Box::new(move || sh.cmdstats.set_percentiles(p.clone())));
            }
            "repl-backlog-size" => {
                let n: usize = value
                    .parse()
                    .ok()
                    .filter(|&n| n >= 16 << 10)
                    .ok_or_else(|| {
                        bad("argument must be a number of bytes, at least 16384".into())
                    })?;
                apply.push(Box::new(move || settings.set_repl_backlog_bytes(n)));
            }
            "requirepass" => {
                apply.push(Box::new(move || {
                    settings.set_requirepass(Some(value.clone()))
                }));
            }
            "halflife-lua-memory-limit" => {
                let n: usize = value
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1 << 20)
                    .ok_or_else(|| {
                        bad("argument must be a number of bytes, at least 1048576".into())
                    })?;
                apply.push(Box::new(move || sh.scripting.set_memory_limit(n)));
            }
            "slowlog-log-slower-than" => {
                let us: i64 = value.parse().ok().filter(|&n| n >= -1).ok_or_else(|| {
                    bad("argument must be a number of microseconds, -1 (off) or more".into())
                })?;
                apply.push(Box::new(move || sh.slowlog.set_slower_than(us)));
            }
            "slowlog-max-len" | "latency-monitor-threshold" => {
                let n: u64 = value
                    .parse()
                    .ok()
                    .filter(|&n| {
                        name != "slowlog-max-len" || n <= crate::slowlog::MAX_LEN_LIMIT as u64
                    })
                    .ok_or_else(|| {
                        bad(match name.as_str() {
                            "slowlog-max-len" => format!(
                                "argument must be a number of entries up to {}",
                                crate::slowlog::MAX_LEN_LIMIT
                            ),
                            _ => "argument must be a number of milliseconds (0: off)".into(),
                        })
                    })?;
                if name == "slowlog-max-len" {
                    apply.push(Box::new(move || sh.slowlog.set_max_len(n as usize)));
                } else {
                    apply.push(Box::new(move || sh.latency.set_threshold(n)));
                }
            }
            "save" => {
                let points = crate::backup::Backups::parse_points(&value).map_err(bad)?;
                apply.push(Box::new(move || sh.backups.set_points(points.clone())));
            }
            "loglevel" => {
                crate::logs::Logs::parse_level(&value).map_err(bad)?;
                settings.logs.can_set().map_err(bad)?;
                apply.push(Box::new(move || {
                    if let Err(e) = settings.logs.set_level(&value) {
                        tracing::warn!("loglevel {value}: {e}");
                    }
                }));
            }
            "logfile" => {
                settings.logs.can_set().map_err(bad)?;
                if !value.is_empty() {
                    std::fs::OpenOptions::new()
                        .append(true)
                        .create(true)
                        .open(&value)
                        .map_err(|e| bad(format!("Can't open the log file {value}: {e}")))?;
                }
                apply.push(Box::new(move || {
                    if let Err(e) = settings.logs.set_file(&value) {
                        tracing::warn!("logfile {value}: {e}");
                    }
                }));
            }
            "maxmemory" => {
                let n = crate::config::memory(&value)
                    .ok_or_else(|| bad("argument must be a memory value".into()))?;
                apply.push(Box::new(move || {
                    if let Err(e) = super::evict::set_maxmemory(sh, n) {
                        tracing::error!("measuring the data set for maxmemory: {e}");
                    }
                }));
            }
            "maxmemory-policy" => {
                let p: crate::maxmemory::Policy = value.parse().map_err(bad)?;
                apply.push(Box::new(move || sh.maxmemory.set_policy(p)));
            }
            "maxmemory-samples" | "lfu-log-factor" | "lfu-decay-time" => {
                let n: u32 = value
                    .parse()
                    .ok()
                    .filter(|&n| {
                        name != "maxmemory-samples"
                            || (1..=crate::maxmemory::MAX_SAMPLES).contains(&n)
                    })
                    .ok_or_else(|| {
                        bad(match name.as_str() {
                            "maxmemory-samples" => format!(
                                "argument must be between 1 and {}",
                                crate::maxmemory::MAX_SAMPLES
                            ),
                            _ => "argument must be a number, 0 or more".into(),
                        })
                    })?;
                match name.as_str() {
                    "maxmemory-samples" => {
                        apply.push(Box::new(move || sh.maxmemory.set_samples(n)))
                    }
                    "lfu-log-factor" => {
                        apply.push(Box::new(move || sh.store.access.set_log_factor(n)))
                    }
                    _ => apply.push(Box::new(move || sh.store.access.set_decay_minutes(n))),
                }
            }
            "timeout" | "tcp-keepalive" => {
                let n: u64 = value
                    .parse()
                    .map_err(|_| bad("argument must be a number of seconds, 0 or more".into()))?;
                if name == "timeout" {
                    apply.push(Box::new(move || settings.set_timeout_secs(n)));
                } else {
                    apply.push(Box::new(move || settings.set_tcp_keepalive_secs(n)));
                }
            }
            "client-query-buffer-limit" => {
                let n = crate::config::memory(&value)
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|&n| n >= crate::config::MIN_QUERY_BUFFER)
                    .ok_or_else(|| {
                        bad(format!(
                            "argument must be a memory value of at least {}",
                            crate::config::MIN_QUERY_BUFFER
                        ))
                    })?;
                apply.push(Box::new(move || settings.set_max_query_bytes(n)));
            }
            "busy-reply-threshold" | "lua-time-limit" => {
                let n: u64 = value.parse().map_err(|_| {
                    bad("argument must be a number of milliseconds, 0 or more".into())
                })?;
                apply.push(Box::new(move || settings.set_busy_reply_ms(n)));
            }
            "maxclients" | "proto-max-bulk-len" | "halflife-client-output-limit" => {
                let n: usize = value
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| bad("argument must be a positive integer".into()))?;
                match name.as_str() {
                    "maxclients" => apply.push(Box::new(move || settings.set_maxclients(n))),
                    "proto-max-bulk-len" => {
                        apply.push(Box::new(move || settings.set_max_request_bytes(n)))
                    }
                    _ => apply.push(Box::new(move || settings.set_max_output_bytes(n))),
                }
            }
            _ => {
                if !crate::config::compat_value_ok(&name, &value) {
                    return Err(bad("argument couldn't be parsed into an integer".into()));
                }
                let settings = settings.clone();
                apply.push(Box::new(move || settings.set_compat(&name, value.clone())));
            }
        }
    }
    apply.iter().for_each(|f| f());
    sh.store
        .log_mut()
        .set_capacity(sh.settings.repl_backlog_bytes());
    Ok(())
}

/// Names `CONFIG REWRITE` leaves out: the other name of a setting it writes.
fn alias(name: &str) -> bool {
    name == "slave-read-only" || name == "lua-time-limit" || name.contains("ziplist")
}

/// The settings `CONFIG SET` may change, with their values now, one name each.
pub(crate) fn settable(sh: &Shared) -> Vec<(&'static str, String)> {
    config_params(sh)
        .into_iter()
        .filter(|(n, _, set)| *set && !alias(n))
        .map(|(n, v, _)| (n, v))
        .collect()
}

/// `CONFIG REWRITE` ([`crate::conffile`]): every settable setting the file names is
/// written in place with its value now, those changed since the start are appended, and
/// `replicaof` says the primary this server follows now (removed on a primary).
fn rewrite(sh: &Shared) -> Result<(), String> {
    let Some(path) = &sh.conf.path else {
        return Err("The server is running without a config file".into());
    };
    let present: std::collections::HashSet<String> = crate::conffile::parse(path)?
        .into_iter()
        .map(|d| d.name)
        .collect();
    let base = sh.conf.baseline.get();
    let mut out: Vec<(String, Option<String>)> = settable(sh)
        .into_iter()
        .filter(|(n, v)| {
            let changed = base
                .and_then(|b| b.iter().find(|(bn, _)| bn == n))
                .is_none_or(|(_, bv)| bv != v);
            changed || present.contains(*n)
        })
        .map(|(n, v)| (n.to_string(), Some(crate::conffile::quote(&v))))
        .collect();
    let primary = sh.repl.primary();
    out.push((
        "replicaof".into(),
        primary.map(|(h, p)| format!("{} {p}", crate::conffile::quote(&h))),
    ));
    out.push(("slaveof".into(), None));
    crate::conffile::rewrite(path, &out).map_err(|e| format!("Rewriting config file: {e}"))?;
    tracing::info!("CONFIG REWRITE executed with success ({})", path.display());
    Ok(())
}

/// A config file's setting at start: as `CONFIG SET`, except that a fixed setting the
/// file gives its current value (`appendonly yes`, the policy the server runs) is accepted.
pub(crate) fn set_at_start(sh: &Shared, name: &str, value: &str) -> Result<(), Reply> {
    let name = name.to_ascii_lowercase();
    let same = config_params(sh)
        .iter()
        .any(|(n, v, set)| !*set && *n == name && v.eq_ignore_ascii_case(value));
    if same {
        return Ok(());
    }
    set(sh, vec![(name, value.to_string())])
}
