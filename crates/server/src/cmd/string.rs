//! Strings: the value lives in the key's metadata record, so every command is one engine
//! read and at most one write of one record.

use super::table::c;
use super::{bulk, eq, float, int, now_ms, syntax, wrongtype, CmdResult, Ctx, MAX_STRING};
use crate::notify::Class;
use crate::protocol::Reply;
use crate::record::{self, Kind, Meta};
use crate::session::Session;
use crate::shared::Shared;
use crate::store::Batch;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("get", 2, [READONLY FAST CHEAP], 1, 1, 1, String, get),
    c!("set", -3, [WRITE DENYOOM CHEAP], 1, 1, 1, String, set),
    c!("setnx", 3, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, String, setnx),
    c!("setex", 4, [WRITE DENYOOM CHEAP], 1, 1, 1, String, setex),
    c!("psetex", 4, [WRITE DENYOOM CHEAP], 1, 1, 1, String, psetex),
    c!("getset", 3, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, String, getset),
    c!("getdel", 2, [WRITE FAST CHEAP], 1, 1, 1, String, getdel),
    c!("getex", -2, [WRITE FAST CHEAP], 1, 1, 1, String, getex),
    c!("mget", -2, [READONLY FAST CHEAP], 1, -1, 1, String, mget),
    c!("mset", -3, [WRITE DENYOOM CHEAP], 1, -1, 2, String, mset),
    c!("msetnx", -3, [WRITE DENYOOM], 1, -1, 2, String, msetnx),
    c!("incr", 2, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, String, incr),
    c!("decr", 2, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, String, decr),
    c!("incrby", 3, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, String, incrby),
    c!("decrby", 3, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, String, decrby),
    c!("incrbyfloat", 3, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, String, incrbyfloat),
    c!("append", 3, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, String, append),
    c!("strlen", 2, [READONLY FAST CHEAP], 1, 1, 1, String, strlen),
    c!("getrange", 4, [READONLY], 1, 1, 1, String, getrange),
    c!("substr", 4, [READONLY], 1, 1, 1, String, getrange),
    c!("setrange", 4, [WRITE DENYOOM], 1, 1, 1, String, setrange),
    c!("lcs", -3, [READONLY], 1, 2, 1, String, lcs),
    c!("setbit", 4, [WRITE DENYOOM], 1, 1, 1, Bitmap, setbit),
    c!("getbit", 3, [READONLY FAST CHEAP], 1, 1, 1, Bitmap, getbit),
    c!("bitcount", -2, [READONLY], 1, 1, 1, Bitmap, bitcount),
    c!("bitop", -4, [WRITE DENYOOM], 2, -1, 1, Bitmap, bitop),
    c!("bitpos", -3, [READONLY], 1, 1, 1, Bitmap, bitpos),
];

/// Largest bit offset `SETBIT`/`GETBIT` accept (Redis: 2^32 - 1, a 512 MiB string).
const MAX_BIT_OFFSET: u64 = (1 << 32) - 1;
/// Largest `LCS` table (cells): two 64 KiB strings. Larger inputs are refused rather
/// than allocating gigabytes.
const MAX_LCS_CELLS: u64 = 1 << 32;

/// The string value of `key`: `None` if absent, WRONGTYPE for another type.
fn string(cx: &Ctx, key: &[u8]) -> Result<Option<Meta>, Reply> {
    cx.typed(key, Kind::String)
}

fn put(cx: &Ctx, key: &[u8], value: Vec<u8>, expire: Option<u64>) -> Result<(), Reply> {
    let mut b = Batch::new();
    b.put_meta(cx.db(), key, &Meta::string(value, expire));
    cx.write(b)
}

pub fn get(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let v = cx.sh.store.read(cx.db(), &a[0], true)?;
    cx.looked_up(&a[0], v.is_some());
    match v {
        None => Ok(Reply::Nil),
        Some(m) if m.kind != Kind::String => Err(wrongtype()),
        Some(m) => Ok(bulk(m.value)),
    }
}

