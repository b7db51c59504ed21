//! One NVM set: its flash, its DRAM write buffer, its internal job queue and its
//! predictable-latency-mode state machine, all on a virtual clock.
//!
//! # Time
//! Each die and channel has a "busy until" instant. An operation issued at `t` on a die
//! starts at `max(t, die busy until)` and holds the die for its service time; page transfers
//! also hold the die's channel. A host request completes when its last page has crossed the
//! host link. Nothing runs on its own: internal work (buffer flush, GC, read-reclaim) is
//! dispatched lazily whenever a request, a window change or [`NvmSet::settle`] brings the
//! set's clock to `t`, in start-time order, for every operation that could have *started* by
//! `t`. A host read therefore waits for an internal operation already under way on its die,
//! but never for one still queued: the firmware gives host reads priority over queued
//! internal work, and does not suspend an operation in progress.
//!
//! # Windows
//! Internal work may start only in NDWIN (or with PLM disabled), and never before the
//! current NDWIN began. A DTWIN request first drains the write buffer (the lockdown); DTWIN
//! begins when every die and channel is idle. In DTWIN nothing internal is dispatched, so a
//! read waits only for other host reads. A write in DTWIN (or in the lockdown) returns the
//! set to NDWIN at once; maxDTWIN returns it at `since + maxDTWIN`; a DTWIN request earlier
//! than `NDWIN start + minNDWIN` is refused. Jobs that come due in DTWIN (read-reclaim) wait
//! in the internal job queue; if it overflows the set returns to NDWIN.

use crate::config::DeviceConfig;
use crate::error::{DeviceError, Result};
use crate::flash::Flash;
use crate::plm::{DtwinExit, PlmLogPage, PlmStatus, Window};
use crate::time::{nanos, VirtualTime};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

/// What a request returns: when it was issued and when it completed on the virtual clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Completion {
    pub issued_at: VirtualTime,
    pub done_at: VirtualTime,
    /// Pages the request touched.
    pub pages: u64,
    /// Some page waited for an internal operation (flush, GC, reclaim) on its die.
    pub waited_on_internal: bool,
    /// The request moved the set from DTWIN (or lockdown) back to NDWIN.
    pub ended_dtwin: bool,
}

impl Completion {
    pub(crate) fn instant(at: VirtualTime) -> Self {
        Completion {
            issued_at: at,
            done_at: at,
            pages: 0,
            waited_on_internal: false,
            ended_dtwin: false,
        }
    }

    /// Device time of the request.
    pub fn latency(&self) -> Duration {
        self.done_at.since(self.issued_at)
    }

    /// Combines two completions of one logical request (issued at the earlier time, done at
    /// the later).
    pub fn merge(self, other: Completion) -> Completion {
        Completion {
            issued_at: self.issued_at.min(other.issued_at),
            done_at: self.done_at.max(other.done_at),
            pages: self.pages + other.pages,
            waited_on_internal: self.waited_on_internal || other.waited_on_internal,
            ended_dtwin: self.ended_dtwin || other.ended_dtwin,
        }
    }
}

/// Counters of one set.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SetStats {
    pub host_read_pages: u64,
    pub host_write_pages: u64,
    pub trimmed_pages: u64,
    /// Host page reads served from the DRAM buffer.
    pub buffer_read_hits: u64,
    /// Host page reads served by the flash.
    pub flash_reads: u64,
    /// Pages programmed by the buffer flush.
    pub flush_programs: u64,
    pub gc_jobs: u64,
    pub gc_migrations: u64,
    pub reclaim_jobs: u64,
    pub reclaim_migrations: u64,
    pub erases: u64,
    /// Pages the FTL dropped because a migration found no room (should stay 0).
    pub dropped_pages: u64,
    /// Host page writes that waited for room in the buffer.
    pub buffer_stalls: u64,
    /// Host page reads that waited behind an internal operation.
    pub reads_behind_internal: u64,
    pub reads_in_dtwin: u64,
    pub dtwin_entries: u64,
    pub dtwin_exits_host: u64,
    pub dtwin_exits_write: u64,
    pub dtwin_exits_lockdown_broken: u64,
    pub dtwin_exits_time_limit: u64,
    pub dtwin_exits_queue_full: u64,
    /// DTWIN requests refused because minNDWIN had not elapsed.
    pub dtwin_refused: u64,
    pub lockdown_ns_total: u64,
    pub dtwin_ns_total: u64,
}

