//! Generic commands: any key's type, existence, expiry, name and database.
//!
//! Expiry lives in the metadata record, so changing it is one record rewrite whatever the
//! type. `DEL` of a collection deletes the metadata record only (its sub-keys become
//! garbage, see [`crate::record`]); `RENAME`, `COPY` and `MOVE` of a collection copy its
//! sub-keys (O(n)), because sub-keys are prefixed by the key's name.

use super::table::c;
use super::{bulk, eq, int, now_ms, syntax, CmdResult, Ctx, MAX_REPLY_ITEMS};
use super::{over_output_limit, REPLY_OVERHEAD};
use crate::notify::Class;
use crate::pattern;
use crate::protocol::Reply;
use crate::record::{self, Kind, Meta, DATABASES};
use crate::store::Batch;
use bytes::Bytes;
use rand::Rng;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("scan", -2, [READONLY], 0, 0, 0, Generic, scan),
    c!("keys", 2, [READONLY], 0, 0, 0, Generic, keys),
    c!("dbsize", 1, [READONLY FAST], 0, 0, 0, Server, dbsize),
    c!("flushdb", -1, [WRITE], 0, 0, 0, Server, flushdb),
    c!("flushall", -1, [WRITE], 0, 0, 0, Server, flushall),
    c!("del", -2, [WRITE], 1, -1, 1, Generic, del),
    c!("unlink", -2, [WRITE FAST], 1, -1, 1, Generic, del),
    c!("exists", -2, [READONLY FAST CHEAP], 1, -1, 1, Generic, exists),
    c!("touch", -2, [READONLY FAST], 1, -1, 1, Generic, touch),
    c!("type", 2, [READONLY FAST CHEAP], 1, 1, 1, Generic, type_),
    c!("ttl", 2, [READONLY FAST CHEAP], 1, 1, 1, Generic, ttl),
    c!("pttl", 2, [READONLY FAST CHEAP], 1, 1, 1, Generic, pttl),
    c!("expiretime", 2, [READONLY FAST CHEAP], 1, 1, 1, Generic, expiretime),
    c!("pexpiretime", 2, [READONLY FAST CHEAP], 1, 1, 1, Generic, pexpiretime),
    c!("expire", -3, [WRITE FAST CHEAP], 1, 1, 1, Generic, expire),
    c!("pexpire", -3, [WRITE FAST CHEAP], 1, 1, 1, Generic, pexpire),
    c!("expireat", -3, [WRITE FAST CHEAP], 1, 1, 1, Generic, expireat),
    c!("pexpireat", -3, [WRITE FAST CHEAP], 1, 1, 1, Generic, pexpireat),
    c!("persist", 2, [WRITE FAST CHEAP], 1, 1, 1, Generic, persist),
    c!("rename", 3, [WRITE], 1, 2, 1, Generic, rename),
    c!("renamenx", 3, [WRITE FAST], 1, 2, 1, Generic, renamenx),
    c!("copy", -3, [WRITE DENYOOM], 1, 2, 1, Generic, copy),
    c!("move", 3, [WRITE FAST], 1, 1, 1, Generic, move_),
    c!("randomkey", 1, [READONLY], 0, 0, 0, Generic, randomkey),
    c!("memory", -2, [READONLY SUBCOMMANDS], 0, 0, 0, Server, memory),
    c!("object", -2, [READONLY SUBCOMMANDS], 2, 2, 1, Generic, object),
];

/// Open `SCAN` cursors a connection keeps; older ones are forgotten.
const MAX_CURSORS: usize = 256;

/// Most keys one `SCAN` call examines: a larger `COUNT` is clamped to it (`COUNT` is a hint
/// in Redis too), so that one call's work and reply stay bounded however much a client asks.
pub const MAX_SCAN_COUNT: usize = 1000;

pub fn db_index(b: &[u8]) -> Result<u8, Reply> {
    let n =
        super::parse_int(b).ok_or_else(|| Reply::err("value is not an integer or out of range"))?;
    u8::try_from(n)
        .ok()
        .filter(|&d| d < DATABASES)
        .ok_or_else(|| Reply::err("DB index is out of range"))
}

