//! Device configuration: geometry of each NVM set, flash timings, buffer, internal-task
//! thresholds and the predictable-latency-mode limits.
//!
//! The defaults follow two sources, named field by field:
//! - flash array and channel times: FEMU's TLC table (`hw/femu/nand/nand.h`, taken there from
//!   SimpleSSD), because the issue asks for published TLC figures and paper 001's device is
//!   TLC; its mean page read (80 us) is close to the 74 us average read the paper measured in
//!   DTWIN;
//! - the partitioning and the PLM limits: paper 001 (sec. 5.1, 5.2, 7.1): four NVM sets, each
//!   with two channels and a quarter of the dies; maxDTWIN 60 s, minNDWIN 4 s.
//!
//! Capacities (blocks per die, buffer size) are scaled down so that tests and benchmarks fit
//! in memory; every field can be changed.

use crate::error::{DeviceError, Result};
use std::time::Duration;

/// Shape of one NVM set. Every set of a device has the same shape.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Geometry {
    pub channels: u32,
    pub dies_per_channel: u32,
    pub blocks_per_die: u32,
    pub pages_per_block: u32,
    /// Bytes per flash page (and per logical page).
    pub page_size: u32,
    /// Fraction of physical pages hidden from the host (spare area for GC).
    pub over_provisioning: f64,
}

impl Geometry {
    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }

    pub fn physical_pages(&self) -> u64 {
        self.dies() as u64 * self.blocks_per_die as u64 * self.pages_per_block as u64
    }

    /// Pages the host may address in one set.
    pub fn logical_pages(&self) -> u64 {
        ((self.physical_pages() as f64) * (1.0 - self.over_provisioning)).floor() as u64
    }

    pub fn logical_bytes(&self) -> u64 {
        self.logical_pages() * self.page_size as u64
    }
}

impl Default for Geometry {
    /// Paper 001's split of 8 channels and 64 dies into 4 sets gives 2 channels and 16 dies
    /// per set; 64 blocks of 64 pages of 16 KiB per die make 1 GiB per set.
    fn default() -> Self {
        Geometry {
            channels: 2,
            dies_per_channel: 8,
            blocks_per_die: 64,
            pages_per_block: 64,
            page_size: 16 * 1024,
            over_provisioning: 0.125,
        }
    }
}

/// Flash and interface service times.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FlashTimings {
    /// Array read time by TLC page type (lower, centre, upper), tR.
    pub read: [Duration; 3],
    /// Array program time by TLC page type (lower, centre, upper), tPROG.
    pub program: [Duration; 3],
    /// Block erase, tBERS.
    pub erase: Duration,
    /// Moving one page between a die and the controller over the channel.
    pub channel_xfer: Duration,
    /// Moving one page between the host and the device DRAM (the PCIe DMA).
    pub host_xfer: Duration,
}

impl Default for FlashTimings {
    fn default() -> Self {
        FlashTimings {
            // FEMU TLC table (after SimpleSSD).
            read: [
                Duration::from_nanos(56_500),
                Duration::from_nanos(77_500),
                Duration::from_nanos(106_000),
            ],
            program: [
                Duration::from_nanos(820_500),
                Duration::from_nanos(2_225_000),
                Duration::from_nanos(5_734_000),
            ],
            erase: Duration::from_millis(3),
            channel_xfer: Duration::from_nanos(52_433),
            // Not from FEMU: 16 KiB over a PCIe 3.0 x4 link at about 3.2 GB/s.
            host_xfer: Duration::from_nanos(5_120),
        }
    }
}

impl FlashTimings {
    /// FEMU's "blackbox SSD" defaults (one latency for every page type, no channel time).
    pub fn femu_bbssd() -> Self {
        FlashTimings {
            read: [Duration::from_micros(40); 3],
            program: [Duration::from_micros(200); 3],
            erase: Duration::from_millis(2),
            channel_xfer: Duration::ZERO,
            host_xfer: Duration::from_nanos(5_120),
        }
    }
}

