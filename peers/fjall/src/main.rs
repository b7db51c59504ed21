//! Replays a halflife op file on fjall 3 with its key-value separation, one of the peer
//! drivers `halflife compare` runs (docs/bench.md, "The peer interface"):
//!
//! ```text
//! fjall-driver --ops FILE --dir DIR --report FILE [--memtable-mb N] [--cache-mb N]
//!              [--min-blob-size N] [--blob-file-mb N] [--age-cutoff F] [--garbage-ratio F]
//!              [--sync]
//! ```
//!
//! It loads key numbers `0..record_count`, replays the run phase, persists, and writes one
//! JSON report (schema halflife-run/1). fjall exposes no bytes-written counters, so the
//! engine figure is the process's write syscalls (`wchar` of /proc/self/io); blob-file GC
//! runs inside fjall's compactions (staleness threshold = `--garbage-ratio`, age cutoff =
//! `--age-cutoff`, the RocksDB-BlobDB knobs).

use anyhow::{bail, Context, Result};
use fjall::{Database, KeyspaceCreateOptions, KvSeparationOptions, PersistMode};
use hdrhistogram::Histogram;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use workload::opfile::OpFileReader;
use workload::{format_key, Op, ValueGen};

struct Args {
    ops: PathBuf,
    dir: PathBuf,
    report: PathBuf,
    memtable_mb: u64,
    cache_mb: u64,
    min_blob_size: u32,
    blob_file_mb: u64,
    age_cutoff: f32,
    garbage_ratio: f32,
    sync: bool,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        ops: PathBuf::new(),
        dir: PathBuf::new(),
        report: PathBuf::new(),
        memtable_mb: 64,
        cache_mb: 64,
        min_blob_size: 512,
        blob_file_mb: 64,
        age_cutoff: 0.8,
        garbage_ratio: 0.2,
        sync: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--sync" {
            a.sync = true;
            continue;
        }
        let v = it.next().with_context(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<f64>().with_context(|| format!("{flag} {v:?}"));
        match flag.as_str() {
            "--ops" => a.ops = v.into(),
            "--dir" => a.dir = v.into(),
            "--report" => a.report = v.into(),
            "--memtable-mb" => a.memtable_mb = num(&v)? as u64,
            "--cache-mb" => a.cache_mb = num(&v)? as u64,
            "--min-blob-size" => a.min_blob_size = num(&v)? as u32,
            "--blob-file-mb" => a.blob_file_mb = num(&v)? as u64,
            "--age-cutoff" => a.age_cutoff = num(&v)? as f32,
            "--garbage-ratio" => a.garbage_ratio = num(&v)? as f32,
            other => bail!("unknown flag {other}"),
        }
    }
    if a.ops.as_os_str().is_empty() || a.dir.as_os_str().is_empty() {
        bail!("--ops and --dir are required");
    }
    Ok(a)
}

