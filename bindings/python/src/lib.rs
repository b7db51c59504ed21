//! `halflife._halflife`: the engine as a Python extension module.
//!
//! Keys and values are bytes (a `str` is taken as its UTF-8 bytes). Every call that may do
//! I/O releases the GIL, so other Python threads run while the engine reads, writes or
//! waits for a WAL sync. Engine errors become `halflife.Error` with the engine's message.

use engine::{GcPolicyConfig, Options, DB as EngineDb};
use halflife_engine as engine;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};
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

/// Which engine options `DB(path, **options)` takes, with their meaning.
fn options_from(kw: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options::default();
    let Some(kw) = kw else {
        return Ok(o);
    };
    for (k, v) in kw.iter() {
        let k: String = k.extract()?;
        match k.as_str() {
            "gc" | "policy" => {
                let name: String = v.extract()?;
                o.vlog.gc = name.parse::<GcPolicyConfig>().map_err(engine_err)?;
                if o.vlog.gc.lifetime_mode().is_some_and(engine::LifetimeMode::needs_oracle) {
                    return Err(Error::new_err(format!(
                        "gc='{name}' needs the future of the workload (a benchmark's), which a Python program cannot give"
                    )));
                }
            }
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
                    "unknown option {other:?}; known: gc, memtable_mb, cache_mib, min_blob_size, blob_file_mb, sync, create_if_missing, error_if_exists, growth_factor, compaction_style, cache_warming, background_compactions, value_log_wal"
                )))
            }
        }
    }
    Ok(o)
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

    /// Stores `value` under `key`; `sync` overrides the database's default WAL sync.
    #[pyo3(signature = (key, value, sync=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let (key, value) = (bytes_arg(key)?, bytes_arg(value)?);
        let db = self.handle()?;
        let o = write_options(&db, sync);
        py.detach(|| db.put_opt(&key, &value, &o))
            .map_err(engine_err)
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
        self.put(py, key, value, None)
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

    /// An estimate (see `estimate_num_keys`): counting exactly would read every key.
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.handle()?.estimate_num_keys() as usize)
    }

    /// Estimated number of live keys from in-memory counts: overwritten keys not yet
    /// compacted count more than once.
    fn estimate_num_keys(&self) -> PyResult<u64> {
        Ok(self.handle()?.estimate_num_keys())
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<ScanIter> {
        ScanIter::open(py, self.handle()?, None, None, None, Yield::Keys)
    }

    /// Keys in order, from `start` (inclusive) to `stop` (exclusive).
    #[pyo3(signature = (start=None, stop=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        ScanIter::open(py, self.handle()?, start, stop, None, Yield::Keys)
    }

    /// Values in key order, from `start` (inclusive) to `stop` (exclusive).
    #[pyo3(signature = (start=None, stop=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        ScanIter::open(py, self.handle()?, start, stop, None, Yield::Values)
    }

    /// `(key, value)` pairs in key order, from `start` (inclusive) to `stop` (exclusive).
    #[pyo3(signature = (start=None, stop=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        ScanIter::open(py, self.handle()?, start, stop, None, Yield::Items)
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
        let json = py
            .detach(|| serde_json::to_string(&db.stats()))
            .map_err(|e| Error::new_err(format!("encoding stats: {e}")))?;
        Ok(py.import("json")?.call_method1("loads", (json,))?.unbind())
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

/// A forward iterator over a key range (of the database or of a snapshot).
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
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        snap: Option<Arc<engine::Snapshot>>,
        what: Yield,
    ) -> PyResult<ScanIter> {
        let lo = range_bound(opt_bytes(start)?, true);
        let hi = range_bound(opt_bytes(stop)?, false);
        let it = py
            .detach(|| match &snap {
                Some(s) => db.scan_at(as_ref(&lo), as_ref(&hi), s),
                None => db.scan(as_ref(&lo), as_ref(&hi)),
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
        let (db, snap) = self.parts()?;
        ScanIter::open(py, db, None, None, Some(snap), Yield::Keys)
    }

    #[pyo3(signature = (start=None, stop=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        let (db, snap) = self.parts()?;
        ScanIter::open(py, db, start, stop, Some(snap), Yield::Keys)
    }

    #[pyo3(signature = (start=None, stop=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIter> {
        let (db, snap) = self.parts()?;
        ScanIter::open(py, db, start, stop, Some(snap), Yield::Items)
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

    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (k, v) = (bytes_arg(key)?, bytes_arg(value)?);
        self.batch.lock().expect("not poisoned").put(&k, &v);
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
