//! The index-map job (paper 000 sec. 4.5, TerarkDB): GC without pointer write-back.
//! Validity by a tree lookup, valid values placed by the policy ([`Placement`]) into new
//! value files, one index map per new file from old positions to new, all installed by one
//! version edit. A job that dies before that edit leaves only orphan files, removed at the
//! next open (sec. 4.6).
//!
//! Garbage known by position ([`EarlyGarbage`]) spares work: a record known dead is neither
//! read nor looked up, and in a file whose dead records are all known the others are kept
//! without a tree lookup (but for those a write still in a memtable hides, which the
//! memtables answer).

use super::host::{GcHost, GcJob, Liveness, Record};
use crate::error::Result;
use crate::filename::index_map_file_name;
use crate::gc::early_garbage::EarlyGarbage;
use crate::gc::garbage::garbage_where;
use crate::gc::placement::{self, JobTally, Kept, Placement};
use crate::gc::recent_pointers::RecentPointers;
use crate::internal_key::SeqNo;
use crate::io::IoCause;
use crate::lifetime::FeatureRecord;
use crate::version::{Version, VersionEdit};
use crate::vlog::file::{BlobMeta, FILE_HEADER};
use crate::vlog::{BlobFile, IndexMap, IndexMapBuilder, ValueFileWriter, ValuePointer};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// A dead stretch of a value file shorter than this is read through rather than skipped.
/// At full scale, with 32 KiB GC read 12.9 GB of its 18.8 GB of input; below one 4 KiB
/// record it read 5.5 GB in as much time (docs/lifetime.md, "Garbage known by position").
const READ_THROUGH_GAP: u64 = 4 << 10;

/// Records of a GC input whose liveness lookups are issued together: a few hundred KiB of
/// values held at once (copied out of the scan's buffer), enough to keep
/// [`crate::io::parallel::LOOKUP_THREADS`] reads busy.
const GC_LOOKUP_BATCH: usize = 256;

/// The index-map job of a policy: where it places values, the garbage known by position,
/// and the newest flushed writes of recently flushed keys (the write sequence number of a
/// record kept without a lookup).
pub(crate) struct IndexMapJob<'a> {
    pub placement: &'a dyn Placement,
    pub early: &'a EarlyGarbage,
    pub recent: &'a Mutex<RecentPointers>,
}

