//! Backups of the running server: `BGSAVE` / `SAVE` (a checkpoint of the engine, Kvrocks'
//! backup), `LASTSAVE` and `INFO persistence`'s `rdb_*` fields, and `BACKUP` (incremental
//! backups through the engine's [`engine::backup::BackupEngine`]).
//!
//! Everything goes into one directory, `backup-dir` (`--backup-dir`; by default the data
//! directory's sibling `<dir>-backup`):
//!
//! - `bgsave/`: the newest checkpoint (hard links to the engine's immutable files where the
//!   file system allows, so it costs little space while the files live). A new one is made
//!   as `bgsave.tmp/`, the old one is renamed to `bgsave.old/`, the new one into place,
//!   the directory synced, and the old one deleted: at every moment one whole checkpoint
//!   is under `bgsave/` or `bgsave.old/`.
//! - `shared/`, `private/`, `meta/`, `LOCK`: the backup engine's incremental backups, which
//!   `halflife backup list|verify|restore|purge --backup-dir` reads as well.
//!
//! A power cut at any step leaves `bgsave/` whole, or only `bgsave.old/` (between the
//! two renames), which the next start renames back ([`Backups::new`]); the renames and
//! the directory sync go through the engine's [`Storage`], so the power-cut storage of the
//! tests sees them.
//!
//! One job at a time, as Redis runs one child: a `BGSAVE` while a `BACKUP CREATE` runs is
//! refused, or run after it with `BGSAVE SCHEDULE`. The checkpoint and the backup engine
//! sync every file and directory they write (`engine::db::checkpoint`, `engine::backup`).

use engine::backup::{BackupEngine, CreateReport};
use engine::io::{FileStorage, Storage};
use engine::DB;
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What runs now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    Bgsave,
    Backup,
}

#[derive(Debug)]
struct State {
    running: Option<(Job, Instant)>,
    /// A `BGSAVE SCHEDULE` waits for the running backup.
    scheduled: bool,
    /// Unix seconds of the last successful save (the start until the first one, as Redis).
    last_save: u64,
    /// The engine's sequence number the last save holds.
    last_save_seq: u64,
    last_ok: bool,
    last_secs: i64,
    saves: u64,
    /// `save`'s points: a `BGSAVE` once `changes` writes and `seconds` have passed since
    /// the last successful save.
    points: Vec<(u64, u64)>,
    /// Unix seconds when the last `BGSAVE` ended.
    last_try: u64,
}

/// The server's backup directory and the state of its jobs.
pub struct Backups {
    dir: PathBuf,
    /// The engine's storage: renames and directory syncs of `backup-dir` go through it.
    storage: Arc<dyn Storage>,
    state: Mutex<State>,
    /// Signalled when a job ends ([`Backups::wait_idle`]).
    idle: Condvar,
}

/// Why a job could not start.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// A `BGSAVE` runs.
    BgsaveRunning,
    /// A `BACKUP CREATE` runs.
    BackupRunning,
}

fn now_secs() -> u64 {
    crate::record::now_ms() / 1000
}

impl Backups {
    /// `dir` is `backup-dir`; `db` the engine whose storage and sequence number it starts
    /// from. A `bgsave/` that a power cut between the two renames left only as
    /// `bgsave.old/` is renamed back.
    pub fn new(dir: PathBuf, db: &DB) -> engine::Result<Backups> {
        let storage = db
            .options()
            .storage
            .clone()
            .unwrap_or_else(|| Arc::new(FileStorage::new()));
        let seq = db.latest_sequence_number();
        let (dest, old) = (dir.join("bgsave"), dir.join("bgsave.old"));
        if !storage.exists(&dest) && storage.exists(&old) {
            storage.rename(&old, &dest)?;
            storage.sync_dir(&dir)?;
            tracing::warn!(
                "{}: the previous checkpoint renamed back from {} (a BGSAVE was cut short)",
                dest.display(),
                old.display()
            );
        }
        Ok(Backups {
            dir,
            storage,
            state: Mutex::new(State {
                running: None,
                scheduled: false,
                last_save: now_secs(),
                last_save_seq: seq,
                last_ok: true,
                last_secs: -1,
                saves: 0,
                points: Vec::new(),
                last_try: 0,
            }),
            idle: Condvar::new(),
        })
    }

