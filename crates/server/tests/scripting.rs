//! Lua scripts and functions against a running server: atomicity, persistence of function
//! libraries across a restart, and hostile scripts (a loop that never ends, unbounded
//! allocation, deeply nested payloads), each followed by a `PING` that answers.
//!
//! Nothing waits for time to pass: a test polls for the state it asserts (a script seen
//! running, `-BUSY`), with long socket timeouts only as a guard against a hang.

mod common;
use common::client::{bulk, is_err, simple, Client};
use common::{AlwaysCut, Running};
use halflife_server::{AppendFsync, Config};
use redis_protocol::resp2::types::BytesFrame as F;

fn config() -> Config {
    Config {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        appendfsync: AppendFsync::No,
        ..Config::default()
    }
}

fn int(n: i64) -> F {
    F::Integer(n)
}

fn err_text(f: &F) -> String {
    match f {
        F::Error(e) => e.to_string(),
        other => panic!("not an error: {other:?}"),
    }
}

/// Sends `args` on `c` and polls on `other` until it answers `-BUSY` (the script runs
/// past the threshold).
fn start_busy(c: &mut Client, other: &mut Client, args: &[&str]) {
    let a: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&a);
    wait_busy(other);
}

/// Polls on `other` until it answers `-BUSY`.
fn wait_busy(other: &mut Client) {
    loop {
        let r = other.cmd(&["PING"]);
        if is_err(&r, "BUSY") {
            return;
        }
        assert_eq!(r, simple("PONG"));
    }
}

#[test]
fn eval_evalsha_and_the_script_cache() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "k"]),
        int(1)
    );
    let sha = match c.cmd(&["SCRIPT", "LOAD", "return redis.call('incr', KEYS[1])"]) {
        F::BulkString(b) => String::from_utf8(b.to_vec()).unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(c.cmd(&["EVALSHA", &sha.to_uppercase(), "1", "k"]), int(2));
    assert_eq!(
        c.cmd(&[
            "SCRIPT",
            "EXISTS",
            &sha,
            "ffd632c7d33e571e9f24556ebed26c3479a87130"
        ]),
        F::Array(vec![int(1), int(0)])
    );
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]), simple("OK"));
    assert!(is_err(&c.cmd(&["EVALSHA", &sha, "1", "k"]), "NOSCRIPT"));
    // A script's error is Redis's, with the script and line.
    c.cmd(&["SET", "s", "abc"]);
    let e = err_text(&c.cmd(&["EVAL", "return redis.call('incr', 's')", "0"]));
    assert!(
        e.starts_with("ERR value is not an integer or out of range script: "),
        "{e}"
    );
    // WRONGTYPE comes back through pcall as a table.
    let r = c.cmd(&[
        "EVAL",
        "local t = redis.pcall('lpush', 's', 'x') return t.err",
        "0",
    ]);
    assert!(
        matches!(&r, F::BulkString(b) if b.starts_with(b"WRONGTYPE")),
        "{r:?}"
    );
    // SELECT inside the script does not change the caller's database.
    c.cmd(&["SET", "here", "0"]);
    c.cmd(&[
        "EVAL",
        "redis.call('select', 9) redis.call('set', 'there', 1)",
        "0",
    ]);
    assert_eq!(c.cmd(&["GET", "here"]), bulk("0"));
    assert_eq!(c.cmd(&["EXISTS", "there"]), int(0));
    // Writes are refused in EVAL_RO.
    let e = err_text(&c.cmd(&["EVAL_RO", "redis.call('del', 'here')", "0"]));
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts"),
        "{e}"
    );
    // Commands that are not allowed from scripts.
    let e = err_text(&c.cmd(&["EVAL", "redis.call('multi')", "0"]));
    assert!(
        e.contains("This Redis command is not allowed from script"),
        "{e}"
    );
    // Inside MULTI, a script runs with the transaction.
    assert_eq!(c.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('incr', 'm')", "0"]),
        simple("QUEUED")
    );
    assert_eq!(c.cmd(&["EXEC"]), F::Array(vec![int(1)]));
    srv.stop();
}

