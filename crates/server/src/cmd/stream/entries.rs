//! Entries: `XADD`, `XRANGE`, `XREVRANGE`, `XLEN`, `XDEL`, `XTRIM`, `XSETID`, and the
//! appending and trimming they share with the rest of the module.

use super::id::{self, Id};
use super::layout::{self, Node, ENTRY, NODE};
use super::{count_arg, entries_reply, node_max_bytes, node_max_entries, Tx};
use crate::cmd::{eq, int, syntax, wrong_args, CmdResult, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;

/// How `XADD` and `XTRIM` trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    None,
    MaxLen(u64),
    MinId(Id),
}

/// `XADD`'s and `XTRIM`'s options (Redis's `streamAddTrimArgs`).
#[derive(Clone, Copy, Debug)]
pub struct TrimArgs {
    pub strategy: Strategy,
    /// `~`: only whole nodes are removed.
    pub approx: bool,
    /// Most entries one call removes (0: no limit).
    pub limit: u64,
    pub nomkstream: bool,
    /// `XADD`'s explicit ID, and whether its sequence was given (not `<ms>-*`).
    pub id: Option<(Id, bool)>,
}

/// Parses the options from `a[0]` on (after the key); returns them and, for `XADD`, the
/// position of the ID in `a` (Redis's `streamParseAddOrTrimArgsOrReply`).
pub fn trim_args(cx: &Ctx, a: &[Bytes], xadd: bool) -> Result<(TrimArgs, usize), Reply> {
    let mut t = TrimArgs {
        strategy: Strategy::None,
        approx: false,
        limit: 0,
        nomkstream: false,
        id: None,
    };
    let mut limit_given = false;
    let mut i = 0;
    let both =
        || Reply::err("syntax error, MAXLEN and MINID options at the same time are not compatible");
    while i < a.len() {
        let more = a.len() - 1 - i;
        let o = &a[i];
        if xadd && &o[..] == b"*" {
            break;
        } else if (eq(o, "maxlen") || eq(o, "minid")) && more > 0 {
            if t.strategy != Strategy::None {
                return Err(both());
            }
            t.approx = false;
            if more >= 2 && &a[i + 1][..] == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && &a[i + 1][..] == b"=" {
                i += 1;
            }
            let v = &a[i + 1];
            t.strategy = if eq(o, "maxlen") {
                let n = int(v)?;
                if n < 0 {
                    return Err(Reply::err("The MAXLEN argument must be >= 0."));
                }
                Strategy::MaxLen(n as u64)
            } else {
                Strategy::MinId(id::parse(v, 0, true)?)
            };
            i += 1;
        } else if eq(o, "limit") && more > 0 {
            let n = int(&a[i + 1])?;
            if n < 0 {
                return Err(Reply::err("The LIMIT argument must be >= 0."));
            }
            t.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && eq(o, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            t.id = Some(id::parse_add(o)?);
            break;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if t.limit > 0 && t.strategy == Strategy::None {
        return Err(Reply::err(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.strategy == Strategy::None {
        return Err(Reply::err(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !t.approx {
            return Err(Reply::err(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        // At most 100 nodes' worth of work, as Redis caps it.
        t.limit = (100 * node_max_entries(cx)).clamp(1, 1_000_000);
        if node_max_entries(cx) == 0 {
            t.limit = 10_000;
        }
    }
    Ok((t, i))
}

/// Most entries an `XADD` given `LIMIT` may trim and still run on the connection's task
/// and join a run ([`crate::inline`], [`crate::combine`]): the default limit of an
/// approximate trim at the default node size (100 nodes of 100 entries).
const CHEAP_TRIM: i64 = 10_000;

/// Whether an `XADD` (the whole command) trims a bounded number of entries: none, or
/// approximately (`~`, whole nodes, at most `LIMIT`, by default 100 nodes' worth, as Redis
/// caps it). An exact trim may delete any number (`MAXLEN = 0` on a long stream). Parses
/// the options as [`trim_args`] does, so that it judges the command the handler runs.
pub fn bounded_trim(cmd: &[Bytes]) -> bool {
    let a = cmd.get(2..).unwrap_or_default();
    let (mut exact, mut limit) = (false, None);
    let mut i = 0;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let o = &a[i];
        if (eq(o, "maxlen") || eq(o, "minid")) && more > 0 {
            match &a[i + 1][..] {
                b"~" if more >= 2 => i += 1,
                b"=" if more >= 2 => {
                    exact = true;
                    i += 1
                }
                _ => exact = true,
            }
            i += 2;
        } else if eq(o, "limit") && more > 0 {
            limit = crate::cmd::parse_int(&a[i + 1]);
            i += 2;
        } else if eq(o, "nomkstream") {
            i += 1;
        } else {
            // `*` or an ID: the fields follow.
            break;
        }
    }
    !exact && limit.is_none_or(|n| (1..=CHEAP_TRIM).contains(&n))
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value
/// [field value ...]`
pub fn xadd(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let (t, at) = trim_args(cx, &a[1..], true)?;
    let fields = &a[2 + at..];
    if fields.len() < 2 || !fields.len().is_multiple_of(2) {
        return Err(wrong_args("xadd"));
    }
    if let Some((id, true)) = t.id {
        if id.is_zero() {
            return Err(Reply::err(
                "The ID specified in XADD must be greater than 0-0",
            ));
        }
    }
    let _g = cx.lock(&[key]);
    let mut tx = match Tx::open(cx, key)? {
        Some(tx) => tx,
        None if t.nomkstream => return Ok(Reply::Nil),
        None => Tx::create(cx, key),
    };
    if tx.st.last_id == Id::MAX {
        return Err(Reply::err(
            "The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = next_id(tx.st.last_id, t.id)?;
    append(&mut tx, id, fields)?;
    tx.notify("xadd");
    if trim(&mut tx, &t)? > 0 {
        tx.notify("xtrim");
    }
    tx.commit()?;
    Ok(id.reply())
}

/// The ID of an append after `last`: the one given, or the clock's millisecond (or
/// `last`'s, if the clock is behind it) with the next sequence.
fn next_id(last: Id, given: Option<(Id, bool)>) -> Result<Id, Reply> {
    let smaller = || {
        Reply::err("The ID specified in XADD is equal or smaller than the target stream top item")
    };
    let id = match given {
        Some((id, true)) => id,
        Some((id, false)) if id.ms == last.ms => {
            last.next().filter(|n| n.ms == id.ms).ok_or_else(smaller)?
        }
        Some((id, false)) => id,
        None => {
            let now = crate::record::now_ms();
            if now > last.ms {
                Id::new(now, 0)
            } else {
                last.next().ok_or_else(smaller)?
            }
        }
    };
    if id <= last {
        return Err(smaller());
    }
    Ok(id)
}

/// Appends entry `id` (above the stream's last ID), starting a node when the last one is
/// full, as Redis starts a listpack.
pub fn append(tx: &mut Tx, id: Id, fields: &[Bytes]) -> Result<(), Reply> {
    let raw: u64 = fields.iter().map(|f| f.len() as u64).sum();
    let open = tx.st.nodes > 0 && tx.st.tail_count > 0;
    let max_entries = node_max_entries(tx.cx);
    let full = open
        && (tx.st.tail_bytes + raw >= node_max_bytes(tx.cx)
            || (max_entries > 0 && tx.st.tail_count >= max_entries));
    if full {
        tx.close_last_node()?;
    }
    if !open || full {
        let prev = (tx.st.nodes > 0).then_some(tx.st.last_node);
        tx.put(
            NODE,
            &id.bytes(),
            Node {
                live: 0,
                last: id,
                prev,
            }
            .encode(),
        );
        tx.st.nodes += 1;
        tx.st.last_node = id;
        tx.st.tail_count = 0;
        tx.st.tail_live = 0;
        // The listpack's header and its master entry (the first entry's fields).
        tx.st.tail_bytes = 7 + layout::entry_bytes(&fields.iter().step_by(2).collect::<Vec<_>>());
    }
    tx.put(ENTRY, &id.bytes(), layout::encode_fields(fields));
    tx.st.tail_count += 1;
    tx.st.tail_live += 1;
    tx.st.tail_bytes += layout::entry_bytes(fields);
    tx.m.size += 1;
    tx.st.entries_added += 1;
    tx.st.last_id = id;
    if tx.m.size == 1 {
        tx.st.first_id = id;
    }
    Ok(())
}

/// Trims the stream as `t` says (Redis's `streamTrim`): whole nodes from the first on,
/// then, unless approximate, entries of the first node left; at most `t.limit` entries.
/// Returns how many entries it deleted.
pub fn trim(tx: &mut Tx, t: &TrimArgs) -> Result<u64, Reply> {
    match t.strategy {
        Strategy::None => return Ok(0),
        // Under its length (every append to a stream not yet full): no node is read.
        Strategy::MaxLen(max) if tx.m.size <= max && tx.m.size > 0 => return Ok(0),
        _ => {}
    }
    let mut deleted = 0u64;
    // From the node holding the first entry (no node before it holds one: `free_node`),
    // never from the first node record: those a trim removed are tombstones until
    // compaction, and an append that trims would pass every one of them.
    let mut at = if tx.m.size > 0 {
        tx.node_of(tx.st.first_id)?
    } else {
        tx.nodes_after(None, 1)?.first().copied()
    };
    while let Some(first) = at {
        if let Strategy::MaxLen(max) = t.strategy {
            if tx.m.size <= max {
                break;
            }
        }
        let live = tx.node_live(first)?;
        if t.limit > 0 && deleted + live > t.limit {
            break;
        }
        let remove = match t.strategy {
            Strategy::MaxLen(max) => tx.m.size - live.min(tx.m.size) >= max,
            Strategy::MinId(min) => tx.node_last(first)? < min,
            Strategy::None => unreachable!("returned above"),
        };
        if !remove && t.approx {
            break;
        }
        let next = tx.nodes_after(Some(first), 1)?.first().copied();
        if remove {
            let ids = node_ids(tx, first, next)?;
            for id in &ids {
                tx.del(ENTRY, &id.bytes());
            }
            tx.del(NODE, &first.bytes());
            tx.m.size = tx.m.size.saturating_sub(ids.len() as u64);
            deleted += ids.len() as u64;
            tx.st.nodes = tx.st.nodes.saturating_sub(1);
            if next.is_none() {
                tx.st.tail_count = 0;
                tx.st.tail_live = 0;
            }
            at = next;
            continue;
        }
        // Entries of the first node, from its start.
        let mut gone = Vec::new();
        let size = tx.m.size;
        tx.range(
            first,
            next.and_then(Id::prev).unwrap_or(Id::MAX),
            |id, _| {
                let stop = match t.strategy {
                    Strategy::MaxLen(max) => size - gone.len() as u64 <= max,
                    Strategy::MinId(min) => id >= min,
                    Strategy::None => true,
                };
                if !stop {
                    gone.push(id);
                }
                Ok(!stop)
            },
        )?;
        for id in &gone {
            tx.del(ENTRY, &id.bytes());
        }
        let n = gone.len() as u64;
        tx.m.size -= n;
        deleted += n;
        match live.saturating_sub(n) {
            0 => tx.free_node(first)?,
            left => tx.set_node_live(first, left)?,
        }
        break;
    }
    if tx.m.size == 0 {
        tx.st.first_id = Id::MIN;
    } else if deleted > 0 {
        tx.st.first_id = tx.first_entry()?.unwrap_or(Id::MIN);
    }
    Ok(deleted)
}

/// The live entries of the node starting at `first` (up to `next`).
fn node_ids(tx: &Tx, first: Id, next: Option<Id>) -> Result<Vec<Id>, Reply> {
    let mut out = Vec::new();
    let end = next.and_then(Id::prev).unwrap_or(Id::MAX);
    if next.is_some_and(|n| n <= first) {
        return Ok(out);
    }
    tx.range(first, end, |id, _| {
        out.push(id);
        Ok(true)
    })?;
    Ok(out)
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`
pub fn xtrim(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let (t, _) = trim_args(cx, &a[1..], false)?;
    let _g = cx.lock(&[key]);
    let Some(mut tx) = Tx::open(cx, key)? else {
        return Ok(Reply::Int(0));
    };
    let n = trim(&mut tx, &t)?;
    if n > 0 {
        tx.notify("xtrim");
        tx.commit()?;
    }
    Ok(Reply::Int(n as i64))
}

fn range_cmd(cx: &mut Ctx, a: &[Bytes], rev: bool) -> CmdResult {
    let (s, e) = if rev { (&a[2], &a[1]) } else { (&a[1], &a[2]) };
    let start = id::parse_bound(s, true)?;
    let end = id::parse_bound(e, false)?;
    let mut count: Option<u64> = None;
    let mut i = 3;
    while i < a.len() {
        if eq(&a[i], "count") && i + 1 < a.len() {
            count = Some(count_arg(&a[i + 1])?);
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    let Some(tx) = Tx::open(cx, &a[0])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == Some(0) {
        return Ok(Reply::NilArray);
    }
    Ok(entries_reply(tx.read_range(
        start,
        end,
        count.unwrap_or(0),
        rev,
    )?))
}

/// `XRANGE key start end [COUNT count]`
pub fn xrange(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_cmd(cx, a, false)
}

/// `XREVRANGE key end start [COUNT count]`
pub fn xrevrange(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_cmd(cx, a, true)
}

pub fn xlen(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(
        cx.typed(&a[0], crate::record::Kind::Stream)?
            .map_or(0, |m| m.size) as i64,
    ))
}

/// `XDEL key id [id ...]`
pub fn xdel(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let ids = a[1..]
        .iter()
        .map(|b| id::parse(b, 0, true))
        .collect::<Result<Vec<_>, _>>()?;
    let _g = cx.lock(&[key]);
    let Some(mut tx) = Tx::open(cx, key)? else {
        return Ok(Reply::Int(0));
    };
    let (mut deleted, mut first) = (0, false);
    for id in ids {
        if !tx.exists(ENTRY, &id.bytes())? {
            continue;
        }
        tx.del(ENTRY, &id.bytes());
        tx.m.size = tx.m.size.saturating_sub(1);
        if let Some(node) = tx.node_of(id)? {
            // Redis frees a listpack left with no entry; the next append starts another.
            match tx.node_live(node)?.saturating_sub(1) {
                0 => tx.free_node(node)?,
                live => tx.set_node_live(node, live)?,
            }
        }
        first |= id == tx.st.first_id;
        tx.st.max_deleted = tx.st.max_deleted.max(id);
        deleted += 1;
    }
    if deleted > 0 {
        if tx.m.size == 0 {
            tx.st.first_id = Id::MIN;
        } else if first {
            tx.st.first_id = tx.first_entry()?.unwrap_or(Id::MIN);
        }
        tx.notify("xdel");
        tx.commit()?;
    }
    Ok(Reply::Int(deleted))
}

/// `XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]`
pub fn xsetid(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let id = id::parse(&a[1], 0, true)?;
    let (mut added, mut max_deleted) = (None, Id::MIN);
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - 1 - i;
        if eq(&a[i], "entriesadded") && more > 0 {
            let n = int(&a[i + 1])?;
            if n < 0 {
                return Err(Reply::err("entries_added must be positive"));
            }
            added = Some(n as u64);
        } else if eq(&a[i], "maxdeletedid") && more > 0 {
            max_deleted = id::parse(&a[i + 1], 0, true)?;
            if id < max_deleted {
                return Err(Reply::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(syntax());
        }
        i += 2;
    }
    let _g = cx.lock(&[key]);
    let Some(mut tx) = Tx::open(cx, key)? else {
        return Err(Reply::err("no such key"));
    };
    if tx.m.size > 0 {
        if tx.last_entry()?.is_some_and(|max| id < max) {
            return Err(Reply::err(
                "The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if added.is_some_and(|n| tx.m.size > n) {
            return Err(Reply::err(
                "The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    // The open node's last entry is the stream's last ID until this moves it: close it.
    // Nodes that start above the new last ID hold no live entry (the ID is at least the
    // last entry's): drop them, so that the next append (above `id`) is never placed in
    // a node that starts after it.
    tx.close_last_node()?;
    while tx.st.nodes > 0 && tx.st.last_node > id {
        let last = tx.st.last_node;
        let prev = tx.node(last)?.and_then(|n| n.prev);
        tx.del(NODE, &last.bytes());
        tx.st.nodes -= 1;
        tx.st.tail_count = 0;
        tx.st.tail_live = 0;
        match prev {
            Some(p) if tx.st.nodes > 0 => tx.st.last_node = p,
            _ => tx.st.nodes = 0,
        }
    }
    tx.st.last_id = id;
    if let Some(n) = added {
        tx.st.entries_added = n;
    }
    if !max_deleted.is_zero() {
        tx.st.max_deleted = max_deleted;
    }
    tx.notify("xsetid");
    tx.commit()?;
    Ok(Reply::ok())
}
