//! Redis's data-type commands over the typed layout of [`crate::record`], one file per
//! group, and the command table that both dispatches them and answers `COMMAND`.
//!
//! Every write command builds one [`Batch`] and applies it with one engine write, so a
//! command's changes (a metadata record and its sub-keys, or several keys) are atomic.
//! Read-modify-write commands hold their keys' stripe locks ([`crate::store::Store::lock`])
//! from the first read to the write.

pub mod bitfield;
pub mod blocking;
pub mod client;
pub mod cluster;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
pub mod dispatch;
pub mod evict;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod keyspace;
pub mod latency;
pub mod list;
pub mod migrate;
pub mod multi;
pub mod observe;
pub mod persist;
pub mod pubsub;
pub mod repl;
pub mod script;
pub mod server;
pub mod set;
pub mod slowlog;
pub mod sort;
pub mod stream;
pub mod string;
pub mod table;
pub mod zset;

use crate::config::AppendFsync;
use crate::protocol::Reply;
use crate::record::{self, Kind, Meta};
use crate::session::Session;
use crate::shared::Shared;
use crate::store::{Batch, KeyLocks};
use bytes::Bytes;

pub use crate::args::{
    bulk, eq, float, fmt_float, fmt_incr_float, int, not_float, not_integer, now_ms, parse_float,
    parse_int, syntax, text, wrong_args, wrongtype,
};

pub type CmdResult = Result<Reply, Reply>;

/// A collection's (member, value) pairs in member order.
pub type Members = Vec<(Vec<u8>, Vec<u8>)>;

/// Most elements a reply built from a collection may have: a `SMEMBERS` or `LRANGE` of a
/// larger range is refused before anything is read, so a request cannot make the server
/// buffer an unbounded reply.
pub const MAX_REPLY_ITEMS: u64 = 1 << 22;
/// Largest string a command may build (Redis's `proto-max-bulk-len` default, 512 MiB).
pub const MAX_STRING: u64 = 512 << 20;

/// What a command runs with: the shared server state and the client's session.
pub struct Ctx<'a> {
    pub sh: &'a Shared,
    pub s: &'a mut Session,
}

