//! Record log format, used by the WAL and the manifest.
//!
//! A file is a sequence of 32 KiB blocks. A record is stored as one or more fragments; a
//! fragment never crosses a block boundary:
//!
//! ```text
//! fragment := crc32c (4, masked, over type byte + payload) | length (2, LE) | type (1) | payload
//! type     := 1 FULL | 2 FIRST | 3 MIDDLE | 4 LAST
//! ```
//!
//! When fewer than 7 bytes are left in a block they are zero-filled.
//!
//! A reader tells a torn tail from corruption by what the damage looks like, not by where
//! it is: a crash in the middle of an append leaves a record cut short by the end of the
//! file (its bytes are missing, never wrong), while a checksum mismatch, a bad length or a
//! broken fragment sequence means bytes that were written have changed. Only the first may
//! be discarded ([`WalRecoveryMode`] says what happens to the rest). A torn append may end
//! a log that is not the newest: the switch to a new log does not sync the old one, so a
//! power cut can keep the new log's first records and lose the old one's last; a synced
//! write syncs every older log first, so nothing after such a tear was ever synced.
//!
//! A file may also end in zeros: the WAL is written through a mapping of preallocated
//! windows (`io::mapped`), which a crash leaves longer than its records. Zeros after the
//! last record are the end of the log, and a record cut short by them is a torn append as
//! if the file ended where they start; the cost is that a record whose last bytes were
//! damaged *to zeros* reads as torn too (RocksDB's reader treats preallocated zeros alike).
//!
//! The grammar of every file in a database directory is in `docs/format.md`.

use super::recovery_mode::WalRecoveryMode;
use crate::checksum;
use crate::error::{Error, Result};
use crate::io::{SyncHandle, WritableFile};
use std::path::{Path, PathBuf};

pub const BLOCK_SIZE: usize = 32 * 1024;
pub const HEADER_SIZE: usize = 7;

const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;

fn fragment_crc(kind: u8, payload: &[u8]) -> u32 {
    checksum::mask(checksum::extend(checksum::crc(&[kind]), payload))
}

/// Appends records to a file.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    block_offset: usize,
}

impl LogWriter {
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        let block_offset = (file.len() % BLOCK_SIZE as u64) as usize;
        LogWriter { file, block_offset }
    }

    pub fn add_record(&mut self, mut data: &[u8]) -> Result<()> {
        let mut first = true;
        loop {
            let left = BLOCK_SIZE - self.block_offset;
            if left < HEADER_SIZE {
                if left > 0 {
                    self.file.append(&[0u8; HEADER_SIZE][..left])?;
                }
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let n = data.len().min(avail);
            let last = n == data.len();
            let kind = match (first, last) {
                (true, true) => FULL,
                (true, false) => FIRST,
                (false, false) => MIDDLE,
                (false, true) => LAST,
            };
            let (payload, rest) = data.split_at(n);
            let mut header = [0u8; HEADER_SIZE];
            header[..4].copy_from_slice(&fragment_crc(kind, payload).to_le_bytes());
            header[4..6].copy_from_slice(&(n as u16).to_le_bytes());
            header[6] = kind;
            self.file.append(&header)?;
            self.file.append(payload)?;
            self.block_offset += HEADER_SIZE + n;
            data = rest;
            first = false;
            if last {
                return Ok(());
            }
        }
    }

    /// Hands buffered bytes to the OS (survives a process crash, not a power failure).
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Makes every record so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// A handle that makes every record so far durable apart from this writer
    /// ([`WritableFile::sync_later`]), or `None` if the file cannot.
    pub fn sync_later(&mut self) -> Result<Option<Box<dyn SyncHandle>>> {
        self.file.sync_later()
    }

    pub fn len(&self) -> u64 {
        self.file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }
}

/// A place where a log is damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Offset of the first damaged byte's fragment (or of the record it cut).
    pub offset: u64,
    pub why: String,
}

/// How a log file ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// Every byte belonged to a complete record (or to zero padding).
    Clean,
    /// The file ends in an incomplete record (a torn append): the complete records are
    /// the first `valid_len` bytes.
    TornTail { valid_len: u64 },
    /// Reading stopped at damage (point-in-time mode): records before `at.offset` were
    /// delivered, nothing after.
    Stopped { at: Damage },
    /// Damaged stretches were skipped (skip mode); the records between them were delivered.
    Skipped { damages: Vec<Damage> },
}

