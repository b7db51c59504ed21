//! The write path: group commit, then concurrent memtable inserts published in sequence
//! order (RocksDB's write thread with `allow_concurrent_memtable_write`, pipelined as its
//! `enable_pipelined_write`).
//!
//! A write goes through two stages. In the WAL stage, writers join a queue; the writer at
//! its head is the leader. The leader takes the batches queued behind it (up to 1 MiB,
//! never a sync write into a group that will not sync), makes room in the memtable,
//! assigns each batch its sequence numbers, and appends one WAL record per batch followed
//! by a single flush (or sync) for the whole group: concurrent writers share one write
//! system call and one fsync. Then the group leaves the WAL stage (the next writer in the
//! queue leads the next group at once) and enters the insert stage: members with large
//! batches insert their own (the skip list takes concurrent inserts), the leader inserts
//! the small ones itself (waking a member just to insert one entry costs more than the
//! insert). So one group's inserts run while the next group writes its WAL record, and
//! two writers on two cores both work instead of one waiting for the other.
//!
//! Groups finish their inserts in any order, but readers see them in sequence order: the
//! groups in the insert stage wait in a second queue, in the order their sequence numbers
//! were assigned, and a group that finishes publishes itself and every finished group
//! behind it only when no earlier group is still inserting. A sequence number is visible
//! (and a snapshot can be taken at it) only once every write before it is in the memtable;
//! a writer is acknowledged only once its group is published, so it reads its own write.
//! Durability is decided in the WAL stage, before any of this: a synced group's records
//! are on disk before any member can be acknowledged.
//!
//! Each writer waits on its own flag and condition variable, spinning briefly before it
//! sleeps, and is woken only when its state changes (to leader, to "insert your batch", or
//! done): a finished group costs at most one wake-up per member with a small batch, rather
//! than waking every queued writer. The queue locks are held only to join, to gather a
//! group, to hand the WAL stage on and to publish: never across the WAL write or an
//! insert. A leader that switches the memtable, or that checks GC's relocations against
//! the current values, first waits until no group is inserting, so that a memtable handed
//! to flush is complete and a relocation never hides a newer write still being inserted.

use super::inner::{Inner, ReadView};
use super::read;
use super::write_queue::{CheckedWriteback, Group, Job, Stage, Writer};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::wal_file_name;
use crate::internal_key::ValueKind;
use crate::io::IoCause;
use crate::memtable::Memtable;
use crate::stats::EngineCounters;
use crate::vlog::value_wal::ValuePlacement;
use crate::wal::LogWriter;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAX_GROUP_BYTES: usize = 1 << 20;

/// A member whose batch has at least this many entries inserts it itself, in parallel with
/// the rest of the group; smaller batches are inserted by the leader (see [`lead`]).
const PARALLEL_INSERT_MIN_ENTRIES: usize = 16;

pub(crate) fn write(inner: &Arc<Inner>, batch: WriteBatch, sync: bool) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    submit(inner, Writer::new(Job::Batch(batch), sync)).map(|_| ())
}

pub(crate) fn force_switch(inner: &Arc<Inner>) -> Result<()> {
    submit(inner, Writer::new(Job::Switch, false)).map(|_| ())
}

/// Installs the relocations of a chunk GC checked (`db/gc.rs`) whose keys were not written
/// since the check; returns which were installed.
pub(crate) fn write_checked_back(inner: &Arc<Inner>, chunk: CheckedWriteback) -> Result<Vec<bool>> {
    submit(inner, Writer::new(Job::Writeback(chunk), false))
}

fn submit(inner: &Arc<Inner>, w: Arc<Writer>) -> Result<Vec<bool>> {
    let leader = {
        let mut q = inner.writers.wal.lock();
        q.push_back(w.clone());
        q.len() == 1
    };
    let mut stage = if leader { Stage::Leader } else { w.wait() };
    loop {
        stage = match stage {
            Stage::Waiting => w.wait(),
            Stage::Leader => {
                lead(inner, &w);
                w.wait()
            }
            Stage::Insert(group) => {
                insert_member(inner, &w, &group);
                w.wait()
            }
            Stage::Done(r) => return r.map_err(Error::WriteFailed),
        };
    }
}

