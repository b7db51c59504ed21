//! The replication commands: `REPLICAOF`/`SLAVEOF`, `ROLE`, `WAIT`, `REPLCONF`, `PSYNC`.

use crate::cmd::table::c;
use crate::cmd::{eq, int, text, wrong_args, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::repl::{become_primary, become_replica};
use crate::session::Outcome;
use bytes::Bytes;
use std::time::{Duration, Instant};

#[rustfmt::skip]
pub static COMMANDS: &[crate::cmd::table::Spec] = &[
    c!("replicaof", 3, [ADMIN NOSCRIPT STALE OWN_LOCK], 0, 0, 0, Server, replicaof),
    c!("slaveof", 3, [ADMIN NOSCRIPT STALE OWN_LOCK], 0, 0, 0, Server, replicaof),
    c!("role", 1, [NOSCRIPT LOADING STALE FAST], 0, 0, 0, Server, role),
    c!("wait", 3, [NOSCRIPT NO_MULTI OWN_LOCK], 0, 0, 0, Generic, wait),
    c!("replconf", -1, [ADMIN NOSCRIPT LOADING STALE ALLOW_BUSY], 0, 0, 0, Server, replconf),
    c!("psync", -3, [ADMIN NOSCRIPT NO_MULTI], 0, 0, 0, Server, psync),
    c!("sync", 1, [ADMIN NOSCRIPT NO_MULTI], 0, 0, 0, Server, sync),
];

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (and `SLAVEOF`). Runs without the shared
/// command lock (see [`crate::cmd::dispatch::execute`]) and takes the exec lock itself.
fn replicaof(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sh = cx.sh;
    let sh = &sh
        .arc()
        .ok_or_else(|| Reply::err("REPLICAOF needs a running server"))?;
    // Inside EXEC (Redis Sentinel reconfigures a server with `MULTI`, `SLAVEOF`, `CONFIG
    // REWRITE`, `CLIENT KILL`, `EXEC`) the transaction holds the exec lock already.
    let _x = (!cx.s.ext.in_exec).then(|| sh.store.exec_lock());
    if eq(&a[0], "no") && eq(&a[1], "one") {
        if sh.repl.primary().is_some() {
            become_primary(sh)?;
            tracing::info!("replication: promoted to primary (REPLICAOF NO ONE)");
        }
        return Ok(Reply::ok());
    }
    let port = int(&a[1])
        .ok()
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| Reply::err("Invalid master port"))?;
    let host = text(&a[0]);
    if sh.repl.primary() == Some((host.clone(), port)) {
        return Ok(Reply::Simple("OK Already connected to specified master"));
    }
    become_replica(sh, host.clone(), port);
    tracing::info!("replication: now a replica of {host}:{port}");
    Ok(Reply::ok())
}

/// `ROLE`.
fn role(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    Ok(cx.sh.repl.role(cx.sh.store.log().offset()))
}

/// `REPLCONF` from a replica before its `PSYNC` (`listening-port`, `ip-address`, `capa`),
/// or `ACK`/`GETACK` outside a replication link, which change nothing.
fn replconf(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s = &mut *cx.s;
    if a.is_empty() || !a.len().is_multiple_of(2) {
        return Err(crate::cmd::syntax());
    }
    for kv in a.chunks(2) {
        if eq(&kv[0], "listening-port") {
            s.repl_port = int(&kv[1])
                .ok()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| Reply::err("value is not an integer or out of range"))?;
        } else if !["ip-address", "capa", "ack", "getack"]
            .iter()
            .any(|o| eq(&kv[0], o))
        {
            return Err(Reply::err(format!(
                "Unrecognized REPLCONF option: {}",
                text(&kv[0][..kv[0].len().min(64)])
            )));
        }
    }
    Ok(Reply::ok())
}

/// `WAIT numreplicas timeout`: blocks until `numreplicas` replicas have acknowledged every
/// write made before the call (the offset at the call, which covers the client's last
/// write), or `timeout` milliseconds pass (0: no limit); returns how many had. Asks the
/// replicas to acknowledge at once with a `REPLCONF GETACK` in the stream. Runs without
/// the shared command lock, so that a long wait holds no `EXEC` up.
fn wait(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sh = cx.sh;
    if sh.repl.primary().is_some() {
        return Err(Reply::err(
            "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    }
    let want = int(&a[0])?;
    let timeout = int(&a[1])?;
    if timeout < 0 {
        return Err(Reply::err("timeout is negative"));
    }
    let target = sh.store.log().offset();
    let deadline = (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    let n = sh.repl.wait_acks(
        target,
        want,
        deadline,
        || sh.store.log_command(&[b"REPLCONF", b"GETACK", b"*"]),
        || sh.is_shutting_down(),
    );
    Ok(Reply::Int(n))
}

/// `PSYNC <replid> <offset>`, and halflife's primary sequence number third: the
/// connection becomes a replica's once the reply is sent.
fn psync(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 3 {
        return Err(wrong_args("psync"));
    }
    cx.s.psync = Some(a.to_vec());
    cx.s.outcome = Outcome::Replicate;
    Ok(Reply::ok())
}

fn sync(_cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    Err(Reply::err(
        "SYNC is not supported: a halflife replica sends PSYNC (and needs a halflife primary)",
    ))
}
