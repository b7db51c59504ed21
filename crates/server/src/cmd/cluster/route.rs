//! The one check cluster mode adds to the command path: before a command runs, its keys
//! (the command table's first/last/step positions) must all hash to one slot, and this
//! node must serve that slot. Otherwise the client gets Redis's redirection or error:
//! `-MOVED <slot> <ip>:<port>`, `-CROSSSLOT ...`, or `-CLUSTERDOWN Hash slot not served`.
//!
//! A slot being moved (Redis's `CLUSTER SETSLOT ... MIGRATING|IMPORTING`) is served by
//! both nodes, by where its keys are, as in Redis (`getNodeByQuery`): the source runs a
//! request whose keys are all still here, sends one whose keys are all gone to the
//! destination (`-ASK <slot> <ip>:<port>`), and answers `-TRYAGAIN` to one whose keys are
//! split; the destination runs a request on the slot only after `ASKING` (one command, or
//! one transaction), `-TRYAGAIN` if it names several keys and some have not arrived, and
//! sends any other to the owner (`-MOVED`). On the source the count and the command hold
//! the migration lock shared ([`Admitted`]), so `MIGRATE` cannot take a key between them;
//! a request naming a key of a `MIGRATE` batch in flight waits for the batch's end, then
//! is routed again.
//!
//! Inside `MULTI` each command is checked as it is queued (a refused one makes `EXEC`
//! fail, as any refused command does), and `EXEC` checks the keys of all queued commands
//! together, so a transaction whose commands touch different slots fails with `CROSSSLOT`
//! and is discarded, as in Redis (`getNodeByQuery` treats every command as an `EXEC`).
//!
//! As in Kvrocks, a node serves the slots it owns even while others are unassigned
//! (Redis's `cluster-require-full-coverage no`): a controller pushes whole topologies,
//! there is no failure detection whose verdict would take the cluster down.

use crate::cluster::slot::key_slot;
use crate::cluster::state::{Cluster, State};
use crate::cmd::table::{self, Flags, Spec};
use crate::protocol::Reply;
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;

/// The keys of `args` (a whole command, name first) by `spec`'s key positions (none when
/// its arguments do not parse: the command fails by itself).
pub fn keys<'a>(spec: &Spec, args: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> + 'a {
    spec.key_indexes(args)
        .unwrap_or_default()
        .into_iter()
        .map(move |i| &args[i])
}

/// What the topology says about a request, before looking at which of its keys are here.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Runs here: a slot this node owns and does not migrate, or no key at all.
    Here,
    /// A slot this node migrates to `to` (`ip:port`): runs here if all its keys still are,
    /// `-ASK` if none is, `-TRYAGAIN` otherwise.
    Migrating { slot: u16, to: String },
    /// A slot imported here from its owner, by a client that said `ASKING`: runs here
    /// unless it names several keys and some have not arrived (`-TRYAGAIN`).
    Importing,
}

/// Where the commands `cmds` (as one request: a command, or a transaction's queue) must
/// run: a [`Verdict`], or the error that sends the client elsewhere. `asking`: the client
/// sent `ASKING` just before.
fn route<'a>(
    st: &State,
    readonly: bool,
    asking: bool,
    cmds: impl Iterator<Item = &'a [Bytes]>,
) -> Result<Verdict, Reply> {
    let mut slot = None;
    let mut write = false;
    for args in cmds {
        let Some(spec) = table::find(&args[0]) else {
            continue;
        };
        // A command with the wrong arity fails by itself, before any routing (as Redis).
        // MIGRATE moves whatever keys of its list are here, wherever their slot is.
        if !spec.arity_ok(args.len()) || spec.name == "migrate" {
            continue;
        }
        write |= spec.has(Flags::WRITE);
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
        return Ok(Verdict::Here);
    };
    let t = st.topology.as_ref().ok_or_else(down)?;
    let owner = t.owner(slot).ok_or_else(down)?;
    if owner.id == st.myid {
        // All its keys left (`CLUSTERX MIGRATE`): the destination serves it already.
        if let Some(dst) = st.migrated.get(&slot).and_then(|id| t.node(id)) {
            return Err(Reply::Error(format!("MOVED {slot} {}", dst.addr())));
        }
        return Ok(match st.migrating.get(&slot).and_then(|id| t.node(id)) {
            Some(dst) => Verdict::Migrating {
                slot,
                to: dst.addr(),
            },
            None => Verdict::Here,
        });
    }
    // All its keys arrived (`CLUSTER IMPORT <slot> 1`): served here before the topology
    // says so, as Kvrocks' destination does.
    if st.imported.contains_key(&slot) {
        return Ok(Verdict::Here);
    }
    if asking && st.importing.contains_key(&slot) {
        return Ok(Verdict::Importing);
    }
    // A replica answers reads of its master's slots to clients that asked with READONLY.
    let replica_of_owner = st
        .myself()
        .is_some_and(|me| me.master.as_deref() == Some(owner.id.as_str()));
    if readonly && !write && replica_of_owner {
        return Ok(Verdict::Here);
    }
    Err(Reply::Error(format!("MOVED {slot} {}", owner.addr())))
}

