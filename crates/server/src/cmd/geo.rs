//! Geo commands on sorted sets, as Redis 7.0's `geo.c`: a member's score is the 52-bit
//! geohash of its position ([`hash`]), so `GEOADD` is a `ZADD` of computed scores (and
//! sends `zadd` events), every sorted-set command works on a geo set, and a search reads
//! the score ranges of at most nine cells around its centre (each one ordered scan of the
//! score index), keeping the members inside the circle or box.
//!
//! A search reads what its cells hold, at most the whole set (a radius of thousands of
//! kilometres); the matches it keeps are refused past [`super::MAX_REPLY_ITEMS`].

mod hash;

use super::table::c;
use super::zset::{self, Scored};
use super::{bulk, check_reply_size, eq, syntax, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::record::{Kind, Meta};
use bytes::Bytes;
use hash::{Shape, ShapeKind};

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("geoadd", -5, [WRITE DENYOOM], 1, 1, 1, Geo, geoadd),
    c!("geodist", -4, [READONLY], 1, 1, 1, Geo, geodist),
    c!("geohash", -2, [READONLY], 1, 1, 1, Geo, geohash),
    c!("geopos", -2, [READONLY], 1, 1, 1, Geo, geopos),
    c!("georadius", -6, [WRITE DENYOOM MOVABLEKEYS], 1, 1, 1, Geo, georadius, find_keys = radius_keys),
    c!("georadius_ro", -6, [READONLY], 1, 1, 1, Geo, georadius_ro),
    c!("georadiusbymember", -5, [WRITE DENYOOM MOVABLEKEYS], 1, 1, 1, Geo, georadiusbymember, find_keys = radius_keys),
    c!("georadiusbymember_ro", -5, [READONLY], 1, 1, 1, Geo, georadiusbymember_ro),
    c!("geosearch", -7, [READONLY], 1, 1, 1, Geo, geosearch),
    c!("geosearchstore", -8, [WRITE DENYOOM], 1, 2, 1, Geo, geosearchstore),
];

/// `GEORADIUS`'s and `GEORADIUSBYMEMBER`'s keys (the whole command, name first), as
/// Redis's `georadiusGetKeys`: the key, and the one after the last `STORE`/`STOREDIST`.
pub fn radius_keys(args: &[Bytes]) -> Result<Vec<usize>, Reply> {
    if args.len() < 2 {
        return Ok(Vec::new());
    }
    Ok([1].into_iter().chain(store_arg(args, 5)).collect())
}

