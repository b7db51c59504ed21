//! Many separated values read at once: a scan's read-ahead (`db/iter.rs`).
//!
//! A scan over separated values returns its keys in the tree's order, but their values sit
//! wherever their writes put them, so read one at a time each is a random read and the
//! device works at queue depth 1: the reason Titan's users measure scans well below
//! RocksDB's. Given the pointers of the next entries, this module sorts them by (file,
//! offset), merges records that lie close together in one file into one read (a value
//! file written in key order, or rewritten by GC, turns a run of a scan into one
//! sequential read), then asks the storage to start every merged read but the first
//! ([`crate::io::ReadableFile::will_need`]: `posix_fadvise(WILLNEED)` on files) before it
//! reads them in order on the caller's thread. The device sees them all at once, as
//! WiscKey's range queries do with their prefetch threads, without a thread hop per batch:
//! a first version read them on a thread pool, and when the values were cached that
//! hand-off made scans twice as slow (docs/results/2026-11-28-scans.md).
//!
//! What comes back is exactly what one [`BlobFile::read`] per value would have returned:
//! each record goes through the same check ([`BlobFile::value_of`]: checksum, key,
//! decompression), and a merged read that fails (a pointer past the end of its file, an
//! I/O error) is retried record by record, so each error names its own file and offset.

use super::{BlobFile, ValuePointer};
use crate::error::Result;
use crate::io::IoCause;
use std::sync::Arc;

/// Records at most this far apart are read in one read, the bytes between them read and
/// dropped: within a page the gap costs nothing, and one read instead of two saves a
/// request.
pub const MAX_GAP: u64 = 4096;

/// A merged read stops growing at this size, so that one long run of a file does not
/// hold the other reads of a batch behind it.
pub const MAX_MERGED_READ: u64 = 1 << 20;

/// One value to read: the file it is in (after index maps), where, and the key its record
/// must belong to.
pub struct ValueRead<'a> {
    pub file: Arc<BlobFile>,
    pub ptr: ValuePointer,
    pub key: &'a [u8],
}

/// One read of a file's byte range covering the records `members` (indexes into the
/// batch, in offset order).
struct Merged {
    start: u64,
    end: u64,
    members: Vec<usize>,
}

/// The values of `reads`, in their order; each is the value or the error its own read
/// would have given.
pub fn read_values(reads: &[ValueRead], cause: IoCause) -> Vec<Result<Vec<u8>>> {
    let merged = merge(reads);
    if merged.len() <= 1 {
        // One run of one file: a sequential read that the kernel's own read-ahead serves
        // as the reads arrive. Read as one buffer it ran at 0.75x of value-by-value reads
        // (docs/results/2026-11-28-scans.md), so it is read value by value.
        return reads
            .iter()
            .map(|r| r.file.read(&r.ptr, r.key, cause))
            .collect();
    }
    let file = |m: &Merged| &reads[m.members[0]].file;
    for m in merged.iter().skip(1) {
        file(m).will_need(m.start, (m.end - m.start) as usize);
    }
    let bytes = merged
        .iter()
        .map(|m| file(m).read_range(m.start, (m.end - m.start) as usize, cause));
    let mut out: Vec<Option<Result<Vec<u8>>>> = (0..reads.len()).map(|_| None).collect();
    for (m, data) in merged.iter().zip(bytes) {
        for &i in &m.members {
            let r = &reads[i];
            out[i] = Some(match &data {
                Ok(data) => {
                    let at = (r.ptr.offset - m.start) as usize;
                    let rec = data[at..at + r.ptr.size as usize].to_vec();
                    r.file.value_of(&r.ptr, r.key, rec)
                }
                // The merged read failed: each record alone, for its own error.
                Err(_) => r.file.read(&r.ptr, r.key, cause),
            });
        }
    }
    out.into_iter()
        .map(|v| v.expect("every read belongs to one merged read"))
        .collect()
}

