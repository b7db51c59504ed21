//! How a stream lies on the engine, in the style of the other collections
//! ([`crate::record`]): the metadata record holds the version, the length and the
//! stream's [`State`]; entries, nodes, consumer groups, consumers and pending entries are
//! sub-keys of the stream's version:
//!
//! ```text
//! tag 0 ENTRY        | id (16)                                  -> fields
//! tag 1 NODE         | first id (16)                            -> live u64 | last id (16) | [previous node's first id (16)]
//! tag 2 GROUP        | group                                    -> last id (16) | entries read i64 | pending u64 | consumers u64
//! tag 3 CONSUMER     | group len u32 | group | consumer         -> seen ms u64 | pending u64
//! tag 4 GROUP_PEL    | group len u32 | group | id (16)          -> delivery ms u64 | deliveries u64 | consumer
//! tag 5 CONSUMER_PEL | group len u32 | group | consumer len u32 | consumer | id (16) -> (empty)
//! fields: (len u32 BE | bytes) for each field and value, in order
//! ```
//!
//! So an append writes one entry and the metadata record whatever the stream's length, a
//! large entry is one large value (separated by the engine like any other), and `DEL`
//! is O(1) like every collection's.
//!
//! **Nodes** stand for Redis's listpacks: a run of consecutive entries started when the
//! last one filled up (`stream-node-max-entries` entries, counting deleted ones, or about
//! `stream-node-max-bytes`). They are what `MAXLEN ~`/`MINID ~` trims whole, as Redis
//! trims whole listpacks, so approximate trimming leaves what Redis would leave; and, as
//! the engine only scans forward, they are the steps of a backward walk (`XREVRANGE`):
//! each node record links to the one before it. A node's live-entry count and the ID of
//! the last entry appended to it (deleted or not, as Redis's listpack keeps it) are in its
//! record, but while the last node is open, its count is in [`State`] and its last entry
//! is the stream's last ID: every append changes them.

use super::id::{Id, LEN};
use crate::record::STREAM_STATE;

pub const ENTRY: u8 = 0;
pub const NODE: u8 = 1;
pub const GROUP: u8 = 2;
pub const CONSUMER: u8 = 3;
pub const GROUP_PEL: u8 = 4;
pub const CONSUMER_PEL: u8 = 5;

/// `entries-read` of a group whose count is not known (Redis's `SCG_INVALID_ENTRIES_READ`).
pub const UNKNOWN_READ: i64 = -1;

/// A stream's state beside its version and length (kept in [`crate::record::Meta::value`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// The last ID handed out (`last-generated-id`).
    pub last_id: Id,
    /// `recorded-first-entry-id`: the first entry's ID, 0-0 when empty.
    pub first_id: Id,
    /// `max-deleted-entry-id`.
    pub max_deleted: Id,
    pub entries_added: u64,
    pub groups: u64,
    /// Node records (`radix-tree-keys`).
    pub nodes: u64,
    /// The first ID of the last node (while `nodes > 0`).
    pub last_node: Id,
    /// Entries appended to the last node, deleted ones included; 0: it is closed, the next
    /// append starts a node.
    pub tail_count: u64,
    /// Live entries of the last node while it is open.
    pub tail_live: u64,
    /// Estimated listpack bytes of the last node (Redis's `lpBytes`).
    pub tail_bytes: u64,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn id_at(b: &[u8], at: usize) -> Id {
    Id::from_bytes(&b[at..]).expect("16 bytes")
}

impl State {
    pub fn decode(b: &[u8]) -> Option<State> {
        if b.len() != STREAM_STATE {
            return None;
        }
        Some(State {
            last_id: id_at(b, 0),
            first_id: id_at(b, 16),
            max_deleted: id_at(b, 32),
            last_node: id_at(b, 48),
            entries_added: u64_at(b, 64),
            groups: u64_at(b, 72),
            nodes: u64_at(b, 80),
            tail_count: u64_at(b, 88),
            tail_live: u64_at(b, 96),
            tail_bytes: u64_at(b, 104),
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(STREAM_STATE);
        for id in [
            self.last_id,
            self.first_id,
            self.max_deleted,
            self.last_node,
        ] {
            out.extend_from_slice(&id.bytes());
        }
        for n in [
            self.entries_added,
            self.groups,
            self.nodes,
            self.tail_count,
            self.tail_live,
            self.tail_bytes,
        ] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        out
    }
}

fn push_len(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

/// An entry's value: its fields and values, each length-prefixed.
pub fn encode_fields<T: AsRef<[u8]>>(items: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.iter().map(|i| i.as_ref().len() + 4).sum());
    for i in items {
        push_len(&mut out, i.as_ref());
    }
    out
}

/// The fields and values of an entry's value, or `None` if it is not one (an even
/// number of length-prefixed strings).
pub fn decode_fields(mut b: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let len = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
        out.push(b.get(4..4 + len)?);
        b = &b[4 + len..];
    }
    out.len().is_multiple_of(2).then_some(out)
}

/// Redis's listpack bytes for an entry of `items`, as `stream-node-max-bytes` counts them:
/// each string with its two bytes of header and back-length, and the entry's flags, ID
/// deltas and count. An estimate: Redis's listpack encodes small integers shorter and
/// leaves out fields equal to the node's first entry's.
pub fn entry_bytes<T: AsRef<[u8]>>(items: &[T]) -> u64 {
    items
        .iter()
        .map(|i| i.as_ref().len() as u64 + 2)
        .sum::<u64>()
        + 8
}

/// A node record's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    pub live: u64,
    /// The last entry appended to the node (once it is closed).
    pub last: Id,
    pub prev: Option<Id>,
}