#[test]
fn a_script_is_atomic_against_other_clients() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    c.cmd(&["SET", "n", "0"]);
    // Each script reads, waits and writes back: without atomicity, the other clients'
    // INCRs between its read and its write would be lost.
    let script = "local v = tonumber(redis.call('get', 'n')) for i = 1, 20000 do end redis.call('set', 'n', v + 1) return 1";
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let addr = srv.addr;
            let script = script.to_string();
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                for _ in 0..50 {
                    assert_eq!(c.cmd(&["EVAL", &script, "0"]), int(1));
                    assert!(matches!(c.cmd(&["INCR", "n"]), F::Integer(_)));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(c.cmd(&["GET", "n"]), bulk("400"));
    srv.stop();
}

#[test]
fn a_script_that_loops_forever_is_busy_for_others_and_killed() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut other = Client::connect(srv.addr);
    assert_eq!(
        other.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]),
        simple("OK")
    );
    start_busy(&mut c, &mut other, &["EVAL", "while true do end", "0"]);
    let e = err_text(&other.cmd(&["GET", "x"]));
    assert!(e.starts_with("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), "{e}");
    // FUNCTION KILL does not kill an EVAL; SCRIPT KILL does.
    assert!(is_err(&other.cmd(&["FUNCTION", "KILL"]), "BUSY"));
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), simple("OK"));
    let e = err_text(&c.read().unwrap());
    assert!(e.contains("Script killed by user with SCRIPT KILL"), "{e}");
    assert_eq!(other.cmd(&["PING"]), simple("PONG"));
    assert!(is_err(&other.cmd(&["SCRIPT", "KILL"]), "NOTBUSY"));
    // pcall cannot catch the kill.
    start_busy(
        &mut c,
        &mut other,
        &[
            "EVAL",
            "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
            "0",
        ],
    );
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), simple("OK"));
    assert!(is_err(&c.read().unwrap(), "ERR Script killed"));
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    srv.stop();
}

#[test]
fn a_script_that_wrote_cannot_be_killed_but_shutdown_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut other = Client::connect(srv.addr);
    other.cmd(&["CONFIG", "SET", "lua-time-limit", "50"]);
    start_busy(
        &mut c,
        &mut other,
        &["EVAL", "redis.call('set', 'x', 'y') while true do end", "0"],
    );
    assert!(is_err(&other.cmd(&["SCRIPT", "KILL"]), "UNKILLABLE"));
    // SHUTDOWN ends the script and the server.
    other.send(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(other.read().is_none());
    srv.join();
}

#[test]
fn a_function_that_loops_is_killed_by_function_kill() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut other = Client::connect(srv.addr);
    other.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]);
    let code = "#!lua name=spin\nredis.register_function('spin', function() local a = 1 while true do a = a + 1 end end)";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", code]), bulk("spin"));
    start_busy(&mut c, &mut other, &["FCALL", "spin", "0"]);
    match other.cmd(&["FUNCTION", "STATS"]) {
        F::Array(a) => assert_ne!(a[1], F::Null, "{a:?}"),
        other => panic!("{other:?}"),
    }
    assert!(is_err(&other.cmd(&["SCRIPT", "KILL"]), "BUSY"));
    assert_eq!(other.cmd(&["FUNCTION", "KILL"]), simple("OK"));
    assert!(is_err(&c.read().unwrap(), "ERR Script killed"));
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    srv.stop();
}

