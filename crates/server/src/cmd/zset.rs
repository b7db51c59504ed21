//! Sorted sets, laid out as Kvrocks does: every member has two sub-keys, `tag 0 | member
//! -> score` (point lookups: `ZSCORE`, `ZADD`'s old score) and the score index `tag 1 |
//! score | member -> (empty)`, whose keys sort as (score, member) do
//! ([`record::score_bytes`]), so a range by score or rank is one ordered scan and a
//! range by lex one ordered scan of `tag 0`. Every write changes both sub-keys and the
//! metadata record (member count) in one batch.
//!
//! The engine scans forward only, and keeps no rank index: a rank (`ZRANK`, `ZRANGE` by
//! rank) costs a scan from the start; a reversed range by score or lex counts its range
//! first, then reads the window it answers, so that no more than the reply is buffered.

use super::string::clamp_range;
use super::table::c;
use super::{
    bulk, check_reply_size, coll_scan, eq, float, int, numkeys, parse_int, pick, rand_count,
    syntax, wrongtype, CmdResult, Ctx, MAX_REPLY_ITEMS,
};
use crate::notify::Class;
use crate::protocol::Reply;
use crate::record::{score_bytes, score_from_bytes, Kind, Meta};
use crate::store::Batch;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("zadd", -4, [WRITE DENYOOM FAST CHEAP COMBINABLE], 1, 1, 1, SortedSet, zadd),
    c!("zincrby", 4, [WRITE DENYOOM FAST CHEAP COMBINABLE], 1, 1, 1, SortedSet, zincrby),
    c!("zscore", 3, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, SortedSet, zscore),
    c!("zmscore", -3, [READONLY FAST CHEAP], 1, 1, 1, SortedSet, zmscore),
    c!("zcard", 2, [READONLY FAST CHEAP COMBINABLE], 1, 1, 1, SortedSet, zcard),
    c!("zcount", 4, [READONLY FAST], 1, 1, 1, SortedSet, zcount),
    c!("zlexcount", 4, [READONLY FAST], 1, 1, 1, SortedSet, zlexcount),
    c!("zrange", -4, [READONLY], 1, 1, 1, SortedSet, zrange),
    c!("zrangestore", -5, [WRITE DENYOOM], 1, 2, 1, SortedSet, zrangestore),
    c!("zrevrange", -4, [READONLY], 1, 1, 1, SortedSet, zrevrange),
    c!("zrangebyscore", -4, [READONLY], 1, 1, 1, SortedSet, zrangebyscore),
    c!("zrevrangebyscore", -4, [READONLY], 1, 1, 1, SortedSet, zrevrangebyscore),
    c!("zrangebylex", -4, [READONLY], 1, 1, 1, SortedSet, zrangebylex),
    c!("zrevrangebylex", -4, [READONLY], 1, 1, 1, SortedSet, zrevrangebylex),
    c!("zrank", 3, [READONLY FAST], 1, 1, 1, SortedSet, zrank),
    c!("zrevrank", 3, [READONLY FAST], 1, 1, 1, SortedSet, zrevrank),
    c!("zrem", -3, [WRITE FAST CHEAP], 1, 1, 1, SortedSet, zrem),
    c!("zremrangebyrank", 4, [WRITE], 1, 1, 1, SortedSet, zremrangebyrank),
    c!("zremrangebyscore", 4, [WRITE], 1, 1, 1, SortedSet, zremrangebyscore),
    c!("zremrangebylex", 4, [WRITE], 1, 1, 1, SortedSet, zremrangebylex),
    c!("zpopmin", -2, [WRITE FAST], 1, 1, 1, SortedSet, zpopmin),
    c!("zpopmax", -2, [WRITE FAST], 1, 1, 1, SortedSet, zpopmax),
    c!("zmpop", -4, [WRITE], 0, 0, 0, SortedSet, zmpop),
    c!("zrandmember", -2, [READONLY], 1, 1, 1, SortedSet, zrandmember),
    c!("zunionstore", -4, [WRITE DENYOOM], 1, 1, 1, SortedSet, zunionstore),
    c!("zinterstore", -4, [WRITE DENYOOM], 1, 1, 1, SortedSet, zinterstore),
    c!("zdiffstore", -4, [WRITE DENYOOM], 1, 1, 1, SortedSet, zdiffstore),
    c!("zunion", -3, [READONLY], 0, 0, 0, SortedSet, zunion),
    c!("zinter", -3, [READONLY], 0, 0, 0, SortedSet, zinter),
    c!("zdiff", -3, [READONLY], 0, 0, 0, SortedSet, zdiff),
    c!("zintercard", -3, [READONLY], 0, 0, 0, SortedSet, zintercard),
    c!("zscan", -3, [READONLY], 1, 1, 1, SortedSet, zscan),
];

/// Tag of the member -> score sub-keys.
const MEMBERS: u8 = 0;
/// Tag of the (score, member) index sub-keys.
const INDEX: u8 = 1;

/// A (member, score) pair as ranges and pops return them.
pub type Scored = (Vec<u8>, f64);

fn nan_error() -> Reply {
    Reply::err("resulting score is not a number (NaN)")
}

/// The score of `member`, if it is one.
pub(super) fn score(cx: &Ctx, key: &[u8], m: &Meta, member: &[u8]) -> Result<Option<f64>, Reply> {
    Ok(cx
        .sub_get(key, m, MEMBERS, member)?
        .map(|v| score_from_bytes(&v)))
}

fn index_suffix(score: f64, member: &[u8]) -> Vec<u8> {
    [&score_bytes(score)[..], member].concat()
}

/// Writes `member` with score `new` into `b` (its old score `old`, if it had one).
fn put_member(
    cx: &Ctx,
    b: &mut Batch,
    key: &[u8],
    m: &Meta,
    member: &[u8],
    old: Option<f64>,
    new: f64,
) {
    if let Some(o) = old {
        if score_bytes(o) == score_bytes(new) {
            return;
        }
        b.delete(&cx.sub_key(key, m, INDEX, &index_suffix(o, member)));
    }
    b.put(&cx.sub_key(key, m, MEMBERS, member), &score_bytes(new));
    b.put(&cx.sub_key(key, m, INDEX, &index_suffix(new, member)), b"");
}

/// Deletes `member` (whose score is `score`) into `b`.
fn del_member(cx: &Ctx, b: &mut Batch, key: &[u8], m: &Meta, member: &[u8], score: f64) {
    b.delete(&cx.sub_key(key, m, MEMBERS, member));
    b.delete(&cx.sub_key(key, m, INDEX, &index_suffix(score, member)));
}

