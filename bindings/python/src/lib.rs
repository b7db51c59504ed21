//! `halflife._halflife`: the engine as a Python extension module.
//!
//! Keys and values are bytes (a `str` is taken as its UTF-8 bytes). Every call that may do
//! I/O releases the GIL, so other Python threads run while the engine reads, writes or
//! waits for a WAL sync. Engine errors become `halflife.Error` with the engine's message.

use engine::{Direction, GcPolicyConfig, GcTrigger, Options, ReadOptions, DB as EngineDb};
use halflife_engine as engine;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString};
use std::collections::BTreeMap;
use std::ops::Bound as Range;
use std::sync::{Arc, Mutex};

create_exception!(
    _halflife,
    Error,
    PyException,
    "An error reported by the halflife engine."
);

fn engine_err(e: engine::Error) -> PyErr {
    Error::new_err(e.to_string())
}

/// Bytes of a key or value argument: bytes, bytearray, memoryview or str (as UTF-8).
fn bytes_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    obj.extract::<Vec<u8>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "keys and values must be bytes or str, not {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })
}

fn range_bound(v: Option<Vec<u8>>, inclusive: bool) -> Range<Vec<u8>> {
    match v {
        None => Range::Unbounded,
        Some(k) if inclusive => Range::Included(k),
        Some(k) => Range::Excluded(k),
    }
}

fn as_ref(b: &Range<Vec<u8>>) -> Range<&[u8]> {
    match b {
        Range::Included(k) => Range::Included(k.as_slice()),
        Range::Excluded(k) => Range::Excluded(k.as_slice()),
        Range::Unbounded => Range::Unbounded,
    }
}

/// An open database: a mapping of bytes to bytes.
#[pyclass(module = "halflife")]
pub struct DB {
    /// `None` once closed. Iterators and snapshots hold clones; the engine shuts down when
    /// the last one goes.
    db: Mutex<Option<Arc<EngineDb>>>,
    path: String,
}

impl DB {
    fn handle(&self) -> PyResult<Arc<EngineDb>> {
        self.db
            .lock()
            .expect("not poisoned")
            .clone()
            .ok_or_else(|| Error::new_err(format!("database {} is closed", self.path)))
    }
}

/// The options `DB(path, **options)` takes (their meaning: docs/python.md).
const OPTION_NAMES: &str = "gc, age_cutoff, force_threshold, garbage_ratio, space_amp_target, background_gc, memtable_mb, cache_mib, min_blob_size, blob_file_mb, sync, create_if_missing, error_if_exists, growth_factor, compaction_style, cache_warming, background_compactions, value_log_wal";