/// /proc/self/io as name -> value.
fn proc_io() -> BTreeMap<String, u64> {
    std::fs::read_to_string("/proc/self/io")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn max_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = l.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn summary(h: &Histogram<u64>) -> serde_json::Value {
    json!({
        "count": h.len(), "mean": h.mean(),
        "p50": h.value_at_quantile(0.5) as f64, "p99": h.value_at_quantile(0.99) as f64,
        "p999": h.value_at_quantile(0.999) as f64,
        "p9999": h.value_at_quantile(0.9999) as f64, "max": h.max() as f64,
    })
}

fn main() -> Result<()> {
    let a = parse_args()?;
    let reader = OpFileReader::open(&a.ops).with_context(|| format!("{}", a.ops.display()))?;
    let h = *reader.header();
    let (ks, vs) = (h.key_size as usize, h.value_size as usize);
    // Memtables are bounded as for the other engines (one active plus one being flushed):
    // by default fjall lets sealed memtables pile up to 512 MiB of journal, which a
    // memory-limited run cannot hold.
    let memtable = a.memtable_mb << 20;
    #[allow(deprecated)]
    let db = Database::builder(&a.dir)
        .cache_size(a.cache_mb << 20)
        .max_write_buffer_size(Some((2 * memtable).max(1 << 20)))
        .max_journaling_size((4 * memtable).max(64 << 20))
        .open()
        .context("opening fjall")?;
    let sep = KvSeparationOptions::default()
        .separation_threshold(a.min_blob_size)
        .file_target_size(a.blob_file_mb << 20)
        .staleness_threshold(a.garbage_ratio)
        .age_cutoff(a.age_cutoff);
    let tree = db.keyspace("usertable", || {
        KeyspaceCreateOptions::default()
            .max_memtable_size(memtable)
            .with_kv_separation(Some(sep))
    })?;
    let io0 = proc_io();
    let values = ValueGen::new();
    let (mut key, mut value) = (Vec::with_capacity(ks), Vec::with_capacity(vs));
    let mut versions: Vec<u32> = vec![0; h.record_count as usize];
    let mut user_bytes = 0u64;
    let mut not_found = 0u64;
    let mut scanned = 0u64;
    let total = h.record_count + h.op_count;
    let mut done = 0u64;
    let progress = |done: u64| {
        if done.is_multiple_of(10_000) {
            eprintln!("progress {done} {total}");
        }
    };
    let persist = |db: &Database| -> Result<()> {
        if a.sync {
            db.persist(PersistMode::SyncData)?;
        }
        Ok(())
    };

    let mut load_lat = Histogram::<u64>::new(3)?;
    let t = Instant::now();
    for k in 0..h.record_count {
        format_key(k, ks, &mut key);
        values.fill(k, 0, vs, &mut value);
        let s = Instant::now();
        tree.insert(key.as_slice(), value.as_slice())?;
        persist(&db)?;
        load_lat.record(s.elapsed().as_micros() as u64)?;
        user_bytes += (ks + vs) as u64;
        done += 1;
        progress(done);
    }
    let load_secs = t.elapsed().as_secs_f64();

    let names = ["insert", "update", "read", "scan", "rmw", "delete"];
    let mut lat: Vec<Histogram<u64>> = (0..names.len())
        .map(|_| Histogram::new(3))
        .collect::<Result<_, _>>()?;
    let t = Instant::now();
    let mut run_ops = 0u64;
    for op in reader {
        let op = op?;
        let k = op.key();
        format_key(k, ks, &mut key);
        let s = Instant::now();
        let mut write = |tree: &fjall::Keyspace, value: &mut Vec<u8>| -> Result<()> {
            if k as usize >= versions.len() {
                versions.resize(k as usize + 1, 0);
            }
            versions[k as usize] += 1;
            values.fill(k, versions[k as usize] as u64, vs, value);
            tree.insert(key.as_slice(), value.as_slice())?;
            user_bytes += (ks + vs) as u64;
            Ok(())
        };
        match op {
            Op::Insert { .. } | Op::Update { .. } => {
                write(&tree, &mut value)?;
                persist(&db)?;
            }
            Op::Read { .. } => not_found += tree.get(&key)?.is_none() as u64,
            Op::Scan { len, .. } => {
                for kv in tree.range(key.clone()..).take(len as usize) {
                    kv.into_inner()?;
                    scanned += 1;
                }
            }
            Op::ReadModifyWrite { .. } => {
                not_found += tree.get(&key)?.is_none() as u64;
                write(&tree, &mut value)?;
                persist(&db)?;
            }
            Op::Delete { .. } => {
                // A tombstone; the key's version count stays, so the update that re-creates
                // it writes the next version.
                tree.remove(key.as_slice())?;
                user_bytes += ks as u64;
                persist(&db)?;
            }
            // fjall keeps no per-key expiry to give it; a driver that emulated one would
            // measure the emulation, not fjall.
            Op::ExpiringUpdate { .. } => {
                bail!("op {run_ops}: fjall has no per-key expiry (op code 6, the expiring workload)")
            }
        }
        lat[op.code() as usize].record(s.elapsed().as_micros() as u64)?;
        run_ops += 1;
        done += 1;
        progress(done);
    }
    let run_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    db.persist(PersistMode::SyncAll)?;
    let settle_secs = t.elapsed().as_secs_f64();
    let disk = dir_bytes(&a.dir);
    drop(tree);
    drop(db);
    let io1 = proc_io();
    let delta = |k: &str| {
        io1.get(k)
            .unwrap_or(&0)
            .saturating_sub(*io0.get(k).unwrap_or(&0))
    };
    let phase = |ops: u64, s: f64| json!({"ops": ops, "seconds": s, "ops_per_sec": if s > 0.0 { ops as f64 / s } else { 0.0 }});
    let latency: BTreeMap<&str, serde_json::Value> = names
        .iter()
        .zip(&lat)
        .filter(|(_, h)| !h.is_empty())
        .map(|(n, h)| (*n, summary(h)))
        .collect();
    let report = json!({
        "schema": "halflife-run/1",
        "engine": "fjall",
        "settings": {
            "memtable_mb": a.memtable_mb, "cache_mb": a.cache_mb, "min_blob_size": a.min_blob_size,
            "blob_file_mb": a.blob_file_mb, "staleness_threshold": a.garbage_ratio,
            "age_cutoff": a.age_cutoff, "sync": a.sync, "fjall": "3",
        },
        "workload": {"record_count": h.record_count, "op_count": h.op_count,
                     "key_size": h.key_size, "value_size": h.value_size},
        "phases": {"load": phase(h.record_count, load_secs), "run": phase(run_ops, run_secs),
                   "settle": phase(0, settle_secs)},
        "latency_us": latency,
        "load_latency_us": summary(&load_lat),
        "not_found": not_found,
        "scanned_entries": scanned,
        "user_bytes_written": user_bytes,
        // fjall has no write counters: its process's write syscalls.
        "engine_bytes_written": delta("wchar"),
        "disk_bytes": disk,
        "proc_io": {
            "rchar": delta("rchar"), "wchar": delta("wchar"), "syscr": delta("syscr"),
            "syscw": delta("syscw"), "read_bytes": delta("read_bytes"),
            "write_bytes": delta("write_bytes"),
            "cancelled_write_bytes": delta("cancelled_write_bytes"),
        },
        "max_rss_bytes": max_rss(),
        "engine_stats": {"note": "fjall exposes no byte counters; engine bytes = wchar"},
    });
    std::fs::write(&a.report, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", a.report.display()))?;
    Ok(())
}
