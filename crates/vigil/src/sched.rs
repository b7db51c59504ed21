//! devd: the device-state scheduler (paper 001 sec. 6.2), and the simple PLM driver of the
//! PLM and I-PLM configurations.
//!
//! Vigil scheduling keeps exactly one kv-set out of DTWIN at a time. That set is in NDWIN
//! for at least minNDWIN (the device refuses an earlier DTWIN), then asks for DTWIN, which
//! first drains the set's buffer (lockdown); when DTWIN begins, the next set round-robin
//! enters NDWIN (fair scheduling). The other n-1 sets stay in DTWIN, whose length is bounded
//! by maxDTWIN: a lengthened NDWIN never lets any other set's DTWIN run past maxDTWIN less a
//! margin for the lockdowns still to come in the rotation.
//!
//! Dynamic NDWIN (O-Vigil, Fig. 10): an NDWIN starts at minNDWIN; when it is due to end
//! while the write cache holds more than the threshold and the NDWIN set still has
//! buffered writes, it is lengthened by one step, again and again, until the backlog drains
//! or the maxDTWIN bound stops it. R-Vigil keeps every NDWIN at minNDWIN.
//!
//! The simple driver (PLM, I-PLM) polls each set's log page and asks for DTWIN as soon as
//! minNDWIN allows; writes then end DTWIN whenever they come.

use crate::cache::WriteCache;
use crate::config::{Mode, VolumeConfig};
use crate::stats::{Recorder, View};
use device::{Device, PlmStatus, VirtualTime, Window};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// PLM off (Base, SILK) or the simple driver (PLM, I-PLM).
    Unscheduled,
    /// Every set entered NDWIN at PLM enable; DTWIN is allowed from `until`.
    Boot {
        until: u64,
    },
    /// The other sets drain their buffers before their first DTWIN.
    BootLockdown {
        until: u64,
    },
    Ndwin {
        slot: usize,
        end: u64,
    },
    Lockdown {
        slot: usize,
        until: u64,
    },
}

