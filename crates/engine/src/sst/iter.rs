//! The iterator interface shared by every sorted source in the engine: memtables, table
//! files, blocks, and the merging iterator that combines them.
//!
//! Keys are internal keys ordered by [`cmp_internal`](crate::internal_key::cmp_internal). Methods
//! that move the cursor return `Result` because moving may read a block from storage; the
//! accessors borrow the current entry and are only meaningful while [`valid`] is true.
//!
//! Every source walks both ways (reverse scans, RocksDB's `SeekForPrev`/`Prev`): `next` and
//! `prev` may follow any positioning and each other.
//!
//! [`valid`]: InternalIterator::valid

use crate::error::{Error, Result};
use crate::internal_key::{cmp_internal, parse_internal_key, ParsedKey, SeqNo};
use std::path::Path;

/// A cursor over entries in internal-key order.
pub trait InternalIterator: Send {
    fn valid(&self) -> bool;
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the first entry with internal key >= target.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    fn next(&mut self) -> Result<()>;
    /// Positions at the last entry (invalid if there is none).
    fn seek_to_last(&mut self) -> Result<()>;
    /// Moves to the entry before the current one; before the first the iterator becomes
    /// invalid. Only meaningful while valid().
    fn prev(&mut self) -> Result<()>;
    /// Positions at the last entry with internal key <= target.
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek(target)?;
        if !self.valid() {
            self.seek_to_last()
        } else if cmp_internal(self.key(), target).is_gt() {
            self.prev()
        } else {
            Ok(())
        }
    }
    /// Valid only while valid().
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek_for_prev(target)
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
}

/// An iterator over an owned, already sorted list of entries. Handy in tests and for small
/// in-memory sources; the entries must be in strictly increasing internal order.
#[derive(Debug, Default)]
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

impl VecIterator {
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        let pos = entries.len();
        VecIterator { entries, pos }
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self.entries.partition_point(|(k, _)| {
            crate::internal_key::cmp_internal(k, target) == std::cmp::Ordering::Less
        });
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        if self.valid() {
            self.pos += 1;
        }
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self
            .entries
            .len()
            .checked_sub(1)
            .unwrap_or(self.entries.len());
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        // Before the first entry is past the end, as invalid as it.
        self.pos = match self.pos {
            0 => self.entries.len(),
            p if p < self.entries.len() => p - 1,
            p => p,
        };
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[], |(k, _)| k)
    }
    fn value(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[], |(_, v)| v)
    }
}

/// Each user key of `input` once, in order, with the sequence number of its oldest version
/// there (the last entry of its run) and what `newest` makes of its newest version (the
/// first entry, with its value). `path` and `what` name the input in a corruption error.
pub(crate) fn key_versions<T>(
    input: &mut dyn InternalIterator,
    path: &Path,
    what: &str,
    mut newest: impl FnMut(&ParsedKey<'_>, &[u8]) -> Result<T>,
) -> Result<Vec<(Vec<u8>, SeqNo, T)>> {
    let mut keys: Vec<(Vec<u8>, SeqNo, T)> = Vec::new();
    input.seek_to_first()?;
    while input.valid() {
        let p = parse_internal_key(input.key())
            .ok_or_else(|| Error::corruption(path, format!("malformed internal key in {what}")))?;
        match keys.last_mut() {
            Some(last) if last.0 == p.user_key => last.1 = p.seq,
            _ => {
                let n = newest(&p, input.value())?;
                keys.push((p.user_key.to_vec(), p.seq, n));
            }
        }
        input.next()?;
    }
    Ok(keys)
}