impl SetStats {
    /// Flash pages programmed per page the host wrote to flash (flush + GC + reclaim over
    /// flush).
    pub fn write_amplification(&self) -> f64 {
        if self.flush_programs == 0 {
            return 0.0;
        }
        (self.flush_programs + self.gc_migrations + self.reclaim_migrations) as f64
            / self.flush_programs as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Disabled,
    Ndwin { since: u64 },
    Lockdown { since: u64, until: u64 },
    Dtwin { since: u64 },
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Pick a greedy victim and expand into migrations and an erase.
    GcStart,
    /// Read-reclaim `block`: expand into migrations and an erase.
    Reclaim {
        block: usize,
    },
    /// Copy the page at `ppn` (if still valid) to a new page on the same die (copyback).
    Migrate {
        ppn: u64,
        reclaim: bool,
    },
    Erase {
        block: usize,
        gc: bool,
    },
}

#[derive(Clone, Copy, Debug)]
struct Queued {
    op: Op,
    ready: u64,
}

#[derive(Clone, Copy, Debug)]
enum Candidate {
    Internal(usize),
    Flush(usize),
}

/// Service times in nanoseconds.
struct Times {
    read: [u64; 3],
    program: [u64; 3],
    erase: u64,
    xfer: u64,
    host: u64,
}

pub(crate) struct NvmSet {
    id: u32,
    times: Times,
    buffer_pages: usize,
    gc_free_blocks: usize,
    read_reclaim_reads: u64,
    plm: crate::config::PlmConfig,
    pages_per_block: u64,
    logical_pages: u64,
    flash: Flash,
    /// Latest virtual time the set has seen.
    clock: u64,
    state: State,
    /// Buffered pages not yet programmed, in arrival order: seq -> (lpn, ready).
    pending: BTreeMap<u64, (u64, u64)>,
    pending_seq: HashMap<u64, u64>,
    next_seq: u64,
    /// Pages being programmed: lpn -> done; still readable from DRAM until then.
    inflight: HashMap<u64, u64>,
    /// Completion times of programs still holding a buffer slot.
    inflight_done: BinaryHeap<Reverse<u64>>,
    link_busy_until: u64,
    queues: Vec<VecDeque<Queued>>,
    /// GC and reclaim jobs queued and not yet expanded.
    jobs_queued: usize,
    flush_rr: usize,
    dtwin_reads: u64,
    last_exit: Option<DtwinExit>,
    stats: SetStats,
    /// Logical page allocator for the file layer.
    lpn_free: Vec<u64>,
    lpn_next: u64,
}

impl NvmSet {
    pub fn new(id: u32, cfg: &DeviceConfig) -> Self {
        let t = &cfg.timings;
        let flash = Flash::new(&cfg.geometry);
        let dies = flash.num_dies();
        NvmSet {
            id,
            times: Times {
                read: t.read.map(nanos),
                program: t.program.map(nanos),
                erase: nanos(t.erase),
                xfer: nanos(t.channel_xfer),
                host: nanos(t.host_xfer),
            },
            buffer_pages: cfg.buffer_pages as usize,
            gc_free_blocks: cfg.gc_free_blocks as usize,
            read_reclaim_reads: cfg.read_reclaim_reads,
            plm: cfg.plm.clone(),
            pages_per_block: cfg.geometry.pages_per_block as u64,
            logical_pages: cfg.geometry.logical_pages(),
            flash,
            clock: 0,
            state: State::Disabled,
            pending: BTreeMap::new(),
            pending_seq: HashMap::new(),
            next_seq: 0,
            inflight: HashMap::new(),
            inflight_done: BinaryHeap::new(),
            link_busy_until: 0,
            queues: (0..dies).map(|_| VecDeque::new()).collect(),
            jobs_queued: 0,
            flush_rr: 0,
            dtwin_reads: 0,
            last_exit: None,
            stats: SetStats::default(),
            lpn_free: Vec::new(),
            lpn_next: 0,
        }
    }