/// Deletes `gone` from `m` into `b` and saves (or deletes) the key's metadata.
fn remove_all(cx: &Ctx, b: &mut Batch, key: &[u8], m: &mut Meta, gone: &[Scored]) {
    for (member, s) in gone {
        del_member(cx, b, key, m, member, *s);
    }
    m.size -= gone.len() as u64;
    cx.put_collection(b, key, m);
}

/// `(score, member)` pairs of the index in score order from `from` (a score, inclusive),
/// while `f` says so.
pub(super) fn walk_index(
    cx: &Ctx,
    key: &[u8],
    m: &Meta,
    from: Option<f64>,
    mut f: impl FnMut(&[u8], f64) -> bool,
) -> Result<(), Reply> {
    let start = from.map(score_bytes);
    cx.sh.store.sub_range(
        &cx.sub_prefix(key, m, INDEX),
        start.as_ref().map(|s| &s[..]),
        |k, _| f(&k[8..], score_from_bytes(&k[..8])),
    )?;
    Ok(())
}

/// One end of a score range (`(1.5`, `-inf`, `+inf`, `3`).
#[derive(Clone, Copy, Debug)]
pub struct ScoreRange {
    pub min: f64,
    pub minex: bool,
    pub max: f64,
    pub maxex: bool,
}

impl ScoreRange {
    /// Parses `min` and `max` as Redis's `zslParseRange`: a number (no NaN), optionally
    /// after `(` for an exclusive end.
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
        let end = |b: &[u8]| -> Option<(f64, bool)> {
            match b.strip_prefix(b"(") {
                Some(rest) => super::parse_float(rest).map(|v| (v, true)),
                None => super::parse_float(b).map(|v| (v, false)),
            }
        };
        let bad = || Reply::err("min or max is not a float");
        let (min, minex) = end(min).ok_or_else(bad)?;
        let (max, maxex) = end(max).ok_or_else(bad)?;
        Ok(ScoreRange {
            min,
            minex,
            max,
            maxex,
        })
    }

    fn above_min(&self, s: f64) -> bool {
        if self.minex {
            s > self.min
        } else {
            s >= self.min
        }
    }

    fn below_max(&self, s: f64) -> bool {
        if self.maxex {
            s < self.max
        } else {
            s <= self.max
        }
    }

    fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }
}

/// One end of a lex range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lex {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

impl Lex {
    fn parse(b: &[u8]) -> Option<Lex> {
        match b {
            b"-" => Some(Lex::NegInf),
            b"+" => Some(Lex::PosInf),
            [b'[', rest @ ..] => Some(Lex::Incl(rest.to_vec())),
            [b'(', rest @ ..] => Some(Lex::Excl(rest.to_vec())),
            _ => None,
        }
    }
}

/// A lex range (`[a`, `(b`, `-`, `+`), as `ZRANGEBYLEX` takes one.
#[derive(Clone, Debug)]
pub struct LexRange {
    pub min: Lex,
    pub max: Lex,
}

impl LexRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, Reply> {
        let bad = || Reply::err("min or max not valid string range item");
        Ok(LexRange {
            min: Lex::parse(min).ok_or_else(bad)?,
            max: Lex::parse(max).ok_or_else(bad)?,
        })
    }

    fn above_min(&self, m: &[u8]) -> bool {
        match &self.min {
            Lex::NegInf => true,
            Lex::PosInf => false,
            Lex::Incl(x) => m >= &x[..],
            Lex::Excl(x) => m > &x[..],
        }
    }

    fn below_max(&self, m: &[u8]) -> bool {
        match &self.max {
            Lex::NegInf => false,
            Lex::PosInf => true,
            Lex::Incl(x) => m <= &x[..],
            Lex::Excl(x) => m < &x[..],
        }
    }
}

/// A range of scores or of members (lex): what an ordered scan walks.
#[derive(Clone, Debug)]
pub enum Bounds {
    Score(ScoreRange),
    Lex(LexRange),
}

/// What a range command selects: positions, or the members within bounds.
#[derive(Clone, Debug)]
pub enum Range {
    Rank(i64, i64),
    By(Bounds),
}

/// Walks the members within `r` in forward order while `f` says so.
fn walk_range(
    cx: &Ctx,
    key: &[u8],
    m: &Meta,
    r: &Bounds,
    mut f: impl FnMut(&[u8], f64) -> bool,
) -> Result<(), Reply> {
    match r {
        Bounds::Score(sr) => {
            if sr.is_empty() {
                return Ok(());
            }
            walk_index(cx, key, m, Some(sr.min), |member, s| {
                if !sr.above_min(s) {
                    return true;
                }
                sr.below_max(s) && f(member, s)
            })
        }
        Bounds::Lex(lr) => {
            let from = match &lr.min {
                Lex::NegInf => None,
                Lex::PosInf => return Ok(()),
                Lex::Incl(x) | Lex::Excl(x) => Some(x.as_slice()),
            };
            cx.sh
                .store
                .sub_range(&cx.sub_prefix(key, m, MEMBERS), from, |member, v| {
                    if !lr.above_min(member) {
                        return true;
                    }
                    lr.below_max(member) && f(member, score_from_bytes(&v))
                })?;
            Ok(())
        }
    }
}

/// The `n` members from forward position `from` on, in score order.
fn by_position(cx: &Ctx, key: &[u8], m: &Meta, from: u64, n: u64) -> Result<Vec<Scored>, Reply> {
    check_reply_size(n)?;
    let mut out = Vec::with_capacity(n as usize);
    let mut seen = 0u64;
    if n > 0 {
        walk_index(cx, key, m, None, |member, s| {
            seen += 1;
            if seen > from {
                out.push((member.to_vec(), s));
            }
            (out.len() as u64) < n
        })?;
    }
    Ok(out)
}

/// `LIMIT offset count` of a range command (`count` negative: no limit).
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub offset: i64,
    pub count: i64,
}

impl Limit {
    pub const NONE: Limit = Limit {
        offset: 0,
        count: -1,
    };
}

