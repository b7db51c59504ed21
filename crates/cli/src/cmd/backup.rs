//! `halflife checkpoint --dir DB --to DIR`: a consistent, openable copy of a database made
//! of hard links (`DB::checkpoint`). `halflife backup create|list|restore|verify|purge`:
//! incremental backups into a backup directory (`engine::backup`). See docs/backup.md.
//!
//! Both open the database, which takes its lock: the database of a running
//! `halflife serve` cannot be opened here. `halflife backup create|list|verify|purge
//! --server HOST:PORT` asks the running server instead, through its `BACKUP` command,
//! which works in the server's `backup-dir`.

use crate::remote::{self, Remote, ServerArgs};
use anyhow::{bail, Context};
use engine::backup::BackupEngine;
use engine::{GcPolicyConfig, Options, TreeOptions, ValueLogOptions, DB};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The database to open.
#[derive(clap::Args)]
pub struct DbArgs {
    /// The database directory (opened, so not one a running server holds).
    #[arg(long)]
    pub dir: PathBuf,
    /// The value placement and GC policy the database is used with (as `halflife serve
    /// --policy`): opening runs its background work until the command ends.
    #[arg(short, long, default_value = "lifetime")]
    pub policy: String,
    /// Levels of the tree, as the database is opened with.
    #[arg(long, default_value_t = Options::default().tree.num_levels)]
    pub num_levels: usize,
}

#[derive(clap::Args)]
pub struct CheckpointArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The checkpoint's directory: must not exist. On the database's file system the
    /// files are hard links; elsewhere they are copied.
    #[arg(long)]
    pub to: PathBuf,
}

#[derive(clap::Args)]
pub struct BackupArgs {
    #[command(subcommand)]
    pub command: BackupCommand,
}

#[derive(clap::Subcommand)]
pub enum BackupCommand {
    /// Back up a database, copying only the files no earlier backup holds (with --server:
    /// the running server's database, into its backup-dir).
    Create {
        /// The database directory (opened, so not one a running server holds).
        #[arg(long, required_unless_present = "server", conflicts_with = "server")]
        dir: Option<PathBuf>,
        /// The value placement and GC policy the database is used with.
        #[arg(short, long, default_value = "lifetime")]
        policy: String,
        /// Levels of the tree, as the database is opened with.
        #[arg(long, default_value_t = Options::default().tree.num_levels)]
        num_levels: usize,
        #[arg(long, required_unless_present = "server", conflicts_with = "server")]
        backup_dir: Option<PathBuf>,
        #[command(flatten)]
        remote: ServerArgs,
    },
    /// List the backups in a backup directory (with --server: in the server's).
    List {
        #[arg(long, required_unless_present = "server", conflicts_with = "server")]
        backup_dir: Option<PathBuf>,
        #[command(flatten)]
        remote: ServerArgs,
    },
    /// Copy a backup into a directory that does not exist or is empty.
    Restore {
        #[arg(long)]
        backup_dir: PathBuf,
        /// The backup [default: the newest].
        #[arg(long)]
        id: Option<u64>,
        #[arg(long)]
        to: PathBuf,
    },
    /// Delete every backup but the newest KEEP, and the files only they held.
    Purge {
        #[arg(long, required_unless_present = "server", conflicts_with = "server")]
        backup_dir: Option<PathBuf>,
        #[arg(long)]
        keep: usize,
        #[command(flatten)]
        remote: ServerArgs,
    },
    /// Recompute the size and crc32c of every file of a backup (of every backup if no id).
    Verify {
        #[arg(long, required_unless_present = "server", conflicts_with = "server")]
        backup_dir: Option<PathBuf>,
        #[arg(long)]
        id: Option<u64>,
        #[command(flatten)]
        remote: ServerArgs,
    },
}

