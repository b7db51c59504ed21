//! Finding the garbage a flush made, after the flush is installed.
//!
//! When a flushed write hides a key's previous write from every reader, the value record
//! that write points to is garbage, long before a compaction merges the two versions and
//! counts it ([`crate::vlog::early_garbage`]). Learning it takes a tree lookup per flushed
//! key, and in a database larger than memory each lookup is a device read. Done inside the
//! flush, those reads made the flush as slow as its lookups, and writers were throttled
//! to that rate: at full scale 3.8M of the run's 6.0M tree reads were these lookups, and
//! writers waited 28-38 s (docs/lifetime.md, "Garbage found after the flush, an L0
//! thread, a lookup pool").
//!
//! Where the write path logs values (the value log as the WAL) the flush places nothing,
//! so nothing in the flush needs the previous write: the flush only queues its table, and
//! this job looks the table's keys up afterwards, on its own thread, while writers go on.
//!
//! Exactness: early garbage lets GC drop a record without a lookup, so a record must never
//! be recorded that is live, or that compaction already counted. The lookups run against a
//! version that holds the flushed table; each batch is recorded under the state lock only
//! while that table is still in L0 of the current version. L0 is compacted oldest file
//! first and whole, so while the table is there no compaction has merged its keys with
//! their older versions, and none has counted the records found. Once it is gone, the
//! rest of the table is skipped (compaction counts those records instead). A snapshot
//! older than a key's flushed write still sees the previous one: that record is left.

use super::Inner;
use crate::compaction::oldest_versions;
use crate::error::Result;
use crate::io::IoCause;
use crate::memtable::seek_key;
use crate::types::ValueKind;
use crate::vlog::ValuePointer;
use std::sync::Arc;

/// Keys looked up between two checks that the table is still in L0 (one hold of the state
/// lock each): a few hundred KiB of keys.
const BATCH: usize = 1024;

/// Looks up the previous writes of the oldest queued flushed table's keys; `false` when
/// nothing is queued.
pub(crate) fn find_one(inner: &Arc<Inner>) -> Result<bool> {
    let Some(rt) = inner.lifetime.as_ref() else {
        return Ok(false);
    };
    let (table, v) = {
        let mut st = inner.state.lock();
        if st.finding_superseded.is_some() || st.bg_error.is_some() {
            return Ok(false);
        }
        let Some(number) = st.superseding.pop_front() else {
            return Ok(false);
        };
        let v = st.versions.current();
        let Some(table) = v.levels[0].iter().find(|f| f.number() == number).cloned() else {
            // Compacted before its turn: compaction counts what it hid.
            rt.count_superseded_table(false);
            return Ok(true);
        };
        st.finding_superseded = Some(number);
        (table, v)
    };
    let result = (|| -> Result<()> {
        let mut it = table.table()?.iter(IoCause::Compaction);
        let keys = oldest_versions(&mut it, table.path(), "a flushed table")?;
        for batch in keys.chunks(BATCH) {
            let found = crate::io::parallel::map_in_parallel(
                crate::io::parallel::Pool::Lookup,
                batch,
                |(key, seq)| {
                    let seek = seek_key(key, seq.saturating_sub(1));
                    let before = table.meta.smallest_seq;
                    let Some(f) = v.get_before(before, key, &seek, IoCause::Lookup)? else {
                        return Ok(None);
                    };
                    if f.kind != ValueKind::Pointer {
                        return Ok(None);
                    }
                    Ok(Some(ValuePointer::decode(&inner.dir, &f.value)?.0))
                },
            )?;
            let st = inner.state.lock();
            let current = st.versions.current();
            if !current.levels[0]
                .iter()
                .any(|f| f.number() == table.number())
            {
                rt.count_superseded_table(false);
                return Ok(());
            }
            let snapshot = inner.smallest_snapshot(&st);
            let hidden: Vec<ValuePointer> = batch
                .iter()
                .zip(found)
                .filter(|((_, seq), _)| *seq <= snapshot)
                .filter_map(|(_, p)| p)
                .collect();
            rt.superseded(&current, &hidden);
        }
        rt.count_superseded_table(true);
        // Files the table's writes left wholly dead go now, not at the next job.
        super::background::release_dead_value_files(inner, &mut inner.state.lock())
    })();
    let mut st = inner.state.lock();
    st.finding_superseded = None;
    inner.bg_cv.notify_all();
    drop(st);
    result.map(|()| true)
}