/// The members `r` selects, in reply order (`rev`: from the highest down), after `limit`
/// (ignored for ranks).
pub fn select(
    cx: &Ctx,
    key: &[u8],
    m: &Meta,
    r: &Range,
    rev: bool,
    limit: Limit,
) -> Result<Vec<Scored>, Reply> {
    let r = match *r {
        Range::By(ref b) => b,
        Range::Rank(start, stop) => {
            let Some((s, e)) = clamp_range(start, stop, m.size as i64) else {
                return Ok(Vec::new());
            };
            let (s, e) = (s as u64, e as u64);
            let from = if rev { m.size - 1 - e } else { s };
            let mut out = by_position(cx, key, m, from, e - s + 1)?;
            if rev {
                out.reverse();
            }
            return Ok(out);
        }
    };
    if limit.offset < 0 || limit.count == 0 {
        return Ok(Vec::new());
    }
    let offset = limit.offset as u64;
    let count = u64::try_from(limit.count).ok();
    if !rev {
        let mut out = Vec::new();
        let (mut skipped, mut over) = (0u64, false);
        walk_range(cx, key, m, r, |member, s| {
            if skipped < offset {
                skipped += 1;
                return true;
            }
            if out.len() as u64 >= MAX_REPLY_ITEMS {
                over = true;
                return false;
            }
            out.push((member.to_vec(), s));
            count.is_none_or(|c| (out.len() as u64) < c)
        })?;
        if over {
            check_reply_size(MAX_REPLY_ITEMS + 1)?;
        }
        return Ok(out);
    }
    // Reversed: count the range, then read the forward window that the reply reverses.
    let mut n = 0u64;
    walk_range(cx, key, m, r, |_, _| {
        n += 1;
        true
    })?;
    if offset >= n {
        return Ok(Vec::new());
    }
    let end = n - offset;
    let start = count.map_or(0, |c| end.saturating_sub(c));
    check_reply_size(end - start)?;
    let mut out = Vec::with_capacity((end - start) as usize);
    let mut seen = 0u64;
    walk_range(cx, key, m, r, |member, s| {
        seen += 1;
        if seen > start {
            out.push((member.to_vec(), s));
        }
        seen < end
    })?;
    out.reverse();
    Ok(out)
}

/// Members with scores as a reply: `member score ...` in RESP2, `[member, score]` pairs
/// in RESP3 (as Redis 7 answers), members only without `withscores`.
fn scored_reply(cx: &Ctx, items: Vec<Scored>, withscores: bool) -> Reply {
    let pairs = withscores && cx.s.proto >= 3;
    let mut out = Vec::with_capacity(items.len() * if withscores { 2 } else { 1 });
    for (member, s) in items {
        if pairs {
            out.push(Reply::Array(vec![bulk(member), Reply::Double(s)]));
        } else {
            out.push(bulk(member));
            if withscores {
                out.push(Reply::Double(s));
            }
        }
    }
    Reply::Array(out)
}

