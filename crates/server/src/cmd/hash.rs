//! Hashes: one sub-key per field (`tag 0 | field -> value`); the metadata record keeps
//! the field count, so `HLEN` is one read and `DEL` is O(1).

use super::table::c;
use super::{bulk, coll_scan, float, int, pick, rand_count, wrongtype, CmdResult, Ctx};
use crate::notify::Class;
use crate::protocol::Reply;
use crate::record::Kind;
use crate::store::Batch;
use bytes::Bytes;
use std::collections::HashSet;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("hset", -4, [WRITE DENYOOM FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hset),
    c!("hmset", -4, [WRITE DENYOOM FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hmset),
    c!("hsetnx", 4, [WRITE DENYOOM FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hsetnx),
    c!("hget", 3, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hget),
    c!("hmget", -3, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hmget),
    c!("hdel", -3, [WRITE FAST CHEAP], 1, 1, 1, Hash, hdel),
    c!("hlen", 2, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hlen),
    c!("hstrlen", 3, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hstrlen),
    c!("hexists", 3, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hexists),
    c!("hincrby", 4, [WRITE DENYOOM FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hincrby),
    c!("hincrbyfloat", 4, [WRITE DENYOOM FAST CHEAP COMBINABLE], 1, 1, 1, Hash, hincrbyfloat),
    c!("hkeys", 2, [READONLY], 1, 1, 1, Hash, hkeys),
    c!("hvals", 2, [READONLY], 1, 1, 1, Hash, hvals),
    c!("hgetall", 2, [READONLY], 1, 1, 1, Hash, hgetall),
    c!("hscan", -3, [READONLY], 1, 1, 1, Hash, hscan),
    c!("hrandfield", -2, [READONLY], 1, 1, 1, Hash, hrandfield),
];

fn field(cx: &Ctx, key: &[u8], f: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    match cx.typed(key, Kind::Hash)? {
        Some(m) => cx.sub_get(key, &m, 0, f),
        None => Ok(None),
    }
}

/// Sets field/value pairs; returns how many fields were new.
fn set_fields(cx: &Ctx, key: &[u8], pairs: &[Bytes], only_new: bool) -> Result<i64, Reply> {
    let _g = cx.lock(&[key]);
    let mut m = cx.collection(key, Kind::Hash)?;
    let mut b = Batch::new();
    let mut added = HashSet::new();
    for kv in pairs.chunks(2) {
        let exists = added.contains(&kv[0]) || cx.sub_exists(key, &m, 0, &kv[0])?;
        if exists && only_new {
            continue;
        }
        if !exists {
            added.insert(kv[0].clone());
        }
        b.put(&cx.sub_key(key, &m, 0, &kv[0]), &kv[1]);
    }
    m.size += added.len() as u64;
    if !added.is_empty() {
        b.put_meta(cx.db(), key, &m);
    } else if !b.is_empty() {
        // Existing fields only: the collection (and so its metadata) existed already.
        b.touch_meta(cx.db(), key);
    }
    let wrote = !b.is_empty();
    cx.write(b)?;
    if wrote {
        cx.notify(Class::HASH, "hset", key);
    }
    Ok(added.len() as i64)
}

fn hset(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len().is_multiple_of(2) {
        return Err(super::wrong_args("hset"));
    }
    Ok(Reply::Int(set_fields(cx, &a[0], &a[1..], false)?))
}

fn hmset(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len().is_multiple_of(2) {
        return Err(super::wrong_args("hmset"));
    }
    set_fields(cx, &a[0], &a[1..], false)?;
    Ok(Reply::ok())
}

fn hsetnx(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(set_fields(cx, &a[0], &a[1..], true)?))
}

fn hget(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(field(cx, &a[0], &a[1])?.map_or(Reply::Nil, bulk))
}

fn hmget(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let m = cx.typed(&a[0], Kind::Hash)?;
    let mut out = Vec::with_capacity(a.len() - 1);
    for f in &a[1..] {
        let v = match &m {
            Some(m) => cx.sub_get(&a[0], m, 0, f)?,
            None => None,
        };
        out.push(v.map_or(Reply::Nil, bulk));
    }
    Ok(Reply::Array(out))
}

fn hdel(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let _g = cx.lock(&[key]);
    let Some(mut m) = cx.typed(key, Kind::Hash)? else {
        return Ok(Reply::Int(0));
    };
    let mut b = Batch::new();
    let mut gone = HashSet::new();
    for f in &a[1..] {
        if !gone.contains(f) && cx.sub_exists(key, &m, 0, f)? {
            b.delete(&cx.sub_key(key, &m, 0, f));
            gone.insert(f.clone());
        }
    }
    if gone.is_empty() {
        return Ok(Reply::Int(0));
    }
    m.size -= gone.len() as u64;
    cx.put_collection(&mut b, key, &m);
    cx.write(b)?;
    cx.notify(Class::HASH, "hdel", key);
    cx.deleted_if_empty(key, &m);
    Ok(Reply::Int(gone.len() as i64))
}

fn hlen(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(
        cx.typed(&a[0], Kind::Hash)?.map_or(0, |m| m.size) as i64,
    ))
}

fn hstrlen(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(
        field(cx, &a[0], &a[1])?.map_or(0, |v| v.len()) as i64
    ))
}

