//! A [`GcHost`] whose tree is a map from key to pointer, for the GC jobs' tests: it logs
//! every call that changes something, keeps a real [`Version`] (so that the value files'
//! live and garbage bytes are the engine's own accounting), and runs the data-driven
//! scripts under `testdata/` (Pebble's style: a command, its input lines, `----`, and the
//! output expected; `HALFLIFE_REWRITE=1` writes the outputs found instead).

use super::host::{GcHost, GcJob, Install, Liveness, Record, Writeback};
use super::{IndexMapJob, WriteBack};
use crate::error::{Error, Result};
use crate::gc::early_garbage::EarlyGarbage;
use crate::gc::placement::{GcRound, JobTally, Kept, Placement};
use crate::gc::recent_pointers::RecentPointers;
use crate::internal_key::{SeqNo, ValueKind};
use crate::io::{FileStorage, IoCause, Storage};
use crate::options::Compression;
use crate::version::{Found, Version, VersionEdit};
use crate::vlog::file::BlobMeta;
use crate::vlog::{BlobFile, IndexMap, ValueFileWriter, ValuePointer};
use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The sequence number the map host's readers see.
const VISIBLE_SEQ: SeqNo = 1000;

/// How a test input's record stands in the tree.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Rec {
    /// Its key points at it.
    Live,
    /// Nothing reads it; compaction counted it as garbage.
    Dead,
    /// Only a snapshot reads it (its key points elsewhere).
    Snapshot,
}

/// A host whose tree is a map from key to pointer.
pub(crate) struct MapHost {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    pub tree: RefCell<BTreeMap<Vec<u8>, ValuePointer>>,
    pub version: RefCell<Arc<Version>>,
    next_file: Cell<u64>,
    pub log: RefCell<String>,
    /// Keys the "user" overwrites (with a small value) between the job's lookups and its
    /// write-back or install; for the index-map job, compaction drops their old pointers
    /// meanwhile.
    pub overwritten_meanwhile: RefCell<Vec<Vec<u8>>>,
    /// Records (by key) that only a snapshot reads.
    snapshot_reads: RefCell<Vec<ValuePointer>>,
    /// Keys whose newest write is still in a memtable (no flush has found the record it
    /// hides); the tree already gives that write.
    pub in_memtable: RefCell<Vec<Vec<u8>>>,
    /// The n-th file creation fails (1-based), if set.
    pub fail_create: Option<u64>,
    pub file_size: u64,
}

impl MapHost {
    pub fn new(dir: &Path) -> MapHost {
        MapHost {
            dir: dir.to_path_buf(),
            storage: Arc::new(FileStorage::new()),
            tree: RefCell::default(),
            version: RefCell::new(Arc::new(Version::empty(1))),
            next_file: Cell::new(100),
            log: RefCell::default(),
            overwritten_meanwhile: RefCell::default(),
            snapshot_reads: RefCell::default(),
            in_memtable: RefCell::default(),
            fail_create: None,
            file_size: 1 << 20,
        }
    }

    /// Writes a value file of `records` (key, value, how it stands) as file `number`,
    /// points the tree at the live ones, adds the file to the version with the dead ones
    /// counted as garbage (as compaction counts them), and returns the file.
    pub fn input(&self, number: u64, records: &[(&str, &str, Rec)]) -> Arc<BlobFile> {
        let (_, mut w) = ValueFileWriter::create(
            &*self.storage,
            &self.dir,
            number,
            IoCause::ValueLog,
            Compression::None,
        )
        .unwrap();
        let (mut bytes, mut entries) = (0, 0);
        for (k, v, rec) in records {
            let p = w.add(k.as_bytes(), v.as_bytes()).unwrap();
            match rec {
                Rec::Live => {
                    self.tree.borrow_mut().insert(k.as_bytes().to_vec(), p);
                }
                Rec::Dead => {
                    bytes += p.size as u64;
                    entries += 1;
                }
                Rec::Snapshot => self.snapshot_reads.borrow_mut().push(p),
            }
        }
        let meta: BlobMeta = w.finish().unwrap();
        self.install(&VersionEdit {
            added_blobs: vec![meta],
            blob_garbage: vec![(number, bytes, entries)],
            ..Default::default()
        });
        self.file(number)
    }