impl GcJob for IndexMapJob<'_> {
    fn run(&self, host: &dyn GcHost, files: &[Arc<BlobFile>]) -> Result<()> {
        let early = self.early;
        let started = Instant::now();
        let (mut skipped_known, mut lookups, mut unlooked) = (0u64, 0u64, 0u64);
        let now = host.visible_seq();
        let mut round = self.placement.begin_gc(now);
        let v = host.version();
        let mut outputs = Outputs::new();
        // (input bytes, garbage bytes) per class of input file.
        let mut by_class = [(0u64, 0u64); 3];
        let (mut total, mut garbage) = (0u64, 0u64);
        // The newest write that hid a record this job drops (records known dead by
        // position are hidden by flushed writes, already durable).
        let mut hidden_by: SeqNo = 0;
        let result = (|| -> Result<()> {
            if let Some(f) = files.first() {
                will_need_live(early, f);
            }
            for (i, f) in files.iter().enumerate() {
                // The next input's live records are read by the kernel while this one's
                // are copied.
                if let Some(next) = files.get(i + 1) {
                    will_need_live(early, next);
                }
                let class_idx = f.lifetime.map_or(0, |l| l.class as usize);
                // Every dead record of a covered file is known (but for those of writes not
                // found yet): the others are kept without a lookup.
                // Not a file holding values with an expiry: those die without a write, so
                // no position of theirs is known dead.
                let expiring = f.expiry.holds_expiring();
                let covered = early.coverage.covers(f.number) && !expiring;
                // Records known dead are neither read nor looked up.
                let extents =
                    early.live_extents(f.number, FILE_HEADER as u64, f.size, READ_THROUGH_GAP);
                let mut r = f.scan_extents(IoCause::GcRead, extents)?;
                let mut read = 0u64;
                let mut batch: Vec<Record> = Vec::new();
                let mut eof = false;
                while !eof {
                    // A batch of records whose keys are looked up together, several at a
                    // time (`crate::io::parallel`).
                    batch.clear();
                    while batch.len() < GC_LOOKUP_BATCH {
                        let Some((ptr, key, value)) = r.next_record()? else {
                            eof = true;
                            break;
                        };
                        read += ptr.size as u64;
                        // A record known dead (in a gap read through) needs no lookup.
                        if early.contains(&ptr) {
                            garbage += ptr.size as u64;
                            by_class[class_idx].1 += ptr.size as u64;
                            continue;
                        }
                        if covered {
                            // Its only dead records not known by position: those hidden by
                            // writes still in a memtable. Copied, they would be garbage no
                            // one knows of (a fifth of what GC copied at the `lifetime`
                            // preset with a 64 MiB memtable).
                            if let Some(by) = host.hidden_by_memtable(key, &ptr, now)? {
                                hidden_by = hidden_by.max(by);
                                garbage += ptr.size as u64;
                                by_class[class_idx].1 += ptr.size as u64;
                                continue;
                            }
                            let written = written_at(&self.recent.lock(), &v, f, key, &ptr, now);
                            let slot = self
                                .placement
                                .at_gc(&mut round, Kept::Unlooked { key, written });
                            outputs.add(host, slot, &ptr, key, value, expiring)?;
                            unlooked += 1;
                            continue;
                        }
                        batch.push((ptr, key.to_vec(), value.to_vec()));
                    }
                    lookups += batch.len() as u64;
                    let found = host.liveness(&batch, now)?;
                    for ((ptr, key, value), liveness) in batch.iter().zip(found) {
                        let kept = match liveness {
                            Liveness::Live(found) => {
                                let (_, meta) = ValuePointer::decode(host.dir(), &found.value)?;
                                Kept::Live {
                                    key,
                                    seq: found.seq,
                                    features: FeatureRecord::after_pointer(host.dir(), meta)?,
                                }
                            }
                            // Still needed by a snapshot reader: kept; it dies with the
                            // snapshot.
                            Liveness::ForSnapshot => Kept::ForSnapshot,
                            Liveness::Dead(by) => {
                                hidden_by = hidden_by.max(by);
                                garbage += ptr.size as u64;
                                by_class[class_idx].1 += ptr.size as u64;
                                continue;
                            }
                        };
                        let slot = self.placement.at_gc(&mut round, kept);
                        outputs.add(host, slot, ptr, key, value, expiring)?;
                    }
                }
                // What was not read is known garbage.
                let skipped = f.record_bytes().saturating_sub(read);
                skipped_known += skipped;
                total += f.record_bytes();
                garbage += skipped;
                by_class[class_idx].0 += f.record_bytes();
                by_class[class_idx].1 += skipped;
            }
            outputs.finish()
        })();
        let sources: Vec<u64> = files.iter().map(|f| f.number).collect();
        let gc_ratio = if total == 0 {
            1.0
        } else {
            garbage as f64 / total as f64
        };
        let result = result.and_then(|()| {
            self.placement.gc_inputs_read(&mut round, gc_ratio);
            let mut edit = VersionEdit {
                deleted_blobs: sources.clone(),
                ..Default::default()
            };
            let mut maps = Vec::new();
            for (slot, mut meta, map) in std::mem::take(&mut outputs.done) {
                meta.lifetime = self.placement.file_lifetime(slot, now, Some(&round));
                meta.expiry = crate::vlog::FileExpiry::of_copies(files);
                maps.push(Arc::new(map.finish(
                    host.dir(),
                    host.storage(),
                    &sources,
                )?));
                edit.added_maps.push((meta.number, sources.clone()));
                edit.added_blobs.push(meta);
            }
            let copies: Vec<u64> = edit.added_blobs.iter().map(|b| b.number).collect();
            // The lookups saw writes perhaps not yet synced: a record they found overwritten
            // is dropped with its file, so the overwrite must outlive a power cut first
            // (without a WAL, only a flush keeps it).
            host.make_durable(hidden_by)?;
            let mut edit = Some(edit);
            let mut maps = Some(maps);
            host.install_with_maps(&mut |current, drops, apply| {
                let (mut edit, maps) = (edit.take().expect("once"), maps.take().expect("once"));
                let dropped = copies_dropped_during_gc(current, &maps, &drops);
                edit.blob_garbage = garbage_where(&dropped, |r| Some(*r));
                // Records found dead while the job ran, in the files it collected: their
                // copies are dead (the finder resolves a record through the maps only once
                // installed).
                let found_meanwhile: Vec<ValuePointer> = sources
                    .iter()
                    .flat_map(|&n| early.records_of(n))
                    .filter_map(|r| maps.iter().find_map(|m| m.lookup(&r)))
                    .collect();
                apply(edit, maps)?;
                for r in &found_meanwhile {
                    early.record(r);
                }
                early.counted(&dropped);
                early.coverage.inherit(&sources, &copies);
                Ok(())
            })?;
            self.placement.gc_installed(
                &round,
                &JobTally {
                    started,
                    now,
                    gc_ratio,
                    by_class,
                    input_bytes: total,
                    skipped_known,
                    lookups,
                    unlooked,
                },
            );
            Ok(())
        });
        if result.is_err() {
            for p in std::mem::take(&mut outputs.created) {
                host.remove_file(&p);
            }
        }
        result
    }
}

