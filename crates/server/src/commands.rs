//! Command dispatch: one function per command, each taking its arguments as sent and
//! returning the reply. Runs on a blocking thread (engine calls block).

use crate::config::AppendFsync;
use crate::pattern;
use crate::protocol::Reply;
use crate::record;
use crate::server::Shared;
use crate::store::{Live, StoreError};
use bytes::Bytes;
use engine::WriteBatch;
use std::collections::BTreeMap;

/// What the connection does after a command's reply is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    /// `QUIT`: send the reply, then close.
    Close,
    /// `SHUTDOWN`: close without a reply and stop the server.
    Shutdown,
}

/// Open `SCAN` cursors a connection keeps; older ones are forgotten.
const MAX_CURSORS: usize = 256;

/// Most keys one `SCAN` call examines: a larger `COUNT` is clamped to it (`COUNT` is a hint
/// in Redis too), so that one call's work and reply stay bounded however much a client asks.
pub const MAX_SCAN_COUNT: usize = 1000;

/// Most characters of a client's bytes echoed into an error (Redis: 128).
const MAX_ECHO: usize = 128;

/// Per-connection state.
pub struct Session {
    pub id: u64,
    pub name: Option<String>,
    /// Protocol version: 2 until `HELLO 3`.
    pub proto: u8,
    pub authed: bool,
    /// SCAN cursor -> last key returned under it (cursors are numbers on the wire; keys are
    /// not, so the position stays here).
    cursors: BTreeMap<u64, Vec<u8>>,
    next_cursor: u64,
    /// Reply bytes the connection may still buffer (set before each batch): commands whose
    /// reply grows with the data (`MGET`, `KEYS`) stop with an error rather than build a
    /// reply the connection would be closed for.
    pub output_budget: usize,
}

impl Session {
    pub fn new(id: u64) -> Session {
        Session {
            id,
            name: None,
            proto: 2,
            authed: false,
            cursors: BTreeMap::new(),
            next_cursor: 0,
            output_budget: usize::MAX,
        }
    }
}

type CmdResult = Result<Reply, Reply>;

impl From<StoreError> for Reply {
    fn from(e: StoreError) -> Reply {
        Reply::err(e.to_string())
    }
}

impl From<engine::Error> for Reply {
    fn from(e: engine::Error) -> Reply {
        Reply::err(e.to_string())
    }
}

fn wrong_args(cmd: &str) -> Reply {
    Reply::err(format!("wrong number of arguments for '{cmd}' command"))
}

fn syntax() -> Reply {
    Reply::err("syntax error")
}

fn not_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

fn int(b: &[u8]) -> Result<i64, Reply> {
    std::str::from_utf8(b)
        .ok()
        // Redis's canonical form only: no sign `+`, no leading zeros, no `-0`.
        .filter(|s| !(s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) || *s == "-0"))
        .and_then(|s| s.parse().ok())
        .ok_or_else(not_integer)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Runs one command.
