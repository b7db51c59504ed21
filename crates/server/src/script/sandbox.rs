//! One sandboxed Lua 5.1 interpreter, as Redis 7.0 sets its interpreters up: the globals
//! and library tables scripts see, the `redis` API, the error handler that gives an
//! error its script line, and the run of one script or function.
//!
//! Redis 7.0 patches its Lua to make tables read-only. Here the same is done without
//! changing Lua: what a script sees as `_G`, `redis`, `string`, `cjson`... are empty
//! proxies whose metatables read through to the real tables and refuse every assignment
//! ("Attempt to modify a readonly table"), with `setmetatable`, `rawset`, `setfenv` and
//! `getfenv` wrapped so that they cannot reach around the proxies, and the real globals
//! raise "Script attempted to access nonexistent global variable" for a name they do not
//! have. What the proxies cost: `pairs(redis)` and `rawget(string, 'format')` see an
//! empty table. Chunks compile as text only (`string.dump`'s bytecode is refused), and the
//! scripts' `pcall`, `xpcall` and `coroutine.resume` rethrow a kill so a script cannot
//! catch its own `SCRIPT KILL`.

use super::convert::{from_reply, to_reply};
use super::{error_text, fmt_g, raise, Activity, Flags, Raised, ScriptHost, HOOK_EVERY};
use crate::protocol::Reply;
use bytes::Bytes;
use mlua::{
    ChunkMode, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState,
};
use parking_lot::Mutex;
use std::sync::Arc;

/// The name of the sandbox's own chunk: frames of it are skipped when an error is placed.
const SANDBOX: &str = "=sandbox";

/// Which interpreter: `EVAL`'s, or the function libraries'.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Eval,
    Functions,
}

/// Builds the script-visible world out of the real libraries. Runs once, trusted, before
/// any script; what it returns is all the Rust side keeps.
const SETUP: &str = r#"
local rust, kind, version, version_num = ...
local REAL = _G
local type, tostring, error, select, rawget, ipairs = type, tostring, error, select, rawget, ipairs
local native_setmetatable, native_getmetatable, native_rawset = setmetatable, getmetatable, rawset
local native_pcall, native_xpcall, native_loadstring = pcall, xpcall, loadstring
local native_setfenv, native_getfenv, native_resume = setfenv, getfenv, coroutine.resume
local concat = table.concat
local check_kill, errvalue, where = rust.check_kill, rust.errvalue, rust.where

local protected = native_setmetatable({}, {__mode = 'k'})
local function readonly(level) error('Attempt to modify a readonly table', level) end
local function refuse() error('Attempt to modify a readonly table', 2) end
local function view(t)
  local p = {}
  native_setmetatable(p, {__index = t, __newindex = refuse, __metatable = false})
  protected[p] = true
  return p
end
local function protect(t)
  local p, mt = {}, {__index = t, __newindex = refuse}
  mt.__metatable = view({__index = p})
  native_setmetatable(p, mt)
  protected[p] = true
  return p, mt
