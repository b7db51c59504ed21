//! The runtime against a host made of a map: the sandbox, the reply conversions and the
//! error shapes Redis's scripting tests expect, without a server.

use super::eval::Scripts;
use super::library::{Libraries, RestorePolicy};
use super::*;
use std::collections::HashMap;
use std::sync::Arc;

/// A host with a handful of commands over a map of strings and lists.
#[derive(Default)]
struct MapHost {
    strings: HashMap<Vec<u8>, Vec<u8>>,
    calls: Vec<String>,
    rejected: Vec<String>,
}

const COMMANDS: &[(&str, i32, bool, bool)] = &[
    ("get", 2, false, false),
    ("set", -3, true, false),
    ("incr", 2, true, false),
    ("del", -2, true, false),
    ("ping", -1, false, false),
    ("hgetall", 2, false, false),
    ("blpop", -3, true, true),
    ("mget", -2, false, false),
];

impl ScriptHost for MapHost {
    fn command(&self, name: &str) -> Option<CommandInfo> {
        COMMANDS
            .iter()
            .find(|c| c.0 == name)
            .map(|&(name, arity, write, noscript)| CommandInfo {
                name,
                arity,
                write,
                noscript,
            })
    }

    fn call(&mut self, cmd: &CommandInfo, a: &[Bytes]) -> Reply {
        self.calls.push(cmd.name.to_string());
        match cmd.name {
            "get" => self
                .strings
                .get(&a[1][..])
                .map_or(Reply::Nil, |v| Reply::bulk(v.clone())),
            "set" => {
                self.strings.insert(a[1].to_vec(), a[2].to_vec());
                Reply::ok()
            }
            "incr" => {
                let cur = self
                    .strings
                    .get(&a[1][..])
                    .cloned()
                    .unwrap_or(b"0".to_vec());
                match std::str::from_utf8(&cur)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                {
                    Some(n) => {
                        self.strings
                            .insert(a[1].to_vec(), (n + 1).to_string().into_bytes());
                        Reply::Int(n + 1)
                    }
                    None => Reply::err("value is not an integer or out of range"),
                }
            }
            "del" => Reply::Int(
                a[1..]
                    .iter()
                    .filter(|k| self.strings.remove(&k[..]).is_some())
                    .count() as i64,
            ),
            "ping" => Reply::Simple("PONG"),
            "hgetall" => Reply::Map(vec![(Reply::bulk("field"), Reply::bulk("value"))]),
            "mget" => Reply::Array(
                a[1..]
                    .iter()
                    .map(|k| {
                        self.strings
                            .get(&k[..])
                            .map_or(Reply::Nil, |v| Reply::bulk(v.clone()))
                    })
                    .collect(),
            ),
            _ => Reply::err("unexpected"),
        }
    }

    fn admit(&mut self, _: &CommandInfo, _: &[Bytes]) -> Result<(), String> {
        Ok(())
    }

    fn rejected(&mut self, _: Option<&CommandInfo>, _: &[Bytes], error: &str) {
        self.rejected.push(error.to_string());
    }
}

fn activity() -> Arc<Activity> {
    Arc::new(Activity::default())
}

fn eval_in(s: &mut Scripts, host: &mut MapHost, body: &str, keys: &[&str], argv: &[&str]) -> Reply {
    let sha = match s.load(body.as_bytes()) {
        Ok(sha) => sha,
        Err(e) => return e,
    };
    let k: Vec<Bytes> = keys.iter().map(|k| Bytes::from(k.to_string())).collect();
    let a: Vec<Bytes> = argv.iter().map(|k| Bytes::from(k.to_string())).collect();
    s.run(host, &sha, &k, &a, false).reply
}

fn eval(body: &str) -> Reply {
    let mut s = Scripts::new(activity(), DEFAULT_MEMORY_LIMIT);
    eval_in(&mut s, &mut MapHost::default(), body, &[], &[])
}

fn err_of(r: Reply) -> String {
    match r {
        Reply::Error(e) => e,
        other => panic!("not an error: {other:?}"),
    }
}

#[test]
fn conversions_match_redis() {
    assert_eq!(eval("return 'hello'"), Reply::bulk("hello"));
    assert_eq!(eval("return _G"), Reply::Array(vec![]));
    assert_eq!(eval("return 100.5"), Reply::Int(100));
    assert_eq!(eval("return {ok='fine'}"), Reply::Status("fine".into()));
    assert_eq!(
        eval("return {err='ERR this is an error'}"),
        Reply::Error("ERR this is an error".into())
    );
    assert_eq!(
        eval("local a = {}; setmetatable(a,{__index=function() foo() end}) return a"),
        Reply::Array(vec![])
    );
    assert_eq!(
        eval("return redis.sha1hex('')"),
        Reply::bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );
    assert_eq!(
        eval("return 'hello' --trailing comment"),
        Reply::bulk("hello")
    );
}