    pub fn stats(&self) -> SetStats {
        self.stats.clone()
    }

    pub fn free_blocks(&self) -> usize {
        self.flash.total_free_blocks()
    }

    pub fn valid_pages(&self) -> u64 {
        self.flash.valid_pages()
    }

    // ---------------------------------------------------------------- clock and windows

    /// Brings the clock to `at` (never backwards), applies the window changes due by then and
    /// dispatches the internal work that could have started by then.
    fn touch(&mut self, at: VirtualTime) -> u64 {
        let now = self.clock.max(at.as_nanos());
        self.clock = now;
        self.roll_windows(now);
        self.advance(now);
        now
    }

    /// Lockdown -> DTWIN when the drain is over; DTWIN -> NDWIN when maxDTWIN runs out.
    fn roll_windows(&mut self, now: u64) {
        if let State::Lockdown { since, until } = self.state {
            if now >= until {
                self.stats.lockdown_ns_total += until - since;
                self.state = State::Dtwin { since: until };
                self.stats.dtwin_entries += 1;
                self.dtwin_reads = 0;
            }
        }
        if let State::Dtwin { since } = self.state {
            let end = since.saturating_add(nanos(self.plm.max_dtwin));
            if now >= end {
                self.leave_dtwin(end, DtwinExit::TimeLimit);
            }
        }
    }

    fn leave_dtwin(&mut self, at: u64, why: DtwinExit) {
        match self.state {
            State::Dtwin { since } => self.stats.dtwin_ns_total += at.saturating_sub(since),
            State::Lockdown { since, .. } => {
                self.stats.lockdown_ns_total += at.saturating_sub(since)
            }
            _ => return,
        }
        match why {
            DtwinExit::HostRequest => self.stats.dtwin_exits_host += 1,
            DtwinExit::Write => self.stats.dtwin_exits_write += 1,
            DtwinExit::LockdownBroken => self.stats.dtwin_exits_lockdown_broken += 1,
            DtwinExit::TimeLimit => self.stats.dtwin_exits_time_limit += 1,
            DtwinExit::InternalQueueFull => self.stats.dtwin_exits_queue_full += 1,
            DtwinExit::Disabled => {}
        }
        self.last_exit = Some(why);
        self.state = if why == DtwinExit::Disabled {
            State::Disabled
        } else {
            State::Ndwin { since: at }
        };
    }

    /// Earliest instant internal work may start now, or `None` if it is deferred.
    fn floor(&self) -> Option<u64> {
        match self.state {
            State::Disabled => Some(0),
            State::Ndwin { since } => Some(since),
            State::Lockdown { .. } | State::Dtwin { .. } => None,
        }
    }

    pub fn set_plm(&mut self, enabled: bool, at: VirtualTime) {
        let now = self.touch(at);
        match (enabled, self.state) {
            (true, State::Disabled) => self.state = State::Ndwin { since: now },
            (false, State::Dtwin { .. } | State::Lockdown { .. }) => {
                self.leave_dtwin(now, DtwinExit::Disabled)
            }
            (false, State::Ndwin { .. }) => self.state = State::Disabled,
            _ => {}
        }
        self.advance(now);
    }

