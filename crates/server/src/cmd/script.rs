//! The scripting commands over the server: `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`,
//! `SCRIPT`, `FCALL`, `FCALL_RO`, `FUNCTION`, and the [`ScriptHost`] a script's
//! `redis.call` goes through.
//!
//! A script runs as `EXEC` runs a transaction: holding the exec lock exclusively, so no
//! other client's command runs between its calls, with its writes between `MULTI` and
//! `EXEC` markers in the replication stream so that a replica applies them as one batch.
//! Its commands run as a separate client's would (their own `SELECT`, RESP2 unless the
//! script asks for 3, no blocking). Other clients wait for the lock, and once the script
//! has run past `busy-reply-threshold` are answered `-BUSY` instead ([`command_lock`]);
//! `SCRIPT KILL`, `FUNCTION KILL` and `FUNCTION STATS` never wait.
//!
//! Function libraries are kept in the database (one record per library,
//! [`record::function_key`]): `FUNCTION LOAD` and the others write them there, so they
//! survive a restart, replicate and come with a full sync; the registry of loaded
//! libraries follows the records ([`crate::script::scripting::Scripting::libraries`]).

use crate::cmd::table::{c, Flags, Spec};
use crate::cmd::{eq, int, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::record;
use crate::script::eval::noscript;
use crate::script::library::{Libraries, RestorePolicy};
use crate::script::scripting::Registry;
use crate::script::{Activity, CommandInfo, Running, ScriptHost};
use crate::session::Session;
use crate::shared::Shared;
use crate::store::Batch;
use bytes::Bytes;
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    c!("eval", -3, [RUNS_SCRIPT NOSCRIPT SKIP_MONITOR STALE MAY_REPLICATE NO_MANDATORY_KEYS MOVABLEKEYS OWN_LOCK], 0, 0, 0, Scripting, eval, find_keys = script_keys),
    c!("evalsha", -3, [RUNS_SCRIPT NOSCRIPT SKIP_MONITOR STALE MAY_REPLICATE NO_MANDATORY_KEYS MOVABLEKEYS OWN_LOCK], 0, 0, 0, Scripting, evalsha, find_keys = script_keys),
    c!("eval_ro", -3, [RUNS_SCRIPT NOSCRIPT SKIP_MONITOR STALE READONLY NO_MANDATORY_KEYS MOVABLEKEYS OWN_LOCK], 0, 0, 0, Scripting, eval_ro, find_keys = script_keys),
    c!("evalsha_ro", -3, [RUNS_SCRIPT NOSCRIPT SKIP_MONITOR STALE READONLY NO_MANDATORY_KEYS MOVABLEKEYS OWN_LOCK], 0, 0, 0, Scripting, evalsha_ro, find_keys = script_keys),
    c!("fcall", -3, [RUNS_SCRIPT NOSCRIPT SKIP_MONITOR STALE MAY_REPLICATE NO_MANDATORY_KEYS MOVABLEKEYS OWN_LOCK], 0, 0, 0, Scripting, fcall, find_keys = script_keys),
    c!("fcall_ro", -3, [RUNS_SCRIPT NOSCRIPT SKIP_MONITOR STALE READONLY NO_MANDATORY_KEYS MOVABLEKEYS OWN_LOCK], 0, 0, 0, Scripting, fcall_ro, find_keys = script_keys),
    // ALLOW_BUSY and OWN_LOCK: KILL and STATS answer while a script runs; the other
    // subcommands take the lock (or answer -BUSY) themselves.
    c!("script", -2, [NOSCRIPT ALLOW_BUSY OWN_LOCK SUBCOMMANDS], 0, 0, 0, Scripting, script),
    c!("function", -2, [NOSCRIPT ALLOW_BUSY OWN_LOCK SUBCOMMANDS], 0, 0, 0, Scripting, function),
];

/// `EVAL`'s and `FCALL`'s keys: the `numkeys` arguments after the third word.
fn script_keys(a: &[Bytes]) -> Result<Vec<usize>, Reply> {
    let n = numkeys(&a[2], a.len() - 3, false)?;
    Ok((3..3 + n).collect())
}

