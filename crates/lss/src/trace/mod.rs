//! Block-trace readers and writers.
//!
//! Three public formats are read, each a CSV file without header whose columns and units
//! differ (see `alibaba`, `tencent`, `msrc` and docs/lss.md). Every line is parsed
//! strictly: a malformed line is an error carrying the file name and the line number,
//! never a silent skip. Reads are counted but do not enter the replay, because only
//! writes move data in a log-structured store.
//!
//! A replayable [`Volume`] holds one entry per 4 KiB block written, in time order, with
//! the block address remapped to a dense id (`0..n_lbas`): the simulator indexes plain
//! vectors by it instead of hashing on the hot path.

pub mod alibaba;
pub mod msrc;
pub mod tencent;

use crate::error::{LssError, Result};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// Block size of the store: a request is split into 4 KiB blocks by address.
pub const BLOCK_BYTES: u64 = 4096;

/// The trace formats this crate reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Format {
    /// Alibaba cloud block traces: `device_id,opcode,offset,length,timestamp`.
    Alibaba,
    /// Tencent CBS: `Timestamp,Offset,Size,IOType,VolumeID`.
    Tencent,
    /// MSRC Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    Msrc,
}

impl std::str::FromStr for Format {
    type Err = LssError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "alibaba" | "ali" => Ok(Format::Alibaba),
            "tencent" | "cbs" => Ok(Format::Tencent),
            "msrc" | "msr" => Ok(Format::Msrc),
            _ => Err(LssError::UnknownFormat(s.to_string())),
        }
    }
}

impl Format {
    /// Guesses the format from a file name (`alibaba`, `tencent`, `msrc` in the name).
    pub fn guess(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        if name.contains("alibaba") || name.contains("ali_") {
            Some(Format::Alibaba)
        } else if name.contains("tencent") || name.contains("cbs") {
            Some(Format::Tencent)
        } else if name.contains("msrc") || name.contains("msr_") {
            Some(Format::Msrc)
        } else {
            None
        }
    }

    fn parse(self, line: &str) -> std::result::Result<Record, String> {
        match self {
            Format::Alibaba => alibaba::parse(line),
            Format::Tencent => tencent::parse(line),
            Format::Msrc => msrc::parse(line),
        }
    }

    fn format(self, r: &Record) -> String {
        match self {
            Format::Alibaba => alibaba::format(r),
            Format::Tencent => tencent::format(r),
            Format::Msrc => msrc::format(r),
        }
    }
}

/// One trace request in common units: bytes and microseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The volume (device, disk) the request addresses.
    pub volume: String,
    pub write: bool,
    pub offset: u64,
    pub len: u64,
    /// Trace time in microseconds (absolute, as the format gives it).
    pub t_us: u64,
}

/// The write stream of one volume, one entry per 4 KiB block, sorted by time.
#[derive(Clone, Debug, Default)]
pub struct Volume {
    pub name: String,
    /// Trace time of each block write in microseconds since the volume's first request.
    pub times: Vec<u64>,
    /// Dense block id of each block write.
    pub lbas: Vec<u32>,
    /// Number of distinct blocks written (dense ids are `0..n_lbas`).
    pub n_lbas: u32,
    pub write_requests: u64,
    pub read_requests: u64,
}

impl Volume {
    pub fn block_writes(&self) -> usize {
        self.lbas.len()
    }

    /// Trace duration in seconds.
    pub fn duration_s(&self) -> f64 {
        self.times.last().copied().unwrap_or(0) as f64 / 1e6
    }

    /// For each block write, the ordinal of the next write to the same block (`u64::MAX`
    /// if none): the future knowledge used by the FK oracle.
    pub fn next_use(&self) -> Vec<u64> {
        let mut last = vec![u64::MAX; self.n_lbas as usize];
        let mut next = vec![u64::MAX; self.lbas.len()];
        for i in (0..self.lbas.len()).rev() {
            let l = self.lbas[i] as usize;
            next[i] = last[l];
            last[l] = i as u64;
        }
        next
    }
}

/// Accumulates records into volumes, remapping block addresses to dense ids.
#[derive(Default)]
pub struct VolumeBuilder {
    vols: Vec<(Volume, HashMap<u64, u32>, u64, bool)>,
    index: HashMap<String, usize>,
}

