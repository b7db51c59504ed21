//! Who waits on which key: the registry of clients blocked in `BLPOP`, `XREAD` and the
//! like, and which keys were written since their waiters were last served. It sits below
//! the server's shared state; the commands that block and the serving of ready keys are
//! [`crate::cmd::blocking`] (its documentation describes the protocol and its races).

use crate::protocol::Reply;
use crate::record;
use bytes::Bytes;
use parking_lot::Mutex;
use std::any::Any;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A blocked client's registration.
pub struct Waiter {
    pub client: u64,
    pub db: u8,
    pub proto: u8,
    /// The keys it waits on (distinct, in the command's order).
    pub keys: Vec<Bytes>,
    /// What it runs when a key is ready: the command layer's, which registered it and
    /// alone runs it ([`crate::cmd::blocking`]); opaque here, so that the registry sits
    /// below the commands.
    pub op: Box<dyn Any + Send + Sync>,
    /// The reply when it times out (or `CLIENT UNBLOCK ... TIMEOUT` unblocks it).
    pub timeout_reply: Reply,
    /// Where its reply goes: `Some` while it waits; taken by whoever answers it (a serve,
    /// the timeout, the client's disconnection).
    pub slot: Mutex<Option<oneshot::Sender<Reply>>>,
}

/// What the connection of a blocked client waits for (in [`crate::session::SessionExt`]).
pub struct Blocked {
    pub waiter: Arc<Waiter>,
    pub reply: oneshot::Receiver<Reply>,
    /// `None`: no timeout.
    pub deadline: Option<Instant>,
    /// The command's name in the table, for its counters when it is answered.
    pub command: &'static str,
    /// The command (name first) and the time its first run took: it goes to the slow log
    /// when it is answered, as Redis logs a blocked command once it is unblocked.
    pub args: Vec<Bytes>,
    pub took: Duration,
}

impl Blocked {
    /// The reply when the timeout passes first.
    pub fn timeout_reply(&self) -> Reply {
        self.waiter.timeout_reply.clone()
    }
}

/// Who waits on which key, and which keys were written since they were last served.
#[derive(Default)]
pub struct Registry {
    inner: Mutex<Inner>,
    /// Registered waiters (`INFO`'s `blocked_clients`; writes skip the registry when 0).
    waiting: AtomicUsize,
    /// Whether [`Inner::ready`] may be non-empty.
    pub has_ready: AtomicBool,
}

#[derive(Default)]
struct Inner {
    /// Metadata key -> its waiters, oldest first.
    by_key: HashMap<Vec<u8>, VecDeque<Arc<Waiter>>>,
    ready: Vec<Vec<u8>>,
    ready_set: HashSet<Vec<u8>>,
}

impl Registry {
    /// Clients blocked now.
    pub fn blocked_clients(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Whether any client is blocked.
    pub fn any(&self) -> bool {
        self.blocked_clients() > 0
    }

    /// Whether any client is blocked, asked by a write after it was applied (it then
    /// reports the keys it changed). The fence pairs with the one in [`Registry::register`]
    /// (Dekker's pattern): either this sees the new waiter, or the waiter's first attempt,
    /// made after it registered, sees the write.
    pub fn any_after_write(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.waiting.load(Ordering::SeqCst) > 0
    }

    pub fn register(&self, w: &Arc<Waiter>) {
        let mut inner = self.inner.lock();
        for k in &w.keys {
            inner
                .by_key
                .entry(record::meta_key(w.db, k))
                .or_default()
                .push_back(w.clone());
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// Takes `w` out of every queue (the caller has just taken its slot).
    pub fn remove(&self, w: &Arc<Waiter>) {
        let mut inner = self.inner.lock();
        for k in &w.keys {
            let mk = record::meta_key(w.db, k);
            if let Some(q) = inner.by_key.get_mut(&mk) {
                q.retain(|x| !Arc::ptr_eq(x, w));
                if q.is_empty() {
                    inner.by_key.remove(&mk);
                }
            }
        }
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }

    /// Unblocks `w` without a reply (timeout, disconnection, shutdown): `false` if it was
    /// answered first, in which case its reply is in its channel.
    pub fn cancel(&self, w: &Arc<Waiter>) -> bool {
        let mut slot = w.slot.lock();
        if slot.take().is_none() {
            return false;
        }
        self.remove(w);
        true
    }

    /// `CLIENT UNBLOCK`: answers the blocked `client` with its timeout's reply, or with an
    /// `UNBLOCKED` error; `false` if it is not blocked. Looks through every waiter (there
    /// are at most `maxclients`).
    pub fn unblock(&self, client: u64, error: bool) -> bool {
        let found = self
            .inner
            .lock()
            .by_key
            .values()
            .flat_map(|q| q.iter())
            .find(|w| w.client == client)
            .cloned();
        let Some(w) = found else {
            return false;
        };
        let Some(tx) = w.slot.lock().take() else {
            return false;
        };
        self.remove(&w);
        let reply = if error {
            Reply::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into())
        } else {
            w.timeout_reply.clone()
        };
        let _ = tx.send(reply);
        true
    }

    /// Answers with an error each blocked client for whose first key `refuse` gives one
    /// (cluster mode: the key's slot went to another node, as Redis's
    /// `clusterRedirectBlockedClientIfNeeded` does). Looks through every waiter.
    pub fn refuse(&self, refuse: impl Fn(&[u8]) -> Option<Reply>) {
        let waiters: Vec<Arc<Waiter>> = {
            let inner = self.inner.lock();
            let mut seen = HashSet::new();
            inner
                .by_key
                .values()
                .flat_map(|q| q.iter())
                .filter(|w| seen.insert(Arc::as_ptr(w)))
                .cloned()
                .collect()
        };
        for w in waiters {
            let Some(err) = w.keys.first().and_then(|k| refuse(k)) else {
                continue;
            };
            let Some(tx) = w.slot.lock().take() else {
                continue;
            };
            self.remove(&w);
            let _ = tx.send(err);
        }
    }

    /// Marks every key with waiters in `db` (every database if `None`) as ready: a flush
    /// changed them all.
    pub fn signal_db(&self, db: Option<u8>) {
        let keys: Vec<Vec<u8>> = self
            .inner
            .lock()
            .by_key
            .keys()
            .filter(|k| db.is_none_or(|d| record::split_meta_key(k).is_some_and(|(x, _)| x == d)))
            .cloned()
            .collect();
        self.signal(&keys);
    }

    /// Marks the metadata keys `touched` that have waiters as ready.
    pub fn signal(&self, touched: &[Vec<u8>]) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        for k in touched {
            if inner.by_key.contains_key(k) && inner.ready_set.insert(k.clone()) {
                inner.ready.push(k.clone());
                self.has_ready.store(true, Ordering::Release);
            }
        }
    }

    pub fn take_ready(&self) -> Vec<Vec<u8>> {
        let mut inner = self.inner.lock();
        self.has_ready.store(false, Ordering::Release);
        inner.ready_set.clear();
        std::mem::take(&mut inner.ready)
    }

    pub fn queue(&self, mk: &[u8]) -> Vec<Arc<Waiter>> {
        self.inner
            .lock()
            .by_key
            .get(mk)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }
}