#[test]
fn unbounded_allocation_and_deep_payloads_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "halflife-lua-memory-limit", "16777216"]),
        simple("OK")
    );
    let e = err_text(&c.cmd(&[
        "EVAL",
        "local t = {} while true do t[#t + 1] = string.rep('x', 65536) .. #t end",
        "0",
    ]));
    assert!(e.contains("not enough memory"), "{e}");
    assert_eq!(c.cmd(&["EVAL", "return 1", "0"]), int(1));
    // One string past the cap at once.
    let e = err_text(&c.cmd(&["EVAL", "return string.rep('x', 1e9)", "0"]));
    assert!(e.contains("not enough memory"), "{e}");
    let deep_json = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    let e = err_text(&c.cmd(&["EVAL", "return cjson.decode(ARGV[1])", "0", &deep_json]));
    assert!(e.contains("too many nested data structures"), "{e}");
    let packed: Vec<u8> = std::iter::repeat_n(0x91u8, 200_000).chain([0xc0]).collect();
    c.send(&[b"EVAL", b"return cmsgpack.unpack(ARGV[1])", b"0", &packed]);
    let e = err_text(&c.read().unwrap());
    assert!(e.contains("nested deeper"), "{e}");
    // A table that holds itself is a reply of bounded depth.
    assert!(matches!(
        c.cmd(&["EVAL", "local a = {} a[1] = a return a", "0"]),
        F::Array(_)
    ));
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    srv.stop();
}

#[test]
fn functions_survive_a_restart_and_dump_restore() {
    let dir = tempfile::tempdir().unwrap();
    let code = "#!lua name=lib\nredis.register_function{function_name='bump', callback=function(keys) return redis.call('incr', keys[1]) end}\nredis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    let dump = {
        let srv = Running::start(dir.path(), config());
        let mut c = Client::connect(srv.addr);
        assert_eq!(c.cmd(&["FUNCTION", "LOAD", code]), bulk("lib"));
        assert_eq!(c.cmd(&["FCALL", "bump", "1", "k"]), int(1));
        assert_eq!(c.cmd(&["FLUSHALL"]), simple("OK"));
        let e = err_text(&c.cmd(&["FCALL_RO", "bump", "1", "k"]));
        assert!(
            e.contains("Can not execute a script with write flag using *_ro command"),
            "{e}"
        );
        let dump = c.cmd(&["FUNCTION", "DUMP"]);
        srv.stop();
        dump
    };
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["FCALL", "BUMP", "1", "k"]), int(1));
    assert_eq!(c.cmd(&["FCALL_RO", "peek", "1", "k"]), bulk("1"));
    assert_eq!(c.cmd(&["FUNCTION", "DELETE", "lib"]), simple("OK"));
    assert!(is_err(
        &c.cmd(&["FCALL", "bump", "1", "k"]),
        "ERR Function not found"
    ));
    let F::BulkString(payload) = dump else {
        panic!("{dump:?}")
    };
    c.send(&[b"FUNCTION", b"RESTORE", &payload]);
    assert_eq!(c.read().unwrap(), simple("OK"));
    assert_eq!(c.cmd(&["FCALL", "bump", "1", "k"]), int(2));
    assert!(is_err(
        &c.cmd(&["FUNCTION", "RESTORE", "bad_payload"]),
        "ERR payload version or checksum are wrong"
    ));
    srv.stop();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["FCALL", "bump", "1", "k"]), int(3));
    assert_eq!(c.cmd(&["FUNCTION", "FLUSH"]), simple("OK"));
    srv.stop();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["FUNCTION", "LIST"]), F::Array(vec![]));
    srv.stop();
}