    pub fn set_window(&mut self, window: Window, at: VirtualTime) -> Result<Completion> {
        let now = self.touch(at);
        let done = |until: u64| Completion {
            done_at: VirtualTime::from_nanos(until),
            ..Completion::instant(at)
        };
        match (window, self.state) {
            (_, State::Disabled) => Err(DeviceError::PlmDisabled { set: self.id }),
            (Window::Ndwin, State::Ndwin { .. }) => Ok(done(now)),
            (Window::Ndwin, State::Dtwin { .. } | State::Lockdown { .. }) => {
                self.leave_dtwin(now, DtwinExit::HostRequest);
                self.advance(now);
                Ok(done(now))
            }
            (Window::Dtwin, State::Dtwin { .. }) => Ok(done(now)),
            (Window::Dtwin, State::Lockdown { until, .. }) => Ok(done(until)),
            (Window::Dtwin, State::Ndwin { since }) => {
                let earliest = since.saturating_add(nanos(self.plm.min_ndwin));
                if now < earliest {
                    self.stats.dtwin_refused += 1;
                    return Err(DeviceError::MinNdwinNotElapsed {
                        set: self.id,
                        since: VirtualTime::from_nanos(since),
                        earliest: VirtualTime::from_nanos(earliest),
                        at: VirtualTime::from_nanos(now),
                    });
                }
                // Lockdown: drain the buffer, then wait for every die and channel to go idle.
                while !self.pending.is_empty() {
                    let Some((start, cand)) = self.next_candidate(since) else {
                        break;
                    };
                    self.dispatch(cand, start);
                }
                let until = self
                    .flash
                    .dies
                    .iter()
                    .map(|d| d.busy_until)
                    .chain(self.flash.channel_busy_until.iter().copied())
                    .fold(now, u64::max);
                self.state = State::Lockdown { since: now, until };
                self.roll_windows(now);
                Ok(done(until))
            }
        }
    }

    // ---------------------------------------------------------------- internal work

    /// Dispatches, in start order, every internal operation that could start by `limit`.
    fn advance(&mut self, limit: u64) {
        while let Some(floor) = self.floor() {
            match self.next_candidate(floor) {
                Some((start, cand)) if start <= limit => self.dispatch(cand, start),
                _ => break,
            }
        }
        while self.inflight_done.peek().is_some_and(|r| r.0 <= limit) {
            self.inflight_done.pop();
        }
        if self.inflight.len() > 4 * self.buffer_pages {
            self.inflight.retain(|_, done| *done > limit);
        }
    }

    /// The internal operation that would start first, and when.
    fn next_candidate(&mut self, floor: u64) -> Option<(u64, Candidate)> {
        let mut best: Option<(u64, u8, Candidate)> = None;
        let mut consider = |s: u64, prio: u8, c: Candidate| {
            if best.is_none_or(|(bs, bp, _)| (s, prio) < (bs, bp)) {
                best = Some((s, prio, c));
            }
        };
        for (die, q) in self.queues.iter().enumerate() {
            if let Some(head) = q.front() {
                let s = head.ready.max(self.flash.dies[die].busy_until).max(floor);
                consider(s, 0, Candidate::Internal(die));
            }
        }
        if let Some((_, &(_, ready))) = self.pending.first_key_value() {
            let n = self.flash.num_dies();
            let mut flush: Option<(u64, usize)> = None;
            for k in 0..n {
                let die = (self.flush_rr + k) % n;
                if !self.flash.can_alloc(die, false) {
                    continue;
                }
                let s = ready.max(self.flash.dies[die].busy_until).max(floor);
                if flush.is_none_or(|(fs, _)| s < fs) {
                    flush = Some((s, die));
                }
            }
            match flush {
                Some((s, die)) => consider(s, 1, Candidate::Flush(die)),
                None => {
                    // No die has room for the buffer: make sure GC is coming everywhere.
                    for die in 0..n {
                        self.queue_gc(die, ready);
                    }
                    if best.is_none() {
                        return self.next_candidate_internal_only(floor);
                    }
                }
            }
        }
        best.map(|(s, _, c)| (s, c))
    }

