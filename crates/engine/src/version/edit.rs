//! Version edits: the records of the manifest. Each edit is one log record:
//!
//! ```text
//! edit  := field*
//! field := tag varint | payload
//!   1 log_number v | 2 next_file_number v | 3 last_sequence v
//!   4 add table:  level v | number v | size v | smallest bytes | largest bytes |
//!                 smallest_seq v | largest_seq v | entries v | deletions v | oldest_blob v (0 = none)
//!   5 delete table: level v | number v
//!   6 add value file: number v | size v | entries v | garbage_bytes v | garbage_entries v
//!   7 value-file garbage delta: number v | bytes v | entries v
//!   8 delete value file: number v
//!   9 value file is a GC output whose pointers are not all written back yet: number v
//!  10 GC output settled (write-back finished): number v
//!  11 lifetime of the value file just added by tag 6: number v | class v | created_seq v | ttl v
//!  12 add value index map: target v | count v | source v * count
//!  13 delete value index map: target v
//!  14 sorted run of a table added by this edit (tiered levels): number v | run v
//!  15 the value file just added by tag 6 holds values with an expiry: number v |
//!     latest v (> 0: only such values, none expiring later, in ms since the Unix epoch;
//!     0: among values without one)
//! bytes := varint length | raw
//! ```
//!
//! The grammar of every file in a database directory is in `docs/format.md`.

use crate::error::{Error, Result};
use crate::lifetime::LifetimeClass;
use crate::vlog::file::{BlobMeta, FileExpiry, FileLifetime};
use integer_encoding::{VarInt, VarIntWriter};
use std::path::Path;

/// What the manifest knows of a table file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMeta {
    pub number: u64,
    pub size: u64,
    /// Smallest and largest internal keys.
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub smallest_seq: u64,
    pub largest_seq: u64,
    pub entries: u64,
    pub deletions: u64,
    /// The oldest value file any pointer in this table refers to (BlobDB's force GC picks
    /// tables by it).
    pub oldest_blob: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionEdit {
    pub log_number: Option<u64>,
    pub next_file_number: Option<u64>,
    pub last_sequence: Option<u64>,
    pub added: Vec<(usize, FileMeta)>,
    pub deleted: Vec<(usize, u64)>,
    pub added_blobs: Vec<BlobMeta>,
    /// (file, bytes, entries) that became garbage.
    pub blob_garbage: Vec<(u64, u64, u64)>,
    pub deleted_blobs: Vec<u64>,
    /// GC outputs installed before their pointers are written back: if the process dies
    /// in between, the next open counts their unreferenced records as garbage.
    pub gc_pending: Vec<u64>,
    pub gc_settled: Vec<u64>,
    /// Index maps of GC outputs (target file, source files), see [`crate::vlog::index_map`].
    pub added_maps: Vec<(u64, Vec<u64>)>,
    pub deleted_maps: Vec<u64>,
    /// (table, run) for tables added by this edit that belong to a sorted run other than
    /// run 0 (see [`super::Version::runs`]); files not listed are in run 0.
    pub table_runs: Vec<(u64, u64)>,
}

fn put_bytes(v: &mut Vec<u8>, b: &[u8]) {
    v.write_varint(b.len() as u64).unwrap();
    v.extend_from_slice(b);
}

