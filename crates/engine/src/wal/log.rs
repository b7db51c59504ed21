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
//! When fewer than 7 bytes are left in a block they are zero-filled. Blocks let a reader
//! resynchronise after damage, which is how it tells a torn tail (nothing valid after the
//! damage: the last writes before a crash, cut off and ignored) from corruption in the middle
//! of the file (valid fragments follow: reported as an error, never skipped).

use crate::error::{Error, Result};
use crate::io::WritableFile;
use std::path::{Path, PathBuf};

pub const BLOCK_SIZE: usize = 32 * 1024;
pub const HEADER_SIZE: usize = 7;

const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;

const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC so that a CRC of data containing CRCs is not degenerate (as LevelDB does).
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

fn fragment_crc(kind: u8, payload: &[u8]) -> u32 {
    mask_crc(crc32c::crc32c_append(crc32c::crc32c(&[kind]), payload))
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

    pub fn len(&self) -> u64 {
        self.file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }
}

/// How a log file ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// Every byte belonged to a complete record.
    Clean,
    /// The file ends in an incomplete or damaged record with nothing valid after it; the
    /// valid prefix is `valid_len` bytes long.
    TornTail { valid_len: u64 },
}

/// Reads all records of a log file held in memory.
pub struct LogReader {
    path: PathBuf,
    data: Vec<u8>,
}

enum Fragment<'a> {
    Ok {
        kind: u8,
        payload: &'a [u8],
        next: usize,
    },
    /// Zero padding or the end of the data.
    End,
    Bad(String),
}

impl LogReader {
    pub fn new(path: &Path, data: Vec<u8>) -> Self {
        LogReader {
            path: path.to_path_buf(),
            data,
        }
    }

