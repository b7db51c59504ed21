//! The writes of a transaction or a script, held back and applied as one engine batch when
//! it ends.
//!
//! Why: `EXEC` and a script run alone (under the exec lock), but each of their commands
//! used to apply its own engine batch, so a power cut between two of them left half a
//! transaction on disk; Redis's AOF never loads one (a `MULTI` block cut short is
//! dropped). While a transaction runs, its writes collect in an [`Overlay`]; every read
//! the thread running it makes through the store sees them ([`Overlay::get`],
//! [`merge`]); at its end they are one engine write, synced if any of its commands asked
//! for a sync, and one entry of the replication stream.
//!
//! Bounds: a transaction holding more than [`MAX_BYTES`] of writes applies what it holds
//! and goes on, so that a script writing without bound does not hold it all in memory;
//! only such a transaction is more than one engine batch (a replica still applies it as
//! one: the stream wraps it in `MULTI`/`EXEC`). A write the store cannot hold back (a
//! flush scans the engine; a command logged to the stream must follow the writes before
//! it) first applies what is held ([`Slot::settle`]).
//!
//! Other threads (the expiry sweep, the replication sender, commands that hold no lock)
//! never see the held writes: they read the engine as it was before the transaction.

use engine::internal_key::ValueKind;
use engine::WriteBatch;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, ThreadId};

/// Bytes of writes a transaction holds before it applies them and goes on.
pub const MAX_BYTES: usize = 64 << 20;

/// The held writes of the transaction running on one thread.
pub struct Overlay {
    owner: ThreadId,
    /// Transactions begun and not ended on the thread (a script inside `EXEC`): the
    /// outermost applies.
    depth: usize,
    wb: WriteBatch,
    /// Each engine key `wb` writes, as a read will see it once applied (`None`: deleted).
    records: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    bytes: usize,
    sync: bool,
    /// An apply of held writes that failed before the end (a settle): the end reports it.
    failed: Option<String>,
}

impl Overlay {
    /// The engine record `k` as the transaction sees it: `Some(None)` if it deleted it,
    /// `None` if it did not write it.
    pub fn get(&self, k: &[u8]) -> Option<Option<&[u8]>> {
        self.records.get(k).map(Option::as_deref)
    }

    /// The records it wrote in a key range, in key order.
    pub fn range(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Vec<Held> {
        self.records
            .range::<[u8], _>((lower, upper))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Holds `wb`'s writes; `true` once it holds more than [`MAX_BYTES`].
    fn add(&mut self, wb: &WriteBatch, sync: bool) -> bool {
        for e in wb.iter() {
            let v = match e.kind {
                ValueKind::Deletion => None,
                _ => Some(e.payload().to_vec()),
            };
            self.bytes += e.key.len() + v.as_ref().map_or(0, Vec::len);
            self.records.insert(e.key.to_vec(), v);
        }
        self.wb.append(wb);
        self.sync |= sync;
        self.bytes > MAX_BYTES
    }

    /// Takes what it holds, to be applied: the engine then has it, the overlay starts over.
    fn take(&mut self) -> (WriteBatch, bool) {
        self.records.clear();
        self.bytes = 0;
        (
            std::mem::take(&mut self.wb),
            std::mem::replace(&mut self.sync, false),
        )
    }
}

/// A record the transaction wrote: its key, and its value or `None` if it deleted it.
pub type Held = (Vec<u8>, Option<Vec<u8>>);

/// The store's one overlay (the exec lock lets one transaction run at a time).
#[derive(Default)]
pub struct Slot {
    /// Whether an overlay exists: the check every read makes first.
    active: AtomicBool,
    overlay: Mutex<Option<Overlay>>,
}

/// What [`Slot::hold`] did with a write.
pub enum Hold {
    /// The thread runs no transaction: apply it.
    No,
    Held,
    /// Held, and the overlay is over its bound: apply what it holds now.
    Full,
}

impl Slot {
    /// Runs `f` on the calling thread's overlay, if it has one.
    pub fn with<R>(&self, f: impl FnOnce(&mut Overlay) -> R) -> Option<R> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        let mut g = self.overlay.lock();
        match g.as_mut() {
            Some(o) if o.owner == thread::current().id() => Some(f(o)),
            _ => None,
        }
    }

    /// Begins a transaction on the calling thread (nested in the one under way, if any).
    pub fn begin(&self) {
        let mut g = self.overlay.lock();
        match g.as_mut() {
            Some(o) => {
                // The exec lock lets one transaction run at a time, on one thread.
                assert_eq!(o.owner, thread::current().id(), "one transaction at a time");
                o.depth += 1;
            }
            None => {
                *g = Some(Overlay {
                    owner: thread::current().id(),
                    depth: 1,
                    wb: WriteBatch::new(),
                    records: BTreeMap::new(),
                    bytes: 0,
                    sync: false,
                    failed: None,
                });
                self.active.store(true, Ordering::Release);
            }
        }
    }

    /// Ends the calling thread's innermost transaction. At the outermost: its writes to
    /// apply (and whether to sync them), or the error of an apply before the end.
    pub fn end(&self) -> Option<Result<(WriteBatch, bool), String>> {
        let mut g = self.overlay.lock();
        let o = g.as_mut()?;
        if o.owner != thread::current().id() {
            return None;
        }
        o.depth -= 1;
        if o.depth > 0 {
            return None;
        }
        let mut o = g.take().expect("present");
        self.active.store(false, Ordering::Release);
        Some(match o.failed.take() {
            Some(e) => Err(e),
            None => Ok(o.take()),
        })
    }

    /// Holds `wb` if the calling thread runs a transaction.
    pub fn hold(&self, wb: &WriteBatch, sync: bool) -> Hold {
        match self.with(|o| o.add(wb, sync)) {
            None => Hold::No,
            Some(false) => Hold::Held,
            Some(true) => Hold::Full,
        }
    }

    /// What the calling thread's transaction holds, to apply before a write that cannot be
    /// held (`None`: nothing held). The transaction goes on.
    pub fn settle(&self) -> Option<(WriteBatch, bool)> {
        self.with(|o| (!o.wb.is_empty()).then(|| o.take()))
            .flatten()
    }

    /// Records that applying held writes failed: the transaction's end reports it.
    pub fn failed(&self, e: String) {
        // The first failure is the one to report.
        self.with(|o| {
            o.failed.get_or_insert(e);
        });
    }
}

/// The engine's records in a range merged with those a transaction wrote there: its
/// writes win, its deletions hide the engine's record.
pub fn merge<I, E>(
    engine: I,
    held: Vec<Held>,
) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), E>>
where
    I: Iterator<Item = Result<(Vec<u8>, Vec<u8>), E>>,
{
    Merge {
        engine: engine.peekable(),
        held: held.into_iter().peekable(),
    }
}

