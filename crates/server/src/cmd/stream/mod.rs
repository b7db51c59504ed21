//! Streams (Redis 7.0's): entries, trimming, consumer groups and blocking reads, laid out
//! as [`layout`] says. Every command reads and writes the stream through a [`Tx`], which
//! sees its own writes and applies them as one engine batch with the metadata record.
//!
//! What a command costs (n: the stream's length; reads are engine point reads or one
//! forward scan):
//! - `XADD`: the metadata record, then one entry written (and one node record every
//!   `stream-node-max-entries` appends); with trimming, the first node's record and the
//!   entries it deletes.
//! - `XRANGE`: one scan of the range. `XREVRANGE` walks the nodes back from the end,
//!   scanning each (at most a node's entries more than the reply); from an end other than
//!   the last node, it first scans the node records up to it (n / node size records).
//! - `XDEL`: a point read per ID, and the node records up to the entry's node unless it
//!   is in the last one.
//! - `XREADGROUP`, `XACK`, `XCLAIM`: point reads and writes per entry.
//!   `XPENDING`'s summary scans the group's pending entries (the engine has no backward
//!   seek for the last one).
//! - `DEL`, expiry and overwrites: O(1), as for every collection.
//!
//! Where they run: `XADD` (unless it trims exactly, which may delete any number of
//! entries), `XACK`, and `XREAD`/`XREADGROUP` of one stream with a `COUNT` of at most 128
//! and no `BLOCK` run on the connection's task ([`crate::inline`]), and a pipeline's run
//! of them on one stream is one engine write ([`crate::combine`]; [`Tx`] reads through
//! the run's writes). A command that leaves the stream's length and state as they were
//! (`XACK`) does not rewrite its metadata record.

pub mod entries;
pub mod groups;
pub mod id;
pub mod info;
pub mod layout;
#[cfg(test)]
mod model;
pub mod read;

use super::table::c;
use super::{Ctx, MAX_REPLY_ITEMS};
use crate::protocol::Reply;
use crate::record::{self, Kind, Meta};
use crate::store::Batch;
use bytes::Bytes;
use id::Id;
use layout::{Node, State, ENTRY, NODE};
use std::collections::BTreeMap;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("xadd", -5, [WRITE DENYOOM FAST CHEAP COMBINABLE WAKES], 1, 1, 1, Stream, entries::xadd, point_if = entries::bounded_trim),
    c!("xrange", -4, [READONLY], 1, 1, 1, Stream, entries::xrange),
    c!("xrevrange", -4, [READONLY], 1, 1, 1, Stream, entries::xrevrange),
    c!("xlen", 2, [READONLY FAST CHEAP], 1, 1, 1, Stream, entries::xlen),
    c!("xdel", -3, [WRITE FAST], 1, 1, 1, Stream, entries::xdel),
    c!("xtrim", -4, [WRITE], 1, 1, 1, Stream, entries::xtrim),
    c!("xsetid", -3, [WRITE DENYOOM FAST], 1, 1, 1, Stream, entries::xsetid),
    c!("xread", -4, [READONLY BLOCKING MOVABLEKEYS CHEAP COMBINABLE], 0, 0, 0, Stream, read::xread, find_keys = read::stream_keys, point_if = read::short_read),
    c!("xreadgroup", -7, [WRITE BLOCKING MOVABLEKEYS CHEAP COMBINABLE], 0, 0, 0, Stream, read::xreadgroup, find_keys = read::stream_keys, point_if = read::short_read),
    c!("xgroup", -2, [WRITE SUBCOMMANDS], 2, 2, 1, Stream, groups::xgroup),
    c!("xack", -4, [WRITE FAST CHEAP COMBINABLE], 1, 1, 1, Stream, groups::xack),
    c!("xpending", -3, [READONLY], 1, 1, 1, Stream, groups::xpending),
    c!("xclaim", -6, [WRITE FAST], 1, 1, 1, Stream, groups::xclaim),
    c!("xautoclaim", -6, [WRITE FAST], 1, 1, 1, Stream, groups::xautoclaim),
    c!("xinfo", -2, [READONLY SUBCOMMANDS], 2, 2, 1, Stream, info::xinfo),
];

