//! The engines `halflife compare` can run, each as one child process speaking the driver
//! protocol (docs/bench.md, "The peer interface"):
//!
//! ```text
//! <driver> --ops FILE --dir DIR --report FILE [settings as flags]
//! ```
//!
//! The driver loads key numbers `0..record_count`, replays the op file, waits for its
//! background work, and writes a [`RunReport`](super::report::RunReport) to `--report`. It
//! may print `progress DONE TOTAL` lines on stderr. Adding a peer is one more [`Peer`]
//! implementation here and one more driver program under `peers/`.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Settings every engine is run with, the same for all of them.
#[derive(Clone, Debug, Serialize)]
pub struct EngineSettings {
    pub memtable_mb: u64,
    pub cache_mb: u64,
    pub sync: bool,
    /// Values at least this large go to value files (engines with key-value separation).
    pub min_blob_size: u64,
    pub blob_file_mb: u64,
    /// BlobDB-style GC: collect the oldest `age_cutoff` of value files, forced when their
    /// garbage ratio reaches `force_threshold`.
    pub age_cutoff: f64,
    pub force_threshold: f64,
    /// Titan- and Badger-style GC: collect a file once this fraction of it is garbage.
    pub garbage_ratio: f64,
    /// The op file has expiring updates: drivers that keep expiries only on request
    /// (the native RocksDB one, `--ttl`) keep them.
    pub expiry: bool,
}

/// One run of one engine: where its inputs and outputs are.
pub struct RunPaths<'a> {
    pub ops: &'a Path,
    pub dir: &'a Path,
    pub report: &'a Path,
}

pub trait Peer {
    /// The name used by `--engines` and in tables.
    fn name(&self) -> &str;
    /// One line for `--help` and the docs.
    fn about(&self) -> &str;
    /// Makes the driver runnable (installs a package, builds a binary). Called once per
    /// compare run, before anything is measured.
    fn prepare(&self, ctx: &PeerContext) -> Result<()>;
    /// The command that runs it.
    fn command(&self, ctx: &PeerContext, run: &RunPaths, s: &EngineSettings) -> Result<Command>;
}

/// What drivers need to be found and run.
pub struct PeerContext {
    /// The `halflife` binary itself (our engine's driver is `halflife bench --ops`).
    pub halflife_exe: PathBuf,
    /// The `peers/` directory of the source tree.
    pub peers_dir: PathBuf,
    pub python: String,
}

impl PeerContext {
    pub fn new(peers_dir: Option<PathBuf>) -> Result<PeerContext> {
        let halflife_exe = std::env::current_exe().context("finding the halflife binary")?;
        let peers_dir = match peers_dir {
            Some(p) => p,
            None => find_peers_dir().context(
                "cannot find the peers/ directory of the halflife source tree: run from the \
                 repository root or pass --peers-dir",
            )?,
        };
        Ok(PeerContext {
            halflife_exe,
            peers_dir,
            python: "python3".to_string(),
        })
    }
}

fn find_peers_dir() -> Result<PathBuf> {
    let mut candidates = vec![PathBuf::from("peers")];
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers"));
    for c in candidates {
        if c.join("rocksdb").is_dir() {
            return Ok(c.canonicalize()?);
        }
    }
    bail!("no peers/rocksdb directory found")
}

/// Our engines: (name, policy, space-amplification target; 0 for paper 000's TTL trigger,
/// `None` for the bench default).
const HALFLIFE: [(&str, &str, Option<f64>); 10] = [
    ("halflife-inline", "inline", None),
    ("halflife-blobdb", "blobdb", None),
    ("halflife-titan", "titan", None),
    ("halflife-terark", "terark", None),
    ("halflife-lifetime", "lifetime", None),
    ("halflife-lifetime-nomodel", "lifetime-nomodel", None),
    ("halflife-oracle", "oracle", None),
    ("halflife-rate-oracle", "rate-oracle", None),
    ("halflife-dumpkv", "lifetime", Some(0.0)),
    ("halflife-dumpkv-oracle", "oracle", Some(0.0)),
];