/// Engine options from `DB(path, **options)`. The policy comes first, whatever the order
/// of the keywords: its parameters (`age_cutoff`, `garbage_ratio`, `space_amp_target`)
/// are checked against it.
fn options_from(kw: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options::default();
    let Some(kw) = kw else {
        return Ok(o);
    };
    let mut given: BTreeMap<String, Bound<'_, PyAny>> = BTreeMap::new();
    for (k, v) in kw.iter() {
        given.insert(k.extract()?, v);
    }
    if let Some(v) = given.remove("gc").or_else(|| given.remove("policy")) {
        let name: String = v.extract()?;
        o.vlog.gc = name.parse::<GcPolicyConfig>().map_err(engine_err)?;
        if o.vlog
            .gc
            .lifetime_mode()
            .is_some_and(engine::LifetimeMode::needs_oracle)
        {
            return Err(Error::new_err(format!(
                "gc='{name}' needs the future of the workload (a benchmark's), which a Python program cannot give"
            )));
        }
    }
    let policy = o.vlog.gc.name().to_string();
    let refuse = |k: &str, applies: &str| {
        PyTypeError::new_err(format!("{k} applies to {applies}, not gc='{policy}'"))
    };
    for (k, v) in &given {
        match k.as_str() {
            "age_cutoff" | "force_threshold" => match &mut o.vlog.gc {
                GcPolicyConfig::BlobDb {
                    age_cutoff,
                    force_threshold,
                } => {
                    *(if k == "age_cutoff" {
                        age_cutoff
                    } else {
                        force_threshold
                    }) = v.extract()?
                }
                _ => return Err(refuse(k, "gc='blobdb'")),
            },
            "garbage_ratio" => match &mut o.vlog.gc {
                GcPolicyConfig::Titan { garbage_ratio }
                | GcPolicyConfig::Terark { garbage_ratio } => *garbage_ratio = v.extract()?,
                _ => return Err(refuse(k, "gc='titan' and gc='terark'")),
            },
            "space_amp_target" => {
                if o.vlog.gc.lifetime_mode().is_none() {
                    return Err(refuse(k, "the lifetime policies"));
                }
                let target: f64 = v.extract()?;
                o.vlog.lifetime.trigger = if target == 0.0 {
                    GcTrigger::Ttl
                } else {
                    GcTrigger::SpaceAmp { target }
                };
            }
            "background_gc" => o.background_gc = v.extract()?,
            "memtable_mb" => o.tree.memtable_size = v.extract::<usize>()? << 20,
            "cache_mib" => o.cache.block_cache_capacity = v.extract::<usize>()? << 20,
            "min_blob_size" => o.vlog.min_blob_size = v.extract()?,
            "blob_file_mb" => o.vlog.blob_file_size = v.extract::<u64>()? << 20,
            "sync" => o.wal.sync_writes = v.extract()?,
            "create_if_missing" => o.create_if_missing = v.extract()?,
            "error_if_exists" => o.error_if_exists = v.extract()?,
            "growth_factor" => o.tree.growth_factor = v.extract()?,
            "compaction_style" => {
                let s: String = v.extract()?;
                o.tree.compaction_style = s.parse().map_err(engine_err)?;
            }
            "cache_warming" => {
                let s: String = v.extract()?;
                o.cache.cache_warming = s.parse().map_err(engine_err)?;
            }
            "background_compactions" => o.background_compactions = v.extract()?,
            "value_log_wal" => o.wal.value_log_wal = v.extract()?,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "unknown option {other:?}; known: {OPTION_NAMES}"
                )))
            }
        }
    }
    Ok(o)
}

/// The bounds of a scan: `[start, stop)`, or the keys starting with `prefix`.
fn scan_bounds(
    start: Option<&Bound<'_, PyAny>>,
    stop: Option<&Bound<'_, PyAny>>,
    prefix: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Range<Vec<u8>>, Range<Vec<u8>>)> {
    match opt_bytes(prefix)? {
        Some(p) => {
            if opt_bytes(start)?.is_some() || opt_bytes(stop)?.is_some() {
                return Err(PyValueError::new_err(
                    "prefix= is a range of its own: not with start= or stop=",
                ));
            }
            Ok(engine::prefix_bounds(&p))
        }
        None => Ok((
            range_bound(opt_bytes(start)?, true),
            range_bound(opt_bytes(stop)?, false),
        )),
    }
}

/// The expiry time (ms since the epoch) of `ttl` seconds from now or of `expire_at`
/// (seconds since the epoch), if one is given.
fn expiry_ms(ttl: Option<f64>, expire_at: Option<f64>) -> PyResult<Option<u64>> {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    };
    let at = match (ttl, expire_at) {
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err("give ttl= or expire_at=, not both"))
        }
        (Some(t), None) if t > 0.0 && t.is_finite() => now() + t,
        (Some(t), None) => {
            return Err(PyValueError::new_err(format!(
                "ttl={t}: a positive number of seconds"
            )))
        }
        (None, Some(at)) if at.is_finite() && at >= 0.0 => at,
        (None, Some(at)) => {
            return Err(PyValueError::new_err(format!(
                "expire_at={at}: seconds since the epoch"
            )))
        }
        (None, None) => return Ok(None),
    };
    Ok(Some((at * 1000.0).ceil() as u64))
}

