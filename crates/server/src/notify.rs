//! Keyspace notifications (`notify-keyspace-events`): a command that changes a key tells
//! subscribers of `__keyspace@<db>__:<key>` (the event's name) and `__keyevent@<db>__:<event>`
//! (the key's name), for the classes of events that are switched on, as Redis does.
//!
//! A command's events are collected while it runs and published after its writes are
//! applied (after the whole run of combined commands, [`crate::combine`]), so a subscriber
//! that reads the key on an event sees the change. When no class is on, noting an event is
//! one atomic load.
//!
//! Expired keys: a collection's expiry is the server's (its metadata record's header), so
//! a read or the background sweep that deletes an expired collection publishes `expired`.
//! A string's expiry is the engine's: the engine hides it by itself, so the server tracks,
//! while the `expired` class is on, the strings written with an expiry ([`Expiries`]) and
//! deletes and announces each when its time comes (on a read of it, or from the sweep).
//! Strings given an expiry while the class was off (or before a restart) expire silently.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

bitflags::bitflags! {
    /// Redis's event classes and where events go.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Class: u32 {
        const KEYSPACE = 1 << 0;
        const KEYEVENT = 1 << 1;
        const GENERIC = 1 << 2;
        const STRING = 1 << 3;
        const LIST = 1 << 4;
        const SET = 1 << 5;
        const HASH = 1 << 6;
        const ZSET = 1 << 7;
        const EXPIRED = 1 << 8;
        const EVICTED = 1 << 9;
        const STREAM = 1 << 10;
        const KEY_MISS = 1 << 11;
        const MODULE = 1 << 12;
        const NEW = 1 << 13;
        /// Redis's `A`.
        const ALL = Self::GENERIC.bits() | Self::STRING.bits() | Self::LIST.bits()
            | Self::SET.bits() | Self::HASH.bits() | Self::ZSET.bits() | Self::EXPIRED.bits()
            | Self::EVICTED.bits() | Self::STREAM.bits() | Self::MODULE.bits();
    }
}

/// The letters of `notify-keyspace-events`, in the order Redis prints them.
const LETTERS: &[(char, Class)] = &[
    ('g', Class::GENERIC),
    ('$', Class::STRING),
    ('l', Class::LIST),
    ('s', Class::SET),
    ('h', Class::HASH),
    ('z', Class::ZSET),
    ('x', Class::EXPIRED),
    ('e', Class::EVICTED),
    ('t', Class::STREAM),
    ('d', Class::MODULE),
    ('n', Class::NEW),
];

/// Parses Redis's letters (`KEA`, `Ex`, ...); `None` for an unknown letter.
pub fn parse(s: &str) -> Option<Class> {
    let mut c = Class::empty();
    for ch in s.chars() {
        c |= match ch {
            'A' => Class::ALL,
            'K' => Class::KEYSPACE,
            'E' => Class::KEYEVENT,
            'm' => Class::KEY_MISS,
            _ => LETTERS.iter().find(|(l, _)| *l == ch)?.1,
        };
    }
    Some(c)
}

/// The letters of `c` as `CONFIG GET` shows them (Redis's order, `A` for all classes).
pub fn render(c: Class) -> String {
    let mut s = String::new();
    if c.contains(Class::ALL) {
        s.push('A');
        if c.contains(Class::NEW) {
            s.push('n');
        }
    } else {
        for (l, f) in LETTERS {
            if c.contains(*f) {
                s.push(*l);
            }
        }
    }
    for (l, f) in [
        ('K', Class::KEYSPACE),
        ('E', Class::KEYEVENT),
        ('m', Class::KEY_MISS),
    ] {
        if c.contains(f) {
            s.push(l);
        }
    }
    s
}

/// The setting (in [`crate::shared::Shared`]).
#[derive(Default)]
pub struct Notifier {
    classes: AtomicU32,
}

impl Notifier {
    pub fn classes(&self) -> Class {
        Class::from_bits_truncate(self.classes.load(Relaxed))
    }

    /// Sets the classes; `expiries` (the store's) tracks strings while `expired` events
    /// are wanted.
    pub fn set(&self, c: Class, expiries: &Expiries) {
        self.classes.store(c.bits(), Relaxed);
        expiries.set_on(self.wants(Class::EXPIRED));
    }

    /// Whether an event of `class` goes anywhere (its class is on, and keyspace or keyevent
    /// channels are).
    pub fn wants(&self, class: Class) -> bool {
        let c = self.classes();
        c.intersects(class) && c.intersects(Class::KEYSPACE | Class::KEYEVENT)
    }

    /// The channels and messages of one event, as [`crate::pubsub::Hub::publish`] takes
    /// them.
    pub fn messages(&self, e: &Event) -> Vec<(Bytes, Bytes)> {
        let c = self.classes();
        let mut out = Vec::with_capacity(2);
        if c.contains(Class::KEYSPACE) {
            let mut ch = format!("__keyspace@{}__:", e.db).into_bytes();
            ch.extend_from_slice(&e.key);
            out.push((Bytes::from(ch), Bytes::from_static(e.name.as_bytes())));
        }
        if c.contains(Class::KEYEVENT) {
            let ch = format!("__keyevent@{}__:{}", e.db, e.name);
            out.push((Bytes::from(ch), e.key.clone()));
        }
        out
    }
}

