//! An emulated NVMe SSD with NVM sets and predictable latency mode (paper 001, Vigil-KV).
//!
//! The device is split into NVM sets, each with its own channels, dies, DRAM write buffer
//! and internal job queue, so that one set's work never delays another's (paper 001, sec.
//! 5.1). Inside a set, host pages go through the write buffer, which the firmware flushes to
//! flash in the background; a page-level FTL places them; greedy GC runs on a die when its
//! free blocks run low; a block read too often is read-reclaimed. All of it runs on a
//! virtual clock ([`VirtualTime`]): the caller says when a request is issued and gets back
//! when it completes ([`Completion`]), deterministically.
//!
//! Each set implements predictable latency mode ([`Device::set_plm`],
//! [`Device::set_window`], [`Device::log_page`]): in DTWIN no internal task runs, so reads
//! see only flash read times; a write in DTWIN returns the set to NDWIN; a DTWIN request
//! drains the buffer first (lockdown); maxDTWIN bounds a DTWIN and minNDWIN bounds an NDWIN.
//!
//! Two interfaces:
//! - page level: [`Device::read`], [`Device::write`], [`Device::trim`] on logical pages of a
//!   set (timing only);
//! - file level: [`Device::create_file`] and [`DeviceFile`] (append, sync, read_at,
//!   truncate), whose bytes live in real files under the backing directory, so that an
//!   engine on top stays correct while it is charged device time.
//!
//! [`parity`] has the XOR helpers for reconstructing a chunk from the other sets.
//!
//! See `docs/device.md` for the model, its numbers and their sources.

mod config;
mod device;
mod error;
mod flash;
pub mod parity;
mod plm;
mod set;
mod time;

pub use config::{DeviceConfig, FlashTimings, Geometry, PlmConfig};
pub use device::files::DeviceFile;
pub use device::{Device, SetId};
pub use error::{DeviceError, Result};
pub use plm::{DtwinExit, PlmLogPage, PlmStatus, Window};
pub use set::{Completion, SetStats};
pub use time::VirtualTime;
