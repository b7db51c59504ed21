//! Lists: element `i` is the sub-key `tag 0 | head + i` (a big-endian u64), so both ends
//! grow in O(1) (`head` starts at 2^63) and a range is one ordered scan. Commands that
//! insert or remove in the middle (`LINSERT`, `LREM`) rewrite the list under a new
//! version, O(n) (the old version's sub-keys become garbage for the sweep). The blocking
//! variants (`BLPOP`, `BLMOVE`, ...) are in [`super::blocking`].

use super::string::clamp_range;
use super::table::c;
use super::{bulk, check_reply_size, eq, int, CmdResult, Ctx};
use crate::notify::Class;
use crate::protocol::Reply;
use crate::record::{Kind, Meta};
use crate::store::Batch;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("lpush", -3, [WRITE DENYOOM FAST CHEAP COMBINABLE WAKES], 1, 1, 1, List, lpush),
    c!("rpush", -3, [WRITE DENYOOM FAST CHEAP COMBINABLE WAKES], 1, 1, 1, List, rpush),
    c!("lpushx", -3, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, List, lpushx),
    c!("rpushx", -3, [WRITE DENYOOM FAST CHEAP], 1, 1, 1, List, rpushx),
    c!("lpop", -2, [WRITE FAST CHEAP COMBINABLE], 1, 1, 1, List, lpop, point_if = without_count),
    c!("rpop", -2, [WRITE FAST CHEAP COMBINABLE], 1, 1, 1, List, rpop, point_if = without_count),
    c!("llen", 2, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, List, llen),
    c!("lindex", 3, [READONLY], 1, 1, 1, List, lindex),
    c!("lset", 4, [WRITE DENYOOM], 1, 1, 1, List, lset),
    c!("lrange", 4, [READONLY CHEAP], 1, 1, 1, List, lrange, point_if = short_range),
    c!("ltrim", 4, [WRITE], 1, 1, 1, List, ltrim),
    c!("lrem", 4, [WRITE], 1, 1, 1, List, lrem),
    c!("linsert", 5, [WRITE DENYOOM], 1, 1, 1, List, linsert),
    c!("lpos", -3, [READONLY], 1, 1, 1, List, lpos),
    c!("lmove", 5, [WRITE DENYOOM], 1, 2, 1, List, lmove),
    c!("rpoplpush", 3, [WRITE DENYOOM], 1, 2, 1, List, rpoplpush),
    c!("lmpop", -4, [WRITE], 0, 0, 0, List, lmpop),
];

/// `LPOP`/`RPOP key` without a count: one element, a point operation (with a count it
/// scans).
pub fn without_count(cmd: &[Bytes]) -> bool {
    cmd.len() == 2
}

/// Most elements of an `LRANGE` run on the connection's task: a scan of that many
/// sub-keys (one seek, then steps) costs less than the pool's two thread hand-offs and the
/// fresh memory of a pool thread's heap, which were 40 % of the server's CPU for
/// `LRANGE 0 99` (docs/serve.md, "Where a request's time goes").
const SHORT_RANGE: i64 = 128;

/// Whether `LRANGE key start end` reads at most [`SHORT_RANGE`] elements whatever the
/// list's length: both indexes count from the same end.
pub fn short_range(cmd: &[Bytes]) -> bool {
    let [_, _, start, end] = cmd else {
        return false;
    };
    match (super::parse_int(start), super::parse_int(end)) {
        (Some(s), Some(e)) if (s >= 0) == (e >= 0) => e.saturating_sub(s) < SHORT_RANGE,
        _ => false,
    }
}

fn at(cx: &Ctx, key: &[u8], m: &Meta, pos: u64) -> Vec<u8> {
    cx.sub_key(key, m, 0, &m.head.wrapping_add(pos).to_be_bytes())
}

/// Pops of at most this many elements read each by its position (a point read, served
/// from the memtable for a recent push) rather than by a scan, whose iterator over every
/// memtable and level costs more than a few point reads.
const POINT_READS: u64 = 8;

/// The element at position `pos` (< the list's size; positions are dense from `head`).
fn element(cx: &Ctx, key: &[u8], m: &Meta, pos: u64) -> Result<Vec<u8>, Reply> {
    cx.sub_get(key, m, 0, &m.head.wrapping_add(pos).to_be_bytes())?
        .ok_or_else(|| {
            Reply::err(format!(
                "list element {pos} of a list of {} is missing",
                m.size
            ))
        })
}