fn open(a: &DbArgs) -> anyhow::Result<DB> {
    let gc: GcPolicyConfig = a.policy.parse().map_err(crate::flags::user_facing)?;
    let opts = Options {
        create_if_missing: false,
        tree: TreeOptions {
            num_levels: a.num_levels,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            gc,
            ..Default::default()
        },
        ..Options::default()
    };
    DB::open(&a.dir, opts).map_err(|e| {
        let hint = match &e {
            engine::Error::Locked(_) => {
                "; if `halflife serve` runs on it, back it up through the server instead (`halflife backup create --server HOST:PORT`, or BGSAVE)"
            }
            _ => "",
        };
        anyhow::anyhow!("opening {}: {e}{hint}", a.dir.display())
    })
}

pub fn run_checkpoint(a: CheckpointArgs) -> anyhow::Result<()> {
    let db = open(&a.db)?;
    let started = Instant::now();
    let info = db.checkpoint(&a.to).with_context(|| {
        format!(
            "checkpoint of {} into {}",
            a.db.dir.display(),
            a.to.display()
        )
    })?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "checkpoint {} in {secs:.3} s: {} data files ({} hard links, {} copied), {} bytes, every write up to sequence {}",
        info.dir.display(),
        info.data_files,
        info.linked,
        info.data_files - info.linked,
        info.bytes,
        info.sequence
    );
    db.close().context("closing the database")
}

/// The server's connection, when `--server` was given.
fn remote(r: &ServerArgs) -> anyhow::Result<Option<(Remote, &str)>> {
    match &r.server {
        Some(addr) => Ok(Some((
            Remote::connect(addr, r.password.as_deref())?,
            addr.as_str(),
        ))),
        None => Ok(None),
    }
}

/// A path clap required (`required_unless_present = "server"`).
fn given(p: Option<PathBuf>) -> PathBuf {
    p.expect("clap requires it without --server")
}