/// Asks the kernel to start reading the extents of `f` a scan will read
/// (`posix_fadvise(WILLNEED)`): a victim's live records are small extents between known dead
/// ones, and read one after another each was a device read the job waited for (8.6K waits,
/// 4.9 s of a 46 s run at the `lifetime` preset); queued together the device serves them
/// in parallel, ahead of the scan.
fn will_need_live(early: &EarlyGarbage, f: &BlobFile) {
    for (from, to) in early.live_extents(f.number, FILE_HEADER as u64, f.size, READ_THROUGH_GAP) {
        f.will_need(from, (to - from) as usize);
    }
}

/// The sequence number of the write of the record at `ptr` of `file`, kept without a
/// lookup: from the table of recent pointers when the key's newest flushed write there is
/// this record, else from the file's creation: close for a file the write path filled,
/// later than the write for a GC output's record (placed then as if younger than it is).
fn written_at(
    recent: &RecentPointers,
    v: &Version,
    file: &BlobFile,
    key: &[u8],
    ptr: &ValuePointer,
    now: SeqNo,
) -> SeqNo {
    match recent.newest(key) {
        Some(w) if w.pointer.and_then(|q| v.resolve(&q)) == Some(*ptr) => w.seq,
        _ => file.lifetime.map_or(now, |l| l.created_seq.min(now)),
    }
}

/// Pointers compaction dropped while the GC ran, into files it was collecting: if GC
/// copied their records, the copies (found through the job's new `maps`) are garbage.
fn copies_dropped_during_gc(
    v: &Version,
    maps: &[Arc<IndexMap>],
    drops: &[ValuePointer],
) -> Vec<ValuePointer> {
    drops
        .iter()
        .filter_map(|p| {
            let r = v.resolve(p)?;
            maps.iter().find_map(|m| m.lookup(&r))
        })
        .collect()
}

/// One output slot of a GC job: the value file being written and its index map.
struct Output {
    writer: ValueFileWriter,
    map: IndexMapBuilder,
}

/// A GC job's outputs: the open one per slot, the finished ones, and every path created
/// (removed if the job fails).
struct Outputs {
    open: Vec<Option<Output>>,
    done: Vec<(usize, BlobMeta, IndexMapBuilder)>,
    created: Vec<PathBuf>,
}

impl Outputs {
    fn new() -> Outputs {
        Outputs {
            open: (0..placement::CLASSES).map(|_| None).collect(),
            done: Vec::new(),
            created: Vec::new(),
        }
    }

