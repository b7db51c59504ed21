//! The key-value layer between commands and the engine: expiry-aware reads, and per-key
//! locks that make read-modify-write commands (`INCR`, `APPEND`, `SET NX`, ...) atomic with
//! respect to every other write, as they are in single-threaded Redis.
//!
//! Blind writes (a plain `SET`, `MSET`) take their keys' locks shared: they may run
//! together, since the engine orders them by sequence number and the last one wins, as it
//! would in Redis; they only wait for a read-modify-write of the same stripe, which takes
//! it exclusively. Holding an exclusive lock across a WAL sync would serialize every
//! pipeline that shares a stripe with another.

use crate::record::{self, Record, RecordError};
use engine::{WriteBatch, WriteOptions, DB};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::ops::Bound;

/// Lock stripes: writes to keys in different stripes run (and group-commit) in parallel.
const STRIPES: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Engine(#[from] engine::Error),
    #[error(transparent)]
    Record(#[from] RecordError),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A page of `SCAN`: the live keys among those examined, in key order, and the last key
/// examined if the scan did not reach the end (where the next page starts).
pub type Page = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// A value that has not expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    pub value: Vec<u8>,
    pub expire_at_ms: Option<u64>,
}

pub struct Store {
    db: DB,
    stripes: Box<[RwLock<()>]>,
}

/// Held while keys are written (shared) or read and rewritten (exclusive).
pub enum KeyLocks<'a> {
    Shared(#[allow(dead_code)] Vec<RwLockReadGuard<'a, ()>>),
    Exclusive(#[allow(dead_code)] Vec<RwLockWriteGuard<'a, ()>>),
}

impl Store {
    pub fn new(db: DB) -> Store {
        Store {
            db,
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
        }
    }

    pub fn db(&self) -> &DB {
        &self.db
    }

    pub fn into_db(self) -> DB {
        self.db
    }

    fn stripe(key: &[u8]) -> usize {
        (xxhash_rust::xxh3::xxh3_64(key) % STRIPES as u64) as usize
    }

    /// The stripes of `keys`, sorted: locks are taken in this order so that two multi-key
    /// writers cannot deadlock.
    fn stripes_of<K: AsRef<[u8]>>(keys: &[K]) -> Vec<usize> {
        let mut idx: Vec<usize> = keys.iter().map(|k| Self::stripe(k.as_ref())).collect();
        idx.sort_unstable();
        idx.dedup();
        idx
    }

    /// Locks `keys` for a read-modify-write.
    pub fn lock<'a, K: AsRef<[u8]>>(&'a self, keys: &[K]) -> KeyLocks<'a> {
        KeyLocks::Exclusive(
            Self::stripes_of(keys)
                .into_iter()
                .map(|i| self.stripes[i].write())
                .collect(),
        )
    }

    /// Locks `keys` for a blind write.
    pub fn lock_shared<'a, K: AsRef<[u8]>>(&'a self, keys: &[K]) -> KeyLocks<'a> {
        KeyLocks::Shared(
            Self::stripes_of(keys)
                .into_iter()
                .map(|i| self.stripes[i].read())
                .collect(),
        )
    }

    /// The live value of `key`. An expired value reads as absent; it is deleted when
    /// `purge` is set (the caller must then not hold the key's lock).
    pub fn read(&self, key: &[u8], purge: bool) -> Result<Option<Live>> {
        let Some(raw) = self.db.get(key)? else {
            return Ok(None);
        };
        let rec = Record::decode(&raw)?;
        let now = record::now_ms();
        if rec.is_expired(now) {
            if purge {
                self.purge_expired(key)?;
            }
            return Ok(None);
        }
        Ok(Some(Live {
            value: rec.value.to_vec(),
            expire_at_ms: rec.expire_at_ms,
        }))
    }

    /// Deletes `key` if it is (still) expired: a write in between may have revived it.
    /// Returns whether it deleted.
    fn purge_expired(&self, key: &[u8]) -> Result<bool> {
        let _g = self.lock(&[key]);
        if let Some(raw) = self.db.get(key)? {
            if Record::decode(&raw)?.is_expired(record::now_ms()) {
                self.db.delete_opt(key, &WriteOptions { sync: false })?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// One step of the active expiry sweep: examines up to `limit` keys after `after` and
    /// deletes the expired ones, so that their space goes to GC even if nobody reads them
    /// again. Returns where to continue (`None`: the end was reached, start over) and how
    /// many keys it deleted. Values that cannot be decoded are skipped (reads report them).
    pub fn sweep_expired(
        &self,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Option<Vec<u8>>, u64)> {
        let lower = match after {
            Some(k) => Bound::Excluded(k),
            None => Bound::Unbounded,
        };
        let now = record::now_ms();
        let (mut seen, mut purged) = (0, 0);
        for kv in self.db.scan(lower, Bound::Unbounded)? {
            let (k, raw) = kv?;
            if Record::decode(&raw).is_ok_and(|r| r.is_expired(now)) && self.purge_expired(&k)? {
                purged += 1;
            }
            seen += 1;
            if seen == limit {
                return Ok((Some(k), purged));
            }
        }
        Ok((None, purged))
    }

    /// Applies `batch` (built with [`record::encode`]d values).
    pub fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        Ok(self.db.write(batch, &WriteOptions { sync })?)
    }

    /// The keys of live entries, in key order, one at a time.
    ///
    /// Whether an entry is live is in its value's header (the expiry), and the engine's only
    /// iteration, [`DB::scan`], yields whole values: a value kept in a value file is read
    /// for it. The walk holds one value at a time and drops it at once, so memory stays at
    /// one value, whatever the key space; the reads remain. Iterating keys without reading
    /// separated values needs an engine API that yields, per entry, the key and either the
    /// inline value or a handle able to read the first bytes of a separated one (or an
    /// expiry the engine itself keeps); see `docs/serve.md`.
    pub fn live_keys(&self) -> Result<impl Iterator<Item = Result<Vec<u8>>> + '_> {
        let now = record::now_ms();
        Ok(self
            .db
            .scan(Bound::Unbounded, Bound::Unbounded)?
            .filter_map(move |kv| match kv {
                Err(e) => Some(Err(e.into())),
                Ok((k, raw)) => match Record::decode(&raw) {
                    Err(e) => Some(Err(e.into())),
                    Ok(r) if r.is_expired(now) => None,
                    Ok(_) => Some(Ok(k)),
                },
            }))
    }

    /// One page of `SCAN`: examines up to `examine` entries with keys after `after` (from
    /// the start if `None`), expired ones included (so a page costs at most `examine`
    /// entries even where everything has expired, and may hold fewer keys, as in Redis).
    pub fn scan_keys(&self, after: Option<&[u8]>, examine: usize) -> Result<Page> {
        let lower = match after {
            Some(k) => Bound::Excluded(k),
            None => Bound::Unbounded,
        };
        let now = record::now_ms();
        let mut out = Vec::new();
        let mut last: Option<Vec<u8>> = None;
        for (seen, kv) in self.db.scan(lower, Bound::Unbounded)?.enumerate() {
            let (k, raw) = kv?;
            if seen == examine {
                // There is more: the next page starts after the last key examined.
                return Ok((out, last));
            }
            if !Record::decode(&raw)?.is_expired(now) {
                out.push(k.clone());
            }
            last = Some(k);
        }
        Ok((out, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let t = tempfile::tempdir().unwrap();
        let db = DB::open(t.path(), engine::Options::default()).unwrap();
        (t, Store::new(db))
    }

    #[test]
    fn expired_values_read_as_absent_and_are_purged() {
        let (_t, s) = store();
        let mut b = WriteBatch::new();
        b.put(b"old", &record::encode(b"v", Some(1)));
        b.put(b"new", &record::encode(b"w", Some(u64::MAX)));
        s.write(b, false).unwrap();
        assert_eq!(s.read(b"old", true).unwrap(), None);
        assert!(s.db().get(b"old").unwrap().is_none(), "purged");
        assert_eq!(s.read(b"new", false).unwrap().unwrap().value, b"w");
        let (page, resume) = s.scan_keys(None, 10).unwrap();
        assert_eq!(resume, None);
        assert_eq!(page, vec![b"new".to_vec()]);
        assert_eq!(s.live_keys().unwrap().count(), 1);
    }

    #[test]
    fn the_sweep_deletes_expired_keys_nobody_reads() {
        let (_t, s) = store();
        let mut b = WriteBatch::new();
        for i in 0..10u8 {
            let expiry = if i % 2 == 0 { Some(1) } else { None };
            b.put(&[b'k', i], &record::encode(b"v", expiry));
        }
        s.write(b, false).unwrap();
        // Pages of 3 keys: 4 steps to the end.
        let (mut at, mut purged, mut steps) = (None, 0, 0);
        loop {
            let (next, n) = s.sweep_expired(at.as_deref(), 3).unwrap();
            purged += n;
            steps += 1;
            match next {
                Some(k) => at = Some(k),
                None => break,
            }
        }
        assert_eq!((purged, steps), (5, 4));
        let left: Vec<_> = s
            .db()
            .scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(|kv| kv.unwrap().0[1])
            .collect();
        assert_eq!(left, vec![1, 3, 5, 7, 9]);
    }

    #[test]
    fn scan_pages_resume_after_the_last_key() {
        let (_t, s) = store();
        let mut b = WriteBatch::new();
        for i in 0..5u8 {
            b.put(&[b'k', i], &record::encode(&[i], None));
        }
        s.write(b, false).unwrap();
        let (p1, resume) = s.scan_keys(None, 3).unwrap();
        assert_eq!(resume.as_deref(), Some(&[b'k', 2][..]));
        let (p2, resume) = s.scan_keys(resume.as_deref(), 3).unwrap();
        assert_eq!(resume, None);
        assert_eq!(p1.len() + p2.len(), 5);
        assert_eq!(p2[0], vec![b'k', 3]);
    }

    #[test]
    fn foreign_values_are_an_error_not_garbage() {
        let (_t, s) = store();
        s.db().put(b"k", b"raw").unwrap();
        assert!(matches!(s.read(b"k", false), Err(StoreError::Record(_))));
    }
}
