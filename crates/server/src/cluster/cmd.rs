//! The cluster commands: Redis's `CLUSTER` subcommands that clients read (INFO, NODES,
//! SLOTS, SHARDS, MYID, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT) in Redis 7.0's formats,
//! `READONLY`/`READWRITE`/`ASKING`, and Kvrocks' `CLUSTERX` through which a controller
//! sets this node's id and pushes the topology.
//!
//! Keys by slot: the key layout ([`crate::record`]) has no slot in the metadata key, so
//! `COUNTKEYSINSLOT` and `GETKEYSINSLOT` walk the database's metadata records and hash
//! each key: O(keys on the node) per call, one record held at a time. Kvrocks puts the
//! slot in the key prefix to make these a range read; that would change the layout every
//! other command and the non-cluster databases depend on, for two commands that only
//! resharding tools call. Without slot migration (not implemented) nothing here needs
//! them to be fast.

use super::slot::{key_slot, parse_slot, SLOTS};
use super::state::{Cluster, State};
use super::topology::{fmt_range, valid_id, Node, Topology, ID_LEN};
use crate::cmd::{check_reply_size, eq, int, text, wrong_args, CmdResult, Ctx};
use crate::commands::{over_output_limit, REPLY_OVERHEAD};
use crate::protocol::Reply;
use bytes::Bytes;
use std::fmt::Write;

fn disabled() -> Reply {
    Reply::err("This instance has cluster support disabled")
}

fn cluster_of<'a>(cx: &Ctx<'a>) -> Result<&'a Cluster, Reply> {
    cx.sh.cluster.as_ref().ok_or_else(disabled)
}

fn unknown_sub(cmd: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "unknown subcommand '{}'. Try {cmd} HELP.",
        text(&sub[..sub.len().min(64)])
    ))
}

const HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "COUNTKEYSINSLOT <slot>",
    "GETKEYSINSLOT <slot> <count>",
    "INFO",
    "KEYSLOT <key>",
    "MYID",
    "NODES",
    "SHARDS",
    "SLOTS",
    "The topology is set with CLUSTERX SETNODEID, SETNODES and SETSLOT (Kvrocks').",
];

/// `CLUSTER <subcommand> ...`.
pub fn cluster(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let c = cluster_of(cx)?;
    let sub = text(&a[0][..a[0].len().min(32)]).to_ascii_lowercase();
    let arity = |n: usize| {
        if a.len() == n {
            Ok(())
        } else {
            Err(wrong_args(&format!("cluster|{sub}")))
        }
    };
    match sub.as_str() {
        "help" => Ok(Reply::Array(
            HELP.iter().copied().map(Reply::Simple).collect(),
        )),
        "info" => arity(1).map(|_| Reply::Text(info(&c.read()))),
        "nodes" => arity(1).map(|_| Reply::Text(nodes(&c.read(), cx.sh.tcp_port))),
        "slots" => arity(1).map(|_| slots(&c.read())),
        "shards" => arity(1).map(|_| shards(&c.read())),
        "myid" => arity(1).map(|_| Reply::bulk(c.read().myid.clone())),
        "keyslot" => arity(2).map(|_| Reply::Int(key_slot(&a[1]) as i64)),
        "countkeysinslot" => {
            arity(2)?;
            let slot = int(&a[1])?;
            if !(0..SLOTS as i64).contains(&slot) {
                return Err(Reply::err("Invalid slot"));
            }
            let mut n = 0;
            keys_in_slot(cx, slot as u16, |_| {
                n += 1;
                Ok(true)
            })?;
            Ok(Reply::Int(n))
        }
        "getkeysinslot" => {
            arity(3)?;
            let (slot, count) = (int(&a[1])?, int(&a[2])?);
            if !(0..SLOTS as i64).contains(&slot) || count < 0 {
                return Err(Reply::err("Invalid slot or number of keys"));
            }
            check_reply_size(count as u64)?;
            let budget = cx.s.output_budget;
            let (mut out, mut size) = (Vec::new(), 0usize);
            if count > 0 {
                keys_in_slot(cx, slot as u16, |k| {
                    size = size.saturating_add(REPLY_OVERHEAD + k.len());
                    if size > budget {
                        return Err(over_output_limit("CLUSTER GETKEYSINSLOT", cx.sh));
                    }
                    out.push(Reply::bulk(k));
                    Ok(out.len() < count as usize)
                })?;
            }
            Ok(Reply::Array(out))
        }
        _ => Err(unknown_sub("CLUSTER", &a[0])),
    }
}

