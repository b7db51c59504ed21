//! Script input under libFuzzer: `EVAL` bodies and arguments, `FUNCTION LOAD` code and
//! `FUNCTION RESTORE` payloads, run through the scripting runtime over a host made of a
//! map (the server's command layer without the engine). Whatever a script does (loops,
//! allocations, library calls on hostile data) must end in a reply, within the memory cap
//! and a kill after a short time, without a panic; a payload the registry restored must
//! dump and restore again.
//!
//! `cargo +nightly fuzz run script -- -jobs=1 -max_total_time=300` from `crates/server`.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

// The runtime's source itself, with the reply type and the version it names, rather than
// the `halflife-server` crate: the target then builds without the engine. (The server's
// commands, `script/cmd.rs`, are left out under `cfg(fuzzing)`.)
#[allow(dead_code)]
#[path = "../../src/protocol.rs"]
mod protocol;
mod info {
    pub const REDIS_VERSION: &str = "7.0.15";
}
#[allow(dead_code)]
#[path = "../../src/script/mod.rs"]
mod script;

use protocol::Reply;
use script::library::{Libraries, RestorePolicy};
use script::{Activity, CommandInfo, Running, ScriptHost};

#[derive(Default)]
struct MapHost(HashMap<Vec<u8>, Vec<u8>>);

const COMMANDS: &[(&str, i32, bool)] = &[
    ("get", 2, false),
    ("set", -3, true),
    ("del", -2, true),
    ("ping", -1, false),
    ("hgetall", 2, false),
];

impl ScriptHost for MapHost {
    fn command(&self, name: &str) -> Option<CommandInfo> {
        COMMANDS.iter().find(|c| c.0 == name).map(|&(name, arity, write)| CommandInfo {
            name,
            arity,
            write,
            noscript: false,
        })
    }

    fn admit(&mut self, _: &CommandInfo, _: &[Bytes]) -> Result<(), String> {
        Ok(())
    }

    fn call(&mut self, cmd: &CommandInfo, a: &[Bytes]) -> Reply {
        match cmd.name {
            "get" => self.0.get(&a[1][..]).map_or(Reply::Nil, |v| Reply::bulk(v.clone())),
            "set" => {
                if self.0.len() < 1000 {
                    self.0.insert(a[1].to_vec(), a[2].to_vec());
                }
                Reply::ok()
            }
            "del" => Reply::Int(a[1..].iter().filter(|k| self.0.remove(&k[..]).is_some()).count() as i64),
            "hgetall" => Reply::Map(vec![(Reply::bulk("f"), Reply::Double(1.5))]),
            _ => Reply::Simple("PONG"),
        }
    }

    fn rejected(&mut self, _: Option<&CommandInfo>, _: &[Bytes], _: &str) {}
}

const MEMORY: usize = 32 << 20;

/// Runs `f` marked as a script that is killed after a short time.
fn bounded<T>(act: &Arc<Activity>, f: impl FnOnce() -> T) -> T {
    let _g = act.start(Running {
        name: "fuzz".into(),
        eval: true,
        command: Vec::new(),
        started: Instant::now(),
    });
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let killer = {
        let act = act.clone();
        std::thread::spawn(move || {
            if wait.recv_timeout(Duration::from_millis(50)).is_err() {
                let _ = act.kill(true);
            }
        })
    };
    let out = f();
    drop(done);
    killer.join().unwrap();
    out
}

fn split(data: &[u8]) -> Vec<Bytes> {
    data.split(|&b| b == 0).map(Bytes::copy_from_slice).collect()
}

thread_local! {
    static ACT: Arc<Activity> = Arc::new(Activity::default());
    static EVAL: std::cell::RefCell<script::eval::Scripts> =
        std::cell::RefCell::new(script::eval::Scripts::new(ACT.with(|a| a.clone()), MEMORY));
    static LIBS: std::cell::RefCell<Libraries> =
        std::cell::RefCell::new(Libraries::new(ACT.with(|a| a.clone()), MEMORY));
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let act = ACT.with(|a| a.clone());
    let mut host = MapHost::default();
    match mode % 3 {
        0 => EVAL.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() > 1000 {
                s.flush();
            }
            let mut parts = split(rest);
            let body = parts.remove(0);
            let Ok(sha) = s.load(&body) else { return };
            let n = parts.len() / 2;
            let (keys, argv) = parts.split_at(n);
            let out = bounded(&act, || s.run(&mut host, &sha, keys, argv, mode & 4 != 0));
            let _ = protocol::Reply::encode(out.reply, 2 + (mode >> 7), &mut bytes::BytesMut::new());
        }),
        1 => LIBS.with(|l| {
            let mut l = l.borrow_mut();
            let mut parts = split(rest);
            let code = parts.remove(0);
            if bounded(&act, || l.load(&code, true)).is_err() {
                return;
            }
            let names: Vec<String> = l.libraries().flat_map(|lib| lib.functions.iter().map(|f| f.name.clone())).collect();
            for name in names {
                let f = l.function(&name).unwrap();
                let out = bounded(&act, || l.run(&mut host, f, &parts, &[], false));
                let _ = protocol::Reply::encode(out.reply, 3, &mut bytes::BytesMut::new());
            }
            l.flush();
        }),
        _ => LIBS.with(|l| {
            let mut l = l.borrow_mut();
            l.flush();
            if bounded(&act, || l.restore(rest, RestorePolicy::Append)).is_ok() {
                let dump = l.dump();
                bounded(&act, || l.restore(&dump, RestorePolicy::Flush)).expect("a dump restores");
            }
            l.flush();
        }),
    }
});