/// Serialized engine reports as Python objects.
fn to_py(py: Python<'_>, v: &impl serde::Serialize) -> PyResult<Py<PyAny>> {
    let json =
        serde_json::to_string(v).map_err(|e| Error::new_err(format!("encoding a report: {e}")))?;
    Ok(py.import("json")?.call_method1("loads", (json,))?.unbind())
}

/// The keys of a Python iterable, as bytes.
fn keys_arg(keys: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    keys.try_iter()?.map(|k| bytes_arg(&k?)).collect()
}

#[pymethods]
impl DB {
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<DB> {
        let opts = options_from(options)?;
        let shown = path.display().to_string();
        let db = py
            .detach(|| EngineDb::open(&path, opts))
            .map_err(|e| Error::new_err(format!("opening {shown}: {e}")))?;
        Ok(DB {
            db: Mutex::new(Some(Arc::new(db))),
            path: shown,
        })
    }

    /// The value of `key`, or `default`.
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let key = bytes_arg(key)?;
        let db = self.handle()?;
        match py.detach(|| db.get(&key)).map_err(engine_err)? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// Stores `value` under `key`; `sync` overrides the database's default WAL sync. With
    /// `ttl` (seconds from now) or `expire_at` (seconds since the epoch) the key reads as
    /// absent from then on, and the engine drops the value.
    #[pyo3(signature = (key, value, sync=None, *, ttl=None, expire_at=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: Option<bool>,
        ttl: Option<f64>,
        expire_at: Option<f64>,
    ) -> PyResult<()> {
        let (key, value) = (bytes_arg(key)?, bytes_arg(value)?);
        let at = expiry_ms(ttl, expire_at)?;
        let db = self.handle()?;
        let o = write_options(&db, sync);
        py.detach(|| match at {
            None => db.put_opt(&key, &value, &o),
            Some(at) => {
                let mut b = engine::WriteBatch::new();
                b.put_with_expiry(&key, &value, at);
                db.write(b, &o)
            }
        })
        .map_err(engine_err)
    }

    /// The values of `keys`, in their order (`default` where absent), read in one call.
    #[pyo3(signature = (keys, default=None))]
    fn get_many(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyList>> {
        let keys = keys_arg(keys)?;
        let db = self.handle()?;
        let values = py
            .detach(|| {
                keys.iter()
                    .map(|k| db.get(k))
                    .collect::<engine::Result<Vec<_>>>()
            })
            .map_err(engine_err)?;
        values_list(py, values, default)
    }

    /// The present keys of `keys` and their values, as a dict (absent keys left out).
    fn multi_get(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Py<PyDict>> {
        let keys = keys_arg(keys)?;
        let db = self.handle()?;
        let values = py
            .detach(|| {
                keys.iter()
                    .map(|k| db.get(k))
                    .collect::<engine::Result<Vec<_>>>()
            })
            .map_err(engine_err)?;
        found_dict(py, keys, values)
    }

    /// Deletes every key in `[start, stop)` at once (one atomic batch of a tombstone per
    /// live key); returns how many were deleted.
    #[pyo3(signature = (start, stop, sync=None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        sync: Option<bool>,
    ) -> PyResult<u64> {
        let (start, stop) = (bytes_arg(start)?, bytes_arg(stop)?);
        let db = self.handle()?;
        let o = write_options(&db, sync);
        py.detach(|| db.delete_range(&start, &stop, &o))
            .map_err(engine_err)
    }

    /// A consistent, openable copy of the database in the new directory `path` (hard
    /// links where it can): every write acknowledged before the call is in it.
    fn checkpoint(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<Py<PyAny>> {
        let db = self.handle()?;
        let info = py.detach(|| db.checkpoint(&path)).map_err(engine_err)?;
        to_py(py, &info)
    }

    /// Deletes `key` (absent keys are fine).
    #[pyo3(signature = (key, sync=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: Option<bool>) -> PyResult<()> {
        let key = bytes_arg(key)?;
        let db = self.handle()?;
        let o = write_options(&db, sync);
        py.detach(|| db.delete_opt(&key, &o)).map_err(engine_err)
    }

    /// Applies every operation of `batch` atomically.
    #[pyo3(signature = (batch, sync=None))]
    fn write(&self, py: Python<'_>, batch: &WriteBatch, sync: Option<bool>) -> PyResult<()> {
        let db = self.handle()?;
        let b = batch.batch.lock().expect("not poisoned").clone();
        let o = write_options(&db, sync);
        py.detach(|| db.write(b, &o)).map_err(engine_err)
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let k = bytes_arg(key)?;
        let db = self.handle()?;
        match py.detach(|| db.get(&k)).map_err(engine_err)? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, None, None, None)
    }

    /// `del db[key]` raises `KeyError` for an absent key, as a dict does.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        if !self.__contains__(py, key)? {
            return Err(PyKeyError::new_err(key.clone().unbind()));
        }
        self.delete(py, key, None)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = bytes_arg(key)?;
        let db = self.handle()?;
        Ok(py.detach(|| db.get(&k)).map_err(engine_err)?.is_some())
    }

    /// Estimated number of live keys from in-memory counts: overwritten keys not yet
    /// compacted count more than once. (There is no `len()`: an exact count reads every
    /// key, and an estimate is not a length.)
    fn estimate_num_keys(&self) -> PyResult<u64> {
        Ok(self.handle()?.estimate_num_keys())
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<ScanIter> {
        ScanIter::open(py, self.handle()?, Scan::all(), None, Yield::Keys)
    }

    /// Keys in order, from `start` (inclusive) to `stop` (exclusive), or those starting
    /// with `prefix`; descending with `reverse`.
    #[pyo3(signature = (start=None, stop=None, *, reverse=false, prefix=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        let scan = Scan::new(start, stop, prefix, reverse)?;
        ScanIter::open(py, self.handle()?, scan, None, Yield::Keys)
    }

    /// Values in key order, over the same ranges as `keys`.
    #[pyo3(signature = (start=None, stop=None, *, reverse=false, prefix=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        let scan = Scan::new(start, stop, prefix, reverse)?;
        ScanIter::open(py, self.handle()?, scan, None, Yield::Values)
    }

    /// `(key, value)` pairs in key order, over the same ranges as `keys`.
    #[pyo3(signature = (start=None, stop=None, *, reverse=false, prefix=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        let scan = Scan::new(start, stop, prefix, reverse)?;
        ScanIter::open(py, self.handle()?, scan, None, Yield::Items)
    }

    /// A cursor over `[start, stop)` (or the keys starting with `prefix`) that seeks to
    /// any key and steps both ways, all as of this call.
    #[pyo3(signature = (start=None, stop=None, *, prefix=None))]
    fn iter(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Cursor> {
        Cursor::open(py, self.handle()?, scan_bounds(start, stop, prefix)?, None)
    }

    /// A consistent read-only view as of now.
    fn snapshot(&self) -> PyResult<Snapshot> {
        let db = self.handle()?;
        let snap = db.snapshot();
        Ok(Snapshot {
            inner: Mutex::new(Some((db, Arc::new(snap)))),
        })
    }

    /// Engine statistics (bytes written by cause, amplification, levels, value files, GC
    /// and model state) as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let db = self.handle()?;
        let stats = py.detach(|| db.stats());
        to_py(py, &stats)
    }

    /// Writes the memtable to a table file.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.handle()?;
        py.detach(|| db.flush()).map_err(engine_err)
    }

    /// Compacts the key range (everything by default) down the levels.
    #[pyo3(signature = (start=None, stop=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (s, e) = (opt_bytes(start)?, opt_bytes(stop)?);
        let db = self.handle()?;
        py.detach(|| db.compact_range(s.as_deref(), e.as_deref()))
            .map_err(engine_err)
    }

    /// Waits until no flush, compaction or GC is pending.
    fn wait_idle(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.handle()?;
        py.detach(|| db.wait_idle()).map_err(engine_err)
    }

    /// Syncs the WAL: every write so far is durable.
    fn sync_wal(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.handle()?;
        py.detach(|| db.sync_wal()).map_err(engine_err)
    }

    /// Closes the database. Open iterators and snapshots keep the engine running until
    /// they are gone; the database object itself is unusable from now on.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(db) = self.db.lock().expect("not poisoned").take() else {
            return Ok(());
        };
        match Arc::try_unwrap(db) {
            Ok(db) => py.detach(|| db.close()).map_err(engine_err),
            // Dropped (and shut down) with the last iterator or snapshot.
            Err(_) => Ok(()),
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.db.lock().expect("not poisoned").is_none()
    }

    #[getter]
    fn path(&self) -> String {
        self.path.clone()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Py<PyAny>,
        _v: Py<PyAny>,
        _tb: Py<PyAny>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "halflife.DB({:?}{})",
            self.path,
            if self.closed() { ", closed" } else { "" }
        )
    }
}

