//! Vigil-KV's software layer (paper 001, USENIX ATC 2022) for the halflife engine: an
//! [`engine::io::Storage`] over the emulated predictable-latency device (`halflife-device`).
//!
//! - [`layout`]: table and value files striped in chunks over n kv-sets with a rotating
//!   parity chunk per stripe;
//! - [`volume`]: metadata separation (WAL, manifest, CURRENT on a meta-set with PLM off),
//!   the request scheduler (internal writes only to the NDWIN set, through the write cache;
//!   client reads of the NDWIN set reconstructed from the others and the parity);
//! - `sched`: the device-state scheduler (n-1 kv-sets in DTWIN, NDWIN round-robin,
//!   maxDTWIN / minNDWIN / lockdown honoured, dynamic NDWIN) and the simple PLM driver;
//! - [`context`]: per-thread virtual time, so a client call learns its device time;
//! - [`config`]: the six configurations of sec. 7.1 (Base, SILK, PLM, I-PLM, R-Vigil,
//!   O-Vigil) and the volume's knobs.
//!
//! See `docs/vigil.md` for the design, its simplifications and the measured results.

mod cache;
pub mod config;
pub mod context;
pub mod layout;
mod sched;
pub mod stats;
pub mod volume;

pub use config::{Mode, VolumeConfig};
pub use context::{begin_client_op, end_client_op, OpTimes};
pub use stats::View;
pub use stats::VolumeStats;
pub use volume::VigilVolume;
