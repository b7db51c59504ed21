//! A [`Storage`] that simulates a power cut, for the crash tests that a process kill cannot
//! stand in for (LevelDB's `FaultInjectionTestEnv` and RocksDB's `FaultInjectionTestFS`
//! model the same thing).
//!
//! A `SIGKILL` keeps the page cache: every byte the process handed to the kernel reaches
//! the disk. A power cut (or a kernel crash) keeps only what was synced. This storage does
//! the real I/O through [`FileStorage`] and keeps, per file, how many bytes were appended
//! and how many of them were synced; per directory, which entries were created, renamed or
//! removed since the directory's last [`Storage::sync_dir`]. At the cut (a chosen
//! [`Moment`], or [`PowerCutStorage::cut`]) every later call fails, as if the machine had
//! stopped; once the database is dropped, [`PowerCutStorage::apply`] rewrites the directory
//! into what the disk could hold after the cut:
//!
//! - each file keeps its synced bytes plus a random prefix of the bytes the kernel had
//!   (sometimes none of them, sometimes all), and the rest is cut off or, at random,
//!   left as zeros (a file whose size reached the disk before its data: preallocated
//!   windows, ext4's data=writeback);
//! - with [`CutConfig::lose_dir_entries`], every creation, rename and removal since the
//!   directory's last sync is undone (POSIX: a new file whose directory was not synced
//!   may vanish, a removed one may come back, a rename may not have happened).
//!
//! Bytes still buffered inside the process when the power went (appended, never written
//! out) are lost as they would be.

use engine::io::{FileStorage, IoCause, IoStats, ReadableFile, Storage, SyncHandle, WritableFile};
use engine::{Error, Result};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A kind of call, for choosing the moment of the cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Create,
    Append,
    Flush,
    Sync,
    Truncate,
    Rename,
    Remove,
    SyncDir,
}

/// When the power goes.
#[derive(Clone, Copy, Debug)]
pub enum Moment {
    /// Not by itself: only at [`PowerCutStorage::cut`].
    Never,
    /// At the `n`-th mutating call (1-based; appends, syncs, creations, renames, ...).
    AfterOps(u64),
    /// At the `nth` call of kind `op` on a file written for `cause` (`None`: any cause;
    /// renames, removals and directory syncs have none).
    At {
        op: Op,
        cause: Option<IoCause>,
        nth: u64,
    },
}

/// What the cut takes besides unsynced bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct CutConfig {
    /// Undo directory changes made since the directory's last sync (the POSIX contract;
    /// ext4 usually keeps them).
    pub lose_dir_entries: bool,
    /// Keep every byte the kernel had (a process kill rather than a power cut).
    pub keep_unsynced: bool,
}

#[derive(Clone, Copy)]
struct FileState {
    cause: Option<IoCause>,
    /// Bytes appended through the writer (some may still be buffered in the process).
    len: u64,
    /// Bytes made durable by a sync.
    synced: u64,
}

enum DirOp {
    Created(PathBuf),
    /// `from` was renamed to `to`.
    Renamed {
        from: PathBuf,
        to: PathBuf,
    },
    /// `path` was removed (or replaced by a rename); its bytes wait at `kept`.
    Removed {
        path: PathBuf,
        kept: PathBuf,
    },
}

/// How the disk is rewritten at [`PowerCutStorage::apply`].
struct Plan {
    /// (file, bytes to keep, bytes the kernel had, zeros instead of a cut).
    files: Vec<(PathBuf, u64, u64, bool)>,
    undo: Vec<DirOp>,
}

struct State {
    rng: StdRng,
    moment: Moment,
    config: CutConfig,
    ops: u64,
    /// Calls per (op, cause), for [`Moment::At`].
    counts: HashMap<(Op, Option<IoCause>), u64>,
    files: HashMap<PathBuf, FileState>,
    /// Directory changes not yet made durable by a sync of their directory, in order.
    dir_log: Vec<(PathBuf, DirOp)>,
    plan: Option<Plan>,
    kept_seq: u64,
}

/// The power-cut storage (see the module docs).
pub struct PowerCutStorage {
    fs: FileStorage,
    /// Where removed files wait until their directory is synced (same file system).
    shadow: PathBuf,
    state: Arc<Mutex<State>>,
}

