//! `CLIENT PAUSE`: until a deadline, clients' commands (all of them, or only those that
//! may write) wait before they run. A paused connection waits in its own task, as a
//! blocked pop does ([`crate::cmd::blocking`]): it holds no worker thread, and
//! `CLIENT UNPAUSE` or the deadline wakes it.

use parking_lot::Mutex;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// The current pause: until when, and whether it holds every command or writes only.
#[derive(Default)]
pub struct Pause {
    state: Mutex<Option<(Instant, bool)>>,
    lifted: Notify,
}

impl Pause {
    /// Pauses for `d` (writes only unless `all`). A pause already in force is extended,
    /// never shortened or narrowed, as Redis's `pauseClients` does.
    pub fn pause(&self, d: Duration, all: bool) {
        let now = Instant::now();
        // A deadline past what the clock holds (centuries away) is the farthest one it does.
        let until = now
            .checked_add(d)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
        let mut st = self.state.lock();
        *st = Some(match *st {
            Some((u, a)) if u > now => (u.max(until), a || all),
            _ => (until, all),
        });
    }

    /// `CLIENT UNPAUSE`: the waiting clients run.
    pub fn unpause(&self) {
        *self.state.lock() = None;
        self.lifted.notify_waiters();
    }

    /// Until when a batch waits (`writes`: it may write), if it does.
    pub fn holds(&self, writes: bool) -> Option<Instant> {
        let st = self.state.lock();
        let (until, all) = (*st)?;
        (until > Instant::now() && (all || writes)).then_some(until)
    }

    /// Waits while a pause holds a batch; `false` if the connection is to close (server
    /// shutdown or `CLIENT KILL`) meanwhile.
    pub async fn wait(&self, writes: bool, stop: &mut watch::Receiver<bool>) -> bool {
        loop {
            // Registered before the state is read: an unpause in between still wakes it.
            let lifted = self.lifted.notified();
            tokio::pin!(lifted);
            lifted.as_mut().enable();
            let Some(until) = self.holds(writes) else {
                return true;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = &mut lifted => {}
                r = stop.changed() => if r.is_err() || *stop.borrow() { return false },
            }
        }
    }
}