/// Reads all records of a log file held in memory.
pub struct LogReader {
    path: PathBuf,
    data: Vec<u8>,
    /// Where the zeros at the end of `data` start (its length if it ends in a non-zero
    /// byte): nothing written is at or after it.
    end: usize,
}

enum Fragment<'a> {
    Ok {
        kind: u8,
        payload: &'a [u8],
        next: usize,
    },
    /// Zero padding at the end of a block.
    Padding,
    /// The rest of the file is zeros (preallocated, or extended but never written), or
    /// there is nothing left.
    End,
    /// A fragment cut short by the end of the file.
    Truncated,
    Bad(String),
}

impl LogReader {
    pub fn new(path: &Path, data: Vec<u8>) -> Self {
        let end = data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        LogReader {
            path: path.to_path_buf(),
            data,
            end,
        }
    }

    fn fragment_at(&self, pos: usize) -> Fragment<'_> {
        self.fragment(pos, true)
    }

    /// The fragment at `pos`; `classify_cut` decides whether a fragment running past the end
    /// of the file is a torn append (scanning the rest of the file) or just not intact.
    fn fragment(&self, pos: usize, classify_cut: bool) -> Fragment<'_> {
        if pos >= self.end {
            // Only zeros from here (or nothing).
            return Fragment::End;
        }
        let block_left = BLOCK_SIZE - pos % BLOCK_SIZE;
        if block_left < HEADER_SIZE {
            return if self.data[pos..(pos + block_left).min(self.data.len())]
                .iter()
                .all(|&b| b == 0)
            {
                Fragment::Padding
            } else {
                Fragment::Bad("non-zero bytes in block padding".into())
            };
        }
        if pos + HEADER_SIZE > self.end {
            // A header cut by the end of the file, or by the zeros after the last byte
            // written (a complete header ends in its non-zero type byte): only the tail of
            // an append.
            return Fragment::Truncated;
        }
        let h = &self.data[pos..pos + HEADER_SIZE];
        let crc = u32::from_le_bytes(h[..4].try_into().unwrap());
        let len = u16::from_le_bytes(h[4..6].try_into().unwrap()) as usize;
        let kind = h[6];
        if crc == 0 && len == 0 && kind == 0 {
            // Not at the zeros of the end (checked above): something follows.
            return Fragment::Bad("zeroed header before non-zero bytes".into());
        }
        if !(FULL..=LAST).contains(&kind) {
            return Fragment::Bad(format!("unknown fragment type {kind}"));
        }
        if HEADER_SIZE + len > block_left {
            return Fragment::Bad(format!("fragment length {len} crosses a block boundary"));
        }
        let end = pos + HEADER_SIZE + len;
        if end > self.data.len() {
            // Cut by the end of the file, unless the bytes that are there form a complete
            // fragment whose length field was damaged: a torn append leaves a prefix, whose
            // checksum cannot match.
            if !classify_cut {
                return Fragment::Truncated;
            }
            let rest = &self.data[pos + HEADER_SIZE..];
            if fragment_crc(kind, rest) == crc {
                return Fragment::Bad(format!(
                    "length field {len} disagrees with an intact fragment of {} bytes",
                    rest.len()
                ));
            }
            // Nor is it a torn append if any intact fragment starts after it: an append
            // that was cut has nothing behind it.
            if self.next_intact(pos, false) < self.data.len() {
                return Fragment::Bad(format!(
                    "length field {len} runs past the end, over intact records"
                ));
            }
            return Fragment::Truncated;
        }
        let payload = &self.data[pos + HEADER_SIZE..end];
        if fragment_crc(kind, payload) != crc {
            if end > self.end {
                // The fragment runs into the zeros at the end: an append cut there (the
                // rest of its window never written), unless a shorter length makes it
                // intact, which means its length field was damaged. The bytes written
                // reach `self.end`, so only lengths from there can be the real one.
                let start = pos + HEADER_SIZE;
                let mut c = checksum::extend(checksum::crc(&[kind]), &self.data[start..self.end]);
                for l in self.end - start..len {
                    if l > self.end - start {
                        c = checksum::extend(c, &[0]);
                    }
                    if checksum::mask(c) == crc {
                        return Fragment::Bad(format!(
                            "length field {len} disagrees with an intact fragment of {l} bytes"
                        ));
                    }
                }
                return Fragment::Truncated;
            }
            return Fragment::Bad("checksum mismatch".into());
        }
        Fragment::Ok {
            kind,
            payload,
            next: end,
        }
    }

    /// The next offset after `pos` where an intact fragment starts (`starts_record`: the
    /// first fragment of a record, where skip mode resumes), or the file's length. Every
    /// offset is tried, since damage may have hit a length field.
    fn next_intact(&self, pos: usize, starts_record: bool) -> usize {
        let mut p = pos + 1;
        // A fragment's header ends in its non-zero type byte, so none starts in the zeros
        // at the end.
        while p + HEADER_SIZE <= self.end {
            if let Fragment::Ok { kind, .. } = self.fragment(p, false) {
                if !starts_record || kind == FULL || kind == FIRST {
                    return p;
                }
            }
            p += 1;
        }
        self.data.len()
    }

    /// Calls `f` on each complete record in order, treating damage as `mode` says. Errors
    /// name the file and offset.
    pub fn for_each(
        &self,
        mode: WalRecoveryMode,
        mut f: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<ReadOutcome> {
        self.for_each_until(mode, |rec| f(rec).map(|()| true))
    }

    /// [`LogReader::for_each`], where `f` may end the log at a record by returning `false`:
    /// the outcome is then a torn tail at that record's offset (recovery ends a log where a
    /// record's separated values never reached the disk).
    pub fn for_each_until(
        &self,
        mode: WalRecoveryMode,
        mut f: impl FnMut(&[u8]) -> Result<bool>,
    ) -> Result<ReadOutcome> {
        let mut pos = 0usize;
        let mut record: Vec<u8> = Vec::new();
        let mut record_start: Option<usize> = None;
        let mut skipped: Vec<Damage> = Vec::new();
        loop {
            // (damage, whether it is an append cut by the end of the file)
            let (damage, torn) = match self.fragment_at(pos) {
                Fragment::Padding => {
                    pos += BLOCK_SIZE - pos % BLOCK_SIZE;
                    continue;
                }
                Fragment::End => match record_start {
                    None if skipped.is_empty() => return Ok(ReadOutcome::Clean),
                    None => return Ok(ReadOutcome::Skipped { damages: skipped }),
                    Some(s) => (
                        Damage {
                            offset: s as u64,
                            why: "record incomplete at the end of the file".into(),
                        },
                        true,
                    ),
                },
                Fragment::Truncated => (
                    Damage {
                        offset: record_start.unwrap_or(pos) as u64,
                        why: "record cut short by the end of the file".into(),
                    },
                    true,
                ),
                Fragment::Bad(why) => (
                    Damage {
                        offset: pos as u64,
                        why,
                    },
                    false,
                ),
                Fragment::Ok {
                    kind,
                    payload,
                    next,
                } => {
                    let bad = match kind {
                        FULL | FIRST if record_start.is_some() => {
                            Some("a record starts inside another record")
                        }
                        FULL => {
                            if !f(payload)? {
                                return Ok(ReadOutcome::TornTail {
                                    valid_len: pos as u64,
                                });
                            }
                            None
                        }
                        FIRST => {
                            record_start = Some(pos);
                            record.clear();
                            record.extend_from_slice(payload);
                            None
                        }
                        _ if record_start.is_none() => Some("a continuation without a start"),
                        _ => {
                            record.extend_from_slice(payload);
                            if kind == LAST {
                                if !f(&record)? {
                                    return Ok(ReadOutcome::TornTail {
                                        valid_len: record_start.unwrap_or(pos) as u64,
                                    });
                                }
                                record_start = None;
                            }
                            None
                        }
                    };
                    match bad {
                        None => {
                            pos = next;
                            continue;
                        }
                        Some(why) => (
                            Damage {
                                offset: pos as u64,
                                why: why.into(),
                            },
                            false,
                        ),
                    }
                }
            };
            // Damage: the only innocent kind is an append cut by the end of the file.
            match mode {
                // In any log: a synced write syncs every older log first, so what follows
                // a torn append in an older log was never synced either (recovery stops
                // there, point in time).
                WalRecoveryMode::TolerateCorruptedTailRecords if torn => {
                    return Ok(ReadOutcome::TornTail {
                        valid_len: damage.offset,
                    })
                }
                WalRecoveryMode::PointInTimeRecovery => {
                    return Ok(ReadOutcome::Stopped { at: damage })
                }
                WalRecoveryMode::SkipAnyCorruptedRecords => {
                    let resume = self.next_intact(pos, true);
                    skipped.push(damage);
                    record_start = None;
                    pos = resume;
                }
                _ => return Err(self.damage(&damage)),
            }
        }
    }

    fn damage(&self, d: &Damage) -> Error {
        Error::corruption(
            &self.path,
            format!("log record at offset {}: {}", d.offset, d.why),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FileStorage, IoCause, Storage};

    /// A log of `records` as a closed writer leaves it (cut to its records).
    fn write_log(records: &[Vec<u8>]) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
        let (dir, path, data, len) = write_log_open(records);
        assert_eq!(std::fs::read(&path).unwrap(), data[..len as usize]);
        (dir, path, data[..len as usize].to_vec())
    }

    /// The file of a WAL writer that synced `records` and is still open, as a crash would
    /// leave it (the rest of its mapped window zeros), and the records' length.
    fn write_log_open(records: &[Vec<u8>]) -> (tempfile::TempDir, PathBuf, Vec<u8>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let fs = FileStorage::new();
        let mut w = LogWriter::new(fs.create(&path, IoCause::Wal).unwrap());
        for r in records {
            w.add_record(r).unwrap();
        }
        w.sync().unwrap();
        let data = std::fs::read(&path).unwrap();
        (dir, path, data, w.len())
    }

    fn read_mode(
        path: &Path,
        data: Vec<u8>,
        mode: WalRecoveryMode,
    ) -> Result<(Vec<Vec<u8>>, ReadOutcome)> {
        let mut out = Vec::new();
        let o = LogReader::new(path, data).for_each(mode, |r| {
            out.push(r.to_vec());
            Ok(())
        })?;
        Ok((out, o))
    }

    fn read(path: &Path, data: Vec<u8>) -> Result<(Vec<Vec<u8>>, ReadOutcome)> {
        read_mode(path, data, WalRecoveryMode::default())
    }

    fn records() -> Vec<Vec<u8>> {
        (0..40u32)
            .map(|i| vec![i as u8; (i as usize * 3001) % 70_000 + 1])
            .collect()
    }

    #[test]
    fn round_trip_across_blocks() {
        let recs = records();
        let (_d, path, data) = write_log(&recs);
        assert!(data.len() > 3 * BLOCK_SIZE);
        let (got, o) = read(&path, data).unwrap();
        assert_eq!(o, ReadOutcome::Clean);
        assert_eq!(got, recs);
    }

    #[test]
    fn torn_tail_is_cut_at_the_last_complete_record() {
        let recs = records();
        let (_d, path, data) = write_log(&recs);
        for cut in [data.len() - 1, data.len() - 5000, data.len() / 2 + 17] {
            let (got, o) = read(&path, data[..cut].to_vec()).unwrap();
            assert!(got.len() < recs.len());
            assert_eq!(got[..], recs[..got.len()]);
            let valid = match o {
                ReadOutcome::TornTail { valid_len } => valid_len as usize,
                ReadOutcome::Clean => cut,
                other => panic!("a cut log read as {other:?}"),
            };
            // Re-reading the valid prefix is clean and yields the same records.
            let (again, o2) = read(&path, data[..valid].to_vec()).unwrap();
            assert_eq!(o2, ReadOutcome::Clean);
            assert_eq!(again, got);
        }
    }

    #[test]
    fn a_torn_tail_is_an_error_only_in_absolute_mode() {
        let recs = records();
        let (_d, path, data) = write_log(&recs);
        let cut = data[..data.len() - 10].to_vec();
        let err = read_mode(&path, cut.clone(), WalRecoveryMode::AbsoluteConsistency).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        let (got, o) =
            read_mode(&path, cut, WalRecoveryMode::TolerateCorruptedTailRecords).unwrap();
        assert_eq!(got[..], recs[..recs.len() - 1]);
        assert!(matches!(o, ReadOutcome::TornTail { .. }), "{o:?}");
    }

    /// Every flipped byte anywhere in the log, the last record included, is corruption
    /// in the default mode: nothing acknowledged is dropped as a "torn tail".
    #[test]
    fn every_flipped_byte_is_corruption_by_default() {
        let recs: Vec<Vec<u8>> = (0..30u32)
            .map(|i| vec![i as u8 + 1; 300 + i as usize * 2300])
            .collect();
        let (_d, path, data) = write_log(&recs);
        let mut offsets: Vec<usize> = (0..data.len()).step_by(97).collect();
        offsets.extend(data.len() - 40..data.len());
        for at in offsets {
            let mut bad = data.clone();
            bad[at] ^= 0x10;
            match read(&path, bad) {
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    assert!(e.to_string().contains("offset"), "{e}");
                }
                Ok((got, o)) => panic!(
                    "flip at {at} of {} read as {o:?}, {} records",
                    data.len(),
                    got.len()
                ),
            }
        }
    }

    #[test]
    fn a_damaged_length_in_the_last_record_is_not_taken_for_a_torn_tail() {
        let recs = vec![vec![1u8; 100], vec![2u8; 100]];
        let (_d, path, mut data) = write_log(&recs);
        let last = data.len() - 100 - HEADER_SIZE;
        data[last + 4] = 150; // length 100 -> 150: runs past the end of the file
        let err = read(&path, data).unwrap_err();
        assert!(err.to_string().contains("length field"), "{err}");
    }

    #[test]
    fn point_in_time_stops_at_the_damage_and_skip_mode_resumes_after_it() {
        let recs = records();
        let (_d, path, data) = write_log(&recs);
        let mut bad = data.clone();
        let at = data.len() / 2;
        bad[at] ^= 0x55;
        let (got, o) = read_mode(&path, bad.clone(), WalRecoveryMode::PointInTimeRecovery).unwrap();
        let ReadOutcome::Stopped { at: d } = o else {
            panic!("{o:?}")
        };
        assert!(d.offset as usize <= at);
        assert_eq!(got[..], recs[..got.len()], "a prefix of the records");
        assert!(!got.is_empty() && got.len() < recs.len());

        let (all, o) = read_mode(&path, bad, WalRecoveryMode::SkipAnyCorruptedRecords).unwrap();
        let ReadOutcome::Skipped { damages } = o else {
            panic!("{o:?}")
        };
        assert_eq!(damages.len(), 1, "{damages:?}");
        // Exactly the damaged record is missing; everything after it is back.
        assert_eq!(all.len(), recs.len() - 1);
        let missing = recs.iter().position(|r| !all.contains(r)).unwrap();
        assert_eq!(all[..missing], recs[..missing]);
        assert_eq!(all[missing..], recs[missing + 1..]);
    }

    #[test]
    fn zeros_after_the_last_record_are_an_unwritten_tail() {
        let recs = records();
        let (_d, path, mut data) = write_log(&recs);
        data.extend_from_slice(&[0u8; 5000]);
        let (got, o) = read(&path, data.clone()).unwrap();
        assert_eq!(o, ReadOutcome::Clean);
        assert_eq!(got, recs);
        let n = data.len();
        data[n - 1] = 1; // not zeros after all
        assert!(read(&path, data).unwrap_err().is_corruption());
    }

    /// A crash while a record was being copied into the WAL's mapped window leaves its
    /// first bytes followed by the window's zeros: a torn tail (cut inside a fragment,
    /// inside a header, or between the fragments of a record), an error in absolute
    /// consistency mode.
    #[test]
    fn a_record_cut_by_the_zeros_of_its_window_is_a_torn_tail() {
        let recs = records();
        let (_d, path, data, len) = write_log_open(&recs);
        let len = len as usize;
        assert!(data.len() > len, "the open writer's window has a zero tail");
        let last = recs.last().unwrap().len();
        for cut in [
            len - 1,
            len - 500,
            len - last + 3,
            len - last - 2,
            len - 40_000,
        ] {
            let mut crashed = data.clone();
            crashed[cut..len].fill(0);
            let (got, o) = read(&path, crashed.clone()).unwrap();
            assert_eq!(got[..], recs[..got.len()], "cut at {cut}");
            assert_eq!(got.len(), recs.len() - 1, "cut at {cut}");
            let ReadOutcome::TornTail { valid_len } = o else {
                panic!("cut at {cut} read as {o:?}")
            };
            let (again, o2) = read(&path, crashed[..valid_len as usize].to_vec()).unwrap();
            assert_eq!((again, o2), (got, ReadOutcome::Clean));
            let strict = read_mode(&path, crashed, WalRecoveryMode::AbsoluteConsistency);
            assert!(strict.unwrap_err().is_corruption());
        }
    }

    /// A last record that itself ends in zero bytes is complete, not cut by the zeros
    /// after it; a damaged length field there is still damage, not a torn tail.
    #[test]
    fn a_record_ending_in_zeros_before_the_window_zeros_is_intact() {
        let mut tail = vec![7u8; 10];
        tail.resize(300, 0);
        let recs = vec![vec![1u8; 100], tail];
        let (_d, path, data, len) = write_log_open(&recs);
        let (got, o) = read(&path, data.clone()).unwrap();
        assert_eq!((got, o), (recs.clone(), ReadOutcome::Clean));
        let mut bad = data;
        let last = len as usize - 300 - HEADER_SIZE;
        bad[last + 4..last + 6].copy_from_slice(&400u16.to_le_bytes());
        let err = read(&path, bad).unwrap_err();
        assert!(err.to_string().contains("length field"), "{err}");
    }

    #[test]
    fn recovery_mode_names_round_trip() {
        for m in WalRecoveryMode::ALL {
            assert_eq!(m.name().parse::<WalRecoveryMode>().unwrap(), m);
        }
        assert!("lenient"
            .parse::<WalRecoveryMode>()
            .unwrap_err()
            .contains("point-in-time"));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]

            /// Any cut of a log reads, in the default mode, as a prefix of its records:
            /// a torn append never fails the open and never yields a partial record.
            #[test]
            fn every_cut_is_a_clean_prefix(
                sizes in proptest::collection::vec(0usize..40_000, 1..12),
                cut in 0.0f64..1.0,
            ) {
                let recs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| vec![i as u8 + 1; n]).collect();
                let (_d, path, data) = write_log(&recs);
                let at = (data.len() as f64 * cut) as usize;
                let (got, _) = read(&path, data[..at].to_vec()).unwrap();
                prop_assert_eq!(&got[..], &recs[..got.len()]);
            }

            /// A crash at any point of a mapped WAL's appends (the bytes from there on
            /// zeros, the window's rest too) reads as a prefix of its records.
            #[test]
            fn every_crash_in_a_mapped_window_is_a_clean_prefix(
                sizes in proptest::collection::vec(0usize..40_000, 1..12),
                cut in 0.0f64..1.0,
            ) {
                let recs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| vec![i as u8 + 1; n]).collect();
                let (_d, path, mut data, len) = write_log_open(&recs);
                let at = (len as f64 * cut) as usize;
                data[at..len as usize].fill(0);
                let (got, _) = read(&path, data).unwrap();
                prop_assert_eq!(&got[..], &recs[..got.len()]);
            }

            /// Any single flipped bit is reported by the default mode, and point-in-time
            /// and skip modes only ever return records that were written.
            #[test]
            fn every_flip_is_reported(
                sizes in proptest::collection::vec(1usize..20_000, 1..10),
                pos in 0.0f64..1.0,
                bit in 0u8..8,
            ) {
                let recs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| vec![i as u8 + 1; n]).collect();
                let (_d, path, mut data) = write_log(&recs);
                let at = ((data.len() - 1) as f64 * pos) as usize;
                data[at] ^= 1 << bit;
                prop_assert!(read(&path, data.clone()).is_err());
                for mode in [WalRecoveryMode::PointInTimeRecovery, WalRecoveryMode::SkipAnyCorruptedRecords] {
                    let (got, _) = read_mode(&path, data.clone(), mode).unwrap();
                    for g in &got {
                        prop_assert!(recs.contains(g));
                    }
                }
            }
        }
    }
}