/// One run of transactions and scripts that each write two keys, on a storage that loses
/// power at its `cut`-th mutating call (never if `None`), under `appendfsync always`.
/// Returns the storage's mutating calls at the start and at the end, and how many of the
/// pairs were acknowledged; after the cut the database is reopened and every pair checked:
/// both keys or neither (the two writes are one engine batch), and every acknowledged pair
/// present.
fn pairs_through_a_cut(cut: Option<u64>) -> (u64, u64, usize) {
    use testkit::powercut::Moment;
    const PAIRS: usize = 16;
    let (power, srv) = AlwaysCut::start(config(), 7, cut.map_or(Moment::Never, Moment::AfterOps));
    let storage = &power.storage;
    let start = storage.ops();
    let mut c = Client::connect(srv.addr);
    let script = "redis.call('set', KEYS[1], ARGV[1]) redis.call('set', KEYS[2], ARGV[1])";
    let mut acked = 0;
    for i in 0..PAIRS {
        let (a, b, v) = (format!("a{i}"), format!("b{i}"), i.to_string());
        let cmds: Vec<Vec<&str>> = if i % 2 == 0 {
            vec![
                vec!["MULTI"],
                vec!["SET", &a, &v],
                vec!["SET", &b, &v],
                vec!["EXEC"],
            ]
        } else {
            vec![vec!["EVAL", script, "2", &a, &b, &v]]
        };
        let mut ok = true;
        for cmd in &cmds {
            let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            let reply = c.try_send(&args).ok().and_then(|_| c.read());
            ok &= match (cmd[0], reply) {
                ("EXEC", Some(F::Array(r))) => r.iter().all(|x| *x == simple("OK")),
                ("EVAL", Some(r)) => r == F::Null,
                (_, Some(r)) => !matches!(r, F::Error(_)),
                (_, None) => false,
            };
        }
        if !ok {
            break;
        }
        acked += 1;
    }
    let end = storage.ops();
    drop(c);
    if cut.is_none() {
        srv.stop();
        return (start, end, acked);
    }
    let srv = power.restart(srv);
    let mut c = Client::connect(srv.addr);
    for i in 0..PAIRS {
        let (a, b) = (
            c.cmd(&["GET", &format!("a{i}")]),
            c.cmd(&["GET", &format!("b{i}")]),
        );
        assert_eq!(a, b, "cut at {cut:?}: pair {i} is whole or absent");
        if i < acked {
            assert_eq!(
                a,
                bulk(&i.to_string()),
                "cut at {cut:?}: pair {i} was acknowledged"
            );
        }
    }
    srv.stop();
    (start, end, acked)
}

/// A transaction's and a script's writes are one engine batch: a power cut at any point
/// of a run of them leaves each one whole or absent, never half applied, and each one
/// acknowledged present (the cut is swept over the run's mutating calls).
#[test]
fn a_power_cut_never_leaves_half_a_transaction_or_script() {
    let (start, end, acked) = pairs_through_a_cut(None);
    assert_eq!(acked, 16);
    assert!(end > start + 16, "the run synced ({start}..{end})");
    let step = ((end - start) / 12).max(1);
    let mut cut_inside = 0;
    for n in (start + 1..end).step_by(step as usize) {
        let (_, _, acked) = pairs_through_a_cut(Some(n));
        cut_inside += usize::from(acked < 16);
    }
    assert!(cut_inside > 0, "some cuts fell inside the run");
}

