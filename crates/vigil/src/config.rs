//! The configurations of paper 001 sec. 7.1 and the knobs of the volume.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// One of the six hardware/software combinations the paper compares (sec. 7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Mode {
    /// PLM off; every file, the WAL included, on the striped kv-sets (md-like volume).
    Base,
    /// Base plus SILK-like I/O scheduling: internal writes throttled (flushes ahead of
    /// compactions), so they spread out instead of arriving in bursts.
    Silk,
    /// PLM on the kv-sets with a simple driver that asks every set for DTWIN whenever
    /// minNDWIN allows; no isolation, no request scheduling.
    Plm,
    /// PLM plus metadata isolation: WAL, manifest and CURRENT on a meta-set with PLM off.
    IPlm,
    /// I-PLM plus device-state scheduling (n-1 kv-sets in DTWIN, NDWIN round-robin) and
    /// request scheduling (internal writes only to the NDWIN set through the write cache,
    /// client reads of the NDWIN set reconstructed), with a fixed NDWIN of minNDWIN.
    RVigil,
    /// R-Vigil plus dynamic NDWIN: an NDWIN is lengthened while buffered internal writes
    /// exceed a threshold tied to the write-cache limit (sec. 6.2, Fig. 10).
    OVigil,
}

impl Mode {
    pub const ALL: [Mode; 6] = [
        Mode::Base,
        Mode::Silk,
        Mode::Plm,
        Mode::IPlm,
        Mode::RVigil,
        Mode::OVigil,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Base => "base",
            Mode::Silk => "silk",
            Mode::Plm => "plm",
            Mode::IPlm => "i-plm",
            Mode::RVigil => "r-vigil",
            Mode::OVigil => "o-vigil",
        }
    }

    /// WAL, manifest and CURRENT live on a dedicated meta-set with PLM off.
    pub fn meta_isolated(self) -> bool {
        matches!(self, Mode::IPlm | Mode::RVigil | Mode::OVigil)
    }

    /// The kv-sets run predictable latency mode.
    pub fn plm(self) -> bool {
        !matches!(self, Mode::Base | Mode::Silk)
    }

    /// devd/reqd: n-1 sets in DTWIN, internal writes through the write cache, reads of the
    /// NDWIN set reconstructed.
    pub fn scheduled(self) -> bool {
        matches!(self, Mode::RVigil | Mode::OVigil)
    }

    pub fn dynamic_ndwin(self) -> bool {
        self == Mode::OVigil
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown configuration {0:?} (expected base, silk, plm, i-plm, r-vigil or o-vigil)")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownMode(s.to_string()))
    }
}

/// Everything the volume needs besides the device.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VolumeConfig {
    pub mode: Mode,
    /// Number of kv-sets a stripe spans (n): n-1 data chunks and one parity chunk.
    /// They are device sets `0..kv_sets`.
    pub kv_sets: u32,
    /// Bytes per chunk; a multiple of the device page size.
    pub chunk_size: u64,
    /// Memory limit of the write cache (paper 001's plm_cache).
    pub cache_limit: u64,
    /// Dynamic NDWIN: lengthen the current NDWIN while the cache holds more than this
    /// fraction of its limit (and the NDWIN set still has buffered writes).
    pub extend_threshold: f64,
    /// How much one lengthening adds (the paper's devd "maximizes" NDWIN; here it adds
    /// steps until the backlog is gone or maxDTWIN of another set would be at risk).
    pub extend_step: Duration,
    /// Margin kept below maxDTWIN when lengthening (covers lockdowns of the rotation).
    pub lockdown_estimate: Duration,
    /// SILK-like throttle: bandwidth given to flush writes and to compaction/GC writes.
    pub silk_flush_rate: u64,
    pub silk_compaction_rate: u64,
    /// How often the simple PLM driver polls log pages, and how often the volume samples
    /// the cache and the window states.
    pub poll_interval: Duration,
    /// How far (virtual time) a background thread's requests may run ahead of the clock
    /// before it waits for the clients, and how long (real time) it waits for a clock that
    /// does not move (or for a client call that does not end: a write stall waiting for
    /// this very thread) before moving the clock itself. Generous, because a client thread
    /// preempted on a loaded machine must not look stalled.
    pub pace_slack: Duration,
    pub pace_stall: Duration,
}

impl VolumeConfig {
    pub fn new(mode: Mode) -> Self {
        VolumeConfig {
            mode,
            kv_sets: 3,
            chunk_size: 16 << 10,
            cache_limit: 64 << 20,
            extend_threshold: 0.25,
            extend_step: Duration::from_millis(50),
            lockdown_estimate: Duration::from_millis(100),
            silk_flush_rate: 60 << 20,
            silk_compaction_rate: 20 << 20,
            poll_interval: Duration::from_millis(5),
            pace_slack: Duration::from_millis(1),
            pace_stall: Duration::from_millis(100),
        }
    }

    /// The set holding WAL, manifest and CURRENT when metadata is isolated.
    pub fn meta_set(&self) -> u32 {
        self.kv_sets
    }
}
