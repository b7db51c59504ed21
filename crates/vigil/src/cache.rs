//! The write cache (paper 001's plm_cache): chunks of internal writes waiting for their
//! kv-set's NDWIN.
//!
//! Each entry is a range of a slot's device file whose bytes are already in the backing
//! file (so readers see them and a crash keeps them, as the device's own power-loss
//! protected buffer would) but whose page programs have not been issued to the device yet.
//! The cache accounts the bytes it would hold in host memory; entries of one set leave in
//! FIFO order, so the pending ranges of a device file are always its tail and reads of them
//! cost no device time.

use device::DeviceFile;
use std::collections::VecDeque;

pub(crate) struct Entry {
    pub file: DeviceFile,
    pub offset: u64,
    pub len: u64,
    /// Admission order over all sets (the oldest entry is written first on overflow).
    pub seq: u64,
}

#[derive(Default)]
pub(crate) struct WriteCache {
    queues: Vec<VecDeque<Entry>>,
    bytes: Vec<u64>,
    total: u64,
    peak: u64,
    next_seq: u64,
}

impl WriteCache {
    pub fn new(slots: usize) -> Self {
        WriteCache {
            queues: (0..slots).map(|_| VecDeque::new()).collect(),
            bytes: vec![0; slots],
            ..Default::default()
        }
    }

    pub fn push(&mut self, slot: usize, file: DeviceFile, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        self.queues[slot].push_back(Entry {
            file,
            offset,
            len,
            seq: self.next_seq,
        });
        self.next_seq += 1;
        self.bytes[slot] += len;
        self.total += len;
    }

    /// Records the current fill as a candidate peak (called once a push was handled, so
    /// that a chunk written through at once does not count as held).
    pub fn note_peak(&mut self) {
        self.peak = self.peak.max(self.total);
    }

    pub fn pop(&mut self, slot: usize) -> Option<Entry> {
        let e = self.queues[slot].pop_front()?;
        self.bytes[slot] -= e.len;
        self.total -= e.len;
        Some(e)
    }

    /// The slot whose head entry is the oldest.
    pub fn oldest_slot(&self) -> Option<usize> {
        self.queues
            .iter()
            .enumerate()
            .filter_map(|(k, q)| q.front().map(|e| (e.seq, k)))
            .min()
            .map(|(_, k)| k)
    }

    /// Drops the entries of a device file at or past `from` (the file was truncated or
    /// removed; those programs will never be needed).
    pub fn drop_from(&mut self, slot: usize, name: &std::path::Path, from: u64) {
        let q = &mut self.queues[slot];
        q.retain_mut(|e| {
            if e.offset + e.len <= from || e.file.name() != name {
                return true;
            }
            e.len = from.saturating_sub(e.offset);
            e.len > 0
        });
        self.recount(slot);
    }

    fn recount(&mut self, slot: usize) {
        let b: u64 = self.queues[slot].iter().map(|e| e.len).sum();
        self.total = self.total - self.bytes[slot] + b;
        self.bytes[slot] = b;
    }

    pub fn bytes(&self, slot: usize) -> u64 {
        self.bytes[slot]
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn peak(&self) -> u64 {
        self.peak
    }
}