fn cut_error(path: &Path) -> Error {
    Error::io(path, std::io::Error::other("power cut (simulated)"))
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::io(path, e)
}

fn parent(p: &Path) -> PathBuf {
    p.parent().map(Path::to_path_buf).unwrap_or_default()
}

impl State {
    /// Counts a mutating call; `Err` once the power is gone (the call that reaches the
    /// moment is the first to fail).
    fn step(&mut self, op: Op, cause: Option<IoCause>, path: &Path) -> Result<()> {
        if self.plan.is_some() {
            return Err(cut_error(path));
        }
        self.ops += 1;
        let mut count = |key| {
            let c = self.counts.entry(key).or_insert(0u64);
            *c += 1;
            *c
        };
        let n = cause.map_or(0, |c| count((op, Some(c))));
        let any = count((op, None));
        let now = match self.moment {
            Moment::Never => false,
            Moment::AfterOps(k) => self.ops >= k,
            Moment::At {
                op: o,
                cause: None,
                nth,
            } => o == op && any >= nth,
            Moment::At {
                op: o,
                cause: Some(c),
                nth,
            } => o == op && cause == Some(c) && n >= nth,
        };
        if now {
            self.cut();
            return Err(cut_error(path));
        }
        Ok(())
    }

    fn cut(&mut self) {
        if self.plan.is_some() {
            return;
        }
        let mut files = Vec::new();
        let mut names: Vec<_> = self.files.iter().map(|(p, s)| (p.clone(), *s)).collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, s) in names {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            // What the kernel had: the bytes appended and written out (a buffered writer
            // may hold the rest; a mapped one is longer than its records).
            let had = meta.len().min(s.len).max(s.synced);
            if had <= s.synced {
                continue;
            }
            let extra = had - s.synced;
            let keep = s.synced
                + match if self.config.keep_unsynced {
                    1
                } else {
                    self.rng.random_range(0..4)
                } {
                    0 => 0,
                    1 => extra,
                    _ => self.rng.random_range(0..=extra),
                };
            let zeros = self.rng.random_bool(0.3);
            files.push((path, keep, had, zeros));
        }
        let undo = if self.config.lose_dir_entries {
            std::mem::take(&mut self.dir_log)
                .into_iter()
                .map(|(_, op)| op)
                .collect()
        } else {
            Vec::new()
        };
        self.plan = Some(Plan { files, undo });
    }
}

impl PowerCutStorage {
    /// A storage that cuts the power at `moment`; `seed` decides what each file keeps.
    /// `shadow` is an empty directory on the same file system as the database.
    pub fn new(seed: u64, moment: Moment, config: CutConfig, shadow: &Path) -> Arc<Self> {
        std::fs::create_dir_all(shadow).expect("create the shadow directory");
        Arc::new(PowerCutStorage {
            fs: FileStorage::new(),
            shadow: shadow.to_path_buf(),
            state: Arc::new(Mutex::new(State {
                rng: StdRng::seed_from_u64(seed),
                moment,
                config,
                ops: 0,
                counts: HashMap::new(),
                files: HashMap::new(),
                dir_log: Vec::new(),
                plan: None,
                kept_seq: 0,
            })),
        })
    }

    /// Cuts the power now (if the moment has not come already).
    pub fn cut(&self) {
        self.state.lock().cut();
    }

    /// Whether the power is gone.
    pub fn is_cut(&self) -> bool {
        self.state.lock().plan.is_some()
    }

