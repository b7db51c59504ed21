//! A compact binary op stream, so that drivers for other engines (Python for RocksDB, Go for
//! Badger) replay exactly the operations halflife ran.
//!
//! # Format (all integers little endian)
//!
//! ```text
//! offset  size  field
//!      0     8  magic b"HLOPS001"
//!      8     4  key_size      u32   bytes per key   (keys: crate::keys::format_key)
//!     12     4  value_size    u32   bytes per value (values: crate::keys::ValueGen)
//!     16     8  record_count  u64   size of the load phase
//!     24     8  op_count      u64   number of run-phase records that follow
//!     32     -  op_count records:
//!                 code u8      0 insert, 1 update, 2 read, 3 scan, 4 read-modify-write,
//!                              5 delete
//!                 key  u64     key number (the start key for a scan)
//!                 len  u32     scan length; present only when code == 3
//!                 ttl  u32     ops until the value expires; only when code == 6
//! ```
//!
//! Records are 9 bytes, 13 for scans and expiring updates. The file ends right after the last record; trailing
//! bytes are an error, so a file cut exactly at a record boundary is still detected by the
//! count in the header.
//!
//! **The load phase is implicit**: before the first record, a driver inserts key numbers
//! `0, 1, ..., record_count - 1` in that order. It is fully determined by `record_count`, so
//! storing it would only add 9 bytes per record.
//!
//! Value versions, for drivers that reproduce [`crate::keys::ValueGen`] bytes: the load
//! writes version 0 of every key; each run-phase insert, update or read-modify-write of a
//! key writes the key's previous version + 1 (an inserted key starts at 0). A delete
//! removes the key and leaves its version count alone: the update that re-creates it
//! writes the version after the last one written.
//!
//! Deletes (code 5) came after the first drivers, and expiring updates (code 6) after
//! deletes; a driver that does not know one stops at the record with an unknown-op-code
//! error rather than skipping it.
//!
//! **Time in an op file is counted in ops**: run-phase record `i` (from 0) happens at
//! tick `i`, and an expiring update at tick `i` with `ttl` writes a value that has
//! expired at tick `i + ttl` (a read from that op on finds nothing unless the key was
//! written again). Drivers give their engine a clock that reads the op index, so that
//! every engine sees the same lifetimes whatever its speed.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use thiserror::Error;

use crate::op::Op;
use crate::workload::Workload;

/// The file's first eight bytes.
pub const MAGIC: &[u8; 8] = b"HLOPS001";
/// Header length in bytes.
pub const HEADER_SIZE: usize = 32;

const CODE_INSERT: u8 = 0;
const CODE_UPDATE: u8 = 1;
const CODE_READ: u8 = 2;
const CODE_SCAN: u8 = 3;
const CODE_RMW: u8 = 4;
const CODE_DELETE: u8 = 5;
const CODE_EXPIRING_UPDATE: u8 = 6;

/// The fixed header after the magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub key_size: u32,
    pub value_size: u32,
    pub record_count: u64,
    pub op_count: u64,
}

impl Header {
    /// The header describing `workload`'s load and run phases.
    pub fn for_workload(workload: &Workload) -> Self {
        let spec = workload.spec();
        Self {
            key_size: spec.key_size,
            value_size: spec.value_size,
            record_count: spec.record_count,
            op_count: spec.operation_count,
        }
    }

    fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.key_size.to_le_bytes());
        b[12..16].copy_from_slice(&self.value_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.record_count.to_le_bytes());
        b[24..32].copy_from_slice(&self.op_count.to_le_bytes());
        b
    }

    fn decode(b: &[u8; HEADER_SIZE]) -> Result<Self, OpFileError> {
        if &b[0..8] != MAGIC {
            return Err(OpFileError::BadMagic {
                found: b[0..8].try_into().expect("8 bytes"),
            });
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Ok(Self {
            key_size: u32_at(8),
            value_size: u32_at(12),
            record_count: u64_at(16),
            op_count: u64_at(24),
        })
    }
}

