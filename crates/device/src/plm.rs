//! Predictable latency mode (PLM) types: the windows a set can be in, why a DTWIN ended, and
//! the per-set log page.
//!
//! NVMe names (nvme-cli / libnvme): Set Features FID 0x13 "Predictable Latency Mode Config"
//! enables PLM on a set ([`crate::Device::set_plm`]); FID 0x14 "Predictable Latency Mode
//! Window" selects the window ([`crate::Device::set_window`], 1 = DTWIN, 2 = NDWIN); log page
//! 0x0a "Predictable Latency Per NVM Set" reports status, limits and estimates
//! ([`crate::Device::log_page`] returns a [`PlmLogPage`]). Paper 001 calls these
//! `PLMConfig()`, `PLMWindow()` and `GetLogPage()` (Table 1).

use crate::time::VirtualTime;
use std::time::Duration;

/// A window the host can ask for with [`crate::Device::set_window`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Window {
    /// Deterministic window: no internal task runs; reads see only flash read times.
    Dtwin,
    /// Non-deterministic window: buffer flush, GC and read-reclaim run.
    Ndwin,
}

/// The status byte of log page 0x0a.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum PlmStatus {
    /// 0: predictable latency mode is off; internal tasks run whenever they are due.
    Disabled = 0,
    /// 1: in DTWIN.
    Deterministic = 1,
    /// 2: in NDWIN (also while the buffer drains before a DTWIN, see `in_lockdown`).
    NonDeterministic = 2,
}

/// Why a set left DTWIN (or a pending DTWIN).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum DtwinExit {
    /// The host asked for NDWIN.
    HostRequest,
    /// A write arrived (paper 001's write-free condition was broken).
    Write,
    /// A write arrived while the buffer was draining before DTWIN (lockdown broken).
    LockdownBroken,
    /// maxDTWIN ran out.
    TimeLimit,
    /// The internal job queue could not hold one more deferred job.
    InternalQueueFull,
    /// PLM was disabled.
    Disabled,
}

/// Log page 0x0a "Predictable Latency Per NVM Set", plus two fields paper 001 adds (the
/// lockdown estimate and the internal backlog) and the reason of the last DTWIN exit.
///
/// Counts are in pages of the set's page size (NVMe counts 4 KiB units); times are
/// [`Duration`]s (NVMe uses milliseconds).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PlmLogPage {
    pub set: u32,
    /// When the page was taken.
    pub at: VirtualTime,
    pub status: PlmStatus,
    /// A DTWIN was requested and the buffer is still draining; DTWIN begins at
    /// `window_since` + lockdown (see `dtwin_begins_at`).
    pub in_lockdown: bool,
    /// When the current window (or lockdown) began.
    pub window_since: VirtualTime,
    /// When a requested DTWIN begins (the end of the lockdown), if one is pending or current.
    pub dtwin_begins_at: Option<VirtualTime>,
    /// DTWIN Reads Typical.
    pub dtwin_reads_typical: u64,
    /// DTWIN Writes Typical (zero: any write ends DTWIN).
    pub dtwin_writes_typical: u64,
    /// DTWIN Time Maximum (maxDTWIN).
    pub dtwin_time_max: Duration,
    /// NDWIN Time Minimum Low (minNDWIN, the configured floor).
    pub ndwin_time_min_low: Duration,
    /// NDWIN Time Minimum High: the time the queued internal work needs, if longer.
    pub ndwin_time_min_high: Duration,
    /// DTWIN Reads Estimate: reads left in this DTWIN (or in the next one).
    pub dtwin_reads_estimate: u64,
    /// DTWIN Writes Estimate.
    pub dtwin_writes_estimate: u64,
    /// DTWIN Time Estimate: time left in this DTWIN (or the length of the next one).
    pub dtwin_time_estimate: Duration,
    /// Earliest time a DTWIN request is accepted (minNDWIN honoured), when in NDWIN.
    pub dtwin_allowed_from: Option<VirtualTime>,
    /// Time a DTWIN request made now would spend draining the buffer (device lockdown).
    pub lockdown_estimate: Duration,
    /// Pages waiting in the write buffer.
    pub buffered_pages: usize,
    /// Internal jobs (GC, read-reclaim) queued and not finished.
    pub internal_jobs_pending: usize,
    pub last_exit: Option<DtwinExit>,
}
