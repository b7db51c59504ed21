//! Scheduler invariants: n-1 kv-sets in DTWIN at all times once devd runs, no internal write
//! ever reaches a set in DTWIN, the write cache stays within its limit; and the two failure
//! modes the paper describes when the rules are relaxed (overflow writes ending DTWIN in
//! R-Vigil; lengthened NDWINs and a held-back writer in O-Vigil).

mod common;

use device::VirtualTime;
use engine::io::{IoCause, Storage};
use halflife_vigil::{Mode, VigilVolume, VolumeConfig};
use std::path::Path;
use std::sync::Arc;

/// Writes `files` striped files of `size` bytes, one every `gap_us` of virtual time, while
/// the clock advances in 20 us steps; checks the device's window states at every step.
fn drive(
    vol: &Arc<VigilVolume>,
    root: &Path,
    files: usize,
    size: usize,
    gap_us: u64,
) -> (u64, u64) {
    let mut t = 0u64;
    let (mut checks, mut bad) = (0, 0);
    let data = vec![0xa5u8; size];
    for i in 0..files {
        let end = t + gap_us * 1000;
        while t < end {
            t += 20_000;
            vol.advance(VirtualTime::from_nanos(t)).unwrap();
            let (n, steady) = vol.dtwin_sets_now().unwrap();
            if steady {
                checks += 1;
                if n < vol.config().kv_sets as usize - 1 {
                    bad += 1;
                }
            }
        }
        let p = root.join(format!("{i:06}.sst"));
        let mut w = vol.create(&p, IoCause::Compaction).unwrap();
        w.append(&data).unwrap();
        w.sync().unwrap();
        if i >= 8 {
            vol.remove(&root.join(format!("{:06}.sst", i - 8))).unwrap();
        }
    }
    (checks, bad)
}

fn kv_write_exits(vol: &VigilVolume) -> u64 {
    (0..vol.config().kv_sets)
        .map(|k| {
            let s = vol.device().stats(k).unwrap();
            s.dtwin_exits_write + s.dtwin_exits_lockdown_broken
        })
        .sum()
}

#[test]
fn o_vigil_keeps_n_minus_1_sets_in_dtwin_and_never_writes_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let vol = common::volume(dir.path(), Mode::OVigil, false);
    let root = dir.path().join("db");
    std::fs::create_dir_all(&root).unwrap();
    // 48 KiB every 2 ms: 24 MB/s of internal writes for 0.2 s of virtual time.
    let (checks, bad) = drive(&vol, &root, 100, 48 << 10, 2_000);
    let s = vol.volume_stats();
    assert!(checks > 5_000, "{checks}");
    assert_eq!(bad, 0, "{bad} of {checks} samples without n-1 DTWIN sets");
    assert_eq!(kv_write_exits(&vol), 0, "a write ended a DTWIN");
    assert_eq!(s.forced_writes, 0);
    assert!(
        s.cache_peak > 0 && s.cache_peak <= s.cache_limit,
        "{}",
        s.cache_peak
    );
    assert_eq!(s.invariant_violations, 0);
    // Every set took its turn in NDWIN.
    for k in 0..3 {
        assert!(
            s.windows
                .iter()
                .any(|w| w.slot == k && w.view == halflife_vigil::View::Ndwin),
            "set {k} never in NDWIN"
        );
    }
    // maxDTWIN never ran out (devd rotated in time).
    let exits: u64 = (0..3)
        .map(|k| vol.device().stats(k).unwrap().dtwin_exits_time_limit)
        .sum();
    assert_eq!(exits, 0);
}

#[test]
fn dynamic_ndwin_lengthens_under_backlog_and_fixed_ndwin_overflows() {
    let small_cache = |mode| VolumeConfig {
        cache_limit: 1 << 20,
        ..common::volume_config(mode)
    };
    let mut results = Vec::new();
    for mode in [Mode::RVigil, Mode::OVigil] {
        let dir = tempfile::tempdir().unwrap();
        let dev = device::Device::new(common::device_config(), dir.path().join("device")).unwrap();
        let root = dir.path().join("db");
        std::fs::create_dir_all(&root).unwrap();
        let vol = VigilVolume::new(dev, &root, small_cache(mode)).unwrap();
        // A heavier load: 256 KiB every 2 ms.
        drive(&vol, &root, 60, 256 << 10, 2_000);
        let s = vol.volume_stats();
        assert!(s.cache_peak <= s.cache_limit, "{mode}: {}", s.cache_peak);
        results.push((mode, s));
    }
    let (r, o) = (&results[0].1, &results[1].1);
    assert_eq!(r.ndwin_extensions, 0, "R-Vigil never lengthens");
    assert!(o.ndwin_extensions > 0, "O-Vigil lengthened no NDWIN");
    assert!(
        r.forced_writes > 0,
        "the fixed NDWIN should overflow this cache"
    );
    // O-Vigil never writes outside NDWIN: it lengthens NDWINs and holds the writer back.
    assert_eq!(o.forced_writes, 0);
    assert!(o.writer_waits > 0, "the load should have filled the cache");
    assert_eq!(o.invariant_violations, 0);
}