    /// Copies the record at `ptr` (of a file holding values with an expiry if
    /// `from_expiring`) into the output of `slot`, mapping its old place.
    fn add(
        &mut self,
        host: &dyn GcHost,
        slot: usize,
        ptr: &ValuePointer,
        key: &[u8],
        value: &[u8],
        from_expiring: bool,
    ) -> Result<()> {
        if self.open[slot]
            .as_ref()
            .is_some_and(|o| o.writer.len() >= host.blob_file_size())
        {
            let o = self.open[slot].take().expect("checked above");
            self.done.push((slot, o.writer.finish()?, o.map));
        }
        if self.open[slot].is_none() {
            let (path, writer) = host.create_value_file()?;
            let n = writer.number();
            self.created.push(path);
            self.created.push(index_map_file_name(host.dir(), n));
            self.open[slot] = Some(Output {
                writer,
                map: IndexMapBuilder::new(n),
            });
        }
        let o = self.open[slot].as_mut().expect("opened above");
        let np = o.writer.add(key, value)?;
        o.map.add(ptr, &np);
        host.relocated(np.size as u64, from_expiring);
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        for (slot, o) in self.open.iter_mut().enumerate() {
            if let Some(o) = o.take() {
                self.done.push((slot, o.writer.finish()?, o.map));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gc::job::test_host::{run_script, MapHost, Rec::*, TestPlacement};

    fn run(host: &MapHost, early: &EarlyGarbage, files: &[Arc<BlobFile>]) -> (Result<()>, String) {
        let placement = TestPlacement::default();
        let recent = Mutex::new(RecentPointers::new(0));
        let job = IndexMapJob {
            placement: &placement,
            early,
            recent: &recent,
        };
        let r = job.run(host, files);
        let tally = std::mem::take(&mut *placement.log.lock());
        (r, tally)
    }

    #[test]
    fn copies_go_to_their_slots_with_one_map_each_and_one_edit_installs_them() {
        let dir = tempfile::tempdir().unwrap();
        let host = MapHost::new(dir.path());
        let early = EarlyGarbage::default();
        let a = host.input(1, &[("a", "1", Live), ("b", "2", Dead), ("s", "3", Live)]);
        let b = host.input(2, &[("d", "4", Snapshot), ("e", "5", Live)]);
        let (r, tally) = run(&host, &early, &[a, b]);
        r.unwrap();
        // Slot 0 (a, e), slot 1 (s), slot 2 (d, for a snapshot); no pointer is written.
        assert_eq!(
            host.take_log(),
            "create 100\ncreate 101\ncreate 102\nsync\n\
             edit added=[100(2 entries),101(1 entries),102(1 entries)] \
             maps=[100<-[1, 2],101<-[1, 2],102<-[1, 2]] deleted=[1,2]\n"
        );
        assert_eq!(
            tally,
            "tally: input 70 garbage ratio 0.20 lookups 5 unlooked 0 skipped 0\n"
        );
        // The tree still holds the old pointers; the maps lead them to the copies.
        assert_eq!(host.tree(), "a->100 e->100 s->101");
        assert!(host
            .version
            .borrow()
            .blobs
            .keys()
            .eq([100, 101, 102].iter()));
    }

    #[test]
    fn known_garbage_is_not_looked_up_and_a_covered_file_needs_no_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let host = MapHost::new(dir.path());
        let early = EarlyGarbage::default();
        let a = host.input(1, &[("a", "1", Live), ("b", "2", Live), ("c", "3", Live)]);
        // The finder found b dead (the tree here still points at it: the job must trust
        // the known garbage, not look it up).
        early.record(&host.tree.borrow()[&b"b"[..]]);
        let (r, tally) = run(&host, &early, &[a]);
        r.unwrap();
        assert_eq!(
            tally,
            "tally: input 42 garbage ratio 0.33 lookups 2 unlooked 0 skipped 0\n"
        );
        assert_eq!(host.tree(), "a->100 b->? c->100");
        // Every dead record of a file from 2 on is known: none of file 2 is looked up, but
        // the copies of file 1, which was not covered, are.
        early.coverage.cover_from(2);
        let b = host.input(2, &[("d", "4", Live), ("e", "5", Live)]);
        host.take_log();
        let (r, tally) = run(&host, &early, &[b]);
        r.unwrap();
        assert_eq!(
            tally,
            "tally: input 28 garbage ratio 0.00 lookups 0 unlooked 2 skipped 0\n"
        );
        let (r, tally) = run(&host, &early, &[host.file(100)]);
        r.unwrap();
        assert_eq!(
            tally,
            "tally: input 28 garbage ratio 0.00 lookups 2 unlooked 0 skipped 0\n"
        );
        assert_eq!(host.tree(), "a->102 b->? c->102 d->101 e->101");
        // A covered file's record hidden by a write still in a memtable (no flush has
        // found it yet) is garbage too: the memtables say so without a tree lookup, and it
        // is not copied. A key still pointing at its record is kept.
        let c = host.input(3, &[("f", "6", Live), ("g", "7", Live)]);
        host.tree.borrow_mut().remove(&b"f"[..]);
        *host.in_memtable.borrow_mut() = vec![b"f".to_vec(), b"g".to_vec()];
        host.take_log();
        let (r, tally) = run(&host, &early, &[c]);
        r.unwrap();
        assert_eq!(
            tally,
            "tally: input 28 garbage ratio 0.50 lookups 0 unlooked 1 skipped 0\n"
        );
        assert_eq!(
            host.take_log(),
            "create 103\nsync\nedit added=[103(1 entries)] maps=[103<-[3]] deleted=[3]\n"
        );
    }

    #[test]
    fn a_pointer_compaction_dropped_meanwhile_makes_its_copy_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let host = MapHost::new(dir.path());
        let early = EarlyGarbage::default();
        let a = host.input(1, &[("a", "1", Live), ("c", "3", Live)]);
        *host.overwritten_meanwhile.borrow_mut() = vec![b"a".to_vec()];
        run(&host, &early, &[a]).0.unwrap();
        assert_eq!(
            host.take_log(),
            "create 100\nsync\nedit added=[100(2 entries)] maps=[100<-[1]] deleted=[1] \
             garbage=[100x1]\n"
        );
        assert_eq!(
            host.files(),
            "file 100: 2 records, live 14 garbage 14\nmap 100: 2 entries\n"
        );
    }

    #[test]
    fn a_failed_job_removes_its_value_files_and_maps_and_installs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = MapHost::new(dir.path());
        host.fail_create = Some(2);
        let early = EarlyGarbage::default();
        let a = host.input(1, &[("a", "1", Live), ("s", "2", Live)]);
        assert!(run(&host, &early, &[a]).0.is_err());
        assert_eq!(
            host.take_log(),
            "create 100\nremove 000100.vlog\nremove 000100.vmap\n"
        );
        assert_eq!(host.tree(), "a->1 s->1");
    }

    #[test]
    fn script() {
        run_script("index_map");
    }
}
