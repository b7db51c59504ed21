//! Sets: one sub-key per member (`tag 0 | member`, empty value), in member order; the
//! metadata record keeps the member count. Set algebra reads its inputs whole (bounded
//! by [`super::MAX_REPLY_ITEMS`] per input).

use super::table::c;
use super::{bulk, coll_scan, pick, rand_count, CmdResult, Ctx};
use crate::notify::Class;
use crate::protocol::Reply;
use crate::record::{Kind, Meta};
use crate::store::Batch;
use bytes::Bytes;
use std::collections::{BTreeSet, HashSet};

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("sadd", -3, [WRITE DENYOOM FAST CHEAP COMBINABLE], 1, 1, 1, Set, sadd),
    c!("srem", -3, [WRITE FAST CHEAP COMBINABLE], 1, 1, 1, Set, srem),
    c!("smembers", 2, [READONLY], 1, 1, 1, Set, smembers),
    c!("sismember", 3, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, Set, sismember),
    c!("smismember", -3, [READONLY FAST CHEAP], 1, 1, 1, Set, smismember),
    c!("scard", 2, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, Set, scard),
    c!("spop", -2, [WRITE FAST], 1, 1, 1, Set, spop),
    c!("srandmember", -2, [READONLY], 1, 1, 1, Set, srandmember),
    c!("smove", 4, [WRITE FAST], 1, 2, 1, Set, smove),
    c!("sinter", -2, [READONLY], 1, -1, 1, Set, sinter),
    c!("sinterstore", -3, [WRITE DENYOOM], 1, -1, 1, Set, sinterstore),
    c!("sintercard", -3, [READONLY], 0, 0, 0, Set, sintercard),
    c!("sunion", -2, [READONLY], 1, -1, 1, Set, sunion),
    c!("sunionstore", -3, [WRITE DENYOOM], 1, -1, 1, Set, sunionstore),
    c!("sdiff", -2, [READONLY], 1, -1, 1, Set, sdiff),
    c!("sdiffstore", -3, [WRITE DENYOOM], 1, -1, 1, Set, sdiffstore),
    c!("sscan", -3, [READONLY], 1, 1, 1, Set, sscan),
];

fn has(cx: &Ctx, key: &[u8], m: &Meta, member: &[u8]) -> Result<bool, Reply> {
    cx.sub_exists(key, m, 0, member)
}

/// Every member of the set `key` (empty if absent).
fn members(cx: &Ctx, key: &[u8]) -> Result<BTreeSet<Vec<u8>>, Reply> {
    Ok(match cx.typed(key, Kind::Set)? {
        Some(m) => cx
            .members(key, &m, 0)?
            .into_iter()
            .map(|(k, _)| k)
            .collect(),
        None => BTreeSet::new(),
    })
}

fn sadd(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let _g = cx.lock(&[key]);
    let mut m = cx.collection(key, Kind::Set)?;
    let mut b = Batch::new();
    let mut added = HashSet::new();
    for member in &a[1..] {
        if !added.contains(member) && !has(cx, key, &m, member)? {
            b.put(&cx.sub_key(key, &m, 0, member), b"");
            added.insert(member.clone());
        }
    }
    if added.is_empty() {
        return Ok(Reply::Int(0));
    }
    m.size += added.len() as u64;
    b.put_meta(cx.db(), key, &m);
    cx.write(b)?;
    cx.notify(Class::SET, "sadd", key);
    Ok(Reply::Int(added.len() as i64))
}

/// Removes `gone` members (known to be present) from `m` into `b`.
fn remove(cx: &Ctx, b: &mut Batch, key: &[u8], m: &mut Meta, gone: &[Vec<u8>]) {
    for member in gone {
        b.delete(&cx.sub_key(key, m, 0, member));
    }
    m.size -= gone.len() as u64;
    cx.put_collection(b, key, m);
}

fn srem(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let _g = cx.lock(&[key]);
    let Some(mut m) = cx.typed(key, Kind::Set)? else {
        return Ok(Reply::Int(0));
    };
    let mut gone: Vec<Vec<u8>> = Vec::new();
    for member in &a[1..] {
        if !gone.iter().any(|g| g[..] == member[..]) && has(cx, key, &m, member)? {
            gone.push(member.to_vec());
        }
    }
    if gone.is_empty() {
        return Ok(Reply::Int(0));
    }
    let mut b = Batch::new();
    remove(cx, &mut b, key, &mut m, &gone);
    cx.write(b)?;
    cx.notify(Class::SET, "srem", key);
    cx.deleted_if_empty(key, &m);
    Ok(Reply::Int(gone.len() as i64))
}