/// The index of the key after the last `STORE` or `STOREDIST` in `args` from `from` on.
fn store_arg(args: &[Bytes], from: usize) -> Option<usize> {
    let (mut store, mut i) = (None, from);
    while i < args.len() {
        if (eq(&args[i], "store") || eq(&args[i], "storedist")) && i + 1 < args.len() {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    store
}

/// The sorted set `key`, if it exists (WRONGTYPE for another type).
fn geoset(cx: &Ctx, key: &[u8]) -> Result<Option<Meta>, Reply> {
    cx.typed(key, Kind::ZSet)
}

/// Metres per unit of `u`.
fn unit(u: &[u8]) -> Result<f64, Reply> {
    [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)]
        .into_iter()
        .find(|(n, _)| eq(u, n))
        .map(|(_, m)| m)
        .ok_or_else(|| Reply::err("unsupported unit provided. please use M, KM, FT, MI"))
}

/// A float argument; `msg` is the error for one that is not (Redis's default otherwise).
fn number(b: &[u8], msg: Option<&str>) -> Result<f64, Reply> {
    super::parse_float(b).ok_or_else(|| msg.map_or_else(super::not_float, Reply::err))
}

/// `longitude latitude` at the start of `a`, within what a score can hold.
fn lon_lat(a: &[Bytes]) -> Result<(f64, f64), Reply> {
    let (lon, lat) = (number(&a[0], None)?, number(&a[1], None)?);
    if !(hash::LON_MIN..=hash::LON_MAX).contains(&lon)
        || !(hash::LAT_MIN..=hash::LAT_MAX).contains(&lat)
    {
        return Err(Reply::err(format!(
            "invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// `radius unit`: the radius and metres per unit.
fn radius(a: &[Bytes]) -> Result<(f64, f64), Reply> {
    let r = number(&a[0], Some("need numeric radius"))?;
    if r < 0.0 {
        return Err(Reply::err("radius cannot be negative"));
    }
    Ok((r, unit(&a[1])?))
}

/// `width height unit`.
fn box_size(a: &[Bytes]) -> Result<(f64, f64, f64), Reply> {
    let w = number(&a[0], Some("need numeric width"))?;
    let h = number(&a[1], Some("need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(Reply::err("height or width cannot be negative"));
    }
    Ok((w, h, unit(&a[2])?))
}

/// A distance as Redis prints one: four decimals, rounded half to even as `llrint` does.
fn fmt_distance(d: f64) -> String {
    let v = (d * 10000.0).round_ties_even() as i64;
    let sign = if v < 0 { "-" } else { "" };
    let v = v.unsigned_abs();
    format!("{sign}{}.{:04}", v / 10000, v % 10000)
}

/// A coordinate as Redis's `addReplyHumanLongDouble` sends it: in RESP2 a string of at
/// most 17 decimals without trailing zeros, in RESP3 a double.
fn coordinate(cx: &Ctx, v: f64) -> Reply {
    if cx.s.proto >= 3 {
        return Reply::Double(v);
    }
    let s = format!("{v:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    bulk(if s == "-0" { "0" } else { s }.as_bytes().to_vec())
}

/// The position of `member`, if it is one.
fn member_position(
    cx: &Ctx,
    key: &[u8],
    m: &Meta,
    member: &[u8],
) -> Result<Option<(f64, f64)>, Reply> {
    Ok(zset::score(cx, key, m, member)?.map(hash::position))
}

/// `GEOADD key [NX|XX] [CH] longitude latitude member [...]`: a `ZADD` of the members'
/// geohash scores.
fn geoadd(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut first = 1;
    let (mut nx, mut xx) = (false, false);
    while first < a.len() {
        let o = &a[first];
        if eq(o, "nx") {
            nx = true;
        } else if eq(o, "xx") {
            xx = true;
        } else if !eq(o, "ch") {
            break;
        }
        first += 1;
    }
    let triples = &a[first..];
    if !triples.len().is_multiple_of(3) || (nx && xx) {
        return Err(syntax());
    }
    let mut args: Vec<Bytes> = a[..first].to_vec();
    for t in triples.chunks(3) {
        let (lon, lat) = lon_lat(t)?;
        let s = hash::score(lon, lat).expect("a checked position has a score");
        args.push(Bytes::from(s.to_string()));
        args.push(t[2].clone());
    }
    zset::zadd(cx, &args)
}

/// `GEOPOS key member [...]`: `[longitude, latitude]` per member, nil for a missing one.
fn geopos(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let m = geoset(cx, &a[0])?;
    let mut out = Vec::with_capacity(a.len() - 1);
    for member in &a[1..] {
        let p = match &m {
            Some(m) => member_position(cx, &a[0], m, member)?,
            None => None,
        };
        out.push(match p {
            Some((lon, lat)) => Reply::Array(vec![coordinate(cx, lon), coordinate(cx, lat)]),
            None => Reply::NilArray,
        });
    }
    Ok(Reply::Array(out))
}

/// `GEOHASH key member [...]`: the standard 11-character geohash per member.
fn geohash(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let m = geoset(cx, &a[0])?;
    let mut out = Vec::with_capacity(a.len() - 1);
    for member in &a[1..] {
        let s = match &m {
            Some(m) => zset::score(cx, &a[0], m, member)?,
            None => None,
        };
        out.push(s.map_or(Reply::Nil, |s| bulk(hash::geohash_string(s).into_bytes())));
    }
    Ok(Reply::Array(out))
}

/// `GEODIST key member1 member2 [M|KM|FT|MI]`
fn geodist(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let to_m = match a.len() {
        3 => 1.0,
        4 => unit(&a[3])?,
        _ => return Err(syntax()),
    };
    let Some(m) = geoset(cx, &a[0])? else {
        return Ok(Reply::Nil);
    };
    let (Some(p), Some(q)) = (
        member_position(cx, &a[0], &m, &a[1])?,
        member_position(cx, &a[0], &m, &a[2])?,
    ) else {
        return Ok(Reply::Nil);
    };
    let d = hash::distance(p.0, p.1, q.0, q.1) / to_m;
    Ok(bulk(fmt_distance(d).into_bytes()))
}

/// Which command of the search family runs, and so which arguments it takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    /// `GEORADIUS[_RO] key lon lat radius unit ...`
    Radius { store: bool },
    /// `GEORADIUSBYMEMBER[_RO] key member radius unit ...`
    ByMember { store: bool },
    /// `GEOSEARCH key ...`
    Search,
    /// `GEOSEARCHSTORE dst key ...`
    SearchStore,
}

impl Family {
    fn name(self) -> &'static str {
        match self {
            Family::Radius { .. } | Family::ByMember { .. } => "georadius",
            Family::Search => "geosearch",
            Family::SearchStore => "geosearchstore",
        }
    }

    /// The event a stored result sends (Redis's names).
    fn store_event(self) -> &'static str {
        if self.is_search() {
            "geosearchstore"
        } else {
            "georadiusstore"
        }
    }

    fn is_search(self) -> bool {
        matches!(self, Family::Search | Family::SearchStore)
    }
}

/// How results are ordered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    None,
    Asc,
    Desc,
}

/// One match: member, distance from the centre (metres), score, position.
struct Point {
    member: Vec<u8>,
    dist: f64,
    score: f64,
    lon: f64,
    lat: f64,
}

/// Every member of the sorted set in `shape`'s cells that is inside it, in the order
/// the cells are read; with `limit`, stops once it has that many (`ANY`).
fn points_in(
    cx: &Ctx,
    key: &[u8],
    m: &Meta,
    shape: &Shape,
    limit: u64,
) -> Result<Vec<Point>, Reply> {
    let mut out: Vec<Point> = Vec::new();
    let mut last: Option<hash::Cell> = None;
    let mut over = false;
    for cell in shape.cells().into_iter().flatten() {
        // With a huge radius neighbouring cells can be the same one: read it once.
        if last == Some(cell) {
            continue;
        }
        if limit > 0 && out.len() as u64 >= limit {
            break;
        }
        let (min, max) = hash::score_range(cell);
        zset::walk_index(cx, key, m, Some(min), |member, s| {
            if s >= max {
                return false;
            }
            let (lon, lat) = hash::position(s);
            if let Some(dist) = shape.contains(lon, lat) {
                if out.len() as u64 >= super::MAX_REPLY_ITEMS {
                    over = true;
                    return false;
                }
                out.push(Point {
                    member: member.to_vec(),
                    dist,
                    score: s,
                    lon,
                    lat,
                });
            }
            limit == 0 || (out.len() as u64) < limit
        })?;
        if over {
            check_reply_size(super::MAX_REPLY_ITEMS + 1)?;
        }
        last = Some(cell);
    }
    Ok(out)
}

/// The search family (Redis's `georadiusGeneric`): `a` is the arguments after the
/// command's name.
fn search(cx: &Ctx, a: &[Bytes], kind: Family) -> CmdResult {
    let (src, mut store_key) = match kind {
        Family::SearchStore => (&a[1], Some(a[0].clone())),
        _ => (&a[0], None),
    };
    // The destination is known before parsing (as the key finder finds it), so that the
    // source is read under the same locks as the destination is written.
    let dst = match kind {
        Family::SearchStore => Some(&a[0]),
        Family::Radius { store: true } | Family::ByMember { store: true } => {
            store_arg(a, 4).map(|i| &a[i])
        }
        _ => None,
    };
    let _g = dst.map(|d| cx.lock(&[src, d]));
    let m = geoset(cx, src)?;
    let mut center = None;
    let mut shape_kind = None;
    let mut conversion = 1.0;
    let base = match kind {
        Family::Radius { .. } => {
            center = Some(lon_lat(&a[1..3])?);
            let (r, c) = radius(&a[3..5])?;
            (shape_kind, conversion) = (Some(ShapeKind::Radius(r)), c);
            5
        }
        Family::ByMember { .. } => {
            if let Some(m) = &m {
                let p = member_position(cx, src, m, &a[1])?;
                center =
                    Some(p.ok_or_else(|| Reply::err("could not decode requested zset member"))?);
                let (r, c) = radius(&a[2..4])?;
                (shape_kind, conversion) = (Some(ShapeKind::Radius(r)), c);
            }
            4
        }
        Family::Search => 1,
        Family::SearchStore => 2,
    };
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc) = (false, false);
    let mut storedist = false;
    let mut order = Order::None;
    let mut count = 0u64;
    let opts = &a[base..];
    let mut i = 0;
    while i < opts.len() {
        let (o, left) = (&opts[i], opts.len() - i - 1);
        let can_store = matches!(
            kind,
            Family::Radius { store: true } | Family::ByMember { store: true }
        );
        if eq(o, "withdist") {
            withdist = true;
        } else if eq(o, "withhash") {
            withhash = true;
        } else if eq(o, "withcoord") {
            withcoord = true;
        } else if eq(o, "any") {
            any = true;
        } else if eq(o, "asc") {
            order = Order::Asc;
        } else if eq(o, "desc") {
            order = Order::Desc;
        } else if eq(o, "count") && left >= 1 {
            let n = super::int(&opts[i + 1])?;
            if n <= 0 {
                return Err(Reply::err("COUNT must be > 0"));
            }
            count = n as u64;
            i += 1;
        } else if can_store && (eq(o, "store") || eq(o, "storedist")) && left >= 1 {
            storedist = eq(o, "storedist");
            store_key = Some(opts[i + 1].clone());
            i += 1;
        } else if kind == Family::SearchStore && eq(o, "storedist") {
            storedist = true;
        } else if kind.is_search() && eq(o, "frommember") && left >= 1 && !fromloc {
            if let Some(m) = &m {
                let p = member_position(cx, src, m, &opts[i + 1])?;
                center =
                    Some(p.ok_or_else(|| Reply::err("could not decode requested zset member"))?);
            }
            frommember = true;
            i += 1;
        } else if kind.is_search() && eq(o, "fromlonlat") && left >= 2 && !frommember {
            center = Some(lon_lat(&opts[i + 1..i + 3])?);
            fromloc = true;
            i += 2;
        } else if kind.is_search()
            && eq(o, "byradius")
            && left >= 2
            && !matches!(shape_kind, Some(ShapeKind::Box { .. }))
        {
            let (r, c) = radius(&opts[i + 1..i + 3])?;
            (shape_kind, conversion) = (Some(ShapeKind::Radius(r)), c);
            i += 2;
        } else if kind.is_search()
            && eq(o, "bybox")
            && left >= 3
            && !matches!(shape_kind, Some(ShapeKind::Radius(_)))
        {
            let (width, height, c) = box_size(&opts[i + 1..i + 4])?;
            (shape_kind, conversion) = (Some(ShapeKind::Box { width, height }), c);
            i += 3;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if store_key.is_some() && (withdist || withhash || withcoord) {
        return Err(Reply::err(format!(
            "{} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if kind == Family::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    if kind.is_search() && !(frommember || fromloc) {
        return Err(Reply::err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            kind.name()
        )));
    }
    if kind.is_search() && shape_kind.is_none() {
        return Err(Reply::err(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {}",
            kind.name()
        )));
    }
    if any && count == 0 {
        return Err(Reply::err("the ANY argument requires COUNT argument"));
    }
    if store_key.as_ref() != dst {
        // Found differently by the parse and the key finder: not a command Redis parses
        // either.
        return Err(syntax());
    }
    let (Some(m), Some(center), Some(shape_kind)) = (m, center, shape_kind) else {
        // No such key: an empty reply, or an empty (deleted) destination.
        return match store_key {
            Some(dst) => zset::store(cx, &dst, &[], kind.store_event()),
            None => Ok(Reply::Array(Vec::new())),
        };
    };
    // COUNT keeps the nearest: it sorts, unless ANY asked for the first ones found.
    if count > 0 && order == Order::None && !any {
        order = Order::Asc;
    }
    let shape = Shape {
        center,
        conversion,
        kind: shape_kind,
    };
    let mut points = points_in(cx, src, &m, &shape, if any { count } else { 0 })?;
    match order {
        Order::Asc => points.sort_by(|x, y| x.dist.total_cmp(&y.dist)),
        Order::Desc => points.sort_by(|x, y| y.dist.total_cmp(&x.dist)),
        Order::None => {}
    }
    if count > 0 {
        points.truncate(count as usize);
    }
    if let Some(dst) = store_key {
        let items: Vec<Scored> = points
            .into_iter()
            .map(|p| {
                let s = if storedist {
                    p.dist / conversion
                } else {
                    p.score
                };
                (p.member, s)
            })
            .collect();
        return zset::store(cx, &dst, &items, kind.store_event());
    }
    let extras = withdist as usize + withhash as usize + withcoord as usize;
    let out = points
        .into_iter()
        .map(|p| {
            if extras == 0 {
                return bulk(p.member);
            }
            let mut e = Vec::with_capacity(extras + 1);
            e.push(bulk(p.member));
            if withdist {
                e.push(bulk(fmt_distance(p.dist / conversion).into_bytes()));
            }
            if withhash {
                e.push(Reply::Int(p.score as i64));
            }
            if withcoord {
                e.push(Reply::Array(vec![
                    coordinate(cx, p.lon),
                    coordinate(cx, p.lat),
                ]));
            }
            Reply::Array(e)
        })
        .collect();
    Ok(Reply::Array(out))
}

fn georadius(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search(cx, a, Family::Radius { store: true })
}

fn georadius_ro(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search(cx, a, Family::Radius { store: false })
}

fn georadiusbymember(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search(cx, a, Family::ByMember { store: true })
}

fn georadiusbymember_ro(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search(cx, a, Family::ByMember { store: false })
}

fn geosearch(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search(cx, a, Family::Search)
}

fn geosearchstore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search(cx, a, Family::SearchStore)
}