/// An expiry option's absolute time in ms, from `n` in `unit` ms (`relative` to now or
/// since the epoch); an error for `n <= 0` or overflow, as Redis's `SET`/`GETEX`.
fn expire_at(n: &[u8], unit: i64, relative: bool, cmd: &str) -> Result<u64, Reply> {
    let n = int(n)?;
    let bad = || Reply::err(format!("invalid expire time in '{cmd}' command"));
    if n <= 0 {
        return Err(bad());
    }
    let ms = n.checked_mul(unit).ok_or_else(bad)?;
    let at = if relative {
        ms.checked_add(now_ms()).ok_or_else(bad)?
    } else {
        ms
    };
    Ok(at as u64)
}

/// An expiry option of `SET` and `GETEX`: its unit in milliseconds and whether it is
/// relative to now (`EX`, `PX`) or a time (`EXAT`, `PXAT`).
fn timed_option(opt: &[u8]) -> Option<(i64, bool)> {
    [
        ("ex", 1000, true),
        ("px", 1, true),
        ("exat", 1000, false),
        ("pxat", 1, false),
    ]
    .into_iter()
    .find(|(o, _, _)| eq(opt, o))
    .map(|(_, unit, relative)| (unit, relative))
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`
pub fn set(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (key, value) = (&a[0], &a[1]);
    let (mut nx, mut xx, mut get_old, mut keepttl) = (false, false, false, false);
    let mut expire: Option<u64> = None;
    let mut i = 2;
    while i < a.len() {
        let opt = &a[i];
        if let Some((unit, relative)) = timed_option(opt) {
            if expire.is_some() || keepttl || i + 1 >= a.len() {
                return Err(syntax());
            }
            expire = Some(expire_at(&a[i + 1], unit, relative, "set")?);
            i += 2;
            continue;
        }
        if eq(opt, "nx") && !xx {
            nx = true;
        } else if eq(opt, "xx") && !nx {
            xx = true;
        } else if eq(opt, "get") {
            get_old = true;
        } else if eq(opt, "keepttl") && expire.is_none() {
            keepttl = true;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let reads = nx || xx || get_old || keepttl;
    let _g = if reads {
        cx.lock(&[key])
    } else {
        cx.sh.store.lock_shared(cx.db(), &[key])
    };
    let old = if reads { cx.meta(key)? } else { None };
    if get_old && old.as_ref().is_some_and(|m| m.kind != Kind::String) {
        return Err(wrongtype());
    }
    let old_reply = |old: Option<Meta>| {
        if get_old {
            old.map_or(Reply::Nil, |m| bulk(m.value))
        } else {
            Reply::Nil
        }
    };
    if (nx && old.is_some()) || (xx && old.is_none()) {
        return Ok(old_reply(old));
    }
    let expire = if keepttl {
        old.as_ref().and_then(|m| m.expire_at_ms)
    } else {
        expire
    };
    let mut b = Batch::new();
    let gone = expire.is_some_and(|t| t <= now_ms() as u64);
    if gone {
        // EXAT/PXAT in the past: the key is gone at once, as in Redis.
        b.del_meta(cx.db(), key);
    } else {
        b.put_meta(cx.db(), key, &Meta::string(value.to_vec(), expire));
    }
    cx.write(b)?;
    cx.notify(Class::STRING, "set", key);
    if gone {
        cx.notify(Class::GENERIC, "del", key);
    } else if expire.is_some() && !keepttl {
        cx.notify(Class::GENERIC, "expire", key);
    }
    Ok(if get_old { old_reply(old) } else { Reply::ok() })
}

pub fn setnx(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let r = set(cx, &[a[0].clone(), a[1].clone(), Bytes::from_static(b"NX")])?;
    Ok(Reply::Int((r == Reply::ok()) as i64))
}

fn setex_unit(cx: &mut Ctx, a: &[Bytes], unit: i64, cmd: &str) -> CmdResult {
    let at = expire_at(&a[1], unit, true, cmd)?;
    let _g = cx.sh.store.lock_shared(cx.db(), &[&a[0]]);
    put(cx, &a[0], a[2].to_vec(), Some(at))?;
    cx.notify(Class::STRING, "set", &a[0]);
    cx.notify(Class::GENERIC, "expire", &a[0]);
    Ok(Reply::ok())
}

pub fn setex(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    setex_unit(cx, a, 1000, "setex")
}

pub fn psetex(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    setex_unit(cx, a, 1, "psetex")
}

pub fn getset(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    set(
        cx,
        &[a[0].clone(), a[1].clone(), Bytes::from_static(b"GET")],
    )
}

pub fn getdel(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let _g = cx.lock(&[key]);
    let Some(old) = string(cx, key)? else {
        return Ok(Reply::Nil);
    };
    let mut b = Batch::new();
    b.del_meta(cx.db(), key);
    cx.write(b)?;
    cx.notify(Class::GENERIC, "del", key);
    Ok(bulk(old.value))
}

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]`
pub fn getex(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    // None: keep the expiry; Some(None): persist; Some(Some(t)): expire at t.
    let mut change: Option<Option<u64>> = None;
    let mut i = 1;
    while i < a.len() {
        if let Some((unit, relative)) = timed_option(&a[i]) {
            if change.is_some() || i + 1 >= a.len() {
                return Err(syntax());
            }
            change = Some(Some(expire_at(&a[i + 1], unit, relative, "getex")?));
            i += 2;
        } else if eq(&a[i], "persist") && change.is_none() {
            change = Some(None);
            i += 1;
        } else {
            return Err(syntax());
        }
    }
    let _g = cx.lock(&[key]);
    let Some(m) = string(cx, key)? else {
        return Ok(Reply::Nil);
    };
    let mut b = Batch::new();
    let event = match change {
        None => return Ok(bulk(m.value)),
        Some(Some(t)) if t <= now_ms() as u64 => {
            b.del_meta(cx.db(), key);
            Some("del")
        }
        Some(exp) if exp != m.expire_at_ms => {
            b.put_meta(cx.db(), key, &Meta::string(m.value.clone(), exp));
            Some(if exp.is_some() { "expire" } else { "persist" })
        }
        // Redis announces an expiry set again to the same time too.
        Some(Some(_)) => Some("expire"),
        Some(None) => None,
    };
    cx.write(b)?;
    if let Some(e) = event {
        cx.notify(Class::GENERIC, e, key);
    }
    Ok(bulk(m.value))
}

/// `MGET key [key ...]`; a reply that would pass what the connection may still buffer
/// ([`crate::session::Session::output_budget`]) is an error instead, found as the values
/// are read (the reply is never built past the budget).
pub fn mget(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut out = Vec::with_capacity(a.len());
    let mut size = 0usize;
    for k in a {
        let v = cx.sh.store.read(cx.db(), k, true)?;
        cx.looked_up(k, v.is_some());
        let value = v.filter(|m| m.kind == Kind::String).map(|m| m.value);
        size = size.saturating_add(super::REPLY_OVERHEAD + value.as_ref().map_or(0, Vec::len));
        if size > cx.s.output_budget {
            return Err(super::over_output_limit("MGET", cx.sh));
        }
        out.push(value.map_or(Reply::Nil, bulk));
    }
    Ok(Reply::Array(out))
}

pub fn mset(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if !a.len().is_multiple_of(2) {
        return Err(super::wrong_args("mset"));
    }
    let keys: Vec<&Bytes> = a.iter().step_by(2).collect();
    let _g = cx.sh.store.lock_shared(cx.db(), &keys);
    let mut b = Batch::new();
    for kv in a.chunks(2) {
        b.put_meta(cx.db(), &kv[0], &Meta::string(kv[1].to_vec(), None));
    }
    cx.write(b)?;
    for k in keys {
        cx.notify(Class::STRING, "set", k);
    }
    Ok(Reply::ok())
}

pub fn msetnx(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if !a.len().is_multiple_of(2) {
        return Err(super::wrong_args("msetnx"));
    }
    let keys: Vec<&Bytes> = a.iter().step_by(2).collect();
    let _g = cx.lock(&keys);
    for k in &keys {
        if cx.meta(k)?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    let mut b = Batch::new();
    for kv in a.chunks(2) {
        b.put_meta(cx.db(), &kv[0], &Meta::string(kv[1].to_vec(), None));
    }
    cx.write(b)?;
    for k in keys {
        cx.notify(Class::STRING, "set", k);
    }
    Ok(Reply::Int(1))
}

fn incr_by(cx: &Ctx, key: &[u8], by: i64) -> CmdResult {
    let _g = cx.lock(&[key]);
    let old = string(cx, key)?;
    let (cur, expire) = match &old {
        Some(m) => (int(&m.value)?, m.expire_at_ms),
        None => (0, None),
    };
    let new = cur
        .checked_add(by)
        .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
    put(cx, key, new.to_string().into_bytes(), expire)?;
    cx.notify(Class::STRING, "incrby", key);
    Ok(Reply::Int(new))
}

pub fn incr(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    incr_by(cx, &a[0], 1)
}

pub fn decr(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    incr_by(cx, &a[0], -1)
}

pub fn incrby(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    incr_by(cx, &a[0], int(&a[1])?)
}

pub fn decrby(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let by = int(&a[1])?
        .checked_neg()
        .ok_or_else(|| Reply::err("decrement would overflow"))?;
    incr_by(cx, &a[0], by)
}

pub fn incrbyfloat(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let by = float(&a[1])?;
    let _g = cx.lock(&[key]);
    let old = string(cx, key)?;
    let (cur, expire) = match &old {
        Some(m) => (float(&m.value)?, m.expire_at_ms),
        None => (0.0, None),
    };
    let new = cur + by;
    if !new.is_finite() {
        return Err(Reply::err("increment would produce NaN or Infinity"));
    }
    let s = super::fmt_incr_float(new);
    put(cx, key, s.clone().into_bytes(), expire)?;
    cx.notify(Class::STRING, "incrbyfloat", key);
    Ok(Reply::bulk(s))
}

pub fn append(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (key, tail) = (&a[0], &a[1]);
    let _g = cx.lock(&[key]);
    let (mut value, expire) = match string(cx, key)? {
        Some(m) => (m.value, m.expire_at_ms),
        None => (Vec::new(), None),
    };
    if (value.len() + tail.len()) as u64 > MAX_STRING {
        return Err(too_big());
    }
    value.extend_from_slice(tail);
    let n = value.len();
    put(cx, key, value, expire)?;
    cx.notify(Class::STRING, "append", key);
    Ok(Reply::Int(n as i64))
}

fn too_big() -> Reply {
    Reply::err("string exceeds maximum allowed size (proto-max-bulk-len)")
}

pub fn strlen(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(
        string(cx, &a[0])?.map_or(0, |m| m.value.len()) as i64
    ))
}

/// Redis's clamping of a `start`/`end` pair over a string or list of `len`: negative
/// counts from the end; `None` for an empty range.
pub fn clamp_range(start: i64, end: i64, len: i64) -> Option<(usize, usize)> {
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end.min(len - 1) };
    (start <= end && start < len && end >= 0).then_some((start as usize, end as usize))
}

