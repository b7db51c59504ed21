//! `halflife bench --benchmarks fillrandom,overwrite,...`: db_bench's workloads
//! ([`harness::dbbench`]) on one database with `bench`'s flags, their result lines and the
//! `halflife-dbbench/1` report.

use super::Args;
use anyhow::{anyhow, bail, Context, Result};
use engine::{Options, DB};
use harness::dbbench::{
    parse_benchmarks, render, run_one, tail_plot, Ctx, Report, DEFAULT_KEY_SIZE, DEFAULT_VALUE_SIZE,
};
use harness::{report, table};
use std::path::{Path, PathBuf};
use workload::CompressibleValues;

pub fn run(a: &Args, list: &str, opts: Options) -> Result<()> {
    let names = parse_benchmarks(list)?;
    let num = a.num;
    if num == 0 {
        bail!("--num must be at least 1");
    }
    let key_size = a.key_size.unwrap_or(DEFAULT_KEY_SIZE) as usize;
    if let Some(cap) = workload::keys::key_capacity(key_size) {
        if num > cap {
            bail!("--num {num} does not fit in {key_size}-byte keys (at most {cap} keys)");
        }
    }
    let value_size = a.value_size.unwrap_or(DEFAULT_VALUE_SIZE) as usize;
    let ratio = a.compression_ratio.unwrap_or(0.5);
    let values = CompressibleValues::new(ratio, value_size, 0x0064_6262_656e_6368)
        .map_err(|e| anyhow!("--compression-ratio: {e}"))?;
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("dbbench-{}", a.policy));
    let report_path = a
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("bench-out/{name}.json")));
    let (_tmp, dir) = super::data_dir(a)?;
    if !a.quiet {
        eprintln!(
            "halflife bench (db_bench mode): {} keys of {key_size} B, values of {value_size} B \
             (compression ratio {ratio}), {} thread(s), policy {}, in {}",
            table::count(num),
            a.threads,
            a.policy,
            dir.display()
        );
    }
    let mut db = Some(open(&dir, &opts)?);
    let mut results = Vec::new();
    for (i, bench) in names.iter().enumerate() {
        if bench == "fillrandom" {
            // A fresh database, as db_bench's fill benchmarks.
            if let Some(old) = db.take() {
                old.close()?;
            }
            std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
            db = Some(open(&dir, &opts)?);
        }
        let ctx = Ctx {
            db: db.as_ref().expect("open"),
            num,
            key_size,
            value_size,
            values: &values,
            seed: a.seed.unwrap_or(301) ^ ((i as u64) << 32),
            read: super::read_options(a),
        };
        let r = run_one(&ctx, bench, a.threads)?;
        if !a.quiet {
            println!("{}", render(&r));
        }
        results.push(r);
    }
    let db = db.expect("open");
    // Space and bytes written are read once flushes and compactions are done (outside
    // every benchmark's timing), so that runs with different settings compare alike.
    db.wait_idle()?;
    let stats = db.stats();
    let by_cause = report::bytes_by_cause(&stats);
    let engine_stats = serde_json::to_value(&stats)?;
    db.close()?;
    let disk_bytes = report::dir_bytes(&dir);
    if !a.quiet {
        let written: u64 = stats.io.total_written();
        println!(
            "engine bytes written {} ({}), user bytes {}; on disk {} (tree {}, value files {})",
            table::bytes(written),
            by_cause
                .iter()
                .map(|(k, v)| format!("{k} {}", table::bytes(*v)))
                .collect::<Vec<_>>()
                .join(", "),
            table::bytes(stats.user_bytes_written),
            table::bytes(disk_bytes),
            table::bytes(stats.tree_bytes),
            table::bytes(stats.value_file_bytes),
        );
        println!(
            "write stalls {} ({} in all, longest {}); delayed writes {} ({} in all)",
            table::count(stats.stall_count),
            table::micros(stats.stall_micros as f64),
            table::micros(stats.stall_max_micros as f64),
            table::count(stats.delay_count),
            table::micros(stats.delay_micros as f64),
        );
    }
    let report = Report {
        schema: "halflife-dbbench/1",
        engine: format!("halflife-{}", a.policy),
        settings: serde_json::json!({
            "num": num, "threads": a.threads, "key_size": key_size, "value_size": value_size,
            "compression_ratio": ratio, "policy": a.policy, "memtable_mb": a.sizes.memtable_mb,
            "cache_mb": a.sizes.cache_mib, "sync": a.sync, "compression": a.compression,
            "compression_per_level": a.compression_per_level,
            "value_compression": a.value_compression,
        }),
        benchmarks: &results,
        engine_bytes_by_cause: by_cause,
        disk_bytes,
        engine_stats,
    };
    if let Some(parent) = report_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&report_path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", report_path.display()))?;
    let plot_path = (!a.no_plot).then(|| {
        a.plot
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("bench-out/{name}-tail.png")))
    });
    if let Some(p) = &plot_path {
        let title = format!("halflife {name}: p99.9 latency per second");
        tail_plot(p, &title, &results)?;
    }
    if !a.quiet {
        println!("report: {}", report_path.display());
        if let Some(p) = &plot_path {
            println!("plot:   {}", p.display());
        }
    }
    Ok(())
}

fn open(dir: &Path, opts: &Options) -> Result<DB> {
    DB::open(dir, opts.clone()).with_context(|| format!("opening the engine in {}", dir.display()))
}