/// A stream as a command sees it: its metadata and state, and the writes the command has
/// made so far, which its reads see.
pub struct Tx<'a, 'c> {
    pub cx: &'a Ctx<'c>,
    key: &'a [u8],
    pub m: Meta,
    pub st: State,
    /// Sub-key -> new value (`None`: deleted).
    over: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The length and state as read (`None`: a new stream): a command that changes neither
    /// (`XACK`, a read by a group) leaves the metadata record as it is.
    read: Option<(u64, State)>,
}

fn corrupt() -> Reply {
    Reply::err("stored stream state is not in the server's format")
}

impl<'a, 'c> Tx<'a, 'c> {
    /// The stream `key` (`None`: no such key; an error if it is of another type).
    pub fn open(cx: &'a Ctx<'c>, key: &'a [u8]) -> Result<Option<Tx<'a, 'c>>, Reply> {
        let Some(m) = cx.typed(key, Kind::Stream)? else {
            return Ok(None);
        };
        Ok(Some(Tx::of(cx, key, m)?))
    }

    pub fn of(cx: &'a Ctx<'c>, key: &'a [u8], m: Meta) -> Result<Tx<'a, 'c>, Reply> {
        let st = State::decode(&m.value).ok_or_else(corrupt)?;
        Ok(Tx {
            cx,
            key,
            read: Some((m.size, st.clone())),
            m,
            st,
            over: BTreeMap::new(),
        })
    }

    /// A new, empty stream `key`.
    pub fn create(cx: &'a Ctx<'c>, key: &'a [u8]) -> Tx<'a, 'c> {
        Tx {
            cx,
            key,
            m: cx.new_collection(Kind::Stream),
            st: State::default(),
            over: BTreeMap::new(),
            read: None,
        }
    }

    fn prefix(&self, tag: u8) -> Vec<u8> {
        record::sub_prefix(self.cx.db(), self.key, self.m.version, tag)
    }

    fn sub(&self, tag: u8, member: &[u8]) -> Vec<u8> {
        record::sub_key(self.cx.db(), self.key, self.m.version, tag, member)
    }

    pub fn get(&self, tag: u8, member: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
        let k = self.sub(tag, member);
        if let Some(v) = self.over.get(&k) {
            return Ok(v.clone());
        }
        if let Some(p) = self.cx.combining(self.key) {
            return Ok(p.get(&self.cx.sh.store, &k)?);
        }
        Ok(self.cx.sh.store.get_raw(&k)?)
    }

    pub fn exists(&self, tag: u8, member: &[u8]) -> Result<bool, Reply> {
        let k = self.sub(tag, member);
        if let Some(v) = self.over.get(&k) {
            return Ok(v.is_some());
        }
        if let Some(p) = self.cx.combining(self.key) {
            return Ok(p.contains(&self.cx.sh.store, &k)?);
        }
        Ok(self.cx.sh.store.contains(&k)?)
    }

    pub fn put(&mut self, tag: u8, member: &[u8], v: Vec<u8>) {
        self.over.insert(self.sub(tag, member), Some(v));
    }

    pub fn del(&mut self, tag: u8, member: &[u8]) {
        self.over.insert(self.sub(tag, member), None);
    }