pub(crate) struct Sched {
    mode: Mode,
    slots: usize,
    min_ndwin: u64,
    max_dtwin: u64,
    step: u64,
    guard: u64,
    threshold: u64,
    limit: u64,
    poll: u64,
    /// Time one more chunk adds to a buffer drain (its pages programmed one per die).
    chunk_drain: u64,
    phase: Phase,
    view: Vec<View>,
    dtwin_since: Vec<u64>,
    write_cursor: Vec<u64>,
    last_poll: Option<u64>,
}

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Sched {
    /// Sets the kv-sets' PLM state for `cfg.mode`, starting at `at`.
    pub fn new(cfg: &VolumeConfig, dev: &Device, at: u64) -> device::Result<Sched> {
        let slots = cfg.kv_sets as usize;
        let plm = &dev.config().plm;
        let t = VirtualTime::from_nanos(at);
        for k in 0..cfg.kv_sets {
            dev.set_plm(k, cfg.mode.plm(), t)?;
        }
        if cfg.mode.meta_isolated() {
            dev.set_plm(cfg.meta_set(), false, t)?;
        }
        let min_ndwin = ns(plm.min_ndwin);
        let phase = if cfg.mode.scheduled() {
            Phase::Boot {
                until: at + min_ndwin,
            }
        } else {
            Phase::Unscheduled
        };
        let initial = if cfg.mode.plm() {
            View::Ndwin
        } else {
            View::Off
        };
        Ok(Sched {
            mode: cfg.mode,
            slots,
            min_ndwin,
            max_dtwin: ns(plm.max_dtwin),
            step: ns(cfg.extend_step).max(1),
            guard: ns(cfg.lockdown_estimate),
            threshold: (cfg.cache_limit as f64 * cfg.extend_threshold) as u64,
            limit: cfg.cache_limit,
            poll: ns(cfg.poll_interval).max(1),
            chunk_drain: {
                let g = &dev.config().geometry;
                let pages = cfg.chunk_size.div_ceil(g.page_size as u64);
                let per_die = pages.div_ceil(g.dies() as u64);
                let slowest = dev
                    .config()
                    .timings
                    .program
                    .iter()
                    .max()
                    .copied()
                    .unwrap_or_default();
                per_die * ns(slowest)
            },
            phase,
            view: vec![initial; slots],
            dtwin_since: vec![0; slots],
            write_cursor: vec![at; slots],
            last_poll: None,
        })
    }

    /// The kv-set whose client reads must be reconstructed (the one not in DTWIN).
    pub fn reconstruct_slot(&self) -> Option<usize> {
        match self.phase {
            Phase::Unscheduled => None,
            Phase::Boot { .. } | Phase::BootLockdown { .. } => Some(0),
            Phase::Ndwin { slot, .. } | Phase::Lockdown { slot, .. } => Some(slot),
        }
    }

    /// Whether an internal write may be issued to `slot` now (Vigil: only its NDWIN).
    pub fn writable(&self, slot: usize, now: u64) -> bool {
        match self.phase {
            Phase::Unscheduled => true,
            Phase::Boot { until } => now < until,
            Phase::BootLockdown { .. } => slot == 0,
            Phase::Ndwin { slot: s, end } => s == slot && now < end,
            Phase::Lockdown { .. } => false,
        }
    }

    fn set_view(&mut self, rec: &mut Recorder, slot: usize, v: View, at: u64) {
        if self.view[slot] != v {
            self.view[slot] = v;
            rec.window(at, slot as u32, v);
        }
    }

    /// Brings the windows up to `now` and drains the write cache into the NDWIN set.
    pub fn tick(
        &mut self,
        now: u64,
        dev: &Device,
        cache: &mut WriteCache,
        rec: &mut Recorder,
    ) -> device::Result<()> {
        match self.mode {
            Mode::Base | Mode::Silk => return Ok(()),
            Mode::Plm | Mode::IPlm => return self.simple_driver(now, dev, rec),
            Mode::RVigil | Mode::OVigil => {}
        }
        loop {
            match self.phase {
                Phase::Unscheduled => break,
                Phase::Boot { until } => {
                    if now < until {
                        break;
                    }
                    let t = VirtualTime::from_nanos(until);
                    let mut last = until;
                    for k in 1..self.slots {
                        let c = dev.set_window(k as u32, Window::Dtwin, t)?;
                        let begin = c.done_at.as_nanos();
                        self.dtwin_since[k] = begin;
                        self.set_view(rec, k, View::Lockdown, until);
                        last = last.max(begin);
                    }
                    self.phase = Phase::BootLockdown { until: last };
                }
                Phase::BootLockdown { until } => {
                    if now < until {
                        break;
                    }
                    for k in 1..self.slots {
                        let since = self.dtwin_since[k];
                        self.set_view(rec, k, View::Dtwin, since);
                    }
                    self.phase = Phase::Ndwin {
                        slot: 0,
                        end: until + self.min_ndwin,
                    };
                }
                Phase::Ndwin { slot, end } => {
                    if now < end {
                        break;
                    }
                    if self.should_extend(slot, end, cache) {
                        self.phase = Phase::Ndwin {
                            slot,
                            end: end + self.step,
                        };
                        rec.extensions += 1;
                        continue;
                    }
                    let c = match dev.set_window(
                        slot as u32,
                        Window::Dtwin,
                        VirtualTime::from_nanos(end),
                    ) {
                        Ok(c) => c,
                        // The set left DTWIN on its own during its last turn (maxDTWIN, a
                        // full internal queue) and its NDWIN started later than devd
                        // thought: wait out minNDWIN.
                        Err(device::DeviceError::MinNdwinNotElapsed { earliest, .. }) => {
                            self.phase = Phase::Ndwin {
                                slot,
                                end: earliest.as_nanos(),
                            };
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    self.set_view(rec, slot, View::Lockdown, end);
                    self.phase = Phase::Lockdown {
                        slot,
                        until: c.done_at.as_nanos(),
                    };
                }
                Phase::Lockdown { slot, until } => {
                    if now < until {
                        break;
                    }
                    self.dtwin_since[slot] = until;
                    self.set_view(rec, slot, View::Dtwin, until);
                    let next = (slot + 1) % self.slots;
                    dev.set_window(next as u32, Window::Ndwin, VirtualTime::from_nanos(until))?;
                    self.set_view(rec, next, View::Ndwin, until);
                    self.write_cursor[next] = self.write_cursor[next].max(until);
                    self.phase = Phase::Ndwin {
                        slot: next,
                        end: until + self.min_ndwin,
                    };
                }
            }
        }
        self.drain(now, dev, cache, rec)
    }

    /// O-Vigil's decision at the planned end of an NDWIN.
    fn should_extend(&self, slot: usize, end: u64, cache: &WriteCache) -> bool {
        if !self.mode.dynamic_ndwin() || cache.bytes(slot) == 0 || cache.total() <= self.threshold {
            return false;
        }
        // Every other set is in DTWIN and waits for its turn: the one furthest down the
        // rotation must still fit its wait within maxDTWIN.
        let new_end = end + self.step;
        (1..self.slots).all(|d| {
            let k = (slot + d) % self.slots;
            let rotation = (d as u64 - 1) * (self.min_ndwin + self.guard) + self.guard;
            new_end + rotation < self.dtwin_since[k] + self.max_dtwin
        })
    }

    /// Issues cached writes of the NDWIN set while the set keeps up (its last write has
    /// completed by `now`), so the cache drains at the set's write bandwidth.
    fn drain(
        &mut self,
        now: u64,
        dev: &Device,
        cache: &mut WriteCache,
        rec: &mut Recorder,
    ) -> device::Result<()> {
        for slot in 0..self.slots {
            if !self.writable(slot, now) {
                continue;
            }
            let end = match self.phase {
                Phase::Ndwin { end, .. } => end,
                Phase::Boot { until } => until,
                _ => u64::MAX,
            };
            while cache.bytes(slot) > 0 && self.write_cursor[slot] <= now {
                // UND (sec. 6.2): issue no write whose buffered pages could not drain before
                // the NDWIN ends, so the lockdown that follows stays short and the next
                // set's turn (and every DTWIN's maxDTWIN) is kept.
                let lp = dev.log_page(slot as u32, VirtualTime::from_nanos(now))?;
                let drain = u64::try_from(lp.lockdown_estimate.as_nanos()).unwrap_or(u64::MAX);
                if now.saturating_add(drain).saturating_add(self.chunk_drain) >= end {
                    break;
                }
                let Some(e) = cache.pop(slot) else { break };
                let at = now.max(self.write_cursor[slot]);
                match e.file.program(e.offset, e.len, VirtualTime::from_nanos(at)) {
                    Ok(c) => {
                        self.write_cursor[slot] = c.done_at.as_nanos();
                        rec.programmed(at, e.len);
                        rec.drained_bytes += e.len;
                    }
                    Err(device::DeviceError::FileRemoved { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Writes the oldest cached chunks straight to their sets until the cache fits its
    /// limit again (an NDWIN overflow: these writes may end a DTWIN).
    pub fn enforce_limit(
        &mut self,
        now: u64,
        cache: &mut WriteCache,
        rec: &mut Recorder,
    ) -> device::Result<()> {
        while cache.total() > self.limit {
            let Some(slot) = cache.oldest_slot() else {
                break;
            };
            let Some(e) = cache.pop(slot) else { break };
            let at = now.max(self.write_cursor[slot]);
            match e.file.program(e.offset, e.len, VirtualTime::from_nanos(at)) {
                Ok(c) => {
                    self.write_cursor[slot] = c.done_at.as_nanos();
                    rec.programmed(at, e.len);
                    if !self.writable(slot, now) {
                        rec.forced_writes += 1;
                        rec.forced_bytes += e.len;
                    }
                    if c.ended_dtwin {
                        rec.dtwin_broken += 1;
                    }
                }
                Err(device::DeviceError::FileRemoved { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// PLM/I-PLM: ask for DTWIN on every kv-set whose minNDWIN has passed.
    fn simple_driver(&mut self, now: u64, dev: &Device, rec: &mut Recorder) -> device::Result<()> {
        if self.last_poll.is_some_and(|t| now < t + self.poll) {
            return Ok(());
        }
        self.last_poll = Some(now);
        let t = VirtualTime::from_nanos(now);
        for k in 0..self.slots {
            let lp = dev.log_page(k as u32, t)?;
            let v = match (lp.status, lp.in_lockdown) {
                (PlmStatus::Disabled, _) => View::Off,
                (PlmStatus::Deterministic, _) => View::Dtwin,
                (PlmStatus::NonDeterministic, true) => View::Lockdown,
                (PlmStatus::NonDeterministic, false) => View::Ndwin,
            };
            self.set_view(rec, k, v, now);
            if v == View::Ndwin && lp.dtwin_allowed_from.is_some_and(|a| a <= t) {
                dev.set_window(k as u32, Window::Dtwin, t)?;
                self.set_view(rec, k, View::Lockdown, now);
            }
        }
        Ok(())
    }

    /// Puts back into DTWIN any set other than the NDWIN one that the device took out of
    /// it by itself (maxDTWIN ran out, the internal queue filled up), as soon as minNDWIN
    /// allows. Returns how many sets were found out of place.
    pub fn repair(&mut self, now: u64, dev: &Device, rec: &mut Recorder) -> device::Result<usize> {
        let Some(cur) = self.reconstruct_slot() else {
            return Ok(0);
        };
        if !self.steady() {
            return Ok(0);
        }
        let t = VirtualTime::from_nanos(now);
        let mut out = 0;
        for k in (0..self.slots).filter(|&k| k != cur) {
            let lp = dev.log_page(k as u32, t)?;
            if lp.status == PlmStatus::Deterministic || lp.in_lockdown {
                continue;
            }
            out += 1;
            rec.repairs += 1;
            if lp.dtwin_allowed_from.is_some_and(|a| a <= t) {
                let c = dev.set_window(k as u32, Window::Dtwin, t)?;
                self.dtwin_since[k] = c.done_at.as_nanos();
            }
        }
        Ok(out)
    }

    /// Sets in DTWIN according to the device itself (for invariant checks).
    pub fn device_dtwin_count(&self, dev: &Device, now: u64) -> device::Result<usize> {
        let t = VirtualTime::from_nanos(now);
        let mut n = 0;
        for k in 0..self.slots {
            if dev.log_page(k as u32, t)?.status == PlmStatus::Deterministic {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Whether the scheduler is past its boot phase (the n-1 invariant applies).
    pub fn steady(&self) -> bool {
        matches!(self.phase, Phase::Ndwin { .. } | Phase::Lockdown { .. })
    }
}