fn set_reply(set: impl IntoIterator<Item = Vec<u8>>) -> Reply {
    Reply::Array(set.into_iter().map(bulk).collect())
}

fn smembers(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(set_reply(members(cx, &a[0])?))
}

fn sismember(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(match cx.typed(&a[0], Kind::Set)? {
        Some(m) => has(cx, &a[0], &m, &a[1])? as i64,
        None => 0,
    }))
}

fn smismember(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let m = cx.typed(&a[0], Kind::Set)?;
    let mut out = Vec::with_capacity(a.len() - 1);
    for member in &a[1..] {
        out.push(Reply::Int(match &m {
            Some(m) => has(cx, &a[0], m, member)? as i64,
            None => 0,
        }));
    }
    Ok(Reply::Array(out))
}

fn scard(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(
        cx.typed(&a[0], Kind::Set)?.map_or(0, |m| m.size) as i64,
    ))
}

fn count_arg(a: &[Bytes]) -> Result<Option<i64>, Reply> {
    match a.len() {
        1 => Ok(None),
        2 => Ok(Some(rand_count(&a[1])?)),
        _ => Err(super::syntax()),
    }
}

fn spop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let count = count_arg(a)?;
    if count.is_some_and(|c| c < 0) {
        return Err(Reply::err("value is out of range, must be positive"));
    }
    let _g = cx.lock(&[key]);
    let Some(mut m) = cx.typed(key, Kind::Set)? else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let all: Vec<Vec<u8>> = cx
        .members(key, &m, 0)?
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let chosen: Vec<Vec<u8>> = pick(all.len(), count.unwrap_or(1))
        .into_iter()
        .map(|i| all[i].clone())
        .collect();
    let mut b = Batch::new();
    remove(cx, &mut b, key, &mut m, &chosen);
    cx.write(b)?;
    if !chosen.is_empty() {
        cx.notify(Class::SET, "spop", key);
        cx.deleted_if_empty(key, &m);
    }
    Ok(match count {
        None => bulk(chosen.into_iter().next().expect("a non-empty set")),
        Some(_) => set_reply(chosen),
    })
}

fn srandmember(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let count = count_arg(a)?;
    let all: Vec<Vec<u8>> = members(cx, &a[0])?.into_iter().collect();
    match count {
        None if all.is_empty() => Ok(Reply::Nil),
        None => Ok(bulk(all[pick(all.len(), 1)[0]].clone())),
        Some(c) => Ok(set_reply(
            pick(all.len(), c).into_iter().map(|i| all[i].clone()),
        )),
    }
}

fn smove(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (src, dst, member) = (&a[0], &a[1], &a[2]);
    let _g = cx.lock(&[src, dst]);
    let sm = cx.typed(src, Kind::Set)?;
    let dm = cx.typed(dst, Kind::Set)?;
    let Some(mut sm) = sm else {
        return Ok(Reply::Int(0));
    };
    if !has(cx, src, &sm, member)? {
        return Ok(Reply::Int(0));
    }
    if src == dst {
        return Ok(Reply::Int(1));
    }
    let mut b = Batch::new();
    remove(cx, &mut b, src, &mut sm, &[member.to_vec()]);
    let mut dm = match dm {
        Some(m) => m,
        None => cx.new_collection(Kind::Set),
    };
    let added = !has(cx, dst, &dm, member)?;
    if added {
        b.put(&cx.sub_key(dst, &dm, 0, member), b"");
        dm.size += 1;
        b.put_meta(cx.db(), dst, &dm);
    }
    cx.write(b)?;
    cx.notify(Class::SET, "srem", src);
    cx.deleted_if_empty(src, &sm);
    if added {
        cx.notify(Class::SET, "sadd", dst);
    }
    Ok(Reply::Int(1))
}

