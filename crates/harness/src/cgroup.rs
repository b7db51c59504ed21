//! A memory-limited cgroup for one engine run.
//!
//! The page cache can absorb writes to files deleted soon after they were written (value
//! files collected by GC), so a machine with more RAM than data under-reports bytes written.
//! Each engine's process therefore runs in its own memory cgroup whose limit counts its page
//! cache too: dirty pages beyond it are written back and reach the device.
//!
//! The cgroup is made as a child of the cgroup this process is in (so any limit above it
//! still applies), with the cgroup-v1 memory controller when it is mounted, else cgroup v2's
//! `memory.max`. The child process joins it between fork and exec, before it allocates
//! anything, and the directory is removed when the [`MemoryCgroup`] is dropped.

use anyhow::{anyhow, bail, Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

pub struct MemoryCgroup {
    dir: PathBuf,
    version: Version,
    limit: u64,
}

impl MemoryCgroup {
    /// Creates `<own cgroup>/<name>` with a memory limit of `limit` bytes.
    pub fn create(name: &str, limit: u64) -> Result<MemoryCgroup> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        let own = std::fs::read_to_string("/proc/self/cgroup")?;
        let mut errors = Vec::new();
        if let Some(mount) = controller_mount(&mountinfo, Version::V1) {
            match own_path(&own, Version::V1)
                .ok_or_else(|| anyhow!("no memory line in /proc/self/cgroup"))
                .and_then(|p| Self::create_at(&mount, &p, name, limit, Version::V1))
            {
                Ok(cg) => return Ok(cg),
                Err(e) => errors.push(format!("cgroup v1 at {}: {e:#}", mount.display())),
            }
        }
        if let Some(mount) = controller_mount(&mountinfo, Version::V2) {
            match own_path(&own, Version::V2)
                .ok_or_else(|| anyhow!("no 0:: line in /proc/self/cgroup"))
                .and_then(|p| Self::create_at(&mount, &p, name, limit, Version::V2))
            {
                Ok(cg) => return Ok(cg),
                Err(e) => errors.push(format!("cgroup v2 at {}: {e:#}", mount.display())),
            }
        }
        if errors.is_empty() {
            bail!("no cgroup memory controller is mounted");
        }
        bail!("{}", errors.join("; "))
    }

    fn create_at(
        mount: &Path,
        own: &str,
        name: &str,
        limit: u64,
        version: Version,
    ) -> Result<Self> {
        let parent = mount.join(own.trim_start_matches('/'));
        remove_stale(&parent);
        let dir = parent.join(name);
        if dir.exists() {
            // Left over from a run that was killed: it is empty, or rmdir fails and we say so.
            std::fs::remove_dir(&dir)
                .with_context(|| format!("removing stale cgroup {}", dir.display()))?;
        }
        std::fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        let cg = MemoryCgroup {
            dir,
            version,
            limit,
        };
        let (file, value) = match version {
            Version::V1 => ("memory.limit_in_bytes", limit.to_string()),
            Version::V2 => {
                if !cg.dir.join("memory.max").exists() {
                    let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+memory");
                }
                ("memory.max", limit.to_string())
            }
        };
        let path = cg.dir.join(file);
        std::fs::write(&path, &value)
            .with_context(|| format!("writing {value} to {}", path.display()))?;
        if version == Version::V2 {
            // Keep the engine out of swap so the limit bounds its page cache, not just RAM.
            let _ = std::fs::write(cg.dir.join("memory.swap.max"), "0");
        }
        Ok(cg)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Makes `cmd`'s process join this cgroup between fork and exec.
    pub fn attach_on_spawn(&self, cmd: &mut Command) -> Result<()> {
        let procs = CString::new(self.dir.join("cgroup.procs").as_os_str().as_bytes())?;
        // SAFETY: the closure runs in the forked child and uses only async-signal-safe calls
        // (getpid, open, write, close) on memory prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let mut digits = [0u8; 24];
                let mut n = libc::getpid() as u64;
                let mut i = digits.len();
                loop {
                    i -= 1;
                    digits[i] = b'0' + (n % 10) as u8;
                    n /= 10;
                    if n == 0 {
                        break;
                    }
                }
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let len = digits.len() - i;
                let written = libc::write(fd, digits[i..].as_ptr().cast(), len);
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if written != len as isize {
                    return Err(err);
                }
                Ok(())
            });
        }
        Ok(())
    }

    /// The highest memory use seen in the cgroup (page cache included), if the kernel says.
    pub fn peak_bytes(&self) -> Option<u64> {
        let file = match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        };
        std::fs::read_to_string(self.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// How many processes the kernel's OOM killer ended in this cgroup.
    pub fn oom_kills(&self) -> u64 {
        let file = match self.version {
            Version::V1 => "memory.oom_control",
            Version::V2 => "memory.events",
        };
        std::fs::read_to_string(self.dir.join(file))
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == "oom_kill").then(|| v.trim().parse().ok()).flatten()
                })
            })
            .unwrap_or(0)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The child has been waited for; its cgroup empties as soon as the kernel has
        // released it, which can take a moment.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        tracing::warn!("could not remove cgroup {}", self.dir.display());
    }
}

/// Removes `halflife-*-<pid>` cgroups left by a compare that was killed (its `Drop` did not
/// run): those whose pid is gone. rmdir fails harmlessly on a cgroup that still has tasks.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("halflife-") {
            continue;
        }
        let pid = name.rsplit('-').next().and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }
}

/// The mount point of the v1 memory controller or of the v2 unified hierarchy.
pub fn controller_mount(mountinfo: &str, version: Version) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let sep = fields.iter().position(|f| *f == "-")?;
        let fstype = *fields.get(sep + 1)?;
        let super_opts = *fields.get(sep + 3)?;
        let ok = match version {
            Version::V1 => fstype == "cgroup" && super_opts.split(',').any(|o| o == "memory"),
            Version::V2 => fstype == "cgroup2",
        };
        ok.then(|| PathBuf::from(fields[4]))
    })
}

/// This process's cgroup path in that hierarchy, from /proc/self/cgroup.
pub fn own_path(proc_cgroup: &str, version: Version) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        let ok = match version {
            Version::V1 => controllers.split(',').any(|c| c == "memory"),
            Version::V2 => id == "0" && controllers.is_empty(),
        };
        ok.then(|| path.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_controller_mounts_and_own_paths() {
        let mountinfo = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            controller_mount(mountinfo, Version::V1),
            Some(PathBuf::from("/sys/fs/cgroup/memory"))
        );
        assert_eq!(
            controller_mount(mountinfo, Version::V2),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let own = "9:name=systemd:/\n4:memory:/jobs/abc\n1:cpu,cpuacct:/\n0::/user.slice\n";
        assert_eq!(own_path(own, Version::V1).as_deref(), Some("/jobs/abc"));
        assert_eq!(own_path(own, Version::V2).as_deref(), Some("/user.slice"));
        assert_eq!(own_path("0::/\n", Version::V1), None);
    }
}