impl Ctx<'_> {
    pub fn db(&self) -> u8 {
        self.s.ext.db
    }

    pub fn sync(&self) -> bool {
        self.sh.settings.appendfsync() == AppendFsync::Always
    }

    /// The live metadata of `key` (expired keys are absent; not purged, so it may be
    /// called under the key's lock).
    pub fn meta(&self, key: &[u8]) -> Result<Option<Meta>, Reply> {
        let m = match self.combining(key) {
            Some(p) => p.meta(&self.sh.store)?,
            None => self.sh.store.read(self.db(), key, false)?,
        };
        if self.s.ext.reading {
            self.looked_up(key, m.is_some());
        }
        Ok(m)
    }

    /// A read command looked `key` up: counted in `keyspace_hits`/`keyspace_misses`, and a
    /// miss is the `keymiss` event (class `m`), as Redis's read lookups do. Write commands'
    /// lookups count neither, as in Redis.
    pub fn looked_up(&self, key: &[u8], hit: bool) {
        self.sh.stats.count_lookup(hit);
        if !hit {
            self.notify(crate::notify::Class::KEY_MISS, "keymiss", key);
        }
    }

    /// The run of commands on `key` this command belongs to ([`crate::combine`]), if any.
    pub(crate) fn combining(&self, key: &[u8]) -> Option<&crate::pending::Pending> {
        self.s
            .ext
            .combining
            .as_ref()
            .filter(|p| p.covers(self.db(), key))
    }

    /// Like [`Ctx::meta`], and an error unless the key is absent or of `kind`.
    pub fn typed(&self, key: &[u8], kind: Kind) -> Result<Option<Meta>, Reply> {
        match self.meta(key)? {
            Some(m) if m.kind != kind => Err(wrongtype()),
            m => Ok(m),
        }
    }

    pub fn lock<K: AsRef<[u8]>>(&self, keys: &[K]) -> KeyLocks<'_> {
        match keys {
            [k] if self.combining(k.as_ref()).is_some() => KeyLocks::Held,
            _ => self.sh.store.lock(self.db(), keys),
        }
    }

    /// Applies `b`; the keys it changed that clients are blocked on become ready for
    /// [`blocking::serve_ready`].
    pub fn write(&self, b: Batch) -> Result<(), Reply> {
        if self.notifies(crate::notify::Class::NEW) {
            for k in b.put_meta_keys() {
                if let Some((db, key)) = record::split_meta_key(k) {
                    // Read through a run's writes ([`crate::combine`]): a key its
                    // first command created is not new to the second.
                    let existed = if db == self.db() {
                        self.meta(key)?.is_some()
                    } else {
                        self.sh.store.read(db, key, false)?.is_some()
                    };
                    if !existed {
                        self.notify_in(db, crate::notify::Class::NEW, "new", key);
                    }
                }
            }
        }
        if let Some(p) = &self.s.ext.combining {
            // Applied, and its clients signalled, at the end of the run.
            p.add(b);
            return Ok(());
        }
        let touched = self.sh.store.write(b, self.sync())?;
        // Asked after the write, never before: a client that registers between a check
        // made before the write and the write itself would have looked at the key before
        // the write landed and would wait for a signal nobody sends (a lost wakeup).
        if self.sh.blocked.any_after_write() {
            self.sh.blocked.signal(&touched);
        }
        Ok(())
    }

    /// Notes the keyspace event `name` of `class` on `key` (published once the command's
    /// writes are applied; nothing when the class is off).
    pub fn notify(&self, class: crate::notify::Class, name: &'static str, key: &[u8]) {
        self.notify_in(self.db(), class, name, key);
    }

    /// [`Ctx::notify`] for a key of database `db` (`MOVE`'s destination).
    pub fn notify_in(&self, db: u8, class: crate::notify::Class, name: &'static str, key: &[u8]) {
        if self.sh.notify.wants(class) {
            self.s.events.borrow_mut().push(crate::notify::Event {
                db,
                name,
                key: Bytes::copy_from_slice(key),
            });
        }
    }

    /// The `del` event of a collection a command emptied (Redis deletes an empty one).
    pub fn deleted_if_empty(&self, key: &[u8], m: &Meta) {
        if m.size == 0 {
            self.notify(crate::notify::Class::GENERIC, "del", key);
        }
    }

    /// Whether events of `class` are wanted (for an event that costs a read to know of,
    /// such as `new`).
    pub fn notifies(&self, class: crate::notify::Class) -> bool {
        self.sh.notify.wants(class)
    }

    /// A new, empty collection of `kind`.
    pub fn new_collection(&self, kind: Kind) -> Meta {
        Meta::collection(kind, self.sh.store.new_version())
    }

    /// The collection `key` of `kind`, or a new empty one if it does not exist.
    pub fn collection(&self, key: &[u8], kind: Kind) -> Result<Meta, Reply> {
        Ok(match self.typed(key, kind)? {
            Some(m) => m,
            None => self.new_collection(kind),
        })
    }

    pub fn sub_prefix(&self, key: &[u8], m: &Meta, tag: u8) -> Vec<u8> {
        record::sub_prefix(self.db(), key, m.version, tag)
    }

    pub fn sub_key(&self, key: &[u8], m: &Meta, tag: u8, member: &[u8]) -> Vec<u8> {
        record::sub_key(self.db(), key, m.version, tag, member)
    }

    /// The value of one sub-key.
    pub fn sub_get(
        &self,
        key: &[u8],
        m: &Meta,
        tag: u8,
        member: &[u8],
    ) -> Result<Option<Vec<u8>>, Reply> {
        let k = self.sub_key(key, m, tag, member);
        if let Some(p) = self.combining(key) {
            return Ok(p.get(&self.sh.store, &k)?);
        }
        Ok(self.sh.store.get_raw(&k)?)
    }

    /// Whether a sub-key exists, without reading its value (a large one stays in its
    /// value file).
    pub fn sub_exists(&self, key: &[u8], m: &Meta, tag: u8, member: &[u8]) -> Result<bool, Reply> {
        let k = self.sub_key(key, m, tag, member);
        if let Some(p) = self.combining(key) {
            return Ok(p.contains(&self.sh.store, &k)?);
        }
        Ok(self.sh.store.contains(&k)?)
    }

    /// Every (member, value) of a collection with `tag`, refused when it has more than
    /// [`MAX_REPLY_ITEMS`] members.
    pub fn members(&self, key: &[u8], m: &Meta, tag: u8) -> Result<Members, Reply> {
        check_reply_size(m.size)?;
        let mut out = Vec::with_capacity(m.size as usize);
        self.sh
            .store
            .sub_range(&self.sub_prefix(key, m, tag), None, |k, v| {
                out.push((k.to_vec(), v));
                true
            })?;
        Ok(out)
    }

    /// Saves `m` for `key`, or deletes the key when the collection became empty (Redis
    /// never keeps an empty collection).
    pub fn put_collection(&self, b: &mut Batch, key: &[u8], m: &Meta) {
        if m.size == 0 {
            b.del_meta(self.db(), key);
        } else {
            b.put_meta(self.db(), key, m);
        }
    }
}