/// `sync` if given, else the database's default.
fn write_options(db: &EngineDb, sync: Option<bool>) -> engine::WriteOptions {
    engine::WriteOptions {
        sync: sync.unwrap_or(db.options().wal.sync_writes),
    }
}

fn opt_bytes(o: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    o.filter(|v| !v.is_none()).map(bytes_arg).transpose()
}

#[derive(Clone, Copy)]
enum Yield {
    Keys,
    Values,
    Items,
}

/// The range and direction of a scan.
struct Scan {
    lower: Range<Vec<u8>>,
    upper: Range<Vec<u8>>,
    dir: Direction,
}

impl Scan {
    fn all() -> Scan {
        Scan {
            lower: Range::Unbounded,
            upper: Range::Unbounded,
            dir: Direction::Forward,
        }
    }

    fn new(
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Scan> {
        let (lower, upper) = scan_bounds(start, stop, prefix)?;
        Ok(Scan {
            lower,
            upper,
            dir: if reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
        })
    }
}

/// An iterator over a key range (of the database or of a snapshot), either way.
#[pyclass(module = "halflife", unsendable)]
pub struct ScanIter {
    it: engine::DbIter,
    what: Yield,
    // Keep the engine (and the snapshot) alive while iterating.
    _db: Arc<EngineDb>,
    _snap: Option<Arc<engine::Snapshot>>,
}

impl ScanIter {
    fn open(
        py: Python<'_>,
        db: Arc<EngineDb>,
        scan: Scan,
        snap: Option<Arc<engine::Snapshot>>,
        what: Yield,
    ) -> PyResult<ScanIter> {
        let it = py
            .detach(|| {
                db.scan_dir(
                    as_ref(&scan.lower),
                    as_ref(&scan.upper),
                    snap.as_deref(),
                    &ReadOptions::default(),
                    scan.dir,
                )
            })
            .map_err(engine_err)?;
        Ok(ScanIter {
            it,
            what,
            _db: db,
            _snap: snap,
        })
    }
}

#[pymethods]
impl ScanIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        // Reading the next entry may read a table block or a value file: not under the
        // GIL. (The iterator is `unsendable`, so it stays on this thread.)
        let next = {
            let it = &mut self.it;
            py.detach(move || it.next())
        };
        match next {
            None => Ok(None),
            Some(Err(e)) => Err(engine_err(e)),
            Some(Ok((k, v))) => Ok(Some(match self.what {
                Yield::Keys => PyBytes::new(py, &k).into_any().unbind(),
                Yield::Values => PyBytes::new(py, &v).into_any().unbind(),
                Yield::Items => (PyBytes::new(py, &k), PyBytes::new(py, &v))
                    .into_pyobject(py)?
                    .into_any()
                    .unbind(),
            })),
        }
    }
}