/// The policies that take a space-amplification target.
const TARGETED: [&str; 4] = ["lifetime", "lifetime-nomodel", "oracle", "rate-oracle"];

/// Every engine compare knows, in the default order.
pub fn all() -> Vec<Box<dyn Peer>> {
    let mut v: Vec<Box<dyn Peer>> = HALFLIFE
        .iter()
        .map(|&(name, policy, space_amp_target)| {
            Box::new(Halflife::new(name, policy, space_amp_target)) as Box<dyn Peer>
        })
        .collect();
    v.push(Box::new(RocksDbNative { blob: false }));
    v.push(Box::new(RocksDbNative { blob: true }));
    v.push(Box::new(RocksDb { blob: false }));
    v.push(Box::new(RocksDb { blob: true }));
    v.push(Box::new(Badger));
    v.push(Box::new(Fjall));
    v
}

/// The engines run when `--engines` is not given: RocksDB natively, so that no interpreter
/// sits in either side's loop.
pub const DEFAULT_ENGINES: &str =
    "halflife-inline,halflife-blobdb,halflife-titan,rocksdb-native,rocksdb-native-blob";

/// Looks up a comma-separated list of engine names. `halflife-lifetime@T` (and the same
/// for `-nomodel` and `oracle`) is that policy with space-amplification target `T`.
pub fn select(names: &str) -> Result<Vec<Box<dyn Peer>>> {
    let mut known = all();
    let mut out: Vec<Box<dyn Peer>> = Vec::new();
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if let Some(h) = halflife(name)? {
            out.push(Box::new(h));
            continue;
        }
        let Some(i) = known.iter().position(|p| p.name() == name) else {
            let list: Vec<&str> = all_names();
            bail!(
                "unknown engine {name:?}; known engines: {} (and halflife-lifetime@T, \
                 halflife-lifetime-nomodel@T, halflife-oracle@T for a space-amplification \
                 target T, a +vwal suffix on any halflife engine but inline for the \
                 value log as the WAL, +tiered or +leveled for a fixed tree style \
                 instead of the measured choice, and a last +no-readahead for scans that \
                 read each separated value when they reach it, then +gc<N> for N GC threads, \
                 then +sweep for an engine not told of expiries)",
                list.join(", ")
            );
        };
        out.push(known.remove(i));
    }
    if out.is_empty() {
        bail!("no engine selected");
    }
    Ok(out)
}

/// A halflife engine by name: one of [`HALFLIFE`], `@<target>` for a space-amplification
/// target, a `+vwal` suffix for the value log as the WAL, `+tiered` or `+leveled` for
/// a fixed compaction style of the tree instead of the engine's choice, and
/// `+no-readahead` for scans without read-ahead of separated values (the engine before it
/// had one, so that a compare shows both), `+gc<N>` for `N` value-file GC threads, and
/// `+sweep` for an engine never told of expiries (the client deletes expired keys, see
/// `halflife bench --expiry`), in that order when several are given.
fn halflife(name: &str) -> Result<Option<Halflife>> {
    let (base, sweep) = match name.strip_suffix("+sweep") {
        Some(base) => (base, true),
        None => (name, false),
    };
    let (base, background_gc) = match base.rsplit_once("+gc") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            // The engine checks the upper bound (`Options::background_gc`).
            let n: usize = n.parse().ok().filter(|&n| n >= 1).with_context(|| {
                format!("{name:?}: the GC threads after +gc must be at least 1")
            })?;
            (base, Some(n))
        }
        _ => (base, None),
    };
    let (base, readahead) = match base.strip_suffix("+no-readahead") {
        Some(base) => (base, false),
        None => (base, true),
    };
    let (base, style) = if let Some(base) = base.strip_suffix("+tiered") {
        (base, Some("tiered"))
    } else if let Some(base) = base.strip_suffix("+leveled") {
        (base, Some("leveled"))
    } else {
        (base, None)
    };
    let (base, value_log_wal) = match base.strip_suffix("+vwal") {
        Some(base) => (base, true),
        None => (base, false),
    };
    let mut h = match with_target(base)? {
        Some(h) => h,
        None => match HALFLIFE.iter().find(|h| h.0 == base) {
            Some(&(n, policy, space_amp_target)) => Halflife::new(n, policy, space_amp_target),
            None => return Ok(None),
        },
    };
    if value_log_wal && h.policy == "inline" {
        bail!("{name:?}: inline keeps values in the tree; +vwal needs value files");
    }
    h.name = name.to_string();
    h.value_log_wal = value_log_wal;
    h.style = style;
    h.readahead = readahead;
    h.background_gc = background_gc;
    h.sweep = sweep;
    Ok(Some(h))
}