/// `numkeys` of `EVAL`/`FCALL` with `rest` arguments after it.
fn numkeys(b: &[u8], rest: usize, fcall: bool) -> Result<usize, Reply> {
    let n = match int(b) {
        Ok(n) => n,
        Err(_) if fcall => return Err(Reply::err("Bad number of keys provided")),
        Err(e) => return Err(e),
    };
    if n < 0 {
        return Err(Reply::err("Number of keys can't be negative"));
    }
    if n as u64 > rest as u64 {
        return Err(Reply::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    Ok(n as usize)
}

fn threshold(sh: &Shared) -> u64 {
    sh.settings.busy_reply_ms()
}

/// How long a client waits for the exec lock before it looks again whether a script has
/// become busy.
const BUSY_POLL: Duration = Duration::from_millis(10);

/// The exec lock held shared, as every command holds it: waited for, unless a script
/// has run past `busy-reply-threshold`, when the command is answered `-BUSY`, or runs
/// without the lock if it is `ALLOW_BUSY` (`None`).
pub fn command_lock<'a>(
    sh: &'a Shared,
    spec: Option<&Spec>,
) -> Result<Option<RwLockReadGuard<'a, ()>>, Reply> {
    let allowed = spec.is_some_and(|s| s.has(Flags::ALLOW_BUSY));
    loop {
        if let Some(r) = sh.scripting.activity.busy(threshold(sh)) {
            return match allowed {
                true => Ok(None),
                false => Err(Activity::busy_error(&r)),
            };
        }
        if let Some(g) = sh.store.try_command_lock_for(BUSY_POLL) {
            return Ok(Some(g));
        }
    }
}

/// `-BUSY` for a command that is not `ALLOW_BUSY` while a script has run past
/// `busy-reply-threshold`.
pub fn busy_refusal(sh: &Shared, spec: Option<&Spec>) -> Option<Reply> {
    if spec.is_some_and(|s| s.has(Flags::ALLOW_BUSY)) {
        return None;
    }
    let r = sh.scripting.activity.busy(threshold(sh))?;
    Some(Activity::busy_error(&r))
}

/// The exec lock held exclusively for a script, unless the caller runs inside `EXEC` or
/// in a group of the script thread (which hold it already); `-BUSY` while another script
/// is busy.
fn exec_lock<'a>(sh: &'a Shared, s: &Session) -> Result<Option<RwLockWriteGuard<'a, ()>>, Reply> {
    if s.ext.in_exec || s.ext.script_group.is_some() {
        return Ok(None);
    }
    loop {
        if let Some(r) = sh.scripting.activity.busy(threshold(sh)) {
            return Err(Activity::busy_error(&r));
        }
        if let Some(g) = sh.store.try_exec_lock_for(BUSY_POLL) {
            return Ok(Some(g));
        }
    }
}

/// The exec lock for a group of the script thread ([`super::lane`]); `None` while a
/// script is busy (inside `EXEC`), when each batch of the group is to run on its own.
pub fn group_lock(sh: &Shared) -> Option<RwLockWriteGuard<'_, ()>> {
    loop {
        if sh.scripting.activity.busy(threshold(sh)).is_some() {
            return None;
        }
        if let Some(g) = sh.store.try_exec_lock_for(BUSY_POLL) {
            return Some(g);
        }
    }
}

/// The shared lock for a `SCRIPT`/`FUNCTION` subcommand that reads or writes the
/// registry (not inside `EXEC`, which holds the exclusive one).
fn registry_lock<'a>(
    sh: &'a Shared,
    s: &Session,
) -> Result<Option<RwLockReadGuard<'a, ()>>, Reply> {
    if s.ext.in_exec {
        return Ok(None);
    }
    command_lock(sh, None)
}

/// The connection a script's commands run on.
struct Host<'a> {
    sh: &'a Shared,
    session: Session,
    /// Keys may come from one slot only (cluster mode, unless the script allows more):
    /// the slot the first key came from.
    slot: Option<u16>,
    cross_slot: bool,
    /// Write the `MULTI` marker before the first write (not inside `EXEC`, whose markers
    /// are there already), and whether it was written.
    wrap: bool,
    wrapped: bool,
}