end
local function strict(t)
  native_setmetatable(t, {__index = function(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end})
  return t
end
local function copy(src, names)
  local t = {}
  for _, n in ipairs(names) do t[n] = src[n] end
  return t
end

local G = {}
local P, Pmt = protect(G)
for _, n in ipairs({'tostring', 'next', 'assert', 'tonumber', 'rawequal', 'collectgarbage',
    'getmetatable', 'type', 'select', 'unpack', 'gcinfo', 'pairs', 'ipairs', 'rawget', 'error',
    'newproxy', '_VERSION'}) do
  G[n] = REAL[n]
end
G._G = P
G.setmetatable = function(t, mt)
  if protected[t] then readonly(3) end
  return native_setmetatable(t, mt)
end
G.rawset = function(t, k, v)
  if protected[t] then readonly(3) end
  return native_rawset(t, k, v)
end
local function level(f) if type(f) == 'number' and f > 0 then return f + 1 end return f end
G.getfenv = function(f)
  local e = native_getfenv(level(f == nil and 1 or f))
  if e == REAL then return P end
  return e
end
G.setfenv = function(f, t)
  if f == 0 or protected[f] then readonly(3) end
  return native_setfenv(level(f), t)
end
G.loadstring = function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then return nil, 'binary chunks are not allowed' end
  local f, e = native_loadstring(s, name)
  if f then native_setfenv(f, P) end
  return f, e
end
G.load = function(reader, name)
  if type(reader) == 'string' then return G.loadstring(reader, name) end
  local parts = {}
  while true do
    local piece = reader()
    if piece == nil or piece == '' then break end
    if type(piece) ~= 'string' then return nil, 'reader function must return a string' end
    parts[#parts + 1] = piece
  end
  return G.loadstring(concat(parts), name or '=(load)')
end

-- Redis 7's pcall gives a Redis error table's message; a kill is never caught.
local function caught(ok, ...)
  if ok then return ok, ... end
  check_kill()
  local e = errvalue((...))
  if type(e) == 'table' then
    local m = rawget(e, 'err')
    if type(m) == 'string' then e = m end
  end
  return false, e
end
local function caught_raw(ok, ...)
  if ok then return ok, ... end
  check_kill()
  return false, errvalue((...))
end
G.pcall = function(...) return caught(native_pcall(...)) end
G.xpcall = function(f, h)
  return caught_raw(native_xpcall(f, function(e) return h(errvalue(e)) end))
end
local co = copy(coroutine, {'create', 'running', 'status', 'wrap', 'yield'})
co.resume = function(...) return caught_raw(native_resume(...)) end
G.coroutine = protect(co)

local str = copy(string, {'byte', 'char', 'dump', 'find', 'format', 'gmatch', 'gsub', 'len',
  'lower', 'match', 'rep', 'reverse', 'sub', 'upper'})
G.string = protect(str)
local smt = native_getmetatable('')
smt.__index = G.string
smt.__metatable = view({__index = G.string})
G.table = protect(copy(table, {'concat', 'foreach', 'foreachi', 'getn', 'insert', 'maxn',
  'remove', 'setn', 'sort'}))
local m = copy(math, {'abs', 'acos', 'asin', 'atan', 'atan2', 'ceil', 'cos', 'cosh', 'deg',
  'exp', 'floor', 'fmod', 'frexp', 'huge', 'ldexp', 'log', 'log10', 'max', 'min', 'modf', 'pi',
  'pow', 'rad', 'sin', 'sinh', 'sqrt', 'tan', 'tanh'})
m.random, m.randomseed = rust.random, rust.randomseed
G.math = protect(m)
G.cjson = protect(rust.cjson)
G.cmsgpack = protect(rust.cmsgpack)
G.bit = protect(rust.bit)
G.struct = protect(rust.struct)

local function common(t)
  t.log = rust.log
  t.LOG_DEBUG, t.LOG_VERBOSE, t.LOG_NOTICE, t.LOG_WARNING = 0, 1, 2, 3
  t.REDIS_VERSION, t.REDIS_VERSION_NUM = version, version_num
  return t
end
local redis = common({call = rust.call, pcall = rust.pcall, setresp = rust.setresp,
  sha1hex = rust.sha1hex, set_repl = rust.set_repl, acl_check_cmd = rust.acl_check_cmd,
  REPL_NONE = 0, REPL_AOF = 1, REPL_SLAVE = 2, REPL_REPLICA = 2, REPL_ALL = 3})
redis.error_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  if s:byte(1) ~= 45 then s = '-' .. s end
  return {err = rust.error_text(s)}
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = s}
end
if kind == 'eval' then
  -- No debugger: a breakpoint is never hit, redis.debug logs nowhere, and every script's
  -- effects are replicated (redis.replicate_commands is Redis 7's default, kept for old
  -- scripts).
  redis.breakpoint = function() return false end
  redis.debug = function() end
  redis.replicate_commands = function() return true end
end
G.redis = protect(redis)
strict(G)

local handler = function(err)
  local source, line = where()
  err = errvalue(err)
  if type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(err)}
  else
    local m = rawget(err, 'err')
    err = {err = type(m) == 'string' and m or 'ERR ' .. tostring(err),
      ignore_error_stats_update = rawget(err, 'ignore_error_stats_update')}
  end
  err.source, err.line = source, line
  return err