    /// The records with `tag` whose members are at least `from`, in order, while `f`
    /// says so: the engine's merged with the writes of the run this command is in
    /// ([`crate::combine`]) and with this command's own.
    pub fn scan(
        &self,
        tag: u8,
        from: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, Reply>,
    ) -> Result<(), Reply> {
        let prefix = self.prefix(tag);
        let n = prefix.len();
        let start = [&prefix[..], from].concat();
        let mine = self
            .over
            .range(start.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix));
        let mut run = match self.cx.combining(self.key) {
            Some(p) => p.range(&start, &prefix),
            None => BTreeMap::new(),
        };
        let over: Vec<(&Vec<u8>, &Option<Vec<u8>>)> = if run.is_empty() {
            mine.collect()
        } else {
            run.extend(mine.map(|(k, v)| (k.clone(), v.clone())));
            run.iter().collect()
        };
        let (mut oi, mut go, mut failed) = (0, true, None);
        let mut emit = |m: &[u8], v: &[u8], go: &mut bool| match f(m, v) {
            Ok(true) => true,
            Ok(false) => {
                *go = false;
                false
            }
            Err(e) => {
                failed = Some(e);
                *go = false;
                false
            }
        };
        self.cx.sh.store.sub_range(&prefix, Some(from), |m, v| {
            while oi < over.len() && over[oi].0[n..] < *m {
                if let Some(ov) = over[oi].1 {
                    if !emit(&over[oi].0[n..], ov, &mut go) {
                        return false;
                    }
                }
                oi += 1;
            }
            if oi < over.len() && over[oi].0[n..] == *m {
                let ov = over[oi].1;
                oi += 1;
                return match ov {
                    Some(ov) => emit(m, ov, &mut go),
                    None => true,
                };
            }
            emit(m, &v, &mut go)
        })?;
        while go && oi < over.len() {
            if let Some(ov) = over[oi].1 {
                if !emit(&over[oi].0[n..], ov, &mut go) {
                    break;
                }
            }
            oi += 1;
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The command's writes and the metadata record, as one batch. The record is written
    /// only if the length or the state changed; otherwise the key is only marked as
    /// written (for `WATCH` and blocked readers), as a hash's field update does.
    pub fn batch(mut self) -> Batch {
        let mut b = Batch::new();
        for (k, v) in std::mem::take(&mut self.over) {
            match v {
                Some(v) => b.put(&k, &v),
                None => b.delete(&k),
            }
        }
        match &self.read {
            Some((size, st)) if *size == self.m.size && *st == self.st => {
                b.touch_meta(self.cx.db(), self.key)
            }
            _ => {
                self.m.value = self.st.encode();
                b.put_meta(self.cx.db(), self.key, &self.m);
            }
        }
        b
    }

    /// Applies [`Tx::batch`].
    pub fn commit(self) -> Result<(), Reply> {
        let cx = self.cx;
        cx.write(self.batch())
    }

    /// Notes the stream's keyspace event `name` (published once the command's writes are
    /// applied).
    pub fn notify(&self, name: &'static str) {
        self.cx.notify(crate::notify::Class::STREAM, name, self.key);
    }

    // --- entries ---

    /// The fields of entry `id`, if it exists.
    pub fn entry(&self, id: Id) -> Result<Option<Vec<Bytes>>, Reply> {
        self.get(ENTRY, &id.bytes())?
            .map(|v| fields_of(&v))
            .transpose()
    }

    /// Entries from `start` to `end` (inclusive) in order, at most `count` (0: all), to
    /// `f`, while it says so.
    pub fn range(
        &self,
        start: Id,
        end: Id,
        mut f: impl FnMut(Id, &[u8]) -> Result<bool, Reply>,
    ) -> Result<(), Reply> {
        // Nothing lives before the first entry: seeking there skips the deleted entries
        // a trim left before it (each a tombstone until compaction).
        let start = if self.m.size > 0 {
            start.max(self.st.first_id)
        } else {
            start
        };
        if start > end {
            return Ok(());
        }
        self.scan(ENTRY, &start.bytes(), |m, v| {
            let id = Id::from_bytes(m).ok_or_else(corrupt)?;
            if id > end {
                return Ok(false);
            }
            f(id, v)
        })
    }

    /// Up to `count` entries (0: no limit but [`MAX_REPLY_ITEMS`]) from `start` to `end`,
    /// in order or from the end down (`rev`).
    pub fn read_range(
        &self,
        start: Id,
        end: Id,
        count: u64,
        rev: bool,
    ) -> Result<Vec<Entry>, Reply> {
        let mut out = Vec::new();
        let mut take = |id: Id, v: &[u8]| -> Result<bool, Reply> {
            if count == 0 && out.len() as u64 >= MAX_REPLY_ITEMS {
                return Err(super::check_reply_size(MAX_REPLY_ITEMS + 1).unwrap_err());
            }
            out.push((id, fields_of(v)?));
            Ok(count == 0 || (out.len() as u64) < count)
        };
        if rev {
            self.range_back(start, end, &mut take)?;
        } else {
            self.range(start, end, &mut take)?;
        }
        Ok(out)
    }

    /// Entries from `end` down to `start`, node by node from the node holding `end`.
    fn range_back(
        &self,
        start: Id,
        end: Id,
        f: &mut impl FnMut(Id, &[u8]) -> Result<bool, Reply>,
    ) -> Result<(), Reply> {
        if start > end {
            return Ok(());
        }
        let Some(mut node) = self.node_of(end)? else {
            return Ok(());
        };
        let mut upper = end;
        loop {
            let mut window: Vec<(Id, Vec<u8>)> = Vec::new();
            self.range(node.max(start), upper, |id, v| {
                window.push((id, v.to_vec()));
                Ok(true)
            })?;
            for (id, v) in window.into_iter().rev() {
                if !f(id, &v)? {
                    return Ok(());
                }
            }
            if node <= start {
                return Ok(());
            }
            let Some(prev) = self.node(node)?.and_then(|n| n.prev) else {
                return Ok(());
            };
            // A node trimmed away: nothing lies before it.
            if !self.exists(NODE, &prev.bytes())? {
                return Ok(());
            }
            upper = match node.prev() {
                Some(u) => u,
                None => return Ok(()),
            };
            node = prev;
        }
    }

    /// The first live entry's ID.
    pub fn first_entry(&self) -> Result<Option<Id>, Reply> {
        let mut first = None;
        self.range(Id::MIN, Id::MAX, |id, _| {
            first = Some(id);
            Ok(false)
        })?;
        Ok(first)
    }

    /// The last live entry's ID (Redis's `streamLastValidID`).
    pub fn last_entry(&self) -> Result<Option<Id>, Reply> {
        if self.m.size == 0 {
            return Ok(None);
        }
        if self.exists(ENTRY, &self.st.last_id.bytes())? {
            return Ok(Some(self.st.last_id));
        }
        let mut last = None;
        self.range_back(Id::MIN, Id::MAX, &mut |id, _| {
            last = Some(id);
            Ok(false)
        })?;
        Ok(last)
    }

    // --- nodes ---

    pub fn node(&self, first: Id) -> Result<Option<Node>, Reply> {
        self.get(NODE, &first.bytes())?
            .map(|v| Node::decode(&v).ok_or_else(corrupt))
            .transpose()
    }

    /// Whether `first` is the open last node (its live count is in the state).
    pub fn is_open(&self, first: Id) -> bool {
        self.st.nodes > 0 && self.st.tail_count > 0 && first == self.st.last_node
    }

    pub fn node_live(&self, first: Id) -> Result<u64, Reply> {
        if self.is_open(first) {
            return Ok(self.st.tail_live);
        }
        Ok(self.node(first)?.map_or(0, |n| n.live))
    }

    /// The last entry appended to the node `first`, deleted or not.
    pub fn node_last(&self, first: Id) -> Result<Id, Reply> {
        if self.is_open(first) {
            return Ok(self.st.last_id);
        }
        Ok(self.node(first)?.map_or(first, |n| n.last))
    }

    pub fn set_node_live(&mut self, first: Id, live: u64) -> Result<(), Reply> {
        if self.is_open(first) {
            self.st.tail_live = live;
            return Ok(());
        }
        if let Some(mut n) = self.node(first)? {
            n.live = live;
            self.put(NODE, &first.bytes(), n.encode());
        }
        Ok(())
    }

    /// Closes the open last node: its count and last entry go to its record, and the next
    /// append starts a node.
    pub fn close_last_node(&mut self) -> Result<(), Reply> {
        if !self.is_open(self.st.last_node) {
            return Ok(());
        }
        let first = self.st.last_node;
        let live = self.st.tail_live;
        if let Some(mut n) = self.node(first)? {
            n.live = live;
            n.last = self.st.last_id;
            self.put(NODE, &first.bytes(), n.encode());
        }
        self.st.tail_count = 0;
        self.st.tail_live = 0;
        Ok(())
    }

    /// The first ID of the node holding `id` (the last node starting at or before it).
    /// Found from the first node after `id` and its link back, not by a walk from the first
    /// node: the nodes a trim removed stay as tombstones until compaction, and a walk
    /// from the start would pass every one of them.
    pub fn node_of(&self, id: Id) -> Result<Option<Id>, Reply> {
        if self.st.nodes == 0 {
            return Ok(None);
        }
        if id >= self.st.last_node {
            return Ok(Some(self.st.last_node));
        }
        let mut after = None;
        self.scan(NODE, &id.bytes(), |m, _| {
            after = Some(Id::from_bytes(m).ok_or_else(corrupt)?);
            Ok(false)
        })?;
        let Some(after) = after else {
            return Ok(Some(self.st.last_node));
        };
        if after == id {
            return Ok(Some(id));
        }
        match self.node(after)?.and_then(|n| n.prev) {
            // A node trimmed away: nothing lies before `after`.
            Some(prev) if self.exists(NODE, &prev.bytes())? => Ok(Some(prev)),
            _ => Ok(None),
        }
    }

    /// Removes node `first`, left with no live entry, as Redis frees an emptied listpack,
    /// linking the node after it to the one before: so every node holds an entry, and the
    /// first node is the one holding the first entry.
    pub fn free_node(&mut self, first: Id) -> Result<(), Reply> {
        let Some(node) = self.node(first)? else {
            return Ok(());
        };
        let prev = match node.prev {
            Some(p) if self.exists(NODE, &p.bytes())? => Some(p),
            _ => None,
        };
        if first == self.st.last_node {
            self.st.tail_count = 0;
            self.st.tail_live = 0;
            self.st.last_node = prev.unwrap_or(Id::MIN);
        } else if let Some(&next) = self.nodes_after(Some(first), 1)?.first() {
            if let Some(mut n) = self.node(next)? {
                n.prev = prev;
                self.put(NODE, &next.bytes(), n.encode());
            }
        }
        self.del(NODE, &first.bytes());
        self.st.nodes = self.st.nodes.saturating_sub(1);
        Ok(())
    }

    /// Up to `n` node first IDs after `after` (from the first if `None`).
    pub fn nodes_after(&self, after: Option<Id>, n: usize) -> Result<Vec<Id>, Reply> {
        let from = match after {
            None => Vec::new(),
            Some(a) => match a.next() {
                Some(x) => x.bytes().to_vec(),
                None => return Ok(Vec::new()),
            },
        };
        let mut out = Vec::new();
        self.scan(NODE, &from, |m, _| {
            out.push(Id::from_bytes(m).ok_or_else(corrupt)?);
            Ok(out.len() < n)
        })?;
        Ok(out)
    }
}

/// An entry: its ID and its fields and values.
pub type Entry = (Id, Vec<Bytes>);

fn fields_of(v: &[u8]) -> Result<Vec<Bytes>, Reply> {
    Ok(layout::decode_fields(v)
        .ok_or_else(corrupt)?
        .into_iter()
        .map(Bytes::copy_from_slice)
        .collect())
}

/// An entry as Redis replies it: `[id, [field, value, ...]]`.
pub fn entry_reply((id, fields): Entry) -> Reply {
    Reply::Array(vec![
        id.reply(),
        Reply::Array(fields.into_iter().map(Reply::Bulk).collect()),
    ])
}

pub fn entries_reply(entries: Vec<Entry>) -> Reply {
    Reply::Array(entries.into_iter().map(entry_reply).collect())
}

/// `stream-node-max-entries` (0: no limit by count).
pub fn node_max_entries(cx: &Ctx) -> u64 {
    cx.sh.settings.compat_num("stream-node-max-entries").max(0) as u64
}

/// Largest listpack Redis builds (`STREAM_LISTPACK_MAX_SIZE`).
const LISTPACK_MAX: u64 = 1 << 30;

/// `stream-node-max-bytes` (0, or beyond a listpack's limit: the limit).
pub fn node_max_bytes(cx: &Ctx) -> u64 {
    match cx.sh.settings.compat_num("stream-node-max-bytes") {
        n if n <= 0 || n as u64 > LISTPACK_MAX => LISTPACK_MAX,
        n => n as u64,
    }
}

/// `NOGROUP` for a missing key or group.
pub fn no_group(key: &[u8], group: &[u8], tail: &str) -> Reply {
    Reply::Error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'{tail}",
        super::text(key),
        super::text(group)
    ))
}

/// A count option's value (`COUNT`): negative is 0, as in Redis.
pub fn count_arg(b: &[u8]) -> Result<u64, Reply> {
    Ok(super::int(b)?.max(0) as u64)
}
