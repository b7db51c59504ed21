//! The ordered change stream: [`crate::DB::updates_since`] (RocksDB's `GetUpdatesSince`,
//! which Kvrocks' replicas follow after a full sync from a checkpoint).
//!
//! The stream reads the WALs, the archived ones first ([`super::wal_archive`]), and yields
//! each write batch as it was committed, with its first sequence number: the batch that
//! holds the sequence number asked for, then every later one, up to the last write visible
//! when the stream was made. What a reader sees:
//!
//! - user writes only: a value logged in a value file (the value log as the WAL) is read
//!   back and verified; the bare pointers GC writes back through the write path are the
//!   engine's own bookkeeping and are left out (a batch of nothing else is skipped);
//! - no gap: each WAL starts with a record naming the sequence number it continues at, and
//!   a stream that would skip writes (a WAL dropped by the archive's bounds, a value file
//!   collected by GC) ends with [`Error::UpdatesGone`] instead, after which a replica
//!   copies the database anew.
//!
//! A WAL is read whole into memory when the stream reaches it (a WAL holds about one
//! memtable). The live WAL is read up to what was appended; a record still being appended
//! reads as a torn tail and ends that file.

use super::inner::Inner;
use super::wal_archive;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::internal_key::{SeqNo, ValueKind};
use crate::io::IoCause;
use crate::options::WalRecoveryMode;
use crate::version::Version;
use crate::vlog::file::BlobMeta;
use crate::vlog::{value_wal, BlobFile, ValuePointer};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Write batches from a sequence number on, in commit order (see the module docs).
pub struct Updates {
    inner: Arc<Inner>,
    from: SeqNo,
    /// The last sequence number the stream yields (visible when it was made).
    end: SeqNo,
    /// WALs not read yet, oldest first.
    wals: VecDeque<(u64, PathBuf)>,
    /// Batches of the WAL being read, not yet yielded.
    pending: VecDeque<(SeqNo, WriteBatch)>,
    /// The sequence number the next batch must start at, once one was read.
    next: Option<SeqNo>,
    done: bool,
}

impl std::fmt::Debug for Updates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Updates")
            .field("from", &self.from)
            .field("end", &self.end)
            .field("wals", &self.wals.len())
            .finish()
    }
}

pub(crate) fn since(inner: &Arc<Inner>, from: SeqNo) -> Result<Updates> {
    let end = inner.visible_seq.load(Ordering::Acquire);
    let from = from.max(1);
    let storage = &*inner.storage;
    // The live WALs before the archive: a WAL archived between the two listings is then in
    // both (and kept once), never in neither.
    let mut wals: Vec<(u64, PathBuf)> = storage
        .list(&inner.dir)?
        .into_iter()
        .filter_map(|p| filename::number_of(&p, FileKind::Wal).map(|n| (n, p)))
        .collect();
    wals.extend(wal_archive::list(storage, &inner.dir));
    wals.sort_unstable();
    wals.dedup_by_key(|w| w.0);
    let mut stream = Updates {
        inner: inner.clone(),
        from,
        end,
        wals: VecDeque::new(),
        pending: VecDeque::new(),
        next: None,
        done: from > end,
    };
    if stream.done {
        return Ok(stream);
    }
    // Start at the newest WAL that starts at or before `from`.
    let mut start = None;
    let mut oldest = None;
    for (i, (_, p)) in wals.iter().enumerate() {
        let Some(first) = first_seq(inner, p)? else {
            continue;
        };
        oldest.get_or_insert(first);
        if first <= from {
            start = Some(i);
        } else {
            break;
        }
    }
    let Some(start) = start else {
        return Err(Error::UpdatesGone {
            seq: from,
            detail: match oldest {
                Some(o) => format!("the oldest WAL retained starts at {o}"),
                None => "no WAL is retained".into(),
            },
        });
    };
    stream.wals = wals.into_iter().skip(start).collect();
    Ok(stream)
}

/// The sequence number a WAL starts at: its start record's, or its first batch's (WALs of
/// older versions have no start record); `None` for a WAL with no complete record yet.
/// Reads the first block, where the start record is; the whole file only if that holds
/// no complete record (an older WAL whose first batch is larger than a block).
fn first_seq(inner: &Inner, path: &Path) -> Result<Option<SeqNo>> {
    let first_in = |data: Vec<u8>| -> Result<Option<SeqNo>> {
        let mut first = None;
        crate::wal::LogReader::new(path, data).for_each_until(
            WalRecoveryMode::TolerateCorruptedTailRecords,
            |rec| {
                first = Some(WriteBatch::decode(path, rec)?.first_seq());
                Ok(false)
            },
        )?;
        Ok(first)
    };
    let block = read_wal_upto(inner, path, Some(crate::wal::log::BLOCK_SIZE))?;
    match block {
        None => Ok(None),
        Some((data, whole)) => match first_in(data)? {
            Some(s) => Ok(Some(s)),
            None if whole => Ok(None),
            None => read_wal(inner, path)?.map_or(Ok(None), first_in),
        },
    }
}

