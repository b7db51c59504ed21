//! The one check cluster mode adds to the command path: before a command runs, its keys
//! (the command table's first/last/step positions) must all hash to one slot, and this
//! node must serve that slot. Otherwise the client gets Redis's redirection or error:
//! `-MOVED <slot> <ip>:<port>`, `-CROSSSLOT ...`, or `-CLUSTERDOWN Hash slot not served`.
//!
//! Inside `MULTI` each command is checked as it is queued (a refused one makes `EXEC`
//! fail, as any refused command does), and `EXEC` checks the keys of all queued commands
//! together, so a transaction whose commands touch different slots fails with `CROSSSLOT`
//! and is discarded, as in Redis (`getNodeByQuery` treats every command as an `EXEC`).
//!
//! As in Kvrocks, a node serves the slots it owns even while others are unassigned
//! (Redis's `cluster-require-full-coverage no`): a controller pushes whole topologies,
//! there is no failure detection whose verdict would take the cluster down.

use super::slot::key_slot;
use super::state::State;
use crate::cmd::table::{self, Spec};
use crate::commands::{command_name, Session};
use crate::protocol::Reply;
use crate::server::Shared;
use bytes::Bytes;

/// The keys of `args` (a whole command, name first) by `spec`'s key positions.
pub fn keys<'a>(spec: &Spec, args: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> + 'a {
    let n = args.len() as i32;
    let first = spec.first;
    let last = if spec.last < 0 {
        n + spec.last
    } else {
        spec.last
    }
    .min(n - 1);
    let step = spec.step.max(1) as usize;
    // Half-open; empty when the command has no keys.
    let range = if first > 0 && last >= first {
        first as usize..last as usize + 1
    } else {
        0..0
    };
    range.step_by(step).map(move |i| &args[i])
}

fn is_write(spec: &Spec) -> bool {
    spec.flags.split(' ').any(|f| f == "write")
}

/// Where the commands `cmds` (as one request: a command, or a transaction's queue) must
/// run: `Ok` here, or the error that sends the client elsewhere.
fn route<'a>(
    st: &State,
    readonly: bool,
    cmds: impl Iterator<Item = &'a [Bytes]>,
) -> Result<(), Reply> {
    let mut slot = None;
    let mut write = false;
    for args in cmds {
        let Some(spec) = table::find(&command_name(&args[0])) else {
            continue;
        };
        // A command with the wrong arity fails by itself, before any routing (as Redis).
        if !spec.arity_ok(args.len()) {
            continue;
        }
        write |= is_write(spec);
        for k in keys(spec, args) {
            let s = key_slot(k);
            match slot {
                None => {
                    if st.topology.as_ref().and_then(|t| t.owner(s)).is_none() {
                        return Err(down());
                    }
                    slot = Some(s);
                }
                Some(first) if first != s => {
                    return Err(Reply::Error(
                        "CROSSSLOT Keys in request don't hash to the same slot".into(),
                    ))
                }
                Some(_) => {}
            }
        }
    }
    let Some(slot) = slot else {
        return Ok(());
    };
    let owner = st
        .topology
        .as_ref()
        .and_then(|t| t.owner(slot))
        .ok_or_else(down)?;
    if owner.id == st.myid {
        return Ok(());
    }
    // A replica answers reads of its master's slots to clients that asked with READONLY.
    let replica_of_owner = st
        .myself()
        .is_some_and(|me| me.master.as_deref() == Some(owner.id.as_str()));
    if readonly && !write && replica_of_owner {
        return Ok(());
    }
    Err(Reply::Error(format!("MOVED {slot} {}", owner.addr())))
}

fn down() -> Reply {
    Reply::Error("CLUSTERDOWN Hash slot not served".into())
}

/// Whether the command `args` may run here as it is, outside a transaction (the plain-SET
/// pipeline's fast path asks this). Always when cluster mode is off.
pub fn serves(sh: &Shared, s: &Session, args: &[Bytes]) -> bool {
    match &sh.cluster {
        None => true,
        Some(c) => route(&c.read(), s.ext.cluster_readonly, std::iter::once(args)).is_ok(),
    }
}

