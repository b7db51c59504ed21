//! A k-way merge of sorted iterators.
//!
//! The children sit in a binary min-heap of child indexes, ordered by each child's current
//! key ([`cmp_internal`]) and then by child index. The index tie-break is what makes
//! "lower index = newer source" work: when two sources hold the very same internal key, the
//! newer one is yielded first. Every entry of every child is yielded, duplicates included;
//! choosing the visible version of a user key is the caller's business (Get, scans and
//! compaction each have their own rules).
//!
//! The heap is hand-rolled over indexes rather than `std::collections::BinaryHeap` so that
//! comparing two children borrows their keys in place instead of copying every key.
//!
//! Walking backward the heap is a max-heap under the exact reverse of that order (on equal
//! keys the older child first), so a reverse walk yields the forward walk's entries
//! reversed, duplicates included. Turning around (`prev` after `next` or the other way)
//! repositions every other child around the current key, as RocksDB's merging iterator
//! does.

use super::iter::InternalIterator;
use crate::error::Result;
use crate::internal_key::cmp_internal;
use std::cmp::Ordering;

/// Merges children in internal-key order, newest child first on equal keys.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Indexes of the valid children, a heap under [`Self::less`] (its top the next entry
    /// in the walk's direction).
    heap: Vec<usize>,
    /// Whether the walk goes backward (after `seek_to_last`, `seek_for_prev`, `prev`).
    backward: bool,
}

impl MergingIterator {
    /// `children[0]` is the newest source.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            heap: Vec::new(),
            backward: false,
        }
    }

    pub fn num_children(&self) -> usize {
        self.children.len()
    }

    /// Gives the children back, e.g. to reuse them after a merge.
    pub fn into_children(self) -> Vec<Box<dyn InternalIterator>> {
        self.children
    }

    /// Whether child `a`'s entry comes before child `b`'s in the walk's direction.
    fn less(&self, a: usize, b: usize) -> bool {
        let order = cmp_internal(self.children[a].key(), self.children[b].key()).then(a.cmp(&b));
        if self.backward {
            order == Ordering::Greater
        } else {
            order == Ordering::Less
        }
    }

    /// Rebuilds the heap from every valid child.
    fn rebuild(&mut self) {
        self.heap = (0..self.children.len())
            .filter(|&i| self.children[i].valid())
            .collect();
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut smallest = i;
            if l < n && self.less(self.heap[l], self.heap[smallest]) {
                smallest = l;
            }
            if r < n && self.less(self.heap[r], self.heap[smallest]) {
                smallest = r;
            }
            if smallest == i {
                return;
            }
            self.heap.swap(i, smallest);
            i = smallest;
        }
    }

    /// Runs `op` on every child, then rebuilds the heap for a walk `backward` or not. On an
    /// error the iterator is left invalid rather than half-positioned.
    fn reposition(
        &mut self,
        backward: bool,
        mut op: impl FnMut(usize, &mut dyn InternalIterator) -> Result<()>,
    ) -> Result<()> {
        for (i, child) in self.children.iter_mut().enumerate() {
            if let Err(e) = op(i, child.as_mut()) {
                self.heap.clear();
                return Err(e);
            }
        }
        self.backward = backward;
        self.rebuild();
        Ok(())
    }

    /// Moves the top child one step (`prev` walking backward, else `next`) and restores the
    /// heap.
    fn step_top(&mut self) -> Result<()> {
        let Some(&top) = self.heap.first() else {
            return Ok(());
        };
        let moved = if self.backward {
            self.children[top].prev()
        } else {
            self.children[top].next()
        };
        if let Err(e) = moved {
            self.heap.clear();
            return Err(e);
        }
        if !self.children[top].valid() {
            let last = self.heap.len() - 1;
            self.heap.swap(0, last);
            self.heap.pop();
        }
        self.sift_down(0);
        Ok(())
    }

    /// Turns the walk around at the current entry (of child `top`): every other child is
    /// placed on its side of that entry in the new direction (the merged order puts the
    /// lower child first among equal keys), and the current child stays, so that the next
    /// step moves it.
    fn turn(&mut self, backward: bool) -> Result<()> {
        let top = self.heap[0];
        let key = self.children[top].key().to_vec();
        self.reposition(backward, |i, c| {
            if i == top {
                return Ok(());
            }
            if backward {
                // Entries before the current one: keys below it, and equal keys of newer
                // children.
                c.seek_for_prev(&key)?;
                while c.valid() && cmp_internal(c.key(), &key).is_eq() && i > top {
                    c.prev()?;
                }
            } else {
                c.seek(&key)?;
                while c.valid() && cmp_internal(c.key(), &key).is_eq() && i < top {
                    c.next()?;
                }
            }
            Ok(())
        })?;
        // The current child's entry is still the top: it sorts first in either direction
        // among what is left on this side.
        debug_assert_eq!(self.heap.first(), Some(&top));
        Ok(())
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.reposition(false, |_, c| c.seek_to_first())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.reposition(false, |_, c| c.seek(target))
    }

    fn next(&mut self) -> Result<()> {
        if self.backward && self.valid() {
            self.turn(false)?;
        }
        self.step_top()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.reposition(true, |_, c| c.seek_to_last())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.reposition(true, |_, c| c.seek_for_prev(target))
    }

    fn prev(&mut self) -> Result<()> {
        if !self.backward && self.valid() {
            self.turn(true)?;
        }
        self.step_top()
    }

    fn key(&self) -> &[u8] {
        self.heap.first().map_or(&[], |&i| self.children[i].key())
    }

    fn value(&self) -> &[u8] {
        self.heap.first().map_or(&[], |&i| self.children[i].value())
    }
}
