//! `SORT` and `SORT_RO` (Redis 7.0's `sortCommand`): the elements of a list, set or sorted
//! set ordered by their own value (as numbers, or as bytes with `ALPHA`), by the string
//! keys or hash fields a `BY` pattern names (`weight_*`, `obj_*->field`), or kept in the
//! collection's order (`BY` without `*`, e.g. `BY nosort`), then `LIMIT`, `GET` (`#`,
//! patterns) and `STORE` (a list).
//!
//! What one call may cost is bounded before the work is done:
//!
//! - elements read: the collection's, refused past [`MAX_REPLY_ITEMS`] (`BY nosort` on a
//!   list or sorted set reads only the `LIMIT` window, and only the window is checked);
//! - lookups: one point read per element for a `BY` pattern, one per element of the
//!   window and `GET`;
//! - the result (window times `GET`s) is refused past [`MAX_REPLY_ITEMS`] before any
//!   `GET` is read, and its bytes, counted as they are read, past what the connection
//!   may still buffer (a reply, [`crate::session::Session::output_budget`]) or
//!   [`MAX_STRING`] (a stored list).
//!
//! The keys `BY` and `GET` read are not locked (they may be any keys; Redis's single
//! thread reads them between two commands): a concurrent write to one may or may not be
//! seen. `STORE` locks the sorted key and the destination from the read to the write.
//! In cluster mode `BY` patterns and `GET` are refused, as Redis refuses them (their keys
//! may be on other nodes).

use super::table::c;
use super::{bulk, check_reply_size, eq, int, syntax, wrongtype, CmdResult, Ctx};
use super::{MAX_STRING, REPLY_OVERHEAD};
use crate::notify::Class;
use crate::protocol::Reply;
use crate::record::{Kind, Meta};
use crate::store::Batch;
use bytes::Bytes;
use std::cmp::Ordering;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("sort", -2, [WRITE DENYOOM MOVABLEKEYS], 1, 1, 1, Generic, sort, find_keys = sort_keys),
    c!("sort_ro", -2, [READONLY MOVABLEKEYS], 1, 1, 1, Generic, sort_ro),
];