/// Bytes a bulk string's framing adds to it in a reply, at most (`$<len>\r\n...\r\n`).
pub const REPLY_OVERHEAD: usize = 16;

/// The error of a command whose reply grows with the data (`MGET`, `KEYS`) when the reply
/// would pass what the connection may still buffer ([`Session::output_budget`]).
pub fn over_output_limit(cmd: &str, sh: &Shared) -> Reply {
    Reply::err(format!(
        "{cmd} reply would exceed the connection's output limit of {} bytes (halflife-client-output-limit)",
        sh.settings.max_output_bytes()
    ))
}

impl From<crate::store::StoreError> for Reply {
    fn from(e: crate::store::StoreError) -> Reply {
        Reply::err(e.to_string())
    }
}

impl From<engine::Error> for Reply {
    fn from(e: engine::Error) -> Reply {
        Reply::err(e.to_string())
    }
}

/// Refuses a reply of more than [`MAX_REPLY_ITEMS`] elements.
pub fn check_reply_size(n: u64) -> Result<(), Reply> {
    if n > MAX_REPLY_ITEMS {
        return Err(Reply::err(format!(
            "reply of {n} elements refused: more than {MAX_REPLY_ITEMS} (read the collection with a SCAN-type command)"
        )));
    }
    Ok(())
}

/// Open collection-scan cursors a connection keeps; older ones are forgotten.
const MAX_COLL_CURSORS: usize = 256;

/// The cursor and options of a `SCAN`-family request.
pub struct ScanArgs {
    pub cursor: u64,
    pub pat: Option<Bytes>,
    pub count: usize,
}

/// Parses `cursor` and the option pairs `opts`: `MATCH`, `COUNT` (positive, clamped to
/// `max_count`), and whatever `other` takes (it returns whether it knew the option, e.g.
/// `SCAN`'s `TYPE`); anything else is a syntax error.
pub fn scan_args(
    cursor: &[u8],
    opts: &[Bytes],
    max_count: usize,
    mut other: impl FnMut(&Bytes, &Bytes) -> Result<bool, Reply>,
) -> Result<ScanArgs, Reply> {
    let cursor: u64 = std::str::from_utf8(cursor)
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| Reply::err("invalid cursor"))?;
    let (mut pat, mut count, mut i) = (None, 10usize, 0);
    // Pair by pair, as Redis: an option without its value is found when it is reached.
    while i < opts.len() {
        if i + 1 >= opts.len() {
            return Err(syntax());
        }
        let (o, v) = (&opts[i], &opts[i + 1]);
        if eq(o, "match") {
            pat = Some(v.clone());
        } else if eq(o, "count") {
            count = usize::try_from(int(v)?)
                .ok()
                .filter(|&c| c > 0)
                .ok_or_else(syntax)?
                .min(max_count);
        } else if !other(o, v)? {
            return Err(syntax());
        }
        i += 2;
    }
    Ok(ScanArgs { cursor, pat, count })
}