/// Several connections pipelining scripts at once (their batches run in groups on the
/// script thread) while another connection INCRs the same counter: each script reads the
/// counter and writes it back, so a script that saw another's write late, or a command
/// that ran between a script's read and its write, would lose an increment and repeat a
/// value. Each connection's replies come in its order, and its list holds its scripts'
/// pushes in that order.
#[test]
fn scripts_of_many_connections_are_atomic_and_in_order_per_connection() {
    const CLIENTS: usize = 6;
    const ROUNDS: usize = 40;
    const PIPELINE: usize = 4;
    const INCRS: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let script = "local v = tonumber(redis.call('get', KEYS[1]) or '0') + 1 \
                  redis.call('set', KEYS[1], v) redis.call('rpush', KEYS[2], ARGV[1]) \
                  return {v, ARGV[1]}";
    let addr = srv.addr;
    let incr = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        for _ in 0..INCRS {
            assert!(matches!(c.cmd(&["INCR", "n"]), F::Integer(_)));
        }
    });
    let writers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                let list = format!("list{w}");
                let mut seen = Vec::new();
                for r in 0..ROUNDS {
                    for p in 0..PIPELINE {
                        let i = (r * PIPELINE + p).to_string();
                        c.send(&[
                            b"EVAL",
                            script.as_bytes(),
                            b"2",
                            b"n",
                            list.as_bytes(),
                            i.as_bytes(),
                        ]);
                    }
                    for p in 0..PIPELINE {
                        let i = (r * PIPELINE + p).to_string();
                        match c.read().expect("a reply") {
                            F::Array(a) => {
                                assert_eq!(a[1], bulk(&i), "replies in the connection's order");
                                let F::Integer(v) = a[0] else { panic!("{a:?}") };
                                seen.push(v);
                            }
                            other => panic!("{other:?}"),
                        }
                    }
                }
                assert!(
                    seen.windows(2).all(|p| p[0] < p[1]),
                    "a connection's scripts run in its order"
                );
                seen
            })
        })
        .collect();
    let mut all: Vec<i64> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    incr.join().unwrap();
    let scripts = CLIENTS * ROUNDS * PIPELINE;
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), scripts, "no two scripts read the same counter");
    let mut c = Client::connect(srv.addr);
    assert_eq!(
        c.cmd(&["GET", "n"]),
        bulk(&(scripts + INCRS).to_string()),
        "no increment lost"
    );
    for w in 0..CLIENTS {
        let want: Vec<F> = (0..ROUNDS * PIPELINE)
            .map(|i| bulk(&i.to_string()))
            .collect();
        assert_eq!(
            c.cmd(&["LRANGE", &format!("list{w}"), "0", "-1"]),
            F::Array(want)
        );
    }
    srv.stop();
}

/// A script sent while another one runs on the script thread is answered `-BUSY` once
/// that one is past the threshold, as every other command is, instead of waiting behind it.
#[test]
fn a_script_queued_behind_a_busy_script_is_answered_busy() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut queued = Client::connect(srv.addr);
    let mut other = Client::connect(srv.addr);
    assert_eq!(
        other.cmd(&["CONFIG", "SET", "busy-reply-threshold", "300"]),
        simple("OK")
    );
    c.send(&[b"EVAL", b"while true do end", b"0"]);
    // Once the loop runs (most likely before it is past the threshold), the next scripts
    // queue behind it on the script thread.
    loop {
        match other.cmd(&["FUNCTION", "STATS"]) {
            F::Array(a) if a[1] != F::Null => break,
            F::Array(_) => {}
            r => panic!("{r:?}"),
        }
    }
    queued.send(&[b"EVAL", b"return 1", b"0"]);
    queued.send(&[b"FCALL", b"nosuch", b"0"]);
    wait_busy(&mut other);
    let e = err_text(&queued.read().unwrap());
    assert!(e.starts_with("BUSY "), "{e}");
    let e = err_text(&queued.read().unwrap());
    assert!(e.starts_with("BUSY "), "{e}");
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), simple("OK"));
    assert!(is_err(&c.read().unwrap(), "ERR Script killed"));
    assert_eq!(queued.cmd(&["EVAL", "return 1", "0"]), int(1));
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    srv.stop();
}

/// Scripts each connection sends in one pipeline in [`groups_through_a_cut`].
const GROUP_SCRIPTS: usize = 12;
/// Connections of [`groups_through_a_cut`].
const GROUP_CLIENTS: usize = 4;