impl ScriptHost for Host<'_> {
    fn command(&self, name: &str) -> Option<CommandInfo> {
        let spec = crate::cmd::table::find(name.as_bytes())?;
        Some(CommandInfo {
            name: spec.name,
            arity: spec.arity,
            write: spec.has(Flags::WRITE),
            // What takes the exec lock itself or waits without it (MIGRATE, WAIT) cannot
            // run under the lock the script holds, as inside EXEC.
            noscript: spec.has(Flags::NOSCRIPT)
                || spec.has(Flags::NO_MULTI)
                || spec.has(Flags::OWN_LOCK),
        })
    }

    fn admit(&mut self, cmd: &CommandInfo, args: &[Bytes]) -> Result<(), String> {
        let sh = self.sh;
        if cmd.write && sh.store.is_replica() && sh.settings.replica_read_only() {
            return Err("READONLY You can't write against a read only replica.".into());
        }
        if sh.cluster.is_none() {
            return Ok(());
        }
        if !crate::cmd::cluster::route::serves(sh, &self.session, args) {
            return Err("ERR Script attempted to access a non local key in a cluster node".into());
        }
        let spec = crate::cmd::table::find(cmd.name.as_bytes()).expect("looked up");
        let first = spec.key_indexes(args).ok().and_then(|k| k.first().copied());
        if let (Some(i), false) = (first, self.cross_slot) {
            let slot = crate::cluster::slot::key_slot(&args[i]);
            match self.slot {
                None => self.slot = Some(slot),
                Some(s) if s != slot => {
                    return Err(
                        "ERR Script attempted to access keys that do not hash to the same slot"
                            .into(),
                    )
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn call(&mut self, cmd: &CommandInfo, args: &[Bytes]) -> Reply {
        if cmd.write && self.wrap && !self.wrapped {
            self.sh.store.log_command(&[b"MULTI"]);
            self.wrapped = true;
        }
        crate::cmd::dispatch::run(self.sh, &mut self.session, args).0
    }

    fn rejected(&mut self, cmd: Option<&CommandInfo>, args: &[Bytes], error: &str) {
        self.sh
            .cmdstats
            .rejected(cmd.map(|c| c.name), args, &Reply::Error(error.into()));
    }
}

/// The command words `FUNCTION STATS` shows of a running script (a few, cut short).
fn shown(args: &[Bytes]) -> Vec<Bytes> {
    args.iter()
        .take(8)
        .map(|a| a.slice(..a.len().min(128)))
        .collect()
}

/// Checks a script's flags against the server's state (Redis's `scriptPrepareForRun`):
/// whether it runs read-only.
fn prepare(cx: &Ctx, flags: crate::script::Flags, ro: bool) -> Result<bool, Reply> {
    if flags.compat {
        return Ok(ro);
    }
    if flags.no_cluster && cx.sh.cluster.is_some() {
        return Err(Reply::err(
            "Can not run script on cluster, 'no-cluster' flag is set.",
        ));
    }
    if !flags.no_writes {
        if cx.sh.store.is_replica() && cx.sh.settings.replica_read_only() {
            return Err(Reply::Error(
                "READONLY Can not run script with write flag on readonly replica".into(),
            ));
        }
        if ro {
            return Err(Reply::err(
                "Can not execute a script with write flag using *_ro command.",
            ));
        }
    }
    Ok(ro || flags.no_writes)
}

/// Runs a script for the caller: under the exec lock, marked running, with its writes
/// wrapped for replication. `run` gets the host.
fn run_script(
    cx: &mut Ctx,
    name: String,
    eval: bool,
    cross_slot: bool,
    command: Vec<Bytes>,
    keys: &[Bytes],
    run: impl FnOnce(&mut Host) -> crate::script::sandbox::Outcome,
) -> CmdResult {
    let sh = cx.sh;
    let mut session = Session::new(0);
    session.authed = true;
    session.ext.db = cx.s.ext.db;
    session.ext.in_exec = true;
    session.ext.in_script = true;
    session.ext.cluster_readonly = cx.s.ext.cluster_readonly;
    session.ext.cluster_asking = cx.s.ext.cluster_asking;
    // In a group of the script thread the group writes the stream's MULTI (once, at the
    // first write of any of its scripts) and EXEC.
    let group = cx.s.ext.script_group;
    let mut host = Host {
        sh,
        session,
        slot: keys.first().map(|k| crate::cluster::slot::key_slot(k)),
        cross_slot,
        wrap: !cx.s.ext.in_exec,
        wrapped: group.is_some_and(|g| g.wrapped),
    };
    let _run = sh.scripting.activity.start(Running {
        name,
        eval,
        command,
        started: Instant::now(),
    });
    // The script's writes are held back and applied as one engine batch when it ends
    // (crate::deferred): a script is atomic on disk too.
    let held = sh.store.defer();
    let out = run(&mut host);
    let applied = held.finish();
    match cx.s.ext.script_group.as_mut() {
        Some(g) => g.wrapped = host.wrapped,
        None if host.wrapped => sh.store.log_command(&[b"EXEC"]),
        None => {}
    }
    applied?;
    if out.counted {
        cx.s.error_counted = true;
    }
    Ok(out.reply)
}

fn eval_generic(cx: &mut Ctx, a: &[Bytes], sha: bool, ro: bool) -> CmdResult {
    let n = numkeys(&a[1], a.len() - 2, false)?;
    let (keys, argv) = a[2..].split_at(n);
    let sh = cx.sh;
    let _x = exec_lock(sh, cx.s)?;
    let mut scripts = sh.scripting.scripts.lock();
    let name = if sha {
        let h = String::from_utf8_lossy(&a[0]).to_ascii_lowercase();
        if h.len() != 40 || scripts.get(&h).is_none() {
            return Err(noscript());
        }
        h
    } else {
        scripts.load(&a[0])?
    };
    let flags = scripts.get(&name).expect("loaded").flags;
    let read_only = prepare(cx, flags, ro)?;
    let cross = flags.compat || flags.allow_cross_slot;
    let mut command = vec![Bytes::from_static(if sha { b"evalsha" } else { b"eval" })];
    command.extend(shown(a));
    run_script(cx, name.clone(), true, cross, command, keys, |host| {
        scripts.run(host, &name, keys, argv, read_only)
    })
}

fn eval(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    eval_generic(cx, a, false, false)
}

fn evalsha(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    eval_generic(cx, a, true, false)
}

fn eval_ro(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    eval_generic(cx, a, false, true)
}

fn evalsha_ro(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    eval_generic(cx, a, true, true)
}

fn fcall_generic(cx: &mut Ctx, a: &[Bytes], ro: bool) -> CmdResult {
    let n = numkeys(&a[1], a.len() - 2, true)?;
    let (keys, argv) = a[2..].split_at(n);
    let sh = cx.sh;
    let _x = exec_lock(sh, cx.s)?;
    let reg = sh.scripting.libraries(&sh.store)?;
    let name = String::from_utf8_lossy(&a[0]).into_owned();
    let Some(f) = reg.libs.function(&name) else {
        return Err(Reply::err("Function not found"));
    };
    let read_only = prepare(cx, f.flags, ro)?;
    let mut command = vec![Bytes::from_static(if ro { b"fcall_ro" } else { b"fcall" })];
    command.extend(shown(a));
    let fname = f.name.clone();
    run_script(
        cx,
        fname,
        false,
        f.flags.allow_cross_slot,
        command,
        keys,
        |host| reg.libs.run(host, f, keys, argv, read_only),
    )
}

fn fcall(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    fcall_generic(cx, a, false)
}

fn fcall_ro(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    fcall_generic(cx, a, true)
}

fn sub_args(parent: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {parent} HELP.",
        String::from_utf8_lossy(sub).to_ascii_lowercase()
    ))
}

fn unknown_sub(parent: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "unknown subcommand '{}'. Try {parent} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)])
    ))
}