end
local run = function(f, a, b, n)
  if n == 0 then return native_xpcall(f, handler) end
  return native_xpcall(function() return f(a, b) end, handler)
end

local set_api
if kind == 'functions' then
  local api = strict(common({register_function = rust.register_function}))
  local LIB = strict({redis = protect(api)})
  set_api = function(on) Pmt.__index = on and LIB or G end
end
return {env = P, globals = G, run = run, set_api = set_api}
"#;

/// A script's run, kept in the interpreter while it runs: what `redis.call` and the
/// other run-time functions need.
struct RunState {
    /// The host of this run. Valid while the run lasts: [`Interp::run`] removes the state
    /// before it returns, and no Lua code runs outside a run with it in place.
    host: *mut (dyn ScriptHost + 'static),
    resp: u8,
    read_only: bool,
}

// The host pointer is only used on the thread that runs the script, inside the run.
unsafe impl Send for RunState {}

/// What `FUNCTION LOAD`'s run of a library's code registered.
#[derive(Default)]
struct LoadState {
    registered: Vec<Registered>,
}

/// A function a library registered.
pub struct Registered {
    pub name: String,
    pub func: Function,
    pub description: Option<String>,
    pub flags: Flags,
}

/// How a script or function ended: its reply, and whether an error reply was counted
/// already (an error of a command the script ran, passed through).
pub struct Outcome {
    pub reply: Reply,
    pub counted: bool,
}

/// How a script is run.
pub struct RunOptions<'a> {
    /// The SHA1 or function name, for errors.
    pub name: &'a str,
    pub read_only: bool,
}

fn rt<T>(msg: impl Into<String>) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(msg.into()))
}

/// The arguments of `redis.call` as a command: strings as they are, numbers as `%.17g`.
fn command_args(args: MultiValue) -> Result<Vec<Bytes>, &'static str> {
    if args.is_empty() {
        return Err("Please specify at least one argument for this redis lib call");
    }
    let mut out = Vec::with_capacity(args.len());
    for v in args {
        out.push(match v {
            Value::String(s) => Bytes::copy_from_slice(&s.as_bytes()),
            Value::Integer(i) => Bytes::from(i.to_string()),
            Value::Number(n) => Bytes::from(fmt_g(n, 17)),
            _ => return Err("Lua redis lib command arguments must be strings or integers"),
        });
    }
    Ok(out)
}

/// `redis.call` (`raise`) and `redis.pcall`.
fn redis_command(
    lua: &Lua,
    args: MultiValue,
    raise_err: bool,
    act: &Activity,
) -> mlua::Result<Value> {
    let fail = |text: String, counted: bool| -> mlua::Result<Value> {
        if raise_err {
            Err(raise(text, counted))
        } else {
            let t = lua.create_table()?;
            t.raw_set("err", text)?;
            if counted {
                t.raw_set("ignore_error_stats_update", true)?;
            }
            Ok(Value::Table(t))
        }
    };
    let (host, resp, read_only) = match lua.app_data_ref::<RunState>() {
        Some(st) => (st.host, st.resp, st.read_only),
        None => {
            return fail(
                "ERR redis.call/pcall can only be called inside a script invocation".into(),
                false,
            )
        }
    };
    // SAFETY: the state is in place only while `Interp::run` holds the host borrowed.
    let host = unsafe { &mut *host };
    let args = match command_args(args) {
        Ok(a) => a,
        Err(e) => return fail(format!("ERR {e}"), false),
    };
    let name = String::from_utf8_lossy(&args[0][..args[0].len().min(32)]).to_ascii_lowercase();
    let refuse = |host: &mut dyn ScriptHost, cmd: Option<&super::CommandInfo>, msg: &str| {
        let text = format!("ERR {msg}");
        host.rejected(cmd, &args, &text);
        fail(text, true)
    };
    let Some(cmd) = host.command(&name) else {
        return refuse(host, None, "Unknown Redis command called from script");
    };
    if !cmd.arity_ok(args.len()) {
        return refuse(
            host,
            Some(&cmd),
            "Wrong number of args calling Redis command from script",
        );
    }
    if cmd.noscript {
        return refuse(
            host,
            Some(&cmd),
            "This Redis command is not allowed from script",
        );
    }
    if cmd.write && read_only {
        return refuse(
            host,
            Some(&cmd),
            "Write commands are not allowed from read-only scripts.",
        );
    }
    if let Err(e) = host.admit(&cmd, &args) {
        host.rejected(Some(&cmd), &args, &e);
        return fail(e, true);
    }
    if cmd.write {
        act.note_write();
    }
    let reply = host.call(&cmd, &args);
    if let Reply::Error(e) = &reply {
        return fail(error_text(&format!("-{e}")), true);
    }
    from_reply(lua, reply, resp)
}