/// `halflife-<policy>@<target>` for the policies with a space-amplification target.
fn with_target(name: &str) -> Result<Option<Halflife>> {
    let Some((base, t)) = name.split_once('@') else {
        return Ok(None);
    };
    let Some(&(_, policy, _)) = HALFLIFE
        .iter()
        .find(|h| h.0 == base && h.2.is_none() && TARGETED.contains(&h.1))
    else {
        bail!("{name:?}: only halflife-lifetime, -lifetime-nomodel, -oracle and -rate-oracle take @target");
    };
    let target: f64 = t
        .parse()
        .ok()
        .filter(|t: &f64| *t > 1.0 && t.is_finite())
        .with_context(|| format!("{name:?}: the target after @ must be a number above 1"))?;
    Ok(Some(Halflife::new(name, policy, Some(target))))
}

pub fn all_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = HALFLIFE.iter().map(|h| h.0).collect();
    v.extend([
        "rocksdb-native",
        "rocksdb-native-blob",
        "rocksdb",
        "rocksdb-blob",
        "badger",
        "fjall",
    ]);
    v
}

/// Our engine: the same binary, `halflife bench --ops FILE`.
struct Halflife {
    name: String,
    policy: &'static str,
    space_amp_target: Option<f64>,
    /// `--value-log-wal`.
    value_log_wal: bool,
    /// `--compaction-style`, when fixed by the name (else the engine's `auto`).
    style: Option<&'static str>,
    /// Scans read separated values ahead (the engine's default); `false`:
    /// `--scan-readahead-kib 0`.
    readahead: bool,
    /// `--background-gc`, when set by the name.
    background_gc: Option<usize>,
    /// `--expiry sweep`: the engine is not told of expiries.
    sweep: bool,
}

impl Halflife {
    fn new(name: &str, policy: &'static str, space_amp_target: Option<f64>) -> Halflife {
        Halflife {
            name: name.to_string(),
            policy,
            space_amp_target,
            value_log_wal: false,
            style: None,
            readahead: true,
            background_gc: None,
            sweep: false,
        }
    }
}

impl Peer for Halflife {
    fn name(&self) -> &str {
        &self.name
    }

    fn about(&self) -> &str {
        let ttl = self.space_amp_target == Some(0.0);
        match self.policy {
            "inline" => "halflife, values inline in the tree",
            "blobdb" => "halflife, value files with BlobDB-style GC (age cutoff, force threshold)",
            "titan" => "halflife, value files with Titan-style GC (garbage ratio, write-back)",
            "terark" => "halflife, TerarkDB-style GC (garbage ratio, value index maps)",
            "lifetime" if ttl => "halflife, DumpKV: TTL-triggered GC, valid values placed by an online-trained model",
            "oracle" if ttl => "halflife, DumpKV's mechanism with values placed by the true next write",
            "lifetime" => "halflife, values placed by predicted death (key history) at flush and GC, GC under a space-amplification target",
            "lifetime-nomodel" => "halflife, GC under a space-amplification target, no placement",
            "rate-oracle" => "halflife, values placed by the key's true mean write interval at flush and GC, GC under a space-amplification target",
            _ => "halflife, values placed by the true next write at flush and GC, GC under a space-amplification target",
        }
    }

