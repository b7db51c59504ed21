//! How a GC job moves the valid values of the value files it collects: what
//! [`super::gc::GcPolicy`] picks, a [`GcJob`] collects.
//!
//! Two mechanisms exist. The write-back job ([`WriteBack`], Titan's and BlobDB's GC) copies
//! each valid value into a new file and writes the new pointer back through the write path,
//! so that the tree points at the copy and the old file can go. The index-map job (TerarkDB
//! and the lifetime policies, `db/lifetime.rs`) writes no pointer: an index map from old to
//! new positions, installed with the copies, redirects the reads.
//!
//! A job knows the engine only through [`GcHost`]: whether a record is live, a new file, a
//! version edit, the write-back, and a barrier that makes durable what deleting the inputs
//! relies on. The engine's host is in `db/background.rs`; the tests below run the job
//! against a host whose tree is a map, and print what it saw after each step.

use super::{BlobFile, ValueFileWriter, ValuePointer};
use crate::error::Result;
use crate::io::IoCause;
use crate::version::VersionEdit;
use std::path::PathBuf;
use std::sync::Arc;

/// A pointer to write back: the key, the pointer GC found valid, the pointer to its copy.
pub(crate) type Writeback = (Vec<u8>, ValuePointer, ValuePointer);

/// What a GC job needs of the engine.
pub(crate) trait GcHost {
    /// Whether the newest version of `key` (as of now) points at `ptr`: the record is live.
    fn is_live(&self, key: &[u8], ptr: &ValuePointer) -> Result<bool>;
    /// A new, empty value file for the job's copies, and its path (removed if the job
    /// fails before an edit names it).
    fn create_value_file(&self) -> Result<(PathBuf, ValueFileWriter)>;
    /// Removes a file the job created and no edit names.
    fn remove_file(&self, path: &std::path::Path);
    /// Installs a version edit.
    fn apply(&self, edit: VersionEdit) -> Result<()>;
    /// Writes the new pointers through the write path, each only where the key still
    /// points at the record GC read; returns, per entry, whether it was written.
    fn write_back(&self, entries: Vec<Writeback>) -> Result<Vec<bool>>;
    /// Makes durable what the edit deleting the inputs relies on: the written-back pointers
    /// and the user writes that made the records GC skipped garbage (the lookups saw them
    /// before any sync).
    fn make_durable(&self) -> Result<()>;
    /// Counts bytes copied.
    fn relocated(&self, bytes: u64);
    /// Output files are cut at this size.
    fn blob_file_size(&self) -> u64;
}

/// One way of collecting value files.
pub(crate) trait GcJob {
    /// Collects `files`: their valid values move, then an edit deletes them.
    fn run(&self, host: &dyn GcHost, files: &[Arc<BlobFile>]) -> Result<()>;
}

/// Titan's GC: copy, then write the pointers back. It needs no snapshot check: compaction
/// keeps every version a snapshot can see and so counts no garbage in a file created after
/// the oldest snapshot (files older than a snapshot are pinned by it), so no such file
/// reaches the garbage ratio.
pub(crate) struct WriteBack;

