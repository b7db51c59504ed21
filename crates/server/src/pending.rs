//! The writes of a run of combined commands on one key while the run executes
//! ([`crate::combine`]): kept in the session, read through by the run's commands
//! ([`crate::cmd::Ctx`]), applied as one engine batch at the run's end.

use crate::record::Meta;
use crate::store::{self, Batch, Store};
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

/// The state of a run while its commands execute (kept in the session; see
/// [`crate::cmd::Ctx`]).
pub struct Pending {
    db: u8,
    key: Bytes,
    /// The run's writes so far.
    batch: RefCell<Batch>,
    /// Engine records as a read will see them once `batch` is applied: those the run wrote,
    /// and those it read (the run holds the key, so they cannot change).
    records: RefCell<HashMap<Vec<u8>, Option<Vec<u8>>>>,
}

impl Pending {
    /// A run on `key` of `db` that has written nothing yet.
    pub fn new(db: u8, key: Bytes) -> Pending {
        Pending {
            db,
            key,
            batch: RefCell::new(Batch::new()),
            records: RefCell::new(HashMap::new()),
        }
    }

    /// Whether the run is on `key` of `db`.
    pub fn covers(&self, db: u8, key: &[u8]) -> bool {
        self.db == db && self.key[..] == *key
    }

    /// The engine record `k` as it will read once the run's writes are applied.
    pub fn get(&self, store: &Store, k: &[u8]) -> engine::Result<Option<Vec<u8>>> {
        if let Some(v) = self.records.borrow().get(k) {
            return Ok(v.clone());
        }
        let v = store.db().get(k)?;
        self.records.borrow_mut().insert(k.to_vec(), v.clone());
        Ok(v)
    }

    /// Whether the engine record `k` will exist once the run's writes are applied, without
    /// reading its value unless the run has it already.
    pub fn contains(&self, store: &Store, k: &[u8]) -> engine::Result<bool> {
        match self.records.borrow().get(k) {
            Some(v) => Ok(v.is_some()),
            None => store.db().contains(k),
        }
    }

    /// The key's live metadata as it will read once the run's writes are applied.
    pub fn meta(&self, store: &Store) -> store::Result<Option<Meta>> {
        match self.get(store, &crate::record::meta_key(self.db, &self.key))? {
            Some(raw) => store::live_meta(&raw),
            None => Ok(None),
        }
    }

    /// The engine records of `[start, the end of prefix)` the run has written or read, in
    /// key order: what a scan of that range must see over the engine's (a record the run
    /// only read holds the engine's value, so merging it changes nothing).
    pub fn range(&self, start: &[u8], prefix: &[u8]) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
        self.records
            .borrow()
            .iter()
            .filter(|(k, _)| k.starts_with(prefix) && k.as_slice() >= start)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Adds a command's writes to the run.
    pub fn add(&self, b: Batch) {
        let mut records = self.records.borrow_mut();
        for (k, v) in b.records() {
            records.insert(k.to_vec(), v.map(<[u8]>::to_vec));
        }
        self.batch.borrow_mut().append(b);
    }

    /// The engine writes the run has made so far.
    pub fn writes(&self) -> usize {
        self.batch.borrow().len()
    }

    /// The run's writes, to apply as one engine batch, with one metadata record of the
    /// key: every command of the run rewrote it ([`Batch::keep_last_of`]).
    pub fn into_batch(self) -> Batch {
        let mut b = self.batch.into_inner();
        b.keep_last_of(&crate::record::meta_key(self.db, &self.key));
        b
    }
}