    fn prepare(&self, _ctx: &PeerContext) -> Result<()> {
        Ok(())
    }

    fn command(&self, ctx: &PeerContext, run: &RunPaths, s: &EngineSettings) -> Result<Command> {
        let mut c = Command::new(&ctx.halflife_exe);
        c.arg("bench");
        driver_args(&mut c, run, s);
        c.args([
            "--name",
            &self.name,
            "--policy",
            self.policy,
            "--progress-lines",
            "--no-plot",
            // No live-bytes scans during the run: a scan pins memtables (as any
            // iterator does) and the peers run no such scans; compare takes live
            // bytes from the op file. Disk bytes are sampled (cheaply) for the space
            // amplification over the run.
            "--samples",
            "200",
            "--no-live-scans",
        ])
        .args(["--min-blob-size", &s.min_blob_size.to_string()])
        .args(["--blob-file-mb", &s.blob_file_mb.to_string()])
        .args(["--age-cutoff", &s.age_cutoff.to_string()])
        .args(["--force-threshold", &s.force_threshold.to_string()])
        .args(["--garbage-ratio", &s.garbage_ratio.to_string()]);
        if let Some(t) = self.space_amp_target {
            c.args(["--space-amp-target", &t.to_string()]);
        }
        // Explicit either way: `+vwal` names say which WAL design a column measured.
        c.args(["--value-log-wal", &self.value_log_wal.to_string()]);
        if let Some(style) = self.style {
            c.args(["--compaction-style", style]);
        }
        if !self.readahead {
            c.args(["--scan-readahead-kib", "0"]);
        }
        if let Some(n) = self.background_gc {
            c.args(["--background-gc", &n.to_string()]);
        }
        if self.sweep {
            c.args(["--expiry", "sweep"]);
        }
        Ok(c)
    }
}

/// RocksDB through its C++ API (peers/rocksdb-native/driver.cc), linked against the system
/// library: Debian's `librocksdb-dev` (RocksDB 7.8.3, the version of its `db_bench`), which
/// `prepare` installs with apt-get when the headers are missing.
struct RocksDbNative {
    blob: bool,
}

/// The system RocksDB's header, whose presence says `librocksdb-dev` is installed.
const ROCKSDB_HEADER: &str = "/usr/include/rocksdb/db.h";

impl Peer for RocksDbNative {
    fn name(&self) -> &str {
        if self.blob {
            "rocksdb-native-blob"
        } else {
            "rocksdb-native"
        }
    }

    fn about(&self) -> &str {
        if self.blob {
            "RocksDB (C++ API, system librocksdb) with integrated BlobDB"
        } else {
            "RocksDB (C++ API, system librocksdb), values in the tree"
        }
    }

    fn prepare(&self, ctx: &PeerContext) -> Result<()> {
        ensure_apt_packages(
            Path::new(ROCKSDB_HEADER),
            &["librocksdb-dev", "rocksdb-tools"],
        )?;
        let dir = ctx.peers_dir.join("rocksdb-native");
        if is_newer(&dir.join("rocksdb-driver"), &dir.join("driver.cc")) {
            return Ok(());
        }
        build_driver(
            ctx,
            "rocksdb-native",
            "driver.cc",
            "g++",
            &[
                "-O2",
                "-std=c++17",
                "-o",
                "rocksdb-driver",
                "driver.cc",
                "-lrocksdb",
            ],
        )
    }

    fn command(&self, ctx: &PeerContext, run: &RunPaths, s: &EngineSettings) -> Result<Command> {
        let mut c = Command::new(ctx.peers_dir.join("rocksdb-native/rocksdb-driver"));
        rocksdb_args(&mut c, self.name(), self.blob, run, s);
        if s.expiry {
            c.arg("--ttl");
        }
        Ok(c)
    }
}