/// The Lua-side form of an error value that reached a script: a [`Raised`] error is
/// Redis's table `{err=...}`, another Rust error its message, a Lua value itself.
fn errvalue(lua: &Lua, v: Value) -> mlua::Result<Value> {
    let Value::Error(e) = v else { return Ok(v) };
    let mut e: &mlua::Error = &e;
    loop {
        match e {
            mlua::Error::CallbackError { cause, .. } => e = cause,
            mlua::Error::WithContext { cause, .. } => e = cause,
            _ => break,
        }
    }
    if let Some(r) = e.downcast_ref::<Raised>() {
        let t = lua.create_table()?;
        t.raw_set("err", r.text.as_str())?;
        if r.counted {
            t.raw_set("ignore_error_stats_update", true)?;
        }
        return Ok(Value::Table(t));
    }
    let msg = match e {
        mlua::Error::RuntimeError(s) => s.clone(),
        mlua::Error::MemoryError(_) => "not enough memory".into(),
        other => other.to_string(),
    };
    Ok(Value::String(lua.create_string(&msg)?))
}

/// Redis's `redisLrand48`: a 48-bit linear congruential generator, so that a seeded
/// script draws the same numbers everywhere.
struct Rand48(u64);

impl Rand48 {
    fn seed(&mut self, s: i64) {
        self.0 = (((s as u32 as u64) << 16) | 0x330e) & ((1 << 48) - 1);
    }

    fn next(&mut self) -> u32 {
        self.0 = (self.0.wrapping_mul(0x5_deec_e66d).wrapping_add(0xb)) & ((1 << 48) - 1);
        (self.0 >> 17) as u32
    }
}

/// One interpreter and the handles into it the server uses.
pub struct Interp {
    lua: Lua,
    kind: Kind,
    env: Table,
    globals: Table,
    runner: Function,
    set_api: Option<Function>,
    activity: Arc<Activity>,
    /// Runs since the last collection step.
    runs: std::sync::atomic::AtomicU32,
}

/// Runs between two steps of the garbage collector, and each step's size in KiB (as
/// Redis: a step every 50 scripts keeps their garbage from waiting for a full cycle).
const GC_EVERY: u32 = 50;
const GC_STEP_KB: i32 = 50;