    /// The value file `number` of the current version.
    pub fn file(&self, number: u64) -> Arc<BlobFile> {
        self.version.borrow().blobs[&number].clone()
    }

    fn install(&self, edit: &VersionEdit) {
        self.install_maps(edit, &HashMap::new());
    }

    fn install_maps(&self, edit: &VersionEdit, maps: &HashMap<u64, Arc<IndexMap>>) {
        let mut v = self.version.borrow_mut();
        *v = Arc::new(v.apply_with_maps(edit, &self.dir, &self.storage, &None, maps));
    }

    fn line(&self, s: String) {
        let mut l = self.log.borrow_mut();
        l.push_str(&s);
        l.push('\n');
    }

    /// Takes what the log holds.
    pub fn take_log(&self) -> String {
        std::mem::take(&mut *self.log.borrow_mut())
    }

    /// The tree: key -> the file its value is in now (through the index maps).
    pub fn tree(&self) -> String {
        let v = self.version.borrow();
        let t = self.tree.borrow();
        t.iter()
            .map(|(k, p)| {
                let at = v.resolve(p).map_or("?".to_string(), |r| r.file.to_string());
                format!("{}->{at}", String::from_utf8_lossy(k))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The version's value files with their live and garbage bytes, and its index maps.
    pub fn files(&self) -> String {
        let v = self.version.borrow();
        let mut s = String::new();
        for b in v.blobs.values() {
            writeln!(
                s,
                "file {}: {} records, live {} garbage {}{}",
                b.number,
                b.entries,
                b.live_bytes(),
                b.garbage_bytes(),
                if b.is_pending() { " (pending)" } else { "" }
            )
            .unwrap();
        }
        for m in v.maps.values() {
            writeln!(s, "map {}: {} entries", m.target(), m.len()).unwrap();
        }
        s
    }

    /// A user write of a small value to each key overwritten meanwhile: the key no longer
    /// points into any file. Returns the pointers it dropped.
    fn overwrite_meanwhile(&self) -> Vec<ValuePointer> {
        let mut t = self.tree.borrow_mut();
        self.overwritten_meanwhile
            .take()
            .iter()
            .filter_map(|k| t.remove(k))
            .collect()
    }

    fn points_at(&self, key: &[u8], ptr: &ValuePointer) -> bool {
        let v = self.version.borrow();
        self.tree.borrow().get(key).and_then(|p| v.resolve(p)) == Some(*ptr)
    }
}

/// An edit as one log line.
fn describe(e: &VersionEdit) -> String {
    let mut s = String::from("edit");
    let added: Vec<String> = e
        .added_blobs
        .iter()
        .map(|b| format!("{}({} entries)", b.number, b.entries))
        .collect();
    let maps: Vec<String> = e
        .added_maps
        .iter()
        .map(|(t, from)| format!("{t}<-{from:?}"))
        .collect();
    for (name, list) in [
        ("added", added),
        ("maps", maps),
        ("pending", e.gc_pending.iter().map(u64::to_string).collect()),
        (
            "deleted",
            e.deleted_blobs.iter().map(u64::to_string).collect(),
        ),
        ("settled", e.gc_settled.iter().map(u64::to_string).collect()),
        (
            "garbage",
            e.blob_garbage
                .iter()
                .map(|(f, _, n)| format!("{f}x{n}"))
                .collect(),
        ),
    ] {
        if !list.is_empty() {
            write!(s, " {name}=[{}]", list.join(",")).unwrap();
        }
    }
    s
}

impl GcHost for MapHost {
    fn is_live(&self, key: &[u8], ptr: &ValuePointer) -> Result<bool> {
        Ok(self.points_at(key, ptr))
    }

    fn create_value_file(&self) -> Result<(PathBuf, ValueFileWriter)> {
        let n = self.next_file.get();
        self.next_file.set(n + 1);
        if self.fail_create == Some(n - 99) {
            return Err(Error::corruption(&self.dir, "injected"));
        }
        let created = ValueFileWriter::create(
            &*self.storage,
            &self.dir,
            n,
            IoCause::GcWrite,
            Compression::None,
        )?;
        self.line(format!("create {n}"));
        Ok(created)
    }

    fn remove_file(&self, path: &Path) {
        self.line(format!(
            "remove {}",
            path.file_name().unwrap().to_string_lossy()
        ));
        let _ = self.storage.remove(path);
    }

    fn apply(&self, e: VersionEdit) -> Result<()> {
        self.line(describe(&e));
        self.install(&e);
        Ok(())
    }

    fn write_back(&self, entries: Vec<Writeback>) -> Result<Vec<bool>> {
        self.overwrite_meanwhile();
        let mut t = self.tree.borrow_mut();
        let flags: Vec<bool> = entries
            .into_iter()
            .map(|(k, old, new)| {
                let still = t.get(&k) == Some(&old);
                if still {
                    t.insert(k, new);
                }
                still
            })
            .collect();
        drop(t);
        self.line(format!("write back {flags:?}"));
        Ok(flags)
    }

    fn make_durable(&self, _hidden_by: SeqNo) -> Result<()> {
        self.line("sync".into());
        Ok(())
    }

    fn relocated(&self, _bytes: u64, _from_expiring: bool) {}

    fn blob_file_size(&self) -> u64 {
        self.file_size
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    fn visible_seq(&self) -> SeqNo {
        VISIBLE_SEQ
    }

    fn version(&self) -> Arc<Version> {
        self.version.borrow().clone()
    }

    fn liveness(&self, records: &[Record], seq: SeqNo) -> Result<Vec<Liveness>> {
        assert_eq!(seq, VISIBLE_SEQ);
        let snapshot = self.snapshot_reads.borrow();
        Ok(records
            .iter()
            .map(|(ptr, key, _)| {
                if self.points_at(key, ptr) {
                    Liveness::Live(Found {
                        kind: ValueKind::Pointer,
                        seq: 1,
                        value: ptr.encode(),
                        expire_at: None,
                    })
                } else if snapshot.contains(ptr) {
                    Liveness::ForSnapshot
                } else {
                    Liveness::Dead(VISIBLE_SEQ)
                }
            })
            .collect())
    }

    fn hidden_by_memtable(
        &self,
        key: &[u8],
        ptr: &ValuePointer,
        seq: SeqNo,
    ) -> Result<Option<SeqNo>> {
        assert_eq!(seq, VISIBLE_SEQ);
        let hidden = self.in_memtable.borrow().iter().any(|k| k == key)
            && !self.points_at(key, ptr)
            && !self.snapshot_reads.borrow().contains(ptr);
        Ok(hidden.then_some(VISIBLE_SEQ))
    }

    fn install_with_maps(&self, install: &mut Install) -> Result<()> {
        // Compaction dropped the pointers of the keys written meanwhile.
        let drops = self.overwrite_meanwhile();
        let current = self.version();
        // The map tree has no tables: its index maps are never dropped.
        install(&current, drops, &mut |edit, maps| {
            self.line(describe(&edit));
            let loaded = maps.into_iter().map(|m| (m.target(), m)).collect();
            self.install_maps(&edit, &loaded);
            Ok(())
        })
    }
}

/// A placement that puts live records of keys starting with `s` ("short") in slot 1,
/// other live records and records kept without a lookup in slot 0, and records kept for a
/// snapshot in slot 2; it logs each job's tally.
#[derive(Default)]
pub(crate) struct TestPlacement {
    pub log: Mutex<String>,
    /// The garbage ratio the job reported after reading its inputs.
    read: Mutex<Option<f64>>,
}

impl Placement for TestPlacement {
    fn at_gc(&self, _round: &mut GcRound, kept: Kept<'_>) -> usize {
        match kept {
            Kept::Live { key, .. } => usize::from(key.starts_with(b"s")),
            Kept::Unlooked { .. } => 0,
            Kept::ForSnapshot => 2,
        }
    }

    fn gc_inputs_read(&self, _round: &mut GcRound, gc_ratio: f64) {
        *self.read.lock() = Some(gc_ratio);
    }

    fn gc_installed(&self, _round: &GcRound, t: &JobTally) {
        assert_eq!(Some(t.gc_ratio), self.read.lock().take());
        writeln!(
            self.log.lock(),
            "tally: input {} garbage ratio {:.2} lookups {} unlooked {} skipped {}",
            t.input_bytes,
            t.gc_ratio,
            t.lookups,
            t.unlooked,
            t.skipped_known
        )
        .unwrap();
    }
}

/// Runs the data-driven script `testdata/<name>` against a fresh map host. Commands:
///
/// * `input <n>` with lines `<key> <value> live|dead|snapshot`: writes value file `n`.
/// * `overwrite <key>...`: the keys are written again while the next job runs.
/// * `early <key>...`: the records the keys point at are known garbage by position (the
///   finder found them; the tree still points at them for the index-map job's test).
/// * `write-back <n>...` / `index-map <n>...`: runs the job on those files; prints its
///   calls, the tally (index-map), the files and the tree.
/// * `files`: prints the version's value files and the tree.
pub(crate) fn run_script(name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/gc/job/testdata")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = MapHost::new(dir.path());
    let placement = TestPlacement::default();
    let early = EarlyGarbage::default();
    let recent = Mutex::new(RecentPointers::new(0));
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        out.push_str(line);
        out.push('\n');
        let mut input = Vec::new();
        for l in lines.by_ref() {
            out.push_str(l);
            out.push('\n');
            if l == "----" {
                break;
            }
            input.push(l);
        }
        // Skip the expected output: up to a blank line.
        while lines.peek().is_some_and(|l| !l.is_empty()) {
            lines.next();
        }
        let mut words = line.split_whitespace();
        let cmd = words.next().unwrap();
        let args: Vec<&str> = words.collect();
        let numbers = || -> Vec<u64> { args.iter().map(|a| a.parse().unwrap()).collect() };
        let result = match cmd {
            "input" => {
                let records: Vec<(&str, &str, Rec)> = input
                    .iter()
                    .map(|l| {
                        let w: Vec<&str> = l.split_whitespace().collect();
                        let rec = match w[2] {
                            "live" => Rec::Live,
                            "dead" => Rec::Dead,
                            "snapshot" => Rec::Snapshot,
                            other => panic!("{name}: unknown record state {other}"),
                        };
                        (w[0], w[1], rec)
                    })
                    .collect();
                host.input(numbers()[0], &records);
                format!("{}tree: {}\n", host.files(), host.tree())
            }
            "overwrite" => {
                *host.overwritten_meanwhile.borrow_mut() =
                    args.iter().map(|a| a.as_bytes().to_vec()).collect();
                String::new()
            }
            "early" => {
                for k in &args {
                    early.record(&host.tree.borrow()[k.as_bytes()]);
                }
                String::new()
            }
            "write-back" | "index-map" => {
                let files: Vec<Arc<BlobFile>> = numbers().iter().map(|&n| host.file(n)).collect();
                let r = if cmd == "write-back" {
                    WriteBack.run(&host, &files)
                } else {
                    let job = IndexMapJob {
                        placement: &placement,
                        early: &early,
                        recent: &recent,
                    };
                    job.run(&host, &files)
                };
                let mut s = host.take_log();
                if let Err(e) = r {
                    writeln!(s, "error: {e}").unwrap();
                }
                s.push_str(&std::mem::take(&mut *placement.log.lock()));
                format!("{s}{}tree: {}\n", host.files(), host.tree())
            }
            "files" => format!("{}tree: {}\n", host.files(), host.tree()),
            other => panic!("{name}: unknown command {other}"),
        };
        out.push_str(&result);
    }
    if std::env::var_os("HALFLIFE_REWRITE").is_some() {
        std::fs::write(&path, &out).unwrap();
    } else {
        assert_eq!(
            text, out,
            "{name}: the output differs (HALFLIFE_REWRITE=1 rewrites the expected output)"
        );
    }
}