/// One event: `name` happened to `key` of database `db`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub db: u8,
    pub name: &'static str,
    pub key: Bytes,
}

/// Most strings tracked for their `expired` event: past it, a string's expiry is not
/// tracked (it expires silently) and `INFO`'s `expiries_untracked` counts it.
pub const MAX_TRACKED: usize = 1 << 20;

/// Strings with an expiry written while the `expired` class is on, by metadata key
/// (see the module's doc).
#[derive(Default)]
pub struct Expiries {
    state: Mutex<Tracked>,
}

#[derive(Default)]
struct Tracked {
    on: bool,
    by_key: HashMap<Vec<u8>, u64>,
    by_time: BTreeSet<(u64, Vec<u8>)>,
    untracked: u64,
}

impl Expiries {
    pub fn set_on(&self, on: bool) {
        let mut st = self.state.lock();
        st.on = on;
        if !on {
            st.by_key.clear();
            st.by_time.clear();
        }
    }

    /// A batch wrote the metadata keys `touched`; `expiring` are those of them written as
    /// strings with an expiry, and when. What a key's last write says is what is tracked.
    pub fn written(&self, touched: &[Vec<u8>], expiring: &[(Vec<u8>, u64)]) {
        let mut st = self.state.lock();
        if !st.on {
            return;
        }
        for k in touched {
            if let Some(t) = st.by_key.remove(k) {
                st.by_time.remove(&(t, k.clone()));
            }
        }
        for (k, t) in expiring {
            if st.by_key.len() >= MAX_TRACKED {
                st.untracked += 1;
                continue;
            }
            st.by_key.insert(k.clone(), *t);
            st.by_time.insert((*t, k.clone()));
        }
    }

    /// Whether `mk` is tracked and its time has come (it is then no longer tracked).
    pub fn take_if_due(&self, mk: &[u8], now: u64) -> bool {
        let mut st = self.state.lock();
        match st.by_key.get(mk) {
            Some(&t) if t <= now => {
                st.by_key.remove(mk);
                st.by_time.remove(&(t, mk.to_vec()));
                true
            }
            _ => false,
        }
    }

    /// Up to `limit` tracked keys whose time has come, no longer tracked.
    pub fn take_due(&self, now: u64, limit: usize) -> Vec<Vec<u8>> {
        let mut st = self.state.lock();
        let mut out = Vec::new();
        while out.len() < limit {
            match st.by_time.first() {
                Some((t, _)) if *t <= now => {
                    let (_, k) = st.by_time.pop_first().expect("a first entry");
                    st.by_key.remove(&k);
                    out.push(k);
                }
                _ => break,
            }
        }
        out
    }

    /// Strings whose expiry was not tracked because [`MAX_TRACKED`] were.
    pub fn untracked(&self) -> u64 {
        self.state.lock().untracked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_print_as_redis_prints_them() {
        for (set, get) in [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("", ""),
            ("Ex", "xE"),
            ("AnKE", "AnKE"),
        ] {
            assert_eq!(render(parse(set).unwrap()), get, "{set}");
        }
        assert!(parse("KEQ").is_none());
    }

    #[test]
    fn events_need_a_class_and_a_destination() {
        let n = Notifier::default();
        let x = Expiries::default();
        assert!(!n.wants(Class::GENERIC));
        n.set(parse("g").unwrap(), &x);
        assert!(!n.wants(Class::GENERIC));
        n.set(parse("gK").unwrap(), &x);
        assert!(n.wants(Class::GENERIC));
        assert!(!n.wants(Class::HASH));
        let e = Event {
            db: 3,
            name: "del",
            key: Bytes::from_static(b"k"),
        };
        n.set(parse("gKE").unwrap(), &x);
        let m = n.messages(&e);
        assert_eq!(&m[0].0[..], b"__keyspace@3__:k");
        assert_eq!(&m[0].1[..], b"del");
        assert_eq!(&m[1].0[..], b"__keyevent@3__:del");
        assert_eq!(&m[1].1[..], b"k");
    }

    #[test]
    fn the_last_write_of_a_key_decides_what_is_tracked() {
        let x = Expiries::default();
        x.set_on(true);
        let k = b"mk".to_vec();
        x.written(std::slice::from_ref(&k), &[(k.clone(), 100)]);
        // Overwritten without an expiry: nothing to announce.
        x.written(std::slice::from_ref(&k), &[]);
        assert!(x.take_due(1000, 10).is_empty());
        x.written(std::slice::from_ref(&k), &[(k.clone(), 200)]);
        assert!(!x.take_if_due(&k, 150));
        assert_eq!(x.take_due(250, 10), vec![k.clone()]);
        assert!(!x.take_if_due(&k, 300));
    }
}