/// One run of [`GROUP_CLIENTS`] connections at once, each sending [`GROUP_SCRIPTS`]
/// scripts in one write (a connection's batch joins a group of the script thread whole,
/// so its scripts run in one group), each script writing two keys of its own, on a storage
/// that loses power at its `cut`-th mutating call (never if `None`), under `appendfsync
/// always`. Returns the storage's mutating calls at the start and at the end and how many
/// scripts were acknowledged. After the cut, every script's pair is whole or absent,
/// every acknowledged one is present, and each connection's present scripts are a prefix
/// of what it sent.
fn groups_through_a_cut(cut: Option<u64>) -> (u64, u64, usize) {
    use testkit::powercut::Moment;
    let (power, srv) = AlwaysCut::start(config(), 11, cut.map_or(Moment::Never, Moment::AfterOps));
    let storage = &power.storage;
    let start = storage.ops();
    let script = "redis.call('set', KEYS[1], ARGV[1]) redis.call('set', KEYS[2], ARGV[1]) return 1";
    let addr = srv.addr;
    let clients: Vec<_> = (0..GROUP_CLIENTS)
        .map(|w| {
            std::thread::spawn(move || {
                // The server may be gone already: a cut at its first writes stops it.
                let Ok(mut c) = Client::try_connect(addr) else {
                    return 0;
                };
                let words: Vec<[String; 3]> = (0..GROUP_SCRIPTS)
                    .map(|j| [format!("a{w}:{j}"), format!("b{w}:{j}"), j.to_string()])
                    .collect();
                let cmds: Vec<[&[u8]; 6]> = words
                    .iter()
                    .map(|[a, b, v]| {
                        [
                            b"EVAL".as_slice(),
                            script.as_bytes(),
                            b"2",
                            a.as_bytes(),
                            b.as_bytes(),
                            v.as_bytes(),
                        ]
                    })
                    .collect();
                let cmds: Vec<&[&[u8]]> = cmds.iter().map(|c| c.as_slice()).collect();
                if c.try_send_all(&cmds).is_err() {
                    return 0;
                }
                let mut acked = 0;
                while acked < GROUP_SCRIPTS {
                    match c.read() {
                        Some(r) if r == int(1) => acked += 1,
                        _ => break,
                    }
                }
                acked
            })
        })
        .collect();
    let acked: Vec<usize> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let end = storage.ops();
    let total = acked.iter().sum();
    if cut.is_none() {
        srv.stop();
        return (start, end, total);
    }
    let srv = power.restart(srv);
    let mut c = Client::connect(srv.addr);
    for (w, &acked) in acked.iter().enumerate() {
        let mut present = 0;
        for j in 0..GROUP_SCRIPTS {
            let (a, b) = (
                c.cmd(&["GET", &format!("a{w}:{j}")]),
                c.cmd(&["GET", &format!("b{w}:{j}")]),
            );
            assert_eq!(a, b, "cut at {cut:?}: script {w}:{j} is whole or absent");
            if a == bulk(&j.to_string()) {
                assert_eq!(
                    present, j,
                    "cut at {cut:?}: {w}'s scripts survive as a prefix"
                );
                present += 1;
            } else {
                assert_eq!(a, F::Null, "cut at {cut:?}: {w}:{j}");
            }
        }
        assert!(
            present >= acked,
            "cut at {cut:?}: {w}'s {acked} acknowledged scripts survive ({present} do)"
        );
    }
    srv.stop();
    (start, end, total)
}

/// Groups of scripts through a power cut swept over the run's mutating calls: none half
/// applied, none acknowledged and lost, none out of order. The uncut run shows that the
/// scripts ran in groups: under `appendfsync always` a script run alone is a synced engine
/// write of its own (a write and a sync of the log at least), so 48 scripts alone would
/// make at least 96 mutating calls.
#[test]
fn a_power_cut_during_groups_of_scripts_loses_none_acknowledged_and_halves_none() {
    let scripts = GROUP_CLIENTS * GROUP_SCRIPTS;
    let (start, end, acked) = groups_through_a_cut(None);
    assert_eq!(acked, scripts);
    assert!(end > start, "the run wrote ({start}..{end})");
    assert!(
        end - start < scripts as u64,
        "the scripts ran in groups, each one synced write ({} mutating calls for {scripts} scripts)",
        end - start
    );
    let mut cut_inside = 0;
    for n in start + 1..end {
        let (_, _, acked) = groups_through_a_cut(Some(n));
        cut_inside += usize::from(acked < scripts);
    }
    assert!(cut_inside > 0, "some cuts fell inside the run");
}