/// Gathers the group behind leader `w`, writes it, and starts the inserts (or finishes the
/// group on error).
fn lead(inner: &Arc<Inner>, w: &Arc<Writer>) {
    if w.batch_len.is_some() {
        wait_for_gc(inner);
    }
    let group = {
        let q = inner.writers.wal.lock();
        debug_assert!(Arc::ptr_eq(q.front().expect("leader is queued"), w));
        let mut group = vec![w.clone()];
        if let Some(mut bytes) = w.batch_len {
            for other in q.iter().skip(1) {
                let Some(len) = other.batch_len else { break };
                if other.sync && !w.sync {
                    break;
                }
                bytes += len;
                if bytes > MAX_GROUP_BYTES {
                    break;
                }
                group.push(other.clone());
            }
        }
        group
    };
    let r = match write_group(inner, &group) {
        Ok(Some(g)) => {
            // Queued for publishing before the next leader can write (and queue) a later
            // group: the insert queue is in sequence order.
            inner.writers.inserting.lock().push_back(g.clone());
            pass_on(inner, group.len());
            // Waking a member to insert its own batch costs it a second wake-up (it is
            // woken again when the group is published); for a small batch that costs more
            // than the insert, so the leader inserts small batches itself and only hands
            // large ones out to run in parallel.
            let parallel = |m: &Writer| m.entries >= PARALLEL_INSERT_MIN_ENTRIES;
            for m in g.members[1..].iter().filter(|m| parallel(m)) {
                m.set(Stage::Insert(g.clone()));
            }
            for m in g.members[1..].iter().filter(|m| !parallel(m)) {
                insert_member(inner, m, &g);
            }
            insert_member(inner, w, &g);
            return;
        }
        Ok(None) => Ok(Vec::new()),
        Err((e, flags)) => e.map(|_| flags),
    };
    pass_on(inner, group.len());
    finish(&group, r);
}

/// Makes room, assigns sequence numbers and appends the WAL records. `Ok(None)` when
/// nothing is left to insert (a switch, a writeback with nothing still current);
/// `Err((result, flags))` when the group ends here.
#[allow(clippy::type_complexity)]
fn write_group(
    inner: &Arc<Inner>,
    group: &[Arc<Writer>],
) -> std::result::Result<Option<Arc<Group>>, (std::result::Result<(), String>, Vec<bool>)> {
    let fail = |e: Error| (Err(e.to_string()), Vec::new());
    let first = group[0].job.lock().take().expect("job taken once");
    let mut flags = Vec::new();
    match first {
        Job::Switch => {
            make_room(inner, true).map_err(fail)?;
            return Ok(None);
        }
        Job::Writeback(entries) => {
            // A group still inserting may have rewritten one of these keys: its write is
            // not visible yet, but is newer than the relocation.
            inner.writers.wait_drained();
            let (b, f) = writeback_batch(inner, entries).map_err(fail)?;
            flags = f;
            if b.is_empty() {
                return Err((Ok(()), flags));
            }
            *group[0].job.lock() = Some(Job::Batch(b));
        }
        Job::Batch(b) => *group[0].job.lock() = Some(Job::Batch(b)),
    }
    let mem = make_room(inner, false).map_err(fail)?;
    let sync = group.iter().any(|g| g.sync);
    let mut seq = inner.last_seq.load(Ordering::Relaxed) + 1;
    // With the value log as the WAL, the group's large values go to the active value file
    // first, and are flushed (synced) before any WAL record points at them.
    let mut logged: Vec<Option<WriteBatch>> = Vec::new();
    let mut values = inner.opts.logs_values().then(|| inner.value_wal.lock());
    let new_file_number = || inner.new_file_number();
    // Each logged value goes to the file of its class (`crate::gc::placement`).
    let placement = inner.placement();
    let class = |key: &[u8], seq| placement.map_or(0, |p| p.at_write(key, seq));
    let file_lifetime = |class, seq| placement.and_then(|p| p.file_lifetime(class, seq, None));
    let placed = placement.map(|_| ValuePlacement {
        class: &class,
        file_lifetime: &file_lifetime,
    });
    let cx = inner.value_log_context(&new_file_number, placed);
    for m in group {
        let mut job = m.job.lock();
        let Some(Job::Batch(b)) = job.as_mut() else {
            unreachable!("group members are batches")
        };
        b.set_first_seq(seq);
        seq += b.len() as u64;
        if let Some(active) = values.as_mut() {
            if let Some(p) = placement {
                p.deleted(b);
            }
            match active.log_batch(&cx, &*mem, b) {
                Ok(l) => logged.push(l),
                Err(e) => return Err(wal_failed(inner, e)),
            }
        }
    }
    if let Some(active) = values.as_mut() {
        if let Err(e) = active.flush(sync) {
            return Err(wal_failed(inner, e));
        }
    }
    drop(values);
    let mut wal = inner.opts.wal.use_wal.then(|| inner.wal.lock());
    if let Some(wal) = wal.as_mut() {
        let w = wal.as_mut().ok_or(Error::Closed).map_err(fail)?;
        for (i, m) in group.iter().enumerate() {
            let job = m.job.lock();
            let Some(Job::Batch(b)) = job.as_ref() else {
                unreachable!("group members are batches")
            };
            let rec = logged.get(i).and_then(Option::as_ref).unwrap_or(b);
            if let Err(e) = w.add_record(rec.encoded()) {
                return Err(wal_failed(inner, e));
            }
        }
    }
    if let Some(mut wal) = wal {
        let w = wal.as_mut().ok_or(Error::Closed).map_err(fail)?;
        if let Err(e) = if sync { sync_wal(inner, w) } else { w.flush() } {
            return Err(wal_failed(inner, e));
        }
    }
    inner.last_seq.store(seq - 1, Ordering::Relaxed);
    EngineCounters::add(&inner.counters.write_groups, 1);
    Ok(Some(Arc::new(Group {
        mem,
        members: group.to_vec(),
        pending: AtomicUsize::new(group.len()),
        inserted: AtomicBool::new(false),
        last_seq: seq - 1,
        leader_flags: flags,
    })))
}