struct Merge<I: Iterator, H: Iterator> {
    engine: std::iter::Peekable<I>,
    held: std::iter::Peekable<H>,
}

impl<I, H, E> Iterator for Merge<I, H>
where
    I: Iterator<Item = Result<(Vec<u8>, Vec<u8>), E>>,
    H: Iterator<Item = Held>,
{
    type Item = Result<(Vec<u8>, Vec<u8>), E>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let take_held = match (self.engine.peek(), self.held.peek()) {
                (_, None) => return self.engine.next(),
                (None, Some(_)) => true,
                // An error is passed on before anything after it.
                (Some(Err(_)), _) => return self.engine.next(),
                (Some(Ok((ek, _))), Some((hk, _))) => {
                    if ek == hk {
                        // The transaction's write replaces the engine's record.
                        self.engine.next();
                        true
                    } else {
                        hk < ek
                    }
                }
            };
            if take_held {
                let (k, v) = self.held.next().expect("peeked");
                if let Some(v) = v {
                    return Some(Ok((k, v)));
                }
                // A deletion: nothing to yield, look further.
                continue;
            }
            return self.engine.next();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[(&str, Option<&str>)]) -> Vec<Held> {
        v.iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn held_writes_win_and_deletions_hide() {
        let engine = [("a", "1"), ("c", "3"), ("e", "5")]
            .map(|(k, v)| Ok::<_, ()>((k.as_bytes().to_vec(), v.as_bytes().to_vec())));
        let held = rows(&[
            ("b", Some("2")),
            ("c", None),
            ("e", Some("50")),
            ("f", Some("6")),
        ]);
        let got: Vec<(String, String)> = merge(engine.into_iter(), held)
            .map(|r| {
                let (k, v) = r.unwrap();
                (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
            })
            .collect();
        let want = [("a", "1"), ("b", "2"), ("e", "50"), ("f", "6")];
        assert_eq!(
            got,
            want.map(|(k, v)| (k.to_string(), v.to_string())).to_vec()
        );
    }

    #[test]
    fn the_outermost_end_takes_every_write_and_other_threads_see_none() {
        let slot = Slot::default();
        slot.begin();
        let mut wb = WriteBatch::new();
        wb.put(b"k", b"v");
        assert!(matches!(slot.hold(&wb, false), Hold::Held));
        slot.begin();
        let mut wb = WriteBatch::new();
        wb.delete(b"j");
        assert!(matches!(slot.hold(&wb, true), Hold::Held));
        assert!(slot.end().is_none(), "the inner end applies nothing");
        assert_eq!(
            slot.with(|o| o.get(b"k").map(|v| v.map(<[u8]>::to_vec))),
            Some(Some(Some(b"v".to_vec())))
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(slot.with(|_| ()).is_none());
                let mut wb = WriteBatch::new();
                wb.put(b"x", b"y");
                assert!(matches!(slot.hold(&wb, false), Hold::No));
            });
        });
        let (wb, sync) = slot.end().unwrap().unwrap();
        assert_eq!(wb.len(), 2);
        assert!(sync);
        assert!(slot.with(|_| ()).is_none());
    }
}
