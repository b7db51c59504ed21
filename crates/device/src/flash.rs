//! The flash array of one NVM set and its page-level flash translation layer.
//!
//! This module is pure bookkeeping: which logical page lives in which physical page, which
//! blocks are free, open, full or being collected, how many valid pages and reads each block
//! has, and until when each die and channel is busy. It decides nothing about time; the set
//! ([`crate::set`]) schedules operations and asks this module to apply them.
//!
//! Physical pages are numbered `((die * blocks_per_die) + block) * pages_per_block + page`.
//! Die `d` hangs on channel `d % channels`, so consecutive dies use different channels.

use crate::config::Geometry;
use std::collections::VecDeque;

const NONE: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockState {
    Free,
    /// The die's current write point.
    Open,
    Full,
    /// Chosen by GC or read-reclaim; its valid pages are being moved out.
    Victim,
}

#[derive(Clone, Debug)]
struct Block {
    state: BlockState,
    /// Pages programmed since the last erase.
    written: u32,
    valid: u32,
    /// Page reads since the last erase (read disturb).
    reads: u64,
    reclaim_queued: bool,
}

#[derive(Debug)]
pub(crate) struct Die {
    free: VecDeque<u32>,
    open: Option<u32>,
    /// Virtual time (ns) until which the die is busy.
    pub busy_until: u64,
    /// Whether the operation that keeps the die busy until `busy_until` is internal.
    pub busy_internal: bool,
    /// A GC job for this die is queued or running.
    pub gc_queued: bool,
}

pub(crate) struct Flash {
    channels: u32,
    blocks_per_die: u32,
    pages_per_block: u32,
    blocks: Vec<Block>,
    pub dies: Vec<Die>,
    /// Virtual time (ns) until which each channel is busy.
    pub channel_busy_until: Vec<u64>,
    l2p: Vec<u64>,
    p2l: Vec<u64>,
}

impl Flash {
    pub fn new(g: &Geometry) -> Self {
        let dies = g.dies();
        let blocks = (0..dies as u64 * g.blocks_per_die as u64)
            .map(|_| Block {
                state: BlockState::Free,
                written: 0,
                valid: 0,
                reads: 0,
                reclaim_queued: false,
            })
            .collect();
        Flash {
            channels: g.channels,
            blocks_per_die: g.blocks_per_die,
            pages_per_block: g.pages_per_block,
            blocks,
            dies: (0..dies)
                .map(|_| Die {
                    free: (0..g.blocks_per_die).collect(),
                    open: None,
                    busy_until: 0,
                    busy_internal: false,
                    gc_queued: false,
                })
                .collect(),
            channel_busy_until: vec![0; g.channels as usize],
            l2p: vec![NONE; g.logical_pages() as usize],
            p2l: vec![NONE; g.physical_pages() as usize],
        }
    }

    pub fn num_dies(&self) -> usize {
        self.dies.len()
    }

    pub fn channel_of(&self, die: usize) -> usize {
        die % self.channels as usize
    }

    pub fn die_of_ppn(&self, ppn: u64) -> usize {
        (ppn / (self.pages_per_block as u64 * self.blocks_per_die as u64)) as usize
    }

    pub fn block_of_ppn(&self, ppn: u64) -> usize {
        (ppn / self.pages_per_block as u64) as usize
    }

    /// 0 = lower, 1 = centre, 2 = upper page of a TLC word line.
    pub fn page_type(&self, ppn: u64) -> usize {
        ((ppn % self.pages_per_block as u64) % 3) as usize
    }

    pub fn die_of_block(&self, block: usize) -> usize {
        block / self.blocks_per_die as usize
    }

    pub fn lookup(&self, lpn: u64) -> Option<u64> {
        let p = self.l2p[lpn as usize];
        (p != NONE).then_some(p)
    }

    pub fn free_blocks(&self, die: usize) -> usize {
        self.dies[die].free.len()
    }

    fn open_has_room(&self, die: usize) -> bool {
        self.dies[die]
            .open
            .is_some_and(|b| self.blocks[self.global(die, b)].written < self.pages_per_block)
    }

    fn global(&self, die: usize, local: u32) -> usize {
        die * self.blocks_per_die as usize + local as usize
    }

    /// Whether a page can be allocated on `die`. Host (buffer flush) allocations may not take
    /// the last free block: it is kept so that GC can always move a victim's valid pages.
    pub fn can_alloc(&self, die: usize, for_gc: bool) -> bool {
        self.open_has_room(die) || self.dies[die].free.len() > usize::from(!for_gc)
    }