/// A cursor over a key range that seeks to any key and steps both ways (rocksdict's and
/// RocksDB's iterator), from one view of the database taken when it was made.
#[pyclass(module = "halflife", unsendable)]
pub struct Cursor {
    cursor: engine::Cursor,
    _db: Arc<EngineDb>,
    _snap: Option<Arc<engine::Snapshot>>,
}

impl Cursor {
    fn open(
        py: Python<'_>,
        db: Arc<EngineDb>,
        (lower, upper): (Range<Vec<u8>>, Range<Vec<u8>>),
        snap: Option<Arc<engine::Snapshot>>,
    ) -> PyResult<Cursor> {
        let cursor = py
            .detach(|| {
                db.cursor(
                    as_ref(&lower),
                    as_ref(&upper),
                    snap.as_deref(),
                    &ReadOptions::default(),
                )
            })
            .map_err(engine_err)?;
        Ok(Cursor {
            cursor,
            _db: db,
            _snap: snap,
        })
    }

    /// Runs a move without the GIL.
    fn go(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut engine::Cursor) -> engine::Result<()> + Send,
    ) -> PyResult<()> {
        let c = &mut self.cursor;
        py.detach(move || f(c)).map_err(engine_err)
    }
}

#[pymethods]
impl Cursor {
    /// To the first key of the range.
    fn seek_to_first(&mut self, py: Python<'_>) -> PyResult<()> {
        self.go(py, |c| c.seek_to_first())
    }

