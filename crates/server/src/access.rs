//! When each key was last accessed and how often: the data behind `OBJECT IDLETIME`,
//! `OBJECT FREQ` and the LRU and LFU eviction policies ([`crate::cmd::evict`]).
//!
//! Redis keeps 24 bits per object in memory: a seconds clock of the last access (LRU) or
//! a logarithmic 8-bit access counter with the minute it was last decayed (LFU). Here the
//! keys live on disk, so the access data is a table of its own, keyed by metadata key and
//! fed by the store's reads and writes ([`crate::store::Store::read`],
//! [`crate::store::Store::write`]). It keeps both the LRU clock and the LFU counter
//! whatever the policy, so that switching policies finds data of either kind; and the
//! size of the key's metadata record as last read or written, which lets the memory
//! estimate count an overwrite as the difference it makes ([`crate::maxmemory`]).
//!
//! Bounded: [`SHARDS`] shards, each a least-recently-used map under its own mutex (a
//! connection's access takes one shard's lock, so connections on different keys rarely
//! meet), each holding at most [`TABLE_BYTES`] / [`SHARDS`] bytes counted as key length
//! plus [`ENTRY_OVERHEAD`]. When a shard is full its least recently accessed key falls
//! out, and the shard remembers when that key was last accessed (its horizon). A key not
//! in the table was therefore either not accessed since the server started or last
//! accessed before its shard's horizon: [`AccessTable::peek`] answers for it with the
//! horizon (or the start), a lower bound of its idle time. Keys longer than
//! [`MAX_TRACKED_KEY`] bytes are never tracked (a client's megabyte key does not take a
//! shard's room), and read as such keys.

use lru::LruCache;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::Instant;

/// Shards of the table.
pub const SHARDS: usize = 64;
/// Bytes the whole table may hold (about 600 000 keys of 30 bytes).
pub const TABLE_BYTES: usize = 64 << 20;
/// What an entry costs beyond its key: the map's node (two links, the key's vector, the
/// entry) and its slot in the hash table.
pub const ENTRY_OVERHEAD: usize = 96;
/// Longest metadata key tracked.
pub const MAX_TRACKED_KEY: usize = 1024;
/// Redis's `LFU_INIT_VAL`: the counter of a new key, so that it is not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;
/// The seconds clock's value when the table is made. Not 0, so that a key can be given
/// an idle time older than the table (`RESTORE ... IDLETIME`) without the clock going
/// below zero: about 68 years of room either side.
const ORIGIN: u32 = 1 << 31;

/// What the table knows of one key.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The seconds clock ([`ORIGIN`] when the table was made) at the last access.
    lru: u32,
    /// The clock in minutes when the counter was last decayed.
    ldt: u32,
    counter: u8,
    /// Bytes of the key's metadata record (key and value) as last read or written.
    size: u32,
}

struct Shard {
    map: LruCache<Vec<u8>, Entry>,
    bytes: usize,
    /// The `lru` of the newest entry that fell out ([`ORIGIN`]: none did).
    horizon: u32,
}

/// A key's access data as `OBJECT` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Seconds since the last access (a lower bound for an untracked key).
    pub idle_secs: u64,
    /// The LFU counter, decayed to now.
    pub freq: u8,
    /// Whether the table holds the key (else the answer is its shard's horizon's).
    pub tracked: bool,
}

/// See the module's doc.
pub struct AccessTable {
    shards: Box<[Mutex<Shard>]>,
    start: Instant,
    /// `lfu-log-factor`.
    log_factor: AtomicU32,
    /// `lfu-decay-time`, in minutes (0: never decay).
    decay_minutes: AtomicU32,
}

impl Default for AccessTable {
    fn default() -> Self {
        AccessTable {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        map: LruCache::unbounded(),
                        bytes: 0,
                        horizon: ORIGIN,
                    })
                })
                .collect(),
            start: Instant::now(),
            log_factor: AtomicU32::new(10),
            decay_minutes: AtomicU32::new(1),
        }
    }
}

/// Redis's `LFULogIncr`: the counter grows with probability 1 / ((counter - init) *
/// factor + 1), so that it takes about factor * 10^k hits to reach the values near 255.
fn log_incr(counter: u8, factor: u32) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * factor as f64 + 1.0);
    if rand::random::<f64>() < p {
        counter + 1
    } else {
        counter
    }
}

