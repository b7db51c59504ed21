//! Command dispatch: one function per command, each taking its arguments as sent and
//! returning the reply. Runs on the connection's task when cheap ([`crate::cheap`]), else on
//! a blocking-pool thread (engine calls may block).

use crate::config::AppendFsync;
use crate::pattern;
use crate::protocol::Reply;
use crate::record;
use crate::record::{Kind, Meta};
use crate::server::Shared;
use crate::store::{Batch, StoreError};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::time::Instant;

/// What the connection does after a command's reply is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    /// `QUIT`: send the reply, then close.
    Close,
    /// `SHUTDOWN`: close without a reply and stop the server.
    Shutdown,
    /// `PSYNC`: the connection becomes a replica's ([`crate::repl::primary`]), with the
    /// arguments in [`Session::psync`].
    Replicate,
}

/// Open `SCAN` cursors a connection keeps; older ones are forgotten.
const MAX_CURSORS: usize = 256;

/// Most keys one `SCAN` call examines: a larger `COUNT` is clamped to it (`COUNT` is a hint
/// in Redis too), so that one call's work and reply stay bounded however much a client asks.
pub const MAX_SCAN_COUNT: usize = 1000;

/// Most characters of a client's bytes echoed into an error (Redis: 128).
const MAX_ECHO: usize = 128;

/// Bytes of a command's name looked at (longer than every command's name).
const MAX_NAME: usize = 32;

/// Bytes a bulk string's framing adds to it in a reply, at most (`$<len>\r\n...\r\n`).
pub const REPLY_OVERHEAD: usize = 16;