impl Node {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.live.to_be_bytes().to_vec();
        out.extend_from_slice(&self.last.bytes());
        if let Some(p) = self.prev {
            out.extend_from_slice(&p.bytes());
        }
        out
    }

    pub fn decode(b: &[u8]) -> Option<Node> {
        let prev = match b.len() {
            24 => None,
            40 => Some(id_at(b, 24)),
            _ => return None,
        };
        Some(Node {
            live: u64_at(b, 0),
            last: id_at(b, 8),
            prev,
        })
    }
}

/// A consumer group's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    pub last_id: Id,
    pub entries_read: i64,
    pub pending: u64,
    pub consumers: u64,
}

pub const GROUP_LEN: usize = 40;

impl Group {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.last_id.bytes().to_vec();
        out.extend_from_slice(&self.entries_read.to_be_bytes());
        out.extend_from_slice(&self.pending.to_be_bytes());
        out.extend_from_slice(&self.consumers.to_be_bytes());
        out
    }

    pub fn decode(b: &[u8]) -> Option<Group> {
        (b.len() == GROUP_LEN).then(|| Group {
            last_id: id_at(b, 0),
            entries_read: u64_at(b, 16) as i64,
            pending: u64_at(b, 24),
            consumers: u64_at(b, 32),
        })
    }
}

/// A consumer's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Consumer {
    pub seen_ms: u64,
    pub pending: u64,
}

pub const CONSUMER_LEN: usize = 16;

impl Consumer {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.seen_ms.to_be_bytes().to_vec();
        out.extend_from_slice(&self.pending.to_be_bytes());
        out
    }

    pub fn decode(b: &[u8]) -> Option<Consumer> {
        (b.len() == CONSUMER_LEN).then(|| Consumer {
            seen_ms: u64_at(b, 0),
            pending: u64_at(b, 8),
        })
    }
}

/// A pending entry of a group (Redis's NACK): when it was last delivered, how often, and
/// to whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    pub delivered_ms: u64,
    pub deliveries: u64,
    pub consumer: Vec<u8>,
}

impl Nack {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.delivered_ms.to_be_bytes().to_vec();
        out.extend_from_slice(&self.deliveries.to_be_bytes());
        out.extend_from_slice(&self.consumer);
        out
    }

    pub fn decode(b: &[u8]) -> Option<Nack> {
        (b.len() >= 16).then(|| Nack {
            delivered_ms: u64_at(b, 0),
            deliveries: u64_at(b, 8),
            consumer: b[16..].to_vec(),
        })
    }
}

/// The members (after the tag) of a group's sub-records start with the group's name,
/// length-prefixed so that the records of `ab` and `a` never interleave.
pub fn in_group(group: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(group.len() + 4 + LEN);
    push_len(&mut out, group);
    out
}

pub fn consumer_member(group: &[u8], consumer: &[u8]) -> Vec<u8> {
    let mut out = in_group(group);
    out.extend_from_slice(consumer);
    out
}

pub fn group_pel_member(group: &[u8], id: Id) -> Vec<u8> {
    let mut out = in_group(group);
    out.extend_from_slice(&id.bytes());
    out
}

/// The prefix of a consumer's pending-entry index.
pub fn consumer_pel_prefix(group: &[u8], consumer: &[u8]) -> Vec<u8> {
    let mut out = in_group(group);
    push_len(&mut out, consumer);
    out
}

pub fn consumer_pel_member(group: &[u8], consumer: &[u8], id: Id) -> Vec<u8> {
    let mut out = consumer_pel_prefix(group, consumer);
    out.extend_from_slice(&id.bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let s = State {
            last_id: Id::new(9, 1),
            first_id: Id::new(1, 0),
            max_deleted: Id::new(3, 0),
            entries_added: 7,
            groups: 2,
            nodes: 3,
            last_node: Id::new(8, 0),
            tail_count: 4,
            tail_live: 3,
            tail_bytes: 120,
        };
        assert_eq!(State::decode(&s.encode()), Some(s));
        let f = encode_fields(&[&b"a"[..], b"bc"]);
        assert_eq!(decode_fields(&f), Some(vec![&b"a"[..], b"bc"]));
        assert_eq!(decode_fields(&f[..f.len() - 1]), None);
        assert_eq!(decode_fields(&encode_fields(&[&b"a"[..]])), None);
        let n = Node {
            live: 5,
            last: Id::new(3, 0),
            prev: Some(Id::new(1, 2)),
        };
        assert_eq!(Node::decode(&n.encode()), Some(n));
        let g = Group {
            last_id: Id::new(4, 4),
            entries_read: UNKNOWN_READ,
            pending: 1,
            consumers: 2,
        };
        assert_eq!(Group::decode(&g.encode()), Some(g));
        let k = Nack {
            delivered_ms: 5,
            deliveries: 2,
            consumer: b"alice".to_vec(),
        };
        assert_eq!(Nack::decode(&k.encode()), Some(k));
        // The records of group `ab` and of group `a` do not interleave.
        assert!(consumer_member(b"a", b"zz") < consumer_member(b"ab", b""));
    }
}