fn flush_mode(a: &[Bytes]) -> Result<(), Reply> {
    match a {
        [] => Ok(()),
        [m] if eq(m, "sync") || eq(m, "async") => Ok(()),
        _ => Err(syntax()),
    }
}

pub fn flushdb(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    flush_mode(a)?;
    cx.sh.store.flush(Some(cx.db()), cx.sync())?;
    cx.sh.blocked.signal_db(Some(cx.db()));
    Ok(Reply::ok())
}

pub fn flushall(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    flush_mode(a)?;
    cx.sh.store.flush(None, cx.sync())?;
    cx.sh.blocked.signal_db(None);
    Ok(Reply::ok())
}

pub fn del(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let _g = cx.lock(a);
    let mut b = Batch::new();
    let mut deleted = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for k in a {
        if seen.insert(k) && cx.meta(k)?.is_some() {
            b.del_meta(cx.db(), k);
            deleted.push(k);
        }
    }
    cx.write(b)?;
    for k in &deleted {
        cx.notify(Class::GENERIC, "del", k);
    }
    Ok(Reply::Int(deleted.len() as i64))
}

/// `EXISTS`: how many of the keys exist (repeats count again); not an access to them
/// ([`crate::access`]), as in Redis.
pub fn exists(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut n = 0;
    for k in a {
        n += cx.sh.store.read_untouched(cx.db(), k, true)?.is_some() as i64;
    }
    Ok(Reply::Int(n))
}

/// `TOUCH`: [`exists`], counted as an access to each key.
pub fn touch(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut n = 0;
    for k in a {
        n += cx.sh.store.read(cx.db(), k, true)?.is_some() as i64;
    }
    Ok(Reply::Int(n))
}

pub fn type_(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Simple(
        cx.sh
            .store
            .read_untouched(cx.db(), &a[0], true)?
            .map_or("none", |m| m.kind.name()),
    ))
}

/// TTL-like replies: -2 for a missing key, -1 for one without expiry, else `f(expiry)`.
/// Not an access to the key, as in Redis.
fn ttl_with(cx: &Ctx, key: &[u8], f: impl Fn(u64) -> i64) -> CmdResult {
    Ok(Reply::Int(
        match cx.sh.store.read_untouched(cx.db(), key, true)? {
            None => -2,
            Some(Meta {
                expire_at_ms: None, ..
            }) => -1,
            Some(Meta {
                expire_at_ms: Some(t),
                ..
            }) => f(t),
        },
    ))
}

pub fn ttl(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    ttl_with(cx, &a[0], |t| ((t as i64 - now_ms()).max(0) + 500) / 1000)
}

pub fn pttl(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    ttl_with(cx, &a[0], |t| (t as i64 - now_ms()).max(0))
}

pub fn expiretime(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    ttl_with(cx, &a[0], |t| t as i64 / 1000)
}