impl GcJob for WriteBack {
    fn run(&self, host: &dyn GcHost, files: &[Arc<BlobFile>]) -> Result<()> {
        let mut writer: Option<ValueFileWriter> = None;
        let mut outputs = Vec::new();
        let mut writebacks = Vec::new();
        let mut created = Vec::new();
        let result = (|| -> Result<()> {
            for f in files {
                let mut r = f.scan(IoCause::GcRead)?;
                while let Some((ptr, key, value)) = r.next_record()? {
                    if !host.is_live(key, &ptr)? {
                        continue;
                    }
                    if writer
                        .as_ref()
                        .is_some_and(|w| w.len() >= host.blob_file_size())
                    {
                        outputs.push(writer.take().expect("checked").finish()?);
                    }
                    let w = match &mut writer {
                        Some(w) => w,
                        None => {
                            let (path, w) = host.create_value_file()?;
                            created.push(path);
                            writer.insert(w)
                        }
                    };
                    let np = w.add(key, value)?;
                    host.relocated(np.size as u64);
                    writebacks.push((key.to_vec(), ptr, np));
                }
            }
            if let Some(w) = writer.take() {
                outputs.push(w.finish()?);
            }
            Ok(())
        })();
        if let Err(e) = result {
            drop(writer);
            for p in created {
                host.remove_file(&p);
            }
            return Err(e);
        }
        // New files first, so that pointers written back into them can be read at once.
        if !outputs.is_empty() {
            host.apply(VersionEdit {
                gc_pending: outputs.iter().map(|b| b.number).collect(),
                added_blobs: outputs,
                ..Default::default()
            })?;
        }
        let news: Vec<ValuePointer> = writebacks.iter().map(|w| w.2).collect();
        let mut settled: Vec<u64> = news.iter().map(|p| p.file).collect();
        settled.dedup();
        let flags = if writebacks.is_empty() {
            Vec::new()
        } else {
            host.write_back(writebacks)?
        };
        // The edit below lets the collected files be deleted.
        host.make_durable()?;
        let mut edit = VersionEdit {
            deleted_blobs: files.iter().map(|f| f.number).collect(),
            gc_settled: settled,
            ..Default::default()
        };
        // Relocated records whose key moved on meanwhile are garbage from birth.
        for (np, ok) in news.iter().zip(&flags) {
            if !ok {
                edit.blob_garbage.push((np.file, np.size as u64, 1));
            }
        }
        host.apply(edit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::filename::value_file_name;
    use crate::io::{FileStorage, Storage};
    use crate::vlog::file::BlobMeta;
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;
    use std::fmt::Write;
    use std::path::Path;

    /// A host whose tree is a map from key to pointer; it logs every call it answers.
    struct MapHost {
        dir: PathBuf,
        storage: Arc<dyn Storage>,
        tree: RefCell<BTreeMap<Vec<u8>, ValuePointer>>,
        next_file: Cell<u64>,
        log: RefCell<String>,
        /// Keys the "user" overwrites between the copy and the write-back.
        overwritten_meanwhile: Vec<Vec<u8>>,
        /// The n-th file creation fails (1-based), if set.
        fail_create: Option<u64>,
        file_size: u64,
    }

    impl MapHost {
        fn new(dir: &Path) -> MapHost {
            MapHost {
                dir: dir.to_path_buf(),
                storage: Arc::new(FileStorage::new()),
                tree: RefCell::default(),
                next_file: Cell::new(100),
                log: RefCell::default(),
                overwritten_meanwhile: Vec::new(),
                fail_create: None,
                file_size: 1 << 20,
            }
        }

        /// Writes a value file of `records` (key, value) as file `number`, points the tree
        /// at the records whose key is live, and returns the file.
        fn input(&self, number: u64, records: &[(&str, &str, bool)]) -> Arc<BlobFile> {
            let path = value_file_name(&self.dir, number);
            let f = self.storage.create(&path, IoCause::ValueLog).unwrap();
            let mut w = ValueFileWriter::new(f, number).unwrap();
            for (k, v, live) in records {
                let p = w.add(k.as_bytes(), v.as_bytes()).unwrap();
                if *live {
                    self.tree.borrow_mut().insert(k.as_bytes().to_vec(), p);
                }
            }
            let meta: BlobMeta = w.finish().unwrap();
            Arc::new(BlobFile::new(&meta, &self.dir, self.storage.clone()))
        }

        fn line(&self, s: String) {
            let mut l = self.log.borrow_mut();
            l.push_str(&s);
            l.push('\n');
        }

        /// The tree after the job: key -> file.
        fn tree(&self) -> String {
            let t = self.tree.borrow();
            t.iter()
                .map(|(k, p)| format!("{}->{}", String::from_utf8_lossy(k), p.file))
                .collect::<Vec<_>>()
                .join(" ")
        }
    }

    impl GcHost for MapHost {
        fn is_live(&self, key: &[u8], ptr: &ValuePointer) -> Result<bool> {
            Ok(self.tree.borrow().get(key) == Some(ptr))
        }

        fn create_value_file(&self) -> Result<(PathBuf, ValueFileWriter)> {
            let n = self.next_file.get();
            self.next_file.set(n + 1);
            if self.fail_create == Some(n - 99) {
                return Err(Error::corruption(&self.dir, "injected"));
            }
            let path = value_file_name(&self.dir, n);
            let f = self.storage.create(&path, IoCause::GcWrite)?;
            self.line(format!("create {n}"));
            Ok((path, ValueFileWriter::new(f, n)?))
        }

        fn remove_file(&self, path: &Path) {
            self.line(format!(
                "remove {}",
                path.file_name().unwrap().to_string_lossy()
            ));
            let _ = self.storage.remove(path);
        }

        fn apply(&self, e: VersionEdit) -> Result<()> {
            let mut s = String::from("edit");
            let added: Vec<String> = e
                .added_blobs
                .iter()
                .map(|b| format!("{}({} entries)", b.number, b.entries))
                .collect();
            for (name, list) in [
                ("added", added),
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
            self.line(s);
            Ok(())
        }

        fn write_back(&self, entries: Vec<Writeback>) -> Result<Vec<bool>> {
            let mut t = self.tree.borrow_mut();
            for k in &self.overwritten_meanwhile {
                // A user write of a small value: the key no longer points into any file.
                t.remove(k);
            }
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

        fn make_durable(&self) -> Result<()> {
            self.line("sync".into());
            Ok(())
        }

        fn relocated(&self, _bytes: u64) {}

        fn blob_file_size(&self) -> u64 {
            self.file_size
        }
    }

    fn run(host: &MapHost, files: &[Arc<BlobFile>]) -> Result<()> {
        WriteBack.run(host, files)
    }

    #[test]
    fn live_values_are_copied_the_copies_installed_first_and_the_inputs_deleted_last() {
        let dir = tempfile::tempdir().unwrap();
        let host = MapHost::new(dir.path());
        let a = host.input(1, &[("a", "1", true), ("b", "2", false), ("c", "3", true)]);
        let b = host.input(2, &[("d", "4", false), ("e", "5", true)]);
        run(&host, &[a, b]).unwrap();
        assert_eq!(
            *host.log.borrow(),
            "create 100\n\
             edit added=[100(3 entries)] pending=[100]\n\
             write back [true, true, true]\n\
             sync\n\
             edit deleted=[1,2] settled=[100]\n"
        );
        assert_eq!(host.tree(), "a->100 c->100 e->100");
    }

    #[test]
    fn a_key_written_meanwhile_keeps_its_new_value_and_its_copy_is_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = MapHost::new(dir.path());
        host.overwritten_meanwhile = vec![b"a".to_vec()];
        let a = host.input(1, &[("a", "1", true), ("c", "3", true)]);
        run(&host, &[a]).unwrap();
        assert_eq!(
            *host.log.borrow(),
            "create 100\n\
             edit added=[100(2 entries)] pending=[100]\n\
             write back [false, true]\n\
             sync\n\
             edit deleted=[1] settled=[100] garbage=[100x1]\n"
        );
        assert_eq!(host.tree(), "c->100");
    }

    #[test]
    fn outputs_are_cut_at_the_file_size_and_a_file_of_garbage_is_only_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = MapHost::new(dir.path());
        host.file_size = 1;
        let a = host.input(1, &[("a", "1", true), ("b", "2", true)]);
        let dead = host.input(2, &[("x", "9", false)]);
        run(&host, &[a]).unwrap();
        assert_eq!(host.tree(), "a->100 b->101");
        host.log.borrow_mut().clear();
        run(&host, &[dead]).unwrap();
        assert_eq!(*host.log.borrow(), "sync\nedit deleted=[2]\n");
    }

    #[test]
    fn a_failed_job_removes_what_it_created_and_names_no_file_in_any_edit() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = MapHost::new(dir.path());
        host.file_size = 1;
        host.fail_create = Some(2);
        let a = host.input(1, &[("a", "1", true), ("b", "2", true)]);
        assert!(run(&host, &[a]).is_err());
        assert_eq!(*host.log.borrow(), "create 100\nremove 000100.vlog\n");
        assert!(!value_file_name(dir.path(), 100).exists());
        assert_eq!(host.tree(), "a->1 b->1");
    }
}