pub fn execute(sh: &Shared, s: &mut Session, args: &[Bytes]) -> (Reply, Outcome) {
    // No command's name is longer than 32 bytes, so a longer one (a client's megabytes)
    // is not copied whole: cut, it still matches nothing.
    let name = text(&args[0][..args[0].len().min(32)]).to_ascii_lowercase();
    if sh.settings.requirepass().is_some()
        && !s.authed
        && !matches!(name.as_str(), "auth" | "hello" | "quit")
    {
        return (
            Reply::Error("NOAUTH Authentication required.".into()),
            Outcome::Continue,
        );
    }
    let a = &args[1..];
    let r = match name.as_str() {
        "ping" => ping(a),
        "echo" => exact(&name, a, 1).map(|_| Reply::Bulk(a[0].clone())),
        "quit" => return (Reply::ok(), Outcome::Close),
        "shutdown" => return (Reply::ok(), Outcome::Shutdown),
        "hello" => hello(sh, s, a),
        "auth" => auth(sh, s, a),
        "select" => exact(&name, a, 1).and_then(|_| match int(&a[0])? {
            0 => Ok(Reply::ok()),
            _ => Err(Reply::err("DB index is out of range")),
        }),
        "get" => exact(&name, a, 1).and_then(|_| get(sh, &a[0])),
        "set" => set(sh, a),
        "setnx" => exact(&name, a, 2).and_then(|_| {
            let r = set(sh, &[a[0].clone(), a[1].clone(), Bytes::from_static(b"NX")])?;
            Ok(Reply::Int((r == Reply::ok()) as i64))
        }),
        "getdel" => exact(&name, a, 1).and_then(|_| getdel(sh, &a[0])),
        "del" | "unlink" => at_least(&name, a, 1).and_then(|_| del(sh, a)),
        "exists" => at_least(&name, a, 1).and_then(|_| exists(sh, a)),
        "mget" => at_least(&name, a, 1).and_then(|_| mget(sh, s, a)),
        "mset" => mset(sh, a),
        "incr" => exact(&name, a, 1).and_then(|_| incr_by(sh, &a[0], 1)),
        "decr" => exact(&name, a, 1).and_then(|_| incr_by(sh, &a[0], -1)),
        "incrby" => exact(&name, a, 2).and_then(|_| incr_by(sh, &a[0], int(&a[1])?)),
        "decrby" => exact(&name, a, 2).and_then(|_| {
            let by = int(&a[1])?.checked_neg().ok_or_else(not_integer)?;
            incr_by(sh, &a[0], by)
        }),
        "append" => exact(&name, a, 2).and_then(|_| append(sh, &a[0], &a[1])),
        "strlen" => exact(&name, a, 1).and_then(|_| {
            Ok(Reply::Int(
                sh.store.read(&a[0], true)?.map_or(0, |l| l.value.len()) as i64,
            ))
        }),
        "ttl" => exact(&name, a, 1).and_then(|_| ttl(sh, &a[0], 1000)),
        "pttl" => exact(&name, a, 1).and_then(|_| ttl(sh, &a[0], 1)),
        "expire" => exact(&name, a, 2).and_then(|_| expire(sh, &a[0], Some(&a[1]), 1000)),
        "pexpire" => exact(&name, a, 2).and_then(|_| expire(sh, &a[0], Some(&a[1]), 1)),
        "persist" => exact(&name, a, 1).and_then(|_| expire(sh, &a[0], None, 1)),
        "scan" => scan(sh, s, a),
        "keys" => exact(&name, a, 1).and_then(|_| keys(sh, s, &a[0])),
        "dbsize" => exact(&name, a, 0).and_then(|_| dbsize(sh)),
        "flushdb" | "flushall" => flushdb(sh, a),
        "info" => Ok(Reply::Text(crate::info::render(sh, a))),
        "config" => config(sh, a),
        "client" => client(sh, s, a),
        "command" => Ok(Reply::Array(Vec::new())),
        _ => Err(unknown(&args[0], a)),
    };
    (r.unwrap_or_else(|e| e), Outcome::Continue)
}

/// Redis's reply to an unknown command. The name and the arguments are the client's bytes:
/// they are cut to [`MAX_ECHO`] characters (the arguments together, as Redis) and carry no
/// CR or LF (an error is one line; [`crate::protocol::one_line`] makes sure of it for every
/// error, and [`echo`] does here already so that the cut counts what is shown).
fn unknown(cmd: &[u8], a: &[Bytes]) -> Reply {
    let mut shown = String::new();
    for arg in a {
        let room = MAX_ECHO.saturating_sub(shown.chars().count());
        if room == 0 {
            break;
        }
        shown.push_str(&format!("'{}' ", echo(arg, room)));
    }
    Reply::err(format!(
        "unknown command '{}', with args beginning with: {shown}",
        echo(cmd, MAX_ECHO)
    ))
}

