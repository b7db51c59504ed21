//! `INFO`: Redis's sections with the fields clients and test suites read (server,
//! clients, memory, persistence, stats, replication, cpu, modules, errorstats, cluster,
//! keyspace) and a `halflife` section with what only this engine knows: write
//! amplification by cause, space amplification, GC work and the lifetime model's state.
//!
//! `# Keyspace` counts keys and keys with an expiry per database by scanning the
//! metadata records (Redis keeps counters), so it costs a pass over the key space;
//! `INFO` without arguments includes it, as Redis's default does.

use crate::shared::Shared;
use bytes::Bytes;
use engine::io::IoCause;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

const SECTIONS: [&str; 14] = [
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "halflife",
];

/// Sections `INFO` leaves out unless asked by name or by `all`/`everything`, as Redis
/// does: a line per command ever called.
const NOT_DEFAULT: [&str; 2] = ["commandstats", "latencystats"];

/// Keys and keys with an expiry of every non-empty database, by a walk of the metadata
/// records that holds one at a time ([`crate::store::Store::live_keys`]). A database whose
/// walk fails is left out.
fn keyspace(sh: &Shared) -> Vec<(u8, u64, u64)> {
    let mut out = Vec::new();
    for db in 0..crate::record::DATABASES {
        let Ok(walk) = sh.store.live_keys(db) else {
            continue;
        };
        let (mut keys, mut expires) = (0u64, 0u64);
        let mut failed = false;
        for kv in walk {
            match kv {
                Ok((_, h)) => {
                    keys += 1;
                    expires += h.expire_at_ms.is_some() as u64;
                }
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if keys > 0 && !failed {
            out.push((db, keys, expires));
        }
    }
    out
}

fn human(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.2}G", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.2}M", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.2}K", b as f64 / 1024.0),
        b => format!("{b}B"),
    }
}

/// The process's resident set size, from /proc (Linux).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// User and system CPU seconds of the process, from /proc (Linux; zeros elsewhere).
fn cpu_seconds() -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // Fields after the command name (which may contain spaces) in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (ticks(11), ticks(12))
}