impl VersionEdit {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        let w = |tag: u64, vals: &[u64], v: &mut Vec<u8>| {
            v.write_varint(tag).unwrap();
            for &x in vals {
                v.write_varint(x).unwrap();
            }
        };
        if let Some(x) = self.log_number {
            w(1, &[x], &mut v);
        }
        if let Some(x) = self.next_file_number {
            w(2, &[x], &mut v);
        }
        if let Some(x) = self.last_sequence {
            w(3, &[x], &mut v);
        }
        for (level, f) in &self.added {
            w(4, &[*level as u64, f.number, f.size], &mut v);
            put_bytes(&mut v, &f.smallest);
            put_bytes(&mut v, &f.largest);
            let ob = f.oldest_blob.unwrap_or(0);
            for x in [f.smallest_seq, f.largest_seq, f.entries, f.deletions, ob] {
                v.write_varint(x).unwrap();
            }
        }
        for (level, n) in &self.deleted {
            w(5, &[*level as u64, *n], &mut v);
        }
        for b in &self.added_blobs {
            w(
                6,
                &[
                    b.number,
                    b.size,
                    b.entries,
                    b.garbage_bytes,
                    b.garbage_entries,
                ],
                &mut v,
            );
            if let Some(l) = b.lifetime {
                w(
                    11,
                    &[b.number, l.class as u64, l.created_seq, l.ttl],
                    &mut v,
                );
            }
            match b.expiry {
                FileExpiry::None => {}
                FileExpiry::Mixed => w(15, &[b.number, 0], &mut v),
                FileExpiry::AllBy(t) => w(15, &[b.number, t.max(1)], &mut v),
            }
        }
        for &(n, bytes, entries) in &self.blob_garbage {
            w(7, &[n, bytes, entries], &mut v);
        }
        for &n in &self.deleted_blobs {
            w(8, &[n], &mut v);
        }
        for &n in &self.gc_pending {
            w(9, &[n], &mut v);
        }
        for &n in &self.gc_settled {
            w(10, &[n], &mut v);
        }
        for (target, sources) in &self.added_maps {
            w(12, &[*target, sources.len() as u64], &mut v);
            for &s in sources {
                v.write_varint(s).unwrap();
            }
        }
        for &n in &self.deleted_maps {
            w(13, &[n], &mut v);
        }
        for &(n, run) in &self.table_runs {
            w(14, &[n, run], &mut v);
        }
        v
    }

    pub fn decode(file: &Path, data: &[u8]) -> Result<VersionEdit> {
        let mut pos = 0usize;
        let bad = |what: &str| Error::corruption(file, format!("manifest edit: {what}"));
        let num = |pos: &mut usize| -> Result<u64> {
            let (x, n) = u64::decode_var(&data[*pos..]).ok_or_else(|| bad("bad varint"))?;
            *pos += n;
            Ok(x)
        };
        let bytes = |pos: &mut usize, len: u64| -> Result<Vec<u8>> {
            let end = pos
                .checked_add(len as usize)
                .filter(|&e| e <= data.len())
                .ok_or_else(|| bad("truncated key"))?;
            let b = data[*pos..end].to_vec();
            *pos = end;
            Ok(b)
        };
        let mut e = VersionEdit::default();
        while pos < data.len() {
            match num(&mut pos)? {
                1 => e.log_number = Some(num(&mut pos)?),
                2 => e.next_file_number = Some(num(&mut pos)?),
                3 => e.last_sequence = Some(num(&mut pos)?),
                4 => {
                    let level = num(&mut pos)? as usize;
                    let number = num(&mut pos)?;
                    let size = num(&mut pos)?;
                    let l = num(&mut pos)?;
                    let smallest = bytes(&mut pos, l)?;
                    let l = num(&mut pos)?;
                    let largest = bytes(&mut pos, l)?;
                    let smallest_seq = num(&mut pos)?;
                    let largest_seq = num(&mut pos)?;
                    let entries = num(&mut pos)?;
                    let deletions = num(&mut pos)?;
                    let ob = num(&mut pos)?;
                    e.added.push((
                        level,
                        FileMeta {
                            number,
                            size,
                            smallest,
                            largest,
                            smallest_seq,
                            largest_seq,
                            entries,
                            deletions,
                            oldest_blob: (ob != 0).then_some(ob),
                        },
                    ));
                }
                5 => {
                    let level = num(&mut pos)? as usize;
                    e.deleted.push((level, num(&mut pos)?));
                }
                6 => {
                    let b = BlobMeta {
                        number: num(&mut pos)?,
                        size: num(&mut pos)?,
                        entries: num(&mut pos)?,
                        garbage_bytes: num(&mut pos)?,
                        garbage_entries: num(&mut pos)?,
                        lifetime: None,
                        expiry: FileExpiry::None,
                    };
                    e.added_blobs.push(b);
                }
                7 => {
                    let g = (num(&mut pos)?, num(&mut pos)?, num(&mut pos)?);
                    e.blob_garbage.push(g);
                }
                8 => e.deleted_blobs.push(num(&mut pos)?),
                9 => e.gc_pending.push(num(&mut pos)?),
                10 => e.gc_settled.push(num(&mut pos)?),
                11 => {
                    let number = num(&mut pos)?;
                    let class = LifetimeClass::from_u8(num(&mut pos)?.min(255) as u8)
                        .ok_or_else(|| bad("unknown lifetime class"))?;
                    let l = FileLifetime {
                        class,
                        created_seq: num(&mut pos)?,
                        ttl: num(&mut pos)?,
                    };
                    let b = e
                        .added_blobs
                        .iter_mut()
                        .rev()
                        .find(|b| b.number == number)
                        .ok_or_else(|| bad("lifetime of a value file the edit does not add"))?;
                    b.lifetime = Some(l);
                }
                12 => {
                    let target = num(&mut pos)?;
                    let count = num(&mut pos)?;
                    if count > (data.len() - pos) as u64 {
                        return Err(bad("index map source count past the end"));
                    }
                    let sources = (0..count)
                        .map(|_| num(&mut pos))
                        .collect::<Result<Vec<_>>>()?;
                    e.added_maps.push((target, sources));
                }
                13 => e.deleted_maps.push(num(&mut pos)?),
                14 => {
                    let n = num(&mut pos)?;
                    e.table_runs.push((n, num(&mut pos)?));
                }
                15 => {
                    let number = num(&mut pos)?;
                    let t = num(&mut pos)?;
                    let b = e
                        .added_blobs
                        .iter_mut()
                        .rev()
                        .find(|b| b.number == number)
                        .ok_or_else(|| bad("expiry of a value file the edit does not add"))?;
                    b.expiry = match t {
                        0 => FileExpiry::Mixed,
                        t => FileExpiry::AllBy(t),
                    };
                }
                t => return Err(bad(&format!("unknown tag {t}"))),
            }
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn meta(n: u64) -> FileMeta {
        FileMeta {
            number: n,
            size: 1000 + n,
            smallest: b"a\0\0\0\0\0\0\0\0".to_vec(),
            largest: vec![0xff; 20],
            smallest_seq: 3,
            largest_seq: 1 << 50,
            entries: 10,
            deletions: 2,
            oldest_blob: if n.is_multiple_of(2) {
                Some(n + 1)
            } else {
                None
            },
        }
    }

    proptest! {
        #[test]
        fn round_trip(log in proptest::option::of(any::<u64>()), files in 0u64..5, dels in proptest::collection::vec((0usize..7, any::<u64>()), 0..4),
                      garbage in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u64>()), 0..4)) {
            let e = VersionEdit {
                log_number: log,
                next_file_number: Some(99),
                last_sequence: Some(12345),
                added: (0..files).map(|n| ((n % 7) as usize, meta(n))).collect(),
                deleted: dels,
                added_blobs: vec![
                    BlobMeta { number: 5, size: 1 << 30, entries: 7, garbage_bytes: 3, garbage_entries: 1, lifetime: None, expiry: FileExpiry::AllBy(1_700_000_000_123) },
                    BlobMeta { number: 7, size: 9, entries: 1, garbage_bytes: 0, garbage_entries: 0, lifetime: None, expiry: FileExpiry::Mixed },
                    BlobMeta { number: 6, size: 9, entries: 1, garbage_bytes: 0, garbage_entries: 0,
                               lifetime: Some(FileLifetime { class: LifetimeClass::Short, created_seq: 77, ttl: 1 << 22 }), expiry: FileExpiry::None },
                ],
                blob_garbage: garbage,
                deleted_blobs: vec![4, 8],
                gc_pending: vec![11],
                gc_settled: vec![12, 13],
                added_maps: vec![(6, vec![2, 5]), (7, vec![])],
                deleted_maps: vec![3],
                table_runs: vec![(1, 7), (3, 1 << 40)],
            };
            let enc = e.encode();
            prop_assert_eq!(VersionEdit::decode(Path::new("m"), &enc).unwrap(), e);
            // A truncated edit never panics.
            for cut in 0..enc.len() {
                let _ = VersionEdit::decode(Path::new("m"), &enc[..cut]);
            }
        }
    }
}