    /// Mutating calls so far.
    pub fn ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// Rewrites the files into what the disk holds after the cut. Call once the database
    /// (and every file handle it had) is dropped: a writer dropped after the cut may
    /// still write out its buffer, which this undoes.
    pub fn apply(&self) {
        let mut st = self.state.lock();
        st.cut();
        let plan = st.plan.as_ref().expect("cut above");
        for (path, keep, had, zeros) in &plan.files {
            let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) else {
                continue;
            };
            f.set_len(*had).unwrap();
            if *zeros {
                use std::os::unix::fs::FileExt;
                f.write_all_at(&vec![0u8; (*had - *keep) as usize], *keep)
                    .unwrap();
            } else {
                f.set_len(*keep).unwrap();
            }
        }
        for op in plan.undo.iter().rev() {
            match op {
                DirOp::Created(p) => {
                    let _ = std::fs::remove_file(p);
                }
                DirOp::Renamed { from, to } => {
                    let _ = std::fs::rename(to, from);
                }
                DirOp::Removed { path, kept } => {
                    let _ = std::fs::rename(kept, path);
                }
            }
        }
    }

    fn track_create(&self, st: &mut State, path: &Path, cause: Option<IoCause>, existed: bool) {
        st.files.insert(
            path.to_path_buf(),
            FileState {
                cause,
                len: 0,
                synced: 0,
            },
        );
        if !existed {
            st.dir_log
                .push((parent(path), DirOp::Created(path.to_path_buf())));
        }
    }

    /// Moves `path` aside instead of deleting it, while its directory is unsynced.
    fn keep_aside(&self, st: &mut State, path: &Path) -> Result<()> {
        st.kept_seq += 1;
        let kept = self.shadow.join(format!("{}", st.kept_seq));
        std::fs::rename(path, &kept).map_err(|e| io(path, e))?;
        st.dir_log.push((
            parent(path),
            DirOp::Removed {
                path: path.to_path_buf(),
                kept,
            },
        ));
        Ok(())
    }
}

struct CutWritable {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    cause: IoCause,
    state: Arc<Mutex<State>>,
}

impl CutWritable {
    fn update(&self, st: &mut State, synced: bool) {
        let len = self.inner.len();
        let f = st.files.entry(self.path.clone()).or_insert(FileState {
            cause: Some(self.cause),
            len,
            synced: 0,
        });
        f.len = len;
        if synced {
            f.synced = len;
        }
    }
}