    fn next_candidate_internal_only(&self, floor: u64) -> Option<(u64, Candidate)> {
        self.queues
            .iter()
            .enumerate()
            .filter_map(|(die, q)| {
                q.front().map(|h| {
                    let s = h.ready.max(self.flash.dies[die].busy_until).max(floor);
                    (s, Candidate::Internal(die))
                })
            })
            .min_by_key(|&(s, _)| s)
    }

    fn queue_gc(&mut self, die: usize, ready: u64) {
        if !self.flash.dies[die].gc_queued && self.flash.gc_victim(die).is_some() {
            self.flash.dies[die].gc_queued = true;
            self.push_job(die, Op::GcStart, ready);
        }
    }

    fn maybe_gc(&mut self, die: usize, ready: u64) {
        if self.flash.free_blocks(die) < self.gc_free_blocks {
            self.queue_gc(die, ready);
        }
    }

    fn push_job(&mut self, die: usize, op: Op, ready: u64) {
        self.queues[die].push_back(Queued { op, ready });
        self.jobs_queued += 1;
        if matches!(self.state, State::Dtwin { .. } | State::Lockdown { .. })
            && self.jobs_queued > self.plm.internal_queue_capacity
        {
            let now = self.clock;
            self.leave_dtwin(now, DtwinExit::InternalQueueFull);
        }
    }

    fn occupy_die(&mut self, die: usize, start: u64, dur: u64) {
        let d = &mut self.flash.dies[die];
        d.busy_until = start + dur;
        d.busy_internal = true;
    }

    fn dispatch(&mut self, cand: Candidate, start: u64) {
        match cand {
            Candidate::Flush(die) => {
                let Some((_, (lpn, _))) = self.pending.pop_first() else {
                    return;
                };
                self.pending_seq.remove(&lpn);
                let Some(ppn) = self.flash.alloc(die, false) else {
                    return;
                };
                let ch = self.flash.channel_of(die);
                let xs = start.max(self.flash.channel_busy_until[ch]);
                self.flash.channel_busy_until[ch] = xs + self.times.xfer;
                let done = xs + self.times.xfer + self.times.program[self.flash.page_type(ppn)];
                self.occupy_die(die, start, done - start);
                self.flash.map(lpn, ppn);
                self.inflight.insert(lpn, done);
                self.inflight_done.push(Reverse(done));
                self.stats.flush_programs += 1;
                self.flush_rr = (die + 1) % self.flash.num_dies();
                self.maybe_gc(die, start);
            }
            Candidate::Internal(die) => {
                let Some(q) = self.queues[die].pop_front() else {
                    return;
                };
                match q.op {
                    Op::GcStart | Op::Reclaim { .. } => {
                        self.jobs_queued -= 1;
                        let (victim, reclaim) = match q.op {
                            Op::Reclaim { block } => (Some(block), true),
                            _ => (self.flash.gc_victim(die), false),
                        };
                        let pages = victim.and_then(|b| self.flash.begin_collect(b));
                        match (victim, pages) {
                            (Some(block), Some(pages)) => {
                                if reclaim {
                                    self.stats.reclaim_jobs += 1;
                                } else {
                                    self.stats.gc_jobs += 1;
                                }
                                let q = &mut self.queues[die];
                                q.push_front(Queued {
                                    op: Op::Erase {
                                        block,
                                        gc: !reclaim,
                                    },
                                    ready: start,
                                });
                                for &ppn in pages.iter().rev() {
                                    q.push_front(Queued {
                                        op: Op::Migrate { ppn, reclaim },
                                        ready: start,
                                    });
                                }
                            }
                            _ if !reclaim => self.flash.dies[die].gc_queued = false,
                            _ => {}
                        }
                    }
                    Op::Migrate { ppn, reclaim } => {
                        let Some(lpn) = self.flash.owner(ppn) else {
                            return;
                        };
                        let Some(dst) = self.flash.alloc(die, true) else {
                            return;
                        };
                        let dur = self.times.read[self.flash.page_type(ppn)]
                            + self.times.program[self.flash.page_type(dst)];
                        self.occupy_die(die, start, dur);
                        self.flash.map(lpn, dst);
                        if reclaim {
                            self.stats.reclaim_migrations += 1;
                        } else {
                            self.stats.gc_migrations += 1;
                        }
                    }
                    Op::Erase { block, gc } => {
                        self.occupy_die(die, start, self.times.erase);
                        self.stats.dropped_pages += self.flash.erase(block);
                        self.stats.erases += 1;
                        if gc {
                            self.flash.dies[die].gc_queued = false;
                        }
                        self.maybe_gc(die, start);
                    }
                }
            }
        }
    }

