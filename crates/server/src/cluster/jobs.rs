//! `CLUSTERX MIGRATE`'s jobs as the node keeps them: the last one started, its phase and
//! error, and the signal of its end (the job itself runs in the command layer,
//! [`crate::cmd::cluster::migration`]). Kept in memory only.

use crate::protocol::Reply;
use parking_lot::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Where a job is, as `CLUSTER INFO` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Start,
    Success,
    Fail,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::Success => "success",
            Phase::Fail => "fail",
        }
    }
}

/// One `CLUSTERX MIGRATE`.
#[derive(Clone, Debug)]
pub struct Job {
    pub slot: u16,
    pub dst: String,
    pub phase: Phase,
    /// Why it failed.
    pub error: Option<String>,
    /// Counts the jobs started: a `SYNC` waits for its own.
    id: u64,
}

/// The last job, and the signal of its end. One job at a time, as in Kvrocks.
#[derive(Default)]
pub struct Jobs {
    last: Mutex<Option<Job>>,
    ended: Condvar,
}

impl Jobs {
    /// The last job started since this node started, if any.
    pub fn last(&self) -> Option<Job> {
        self.last.lock().clone()
    }

    /// Records a new job, unless one runs.
    pub(crate) fn begin(&self, slot: u16, dst: &str) -> Result<u64, Reply> {
        let mut last = self.last.lock();
        if last.as_ref().is_some_and(|j| j.phase == Phase::Start) {
            return Err(Reply::err("There is already a migrating slot"));
        }
        let id = last.as_ref().map_or(1, |j| j.id + 1);
        *last = Some(Job {
            slot,
            dst: dst.to_string(),
            phase: Phase::Start,
            error: None,
            id,
        });
        Ok(id)
    }

    pub(crate) fn end(&self, result: Result<(), String>) {
        let mut last = self.last.lock();
        if let Some(j) = last.as_mut() {
            match result {
                Ok(()) => j.phase = Phase::Success,
                Err(e) => {
                    j.phase = Phase::Fail;
                    j.error = Some(e);
                }
            }
        }
        self.ended.notify_all();
    }

    /// Waits for the end of job `id` (up to `timeout`, if given): its error, `None` when
    /// it has not ended yet.
    pub(crate) fn wait(&self, id: u64, timeout: Option<Duration>) -> Option<Result<(), String>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut last = self.last.lock();
        loop {
            match last.as_ref() {
                Some(j) if j.id == id && j.phase == Phase::Start => {}
                Some(j) if j.id == id => {
                    return Some(j.error.clone().map_or(Ok(()), Err));
                }
                // A later job replaced it: it ended.
                _ => return Some(Ok(())),
            }
            match deadline {
                None => self.ended.wait(&mut last),
                Some(d) => {
                    if self.ended.wait_until(&mut last, d).timed_out() {
                        return None;
                    }
                }
            }
        }
    }

    /// `CLUSTER INFO`'s lines about the last job (Kvrocks' format), empty before any.
    pub fn info(&self) -> String {
        match self.last() {
            None => String::new(),
            Some(j) => format!(
                "migrating_slot: {}\r\ndestination_node: {}\r\nmigrating_state: {}\r\n",
                j.slot,
                j.dst,
                j.phase.name()
            ),
        }
    }
}