impl Interp {
    /// A new interpreter of `kind`, whose hook answers to `activity`, capped at `memory`
    /// bytes.
    pub fn new(kind: Kind, activity: Arc<Activity>, memory: usize) -> mlua::Result<Interp> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new(),
        )?;
        let rust = lua.create_table()?;
        rust.set("cjson", super::cjson::open(&lua)?)?;
        rust.set("cmsgpack", super::cmsgpack::open(&lua)?)?;
        rust.set("bit", super::bit::open(&lua)?)?;
        rust.set("struct", super::structlib::open(&lua)?)?;
        let act = activity.clone();
        rust.set(
            "check_kill",
            lua.create_function(move |_, ()| match act.check() {
                Ok(()) => Ok(()),
                Err(e) => Err(raise(e, false)),
            })?,
        )?;
        rust.set("errvalue", lua.create_function(errvalue)?)?;
        rust.set(
            "error_text",
            lua.create_function(|_, s: mlua::String| Ok(error_text(&s.to_string_lossy())))?,
        )?;
        // Where an error happened: the first frame above the error handler that is the
        // script's (not a C function, not this sandbox's code).
        rust.set(
            "where",
            lua.create_function(|lua, ()| {
                for level in 2..64 {
                    let frame = lua.inspect_stack(level, |d| {
                        let s = d.source();
                        (s.what, s.source.map(|s| s.into_owned()), d.current_line())
                    });
                    match frame {
                        None => break,
                        Some(("C", _, _)) => continue,
                        Some((_, Some(src), _)) if src == SANDBOX => continue,
                        Some((_, src, line)) => return Ok((src, line.map(|l| l as i64))),
                    }
                }
                Ok((None, None))
            })?,
        )?;
        for (name, raise_err) in [("call", true), ("pcall", false)] {
            let act = activity.clone();
            rust.set(
                name,
                lua.create_function(move |lua, args: MultiValue| {
                    redis_command(lua, args, raise_err, &act)
                })?,
            )?;
        }
        rust.set(
            "sha1hex",
            lua.create_function(|_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise("ERR wrong number of arguments", false));
                }
                let b = match &args[0] {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(i) => i.to_string().into_bytes(),
                    Value::Number(n) => fmt_g(*n, 14).into_bytes(),
                    _ => Vec::new(),
                };
                Ok(super::sha1hex(&b))
            })?,
        )?;
        rust.set(
            "log",
            lua.create_function(|_, args: MultiValue| {
                if args.len() < 2 {
                    return Err(raise(
                        "ERR redis.log() requires two arguments or more.",
                        false,
                    ));
                }
                let level = match &args[0] {
                    Value::Integer(i) => *i as f64,
                    Value::Number(n) => *n,
                    _ => {
                        return Err(raise(
                            "ERR First argument must be a number (log level).",
                            false,
                        ))
                    }
                };
                if !(0.0..=3.0).contains(&level) {
                    return Err(raise("ERR Invalid debug level.", false));
                }
                if (level as u8) < super::LOG_NOTICE {
                    return Ok(());
                }
                let words: Vec<String> = args
                    .iter()
                    .skip(1)
                    .filter_map(|v| match v {
                        Value::String(s) => Some(s.to_string_lossy()),
                        Value::Integer(i) => Some(i.to_string()),
                        Value::Number(n) => Some(fmt_g(*n, 14)),
                        _ => None,
                    })
                    .collect();
                let line = words.join(" ");
                if level as u8 == super::LOG_WARNING {
                    tracing::warn!("script: {line}");
                } else {
                    tracing::info!("script: {line}");
                }
                Ok(())
            })?,
        )?;
        rust.set(
            "setresp",
            lua.create_function(|lua, args: MultiValue| {
                let Some(mut st) = lua.app_data_mut::<RunState>() else {
                    return Err(raise(
                        "ERR redis.setresp can only be called inside a script invocation",
                        false,
                    ));
                };
                if args.len() != 1 {
                    return Err(raise("ERR redis.setresp() requires one argument.", false));
                }
                match &args[0] {
                    Value::Integer(2) => st.resp = 2,
                    Value::Integer(3) => st.resp = 3,
                    Value::Number(n) if *n == 2.0 || *n == 3.0 => st.resp = *n as u8,
                    _ => return Err(raise("ERR RESP version must be 2 or 3.", false)),
                }
                Ok(())
            })?,
        )?;
        rust.set(
            "set_repl",
            lua.create_function(|lua, args: MultiValue| {
                if lua.app_data_ref::<RunState>().is_none() {
                    return Err(raise("ERR redis.set_repl can only be called inside a script invocation", false));
                }
                if args.len() != 1 {
                    return Err(raise("ERR redis.set_repl() requires two arguments.", false));
                }
                let flags = match &args[0] {
                    Value::Integer(i) => *i,
                    Value::Number(n) => *n as i64,
                    _ => -1,
                };
                if !(0..=3).contains(&flags) {
                    return Err(raise("ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.", false));
                }
                // The replication stream carries each write's effect on the data; leaving a
                // write out of it would make the replica differ, so every write goes.
                Ok(())
            })?,
        )?;
        rust.set(
            "acl_check_cmd",
            lua.create_function(|lua, args: MultiValue| {
                let Some(st) = lua.app_data_ref::<RunState>() else {
                    return Err(raise(
                        "ERR redis.acl_check_cmd can only be called inside a script invocation",
                        false,
                    ));
                };
                let host = st.host;
                drop(st);
                let args = command_args(args).map_err(|e| raise(format!("ERR {e}"), false))?;
                let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
                // SAFETY: as in `redis_command`.
                match unsafe { &*host }.command(&name) {
                    // There is one user, who may run every command.
                    Some(_) => Ok(true),
                    None => Err(raise(
                        "ERR Invalid command passed to redis.acl_check_cmd()",
                        false,
                    )),
                }
            })?,
        )?;
        let rng = Arc::new(Mutex::new(Rand48(0)));
        rng.lock().seed(0);
        let r = rng.clone();
        rust.set(
            "random",
            lua.create_function(move |_, args: MultiValue| {
                const MAX: u32 = i32::MAX as u32;
                let r = (r.lock().next() % MAX) as f64 / MAX as f64;
                let int = |v: &Value| match v {
                    Value::Integer(i) => Ok(*i as f64),
                    Value::Number(n) => Ok(n.trunc()),
                    _ => rt("bad argument to 'random' (number expected)"),
                };
                match args.len() {
                    0 => Ok(r),
                    1 => {
                        let u = int(&args[0])?;
                        if u < 1.0 {
                            return rt("bad argument #1 to 'random' (interval is empty)");
                        }
                        Ok((r * u).floor() + 1.0)
                    }
                    2 => {
                        let (l, u) = (int(&args[0])?, int(&args[1])?);
                        if l > u {
                            return rt("bad argument #2 to 'random' (interval is empty)");
                        }
                        Ok((r * (u - l + 1.0)).floor() + l)
                    }
                    _ => rt("wrong number of arguments"),
                }
            })?,
        )?;
        rust.set(
            "randomseed",
            lua.create_function(move |_, seed: f64| {
                rng.lock().seed(seed as i64);
                Ok(())
            })?,
        )?;
        if kind == Kind::Functions {
            rust.set("register_function", lua.create_function(register_function)?)?;
        }
        let version = crate::protocol::REDIS_VERSION;
        let num = version
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0))
            .fold(0u32, |a, p| (a << 8) | p);
        let kind_name = match kind {
            Kind::Eval => "eval",
            Kind::Functions => "functions",
        };
        let made: Table = lua
            .load(SETUP)
            .set_name(SANDBOX)
            .call((rust, kind_name, version, num))?;
        let act = activity.clone();
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| match act.check() {
                Ok(()) => Ok(VmState::Continue),
                Err(e) => Err(raise(e, false)),
            },
        )?;
        lua.set_memory_limit(memory)?;
        Ok(Interp {
            env: made.get("env")?,
            globals: made.get("globals")?,
            runner: made.get("run")?,
            set_api: made.get("set_api")?,
            lua,
            kind,
            activity,
            runs: Default::default(),
        })
    }

    pub fn set_memory_limit(&self, bytes: usize) {
        let _ = self.lua.set_memory_limit(bytes);
    }

    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Compiles `code` (text only) as chunk `name` in the scripts' environment; the error
    /// is Lua's message.
    pub fn compile(&self, name: &str, code: &[u8]) -> Result<Function, String> {
        self.lua
            .load(code)
            .set_name(name)
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                mlua::Error::MemoryError(_) => "not enough memory".into(),
                other => other.to_string(),
            })
    }

    /// Runs a library's code so that it registers its functions (`FUNCTION LOAD`), with
    /// the library API in place of the globals and at most [`super::LOAD_TIMEOUT`].
    pub fn load_library(&self, code: &[u8]) -> Result<Vec<Registered>, String> {
        let f = self
            .compile("@user_function", code)
            .map_err(|e| format!("Error compiling function: {e}"))?;
        let set_api = self.set_api.as_ref().expect("the functions interpreter");
        set_api.call::<()>(true).map_err(|e| e.to_string())?;
        self.lua.set_app_data(LoadState::default());
        self.activity
            .set_load_deadline(Some(std::time::Instant::now() + super::LOAD_TIMEOUT));
        let res = self
            .runner
            .call::<(bool, Value)>((f, Value::Nil, Value::Nil, 0));
        self.activity.set_load_deadline(None);
        let state = self.lua.remove_app_data::<LoadState>().unwrap_or_default();
        set_api.call::<()>(false).map_err(|e| e.to_string())?;
        match res {
            Ok((true, _)) => Ok(state.registered),
            Ok((false, err)) => Err(format!(
                "Error registering functions: {}",
                error_message(&err)
            )),
            Err(e) => Err(format!("Error registering functions: {e}")),
        }
    }

    /// Runs `f` (a compiled script, or a registered function) for the caller: `EVAL`'s
    /// `KEYS` and `ARGV` are globals, a function gets them as arguments.
    pub fn run(
        &self,
        host: &mut dyn ScriptHost,
        f: &Function,
        keys: &[Bytes],
        argv: &[Bytes],
        opts: &RunOptions,
    ) -> Outcome {
        match self.try_run(host, f, keys, argv, opts) {
            Ok(o) => o,
            Err(e) => {
                let msg = match e {
                    mlua::Error::MemoryError(_) => "not enough memory".to_string(),
                    other => other.to_string(),
                };
                self.after_error(&msg);
                Outcome {
                    reply: Reply::err(format!("Error running script {}, {msg}", opts.name)),
                    counted: false,
                }
            }
        }
    }

    fn after_error(&self, msg: &str) {
        if msg.contains("not enough memory") {
            // Whatever the script held is garbage now; give it back before the next run.
            let _ = self.lua.gc_collect();
        }
    }

    fn try_run(
        &self,
        host: &mut dyn ScriptHost,
        f: &Function,
        keys: &[Bytes],
        argv: &[Bytes],
        opts: &RunOptions,
    ) -> mlua::Result<Outcome> {
        let array = |items: &[Bytes]| -> mlua::Result<Table> {
            let t = self.lua.create_table_with_capacity(items.len(), 0)?;
            for (i, b) in items.iter().enumerate() {
                t.raw_set(i + 1, self.lua.create_string(b)?)?;
            }
            Ok(t)
        };
        let (k, a) = (array(keys)?, array(argv)?);
        let n = match self.kind {
            Kind::Eval => {
                self.globals.raw_set("KEYS", k.clone())?;
                self.globals.raw_set("ARGV", a.clone())?;
                0
            }
            Kind::Functions => 2,
        };
        // SAFETY: the pointer's lifetime is erased to keep it in the interpreter; it is
        // removed below, before `host`'s borrow ends, on every path.
        let host: *mut (dyn ScriptHost + '_) = host;
        let host: *mut (dyn ScriptHost + 'static) = unsafe { std::mem::transmute(host) };
        self.lua.set_app_data(RunState {
            host,
            resp: 2,
            read_only: opts.read_only,
        });
        let res = self.runner.call::<(bool, Value)>((f, k, a, n));
        let resp = self.lua.remove_app_data::<RunState>().map_or(2, |s| s.resp);
        if self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 >= GC_EVERY {
            self.runs.store(0, std::sync::atomic::Ordering::Relaxed);
            let _ = self.lua.gc_step_kbytes(GC_STEP_KB);
        }
        let (ok, v) = res?;
        if ok {
            let counted = matches!(&v, Value::Table(t) if t.raw_get::<Value>("err").is_ok_and(|e| e.is_string())
                && t.raw_get::<bool>("ignore_error_stats_update").unwrap_or(false));
            return Ok(Outcome {
                reply: to_reply(&v, resp),
                counted,
            });
        }
        let (text, counted) = match &v {
            Value::Table(t) => {
                let mut text = error_message(&v);
                let src: Option<String> = t.raw_get("source").ok().flatten();
                let line: Option<i64> = t.raw_get("line").ok().flatten();
                if let (Some(src), Some(line)) = (src, line) {
                    text.push_str(&format!(" script: {}, on {src}:{line}.", opts.name));
                }
                (
                    text,
                    t.raw_get::<bool>("ignore_error_stats_update")
                        .unwrap_or(false),
                )
            }
            other => {
                let msg = error_message(other);
                self.after_error(&msg);
                (
                    format!("ERR Error running script {}, {msg}", opts.name),
                    false,
                )
            }
        };
        Ok(Outcome {
            reply: Reply::Error(text),
            counted,
        })
    }
}

/// The message of an error value from the runner: an error table's `err`, a string.
fn error_message(v: &Value) -> String {
    match v {
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => s.to_string_lossy(),
            _ => "ERR unknown error".into(),
        },
        Value::String(s) => s.to_string_lossy(),
        other => format!("{other:?}"),
    }
}

