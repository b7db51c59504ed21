//! The file-level data path: real bytes in backing files, device time per page, and
//! reconstruction of a chunk from the other sets.

use halflife_device::{parity, Device, DeviceConfig, DeviceError, VirtualTime, Window};
use std::path::Path;
use std::time::Duration;

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn bytes_round_trip_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let c = DeviceConfig::small();
    let ps = c.geometry.page_size as usize;
    let data = bytes(5 * ps + 123, 9);
    {
        let dev = Device::new(c.clone(), dir.path()).unwrap();
        let f = dev
            .create_file(1, Path::new("db/000001.sst"), VirtualTime::ZERO)
            .unwrap();
        let mut t = VirtualTime::ZERO;
        let mut charged = 0;
        for chunk in data.chunks(1000) {
            let c = f.append(chunk, t).unwrap();
            charged += c.pages;
            t = c.done_at.max(t) + Duration::from_micros(10);
        }
        assert_eq!(charged, 5, "only full pages are written before sync");
        let s = f.sync(t).unwrap();
        assert_eq!(s.pages, 1, "sync writes the partial tail page");
        assert_eq!(f.len(), data.len() as u64);
        let (got, rc) = f.read_at(ps as u64 - 10, 2 * ps, t).unwrap();
        assert_eq!(got, &data[ps - 10..3 * ps - 10]);
        assert_eq!(rc.pages, 3);
        let (all, _) = f.read_at(0, data.len(), t).unwrap();
        assert_eq!(all, data);
        assert!(matches!(
            f.read_at(data.len() as u64 - 5, 10, t),
            Err(DeviceError::ShortRead { .. })
        ));
        assert_eq!(dev.file_set(Path::new("db/000001.sst")), Some(1));
        assert_eq!(dev.stats(1).unwrap().host_write_pages, 6);
        assert_eq!(dev.stats(0).unwrap().host_write_pages, 0);
    }
    // A new device on the same directory finds the file, on the same set.
    let dev = Device::new(c, dir.path()).unwrap();
    assert_eq!(
        dev.list_files(),
        vec![Path::new("db/000001.sst").to_path_buf()]
    );
    let f = dev.open_file(Path::new("db/000001.sst")).unwrap();
    assert_eq!(f.set(), 1);
    let (all, rc) = f.read_at(0, data.len(), VirtualTime::ZERO).unwrap();
    assert_eq!(all, data);
    assert!(rc.latency() > Duration::ZERO, "pages were placed on flash");
}

#[test]
fn rename_truncate_remove() {
    let dir = tempfile::tempdir().unwrap();
    let c = DeviceConfig::small();
    let ps = c.geometry.page_size as u64;
    let dev = Device::new(c, dir.path()).unwrap();
    let t = VirtualTime::ZERO;
    let f = dev.create_file(0, Path::new("MANIFEST.tmp"), t).unwrap();
    f.append(&bytes(3 * ps as usize, 1), t).unwrap();
    f.sync(t).unwrap();
    dev.rename_file(Path::new("MANIFEST.tmp"), Path::new("MANIFEST"), t)
        .unwrap();
    assert!(!dev.file_exists(Path::new("MANIFEST.tmp")));
    let g = dev.open_file(Path::new("MANIFEST")).unwrap();
    assert_eq!(g.read_at(0, 10, t).unwrap().0, bytes(10, 1));
    assert!(dir.path().join("set-0/MANIFEST").exists());

    dev.settle(0, VirtualTime::from_secs(1)).unwrap();
    assert_eq!(dev.valid_pages(0).unwrap(), 3);
    g.truncate(ps + 1, VirtualTime::from_secs(1)).unwrap();
    assert_eq!(g.len(), ps + 1);
    assert_eq!(dev.valid_pages(0).unwrap(), 2);
    dev.remove_file(Path::new("MANIFEST"), VirtualTime::from_secs(1))
        .unwrap();
    assert_eq!(dev.valid_pages(0).unwrap(), 0);
    assert!(!dir.path().join("set-0/MANIFEST").exists());
    assert!(matches!(
        g.append(b"x", VirtualTime::from_secs(1)),
        Err(DeviceError::FileRemoved { .. })
    ));
    assert!(matches!(
        dev.create_file(0, Path::new("../escape"), t),
        Err(DeviceError::BadName(_))
    ));
    assert!(matches!(
        dev.create_file(9, Path::new("x"), t),
        Err(DeviceError::NoSuchSet { .. })
    ));
}