/// At most `max` characters of `b` for an error line, CR and LF as spaces.
fn echo(b: &[u8], max: usize) -> String {
    // Only the shown prefix is converted: a name of megabytes is not copied whole.
    let head = &b[..b.len().min(max * 4)];
    String::from_utf8_lossy(head)
        .chars()
        .take(max)
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

fn exact(cmd: &str, a: &[Bytes], n: usize) -> Result<(), Reply> {
    if a.len() == n {
        Ok(())
    } else {
        Err(wrong_args(cmd))
    }
}

fn at_least(cmd: &str, a: &[Bytes], n: usize) -> Result<(), Reply> {
    if a.len() >= n {
        Ok(())
    } else {
        Err(wrong_args(cmd))
    }
}

fn sync(sh: &Shared) -> bool {
    sh.settings.appendfsync() == AppendFsync::Always
}

fn put(batch: &mut WriteBatch, key: &[u8], value: &[u8], expire_at_ms: Option<u64>) {
    batch.put(key, &record::encode(value, expire_at_ms));
}

fn ping(a: &[Bytes]) -> CmdResult {
    match a {
        [] => Ok(Reply::Simple("PONG")),
        [m] => Ok(Reply::Bulk(m.clone())),
        _ => Err(wrong_args("ping")),
    }
}

fn hello(sh: &Shared, s: &mut Session, a: &[Bytes]) -> CmdResult {
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
            name = Some(client_name(&a[i + 1])?);
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    if sh.settings.requirepass().is_some() && !s.authed {
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
        (Reply::bulk("mode"), Reply::bulk("standalone")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(Vec::new())),
    ]))
}