/// Calls `f` with each live key of database 0 in `slot` until it returns `false` (see
/// the module's doc for what this walk costs).
fn keys_in_slot(
    cx: &Ctx,
    slot: u16,
    mut f: impl FnMut(Vec<u8>) -> Result<bool, Reply>,
) -> Result<(), Reply> {
    for kv in cx.sh.store.live_keys(0)? {
        let (k, _) = kv?;
        if key_slot(&k) == slot && !f(k)? {
            break;
        }
    }
    Ok(())
}

/// `CLUSTER INFO`. The state is `ok` when every slot has an owner (what Redis's default
/// `cluster-require-full-coverage yes` calls ok); epochs are the controller's version.
fn info(st: &State) -> String {
    let (assigned, known, size) = match &st.topology {
        Some(t) => (
            t.assigned(),
            t.nodes.len(),
            t.nodes
                .iter()
                .filter(|n| n.master.is_none() && !t.ranges(&n.id).is_empty())
                .count(),
        ),
        None => (0, 1, 0),
    };
    let state = if assigned == SLOTS as usize {
        "ok"
    } else {
        "fail"
    };
    let epoch = st.version.max(0);
    let mut s = String::new();
    for (k, v) in [
        ("cluster_state", state.to_string()),
        ("cluster_slots_assigned", assigned.to_string()),
        ("cluster_slots_ok", assigned.to_string()),
        ("cluster_slots_pfail", "0".into()),
        ("cluster_slots_fail", "0".into()),
        ("cluster_known_nodes", known.to_string()),
        ("cluster_size", size.to_string()),
        ("cluster_current_epoch", epoch.to_string()),
        ("cluster_my_epoch", epoch.to_string()),
        ("cluster_stats_messages_sent", "0".into()),
        ("cluster_stats_messages_received", "0".into()),
        ("total_cluster_links_buffer_limit_exceeded", "0".into()),
    ] {
        let _ = write!(s, "{k}:{v}\r\n");
    }
    s
}

/// Redis's bus port convention (`port + 10000`), printed after `@` in CLUSTER NODES; no
/// bus listens there (the topology comes from the controller).
fn bus_port(port: u16) -> u32 {
    port as u32 + 10000
}

/// `CLUSTER NODES`: one line per node, `<id> <ip:port@cport> <flags> <master> <ping-sent>
/// <pong-recv> <config-epoch> <link-state> <slot ranges...>`. Before a topology, only
/// this node on its own port, as Redis shows a node that has met no other.
fn nodes(st: &State, port: u16) -> String {
    let mut s = String::new();
    let Some(t) = &st.topology else {
        let _ = writeln!(
            s,
            "{} :{port}@{} myself,master - 0 0 0 connected",
            st.myid,
            bus_port(port)
        );
        return s;
    };
    let epoch = st.version.max(0);
    for n in &t.nodes {
        let me = if n.id == st.myid { "myself," } else { "" };
        let role = if n.master.is_some() {
            "slave"
        } else {
            "master"
        };
        let _ = write!(
            s,
            "{} {}@{} {me}{role} {} 0 0 {epoch} connected",
            n.id,
            n.addr(),
            bus_port(n.port),
            n.master.as_deref().unwrap_or("-"),
        );
        for r in t.ranges(&n.id) {
            let _ = write!(s, " {}", fmt_range(r));
        }
        s.push('\n');
    }
    s
}