/// `ZADD`'s flags.
#[derive(Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]` (and
/// `ZINCRBY`, which is `ZADD key INCR`).
fn zadd_generic(cx: &Ctx, a: &[Bytes], mut f: AddFlags) -> CmdResult {
    let key = &a[0];
    let mut i = 1;
    while i < a.len() {
        let o = &a[i];
        if eq(o, "nx") {
            f.nx = true;
        } else if eq(o, "xx") {
            f.xx = true;
        } else if eq(o, "gt") {
            f.gt = true;
        } else if eq(o, "lt") {
            f.lt = true;
        } else if eq(o, "ch") {
            f.ch = true;
        } else if eq(o, "incr") {
            f.incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let pairs = &a[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(syntax());
    }
    if f.nx && f.xx {
        return Err(Reply::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return Err(Reply::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && pairs.len() > 2 {
        return Err(Reply::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    let scores: Vec<f64> = pairs
        .chunks(2)
        .map(|p| float(&p[0]))
        .collect::<Result<_, _>>()?;
    let _g = cx.lock(&[key]);
    let m = cx.typed(key, Kind::ZSet)?;
    if m.is_none() && f.xx {
        return Ok(if f.incr { Reply::Nil } else { Reply::Int(0) });
    }
    let mut m = m.unwrap_or_else(|| cx.new_collection(Kind::ZSet));
    let mut b = Batch::new();
    // Members written by this command so far, with their scores.
    let mut now: HashMap<&[u8], f64> = HashMap::new();
    let (mut added, mut updated) = (0i64, 0i64);
    let mut last = None;
    for (p, &by) in pairs.chunks(2).zip(&scores) {
        let member = &p[1][..];
        let old = match now.get(member) {
            Some(&s) => Some(s),
            None => score(cx, key, &m, member)?,
        };
        let new = match (old, f.incr) {
            (Some(o), true) => o + by,
            _ => by,
        };
        if new.is_nan() {
            return Err(nan_error());
        }
        match old {
            None if f.xx => continue,
            None => {
                added += 1;
            }
            Some(_) if f.nx => continue,
            Some(o) => {
                if (f.gt && new <= o) || (f.lt && new >= o) {
                    continue;
                }
                if score_bytes(o) != score_bytes(new) {
                    updated += 1;
                }
            }
        }
        put_member(cx, &mut b, key, &m, member, old, new);
        now.insert(member, new);
        last = Some(new);
    }
    if added > 0 {
        m.size += added as u64;
        b.put_meta(cx.db(), key, &m);
        cx.write(b)?;
    } else if updated > 0 {
        // New scores of existing members: the metadata stays as it is.
        b.touch_meta(cx.db(), key);
        cx.write(b)?;
    }
    if added > 0 || updated > 0 {
        cx.notify(Class::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    Ok(if f.incr {
        last.map_or(Reply::Nil, Reply::Double)
    } else if f.ch {
        Reply::Int(added + updated)
    } else {
        Reply::Int(added)
    })
}

pub(super) fn zadd(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zadd_generic(cx, a, AddFlags::default())
}

fn zincrby(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zadd_generic(
        cx,
        a,
        AddFlags {
            incr: true,
            ..AddFlags::default()
        },
    )
}

fn zscore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(match cx.typed(&a[0], Kind::ZSet)? {
        Some(m) => score(cx, &a[0], &m, &a[1])?.map_or(Reply::Nil, Reply::Double),
        None => Reply::Nil,
    })
}

fn zmscore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let m = cx.typed(&a[0], Kind::ZSet)?;
    let mut out = Vec::with_capacity(a.len() - 1);
    for member in &a[1..] {
        let s = match &m {
            Some(m) => score(cx, &a[0], m, member)?,
            None => None,
        };
        out.push(s.map_or(Reply::Nil, Reply::Double));
    }
    Ok(Reply::Array(out))
}

fn zcard(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(
        cx.typed(&a[0], Kind::ZSet)?.map_or(0, |m| m.size) as i64,
    ))
}

fn count_range(cx: &Ctx, key: &[u8], r: Bounds) -> CmdResult {
    let Some(m) = cx.typed(key, Kind::ZSet)? else {
        return Ok(Reply::Int(0));
    };
    let mut n = 0i64;
    walk_range(cx, key, &m, &r, |_, _| {
        n += 1;
        true
    })?;
    Ok(Reply::Int(n))
}

fn zcount(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    count_range(cx, &a[0], Bounds::Score(ScoreRange::parse(&a[1], &a[2])?))
}

fn zlexcount(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    count_range(cx, &a[0], Bounds::Lex(LexRange::parse(&a[1], &a[2])?))
}

/// Which kind of range a `ZRANGE`-family command reads, if fixed by the command.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// A parsed range request: `<min> <max> [BYSCORE|BYLEX] [REV] [LIMIT o c] [WITHSCORES]`.
struct RangeArgs {
    range: Range,
    rev: bool,
    limit: Limit,
    withscores: bool,
}

/// Parses a range request as Redis's `zrangeGenericCommand`: `by`/`rev` are `None` where
/// the command (`ZRANGE`, `ZRANGESTORE`) takes them as options; `store` refuses
/// `WITHSCORES`.
fn range_args(
    a: &[Bytes],
    mut by: Option<By>,
    mut rev: Option<bool>,
    store: bool,
) -> Result<RangeArgs, Reply> {
    let (by_opt, rev_opt) = (by.is_none(), rev.is_none());
    let (mut withscores, mut limit) = (false, None);
    let mut j = 2;
    while j < a.len() {
        let o = &a[j];
        let left = a.len() - j - 1;
        if !store && eq(o, "withscores") {
            withscores = true;
        } else if eq(o, "limit") && left >= 2 {
            limit = Some(Limit {
                offset: int(&a[j + 1])?,
                count: int(&a[j + 2])?,
            });
            j += 2;
        } else if rev_opt && eq(o, "rev") {
            rev = Some(true);
        } else if by_opt && eq(o, "bylex") {
            by = Some(By::Lex);
        } else if by_opt && eq(o, "byscore") {
            by = Some(By::Score);
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    let by = by.unwrap_or(By::Rank);
    let rev = rev.unwrap_or(false);
    if limit.is_some() && by == By::Rank {
        return Err(Reply::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(Reply::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // Reversed score and lex ranges are given as max, min.
    let (lo, hi) = if rev && by != By::Rank {
        (&a[1], &a[0])
    } else {
        (&a[0], &a[1])
    };
    let range = match by {
        By::Rank => Range::Rank(int(lo)?, int(hi)?),
        By::Score => Range::By(Bounds::Score(ScoreRange::parse(lo, hi)?)),
        By::Lex => Range::By(Bounds::Lex(LexRange::parse(lo, hi)?)),
    };
    Ok(RangeArgs {
        range,
        rev,
        limit: limit.unwrap_or(Limit::NONE),
        withscores,
    })
}

/// A `ZRANGE`-family read of `a[0]` with the request `a[1..]`.
fn range_read(cx: &Ctx, a: &[Bytes], by: Option<By>, rev: Option<bool>) -> CmdResult {
    let r = range_args(&a[1..], by, rev, false)?;
    let Some(m) = cx.typed(&a[0], Kind::ZSet)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let items = select(cx, &a[0], &m, &r.range, r.rev, r.limit)?;
    Ok(scored_reply(cx, items, r.withscores))
}

fn zrange(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_read(cx, a, None, None)
}

fn zrevrange(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_read(cx, a, Some(By::Rank), Some(true))
}

fn zrangebyscore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_read(cx, a, Some(By::Score), Some(false))
}

fn zrevrangebyscore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_read(cx, a, Some(By::Score), Some(true))
}

fn zrangebylex(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_read(cx, a, Some(By::Lex), Some(false))
}

fn zrevrangebylex(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_read(cx, a, Some(By::Lex), Some(true))
}

/// Replaces `dst` with a sorted set of `items` (deletes it if there are none); the
/// number of members stored.
pub(super) fn store(cx: &Ctx, dst: &[u8], items: &[Scored], event: &'static str) -> CmdResult {
    let mut b = Batch::new();
    if items.is_empty() {
        if cx.meta(dst)?.is_some() {
            b.del_meta(cx.db(), dst);
            cx.write(b)?;
            cx.notify(Class::GENERIC, "del", dst);
        }
        return Ok(Reply::Int(0));
    } else {
        let mut m = cx.new_collection(Kind::ZSet);
        for (member, s) in items {
            put_member(cx, &mut b, dst, &m, member, None, *s);
        }
        m.size = items.len() as u64;
        b.put_meta(cx.db(), dst, &m);
    }
    cx.write(b)?;
    cx.notify(Class::ZSET, event, dst);
    Ok(Reply::Int(items.len() as i64))
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`
fn zrangestore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (dst, src) = (&a[0], &a[1]);
    let r = range_args(&a[2..], None, None, true)?;
    let _g = cx.lock(&[dst, src]);
    let items = match cx.typed(src, Kind::ZSet)? {
        Some(m) => select(cx, src, &m, &r.range, r.rev, r.limit)?,
        None => Vec::new(),
    };
    store(cx, dst, &items, "zrangestore")
}

/// The forward rank of `member`: how many members sort before it.
fn rank(cx: &Ctx, key: &[u8], m: &Meta, member: &[u8]) -> Result<Option<u64>, Reply> {
    let Some(s) = score(cx, key, m, member)? else {
        return Ok(None);
    };
    let mut n = 0u64;
    walk_index(cx, key, m, None, |x, xs| {
        if score_bytes(xs) == score_bytes(s) && x == member {
            return false;
        }
        n += 1;
        true
    })?;
    Ok(Some(n))
}

fn rank_reply(cx: &Ctx, a: &[Bytes], rev: bool) -> CmdResult {
    let Some(m) = cx.typed(&a[0], Kind::ZSet)? else {
        return Ok(Reply::Nil);
    };
    Ok(match rank(cx, &a[0], &m, &a[1])? {
        Some(r) if rev => Reply::Int((m.size - 1 - r) as i64),
        Some(r) => Reply::Int(r as i64),
        None => Reply::Nil,
    })
}

fn zrank(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    rank_reply(cx, a, false)
}

fn zrevrank(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    rank_reply(cx, a, true)
}

fn zrem(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let _g = cx.lock(&[key]);
    let Some(mut m) = cx.typed(key, Kind::ZSet)? else {
        return Ok(Reply::Int(0));
    };
    let mut gone: Vec<Scored> = Vec::new();
    for member in &a[1..] {
        if gone.iter().any(|(g, _)| g[..] == member[..]) {
            continue;
        }
        if let Some(s) = score(cx, key, &m, member)? {
            gone.push((member.to_vec(), s));
        }
    }
    if !gone.is_empty() {
        let mut b = Batch::new();
        remove_all(cx, &mut b, key, &mut m, &gone);
        cx.write(b)?;
        cx.notify(Class::ZSET, "zrem", key);
        cx.deleted_if_empty(key, &m);
    }
    Ok(Reply::Int(gone.len() as i64))
}

fn remove_range(cx: &Ctx, key: &[u8], r: Range, event: &'static str) -> CmdResult {
    let _g = cx.lock(&[key]);
    let Some(mut m) = cx.typed(key, Kind::ZSet)? else {
        return Ok(Reply::Int(0));
    };
    let gone = select(cx, key, &m, &r, false, Limit::NONE)?;
    if !gone.is_empty() {
        let mut b = Batch::new();
        remove_all(cx, &mut b, key, &mut m, &gone);
        cx.write(b)?;
        cx.notify(Class::ZSET, event, key);
        cx.deleted_if_empty(key, &m);
    }
    Ok(Reply::Int(gone.len() as i64))
}

fn zremrangebyrank(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    remove_range(
        cx,
        &a[0],
        Range::Rank(int(&a[1])?, int(&a[2])?),
        "zremrangebyrank",
    )
}

fn zremrangebyscore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    remove_range(
        cx,
        &a[0],
        Range::By(Bounds::Score(ScoreRange::parse(&a[1], &a[2])?)),
        "zremrangebyscore",
    )
}

fn zremrangebylex(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    remove_range(
        cx,
        &a[0],
        Range::By(Bounds::Lex(LexRange::parse(&a[1], &a[2])?)),
        "zremrangebylex",
    )
}

/// Pops up to `count` members from the low (`max` false) or high end of `key`, which
/// the caller has locked; `None` if the key does not exist.
pub fn pop(cx: &Ctx, key: &[u8], max: bool, count: u64) -> Result<Option<Vec<Scored>>, Reply> {
    let Some(mut m) = cx.typed(key, Kind::ZSet)? else {
        return Ok(None);
    };
    let n = count.min(m.size);
    let from = if max { m.size - n } else { 0 };
    let mut items = by_position(cx, key, &m, from, n)?;
    if max {
        items.reverse();
    }
    if !items.is_empty() {
        let mut b = Batch::new();
        remove_all(cx, &mut b, key, &mut m, &items);
        cx.write(b)?;
        cx.notify(Class::ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
        cx.deleted_if_empty(key, &m);
    }
    Ok(Some(items))
}

/// A pop count: positive (Redis: "value is out of range, must be positive").
fn pop_count(b: &[u8]) -> Result<u64, Reply> {
    parse_int(b)
        .filter(|&c| c >= 0)
        .map(|c| c as u64)
        .ok_or_else(|| Reply::err("value is out of range, must be positive"))
}

/// `ZPOPMIN`/`ZPOPMAX key [count]`: `member score ...`, pairs in RESP3 with a count.
fn zpop(cx: &Ctx, a: &[Bytes], max: bool) -> CmdResult {
    if a.len() > 2 {
        return Err(syntax());
    }
    let count = a.get(1).map(|c| pop_count(c)).transpose()?;
    let _g = cx.lock(&[&a[0]]);
    let items = pop(cx, &a[0], max, count.unwrap_or(1))?.unwrap_or_default();
    if count.is_none() {
        // A single pop is a flat pair in either protocol.
        let mut out = Vec::new();
        for (member, s) in items {
            out.push(bulk(member));
            out.push(Reply::Double(s));
        }
        return Ok(Reply::Array(out));
    }
    Ok(scored_reply(cx, items, true))
}

fn zpopmin(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zpop(cx, a, false)
}

fn zpopmax(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zpop(cx, a, true)
}

/// The reply of `ZMPOP`/`BZMPOP`: `[key, [[member, score], ...]]`.
pub fn mpop_reply(key: &[u8], items: Vec<Scored>) -> Reply {
    Reply::Array(vec![
        bulk(key.to_vec()),
        Reply::Array(
            items
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![bulk(m), Reply::Double(s)]))
                .collect(),
        ),
    ])
}

/// Pops from the first of `keys` that is a non-empty sorted set (`None`: none is).
pub fn mpop(cx: &Ctx, keys: &[Bytes], max: bool, count: u64) -> Result<Option<Reply>, Reply> {
    let _g = cx.lock(keys);
    for k in keys {
        if let Some(items) = pop(cx, k, max, count)? {
            return Ok(Some(mpop_reply(k, items)));
        }
    }
    Ok(None)
}

/// `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]`
fn zmpop(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (keys, max, count) = super::mpop_args(a, "min", "max")?;
    Ok(mpop(cx, keys, max, count)?.unwrap_or(Reply::NilArray))
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`: reads the whole set (bounded) to pick.
fn zrandmember(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let count = a.get(1).map(|c| rand_count(c)).transpose()?;
    let withscores = match a.get(2) {
        None => false,
        Some(w) if eq(w, "withscores") && a.len() == 3 => true,
        Some(_) => return Err(syntax()),
    };
    let Some(m) = cx.typed(&a[0], Kind::ZSet)? else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let all = cx.members(&a[0], &m, MEMBERS)?;
    let Some(count) = count else {
        return Ok(bulk(all[pick(all.len(), 1)[0]].0.clone()));
    };
    let items = pick(all.len(), count)
        .into_iter()
        .map(|i| (all[i].0.clone(), score_from_bytes(&all[i].1)))
        .collect();
    Ok(scored_reply(cx, items, withscores))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

impl Op {
    /// The event of its `*STORE` command.
    fn store_event(self) -> &'static str {
        match self {
            Op::Union => "zunionstore",
            Op::Inter => "zinterstore",
            Op::Diff => "zdiffstore",
        }
    }
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, acc: f64, v: f64) -> f64 {
        match self {
            // inf + -inf is NaN: Redis takes it as 0.
            Aggregate::Sum => {
                let s = acc + v;
                if s.is_nan() {
                    0.0
                } else {
                    s
                }
            }
            Aggregate::Min => acc.min(v),
            Aggregate::Max => acc.max(v),
        }
    }
}

/// The options after a set operation's keys.
struct OpArgs {
    weights: Option<Vec<f64>>,
    aggregate: Aggregate,
    withscores: bool,
    limit: u64,
}

/// Parses `[WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]` (what `op` allows:
/// no weights or aggregate for `ZDIFF`, no `WITHSCORES` when storing) or, for
/// `ZINTERCARD`, `[LIMIT n]`.
fn op_args(rest: &[Bytes], nkeys: usize, op: Op, store: bool, card: bool) -> Result<OpArgs, Reply> {
    let mut o = OpArgs {
        weights: None,
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let mut j = 0;
    while j < rest.len() {
        let left = rest.len() - j;
        let w = &rest[j];
        if op != Op::Diff && !card && left > nkeys && eq(w, "weights") {
            let ws = rest[j + 1..j + 1 + nkeys]
                .iter()
                .map(|x| {
                    super::parse_float(x).ok_or_else(|| Reply::err("weight value is not a float"))
                })
                .collect::<Result<Vec<f64>, Reply>>()?;
            o.weights = Some(ws);
            j += 1 + nkeys;
        } else if op != Op::Diff && !card && left >= 2 && eq(w, "aggregate") {
            let v = &rest[j + 1];
            o.aggregate = if eq(v, "sum") {
                Aggregate::Sum
            } else if eq(v, "min") {
                Aggregate::Min
            } else if eq(v, "max") {
                Aggregate::Max
            } else {
                return Err(syntax());
            };
            j += 2;
        } else if !store && !card && eq(w, "withscores") {
            o.withscores = true;
            j += 1;
        } else if card && left >= 2 && eq(w, "limit") {
            o.limit = parse_int(&rest[j + 1])
                .filter(|&l| l >= 0)
                .ok_or_else(|| Reply::err("LIMIT can't be negative"))? as u64;
            j += 2;
        } else {
            return Err(syntax());
        }
    }
    Ok(o)
}

/// The members and scores of `key` as a set operation reads it: a sorted set, or a set
/// (every member scored 1); `None` if it does not exist.
fn read_input(cx: &Ctx, key: &[u8]) -> Result<Option<Vec<Scored>>, Reply> {
    let Some(m) = cx.meta(key)? else {
        return Ok(None);
    };
    Ok(Some(match m.kind {
        Kind::ZSet => cx
            .members(key, &m, MEMBERS)?
            .into_iter()
            .map(|(k, v)| (k, score_from_bytes(&v)))
            .collect(),
        Kind::Set => cx
            .members(key, &m, 0)?
            .into_iter()
            .map(|(k, _)| (k, 1.0))
            .collect(),
        _ => return Err(wrongtype()),
    }))
}

/// `w * s`, where `0 * inf` (NaN) is 0 as in Redis.
fn weighted(w: f64, s: f64) -> f64 {
    let v = w * s;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// The set operation over `keys`, sorted by (score, member) as Redis answers it.
fn combine(cx: &Ctx, keys: &[Bytes], op: Op, o: &OpArgs) -> Result<Vec<Scored>, Reply> {
    let mut inputs = Vec::with_capacity(keys.len());
    for k in keys {
        inputs.push(read_input(cx, k)?);
    }
    let weight = |i: usize| o.weights.as_ref().map_or(1.0, |w| w[i]);
    let mut acc: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
    match op {
        Op::Union => {
            for (i, input) in inputs.into_iter().enumerate() {
                for (member, s) in input.unwrap_or_default() {
                    let v = weighted(weight(i), s);
                    match acc.get_mut(&member) {
                        Some(cur) => *cur = o.aggregate.apply(*cur, v),
                        None => {
                            acc.insert(member, v);
                            check_reply_size(acc.len() as u64)?;
                        }
                    }
                }
            }
        }
        Op::Inter => {
            if inputs.iter().any(Option::is_none) {
                return Ok(Vec::new());
            }
            let maps: Vec<HashMap<Vec<u8>, f64>> = inputs
                .iter()
                .skip(1)
                .map(|x| x.iter().flatten().cloned().collect())
                .collect();
            let first = inputs.swap_remove(0).unwrap_or_default();
            'member: for (member, s) in first {
                let mut v = weighted(weight(0), s);
                for (i, map) in maps.iter().enumerate() {
                    match map.get(&member) {
                        Some(&x) => v = o.aggregate.apply(v, weighted(weight(i + 1), x)),
                        None => continue 'member,
                    }
                }
                acc.insert(member, v);
                if o.limit > 0 && acc.len() as u64 >= o.limit {
                    break;
                }
            }
        }
        Op::Diff => {
            let mut inputs = inputs.into_iter();
            let Some(Some(first)) = inputs.next() else {
                return Ok(Vec::new());
            };
            acc = first.into_iter().collect();
            for other in inputs.flatten() {
                for (member, _) in other {
                    acc.remove(&member);
                }
                if acc.is_empty() {
                    break;
                }
            }
        }
    }
    let mut out: Vec<Scored> = acc.into_iter().collect();
    out.sort_by(|x, y| x.1.total_cmp(&y.1).then_with(|| x.0.cmp(&y.0)));
    Ok(out)
}

/// `Z{UNION,INTER,DIFF}STORE dst numkeys key [key ...] [options]`
fn op_store(cx: &Ctx, a: &[Bytes], op: Op, name: &str) -> CmdResult {
    let dst = &a[0];
    let (keys, rest) = numkeys(
        &a[1..],
        &format!("at least 1 input key is needed for '{name}' command"),
        true,
    )?;
    let o = op_args(rest, keys.len(), op, true, false)?;
    let mut locked: Vec<&Bytes> = keys.iter().collect();
    locked.push(dst);
    let _g = cx.lock(&locked);
    let items = combine(cx, keys, op, &o)?;
    store(cx, dst, &items, op.store_event())
}

fn zunionstore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    op_store(cx, a, Op::Union, "zunionstore")
}

fn zinterstore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    op_store(cx, a, Op::Inter, "zinterstore")
}

fn zdiffstore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    op_store(cx, a, Op::Diff, "zdiffstore")
}

/// `Z{UNION,INTER,DIFF} numkeys key [key ...] [options] [WITHSCORES]`
fn op_read(cx: &Ctx, a: &[Bytes], op: Op, name: &str) -> CmdResult {
    let (keys, rest) = numkeys(
        a,
        &format!("at least 1 input key is needed for '{name}' command"),
        true,
    )?;
    let o = op_args(rest, keys.len(), op, false, false)?;
    let items = combine(cx, keys, op, &o)?;
    Ok(scored_reply(cx, items, o.withscores))
}

fn zunion(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    op_read(cx, a, Op::Union, "zunion")
}

fn zinter(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    op_read(cx, a, Op::Inter, "zinter")
}

fn zdiff(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    op_read(cx, a, Op::Diff, "zdiff")
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`
fn zintercard(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (keys, rest) = numkeys(
        a,
        "at least 1 input key is needed for 'zintercard' command",
        true,
    )?;
    let o = op_args(rest, keys.len(), Op::Inter, false, true)?;
    Ok(Reply::Int(combine(cx, keys, Op::Inter, &o)?.len() as i64))
}

fn zscan(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    coll_scan(cx, a, Kind::ZSet, |k, v, out| {
        out.push(Reply::bulk(k.to_vec()));
        out.push(Reply::bulk(super::fmt_float(score_from_bytes(v))));
    })
}

#[cfg(test)]
mod tests {
    use crate::cmd::dispatch::execute;
    use crate::config::Config;
    use crate::protocol::Reply;
    use crate::session::Session;
    use crate::shared::Shared;
    use bytes::Bytes;
    use proptest::prelude::*;
    use proptest::test_runner::{Config as PtConfig, TestRunner};

    fn shared() -> (tempfile::TempDir, Shared) {
        let t = tempfile::tempdir().unwrap();
        let db = engine::DB::open(t.path(), engine::Options::default()).unwrap();
        (t, Shared::for_test(db, &Config::default()))
    }

    fn run(sh: &Shared, s: &mut Session, args: &[&str]) -> Reply {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
        execute(sh, s, &args).0
    }

    fn words(r: Reply) -> Vec<String> {
        let Reply::Array(items) = r else {
            panic!("not an array: {r:?}")
        };
        items
            .into_iter()
            .map(|i| match i {
                Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
                Reply::Double(d) => crate::protocol::fmt_double(d),
                other => panic!("not a word: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn scores_order_negative_before_positive_and_infinities_at_the_ends() {
        let (_t, sh) = shared();
        let mut s = Session::new(1);
        let r = run(
            &sh,
            &mut s,
            &[
                "ZADD", "z", "1.5", "p", "-2", "n", "+inf", "top", "-inf", "bottom", "0", "zero",
                "-0.5", "h", "1e300", "big", "-1e-300", "tiny",
            ],
        );
        assert_eq!(r, Reply::Int(8));
        assert_eq!(
            words(run(&sh, &mut s, &["ZRANGE", "z", "0", "-1"])),
            ["bottom", "n", "h", "tiny", "zero", "p", "big", "top"]
        );
        // The index and the member sub-keys agree: a range by score reads the index.
        assert_eq!(
            words(run(
                &sh,
                &mut s,
                &["ZRANGEBYSCORE", "z", "(-2", "0", "WITHSCORES"]
            )),
            ["h", "-0.5", "tiny", "-1e-300", "zero", "0"]
        );
        assert_eq!(
            words(run(
                &sh,
                &mut s,
                &["ZREVRANGEBYSCORE", "z", "+inf", "(1e300", "WITHSCORES"]
            )),
            ["top", "inf"]
        );
        assert_eq!(
            run(&sh, &mut s, &["ZSCORE", "z", "bottom"]),
            Reply::Double(f64::NEG_INFINITY)
        );
        assert_eq!(run(&sh, &mut s, &["ZRANK", "z", "zero"]), Reply::Int(4));
        assert_eq!(run(&sh, &mut s, &["ZREVRANK", "z", "zero"]), Reply::Int(3));
        // Moving a member across zero rewrites its index entry: no stale entry is left.
        assert_eq!(run(&sh, &mut s, &["ZADD", "z", "-3", "p"]), Reply::Int(0));
        assert_eq!(
            words(run(&sh, &mut s, &["ZRANGE", "z", "0", "2"])),
            ["bottom", "p", "n"]
        );
        assert_eq!(
            run(&sh, &mut s, &["ZCOUNT", "z", "-inf", "+inf"]),
            Reply::Int(8)
        );
        assert_eq!(run(&sh, &mut s, &["ZCARD", "z"]), Reply::Int(8));
    }

    #[test]
    fn generic_commands_see_sorted_sets() {
        let (_t, sh) = shared();
        let mut s = Session::new(1);
        run(&sh, &mut s, &["ZADD", "z", "1", "a", "2", "b"]);
        assert_eq!(run(&sh, &mut s, &["TYPE", "z"]), Reply::Simple("zset"));
        assert_eq!(
            run(&sh, &mut s, &["OBJECT", "ENCODING", "z"]),
            Reply::bulk("listpack")
        );
        run(
            &sh,
            &mut s,
            &["CONFIG", "SET", "zset-max-listpack-entries", "1"],
        );
        assert_eq!(
            run(&sh, &mut s, &["OBJECT", "ENCODING", "z"]),
            Reply::bulk("skiplist")
        );
        // A copy has both sub-keys of every member: ranges by score and lookups agree.
        assert_eq!(run(&sh, &mut s, &["COPY", "z", "c"]), Reply::Int(1));
        assert_eq!(
            words(run(&sh, &mut s, &["ZRANGEBYSCORE", "c", "2", "2"])),
            ["b"]
        );
        assert_eq!(run(&sh, &mut s, &["ZSCORE", "c", "a"]), Reply::Double(1.0));
        // DEL is O(1) and a new set under the name has none of the old members.
        assert_eq!(run(&sh, &mut s, &["DEL", "z"]), Reply::Int(1));
        assert_eq!(run(&sh, &mut s, &["ZADD", "z", "5", "x"]), Reply::Int(1));
        assert_eq!(words(run(&sh, &mut s, &["ZRANGE", "z", "0", "-1"])), ["x"]);
        assert_eq!(
            run(&sh, &mut s, &["ZCOUNT", "z", "-inf", "+inf"]),
            Reply::Int(1)
        );
        // Expiry in the past deletes; ZADD keeps a live key's expiry.
        assert_eq!(run(&sh, &mut s, &["EXPIRE", "c", "100"]), Reply::Int(1));
        run(&sh, &mut s, &["ZADD", "c", "3", "d"]);
        assert!(matches!(run(&sh, &mut s, &["TTL", "c"]), Reply::Int(t) if t > 0));
        assert_eq!(run(&sh, &mut s, &["PEXPIREAT", "c", "1"]), Reply::Int(1));
        assert_eq!(run(&sh, &mut s, &["ZCARD", "c"]), Reply::Int(0));
        assert!(matches!(
            run(&sh, &mut s, &["ZADD", "z", "1", "a", "2"]),
            Reply::Error(e) if e == "ERR syntax error"
        ));
        run(&sh, &mut s, &["SET", "str", "v"]);
        assert!(matches!(
            run(&sh, &mut s, &["ZRANGE", "str", "0", "-1"]),
            Reply::Error(e) if e.starts_with("WRONGTYPE")
        ));
    }

    #[test]
    fn nan_is_refused_everywhere_a_score_is_read() {
        let (_t, sh) = shared();
        let mut s = Session::new(1);
        let err = |r: Reply, what: &str| match r {
            Reply::Error(e) => assert!(e.contains(what), "{e}"),
            other => panic!("not an error: {other:?}"),
        };
        err(
            run(&sh, &mut s, &["ZADD", "z", "nan", "a"]),
            "not a valid float",
        );
        err(
            run(&sh, &mut s, &["ZRANGEBYSCORE", "z", "0", "nan"]),
            "min or max is not a float",
        );
        assert_eq!(run(&sh, &mut s, &["ZADD", "z", "inf", "a"]), Reply::Int(1));
        // inf + -inf is NaN: refused, and the member keeps its score.
        err(run(&sh, &mut s, &["ZINCRBY", "z", "-inf", "a"]), "NaN");
        assert_eq!(
            run(&sh, &mut s, &["ZSCORE", "z", "a"]),
            Reply::Double(f64::INFINITY)
        );
        err(
            run(
                &sh,
                &mut s,
                &["ZUNIONSTORE", "d", "1", "z", "WEIGHTS", "nan"],
            ),
            "weight value is not a float",
        );
    }

    #[test]
    fn numkeys_beyond_the_arguments_is_refused_before_reading() {
        let (_t, sh) = shared();
        let mut s = Session::new(1);
        for cmd in [
            &["ZUNION", "4294967296", "a"][..],
            &["ZINTERSTORE", "d", "3", "a", "b"],
            &["ZMPOP", "2", "a", "MIN"],
        ] {
            assert_eq!(run(&sh, &mut s, cmd), Reply::err("syntax error"), "{cmd:?}");
        }
        assert!(matches!(
            run(&sh, &mut s, &["ZRANDMEMBER", "z", "-9223372036854775807"]),
            Reply::Error(e) if e.contains("out of range")
        ));
    }

    /// ZADD / ZREM / ZRANGEBYSCORE / ZRANGE against a model (member -> score, read in
    /// (score, member) order).
    #[test]
    fn zadd_zrem_and_ranges_match_a_model() {
        let (_t, sh) = shared();
        let member = prop::sample::select(vec!["a", "b", "c", "d", "e", "f"]);
        let score = prop_oneof![
            (-3i32..4).prop_map(|x| x as f64 * 0.5),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
        ];
        let op = prop_oneof![
            (member.clone(), score.clone()).prop_map(|(m, s)| (true, m, s)),
            member.prop_map(|m| (false, m, 0.0)),
        ];
        let query = (score.clone(), score, any::<bool>(), any::<bool>());
        let mut runner = TestRunner::new(PtConfig {
            cases: 64,
            failure_persistence: None,
            ..PtConfig::default()
        });
        let case = std::sync::atomic::AtomicU32::new(0);
        runner
            .run(
                &(
                    prop::collection::vec(op, 1..24),
                    prop::collection::vec(query, 1..6),
                ),
                |(ops, queries)| {
                    let key = format!(
                        "z{}",
                        case.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    );
                    let mut s = Session::new(1);
                    let mut model: std::collections::BTreeMap<&str, f64> = Default::default();
                    for (add, m, sc) in ops {
                        let sc_text = crate::protocol::fmt_double(sc);
                        if add {
                            let r = run(&sh, &mut s, &["ZADD", &key, &sc_text, m]);
                            prop_assert_eq!(r, Reply::Int(model.insert(m, sc).is_none() as i64));
                        } else {
                            let r = run(&sh, &mut s, &["ZREM", &key, m]);
                            prop_assert_eq!(r, Reply::Int(model.remove(m).is_some() as i64));
                        }
                    }
                    let mut sorted: Vec<(&str, f64)> =
                        model.iter().map(|(m, s)| (*m, *s)).collect();
                    sorted.sort_by(|x, y| x.1.total_cmp(&y.1).then(x.0.cmp(y.0)));
                    let all: Vec<String> = sorted.iter().map(|(m, _)| m.to_string()).collect();
                    prop_assert_eq!(words(run(&sh, &mut s, &["ZRANGE", &key, "0", "-1"])), all);
                    for (lo, hi, loex, hiex) in queries {
                        let end = |v: f64, ex: bool| {
                            format!(
                                "{}{}",
                                if ex { "(" } else { "" },
                                crate::protocol::fmt_double(v)
                            )
                        };
                        let (l, h) = (end(lo, loex), end(hi, hiex));
                        let want: Vec<String> = sorted
                            .iter()
                            .filter(|(_, s)| if loex { *s > lo } else { *s >= lo })
                            .filter(|(_, s)| if hiex { *s < hi } else { *s <= hi })
                            .map(|(m, _)| m.to_string())
                            .collect();
                        prop_assert_eq!(
                            words(run(&sh, &mut s, &["ZRANGEBYSCORE", &key, &l, &h])),
                            want.clone()
                        );
                        let mut rev = want.clone();
                        rev.reverse();
                        prop_assert_eq!(
                            words(run(&sh, &mut s, &["ZREVRANGEBYSCORE", &key, &h, &l])),
                            rev.clone()
                        );
                        // A window of the reversed range: LIMIT 1 2.
                        let window: Vec<String> = rev.iter().skip(1).take(2).cloned().collect();
                        prop_assert_eq!(
                            words(run(
                                &sh,
                                &mut s,
                                &["ZREVRANGEBYSCORE", &key, &h, &l, "LIMIT", "1", "2"]
                            )),
                            window
                        );
                        prop_assert_eq!(
                            run(&sh, &mut s, &["ZCOUNT", &key, &l, &h]),
                            Reply::Int(want.len() as i64)
                        );
                    }
                    Ok(())
                },
            )
            .unwrap();
    }
}
