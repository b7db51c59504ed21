//! Titan's and BlobDB's GC job: copy the valid values, then write their pointers back.

use super::host::{GcHost, GcJob};
use crate::error::Result;
use crate::internal_key::SeqNo;
use crate::io::IoCause;
use crate::version::VersionEdit;
use crate::vlog::{BlobFile, ValueFileWriter, ValuePointer};
use std::sync::Arc;

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
                    host.relocated(np.size as u64, f.expiry.holds_expiring());
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
        for o in &mut outputs {
            o.expiry = crate::vlog::FileExpiry::of_copies(files);
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
        // The written-back pointers are newer than any write the job saw.
        host.make_durable(SeqNo::MAX)?;
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
    use crate::filename::value_file_name;
    use crate::gc::job::test_host::{run_script, MapHost, Rec::*};

    fn run(host: &MapHost, files: &[Arc<BlobFile>]) -> Result<()> {
        WriteBack.run(host, files)
    }

    #[test]
    fn live_values_are_copied_the_copies_installed_first_and_the_inputs_deleted_last() {
        let dir = tempfile::tempdir().unwrap();
        let host = MapHost::new(dir.path());
        let a = host.input(1, &[("a", "1", Live), ("b", "2", Dead), ("c", "3", Live)]);
        let b = host.input(2, &[("d", "4", Dead), ("e", "5", Live)]);
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
        let host = MapHost::new(dir.path());
        *host.overwritten_meanwhile.borrow_mut() = vec![b"a".to_vec()];
        let a = host.input(1, &[("a", "1", Live), ("c", "3", Live)]);
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
        let a = host.input(1, &[("a", "1", Live), ("b", "2", Live)]);
        let dead = host.input(2, &[("x", "9", Dead)]);
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
        let a = host.input(1, &[("a", "1", Live), ("b", "2", Live)]);
        assert!(run(&host, &[a]).is_err());
        assert_eq!(*host.log.borrow(), "create 100\nremove 000100.vlog\n");
        assert!(!value_file_name(dir.path(), 100).exists());
        assert_eq!(host.tree(), "a->1 b->1");
    }

    #[test]
    fn script() {
        run_script("write_back");
    }
}
