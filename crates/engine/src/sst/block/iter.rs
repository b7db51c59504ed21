//! Iteration and seeking within one block.

use super::parsed::Block;
use crate::error::Result;
use crate::internal_key::cmp_internal;
use crate::sst::iter::InternalIterator;
use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

/// A cursor over a [`Block`]. It owns an `Arc` of the block, so it can outlive the cache
/// entry it came from. Operations cannot fail: the block was validated when parsed.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; `restarts_offset` when not valid.
    current: usize,
    /// Offset of the entry after the current one.
    next_offset: usize,
    /// The whole key of the current entry, rebuilt from the shared prefix.
    key: Vec<u8>,
    value: Range<usize>,
}

impl Block {
    /// An iterator that keeps the block alive.
    pub fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter::new(Arc::clone(self))
    }
}

impl BlockIter {
    fn new(block: Arc<Block>) -> Self {
        let end = block.restarts_offset();
        BlockIter {
            block,
            current: end,
            next_offset: end,
            key: Vec::new(),
            value: 0..0,
        }
    }

    pub fn valid(&self) -> bool {
        self.current < self.block.restarts_offset()
    }

    /// The current key; empty when not valid.
    pub fn key(&self) -> &[u8] {
        if self.valid() {
            &self.key
        } else {
            &[]
        }
    }

    /// The current value; empty when not valid.
    pub fn value(&self) -> &[u8] {
        if self.valid() {
            &self.block.data()[self.value.clone()]
        } else {
            &[]
        }
    }

    pub fn seek_to_first(&mut self) {
        self.seek_to_restart(0);
        self.next();
    }

    /// Positions at the first entry whose key is >= `target` in internal order, or makes
    /// the iterator invalid if there is none.
    pub fn seek(&mut self, target: &[u8]) {
        let n = self.block.num_restarts();
        if n == 0 {
            self.invalidate();
            return;
        }
        // The last restart point whose key is < target: the answer lies in its interval or,
        // if that interval holds nothing >= target, at the start of the next one.
        let (mut lo, mut hi) = (0, n - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match self.restart_key(mid) {
                Some(k) if cmp_internal(k, target) == Ordering::Less => lo = mid,
                _ => hi = mid - 1,
            }
        }
        self.seek_to_restart(lo);
        loop {
            self.next();
            if !self.valid() || cmp_internal(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    /// Advances to the next entry; past the last one the iterator becomes invalid.
    pub fn next(&mut self) {
        let end = self.block.restarts_offset();
        if self.next_offset >= end {
            self.invalidate();
            return;
        }
        let Some(h) = self.block.entry_header(self.next_offset) else {
            // Unreachable for a validated block; stay safe anyway.
            self.invalidate();
            return;
        };
        let data = self.block.data();
        self.key.truncate(h.shared);
        self.key
            .extend_from_slice(&data[h.delta_offset..h.value_offset()]);
        self.value = h.value_offset()..h.end();
        self.current = self.next_offset;
        self.next_offset = h.end();
    }

    /// Positions at the last entry, or makes the iterator invalid if there is none.
    pub fn seek_to_last(&mut self) {
        let n = self.block.num_restarts();
        if n == 0 {
            self.invalidate();
            return;
        }
        self.seek_to_restart(n - 1);
        self.next();
        while self.valid() && self.next_offset < self.block.restarts_offset() {
            self.next();
        }
    }

    /// Moves to the entry before the current one (invalid before the first). Entries are
    /// only linked forward (each key is a delta of the one before it), so this rescans from
    /// the last restart point before the current entry: at most one restart interval.
    pub fn prev(&mut self) {
        let original = self.current;
        if !self.valid() {
            return;
        }
        let n = self.block.num_restarts();
        // Restart points ascend; the last one strictly before the current entry.
        let (mut before, mut hi) = (0, n);
        while before < hi {
            let mid = before + (hi - before) / 2;
            if self.block.restart_point(mid).is_some_and(|r| r < original) {
                before = mid + 1;
            } else {
                hi = mid;
            }
        }
        if before == 0 {
            self.invalidate();
            return;
        }
        self.seek_to_restart(before - 1);
        loop {
            self.next();
            if !self.valid() || self.next_offset >= original {
                return;
            }
        }
    }

    /// The whole key stored at restart point `i` (restart entries share no prefix).
    fn restart_key(&self, i: usize) -> Option<&[u8]> {
        let h = self.block.entry_header(self.block.restart_point(i)?)?;
        Some(&self.block.data()[h.delta_offset..h.value_offset()])
    }

    /// Leaves the iterator just before restart point `i`, so that `next()` reads it.
    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        let end = self.block.restarts_offset();
        self.current = end;
        self.next_offset = self.block.restart_point(i).unwrap_or(end);
    }

    fn invalidate(&mut self) {
        let end = self.block.restarts_offset();
        self.current = end;
        self.next_offset = end;
        self.key.clear();
        self.value = 0..0;
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        BlockIter::valid(self)
    }
    fn seek_to_first(&mut self) -> Result<()> {
        BlockIter::seek_to_first(self);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        BlockIter::seek(self, target);
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        BlockIter::next(self);
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        BlockIter::seek_to_last(self);
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        BlockIter::prev(self);
        Ok(())
    }
    fn key(&self) -> &[u8] {
        BlockIter::key(self)
    }
    fn value(&self) -> &[u8] {
        BlockIter::value(self)
    }
}
