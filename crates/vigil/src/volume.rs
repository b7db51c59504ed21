//! The volume: the engine's [`Storage`] over the emulated PLM device (paper 001's reqd and
//! PLM driver, sec. 6.1).
//!
//! Routing by cause, decided when a file is created:
//! - WAL, manifest, CURRENT, index maps and anything else small go whole to one set: the
//!   meta-set (PLM off) when metadata is isolated, otherwise a kv-set chosen by name, as on
//!   a volume where metadata and tables share the sets;
//! - tables and value files (flush, compaction, value log, GC) are striped over the kv-sets
//!   with a parity chunk per stripe ([`crate::layout`]).
//!
//! Internal writes are committed either straight to the device (Base, SILK, PLM, I-PLM; SILK
//! paces them) or into the write cache, which devd drains into the NDWIN set (R-/O-Vigil).
//! A client read of a chunk on the set out of DTWIN is rebuilt from the same offsets on the
//! other sets and XORed, so it never waits for that set.

use crate::cache::WriteCache;
use crate::config::{Mode, VolumeConfig};
use crate::context;
use crate::layout::Layout;
use crate::sched::Sched;
use crate::stats::{Recorder, VolumeStats};
use device::{Device, DeviceError, DeviceFile, VirtualTime};
use engine::io::{IoCause, IoStats, ReadableFile, Storage, WritableFile};
use engine::{Error, Result};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_VOLUME: AtomicU64 = AtomicU64::new(1);

/// Suffix of a slot's device file: `<name>.vs<k>`.
const SLOT_SUFFIX: &str = ".vs";

fn dev_err(e: DeviceError) -> Error {
    match e {
        DeviceError::Io { path, source } => Error::io(path, source),
        DeviceError::ShortRead { ref name, .. } => Error::corruption(name.clone(), e.to_string()),
        DeviceError::NoSuchFile(ref p) => Error::io(
            p.clone(),
            std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()),
        ),
        other => Error::io("<device>", std::io::Error::other(other.to_string())),
    }
}

/// Causes whose files are striped over the kv-sets.
fn striped(cause: IoCause) -> bool {
    matches!(
        cause,
        IoCause::Flush | IoCause::Compaction | IoCause::ValueLog | IoCause::GcWrite
    )
}

/// The Vigil volume. Create it with [`VigilVolume::new`] and pass it to the engine as
/// `Options::storage`.
pub struct VigilVolume {
    inner: Arc<Inner>,
}

struct Inner {
    id: u64,
    dev: Device,
    cfg: VolumeConfig,
    root: PathBuf,
    layout: Layout,
    clock: AtomicU64,
    ctl: Mutex<Control>,
    io: IoStats,
    direct: AtomicU64,
    reconstructed: AtomicU64,
    /// Real time (ns since `epoch`) at which the current client call began; 0 when none is
    /// in progress.
    client_since: AtomicU64,
    epoch: std::time::Instant,
    /// Background threads wait for the clients' clock (see `issue`); off by default, for
    /// uses with no client driving the clock (tests, loading).
    pacing: std::sync::atomic::AtomicBool,
}

struct Control {
    sched: Sched,
    cache: WriteCache,
    rec: Recorder,
    /// SILK: next free issue instant of the flush and the compaction bandwidth.
    silk_next: [u64; 2],
}