/// Predictable latency mode limits of a set (what log page 0x0a reports).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PlmConfig {
    /// Longest DTWIN (maxDTWIN); the set returns to NDWIN by itself when it runs out.
    pub max_dtwin: Duration,
    /// Shortest NDWIN (minNDWIN); a DTWIN request earlier than this is refused.
    pub min_ndwin: Duration,
    /// Page reads the set expects to serve in one DTWIN (reported as "DTWIN reads typical").
    pub dtwin_reads_typical: u64,
    /// Page writes the set accepts in DTWIN: zero, as in paper 001, where any write ends it.
    pub dtwin_writes_typical: u64,
    /// Internal jobs (GC, read-reclaim) the internal job queue can hold while they are
    /// deferred in DTWIN; one more forces the set back to NDWIN.
    pub internal_queue_capacity: usize,
}

impl Default for PlmConfig {
    fn default() -> Self {
        PlmConfig {
            max_dtwin: Duration::from_secs(60),
            min_ndwin: Duration::from_secs(4),
            dtwin_reads_typical: 1 << 20,
            dtwin_writes_typical: 0,
            internal_queue_capacity: 64,
        }
    }
}

/// Everything that defines an emulated device.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DeviceConfig {
    /// Number of NVM sets (paper 001: four physical functions).
    pub sets: u32,
    pub geometry: Geometry,
    pub timings: FlashTimings,
    /// DRAM write buffer of each set, in pages.
    pub buffer_pages: u32,
    /// GC runs on a die when its free blocks fall below this.
    pub gc_free_blocks: u32,
    /// A block is read-reclaimed (copied out and erased) after this many page reads.
    pub read_reclaim_reads: u64,
    pub plm: PlmConfig,
    /// Whether `sync` on a file also fsyncs the backing file (keeps crash tests honest;
    /// turn off for benchmarks that do not need durability).
    pub fsync_backing: bool,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            sets: 4,
            geometry: Geometry::default(),
            timings: FlashTimings::default(),
            // 4 MiB of 16 KiB pages per set: a full drain takes 16 pages per die, ~50 ms.
            buffer_pages: 256,
            gc_free_blocks: 4,
            read_reclaim_reads: 100_000,
            plm: PlmConfig::default(),
            fsync_backing: true,
        }
    }
}

impl DeviceConfig {
    /// A tiny device for unit tests: 2 sets of 2 channels x 2 dies x 16 blocks x 8 pages of
    /// 4 KiB, a 16-page buffer, GC below 3 free blocks.
    pub fn small() -> Self {
        DeviceConfig {
            sets: 2,
            geometry: Geometry {
                channels: 2,
                dies_per_channel: 2,
                blocks_per_die: 16,
                pages_per_block: 8,
                page_size: 4096,
                over_provisioning: 0.25,
            },
            buffer_pages: 16,
            gc_free_blocks: 3,
            read_reclaim_reads: 1_000,
            fsync_backing: false,
            ..DeviceConfig::default()
        }
    }

    /// Checks that the configuration describes a device that can work.
    pub fn validate(&self) -> Result<()> {
        let g = &self.geometry;
        let bad = |what: &str| Err(DeviceError::Config(what.to_string()));
        if self.sets == 0 {
            return bad("sets must be at least 1");
        }
        if g.channels == 0 || g.dies_per_channel == 0 {
            return bad("a set needs at least one channel and one die per channel");
        }
        if g.pages_per_block == 0 || g.page_size == 0 {
            return bad("pages_per_block and page_size must be positive");
        }
        if !(0.0..1.0).contains(&g.over_provisioning) {
            return bad("over_provisioning must be in [0, 1)");
        }
        if self.gc_free_blocks < 2 {
            return bad("gc_free_blocks must be at least 2 (one block is reserved for GC)");
        }
        if g.blocks_per_die < self.gc_free_blocks + 2 {
            return bad("blocks_per_die must exceed gc_free_blocks + 1");
        }
        // GC must always find a victim with an invalid page: the host may not fill more than
        // the blocks left after the GC reserve and the open block.
        let spare_blocks = (g.physical_pages() - g.logical_pages()) / g.pages_per_block as u64;
        if spare_blocks < g.dies() as u64 * (self.gc_free_blocks as u64 + 1) {
            return bad(
                "over_provisioning too small: need (gc_free_blocks + 1) spare blocks per die",
            );
        }
        if self.buffer_pages == 0 {
            return bad("buffer_pages must be positive");
        }
        if self.read_reclaim_reads == 0 {
            return bad("read_reclaim_reads must be positive");
        }
        Ok(())
    }
}
