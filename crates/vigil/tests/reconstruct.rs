//! Reconstruction returns the same bytes as a direct read, for any range of a striped file
//! (full stripes, the partial tail, after a truncation), and a client read of the NDWIN set
//! is actually served by reconstruction.

mod common;

use device::VirtualTime;
use engine::io::{IoCause, Storage};
use halflife_vigil::{begin_client_op, end_client_op, Mode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.random()).collect()
}

#[test]
fn rebuilt_ranges_equal_direct_reads() {
    let dir = tempfile::tempdir().unwrap();
    let vol = common::volume(dir.path(), Mode::OVigil, false);
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    for (i, len) in [1usize, 4095, 4096, 8192, 8193, 50_000, 100_003]
        .into_iter()
        .enumerate()
    {
        let path = dir.path().join("db").join(format!("{i:06}.sst"));
        let data = bytes(&mut rng, len);
        let mut w = vol.create(&path, IoCause::Flush).unwrap();
        // Uneven appends with a sync in the middle (a partial stripe rewritten later).
        let cut = len / 3;
        w.append(&data[..cut]).unwrap();
        w.sync().unwrap();
        w.append(&data[cut..]).unwrap();
        w.sync().unwrap();
        drop(w);
        assert!(vol.is_striped(&path));
        assert_eq!(vol.file_size(&path).unwrap(), len as u64);
        let r = vol.open(&path).unwrap();
        assert_eq!(r.read_at(0, len, IoCause::Other).unwrap(), data);
        for _ in 0..50 {
            let off = rng.random_range(0..len);
            let n = rng.random_range(0..=(len - off).min(20_000));
            let (direct, rebuilt) = vol.read_both_ways(&path, off as u64, n).unwrap();
            assert_eq!(direct, &data[off..off + n], "direct {off}+{n} of {len}");
            assert_eq!(rebuilt, &data[off..off + n], "rebuilt {off}+{n} of {len}");
        }
        // Truncation keeps a consistent prefix with a fresh parity.
        let keep = len / 2 + 1;
        vol.truncate(&path, keep as u64).unwrap();
        assert_eq!(vol.file_size(&path).unwrap(), keep as u64);
        let (direct, rebuilt) = vol.read_both_ways(&path, 0, keep).unwrap();
        assert_eq!(direct, &data[..keep]);
        assert_eq!(rebuilt, &data[..keep]);
    }
}

#[test]
fn client_reads_of_the_ndwin_set_are_reconstructed() {
    let dir = tempfile::tempdir().unwrap();
    let vol = common::volume(dir.path(), Mode::OVigil, false);
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let path = dir.path().join("db").join("000001.sst");
    let data = bytes(&mut rng, 3 * 2 * 4096 * 10);
    let mut w = vol.create(&path, IoCause::Compaction).unwrap();
    w.append(&data).unwrap();
    w.sync().unwrap();
    drop(w);
    let r = vol.open(&path).unwrap();
    // Past devd's boot phase (all sets start in NDWIN and drain what was written then).
    let mut t = 20_000_000u64;
    for _ in 0..2000 {
        t += 200_000; // 200 us between reads
        vol.begin_client_op(VirtualTime::from_nanos(t)).unwrap();
        let off = rng.random_range(0..data.len() - 4096);
        let got = r.read_at(off as u64, 4096, IoCause::ClientRead).unwrap();
        let times = end_client_op();
        assert_eq!(got, &data[off..off + 4096]);
        assert!(
            times.device.as_micros() < 1_000,
            "{:?} at {t}",
            times.device
        );
    }
    let s = vol.volume_stats();
    assert!(s.client_pieces_reconstructed > 0, "{s:?}");
    assert!(s.client_pieces_direct > s.client_pieces_reconstructed);
    // A second volume kind never reconstructs.
    let dir2 = tempfile::tempdir().unwrap();
    let base = common::volume(dir2.path(), Mode::Base, false);
    std::fs::create_dir_all(dir2.path().join("db")).unwrap();
    let p2 = dir2.path().join("db").join("000001.sst");
    let mut w = base.create(&p2, IoCause::Flush).unwrap();
    w.append(&data).unwrap();
    w.sync().unwrap();
    drop(w);
    let r = base.open(&p2).unwrap();
    begin_client_op(base.id(), 1_000_000_000);
    base.advance(VirtualTime::from_secs(1)).unwrap();
    assert_eq!(
        r.read_at(0, 4096, IoCause::ClientRead).unwrap(),
        &data[..4096]
    );
    end_client_op();
    assert_eq!(base.volume_stats().client_pieces_reconstructed, 0);
}

/// A striped file a crash left without its later slots (an abandoned job output) can still
/// be moved aside whole, as recovery does with files no manifest edit accounts for.
#[test]
fn a_striped_file_missing_slots_is_renamed_into_a_subdirectory() {
    let dir = tempfile::tempdir().unwrap();
    let vol = common::volume(dir.path(), Mode::OVigil, false);
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let path = dir.path().join("db").join("000042.vlog");
    let mut w = vol.create(&path, IoCause::Flush).unwrap();
    w.append(&vec![7u8; 50_000]).unwrap();
    w.sync().unwrap();
    drop(w);
    assert!(vol.is_striped(&path));
    let slots: Vec<_> = vol
        .device()
        .list_files()
        .into_iter()
        .filter(|n| n.to_string_lossy().contains("000042.vlog."))
        .collect();
    assert!(slots.len() >= 2, "{slots:?}");
    vol.device()
        .remove_file(slots.last().unwrap(), VirtualTime::from_nanos(0))
        .unwrap();
    let to = dir
        .path()
        .join("db")
        .join("lost")
        .join("open-1")
        .join("000042.vlog");
    vol.rename(&path, &to).unwrap();
    assert!(!vol.exists(&path));
    assert!(vol.exists(&to));
    assert!(vol.rename(&path, &to).is_err(), "nothing left to move");
}
