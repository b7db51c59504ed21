//! Builds the bytes of one block (layout in the parent module's docs).

use super::super::coding::put_varint32;
use crate::internal_key::cmp_internal;
use std::cmp::Ordering;

/// Accumulates sorted entries into block bytes.
#[derive(Debug)]
pub struct BlockBuilder {
    restart_interval: usize,
    buf: Vec<u8>,
    restarts: Vec<u32>,
    /// Entries since the last restart point.
    counter: usize,
    last_key: Vec<u8>,
    num_entries: usize,
}

impl BlockBuilder {
    /// A builder that stores a whole key every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            restart_interval: restart_interval.max(1),
            buf: Vec::new(),
            restarts: Vec::new(),
            counter: 0,
            last_key: Vec::new(),
            num_entries: 0,
        }
    }

    /// Appends an entry. Keys must be internal keys in strictly increasing
    /// [`cmp_internal`] order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(
            self.num_entries == 0 || cmp_internal(&self.last_key, key) == Ordering::Less,
            "block keys must be strictly increasing"
        );
        let shared = if self.counter == 0 || self.counter >= self.restart_interval {
            debug_assert!(self.buf.len() <= u32::MAX as usize, "block exceeds 4 GiB");
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let non_shared = key.len() - shared;
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.counter += 1;
        self.num_entries += 1;
    }

    /// Size of the block if it were finished now.
    pub fn current_size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    pub fn num_entries(&self) -> usize {
        self.num_entries
    }

    /// The key most recently added (empty before the first).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Returns the finished block bytes and resets the builder for the next block.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        out.reserve(4 * self.restarts.len() + 4);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.counter = 0;
        self.last_key.clear();
        self.num_entries = 0;
        out
    }
}