/// Redis's clamping of a range over a string (`GETRANGE`, `BITCOUNT`, `BITPOS`): unlike
/// a list's, an end before the start of the string is the first byte, not an empty range.
fn clamp_str(start: i64, end: i64, len: i64) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    (len > 0 && start <= end).then_some((start as usize, end as usize))
}

pub fn getrange(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (start, end) = (int(&a[1])?, int(&a[2])?);
    let Some(m) = string(cx, &a[0])? else {
        return Ok(Reply::bulk(""));
    };
    Ok(match clamp_str(start, end, m.value.len() as i64) {
        Some((s, e)) => bulk(m.value[s..=e].to_vec()),
        None => Reply::bulk(""),
    })
}

pub fn setrange(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (key, patch) = (&a[0], &a[2]);
    let offset = int(&a[1])?;
    if offset < 0 {
        return Err(Reply::err("offset is out of range"));
    }
    let offset = offset as u64;
    let _g = cx.lock(&[key]);
    let old = string(cx, key)?;
    if patch.is_empty() {
        // Nothing to write: the length as it is, and no key is created.
        return Ok(Reply::Int(old.map_or(0, |m| m.value.len()) as i64));
    }
    if offset + patch.len() as u64 > MAX_STRING {
        return Err(too_big());
    }
    let (mut value, expire) = old.map_or((Vec::new(), None), |m| (m.value, m.expire_at_ms));
    let end = offset as usize + patch.len();
    if value.len() < end {
        value.resize(end, 0);
    }
    value[offset as usize..end].copy_from_slice(patch);
    let n = value.len();
    put(cx, key, value, expire)?;
    cx.notify(Class::STRING, "setrange", key);
    Ok(Reply::Int(n as i64))
}

