//! Consumer groups: `XGROUP`, `XACK`, `XPENDING`, `XCLAIM`, `XAUTOCLAIM`, and the
//! delivery of entries to a group's consumer that `XREADGROUP` does.
//!
//! A group's pending entries are kept twice, as Redis keeps them in two radix trees: by ID
//! in the group (with the consumer, delivery time and count), and by consumer (the
//! consumer's history, which `XREADGROUP` with an ID reads). Every change writes both.

use super::id::{self, Id};
use super::layout::{
    consumer_member, consumer_pel_member, consumer_pel_prefix, group_pel_member, in_group,
    Consumer, Group, Nack, CONSUMER, CONSUMER_PEL, GROUP, GROUP_PEL, UNKNOWN_READ,
};
use super::{count_arg, entry_reply, no_group, Entry, Tx};
use crate::cmd::{eq, int, now_ms, syntax, text, wrong_args, CmdResult, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;

fn corrupt() -> Reply {
    Reply::err("stored consumer group is not in the server's format")
}

impl Tx<'_, '_> {
    pub fn group(&self, name: &[u8]) -> Result<Option<Group>, Reply> {
        self.get(GROUP, name)?
            .map(|v| Group::decode(&v).ok_or_else(corrupt))
            .transpose()
    }

    pub fn put_group(&mut self, name: &[u8], g: &Group) {
        self.put(GROUP, name, g.encode());
    }

    pub fn consumer(&self, group: &[u8], name: &[u8]) -> Result<Option<Consumer>, Reply> {
        self.get(CONSUMER, &consumer_member(group, name))?
            .map(|v| Consumer::decode(&v).ok_or_else(corrupt))
            .transpose()
    }

    pub fn put_consumer(&mut self, group: &[u8], name: &[u8], c: &Consumer) {
        self.put(CONSUMER, &consumer_member(group, name), c.encode());
    }

    /// The consumer `name` of `group` (whose record is `g`), created if missing, its seen
    /// time refreshed (Redis's `streamLookupConsumer` then `streamCreateConsumer`).
    pub fn touch_consumer(
        &mut self,
        group: &[u8],
        g: &mut Group,
        name: &[u8],
    ) -> Result<Consumer, Reply> {
        let now = now_ms() as u64;
        let c = match self.consumer(group, name)? {
            Some(mut c) => {
                c.seen_ms = now;
                c
            }
            None => {
                g.consumers += 1;
                self.notify("xgroup-createconsumer");
                Consumer {
                    seen_ms: now,
                    pending: 0,
                }
            }
        };
        self.put_consumer(group, name, &c);
        Ok(c)
    }

    pub fn nack(&self, group: &[u8], id: Id) -> Result<Option<Nack>, Reply> {
        self.get(GROUP_PEL, &group_pel_member(group, id))?
            .map(|v| Nack::decode(&v).ok_or_else(corrupt))
            .transpose()
    }

    /// Takes pending entry `id` away from its consumer (the caller gives it to another or
    /// acknowledges it).
    fn drop_from_consumer(&mut self, group: &[u8], id: Id, owner: &[u8]) -> Result<(), Reply> {
        self.del(CONSUMER_PEL, &consumer_pel_member(group, owner, id));
        if let Some(mut c) = self.consumer(group, owner)? {
            c.pending = c.pending.saturating_sub(1);
            self.put_consumer(group, owner, &c);
        }
        Ok(())
    }

    /// Deletes pending entry `id` (whose record is `n`) from the group and its consumer.
    pub fn ack(&mut self, group: &[u8], g: &mut Group, id: Id, n: &Nack) -> Result<(), Reply> {
        self.del(GROUP_PEL, &group_pel_member(group, id));
        self.drop_from_consumer(group, id, &n.consumer)?;
        g.pending = g.pending.saturating_sub(1);
        Ok(())
    }

    /// Makes `consumer` (whose record is `c`) the owner of pending entry `id`, whose
    /// record is `old` if it has one, with delivery time `at` and count `deliveries`.
    #[allow(clippy::too_many_arguments)]
    pub fn assign(
        &mut self,
        group: &[u8],
        g: &mut Group,
        consumer: &[u8],
        c: &mut Consumer,
        id: Id,
        old: Option<&Nack>,
        at: u64,
        deliveries: u64,
    ) -> Result<(), Reply> {
        match old {
            Some(o) if o.consumer == consumer => {}
            Some(o) => {
                self.drop_from_consumer(group, id, &o.consumer)?;
                self.put(
                    CONSUMER_PEL,
                    &consumer_pel_member(group, consumer, id),
                    Vec::new(),
                );
                c.pending += 1;
            }
            None => {
                g.pending += 1;
                self.put(
                    CONSUMER_PEL,
                    &consumer_pel_member(group, consumer, id),
                    Vec::new(),
                );
                c.pending += 1;
            }
        }
        let n = Nack {
            delivered_ms: at,
            deliveries,
            consumer: consumer.to_vec(),
        };
        self.put(GROUP_PEL, &group_pel_member(group, id), n.encode());
        Ok(())
    }

    /// Up to `count` (0: no limit) entries after the group's last delivered ID, delivered
    /// to `consumer`: the group's last ID and read counter advance, and the entries become
    /// the consumer's pending ones unless `noack` (Redis's `streamReplyWithRange` with a
    /// group). Nothing is written when there is nothing new.
    pub fn deliver(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        count: u64,
        noack: bool,
    ) -> Result<Vec<Entry>, Reply> {
        let mut g = self
            .group(group)?
            .ok_or_else(|| Reply::err("no such group"))?;
        let Some(start) = g.last_id.next() else {
            return Ok(Vec::new());
        };
        let entries = self.read_range(start, Id::MAX, count, false)?;
        if entries.is_empty() {
            return Ok(entries);
        }
        let mut c = self.touch_consumer(group, &mut g, consumer)?;
        let now = now_ms() as u64;
        for (id, _) in &entries {
            if *id > g.last_id {
                if g.entries_read != UNKNOWN_READ && !super::info::has_tombstones(self, *id, None) {
                    g.entries_read += 1;
                } else if self.st.entries_added > 0 {
                    g.entries_read = super::info::estimate_read(self, *id);
                }
                g.last_id = *id;
            }
            if !noack {
                let old = self.nack(group, *id)?;
                self.assign(group, &mut g, consumer, &mut c, *id, old.as_ref(), now, 1)?;
            }
        }
        self.put_consumer(group, consumer, &c);
        self.put_group(group, &g);
        Ok(entries)
    }

    /// The history of `consumer`: its pending entries after `after`, at most `count` (0:
    /// no limit), each with its fields, or a null for an entry deleted since; each counts
    /// as delivered again.
    pub fn history(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        after: Id,
        count: u64,
    ) -> Result<Vec<Reply>, Reply> {
        let mut g = self
            .group(group)?
            .ok_or_else(|| Reply::err("no such group"))?;
        self.touch_consumer(group, &mut g, consumer)?;
        self.put_group(group, &g);
        let prefix = consumer_pel_prefix(group, consumer);
        let from = match after.next() {
            Some(n) => [&prefix[..], &n.bytes()].concat(),
            None => prefix.clone(),
        };
        let mut ids = Vec::new();
        self.scan(CONSUMER_PEL, &from, |m, _| {
            if !m.starts_with(&prefix) {
                return Ok(false);
            }
            ids.push(Id::from_bytes(&m[prefix.len()..]).ok_or_else(corrupt)?);
            Ok(count == 0 || (ids.len() as u64) < count)
        })?;
        crate::cmd::check_reply_size(ids.len() as u64)?;
        let now = now_ms() as u64;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.entry(id)? {
                None => out.push(Reply::Array(vec![id.reply(), Reply::NilArray])),
                Some(fields) => {
                    if let Some(mut n) = self.nack(group, id)? {
                        n.delivered_ms = now;
                        n.deliveries += 1;
                        self.put(GROUP_PEL, &group_pel_member(group, id), n.encode());
                    }
                    out.push(entry_reply((id, fields)));
                }
            }
        }
        Ok(out)
    }

    /// The pending entries of `group` from `start` to `end` (of `consumer` only, if
    /// given), while `f` says so.
    pub fn pending(
        &self,
        group: &[u8],
        consumer: Option<&[u8]>,
        start: Id,
        end: Id,
        mut f: impl FnMut(Id, Nack) -> Result<bool, Reply>,
    ) -> Result<(), Reply> {
        if start > end {
            return Ok(());
        }
        match consumer {
            None => {
                let prefix = in_group(group);
                self.scan(
                    GROUP_PEL,
                    &[&prefix[..], &start.bytes()].concat(),
                    |m, v| {
                        if !m.starts_with(&prefix) {
                            return Ok(false);
                        }
                        let id = Id::from_bytes(&m[prefix.len()..]).ok_or_else(corrupt)?;
                        if id > end {
                            return Ok(false);
                        }
                        f(id, Nack::decode(v).ok_or_else(corrupt)?)
                    },
                )
            }
            Some(c) => {
                let prefix = consumer_pel_prefix(group, c);
                let mut ids = Vec::new();
                self.scan(
                    CONSUMER_PEL,
                    &[&prefix[..], &start.bytes()].concat(),
                    |m, _| {
                        if !m.starts_with(&prefix) {
                            return Ok(false);
                        }
                        let id = Id::from_bytes(&m[prefix.len()..]).ok_or_else(corrupt)?;
                        if id > end || ids.len() as u64 >= crate::cmd::MAX_REPLY_ITEMS {
                            return Ok(false);
                        }
                        ids.push(id);
                        Ok(true)
                    },
                )?;
                for id in ids {
                    if let Some(n) = self.nack(group, id)? {
                        if !f(id, n)? {
                            break;
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Deletes every record of `group`: its consumers and pending entries (O(records)).
    fn drop_group(&mut self, group: &[u8]) -> Result<(), Reply> {
        let prefix = in_group(group);
        for tag in [CONSUMER, GROUP_PEL, CONSUMER_PEL] {
            let mut members = Vec::new();
            self.scan(tag, &prefix, |m, _| {
                if !m.starts_with(&prefix) {
                    return Ok(false);
                }
                members.push(m.to_vec());
                Ok(true)
            })?;
            for m in members {
                self.del(tag, &m);
            }
        }
        self.del(GROUP, group);
        Ok(())
    }
}

/// The group's starting ID argument: `$` (the stream's last ID) or an ID (`strict`: not
/// `-` or `+`).
fn group_id(tx: Option<&Tx>, b: &[u8], strict: bool) -> Result<Id, Reply> {
    if b == b"$" {
        return Ok(tx.map_or(Id::MIN, |t| t.st.last_id));
    }
    id::parse(b, 0, strict)
}

fn xgroup_help() -> Reply {
    Reply::Array(
        [
            "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
            "HELP",
            "    Print this help.",
        ]
        .into_iter()
        .map(Reply::bulk)
        .collect(),
    )
}

/// The arity of each of `XGROUP`'s and `XINFO`'s subcommands (Redis 7.0's), checked as
/// the table checks a command's.
pub fn subcommand(cmd: &str, a: &[Bytes], arities: &[(&str, i32)]) -> Result<String, Reply> {
    let sub = text(&a[0]).to_ascii_lowercase();
    let Some(&(_, arity)) = arities.iter().find(|(n, _)| *n == sub) else {
        return Err(Reply::err(format!(
            "unknown subcommand '{}'. Try {} HELP.",
            text(&a[0]),
            cmd.to_ascii_uppercase()
        )));
    };
    let words = a.len() + 1;
    let ok = if arity >= 0 {
        words == arity as usize
    } else {
        words >= arity.unsigned_abs() as usize
    };
    if !ok {
        return Err(wrong_args(&format!("{cmd}|{sub}")));
    }
    Ok(sub)
}

/// `XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP ...`
pub fn xgroup(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sub = subcommand(
        "xgroup",
        a,
        &[
            ("create", -5),
            ("setid", -5),
            ("destroy", 4),
            ("createconsumer", 5),
            ("delconsumer", 5),
            ("help", 2),
        ],
    )?;
    if sub == "help" {
        return Ok(xgroup_help());
    }
    let (key, group) = (&a[1], &a[2]);
    let (mut mkstream, mut entries_read) = (false, UNKNOWN_READ);
    let mut i = 4;
    while i < a.len() {
        if sub == "create" && eq(&a[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if (sub == "create" || sub == "setid") && eq(&a[i], "entriesread") && i + 1 < a.len()
        {
            entries_read = int(&a[i + 1])?;
            if entries_read < 0 && entries_read != UNKNOWN_READ {
                return Err(Reply::err("value for ENTRIESREAD must be positive or -1"));
            }
            i += 2;
        } else {
            return Err(Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try XGROUP HELP.",
                text(&a[0])
            )));
        }
    }
    let _g = cx.lock(&[key]);
    let tx = Tx::open(cx, key)?;
    if tx.is_none() && !mkstream {
        return Err(Reply::err("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
    }
    let nogroup = || {
        Reply::Error(format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            text(group),
            text(key)
        ))
    };
    match sub.as_str() {
        "create" => {
            let id = group_id(tx.as_ref(), &a[3], true)?;
            let mut tx = tx.unwrap_or_else(|| Tx::create(cx, key));
            if tx.group(group)?.is_some() {
                return Err(Reply::Error(
                    "BUSYGROUP Consumer Group name already exists".into(),
                ));
            }
            tx.put_group(
                group,
                &Group {
                    last_id: id,
                    entries_read,
                    pending: 0,
                    consumers: 0,
                },
            );
            tx.st.groups += 1;
            tx.notify("xgroup-create");
            tx.commit()?;
            Ok(Reply::ok())
        }
        "setid" => {
            let mut tx = tx.expect("checked above");
            let mut g = tx.group(group)?.ok_or_else(nogroup)?;
            g.last_id = group_id(Some(&tx), &a[3], false)?;
            g.entries_read = entries_read;
            tx.put_group(group, &g);
            tx.notify("xgroup-setid");
            tx.commit()?;
            Ok(Reply::ok())
        }
        "destroy" => {
            let mut tx = tx.expect("checked above");
            if tx.group(group)?.is_none() {
                return Ok(Reply::Int(0));
            }
            tx.drop_group(group)?;
            tx.st.groups = tx.st.groups.saturating_sub(1);
            tx.notify("xgroup-destroy");
            tx.commit()?;
            Ok(Reply::Int(1))
        }
        "createconsumer" => {
            let mut tx = tx.expect("checked above");
            let mut g = tx.group(group)?.ok_or_else(nogroup)?;
            if tx.consumer(group, &a[3])?.is_some() {
                return Ok(Reply::Int(0));
            }
            tx.touch_consumer(group, &mut g, &a[3])?;
            tx.put_group(group, &g);
            tx.commit()?;
            Ok(Reply::Int(1))
        }
        _ => {
            // delconsumer
            let mut tx = tx.expect("checked above");
            let mut g = tx.group(group)?.ok_or_else(nogroup)?;
            let name = &a[3];
            if tx.consumer(group, name)?.is_none() {
                return Ok(Reply::Int(0));
            }
            let prefix = consumer_pel_prefix(group, name);
            let mut ids = Vec::new();
            tx.scan(CONSUMER_PEL, &prefix, |m, _| {
                if !m.starts_with(&prefix) {
                    return Ok(false);
                }
                ids.push(Id::from_bytes(&m[prefix.len()..]).ok_or_else(corrupt)?);
                Ok(true)
            })?;
            for id in &ids {
                tx.del(CONSUMER_PEL, &consumer_pel_member(group, name, *id));
                tx.del(GROUP_PEL, &group_pel_member(group, *id));
            }
            g.pending = g.pending.saturating_sub(ids.len() as u64);
            g.consumers = g.consumers.saturating_sub(1);
            tx.del(CONSUMER, &consumer_member(group, name));
            tx.put_group(group, &g);
            tx.notify("xgroup-delconsumer");
            tx.commit()?;
            Ok(Reply::Int(ids.len() as i64))
        }
    }
}

/// The stream and group a group command works on: `NOGROUP` if either is missing.
fn with_group<'a, 'c>(
    cx: &'a Ctx<'c>,
    key: &'a [u8],
    group: &[u8],
) -> Result<(Tx<'a, 'c>, Group), Reply> {
    let tx = Tx::open(cx, key)?;
    let g = match &tx {
        Some(tx) => tx.group(group)?,
        None => None,
    };
    match (tx, g) {
        (Some(tx), Some(g)) => Ok((tx, g)),
        _ => Err(no_group(key, group, "")),
    }
}

/// `XACK key group id [id ...]`
pub fn xack(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (key, group) = (&a[0], &a[1]);
    let _g = cx.lock(&[key]);
    let Some(mut tx) = Tx::open(cx, key)? else {
        return Ok(Reply::Int(0));
    };
    let Some(mut g) = tx.group(group)? else {
        return Ok(Reply::Int(0));
    };
    let ids = a[2..]
        .iter()
        .map(|b| id::parse(b, 0, true))
        .collect::<Result<Vec<_>, _>>()?;
    let mut acked = 0;
    for id in ids {
        if let Some(n) = tx.nack(group, id)? {
            tx.ack(group, &mut g, id, &n)?;
            acked += 1;
        }
    }
    if acked > 0 {
        tx.put_group(group, &g);
        tx.commit()?;
    }
    Ok(Reply::Int(acked))
}

/// `XPENDING key group [[IDLE min-idle-time] start end count [consumer]]`
pub fn xpending(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (key, group) = (&a[0], &a[1]);
    let words = a.len() + 1;
    if words != 3 && !(6..=9).contains(&words) {
        return Err(syntax());
    }
    let mut range = None;
    if words >= 6 {
        let (mut at, mut min_idle) = (2, 0);
        if eq(&a[2], "idle") {
            min_idle = int(&a[3])?;
            if words < 8 {
                return Err(syntax());
            }
            at += 2;
        }
        let count = count_arg(a.get(at + 2).ok_or_else(syntax)?)?;
        let start = id::parse_bound(&a[at], true)?;
        let end = id::parse_bound(&a[at + 1], false)?;
        range = Some((min_idle, start, end, count, a.get(at + 3)));
    }
    let (tx, g) = with_group(cx, key, group)?;
    let Some((min_idle, start, end, count, consumer)) = range else {
        // The summary: count, smallest and largest ID, and the count of each consumer.
        if g.pending == 0 {
            return Ok(Reply::Array(vec![
                Reply::Int(0),
                Reply::Nil,
                Reply::Nil,
                Reply::NilArray,
            ]));
        }
        let (mut first, mut last) = (None, None);
        tx.pending(group, None, Id::MIN, Id::MAX, |id, _| {
            first.get_or_insert(id);
            last = Some(id);
            Ok(true)
        })?;
        let prefix = in_group(group);
        let mut owners = Vec::new();
        tx.scan(CONSUMER, &prefix, |m, v| {
            if !m.starts_with(&prefix) {
                return Ok(false);
            }
            let c = Consumer::decode(v).ok_or_else(corrupt)?;
            if c.pending > 0 {
                owners.push(Reply::Array(vec![
                    Reply::bulk(m[prefix.len()..].to_vec()),
                    Reply::bulk(c.pending.to_string()),
                ]));
            }
            Ok(true)
        })?;
        return Ok(Reply::Array(vec![
            Reply::Int(g.pending as i64),
            first.map_or(Reply::Nil, Id::reply),
            last.map_or(Reply::Nil, Id::reply),
            Reply::Array(owners),
        ]));
    };
    if let Some(c) = consumer {
        if tx.consumer(group, c)?.is_none() {
            return Ok(Reply::Array(Vec::new()));
        }
    }
    let now = now_ms();
    let mut out = Vec::new();
    let mut left = count;
    tx.pending(group, consumer.map(|c| &c[..]), start, end, |id, n| {
        if left == 0 {
            return Ok(false);
        }
        let idle = (now - n.delivered_ms as i64).max(0);
        if min_idle > 0 && idle < min_idle {
            return Ok(true);
        }
        left -= 1;
        out.push(Reply::Array(vec![
            id.reply(),
            Reply::bulk(n.consumer),
            Reply::Int(idle),
            Reply::Int(n.deliveries as i64),
        ]));
        Ok(left > 0)
    })?;
    Ok(Reply::Array(out))
}

/// `XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID id]`
pub fn xclaim(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (key, group, name) = (&a[0], &a[1], &a[2]);
    let _g = cx.lock(&[key]);
    let (mut tx, mut g) = with_group(cx, key, group)?;
    let min_idle = super::super::parse_int(&a[3])
        .ok_or_else(|| Reply::err("Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut ids = Vec::new();
    let mut j = 4;
    while j < a.len() {
        match id::parse(&a[j], 0, true) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = now_ms();
    let (mut force, mut justid, mut retry, mut at, mut last_id) =
        (false, false, None, None, Id::MIN);
    let opt_int = |b: &[u8], what: &str| {
        super::super::parse_int(b)
            .ok_or_else(|| Reply::err(format!("Invalid {what} option argument for XCLAIM")))
    };
    while j < a.len() {
        let more = a.len() - 1 - j;
        let o = &a[j];
        if eq(o, "force") {
            force = true;
        } else if eq(o, "justid") {
            justid = true;
        } else if eq(o, "idle") && more > 0 {
            j += 1;
            at = Some(now - opt_int(&a[j], "IDLE")?);
        } else if eq(o, "time") && more > 0 {
            j += 1;
            at = Some(opt_int(&a[j], "TIME")?);
        } else if eq(o, "retrycount") && more > 0 {
            j += 1;
            retry = Some(opt_int(&a[j], "RETRYCOUNT")?);
        } else if eq(o, "lastid") && more > 0 {
            j += 1;
            last_id = id::parse(&a[j], 0, true)?;
        } else {
            return Err(Reply::err(format!(
                "Unrecognized XCLAIM option '{}'",
                text(o)
            )));
        }
        j += 1;
    }
    if last_id > g.last_id {
        g.last_id = last_id;
    }
    let at = match at {
        Some(t) if t >= 0 && t <= now => t as u64,
        _ => now as u64,
    };
    let mut consumer: Option<Consumer> = None;
    let mut out = Vec::new();
    for id in ids {
        let nack = tx.nack(group, id)?;
        let Some(fields) = tx.entry(id)? else {
            // Deleted from the stream: no longer pending either.
            if let Some(n) = nack {
                tx.ack(group, &mut g, id, &n)?;
            }
            continue;
        };
        let nack = match nack {
            Some(n) => n,
            None if force => Nack {
                delivered_ms: 0,
                deliveries: 0,
                consumer: Vec::new(),
            },
            None => continue,
        };
        let forced = nack.consumer.is_empty();
        if !forced && min_idle > 0 && now - (nack.delivered_ms as i64) < min_idle {
            continue;
        }
        let mut c = match consumer.take() {
            Some(c) => c,
            None => tx.touch_consumer(group, &mut g, name)?,
        };
        let deliveries = match retry {
            Some(r) => r.max(0) as u64,
            None if !justid => nack.deliveries + 1,
            None => nack.deliveries,
        };
        let old = (!forced).then_some(&nack);
        tx.assign(group, &mut g, name, &mut c, id, old, at, deliveries)?;
        consumer = Some(c);
        out.push(if justid {
            id.reply()
        } else {
            entry_reply((id, fields))
        });
    }
    if let Some(c) = consumer {
        tx.put_consumer(group, name, &c);
    }
    tx.put_group(group, &g);
    tx.commit()?;
    Ok(Reply::Array(out))
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]`
pub fn xautoclaim(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (key, group, name) = (&a[0], &a[1], &a[2]);
    let min_idle = super::super::parse_int(&a[3])
        .ok_or_else(|| Reply::err("Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = id::parse_bound(&a[4], true)?;
    let (mut count, mut justid) = (100u64, false);
    let mut j = 5;
    while j < a.len() {
        if eq(&a[j], "count") && j + 1 < a.len() {
            // Redis's bound: the attempts (10 per claim) must fit in a long.
            let max = i64::MAX / 16;
            count = super::super::parse_int(&a[j + 1])
                .filter(|&n| (1..=max).contains(&n))
                .ok_or_else(|| Reply::err("COUNT must be > 0"))? as u64;
            j += 2;
        } else if eq(&a[j], "justid") {
            justid = true;
            j += 1;
        } else {
            return Err(syntax());
        }
    }
    crate::cmd::check_reply_size(count)?;
    let _g = cx.lock(&[key]);
    let (mut tx, mut g) = with_group(cx, key, group)?;
    let now = now_ms();
    // The pending entries this call may examine (10 per claim, as Redis), and the one
    // after them: where the next call starts.
    let mut attempts = count.saturating_mul(10);
    let mut seen: Vec<(Id, Nack)> = Vec::new();
    let mut next = None;
    let budget = attempts.min(crate::cmd::MAX_REPLY_ITEMS);
    tx.pending(group, None, start, Id::MAX, |id, n| {
        if seen.len() as u64 == budget {
            next = Some(id);
            return Ok(false);
        }
        seen.push((id, n));
        Ok(true)
    })?;
    let mut consumer: Option<Consumer> = None;
    let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
    let mut left = count;
    let mut cursor = None;
    for (id, nack) in &seen {
        if attempts == 0 || left == 0 {
            cursor = Some(*id);
            break;
        }
        attempts -= 1;
        let Some(fields) = tx.entry(*id)? else {
            tx.ack(group, &mut g, *id, nack)?;
            deleted.push(id.reply());
            left -= 1;
            continue;
        };
        if min_idle > 0 && now - (nack.delivered_ms as i64) < min_idle {
            continue;
        }
        let mut c = match consumer.take() {
            Some(c) => c,
            None => tx.touch_consumer(group, &mut g, name)?,
        };
        let deliveries = nack.deliveries + u64::from(!justid);
        tx.assign(
            group,
            &mut g,
            name,
            &mut c,
            *id,
            Some(nack),
            now as u64,
            deliveries,
        )?;
        consumer = Some(c);
        claimed.push(if justid {
            id.reply()
        } else {
            entry_reply((*id, fields))
        });
        left -= 1;
    }
    // The first pending entry not examined, or 0-0 at the end.
    let cursor = cursor.or(next).unwrap_or(Id::MIN);
    if let Some(c) = consumer {
        tx.put_consumer(group, name, &c);
    }
    tx.put_group(group, &g);
    tx.commit()?;
    Ok(Reply::Array(vec![
        cursor.reply(),
        Reply::Array(claimed),
        Reply::Array(deleted),
    ]))
}
