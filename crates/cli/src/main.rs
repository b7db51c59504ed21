//! `halflife`: benchmarks, comparisons against real peers, the VAT model and the
//! log-structured block store, from one binary.

mod cmd;
mod harness;
mod plot;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc malloc: memtables allocate and free many value-sized buffers
/// from several threads, and glibc's per-thread arenas kept up to twice the live memtable
/// bytes resident (measured: docs/engine.md), starving the page cache under a memory limit.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Bench(cmd::bench::Args),
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
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Bench(a) => cmd::bench::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Vat(a) => cmd::vat::run(a),
        Command::Lss(a) => cmd::lss::run(a),
        Command::Leaper(a) => cmd::leaper::run(a),
        Command::Vigil(a) => cmd::vigil::run(a),
        Command::Check(a) => cmd::check::run_check(a),
        Command::Repair(a) => cmd::check::run_repair(a),
        Command::Serve(a) => cmd::serve::run(a),
    }
}