impl WritableFile for CutWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut st = self.state.lock();
        st.step(Op::Append, Some(self.cause), &self.path)?;
        self.inner.append(data)?;
        self.update(&mut st, false);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let mut st = self.state.lock();
        st.step(Op::Flush, Some(self.cause), &self.path)?;
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        let mut st = self.state.lock();
        st.step(Op::Sync, Some(self.cause), &self.path)?;
        self.inner.sync()?;
        self.update(&mut st, true);
        Ok(())
    }

    fn sync_later(&mut self) -> Result<Option<Box<dyn SyncHandle>>> {
        let mut st = self.state.lock();
        st.step(Op::Flush, Some(self.cause), &self.path)?;
        let Some(inner) = self.inner.sync_later()? else {
            return Ok(None);
        };
        self.update(&mut st, false);
        Ok(Some(Box::new(CutSync {
            inner,
            path: self.path.clone(),
            cause: self.cause,
            state: self.state.clone(),
            len: self.inner.len(),
        })))
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// A sync taken apart from its writer: a cut before it completes loses what the writer
/// appended since the last completed sync; once it completes, the bytes the writer had
/// appended when the handle was taken survive a cut, and nothing appended after.
struct CutSync {
    inner: Box<dyn SyncHandle>,
    path: PathBuf,
    cause: IoCause,
    state: Arc<Mutex<State>>,
    len: u64,
}

impl SyncHandle for CutSync {
    fn sync(&self) -> Result<()> {
        let mut st = self.state.lock();
        st.step(Op::Sync, Some(self.cause), &self.path)?;
        self.inner.sync()?;
        if let Some(f) = st.files.get_mut(&self.path) {
            f.synced = f.synced.max(self.len);
        }
        Ok(())
    }
}

struct CutReadable {
    inner: Arc<dyn ReadableFile>,
    state: Arc<Mutex<State>>,
}

impl ReadableFile for CutReadable {
    fn read_at(&self, offset: u64, len: usize, cause: IoCause) -> Result<Vec<u8>> {
        if self.state.lock().plan.is_some() {
            return Err(cut_error(self.inner.path()));
        }
        self.inner.read_at(offset, len, cause)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}

impl Storage for PowerCutStorage {
    fn create(&self, path: &Path, cause: IoCause) -> Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.step(Op::Create, Some(cause), path)?;
        let existed = path.exists();
        let inner = self.fs.create(path, cause)?;
        self.track_create(&mut st, path, Some(cause), existed);
        Ok(Box::new(CutWritable {
            inner,
            path: path.to_path_buf(),
            cause,
            state: self.state.clone(),
        }))
    }

    fn open_append(&self, path: &Path, cause: IoCause) -> Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.step(Op::Create, Some(cause), path)?;
        let inner = self.fs.open_append(path, cause)?;
        let len = inner.len();
        let prior = st.files.get(path).copied();
        st.files.insert(
            path.to_path_buf(),
            FileState {
                cause: Some(cause),
                len,
                synced: prior.map_or(len, |p| p.synced.min(len)),
            },
        );
        Ok(Box::new(CutWritable {
            inner,
            path: path.to_path_buf(),
            cause,
            state: self.state.clone(),
        }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        if self.is_cut() {
            return Err(cut_error(path));
        }
        Ok(Arc::new(CutReadable {
            inner: self.fs.open(path)?,
            state: self.state.clone(),
        }))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let mut st = self.state.lock();
        let cause = st.files.get(path).and_then(|f| f.cause);
        st.step(Op::Truncate, cause, path)?;
        self.fs.truncate(path, len)?;
        if let Some(f) = st.files.get_mut(path) {
            f.len = len;
            f.synced = len;
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.step(Op::Remove, None, path)?;
        if !path.exists() {
            return self.fs.remove(path);
        }
        if st.config.lose_dir_entries {
            self.keep_aside(&mut st, path)?;
        } else {
            self.fs.remove(path)?;
        }
        st.files.remove(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.step(Op::Rename, None, from)?;
        if st.config.lose_dir_entries && to.exists() {
            self.keep_aside(&mut st, to)?;
        }
        self.fs.rename(from, to)?;
        if let Some(f) = st.files.remove(from) {
            st.files.insert(to.to_path_buf(), f);
        }
        st.files.remove(from);
        let op = DirOp::Renamed {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
        };
        // A rename across directories is durable once both are synced; it is logged under
        // the destination and undone if that one was not synced (the engine syncs the
        // destination first).
        st.dir_log.push((parent(to), op));
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.step(Op::SyncDir, None, dir)?;
        self.fs.sync_dir(dir)?;
        let (now, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut st.dir_log)
            .into_iter()
            .partition(|(d, _)| d == dir);
        st.dir_log = rest;
        for (_, op) in now {
            if let DirOp::Removed { kept, .. } = op {
                let _ = std::fs::remove_file(kept);
            }
        }
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        if self.is_cut() {
            return Err(cut_error(dir));
        }
        self.fs.create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        if self.is_cut() {
            return Err(cut_error(dir));
        }
        self.fs.list(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.fs.exists(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        if self.is_cut() {
            return Err(cut_error(path));
        }
        self.fs.file_size(path)
    }

    fn stats(&self) -> &IoStats {
        self.fs.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage(dir: &Path, seed: u64, config: CutConfig) -> Arc<PowerCutStorage> {
        PowerCutStorage::new(seed, Moment::Never, config, &dir.join("shadow"))
    }

    /// A fresh power-cut storage with one file open: its directory, the storage, the
    /// file's path and its writer.
    fn one_file(
        seed: u64,
        cause: IoCause,
    ) -> (
        tempfile::TempDir,
        Arc<PowerCutStorage>,
        PathBuf,
        Box<dyn WritableFile>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let s = storage(dir.path(), seed, CutConfig::default());
        let p = dir.path().join("f");
        let w = s.create(&p, cause).unwrap();
        (dir, s, p, w)
    }

    /// A file of 1000 bytes of 1 made durable, then 1000 bytes of 2 that were not: after
    /// the cut the first are all there, and of the rest any part.
    fn assert_kept_the_durable_1000(p: &Path) {
        let b = std::fs::read(p).unwrap();
        assert!(b.len() >= 1000 && b.len() <= 2000, "{}", b.len());
        assert!(b[..1000].iter().all(|&x| x == 1));
        assert!(b[1000..].iter().all(|&x| x == 2 || x == 0));
    }

    #[test]
    fn synced_bytes_survive_and_unsynced_ones_may_not() {
        for seed in 0..40 {
            let (_dir, s, p, mut w) = one_file(seed, IoCause::Wal);
            w.append(&[1u8; 1000]).unwrap();
            w.sync().unwrap();
            w.append(&[2u8; 1000]).unwrap();
            w.flush().unwrap();
            s.cut();
            assert!(w.append(b"x").is_err() && w.sync().is_err());
            drop(w);
            s.apply();
            assert_kept_the_durable_1000(&p);
        }
    }

    #[test]
    fn a_sync_apart_from_the_writer_keeps_what_was_appended_when_it_was_taken() {
        for seed in 0..40 {
            let (_dir, s, p, mut w) = one_file(seed, IoCause::ValueLog);
            w.append(&[1u8; 1000]).unwrap();
            let h = w.sync_later().unwrap().expect("plain files sync apart");
            // Appended after the handle was taken, before it runs: not covered by it.
            w.append(&[2u8; 1000]).unwrap();
            w.flush().unwrap();
            h.sync().unwrap();
            s.cut();
            assert!(h.sync().is_err(), "a sync after the cut fails");
            drop(w);
            s.apply();
            assert_kept_the_durable_1000(&p);
        }
        // Not run before the cut: it made nothing durable.
        let lost = (0..40).any(|seed| {
            let (_dir, s, p, mut w) = one_file(seed, IoCause::ValueLog);
            w.append(&[1u8; 1000]).unwrap();
            let _h = w.sync_later().unwrap();
            s.cut();
            drop(w);
            s.apply();
            std::fs::read(&p).unwrap().len() < 1000
        });
        assert!(lost, "an unsynced handle kept every byte in 40 cuts");
    }

    #[test]
    fn unsynced_directory_changes_are_undone_only_when_asked() {
        for lose in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path().join("db");
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("old"), b"old").unwrap();
            std::fs::write(d.join("gone"), b"gone").unwrap();
            let s = storage(
                dir.path(),
                1,
                CutConfig {
                    lose_dir_entries: lose,
                    keep_unsynced: false,
                },
            );
            let mut w = s.create(&d.join("tmp"), IoCause::Manifest).unwrap();
            w.append(b"new").unwrap();
            w.sync().unwrap();
            drop(w);
            s.rename(&d.join("tmp"), &d.join("old")).unwrap();
            s.remove(&d.join("gone")).unwrap();
            let mut w = s.create(&d.join("synced"), IoCause::Flush).unwrap();
            w.append(b"s").unwrap();
            w.sync().unwrap();
            drop(w);
            s.sync_dir(&d).unwrap();
            let mut w = s.create(&d.join("late"), IoCause::Flush).unwrap();
            w.append(b"l").unwrap();
            w.sync().unwrap();
            drop(w);
            s.cut();
            s.apply();
            assert_eq!(std::fs::read(d.join("old")).unwrap(), b"new");
            assert!(!d.join("gone").exists());
            assert!(d.join("synced").exists());
            assert_eq!(d.join("late").exists(), !lose);
        }
    }

    #[test]
    fn an_unsynced_rename_and_removal_are_undone() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("db");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("CURRENT"), b"one").unwrap();
        std::fs::write(d.join("gone"), b"gone").unwrap();
        let s = storage(
            dir.path(),
            1,
            CutConfig {
                lose_dir_entries: true,
                keep_unsynced: false,
            },
        );
        let mut w = s.create(&d.join("CURRENT.tmp"), IoCause::Manifest).unwrap();
        w.append(b"two").unwrap();
        w.sync().unwrap();
        drop(w);
        s.rename(&d.join("CURRENT.tmp"), &d.join("CURRENT"))
            .unwrap();
        s.remove(&d.join("gone")).unwrap();
        s.cut();
        s.apply();
        assert_eq!(std::fs::read(d.join("CURRENT")).unwrap(), b"one");
        assert_eq!(std::fs::read(d.join("gone")).unwrap(), b"gone");
        assert!(!d.join("CURRENT.tmp").exists());
    }

    #[test]
    fn the_moment_fails_the_call_that_reaches_it_and_every_later_one() {
        let dir = tempfile::tempdir().unwrap();
        let s = PowerCutStorage::new(
            0,
            Moment::At {
                op: Op::Sync,
                cause: Some(IoCause::Flush),
                nth: 2,
            },
            CutConfig::default(),
            &dir.path().join("shadow"),
        );
        let mut w = s.create(&dir.path().join("t"), IoCause::Flush).unwrap();
        let mut l = s.create(&dir.path().join("l"), IoCause::Wal).unwrap();
        w.append(b"a").unwrap();
        w.sync().unwrap();
        l.sync().unwrap();
        w.append(b"b").unwrap();
        assert!(w.sync().is_err());
        assert!(s.is_cut());
        assert!(l.append(b"c").is_err());
        assert!(s.list(dir.path()).is_err());
    }
}