/// A node as CLUSTER SLOTS lists it: ip, port, id, and a map of further endpoints (none).
fn slot_node(n: &Node) -> Reply {
    Reply::Array(vec![
        Reply::bulk(n.ip.to_string()),
        Reply::Int(n.port as i64),
        Reply::bulk(n.id.clone()),
        Reply::Map(Vec::new()),
    ])
}

/// Masters with their ranges, in order of their first slot.
fn masters(t: &Topology) -> Vec<(&Node, Vec<(u16, u16)>)> {
    let mut m: Vec<_> = t
        .nodes
        .iter()
        .filter(|n| n.master.is_none())
        .map(|n| (n, t.ranges(&n.id)))
        .collect();
    m.sort_by_key(|(_, r)| r.first().map_or(u32::MAX, |&(a, _)| a as u32));
    m
}

/// `CLUSTER SLOTS`: `[start, end, master, replicas...]` per contiguous range.
fn slots(st: &State) -> Reply {
    let Some(t) = &st.topology else {
        return Reply::Array(Vec::new());
    };
    let mut out = Vec::new();
    for (m, ranges) in masters(t) {
        for (a, b) in ranges {
            let mut e = vec![Reply::Int(a as i64), Reply::Int(b as i64), slot_node(m)];
            e.extend(t.replicas_of(&m.id).map(slot_node));
            out.push(Reply::Array(e));
        }
    }
    out.sort_by_key(|e| match e {
        Reply::Array(v) => match v[0] {
            Reply::Int(a) => a,
            _ => 0,
        },
        _ => 0,
    });
    Reply::Array(out)
}

/// `CLUSTER SHARDS`: per master, its slots (start and end numbers, flat) and its nodes.
fn shards(st: &State) -> Reply {
    let Some(t) = &st.topology else {
        return Reply::Array(Vec::new());
    };
    let node = |n: &Node| {
        let role = if n.master.is_some() {
            "replica"
        } else {
            "master"
        };
        Reply::Map(vec![
            (Reply::bulk("id"), Reply::bulk(n.id.clone())),
            (Reply::bulk("port"), Reply::Int(n.port as i64)),
            (Reply::bulk("ip"), Reply::bulk(n.ip.to_string())),
            (Reply::bulk("endpoint"), Reply::bulk(n.ip.to_string())),
            (Reply::bulk("role"), Reply::bulk(role)),
            (Reply::bulk("replication-offset"), Reply::Int(0)),
            (Reply::bulk("health"), Reply::bulk("online")),
        ])
    };
    let out = masters(t)
        .into_iter()
        .map(|(m, ranges)| {
            let slots = ranges
                .iter()
                .flat_map(|&(a, b)| [Reply::Int(a as i64), Reply::Int(b as i64)])
                .collect();
            let mut ns = vec![node(m)];
            ns.extend(t.replicas_of(&m.id).map(node));
            Reply::Map(vec![
                (Reply::bulk("slots"), Reply::Array(slots)),
                (Reply::bulk("nodes"), Reply::Array(ns)),
            ])
        })
        .collect();
    Reply::Array(out)
}

/// `READONLY`: reads of the slots of this node's master are answered here.
pub fn readonly(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    cluster_of(cx)?;
    cx.s.ext.cluster_readonly = true;
    Ok(Reply::ok())
}

pub fn readwrite(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    cluster_of(cx)?;
    cx.s.ext.cluster_readonly = false;
    Ok(Reply::ok())
}

/// `ASKING`: accepted for clients that send it after an `-ASK`; this server never sends
/// one (no slot migration), so it changes nothing.
pub fn asking(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    cluster_of(cx)?;
    Ok(Reply::ok())
}

fn invalid_version() -> Reply {
    Reply::err("Invalid cluster version")
}

/// A version as the controller sends it: a non-negative integer.
fn version(b: &[u8]) -> Result<i64, Reply> {
    int(b).ok().filter(|&v| v >= 0).ok_or_else(invalid_version)
}

fn node_id(b: &[u8]) -> Result<String, Reply> {
    std::str::from_utf8(b)
        .ok()
        .filter(|s| valid_id(s))
        .map(str::to_string)
        .ok_or_else(|| {
            Reply::err(format!(
                "Invalid cluster node id: expected {ID_LEN} hex characters"
            ))
        })
}

