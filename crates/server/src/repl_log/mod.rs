//! The replication log of a primary: its replication id, its offset (bytes of write
//! stream produced so far, Redis's `master_repl_offset`) and the backlog, the last
//! `repl-backlog-size` bytes of that stream, from which a replica that reconnects
//! continues (`+CONTINUE`) instead of copying the whole database again.
//!
//! [`crate::store::Store`] holds the log behind the lock that orders writes: a write is
//! applied to the engine and appended here under it, so the stream's order is the
//! engine's order, and a checkpoint taken under it holds exactly the writes before an
//! offset. As in Redis, there is no backlog (and no stream: the offset stands still)
//! until the first replica asks for a full sync.
//!
//! It sits below the store and imports nothing of the server: the replication commands
//! and links (`crate::repl`) read it through the store.

pub mod history;
pub mod wire;

use history::History;
use std::collections::VecDeque;
use tokio::sync::watch;

/// Default of `repl-backlog-size` (Redis's 1 MiB).
pub const DEFAULT_BACKLOG: usize = 1 << 20;

/// The last bytes of the stream, with the offset of the first one it holds.
struct Backlog {
    buf: VecDeque<u8>,
    /// Stream offset of `buf[0]`.
    start: u64,
}

pub struct Log {
    /// The replication id (`history.current`) and the earlier ones a replica may
    /// continue from through the WAL.
    history: History,
    offset: u64,
    backlog: Option<Backlog>,
    capacity: usize,
    /// The offset, for the tasks that send the stream to replicas.
    tx: watch::Sender<u64>,
}

/// Why a replica cannot continue from an offset.
#[derive(Debug, PartialEq, Eq)]
pub enum Gap {
    /// The bytes were dropped from the backlog (or there is no backlog).
    Overrun,
    /// The offset is past the end of the stream.
    Ahead,
}

impl Log {
    pub fn new(capacity: usize) -> Log {
        Log {
            history: History::fresh(),
            offset: 0,
            backlog: None,
            capacity,
            tx: watch::channel(0).0,
        }
    }

    pub fn replid(&self) -> &str {
        &self.history.current
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    /// Takes the histories a primary starts with (read and saved by the caller), before
    /// any replica asked for anything.
    pub fn set_history(&mut self, h: History) {
        self.history = h;
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether writes are being logged (a replica has asked for a full sync since the
    /// start, or since the last change of role).
    pub fn active(&self) -> bool {
        self.backlog.is_some()
    }

    /// Starts the backlog at the current offset (a full sync is starting).
    pub fn activate(&mut self) {
        if self.backlog.is_none() {
            self.backlog = Some(Backlog {
                buf: VecDeque::new(),
                start: self.offset,
            });
        }
    }

    /// A new history with no past: a new id, the stream going on from `offset`, no
    /// backlog (a replica promoted, or a primary that becomes a replica; its own replicas
    /// must sync again). Returns it, for the caller to save.
    pub fn reset(&mut self, offset: u64) -> History {
        self.history = History::fresh();
        self.offset = offset;
        self.backlog = None;
        self.tx.send_replace(offset);
        self.history.clone()
    }

    /// Appends `bytes` to the stream (a no-op while inactive), dropping the oldest bytes
    /// beyond the capacity.
    pub fn append(&mut self, bytes: &[u8]) {
        let Some(b) = &mut self.backlog else {
            return;
        };
        b.buf.extend(bytes);
        self.offset = self.offset.saturating_add(bytes.len() as u64);
        let over = b.buf.len().saturating_sub(self.capacity);
        if over > 0 {
            b.buf.drain(..over);
            b.start += over as u64;
        }
        self.tx.send_replace(self.offset);
    }

    /// `repl-backlog-size`: takes effect at the next append.
    pub fn set_capacity(&mut self, bytes: usize) {
        self.capacity = bytes;
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// (first offset held, bytes held), for INFO.
    pub fn held(&self) -> (u64, u64) {
        match &self.backlog {
            Some(b) => (b.start, b.buf.len() as u64),
            None => (0, 0),
        }
    }

    /// Up to `max` bytes of the stream from `from`.
    pub fn read(&self, from: u64, max: usize) -> Result<Vec<u8>, Gap> {
        let b = self.backlog.as_ref().ok_or(Gap::Overrun)?;
        if from > self.offset {
            return Err(Gap::Ahead);
        }
        if from < b.start {
            return Err(Gap::Overrun);
        }
        let i = (from - b.start) as usize;
        let j = b.buf.len().min(i + max);
        let (x, y) = b.buf.as_slices();
        let mut out = Vec::with_capacity(j - i);
        if i < x.len() {
            out.extend_from_slice(&x[i..j.min(x.len())]);
        }
        if j > x.len() {
            out.extend_from_slice(&y[i.saturating_sub(x.len())..j - x.len()]);
        }
        Ok(out)
    }

    /// Whether a replica of this history at `offset` can continue from the backlog.
    pub fn can_continue(&self, replid: &str, offset: u64) -> bool {
        replid == self.history.current && self.read(offset, 0).is_ok()
    }

    /// Tells of each new offset.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_keeps_the_last_bytes_by_offset() {
        let mut l = Log::new(8);
        l.append(b"lost");
        assert_eq!(l.offset(), 0, "inactive: nothing is logged");
        l.activate();
        l.append(b"abcde");
        assert_eq!(l.read(0, 100).unwrap(), b"abcde");
        assert_eq!(l.read(2, 2).unwrap(), b"cd");
        l.append(b"fghij");
        assert_eq!(l.offset(), 10);
        assert_eq!(l.held(), (2, 8));
        assert_eq!(l.read(1, 100), Err(Gap::Overrun));
        assert_eq!(l.read(2, 100).unwrap(), b"cdefghij");
        assert_eq!(l.read(10, 100).unwrap(), b"");
        assert_eq!(l.read(11, 100), Err(Gap::Ahead));
        let id = l.replid().to_string();
        assert!(l.can_continue(&id, 5) && !l.can_continue(&id, 1));
        assert!(!l.can_continue("other", 5));
        l.reset(10);
        assert!(!l.can_continue(&id, 10) && !l.active());
    }
}