    /// To the last key of the range.
    fn seek_to_last(&mut self, py: Python<'_>) -> PyResult<()> {
        self.go(py, |c| c.seek_to_last())
    }

    /// To the first key at or after `key`.
    fn seek(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = bytes_arg(key)?;
        self.go(py, move |c| c.seek(&k))
    }

    /// To the last key at or before `key`.
    fn seek_for_prev(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = bytes_arg(key)?;
        self.go(py, move |c| c.seek_for_prev(&k))
    }

    /// To the next key (invalid past the last).
    fn next(&mut self, py: Python<'_>) -> PyResult<()> {
        self.go(py, |c| c.next())
    }

    /// To the previous key (invalid before the first).
    fn prev(&mut self, py: Python<'_>) -> PyResult<()> {
        self.go(py, |c| c.prev())
    }

    /// Whether it stands on a key.
    fn valid(&self) -> bool {
        self.cursor.valid()
    }

    /// The key it stands on (`None` when not valid).
    fn key(&self, py: Python<'_>) -> Option<Py<PyBytes>> {
        self.cursor.key().map(|k| PyBytes::new(py, k).unbind())
    }

    /// The value of the key it stands on (`None` when not valid).
    fn value(&self, py: Python<'_>) -> Option<Py<PyBytes>> {
        self.cursor.value().map(|v| PyBytes::new(py, v).unbind())
    }
}

/// `values` as a list, `default` for the absent ones.
fn values_list(
    py: Python<'_>,
    values: Vec<Option<Vec<u8>>>,
    default: Option<Py<PyAny>>,
) -> PyResult<Py<PyList>> {
    let items: Vec<Py<PyAny>> = values
        .into_iter()
        .map(|v| match v {
            Some(v) => PyBytes::new(py, &v).into_any().unbind(),
            None => default
                .as_ref()
                .map_or_else(|| py.None(), |d| d.clone_ref(py)),
        })
        .collect();
    Ok(PyList::new(py, items)?.unbind())
}

/// The keys found, with their values, as a dict.
fn found_dict(
    py: Python<'_>,
    keys: Vec<Vec<u8>>,
    values: Vec<Option<Vec<u8>>>,
) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in keys.into_iter().zip(values) {
        if let Some(v) = v {
            d.set_item(PyBytes::new(py, &k), PyBytes::new(py, &v))?;
        }
    }
    Ok(d.unbind())
}

/// A point-in-time read-only view; release it with `close()` or a `with` block.
#[pyclass(module = "halflife")]
pub struct Snapshot {
    inner: Mutex<Option<(Arc<EngineDb>, Arc<engine::Snapshot>)>>,
}

