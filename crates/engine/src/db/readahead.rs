//! A scan's read-ahead of separated values: the window of entries a [`super::DbIter`]
//! takes from the tree ahead of its caller, how large it is, and how its values are read.
//!
//! The iterator walks the tree as before; when its window is empty it takes the next
//! entries up to the window's size in bytes, resolves every pointer among them where a
//! point read would ([`super::read::locate`]: the version, its index maps, the snapshot's
//! pinned files) and reads those values in one batch
//! ([`crate::vlog::batch_read::read_values`]). Each entry keeps its own result, so an
//! error reading one value is returned at that entry, after the entries before it, as
//! without read-ahead. Sizing follows RocksDB's auto read-ahead: a first window of
//! [`INITIAL_READAHEAD`] bytes that doubles at every refill up to
//! [`ReadOptions::readahead_size`].

use super::inner::Inner;
use super::read::locate;
use crate::error::Result;
use crate::internal_key::ValueKind;
use crate::io::IoCause;
use crate::options::{ReadOptions, INITIAL_READAHEAD};
use crate::version::Version;
use crate::vlog::batch_read::{read_values, ValueRead};
use crate::vlog::{BlobFile, ValuePointer};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// A key and its value, as the iterator returns them.
pub(crate) type Entry = (Vec<u8>, Vec<u8>);

/// An entry taken from the tree, its value not yet read if it is separated.
pub(crate) struct Taken {
    pub key: Vec<u8>,
    value: Raw,
}

enum Raw {
    Inline(Vec<u8>),
    Pointer(Result<ValuePointer>),
}

impl Taken {
    /// An entry of `kind` (a value or a pointer; tombstones never get here) whose raw
    /// value in the tree is `value`.
    pub fn new(inner: &Inner, key: Vec<u8>, kind: ValueKind, value: Vec<u8>) -> Taken {
        let value = match kind {
            ValueKind::Pointer => {
                Raw::Pointer(ValuePointer::decode(&inner.dir, &value).map(|(p, _)| p))
            }
            _ => Raw::Inline(value),
        };
        Taken { key, value }
    }

    /// Whether its value is in a value file (read ahead) rather than in the tree.
    pub fn is_separated(&self) -> bool {
        matches!(self.value, Raw::Pointer(_))
    }

    /// What the entry counts against the window: its key and its value, a separated
    /// value by the size of its record.
    pub fn bytes(&self) -> usize {
        self.key.len()
            + match &self.value {
                Raw::Inline(v) => v.len(),
                Raw::Pointer(Ok(p)) => p.size as usize,
                Raw::Pointer(Err(_)) => 0,
            }
    }
}

/// The entries taken ahead of the caller, with their values read, and the size of the
/// next window.
pub(crate) struct Readahead {
    ready: VecDeque<Result<Entry>>,
    next: usize,
    max: usize,
    auto: bool,
}

impl Readahead {
    pub fn new(o: &ReadOptions) -> Readahead {
        let max = o.readahead_size;
        Readahead {
            ready: VecDeque::new(),
            next: if o.auto_readahead {
                INITIAL_READAHEAD.min(max)
            } else {
                max
            },
            max,
            auto: o.auto_readahead,
        }
    }

    /// The next entry taken ahead, if any is left.
    pub fn pop(&mut self) -> Option<Result<Entry>> {
        self.ready.pop_front()
    }

    /// Bytes the next refill takes from the tree (it takes at least one entry); each
    /// call of an auto read-ahead doubles the following one, up to the largest window.
    pub fn window(&mut self) -> usize {
        let w = self.next;
        if self.auto {
            self.next = (self.next * 2).min(self.max);
        }
        w
    }

    /// Reads the values of `taken` (in one batch) and queues the entries, followed by
    /// `error` if taking them from the tree stopped at one.
    pub fn fill(
        &mut self,
        inner: &Inner,
        version: &Version,
        pinned: Option<&BTreeMap<u64, Arc<BlobFile>>>,
        taken: Vec<Taken>,
        error: Option<crate::error::Error>,
    ) {
        // A window of values in the tree (a short scan over inline values takes one entry
        // per refill) has nothing to read: queued as it is, as the server's `LRANGE`
        // spent a twentieth of its CPU building an empty batch per element.
        if !taken.iter().any(Taken::is_separated) {
            for t in taken {
                if let Raw::Inline(v) = t.value {
                    self.ready.push_back(Ok((t.key, v)));
                }
            }
            if let Some(e) = error {
                self.ready.push_back(Err(e));
            }
            return;
        }
        // Each entry's value: read already (inline), an error (a malformed pointer, a
        // file no version holds), or the index of its read in the batch.
        enum Slot {
            Done(Result<Vec<u8>>),
            Read(usize, ValuePointer, Arc<BlobFile>),
        }
        let mut keys = Vec::with_capacity(taken.len());
        let mut slots = Vec::with_capacity(taken.len());
        let mut n = 0;
        for t in taken {
            slots.push(match t.value {
                Raw::Inline(v) => Slot::Done(Ok(v)),
                Raw::Pointer(p) => match p.and_then(|p| locate(inner, version, pinned, &p)) {
                    Ok((file, ptr)) => {
                        n += 1;
                        Slot::Read(n - 1, ptr, file)
                    }
                    Err(e) => Slot::Done(Err(e)),
                },
            });
            keys.push(t.key);
        }
        let reads: Vec<ValueRead> = slots
            .iter()
            .zip(&keys)
            .filter_map(|(s, key)| match s {
                Slot::Read(_, ptr, file) => Some(ValueRead {
                    file: file.clone(),
                    ptr: *ptr,
                    key,
                }),
                Slot::Done(_) => None,
            })
            .collect();
        let mut values: Vec<Option<Result<Vec<u8>>>> = read_values(&reads, IoCause::ClientRead)
            .into_iter()
            .map(Some)
            .collect();
        drop(reads);
        for (key, slot) in keys.into_iter().zip(slots) {
            let value = match slot {
                Slot::Done(v) => v,
                Slot::Read(i, ..) => values[i].take().expect("each read is taken once"),
            };
            self.ready.push_back(value.map(|v| (key, v)));
        }
        if let Some(e) = error {
            self.ready.push_back(Err(e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_windows_double_up_to_the_largest_and_fixed_ones_stay() {
        let i = INITIAL_READAHEAD;
        let mut r = Readahead::new(&ReadOptions {
            readahead_size: 5 * i,
            auto_readahead: true,
            max_skipped: 0,
        });
        let w: Vec<usize> = (0..5).map(|_| r.window()).collect();
        assert_eq!(w, [i, 2 * i, 4 * i, 5 * i, 5 * i]);
        let mut r = Readahead::new(&ReadOptions {
            readahead_size: i / 2,
            auto_readahead: true,
            max_skipped: 0,
        });
        assert_eq!((r.window(), r.window()), (i / 2, i / 2));
        let mut r = Readahead::new(&ReadOptions {
            readahead_size: 64 << 10,
            auto_readahead: false,
            max_skipped: 0,
        });
        assert_eq!((r.window(), r.window()), (64 << 10, 64 << 10));
        let mut r = Readahead::new(&ReadOptions::without_readahead());
        assert_eq!((r.window(), r.window()), (0, 0));
    }
}
