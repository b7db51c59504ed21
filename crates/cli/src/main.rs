//! `halflife`: benchmarks, comparisons against real peers, the VAT model and the
//! log-structured block store, from one binary.

mod cmd;
mod flags;
mod logging;
mod remote;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc malloc: memtables allocate and free many value-sized buffers
/// from several threads, and glibc's per-thread arenas kept up to twice the live memtable
/// bytes resident (measured: docs/engine.md), starving the page cache under a memory limit.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (the option's index in v3's `mi_option_e`, as in v2).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// How long mimalloc keeps freed pages before returning them to the system. Its v3
/// default, 1 s, kept 200-365 MiB more resident than the live heap in a write-intensive
/// run that frees memtables, GC buffers and evicted blocks at hundreds of MB/s (10 ms, v2's
/// default: docs/bench.md, "Memory at full scale").
const PURGE_DELAY_MS: std::ffi::c_long = 10;

// The static mimalloc that `mimalloc` links provides these (mimalloc.h).
extern "C" {
    #[cfg(test)]
    fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// Sets [`PURGE_DELAY_MS`] unless `MIMALLOC_PURGE_DELAY` chooses another delay.
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: plain option setter of the linked allocator; safe at any time.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

#[derive(Parser)]
#[command(
    name = "halflife",
    version,
    about = "A measured key-value storage engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a YCSB-style workload on the engine and report throughput, latency and amplification.
    /// (Boxed: its many flags make it the largest variant by far.)
    Bench(Box<cmd::bench::Args>),
    /// Run one workload on several engines and policies, side by side, with ratios.
    Compare(cmd::compare::Args),
    /// The VAT amplification model (paper 003).
    Vat(cmd::vat::Args),
    /// Log-structured block storage on an SSD array (paper 004).
    Lss(cmd::lss::Args),
    /// Cache warming through compactions, every policy on the slides' workloads (paper 002).
    Leaper(cmd::leaper::Args),
    /// Predictable Get latency on the emulated PLM device (paper 001): six configurations.
    Vigil(cmd::vigil::Args),
    /// Verify every checksum, pointer and garbage count of a closed database (read-only).
    Check(cmd::check::DbArgs),
    /// Rebuild a damaged database's manifest from its intact files; damaged files go to lost/.
    Repair(cmd::check::DbArgs),
    /// Serve a database over the Redis protocol (RESP2/RESP3, TCP and Unix socket).
    Serve(cmd::serve::Args),
    /// Make a consistent, openable copy of a database in a new directory (hard links).
    Checkpoint(cmd::backup::CheckpointArgs),
    /// Incremental backups: create, list, restore, verify.
    Backup(cmd::backup::BackupArgs),
}

fn main() -> std::process::ExitCode {
    tune_allocator();
    logging::init();
    match run(Cli::parse().command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:?}");
            // A command with exit codes of its own (`check`) says which; else 1.
            let code = e
                .downcast_ref::<cmd::check::CheckFailed>()
                .map_or(1, |f| f.code);
            std::process::ExitCode::from(code)
        }
    }
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Bench(a) => cmd::bench::run(*a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Vat(a) => cmd::vat::run(a),
        Command::Lss(a) => cmd::lss::run(a),
        Command::Leaper(a) => cmd::leaper::run(a),
        Command::Vigil(a) => cmd::vigil::run(a),
        Command::Check(a) => cmd::check::run_check(a),
        Command::Repair(a) => cmd::check::run_repair(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Checkpoint(a) => cmd::backup::run_checkpoint(a),
        Command::Backup(a) => cmd::backup::run_backup(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // Index 15 is the purge delay whose v3 default is 1000 ms: a mimalloc that moved
        // the option would fail here instead of silently tuning another one.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: option getter and setter of the linked allocator.
            unsafe {
                assert_eq!(mi_option_get(MI_OPTION_PURGE_DELAY), 1000);
                tune_allocator();
                assert_eq!(mi_option_get(MI_OPTION_PURGE_DELAY), PURGE_DELAY_MS);
            }
        }
    }
}
