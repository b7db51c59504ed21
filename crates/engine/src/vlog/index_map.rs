//! Value index maps (paper 000, sec. 4.5): GC without pointer write-back.
//!
//! When GC moves a still-valid record from an old value file into a new one, the tree keeps
//! pointing at the old location. Each new value file therefore gets an immutable map from
//! old locations (source file, offset) to the record's place in the new file. A read whose
//! pointer names a file that no longer exists follows the maps, possibly through several GC
//! generations, to the newest location; compaction rewrites such pointers lazily.
//!
//! ```text
//! file   := magic "HLVMAP01" (8) | target u64 | count u64 | nsources u32 |
//!           source u64 * nsources | entry * count | masked crc32c u32 (of all before it)
//! entry  := source_file u64 | source_offset u64 | new_offset u64 | new_size u32   (28 bytes)
//! ```
//! Entries are sorted by (source_file, source_offset); a lookup guesses the entry from the
//! offset ([`IndexMap::lookup`]). All integers little-endian.
//!
//! A map is needed while some pointer in the tree may resolve through it. Resolution only
//! moves from older files to newer ones, so a pointer to file `p` can use a map only if
//! `p <= max(sources)`: once every table's oldest referenced value file is above a map's
//! newest source, the map is dropped ([`IndexMap::newest_source`]).
//!
//! The grammar of every file in a database directory is in `docs/format.md`.

use super::ValuePointer;
use crate::checksum;
use crate::error::{Error, Result};
use crate::filename::index_map_file_name;
use crate::io::{IoCause, Storage};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

pub const MAGIC: &[u8; 8] = b"HLVMAP01";
const HEADER: usize = 8 + 8 + 8 + 4;
const ENTRY: usize = 28;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    src_file: u64,
    src_offset: u64,
    offset: u64,
    size: u32,
}

/// Builds the map of one GC output file. Entries must arrive in (file, offset) order,
/// which is the order GC scans its input files.
pub struct IndexMapBuilder {
    target: u64,
    entries: Vec<Entry>,
}

impl IndexMapBuilder {
    pub fn new(target: u64) -> Self {
        IndexMapBuilder {
            target,
            entries: Vec::new(),
        }
    }

    /// Records that the record at `old` now lives at `new` (in the target file).
    pub fn add(&mut self, old: &ValuePointer, new: &ValuePointer) {
        debug_assert_eq!(new.file, self.target);
        let e = Entry {
            src_file: old.file,
            src_offset: old.offset,
            offset: new.offset,
            size: new.size,
        };
        debug_assert!(self
            .entries
            .last()
            .is_none_or(|l| (l.src_file, l.src_offset) < (e.src_file, e.src_offset)));
        self.entries.push(e);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes and syncs the map file; `sources` are the files GC collected into the target.
    /// Returns the map, ready to install (it is not read back).
    pub fn finish(
        self,
        dir: &Path,
        storage: &Arc<dyn Storage>,
        sources: &[u64],
    ) -> Result<IndexMap> {
        let mut b = Vec::with_capacity(HEADER + 8 * sources.len() + ENTRY * self.len() + 4);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&self.target.to_le_bytes());
        b.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        b.extend_from_slice(&(sources.len() as u32).to_le_bytes());
        for s in sources {
            b.extend_from_slice(&s.to_le_bytes());
        }
        for e in &self.entries {
            b.extend_from_slice(&e.src_file.to_le_bytes());
            b.extend_from_slice(&e.src_offset.to_le_bytes());
            b.extend_from_slice(&e.offset.to_le_bytes());
            b.extend_from_slice(&e.size.to_le_bytes());
        }
        let crc = checksum::masked(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        let path = index_map_file_name(dir, self.target);
        let mut f = storage.create(&path, IoCause::IndexMap)?;
        f.append(&b)?;
        f.sync()?;
        Ok(IndexMap {
            target: self.target,
            sources: sources.to_vec(),
            runs: runs_of(&self.entries),
            entries: self.entries,
            path,
            obsolete: AtomicBool::new(false),
            storage: storage.clone(),
        })
    }
}

/// Each source file of `entries` (sorted) with the index of its first entry.
fn runs_of(entries: &[Entry]) -> Vec<(u64, usize)> {
    let mut runs: Vec<(u64, usize)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if runs.last().is_none_or(|r| r.0 != e.src_file) {
            runs.push((e.src_file, i));
        }
    }
    runs
}

/// A loaded, immutable index map. Deleted from disk when dropped after being marked
/// obsolete (no version needs it and the last reader let go).
pub struct IndexMap {
    target: u64,
    sources: Vec<u64>,
    entries: Vec<Entry>,
    /// Each source file with the index of its first entry, in order.
    runs: Vec<(u64, usize)>,
    path: PathBuf,
    obsolete: AtomicBool,
    storage: Arc<dyn Storage>,
}

