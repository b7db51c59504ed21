//! The script thread: where the connections' batches of scripts (`EVAL`, `EVALSHA`,
//! `FCALL` and their `_RO` forms) run, in the order they arrive, as Redis runs every
//! script on its one thread.
//!
//! Why a thread of its own: a script takes the exec lock exclusively, so two scripts never
//! run at once anyway. Run as other batches are, on tokio's blocking pool, each script paid
//! a hand-off to a pool thread and back, and fifty connections' scripts handed the
//! exclusive lock from one parked pool thread to the next; under `redis-benchmark` these
//! context switches (and the fresh pages of each pool thread's allocator heap) were most of
//! the server's CPU, at 0.1-0.3x Redis's script throughput (docs/scripting.md). Here the
//! scripts queued while the thread was busy, and those that come while the group runs, up
//! to [`MAX_GROUP`] commands, run as one *group*: the exec lock taken once,
//! their writes held back together ([`crate::deferred`]) and applied as one engine batch
//! (synced once under `appendfsync always`), wrapped in one `MULTI`/`EXEC` of the
//! replication stream, and only then answered. Each script is still atomic: no other
//! client's command runs inside the group, its scripts run in order and each sees the
//! writes of those before it, and a power cut leaves all of the group or none of it
//! (unless the group held more than [`crate::deferred::MAX_BYTES`], or a script logged a
//! command to the stream, which apply what is held first, as they do in one script). A
//! replica applies the group's stream as one engine batch, as it applies each script's.
//! A connection has one batch in flight, so its replies keep its order.
//!
//! The bound keeps the lock, which holds every other client's command, from being held
//! for long.
//!
//! Busy scripts: while a script has run past `busy-reply-threshold`, scripts are answered
//! `-BUSY` as every other command is. A batch that arrives then goes to the blocking pool
//! ([`takes`] says no), where it gets its `-BUSY`; so do the batches queued here behind a
//! busy script of this thread (in its group or not), which the interpreter's hook hands
//! over ([`Inner::shed`]), as Redis answers other clients from its script's hook. While a script
//! elsewhere (inside `EXEC`) is busy, the queued batches run one by one as they would on
//! the pool, each getting its `-BUSY`.

use super::{run_batch, Ran};
use crate::protocol::Reply;
use crate::session::{ScriptGroup, Session};
use crate::shared::Shared;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock, Weak};

/// Most commands of one group.
const MAX_GROUP: usize = 256;

/// A connection's batch, and where its result goes.
struct Job {
    session: Session,
    batch: Vec<Vec<Bytes>>,
    done: tokio::sync::oneshot::Sender<Ran>,
}

impl Job {
    /// Runs the batch by itself and answers it.
    fn run_alone(self, sh: &Shared) {
        let _ = self.done.send(run_batch(sh, self.session, self.batch));
    }
}

/// The script thread's queue; the thread starts at the first script and ends with the
/// server (when the lane is dropped).
#[derive(Default)]
pub struct Lane {
    inner: Arc<Inner>,
    started: OnceLock<()>,
}

#[derive(Default)]
struct Inner {
    queue: Mutex<Queue>,
    ready: Condvar,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

/// Whether `batch` goes to the script thread: scripts only, from a connection outside
/// `MULTI`, while no script is busy (see the module's doc) and no cluster slot is moving
/// (a command on a key of a slot in flight waits for the other node, see
/// [`crate::inline`]).
pub fn takes(sh: &Shared, s: &Session, batch: &[Vec<Bytes>]) -> bool {
    use crate::cmd::table::{self, Flags};
    s.ext.multi.is_none()
        && batch
            .iter()
            .all(|c| table::find(&c[0]).is_some_and(|spec| spec.has(Flags::RUNS_SCRIPT)))
        && sh.cluster.as_ref().is_none_or(|c| !c.moving_slots())
        && crate::cmd::script::busy_refusal(sh, None).is_none()
}

impl Lane {
    /// Runs `batch` on the script thread and returns what [`run_batch`] returns; an error
    /// if the thread dropped it unanswered (it failed while running it).
    pub async fn run(
        &self,
        sh: &Arc<Shared>,
        session: Session,
        batch: Vec<Vec<Bytes>>,
    ) -> std::io::Result<Ran> {
        self.started.get_or_init(|| self.start(sh));
        let (done, result) = tokio::sync::oneshot::channel();
        self.inner.queue.lock().jobs.push_back(Job {
            session,
            batch,
            done,
        });
        self.inner.ready.notify_one();
        result
            .await
            .map_err(|_| std::io::Error::other("the script thread failed running this batch"))
    }