fn check_password(sh: &Shared, s: &mut Session, user: &[u8], pass: &[u8]) -> Result<(), Reply> {
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

fn auth(sh: &Shared, s: &mut Session, a: &[Bytes]) -> CmdResult {
    match a {
        [pass] => check_password(sh, s, b"default", pass)?,
        [user, pass] => check_password(sh, s, user, pass)?,
        _ => return Err(wrong_args("auth")),
    }
    Ok(Reply::ok())
}

fn get(sh: &Shared, key: &[u8]) -> CmdResult {
    let v = sh.store.read(key, true)?;
    sh.stats.count_lookup(v.is_some());
    Ok(v.map_or(Reply::Nil, |l| Reply::bulk(l.value)))
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`
fn set(sh: &Shared, a: &[Bytes]) -> CmdResult {
    if a.len() < 2 {
        return Err(wrong_args("set"));
    }
    let (key, value) = (&a[0], &a[1]);
    let (mut nx, mut xx, mut get_old, mut keepttl) = (false, false, false, false);
    let mut expire: Option<u64> = None;
    let now = record::now_ms();
    let mut i = 2;
    while i < a.len() {
        let opt = &a[i];
        let timed = ["ex", "px", "exat", "pxat"].iter().find(|o| eq(opt, o));
        if let Some(unit) = timed {
            if expire.is_some() || keepttl || i + 1 >= a.len() {
                return Err(syntax());
            }
            let n = int(&a[i + 1])?;
            if n <= 0 {
                return Err(Reply::err("invalid expire time in 'set' command"));
            }
            let n = n as u64;
            let at = match *unit {
                "ex" => n.checked_mul(1000).and_then(|ms| now.checked_add(ms)),
                "px" => now.checked_add(n),
                "exat" => n.checked_mul(1000),
                _ => Some(n),
            };
            expire = Some(at.ok_or_else(|| Reply::err("invalid expire time in 'set' command"))?);
            i += 2;
            continue;
        }
        if eq(opt, "nx") && !xx {
            nx = true;
        } else if eq(opt, "xx") && !nx {
            xx = true;
        } else if eq(opt, "get") {
            get_old = true;
        } else if eq(opt, "keepttl") && expire.is_none() {
            keepttl = true;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let reads = nx || xx || get_old || keepttl;
    let _g = if reads {
        sh.store.lock(&[key])
    } else {
        sh.store.lock_shared(&[key])
    };
    let old = if reads {
        sh.store.read(key, false)?
    } else {
        None
    };
    if (nx && old.is_some()) || (xx && old.is_none()) {
        return Ok(if get_old {
            old.map_or(Reply::Nil, |l| Reply::bulk(l.value))
        } else {
            Reply::Nil
        });
    }
    let expire = if keepttl {
        old.as_ref().and_then(|l| l.expire_at_ms)
    } else {
        expire
    };
    let mut b = WriteBatch::new();
    if expire.is_some_and(|t| t <= now) {
        // EXAT/PXAT in the past: the key is gone at once, as in Redis.
        b.delete(key);
    } else {
        put(&mut b, key, value, expire);
    }
    sh.store.write(b, sync(sh))?;
    Ok(if get_old {
        old.map_or(Reply::Nil, |l| Reply::bulk(l.value))
    } else {
        Reply::ok()
    })
}

/// Whether `cmd` is a `SET key value` without options that the engine will accept, so that
/// it can join [`set_many`]; anything else (options, limits, authentication) goes through
/// [`execute`] and gets its own reply.
pub fn is_plain_set(sh: &Shared, s: &Session, cmd: &[Bytes]) -> bool {
    let o = sh.store.db().options();
    cmd.len() == 3
        && eq(&cmd[0], "set")
        && (s.authed || sh.settings.requirepass().is_none())
        && !cmd[1].is_empty()
        && cmd[1].len() <= o.max_key_size
        && cmd[2].len() + record::MAX_HEADER <= o.max_value_size
}

/// Consecutive plain SETs of one connection (a pipeline) as one atomic engine write: one
/// WAL record and, under `appendfsync always`, one sync for all of them instead of one
/// group-commit round each. Replies as if they had run one by one.
pub fn set_many(sh: &Shared, cmds: &[Vec<Bytes>]) -> Vec<Reply> {
    let keys: Vec<&Bytes> = cmds.iter().map(|c| &c[1]).collect();
    let _g = sh.store.lock_shared(&keys);
    let mut b = WriteBatch::new();
    for c in cmds {
        put(&mut b, &c[1], &c[2], None);
    }
    let reply = match sh.store.write(b, sync(sh)) {
        Ok(()) => Reply::ok(),
        Err(e) => e.into(),
    };
    vec![reply; cmds.len()]
}

fn getdel(sh: &Shared, key: &[u8]) -> CmdResult {
    let _g = sh.store.lock(&[key]);
    let Some(old) = sh.store.read(key, false)? else {
        return Ok(Reply::Nil);
    };
    let mut b = WriteBatch::new();
    b.delete(key);
    sh.store.write(b, sync(sh))?;
    Ok(Reply::bulk(old.value))
}

fn del(sh: &Shared, keys: &[Bytes]) -> CmdResult {
    let _g = sh.store.lock(keys);
    let mut b = WriteBatch::new();
    let mut n = 0;
    let mut seen = std::collections::HashSet::new();
    for k in keys {
        if seen.insert(k) && sh.store.read(k, false)?.is_some() {
            b.delete(k);
            n += 1;
        }
    }
    sh.store.write(b, sync(sh))?;
    Ok(Reply::Int(n))
}

fn exists(sh: &Shared, keys: &[Bytes]) -> CmdResult {
    let mut n = 0;
    for k in keys {
        n += sh.store.read(k, true)?.is_some() as i64;
    }
    Ok(Reply::Int(n))
}

fn mget(sh: &Shared, s: &Session, keys: &[Bytes]) -> CmdResult {
    let mut out = Vec::with_capacity(keys.len());
    let mut size = 0usize;
    for k in keys {
        let v = sh.store.read(k, true)?;
        sh.stats.count_lookup(v.is_some());
        size = size.saturating_add(REPLY_OVERHEAD + v.as_ref().map_or(0, |l| l.value.len()));
        if size > s.output_budget {
            return Err(over_output_limit("MGET", sh));
        }
        out.push(v.map_or(Reply::Nil, |l| Reply::bulk(l.value)));
    }
    Ok(Reply::Array(out))
}

/// Bytes a bulk string's framing adds to it in a reply, at most (`$<len>\r\n...\r\n`).
const REPLY_OVERHEAD: usize = 16;

fn over_output_limit(cmd: &str, sh: &Shared) -> Reply {
    Reply::err(format!(
        "{cmd} reply would exceed the connection's output limit of {} bytes (halflife-client-output-limit)",
        sh.settings.max_output_bytes()
    ))
}

fn mset(sh: &Shared, a: &[Bytes]) -> CmdResult {
    if a.is_empty() || !a.len().is_multiple_of(2) {
        return Err(wrong_args("mset"));
    }
    let keys: Vec<&Bytes> = a.iter().step_by(2).collect();
    let _g = sh.store.lock_shared(&keys);
    let mut b = WriteBatch::new();
    for kv in a.chunks(2) {
        put(&mut b, &kv[0], &kv[1], None);
    }
    sh.store.write(b, sync(sh))?;
    Ok(Reply::ok())
}

fn incr_by(sh: &Shared, key: &[u8], by: i64) -> CmdResult {
    let _g = sh.store.lock(&[key]);
    let old = sh.store.read(key, false)?;
    let (cur, expire) = match &old {
        Some(l) => (int(&l.value)?, l.expire_at_ms),
        None => (0, None),
    };
    let new = cur
        .checked_add(by)
        .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
    let mut b = WriteBatch::new();
    put(&mut b, key, new.to_string().as_bytes(), expire);
    sh.store.write(b, sync(sh))?;
    Ok(Reply::Int(new))
}

fn append(sh: &Shared, key: &[u8], tail: &[u8]) -> CmdResult {
    let _g = sh.store.lock(&[key]);
    let Live {
        mut value,
        expire_at_ms,
    } = sh.store.read(key, false)?.unwrap_or(Live {
        value: Vec::new(),
        expire_at_ms: None,
    });
    value.extend_from_slice(tail);
    let mut b = WriteBatch::new();
    put(&mut b, key, &value, expire_at_ms);
    sh.store.write(b, sync(sh))?;
    Ok(Reply::Int(value.len() as i64))
}

/// TTL (`unit` 1000) or PTTL (1): -2 for a missing key, -1 for one without expiry.
fn ttl(sh: &Shared, key: &[u8], unit: u64) -> CmdResult {
    Ok(Reply::Int(match sh.store.read(key, true)? {
        None => -2,
        Some(Live {
            expire_at_ms: None, ..
        }) => -1,
        Some(Live {
            expire_at_ms: Some(t),
            ..
        }) => {
            let left = t.saturating_sub(record::now_ms());
            ((left + unit / 2) / unit) as i64
        }
    }))
}

/// EXPIRE/PEXPIRE (`n` in `unit` ms) or PERSIST (`n` = None): 1 if the key's expiry
/// changed, else 0.
fn expire(sh: &Shared, key: &[u8], n: Option<&[u8]>, unit: u64) -> CmdResult {
    let _g = sh.store.lock(&[key]);
    let Some(old) = sh.store.read(key, false)? else {
        return Ok(Reply::Int(0));
    };
    let mut b = WriteBatch::new();
    match n {
        None if old.expire_at_ms.is_none() => return Ok(Reply::Int(0)),
        None => put(&mut b, key, &old.value, None),
        Some(n) => {
            let n = int(n)?;
            if n <= 0 {
                b.delete(key);
            } else {
                let at = (n as u64)
                    .checked_mul(unit)
                    .and_then(|ms| record::now_ms().checked_add(ms))
                    .ok_or_else(|| Reply::err("invalid expire time in 'expire' command"))?;
                put(&mut b, key, &old.value, Some(at));
            }
        }
    }
    sh.store.write(b, sync(sh))?;
    Ok(Reply::Int(1))
}

/// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE string]`: cursor 0 starts; a returned 0
/// means done. Keys are visited in key order; a key written during the scan may or may not
/// be returned, as in Redis.
fn scan(sh: &Shared, s: &mut Session, a: &[Bytes]) -> CmdResult {
    if a.is_empty() {
        return Err(wrong_args("scan"));
    }
    let cursor: u64 = std::str::from_utf8(&a[0])
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| Reply::err("invalid cursor"))?;
    let (mut pat, mut count, mut i) = (None, 10usize, 1);
    while i < a.len() {
        if i + 1 >= a.len() {
            return Err(syntax());
        }
        if eq(&a[i], "match") {
            pat = Some(a[i + 1].clone());
        } else if eq(&a[i], "count") {
            count = usize::try_from(int(&a[i + 1])?)
                .ok()
                .filter(|&c| c > 0)
                .ok_or_else(syntax)?
                .min(MAX_SCAN_COUNT);
        } else if eq(&a[i], "type") {
            if !eq(&a[i + 1], "string") {
                return Ok(Reply::Array(vec![
                    Reply::bulk("0"),
                    Reply::Array(Vec::new()),
                ]));
            }
        } else {
            return Err(syntax());
        }
        i += 2;
    }
    let after = match cursor {
        0 => None,
        c => Some(
            s.cursors
                .remove(&c)
                .ok_or_else(|| Reply::err("invalid cursor"))?,
        ),
    };
    let (page, resume) = sh.store.scan_keys(after.as_deref(), count)?;
    let next = match resume {
        Some(last) => {
            s.next_cursor += 1;
            s.cursors.insert(s.next_cursor, last);
            while s.cursors.len() > MAX_CURSORS {
                s.cursors.pop_first();
            }
            s.next_cursor
        }
        None => 0,
    };
    let keys = page
        .into_iter()
        .filter(|k| pat.as_ref().is_none_or(|p| pattern::matches(p, k)))
        .map(Reply::bulk)
        .collect();
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(keys),
    ]))
}