/// Makes every WAL record appended so far durable: the WALs switched out and not yet
/// synced, the directory entries of logs created since the directory was last synced,
/// then `wal` (the current WAL). Called with the WAL's lock held, by a synced group's
/// leader and by [`sync_logs`].
fn sync_wal(inner: &Inner, wal: &mut LogWriter) -> Result<()> {
    sync_older_wals(inner)?;
    wal.sync()
}

/// The part of [`sync_wal`] before the current WAL: the WALs switched out and not yet
/// synced, and the directory entries of logs created since the directory was last synced.
fn sync_older_wals(inner: &Inner) -> Result<()> {
    {
        // Held while syncing: `background::remove_old_wals` waits for it before it
        // removes a flushed WAL's file.
        let mut older = inner.older_wals.lock();
        for (_, w) in older.iter_mut() {
            w.sync()?;
        }
        older.clear();
    }
    if inner.dir_unsynced.swap(false, Ordering::SeqCst) {
        if let Err(e) = inner.storage.sync_dir(&inner.dir) {
            inner.dir_unsynced.store(true, Ordering::SeqCst);
            return Err(e);
        }
    }
    Ok(())
}

/// Makes every write acknowledged so far durable, as a synced write would: the value
/// files of the value log as the WAL, then every WAL ([`sync_wal`]). Without a WAL there
/// is nothing to sync (unflushed writes are not durable).
///
/// The disk's work runs outside the value log's and the WAL's locks where the storage
/// allows ([`crate::io::WritableFile::sync_later`]): GC calls this after every job, and
/// under the locks each of its syncs held the write leader for the length of an
/// `fdatasync` of the value files' dirty pages (up to 175 ms at the `lifetime` preset,
/// docs/bench.md). The value files go first: the WAL's records point into them.
pub(crate) fn sync_logs(inner: &Inner) -> Result<()> {
    if !inner.opts.wal.use_wal {
        return Ok(());
    }
    // A visible write's records are in the logs already: the syncs below cover it.
    let upto = inner.visible_seq.load(Ordering::Acquire);
    sync_all_logs(inner)?;
    inner.durable_seq.fetch_max(upto, Ordering::AcqRel);
    Ok(())
}

fn sync_all_logs(inner: &Inner) -> Result<()> {
    let values = inner.value_wal.lock().start_sync()?;
    values.run()?;
    inner.value_wal.lock().synced(values);
    let current = match inner.wal.lock().as_mut() {
        Some(w) => {
            // The WALs switched out and the directory, as `sync_wal` does; then the
            // current WAL apart from its lock, or under it if its storage cannot.
            sync_older_wals(inner)?;
            match w.sync_later()? {
                Some(h) => h,
                None => return w.sync(),
            }
        }
        None => return Err(Error::Closed),
    };
    current.sync()
}

/// The WAL may now hold a partial record: refuse further writes until reopen, which cuts
/// the torn tail.
fn wal_failed(inner: &Inner, e: Error) -> (std::result::Result<(), String>, Vec<bool>) {
    inner.set_bg_error(&mut inner.state.lock(), &e);
    (Err(e.to_string()), Vec::new())
}