/// What is wrong with an op file; offsets are bytes from the start of the file.
#[derive(Debug, Error)]
pub enum OpFileError {
    #[error("I/O error at byte offset {offset}: {source}")]
    Io { offset: u64, source: io::Error },
    #[error("not an op file: magic at byte offset 0 is {found:?}, expected \"HLOPS001\"")]
    BadMagic { found: [u8; 8] },
    #[error("truncated header: file ends at byte offset {end}, header needs {HEADER_SIZE} bytes")]
    TruncatedHeader { end: u64 },
    #[error(
        "truncated record {index} starting at byte offset {offset}: file ends at byte offset {end}"
    )]
    TruncatedRecord { index: u64, offset: u64, end: u64 },
    #[error("unknown op code {code} in record {index} at byte offset {offset}")]
    UnknownOpCode { index: u64, offset: u64, code: u8 },
    #[error(
        "trailing data at byte offset {offset} after the {op_count} records the header declares"
    )]
    TrailingData { offset: u64, op_count: u64 },
    #[error("header declares {declared} ops but {written} were written")]
    CountMismatch { declared: u64, written: u64 },
}

/// Writes an op file; the header's `op_count` must match the ops written.
pub struct OpFileWriter<W: Write> {
    inner: W,
    header: Header,
    written: u64,
    offset: u64,
}

impl<W: Write> OpFileWriter<W> {
    /// Writes the header. Pass a buffered writer: records are written one small piece at a time.
    pub fn new(mut inner: W, header: Header) -> Result<Self, OpFileError> {
        inner
            .write_all(&header.encode())
            .map_err(|source| OpFileError::Io { offset: 0, source })?;
        Ok(Self {
            inner,
            header,
            written: 0,
            offset: HEADER_SIZE as u64,
        })
    }

    /// Appends one record.
    pub fn write_op(&mut self, op: &Op) -> Result<(), OpFileError> {
        if self.written == self.header.op_count {
            return Err(OpFileError::CountMismatch {
                declared: self.header.op_count,
                written: self.written + 1,
            });
        }
        let mut rec = [0u8; 13];
        rec[0] = op.code();
        rec[1..9].copy_from_slice(&op.key().to_le_bytes());
        let len = match op {
            Op::Scan { len: n, .. } | Op::ExpiringUpdate { ttl: n, .. } => {
                rec[9..13].copy_from_slice(&n.to_le_bytes());
                13
            }
            _ => 9,
        };
        self.inner
            .write_all(&rec[..len])
            .map_err(|source| OpFileError::Io {
                offset: self.offset,
                source,
            })?;
        self.offset += len as u64;
        self.written += 1;
        Ok(())
    }

    /// Flushes and returns the inner writer; fails if fewer ops were written than declared.
    pub fn finish(mut self) -> Result<W, OpFileError> {
        if self.written != self.header.op_count {
            return Err(OpFileError::CountMismatch {
                declared: self.header.op_count,
                written: self.written,
            });
        }
        self.inner.flush().map_err(|source| OpFileError::Io {
            offset: self.offset,
            source,
        })?;
        Ok(self.inner)
    }
}

/// Writes `workload`'s run phase (the load phase is implicit) to `out`, buffered.
pub fn write_workload<W: Write>(workload: &Workload, out: W) -> Result<W, OpFileError> {
    let mut w = OpFileWriter::new(BufWriter::new(out), Header::for_workload(workload))?;
    for op in workload.run_ops() {
        w.write_op(&op)?;
    }
    let offset = w.offset;
    w.finish()?.into_inner().map_err(|e| OpFileError::Io {
        offset,
        source: e.into_error(),
    })
}

/// Writes `workload` to a new file at `path`.
pub fn write_workload_to_path(workload: &Workload, path: &Path) -> Result<(), OpFileError> {
    let file = File::create(path).map_err(|source| OpFileError::Io { offset: 0, source })?;
    write_workload(workload, file)?;
    Ok(())
}

/// Reads an op file record by record; an iterator of `Result<Op, OpFileError>` that stops
/// after the first error.
pub struct OpFileReader<R: Read> {
    inner: R,
    header: Header,
    offset: u64,
    read: u64,
    done: bool,
}

impl OpFileReader<BufReader<File>> {
    /// Opens `path` with buffering.
    pub fn open(path: &Path) -> Result<Self, OpFileError> {
        let file = File::open(path).map_err(|source| OpFileError::Io { offset: 0, source })?;
        Self::new(BufReader::new(file))
    }
}

