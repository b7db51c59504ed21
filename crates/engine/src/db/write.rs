//! The write path with group commit.
//!
//! Writers queue up; the writer at the head becomes the leader, takes the batches queued
//! behind it (up to 1 MiB, and never a sync write into a group that will not sync), makes
//! room in the memtable, appends one WAL record for the whole group, inserts it into the
//! memtable, publishes the new sequence number and wakes the group. Only the leader touches
//! the WAL and inserts into the memtable, so neither needs its own lock on the hot path.

use super::{read, wal_file_name, Inner};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::io::IoCause;
use crate::memtable::Memtable;
use crate::stats::EngineCounters;
use crate::types::ValueKind;
use crate::vlog::ValuePointer;
use crate::wal::LogWriter;
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAX_GROUP_BYTES: usize = 1 << 20;

/// A value-file GC relocation to write back: key, the pointer GC found valid, the pointer
/// to the rewritten record.
pub(crate) type Writeback = (Vec<u8>, ValuePointer, ValuePointer);

pub(crate) enum Job {
    Batch(WriteBatch),
    /// Switch the memtable even if it is not full (flush).
    Switch,
    /// Install relocated pointers for keys that still point at the old location.
    Writeback(Vec<Writeback>),
}

pub(crate) struct Writer {
    job: Mutex<Option<Job>>,
    sync: bool,
    /// Set by the leader: `Ok(applied flags for a writeback)` or the error text.
    result: Mutex<Option<std::result::Result<Vec<bool>, String>>>,
}

impl Writer {
    fn new(job: Job, sync: bool) -> Arc<Writer> {
        Arc::new(Writer {
            job: Mutex::new(Some(job)),
            sync,
            result: Mutex::new(None),
        })
    }

    fn is_batch(&self) -> bool {
        matches!(*self.job.lock(), Some(Job::Batch(_)))
    }

    fn batch_len(&self) -> usize {
        match &*self.job.lock() {
            Some(Job::Batch(b)) => b.encoded_len(),
            _ => 0,
        }
    }
}

pub(crate) fn write(inner: &Arc<Inner>, batch: WriteBatch, sync: bool) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    submit(inner, Writer::new(Job::Batch(batch), sync)).map(|_| ())
}

pub(crate) fn force_switch(inner: &Arc<Inner>) -> Result<()> {
    submit(inner, Writer::new(Job::Switch, false)).map(|_| ())
}

/// Writes back relocated pointers; returns which ones were installed (a key rewritten
/// by the user since GC read it keeps its newer value).
pub(crate) fn write_back(inner: &Arc<Inner>, entries: Vec<Writeback>) -> Result<Vec<bool>> {
    submit(inner, Writer::new(Job::Writeback(entries), false))
}

fn submit(inner: &Arc<Inner>, w: Arc<Writer>) -> Result<Vec<bool>> {
    let mut q = inner.writers.lock();
    q.push_back(w.clone());
    loop {
        if let Some(r) = w.result.lock().take() {
            return r.map_err(Error::WriteFailed);
        }
        if Arc::ptr_eq(q.front().expect("queue holds this writer"), &w) {
            break;
        }
        inner.writers_cv.wait(&mut q);
    }
    // Leader: gather the group.
    let mut group = vec![w.clone()];
    if w.is_batch() {
        let mut bytes = w.batch_len();
        for other in q.iter().skip(1) {
            if !other.is_batch() || (other.sync && !w.sync) {
                break;
            }
            bytes += other.batch_len();
            if bytes > MAX_GROUP_BYTES {
                break;
            }
            group.push(other.clone());
        }
    }
    drop(q);
    let r = lead(inner, &group);
    let mut q = inner.writers.lock();
    let mut mine = None;
    for g in &group {
        let popped = q.pop_front().expect("group is at the head of the queue");
        debug_assert!(Arc::ptr_eq(&popped, g));
        let res = match &r {
            Ok(flags) if Arc::ptr_eq(g, &w) => Ok(flags.clone()),
            Ok(_) => Ok(Vec::new()),
            Err(e) => Err(e.to_string()),
        };
        if Arc::ptr_eq(g, &w) {
            mine = Some(res);
        } else {
            *g.result.lock() = Some(res);
        }
    }
    inner.writers_cv.notify_all();
    drop(q);
    match r {
        Ok(_) => Ok(mine.unwrap().unwrap()),
        Err(e) => Err(e),
    }
}

fn lead(inner: &Arc<Inner>, group: &[Arc<Writer>]) -> Result<Vec<bool>> {
    let first = group[0].job.lock().take().expect("job taken once");
    let (mut batch, flags) = match first {
        Job::Switch => {
            make_room(inner, true)?;
            return Ok(Vec::new());
        }
        Job::Writeback(entries) => writeback_batch(inner, entries)?,
        Job::Batch(b) => (b, Vec::new()),
    };
    for g in &group[1..] {
        if let Some(Job::Batch(b)) = g.job.lock().take() {
            batch.append(&b);
        }
    }
    if batch.is_empty() {
        return Ok(flags);
    }
    let mem = make_room(inner, false)?;
    let sync = group.iter().any(|g| g.sync);
    apply(inner, &mem, &mut batch, sync)?;
    Ok(flags)
}