/// Elements at positions `from..=to` (checked against the reply limit).
pub(super) fn range(
    cx: &Ctx,
    key: &[u8],
    m: &Meta,
    from: u64,
    to: u64,
) -> Result<Vec<Vec<u8>>, Reply> {
    check_reply_size(to - from + 1)?;
    let mut out = Vec::with_capacity((to - from + 1) as usize);
    let start = m.head.wrapping_add(from).to_be_bytes();
    cx.sh
        .store
        .sub_range(&cx.sub_prefix(key, m, 0), Some(&start), |_, v| {
            out.push(v);
            (out.len() as u64) < to - from + 1
        })?;
    Ok(out)
}

fn all(cx: &Ctx, key: &[u8], m: &Meta) -> Result<Vec<Vec<u8>>, Reply> {
    if m.size == 0 {
        return Ok(Vec::new());
    }
    range(cx, key, m, 0, m.size - 1)
}

/// Writes `items` as the whole list `key` under a new version (or deletes the key).
pub(super) fn rewrite(cx: &Ctx, b: &mut Batch, key: &[u8], old: &Meta, items: &[Vec<u8>]) {
    let mut m = cx.new_collection(Kind::List);
    m.expire_at_ms = old.expire_at_ms;
    for (i, v) in items.iter().enumerate() {
        b.put(&at(cx, key, &m, i as u64), v);
    }
    m.size = items.len() as u64;
    cx.put_collection(b, key, &m);
}

fn push(cx: &Ctx, a: &[Bytes], left: bool, only_existing: bool) -> CmdResult {
    let key = &a[0];
    let _g = cx.lock(&[key]);
    let m = cx.typed(key, Kind::List)?;
    if only_existing && m.is_none() {
        return Ok(Reply::Int(0));
    }
    let mut m = m.unwrap_or_else(|| cx.new_collection(Kind::List));
    let mut b = Batch::new();
    for v in &a[1..] {
        if left {
            m.head = m.head.wrapping_sub(1);
            m.size += 1;
            b.put(&at(cx, key, &m, 0), v);
        } else {
            b.put(&at(cx, key, &m, m.size), v);
            m.size += 1;
        }
    }
    b.put_meta(cx.db(), key, &m);
    cx.write(b)?;
    cx.notify(Class::LIST, if left { "lpush" } else { "rpush" }, key);
    Ok(Reply::Int(m.size as i64))
}

fn lpush(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    push(cx, a, true, false)
}
fn rpush(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    push(cx, a, false, false)
}
fn lpushx(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    push(cx, a, true, true)
}
fn rpushx(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    push(cx, a, false, true)
}

/// Removes up to `n` elements from one end into `b`; returns them in pop order.
fn pop_n(
    cx: &Ctx,
    b: &mut Batch,
    key: &[u8],
    m: &mut Meta,
    n: u64,
    left: bool,
) -> Result<Vec<Vec<u8>>, Reply> {
    let n = n.min(m.size);
    if n == 0 {
        return Ok(Vec::new());
    }
    let first = if left { 0 } else { m.size - n };
    let mut items = if n <= POINT_READS {
        (first..first + n)
            .map(|p| element(cx, key, m, p))
            .collect::<Result<_, _>>()?
    } else {
        range(cx, key, m, first, first + n - 1)?
    };
    for i in 0..n {
        let pos = if left { i } else { m.size - n + i };
        b.delete(&at(cx, key, m, pos));
    }
    if left {
        m.head = m.head.wrapping_add(n);
    } else {
        items.reverse();
    }
    m.size -= n;
    cx.put_collection(b, key, m);
    Ok(items)
}

/// Pops up to `n` elements from one end of `key` (locking it); `None` if it does not
/// exist.
pub fn pop_from(cx: &Ctx, key: &[u8], left: bool, n: u64) -> Result<Option<Vec<Vec<u8>>>, Reply> {
    let _g = cx.lock(&[key]);
    let Some(mut m) = cx.typed(key, Kind::List)? else {
        return Ok(None);
    };
    let mut b = Batch::new();
    let items = pop_n(cx, &mut b, key, &mut m, n, left)?;
    cx.write(b)?;
    if !items.is_empty() {
        cx.notify(Class::LIST, if left { "lpop" } else { "rpop" }, key);
        cx.deleted_if_empty(key, &m);
    }
    Ok(Some(items))
}

fn pop(cx: &Ctx, a: &[Bytes], left: bool) -> CmdResult {
    let key = &a[0];
    let count = match a.len() {
        1 => None,
        2 => Some(
            super::parse_int(&a[1])
                .filter(|&c| c >= 0)
                .ok_or_else(|| Reply::err("value is out of range, must be positive"))?,
        ),
        _ => return Err(super::wrong_args(if left { "lpop" } else { "rpop" })),
    };
    let Some(items) = pop_from(cx, key, left, count.unwrap_or(1) as u64)? else {
        // With a count the reply is an array, and a missing key's is the null array.
        return Ok(if count.is_some() {
            Reply::NilArray
        } else {
            Reply::Nil
        });
    };
    Ok(match count {
        None => items.into_iter().next().map_or(Reply::Nil, bulk),
        Some(_) => Reply::Array(items.into_iter().map(bulk).collect()),
    })
}