impl VolumeBuilder {
    pub fn push(&mut self, r: &Record) {
        let idx = match self.index.get(&r.volume) {
            Some(&i) => i,
            None => {
                let v = Volume {
                    name: r.volume.clone(),
                    ..Default::default()
                };
                self.vols.push((v, HashMap::new(), r.t_us, true));
                self.index.insert(r.volume.clone(), self.vols.len() - 1);
                self.vols.len() - 1
            }
        };
        let (vol, map, t0, sorted) = &mut self.vols[idx];
        if !r.write {
            vol.read_requests += 1;
            return;
        }
        vol.write_requests += 1;
        if r.t_us < *t0 {
            // Shift everything written so far: the origin is the earliest request.
            let d = *t0 - r.t_us;
            vol.times.iter_mut().for_each(|t| *t += d);
            *t0 = r.t_us;
        }
        let t = r.t_us - *t0;
        if vol.times.last().is_some_and(|&l| l > t) {
            *sorted = false;
        }
        let first = r.offset / BLOCK_BYTES;
        let last = (r.offset + r.len - 1) / BLOCK_BYTES;
        for b in first..=last {
            let n = map.len() as u32;
            let id = *map.entry(b).or_insert(n);
            vol.times.push(t);
            vol.lbas.push(id);
        }
    }

    /// The volumes, each sorted by time (stable), in order of first appearance.
    pub fn finish(self) -> Vec<Volume> {
        self.vols
            .into_iter()
            .map(|(mut v, map, _, sorted)| {
                v.n_lbas = map.len() as u32;
                if !sorted {
                    let mut idx: Vec<usize> = (0..v.times.len()).collect();
                    idx.sort_by_key(|&i| v.times[i]);
                    v.times = idx.iter().map(|&i| v.times[i]).collect();
                    v.lbas = idx.iter().map(|&i| v.lbas[i]).collect();
                }
                v
            })
            .collect()
    }
}

/// Reads a whole trace file into per-volume write streams.
pub fn read(path: &Path, format: Format) -> Result<Vec<Volume>> {
    let io = |source| LssError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut b = VolumeBuilder::default();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line.map_err(io)?;
        let rec = format
            .parse(line.trim_end())
            .map_err(|msg| LssError::Parse {
                path: path.to_path_buf(),
                line: i as u64 + 1,
                msg,
            })?;
        b.push(&rec);
    }
    let vols = b.finish();
    if vols.is_empty() {
        return Err(LssError::Parse {
            path: path.to_path_buf(),
            line: 0,
            msg: "empty trace".into(),
        });
    }
    Ok(vols)
}

/// Writes records in the given format, one line each.
pub fn write(path: &Path, format: Format, records: &[Record]) -> Result<()> {
    let io = |source| LssError::Io {
        path: PathBuf::from(path),
        source,
    };
    let f = std::fs::File::create(path).map_err(io)?;
    let mut w = std::io::BufWriter::new(f);
    for r in records {
        writeln!(w, "{}", format.format(r)).map_err(io)?;
    }
    w.flush().map_err(io)
}

/// Splits a CSV line into exactly `n` fields or explains why not.
pub(crate) fn fields(line: &str, n: usize) -> std::result::Result<Vec<&str>, String> {
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if f.len() != n {
        return Err(format!(
            "expected {n} comma-separated fields, found {}",
            f.len()
        ));
    }
    Ok(f)
}

pub(crate) fn uint(field: &str, what: &str) -> std::result::Result<u64, String> {
    field
        .parse::<u64>()
        .map_err(|_| format!("{what} `{field}` is not a non-negative integer"))
}

/// Offsets and lengths in bytes must be multiples of a 512-byte sector; anything else
/// usually means the column is in another unit.
pub(crate) fn sector_aligned(v: u64, what: &str) -> std::result::Result<u64, String> {
    if v % 512 != 0 {
        return Err(format!(
            "{what} {v} is not a multiple of 512 bytes (wrong unit?)"
        ));
    }
    Ok(v)
}

pub(crate) fn nonzero(v: u64, what: &str) -> std::result::Result<u64, String> {
    if v == 0 {
        return Err(format!("{what} is zero"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_requests_into_blocks_and_remaps() {
        let mut b = VolumeBuilder::default();
        let rec = |off, len, t| Record {
            volume: "v".into(),
            write: true,
            offset: off,
            len,
            t_us: t,
        };
        b.push(&rec(8192, 8192, 10)); // blocks 2,3
        b.push(&rec(4096 * 100, 512, 20)); // block 100
        b.push(&rec(12288, 4096, 15)); // block 3 again, out of order
        let v = b.finish().pop().unwrap();
        assert_eq!(v.n_lbas, 3);
        assert_eq!(v.times, vec![0, 0, 5, 10]);
        assert_eq!(v.lbas, vec![0, 1, 1, 2]);
        assert_eq!(v.next_use(), vec![u64::MAX, 2, u64::MAX, u64::MAX]);
    }
}
