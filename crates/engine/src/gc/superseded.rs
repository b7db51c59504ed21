//! Finding the garbage a flush made, after the flush is installed (the superseded finder).
//!
//! When a flushed write hides a key's previous write from every reader, the value record
//! that write points to is garbage, long before a compaction merges the two versions and
//! counts it ([`super::early_garbage`]). Learning it takes a tree lookup per flushed
//! key, and in a database larger than memory each lookup is a device read. Done inside the
//! flush, those reads made the flush as slow as its lookups, and writers were throttled
//! to that rate: at full scale 3.8M of the run's 6.0M tree reads were these lookups, and
//! writers waited 28-38 s (docs/lifetime.md, "Garbage found after the flush, an L0
//! thread, a lookup pool").
//!
//! Where the write path logs values (the value log as the WAL) the flush places nothing,
//! so nothing in the flush needs the previous write: the flush only queues its table, and
//! this job looks the table's keys up afterwards, on its own thread, while writers go on.
//! Most keys need no lookup at all: the job remembers the pointers of the keys it saw in
//! earlier tables ([`super::recent_pointers`]), and only the keys it has forgotten
//! (or never saw) are looked up in the tree.
//!
//! Exactness: early garbage lets GC drop a record without a lookup, so a record must never
//! be recorded that is live, or that compaction already counted. The lookups run against a
//! version that holds the flushed table; each batch is recorded under the state lock only
//! while that table is still in L0 of the current version. L0 is compacted oldest file
//! first and whole, so while the table is there no compaction has merged its keys with
//! their older versions, and none has counted the records found. Once it is gone, the
//! rest of the table is skipped (compaction counts those records instead). A snapshot
//! older than a key's flushed write still sees the previous one: that record is left.
//!
//! The engine queues the flushed tables and runs the job on its own thread
//! (`db/gc.rs`); the job knows it only through [`FinderHost`].

use super::early_garbage::EarlyGarbage;
use super::recent_pointers::{LastWrite, RecentPointers};
use crate::error::Result;
use crate::internal_key::seek_key;
use crate::internal_key::{SeqNo, ValueKind};
use crate::io::IoCause;
use crate::sst::iter::key_versions;
use crate::version::{TableFile, Version};
use crate::vlog::ValuePointer;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::Arc;

/// Keys looked up between two checks that the table is still in L0 (one hold of the state
/// lock each): a few hundred KiB of keys.
const BATCH: usize = 1024;

/// What the finder needs of the engine.
pub(crate) trait FinderHost {
    /// The database directory (file names in errors).
    fn dir(&self) -> &Path;
    /// Runs `f` under the lock that orders version edits, with the current version and the
    /// smallest sequence number a reader may still read at.
    fn with_current(&self, f: &mut dyn FnMut(&Version, SeqNo));
}

/// Where the finder keeps what it learns: the garbage it finds, and the newest flushed
/// writes of the keys it saw (so that most lookups need no device read).
pub(crate) struct Finder<'a> {
    pub early: &'a EarlyGarbage,
    pub recent: &'a Mutex<RecentPointers>,
}

impl Finder<'_> {
    /// Looks up the previous writes of the keys of `table`, a flushed table in L0 of `v`,
    /// and records the hidden ones as garbage; `false` if the table left L0 before all
    /// were recorded (compaction counts the rest).
    pub fn find(&self, host: &dyn FinderHost, table: &Arc<TableFile>, v: &Version) -> Result<bool> {
        let keys = flushed_keys(host.dir(), table)?;
        let mut gone = false;
        for batch in keys.chunks(BATCH) {
            if !gone {
                gone = !self.find_batch(host, table, v, batch)?;
            }
            // The table's writes are the keys' newest flushed ones, found or not.
            let mut recent = self.recent.lock();
            for k in batch {
                recent.record(&k.key, k.newest);
            }
        }
        Ok(!gone)
    }
}
/// A key of a flushed table: its oldest write there (whose previous write it hides) and
/// its newest (the one its next write will hide).
struct FlushedKey {
    key: Vec<u8>,
    oldest: SeqNo,
    newest: LastWrite,
}

/// The keys of a flushed table, in order.
fn flushed_keys(dir: &Path, table: &TableFile) -> Result<Vec<FlushedKey>> {
    let mut it = table.table()?.iter(IoCause::Compaction);
    let keys = key_versions(&mut it, table.path(), "a flushed table", |p, value| {
        let pointer = match p.kind {
            ValueKind::Pointer => Some(ValuePointer::decode(dir, value)?.0),
            _ => None,
        };
        Ok(LastWrite {
            seq: p.seq,
            pointer,
        })
    })?;
    Ok(keys
        .into_iter()
        .map(|(key, oldest, newest)| FlushedKey {
            key,
            oldest,
            newest,
        })
        .collect())
}

impl Finder<'_> {
    /// Finds the previous writes of `batch` (from the table of recent pointers, or by tree
    /// lookups) and records the hidden ones as garbage; `false` if the table has left L0, so
    /// that nothing more of it may be recorded.
    fn find_batch(
        &self,
        host: &dyn FinderHost,
        table: &Arc<TableFile>,
        v: &Version,
        batch: &[FlushedKey],
    ) -> Result<bool> {
        let known: Vec<Option<LastWrite>> = {
            let mut recent = self.recent.lock();
            batch
                .iter()
                .map(|k| recent.before(&k.key, k.oldest))
                .collect()
        };
        let unknown: Vec<&FlushedKey> = batch
            .iter()
            .zip(&known)
            .filter(|(_, w)| w.is_none())
            .map(|(k, _)| k)
            .collect();
        let dir = host.dir();
        let looked_up = crate::io::parallel::map_in_parallel(
            crate::io::parallel::Pool::Lookup,
            &unknown,
            |k| {
                let seek = seek_key(&k.key, k.oldest.saturating_sub(1));
                let before = table.meta.smallest_seq;
                let Some(f) = v.get_before(before, &k.key, &seek, IoCause::Lookup)? else {
                    return Ok(None);
                };
                if f.kind != ValueKind::Pointer {
                    return Ok(None);
                }
                Ok(Some(ValuePointer::decode(dir, &f.value)?.0))
            },
        )?;
        let mut looked_up = looked_up.into_iter();
        let previous: Vec<Option<ValuePointer>> = known
            .iter()
            .map(|w| match w {
                Some(w) => w.pointer,
                None => looked_up.next().flatten(),
            })
            .collect();
        let mut in_l0 = false;
        host.with_current(&mut |current, snapshot| {
            in_l0 = current.levels[0]
                .iter()
                .any(|f| f.number() == table.number());
            if !in_l0 {
                return;
            }
            let hidden: Vec<ValuePointer> = batch
                .iter()
                .zip(&previous)
                .filter(|(k, _)| k.oldest <= snapshot)
                .filter_map(|(_, p)| *p)
                .collect();
            self.early.record_superseded(current, &hidden);
        });
        Ok(in_l0)
    }
}
