//! Shared set-up for the volume's integration tests: a small four-set device with short
//! PLM windows, and a volume over it.

#![allow(dead_code)]

use device::{Device, DeviceConfig, FlashTimings, Geometry, PlmConfig};
use halflife_vigil::{Mode, VigilVolume, VolumeConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Four sets of 2 x 4 dies, 32 blocks of 32 pages of 4 KiB (32 MiB per set), FEMU's
/// black-box timings (fast, so tests need little virtual time), a 64-page buffer, minNDWIN
/// 2 ms and maxDTWIN 40 ms of virtual time.
pub fn device_config() -> DeviceConfig {
    DeviceConfig {
        sets: 4,
        geometry: Geometry {
            channels: 2,
            dies_per_channel: 4,
            blocks_per_die: 32,
            pages_per_block: 32,
            page_size: 4096,
            over_provisioning: 0.25,
        },
        timings: FlashTimings::femu_bbssd(),
        buffer_pages: 64,
        gc_free_blocks: 3,
        read_reclaim_reads: 10_000,
        plm: PlmConfig {
            max_dtwin: Duration::from_millis(40),
            min_ndwin: Duration::from_millis(2),
            ..PlmConfig::default()
        },
        fsync_backing: false,
    }
}

pub fn volume_config(mode: Mode) -> VolumeConfig {
    VolumeConfig {
        chunk_size: 4096,
        cache_limit: 4 << 20,
        extend_step: Duration::from_millis(1),
        lockdown_estimate: Duration::from_millis(3),
        poll_interval: Duration::from_micros(500),
        pace_slack: Duration::from_millis(2),
        pace_stall: Duration::from_micros(500),
        ..VolumeConfig::new(mode)
    }
}

/// A device on `root/device` and a volume rooted at `root/db`.
pub fn volume(root: &Path, mode: Mode, fsync: bool) -> Arc<VigilVolume> {
    let cfg = DeviceConfig {
        fsync_backing: fsync,
        ..device_config()
    };
    let dev = Device::new(cfg, root.join("device")).unwrap();
    VigilVolume::new(dev, root.join("db"), volume_config(mode)).unwrap()
}