/// The error of a command whose reply grows with the data (`MGET`, `KEYS`) when the reply
/// would pass what the connection may still buffer ([`Session::output_budget`]).
pub fn over_output_limit(cmd: &str, sh: &Shared) -> Reply {
    Reply::err(format!(
        "{cmd} reply would exceed the connection's output limit of {} bytes (halflife-client-output-limit)",
        sh.settings.max_output_bytes()
    ))
}

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
    /// Database, transaction and watch state of the data-type commands.
    pub ext: crate::cmd::SessionExt,
    /// A replica's `REPLCONF listening-port`.
    pub repl_port: u16,
    /// The arguments of the `PSYNC` that made this connection a replica's.
    pub psync: Option<Vec<Bytes>>,
    /// `CLIENT REPLY`'s state.
    pub replies: crate::client::Replies,
    /// When the last command ended, while the connection runs a batch of them: the next
    /// command's time counts from there, so that each command reads the clock once
    /// ([`crate::cmdstats`]). `None` outside a batch.
    pub clock: Option<Instant>,
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
            ext: Default::default(),
            repl_port: 0,
            psync: None,
            replies: Default::default(),
            clock: None,
        }
    }

    /// A new connection's session (and `RESET`'s): as in Redis, authenticated when no
    /// password is set, and it stays so when `CONFIG SET requirepass` sets one later (or
    /// an `AUTH` of it fails).
    pub fn connected(id: u64, sh: &Shared) -> Session {
        Session {
            authed: sh.settings.requirepass().is_none(),
            ..Session::new(id)
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

/// A command's name, lowercased, to look it up. No command's name is longer than
/// [`MAX_NAME`] bytes, so a longer one (a client's megabytes) is not copied whole: cut, it
/// still matches nothing (and [`unknown`] echoes the client's bytes, not this).
pub fn command_name(b: &[u8]) -> String {
    text(&b[..b.len().min(MAX_NAME)]).to_ascii_lowercase()
}

/// Runs one command.
pub fn execute(sh: &Shared, s: &mut Session, args: &[Bytes]) -> (Reply, Outcome) {
    let name = command_name(&args[0]);
    let refuse = |r: Reply| {
        sh.cmdstats.rejected(&name, args, &r);
        (r, Outcome::Continue)
    };
    // `authed` first: it is true for every connection while no password is set.
    if !s.authed
        && sh.settings.requirepass().is_some()
        && !matches!(name.as_str(), "auth" | "hello" | "quit" | "reset")
    {
        return refuse(Reply::Error("NOAUTH Authentication required.".into()));
    }
    // Held to the end of the command: see `cluster::route::Admitted`.
    let _moving = match crate::cluster::admit(sh, s, &name, args) {
        Ok(g) => g,
        Err(r) => return refuse(r),
    };
    if sh.store.is_replica() && sh.settings.replica_read_only() && is_write(&name) {
        // Refused when queued too, as Redis does: the transaction then fails as a whole.
        if s.ext.multi.is_some() {
            s.ext.multi_failed = true;
        }
        return refuse(Reply::Error(
            "READONLY You can't write against a read only replica.".into(),
        ));
    }
    match crate::cmd::multi::queue(s, &name, args) {
        Some(r @ Reply::Error(_)) => return refuse(r),
        Some(queued) => return (queued, Outcome::Continue),
        None => {}
    }
    // EXEC and REPLICAOF take the exec lock exclusively themselves, WAIT and CLUSTERX
    // (whose MIGRATE ... SYNC waits for a job that takes the exec lock), which may block
    // for long, hold none, and MIGRATE takes it after the cluster's migration lock (the
    // order every command on a migrating slot takes them in); every other command holds
    // it shared.
    let exclusive = matches!(
        name.as_str(),
        "exec" | "replicaof" | "slaveof" | "wait" | "migrate" | "clusterx"
    );
    // A run of combined commands holds it for all of them (`combine::run`).
    let _g = (!exclusive && s.ext.combining.is_none()).then(|| sh.store.command_lock());
    run_named(sh, s, &name, args)
}

/// Whether the command table flags `name` as a write.
pub fn is_write(name: &str) -> bool {
    crate::cmd::table::find(name).is_some_and(|c| c.flags.split(' ').any(|f| f == "write"))
}

/// Runs one command without the exec lock (`EXEC` runs its queued commands this way).
pub fn run(sh: &Shared, s: &mut Session, args: &[Bytes]) -> (Reply, Outcome) {
    let name = command_name(&args[0]);
    run_named(sh, s, &name, args)
}

/// Runs the command and counts it ([`crate::cmdstats`]): an unknown command or a wrong
/// number of arguments as rejected, anything else as a call that took its time.
fn run_named(sh: &Shared, s: &mut Session, name: &str, args: &[Bytes]) -> (Reply, Outcome) {
    let spec = crate::cmd::table::find_numbered(name);
    let start = s.clock.take().unwrap_or_else(Instant::now);
    let (reply, outcome) = run_uncounted(sh, s, name, spec.map(|(_, spec)| spec), args);
    let end = Instant::now();
    s.clock = Some(end);
    match spec {
        Some((number, spec)) if spec.arity_ok(args.len()) => {
            if let Some(b) = s.ext.blocked.as_mut() {
                b.command = spec.name;
            }
            sh.cmdstats.ran(number, args, &reply, end - start);
        }
        _ => sh.cmdstats.rejected(name, args, &reply),
    }
    (reply, outcome)
}

fn run_uncounted(
    sh: &Shared,
    s: &mut Session,
    name: &str,
    spec: Option<&crate::cmd::table::Spec>,
    args: &[Bytes],
) -> (Reply, Outcome) {
    if let Some(r) = spec.and_then(|spec| crate::cmd::dispatch(sh, s, spec, args)) {
        return (r.unwrap_or_else(|e| e), Outcome::Continue);
    }
    let a = &args[1..];
    let r = match name {
        "ping" => ping(a),
        "echo" => exact(name, a, 1).map(|_| Reply::Bulk(a[0].clone())),
        "quit" => return (Reply::ok(), Outcome::Close),
        "shutdown" => return (Reply::ok(), Outcome::Shutdown),
        "hello" => hello(sh, s, a),
        "auth" => auth(sh, s, a),
        "scan" => scan(sh, s, a),
        "keys" => exact(name, a, 1).and_then(|_| keys(sh, s, &a[0])),
        "dbsize" => exact(name, a, 0).and_then(|_| dbsize(sh, s)),
        "info" => Ok(Reply::Text(crate::info::render(sh, a))),
        "config" => config(sh, a),
        "client" => crate::client::client(sh, s, a),
        "reset" => exact(name, a, 0).and_then(|_| crate::client::reset(sh, s)),
        "replicaof" | "slaveof" => crate::repl::replicaof(sh, a),
        "role" => exact(name, a, 0).and_then(|_| crate::repl::role(sh)),
        "wait" => crate::repl::wait(sh, a),
        "replconf" => crate::repl::replconf(s, a),
        "psync" => {
            // `PSYNC <replid> <offset>`, and halflife's primary sequence number third.
            if !(2..=3).contains(&a.len()) {
                return (wrong_args("psync"), Outcome::Continue);
            }
            s.psync = Some(a.to_vec());
            return (Reply::ok(), Outcome::Replicate);
        }
        "sync" => Err(Reply::err(
            "SYNC is not supported: a halflife replica sends PSYNC (and needs a halflife primary)",
        )),
        _ => Err(unknown(&args[0], a)),
    };
    (r.unwrap_or_else(|e| e), Outcome::Continue)
}

/// Redis's reply to an unknown command. The name and the arguments are the client's bytes:
/// they are cut to [`MAX_ECHO`] characters (the arguments together, as Redis) and carry no
/// CR or LF (an error is one line; [`crate::protocol::one_line`] makes sure of it for every
/// error, and [`echo`] does here already so that the cut counts what is shown).
pub fn unknown(cmd: &[u8], a: &[Bytes]) -> Reply {
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

fn sync(sh: &Shared) -> bool {
    sh.settings.appendfsync() == AppendFsync::Always
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
            name = Some(crate::client::client_name(&a[i + 1])?);
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
        _ => return Err(syntax()),
    }
    Ok(Reply::ok())
}

/// Whether `cmd` is a `SET key value` without options that the engine will accept, so that
/// it can join [`set_many`]; anything else (options, limits, authentication, a cluster
/// redirection) goes through [`execute`] and gets its own reply.
pub fn is_plain_set(sh: &Shared, s: &Session, cmd: &[Bytes]) -> bool {
    let engine = sh.store.db();
    let o = engine.options();
    cmd.len() == 3
        && eq(&cmd[0], "set")
        && (s.authed || sh.settings.requirepass().is_none())
        && !sh.store.is_replica()
        && s.ext.multi.is_none()
        && s.replies.on()
        && cmd[1].len() + record::META_KEY_OVERHEAD <= o.max_key_size
        && cmd[2].len() + record::STRING_HEADER <= o.max_value_size
        && crate::cluster::serves(sh, s, cmd)
}

/// Consecutive plain SETs of one connection (a pipeline) as one atomic engine write: one
/// WAL record and, under `appendfsync always`, one sync for all of them instead of one
/// group-commit round each. Replies as if they had run one by one.
pub fn set_many(sh: &Shared, s: &Session, cmds: &[Vec<Bytes>]) -> Vec<Reply> {
    let keys: Vec<&Bytes> = cmds.iter().map(|c| &c[1]).collect();
    let _x = sh.store.command_lock();
    let _g = sh.store.lock_shared(s.ext.db, &keys);
    let mut b = Batch::new();
    for c in cmds {
        b.put_meta(s.ext.db, &c[1], &Meta::string(c[2].to_vec(), None));
    }
    let reply = match sh.store.write(b, sync(sh)) {
        Ok(_) => Reply::ok(),
        Err(e) => e.into(),
    };
    vec![reply; cmds.len()]
}

/// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE string]`: cursor 0 starts; a returned 0
/// means done. Keys are visited in key order; a key written during the scan may or may not
/// be returned, as in Redis.
fn scan(sh: &Shared, s: &mut Session, a: &[Bytes]) -> CmdResult {
    if a.is_empty() {
        return Err(wrong_args("scan"));
    }
    let mut kind = None;
    let crate::cmd::ScanArgs { cursor, pat, count } =
        crate::cmd::scan_args(&a[0], &a[1..], MAX_SCAN_COUNT, |o, v| {
            // An unknown type matches no key, as in Redis.
            Ok(eq(o, "type") && {
                kind = Some(Kind::from_name(v));
                true
            })
        })?;
    let after = match cursor {
        0 => None,
        c => Some(
            s.cursors
                .remove(&c)
                .ok_or_else(|| Reply::err("invalid cursor"))?,
        ),
    };
    let (page, resume) = sh.store.scan(s.ext.db, after.as_deref(), count)?;
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
        .filter(|(k, _)| pat.as_ref().is_none_or(|p| pattern::matches(p, k)))
        .filter(|(_, h)| kind.is_none_or(|t| t == Some(h.kind)))
        .map(|(k, _)| Reply::bulk(k))
        .collect();
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(keys),
    ]))
}