impl Snapshot {
    fn parts(&self) -> PyResult<(Arc<EngineDb>, Arc<engine::Snapshot>)> {
        self.inner
            .lock()
            .expect("not poisoned")
            .clone()
            .ok_or_else(|| Error::new_err("snapshot is released"))
    }

    fn scan(&self, py: Python<'_>, scan: Scan, what: Yield) -> PyResult<ScanIter> {
        let (db, snap) = self.parts()?;
        ScanIter::open(py, db, scan, Some(snap), what)
    }
}

#[pymethods]
impl Snapshot {
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let key = bytes_arg(key)?;
        let (db, snap) = self.parts()?;
        match py.detach(|| db.get_at(&key, &snap)).map_err(engine_err)? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    #[pyo3(signature = (keys, default=None))]
    fn get_many(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyList>> {
        let keys = keys_arg(keys)?;
        let (db, snap) = self.parts()?;
        let values = py
            .detach(|| {
                keys.iter()
                    .map(|k| db.get_at(k, &snap))
                    .collect::<engine::Result<Vec<_>>>()
            })
            .map_err(engine_err)?;
        values_list(py, values, default)
    }

    fn multi_get(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Py<PyDict>> {
        let keys = keys_arg(keys)?;
        let (db, snap) = self.parts()?;
        let values = py
            .detach(|| {
                keys.iter()
                    .map(|k| db.get_at(k, &snap))
                    .collect::<engine::Result<Vec<_>>>()
            })
            .map_err(engine_err)?;
        found_dict(py, keys, values)
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let v = self.get(py, key, None)?;
        if v.is_none(py) {
            return Err(PyKeyError::new_err(key.clone().unbind()));
        }
        Ok(v)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(!self.get(py, key, None)?.is_none(py))
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<ScanIter> {
        self.scan(py, Scan::all(), Yield::Keys)
    }

    #[pyo3(signature = (start=None, stop=None, *, reverse=false, prefix=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        self.scan(py, Scan::new(start, stop, prefix, reverse)?, Yield::Keys)
    }

    #[pyo3(signature = (start=None, stop=None, *, reverse=false, prefix=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        self.scan(py, Scan::new(start, stop, prefix, reverse)?, Yield::Values)
    }

    #[pyo3(signature = (start=None, stop=None, *, reverse=false, prefix=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        self.scan(py, Scan::new(start, stop, prefix, reverse)?, Yield::Items)
    }

    #[pyo3(signature = (start=None, stop=None, *, prefix=None))]
    fn iter(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Cursor> {
        let (db, snap) = self.parts()?;
        Cursor::open(py, db, scan_bounds(start, stop, prefix)?, Some(snap))
    }

    /// Releases the snapshot (compaction may then drop the versions it kept).
    fn close(&self) {
        self.inner.lock().expect("not poisoned").take();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, _t: Py<PyAny>, _v: Py<PyAny>, _tb: Py<PyAny>) -> bool {
        self.close();
        false
    }
}

/// A backup directory of incremental backups (files shared between backups are copied
/// once), locked while this is open.
#[pyclass(module = "halflife")]
pub struct BackupEngine {
    engine: Mutex<Option<engine::backup::BackupEngine>>,
}

impl BackupEngine {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&engine::backup::BackupEngine) -> engine::Result<T> + Send,
    ) -> PyResult<T> {
        let guard = self.engine.lock().expect("not poisoned");
        let be = guard
            .as_ref()
            .ok_or_else(|| Error::new_err("backup engine is closed"))?;
        py.detach(|| f(be)).map_err(engine_err)
    }
}

