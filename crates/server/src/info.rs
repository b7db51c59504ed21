//! `INFO`: Redis's sections (server, clients, stats, memory, persistence, keyspace) and a
//! `halflife` section with what only this engine knows: write amplification by cause,
//! space amplification, GC work and the lifetime model's state.

use crate::server::Shared;
use bytes::Bytes;
use engine::io::IoCause;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

const SECTIONS: [&str; 6] = [
    "server",
    "clients",
    "stats",
    "memory",
    "persistence",
    "halflife",
];

/// The INFO text for the requested sections (all of them by default, as `INFO all`).
pub fn render(sh: &Shared, args: &[Bytes]) -> String {
    let wanted: Vec<String> = args
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| matches!(w.as_str(), "all" | "default" | "everything"));
    let stats = sh.store.db().stats();
    let mut out = String::new();
    for section in SECTIONS {
        if !all && !wanted.iter().any(|w| w == section) {
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
                kv("redis_version", "7.2.0".into());
                kv("halflife_version", env!("CARGO_PKG_VERSION").into());
                kv("redis_mode", "standalone".into());
                kv("os", std::env::consts::OS.into());
                kv("process_id", std::process::id().to_string());
                kv("tcp_port", sh.tcp_port.to_string());
                kv(
                    "uptime_in_seconds",
                    sh.started.elapsed().as_secs().to_string(),
                );
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
                kv("engine_puts", stats.puts.to_string());
                kv("engine_deletes", stats.deletes.to_string());
                kv("engine_gets", stats.gets.to_string());
            }
            "memory" => {
                kv("used_memory_memtables", stats.memtable_bytes.to_string());
                kv(
                    "block_cache_capacity",
                    sh.store.db().options().block_cache_capacity.to_string(),
                );
                kv("block_cache_usage", stats.cache.usage.to_string());
                kv("block_cache_hits", stats.cache.hits.to_string());
                kv("block_cache_misses", stats.cache.misses.to_string());
            }
            "persistence" => {
                kv("aof_enabled", "1".into());
                kv("appendfsync", sh.settings.appendfsync().name().into());
                kv("wal_bytes", stats.wal_bytes.to_string());
                kv("write_stall_micros", stats.stall_micros.to_string());
                kv("flushes", stats.flushes.to_string());
                kv("compactions", stats.compactions.to_string());
            }
            "halflife" => {
                kv("gc_policy", stats.policy.clone());
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