pub fn pexpiretime(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    ttl_with(cx, &a[0], |t| t as i64)
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with `[NX|XX|GT|LT]`: 1 if the expiry was set
/// (or the key deleted because the time is past), 0 if the key is missing or a condition
/// failed.
fn expire_generic(cx: &Ctx, a: &[Bytes], unit: i64, relative: bool, cmd: &str) -> CmdResult {
    let key = &a[0];
    let n = int(&a[1])?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &a[2..] {
        if eq(opt, "nx") {
            nx = true;
        } else if eq(opt, "xx") {
            xx = true;
        } else if eq(opt, "gt") {
            gt = true;
        } else if eq(opt, "lt") {
            lt = true;
        } else {
            return Err(Reply::err(format!(
                "Unsupported option {}",
                super::text(opt)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Reply::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(Reply::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    let bad = || Reply::err(format!("invalid expire time in '{cmd}' command"));
    let mut at = n.checked_mul(unit).ok_or_else(bad)?;
    if relative {
        at = at.checked_add(now_ms()).ok_or_else(bad)?;
    }
    let _g = cx.lock(&[key]);
    let Some(mut m) = cx.meta(key)? else {
        return Ok(Reply::Int(0));
    };
    let cur = m.expire_at_ms;
    let ok = if nx {
        cur.is_none()
    } else if xx {
        cur.is_some()
    } else {
        true
    } && (!gt || cur.is_some_and(|c| at > c as i64))
        && (!lt || cur.is_none_or(|c| at < c as i64));
    if !ok {
        return Ok(Reply::Int(0));
    }
    let mut b = Batch::new();
    let gone = at <= now_ms();
    if gone {
        b.del_meta(cx.db(), key);
    } else {
        m.expire_at_ms = Some(at as u64);
        b.put_meta(cx.db(), key, &m);
    }
    cx.write(b)?;
    cx.notify(Class::GENERIC, if gone { "del" } else { "expire" }, key);
    Ok(Reply::Int(1))
}

pub fn expire(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    expire_generic(cx, a, 1000, true, "expire")
}

pub fn pexpire(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    expire_generic(cx, a, 1, true, "pexpire")
}

pub fn expireat(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    expire_generic(cx, a, 1000, false, "expireat")
}

pub fn pexpireat(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    expire_generic(cx, a, 1, false, "pexpireat")
}

pub fn persist(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let _g = cx.lock(&[key]);
    match cx.meta(key)? {
        Some(mut m) if m.expire_at_ms.is_some() => {
            m.expire_at_ms = None;
            let mut b = Batch::new();
            b.put_meta(cx.db(), key, &m);
            cx.write(b)?;
            cx.notify(Class::GENERIC, "persist", key);
            Ok(Reply::Int(1))
        }
        _ => Ok(Reply::Int(0)),
    }
}

/// Writes a copy of `m` (the value of `src` in `src_db`) as `dst` in `dst_db` into `b`:
/// a string is one record; a collection gets a new version and a copy of every sub-key.
fn copy_value(
    cx: &Ctx,
    b: &mut Batch,
    src_db: u8,
    src: &[u8],
    m: &Meta,
    dst_db: u8,
    dst: &[u8],
) -> Result<(), Reply> {
    if m.kind == Kind::String {
        b.put_meta(dst_db, dst, m);
        return Ok(());
    }
    if m.size > MAX_REPLY_ITEMS {
        return Err(Reply::err(format!(
            "collection of {} members is too large to copy or rename (at most {MAX_REPLY_ITEMS})",
            m.size
        )));
    }
    let mut new = m.clone();
    new.version = cx.sh.store.new_version();
    // The prefix of every sub-key of this version, whatever its tag.
    let mut from = record::sub_prefix(src_db, src, m.version, 0);
    from.pop();
    let mut to = record::sub_prefix(dst_db, dst, new.version, 0);
    to.pop();
    cx.sh.store.sub_range(&from, None, |rest, v| {
        b.put(&[&to[..], rest].concat(), &v);
        true
    })?;
    b.put_meta(dst_db, dst, &new);
    Ok(())
}

fn rename_generic(cx: &Ctx, a: &[Bytes], nx: bool) -> CmdResult {
    let (src, dst) = (&a[0], &a[1]);
    let _g = cx.lock(&[src, dst]);
    let Some(m) = cx.meta(src)? else {
        return Err(Reply::err("no such key"));
    };
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
    }
    if nx && cx.meta(dst)?.is_some() {
        return Ok(Reply::Int(0));
    }
    let mut b = Batch::new();
    copy_value(cx, &mut b, cx.db(), src, &m, cx.db(), dst)?;
    b.del_meta(cx.db(), src);
    cx.write(b)?;
    cx.notify(Class::GENERIC, "rename_from", src);
    cx.notify(Class::GENERIC, "rename_to", dst);
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

pub fn rename(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    rename_generic(cx, a, false)
}

pub fn renamenx(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    rename_generic(cx, a, true)
}

/// `COPY source destination [DB destination-db] [REPLACE]`
pub fn copy(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if cx.sh.cluster.is_some() && a[2..].iter().any(|o| eq(o, "db")) {
        return Err(Reply::err(
            "Copying to another database is not allowed in cluster mode",
        ));
    }
    let (src, dst) = (&a[0], &a[1]);
    let (mut dst_db, mut replace) = (cx.db(), false);
    let mut i = 2;
    while i < a.len() {
        if eq(&a[i], "replace") {
            replace = true;
        } else if eq(&a[i], "db") && i + 1 < a.len() {
            dst_db = db_index(&a[i + 1])?;
            i += 1;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if dst_db == cx.db() && src == dst {
        return Err(Reply::err("source and destination objects are the same"));
    }
    let _g = cx
        .sh
        .store
        .lock_pairs(&[(cx.db(), &src[..]), (dst_db, &dst[..])]);
    let Some(m) = cx.meta(src)? else {
        return Ok(Reply::Int(0));
    };
    if cx.sh.store.read(dst_db, dst, false)?.is_some() && !replace {
        return Ok(Reply::Int(0));
    }
    let mut b = Batch::new();
    copy_value(cx, &mut b, cx.db(), src, &m, dst_db, dst)?;
    cx.write(b)?;
    cx.notify_in(dst_db, Class::GENERIC, "copy_to", dst);
    Ok(Reply::Int(1))
}

pub fn move_(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if cx.sh.cluster.is_some() {
        return Err(Reply::err("MOVE is not allowed in cluster mode"));
    }
    let key = &a[0];
    let dst_db = db_index(&a[1])?;
    if dst_db == cx.db() {
        return Err(Reply::err("source and destination objects are the same"));
    }
    let _g = cx
        .sh
        .store
        .lock_pairs(&[(cx.db(), &key[..]), (dst_db, &key[..])]);
    let Some(m) = cx.meta(key)? else {
        return Ok(Reply::Int(0));
    };
    if cx.sh.store.read(dst_db, key, false)?.is_some() {
        return Ok(Reply::Int(0));
    }
    let mut b = Batch::new();
    copy_value(cx, &mut b, cx.db(), key, &m, dst_db, key)?;
    b.del_meta(cx.db(), key);
    cx.write(b)?;
    cx.notify(Class::GENERIC, "move_from", key);
    cx.notify_in(dst_db, Class::GENERIC, "move_to", key);
    Ok(Reply::Int(1))
}

/// Databases `RANDOMKEY` reads whole, in entries (metadata records).
const SMALL_DB: usize = 128;

/// A random key. A database of at most [`SMALL_DB`] entries is read whole and the key
/// picked uniformly; in a larger one, the first live key after a random position (not
/// uniform: a key after a long gap in key order is picked more often; Redis's pick is
/// uniform over its hash table).
///
/// The scan goes on past expired keys (pages of [`MAX_SCAN_COUNT`] entries examined),
/// then wraps to the start once, so that it answers nil only when no live key is left.
pub fn randomkey(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    let (page, resume) = cx.sh.store.scan(cx.db(), None, SMALL_DB)?;
    if resume.is_none() {
        // The whole database: a uniform pick (with two keys, each must come up).
        return Ok(match page.len() {
            0 => Reply::Nil,
            n => bulk(page[rand::rng().random_range(0..n)].0.clone()),
        });
    }
    let start: [u8; 8] = rand::rng().random();
    let mut after = Some(start.to_vec());
    let mut wrapped = false;
    loop {
        let (page, resume) = cx
            .sh
            .store
            .scan(cx.db(), after.as_deref(), MAX_SCAN_COUNT)?;
        if let Some((k, _)) = page.into_iter().next() {
            return Ok(bulk(k));
        }
        after = match resume {
            Some(k) => Some(k),
            None if !wrapped => {
                wrapped = true;
                None
            }
            None => return Ok(Reply::Nil),
        };
    }
}

/// The encoding Redis 7.0 would use for this value under the current
/// `*-max-listpack-*`/`set-max-intset-entries` settings. The layout here has one encoding
/// per type; this answers clients and tests that look. Small collections are read to
/// check their member sizes (at most the threshold's number of members).
pub fn encoding(cx: &Ctx, key: &[u8], m: &Meta) -> Result<&'static str, Reply> {
    let st = &cx.sh.settings;
    let small = |entries: &str, value: &str, tag: u8, check_values: bool| -> Result<bool, Reply> {
        let max = st.compat_num(entries);
        if m.size as i64 > max {
            return Ok(false);
        }
        let limit = st.compat_num(value) as usize;
        Ok(cx
            .members(key, m, tag)?
            .iter()
            .all(|(k, v)| k.len() <= limit && (!check_values || v.len() <= limit)))
    };
    Ok(match m.kind {
        Kind::String => {
            if m.value.len() <= 20 && super::parse_int(&m.value).is_some() {
                "int"
            } else if m.value.len() <= 44 {
                "embstr"
            } else {
                "raw"
            }
        }
        Kind::Hash
            if small(
                "hash-max-listpack-entries",
                "hash-max-listpack-value",
                0,
                true,
            )? =>
        {
            "listpack"
        }
        Kind::Hash => "hashtable",
        Kind::List => "quicklist",
        Kind::Set => {
            let ints = m.size as i64 <= st.compat_num("set-max-intset-entries")
                && cx
                    .members(key, m, 0)?
                    .iter()
                    .all(|(k, _)| super::parse_int(k).is_some());
            if ints {
                "intset"
            } else {
                "hashtable"
            }
        }
        Kind::ZSet
            if small(
                "zset-max-listpack-entries",
                "zset-max-listpack-value",
                0,
                false,
            )? =>
        {
            "listpack"
        }
        Kind::ZSet => "skiplist",
        Kind::Stream => "stream",
    })
}

/// `MEMORY USAGE key [SAMPLES n]`: an estimate (key, header and value bytes; for a
/// collection, its member count times the size of its first members' sub-keys), not the
/// allocator's figure. `MEMORY` subcommands other than `USAGE` are not supported.
pub fn memory(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if !eq(&a[0], "usage") || a.len() < 2 {
        return Err(Reply::err(format!(
            "unknown subcommand '{}'. Try MEMORY HELP.",
            super::text(&a[0])
        )));
    }
    let key = &a[1];
    let Some(m) = cx.meta(key)? else {
        return Ok(Reply::Nil);
    };
    let base = key.len() as u64 + 2 * record::STRING_HEADER as u64;
    if m.kind == Kind::String {
        return Ok(Reply::Int((base + m.value.len() as u64) as i64));
    }
    let (mut n, mut bytes) = (0u64, 0u64);
    cx.sh
        .store
        .sub_range(&cx.sub_prefix(key, &m, 0), None, |k, v| {
            n += 1;
            bytes += (k.len() + v.len() + 16) as u64;
            // A sorted set's member has a second sub-key: its (score, member) index entry.
            if m.kind == Kind::ZSet {
                bytes += (k.len() + 8 + 16) as u64;
            }
            n < 5
        })?;
    let per = bytes.checked_div(n).unwrap_or(0);
    Ok(Reply::Int((base + per * m.size) as i64))
}

pub fn object(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sub = super::text(&a[0]).to_ascii_lowercase();
    if sub == "help" {
        return Ok(Reply::Array(
            [
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation used in order to store the value",
                "    associated with a <key>.",
                "FREQ <key>",
                "    Return the access frequency index of the <key>. The returned integer is",
                "    proportional to the logarithm of the recent access frequency of the key.",
                "IDLETIME <key>",
                "    Return the idle time of the <key>, that is the approximated number of",
                "    seconds elapsed since the last access to the key.",
                "REFCOUNT <key>",
                "    Return the number of references of the value associated with the specified",
                "    <key>.",
                "HELP",
                "    Print this help.",
            ]
            .into_iter()
            .map(Reply::bulk)
            .collect(),
        ));
    }
    let [_, key] = a else {
        return Err(Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{sub}'. Try OBJECT HELP."
        )));
    };
    // Not an access to the key (Redis's `LOOKUP_NOTOUCH`).
    let Some(m) = cx.sh.store.read_untouched(cx.db(), key, false)? else {
        return Ok(Reply::Nil);
    };
    let lfu = cx.sh.maxmemory.policy().lfu();
    // From the access table ([`crate::access`]): for a key it does not hold, the time
    // since its shard's horizon (or the server's start), a lower bound.
    let access = || cx.sh.store.access.peek(&record::meta_key(cx.db(), key));
    match sub.as_str() {
        "encoding" => Ok(Reply::bulk(encoding(cx, key, &m)?)),
        "refcount" => Ok(Reply::Int(1)),
        "idletime" if lfu => Err(Reply::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        )),
        "idletime" => Ok(Reply::Int(access().idle_secs as i64)),
        "freq" if lfu => Ok(Reply::Int(access().freq as i64)),
        "freq" => Err(Reply::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        )),
        _ => Err(Reply::err(format!(
            "unknown subcommand '{sub}'. Try OBJECT HELP."
        ))),
    }
}

/// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE string]`: cursor 0 starts; a returned 0
/// means done. Keys are visited in key order; a key written during the scan may or may not
/// be returned, as in Redis.
fn scan(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (sh, s) = (cx.sh, &mut *cx.s);
    if a.is_empty() {
        return Err(super::wrong_args("scan"));
    }
    let mut kind = None;
    let crate::cmd::ScanArgs { cursor, pat, count } =
        crate::cmd::scan_args(&a[0], &a[1..], MAX_SCAN_COUNT, |o, v| {
            // An unknown type matches no key, as in Redis.
            Ok(eq(o, "type") && {
                kind = Some(Kind::from_name(v));
                true
            })
        })?;
    let after = match cursor {
        0 => None,
        c => Some(
            s.cursors
                .remove(&c)
                .ok_or_else(|| Reply::err("invalid cursor"))?,
        ),
    };
    let (page, resume) = sh.store.scan(s.ext.db, after.as_deref(), count)?;
    let next = match resume {
        Some(last) => {
            s.next_cursor += 1;
            s.cursors.insert(s.next_cursor, last);
            while s.cursors.len() > MAX_CURSORS {
                s.cursors.pop_first();
            }
            s.next_cursor
        }
        None => 0,
    };
    let keys = page
        .into_iter()
        .filter(|(k, _)| pat.as_ref().is_none_or(|p| pattern::matches(p, k)))
        .filter(|(_, h)| kind.is_none_or(|t| t == Some(h.kind)))
        .map(|(k, _)| Reply::bulk(k))
        .collect();
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(keys),
    ]))
}

/// The matching keys of the selected database, from a walk of its metadata records that
/// keeps only keys (see [`crate::store::Store::live_keys`] for what it reads); a reply that
/// would pass the connection's output limit is an error instead (use `SCAN`).
fn keys(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (sh, s, pat) = (cx.sh, &*cx.s, &a[0]);
    let mut out = Vec::new();
    let mut size = 0usize;
    for kv in sh.store.live_keys(s.ext.db)? {
        let (k, _) = kv?;
        if pattern::matches(pat, &k) {
            size = size.saturating_add(REPLY_OVERHEAD + k.len());
            if size > s.output_budget {
                return Err(over_output_limit("KEYS", sh));
            }
            out.push(Reply::bulk(k));
        }
    }
    Ok(Reply::Array(out))
}

/// Exact count of the selected database's live keys, by a walk of its metadata records
/// (the engine keeps no key count) that holds one entry at a time.
fn dbsize(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    let (sh, s) = (cx.sh, &*cx.s);
    let mut n = 0i64;
    for kv in sh.store.live_keys(s.ext.db)? {
        kv?;
        n += 1;
    }
    Ok(Reply::Int(n))
}