fn lpop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    pop(cx, a, true)
}
fn rpop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    pop(cx, a, false)
}

fn llen(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(
        cx.typed(&a[0], Kind::List)?.map_or(0, |m| m.size) as i64,
    ))
}

/// A possibly negative index into a list of `len`.
fn position(i: i64, len: u64) -> Option<u64> {
    let p = if i < 0 { len as i64 + i } else { i };
    (p >= 0 && (p as u64) < len).then_some(p as u64)
}

fn lindex(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let i = int(&a[1])?;
    let Some(m) = cx.typed(&a[0], Kind::List)? else {
        return Ok(Reply::Nil);
    };
    let Some(p) = position(i, m.size) else {
        return Ok(Reply::Nil);
    };
    Ok(bulk(element(cx, &a[0], &m, p)?))
}

fn lset(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let i = int(&a[1])?;
    let _g = cx.lock(&[key]);
    let Some(m) = cx.typed(key, Kind::List)? else {
        return Err(Reply::err("no such key"));
    };
    let p = position(i, m.size).ok_or_else(|| Reply::err("index out of range"))?;
    let mut b = Batch::new();
    b.put(&at(cx, key, &m, p), &a[2]);
    b.put_meta(cx.db(), key, &m);
    cx.write(b)?;
    cx.notify(Class::LIST, "lset", key);
    Ok(Reply::ok())
}

fn lrange(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (s, e) = (int(&a[1])?, int(&a[2])?);
    let Some(m) = cx.typed(&a[0], Kind::List)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let Some((s, e)) = clamp_range(s, e, m.size as i64) else {
        return Ok(Reply::Array(Vec::new()));
    };
    Ok(Reply::Array(
        range(cx, &a[0], &m, s as u64, e as u64)?
            .into_iter()
            .map(bulk)
            .collect(),
    ))
}

fn ltrim(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let (s, e) = (int(&a[1])?, int(&a[2])?);
    let _g = cx.lock(&[key]);
    let Some(mut m) = cx.typed(key, Kind::List)? else {
        return Ok(Reply::ok());
    };
    let mut b = Batch::new();
    let (keep_from, keep_to) = match clamp_range(s, e, m.size as i64) {
        Some((s, e)) => (s as u64, e as u64 + 1),
        None => (0, 0),
    };
    for p in (0..keep_from).chain(keep_to.max(keep_from)..m.size) {
        b.delete(&at(cx, key, &m, p));
    }
    m.head = m.head.wrapping_add(keep_from);
    m.size = keep_to.saturating_sub(keep_from);
    cx.put_collection(&mut b, key, &m);
    cx.write(b)?;
    cx.notify(Class::LIST, "ltrim", key);
    cx.deleted_if_empty(key, &m);
    Ok(Reply::ok())
}

fn lrem(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let count = int(&a[1])?;
    let _g = cx.lock(&[key]);
    let Some(m) = cx.typed(key, Kind::List)? else {
        return Ok(Reply::Int(0));
    };
    let mut items = all(cx, key, &m)?;
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut removed = 0;
    if count < 0 {
        items.reverse();
    }
    items.retain(|v| {
        if removed < limit && v[..] == a[2][..] {
            removed += 1;
            false
        } else {
            true
        }
    });
    if count < 0 {
        items.reverse();
    }
    if removed > 0 {
        let mut b = Batch::new();
        rewrite(cx, &mut b, key, &m, &items);
        cx.write(b)?;
        cx.notify(Class::LIST, "lrem", key);
        if items.is_empty() {
            cx.notify(Class::GENERIC, "del", key);
        }
    }
    Ok(Reply::Int(removed as i64))
}

fn linsert(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let before = if eq(&a[1], "before") {
        true
    } else if eq(&a[1], "after") {
        false
    } else {
        return Err(super::syntax());
    };
    let _g = cx.lock(&[key]);
    let Some(m) = cx.typed(key, Kind::List)? else {
        return Ok(Reply::Int(0));
    };
    let mut items = all(cx, key, &m)?;
    let Some(i) = items.iter().position(|v| v[..] == a[2][..]) else {
        return Ok(Reply::Int(-1));
    };
    items.insert(if before { i } else { i + 1 }, a[3].to_vec());
    let mut b = Batch::new();
    rewrite(cx, &mut b, key, &m, &items);
    cx.write(b)?;
    cx.notify(Class::LIST, "linsert", key);
    Ok(Reply::Int(items.len() as i64))
}

