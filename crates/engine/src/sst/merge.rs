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

use super::iter::InternalIterator;
use crate::error::Result;
use crate::types::cmp_internal;
use std::cmp::Ordering;

/// Merges children in internal-key order, newest child first on equal keys.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Indexes of the valid children, a min-heap under [`Self::less`].
    heap: Vec<usize>,
}

impl MergingIterator {
    /// `children[0]` is the newest source.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            heap: Vec::new(),
        }
    }

    pub fn num_children(&self) -> usize {
        self.children.len()
    }

    /// Gives the children back, e.g. to reuse them after a merge.
    pub fn into_children(self) -> Vec<Box<dyn InternalIterator>> {
        self.children
    }

    fn less(&self, a: usize, b: usize) -> bool {
        match cmp_internal(self.children[a].key(), self.children[b].key()) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => a < b,
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

    /// Runs `op` on every child, then rebuilds the heap. On an error the iterator is left
    /// invalid rather than half-positioned.
    fn reposition(
        &mut self,
        mut op: impl FnMut(&mut dyn InternalIterator) -> Result<()>,
    ) -> Result<()> {
        for child in &mut self.children {
            if let Err(e) = op(child.as_mut()) {
                self.heap.clear();
                return Err(e);
            }
        }
        self.rebuild();
        Ok(())
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.reposition(|c| c.seek_to_first())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.reposition(|c| c.seek(target))
    }

    fn next(&mut self) -> Result<()> {
        let Some(&top) = self.heap.first() else {
            return Ok(());
        };
        if let Err(e) = self.children[top].next() {
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

    fn key(&self) -> &[u8] {
        self.heap.first().map_or(&[], |&i| self.children[i].key())
    }

    fn value(&self) -> &[u8] {
        self.heap.first().map_or(&[], |&i| self.children[i].value())
    }
}