pub fn run_backup(a: BackupArgs) -> anyhow::Result<()> {
    match a.command {
        BackupCommand::Create {
            dir,
            policy,
            num_levels,
            backup_dir,
            remote: r,
        } => match remote(&r)? {
            Some((mut c, addr)) => {
                let started = Instant::now();
                let f = remote::int_fields(&c.call(&["BACKUP", "CREATE"])?)?;
                println!(
                    "backup {} of the server at {addr} in {:.3} s: {} files, {} bytes, every write up to sequence {}",
                    f.get("id"),
                    started.elapsed().as_secs_f64(),
                    f.get("files"),
                    f.get("bytes"),
                    f.get("sequence")
                );
                Ok(())
            }
            None => create(
                &DbArgs {
                    dir: given(dir),
                    policy,
                    num_levels,
                },
                &given(backup_dir),
            ),
        },
        BackupCommand::List {
            backup_dir,
            remote: r,
        } => match remote(&r)? {
            Some((mut c, addr)) => {
                let redis_protocol::resp2::types::BytesFrame::Array(all) =
                    c.call(&["BACKUP", "LIST"])?
                else {
                    bail!("BACKUP LIST of {addr}: not an array");
                };
                let rows = all
                    .iter()
                    .map(|m| {
                        let f = remote::int_fields(m)?;
                        Ok(Row {
                            id: f.get("id") as u64,
                            timestamp: f.get("timestamp") as u64,
                            sequence: f.get("sequence") as u64,
                            files: f.get("files") as usize,
                            bytes: f.get("bytes") as u64,
                            source: format!("the server at {addr}"),
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                print_rows(&rows);
                Ok(())
            }
            None => list(&given(backup_dir)),
        },
        BackupCommand::Restore { backup_dir, id, to } => {
            let be = engine_at(&backup_dir)?;
            let started = Instant::now();
            let m = be
                .restore(id, &to)
                .with_context(|| format!("restoring into {}", to.display()))?;
            println!(
                "restored backup {} ({} files, {} bytes, every write up to sequence {}) into {} in {:.3} s; checksums verified",
                m.id,
                m.files.len(),
                m.bytes(),
                m.sequence,
                to.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        BackupCommand::Verify {
            backup_dir,
            id,
            remote: r,
        } => match remote(&r)? {
            Some((mut c, addr)) => {
                let id = id.map(|i| i.to_string());
                let mut args = vec!["BACKUP", "VERIFY"];
                args.extend(id.as_deref());
                let n = remote::int(&c.call(&args)?)?;
                println!("{n} backup(s) of the server at {addr}: OK");
                Ok(())
            }
            None => verify(&given(backup_dir), id),
        },
        BackupCommand::Purge {
            backup_dir,
            keep,
            remote: r,
        } => {
            if let Some((mut c, addr)) = remote(&r)? {
                let n = remote::int(&c.call(&["BACKUP", "PURGE", &keep.to_string()])?)?;
                println!("deleted {n} backup(s) of the server at {addr}; the newest {keep} kept");
                return Ok(());
            }
            let backup_dir = given(backup_dir);
            let be = engine_at(&backup_dir)?;
            let gone = be
                .purge_old(keep)
                .with_context(|| format!("purging backups in {}", backup_dir.display()))?;
            println!(
                "deleted {} backup(s) {gone:?}; {} kept",
                gone.len(),
                be.list()?.len()
            );
            Ok(())
        }
    }
}

fn engine_at(dir: &Path) -> anyhow::Result<BackupEngine> {
    BackupEngine::open(dir).with_context(|| format!("opening backup directory {}", dir.display()))
}

fn create(db: &DbArgs, backup_dir: &Path) -> anyhow::Result<()> {
    let be = engine_at(backup_dir)?;
    let handle = open(db)?;
    let started = Instant::now();
    let r = be.create(&handle).with_context(|| {
        format!(
            "backing up {} into {}",
            db.dir.display(),
            backup_dir.display()
        )
    })?;
    println!(
        "backup {} of {} in {:.3} s: {} files, {} bytes; {} data files copied, {} already backed up; {} bytes written",
        r.meta.id,
        db.dir.display(),
        started.elapsed().as_secs_f64(),
        r.meta.files.len(),
        r.meta.bytes(),
        r.copied,
        r.reused,
        r.bytes_written
    );
    handle.close().context("closing the database")
}

/// One line of `backup list`.
struct Row {
    id: u64,
    timestamp: u64,
    sequence: u64,
    files: usize,
    bytes: u64,
    source: String,
}

fn print_rows(rows: &[Row]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!(
        "{:>6} {:>12} {:>10} {:>20} {:>7} {:>14}  source",
        "id", "unix time", "age (s)", "sequence", "files", "bytes"
    );
    for m in rows {
        println!(
            "{:>6} {:>12} {:>10} {:>20} {:>7} {:>14}  {}",
            m.id,
            m.timestamp,
            now.saturating_sub(m.timestamp),
            m.sequence,
            m.files,
            m.bytes,
            m.source
        );
    }
}

fn list(backup_dir: &Path) -> anyhow::Result<()> {
    let be = engine_at(backup_dir)?;
    let rows: Vec<Row> = be
        .list()?
        .into_iter()
        .map(|m| Row {
            id: m.id,
            timestamp: m.timestamp,
            sequence: m.sequence,
            files: m.files.len(),
            bytes: m.bytes(),
            source: m.source.to_string(),
        })
        .collect();
    print_rows(&rows);
    Ok(())
}

fn verify(backup_dir: &Path, id: Option<u64>) -> anyhow::Result<()> {
    let be = engine_at(backup_dir)?;
    let ids: Vec<u64> = match id {
        Some(id) => vec![id],
        None => be.list()?.iter().map(|m| m.id).collect(),
    };
    let mut bad = 0;
    for id in ids {
        match be.verify(id) {
            Ok(m) => println!(
                "backup {id}: OK ({} files, {} bytes)",
                m.files.len(),
                m.bytes()
            ),
            Err(e) => {
                bad += 1;
                println!("backup {id}: PROBLEM: {e}");
            }
        }
    }
    if bad > 0 {
        bail!(
            "{bad} backup(s) in {} failed verification",
            backup_dir.display()
        );
    }
    Ok(())
}