/// `LPOS key element [RANK rank] [COUNT n] [MAXLEN len]`
fn lpos(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0i64);
    let mut i = 2;
    while i < a.len() {
        if i + 1 >= a.len() {
            return Err(super::syntax());
        }
        let n = int(&a[i + 1])?;
        if eq(&a[i], "rank") {
            if n == 0 || n == i64::MIN {
                return Err(Reply::err("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
            rank = n;
        } else if eq(&a[i], "count") {
            if n < 0 {
                return Err(Reply::err("COUNT can't be negative"));
            }
            count = Some(n);
        } else if eq(&a[i], "maxlen") {
            if n < 0 {
                return Err(Reply::err("MAXLEN can't be negative"));
            }
            maxlen = n;
        } else {
            return Err(super::syntax());
        }
        i += 2;
    }
    let Some(m) = cx.typed(&a[0], Kind::List)? else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let items = all(cx, &a[0], &m)?;
    let order: Box<dyn Iterator<Item = usize>> = if rank > 0 {
        Box::new(0..items.len())
    } else {
        Box::new((0..items.len()).rev())
    };
    let mut skip = rank.unsigned_abs() - 1;
    let want = match count {
        Some(0) => usize::MAX,
        Some(c) => c as usize,
        None => 1,
    };
    let mut found = Vec::new();
    for (seen, p) in order.enumerate() {
        if maxlen > 0 && seen as i64 >= maxlen {
            break;
        }
        if items[p][..] == a[1][..] {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(Reply::Int(p as i64));
            if found.len() >= want {
                break;
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.into_iter().next().unwrap_or(Reply::Nil),
    })
}

/// `[key, [element ...]]`: the reply of `LMPOP`/`BLMPOP`.
pub fn mpop_reply(key: &[u8], items: Vec<Vec<u8>>) -> Reply {
    Reply::Array(vec![
        bulk(key.to_vec()),
        Reply::Array(items.into_iter().map(bulk).collect()),
    ])
}

/// Pops up to `count` elements from the first of `keys` that exists (`None`: none does).
pub fn mpop(cx: &Ctx, keys: &[Bytes], left: bool, count: u64) -> Result<Option<Reply>, Reply> {
    for k in keys {
        if let Some(items) = pop_from(cx, k, left, count)? {
            return Ok(Some(mpop_reply(k, items)));
        }
    }
    Ok(None)
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`
fn lmpop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (keys, right, count) = super::mpop_args(a, "left", "right")?;
    Ok(mpop(cx, keys, !right, count)?.unwrap_or(Reply::NilArray))
}

pub fn side(b: &[u8]) -> Result<bool, Reply> {
    if eq(b, "left") {
        Ok(true)
    } else if eq(b, "right") {
        Ok(false)
    } else {
        Err(super::syntax())
    }
}

/// Pops from one end of `src` and pushes onto one end of `dst`, atomically: the element,
/// or nil if `src` does not exist.
pub fn move_one(cx: &Ctx, src: &[u8], dst: &[u8], from_left: bool, to_left: bool) -> CmdResult {
    let _g = cx.lock(&[src, dst]);
    let Some(mut sm) = cx.typed(src, Kind::List)? else {
        return Ok(Reply::Nil);
    };
    let dm = cx.typed(dst, Kind::List)?;
    let mut b = Batch::new();
    let v = pop_n(cx, &mut b, src, &mut sm, 1, from_left)?.remove(0);
    let emptied = src != dst && sm.size == 0;
    let mut dm = if src == dst {
        sm
    } else {
        dm.unwrap_or_else(|| cx.new_collection(Kind::List))
    };
    if to_left {
        dm.head = dm.head.wrapping_sub(1);
        dm.size += 1;
        b.put(&at(cx, dst, &dm, 0), &v);
    } else {
        b.put(&at(cx, dst, &dm, dm.size), &v);
        dm.size += 1;
    }
    b.put_meta(cx.db(), dst, &dm);
    cx.write(b)?;
    cx.notify(Class::LIST, if from_left { "lpop" } else { "rpop" }, src);
    if emptied {
        cx.notify(Class::GENERIC, "del", src);
    }
    cx.notify(Class::LIST, if to_left { "lpush" } else { "rpush" }, dst);
    Ok(bulk(v))
}

fn lmove(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (from, to) = (side(&a[2])?, side(&a[3])?);
    move_one(cx, &a[0], &a[1], from, to)
}

fn rpoplpush(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    move_one(cx, &a[0], &a[1], false, true)
}