/// Whether `built` exists and is at least as new as `source`.
fn is_newer(built: &Path, source: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((modified(built), modified(source)), (Some(b), Some(s)) if b >= s)
}

/// Installs Debian `packages` with apt-get unless `marker` (a file one of them provides)
/// exists.
pub fn ensure_apt_packages(marker: &Path, packages: &[&str]) -> Result<()> {
    if marker.exists() {
        return Ok(());
    }
    let cmdline = format!("apt-get install -y {}", packages.join(" "));
    tracing::info!("installing {} ({cmdline}) ...", packages.join(", "));
    let status = Command::new("apt-get")
        .args(["install", "-y", "-q"])
        .args(packages)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running `{cmdline}`"))?;
    if !status.success() || !marker.exists() {
        bail!(
            "could not install {} with `{cmdline}` ({status}; {} still missing): install \
             them by hand (as root) or leave the engines that need them out of --engines",
            packages.join(", "),
            marker.display()
        );
    }
    Ok(())
}

/// RocksDB through the `rocksdict` Python package: peers/rocksdb/driver.py. The native
/// driver above replaces it in the default engines (the interpreter cost a third to two
/// thirds of RocksDB's throughput); it stays for machines without root or a C++ compiler,
/// since pip alone installs it.
struct RocksDb {
    blob: bool,
}

impl Peer for RocksDb {
    fn name(&self) -> &str {
        if self.blob {
            "rocksdb-blob"
        } else {
            "rocksdb"
        }
    }

    fn about(&self) -> &str {
        if self.blob {
            "RocksDB with integrated BlobDB (rocksdict)"
        } else {
            "RocksDB, values in the tree (rocksdict)"
        }
    }

    fn prepare(&self, ctx: &PeerContext) -> Result<()> {
        ensure_rocksdict(&ctx.python)
    }

    fn command(&self, ctx: &PeerContext, run: &RunPaths, s: &EngineSettings) -> Result<Command> {
        let script = ctx.peers_dir.join("rocksdb/driver.py");
        if !script.exists() {
            bail!("{} is missing", script.display());
        }
        let mut c = Command::new(&ctx.python);
        c.arg(script);
        rocksdb_args(&mut c, self.name(), self.blob, run, s);
        Ok(c)
    }
}

/// The flags both RocksDB drivers take: the common ones, the engine name, and BlobDB's.
fn rocksdb_args(c: &mut Command, name: &str, blob: bool, run: &RunPaths, s: &EngineSettings) {
    driver_args(c, run, s);
    c.args(["--engine-name", name]);
    if blob {
        c.arg("--blob")
            .args(["--min-blob-size", &s.min_blob_size.to_string()])
            .args(["--blob-file-mb", &s.blob_file_mb.to_string()])
            .args(["--age-cutoff", &s.age_cutoff.to_string()])
            .args(["--force-threshold", &s.force_threshold.to_string()]);
    }
}