/// `HSCAN`/`SSCAN`/`ZSCAN key cursor [MATCH p] [COUNT n]`: pages of a collection's
/// sub-keys with `tag` in member order; `item` turns (member, value) into reply elements.
/// The cursor (a number on the wire) names the last member returned, kept by the
/// connection, as `SCAN`'s does.
pub fn coll_scan(
    cx: &mut Ctx,
    a: &[Bytes],
    kind: Kind,
    item: impl Fn(&[u8], &[u8], &mut Vec<Reply>),
) -> CmdResult {
    let key = &a[0];
    let ScanArgs { cursor, pat, count } =
        scan_args(&a[1], &a[2..], MAX_REPLY_ITEMS as usize, |_, _| Ok(false))?;
    let after = match cursor {
        0 => None,
        c => match cx.s.ext.coll_cursors.remove(&c) {
            Some((k, last)) if k == key[..] => Some(last),
            _ => return Err(Reply::err("invalid cursor")),
        },
    };
    let empty = || Reply::Array(vec![Reply::bulk("0"), Reply::Array(Vec::new())]);
    let Some(m) = cx.typed(key, kind)? else {
        return Ok(empty());
    };
    let prefix = cx.sub_prefix(key, &m, 0);
    let mut page: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut more = false;
    cx.sh.store.sub_range(&prefix, after.as_deref(), |k, v| {
        if after.as_deref() == Some(k) {
            return true;
        }
        if page.len() == count {
            more = true;
            return false;
        }
        page.push((k.to_vec(), v));
        true
    })?;
    let next = match (more, page.last()) {
        (true, Some((last, _))) => {
            let ext = &mut cx.s.ext;
            ext.next_coll_cursor += 1;
            ext.coll_cursors
                .insert(ext.next_coll_cursor, (key.to_vec(), last.clone()));
            while ext.coll_cursors.len() > MAX_COLL_CURSORS {
                ext.coll_cursors.pop_first();
            }
            ext.next_coll_cursor
        }
        _ => 0,
    };
    let mut items = Vec::new();
    for (k, v) in &page {
        if pat.as_ref().is_none_or(|p| crate::pattern::matches(p, k)) {
            item(k, v, &mut items);
        }
    }
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(items),
    ]))
}

/// A random-count argument (`HRANDFIELD`, `SRANDMEMBER`, `SPOP`, `ZRANDMEMBER`): its
/// value, refused beyond [`MAX_REPLY_ITEMS`] either way.
pub fn rand_count(b: &[u8]) -> Result<i64, Reply> {
    let n = int(b)?;
    if n.unsigned_abs() > MAX_REPLY_ITEMS {
        return Err(Reply::err("value is out of range"));
    }
    Ok(n)
}

/// `count` picks from `n` items: distinct ones (all of them if `count >= n`) for a
/// positive count, repeats allowed for a negative one.
pub fn pick(n: usize, count: i64) -> Vec<usize> {
    use rand::seq::index::sample;
    use rand::Rng;
    let mut rng = rand::rng();
    if n == 0 {
        return Vec::new();
    }
    if count < 0 {
        (0..count.unsigned_abs())
            .map(|_| rng.random_range(0..n))
            .collect()
    } else if count as usize >= n {
        (0..n).collect()
    } else {
        sample(&mut rng, n, count as usize).into_vec()
    }
}

/// `numkeys key [key ...]` at the start of `a`: the keys, checked against the arguments
/// there are before anything is allocated.
///
/// A `numkeys` that is not a number is `zero`'s error too when `strict` is false (as
/// `ZMPOP`'s, "numkeys should be greater than 0"), Redis's integer error otherwise.
pub fn numkeys<'a>(
    a: &'a [Bytes],
    zero: &str,
    strict: bool,
) -> Result<(&'a [Bytes], &'a [Bytes]), Reply> {
    let n = match parse_int(&a[0]) {
        Some(n) => n,
        None if strict => return Err(not_integer()),
        None => return Err(Reply::err(zero)),
    };
    if n <= 0 {
        return Err(Reply::err(zero));
    }
    if n as u64 > (a.len() - 1) as u64 {
        return Err(syntax());
    }
    let n = n as usize;
    Ok((&a[1..1 + n], &a[1 + n..]))
}

/// `[COUNT n]` after `ZMPOP`/`LMPOP`'s direction: at least 1.
pub fn mpop_count(rest: &[Bytes]) -> Result<u64, Reply> {
    match rest {
        [] => Ok(1),
        [c, n] if eq(c, "count") => parse_int(n)
            .filter(|&n| n > 0)
            .map(|n| n as u64)
            .ok_or_else(|| Reply::err("count should be greater than 0")),
        _ => Err(syntax()),
    }
}

/// Parses `numkeys key [key ...] <first>|<second> [COUNT count]` (`ZMPOP`'s `MIN|MAX`,
/// `LMPOP`'s `LEFT|RIGHT`): the keys, whether the direction is `second`, and the count.
pub fn mpop_args<'a>(
    a: &'a [Bytes],
    first: &str,
    second: &str,
) -> Result<(&'a [Bytes], bool, u64), Reply> {
    let (keys, rest) = numkeys(a, "numkeys should be greater than 0", false)?;
    let Some((dir, rest)) = rest.split_first() else {
        return Err(syntax());
    };
    let second = if eq(dir, first) {
        false
    } else if eq(dir, second) {
        true
    } else {
        return Err(syntax());
    };
    Ok((keys, second, mpop_count(rest)?))
}