fn hexists(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let exists = match cx.typed(&a[0], Kind::Hash)? {
        Some(m) => cx.sub_exists(&a[0], &m, 0, &a[1])?,
        None => false,
    };
    Ok(Reply::Int(exists as i64))
}

/// Rewrites one field with `f(old value)`; returns the new value.
fn update_field(
    cx: &Ctx,
    key: &[u8],
    f: &[u8],
    new_value: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, Reply>,
) -> Result<Vec<u8>, Reply> {
    let _g = cx.lock(&[key]);
    let mut m = cx.collection(key, Kind::Hash)?;
    let old = cx.sub_get(key, &m, 0, f)?;
    let v = new_value(old.as_deref())?;
    let mut b = Batch::new();
    b.put(&cx.sub_key(key, &m, 0, f), &v);
    if old.is_none() {
        m.size += 1;
    }
    b.put_meta(cx.db(), key, &m);
    cx.write(b)?;
    Ok(v)
}

/// `HINCRBY`'s and `HINCRBYFLOAT`'s write, and its event.
fn increment(
    cx: &Ctx,
    a: &[Bytes],
    event: &'static str,
    new_value: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, Reply>,
) -> Result<Vec<u8>, Reply> {
    let v = update_field(cx, &a[0], &a[1], new_value)?;
    cx.notify(Class::HASH, event, &a[0]);
    Ok(v)
}

fn hincrby(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let by = int(&a[2])?;
    let v = increment(cx, a, "hincrby", |old| {
        let cur = match old {
            Some(o) => {
                super::parse_int(o).ok_or_else(|| Reply::err("hash value is not an integer"))?
            }
            None => 0,
        };
        let n = cur
            .checked_add(by)
            .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
        Ok(n.to_string().into_bytes())
    })?;
    Ok(Reply::Int(super::parse_int(&v).expect("just formatted")))
}

fn hincrbyfloat(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let by = float(&a[2])?;
    if !by.is_finite() {
        return Err(Reply::err("value is NaN or Infinity"));
    }
    let v = increment(cx, a, "hincrbyfloat", |old| {
        let cur = match old {
            Some(o) => {
                super::parse_float(o).ok_or_else(|| Reply::err("hash value is not a float"))?
            }
            None => 0.0,
        };
        let n = cur + by;
        if !n.is_finite() {
            return Err(Reply::err("increment would produce NaN or Infinity"));
        }
        Ok(super::fmt_incr_float(n).into_bytes())
    })?;
    Ok(bulk(v))
}

/// Every field of the hash `key`, with `f` choosing what each contributes.
fn all(cx: &Ctx, key: &[u8], f: impl Fn(Vec<u8>, Vec<u8>, &mut Vec<Reply>)) -> CmdResult {
    let Some(m) = cx.typed(key, Kind::Hash)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let mut out = Vec::new();
    for (k, v) in cx.members(key, &m, 0)? {
        f(k, v, &mut out);
    }
    Ok(Reply::Array(out))
}

fn hkeys(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    all(cx, &a[0], |k, _, out| out.push(bulk(k)))
}

fn hvals(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    all(cx, &a[0], |_, v, out| out.push(bulk(v)))
}

fn hgetall(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let Some(m) = cx.typed(&a[0], Kind::Hash)? else {
        return Ok(Reply::Map(Vec::new()));
    };
    Ok(Reply::Map(
        cx.members(&a[0], &m, 0)?
            .into_iter()
            .map(|(k, v)| (bulk(k), bulk(v)))
            .collect(),
    ))
}

fn hscan(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    coll_scan(cx, a, Kind::Hash, |k, v, out| {
        out.push(Reply::bulk(k.to_vec()));
        out.push(Reply::bulk(v.to_vec()));
    })
}

/// `HRANDFIELD key [count [WITHVALUES]]`: reads the whole hash (bounded) to pick.
fn hrandfield(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let count = a.get(1).map(|c| rand_count(c)).transpose()?;
    let withvalues = match a.get(2) {
        None => false,
        Some(w) if super::eq(w, "withvalues") && a.len() == 3 => true,
        Some(_) => return Err(super::syntax()),
    };
    let m = match cx.meta(&a[0])? {
        Some(m) if m.kind != Kind::Hash => return Err(wrongtype()),
        m => m,
    };
    let Some(m) = m else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let fields = cx.members(&a[0], &m, 0)?;
    let Some(count) = count else {
        let i = pick(fields.len(), 1)[0];
        return Ok(bulk(fields[i].0.clone()));
    };
    let mut out = Vec::new();
    for i in pick(fields.len(), count) {
        let (k, v) = &fields[i];
        if withvalues && cx.s.proto >= 3 {
            out.push(Reply::Array(vec![bulk(k.clone()), bulk(v.clone())]));
            continue;
        }
        out.push(bulk(k.clone()));
        if withvalues {
            out.push(bulk(v.clone()));
        }
    }
    Ok(Reply::Array(out))
}