    /// Waits (on the virtual clock) for a free buffer slot for a page arriving at `t`.
    fn buffer_slot(&mut self, t: u64) -> (u64, bool) {
        let mut t = t;
        let mut stalled = false;
        while self.inflight_done.peek().is_some_and(|r| r.0 <= t) {
            self.inflight_done.pop();
        }
        while self.pending.len() + self.inflight_done.len() >= self.buffer_pages {
            if let Some(Reverse(done)) = self.inflight_done.pop() {
                if done > t {
                    t = done;
                    stalled = true;
                }
                continue;
            }
            // Everything buffered is still queued: start flushing now, whatever the window
            // (writes have already moved the set to NDWIN).
            let floor = self.floor().unwrap_or(self.clock);
            loop {
                match self.next_candidate(floor) {
                    Some((s, c)) => {
                        self.dispatch(c, s);
                        if matches!(c, Candidate::Flush(_)) {
                            break;
                        }
                    }
                    None => return (t, stalled),
                }
            }
        }
        (t, stalled)
    }

    // ---------------------------------------------------------------- host requests

    fn check(&self, lpn: u64) -> Result<()> {
        if lpn >= self.logical_pages {
            return Err(DeviceError::LpnOutOfRange {
                set: self.id,
                lpn,
                pages: self.logical_pages,
            });
        }
        Ok(())
    }

    /// Host-link DMA of pages ready at the given instants; returns the last completion.
    fn host_dma(&mut self, mut ready: Vec<u64>, issue: u64) -> u64 {
        ready.sort_unstable();
        let mut done = issue;
        for r in ready {
            let s = r.max(self.link_busy_until);
            self.link_busy_until = s + self.times.host;
            done = done.max(self.link_busy_until);
        }
        done
    }

    pub fn read(&mut self, lpns: &[u64], at: VirtualTime) -> Result<Completion> {
        for &l in lpns {
            self.check(l)?;
        }
        self.touch(at);
        let issue = at.as_nanos();
        let in_dtwin = matches!(self.state, State::Dtwin { .. });
        let mut waited = false;
        let mut ready = Vec::with_capacity(lpns.len());
        for &lpn in lpns {
            self.stats.host_read_pages += 1;
            if in_dtwin {
                self.stats.reads_in_dtwin += 1;
                self.dtwin_reads += 1;
            }
            let buffered = self.pending_seq.contains_key(&lpn)
                || self.inflight.get(&lpn).is_some_and(|&d| d > issue);
            if buffered {
                self.stats.buffer_read_hits += 1;
                ready.push(issue);
                continue;
            }
            let Some(ppn) = self.flash.lookup(lpn) else {
                ready.push(issue); // never written or trimmed: zeroes from the controller
                continue;
            };
            let die = self.flash.die_of_ppn(ppn);
            let ch = self.flash.channel_of(die);
            let d = &self.flash.dies[die];
            if d.busy_until > issue && d.busy_internal {
                waited = true;
                self.stats.reads_behind_internal += 1;
            }
            let start = issue.max(d.busy_until);
            let sensed = start + self.times.read[self.flash.page_type(ppn)];
            let xs = sensed.max(self.flash.channel_busy_until[ch]);
            let done = xs + self.times.xfer;
            self.flash.channel_busy_until[ch] = done;
            let d = &mut self.flash.dies[die];
            d.busy_until = done;
            d.busy_internal = false;
            self.stats.flash_reads += 1;
            ready.push(done);
            if let Some(block) = self.flash.note_read(ppn, self.read_reclaim_reads) {
                let die = self.flash.die_of_block(block);
                self.push_job(die, Op::Reclaim { block }, issue);
            }
        }
        let done = self.host_dma(ready, issue);
        Ok(Completion {
            issued_at: at,
            done_at: VirtualTime::from_nanos(done),
            pages: lpns.len() as u64,
            waited_on_internal: waited,
            ended_dtwin: false,
        })
    }