/// The reply to a state change the disk refused.
fn not_saved(e: anyhow::Error) -> Reply {
    Reply::err(format!("{e:#}"))
}

/// `CLUSTERX <subcommand> ...`: Kvrocks' controller interface.
///
/// - `SETNODEID <id>`: this node's id (the topology's line with it is this node).
/// - `SETNODES "<topology>" <version> [FORCE]`: replaces the whole topology; an older
///   version is refused and the same one ignored unless `FORCE`.
/// - `SETSLOT <slot> NODE <id> <version>`: gives one slot to a master; `version` must be
///   the current one plus one.
/// - `VERSION`, `MYID`.
pub fn clusterx(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let c = cluster_of(cx)?;
    let sub = text(&a[0][..a[0].len().min(32)]).to_ascii_lowercase();
    let args = &a[1..];
    let wrong = || wrong_args(&format!("clusterx|{sub}"));
    let update = |f: &dyn Fn(&mut State) -> Result<(), Reply>| {
        c.update(|s| f(s).map_err(UpdateError::Refused))
            .map_err(|e| match e {
                UpdateError::Refused(r) => r,
                UpdateError::Io(e) => not_saved(e),
            })
            .map(|_| Reply::ok())
    };
    match sub.as_str() {
        "version" if args.is_empty() => Ok(Reply::Int(c.read().version)),
        "myid" if args.is_empty() => Ok(Reply::bulk(c.read().myid.clone())),
        "setnodeid" => {
            let [id] = args else { return Err(wrong()) };
            let id = node_id(id)?;
            update(&|s| {
                s.myid = id.clone();
                Ok(())
            })
        }
        "setnodes" => {
            let (text_arg, v, force) = match args {
                [t, v] => (t, v, false),
                [t, v, f] if eq(f, "force") => (t, v, true),
                [_, _, _] => return Err(crate::cmd::syntax()),
                _ => return Err(wrong()),
            };
            let v = version(v)?;
            let text_arg = std::str::from_utf8(text_arg)
                .map_err(|_| Reply::err("Invalid cluster nodes info: not UTF-8 text"))?;
            let t = Topology::parse(text_arg).map_err(|e| Reply::err(e.to_string()))?;
            update(&|s| {
                if !force && v < s.version {
                    return Err(invalid_version());
                }
                if !force && v == s.version {
                    return Ok(());
                }
                s.version = v;
                s.topology = Some(t.clone());
                Ok(())
            })
        }
        "setslot" => {
            let [slot, kw, id, v] = args else {
                return Err(wrong());
            };
            let slot = parse_slot(slot).ok_or_else(|| Reply::err("Invalid or out of range slot"))?;
            if !eq(kw, "node") {
                return Err(Reply::err("Invalid slot subcommand: only NODE is supported"));
            }
            let (id, v) = (node_id(id)?, version(v)?);
            update(&|s| {
                if s.version < 0 || v != s.version + 1 {
                    return Err(invalid_version());
                }
                let t = s
                    .topology
                    .as_mut()
                    .ok_or_else(|| Reply::err("no topology set: CLUSTERX SETNODES first"))?;
                t.set_slot(slot, &id).map_err(Reply::err)?;
                s.version = v;
                Ok(())
            })
        }
        "migrate" => Err(Reply::err(
            "CLUSTERX MIGRATE is not supported: halflife has no slot migration (copy the slot's keys with a client, then move the slot with CLUSTERX SETSLOT)",
        )),
        "version" | "myid" => Err(wrong()),
        _ => Err(unknown_sub("CLUSTERX", &a[0])),
    }
}

/// Why a state change failed: refused by its checks, or not saved.
enum UpdateError {
    Refused(Reply),
    Io(anyhow::Error),
}

impl From<anyhow::Error> for UpdateError {
    fn from(e: anyhow::Error) -> Self {
        UpdateError::Io(e)
    }
}
