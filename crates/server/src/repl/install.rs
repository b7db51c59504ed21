//! Putting a full sync's copy in place of a replica's database, so that a crash at any
//! point leaves either the old database or the new one under the data directory's name,
//! never a mixture and never nothing.
//!
//! Names are siblings of the data directory `D`:
//!
//! 1. the files arrive in `D.halflife-sync` (deleted first if a previous attempt left it);
//!    each is synced, then the directory;
//! 2. the copy is opened there once, its replication position written (synced) and closed:
//!    it opens, and it says which stream it continues;
//! 3. it is renamed `D.halflife-ready` (parent synced): from here on, it is complete;
//! 4. under the exec lock (no command runs), the old database is closed, `D` renamed
//!    `D.halflife-old`, `D.halflife-ready` renamed `D` (parent synced), `D` opened and
//!    swapped into the store, and `D.halflife-old` deleted.
//!
//! [`recover`] (run before `D` is opened at start) finishes step 4 after a crash inside
//! it, and deletes the leftovers of steps 1 and 2.

use crate::shared::Shared;
use engine::{WriteOptions, DB};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// `D.halflife-<what>`, next to the data directory `D`.
pub fn sibling(dir: &Path, what: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "data".into());
    dir.with_file_name(format!("{name}.halflife-{what}"))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

fn sync_parent(dir: &Path) -> io::Result<()> {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => sync_dir(p),
        _ => sync_dir(Path::new(".")),
    }
}

/// A fresh, empty directory for the files of a full sync of `data`.
pub fn incoming(data: &Path) -> io::Result<PathBuf> {
    let dir = sibling(data, "sync");
    match fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Finishes or undoes a swap a crash interrupted (see the module docs); a no-op when
/// there is nothing of one.
pub fn recover(data: &Path) -> io::Result<()> {
    let (ready, old) = (sibling(data, "ready"), sibling(data, "old"));
    if ready.exists() {
        if data.exists() {
            if old.exists() {
                fs::remove_dir_all(&old)?;
            }
            fs::rename(data, &old)?;
        }
        fs::rename(&ready, data)?;
        sync_parent(data)?;
    }
    for leftover in [old, sibling(data, "sync")] {
        if leftover.exists() {
            fs::remove_dir_all(&leftover)?;
        }
    }
    Ok(())
}

/// Steps 2 to 4 for the copy in `dir`, which holds the stream before `pos`. Refused if the
/// role changed since the link of generation `gen` started. The primary's replication
/// histories are removed from the copy: they are its own, and this server's sequence
/// numbers will not be the primary's.
pub fn install(
    sh: &Shared,
    dir: &Path,
    pos: &crate::repl_state::Position,
    gen: u64,
) -> Result<(), String> {
    let data = sh.store.db().path().to_path_buf();
    let opts = sh.store.db().options().clone();
    let step = |what: &str, e: &dyn std::fmt::Display| format!("{what}: {e}");
    sync_dir(dir).map_err(|e| step("syncing the received directory", &e))?;
    {
        let copy =
            DB::open(dir, opts.clone()).map_err(|e| step("opening the received copy", &e))?;
        let mut wb = engine::WriteBatch::new();
        wb.put(crate::record::REPL_KEY, &pos.encode());
        wb.delete(crate::record::HISTORY_KEY);
        copy.write(wb, &WriteOptions { sync: true })
            .map_err(|e| step("writing the position into the copy", &e))?;
        copy.close()
            .map_err(|e| step("closing the received copy", &e))?;
    }
    let ready = sibling(&data, "ready");
    let old = sibling(&data, "old");
    let _ = fs::remove_dir_all(&ready);
    fs::rename(dir, &ready).map_err(|e| step("renaming the received copy", &e))?;
    sync_parent(&data).map_err(|e| step("syncing the data directory's parent", &e))?;
    let _x = sh.store.exec_lock();
    if sh.repl.gen() != gen {
        let _ = fs::remove_dir_all(&ready);
        return Err("the role changed during the sync".into());
    }
    let mut failed = None;
    sh.store.replace(|current| {
        let swapped = (|| {
            current
                .close()
                .map_err(|e| step("closing the old database", &e))?;
            let swap = || -> io::Result<()> {
                if old.exists() {
                    fs::remove_dir_all(&old)?;
                }
                fs::rename(&data, &old)?;
                fs::rename(&ready, &data)?;
                sync_parent(&data)
            };
            swap().map_err(|e| step("swapping the directories", &e))?;
            DB::open(&data, opts.clone()).map_err(|e| step("opening the new copy", &e))
        })();
        match swapped {
            Ok(db) => {
                let _ = fs::remove_dir_all(&old);
                db
            }
            Err(e) => {
                failed = Some(e);
                reopen(&data, &opts)
            }
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// After a failed swap: whichever complete database [`recover`] leaves under the name,
/// opened. A server that cannot open its data directory cannot go on: it exits with why.
fn reopen(data: &Path, opts: &engine::Options) -> DB {
    if let Err(e) = recover(data) {
        tracing::warn!("replication: recovering {}: {e}", data.display());
    }
    match DB::open(data, opts.clone()) {
        Ok(db) => db,
        Err(e) => {
            tracing::error!(
                "replication: no database can be opened in {} after a failed install: {e}; exiting",
                data.display()
            );
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(dir: &Path, what: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("mark"), what).unwrap();
    }

    fn mark(dir: &Path) -> Option<String> {
        fs::read_to_string(dir.join("mark")).ok()
    }

    /// Each point a crash can stop the swap at (module docs), and what `recover` leaves.
    #[test]
    fn recovery_leaves_one_whole_database_under_the_name() {
        let t = tempfile::tempdir().unwrap();
        let data = t.path().join("db");
        let (sync, ready, old) = (
            sibling(&data, "sync"),
            sibling(&data, "ready"),
            sibling(&data, "old"),
        );
        // Files still arriving: the old database stays.
        marked(&data, "old");
        marked(&sync, "partial");
        recover(&data).unwrap();
        assert_eq!(mark(&data).as_deref(), Some("old"));
        assert!(!sync.exists());
        // Complete, not yet swapped: the new one goes in.
        marked(&ready, "new");
        recover(&data).unwrap();
        assert_eq!(mark(&data).as_deref(), Some("new"));
        assert!(!ready.exists() && !old.exists());
        // Between the two renames: the new one goes in.
        fs::rename(&data, &old).unwrap();
        marked(&ready, "newer");
        recover(&data).unwrap();
        assert_eq!(mark(&data).as_deref(), Some("newer"));
        assert!(!old.exists());
        // Swapped, the old one not yet deleted.
        marked(&old, "stale");
        recover(&data).unwrap();
        assert_eq!(mark(&data).as_deref(), Some("newer"));
        assert!(!old.exists());
        // Nothing of a swap: nothing changes.
        recover(&data).unwrap();
        assert_eq!(mark(&data).as_deref(), Some("newer"));
    }
}