#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The set operation over `keys` (every key checked for its type first, as Redis does).
fn combine(cx: &Ctx, keys: &[Bytes], op: Op) -> Result<BTreeSet<Vec<u8>>, Reply> {
    let metas: Vec<Option<Meta>> = keys
        .iter()
        .map(|k| cx.typed(k, Kind::Set))
        .collect::<Result<_, _>>()?;
    if matches!(op, Op::Inter) && metas.iter().any(Option::is_none) {
        return Ok(BTreeSet::new());
    }
    let read = |i: usize| -> Result<BTreeSet<Vec<u8>>, Reply> {
        Ok(match &metas[i] {
            Some(m) => cx
                .members(&keys[i], m, 0)?
                .into_iter()
                .map(|(k, _)| k)
                .collect(),
            None => BTreeSet::new(),
        })
    };
    let mut acc = read(0)?;
    for i in 1..keys.len() {
        if acc.is_empty() && !matches!(op, Op::Union) {
            break;
        }
        match op {
            Op::Inter => {
                let m = metas[i].as_ref().expect("checked above");
                let mut keep = BTreeSet::new();
                for x in acc {
                    if has(cx, &keys[i], m, &x)? {
                        keep.insert(x);
                    }
                }
                acc = keep;
            }
            Op::Union => {
                acc.extend(read(i)?);
                super::check_reply_size(acc.len() as u64)?;
            }
            Op::Diff => {
                if let Some(m) = &metas[i] {
                    let mut keep = BTreeSet::new();
                    for x in acc {
                        if !has(cx, &keys[i], m, &x)? {
                            keep.insert(x);
                        }
                    }
                    acc = keep;
                }
            }
        }
    }
    Ok(acc)
}

/// Stores `set` as `dst` (replacing whatever it was; deleting it if `set` is empty).
fn store(cx: &Ctx, dst: &[u8], set: BTreeSet<Vec<u8>>, event: &'static str) -> CmdResult {
    let mut b = Batch::new();
    let n = set.len();
    if n == 0 {
        if cx.meta(dst)?.is_some() {
            b.del_meta(cx.db(), dst);
            cx.write(b)?;
            cx.notify(Class::GENERIC, "del", dst);
        }
        return Ok(Reply::Int(0));
    } else {
        let mut m = cx.new_collection(Kind::Set);
        for x in &set {
            b.put(&cx.sub_key(dst, &m, 0, x), b"");
        }
        m.size = n as u64;
        b.put_meta(cx.db(), dst, &m);
    }
    cx.write(b)?;
    cx.notify(Class::SET, event, dst);
    Ok(Reply::Int(n as i64))
}

fn sinter(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(set_reply(combine(cx, a, Op::Inter)?))
}

fn sunion(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(set_reply(combine(cx, a, Op::Union)?))
}

fn sdiff(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(set_reply(combine(cx, a, Op::Diff)?))
}

fn store_op(cx: &Ctx, a: &[Bytes], op: Op, event: &'static str) -> CmdResult {
    let _g = cx.lock(a);
    let set = combine(cx, &a[1..], op)?;
    store(cx, &a[0], set, event)
}

fn sinterstore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    store_op(cx, a, Op::Inter, "sinterstore")
}

fn sunionstore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    store_op(cx, a, Op::Union, "sunionstore")
}

fn sdiffstore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    store_op(cx, a, Op::Diff, "sdiffstore")
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`
fn sintercard(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n = super::parse_int(&a[0])
        .filter(|&n| n > 0)
        .ok_or_else(|| Reply::err("numkeys should be greater than 0"))? as usize;
    if a.len() < 1 + n {
        return Err(Reply::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    let mut limit = 0i64;
    let mut i = 1 + n;
    while i < a.len() {
        if super::eq(&a[i], "limit") && i + 1 < a.len() {
            limit = super::parse_int(&a[i + 1])
                .filter(|&l| l >= 0)
                .ok_or_else(|| Reply::err("LIMIT can't be negative"))?;
            i += 2;
        } else {
            return Err(super::syntax());
        }
    }
    let set = combine(cx, &a[1..1 + n], Op::Inter)?;
    let len = set.len() as i64;
    Ok(Reply::Int(if limit > 0 { len.min(limit) } else { len }))
}

fn sscan(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    coll_scan(cx, a, Kind::Set, |k, _, out| {
        out.push(Reply::bulk(k.to_vec()))
    })
}
