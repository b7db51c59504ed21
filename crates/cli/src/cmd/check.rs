//! `halflife check DIR`: verifies a closed database (every checksum of every file, every
//! value pointer, every garbage count) without changing it. Exit codes tell an operator
//! what to do: 0 clean, [`EXIT_DAMAGE`] damage found (repair rebuilds from the intact
//! files), 2 a usage error (clap's), [`EXIT_UNREADABLE`] the check could not read
//! everything (an I/O error: look at the device or the permissions; repair would not help).
//! `halflife repair DIR`: rebuilds the manifest from the intact files and moves damaged and
//! superseded files into `DIR/lost/`. See docs/engine.md ("Recovery, check and repair").

use anyhow::{bail, Context};
use engine::{check, repair, Options, TreeOptions};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::{Path, PathBuf};

/// What `check` and `repair` both take.
#[derive(clap::Args)]
pub struct DbArgs {
    /// The database directory (closed; repair takes its lock, check writes nothing).
    pub dir: PathBuf,
    /// Levels of the tree, as the database was opened with (repair rebuilds the tree as one
    /// sorted run at the last level).
    #[arg(long, default_value_t = Options::default().tree.num_levels)]
    pub num_levels: usize,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

fn bar(unit: &str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(5));
    b.set_style(
        ProgressStyle::with_template(&format!(
            "[{{elapsed_precise}}] {{wide_bar:.cyan/blue}} {{{unit}}}/{{{unit}_total}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b
}

fn options(dir: &Path, num_levels: usize) -> anyhow::Result<Options> {
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    Ok(Options {
        tree: TreeOptions {
            num_levels,
            ..Default::default()
        },
        ..Options::default()
    })
}

/// Checks the JSON output path can be written before the work starts.
fn json_target(json: &Option<PathBuf>) -> anyhow::Result<()> {
    if let Some(p) = json {
        std::fs::write(p, b"{}").with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// `check` found damage.
pub const EXIT_DAMAGE: u8 = 1;
/// `check` could not read a file or the directory (and found no damage in what it read).
pub const EXIT_UNREADABLE: u8 = 3;

/// Why `check` failed, with the exit code that says so.
#[derive(Debug)]
pub struct CheckFailed {
    pub code: u8,
    message: String,
}

impl std::fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CheckFailed {}

pub fn run_check(a: DbArgs) -> anyhow::Result<()> {
    match check_dir(&a) {
        Ok(()) => Ok(()),
        Err(e) => match e.downcast::<CheckFailed>() {
            Ok(f) => Err(f.into()),
            // The check did not run to the end (the directory, the JSON output).
            Err(e) => Err(CheckFailed {
                code: EXIT_UNREADABLE,
                message: format!("{e:#}"),
            }
            .into()),
        },
    }
}

fn check_dir(a: &DbArgs) -> anyhow::Result<()> {
    let opts = options(&a.dir, a.num_levels)?;
    json_target(&a.json)?;
    let pb = bar("bytes");
    let r = check::check(&a.dir, &opts, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })
    .with_context(|| format!("checking {}", a.dir.display()))?;
    pb.finish_and_clear();
    println!(
        "checked {} files, {} bytes: {} tables ({} entries), {} value files ({} records), {} index maps, {} WALs ({} batches), {} value pointers followed",
        r.files, r.bytes, r.tables, r.table_entries, r.value_files, r.value_records, r.index_maps, r.wals, r.wal_batches, r.pointers_verified
    );
    for n in &r.notes {
        println!("note: {n}");
    }
    for p in &r.problems {
        println!("PROBLEM: {p}");
    }
    write_json(&a.json, &r)?;
    if r.has_damage() {
        return Err(CheckFailed {
            code: EXIT_DAMAGE,
            message: format!(
                "{} problem(s) in {}; `halflife repair {}` rebuilds from the intact files",
                r.problems.len(),
                a.dir.display(),
                a.dir.display()
            ),
        }
        .into());
    }
    if !r.is_ok() {
        return Err(CheckFailed {
            code: EXIT_UNREADABLE,
            message: format!(
                "{} file(s) of {} could not be read (I/O errors above); no damage in the rest",
                r.problems.len(),
                a.dir.display()
            ),
        }
        .into());
    }
    println!("OK");
    Ok(())
}

pub fn run_repair(a: DbArgs) -> anyhow::Result<()> {
    let opts = options(&a.dir, a.num_levels)?;
    json_target(&a.json)?;
    let pb = bar("pos");
    let r = repair::repair(&a.dir, &opts, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })
    .with_context(|| format!("repairing {}", a.dir.display()))?;
    pb.finish_and_clear();
    println!(
        "rebuilt {}: {} entries in {} tables, last sequence {}",
        r.manifest.display(),
        r.entries,
        r.tables_written,
        r.last_sequence
    );
    println!(
        "recovered: {} intact tables, {} WALs ({} batches), {} value files, {} index maps",
        r.tables_intact, r.wals_replayed, r.wal_batches, r.value_files, r.index_maps
    );
    for (p, n, why) in &r.tables_damaged {
        println!("damaged table {}: {n} entries salvaged; {why}", p.display());
    }
    for (p, why) in &r.wal_damage {
        println!("damaged WAL {}: skipped {why}", p.display());
    }
    for (p, n, why) in &r.value_files_damaged {
        println!(
            "damaged value file {}: {n} intact records; {why}",
            p.display()
        );
    }
    if r.keys_with_lost_values > 0 {
        println!(
            "NOT recovered: {} value pointers lead to lost or damaged records (reads of those keys report corruption)",
            r.keys_with_lost_values
        );
    }
    println!(
        "{} files moved into {} (delete it once `halflife check` is clean)",
        r.moved_to_lost.len(),
        a.dir.join(engine::db::LOST_DIR).display()
    );
    write_json(&a.json, &r)
}

fn write_json(json: &Option<PathBuf>, report: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(p) = json {
        std::fs::write(p, serde_json::to_vec_pretty(report)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