/// After a change of the state: clients blocked (`BLPOP` ...) on a key of a slot this
/// node no longer serves get `-MOVED` to its owner (`-CLUSTERDOWN` if none), or to the
/// destination of a slot whose keys all left by `CLUSTERX MIGRATE`, as Redis answers
/// them; those of a slot it migrates stay blocked here, as there.
pub fn redirect_blocked(sh: &Shared) {
    let Some(c) = &sh.cluster else {
        return;
    };
    if !sh.blocked.any() {
        return;
    }
    let st = c.read().clone();
    sh.blocked.refuse(|key| {
        let slot = key_slot(key);
        let t = st.topology.as_ref();
        if let Some(dst) = st.migrated.get(&slot).and_then(|id| t?.node(id)) {
            return Some(Reply::Error(format!("MOVED {slot} {}", dst.addr())));
        }
        match t.and_then(|t| t.owner(slot)) {
            None => Some(down()),
            Some(n)
                if n.id != st.myid
                    && !st.importing.contains_key(&slot)
                    && !st.imported.contains_key(&slot) =>
            {
                Some(Reply::Error(format!("MOVED {slot} {}", n.addr())))
            }
            _ => None,
        }
    });
}

fn down() -> Reply {
    Reply::Error("CLUSTERDOWN Hash slot not served".into())
}

fn try_again() -> Reply {
    Reply::Error("TRYAGAIN Multiple keys request during rehashing of slot".into())
}

/// The keys of a request that this node holds and lacks, as (present, missing), each
/// distinct key counted once. Expired keys are missing.
fn presence<'a>(
    sh: &Shared,
    cmds: impl Iterator<Item = &'a [Bytes]>,
) -> Result<(usize, usize), Reply> {
    let mut seen = std::collections::HashSet::new();
    let (mut present, mut missing) = (0, 0);
    for k in request_keys(cmds) {
        if !seen.insert(k) {
            continue;
        }
        if sh.store.read(0, k, false)?.is_some() {
            present += 1;
        } else {
            missing += 1;
        }
    }
    Ok((present, missing))
}

/// The keys a request names, by each command's key positions (repeats included; none of
/// a command with the wrong arity, which fails by itself, nor of `MIGRATE`).
fn request_keys<'a>(cmds: impl Iterator<Item = &'a [Bytes]>) -> impl Iterator<Item = &'a Bytes> {
    cmds.filter_map(|args| {
        let spec = table::find(&args[0])?;
        (spec.arity_ok(args.len()) && spec.name != "migrate").then(|| keys(spec, args))
    })
    .flatten()
}

/// Whether the command `args` may run here as it is, outside a transaction and without
/// [`admit`]'s checks (the plain-SET pipeline's fast path asks this): not on a slot being
/// moved, nor right after `ASKING` (which [`admit`] must clear). Always when cluster mode
/// is off.
pub fn serves(sh: &Shared, s: &Session, args: &[Bytes]) -> bool {
    match &sh.cluster {
        None => true,
        Some(_) if s.ext.cluster_asking => false,
        Some(c) => {
            let st = c.read();
            route(&st, s.ext.cluster_readonly, false, std::iter::once(args)) == Ok(Verdict::Here)
        }
    }
}

/// Held by a command admitted on a slot this node migrates, until it ends: `MIGRATE` does
/// not move a key under it.
pub type Admitted<'a> = Option<parking_lot::RwLockReadGuard<'a, ()>>;

/// The hook run before every command (`spec`: its table entry, `None` for an unknown
/// command): `Err` is the reply instead of running it; `Ok` holds what the command must
/// keep until it ends. Cluster mode off: always `Ok`.
pub fn admit<'a>(
    sh: &'a Shared,
    s: &mut Session,
    spec: Option<&Spec>,
    args: &[Bytes],
) -> Result<Admitted<'a>, Reply> {
    let Some(c) = &sh.cluster else {
        return Ok(None);
    };
    let name = spec.map_or("", |s| s.name);
    // ASKING counts for the next command, or for a whole transaction (Redis clears it
    // after any command but itself outside MULTI).
    let asking = s.ext.cluster_asking;
    let in_tx = s.ext.multi.is_some() && name != "exec" && name != "discard";
    if name != "asking" && name != "multi" && !in_tx {
        s.ext.cluster_asking = false;
    }
    let asking = asking || spec.is_some_and(|s| s.has(Flags::ASKING));
    let readonly = s.ext.cluster_readonly;
    if name == "exec" {
        let Some(queued) = &s.ext.multi else {
            return Ok(None);
        };
        let routed = decide(sh, c, readonly, asking, || queued.iter().map(|q| &q[..]));
        if routed.is_err() {
            // Redis discards the transaction that EXEC refuses to run.
            let mut cx = crate::cmd::Ctx { sh, s };
            let _ = crate::cmd::multi::discard(&mut cx, &[]);
        }
        return routed;
    }
    let routed = decide(sh, c, readonly, asking, || std::iter::once(args));
    if s.ext.multi.is_some() {
        if routed.is_err() {
            s.ext.multi_failed = true;
        }
        // A queued command runs at EXEC, which checks again and holds the guard then.
        return routed.map(|_| None);
    }
    routed
}