/// The matching keys, from a walk of the whole key space that keeps only keys (values are
/// dropped as the walk passes them, see [`crate::store::Store::live_keys`]); a reply that
/// would pass the connection's output limit is an error instead (use `SCAN`).
fn keys(sh: &Shared, s: &Session, pat: &[u8]) -> CmdResult {
    let mut out = Vec::new();
    let mut size = 0usize;
    for k in sh.store.live_keys()? {
        let k = k?;
        if pattern::matches(pat, &k) {
            size = size.saturating_add(REPLY_OVERHEAD + k.len());
            if size > s.output_budget {
                return Err(over_output_limit("KEYS", sh));
            }
            out.push(Reply::bulk(k));
        }
    }
    Ok(Reply::Array(out))
}

/// Exact count of live keys, by a walk of the key space (the engine keeps no key count)
/// that holds one entry at a time.
fn dbsize(sh: &Shared) -> CmdResult {
    let mut n = 0i64;
    for k in sh.store.live_keys()? {
        k?;
        n += 1;
    }
    Ok(Reply::Int(n))
}

/// Deletes every key, expired ones included, in batches. Not atomic with respect to
/// concurrent writers: a key written during the flush may survive it.
fn flushdb(sh: &Shared, a: &[Bytes]) -> CmdResult {
    match a {
        [] => {}
        [m] if eq(m, "sync") || eq(m, "async") => {}
        _ => return Err(syntax()),
    }
    let db = sh.store.db();
    loop {
        let mut b = WriteBatch::new();
        for kv in db
            .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)?
            .take(1000)
        {
            b.delete(&kv?.0);
        }
        if b.is_empty() {
            break;
        }
        sh.store.write(b, sync(sh))?;
    }
    Ok(Reply::ok())
}