fn bit_offset(b: &[u8]) -> Result<u64, Reply> {
    super::parse_int(b)
        .filter(|&n| n >= 0 && n as u64 <= MAX_BIT_OFFSET)
        .map(|n| n as u64)
        .ok_or_else(|| Reply::err("bit offset is not an integer or out of range"))
}

pub fn setbit(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let offset = bit_offset(&a[1])?;
    let bit = match &a[2][..] {
        b"0" => 0u8,
        b"1" => 1,
        _ => return Err(Reply::err("bit is not an integer or out of range")),
    };
    let _g = cx.lock(&[key]);
    let (mut value, expire) =
        string(cx, key)?.map_or((Vec::new(), None), |m| (m.value, m.expire_at_ms));
    let byte = (offset / 8) as usize;
    if value.len() <= byte {
        value.resize(byte + 1, 0);
    }
    let mask = 0x80u8 >> (offset % 8);
    let old = (value[byte] & mask != 0) as i64;
    if bit == 1 {
        value[byte] |= mask;
    } else {
        value[byte] &= !mask;
    }
    put(cx, key, value, expire)?;
    cx.notify(Class::STRING, "setbit", key);
    Ok(Reply::Int(old))
}

pub fn getbit(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let offset = bit_offset(&a[1])?;
    let Some(m) = string(cx, &a[0])? else {
        return Ok(Reply::Int(0));
    };
    let byte = (offset / 8) as usize;
    Ok(Reply::Int(
        m.value
            .get(byte)
            .is_some_and(|b| b & (0x80 >> (offset % 8)) != 0) as i64,
    ))
}