/// [`route`], then for a slot being moved, which of the request's keys are here. On the
/// source they are counted under the guard the command then keeps (keys only leave it);
/// the destination needs none (keys only arrive there, so a count can only grow, and a
/// guard there could wait on a `MIGRATE` of its own that waits on this node).
fn decide<'a, 'b, I: Iterator<Item = &'b [Bytes]>>(
    sh: &'a Shared,
    c: &'a Cluster,
    readonly: bool,
    asking: bool,
    cmds: impl Fn() -> I,
) -> Result<Admitted<'a>, Reply> {
    loop {
        // The state's read lock is released before the guard is taken (a temporary in
        // the `match` would live through it): the slot-migration job takes the guard's
        // lock before the state's ([`super::migration`]), and a read lock taken twice in
        // one thread waits behind a queued writer.
        let first = route(&c.read(), readonly, asking, cmds())?;
        let (verdict, guard) = match first {
            Verdict::Here => return Ok(None),
            Verdict::Importing => (Verdict::Importing, None),
            Verdict::Migrating { .. } => {
                // The guard first, then the state again: a MIGRATE, SETSLOT or the job
                // may have run in between.
                let guard = c.command_on_moving_slot();
                let again = route(&c.read(), readonly, asking, cmds())?;
                (again, Some(guard))
            }
        };
        if let Verdict::Migrating { slot, to } = verdict {
            // A key of a MIGRATE batch in flight is here until the destination answers:
            // the request waits for that (without the guard, so that the batches after
            // can go), then looks again.
            if c.departing(request_keys(cmds())) {
                drop(guard);
                c.wait_departed(&request_keys(cmds()).collect::<Vec<_>>());
                continue;
            }
            return match presence(sh, cmds())? {
                (_, 0) => Ok(guard),
                (0, _) => Err(Reply::Error(format!("ASK {slot} {to}"))),
                _ => Err(try_again()),
            };
        }
        return match verdict {
            Verdict::Importing => match presence(sh, cmds())? {
                (present, missing) if missing > 0 && present + missing > 1 => Err(try_again()),
                _ => Ok(None),
            },
            _ => Ok(None),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    fn key_list(a: &[&str]) -> Vec<String> {
        let a = args(a);
        let spec = table::find(&a[0]).unwrap();
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
            migrating: Default::default(),
            importing: Default::default(),
            migrated: Default::default(),
            imported: Default::default(),
        };
        let one = |st: &State, readonly, cmd: &[&str]| {
            let c = args(cmd);
            route(st, readonly, false, std::iter::once(&c[..])).map(|_| ())
        };
        let err = |r: Result<(), Reply>| match r {
            Err(Reply::Error(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(err(one(&st, false, &["GET", "foo"])).starts_with("CLUSTERDOWN"));
        assert!(one(&st, false, &["PING"]).is_ok());
        st.topology = Some(crate::cluster::topology::Topology::parse(&text).unwrap());
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
        st.myid = a.clone();
        let t = [args(&["SET", "{x}1", "1"]), args(&["SET", "{y}1", "1"])];
        let tx = route(&st, false, false, t.iter().map(|c| &c[..])).map(|_| ());
        assert!(err(tx).starts_with("CROSSSLOT"));
        // A slot being moved: the source checks its keys, the destination serves it to
        // ASKING clients only.
        let bar = args(&["GET", "bar"]);
        st.migrating.insert(5061, b.clone());
        assert_eq!(
            route(&st, false, false, std::iter::once(&bar[..])),
            Ok(Verdict::Migrating {
                slot: 5061,
                to: "10.0.0.2:7001".into()
            })
        );
        st.myid = b;
        st.importing.insert(5061, a);
        assert_eq!(
            err(one(&st, false, &["GET", "bar"])),
            "MOVED 5061 10.0.0.1:7000"
        );
        assert_eq!(
            route(&st, false, true, std::iter::once(&bar[..])),
            Ok(Verdict::Importing)
        );
    }
}