/// The first `limit` bytes of a WAL (all of it if `None`) and whether they are the whole
/// file, or `None` if it is gone (archived or purged since it was listed).
fn read_wal_upto(
    inner: &Inner,
    path: &Path,
    limit: Option<usize>,
) -> Result<Option<(Vec<u8>, bool)>> {
    let archived = wal_archive::archive_dir(&inner.dir).join(path.file_name().unwrap_or_default());
    for p in [path, archived.as_path()] {
        // A WAL whose writer is closed while it is read is cut to its written length (the
        // zeros of its mapped window go), so a read of the length seen at open can fall
        // short once; the next read sees the final length.
        let mut tries = 0;
        while inner.storage.exists(p) {
            let read = inner.storage.open(p).and_then(|f| {
                let len = f.len() as usize;
                let n = limit.map_or(len, |l| l.min(len));
                Ok((f.read_at(0, n, IoCause::Other)?, n == len))
            });
            match read {
                Ok(d) => return Ok(Some(d)),
                // Moved or purged between the check and the read.
                Err(_) if !inner.storage.exists(p) => break,
                Err(_) if tries < 2 => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(None)
}

/// A WAL's bytes, or `None` if it is gone.
fn read_wal(inner: &Inner, path: &Path) -> Result<Option<Vec<u8>>> {
    Ok(read_wal_upto(inner, path, None)?.map(|(d, _)| d))
}

impl Updates {
    fn gone(&mut self, detail: String) -> Error {
        self.done = true;
        Error::UpdatesGone {
            seq: self.next.unwrap_or(self.from),
            detail,
        }
    }

    /// Reads the next WAL's batches into `pending`.
    fn read_next_wal(&mut self) -> Result<()> {
        let Some((number, path)) = self.wals.pop_front() else {
            self.done = true;
            return Ok(());
        };
        let Some(data) = read_wal(&self.inner, &path)? else {
            return Err(self.gone(format!("WAL {number} was dropped while the stream read it")));
        };
        let mut batches = Vec::new();
        crate::wal::LogReader::new(&path, data).for_each_until(
            WalRecoveryMode::TolerateCorruptedTailRecords,
            |rec| {
                let b = WriteBatch::decode(&path, rec)?;
                let go_on = b.first_seq() <= self.end;
                if go_on {
                    batches.push(b);
                }
                Ok(go_on)
            },
        )?;
        let version = self.inner.state.lock().versions.current();
        for b in batches {
            let first = b.first_seq();
            if let Some(next) = self.next {
                if first != next {
                    return Err(self.gone(format!(
                        "WAL {number} continues at {first}, not at {next}: writes between \
                         were in a WAL no longer retained"
                    )));
                }
            }
            self.next = Some(first + b.len() as u64);
            let last = (first + b.len() as u64).saturating_sub(1);
            if b.is_empty() || last < self.from {
                continue;
            }
            let user = match user_writes(&self.inner, &version, &path, &b) {
                Ok(u) => u,
                Err(Gone(why)) => return Err(self.gone(why)),
                Err(Failed(e)) => return Err(e),
            };
            if !user.is_empty() {
                self.pending.push_back((first, user));
            }
        }
        Ok(())
    }
}

enum ResolveError {
    Gone(String),
    Failed(Error),
}
use ResolveError::{Failed, Gone};

/// The user's writes of a WAL batch: logged values read back, GC write-backs left out.
fn user_writes(
    inner: &Inner,
    v: &Version,
    wal: &Path,
    b: &WriteBatch,
) -> std::result::Result<WriteBatch, ResolveError> {
    let mut out = WriteBatch::new();
    let mut value = Vec::new();
    for e in b.iter() {
        if !matches!(e.kind, ValueKind::Pointer | ValueKind::ExpiringPointer) {
            out.add(e.kind, e.key, e.value);
            continue;
        }
        // A pointer that is not a logged value is a GC write-back: no update.
        let Ok(Some((ptr, expire_at))) = value_wal::logged(wal, e.kind, e.value) else {
            continue;
        };
        value.clear();
        let kind = crate::expiry::encode_into(
            &mut value,
            ValueKind::Value,
            expire_at,
            &read_logged(inner, v, &ptr, e.key)?,
        );
        out.add(kind, e.key, &value);
    }
    out.set_first_seq(b.first_seq());
    Ok(out)
}

/// Reads a logged value: where the value file is live or was moved by an index-map GC
/// (resolved through the maps), or in a file the write path has not handed to a flush yet.
fn read_logged(
    inner: &Inner,
    v: &Version,
    ptr: &ValuePointer,
    key: &[u8],
) -> std::result::Result<Vec<u8>, ResolveError> {
    if let Some(p) = v.resolve(ptr) {
        if let Some(f) = v.blobs.get(&p.file) {
            return f.read(&p, key, IoCause::Other).map_err(Failed);
        }
    }
    let path = filename::value_file_name(&inner.dir, ptr.file);
    let gone = || {
        Gone(format!(
            "the value written to a key at this point was in value file {}, collected since",
            ptr.file
        ))
    };
    let size = match inner.storage.file_size(&path) {
        Ok(s) => s,
        Err(_) if !inner.storage.exists(&path) => return Err(gone()),
        Err(e) => return Err(Failed(e)),
    };
    let meta = BlobMeta {
        number: ptr.file,
        size,
        entries: 0,
        garbage_bytes: 0,
        garbage_entries: 0,
        lifetime: None,
        expiry: crate::vlog::FileExpiry::None,
    };
    match BlobFile::new(&meta, &inner.dir, inner.storage.clone()).read(ptr, key, IoCause::Other) {
        Ok(value) => Ok(value),
        Err(_) if !inner.storage.exists(&path) => Err(gone()),
        Err(e) => Err(Failed(e)),
    }
}

impl Iterator for Updates {
    type Item = Result<(SeqNo, WriteBatch)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(b) = self.pending.pop_front() {
                return Some(Ok(b));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.read_next_wal() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