/// Installs rocksdict with pip if `import rocksdict` fails.
pub fn ensure_rocksdict(python: &str) -> Result<()> {
    let has = |py: &str| {
        Command::new(py)
            .args(["-c", "import rocksdict"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if has(python) {
        return Ok(());
    }
    tracing::info!(
        "installing the rocksdict Python package (python3 -m pip install --quiet rocksdict) ..."
    );
    let status = Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "rocksdict"])
        .status()
        .with_context(|| format!("running {python} -m pip"))?;
    if !status.success() || !has(python) {
        bail!(
            "could not install rocksdict with `{python} -m pip install rocksdict` ({status}); \
             install it by hand or leave rocksdb and rocksdb-blob out of --engines"
        );
    }
    Ok(())
}

/// The flags every driver takes: its inputs and outputs, memtable, cache, sync.
fn driver_args(c: &mut Command, run: &RunPaths, s: &EngineSettings) {
    c.arg("--ops")
        .arg(run.ops)
        .arg("--dir")
        .arg(run.dir)
        .arg("--report")
        .arg(run.report)
        .args(["--memtable-mb", &s.memtable_mb.to_string()])
        .args(["--cache-mb", &s.cache_mb.to_string()]);
    if s.sync {
        c.arg("--sync");
    }
}

/// Builds a compiled driver in `peers/<subdir>` (which must hold `marker`) with `program
/// args`, saying so on stderr.
fn build_driver(
    ctx: &PeerContext,
    subdir: &str,
    marker: &str,
    program: &str,
    args: &[&str],
) -> Result<()> {
    let dir = ctx.peers_dir.join(subdir);
    if !dir.join(marker).exists() {
        bail!("{} has no {subdir} driver", dir.display());
    }
    let cmdline = format!("{program} {}", args.join(" "));
    tracing::info!(
        "building the {subdir} driver ({cmdline} in {}) ...",
        dir.display()
    );
    let status = Command::new(program)
        .args(args)
        .current_dir(&dir)
        .status()
        .with_context(|| format!("running `{cmdline}` (is {program} installed?)"))?;
    if !status.success() {
        bail!("`{cmdline}` for the {subdir} driver failed ({status})");
    }
    Ok(())
}

/// Badger v4 through a small Go program: peers/badger, built with `go build`. Its memtable
/// holds keys and value pointers, so the driver sizes it to flush after as many writes as
/// the others' `--memtable-mb` of keys and values; otherwise no compaction runs, Badger
/// records no garbage, and its value-log GC reclaims nothing.
struct Badger;

impl Peer for Badger {
    fn name(&self) -> &str {
        "badger"
    }

    fn about(&self) -> &str {
        "Badger v4 (Go), value log with RunValueLogGC(garbage ratio) in a loop, memtable flushed as often as the others'"
    }

    fn prepare(&self, ctx: &PeerContext) -> Result<()> {
        build_driver(
            ctx,
            "badger",
            "main.go",
            "go",
            &["build", "-o", "badger-driver", "."],
        )
    }

    fn command(&self, ctx: &PeerContext, run: &RunPaths, s: &EngineSettings) -> Result<Command> {
        let mut c = Command::new(ctx.peers_dir.join("badger/badger-driver"));
        driver_args(&mut c, run, s);
        c.args(["--value-threshold", &s.min_blob_size.to_string()])
            .args(["--vlog-file-mb", &s.blob_file_mb.to_string()])
            .args(["--discard-ratio", &s.garbage_ratio.to_string()]);
        Ok(c)
    }
}

/// fjall 3 (Rust) with key-value separation: peers/fjall, built with cargo by `prepare`.
struct Fjall;

impl Peer for Fjall {
    fn name(&self) -> &str {
        "fjall"
    }

    fn about(&self) -> &str {
        "fjall 3 (Rust) with key-value separation, blob GC in compaction (staleness threshold, age cutoff)"
    }

    fn prepare(&self, ctx: &PeerContext) -> Result<()> {
        build_driver(
            ctx,
            "fjall",
            "Cargo.toml",
            "cargo",
            &["build", "--release", "--quiet"],
        )
    }

    fn command(&self, ctx: &PeerContext, run: &RunPaths, s: &EngineSettings) -> Result<Command> {
        let mut c = Command::new(ctx.peers_dir.join("fjall/target/release/fjall-driver"));
        driver_args(&mut c, run, s);
        c.args(["--min-blob-size", &s.min_blob_size.to_string()])
            .args(["--blob-file-mb", &s.blob_file_mb.to_string()])
            .args(["--age-cutoff", &s.age_cutoff.to_string()])
            .args(["--garbage-ratio", &s.garbage_ratio.to_string()]);
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_engines_by_name_in_the_given_order() {
        let e = select("rocksdb-blob, halflife-inline").unwrap();
        let names: Vec<&str> = e.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["rocksdb-blob", "halflife-inline"]);
        assert!(select("mysql")
            .err()
            .unwrap()
            .to_string()
            .contains("known engines"));
        assert!(select("").is_err());
        assert_eq!(select(DEFAULT_ENGINES).unwrap().len(), 5);
        let all: Vec<String> = all().iter().map(|p| p.name().to_string()).collect();
        assert_eq!(all, all_names());
        let e = select("halflife-lifetime@1.5,halflife-oracle@2").unwrap();
        assert_eq!(e[0].name(), "halflife-lifetime@1.5");
        assert_eq!(e[1].about(), select("halflife-oracle").unwrap()[0].about());
        assert!(select("halflife-titan@1.5").is_err());
        let e = select("halflife-titan+vwal,halflife-lifetime@1.5+vwal").unwrap();
        assert_eq!(e[0].name(), "halflife-titan+vwal");
        assert_eq!(e[1].name(), "halflife-lifetime@1.5+vwal");
        assert!(select("halflife-inline+vwal").is_err());
        let e = select("halflife-lifetime@2.0+vwal+tiered,halflife-titan+tiered").unwrap();
        assert_eq!(e[0].name(), "halflife-lifetime@2.0+vwal+tiered");
        assert_eq!(e[1].name(), "halflife-titan+tiered");
        assert!(select("halflife-lifetime+tiered+vwal").is_err());
        let e = select("halflife-lifetime+vwal+leveled").unwrap();
        assert_eq!(e[0].name(), "halflife-lifetime+vwal+leveled");
        assert!(select("halflife-nope+vwal").is_err());
        assert!(select("halflife-lifetime@0.9").is_err());
        assert!(select("halflife-lifetime@x").is_err());
    }

    #[test]
    fn no_readahead_is_the_last_suffix_and_turns_scan_readahead_off() {
        let args = |name: &str| -> Vec<String> {
            let e = select(name).unwrap();
            let ctx = PeerContext {
                halflife_exe: PathBuf::from("halflife"),
                peers_dir: PathBuf::from("peers"),
                python: "python3".into(),
            };
            let p = Path::new("x");
            let run = RunPaths {
                ops: p,
                dir: p,
                report: p,
            };
            let s = EngineSettings {
                memtable_mb: 64,
                cache_mb: 32,
                sync: false,
                min_blob_size: 512,
                blob_file_mb: 64,
                age_cutoff: 0.8,
                force_threshold: 0.2,
                garbage_ratio: 0.2,
                expiry: false,
            };
            let c = e[0].command(&ctx, &run, &s).unwrap();
            c.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let off = args("halflife-lifetime+vwal+tiered+no-readahead");
        let i = off
            .iter()
            .position(|a| a == "--scan-readahead-kib")
            .unwrap();
        assert_eq!(off[i + 1], "0");
        assert!(off
            .windows(2)
            .any(|w| w == ["--compaction-style", "tiered"]));
        assert!(off.windows(2).any(|w| w == ["--value-log-wal", "true"]));
        let on = args("halflife-lifetime+vwal");
        assert!(!on.iter().any(|a| a == "--scan-readahead-kib"));
        assert!(select("halflife-lifetime+no-readahead+vwal").is_err());
        // GC threads: last but +sweep; absent, the engine's default.
        let two = args("halflife-lifetime+vwal+leveled+no-readahead+gc2");
        assert!(two.windows(2).any(|w| w == ["--background-gc", "2"]));
        assert!(two
            .windows(2)
            .any(|w| w == ["--compaction-style", "leveled"]));
        assert!(!on.iter().any(|a| a == "--background-gc"));
        assert!(select("halflife-lifetime+vwal+gc0").is_err());
        assert!(select("halflife-lifetime+gc2+vwal").is_err());
        let sweep = args("halflife-titan+vwal+gc2+sweep");
        assert!(sweep.windows(2).any(|w| w == ["--expiry", "sweep"]));
        assert!(sweep.windows(2).any(|w| w == ["--background-gc", "2"]));
        assert!(!args("halflife-titan").iter().any(|a| a == "--expiry"));
        assert!(select("halflife-titan+sweep+vwal").is_err());
    }
}
