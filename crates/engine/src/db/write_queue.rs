//! The write path's queues and the writers in them ([`super::write`] drives them): the
//! WAL stage's queue of writers, the insert stage's queue of groups, and a writer's wait
//! for its turn. Data and waiting only: nothing here touches the engine.

use crate::batch::WriteBatch;
use crate::gc::job::Writeback;
use crate::internal_key::SeqNo;
use crate::memtable::Memtable;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Relocations checked outside the write queue: for each, whether its key still pointed
/// at the old record as of `seq`; every write after `seq` is in `mem` or a memtable
/// newer than it (see `check_writebacks` in [`super::write`]).
pub(crate) struct CheckedWriteback {
    /// Each relocation, whether its key still pointed at the old record when checked, and
    /// then the entry's expiry time (a written-back pointer keeps it).
    pub entries: Vec<(Writeback, Option<Option<u64>>)>,
    pub seq: SeqNo,
    pub mem: Arc<Memtable>,
}

pub(crate) enum Job {
    Batch(WriteBatch),
    /// Switch the memtable even if it is not full (flush).
    Switch,
    /// Install relocated pointers for keys that still point at the old location.
    Writeback(CheckedWriteback),
}

/// Where a queued writer is; changed by other threads, each change signalled on the
/// writer's own condition variable.
pub(crate) enum Stage {
    /// Queued behind a leader.
    Waiting,
    /// At the head of the queue: gather a group and write it.
    Leader,
    /// The group's WAL record is written and this writer's batch has its sequence numbers:
    /// insert it into the group's memtable.
    Insert(Arc<Group>),
    /// Finished: `Ok(applied flags for a writeback)` or the error text.
    Done(std::result::Result<Vec<bool>, String>),
}

pub(crate) struct Writer {
    pub job: Mutex<Option<Job>>,
    pub sync: bool,
    /// Encoded size if the job is a batch (`None` for switches and writebacks).
    pub batch_len: Option<usize>,
    /// Entries in the batch (0 for switches and writebacks).
    pub entries: usize,
    pub stage: Mutex<Stage>,
    /// Set (under `stage`'s lock) when `stage` leaves `Waiting`, cleared when the writer
    /// takes it: lets [`Writer::wait`] spin without taking the lock.
    pub signalled: AtomicBool,
    pub cv: Condvar,
}

impl Writer {
    pub fn new(job: Job, sync: bool) -> Arc<Writer> {
        let (batch_len, entries) = match &job {
            Job::Batch(b) => (Some(b.encoded_len()), b.len()),
            _ => (None, 0),
        };
        Arc::new(Writer {
            job: Mutex::new(Some(job)),
            sync,
            batch_len,
            entries,
            stage: Mutex::new(Stage::Waiting),
            signalled: AtomicBool::new(false),
            cv: Condvar::new(),
        })
    }

    pub fn set(&self, stage: Stage) {
        {
            let mut st = self.stage.lock();
            *st = stage;
            self.signalled.store(true, Ordering::Release);
        }
        self.cv.notify_one();
    }

    /// Waits until the stage is no longer `Waiting`, and takes it (leaving `Waiting`).
    ///
    /// Spins briefly before sleeping, as RocksDB's `WriteThread::AwaitState`: a writer's
    /// wait is often shorter than a futex sleep and wake-up, which costs the waker a system
    /// call and the sleeper a trip through the scheduler, on a virtual machine an
    /// interrupt to a halted core. RocksDB's second phase (yielding the core for up to
    /// 100 us) is left out: measured with 4 writers on 2 cores it added a context switch
    /// per put and more CPU time than it saved (docs/bench.md, "The write path with
    /// threads").
    pub fn wait(&self) -> Stage {
        if !self.signalled.load(Ordering::Acquire) {
            spin_for(&self.signalled);
        }
        let mut st = self.stage.lock();
        while matches!(*st, Stage::Waiting) {
            self.cv.wait(&mut st);
        }
        self.signalled.store(false, Ordering::Relaxed);
        std::mem::replace(&mut *st, Stage::Waiting)
    }
}

/// Spin iterations before blocking: 1000 `pause`s, up to tens of microseconds (RocksDB spins
/// 200). With pipelined groups a writer waits for its own WAL write and insert and those of
/// the group before it; measured with 2 and 4 writers on 2 cores, 1000 was 5-10 % faster
/// than 200 (docs/bench.md, "Pipelined groups").
const SPIN_ITERATIONS: u32 = 1000;

/// Spins until `flag` is set or the spin budget is spent (the caller then blocks).
fn spin_for(flag: &AtomicBool) {
    for _ in 0..SPIN_ITERATIONS {
        if flag.load(Ordering::Acquire) {
            return;
        }
        std::hint::spin_loop();
    }
}

/// The two queues of the write path.
#[derive(Default)]
pub(crate) struct WriteQueue {
    /// Writers waiting for the WAL stage, in arrival order; the head leads.
    pub wal: Mutex<VecDeque<Arc<Writer>>>,
    /// Groups whose WAL records are written, in sequence order, until they are published.
    pub inserting: Mutex<VecDeque<Arc<Group>>>,
    /// Signalled when `inserting` becomes empty.
    pub drained: Condvar,
}

impl WriteQueue {
    /// Waits until every group that left the WAL stage is in the memtable and published.
    /// Called only by the WAL stage's leader, so no new group can start meanwhile.
    pub fn wait_drained(&self) {
        let mut q = self.inserting.lock();
        while !q.is_empty() {
            self.drained.wait(&mut q);
        }
    }

    pub fn is_drained(&self) -> bool {
        self.inserting.lock().is_empty()
    }
}

/// A group whose WAL records are written and whose members are inserting into `mem`.
pub(crate) struct Group {
    pub mem: Arc<Memtable>,
    pub members: Vec<Arc<Writer>>,
    /// Members whose batch is not yet in the memtable.
    pub pending: AtomicUsize,
    /// Every batch is in the memtable (set under the `inserting` lock).
    pub inserted: AtomicBool,
    /// The group's last sequence number, visible to readers once this group and every
    /// earlier one are inserted.
    pub last_seq: SeqNo,
    /// The leader's result (writeback flags), handed back to it when published.
    pub leader_flags: Vec<bool>,
}