fn help(lines: &[&str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::Status((*l).into())).collect())
}

/// `SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP`.
fn script(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sub = &a[0];
    let sh = cx.sh;
    if eq(sub, "kill") {
        if a.len() != 1 {
            return Err(sub_args("SCRIPT", sub));
        }
        return sh.scripting.activity.kill(true).map(|_| Reply::ok());
    }
    let _g = registry_lock(sh, cx.s)?;
    if eq(sub, "load") && a.len() == 2 {
        return Ok(Reply::bulk(sh.scripting.scripts.lock().load(&a[1])?));
    }
    if eq(sub, "exists") && a.len() >= 2 {
        let s = sh.scripting.scripts.lock();
        return Ok(Reply::Array(
            a[1..]
                .iter()
                .map(|h| Reply::Int(s.get(&String::from_utf8_lossy(h)).is_some() as i64))
                .collect(),
        ));
    }
    if eq(sub, "flush") {
        match a.get(1) {
            None => {}
            Some(m) if a.len() == 2 && (eq(m, "sync") || eq(m, "async")) => {}
            _ => return Err(Reply::err("SCRIPT FLUSH only support SYNC|ASYNC option")),
        }
        sh.scripting.scripts.lock().flush();
        return Ok(Reply::ok());
    }
    if eq(sub, "debug") && a.len() == 2 {
        return Err(Reply::err(
            "SCRIPT DEBUG is not supported: halflife has no Lua debugger",
        ));
    }
    if eq(sub, "help") && a.len() == 1 {
        return Ok(help(&[
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ]));
    }
    if ["load", "exists", "kill", "debug", "help"]
        .iter()
        .any(|n| eq(sub, n))
    {
        return Err(sub_args("SCRIPT", sub));
    }
    Err(unknown_sub("SCRIPT", sub))
}