/// The hook run before every command (`name` is its lower-cased name): `Err` is the
/// reply instead of running it. Cluster mode off: always `Ok`.
pub fn admit(sh: &Shared, s: &mut Session, name: &str, args: &[Bytes]) -> Result<(), Reply> {
    let Some(c) = &sh.cluster else {
        return Ok(());
    };
    // Redis Cluster has one database.
    if name == "select" && args.get(1).is_some_and(|d| &d[..] != b"0") {
        return Err(Reply::err("SELECT is not allowed in cluster mode"));
    }
    if name == "move" {
        return Err(Reply::err("MOVE is not allowed in cluster mode"));
    }
    if name == "copy" && args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"db")) {
        return Err(Reply::err(
            "Copying to another database is not allowed in cluster mode",
        ));
    }
    let readonly = s.ext.cluster_readonly;
    if name == "exec" {
        let Some(queued) = &s.ext.multi else {
            return Ok(());
        };
        let routed = route(&c.read(), readonly, queued.iter().map(|q| &q[..]));
        if routed.is_err() {
            // Redis discards the transaction that EXEC refuses to run.
            let mut cx = crate::cmd::Ctx { sh, s };
            let _ = crate::cmd::multi::discard(&mut cx, &[]);
        }
        return routed;
    }
    let routed = route(&c.read(), readonly, std::iter::once(args));
    if routed.is_err() && s.ext.multi.is_some() {
        s.ext.multi_failed = true;
    }
    routed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    fn key_list(a: &[&str]) -> Vec<String> {
        let a = args(a);
        let spec = table::find(&command_name(&a[0])).unwrap();
        keys(spec, &a)
            .map(|k| String::from_utf8(k.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn keys_follow_the_table_positions() {
        assert_eq!(key_list(&["GET", "a"]), ["a"]);
        assert_eq!(key_list(&["MSET", "a", "1", "b", "2"]), ["a", "b"]);
        assert_eq!(key_list(&["DEL", "a", "b", "c"]), ["a", "b", "c"]);
        assert_eq!(key_list(&["OBJECT", "ENCODING", "k"]), ["k"]);
        assert_eq!(key_list(&["RENAME", "a", "b"]), ["a", "b"]);
        assert!(key_list(&["PING"]).is_empty());
        assert!(key_list(&["DBSIZE"]).is_empty());
    }

    #[test]
    fn routes_by_owner_readonly_and_cross_slot() {
        let (a, b, r) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let text = format!(
            "{a} 10.0.0.1 7000 master - 0-8191\n{b} 10.0.0.2 7001 master - 8192-16382\n\
             {r} 10.0.0.3 7002 slave {b}\n"
        );
        let mut st = State {
            myid: a.clone(),
            version: 1,
            topology: None,
        };
        let one = |st: &State, readonly, cmd: &[&str]| {
            let c = args(cmd);
            route(st, readonly, std::iter::once(&c[..]))
        };
        let err = |r: Result<(), Reply>| match r {
            Err(Reply::Error(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(err(one(&st, false, &["GET", "foo"])).starts_with("CLUSTERDOWN"));
        assert!(one(&st, false, &["PING"]).is_ok());
        st.topology = Some(super::super::topology::Topology::parse(&text).unwrap());
        // bar: slot 5061 (a's), foo: 12182 (b's).
        assert!(one(&st, false, &["GET", "bar"]).is_ok());
        assert_eq!(
            err(one(&st, false, &["GET", "foo"])),
            "MOVED 12182 10.0.0.2:7001"
        );
        assert!(err(one(&st, false, &["MGET", "foo", "bar"])).starts_with("CROSSSLOT"));
        assert!(one(&st, false, &["MGET", "{bar}1", "{bar}2", "bar"]).is_ok());
        // Slot 16383 has no owner.
        let unowned = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| key_slot(k.as_bytes()) == 16383)
            .unwrap();
        assert!(err(one(&st, false, &["GET", &unowned])).starts_with("CLUSTERDOWN"));
        // The replica of b: reads with READONLY here, writes and plain reads to b.
        st.myid = r;
        assert!(one(&st, true, &["GET", "foo"]).is_ok());
        assert!(one(&st, false, &["GET", "foo"]).is_err());
        assert_eq!(
            err(one(&st, true, &["SET", "foo", "1"])),
            "MOVED 12182 10.0.0.2:7001"
        );
        assert_eq!(
            err(one(&st, true, &["GET", "bar"])),
            "MOVED 5061 10.0.0.1:7000"
        );
        // A transaction's commands route together.
        st.myid = a;
        let t = [args(&["SET", "{x}1", "1"]), args(&["SET", "{y}1", "1"])];
        let tx = route(&st, false, t.iter().map(|c| &c[..]));
        assert!(err(tx).starts_with("CROSSSLOT"));
    }
}