impl VigilVolume {
    /// A volume whose engine paths live under `root` (a real directory: the engine keeps its
    /// LOCK file there) and whose file data lives on `dev`. The clock starts at the
    /// device's zero; PLM is configured for `cfg.mode`.
    pub fn new(dev: Device, root: impl Into<PathBuf>, cfg: VolumeConfig) -> Result<Arc<Self>> {
        let bad = |d: String| Error::InvalidOptions {
            name: "vigil volume",
            detail: d,
        };
        if cfg.kv_sets < 2 {
            return Err(bad("kv_sets must be at least 2".into()));
        }
        let need = cfg.kv_sets + u32::from(cfg.mode.meta_isolated());
        if dev.num_sets() < need {
            return Err(bad(format!(
                "mode {} needs {need} NVM sets, the device has {}",
                cfg.mode,
                dev.num_sets()
            )));
        }
        let ps = dev.page_size() as u64;
        if cfg.chunk_size == 0 || !cfg.chunk_size.is_multiple_of(ps) {
            return Err(bad(format!(
                "chunk_size {} must be a positive multiple of the page size {ps}",
                cfg.chunk_size
            )));
        }
        if cfg.cache_limit < cfg.kv_sets as u64 * cfg.chunk_size {
            return Err(bad(format!(
                "cache_limit {} must hold at least one stripe ({} bytes)",
                cfg.cache_limit,
                cfg.kv_sets as u64 * cfg.chunk_size
            )));
        }
        if !(cfg.extend_threshold > 0.0 && cfg.extend_threshold <= 1.0) {
            return Err(bad("extend_threshold must be in (0, 1]".into()));
        }
        let sched = Sched::new(&cfg, &dev, 0).map_err(dev_err)?;
        let inner = Inner {
            id: NEXT_VOLUME.fetch_add(1, Ordering::Relaxed),
            layout: Layout::new(cfg.kv_sets, cfg.chunk_size),
            root: root.into(),
            ctl: Mutex::new(Control {
                sched,
                cache: WriteCache::new(cfg.kv_sets as usize),
                rec: Recorder::default(),
                silk_next: [0; 2],
            }),
            dev,
            cfg,
            clock: AtomicU64::new(0),
            io: IoStats::default(),
            direct: AtomicU64::new(0),
            reconstructed: AtomicU64::new(0),
            client_since: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
            pacing: std::sync::atomic::AtomicBool::new(false),
        };
        Ok(Arc::new(VigilVolume {
            inner: Arc::new(inner),
        }))
    }

    pub fn id(&self) -> u64 {
        self.inner.id
    }

    pub fn mode(&self) -> Mode {
        self.inner.cfg.mode
    }

    pub fn config(&self) -> &VolumeConfig {
        &self.inner.cfg
    }

    pub fn device(&self) -> &Device {
        &self.inner.dev
    }

    pub fn layout(&self) -> Layout {
        self.inner.layout
    }

    /// The volume's virtual clock.
    pub fn now(&self) -> VirtualTime {
        VirtualTime::from_nanos(self.inner.clock.load(Ordering::Acquire))
    }

    /// Moves the clock to `at` (never back) and runs the schedulers up to it.
    pub fn advance(&self, at: VirtualTime) -> Result<()> {
        self.inner.clock.fetch_max(at.as_nanos(), Ordering::AcqRel);
        self.inner.tick()
    }

    /// Starts a client call arriving at `at`: advances the clock and starts this thread's
    /// device-time accounting ([`context::end_client_op`] ends it).
    pub fn begin_client_op(&self, at: VirtualTime) -> Result<()> {
        self.advance(at)?;
        context::begin_client_op(self.inner.id, at.as_nanos());
        let real = self.inner.epoch.elapsed().as_nanos() as u64;
        self.inner
            .client_since
            .store(real.max(1), Ordering::Release);
        Ok(())
    }

    /// Makes background threads keep pace with the clients' virtual clock (on while a client
    /// driver advances the clock; off while nothing does, e.g. while loading or closing).
    pub fn set_pacing(&self, on: bool) {
        self.inner.pacing.store(on, Ordering::Release);
    }

    /// Ends the client call begun on this thread; returns its device and emulator times.
    pub fn end_client_op(&self) -> context::OpTimes {
        self.inner.client_since.store(0, Ordering::Release);
        context::end_client_op()
    }