/// Inserts member `w`'s batch into the group's memtable; the last member to finish
/// publishes the group (see [`publish`]).
fn insert_member(inner: &Arc<Inner>, w: &Writer, g: &Arc<Group>) {
    let batch = match w.job.lock().take() {
        Some(Job::Batch(b)) => b,
        _ => unreachable!("group members are batches"),
    };
    let (mut puts, mut deletes) = (0, 0);
    for (seq, e) in (batch.first_seq()..).zip(batch.iter()) {
        g.mem.add(seq, e.kind, e.key, e.value);
        inner.warming.record_write(e.key);
        match e.kind {
            ValueKind::Value | ValueKind::ExpiringValue => puts += 1,
            ValueKind::Deletion => deletes += 1,
            ValueKind::Pointer | ValueKind::ExpiringPointer => {}
        }
    }
    let c = &inner.counters;
    EngineCounters::add(&c.user_bytes_written, batch.user_bytes());
    EngineCounters::add(&c.puts, puts);
    EngineCounters::add(&c.deletes, deletes);
    if g.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        publish(inner, g);
    }
}

/// Marks group `g` inserted and publishes, in sequence order, every inserted group at the
/// head of the insert queue: a group that finishes before an earlier one stays queued (its
/// members keep waiting) until the earlier one publishes it with its own.
fn publish(inner: &Inner, g: &Arc<Group>) {
    let mut published = Vec::new();
    {
        let mut q = inner.writers.inserting.lock();
        g.inserted.store(true, Ordering::Relaxed);
        while q
            .front()
            .is_some_and(|f| f.inserted.load(Ordering::Relaxed))
        {
            let f = q.pop_front().expect("front exists");
            inner.visible_seq.store(f.last_seq, Ordering::Release);
            published.push(f);
        }
        if q.is_empty() {
            inner.writers.drained.notify_all();
        }
    }
    for f in published {
        finish(&f.members, Ok(f.leader_flags.clone()));
    }
}

/// Takes a group of `n` writers off the head of the WAL queue and makes the next writer
/// the leader.
fn pass_on(inner: &Inner, n: usize) {
    let next = {
        let mut q = inner.writers.wal.lock();
        q.drain(..n);
        q.front().cloned()
    };
    if let Some(next) = next {
        next.set(Stage::Leader);
    }
}

/// Tells every member its result (the leader gets `leader`, the others an empty flag
/// list).
fn finish(group: &[Arc<Writer>], leader: std::result::Result<Vec<bool>, String>) {
    for m in &group[1..] {
        let r = match &leader {
            Ok(_) => Ok(Vec::new()),
            Err(e) => Err(e.clone()),
        };
        m.set(Stage::Done(r));
    }
    group[0].set(Stage::Done(leader));
}

/// The batch installing a checked chunk's relocations whose keys were not written since
/// the check. Called by the WAL stage's leader once no group is inserting: every write so
/// far is in the memtables or the tree, and none can come in meanwhile.
fn writeback_batch(
    inner: &Arc<Inner>,
    checked: CheckedWriteback,
) -> Result<(WriteBatch, Vec<bool>)> {
    let mut b = WriteBatch::new();
    let mut flags = Vec::with_capacity(checked.entries.len());
    let seq = inner.visible_seq.load(Ordering::Acquire);
    let view = ReadView::take(inner);
    // The memtables from the checked one to the newest (`mems` is newest first), if it
    // was not flushed since: they hold every write made after the check.
    let since = view
        .mems
        .iter()
        .position(|m| Arc::ptr_eq(m, &checked.mem))
        .map(|i| &view.mems[..=i]);
    let now = inner.now_ms();
    for ((key, old, new), checked_still) in checked.entries {
        let still = match since {
            Some(mems) => checked_still.filter(|_| {
                !mems
                    .iter()
                    .any(|m| m.newest_seq(&key).is_some_and(|s| s > checked.seq))
            }),
            None => read::points_at_old(inner, &view.lookup(&key, seq, now)?, &old)?,
        };
        if let Some(expire_at) = still {
            b.add_with_expiry(ValueKind::Pointer, &key, &new.encode(), expire_at);
        }
        flags.push(still.is_some());
    }
    EngineCounters::add(&inner.counters.gc_writeback_entries, b.len() as u64);
    Ok((b, flags))
}