    /// Waits for the running job to end (shutdown closes the engine after it; the job
    /// holds the engine until then).
    pub fn wait_idle(&self) {
        let mut st = self.state.lock();
        while st.running.is_some() {
            self.idle.wait(&mut st);
        }
    }

    /// `backup-dir` by default: `<data dir>-backup` beside the data directory.
    pub fn default_dir(data: &Path) -> PathBuf {
        let name = data
            .file_name()
            .map_or_else(|| "halflife".into(), |n| n.to_string_lossy().into_owned());
        data.with_file_name(format!("{name}-backup"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `BGSAVE` puts its checkpoint.
    pub fn checkpoint_dir(&self) -> PathBuf {
        self.dir.join("bgsave")
    }

    /// Claims the one job slot.
    fn claim(&self, job: Job, schedule: bool) -> Result<bool, Refused> {
        let mut st = self.state.lock();
        match st.running {
            Some((Job::Bgsave, _)) => Err(Refused::BgsaveRunning),
            Some((Job::Backup, _)) if job == Job::Bgsave && schedule => {
                st.scheduled = true;
                Ok(false)
            }
            Some((Job::Backup, _)) => Err(Refused::BackupRunning),
            None => {
                st.running = Some((job, Instant::now()));
                Ok(true)
            }
        }
    }

    /// Frees the slot after a job; returns whether a scheduled `BGSAVE` is due.
    fn finish(&self, ok: Option<u64>) -> bool {
        let mut st = self.state.lock();
        let (job, started) = st.running.take().expect("a job ran");
        if job == Job::Bgsave {
            st.last_secs = started.elapsed().as_secs() as i64;
            st.last_ok = ok.is_some();
            st.last_try = now_secs();
        }
        if let Some(seq) = ok {
            st.last_save = now_secs();
            st.last_save_seq = seq;
            st.saves += 1;
        }
        self.idle.notify_all();
        std::mem::take(&mut st.scheduled)
    }

    /// `BGSAVE`: starts a checkpoint on its own thread. `Ok(true)`: started; `Ok(false)`:
    /// scheduled after the running backup.
    pub fn bgsave(self: &Arc<Self>, db: Arc<DB>, schedule: bool) -> Result<bool, Refused> {
        if !self.claim(Job::Bgsave, schedule)? {
            return Ok(false);
        }
        self.spawn_bgsave(db);
        Ok(true)
    }

    fn spawn_bgsave(self: &Arc<Self>, db: Arc<DB>) {
        let me = self.clone();
        tracing::info!("Background saving started");
        std::thread::spawn(move || {
            let r = me.checkpoint(&db);
            match &r {
                Ok(seq) => tracing::info!(
                    "Background saving terminated with success ({}, every write up to sequence {seq})",
                    me.checkpoint_dir().display()
                ),
                Err(e) => tracing::warn!("Background saving error: {e}"),
            }
            // The engine is let go before the job counts as ended (shutdown closes it
            // then). A scheduled BGSAVE cannot be pending here: it waits only for a backup.
            drop(db);
            let _ = me.finish(r.ok());
        });
    }

    /// `SAVE`: a checkpoint made now, on the caller's thread.
    pub fn save(&self, db: &DB) -> Result<Result<u64, String>, Refused> {
        self.claim(Job::Bgsave, false)?;
        let r = self.checkpoint(db);
        self.finish(r.as_ref().ok().copied());
        Ok(r)
    }

    /// Replaces `bgsave/` by a new checkpoint (the module docs' steps); returns the
    /// sequence number it holds every write up to.
    fn checkpoint(&self, db: &DB) -> Result<u64, String> {
        let dest = self.checkpoint_dir();
        let tmp = self.dir.join("bgsave.tmp");
        let old = self.dir.join("bgsave.old");
        let fail = |what: &str, p: &Path, e: &dyn std::fmt::Display| {
            format!("{what} {}: {e}", p.display())
        };
        let fs = &self.storage;
        fs.create_dir_all(&self.dir)
            .map_err(|e| fail("creating", &self.dir, &e))?;
        // What a run cut short left: `bgsave/` (or, if it is missing, `bgsave.old/`) is
        // whole; the engine's own staging directory of `bgsave.tmp` too.
        let staging = self.dir.join("bgsave.tmp.checkpoint-tmp");
        for d in [&tmp, &staging, &old] {
            if fs.exists(d) && (d != &old || fs.exists(&dest)) {
                std::fs::remove_dir_all(d).map_err(|e| fail("removing", d, &e))?;
            }
        }
        let info = db
            .checkpoint(&tmp)
            .map_err(|e| fail("checkpoint into", &tmp, &e))?;
        if fs.exists(&dest) {
            fs.rename(&dest, &old)
                .map_err(|e| fail("renaming", &dest, &e))?;
        }
        fs.rename(&tmp, &dest)
            .map_err(|e| fail("renaming", &tmp, &e))?;
        fs.sync_dir(&self.dir)
            .map_err(|e| fail("syncing", &self.dir, &e))?;
        if fs.exists(&old) {
            // Not needed for the state above to hold: a removal a cut undoes is redone by
            // the next run.
            std::fs::remove_dir_all(&old).map_err(|e| fail("removing", &old, &e))?;
        }
        Ok(info.sequence)
    }

    /// `BACKUP CREATE`: an incremental backup made now, on the caller's thread; a
    /// `BGSAVE SCHEDULE` that waited for it starts after it.
    pub fn create(
        self: &Arc<Self>,
        db: Arc<DB>,
    ) -> Result<Result<CreateReport, engine::Error>, Refused> {
        self.claim(Job::Backup, false)?;
        let r = self.engine().and_then(|be| be.create(&db));
        if self.finish(r.as_ref().ok().map(|r| r.meta.sequence))
            && self.claim(Job::Bgsave, false).is_ok()
        {
            self.spawn_bgsave(db);
        }
        Ok(r)
    }

    /// The backup engine over `backup-dir` (locked while it is held).
    pub fn engine(&self) -> engine::Result<BackupEngine> {
        BackupEngine::open(&self.dir)
    }

    /// `save`'s value: pairs of `<seconds> <changes>`, or empty (no automatic save).
    pub fn parse_points(v: &str) -> Result<Vec<(u64, u64)>, String> {
        let n: Vec<u64> = v
            .split_ascii_whitespace()
            .map(|w| {
                w.parse::<u64>()
                    .map_err(|_| "Invalid save parameters".to_string())
            })
            .collect::<Result<_, _>>()?;
        if !n.len().is_multiple_of(2) {
            return Err("Invalid save parameters".into());
        }
        Ok(n.chunks(2).map(|p| (p[0], p[1])).collect())
    }

    pub fn set_points(&self, points: Vec<(u64, u64)>) {
        self.state.lock().points = points;
    }

    /// `save` as `CONFIG GET` shows it.
    pub fn points_text(&self) -> String {
        let st = self.state.lock();
        let words: Vec<String> = st.points.iter().map(|(s, c)| format!("{s} {c}")).collect();
        words.join(" ")
    }

    /// The `save` point reached now (`seq`: the engine's sequence number), if any and no
    /// job runs: at least its changes and its seconds since the last successful save, and
    /// after a failed `BGSAVE` 5 s since it, as Redis waits before it tries again.
    pub fn due(&self, seq: u64) -> Option<(u64, u64)> {
        let st = self.state.lock();
        let now = now_secs();
        let changes = seq.saturating_sub(st.last_save_seq);
        if st.running.is_some() || (!st.last_ok && now < st.last_try + 5) {
            return None;
        }
        st.points
            .iter()
            .copied()
            .find(|&(secs, min)| changes >= min.max(1) && now >= st.last_save + secs)
    }

    /// `LASTSAVE`.
    pub fn last_save(&self) -> u64 {
        self.state.lock().last_save
    }

    /// `INFO persistence`'s `rdb_*` fields; `seq` is the engine's sequence number now.
    pub fn info(&self, seq: u64) -> Vec<(&'static str, String)> {
        let st = self.state.lock();
        let bgsave = st.running.filter(|(j, _)| *j == Job::Bgsave);
        vec![
            (
                "rdb_changes_since_last_save",
                seq.saturating_sub(st.last_save_seq).to_string(),
            ),
            (
                "rdb_bgsave_in_progress",
                (bgsave.is_some() as u8).to_string(),
            ),
            ("rdb_last_save_time", st.last_save.to_string()),
            (
                "rdb_last_bgsave_status",
                if st.last_ok { "ok" } else { "err" }.into(),
            ),
            ("rdb_last_bgsave_time_sec", st.last_secs.to_string()),
            (
                "rdb_current_bgsave_time_sec",
                bgsave
                    .map_or(-1, |(_, t)| t.elapsed().as_secs() as i64)
                    .to_string(),
            ),
            ("rdb_saves", st.saves.to_string()),
            (
                "halflife_backup_in_progress",
                (st.running.is_some_and(|(j, _)| j == Job::Backup) as u8).to_string(),
            ),
            ("halflife_backup_dir", self.dir.display().to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::powercut::{CutConfig, Moment, PowerCutStorage};

    /// What the checkpoint in `bgsave/` holds of keys `a` and `b`.
    fn checkpoint_keys(backup: &Path) -> (bool, bool) {
        let db = DB::open(backup.join("bgsave"), engine::Options::default()).unwrap();
        let has = |k: &[u8]| db.get(k).unwrap().is_some();
        let r = (has(b"a"), has(b"b"));
        db.close().unwrap();
        r
    }

    /// A power cut at every step of a `BGSAVE` that replaces an older checkpoint, with
    /// directory entries lost (the POSIX contract) and kept (a process kill, or ext4):
    /// `bgsave/` after the next start is always one whole checkpoint, the old one or the
    /// new one.
    #[test]
    fn a_cut_at_any_step_leaves_the_old_or_the_new_checkpoint() {
        for lose_dir_entries in [true, false] {
            let mut saw = (false, false);
            for n in 1.. {
                let t = tempfile::tempdir().unwrap();
                let (data, backup) = (t.path().join("db"), t.path().join("backup"));
                let db = Arc::new(DB::open(&data, engine::Options::default()).unwrap());
                db.put(b"a", b"1").unwrap();
                let first = Backups::new(backup.clone(), &db).unwrap();
                first.save(&db).unwrap().unwrap();
                db.put(b"b", b"2").unwrap();
                // The checkpoint's own steps are the engine's; only the server's steps
                // go through this storage, so the n-th call is the n-th step here.
                let cut = PowerCutStorage::new(
                    n,
                    Moment::AfterOps(n),
                    CutConfig {
                        lose_dir_entries,
                        keep_unsynced: false,
                    },
                    &t.path().join("shadow"),
                );
                let mut second = Backups::new(backup.clone(), &db).unwrap();
                second.storage = cut.clone() as Arc<dyn Storage>;
                let r = second.save(&db).unwrap();
                let was_cut = cut.is_cut();
                drop(second);
                cut.apply();
                // The next start.
                drop(Backups::new(backup.clone(), &db).unwrap());
                let (a, b) = checkpoint_keys(&backup);
                assert!(a, "cut at step {n}: the checkpoint lost a write it held");
                if was_cut {
                    assert!(r.is_err(), "cut at step {n} and the save succeeded");
                    saw.0 |= !b;
                    saw.1 |= b;
                } else {
                    assert!(r.is_ok() && b, "uncut save at step {n}: {r:?}");
                    break;
                }
                assert!(n < 20, "the save never ran uncut");
            }
            assert!(saw.0, "no cut left the old checkpoint ({lose_dir_entries})");
        }
    }
}
