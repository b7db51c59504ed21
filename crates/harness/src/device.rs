//! The block device under a directory, and its sectors written from /proc/diskstats.
//!
//! Bytes written as the device sees them are the one figure measured the same way for every
//! engine (docs/bench.md): `sync`, read the device's sectors written, run one engine, `sync`,
//! read again. The device is found from the directory's `st_dev` through
//! `/sys/dev/block/MAJ:MIN` (a whole disk or a partition, both have a diskstats line), and
//! failing that (overlay or btrfs report an anonymous device) from the mount source in
//! `/proc/self/mountinfo` of the longest mount point holding the directory.

use anyhow::{anyhow, bail, Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One block device, by its name in /proc/diskstats (e.g. `vda`, `nvme0n1p2`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    pub name: String,
}

impl BlockDevice {
    /// The block device holding `dir`.
    pub fn of_path(dir: &Path) -> Result<BlockDevice> {
        let meta = std::fs::metadata(dir).with_context(|| format!("stat {}", dir.display()))?;
        let dev = meta.dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let diskstats =
            std::fs::read_to_string("/proc/diskstats").context("reading /proc/diskstats")?;
        if let Some(name) = name_by_numbers(&diskstats, major, minor) {
            return Ok(BlockDevice { name });
        }
        let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        if let Ok(target) = std::fs::read_link(&sys) {
            if let Some(name) = target.file_name().and_then(|n| n.to_str()) {
                return Ok(BlockDevice {
                    name: name.to_string(),
                });
            }
        }
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .context("reading /proc/self/mountinfo")?;
        let source = mount_source(&mountinfo, &canonical).ok_or_else(|| {
            anyhow!(
                "no mount in /proc/self/mountinfo holds {}",
                canonical.display()
            )
        })?;
        let dev_path = Path::new(&source);
        let resolved = dev_path
            .canonicalize()
            .unwrap_or_else(|_| dev_path.to_path_buf());
        let name = resolved
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| anyhow!("mount source {source} is not a device path"))?;
        if diskstats_line(&diskstats, name).is_none() {
            bail!(
                "{} is on {source} (device {major}:{minor}), which has no line in /proc/diskstats",
                dir.display()
            );
        }
        Ok(BlockDevice {
            name: name.to_string(),
        })
    }

    /// Bytes written to the device since boot (sectors written x 512).
    pub fn bytes_written(&self) -> Result<u64> {
        let diskstats =
            std::fs::read_to_string("/proc/diskstats").context("reading /proc/diskstats")?;
        let line = diskstats_line(&diskstats, &self.name)
            .ok_or_else(|| anyhow!("{} disappeared from /proc/diskstats", self.name))?;
        sectors_written(line).map(|s| s * 512)
    }

    /// `sync` then [`bytes_written`](Self::bytes_written): the figure read around each run.
    pub fn synced_bytes_written(&self) -> Result<u64> {
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        self.bytes_written()
    }
}

/// The device name of the diskstats line with these major and minor numbers.
pub fn name_by_numbers(diskstats: &str, major: u32, minor: u32) -> Option<String> {
    diskstats.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let ma: u32 = f.next()?.parse().ok()?;
        let mi: u32 = f.next()?.parse().ok()?;
        let name = f.next()?;
        (ma == major && mi == minor).then(|| name.to_string())
    })
}

/// The diskstats line of device `name`.
pub fn diskstats_line<'a>(diskstats: &'a str, name: &str) -> Option<&'a str> {
    diskstats
        .lines()
        .find(|line| line.split_whitespace().nth(2) == Some(name))
}

/// Sectors written of one diskstats line: the 7th statistic after the name (field 10 of
/// the line, counting major, minor and name as fields 1-3).
pub fn sectors_written(line: &str) -> Result<u64> {
    let field = line
        .split_whitespace()
        .nth(9)
        .ok_or_else(|| anyhow!("diskstats line too short: {line:?}"))?;
    field
        .parse()
        .with_context(|| format!("sectors written {field:?} in diskstats line {line:?}"))
}

/// The mount source (e.g. `/dev/vda1`) of the mount point that holds `path`: the longest
/// mount point that is a prefix of it, the last one listed if mounted over.
pub fn mount_source(mountinfo: &str, path: &Path) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // id parent maj:min root mount-point options [optional...] - fstype source super-options
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if fields.len() < 5 || fields.len() < sep + 3 {
            continue;
        }
        let mount_point = unescape_mount(fields[4]);
        let source = fields[sep + 2];
        if path.starts_with(&mount_point) {
            let depth = Path::new(&mount_point).components().count();
            if best.as_ref().is_none_or(|(d, _)| depth >= *d) {
                best = Some((depth, source.to_string()));
            }
        }
    }
    best.map(|(_, s)| s)
}

/// mountinfo escapes space, tab, newline and backslash as octal `\040` etc.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISKSTATS: &str = "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 31821 5678 3012634 10314 7014 21093 2563920 12381 0 6320 23723 3958 62 148256 827 259 199
 254       1 vda1 100 0 800 10 50 0 4096 7 0 10 17 0 0 0 0 0 0
 253       0 zram0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn finds_device_by_numbers_and_reads_sectors_written() {
        assert_eq!(name_by_numbers(DISKSTATS, 254, 0).as_deref(), Some("vda"));
        assert_eq!(name_by_numbers(DISKSTATS, 254, 1).as_deref(), Some("vda1"));
        assert_eq!(name_by_numbers(DISKSTATS, 8, 0), None);
        let line = diskstats_line(DISKSTATS, "vda").unwrap();
        assert_eq!(sectors_written(line).unwrap(), 2563920);
        assert_eq!(
            sectors_written(diskstats_line(DISKSTATS, "vda1").unwrap()).unwrap(),
            4096
        );
        assert!(diskstats_line(DISKSTATS, "vd").is_none());
        assert!(sectors_written("254 0 vda 1 2").is_err());
    }

    #[test]
    fn picks_the_longest_mount_point_holding_the_path() {
        let mountinfo = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
35 27 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 27 259:2 / /data rw,relatime shared:1 - xfs /dev/nvme0n1p2 rw
41 40 259:3 / /data/with\\040space rw - ext4 /dev/sdb1 rw
";
        assert_eq!(
            mount_source(mountinfo, Path::new("/tmp/x")).as_deref(),
            Some("/dev/vda")
        );
        assert_eq!(
            mount_source(mountinfo, Path::new("/data/db/000001.sst")).as_deref(),
            Some("/dev/nvme0n1p2")
        );
        assert_eq!(
            mount_source(mountinfo, Path::new("/data/with space/db")).as_deref(),
            Some("/dev/sdb1")
        );
        // A prefix of the name is not a prefix of the path.
        assert_eq!(
            mount_source(mountinfo, Path::new("/database")).as_deref(),
            Some("/dev/vda")
        );
    }

    #[test]
    fn this_machine_has_a_device_for_the_temp_dir() {
        // Not every sandbox has one (tmpfs has no block device): only check it does not panic
        // and that a found device has a readable counter.
        if let Ok(dev) = BlockDevice::of_path(&std::env::temp_dir()) {
            dev.bytes_written().unwrap();
        }
    }
}