    pub fn write(&mut self, lpns: &[u64], at: VirtualTime) -> Result<Completion> {
        for &l in lpns {
            self.check(l)?;
        }
        let now = self.clock.max(at.as_nanos());
        self.clock = now;
        self.roll_windows(now);
        let ended_dtwin = match self.state {
            State::Dtwin { .. } => {
                self.leave_dtwin(now, DtwinExit::Write);
                true
            }
            State::Lockdown { .. } => {
                self.leave_dtwin(now, DtwinExit::LockdownBroken);
                true
            }
            _ => false,
        };
        self.advance(now);
        let issue = at.as_nanos();
        let mut done = issue;
        for &lpn in lpns {
            self.stats.host_write_pages += 1;
            self.inflight.remove(&lpn);
            let coalesced = self.pending_seq.get(&lpn).copied();
            let slot = match coalesced {
                Some(_) => issue,
                None => {
                    let (t, stalled) = self.buffer_slot(issue);
                    if stalled {
                        self.stats.buffer_stalls += 1;
                    }
                    t
                }
            };
            let s = slot.max(self.link_busy_until);
            self.link_busy_until = s + self.times.host;
            let ready = self.link_busy_until;
            done = done.max(ready);
            match coalesced {
                Some(seq) => {
                    if let Some(e) = self.pending.get_mut(&seq) {
                        e.1 = e.1.max(ready);
                    }
                }
                None => {
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    self.pending.insert(seq, (lpn, ready));
                    self.pending_seq.insert(lpn, seq);
                }
            }
        }
        Ok(Completion {
            issued_at: at,
            done_at: VirtualTime::from_nanos(done),
            pages: lpns.len() as u64,
            waited_on_internal: false,
            ended_dtwin,
        })
    }

    /// Forgets pages (dataset management deallocate). A mapping update in controller memory:
    /// it does not end DTWIN.
    pub fn trim(&mut self, lpns: &[u64], at: VirtualTime) -> Result<Completion> {
        for &l in lpns {
            self.check(l)?;
        }
        self.touch(at);
        for &lpn in lpns {
            if let Some(seq) = self.pending_seq.remove(&lpn) {
                self.pending.remove(&seq);
            }
            self.inflight.remove(&lpn);
            self.flash.unmap(lpn);
            self.stats.trimmed_pages += 1;
        }
        Ok(Completion {
            pages: lpns.len() as u64,
            ..Completion::instant(at)
        })
    }

    /// Lets virtual time pass to `at` with no request: internal work due by then runs.
    pub fn settle(&mut self, at: VirtualTime) {
        self.touch(at);
    }

    /// Maps pages directly, with no timing (used when reopening backing files).
    pub fn place(&mut self, lpns: &[u64]) {
        let n = self.flash.num_dies();
        for &lpn in lpns {
            for k in 0..n {
                let die = (self.flush_rr + k) % n;
                if let Some(ppn) = self.flash.alloc(die, false) {
                    self.flash.map(lpn, ppn);
                    self.flush_rr = (die + 1) % n;
                    break;
                }
            }
        }
    }