/// The active memtable when it has room and nothing slows writes down, found without the
/// main lock: flushes and compactions hold that lock while they sync the manifest
/// (tens of milliseconds), and every write group waited for it here (docs/bench.md,
/// "What the p99.9 is made of"). The read view holds the active memtable, the immutable
/// ones and the version, published under the lock by every change to them; only the
/// write leader (the caller) switches memtables, so its active one is current. A view a
/// background job has not republished yet can only look busier than the state (more
/// immutable memtables, more L0 files), which sends the caller to the locked path.
fn room_without_lock(inner: &Inner) -> Option<Arc<Memtable>> {
    let opts = &inner.opts;
    if inner.bg_failed.load(Ordering::SeqCst) || inner.shutdown.load(Ordering::SeqCst) {
        return None;
    }
    let view = ReadView::take(inner);
    let mem = &view.mems[0];
    let size = mem.approximate_size();
    let quiet = size < opts.tree.memtable_size
        && view.mems.len() - 1 < opts.tree.max_immutable_memtables
        && view.version.levels[0].len() < opts.tree.l0_slowdown_writes_trigger;
    if !quiet {
        return None;
    }
    // Not slowed down: the charge only records the size for the next delay's accounting.
    let id = Arc::as_ptr(mem) as u64;
    let wait = inner
        .throttle
        .charge(id, size, false, opts.tree.delayed_write_rate);
    debug_assert!(wait.is_zero());
    Some(mem.clone())
}

/// Makes sure the memtable has room, switching it (and the WAL) when full or `force`d,
/// stalling while too many immutable memtables or L0 files wait for background work.
fn make_room(inner: &Inner, mut force: bool) -> Result<Arc<Memtable>> {
    let opts = &inner.opts;
    if !force {
        if let Some(mem) = room_without_lock(inner) {
            return Ok(mem);
        }
    }
    let mut st = inner.state.lock();
    let mut stall_started: Option<Instant> = None;
    let r = loop {
        if let Some(e) = &st.bg_error {
            break Err(Error::Background(e.clone()));
        }
        if inner.shutdown.load(Ordering::SeqCst) {
            break Err(Error::Closed);
        }
        let size = st.mem.approximate_size();
        let full = size >= opts.tree.memtable_size;
        let l0 = st.versions.current().levels[0].len();
        let flush_pending = st.imm.len() >= opts.tree.max_immutable_memtables;
        if !full && !force {
            // Slowdown before a stop (see `throttle`): charged per group, slept without
            // the lock; the memtable and L0 are looked at again afterwards.
            let floor = opts.tree.delayed_write_rate;
            let (slow, rate) = if l0 >= opts.tree.l0_slowdown_writes_trigger {
                (true, floor)
            } else if flush_pending {
                let room = opts.tree.memtable_size.saturating_sub(size);
                let paced = inner.throttle.pace_to_flush(room, floor);
                (paced.is_some(), paced.unwrap_or(floor))
            } else {
                (false, floor)
            };
            let id = Arc::as_ptr(&st.mem) as u64;
            let wait = inner.throttle.charge(id, size, slow, rate);
            if !wait.is_zero() {
                parking_lot::MutexGuard::unlocked(&mut st, || std::thread::sleep(wait));
                let c = &inner.counters;
                EngineCounters::add(&c.delay_micros, wait.as_micros() as u64);
                EngineCounters::add(&c.delay_count, 1);
                continue;
            }
        }
        if (!force && !full) || (force && st.mem.is_empty()) {
            break Ok(st.mem.clone());
        }
        if flush_pending || l0 >= opts.tree.l0_stop_writes_trigger {
            stall_started.get_or_insert_with(Instant::now);
            inner.bg_cv.notify_all();
            inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
            continue;
        }
        if !inner.writers.is_drained() {
            // Earlier groups are still inserting into this memtable: it goes to flush only
            // once they are in (and nothing new comes: only the leader gets here).
            parking_lot::MutexGuard::unlocked(&mut st, || inner.writers.wait_drained());
            continue;
        }
        if opts.logs_values() {
            // The active value file belongs to the memtable switched out: its flush
            // installs it. If it cannot be synced, its values are not durable: stop.
            if let Err(e) = inner.value_wal.lock().seal_all(&*st.mem) {
                inner.set_bg_error(&mut st, &e);
                break Err(e);
            }
        }
        let wal_number = if opts.wal.use_wal {
            let n = st.versions.new_file_number();
            let path = wal_file_name(&inner.dir, n);
            let f = match inner.storage.create(&path, IoCause::Wal) {
                Ok(f) => f,
                Err(e) => break Err(e),
            };
            inner.dir_unsynced.store(true, Ordering::SeqCst);
            let mut wal = inner.wal.lock();
            if let Some(old) = wal.as_mut() {
                if let Err(e) = old.flush() {
                    break Err(e);
                }
            }
            let mut new = LogWriter::new(f);
            let start = WriteBatch::log_start(inner.last_seq.load(Ordering::Relaxed) + 1);
            if let Err(e) = new.add_record(start.encoded()) {
                break Err(e);
            }
            // Kept until a synced write syncs it, or its memtable is flushed.
            if let Some(old) = wal.replace(new) {
                let mut older = inner.older_wals.lock();
                older.retain(|(n, _)| *n >= st.versions.log_number);
                older.push((st.mem.wal_number(), old));
            }
            n
        } else {
            0
        };
        let old = std::mem::replace(
            &mut st.mem,
            Arc::new(Memtable::with_pool(
                wal_number,
                inner.memtable_chunks.clone(),
            )),
        );
        st.imm.push_back(old);
        inner.publish(&st);
        force = false;
        inner.bg_cv.notify_all();
    };
    if let Some(t) = stall_started {
        let c = &inner.counters;
        let micros = t.elapsed().as_micros() as u64;
        EngineCounters::add(&c.stall_micros, micros);
        EngineCounters::add(&c.stall_count, 1);
        c.stall_max_micros.fetch_max(micros, Ordering::Relaxed);
    }
    r
}