    /// Everything the volume measured so far.
    pub fn volume_stats(&self) -> VolumeStats {
        let ctl = self.inner.ctl.lock();
        VolumeStats {
            mode: self.inner.cfg.mode.name().to_string(),
            client_pieces_direct: self.inner.direct.load(Ordering::Relaxed),
            client_pieces_reconstructed: self.inner.reconstructed.load(Ordering::Relaxed),
            cache_bytes: ctl.cache.total(),
            cache_peak: ctl.cache.peak(),
            cache_limit: self.inner.cfg.cache_limit,
            cache_samples: ctl.rec.cache_samples.clone(),
            windows: ctl.rec.windows.clone(),
            written_per_bucket: ctl.rec.written_per_bucket.clone(),
            ndwin_extensions: ctl.rec.extensions,
            drained_bytes: ctl.rec.drained_bytes,
            forced_writes: ctl.rec.forced_writes,
            writer_waits: ctl.rec.writer_waits,
            forced_bytes: ctl.rec.forced_bytes,
            dtwin_broken_by_writes: ctl.rec.dtwin_broken,
            invariant_checks: ctl.rec.invariant_checks,
            invariant_violations: ctl.rec.invariant_violations,
            repairs: ctl.rec.repairs,
            dtwin_exits: (0..self.inner.cfg.kv_sets)
                .filter_map(|k| self.inner.dev.stats(k).ok())
                .map(|s| crate::stats::DtwinExits {
                    host: s.dtwin_exits_host,
                    write: s.dtwin_exits_write,
                    lockdown_broken: s.dtwin_exits_lockdown_broken,
                    time_limit: s.dtwin_exits_time_limit,
                    queue_full: s.dtwin_exits_queue_full,
                    reads_behind_internal: s.reads_behind_internal,
                })
                .collect(),
        }
    }

    /// Kv-sets the device reports in DTWIN now, and whether devd is past its boot phase.
    pub fn dtwin_sets_now(&self) -> Result<(usize, bool)> {
        let ctl = self.inner.ctl.lock();
        let n = ctl
            .sched
            .device_dtwin_count(&self.inner.dev, self.inner.clock.load(Ordering::Acquire))
            .map_err(dev_err)?;
        Ok((n, ctl.sched.steady()))
    }

    /// Reads a logical range of a striped file both ways, for tests: directly from the sets
    /// that hold it, and with every chunk rebuilt from the other sets and the parity.
    pub fn read_both_ways(
        &self,
        path: &Path,
        offset: u64,
        len: usize,
    ) -> Result<(Vec<u8>, Vec<u8>)> {
        let r = StripedReader::open(&self.inner, path)?;
        r.check_range(offset, len)?;
        let at = self.inner.clock.load(Ordering::Acquire);
        let mut direct = vec![0u8; len];
        let mut rebuilt = vec![0u8; len];
        for p in self.inner.layout.pieces(offset, len) {
            let d = &mut direct[p.buf_offset..p.buf_offset + p.len];
            r.read_piece(&p, d, at)?;
            let b = &mut rebuilt[p.buf_offset..p.buf_offset + p.len];
            r.rebuild_piece(&p, b, at)?;
        }
        Ok((direct, rebuilt))
    }

    /// Whether `path` is stored striped.
    pub fn is_striped(&self, path: &Path) -> bool {
        self.inner
            .rel(path)
            .is_ok_and(|r| self.inner.dev.file_exists(&slot_name(&r, 0)))
    }
}

fn slot_name(rel: &Path, slot: u32) -> PathBuf {
    let mut s = rel.as_os_str().to_os_string();
    s.push(format!("{SLOT_SUFFIX}{slot}"));
    PathBuf::from(s)
}

/// The logical name of a device file and its slot, if it is a slot file.
fn parse_slot(name: &Path) -> Option<(PathBuf, u32)> {
    let s = name.to_str()?;
    let i = s.rfind(SLOT_SUFFIX)?;
    let k: u32 = s[i + SLOT_SUFFIX.len()..].parse().ok()?;
    Some((PathBuf::from(&s[..i]), k))
}

impl Inner {
    fn now(&self) -> u64 {
        self.clock.load(Ordering::Acquire)
    }

    fn rel(&self, path: &Path) -> Result<PathBuf> {
        path.strip_prefix(&self.root)
            .map(Path::to_path_buf)
            .map_err(|_| Error::InvalidOptions {
                name: "vigil volume path",
                detail: format!(
                    "{} is outside the volume root {}",
                    path.display(),
                    self.root.display()
                ),
            })
    }

    fn tick(&self) -> Result<()> {
        let now = self.now();
        let mut ctl = self.ctl.lock();
        let Control {
            sched, cache, rec, ..
        } = &mut *ctl;
        sched.tick(now, &self.dev, cache, rec).map_err(dev_err)?;
        let poll = self.cfg.poll_interval.as_nanos() as u64;
        if rec.last_sample.is_none_or(|t| now >= t + poll) {
            rec.last_sample = Some(now);
            rec.cache_samples.push((now, cache.total()));
            if self.cfg.mode.scheduled() && sched.steady() {
                sched.repair(now, &self.dev, rec).map_err(dev_err)?;
                let n = sched.device_dtwin_count(&self.dev, now).map_err(dev_err)?;
                rec.invariant_checks += 1;
                // The device may already be past a lockdown devd has not seen end (its clock
                // runs ahead with requests issued later); fewer than n-1 is the violation.
                if n < self.cfg.kv_sets as usize - 1 {
                    rec.invariant_violations += 1;
                }
            }
        }
        Ok(())
    }