/// Chunks of a value striped over sets 0..2 with parity on set 3 (paper 001, sec. 4.2): with
/// set 1 in NDWIN, its chunk rebuilt from the DTWIN sets equals a direct read.
#[test]
fn reconstruction_returns_the_same_bytes_as_a_direct_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = DeviceConfig::small();
    c.sets = 4;
    c.plm.min_ndwin = Duration::from_millis(10);
    let dev = Device::new(c, dir.path()).unwrap();
    let t0 = VirtualTime::ZERO;
    let value = bytes(3 * 6000 - 700, 77);
    let chunks: Vec<&[u8]> = value.chunks(6000).collect();
    let p = parity::parity(&chunks);
    let mut t = t0;
    for (k, chunk) in chunks.iter().enumerate() {
        dev.set_plm(k as u32, true, t0).unwrap();
        let f = dev
            .create_file(k as u32, Path::new(&format!("stripe/{k}")), t)
            .unwrap();
        f.append(chunk, t).unwrap();
        t = t.max(f.sync(t).unwrap().done_at);
    }
    dev.set_plm(3, true, t0).unwrap();
    let pf = dev.create_file(3, Path::new("stripe/parity"), t).unwrap();
    pf.append(&p, t).unwrap();
    t = t.max(pf.sync(t).unwrap().done_at);

    let t = t.max(VirtualTime::from_millis(10));
    for k in [0u32, 2, 3] {
        dev.set_window(k, Window::Dtwin, t).unwrap();
    }
    let t = t + Duration::from_millis(100);
    let read = |name: &str| {
        let f = dev.open_file(Path::new(name)).unwrap();
        f.read_at(0, f.len() as usize, t).unwrap()
    };
    let (direct, _) = read("stripe/1");
    let (c0, r0) = read("stripe/0");
    let (c2, r2) = read("stripe/2");
    let (pp, rp) = read("stripe/parity");
    for r in [r0, r2, rp] {
        assert!(!r.waited_on_internal);
    }
    let rebuilt = parity::reconstruct(&[c0, c2], &pp, direct.len());
    assert_eq!(rebuilt, direct);
    assert_eq!(direct, chunks[1]);
}

/// Deferred writes (the host-side write cache of paper 001): bytes are readable at once and
/// cost no device time until their pages are programmed, which then charges page writes and,
/// in DTWIN, ends it.
#[test]
fn deferred_append_then_program() {
    let dir = tempfile::tempdir().unwrap();
    let c = DeviceConfig::small();
    let ps = c.geometry.page_size as u64;
    let dev = Device::new(c, dir.path()).unwrap();
    dev.set_plm(0, true, VirtualTime::ZERO).unwrap();
    let f = dev
        .create_file(0, Path::new("a.vs0"), VirtualTime::ZERO)
        .unwrap();
    let data = bytes(3 * ps as usize, 4);
    f.append_deferred(&data).unwrap();
    assert_eq!(dev.stats(0).unwrap().host_write_pages, 0);
    let t = VirtualTime::from_secs(5);
    let (got, rc) = f.read_at(0, data.len(), t).unwrap();
    assert_eq!(got, data);
    assert_eq!(rc.pages, 0, "unprogrammed pages are still in host memory");
    let d = dev.set_window(0, Window::Dtwin, t).unwrap();
    let c = f.program(ps, 2 * ps, d.done_at).unwrap();
    assert_eq!(c.pages, 2);
    assert!(c.ended_dtwin, "a program in DTWIN ends it");
    assert_eq!(dev.stats(0).unwrap().host_write_pages, 2);
    let (_, rc) = f.read_at(ps, ps as usize, c.done_at).unwrap();
    assert_eq!(rc.pages, 1);
}