/// Redis's `LFUDecrAndReturn`: one less per `decay` minutes elapsed since `ldt`.
fn decayed(counter: u8, ldt: u32, now_min: u32, decay: u32) -> u8 {
    let periods = now_min.saturating_sub(ldt).checked_div(decay).unwrap_or(0);
    counter.saturating_sub(periods.min(255) as u8)
}

impl AccessTable {
    fn shard(&self, mk: &[u8]) -> &Mutex<Shard> {
        &self.shards[(xxhash_rust::xxh3::xxh3_64(mk) % SHARDS as u64) as usize]
    }

    fn now(&self) -> (u32, u32) {
        let s = ORIGIN.saturating_add(self.start.elapsed().as_secs() as u32);
        (s, s / 60)
    }

    pub fn log_factor(&self) -> u32 {
        self.log_factor.load(Relaxed)
    }

    pub fn set_log_factor(&self, n: u32) {
        self.log_factor.store(n, Relaxed)
    }

    pub fn decay_minutes(&self) -> u32 {
        self.decay_minutes.load(Relaxed)
    }

    pub fn set_decay_minutes(&self, n: u32) {
        self.decay_minutes.store(n, Relaxed)
    }

    /// An access to the metadata key `mk`: its clock is now, its counter grows as Redis's
    /// does. `size` is its record's size if the access read or wrote it. Returns the size
    /// the table had for it before, if it had the key.
    pub fn touch(&self, mk: &[u8], size: Option<u32>) -> Option<u32> {
        if mk.len() > MAX_TRACKED_KEY {
            return None;
        }
        let (now, now_min) = self.now();
        let (factor, decay) = (self.log_factor(), self.decay_minutes());
        let mut sh = self.shard(mk).lock();
        if let Some(e) = sh.map.get_mut(mk) {
            let old = e.size;
            e.counter = log_incr(decayed(e.counter, e.ldt, now_min, decay), factor);
            e.ldt = now_min;
            e.lru = now;
            if let Some(n) = size {
                e.size = n;
            }
            return Some(old);
        }
        let entry = Entry {
            lru: now,
            ldt: now_min,
            counter: LFU_INIT_VAL,
            size: size.unwrap_or(0),
        };
        sh.bytes += mk.len() + ENTRY_OVERHEAD;
        sh.map.put(mk.to_vec(), entry);
        while sh.bytes > TABLE_BYTES / SHARDS {
            let Some((k, e)) = sh.map.pop_lru() else {
                break;
            };
            sh.bytes -= k.len() + ENTRY_OVERHEAD;
            sh.horizon = sh.horizon.max(e.lru);
        }
        None
    }

    /// Sets what `RESTORE ... IDLETIME s FREQ f` gives the key `mk` it restored: the last
    /// access `idle_secs` ago, the counter `freq` (decayed from now on). What is not given
    /// stays as the restoring write left it.
    pub fn restore(&self, mk: &[u8], idle_secs: Option<u64>, freq: Option<u8>) {
        if mk.len() > MAX_TRACKED_KEY || (idle_secs.is_none() && freq.is_none()) {
            return;
        }
        self.touch(mk, None);
        let (now, now_min) = self.now();
        let mut sh = self.shard(mk).lock();
        if let Some(e) = sh.map.get_mut(mk) {
            if let Some(s) = idle_secs {
                e.lru = now.saturating_sub(s.min(u32::MAX as u64) as u32);
            }
            if let Some(f) = freq {
                e.counter = f;
                e.ldt = now_min;
            }
        }
    }

    /// Forgets `mk` (its key was deleted); the size the table had for it.
    pub fn remove(&self, mk: &[u8]) -> Option<u32> {
        let mut sh = self.shard(mk).lock();
        let e = sh.map.pop(mk)?;
        sh.bytes -= mk.len() + ENTRY_OVERHEAD;
        Some(e.size)
    }

