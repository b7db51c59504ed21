//! Connection commands: `PING`, `ECHO`, `QUIT`, `HELLO`, `AUTH`, `SELECT`.

use super::table::c;
use super::{eq, int, syntax, wrong_args, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::record;
use crate::session::Outcome;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("ping", -1, [FAST STALE CHEAP PUBSUB_CONTEXT], 0, 0, 0, Connection, ping),
    c!("echo", 2, [FAST STALE CHEAP], 0, 0, 0, Connection, echo),
    c!("quit", -1, [NOSCRIPT LOADING STALE FAST NO_AUTH ALLOW_BUSY NOT_QUEUED PUBSUB_CONTEXT], 0, 0, 0, Connection, quit),
    c!("hello", -1, [NOSCRIPT LOADING STALE FAST NO_AUTH ALLOW_BUSY], 0, 0, 0, Connection, hello),
    c!("auth", -2, [NOSCRIPT LOADING STALE FAST NO_AUTH ALLOW_BUSY], 0, 0, 0, Connection, auth),
    c!("select", 2, [LOADING STALE FAST CHEAP], 0, 0, 0, Connection, select),
];

pub fn ping(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    // A subscribed RESP2 connection gets `[pong, message]`, as Redis answers there.
    if cx.s.proto == 2 && cx.s.pubsub.subscribed() && a.len() <= 1 {
        let m = a.first().cloned().unwrap_or_default();
        return Ok(Reply::Array(vec![Reply::bulk("pong"), Reply::Bulk(m)]));
    }
    match a {
        [] => Ok(Reply::Simple("PONG")),
        [m] => Ok(Reply::Bulk(m.clone())),
        _ => Err(wrong_args("ping")),
    }
}

fn echo(_cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Bulk(a[0].clone()))
}

fn quit(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    cx.s.outcome = Outcome::Close;
    Ok(Reply::ok())
}

fn select(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    // Redis Cluster has one database.
    if cx.sh.cluster.is_some() && &a[0][..] != b"0" {
        return Err(Reply::err("SELECT is not allowed in cluster mode"));
    }
    cx.s.ext.db = super::keyspace::db_index(&a[0])?;
    Ok(Reply::ok())
}

fn hello(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (sh, s) = (cx.sh, &mut *cx.s);
    let mut proto = s.proto;
    let mut i = 0;
    if let Some(v) = a.first() {
        proto = match int(v) {
            Ok(2) => 2,
            Ok(3) => 3,
            _ => return Err(Reply::Error("NOPROTO unsupported protocol version".into())),
        };
        i = 1;
    }
    let mut name = None;
    while i < a.len() {
        if eq(&a[i], "auth") && i + 2 < a.len() {
            check_password(sh, s, &a[i + 1], &a[i + 2])?;
            i += 3;
        } else if eq(&a[i], "setname") && i + 1 < a.len() {
            name = Some(crate::cmd::client::client_name(&a[i + 1])?);
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    if !s.authed && sh.settings.requirepass().is_some() {
        return Err(Reply::Error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into(),
        ));
    }
    s.proto = proto;
    if let Some(n) = name {
        sh.set_client_name(s, Some(n));
    }
    Ok(Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("halflife")),
        (
            Reply::bulk("version"),
            Reply::bulk(env!("CARGO_PKG_VERSION")),
        ),
        (Reply::bulk("proto"), Reply::Int(proto as i64)),
        (Reply::bulk("id"), Reply::Int(s.id as i64)),
        (
            Reply::bulk("mode"),
            Reply::bulk(if sh.cluster.is_some() {
                "cluster"
            } else {
                "standalone"
            }),
        ),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(Vec::new())),
    ]))
}

fn check_password(
    sh: &crate::shared::Shared,
    s: &mut crate::session::Session,
    user: &[u8],
    pass: &[u8],
) -> Result<(), Reply> {
    match sh.settings.requirepass() {
        None => Err(Reply::err("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")),
        Some(p) if eq(user, "default") && password_matches(pass, p.as_bytes()) => {
            s.authed = true;
            Ok(())
        }
        Some(_) => Err(Reply::Error(
            "WRONGPASS invalid username-password pair or user is disabled.".into(),
        )),
    }
}

/// Whether `given` is the password, in time that does not depend on where they differ.
///
/// A plain `==` stops at the first differing byte, so how long a wrong `AUTH` takes tells a
/// client how many of its first bytes were right, and the password can be found a byte at
/// a time. Both sides are hashed to 128-bit digests (xxh3 with a per-process random seed,
/// so a client cannot choose inputs that collide) and the digests are compared with an
/// XOR-accumulate over all 16 bytes, with no early exit; lengths never meet a comparison.
/// The exact `==` after it only runs when the digests match, that is for the right password
/// (or a 2^-128 collision), so its early exit reveals nothing about a wrong one.
fn password_matches(given: &[u8], password: &[u8]) -> bool {
    use std::sync::OnceLock;
    static SEED: OnceLock<u64> = OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        // RandomState is seeded from the OS's randomness once per process.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(record::now_ms());
        h.finish()
    });
    let digest = |b: &[u8]| xxhash_rust::xxh3::xxh3_128_with_seed(b, seed).to_le_bytes();
    let (a, b) = (digest(given), digest(password));
    let diff = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0 && given == password
}

fn auth(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (sh, s) = (cx.sh, &mut *cx.s);
    match a {
        [pass] => check_password(sh, s, b"default", pass)?,
        [user, pass] => check_password(sh, s, user, pass)?,
        _ => return Err(syntax()),
    }
    Ok(Reply::ok())
}