#[test]
fn keys_argv_and_calls() {
    let mut s = Scripts::new(activity(), DEFAULT_MEMORY_LIMIT);
    let mut h = MapHost::default();
    let r = eval_in(
        &mut s,
        &mut h,
        "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}",
        &["a", "b"],
        &["c", "d"],
    );
    assert_eq!(
        r,
        Reply::Array(
            ["a", "b", "c", "d"]
                .iter()
                .map(|x| Reply::bulk(*x))
                .collect()
        )
    );
    let r = eval_in(
        &mut s,
        &mut h,
        "redis.call('set', KEYS[1], 0) local v = redis.pcall('incr', KEYS[1]) return {type(v), v}",
        &["x"],
        &[],
    );
    assert_eq!(r, Reply::Array(vec![Reply::bulk("number"), Reply::Int(1)]));
    let r = eval_in(
        &mut s,
        &mut h,
        "local v = redis.pcall('get', 'nope') return {type(v), v == false}",
        &[],
        &[],
    );
    assert_eq!(r, Reply::Array(vec![Reply::bulk("boolean"), Reply::Int(1)]));
    let r = eval_in(
        &mut s,
        &mut h,
        "local v = redis.pcall('set', 'k', 'v') return {type(v), v['ok']}",
        &[],
        &[],
    );
    assert_eq!(
        r,
        Reply::Array(vec![Reply::bulk("table"), Reply::bulk("OK")])
    );
    let r = eval_in(
        &mut s,
        &mut h,
        "redis.call('set','foo',9007199254740991) return redis.call('get','foo')",
        &[],
        &[],
    );
    assert_eq!(r, Reply::bulk("9007199254740991"));
    // RESP3 through setresp.
    let r = eval_in(
        &mut s,
        &mut h,
        "redis.setresp(3); return redis.call('hgetall', 'h')",
        &[],
        &[],
    );
    assert_eq!(
        r,
        Reply::Map(vec![(Reply::bulk("field"), Reply::bulk("value"))])
    );
    let r = eval_in(
        &mut s,
        &mut h,
        "return redis.call('hgetall', 'h')",
        &[],
        &[],
    );
    assert_eq!(
        r,
        Reply::Array(vec![Reply::bulk("field"), Reply::bulk("value")])
    );
}

#[test]
fn command_errors_are_redis_errors() {
    let mut s = Scripts::new(activity(), DEFAULT_MEMORY_LIMIT);
    let mut h = MapHost::default();
    h.strings.insert(b"s".to_vec(), b"abc".to_vec());
    let e = err_of(eval_in(
        &mut s,
        &mut h,
        "return redis.call('incr', 's')",
        &[],
        &[],
    ));
    assert!(
        e.starts_with("ERR value is not an integer or out of range script: "),
        "{e}"
    );
    assert!(e.ends_with(", on @user_script:1."), "{e}");
    let r = eval_in(
        &mut s,
        &mut h,
        "local t = redis.pcall('incr', 's') return {type(t), t['err']}",
        &[],
        &[],
    );
    assert_eq!(
        r,
        Reply::Array(vec![
            Reply::bulk("table"),
            Reply::bulk("ERR value is not an integer or out of range")
        ])
    );
    let e = err_of(eval_in(
        &mut s,
        &mut h,
        "redis.call('nosuchcommand')",
        &[],
        &[],
    ));
    assert!(
        e.contains("Unknown Redis command called from script"),
        "{e}"
    );
    let e = err_of(eval_in(
        &mut s,
        &mut h,
        "redis.call('get','a','b','c')",
        &[],
        &[],
    ));
    assert!(
        e.contains("Wrong number of args calling Redis command from script"),
        "{e}"
    );
    let e = err_of(eval_in(
        &mut s,
        &mut h,
        "return redis.pcall('blpop','x',0)",
        &[],
        &[],
    ));
    assert!(
        e.contains("This Redis command is not allowed from script"),
        "{e}"
    );
    let e = err_of(eval_in(&mut s, &mut h, "return redis.call()", &[], &[]));
    assert!(e.contains("one argument"), "{e}");
    let e = err_of(eval_in(
        &mut s,
        &mut h,
        "return redis.call('ping', {})",
        &[],
        &[],
    ));
    assert!(
        e.contains("Lua redis lib command arguments must be strings or integers"),
        "{e}"
    );
    assert_eq!(h.rejected.len(), 3);
    let e = err_of(eval_in(&mut s, &mut h, "redis.sha1hex()", &[], &[]));
    assert!(e.contains("wrong number"), "{e}");
    let e = err_of(eval_in(
        &mut s,
        &mut h,
        "return redis.error_reply('MY_ERR_CODE custom msg')",
        &[],
        &[],
    ));
    assert_eq!(e, "MY_ERR_CODE custom msg");
    assert_eq!(
        eval_in(
            &mut s,
            &mut h,
            "return redis.status_reply('MY_OK')",
            &[],
            &[]
        ),
        Reply::Status("MY_OK".into())
    );
    let r = eval_in(
        &mut s,
        &mut h,
        "local ok, res = pcall(function() return foo end) return tostring(ok) .. ' ' .. res",
        &[],
        &[],
    );
    let Reply::Bulk(b) = r else { panic!() };
    assert!(String::from_utf8_lossy(&b).starts_with(
        "false user_script:1: Script attempted to access nonexistent global variable 'foo'"
    ));
    let r = eval_in(
        &mut s,
        &mut h,
        "local ok, e = pcall(redis.call, 'incr', 's') return e",
        &[],
        &[],
    );
    assert_eq!(
        r,
        Reply::bulk("ERR value is not an integer or out of range")
    );
}