    /// The set a whole (unstriped) file goes to.
    fn meta_set_for(&self, rel: &Path) -> u32 {
        if self.cfg.mode.meta_isolated() {
            return self.cfg.meta_set();
        }
        let h = rel
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            });
        (h % self.cfg.kv_sets as u64) as u32
    }

    /// When this thread's next request is issued. A background thread whose requests have
    /// run ahead of the clock by more than `pace_slack` waits (in real time) for the clients
    /// to catch up, so background work proceeds at the device's pace in virtual time rather
    /// than at the CPU's; if the clock does not move for `pace_stall` (the clients are
    /// stalled, e.g. waiting for this very job), virtual time passes for them and the clock
    /// jumps to the thread's cursor.
    fn issue(&self) -> u64 {
        if !context::in_client_op() && self.pacing.load(Ordering::Acquire) {
            let slack = self.cfg.pace_slack.as_nanos() as u64;
            let started = std::time::Instant::now();
            loop {
                let now = self.now();
                let at = context::issue_time(self.id, now);
                if at <= now + slack {
                    break;
                }
                // A client call blocked for a while (a write stall) waits on background
                // work: virtual time passes for it, so do not wait for it.
                let since = self.client_since.load(Ordering::Acquire);
                let client_blocked = since != 0
                    && (self.epoch.elapsed().as_nanos() as u64).saturating_sub(since)
                        > self.cfg.pace_stall.as_nanos() as u64;
                if client_blocked || started.elapsed() >= self.cfg.pace_stall {
                    self.clock.fetch_max(at - slack, Ordering::AcqRel);
                    let _ = self.tick();
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        }
        context::issue_time(self.id, self.now())
    }

    fn done(&self, c: &device::Completion) {
        context::completed(self.id, c.done_at.as_nanos());
    }

    /// Commits a chunk already in slot `slot`'s backing file: programs it now (paced for
    /// SILK) or hands it to the write cache (Vigil).
    fn commit(
        &self,
        slot: usize,
        file: &DeviceFile,
        offset: u64,
        len: u64,
        cause: IoCause,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        if self.cfg.mode.scheduled() {
            let started = std::time::Instant::now();
            loop {
                let now = self.now();
                let mut ctl = self.ctl.lock();
                let Control {
                    sched, cache, rec, ..
                } = &mut *ctl;
                // O-Vigil honours the cache limit by holding the internal writer back (it
                // never writes to a DTWIN set); R-Vigil's fixed NDWIN overflows instead.
                let fits = cache.total() + len <= self.cfg.cache_limit;
                if fits || !self.cfg.mode.dynamic_ndwin() {
                    cache.push(slot, file.clone(), offset, len);
                    sched.tick(now, &self.dev, cache, rec).map_err(dev_err)?;
                    sched.enforce_limit(now, cache, rec).map_err(dev_err)?;
                    cache.note_peak();
                    return Ok(());
                }
                rec.writer_waits += 1;
                drop(ctl);
                self.wait_for_drain(started)?;
            }
        }
        // Pace before taking the lock: pacing may tick the schedulers.
        let mut at = self.issue();
        let mut ctl = self.ctl.lock();
        if self.cfg.mode == Mode::Silk {
            let (class, rate) = match cause {
                IoCause::Flush | IoCause::ValueLog => (0, self.cfg.silk_flush_rate),
                _ => (1, self.cfg.silk_compaction_rate),
            };
            at = at.max(ctl.silk_next[class]);
            ctl.silk_next[class] = at + len.saturating_mul(1_000_000_000) / rate.max(1);
        }
        let c = context::emulator(|| file.program(offset, len, VirtualTime::from_nanos(at)))
            .map_err(dev_err)?;
        ctl.rec.programmed(at, len);
        if c.ended_dtwin {
            ctl.rec.dtwin_broken += 1;
        }
        drop(ctl);
        self.done(&c);
        Ok(())
    }

    /// An internal writer waits for the write cache to drain. While clients drive the clock
    /// it sleeps; when nothing does (no pacing, or the client is itself stalled, perhaps on
    /// this writer), virtual time passes for the writer: the clock moves on in small steps
    /// so devd can rotate and drain.
    fn wait_for_drain(&self, started: std::time::Instant) -> Result<()> {
        let stall = self.cfg.pace_stall.as_nanos() as u64;
        let since = self.client_since.load(Ordering::Acquire);
        let client_blocked =
            since != 0 && (self.epoch.elapsed().as_nanos() as u64).saturating_sub(since) > stall;
        let driven = self.pacing.load(Ordering::Acquire) && !client_blocked;
        if driven && started.elapsed() < self.cfg.pace_stall {
            std::thread::sleep(std::time::Duration::from_micros(20));
            return Ok(());
        }
        let step = (self.cfg.poll_interval.as_nanos() as u64).max(100_000);
        self.clock.fetch_add(step, Ordering::AcqRel);
        self.tick()
    }

    fn drop_cached(&self, slot: usize, name: &Path, from: u64) {
        self.ctl.lock().cache.drop_from(slot, name, from);
    }

    fn slot_files(&self, rel: &Path) -> Result<Vec<DeviceFile>> {
        (0..self.cfg.kv_sets)
            .map(|k| self.dev.open_file(&slot_name(rel, k)).map_err(dev_err))
            .collect()
    }

    fn striped_len(&self, files: &[DeviceFile]) -> u64 {
        let lens: Vec<u64> = files.iter().map(DeviceFile::len).collect();
        self.layout.logical_len(&lens)
    }
}

// -------------------------------------------------------------------- whole files

struct WholeWriter {
    vol: Arc<Inner>,
    path: PathBuf,
    file: DeviceFile,
    cause: IoCause,
}

impl WholeWriter {
    fn record(&self, c: &device::Completion, at: u64, bytes: u64) {
        if !self.vol.cfg.mode.meta_isolated() && bytes > 0 {
            let mut ctl = self.vol.ctl.lock();
            ctl.rec.programmed(at, bytes);
            if c.ended_dtwin {
                ctl.rec.dtwin_broken += 1;
            }
        }
        self.vol.done(c);
    }
}

impl WritableFile for WholeWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let at = self.vol.issue();
        let ps = self.vol.dev.page_size() as u64;
        let before = self.file.len() / ps;
        let c = context::emulator(|| self.file.append(data, VirtualTime::from_nanos(at)))
            .map_err(dev_err)?;
        let pages = self.file.len() / ps - before;
        self.vol.io.record_write(self.cause, data.len() as u64);
        self.record(&c, at, pages * ps);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let at = self.vol.issue();
        let c =
            context::emulator(|| self.file.sync(VirtualTime::from_nanos(at))).map_err(dev_err)?;
        self.vol.io.record_sync(self.cause);
        let bytes = c.pages * self.vol.dev.page_size() as u64;
        self.record(&c, at, bytes);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.file.len()
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

struct WholeReader {
    vol: Arc<Inner>,
    path: PathBuf,
    file: DeviceFile,
    len: u64,
}

impl ReadableFile for WholeReader {
    fn read_at(&self, offset: u64, len: usize, cause: IoCause) -> Result<Vec<u8>> {
        if offset.checked_add(len as u64).is_none_or(|e| e > self.len) {
            return Err(Error::corruption(
                &self.path,
                format!(
                    "read of {len} bytes at offset {offset} past the end of the file ({} bytes)",
                    self.len
                ),
            ));
        }
        let at = self.vol.issue();
        let (buf, c) =
            context::emulator(|| self.file.read_at(offset, len, VirtualTime::from_nanos(at)))
                .map_err(dev_err)?;
        self.vol.done(&c);
        self.vol.io.record_read(cause, len as u64);
        Ok(buf)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

// -------------------------------------------------------------------- striped files

struct StripedWriter {
    vol: Arc<Inner>,
    path: PathBuf,
    files: Vec<DeviceFile>,
    cause: IoCause,
    /// Index of the stripe being filled.
    stripe: u64,
    /// Its bytes so far.
    buf: Vec<u8>,
    /// Bytes of `buf` written to the backing files (visible to readers).
    visible: usize,
    /// Bytes of `buf` whose chunks were committed (programmed or cached).
    committed: usize,
    len: u64,
}

impl StripedWriter {
    fn new(vol: Arc<Inner>, path: PathBuf, files: Vec<DeviceFile>, cause: IoCause) -> Self {
        let sb = vol.layout.stripe_bytes() as usize;
        StripedWriter {
            vol,
            path,
            files,
            cause,
            stripe: 0,
            buf: Vec::with_capacity(sb),
            visible: 0,
            committed: 0,
            len: 0,
        }
    }

    /// Cuts the slot files back to the start of the current stripe (its partial chunks are
    /// rewritten with the new bytes and a new parity).
    fn rewind(&mut self) -> Result<()> {
        let from = self.stripe * self.vol.layout.chunk;
        let at = VirtualTime::from_nanos(self.vol.now());
        for (k, f) in self.files.iter().enumerate() {
            self.vol.drop_cached(k, &f.name(), from);
            context::emulator(|| f.truncate(from, at)).map_err(dev_err)?;
        }
        self.visible = 0;
        self.committed = 0;
        Ok(())
    }

    /// Writes the current stripe's chunks to the backing files; commits them if asked.
    fn write_stripe(&mut self, commit: bool) -> Result<()> {
        if self.visible > 0 {
            self.rewind()?;
        }
        let layout = self.vol.layout;
        let chunks = layout.stripe_chunks(self.stripe, &self.buf);
        let off = self.stripe * layout.chunk;
        for (k, ch) in chunks.iter().enumerate() {
            if !ch.is_empty() {
                self.files[k].append_deferred(ch).map_err(dev_err)?;
            }
        }
        self.visible = self.buf.len();
        if commit {
            for (k, ch) in chunks.iter().enumerate() {
                self.vol
                    .commit(k, &self.files[k], off, ch.len() as u64, self.cause)?;
            }
            self.committed = self.buf.len();
        }
        Ok(())
    }
}

impl WritableFile for StripedWriter {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        let sb = self.vol.layout.stripe_bytes() as usize;
        self.len += data.len() as u64;
        self.vol.io.record_write(self.cause, data.len() as u64);
        while !data.is_empty() {
            let take = (sb - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() == sb {
                self.write_stripe(true)?;
                self.stripe += 1;
                self.buf.clear();
                self.visible = 0;
                self.committed = 0;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.buf.len() > self.visible {
            self.write_stripe(false)?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        if self.buf.len() > self.committed {
            self.write_stripe(true)?;
        }
        for f in &self.files {
            f.sync_backing().map_err(dev_err)?;
        }
        self.vol.io.record_sync(self.cause);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StripedWriter {
    fn drop(&mut self) {
        // As with plain files: appended bytes reach the backing files even without a flush.
        let _ = self.flush();
    }
}

struct StripedReader {
    vol: Arc<Inner>,
    path: PathBuf,
    files: Vec<DeviceFile>,
    len: u64,
}

impl StripedReader {
    fn open(vol: &Arc<Inner>, path: &Path) -> Result<StripedReader> {
        let rel = vol.rel(path)?;
        let files = vol.slot_files(&rel)?;
        let len = vol.striped_len(&files);
        Ok(StripedReader {
            vol: vol.clone(),
            path: path.to_path_buf(),
            files,
            len,
        })
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<()> {
        if offset.checked_add(len as u64).is_none_or(|e| e > self.len) {
            return Err(Error::corruption(
                &self.path,
                format!(
                    "read of {len} bytes at offset {offset} past the end of the file ({} bytes)",
                    self.len
                ),
            ));
        }
        Ok(())
    }

    /// Reads a piece from the set that holds it; returns the completion instant.
    fn read_piece(&self, p: &crate::layout::Piece, out: &mut [u8], at: u64) -> Result<u64> {
        let f = &self.files[p.slot as usize];
        let (b, c) =
            context::emulator(|| f.read_at(p.dev_offset, p.len, VirtualTime::from_nanos(at)))
                .map_err(dev_err)?;
        out.copy_from_slice(&b);
        Ok(c.done_at.as_nanos())
    }

    /// Rebuilds a piece from the same offsets on every other slot (data and parity).
    fn rebuild_piece(&self, p: &crate::layout::Piece, out: &mut [u8], at: u64) -> Result<u64> {
        out.fill(0);
        let mut done = at;
        for (k, f) in self.files.iter().enumerate() {
            if k == p.slot as usize {
                continue;
            }
            // A shorter chunk of the tail stripe counts as zero-padded.
            let have = f.len().saturating_sub(p.dev_offset).min(p.len as u64) as usize;
            if have == 0 {
                continue;
            }
            let (b, c) =
                context::emulator(|| f.read_at(p.dev_offset, have, VirtualTime::from_nanos(at)))
                    .map_err(dev_err)?;
            device::parity::xor_into(out, &b);
            done = done.max(c.done_at.as_nanos());
        }
        Ok(done)
    }
}

impl ReadableFile for StripedReader {
    fn read_at(&self, offset: u64, len: usize, cause: IoCause) -> Result<Vec<u8>> {
        self.check_range(offset, len)?;
        let at = self.vol.issue();
        // A client read, or any read made inside a client call (opening a table on the Get
        // path reads its footer, index and filter with cause `Other`).
        let client = cause == IoCause::ClientRead || context::in_client_op();
        let recon = if client {
            self.vol.ctl.lock().sched.reconstruct_slot()
        } else {
            None
        };
        let mut buf = vec![0u8; len];
        let mut done = at;
        for p in self.vol.layout.pieces(offset, len) {
            let out = &mut buf[p.buf_offset..p.buf_offset + p.len];
            let d = if recon == Some(p.slot as usize) {
                self.vol.reconstructed.fetch_add(1, Ordering::Relaxed);
                self.rebuild_piece(&p, out, at)?
            } else {
                if client {
                    self.vol.direct.fetch_add(1, Ordering::Relaxed);
                }
                self.read_piece(&p, out, at)?
            };
            done = done.max(d);
        }
        context::completed(self.vol.id, done);
        self.vol.io.record_read(cause, len as u64);
        Ok(buf)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

// -------------------------------------------------------------------- Storage

impl Storage for VigilVolume {
    fn create(&self, path: &Path, cause: IoCause) -> Result<Box<dyn WritableFile>> {
        let v = &self.inner;
        let rel = v.rel(path)?;
        let at = VirtualTime::from_nanos(v.now());
        if self.exists(path) {
            self.remove(path)?;
        }
        if striped(cause) {
            let mut files = Vec::with_capacity(v.cfg.kv_sets as usize);
            for k in 0..v.cfg.kv_sets {
                files.push(
                    v.dev
                        .create_file(k, &slot_name(&rel, k), at)
                        .map_err(dev_err)?,
                );
            }
            Ok(Box::new(StripedWriter::new(
                v.clone(),
                path.to_path_buf(),
                files,
                cause,
            )))
        } else {
            let file = v
                .dev
                .create_file(v.meta_set_for(&rel), &rel, at)
                .map_err(dev_err)?;
            Ok(Box::new(WholeWriter {
                vol: v.clone(),
                path: path.to_path_buf(),
                file,
                cause,
            }))
        }
    }

    fn open_append(&self, path: &Path, cause: IoCause) -> Result<Box<dyn WritableFile>> {
        let v = &self.inner;
        let rel = v.rel(path)?;
        if v.dev.file_exists(&rel) {
            let file = v.dev.open_file(&rel).map_err(dev_err)?;
            return Ok(Box::new(WholeWriter {
                vol: v.clone(),
                path: path.to_path_buf(),
                file,
                cause,
            }));
        }
        Err(Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the vigil volume appends only to whole (WAL-like) files; striped files are written once",
            ),
        ))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        let v = &self.inner;
        let rel = v.rel(path)?;
        if v.dev.file_exists(&rel) {
            let file = v.dev.open_file(&rel).map_err(dev_err)?;
            return Ok(Arc::new(WholeReader {
                vol: v.clone(),
                path: path.to_path_buf(),
                len: file.len(),
                file,
            }));
        }
        Ok(Arc::new(StripedReader::open(v, path)?))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let v = &self.inner;
        let rel = v.rel(path)?;
        let at = VirtualTime::from_nanos(v.now());
        if v.dev.file_exists(&rel) {
            let f = v.dev.open_file(&rel).map_err(dev_err)?;
            f.truncate(len, at).map_err(dev_err)?;
            return f.sync_backing().map_err(dev_err);
        }
        // Striped: keep the full stripes, rewrite the partial one with a fresh parity.
        let r = StripedReader::open(v, path)?;
        if len >= r.len {
            return Ok(());
        }
        let sb = v.layout.stripe_bytes();
        let stripe = len / sb;
        let tail = r.read_at(stripe * sb, (len - stripe * sb) as usize, IoCause::Other)?;
        let mut w = StripedWriter::new(
            v.clone(),
            path.to_path_buf(),
            r.files.clone(),
            IoCause::Other,
        );
        w.stripe = stripe;
        w.visible = 1; // force the rewind of everything past the stripe's start
        w.rewind()?;
        w.len = stripe * sb;
        w.append(&tail)?;
        w.sync()
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let v = &self.inner;
        let rel = v.rel(path)?;
        let at = VirtualTime::from_nanos(v.now());
        if v.dev.file_exists(&rel) {
            v.dev.remove_file(&rel, at).map_err(dev_err)?;
            return Ok(());
        }
        let mut found = false;
        for k in 0..v.cfg.kv_sets {
            let name = slot_name(&rel, k);
            if v.dev.file_exists(&name) {
                found = true;
                v.drop_cached(k as usize, &name, 0);
                v.dev.remove_file(&name, at).map_err(dev_err)?;
            }
        }
        if found {
            Ok(())
        } else {
            Err(dev_err(DeviceError::NoSuchFile(path.to_path_buf())))
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let v = &self.inner;
        let (rf, rt) = (v.rel(from)?, v.rel(to)?);
        let at = VirtualTime::from_nanos(v.now());
        if v.dev.file_exists(&rf) {
            if !v.dev.file_exists(&rt) && v.dev.file_exists(&slot_name(&rt, 0)) {
                self.remove(to)?;
            }
            return v.dev.rename_file(&rf, &rt, at).map_err(dev_err);
        }
        if v.dev.file_exists(&rt) {
            v.dev.remove_file(&rt, at).map_err(dev_err)?;
        }
        // A striped file whose writer died may lack its later slots: move the ones there
        // are (recovery moves such an abandoned file aside whole).
        let mut found = false;
        for k in 0..v.cfg.kv_sets {
            let name = slot_name(&rf, k);
            if v.dev.file_exists(&name) {
                found = true;
                v.drop_cached(k as usize, &name, 0);
                v.dev
                    .rename_file(&name, &slot_name(&rt, k), at)
                    .map_err(dev_err)?;
            }
        }
        if found {
            Ok(())
        } else {
            Err(dev_err(DeviceError::NoSuchFile(from.to_path_buf())))
        }
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        let v = &self.inner;
        if !v.dev.config().fsync_backing {
            return Ok(());
        }
        for k in 0..v.dev.num_sets() {
            let d = v.dev.backing_dir().join(format!("set-{k}"));
            std::fs::File::open(&d)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(&d, e))?;
        }
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let v = &self.inner;
        let rel_dir = v.rel(dir)?;
        let mut out = BTreeSet::new();
        for name in v.dev.list_files() {
            let logical = match parse_slot(&name) {
                Some((l, _)) => l,
                None => name,
            };
            if logical.parent().unwrap_or(Path::new("")) == rel_dir {
                out.insert(v.root.join(logical));
            }
        }
        Ok(out.into_iter().collect())
    }

    fn exists(&self, path: &Path) -> bool {
        let v = &self.inner;
        v.rel(path).is_ok_and(|r| {
            v.dev.file_exists(&r)
                || (0..v.cfg.kv_sets).any(|k| v.dev.file_exists(&slot_name(&r, k)))
        })
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let v = &self.inner;
        let rel = v.rel(path)?;
        if v.dev.file_exists(&rel) {
            return Ok(v.dev.open_file(&rel).map_err(dev_err)?.len());
        }
        let files = v.slot_files(&rel)?;
        Ok(v.striped_len(&files))
    }

    fn stats(&self) -> &IoStats {
        &self.inner.io
    }
}