    /// Allocates the next page of `die`'s open block, opening a free block if needed.
    /// Returns the physical page, or `None` when `can_alloc` is false.
    pub fn alloc(&mut self, die: usize, for_gc: bool) -> Option<u64> {
        if !self.can_alloc(die, for_gc) {
            return None;
        }
        if !self.open_has_room(die) {
            let b = self.dies[die].free.pop_front()?;
            let g = self.global(die, b);
            self.blocks[g].state = BlockState::Open;
            self.dies[die].open = Some(b);
        }
        let b = self.dies[die].open?;
        let g = self.global(die, b);
        let page = self.blocks[g].written;
        self.blocks[g].written += 1;
        if self.blocks[g].written == self.pages_per_block {
            self.blocks[g].state = BlockState::Full;
            self.dies[die].open = None;
        }
        Some(g as u64 * self.pages_per_block as u64 + page as u64)
    }

    /// Points `lpn` at `ppn`, invalidating its previous physical page.
    pub fn map(&mut self, lpn: u64, ppn: u64) {
        self.unmap(lpn);
        self.l2p[lpn as usize] = ppn;
        self.p2l[ppn as usize] = lpn;
        let b = self.block_of_ppn(ppn);
        self.blocks[b].valid += 1;
    }

    /// Forgets `lpn` (trim, or overwrite before `map`).
    pub fn unmap(&mut self, lpn: u64) {
        let old = self.l2p[lpn as usize];
        if old != NONE {
            self.p2l[old as usize] = NONE;
            let b = self.block_of_ppn(old);
            self.blocks[b].valid -= 1;
            self.l2p[lpn as usize] = NONE;
        }
    }

    /// The logical page stored at `ppn`, if it is still valid.
    pub fn owner(&self, ppn: u64) -> Option<u64> {
        let l = self.p2l[ppn as usize];
        (l != NONE).then_some(l)
    }

    /// Greedy victim: the full block of `die` with the fewest valid pages, among those with at
    /// least one invalid page. Ties go to the lowest block number.
    pub fn gc_victim(&self, die: usize) -> Option<usize> {
        let first = self.global(die, 0);
        (first..first + self.blocks_per_die as usize)
            .filter(|&b| {
                let blk = &self.blocks[b];
                blk.state == BlockState::Full && blk.valid < blk.written
            })
            .min_by_key(|&b| (self.blocks[b].valid, b))
    }

    /// Marks `block` as being collected and returns its valid pages in page order. Returns
    /// `None` if the block is not full or open (already collected, or free).
    pub fn begin_collect(&mut self, block: usize) -> Option<Vec<u64>> {
        let die = self.die_of_block(block);
        match self.blocks[block].state {
            BlockState::Full => {}
            BlockState::Open => self.dies[die].open = None,
            BlockState::Free | BlockState::Victim => return None,
        }
        self.blocks[block].state = BlockState::Victim;
        let first = block as u64 * self.pages_per_block as u64;
        let written = self.blocks[block].written as u64;
        Some(
            (first..first + written)
                .filter(|&p| self.p2l[p as usize] != NONE)
                .collect(),
        )
    }

    /// Erases a collected block and returns it to its die's free list. Pages still valid in it
    /// (a migration that found no room) are dropped from the map and counted in the result.
    pub fn erase(&mut self, block: usize) -> u64 {
        let first = block as u64 * self.pages_per_block as u64;
        let mut dropped = 0;
        for p in first..first + self.pages_per_block as u64 {
            if let Some(l) = self.owner(p) {
                self.unmap(l);
                dropped += 1;
            }
        }
        let blk = &mut self.blocks[block];
        blk.state = BlockState::Free;
        blk.written = 0;
        blk.valid = 0;
        blk.reads = 0;
        blk.reclaim_queued = false;
        let die = self.die_of_block(block);
        let local = (block % self.blocks_per_die as usize) as u32;
        self.dies[die].free.push_back(local);
        dropped
    }

    /// Counts a read of `ppn`; returns its block if the block just reached `threshold` reads
    /// and must be read-reclaimed.
    pub fn note_read(&mut self, ppn: u64, threshold: u64) -> Option<usize> {
        let b = self.block_of_ppn(ppn);
        let blk = &mut self.blocks[b];
        blk.reads += 1;
        if blk.reads >= threshold && !blk.reclaim_queued {
            blk.reclaim_queued = true;
            return Some(b);
        }
        None
    }

    pub fn total_free_blocks(&self) -> usize {
        self.dies.iter().map(|d| d.free.len()).sum()
    }

    pub fn valid_pages(&self) -> u64 {
        self.blocks.iter().map(|b| b.valid as u64).sum()
    }
}