/// `SORT`'s keys (the whole command, name first) as Redis's `sortGetKeys` finds them:
/// the sorted key, and the one after the last `STORE` (skipping `LIMIT`'s, `GET`'s and
/// `BY`'s arguments).
pub fn sort_keys(args: &[Bytes]) -> Result<Vec<usize>, Reply> {
    if args.len() < 2 {
        return Ok(Vec::new());
    }
    let (mut store, mut i) = (None, 2);
    while i < args.len() {
        let a = &args[i];
        if eq(a, "limit") {
            i += 2;
        } else if eq(a, "get") || eq(a, "by") {
            i += 1;
        } else if eq(a, "store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    Ok([1].into_iter().chain(store).collect())
}

fn sort(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sort_generic(cx, a, false)
}

fn sort_ro(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sort_generic(cx, a, true)
}

/// A parsed request.
struct Options {
    desc: bool,
    alpha: bool,
    /// `LIMIT offset count` as given (count negative: to the end).
    offset: i64,
    count: i64,
    /// The `BY` pattern when it has a `*`.
    by: Option<Bytes>,
    /// A `BY` without `*` was given: nothing is looked up or sorted.
    dontsort: bool,
    gets: Vec<Bytes>,
    store: Option<Bytes>,
}

/// Parses the options after the key as Redis does, one by one (an option without enough
/// arguments after it is a syntax error; the last `BY` and `STORE` win).
fn parse(cx: &Ctx, a: &[Bytes], readonly: bool) -> Result<Options, Reply> {
    let mut o = Options {
        desc: false,
        alpha: false,
        offset: 0,
        count: -1,
        by: None,
        dontsort: false,
        gets: Vec::new(),
        store: None,
    };
    let cluster = cx.sh.cluster.is_some();
    let mut j = 1;
    while j < a.len() {
        let (w, left) = (&a[j], a.len() - j - 1);
        if eq(w, "asc") {
            o.desc = false;
        } else if eq(w, "desc") {
            o.desc = true;
        } else if eq(w, "alpha") {
            o.alpha = true;
        } else if eq(w, "limit") && left >= 2 {
            o.offset = int(&a[j + 1])?;
            o.count = int(&a[j + 2])?;
            j += 2;
        } else if !readonly && eq(w, "store") && left >= 1 {
            o.store = Some(a[j + 1].clone());
            j += 1;
        } else if eq(w, "by") && left >= 1 {
            let p = &a[j + 1];
            if p.contains(&b'*') {
                if cluster {
                    return Err(Reply::err("BY option of SORT denied in Cluster mode."));
                }
                o.by = Some(p.clone());
            } else {
                // As in Redis, a constant BY turns sorting off even if a pattern follows.
                o.dontsort = true;
                o.by = None;
            }
            j += 1;
        } else if eq(w, "get") && left >= 1 {
            if cluster {
                return Err(Reply::err("GET option of SORT denied in Cluster mode."));
            }
            o.gets.push(a[j + 1].clone());
            j += 1;
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    Ok(o)
}

/// The value `pattern` names for `elem` (Redis's `lookupKeyByPattern`): `#` is the
/// element itself; otherwise the first `*` is replaced by the element, and the key read
/// as a string, or as a hash when `->field` follows the `*` (a trailing `->` with no
/// field is part of the key name). `None` when the pattern has no `*` or the key is
/// missing or of another type.
fn lookup(cx: &Ctx, pattern: &[u8], elem: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&c| c == b'*') else {
        return Ok(None);
    };
    let after = &pattern[star + 1..];
    let (post, field) = match after.windows(2).position(|w| w == b"->") {
        Some(f) if f + 2 < after.len() => (&after[..f], Some(&after[f + 2..])),
        _ => (after, None),
    };
    let key = [&pattern[..star], elem, post].concat();
    let Some(m) = cx.meta(&key)? else {
        return Ok(None);
    };
    match (field, m.kind) {
        (None, Kind::String) => Ok(Some(m.value)),
        (Some(f), Kind::Hash) => cx.sub_get(&key, &m, 0, f),
        _ => Ok(None),
    }
}

/// A weight as Redis's `strtod` check reads it: leading white space allowed, nothing
/// after the number, no NaN, no overflow; the empty string is 0 (`strtod` converts
/// nothing and stops at its end). Hexadecimal floats, which `strtod` also reads, are
/// refused.
fn weight(b: &[u8]) -> Option<f64> {
    if b.is_empty() {
        return Some(0.0);
    }
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let v: f64 = t.parse().ok()?;
    let literal_inf = t
        .trim_start_matches(['+', '-'])
        .to_ascii_lowercase()
        .starts_with("inf");
    (!v.is_nan() && (v.is_finite() || literal_inf)).then_some(v)
}

/// One element being sorted: its value, and what it sorts by.
struct Item {
    elem: Vec<u8>,
    score: f64,
    by: Option<Vec<u8>>,
}

/// The elements of `key` to sort: all of them, or with `window` (`start`, `end`) only
/// those positions of a list or sorted set in its own order (`desc`: from its end).
fn elements(
    cx: &Ctx,
    key: &[u8],
    m: &Meta,
    window: Option<(i64, i64)>,
    desc: bool,
) -> Result<Vec<Vec<u8>>, Reply> {
    let n = m.size as i64;
    let (start, end) = window.unwrap_or((0, n - 1));
    if end < start {
        return Ok(Vec::new());
    }
    Ok(match m.kind {
        Kind::List => {
            let (from, to) = if desc {
                (n - 1 - end, n - 1 - start)
            } else {
                (start, end)
            };
            let mut v = super::list::range(cx, key, m, from as u64, to as u64)?;
            if desc {
                v.reverse();
            }
            v
        }
        Kind::ZSet if window.is_some() => {
            let r = super::zset::Range::Rank(start, end);
            super::zset::select(cx, key, m, &r, desc, super::zset::Limit::NONE)?
                .into_iter()
                .map(|(member, _)| member)
                .collect()
        }
        // A set, or a sorted set to be sorted: member order (what is sorted does not
        // depend on it; a set's `BY nosort` answers in it).
        _ => cx
            .members(key, m, 0)?
            .into_iter()
            .map(|(member, _)| member)
            .collect(),
    })
}

fn sort_generic(cx: &Ctx, a: &[Bytes], readonly: bool) -> CmdResult {
    let mut o = parse(cx, a, readonly)?;
    let key = &a[0];
    let _g = o.store.as_ref().map(|dst| cx.lock(&[key, dst]));
    let m = match cx.meta(key)? {
        Some(m) if matches!(m.kind, Kind::List | Kind::Set | Kind::ZSet) => Some(m),
        Some(_) => return Err(wrongtype()),
        None => None,
    };
    let kind = m.as_ref().map(|m| m.kind);
    // A set has no order of its own: a stored result is sorted (so that it does not
    // depend on the layout), as Redis does.
    if o.dontsort && kind == Some(Kind::Set) && o.store.is_some() {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    // LIMIT, clamped to the collection as Redis's sortCommand does.
    let n = m.as_ref().map_or(0, |m| m.size as i64);
    let mut start = o.offset.clamp(0, n);
    let count = o.count.clamp(-1, n);
    let mut end = if count < 0 { n - 1 } else { start + count - 1 };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    end = end.min(n - 1);
    let window = (end - start + 1).max(0) as u64;
    check_reply_size(window.saturating_mul(o.gets.len().max(1) as u64))?;

    let direct = o.dontsort && matches!(kind, Some(Kind::List | Kind::ZSet));
    let elems = match &m {
        None => Vec::new(),
        Some(m) if direct => elements(cx, key, m, Some((start, end)), o.desc)?,
        Some(m) => elements(cx, key, m, None, false)?,
    };
    let mut items: Vec<Item> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            by: None,
        })
        .collect();
    let (from, to) = if direct {
        (0, items.len())
    } else {
        ((start.max(0)) as usize, (end + 1).max(0) as usize)
    };

    if !o.dontsort {
        let mut bad = false;
        for it in &mut items {
            let v = match &o.by {
                Some(p) => match lookup(cx, p, &it.elem)? {
                    Some(v) => v,
                    None => continue,
                },
                None => it.elem.clone(),
            };
            if o.alpha {
                if o.by.is_some() {
                    it.by = Some(v);
                }
            } else {
                match weight(&v) {
                    Some(s) => it.score = s,
                    None => bad = true,
                }
            }
        }
        if bad {
            return Err(Reply::err(
                "One or more scores can't be converted into double",
            ));
        }
        let (alpha, by, desc) = (o.alpha, o.by.is_some(), o.desc);
        items.sort_by(|x, y| {
            let c = if !alpha {
                x.score
                    .partial_cmp(&y.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| x.elem.cmp(&y.elem))
            } else if by {
                // Elements whose BY key is missing sort first.
                x.by.cmp(&y.by)
            } else {
                x.elem.cmp(&y.elem)
            };
            if desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    let chosen = items.get(from..to).unwrap_or_default();

    match &o.store {
        None => {
            let mut out = Vec::with_capacity(window as usize * o.gets.len().max(1));
            let mut size = 0usize;
            let mut add = |v: Option<Vec<u8>>, out: &mut Vec<Reply>| -> Result<(), Reply> {
                size = size.saturating_add(REPLY_OVERHEAD + v.as_ref().map_or(0, Vec::len));
                if size > cx.s.output_budget {
                    return Err(super::over_output_limit("SORT", cx.sh));
                }
                out.push(v.map_or(Reply::Nil, bulk));
                Ok(())
            };
            for it in chosen {
                if o.gets.is_empty() {
                    add(Some(it.elem.clone()), &mut out)?;
                }
                for p in &o.gets {
                    add(lookup(cx, p, &it.elem)?, &mut out)?;
                }
            }
            Ok(Reply::Array(out))
        }
        Some(dst) => {
            let mut values: Vec<Vec<u8>> = Vec::new();
            let mut size = 0u64;
            for it in chosen {
                let got: Vec<Vec<u8>> = if o.gets.is_empty() {
                    vec![it.elem.clone()]
                } else {
                    o.gets
                        .iter()
                        .map(|p| Ok(lookup(cx, p, &it.elem)?.unwrap_or_default()))
                        .collect::<Result<_, Reply>>()?
                };
                for v in got {
                    size += v.len() as u64;
                    if size > MAX_STRING {
                        return Err(Reply::err(format!(
                            "SORT ... STORE of more than {MAX_STRING} bytes refused"
                        )));
                    }
                    values.push(v);
                }
            }
            let mut b = Batch::new();
            if values.is_empty() {
                if cx.meta(dst)?.is_some() {
                    b.del_meta(cx.db(), dst);
                    cx.write(b)?;
                    cx.notify(Class::GENERIC, "del", dst);
                }
            } else {
                // A new list under a new version, without the old key's expiry (Redis's
                // setKey).
                let fresh = Meta::collection(Kind::List, 0);
                super::list::rewrite(cx, &mut b, dst, &fresh, &values);
                cx.write(b)?;
                cx.notify(Class::LIST, "sortstore", dst);
            }
            Ok(Reply::Int(values.len() as i64))
        }
    }
}