/// Holds user writes to the delayed write rate while value-file GC is past its
/// space-amplification target ([`crate::gc::pacer::GcPacer`]): the leader waits for the
/// bytes written before its group. Called by a write leader before it gathers its group,
/// so the whole queue waits; GC's own write-backs never call it.
fn wait_for_gc(inner: &Inner) {
    let Some(pacer) = &inner.gc_pacer else {
        return;
    };
    let c = &inner.counters;
    let wait = pacer.charge(EngineCounters::get(&c.user_bytes_written), Instant::now());
    if wait.is_zero() {
        return;
    }
    // A long wait wakes the background threads, so that GC measures the debt again; the
    // short waits of a smooth rate do not, or every write group would wake them.
    if wait >= crate::rate::MIN_SLEEP {
        inner.bg_cv.notify_all();
    }
    // The time waited, not the time asked for: a sleep overshoots by the timer slack.
    let waited = crate::gc::pacer::wait_out(wait);
    EngineCounters::add(&c.gc_delay_micros, waited.as_micros() as u64);
    EngineCounters::add(&c.gc_delay_count, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(w: &Writer) -> bool {
        matches!(w.wait(), Stage::Done(Ok(_)))
    }

    #[test]
    fn a_write_with_room_does_not_wait_for_the_main_lock() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::DB::open(dir.path(), crate::Options::default()).unwrap();
        db.put(b"a", b"1").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            // As a flush or compaction holds it while it syncs the manifest.
            let st = db.inner.state.lock();
            s.spawn(|| {
                db.put(b"b", b"2").unwrap();
                tx.send(()).unwrap();
            });
            let done = rx.recv_timeout(Duration::from_secs(10));
            drop(st);
            assert!(done.is_ok(), "the write waited for the main lock");
        });
        assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
    }

    #[test]
    fn a_stage_set_before_the_wait_is_taken_at_once() {
        let w = Writer::new(Job::Switch, false);
        w.set(Stage::Done(Ok(Vec::new())));
        assert!(done(&w));
        assert!(
            !w.signalled.load(Ordering::Relaxed),
            "taking the stage clears the flag"
        );
    }

    #[test]
    fn a_stage_set_after_the_spin_wakes_the_sleeper() {
        // Set well after the spin budget: the waiter is asleep on the condition variable
        // by then and must be woken, not lose the signal; then a second wait sleeps again
        // until the next stage.
        let w = Writer::new(Job::Switch, false);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let first = matches!(w.wait(), Stage::Leader);
                (first, done(&w))
            });
            std::thread::sleep(Duration::from_millis(20));
            w.set(Stage::Leader);
            std::thread::sleep(Duration::from_millis(20));
            assert!(
                !waiter.is_finished(),
                "the second wait returned without a stage"
            );
            w.set(Stage::Done(Ok(Vec::new())));
            assert_eq!(waiter.join().unwrap(), (true, true));
        });
    }
}