/// The matching keys of the selected database, from a walk of its metadata records that
/// keeps only keys (see [`crate::store::Store::live_keys`] for what it reads); a reply that
/// would pass the connection's output limit is an error instead (use `SCAN`).
fn keys(sh: &Shared, s: &Session, pat: &[u8]) -> CmdResult {
    let mut out = Vec::new();
    let mut size = 0usize;
    for kv in sh.store.live_keys(s.ext.db)? {
        let (k, _) = kv?;
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

/// Exact count of the selected database's live keys, by a walk of its metadata records
/// (the engine keeps no key count) that holds one entry at a time.
fn dbsize(sh: &Shared, s: &Session) -> CmdResult {
    let mut n = 0i64;
    for kv in sh.store.live_keys(s.ext.db)? {
        kv?;
        n += 1;
    }
    Ok(Reply::Int(n))
}

fn yes_no(on: bool) -> &'static str {
    if on {
        "yes"
    } else {
        "no"
    }
}

/// The parameters CONFIG GET shows: name, current value, and whether CONFIG SET may
/// change it.
fn config_params(sh: &Shared) -> Vec<(&'static str, String, bool)> {
    let engine = sh.store.db();
    let o = engine.options();
    let st = &sh.settings;
    let compat = st.compat().into_iter().map(|(k, v)| (k, v, true));
    let mut params = vec![
        ("appendfsync", st.appendfsync().name().to_string(), true),
        ("appendonly", "yes".into(), false),
        ("databases", record::DATABASES.to_string(), false),
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
        ("masterauth", st.masterauth().unwrap_or_default(), true),
        (
            "replica-read-only",
            yes_no(st.replica_read_only()).into(),
            true,
        ),
        (
            "slave-read-only",
            yes_no(st.replica_read_only()).into(),
            true,
        ),
        (
            "repl-backlog-size",
            st.repl_backlog_bytes().to_string(),
            true,
        ),
        (
            "latency-tracking",
            yes_no(sh.cmdstats.tracking()).into(),
            true,
        ),
        (
            "latency-tracking-info-percentiles",
            sh.cmdstats.percentiles_text(),
            true,
        ),
        ("halflife-gc-policy", o.vlog.gc.to_string(), false),
        (
            "halflife-memtable-size",
            o.tree.memtable_size.to_string(),
            false,
        ),
        (
            "halflife-block-cache-size",
            o.cache.block_cache_capacity.to_string(),
            false,
        ),
        (
            "halflife-min-blob-size",
            o.vlog.min_blob_size.to_string(),
            false,
        ),
        (
            "halflife-blob-file-size",
            o.vlog.blob_file_size.to_string(),
            false,
        ),
        (
            "halflife-growth-factor",
            o.tree.growth_factor.to_string(),
            false,
        ),
        (
            "halflife-cache-warming",
            o.cache.cache_warming.to_string(),
            false,
        ),
    ];
    params.extend(compat);
    params
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
                "masterauth" => {
                    apply.push(Box::new(move || {
                        settings.set_masterauth(Some(value.clone()))
                    }));
                }
                "replica-read-only" | "slave-read-only" | "latency-tracking" => {
                    let on = match value.to_ascii_lowercase().as_str() {
                        "yes" => true,
                        "no" => false,
                        _ => return Err(bad("argument must be 'yes' or 'no'".into())),
                    };
                    if name == "latency-tracking" {
                        apply.push(Box::new(move || sh.cmdstats.set_tracking(on)));
                    } else {
                        apply.push(Box::new(move || settings.set_replica_read_only(on)));
                    }
                }
                "latency-tracking-info-percentiles" => {
                    let p =
                        crate::cmdstats::CommandStats::parse_percentiles(&value).map_err(bad)?;
                    apply.push(Box::new(move || sh.cmdstats.set_percentiles(p.clone())));
                }
                "repl-backlog-size" => {
                    let n: usize =
                        value
                            .parse()
                            .ok()
                            .filter(|&n| n >= 16 << 10)
                            .ok_or_else(|| {
                                bad("argument must be a number of bytes, at least 16384".into())
                            })?;
                    apply.push(Box::new(move || settings.set_repl_backlog_bytes(n)));
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
                _ => {
                    if !crate::config::compat_value_ok(&name, &value) {
                        return Err(bad("argument couldn't be parsed into an integer".into()));
                    }
                    let settings = settings.clone();
                    apply.push(Box::new(move || settings.set_compat(&name, value.clone())));
                }
            }
        }
        apply.iter().for_each(|f| f());
        sh.store
            .log_mut()
            .set_capacity(sh.settings.repl_backlog_bytes());
        Ok(Reply::ok())
    } else if eq(sub, "resetstat") {
        sh.stats.reset();
        sh.cmdstats.reset();
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