/// Appends to the WAL and inserts into the memtable.
fn apply(inner: &Inner, mem: &Memtable, batch: &mut WriteBatch, sync: bool) -> Result<()> {
    let first = inner.last_seq.load(Ordering::Relaxed) + 1;
    batch.set_first_seq(first);
    if inner.opts.use_wal {
        let mut wal = inner.wal.lock();
        let w = wal.as_mut().ok_or(Error::Closed)?;
        let r = w
            .add_record(batch.encoded())
            .and_then(|_| if sync { w.sync() } else { w.flush() });
        if let Err(e) = r {
            // The WAL may now hold a partial record: refuse further writes until reopen,
            // which cuts the torn tail.
            inner.set_bg_error(&mut inner.state.lock(), &e);
            return Err(e);
        }
    }
    let mut seq = first;
    let (mut puts, mut deletes) = (0, 0);
    for e in batch.iter() {
        mem.add(seq, e.kind, e.key, e.value);
        inner.warming.record_write(e.key);
        seq += 1;
        match e.kind {
            ValueKind::Value => puts += 1,
            ValueKind::Deletion => deletes += 1,
            ValueKind::Pointer => {}
        }
    }
    inner.last_seq.store(seq - 1, Ordering::Relaxed);
    inner.visible_seq.store(seq - 1, Ordering::Release);
    let c = &inner.counters;
    EngineCounters::add(&c.user_bytes_written, batch.user_bytes());
    EngineCounters::add(&c.puts, puts);
    EngineCounters::add(&c.deletes, deletes);
    EngineCounters::add(&c.write_groups, 1);
    Ok(())
}

fn writeback_batch(inner: &Arc<Inner>, entries: Vec<Writeback>) -> Result<(WriteBatch, Vec<bool>)> {
    let mut b = WriteBatch::new();
    let mut flags = Vec::with_capacity(entries.len());
    let seq = inner.visible_seq.load(Ordering::Acquire);
    for (key, old, new) in entries {
        let still = match read::lookup(inner, &key, seq)? {
            Some(f) if f.kind == ValueKind::Pointer => {
                ValuePointer::decode(&inner.dir, &f.value)?.0 == old
            }
            _ => false,
        };
        if still {
            b.add(ValueKind::Pointer, &key, &new.encode());
        }
        flags.push(still);
    }
    EngineCounters::add(&inner.counters.gc_writeback_entries, b.len() as u64);
    Ok((b, flags))
}

/// Makes sure the memtable has room, switching it (and the WAL) when full or `force`d,
/// stalling while too many immutable memtables or L0 files wait for background work.
fn make_room(inner: &Inner, mut force: bool) -> Result<Arc<Memtable>> {
    let opts = &inner.opts;
    let mut st = inner.state.lock();
    let mut stall_started: Option<Instant> = None;
    let r = loop {
        if let Some(e) = &st.bg_error {
            break Err(Error::Background(e.clone()));
        }
        if inner.shutdown.load(Ordering::SeqCst) {
            break Err(Error::Closed);
        }
        let full = st.mem.approximate_size() >= opts.memtable_size;
        if (!force && !full) || (force && st.mem.is_empty()) {
            break Ok(st.mem.clone());
        }
        let l0 = st.versions.current().levels[0].len();
        if st.imm.len() >= opts.max_immutable_memtables || l0 >= opts.l0_stop_writes_trigger {
            stall_started.get_or_insert_with(Instant::now);
            inner.bg_cv.notify_all();
            inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
            continue;
        }
        let wal_number = if opts.use_wal {
            let n = st.versions.new_file_number();
            let path = wal_file_name(&inner.dir, n);
            let f = match inner.storage.create(&path, IoCause::Wal) {
                Ok(f) => f,
                Err(e) => break Err(e),
            };
            let mut wal = inner.wal.lock();
            if let Some(old) = wal.as_mut() {
                if let Err(e) = old.flush() {
                    break Err(e);
                }
            }
            *wal = Some(LogWriter::new(f));
            n
        } else {
            0
        };
        let old = std::mem::replace(&mut st.mem, Arc::new(Memtable::new(wal_number)));
        st.imm.push_back(old);
        inner.publish(&st);
        force = false;
        inner.bg_cv.notify_all();
    };
    if let Some(t) = stall_started {
        let c = &inner.counters;
        EngineCounters::add(&c.stall_micros, t.elapsed().as_micros() as u64);
        EngineCounters::add(&c.stall_count, 1);
    }
    r
}
