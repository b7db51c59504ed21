//! The cluster commands: Redis's `CLUSTER` subcommands that clients read (INFO, NODES,
//! SLOTS, SHARDS, MYID, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT) in Redis 7.0's formats,
//! `CLUSTER SETSLOT` through which a slot is moved, `READONLY`/`READWRITE`/`ASKING`, and
//! Kvrocks' `CLUSTERX` through which a controller sets this node's id and pushes the
//! topology; and, in its submodules, the routing check before each command ([`route`]) and
//! the job of `CLUSTERX MIGRATE` ([`migration`]). The node's cluster state is [`crate::cluster`].
//!
//! Keys by slot: the key layout ([`crate::record`]) has no slot in the metadata key, so
//! `COUNTKEYSINSLOT` and `GETKEYSINSLOT` walk the database's metadata records and hash
//! each key: O(keys on the node) per call, one record held at a time. Kvrocks puts the
//! slot in the key prefix to make these a range read; that would change the layout every
//! other command and the non-cluster databases depend on, for two commands that only
//! resharding tools call. A slot move that takes its keys by batches of `GETKEYSINSLOT`
//! therefore walks the node once per batch: larger batches, fewer walks.

pub mod migration;
pub mod route;

use crate::cluster::slot::{key_slot, parse_slot, SLOTS};
use crate::cluster::state::{Cluster, State};
use crate::cluster::topology::{fmt_range, valid_id, Node, Topology, ID_LEN};
use crate::cmd::table::c;
use crate::cmd::{
    check_reply_size, eq, int, over_output_limit, text, wrong_args, CmdResult, Ctx, REPLY_OVERHEAD,
};
use crate::protocol::Reply;
use bytes::Bytes;
use std::fmt::Write;

#[rustfmt::skip]
pub static COMMANDS: &[crate::cmd::table::Spec] = &[
    c!("cluster", -2, [LOADING STALE SUBCOMMANDS], 0, 0, 0, Cluster, cluster),
    c!("clusterx", -2, [ADMIN LOADING STALE OWN_LOCK], 0, 0, 0, Cluster, clusterx),
    c!("readonly", 1, [LOADING STALE FAST], 0, 0, 0, Cluster, readonly),
    c!("readwrite", 1, [LOADING STALE FAST], 0, 0, 0, Cluster, readwrite),
    c!("asking", 1, [FAST], 0, 0, 0, Cluster, asking),
];

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
    "IMPORT <slot> 0|1|2 (start, success, fail: sent by a CLUSTERX MIGRATE source)",
    "INFO",
    "KEYSLOT <key>",
    "MYID",
    "NODES",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "SHARDS",
    "SLOTS",
    "The topology is set with CLUSTERX SETNODEID, SETNODES and SETSLOT (Kvrocks').",
];