/// A library or function name: letters, digits and underscores, at least one.
pub fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

pub const BAD_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// `redis.register_function(name, callback)` or `redis.register_function{...}`.
fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    if lua.app_data_ref::<LoadState>().is_none() {
        return Err(raise(
            "ERR redis.register_function can only be called on FUNCTION LOAD command",
            false,
        ));
    }
    let e = |m: &str| Err(raise(format!("ERR {m}"), false));
    let string = |v: &Value| match v {
        Value::String(s) => Some(s.to_string_lossy()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Number(n) => Some(fmt_g(*n, 14)),
        _ => None,
    };
    let (name, func, description, flags) = match args.len() {
        1 => {
            let Value::Table(t) = &args[0] else {
                return e("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            let (mut name, mut func, mut desc, mut flags) = (None, None, None, Flags::default());
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Some(k) = string(&k) else {
                    return e(
                        "named argument key given to redis.register_function is not a string",
                    );
                };
                match k.to_ascii_lowercase().as_str() {
                    "function_name" => match string(&v) {
                        Some(n) => name = Some(n),
                        None => return e("function_name argument given to redis.register_function must be a string"),
                    },
                    "description" => match string(&v) {
                        Some(d) => desc = Some(d),
                        None => return e("description argument given to redis.register_function must be a string"),
                    },
                    "callback" => match v {
                        Value::Function(f) => func = Some(f),
                        _ => return e("callback argument given to redis.register_function must be a function"),
                    },
                    "flags" => {
                        let Value::Table(ft) = v else {
                            return e("flags argument to redis.register_function must be a table representing function flags");
                        };
                        for f in ft.sequence_values::<Value>() {
                            let ok = string(&f?).is_some_and(|s| flags.set(&s.to_ascii_lowercase()));
                            if !ok {
                                return e("unknown flag given");
                            }
                        }
                    }
                    _ => return e("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else {
                return e("redis.register_function must get a function name argument");
            };
            let Some(func) = func else {
                return e("redis.register_function must get a callback argument");
            };
            (name, func, desc, flags)
        }
        2 => {
            let Some(name) = string(&args[0]) else {
                return e("first argument to redis.register_function must be a string");
            };
            let Value::Function(f) = &args[1] else {
                return e("second argument to redis.register_function must be a function");
            };
            (name, f.clone(), None, Flags::default())
        }
        _ => return e("wrong number of arguments to redis.register_function"),
    };
    if !valid_name(name.as_bytes()) {
        return e(BAD_NAME);
    }
    let mut st = lua.app_data_mut::<LoadState>().expect("checked above");
    if st.registered.iter().any(|r| r.name == name) {
        return e("Function already exists in the library");
    }
    st.registered.push(Registered {
        name,
        func,
        description,
        flags,
    });
    Ok(())
}