/// The INFO text for the requested sections: by default all but [`NOT_DEFAULT`], as Redis.
pub fn render(sh: &Shared, args: &[Bytes]) -> String {
    let wanted: Vec<String> = args
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted
        .iter()
        .any(|w| matches!(w.as_str(), "all" | "everything"));
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");

    let stats = sh.store.db().stats();
    let mut out = String::new();
    for section in SECTIONS {
        let by_default = default && !NOT_DEFAULT.contains(&section);
        if !all && !by_default && !wanted.iter().any(|w| w == section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut title = section.to_string();
        title[..1].make_ascii_uppercase();
        let _ = write!(out, "# {title}\r\n");
        let mut kv = |k: &str, v: String| {
            let _ = write!(out, "{k}:{v}\r\n");
        };
        match section {
            "server" => {
                // Clients gate features on the Redis version; this is the command set's level.
                kv("redis_version", crate::protocol::REDIS_VERSION.into());
                kv("redis_git_sha1", "00000000".into());
                kv("redis_git_dirty", "0".into());
                kv("halflife_version", env!("CARGO_PKG_VERSION").into());
                kv("redis_mode", "standalone".into());
                kv("os", std::env::consts::OS.into());
                kv("arch_bits", (usize::BITS).to_string());
                kv("multiplexing_api", "tokio".into());
                kv("process_id", std::process::id().to_string());
                kv("run_id", format!("{:040x}", sh.run_id));
                kv("tcp_port", sh.tcp_port.to_string());
                let up = sh.started.elapsed().as_secs();
                kv("uptime_in_seconds", up.to_string());
                kv("uptime_in_days", (up / 86400).to_string());
                kv("hz", "10".into());
                kv("config_file", String::new());
                kv(
                    "executable",
                    std::env::current_exe()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                );
                kv("data_dir", sh.store.db().path().display().to_string());
            }
            "clients" => {
                kv("connected_clients", sh.clients.lock().len().to_string());
                kv("maxclients", sh.settings.maxclients().to_string());
                kv("blocked_clients", sh.blocked.blocked_clients().to_string());
                kv("tracking_clients", "0".into());
            }
            "stats" => {
                let s = &sh.stats;
                kv(
                    "total_connections_received",
                    s.connections.load(Relaxed).to_string(),
                );
                kv(
                    "total_commands_processed",
                    s.commands.load(Relaxed).to_string(),
                );
                kv("rejected_connections", s.rejected.load(Relaxed).to_string());
                kv("keyspace_hits", s.hits.load(Relaxed).to_string());
                kv("keyspace_misses", s.misses.load(Relaxed).to_string());
                kv("expired_keys", s.expired.load(Relaxed).to_string());
                kv(
                    "total_error_replies",
                    sh.cmdstats.total_errors().to_string(),
                );
                kv(
                    "evicted_keys",
                    sh.maxmemory.evicted.load(Relaxed).to_string(),
                );
                kv(
                    "expired_keys_untracked",
                    sh.store.expiries.untracked().to_string(),
                );
                kv(
                    "pubsub_channels",
                    sh.pubsub.channels(false, None).len().to_string(),
                );
                kv("pubsub_patterns", sh.pubsub.numpat().to_string());
                kv(
                    "pubsubshard_channels",
                    sh.pubsub.channels(true, None).len().to_string(),
                );
                if let Some(c) = &sh.cluster {
                    kv(
                        "cluster_publish_dropped",
                        c.publish.dropped.load(Relaxed).to_string(),
                    );
                }
                kv("engine_puts", stats.puts.to_string());
                kv("engine_deletes", stats.deletes.to_string());
                kv("engine_gets", stats.gets.to_string());
                sh.repl.info_stats(&mut out);
            }
            "memory" => {
                // The data set's live bytes, what `maxmemory` bounds ([`crate::maxmemory`]),
                // measured the first time it is asked for.
                if !sh.store.usage.measured() {
                    if let Err(e) = sh.store.usage.measure(&sh.store.db()) {
                        tracing::error!("measuring the data set: {e}");
                    }
                }
                let used = sh.store.usage.estimate();
                sh.maxmemory.seen(used);
                // What the engine holds in memory: memtables and the block cache's contents.
                let engine = stats.memtable_bytes + stats.cache.usage;
                let max = sh.maxmemory.bytes();
                kv("used_memory", used.to_string());
                kv("used_memory_human", human(used));
                kv("used_memory_rss", rss_bytes().unwrap_or(engine).to_string());
                let peak = sh.maxmemory.peak.load(Relaxed);
                kv("used_memory_peak", peak.to_string());
                kv("used_memory_peak_human", human(peak));
                kv("used_memory_dataset", used.to_string());
                kv("used_memory_engine", engine.to_string());
                kv("maxmemory", max.to_string());
                kv("maxmemory_human", human(max));
                kv("maxmemory_policy", sh.maxmemory.policy().name().into());
                kv("access_table_keys", sh.store.access.len().to_string());
                // Not jemalloc: Redis's tests then treat MEMORY USAGE as approximate.
                kv("mem_allocator", sh.settings.mem_allocator().into());
                kv("used_memory_memtables", stats.memtable_bytes.to_string());
                let mut lua = Vec::new();
                sh.scripting.info(&mut lua);
                for (k, v) in lua {
                    kv(k, v);
                }
                kv(
                    "block_cache_capacity",
                    sh.store
                        .db()
                        .options()
                        .cache
                        .block_cache_capacity
                        .to_string(),
                );
                kv("block_cache_usage", stats.cache.usage.to_string());
                kv("block_cache_hits", stats.cache.hits.to_string());
                kv("block_cache_misses", stats.cache.misses.to_string());
            }
            "persistence" => {
                kv("loading", "0".into());
                kv("async_loading", "0".into());
                for (k, v) in sh.backups.info(sh.store.db().latest_sequence_number()) {
                    kv(k, v);
                }
                kv("aof_enabled", "1".into());
                kv("aof_rewrite_in_progress", "0".into());
                kv("aof_rewrite_scheduled", "0".into());
                kv("appendfsync", sh.settings.appendfsync().name().into());
                kv("wal_bytes", stats.wal_bytes.to_string());
                kv("write_stall_micros", stats.stall_micros.to_string());
                kv("flushes", stats.flushes.to_string());
                kv("compactions", stats.compactions.to_string());
            }
            "replication" => sh
                .repl
                .info(&sh.store, sh.settings.replica_read_only(), &mut out),
            "cpu" => {
                let (user, sys) = cpu_seconds();
                kv("used_cpu_sys", format!("{sys:.6}"));
                kv("used_cpu_user", format!("{user:.6}"));
            }
            "modules" => {}
            "commandstats" => sh.cmdstats.render_commands(&mut out),
            "errorstats" => sh.cmdstats.render_errors(&mut out),
            "latencystats" => sh.cmdstats.render_latency(&mut out),
            "cluster" => kv("cluster_enabled", (sh.cluster.is_some() as u8).to_string()),
            "keyspace" => {
                for (db, keys, expires) in keyspace(sh) {
                    kv(
                        &format!("db{db}"),
                        format!("keys={keys},expires={expires},avg_ttl=0"),
                    );
                }
            }
            "halflife" => {
                kv("gc_policy", stats.policy.clone());
                kv("gc_placement", stats.placement.clone());
                kv("user_bytes_written", stats.user_bytes_written.to_string());
                kv(
                    "write_amplification",
                    format!("{:.3}", stats.write_amplification),
                );
                for cause in IoCause::ALL {
                    let b = stats.written(cause);
                    if b > 0 {
                        kv(&format!("bytes_written_{}", cause.name()), b.to_string());
                        if stats.user_bytes_written > 0 {
                            kv(
                                &format!("write_amplification_{}", cause.name()),
                                format!("{:.3}", b as f64 / stats.user_bytes_written as f64),
                            );
                        }
                    }
                }
                kv("disk_bytes", stats.disk_bytes.to_string());
                kv("tree_bytes", stats.tree_bytes.to_string());
                kv("value_file_bytes", stats.value_file_bytes.to_string());
                kv("index_map_bytes", stats.index_map_bytes.to_string());
                // Needs a measurement of live bytes (a tree scan), which INFO does not do.
                kv(
                    "space_amplification",
                    stats
                        .space_amplification
                        .map_or("unknown".into(), |s| format!("{s:.3}")),
                );
                kv("gc_jobs", stats.gc_jobs.to_string());
                kv("gc_relocated_bytes", stats.gc_relocated_bytes.to_string());
                kv(
                    "gc_writeback_entries",
                    stats.gc_writeback_entries.to_string(),
                );
                kv("value_files", stats.value_files.len().to_string());
                let garbage: u64 = stats.value_files.iter().map(|f| f.garbage_bytes).sum();
                kv("value_file_garbage_bytes", garbage.to_string());
                for l in &stats.levels {
                    kv(
                        &format!("level{}", l.level),
                        format!("files={},bytes={}", l.files, l.bytes),
                    );
                }
                if let Some(lt) = &stats.lifetime {
                    kv(
                        "lifetime_thresholds",
                        format!("l_s={},l_l={},l_d={}", lt.l_s, lt.l_l, lt.l_d),
                    );
                    kv("lifetime_model_trainings", lt.trainings.to_string());
                    kv(
                        "lifetime_model_training_failures",
                        lt.training_failures.to_string(),
                    );
                    kv("lifetime_model_calls", lt.model_calls.to_string());
                    kv("lifetime_model_bytes", lt.model_bytes.to_string());
                    kv(
                        "lifetime_samples",
                        format!(
                            "received={},dropped={},capacity={}",
                            lt.samples_received, lt.samples_dropped, lt.dataset_capacity
                        ),
                    );
                    kv(
                        "lifetime_placed",
                        format!("short={},long={}", lt.placed_short, lt.placed_long),
                    );
                    kv(
                        "lifetime_index_maps",
                        format!("maps={},entries={}", lt.index_maps, lt.index_map_entries),
                    );
                }
            }
            _ => unreachable!("SECTIONS lists every section"),
        }
    }
    out
}