/// The merged reads that cover `reads`: sorted by (file, offset), neighbours in one file
/// at most [`MAX_GAP`] apart joined while the read stays within [`MAX_MERGED_READ`].
fn merge(reads: &[ValueRead]) -> Vec<Merged> {
    let mut order: Vec<usize> = (0..reads.len()).collect();
    order.sort_by_key(|&i| (reads[i].file.number, reads[i].ptr.offset));
    let mut merged: Vec<Merged> = Vec::new();
    for i in order {
        let r = &reads[i];
        let (start, end) = (r.ptr.offset, r.ptr.offset + u64::from(r.ptr.size));
        if let Some(m) = merged.last_mut() {
            let same_file = reads[m.members[0]].file.number == r.file.number;
            if same_file
                && start <= m.end.saturating_add(MAX_GAP)
                && end.max(m.end) - m.start <= MAX_MERGED_READ
            {
                m.end = m.end.max(end);
                m.members.push(i);
                continue;
            }
        }
        merged.push(Merged {
            start,
            end,
            members: vec![i],
        });
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FileStorage, Storage};
    use crate::vlog::file::BlobMeta;
    use crate::vlog::ValueFileWriter;

    /// Each record's key, value and pointer.
    type Records = Vec<(Vec<u8>, Vec<u8>, ValuePointer)>;

    /// A value file `number` in `dir` holding `n` records of `len`-byte values.
    fn value_file(
        dir: &std::path::Path,
        storage: &Arc<dyn Storage>,
        number: u64,
        n: usize,
        len: usize,
    ) -> (Arc<BlobFile>, Records) {
        let (_, mut w) = ValueFileWriter::create(
            &**storage,
            dir,
            number,
            IoCause::ValueLog,
            crate::options::Compression::None,
        )
        .unwrap();
        let mut recs = Vec::new();
        for i in 0..n {
            let key = format!("key-{number}-{i:04}").into_bytes();
            let value = vec![(i % 251) as u8; len + i];
            let ptr = w.add(&key, &value).unwrap();
            recs.push((key, value, ptr));
        }
        let meta: BlobMeta = w.finish().unwrap();
        (Arc::new(BlobFile::new(&meta, dir, storage.clone())), recs)
    }

    #[test]
    fn a_batch_returns_each_value_in_the_callers_order_and_merges_neighbours() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let (a, ra) = value_file(dir.path(), &storage, 7, 40, 100);
        let (b, rb) = value_file(dir.path(), &storage, 9, 40, 5000);
        // Interleaved and out of offset order, as a scan's keys meet them.
        let mut reads = Vec::new();
        let mut want = Vec::new();
        for i in (0..40).rev() {
            for (f, recs) in [(&a, &ra), (&b, &rb)] {
                let (k, v, p) = &recs[(i * 7) % 40];
                reads.push(ValueRead {
                    file: f.clone(),
                    ptr: *p,
                    key: k,
                });
                want.push(v.clone());
            }
        }
        let got: Vec<Vec<u8>> = read_values(&reads, IoCause::ClientRead)
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(got, want);
        // File 7's small records make one read; file 9's 5 KB records lie within
        // MAX_GAP of each other, joined until a read reaches MAX_MERGED_READ.
        let m = merge(&reads);
        assert_eq!(m.iter().map(|m| m.members.len()).sum::<usize>(), 80);
        assert_eq!(m[0].members.len(), 40);
        assert!(m.len() < 10, "{} reads", m.len());
        assert!(m.iter().all(|m| m.end - m.start <= MAX_MERGED_READ));
    }

    #[test]
    fn damage_in_a_batch_is_the_error_of_that_value_alone() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let (f, recs) = value_file(dir.path(), &storage, 3, 10, 200);
        // Flip a byte in the value of record 4.
        let bad = recs[4].2;
        let mut bytes = std::fs::read(&f.path).unwrap();
        bytes[(bad.offset + u64::from(bad.size) - 1) as usize] ^= 0xff;
        std::fs::write(&f.path, &bytes).unwrap();
        let f = Arc::new(BlobFile::new(&f.meta(), dir.path(), storage.clone()));
        let mut reads: Vec<ValueRead> = recs
            .iter()
            .map(|(k, _, p)| ValueRead {
                file: f.clone(),
                ptr: *p,
                key: k,
            })
            .collect();
        // And a pointer past the end of the file, far enough to be a merged read of its
        // own: that read fails and its record is read alone for its error, while the
        // other merged read checks each of its records.
        let past = ValuePointer {
            file: 3,
            offset: f.size + 2 * MAX_GAP,
            size: 100,
        };
        reads.push(ValueRead {
            file: f.clone(),
            ptr: past,
            key: b"nowhere",
        });
        assert_eq!(merge(&reads).len(), 2);
        let got = read_values(&reads, IoCause::ClientRead);
        for (i, r) in got.iter().enumerate() {
            match i {
                4 => {
                    let e = r.as_ref().unwrap_err().to_string();
                    assert!(
                        e.contains(&format!("offset {}", bad.offset))
                            && e.contains("checksum")
                            && e.contains("000003"),
                        "{e}"
                    );
                    assert_eq!(
                        e,
                        f.read(&bad, &recs[4].0, IoCause::ClientRead)
                            .unwrap_err()
                            .to_string()
                    );
                }
                10 => {
                    let e = r.as_ref().unwrap_err().to_string();
                    assert!(e.contains(&format!("offset {}", past.offset)), "{e}");
                }
                _ => assert_eq!(r.as_ref().unwrap(), &recs[i].1, "record {i}"),
            }
        }
    }
}
