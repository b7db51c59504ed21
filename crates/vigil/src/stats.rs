//! What the volume measures: reads served directly or reconstructed, the write cache over
//! time, window changes, forced writes and write throughput per time bucket.

use serde::Serialize;

/// A kv-set's window as the driver sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum View {
    Off,
    Ndwin,
    Lockdown,
    Dtwin,
}

/// Width of a throughput bucket in virtual time.
pub const BUCKET_NS: u64 = 100_000_000;

/// A window change of a kv-set (driver view), for Fig. 12-like plots.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct WindowEvent {
    pub at_ns: u64,
    pub slot: u32,
    pub view: View,
}

/// The mutable counters, kept under the volume's control lock.
#[derive(Default)]
pub(crate) struct Recorder {
    pub windows: Vec<WindowEvent>,
    pub cache_samples: Vec<(u64, u64)>,
    pub last_sample: Option<u64>,
    pub written_per_bucket: Vec<u64>,
    pub extensions: u64,
    pub forced_writes: u64,
    pub forced_bytes: u64,
    pub writer_waits: u64,
    pub dtwin_broken: u64,
    pub drained_bytes: u64,
    pub invariant_checks: u64,
    pub invariant_violations: u64,
    pub repairs: u64,
}

impl Recorder {
    pub fn window(&mut self, at_ns: u64, slot: u32, view: View) {
        self.windows.push(WindowEvent { at_ns, slot, view });
    }

    /// Bytes whose page programs were issued to a kv-set at `at`.
    pub fn programmed(&mut self, at: u64, bytes: u64) {
        let b = (at / BUCKET_NS) as usize;
        if self.written_per_bucket.len() <= b {
            self.written_per_bucket.resize(b + 1, 0);
        }
        self.written_per_bucket[b] += bytes;
    }
}

/// A copy of everything the volume measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VolumeStats {
    pub mode: String,
    /// Client-read pieces (one chunk each) served by the set that holds them.
    pub client_pieces_direct: u64,
    /// Client-read pieces rebuilt from the other sets and the parity.
    pub client_pieces_reconstructed: u64,
    /// Current and highest bytes in the write cache, and its limit.
    pub cache_bytes: u64,
    pub cache_peak: u64,
    pub cache_limit: u64,
    /// (virtual ns, bytes) samples of the write cache.
    pub cache_samples: Vec<(u64, u64)>,
    pub windows: Vec<WindowEvent>,
    /// Bytes programmed to the kv-sets per [`BUCKET_NS`] of virtual time.
    pub written_per_bucket: Vec<u64>,
    pub ndwin_extensions: u64,
    /// Bytes the write cache handed to their NDWIN set.
    pub drained_bytes: u64,
    /// Cached writes pushed to a set outside its NDWIN because the cache was full.
    pub forced_writes: u64,
    pub forced_bytes: u64,
    /// Times an internal writer waited for room in the write cache (O-Vigil).
    pub writer_waits: u64,
    /// Writes that ended a DTWIN on the device.
    pub dtwin_broken_by_writes: u64,
    /// Invariant samples (n-1 kv-sets in DTWIN on the device) and how many failed.
    pub invariant_checks: u64,
    pub invariant_violations: u64,
    /// Sets devd found out of DTWIN out of turn (the device ended it) and sent back.
    pub repairs: u64,
    /// Why DTWINs ended, per kv-set, as the device counted them.
    pub dtwin_exits: Vec<DtwinExits>,
}

/// The device's DTWIN exit counters of one kv-set.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DtwinExits {
    pub host: u64,
    pub write: u64,
    pub lockdown_broken: u64,
    pub time_limit: u64,
    pub queue_full: u64,
    pub reads_behind_internal: u64,
}

impl VolumeStats {
    /// Bytes that left the write cache (drained in NDWIN or forced out).
    pub fn drained_or_forced(&self) -> u64 {
        self.drained_bytes + self.forced_bytes
    }

    pub fn reconstructed_fraction(&self) -> f64 {
        let all = self.client_pieces_direct + self.client_pieces_reconstructed;
        if all == 0 {
            0.0
        } else {
            self.client_pieces_reconstructed as f64 / all as f64
        }
    }
}