#[pymethods]
impl BackupEngine {
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf) -> PyResult<BackupEngine> {
        let be = py
            .detach(|| engine::backup::BackupEngine::open(&path))
            .map_err(engine_err)?;
        Ok(BackupEngine {
            engine: Mutex::new(Some(be)),
        })
    }

    /// Backs up `db` while it runs (every write acknowledged before the call is in it);
    /// returns the new backup's id, sequence number and what was copied.
    fn create(&self, py: Python<'_>, db: &DB) -> PyResult<Py<PyAny>> {
        let db = db.handle()?;
        let r = self.with(py, |be| be.create(&db))?;
        let d = PyDict::new(py);
        d.set_item("id", r.meta.id)?;
        d.set_item("sequence", r.meta.sequence)?;
        d.set_item("files", r.meta.files.len())?;
        d.set_item("bytes", r.meta.bytes())?;
        d.set_item("copied", r.copied)?;
        d.set_item("reused", r.reused)?;
        d.set_item("bytes_written", r.bytes_written)?;
        Ok(d.into_any().unbind())
    }

    /// Every backup's metadata (id, timestamp, sequence, files), oldest first.
    fn list(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let metas = self.with(py, |be| be.list())?;
        to_py(py, &metas)
    }

    /// Checks every file of backup `id` against its size and checksum.
    fn verify(&self, py: Python<'_>, id: u64) -> PyResult<Py<PyAny>> {
        let meta = self.with(py, |be| be.verify(id))?;
        to_py(py, &meta)
    }

    /// Restores backup `id` (the latest by default) into the new directory `path`.
    #[pyo3(signature = (path, id=None))]
    fn restore(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        id: Option<u64>,
    ) -> PyResult<Py<PyAny>> {
        let meta = self.with(py, |be| be.restore(id, &path))?;
        to_py(py, &meta)
    }

    /// Deletes all but the newest `keep` backups and the files only they held; returns
    /// the ids deleted.
    fn purge_old(&self, py: Python<'_>, keep: usize) -> PyResult<Vec<u64>> {
        self.with(py, |be| be.purge_old(keep))
    }

    /// Releases the backup directory's lock.
    fn close(&self) {
        self.engine.lock().expect("not poisoned").take();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, _t: Py<PyAny>, _v: Py<PyAny>, _tb: Py<PyAny>) -> bool {
        self.close();
        false
    }
}

/// Puts and deletes applied together by `DB.write`.
#[pyclass(module = "halflife")]
pub struct WriteBatch {
    batch: Mutex<engine::WriteBatch>,
}

#[pymethods]
impl WriteBatch {
    #[new]
    fn new() -> WriteBatch {
        WriteBatch {
            batch: Mutex::new(engine::WriteBatch::new()),
        }
    }

    /// A put, expiring with `ttl` (seconds from now) or at `expire_at` (seconds since the
    /// epoch) if given.
    #[pyo3(signature = (key, value, *, ttl=None, expire_at=None))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<f64>,
        expire_at: Option<f64>,
    ) -> PyResult<()> {
        let (k, v) = (bytes_arg(key)?, bytes_arg(value)?);
        let mut b = self.batch.lock().expect("not poisoned");
        match expiry_ms(ttl, expire_at)? {
            None => b.put(&k, &v),
            Some(at) => b.put_with_expiry(&k, &v, at),
        }
        Ok(())
    }

    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = bytes_arg(key)?;
        self.batch.lock().expect("not poisoned").delete(&k);
        Ok(())
    }

    fn clear(&self) {
        *self.batch.lock().expect("not poisoned") = engine::WriteBatch::new();
    }

    /// Number of operations.
    fn __len__(&self) -> usize {
        self.batch.lock().expect("not poisoned").iter().count()
    }
}

#[pymodule]
fn _halflife(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DB>()?;
    m.add_class::<Snapshot>()?;
    m.add_class::<WriteBatch>()?;
    m.add_class::<ScanIter>()?;
    m.add_class::<Cursor>()?;
    m.add_class::<BackupEngine>()?;
    m.add("Error", m.py().get_type::<Error>())?;
    m.add(
        "POLICIES",
        GcPolicyConfig::NAMES
            .iter()
            .filter(|n| {
                n.parse::<GcPolicyConfig>().is_ok_and(|g| {
                    !g.lifetime_mode()
                        .is_some_and(engine::LifetimeMode::needs_oracle)
                })
            })
            .copied()
            .collect::<Vec<_>>(),
    )?;
    Ok(())
}