fn client_name(n: &[u8]) -> Result<String, Reply> {
    if n.iter().any(|&c| c <= b' ' || c > b'~') {
        return Err(Reply::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(text(n))
}

fn client(sh: &Shared, s: &mut Session, a: &[Bytes]) -> CmdResult {
    let Some(sub) = a.first() else {
        return Err(wrong_args("client"));
    };
    let sub = text(sub).to_ascii_lowercase();
    match (sub.as_str(), &a[1..]) {
        ("setname", [n]) => {
            let n = client_name(n)?;
            sh.set_client_name(s, (!n.is_empty()).then_some(n));
            Ok(Reply::ok())
        }
        ("getname", []) => Ok(s.name.clone().map_or(Reply::Nil, Reply::bulk)),
        ("id", []) => Ok(Reply::Int(s.id as i64)),
        ("list", []) => Ok(Reply::Text(sh.client_list())),
        ("info", []) => Ok(Reply::Text(sh.client_line(s.id))),
        // Client libraries announce themselves; accepted and not kept.
        ("setinfo", [_, _]) => Ok(Reply::ok()),
        ("setname" | "getname" | "id" | "list" | "info" | "setinfo", _) => {
            Err(wrong_args(&format!("client|{sub}")))
        }
        _ => Err(Reply::err(format!(
            "unknown subcommand '{sub}'. Try CLIENT HELP."
        ))),
    }
}

/// The parameters CONFIG GET shows: name, current value, and whether CONFIG SET may
/// change it.
fn config_params(sh: &Shared) -> Vec<(&'static str, String, bool)> {
    let o = sh.store.db().options();
    let st = &sh.settings;
    vec![
        ("appendfsync", st.appendfsync().name().to_string(), true),
        ("appendonly", "yes".into(), false),
        ("save", String::new(), false),
        ("databases", "1".into(), false),
        ("requirepass", st.requirepass().unwrap_or_default(), true),
        ("maxclients", st.maxclients().to_string(), true),
        (
            "proto-max-bulk-len",
            st.max_request_bytes().to_string(),
            true,
        ),
        (
            "halflife-client-output-limit",
            st.max_output_bytes().to_string(),
            true,
        ),
        ("halflife-gc-policy", o.gc.to_string(), false),
        ("halflife-memtable-size", o.memtable_size.to_string(), false),
        (
            "halflife-block-cache-size",
            o.block_cache_capacity.to_string(),
            false,
        ),
        ("halflife-min-blob-size", o.min_blob_size.to_string(), false),
        (
            "halflife-blob-file-size",
            o.blob_file_size.to_string(),
            false,
        ),
        ("halflife-growth-factor", o.growth_factor.to_string(), false),
        ("halflife-cache-warming", o.cache_warming.to_string(), false),
    ]
}

fn config(sh: &Shared, a: &[Bytes]) -> CmdResult {
    let Some(sub) = a.first() else {
        return Err(wrong_args("config"));
    };
    let args = &a[1..];
    if eq(sub, "get") {
        if args.is_empty() {
            return Err(wrong_args("config|get"));
        }
        let params = config_params(sh);
        let pairs = params
            .into_iter()
            .filter(|(n, _, _)| {
                args.iter()
                    .any(|p| pattern::matches(&p.to_ascii_lowercase(), n.as_bytes()))
            })
            .map(|(n, v, _)| (Reply::bulk(n), Reply::bulk(v)))
            .collect();
        Ok(Reply::Map(pairs))
    } else if eq(sub, "set") {
        if args.is_empty() || !args.len().is_multiple_of(2) {
            return Err(wrong_args("config|set"));
        }
        let params = config_params(sh);
        // Check every pair before applying any, as Redis does.
        let mut apply: Vec<Box<dyn Fn()>> = Vec::new();
        for kv in args.chunks(2) {
            let name = text(&kv[0]).to_ascii_lowercase();
            let value = text(&kv[1]);
            let bad = |why: String| {
                Reply::err(format!(
                    "CONFIG SET failed (possibly related to argument '{name}') - {why}"
                ))
            };
            match params.iter().find(|(n, _, _)| *n == name) {
                None => {
                    return Err(Reply::err(format!(
                        "Unknown option or number of arguments for CONFIG SET - '{name}'"
                    )))
                }
                Some((_, _, false)) => {
                    return Err(bad(
                        "fixed while the database is open; restart halflife serve with the matching option".into(),
                    ))
                }
                Some(_) => {}
            }
            let settings = sh.settings.clone();
            match name.as_str() {
                "appendfsync" => {
                    let v: crate::AppendFsync = value.parse().map_err(bad)?;
                    apply.push(Box::new(move || settings.set_appendfsync(v)));
                }
                "requirepass" => {
                    apply.push(Box::new(move || {
                        settings.set_requirepass(Some(value.clone()))
                    }));
                }
                "maxclients" | "proto-max-bulk-len" | "halflife-client-output-limit" => {
                    let n: usize = value
                        .parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| bad("argument must be a positive integer".into()))?;
                    match name.as_str() {
                        "maxclients" => apply.push(Box::new(move || settings.set_maxclients(n))),
                        "proto-max-bulk-len" => {
                            apply.push(Box::new(move || settings.set_max_request_bytes(n)))
                        }
                        _ => apply.push(Box::new(move || settings.set_max_output_bytes(n))),
                    }
                }
                _ => unreachable!("every changeable parameter is handled"),
            }
        }
        apply.iter().for_each(|f| f());
        Ok(Reply::ok())
    } else if eq(sub, "resetstat") {
        sh.stats.reset();
        Ok(Reply::ok())
    } else {
        Err(Reply::err(format!(
            "unknown subcommand '{}'. Try CONFIG HELP.",
            text(sub)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::int;

    #[test]
    fn integers_are_strict() {
        assert_eq!(int(b"42"), Ok(42));
        assert_eq!(int(b"-7"), Ok(-7));
        assert_eq!(int(b"0"), Ok(0));
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"+1",
            b"01",
            b"1.5",
            b"abc",
            b"99999999999999999999",
        ] {
            assert!(int(bad).is_err(), "{:?}", bad);
        }
    }
}