/// The byte range of `[start end [BYTE|BIT]]` over a string of `len` bytes, and whether
/// the unit is bits. `Ok(None)`: empty range.
fn bit_range(a: &[Bytes], len: usize) -> Result<Option<(u64, u64, bool)>, Reply> {
    let bits = match a.get(2) {
        None => false,
        Some(u) if eq(u, "byte") => false,
        Some(u) if eq(u, "bit") => true,
        Some(_) => return Err(syntax()),
    };
    let (start, end) = (int(&a[0])?, int(&a[1])?);
    let total = if bits { len as i64 * 8 } else { len as i64 };
    Ok(clamp_str(start, end, total).map(|(s, e)| (s as u64, e as u64, bits)))
}

fn bit_at(v: &[u8], i: u64) -> bool {
    v[(i / 8) as usize] & (0x80 >> (i % 8)) != 0
}

pub fn bitcount(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() == 2 || a.len() > 4 {
        return Err(syntax());
    }
    let v = string(cx, &a[0])?.map_or(Vec::new(), |m| m.value);
    if a.len() == 1 {
        return Ok(Reply::Int(v.iter().map(|b| b.count_ones() as i64).sum()));
    }
    Ok(Reply::Int(match bit_range(&a[1..], v.len())? {
        None => 0,
        Some((s, e, false)) => v[s as usize..=e as usize]
            .iter()
            .map(|b| b.count_ones() as i64)
            .sum(),
        Some((s, e, true)) => (s..=e).filter(|&i| bit_at(&v, i)).count() as i64,
    }))
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]`
pub fn bitpos(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let want = match &a[1][..] {
        b"0" => false,
        b"1" => true,
        _ => return Err(Reply::err("The bit argument must be 1 or 0.")),
    };
    if a.len() > 5 {
        return Err(syntax());
    }
    let Some(m) = string(cx, &a[0])? else {
        return Ok(Reply::Int(if want { -1 } else { 0 }));
    };
    let v = m.value;
    let end_given = a.len() >= 4;
    let start = a.get(2).map(|s| int(s)).transpose()?.unwrap_or(0);
    let end = a.get(3).map(|s| int(s)).transpose()?.unwrap_or(-1);
    let range = bit_range(
        &[Bytes::from(start.to_string()), Bytes::from(end.to_string())]
            .into_iter()
            .chain(a.get(4).cloned())
            .collect::<Vec<_>>(),
        v.len(),
    )?;
    let Some((s, e, bits)) = range else {
        return Ok(Reply::Int(-1));
    };
    let (first, last) = if bits { (s, e) } else { (s * 8, e * 8 + 7) };
    for i in first..=last {
        if bit_at(&v, i) == want {
            return Ok(Reply::Int(i as i64));
        }
    }
    // Looking for a clear bit without an explicit end: the string continues with zeros.
    Ok(Reply::Int(if !want && !end_given {
        (last + 1) as i64
    } else {
        -1
    }))
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`
pub fn lcs(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (mut len_only, mut idx, mut minlen, mut withlen) = (false, false, 0i64, false);
    let mut i = 2;
    while i < a.len() {
        if eq(&a[i], "len") {
            len_only = true;
        } else if eq(&a[i], "idx") {
            idx = true;
        } else if eq(&a[i], "withmatchlen") {
            withlen = true;
        } else if eq(&a[i], "minmatchlen") && i + 1 < a.len() {
            minlen = int(&a[i + 1])?.max(0);
            i += 1;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if len_only && idx {
        return Err(Reply::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    let get = |k: &[u8]| -> Result<Vec<u8>, Reply> {
        match cx.meta(k)? {
            None => Ok(Vec::new()),
            Some(m) if m.kind == Kind::String => Ok(m.value),
            Some(_) => Err(Reply::err("The specified keys must contain string values")),
        }
    };
    let (x, y) = (get(&a[0])?, get(&a[1])?);
    let cells = (x.len() as u64 + 1) * (y.len() as u64 + 1);
    if cells > MAX_LCS_CELLS {
        return Err(Reply::err(
            "LCS of strings this long is refused (table too large)",
        ));
    }
    // dp[i][j]: LCS length of x[..i] and y[..j].
    let w = y.len() + 1;
    let mut dp = vec![0u32; (x.len() + 1) * w];
    for i in 1..=x.len() {
        for j in 1..=y.len() {
            dp[i * w + j] = if x[i - 1] == y[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let total = dp[x.len() * w + y.len()];
    if len_only {
        return Ok(Reply::Int(total as i64));
    }
    // Walk back from the end, collecting the string and the matching ranges.
    let (mut i, mut j) = (x.len(), y.len());
    let mut out = Vec::with_capacity(total as usize);
    let mut matches = Vec::new();
    let mut cur: Option<(usize, usize, usize, usize)> = None; // x range, y range
    let flush = |cur: &mut Option<(usize, usize, usize, usize)>, matches: &mut Vec<Reply>| {
        if let Some((xs, xe, ys, ye)) = cur.take() {
            let len = (xe - xs + 1) as i64;
            if len >= minlen {
                let mut m = vec![
                    Reply::Array(vec![Reply::Int(xs as i64), Reply::Int(xe as i64)]),
                    Reply::Array(vec![Reply::Int(ys as i64), Reply::Int(ye as i64)]),
                ];
                if withlen {
                    m.push(Reply::Int(len));
                }
                matches.push(Reply::Array(m));
            }
        }
    };
    while i > 0 && j > 0 {
        if x[i - 1] == y[j - 1] {
            out.push(x[i - 1]);
            match &mut cur {
                Some((xs, _, ys, _)) if *xs == i && *ys == j => {
                    *xs = i - 1;
                    *ys = j - 1;
                }
                _ => {
                    flush(&mut cur, &mut matches);
                    cur = Some((i - 1, i - 1, j - 1, j - 1));
                }
            }
            i -= 1;
            j -= 1;
        } else if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
            i -= 1;
        } else {
            j -= 1;
        }
    }
    flush(&mut cur, &mut matches);
    if idx {
        return Ok(Reply::Map(vec![
            (Reply::bulk("matches"), Reply::Array(matches)),
            (Reply::bulk("len"), Reply::Int(total as i64)),
        ]));
    }
    out.reverse();
    Ok(bulk(out))
}

/// `BITOP AND|OR|XOR|NOT destkey key [key ...]`: the bitwise operation of the source
/// strings (missing keys and the shorter strings count as zero bytes) into `destkey`,
/// without expiry; an empty result deletes it. Replies the result's length.
///
/// The sources are folded into the result one at a time, so memory is the result plus
/// one source, and the result is no longer than the longest source (each within the
/// engine's value limit, below [`MAX_STRING`]).
pub fn bitop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    #[derive(Clone, Copy, PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = [
        ("and", Op::And),
        ("or", Op::Or),
        ("xor", Op::Xor),
        ("not", Op::Not),
    ]
    .into_iter()
    .find(|(n, _)| eq(&a[0], n))
    .map(|(_, o)| o)
    .ok_or_else(syntax)?;
    let (dest, srcs) = (&a[1], &a[2..]);
    if op == Op::Not && srcs.len() != 1 {
        return Err(Reply::err(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    let _g = cx.lock(&a[1..]);
    let mut acc: Option<Vec<u8>> = None;
    for k in srcs {
        let v = string(cx, k)?.map_or_else(Vec::new, |m| m.value);
        acc = Some(match acc {
            None if op == Op::Not => v.into_iter().map(|b| !b).collect(),
            None => v,
            Some(mut r) => {
                if r.len() < v.len() {
                    r.resize(v.len(), 0);
                }
                for (i, x) in r.iter_mut().enumerate() {
                    let y = v.get(i).copied().unwrap_or(0);
                    *x = match op {
                        Op::And => *x & y,
                        Op::Or => *x | y,
                        Op::Xor | Op::Not => *x ^ y,
                    };
                }
                r
            }
        });
    }
    let value = acc.unwrap_or_default();
    debug_assert!(value.len() as u64 <= MAX_STRING);
    let n = value.len();
    let mut b = Batch::new();
    if n == 0 {
        b.del_meta(cx.db(), dest);
    } else {
        b.put_meta(cx.db(), dest, &Meta::string(value, None));
    }
    cx.write(b)?;
    cx.notify(
        if n == 0 {
            Class::GENERIC
        } else {
            Class::STRING
        },
        if n == 0 { "del" } else { "set" },
        dest,
    );
    Ok(Reply::Int(n as i64))
}

/// Whether `cmd` is a `SET key value` without options that the engine will accept, so that
/// it can join [`set_many`]; anything else (options, limits, authentication, a cluster
/// redirection) goes through [`crate::cmd::dispatch::execute`] and gets its own reply.
pub fn is_plain_set(sh: &Shared, s: &Session, cmd: &[Bytes]) -> bool {
    let engine = sh.store.db();
    let o = engine.options();
    cmd.len() == 3
        && eq(&cmd[0], "set")
        && (s.authed || sh.settings.requirepass().is_none())
        && !sh.store.is_replica()
        && s.ext.multi.is_none()
        && s.replies.on()
        && cmd[1].len() + record::META_KEY_OVERHEAD <= o.max_key_size
        && cmd[2].len() + record::STRING_HEADER <= o.max_value_size
        && crate::cmd::cluster::route::serves(sh, s, cmd)
        // A `new` event needs to know whether each key existed.
        && !sh.notify.wants(Class::NEW)
        // Over `maxmemory`, each SET is checked (and evicts) on its own.
        && !super::evict::over(sh)
}

/// Consecutive plain SETs of one connection (a pipeline) as one atomic engine write: one
/// WAL record and, under `appendfsync always`, one sync for all of them instead of one
/// group-commit round each. Replies as if they had run one by one.
pub fn set_many(sh: &Shared, s: &Session, cmds: &[Vec<Bytes>]) -> Vec<Reply> {
    let keys: Vec<&Bytes> = cmds.iter().map(|c| &c[1]).collect();
    let _x = sh.store.command_lock();
    let _g = sh.store.lock_shared(s.ext.db, &keys);
    let mut b = Batch::new();
    for c in cmds {
        b.put_meta(s.ext.db, &c[1], &Meta::string(c[2].to_vec(), None));
    }
    let sync = sh.settings.appendfsync() == crate::config::AppendFsync::Always;
    let reply = match sh.store.write(b, sync) {
        Ok(_) => {
            if sh.notify.wants(Class::STRING) {
                let mut events = cmds
                    .iter()
                    .map(|c| crate::notify::Event {
                        db: s.ext.db,
                        name: "set",
                        key: c[1].clone(),
                    })
                    .collect();
                sh.publish_events(&mut events);
            }
            Reply::ok()
        }
        Err(e) => e.into(),
    };
    vec![reply; cmds.len()]
}