#[test]
fn read_only_scripts_refuse_writes() {
    let mut s = Scripts::new(activity(), DEFAULT_MEMORY_LIMIT);
    let mut h = MapHost::default();
    let sha = s.load(b"return redis.call('set', 'x', 1)").unwrap();
    let e = err_of(s.run(&mut h, &sha, &[], &[], true).reply);
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts."),
        "{e}"
    );
    assert!(h.calls.is_empty());
}

#[test]
fn the_sandbox_holds() {
    let e = err_of(eval("return a"));
    assert!(
        e.starts_with(
            "ERR user_script:1: Script attempted to access nonexistent global variable 'a'"
        ),
        "{e}"
    );
    for (script, what) in [
        ("a=10", "Attempt to modify a readonly table"),
        ("setmetatable(_G, {})", "Attempt to modify a readonly table"),
        (
            "local g = getmetatable(_G) g.__index = {}",
            "Attempt to modify a readonly table",
        ),
        (
            "redis = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        ("_G = {}", "Attempt to modify a readonly table"),
        (
            "redis.call = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        (
            "cjson.encode = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        (
            "cmsgpack.pack = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        (
            "bit.lshift = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        ("string.upper = 1", "Attempt to modify a readonly table"),
        (
            "getmetatable('').__index = {}",
            "Attempt to modify a readonly table",
        ),
        ("rawset(_G, 'x', 1)", "Attempt to modify a readonly table"),
        (
            "rawset(getfenv(0), 'x', 1)",
            "Attempt to modify a readonly table",
        ),
        (
            "getmetatable(_G).__index.redis = 1",
            "Attempt to modify a readonly table",
        ),
        (
            "loadstring('x = 1')()",
            "Attempt to modify a readonly table",
        ),
        (
            "loadfile('some file')",
            "Script attempted to access nonexistent global variable 'loadfile'",
        ),
        (
            "dofile('some file')",
            "Script attempted to access nonexistent global variable 'dofile'",
        ),
        (
            "print('x')",
            "Script attempted to access nonexistent global variable 'print'",
        ),
        (
            "return os.time()",
            "Script attempted to access nonexistent global variable 'os'",
        ),
        (
            "return io.open('x')",
            "Script attempted to access nonexistent global variable 'io'",
        ),
        (
            "return debug.getinfo(1)",
            "Script attempted to access nonexistent global variable 'debug'",
        ),
        (
            "return loadstring(string.dump(function() return 1 end))()",
            "attempt to call a nil value",
        ),
    ] {
        let e = err_of(eval(script));
        assert!(e.contains(what), "{script}: {e}");
    }
    // Lua still works inside the sandbox.
    assert_eq!(
        eval("local t = {3,1,2} table.sort(t) return t"),
        Reply::Array(vec![Reply::Int(1), Reply::Int(2), Reply::Int(3)])
    );
    assert_eq!(eval("return ('abc'):upper()"), Reply::bulk("ABC"));
    assert_eq!(eval("return loadstring('return 1 + 1')()"), Reply::Int(2));
    assert_eq!(eval("return bit.band(1)"), Reply::Int(1));
    assert_eq!(
        eval("return cjson.decode('{\"a\":[1,2]}').a[2]"),
        Reply::Int(2)
    );
    assert_eq!(
        eval("local co = coroutine.wrap(function() coroutine.yield(5) end) return co()"),
        Reply::Int(5)
    );
}

#[test]
fn random_is_seeded_and_varies() {
    let mut s = Scripts::new(activity(), DEFAULT_MEMORY_LIMIT);
    let mut h = MapHost::default();
    let body = "math.randomseed(ARGV[1]); return tostring(math.random())";
    let a = eval_in(&mut s, &mut h, body, &[], &["10"]);
    let b = eval_in(&mut s, &mut h, body, &[], &["10"]);
    let c = eval_in(&mut s, &mut h, body, &[], &["20"]);
    assert_eq!(a, b);
    assert_ne!(b, c);
    let x = eval_in(&mut s, &mut h, "return tostring(math.random())", &[], &[]);
    let y = eval_in(&mut s, &mut h, "return tostring(math.random())", &[], &[]);
    assert_ne!(x, y);
}

#[test]
fn a_killed_script_ends_even_under_pcall() {
    let act = activity();
    let mut s = Scripts::new(act.clone(), DEFAULT_MEMORY_LIMIT);
    let sha = s
        .load(b"local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end")
        .unwrap();
    let killer = {
        let act = act.clone();
        std::thread::spawn(move || {
            while act.running().is_none() {
                std::thread::yield_now();
            }
            act.kill(true).unwrap();
        })
    };
    let _g = act.start(Running {
        name: sha.clone(),
        eval: true,
        command: vec![],
        started: std::time::Instant::now(),
    });
    let e = err_of(s.run(&mut MapHost::default(), &sha, &[], &[], false).reply);
    killer.join().unwrap();
    assert!(e.contains("Script killed by user with SCRIPT KILL"), "{e}");
}

#[test]
fn a_script_that_wrote_cannot_be_killed() {
    let act = activity();
    let _g = act.start(Running {
        name: "x".into(),
        eval: true,
        command: vec![],
        started: std::time::Instant::now(),
    });
    act.note_write();
    assert!(matches!(act.kill(true), Err(Reply::Error(e)) if e.starts_with("UNKILLABLE")));
    assert!(matches!(act.kill(false), Err(Reply::Error(e)) if e.starts_with("UNKILLABLE")));
}

#[test]
fn memory_past_the_cap_is_an_error() {
    let mut s = Scripts::new(activity(), 8 << 20);
    let mut h = MapHost::default();
    let e = err_of(eval_in(
        &mut s,
        &mut h,
        "local t = {} while true do t[#t+1] = string.rep('x', 100000) .. #t end",
        &[],
        &[],
    ));
    assert!(e.contains("not enough memory"), "{e}");
    // The interpreter goes on.
    assert_eq!(eval_in(&mut s, &mut h, "return 1", &[], &[]), Reply::Int(1));
    let e = err_of(eval_in(
        &mut s,
        &mut h,
        "local ok, e = pcall(string.rep, 'x', 1e9) return {err = tostring(e)}",
        &[],
        &[],
    ));
    assert!(e.contains("not enough memory"), "{e}");
}

#[test]
fn compile_errors() {
    let e = err_of(eval("this is not lua"));
    assert!(
        e.starts_with("ERR Error compiling script (new function): user_script:1:"),
        "{e}"
    );
    let e = err_of(eval("#!not-lua\nreturn 1"));
    assert!(e.contains("Unexpected engine in script shebang"), "{e}");
    assert_eq!(eval("#!lua\nreturn 1"), Reply::Int(1));
}

fn lib(name: &str, body: &str) -> String {
    format!(
        "#!lua name={name}\nredis.register_function('{name}', function(KEYS, ARGV)\n {body} \nend)"
    )
}

#[test]
fn libraries_load_run_and_refuse() {
    let mut l = Libraries::new(activity(), DEFAULT_MEMORY_LIMIT);
    let mut h = MapHost::default();
    assert_eq!(
        l.load(lib("test", "return 'hello'").as_bytes(), false)
            .unwrap(),
        "test"
    );
    let f = l.function("TEST").unwrap();
    assert_eq!(
        l.run(&mut h, f, &[], &[], false).reply,
        Reply::bulk("hello")
    );
    assert!(l
        .load(lib("test", "return 1").as_bytes(), false)
        .unwrap_err()
        .contains("already exists"));
    assert!(l
        .load(lib("test", "bad script").as_bytes(), true)
        .unwrap_err()
        .contains("Error compiling function"));
    assert!(l
        .load(b"#!lua name=a\nreturn 1", false)
        .unwrap_err()
        .contains("No functions registered"));
    assert!(l
        .load(b"#!bad_engine name=a\n", false)
        .unwrap_err()
        .contains("Engine 'bad_engine' not found"));
    assert!(l
        .load(b"#!lua name=a\nreturn redis.call('ping')", false)
        .unwrap_err()
        .contains("nonexistent global variable 'call'"));
    assert!(l
        .load(b"#!lua name=a\nreturn math.random()", false)
        .unwrap_err()
        .contains("nonexistent global variable 'math'"));
    assert!(l
        .load(b"#!lua name=a\na = 1", false)
        .unwrap_err()
        .contains("Attempt to modify a readonly table"));
    assert!(l
        .load(b"#!lua name=a\nlocal a = 1 while 1 do a = a + 1 end", false)
        .unwrap_err()
        .contains("FUNCTION LOAD timeout"));
    assert!(l
        .load(b"#!lua name=a\nredis.register_function('f1', 'x')", false)
        .unwrap_err()
        .contains("second argument to redis.register_function must be a function"));
    let code = "#!lua name=lib1\nlocal function ping() return redis.call('ping') end\nredis.register_function{function_name='f1', callback=function(keys, args) return ping() end, flags={'no-writes'}, description='d'}";
    l.load(code.as_bytes(), false).unwrap();
    let f = l.function("f1").unwrap();
    assert_eq!(f.flags.names(), ["no-writes"]);
    assert_eq!(
        l.run(&mut h, f, &[], &[], false).reply,
        Reply::Status("PONG".into())
    );
    assert!(l
        .load(
            b"#!lua name=lib2\nredis.register_function('f1', function() return 1 end)",
            false
        )
        .unwrap_err()
        .contains("Function f1 already exists"));
    // At run time the library API is gone, and the globals are the scripts' globals.
    l.load(b"#!lua name=lib3\nredis.register_function('f3', function() redis.register_function('x', function() end) end)", false).unwrap();
    let e = err_of(
        l.run(&mut h, l.function("f3").unwrap(), &[], &[], false)
            .reply,
    );
    assert!(
        e.contains("attempt to call field 'register_function' (a nil value)"),
        "{e}"
    );
    let malicious = "#!lua name=lib4\nlocal lib = redis\nlib.register_function('f4', function() lib.redis = redis return 1 end)\nlib.register_function('f5', function() lib.register_function('f4', function() end) end)";
    l.load(malicious.as_bytes(), false).unwrap();
    let e = err_of(
        l.run(&mut h, l.function("f4").unwrap(), &[], &[], false)
            .reply,
    );
    assert!(e.contains("Attempt to modify a readonly table"), "{e}");
    let e = err_of(
        l.run(&mut h, l.function("f5").unwrap(), &[], &[], false)
            .reply,
    );
    assert!(
        e.contains("can only be called on FUNCTION LOAD command"),
        "{e}"
    );
    let keys = l.run(
        &mut h,
        l.function("test").unwrap(),
        &[Bytes::from("k")],
        &[],
        false,
    );
    assert_eq!(keys.reply, Reply::bulk("hello"));
}

#[test]
fn dump_and_restore_round_trip() {
    let mut l = Libraries::new(activity(), DEFAULT_MEMORY_LIMIT);
    l.load(lib("test", "return 'hello'").as_bytes(), false)
        .unwrap();
    let dump = l.dump();
    l.flush();
    assert!(l.function("test").is_none());
    l.restore(&dump, RestorePolicy::Append).unwrap();
    assert!(l.function("test").is_some());
    assert!(l
        .restore(&dump, RestorePolicy::Append)
        .unwrap_err()
        .contains("Library test already exists"));
    l.restore(&dump, RestorePolicy::Replace).unwrap();
    l.restore(&dump, RestorePolicy::Flush).unwrap();
    assert!(l
        .restore(b"bad_payload", RestorePolicy::Flush)
        .unwrap_err()
        .contains("payload version or checksum are wrong"));
    assert!(l.function("test").is_some());
}