/// `CLUSTER <subcommand> ...`.
pub fn cluster(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sub = text(&a[0][..a[0].len().min(32)]).to_ascii_lowercase();
    // Redis flags the subcommands that change the cluster `noscript`; those that read it
    // may run in a script.
    const IN_SCRIPTS: [&str; 10] = [
        "help",
        "info",
        "keyslot",
        "nodes",
        "slots",
        "shards",
        "myid",
        "countkeysinslot",
        "getkeysinslot",
        "links",
    ];
    if cx.s.ext.in_script && !IN_SCRIPTS.contains(&sub.as_str()) {
        return Err(Reply::err("This Redis command is not allowed from script"));
    }
    let c = cluster_of(cx)?;
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
        "info" => arity(1).map(|_| Reply::Text(info(&c.read()) + &c.jobs.info())),
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
        "setslot" => setslot(cx, c, &a[1..]),
        "import" => {
            arity(3)?;
            import(cx, c, &a[1], &a[2])
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
        // Redis shows this node's open slots on its own line.
        if n.id == st.myid {
            for (slot, to) in &st.migrating {
                let _ = write!(s, " [{slot}->-{to}]");
            }
            for (slot, from) in &st.importing {
                let _ = write!(s, " [{slot}-<-{from}]");
            }
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

/// `ASKING`, sent by a client after an `-ASK`: its next command (or transaction) may run
/// on a slot this node imports ([`super::route::admit`] clears the flag after it).
pub fn asking(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    cluster_of(cx)?;
    cx.s.ext.cluster_asking = true;
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
/// - `MIGRATE <slot> <dst id> [ASYNC | SYNC [timeout]]`: this node moves the slot's keys
///   to `dst` by itself ([`super::migration`]); `SYNC` replies at the end.
/// - `VERSION`, `MYID`.
pub fn clusterx(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let c = cluster_of(cx)?;
    let sub = text(&a[0][..a[0].len().min(32)]).to_ascii_lowercase();
    let args = &a[1..];
    let wrong = || wrong_args(&format!("clusterx|{sub}"));
    let update = |f: &dyn Fn(&mut State) -> Result<(), Reply>| update(cx.sh, c, f);
    match sub.as_str() {
        "version" if args.is_empty() => Ok(Reply::Int(c.read().version)),
        "myid" if args.is_empty() => Ok(Reply::bulk(c.read().myid.clone())),
        // halflife's: another node forwards a PUBLISH (`super::publish`); delivered to
        // this node's subscribers only.
        "publish" => {
            let [ch, msg] = args else { return Err(wrong()) };
            Ok(Reply::Int(cx.sh.pubsub.publish(false, ch, msg) as i64))
        }
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
            let slot =
                parse_slot(slot).ok_or_else(|| Reply::err("Invalid or out of range slot"))?;
            if !eq(kw, "node") {
                return Err(Reply::err(
                    "Invalid slot subcommand: only NODE is supported",
                ));
            }
            let (id, v) = (node_id(id)?, version(v)?);
            // A slot being migrated from here is given away only once its keys are gone
            // (otherwise, as in Kvrocks, the controller's word goes: keys left behind are
            // no longer served).
            let moving_out = {
                let st = c.read();
                (st.migrating.contains_key(&slot) || st.migrated.contains_key(&slot))
                    && id != st.myid
            };
            if moving_out {
                no_keys_left(cx, slot)?;
            }
            update(&|s| {
                if s.version < 0 || v != s.version + 1 {
                    return Err(invalid_version());
                }
                assign(s, slot, &id)?;
                s.version = v;
                Ok(())
            })
        }
        "migrate" => {
            use migration::Wait;
            let (slot, dst, wait) = match args {
                [slot, dst] => (slot, dst, Wait::No),
                [slot, dst, w] if eq(w, "async") => (slot, dst, Wait::No),
                [slot, dst, w] if eq(w, "sync") => (slot, dst, Wait::Sync(None)),
                [slot, dst, w, t] if eq(w, "sync") => {
                    // Seconds, 0 for no limit (Kvrocks').
                    let t = int(t)?;
                    if t < 0 {
                        return Err(Reply::err("timeout is negative"));
                    }
                    let t = (t > 0).then(|| std::time::Duration::from_secs(t as u64));
                    (slot, dst, Wait::Sync(t))
                }
                [_, _, w] | [_, _, w, _] if !eq(w, "sync") && !eq(w, "async") => {
                    return Err(Reply::err("Invalid sync flag"))
                }
                [_, _, _, _] => return Err(Reply::err("Async migration does not support timeout")),
                _ => return Err(wrong()),
            };
            let slot = parse_slot(slot).ok_or_else(|| Reply::err("Slot is out of range"))?;
            let dst = std::str::from_utf8(dst)
                .map_err(|_| Reply::err("Can't find the destination node id"))?;
            migration::migrate(cx.sh, c, slot, dst, wait).map(|_| Reply::ok())
        }
        "version" | "myid" => Err(wrong()),
        _ => Err(unknown_sub("CLUSTERX", &a[0])),
    }
}

/// Applies `f` to the state, saved before it takes effect (see [`Cluster::update`]);
/// then clients blocked on keys of slots that went elsewhere are sent there.
fn update(
    sh: &crate::shared::Shared,
    c: &Cluster,
    f: &dyn Fn(&mut State) -> Result<(), Reply>,
) -> CmdResult {
    c.update(|s| f(s).map_err(UpdateError::Refused))
        .map_err(|e| match e {
            UpdateError::Refused(r) => r,
            UpdateError::Io(e) => not_saved(e),
        })?;
    route::redirect_blocked(sh);
    Ok(Reply::ok())
}

fn topology_of(s: &mut State) -> Result<&mut Topology, Reply> {
    s.topology
        .as_mut()
        .ok_or_else(|| Reply::err("no topology set: CLUSTERX SETNODES first"))
}

/// Gives `slot` to the master `id` (both SETSLOT ... NODE forms). The moves that no longer
/// apply (the slot migrated from here or imported here) end with it
/// ([`State::drop_stale_moves`]).
fn assign(s: &mut State, slot: u16, id: &str) -> Result<(), Reply> {
    topology_of(s)?.set_slot(slot, id).map_err(Reply::err)
}

/// Refuses to give a slot of this node to another while keys of it are still here (Redis's
/// check): they would no longer be served by anyone.
fn no_keys_left(cx: &Ctx, slot: u16) -> Result<(), Reply> {
    let mut any = false;
    keys_in_slot(cx, slot, |_| {
        any = true;
        Ok(false)
    })?;
    if any {
        return Err(Reply::err(format!(
            "Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
        )));
    }
    Ok(())
}

/// `CLUSTER SETSLOT <slot> MIGRATING <dst id> | IMPORTING <src id> | STABLE | NODE <id>`,
/// Redis's commands for moving a slot. `NODE` counts as a new topology version (the
/// current one + 1), as `CLUSTERX SETSLOT` with that version would.
fn setslot(cx: &Ctx, c: &Cluster, a: &[Bytes]) -> CmdResult {
    let action_error =
        || Reply::err("Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP");
    let (slot, action, id) = match a {
        [slot, action] => (slot, action, None),
        [slot, action, id] => (slot, action, Some(node_id(id)?)),
        _ => return Err(action_error()),
    };
    let slot = parse_slot(slot).ok_or_else(|| Reply::err("Invalid or out of range slot"))?;
    let action = text(&action[..action.len().min(16)]).to_ascii_lowercase();
    // The node named must be a master of the topology.
    let master = |s: &State, id: &str| -> Result<(), Reply> {
        let t = s
            .topology
            .as_ref()
            .ok_or_else(|| Reply::err("no topology set: CLUSTERX SETNODES first"))?;
        match t.node(id) {
            None => Err(Reply::err(format!("I don't know about node {id}"))),
            Some(n) if n.master.is_some() => Err(Reply::err("Target node is not a master")),
            Some(_) => Ok(()),
        }
    };
    let owned = |s: &State| {
        s.topology
            .as_ref()
            .and_then(|t| t.owner(slot))
            .is_some_and(|n| n.id == s.myid)
    };
    match (action.as_str(), id) {
        ("migrating", Some(id)) => update(cx.sh, c, &|s| {
            master(s, &id)?;
            if !owned(s) {
                return Err(Reply::err(format!("I'm not the owner of hash slot {slot}")));
            }
            if id == s.myid {
                return Err(Reply::err("Target node is this node"));
            }
            s.migrating.insert(slot, id.clone());
            Ok(())
        }),
        ("importing", Some(id)) => update(cx.sh, c, &|s| {
            master(s, &id)?;
            if owned(s) {
                return Err(Reply::err(format!(
                    "I'm already the owner of hash slot {slot}"
                )));
            }
            if id == s.myid {
                return Err(Reply::err("Source node is this node"));
            }
            s.importing.insert(slot, id.clone());
            Ok(())
        }),
        ("stable", None) => update(cx.sh, c, &|s| {
            s.migrating.remove(&slot);
            s.importing.remove(&slot);
            s.migrated.remove(&slot);
            s.imported.remove(&slot);
            Ok(())
        }),
        ("node", Some(id)) => {
            let gives_away = {
                let st = c.read();
                let mine = st.topology.as_ref().and_then(|t| t.owner(slot));
                mine.is_some_and(|n| n.id == st.myid) && id != st.myid
            };
            if gives_away {
                no_keys_left(cx, slot)?;
            }
            update(cx.sh, c, &|s| {
                if s.version < 0 {
                    return Err(Reply::err("no topology set: CLUSTERX SETNODES first"));
                }
                master(s, &id).map_err(|e| match e {
                    Reply::Error(m) if m.contains("not a master") => {
                        Reply::err(format!("Can't assign hashslot {slot} to a slave node."))
                    }
                    e => e,
                })?;
                assign(s, slot, &id)?;
                s.version += 1;
                Ok(())
            })
        }
        _ => Err(action_error()),
    }
}

/// `CLUSTER IMPORT <slot> <state>`, what a `CLUSTERX MIGRATE` source tells its
/// destination (Kvrocks' command between nodes): `0` the import starts (the slot is
/// IMPORTING from its owner, as `CLUSTER SETSLOT <slot> IMPORTING <owner>`), `1` all its
/// keys arrived (the slot is served here to every client until the topology gives it
/// here or elsewhere), `2` it failed (the IMPORTING mark goes; keys that arrived stay,
/// unserved, as after `SETSLOT STABLE`).
fn import(cx: &Ctx, c: &Cluster, slot: &[u8], state: &[u8]) -> CmdResult {
    let slot = parse_slot(slot).ok_or_else(|| Reply::err("Invalid or out of range slot"))?;
    let state = int(state)
        .ok()
        .filter(|s| (0..=2).contains(s))
        .ok_or_else(|| Reply::err("Invalid import state"))?;
    if cx.sh.store.is_replica() {
        return Err(Reply::err("Slave can't import slot"));
    }
    update(cx.sh, c, &|s| {
        let owner = s
            .topology
            .as_ref()
            .ok_or_else(|| Reply::err("no topology set: CLUSTERX SETNODES first"))?
            .owner(slot)
            .map(|n| n.id.clone())
            .ok_or_else(|| Reply::err(format!("Slot {slot} has no owner to import it from")))?;
        if owner == s.myid {
            return Err(Reply::err("Can't import slot which belongs to me"));
        }
        match state {
            0 => {
                s.imported.remove(&slot);
                s.importing.insert(slot, owner);
            }
            1 => {
                let src = s
                    .importing
                    .remove(&slot)
                    .ok_or_else(|| Reply::err(format!("Slot {slot} is not being imported")))?;
                s.imported.insert(slot, src);
            }
            _ => {
                s.importing.remove(&slot);
            }
        }
        Ok(())
    })
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