impl std::fmt::Debug for IndexMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexMap")
            .field("target", &self.target)
            .field("sources", &self.sources)
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl IndexMap {
    /// Loads and verifies the map of `target`.
    pub fn load(dir: &Path, storage: &Arc<dyn Storage>, target: u64) -> Result<IndexMap> {
        let path = index_map_file_name(dir, target);
        let data = crate::io::read_all(&**storage, &path, IoCause::IndexMap)?;
        let bad = |what: &str| Error::corruption(&path, format!("index map: {what}"));
        if data.len() < HEADER + 4 || &data[..8] != MAGIC {
            return Err(bad("bad magic or too short"));
        }
        let body = &data[..data.len() - 4];
        let crc = u32::from_le_bytes(data[data.len() - 4..].try_into().unwrap());
        if checksum::unmask(crc) != checksum::crc(body) {
            return Err(bad("checksum mismatch"));
        }
        let u64_at = |o: usize| u64::from_le_bytes(body[o..o + 8].try_into().unwrap());
        if u64_at(8) != target {
            return Err(bad(&format!(
                "names file {} instead of {target}",
                u64_at(8)
            )));
        }
        let count = u64_at(16) as usize;
        let nsrc = u32::from_le_bytes(body[24..28].try_into().unwrap()) as usize;
        let expect = nsrc
            .checked_mul(8)
            .and_then(|s| count.checked_mul(ENTRY).map(|e| HEADER + s + e));
        if expect != Some(body.len()) {
            return Err(bad("length fields disagree with the file size"));
        }
        let sources = (0..nsrc).map(|i| u64_at(HEADER + 8 * i)).collect();
        let base = HEADER + 8 * nsrc;
        let mut entries = Vec::with_capacity(count);
        for i in 0..count {
            let o = base + ENTRY * i;
            entries.push(Entry {
                src_file: u64_at(o),
                src_offset: u64_at(o + 8),
                offset: u64_at(o + 16),
                size: u32::from_le_bytes(body[o + 24..o + 28].try_into().unwrap()),
            });
        }
        if entries
            .windows(2)
            .any(|w| (w[0].src_file, w[0].src_offset) >= (w[1].src_file, w[1].src_offset))
        {
            return Err(bad("entries out of order"));
        }
        Ok(IndexMap {
            target,
            sources,
            runs: runs_of(&entries),
            entries,
            path,
            obsolete: AtomicBool::new(false),
            storage: storage.clone(),
        })
    }

    pub fn target(&self) -> u64 {
        self.target
    }

    pub fn sources(&self) -> &[u64] {
        &self.sources
    }

    /// The newest value file this map translates from.
    pub fn newest_source(&self) -> u64 {
        self.sources.iter().copied().max().unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes this map takes in memory (and, within a few bytes, on disk).
    pub fn memory_bytes(&self) -> u64 {
        (self.entries.len() * ENTRY + self.sources.len() * 8) as u64
    }

    /// Bytes this map holds in memory.
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.sources.capacity() * 8
            + self.runs.capacity() * std::mem::size_of::<(u64, usize)>()
    }

    /// Where the record `old` pointed at lives in the target file, if GC moved it here.
    pub fn lookup(&self, old: &ValuePointer) -> Option<ValuePointer> {
        let e = &self.entries[self.find(old.file, old.offset)?];
        Some(ValuePointer {
            file: self.target,
            offset: e.offset,
            size: e.size,
        })
    }

    /// The index of the entry for the record at `offset` of `file`.
    ///
    /// Why not one binary search: compaction and reads resolve pointers in key order, so
    /// each lookup lands anywhere in maps of tens of thousands of entries, and each of a
    /// binary search's dependent probes missed the cache: at full scale, resolving pointers
    /// was 38 % of the compaction thread's time (docs/results/2026-11-29-background-cpu.md).
    /// A source's records were appended one after another, so their offsets grow about
    /// evenly with their index: the entry is guessed from the offset by interpolation, then
    /// bracketed by galloping from the guess (a few neighbouring entries when values are of
    /// similar size) and found by a binary search within the bracket. Uneven sizes cost only
    /// a longer gallop: O(log distance) probes.
    fn find(&self, file: u64, offset: u64) -> Option<usize> {
        let r = self.runs.binary_search_by_key(&file, |r| r.0).ok()?;
        let start = self.runs[r].1;
        let end = self.runs.get(r + 1).map_or(self.entries.len(), |n| n.1);
        let run = &self.entries[start..end];
        let at = |i: usize| run[i].src_offset;
        let (first, last) = (at(0), at(run.len() - 1));
        if offset < first || offset > last {
            return None;
        }
        let guess = match last - first {
            0 => 0,
            span => ((offset - first) as u128 * (run.len() - 1) as u128 / span as u128) as usize,
        };
        // The bracket `lo..hi` that holds `offset` if any entry does. Each gallop ends: at
        // the last entry (`at >= offset`, as `offset <= last`) or the first (`<= offset`).
        let (lo, hi) = match at(guess).cmp(&offset) {
            std::cmp::Ordering::Equal => return Some(start + guess),
            std::cmp::Ordering::Less => {
                let (mut lo, mut step) = (guess + 1, 1);
                loop {
                    let probe = (guess + step).min(run.len() - 1);
                    if at(probe) >= offset {
                        break (lo, probe + 1);
                    }
                    (lo, step) = (probe + 1, step * 2);
                }
            }
            std::cmp::Ordering::Greater => {
                let (mut hi, mut step) = (guess, 1);
                loop {
                    let probe = guess.saturating_sub(step);
                    if at(probe) <= offset {
                        break (probe, hi);
                    }
                    (hi, step) = (probe, step * 2);
                }
            }
        };
        run[lo..hi]
            .binary_search_by_key(&offset, |e| e.src_offset)
            .ok()
            .map(|i| start + lo + i)
    }

    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Relaxed);
    }
}