    /// Starts the thread, and has the interpreters' hook shed the queue while a script
    /// is busy. Both hold the server weakly: it ends when the connections are gone.
    fn start(&self, sh: &Arc<Shared>) {
        let (inner, weak) = (Arc::downgrade(&self.inner), Arc::downgrade(sh));
        sh.scripting.activity.on_check(Box::new(move || {
            if let (Some(inner), Some(sh)) = (inner.upgrade(), weak.upgrade()) {
                if crate::cmd::script::busy_refusal(&sh, None).is_some() {
                    inner.shed(&sh);
                }
            }
        }));
        let (inner, weak) = (self.inner.clone(), Arc::downgrade(sh));
        std::thread::Builder::new()
            .name("halflife-scripts".into())
            .spawn(move || serve(&inner, &weak))
            .expect("the script thread starts");
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.inner.queue.lock().closed = true;
        self.inner.ready.notify_one();
    }
}

/// The thread's loop: runs what is queued as a group, once there is something.
fn serve(inner: &Inner, sh: &Weak<Shared>) {
    loop {
        {
            let mut q = inner.queue.lock();
            while q.jobs.is_empty() {
                if q.closed {
                    return;
                }
                inner.ready.wait(&mut q);
            }
        }
        let Some(sh) = sh.upgrade() else { return };
        // A panic (a bug) drops the group's unanswered jobs, whose connections then close
        // as after a failed pool job; the thread goes on with the next group.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_group(&sh, inner)));
        if ran.is_err() {
            tracing::error!("the script thread failed running a group of scripts");
        }
    }
}

impl Inner {
    /// Hands the batches queued here to the blocking pool, where each is answered
    /// `-BUSY` while the script that holds this thread stays busy (see the module's doc).
    fn shed(&self, sh: &Arc<Shared>) {
        let jobs = std::mem::take(&mut self.queue.lock().jobs);
        for j in jobs {
            let sh2 = sh.clone();
            sh.runtime.spawn_blocking(move || j.run_alone(&sh2));
        }
    }

    /// The next queued batch. Taken one at a time, so that a batch not started yet can
    /// still be shed ([`Inner::shed`]).
    fn pop(&self) -> Option<Job> {
        self.queue.lock().jobs.pop_front()
    }
}

/// Runs the queued batches, up to [`MAX_GROUP`] commands, as one group (see the module's
/// doc) and answers them.
fn run_group(sh: &Shared, inner: &Inner) {
    let Some(lock) = crate::cmd::script::group_lock(sh) else {
        while let Some(j) = inner.pop() {
            j.run_alone(sh);
        }
        return;
    };
    let held = sh.store.defer();
    let mut group = ScriptGroup::default();
    let mut ran = Vec::new();
    let mut commands = 0;
    while commands < MAX_GROUP {
        let Some(j) = inner.pop() else { break };
        commands += j.batch.len();
        let mut session = j.session;
        session.ext.script_group = Some(group);
        let mut r = run_batch(sh, session, j.batch);
        group = r.0.ext.script_group.take().expect("kept by the batch");
        ran.push((j.done, r));
    }
    let applied = held.finish();
    if group.wrapped {
        sh.store.log_command(&[b"EXEC"]);
    }
    drop(lock);
    if let Err(e) = applied {
        // Nothing of the group is acknowledged: every reply is the error.
        let e = Reply::from(e);
        for (_, r) in &mut ran {
            r.1.iter_mut().for_each(|reply| *reply = e.clone());
        }
    }
    // Outside the exclusive lock, once the writes are applied: the clients blocked on
    // keys the scripts pushed to.
    crate::cmd::blocking::serve_ready(sh);
    for (done, r) in ran {
        let _ = done.send(r);
    }
}