impl<R: Read> OpFileReader<R> {
    /// Reads and checks the header. Pass a buffered reader.
    pub fn new(mut inner: R) -> Result<Self, OpFileError> {
        let mut buf = [0u8; HEADER_SIZE];
        let got = read_full(&mut inner, &mut buf, 0)?;
        // Check the magic on whatever arrived first: a short file of garbage is not an op
        // file at all, while a short prefix of a real one is a truncated header.
        let magic_len = got.min(MAGIC.len());
        if buf[..magic_len] != MAGIC[..magic_len] {
            return Err(OpFileError::BadMagic {
                found: buf[..8].try_into().expect("8 bytes"),
            });
        }
        if got < HEADER_SIZE {
            return Err(OpFileError::TruncatedHeader { end: got as u64 });
        }
        Ok(Self {
            header: Header::decode(&buf)?,
            inner,
            offset: HEADER_SIZE as u64,
            read: 0,
            done: false,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn read_op(&mut self) -> Result<Option<Op>, OpFileError> {
        let start = self.offset;
        let index = self.read;
        if index == self.header.op_count {
            let mut probe = [0u8; 1];
            return match read_full(&mut self.inner, &mut probe, start)? {
                0 => Ok(None),
                _ => Err(OpFileError::TrailingData {
                    offset: start,
                    op_count: self.header.op_count,
                }),
            };
        }
        let truncated = |got: usize| OpFileError::TruncatedRecord {
            index,
            offset: start,
            end: start + got as u64,
        };
        let mut rec = [0u8; 13];
        let got = read_full(&mut self.inner, &mut rec[..9], start)?;
        if got >= 1 && rec[0] > CODE_EXPIRING_UPDATE {
            return Err(OpFileError::UnknownOpCode {
                index,
                offset: start,
                code: rec[0],
            });
        }
        if got < 9 {
            return Err(truncated(got));
        }
        let mut len = 9;
        if rec[0] == CODE_SCAN || rec[0] == CODE_EXPIRING_UPDATE {
            let got = read_full(&mut self.inner, &mut rec[9..13], start + 9)?;
            if got < 4 {
                return Err(truncated(9 + got));
            }
            len = 13;
        }
        let key = u64::from_le_bytes(rec[1..9].try_into().expect("8 bytes"));
        let op = match rec[0] {
            CODE_INSERT => Op::Insert { key },
            CODE_UPDATE => Op::Update { key },
            CODE_READ => Op::Read { key },
            CODE_SCAN => Op::Scan {
                start: key,
                len: u32::from_le_bytes(rec[9..13].try_into().expect("4 bytes")),
            },
            CODE_RMW => Op::ReadModifyWrite { key },
            CODE_DELETE => Op::Delete { key },
            CODE_EXPIRING_UPDATE => Op::ExpiringUpdate {
                key,
                ttl: u32::from_le_bytes(rec[9..13].try_into().expect("4 bytes")),
            },
            code => unreachable!("op code {code} checked above"),
        };
        self.offset += len;
        self.read += 1;
        Ok(Some(op))
    }
}

impl<R: Read> Iterator for OpFileReader<R> {
    type Item = Result<Op, OpFileError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.read_op() {
            Ok(Some(op)) => Some(Ok(op)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Reads a whole op file into memory.
pub fn read_all<R: Read>(inner: R) -> Result<(Header, Vec<Op>), OpFileError> {
    let mut reader = OpFileReader::new(inner)?;
    let header = *reader.header();
    let ops = reader.by_ref().collect::<Result<Vec<_>, _>>()?;
    Ok((header, ops))
}

/// Reads until `buf` is full or the input ends; returns the bytes read. `offset` is where
/// `buf` starts in the file, for error messages.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8], offset: u64) -> Result<usize, OpFileError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(OpFileError::Io {
                    offset: offset + got as u64,
                    source,
                })
            }
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkloadSpec;

    fn sample_ops() -> Vec<Op> {
        vec![
            Op::Insert { key: 5 },
            Op::Update { key: u64::MAX },
            Op::Read { key: 0 },
            Op::Scan { start: 7, len: 100 },
            Op::ReadModifyWrite { key: 1 << 40 },
            Op::Delete { key: 258 },
            Op::ExpiringUpdate {
                key: 3,
                ttl: 70_000,
            },
        ]
    }

    fn encode(ops: &[Op]) -> Vec<u8> {
        let header = Header {
            key_size: 24,
            value_size: 1000,
            record_count: 10,
            op_count: ops.len() as u64,
        };
        let mut w = OpFileWriter::new(Vec::new(), header).unwrap();
        for op in ops {
            w.write_op(op).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn byte_layout_is_as_documented() {
        let bytes = encode(&sample_ops());
        assert_eq!(&bytes[..8], b"HLOPS001");
        assert_eq!(&bytes[8..12], &24u32.to_le_bytes());
        assert_eq!(&bytes[12..16], &1000u32.to_le_bytes());
        assert_eq!(&bytes[16..24], &10u64.to_le_bytes());
        assert_eq!(&bytes[24..32], &7u64.to_le_bytes());
        assert_eq!(&bytes[32..41], &[0, 5, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(bytes[41], 1);
        // Scan record: code 3, key 7, len 100.
        assert_eq!(&bytes[59..72], &[3, 7, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0]);
        // Delete record: code 5, key 258.
        assert_eq!(&bytes[81..90], &[5, 2, 1, 0, 0, 0, 0, 0, 0]);
        // Expiring update: code 6, key 3, ttl 70,000.
        assert_eq!(
            &bytes[90..103],
            &[6, 3, 0, 0, 0, 0, 0, 0, 0, 0x70, 0x11, 1, 0]
        );
        assert_eq!(bytes.len(), 32 + 5 * 9 + 2 * 13);
    }

    #[test]
    fn round_trips() {
        let ops = sample_ops();
        let (header, back) = read_all(&encode(&ops)[..]).unwrap();
        assert_eq!(back, ops);
        assert_eq!(header.record_count, 10);
    }

    #[test]
    fn workload_round_trips() {
        let w = Workload::new(
            WorkloadSpec::ycsb('e')
                .unwrap()
                .with_record_count(100)
                .with_operation_count(3000),
        )
        .unwrap();
        let bytes = write_workload(&w, Vec::new()).unwrap();
        let (header, ops) = read_all(&bytes[..]).unwrap();
        assert_eq!(header, Header::for_workload(&w));
        assert_eq!(ops, w.run_ops().collect::<Vec<_>>());

        let dir = std::env::temp_dir().join(format!("hlops-test-{}", std::process::id()));
        write_workload_to_path(&w, &dir).unwrap();
        let from_file: Vec<Op> = OpFileReader::open(&dir)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(from_file, ops);
    }

    #[test]
    fn every_truncation_is_reported_with_its_offset() {
        let bytes = encode(&sample_ops());
        for cut in 0..bytes.len() {
            let err = read_all(&bytes[..cut]).unwrap_err();
            match err {
                OpFileError::TruncatedHeader { end } => {
                    assert!(cut < HEADER_SIZE);
                    assert_eq!(end, cut as u64);
                }
                OpFileError::TruncatedRecord { offset, end, .. } => {
                    assert!(cut >= HEADER_SIZE);
                    assert!(offset <= cut as u64);
                    assert_eq!(end, cut as u64);
                }
                other => panic!("cut {cut}: {other}"),
            }
        }
        // Cut at a record boundary: the record index names what is missing.
        match read_all(&bytes[..41]).unwrap_err() {
            OpFileError::TruncatedRecord { index, offset, end } => {
                assert_eq!((index, offset, end), (1, 41, 41))
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn malformed_files_are_refused() {
        let mut bytes = encode(&sample_ops());
        bytes[41] = 7;
        let err = read_all(&bytes[..]).unwrap_err();
        assert!(matches!(
            err,
            OpFileError::UnknownOpCode {
                index: 1,
                offset: 41,
                code: 7
            }
        ));
        assert!(err.to_string().contains("byte offset 41"), "{err}");

        let mut bytes = encode(&sample_ops());
        bytes.push(0);
        assert!(matches!(
            read_all(&bytes[..]).unwrap_err(),
            OpFileError::TrailingData { offset: 103, .. }
        ));

        let mut bytes = encode(&sample_ops());
        bytes[0] = b'X';
        assert!(matches!(
            read_all(&bytes[..]).unwrap_err(),
            OpFileError::BadMagic { .. }
        ));
        assert!(matches!(
            read_all(&b"GARBAGE"[..]).unwrap_err(),
            OpFileError::BadMagic { .. }
        ));
    }

    #[test]
    fn writer_enforces_the_declared_count() {
        let header = Header {
            key_size: 24,
            value_size: 8,
            record_count: 1,
            op_count: 1,
        };
        let w = OpFileWriter::new(Vec::new(), header).unwrap();
        assert!(matches!(
            w.finish(),
            Err(OpFileError::CountMismatch {
                declared: 1,
                written: 0
            })
        ));
        let mut w = OpFileWriter::new(Vec::new(), header).unwrap();
        w.write_op(&Op::Read { key: 0 }).unwrap();
        assert!(w.write_op(&Op::Read { key: 0 }).is_err());
    }
}