    // ---------------------------------------------------------------- log page

    fn internal_backlog_ns(&self) -> u64 {
        let avg_read = self.times.read.iter().sum::<u64>() / 3;
        let avg_prog = self.times.program.iter().sum::<u64>() / 3;
        let copy = avg_read + avg_prog;
        let per_die = self.queues.iter().map(|q| {
            q.iter()
                .map(|e| match e.op {
                    Op::GcStart => self.pages_per_block / 2 * copy + self.times.erase,
                    Op::Reclaim { .. } => self.pages_per_block * copy + self.times.erase,
                    Op::Migrate { .. } => copy,
                    Op::Erase { .. } => self.times.erase,
                })
                .sum::<u64>()
        });
        per_die.max().unwrap_or(0) + self.drain_estimate_ns()
    }

    fn drain_estimate_ns(&self) -> u64 {
        let avg_prog = self.times.program.iter().sum::<u64>() / 3;
        let dies = self.flash.num_dies() as u64;
        (self.pending.len() as u64).div_ceil(dies) * (avg_prog + self.times.xfer)
    }

    pub fn log_page(&mut self, at: VirtualTime) -> PlmLogPage {
        let now = self.touch(at);
        let max = self.plm.max_dtwin;
        let (status, since, in_lockdown, begins) = match self.state {
            State::Disabled => (PlmStatus::Disabled, 0, false, None),
            State::Ndwin { since } => (PlmStatus::NonDeterministic, since, false, None),
            State::Lockdown { since, until } => {
                (PlmStatus::NonDeterministic, since, true, Some(until))
            }
            State::Dtwin { since } => (PlmStatus::Deterministic, since, false, Some(since)),
        };
        let (reads_est, time_est) = match self.state {
            State::Dtwin { since } => (
                self.plm
                    .dtwin_reads_typical
                    .saturating_sub(self.dtwin_reads),
                max.saturating_sub(Duration::from_nanos(now - since)),
            ),
            _ => (self.plm.dtwin_reads_typical, max),
        };
        let min_ndwin = self.plm.min_ndwin;
        PlmLogPage {
            set: self.id,
            at: VirtualTime::from_nanos(now),
            status,
            in_lockdown,
            window_since: VirtualTime::from_nanos(since),
            dtwin_begins_at: begins.map(VirtualTime::from_nanos),
            dtwin_reads_typical: self.plm.dtwin_reads_typical,
            dtwin_writes_typical: self.plm.dtwin_writes_typical,
            dtwin_time_max: max,
            ndwin_time_min_low: min_ndwin,
            ndwin_time_min_high: min_ndwin.max(Duration::from_nanos(self.internal_backlog_ns())),
            dtwin_reads_estimate: reads_est,
            dtwin_writes_estimate: self.plm.dtwin_writes_typical,
            dtwin_time_estimate: time_est,
            dtwin_allowed_from: match self.state {
                State::Ndwin { since } => Some(VirtualTime::from_nanos(since) + min_ndwin),
                _ => None,
            },
            lockdown_estimate: Duration::from_nanos(self.drain_estimate_ns()),
            buffered_pages: self.pending.len(),
            internal_jobs_pending: self.queues.iter().map(|q| q.len()).sum(),
            last_exit: self.last_exit,
        }
    }

    // ---------------------------------------------------------------- logical pages

    pub fn alloc_lpn(&mut self) -> Option<u64> {
        if let Some(l) = self.lpn_free.pop() {
            return Some(l);
        }
        if self.lpn_next < self.logical_pages {
            self.lpn_next += 1;
            return Some(self.lpn_next - 1);
        }
        None
    }

    pub fn free_lpn(&mut self, lpn: u64) {
        self.lpn_free.push(lpn);
    }
}