impl Drop for IndexMap {
    fn drop(&mut self) {
        if self.obsolete.load(Relaxed) {
            let _ = self.storage.remove(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FileStorage;

    fn p(file: u64, offset: u64, size: u32) -> ValuePointer {
        ValuePointer { file, offset, size }
    }

    #[test]
    fn round_trip_lookup_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Storage> = Arc::new(FileStorage::new());
        let mut b = IndexMapBuilder::new(30);
        b.add(&p(3, 16, 100), &p(30, 16, 100));
        b.add(&p(3, 500, 90), &p(30, 116, 90));
        b.add(&p(7, 16, 50), &p(30, 206, 50));
        let built = b.finish(dir.path(), &fs, &[3, 7]).unwrap();
        let m = IndexMap::load(dir.path(), &fs, 30).unwrap();
        assert_eq!((built.sources(), built.len()), (m.sources(), m.len()));
        assert_eq!(m.sources(), &[3, 7]);
        assert_eq!(m.newest_source(), 7);
        assert_eq!(m.lookup(&p(3, 500, 90)), Some(p(30, 116, 90)));
        assert_eq!(m.lookup(&p(7, 16, 50)), Some(p(30, 206, 50)));
        assert_eq!(m.lookup(&p(3, 17, 1)), None);
        assert_eq!(m.lookup(&p(5, 16, 1)), None);
        // Wrong target, flipped byte, truncation: typed corruption errors.
        assert!(IndexMap::load(dir.path(), &fs, 31).is_err());
        let path = index_map_file_name(dir.path(), 30);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[40] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = IndexMap::load(dir.path(), &fs, 30).unwrap_err();
        assert!(
            e.is_corruption() && e.to_string().contains("checksum"),
            "{e}"
        );
        std::fs::write(&path, &bytes[..20]).unwrap();
        assert!(IndexMap::load(dir.path(), &fs, 30)
            .unwrap_err()
            .is_corruption());
        // Obsolete maps are deleted when the last holder lets go.
        let mut b = IndexMapBuilder::new(40);
        b.add(&p(1, 16, 10), &p(40, 16, 10));
        drop(b.finish(dir.path(), &fs, &[1]).unwrap());
        let m = IndexMap::load(dir.path(), &fs, 40).unwrap();
        m.mark_obsolete();
        drop(m);
        assert!(!index_map_file_name(dir.path(), 40).exists());
    }

    proptest::proptest! {
        /// The guessing lookup finds exactly what a binary search over the whole map finds,
        /// for maps with even and uneven record sizes and for offsets in and between them.
        #[test]
        fn lookup_agrees_with_binary_search(
            sources in proptest::collection::btree_map(
                1u64..20,
                proptest::collection::vec((1u64..5000, proptest::bool::ANY), 1..300),
                1..5,
            ),
            probes in proptest::collection::vec((0u64..22, 0u64..400_000), 1..200),
        ) {
            let mut entries = Vec::new();
            let mut next = 16;
            for (&file, sizes) in &sources {
                let mut offset = 16;
                for &(size, skipped) in sizes {
                    // Garbage GC did not keep leaves gaps between the entries' offsets.
                    if !skipped {
                        entries.push(Entry { src_file: file, src_offset: offset, offset: next, size: size as u32 });
                        next += size;
                    }
                    offset += size;
                }
            }
            let m = IndexMap {
                target: 99,
                sources: sources.keys().copied().collect(),
                runs: runs_of(&entries),
                entries: entries.clone(),
                path: PathBuf::new(),
                obsolete: AtomicBool::new(false),
                storage: Arc::new(FileStorage::new()),
            };
            // Every entry is found, and so are probes at random places.
            let known = entries.iter().map(|e| (e.src_file, e.src_offset));
            for (file, offset) in known.chain(probes) {
                let want = entries
                    .binary_search_by(|e| (e.src_file, e.src_offset).cmp(&(file, offset)))
                    .ok();
                proptest::prop_assert_eq!(m.find(file, offset), want, "{} {}", file, offset);
            }
        }
    }
}