/// Refuses a `FUNCTION` subcommand that writes on a read-only replica.
fn writable(sh: &Shared) -> Result<(), Reply> {
    if sh.store.is_replica() && sh.settings.replica_read_only() {
        return Err(Reply::Error(
            "READONLY You can't write against a read only replica.".into(),
        ));
    }
    Ok(())
}

/// `FUNCTION LOAD|DELETE|FLUSH|LIST|DUMP|RESTORE|STATS|KILL|HELP`.
fn function(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sub = &a[0];
    let sh = cx.sh;
    let args = &a[1..];
    if eq(sub, "kill") && args.is_empty() {
        return sh.scripting.activity.kill(false).map(|_| Reply::ok());
    }
    if eq(sub, "stats") && args.is_empty() {
        return Ok(stats(sh));
    }
    let sync = cx.sync();
    let _g = registry_lock(sh, cx.s)?;
    let mut reg = sh.scripting.libraries(&sh.store)?;
    if eq(sub, "load") && !args.is_empty() {
        writable(sh)?;
        let (opts, code) = args.split_at(args.len() - 1);
        let mut replace = false;
        for o in opts {
            if eq(o, "replace") {
                replace = true;
            } else {
                return Err(Reply::err(format!(
                    "Unknown option given: {}",
                    String::from_utf8_lossy(o)
                )));
            }
        }
        let name = reg.libs.load(&code[0], replace).map_err(Reply::err)?;
        let mut b = Batch::new();
        b.put(&record::function_key(&name), &code[0]);
        sh.scripting.note_counts(&reg.libs);
        persist(sh, &mut reg, b, sync)?;
        return Ok(Reply::bulk(name));
    }
    if eq(sub, "delete") && args.len() == 1 {
        writable(sh)?;
        let name = String::from_utf8_lossy(&args[0]).into_owned();
        reg.libs.delete(&name).map_err(Reply::err)?;
        let mut b = Batch::new();
        b.delete(&record::function_key(&name));
        sh.scripting.note_counts(&reg.libs);
        persist(sh, &mut reg, b, sync)?;
        return Ok(Reply::ok());
    }
    if eq(sub, "flush") && args.len() <= 1 {
        if let Some(m) = args.first() {
            if !(eq(m, "sync") || eq(m, "async")) {
                return Err(Reply::err("FUNCTION FLUSH only supports SYNC|ASYNC option"));
            }
        }
        writable(sh)?;
        let mut b = Batch::new();
        for l in reg.libs.libraries() {
            b.delete(&record::function_key(&l.name));
        }
        reg.libs.flush();
        sh.scripting.note_counts(&reg.libs);
        persist(sh, &mut reg, b, sync)?;
        return Ok(Reply::ok());
    }
    if eq(sub, "list") {
        return list(&reg.libs, args);
    }
    if eq(sub, "dump") && args.is_empty() {
        return Ok(Reply::bulk(reg.libs.dump()));
    }
    if eq(sub, "restore") && (1..=2).contains(&args.len()) {
        let policy =
            match args.get(1) {
                None => RestorePolicy::Append,
                Some(p) if eq(p, "flush") => RestorePolicy::Flush,
                Some(p) if eq(p, "append") => RestorePolicy::Append,
                Some(p) if eq(p, "replace") => RestorePolicy::Replace,
                Some(_) => return Err(Reply::err(
                    "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                )),
            };
        writable(sh)?;
        let (stored, removed) = reg.libs.restore(&args[0], policy).map_err(Reply::err)?;
        let mut b = Batch::new();
        for n in &removed {
            b.delete(&record::function_key(n));
        }
        for (name, code) in &stored {
            b.put(&record::function_key(name), code);
        }
        sh.scripting.note_counts(&reg.libs);
        persist(sh, &mut reg, b, sync)?;
        return Ok(Reply::ok());
    }
    if eq(sub, "help") && args.is_empty() {
        return Ok(help(&[
            "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LOAD [REPLACE] <FUNCTION CODE>",
            "DELETE <LIBRARY NAME>",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "FLUSH [ASYNC|SYNC]",
            "DUMP",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "STATS",
            "KILL",
        ]));
    }
    let known = [
        "load", "delete", "flush", "dump", "restore", "stats", "kill", "help",
    ];
    if known.iter().any(|n| eq(sub, n)) {
        return Err(sub_args("FUNCTION", sub));
    }
    Err(unknown_sub("FUNCTION", sub))
}

/// Writes the registry's change `b` to the database; if that fails, the registry is
/// loaded from the database again before its next use, so the two never stay apart.
fn persist(sh: &Shared, reg: &mut Registry, b: Batch, sync: bool) -> Result<(), Reply> {
    if let Err(e) = sh.store.write(b, sync) {
        reg.epoch = None;
        return Err(e.into());
    }
    Ok(())
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`.
fn list(libs: &Libraries, args: &[Bytes]) -> CmdResult {
    let (mut pattern, mut code) = (None, false);
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if eq(a, "withcode") && !code {
            code = true;
        } else if eq(a, "libraryname") && pattern.is_none() {
            let Some(p) = args.get(i + 1) else {
                return Err(Reply::err("library name argument was not given"));
            };
            pattern = Some(p.to_ascii_lowercase());
            i += 1;
        } else {
            return Err(Reply::err(format!(
                "Unknown argument {}",
                String::from_utf8_lossy(a)
            )));
        }
        i += 1;
    }
    let mut out = Vec::new();
    for l in libs.libraries() {
        if let Some(p) = &pattern {
            if !crate::pattern::matches(p, l.name.to_ascii_lowercase().as_bytes()) {
                continue;
            }
        }
        let functions = l
            .functions
            .iter()
            .map(|f| {
                Reply::Map(vec![
                    (Reply::bulk("name"), Reply::bulk(f.name.clone())),
                    (
                        Reply::bulk("description"),
                        f.description.clone().map_or(Reply::Nil, Reply::bulk),
                    ),
                    (
                        Reply::bulk("flags"),
                        Reply::Set(f.flags.names().into_iter().map(Reply::bulk).collect()),
                    ),
                ])
            })
            .collect();
        let mut m = vec![
            (Reply::bulk("library_name"), Reply::bulk(l.name.clone())),
            (Reply::bulk("engine"), Reply::bulk("LUA")),
            (Reply::bulk("functions"), Reply::Array(functions)),
        ];
        if code {
            m.push((Reply::bulk("library_code"), Reply::Bulk(l.code.clone())));
        }
        out.push(Reply::Map(m));
    }
    Ok(Reply::Array(out))
}

/// `FUNCTION STATS`: the running script, and the libraries' counts. Answers while a
/// script runs: it takes no lock that the script holds.
fn stats(sh: &Shared) -> Reply {
    let running = match sh.scripting.activity.running() {
        Some(r) => Reply::Map(vec![
            (Reply::bulk("name"), Reply::bulk(r.name)),
            (
                Reply::bulk("command"),
                Reply::Array(r.command.into_iter().map(Reply::Bulk).collect()),
            ),
            (
                Reply::bulk("duration_ms"),
                Reply::Int(r.started.elapsed().as_millis() as i64),
            ),
        ]),
        None => Reply::Nil,
    };
    let (libs, funcs) = sh.scripting.library_counts();
    Reply::Map(vec![
        (Reply::bulk("running_script"), running),
        (
            Reply::bulk("engines"),
            Reply::Map(vec![(
                Reply::bulk("LUA"),
                Reply::Map(vec![
                    (Reply::bulk("libraries_count"), Reply::Int(libs as i64)),
                    (Reply::bulk("functions_count"), Reply::Int(funcs as i64)),
                ]),
            )]),
        ),
    ])
}