    /// Forgets every key whose metadata key starts with `prefix` (a flushed database).
    pub fn remove_prefix(&self, prefix: &[u8]) {
        for s in self.shards.iter() {
            let mut sh = s.lock();
            let gone: Vec<Vec<u8>> = sh
                .map
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, _)| k.clone())
                .collect();
            for k in gone {
                sh.map.pop(&k);
                sh.bytes -= k.len() + ENTRY_OVERHEAD;
            }
        }
    }

    /// The access data of `mk`, without counting an access (`OBJECT`, eviction's
    /// sampling).
    pub fn peek(&self, mk: &[u8]) -> Access {
        let (now, now_min) = self.now();
        let decay = self.decay_minutes();
        let sh = self.shard(mk).lock();
        match sh.map.peek(mk) {
            Some(e) => Access {
                idle_secs: now.saturating_sub(e.lru) as u64,
                freq: decayed(e.counter, e.ldt, now_min, decay),
                tracked: true,
            },
            // As a key last accessed at the horizon with a new key's counter.
            None => Access {
                idle_secs: now.saturating_sub(sh.horizon) as u64,
                freq: decayed(LFU_INIT_VAL, sh.horizon / 60, now_min, decay),
                tracked: false,
            },
        }
    }

    /// The least recently accessed key of `n` shards from `from` on (wrapping): candidates
    /// for the LRU and LFU policies that a sample of the key space may miss.
    pub fn coldest(&self, from: usize, n: usize) -> Vec<Vec<u8>> {
        (0..n.min(SHARDS))
            .filter_map(|i| {
                let sh = self.shards[(from + i) % SHARDS].lock();
                sh.map.peek_lru().map(|(k, _)| k.clone())
            })
            .collect()
    }

    /// Keys tracked (INFO).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touch_records_the_size_and_a_removal_returns_it() {
        let t = AccessTable::default();
        assert_eq!(t.touch(b"Mk", Some(10)), None);
        assert_eq!(t.touch(b"Mk", None), Some(10));
        assert_eq!(t.touch(b"Mk", Some(20)), Some(10));
        assert!(t.peek(b"Mk").tracked);
        assert_eq!(t.remove(b"Mk"), Some(20));
        assert!(!t.peek(b"Mk").tracked);
        assert_eq!(t.remove(b"Mk"), None);
    }

    #[test]
    fn a_restored_key_has_the_idle_time_and_counter_it_was_given() {
        let t = AccessTable::default();
        t.touch(b"Mk", Some(10));
        t.restore(b"Mk", Some(100_000), Some(200));
        let a = t.peek(b"Mk");
        assert!((100_000..100_010).contains(&a.idle_secs), "{a:?}");
        assert_eq!(a.freq, 200);
        // One given, the other as the restoring write left it.
        t.restore(b"Mn", None, Some(3));
        let a = t.peek(b"Mn");
        assert_eq!((a.idle_secs, a.freq), (0, 3));
        // An untracked key of a new table is idle since the table was made.
        assert_eq!(t.peek(b"Mx").idle_secs, 0);
    }

    #[test]
    fn the_counter_grows_logarithmically_and_decays_by_the_minute() {
        assert_eq!(decayed(10, 0, 5, 1), 5);
        assert_eq!(decayed(10, 0, 5, 2), 8);
        assert_eq!(decayed(10, 0, 500, 1), 0);
        assert_eq!(decayed(10, 0, 500, 0), 10, "0: no decay");
        // From the initial value, factor 10: a hundred hits make a few steps, not a hundred.
        let mut c = LFU_INIT_VAL;
        for _ in 0..100 {
            c = log_incr(c, 10);
        }
        assert!(c > LFU_INIT_VAL && c < LFU_INIT_VAL + 20, "{c}");
        assert_eq!(log_incr(255, 10), 255);
        // Factor 0: every hit counts.
        assert_eq!(log_incr(7, 0), 8);
    }

    #[test]
    fn a_full_shard_drops_its_least_recently_used_key_and_remembers_when() {
        let t = AccessTable::default();
        // Keys of one shard, until it held more than its share.
        let per_shard = TABLE_BYTES / SHARDS;
        let target = t.shard(b"M\x00first") as *const _;
        t.touch(b"M\x00first", Some(1));
        let mut n = 0usize;
        let mut i = 0u64;
        while n * (16 + ENTRY_OVERHEAD) < per_shard + 4096 {
            let k = format!("M\x00{i:014}").into_bytes();
            i += 1;
            if !std::ptr::eq(t.shard(&k), target) {
                continue;
            }
            t.touch(&k, Some(1));
            n += 1;
        }
        assert!(!t.peek(b"M\x00first").tracked, "the oldest key fell out");
        assert!(t.shards.iter().all(|s| s.lock().bytes <= per_shard));
        // A key that is too long is never tracked.
        let long = vec![b'x'; MAX_TRACKED_KEY + 1];
        t.touch(&long, Some(1));
        assert!(!t.peek(&long).tracked);
    }
}