    fn fragment_at(&self, pos: usize) -> Fragment<'_> {
        let block_left = BLOCK_SIZE - pos % BLOCK_SIZE;
        if block_left < HEADER_SIZE || pos >= self.data.len() {
            return Fragment::End;
        }
        if pos + HEADER_SIZE > self.data.len() {
            return Fragment::Bad("truncated fragment header".into());
        }
        let h = &self.data[pos..pos + HEADER_SIZE];
        let crc = u32::from_le_bytes(h[..4].try_into().unwrap());
        let len = u16::from_le_bytes(h[4..6].try_into().unwrap()) as usize;
        let kind = h[6];
        if crc == 0 && len == 0 && kind == 0 {
            return Fragment::End;
        }
        if !(FULL..=LAST).contains(&kind) {
            return Fragment::Bad(format!("unknown fragment type {kind}"));
        }
        if HEADER_SIZE + len > block_left {
            return Fragment::Bad(format!("fragment length {len} crosses a block boundary"));
        }
        let end = pos + HEADER_SIZE + len;
        if end > self.data.len() {
            return Fragment::Bad("truncated fragment payload".into());
        }
        let payload = &self.data[pos + HEADER_SIZE..end];
        if fragment_crc(kind, payload) != crc {
            return Fragment::Bad("checksum mismatch".into());
        }
        Fragment::Ok {
            kind,
            payload,
            next: end,
        }
    }

    /// Whether any intact fragment starts at a block boundary after `pos`: if so, damage at
    /// `pos` is corruption in the middle of the log rather than a torn tail.
    fn valid_data_after(&self, pos: usize) -> bool {
        let mut b = (pos / BLOCK_SIZE + 1) * BLOCK_SIZE;
        while b < self.data.len() {
            if let Fragment::Ok { .. } = self.fragment_at(b) {
                return true;
            }
            b += BLOCK_SIZE;
        }
        // Also non-zero bytes after a zero "end" marker in the same block mean damage.
        false
    }

    /// Calls `f` on each complete record in order. Damage followed by valid data is an
    /// `Error::Corruption` naming the file and offset.
    pub fn for_each(&self, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<ReadOutcome> {
        let mut pos = 0usize;
        let mut record: Vec<u8> = Vec::new();
        let mut record_start: Option<usize> = None;
        loop {
            if pos >= self.data.len() {
                return Ok(match record_start {
                    Some(s) => ReadOutcome::TornTail {
                        valid_len: s as u64,
                    },
                    None => ReadOutcome::Clean,
                });
            }
            match self.fragment_at(pos) {
                Fragment::End => {
                    let block_left = BLOCK_SIZE - pos % BLOCK_SIZE;
                    if block_left < HEADER_SIZE {
                        pos += block_left;
                        continue;
                    }
                    // A zeroed header: the rest must be zeros (preallocated or torn tail).
                    let tail_zero = self.data[pos..].iter().all(|&b| b == 0);
                    if !tail_zero && self.valid_data_after(pos) {
                        return Err(self.damage(pos, "zeroed header before valid records"));
                    }
                    let valid = record_start.unwrap_or(pos) as u64;
                    return Ok(if valid == self.data.len() as u64 {
                        ReadOutcome::Clean
                    } else {
                        ReadOutcome::TornTail { valid_len: valid }
                    });
                }
                Fragment::Bad(why) => {
                    if self.valid_data_after(pos) {
                        return Err(self.damage(pos, &why));
                    }
                    return Ok(ReadOutcome::TornTail {
                        valid_len: record_start.unwrap_or(pos) as u64,
                    });
                }
                Fragment::Ok {
                    kind,
                    payload,
                    next,
                } => {
                    match kind {
                        FULL | FIRST => {
                            if record_start.is_some() {
                                return Err(self.damage(pos, "record started inside a record"));
                            }
                            if kind == FULL {
                                f(payload)?;
                            } else {
                                record_start = Some(pos);
                                record.clear();
                                record.extend_from_slice(payload);
                            }
                        }
                        _ => {
                            if record_start.is_none() {
                                return Err(self.damage(pos, "continuation without a start"));
                            }
                            record.extend_from_slice(payload);
                            if kind == LAST {
                                f(&record)?;
                                record_start = None;
                            }
                        }
                    }
                    pos = next;
                }
            }
        }
    }

    fn damage(&self, pos: usize, why: &str) -> Error {
        Error::corruption(
            &self.path,
            format!("log record at offset {pos}: {why}, with valid records after it"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FileStorage, IoCause, Storage};

    fn write_log(records: &[Vec<u8>]) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let fs = FileStorage::new();
        let mut w = LogWriter::new(fs.create(&path, IoCause::Wal).unwrap());
        for r in records {
            w.add_record(r).unwrap();
        }
        w.sync().unwrap();
        let data = std::fs::read(&path).unwrap();
        (dir, path, data)
    }

    fn read(path: &Path, data: Vec<u8>) -> Result<(Vec<Vec<u8>>, ReadOutcome)> {
        let mut out = Vec::new();
        let o = LogReader::new(path, data).for_each(|r| {
            out.push(r.to_vec());
            Ok(())
        })?;
        Ok((out, o))
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
            };
            // Re-reading the valid prefix is clean and yields the same records.
            let (again, o2) = read(&path, data[..valid].to_vec()).unwrap();
            assert_eq!(o2, ReadOutcome::Clean);
            assert_eq!(again, got);
        }
    }

    #[test]
    fn damage_in_the_middle_is_an_error_and_at_the_end_is_a_torn_tail() {
        let recs = records();
        let (_d, path, data) = write_log(&recs);
        let mut mid = data.clone();
        mid[100] ^= 0x55;
        let err = read(&path, mid).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        let mut end = data.clone();
        let n = end.len();
        end[n - 3] ^= 0x55;
        let (got, o) = read(&path, end).unwrap();
        assert!(matches!(o, ReadOutcome::TornTail { .. }));
        assert_eq!(got.len(), recs.len() - 1);
    }
}
