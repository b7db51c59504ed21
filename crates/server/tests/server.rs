//! The server end to end over real TCP connections: a minimal RESP client (encoding
//! commands by hand, decoding replies with `redis-protocol`) against a server on an
//! ephemeral port.

mod common;
use common::client::{bulk, is_err, simple, Client};
use common::Running;
use halflife_server::{AppendFsync, Config, Protection};
use redis_protocol::resp2::types::BytesFrame as F;
use std::io::{Read, Write};
use std::time::Duration;

fn config() -> Config {
    with_fsync(AppendFsync::Always)
}

fn with_fsync(appendfsync: AppendFsync) -> Config {
    Config {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        appendfsync,
        ..Config::default()
    }
}

#[test]
fn strings_counters_expiry_and_scans() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    assert_eq!(c.cmd(&["SET", "k", "v"]), simple("OK"));
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    assert_eq!(c.cmd(&["SET", "k", "w", "NX"]), F::Null);
    assert_eq!(c.cmd(&["SET", "k", "w", "XX", "GET"]), bulk("v"));
    assert_eq!(c.cmd(&["APPEND", "k", "xyz"]), F::Integer(4));
    assert_eq!(c.cmd(&["STRLEN", "k"]), F::Integer(4));
    assert_eq!(c.cmd(&["INCR", "n"]), F::Integer(1));
    assert_eq!(c.cmd(&["INCRBY", "n", "41"]), F::Integer(42));
    assert_eq!(c.cmd(&["DECRBY", "n", "2"]), F::Integer(40));
    assert!(is_err(
        &c.cmd(&["INCR", "k"]),
        "ERR value is not an integer"
    ));
    assert_eq!(c.cmd(&["SET", "gone", "x", "PX", "50"]), simple("OK"));
    assert_eq!(c.cmd(&["EXISTS", "gone", "k", "nope"]), F::Integer(2));
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(c.cmd(&["GET", "gone"]), F::Null);
    assert_eq!(c.cmd(&["TTL", "gone"]), F::Integer(-2));
    assert_eq!(c.cmd(&["TTL", "k"]), F::Integer(-1));
    assert!(is_err(
        &c.cmd(&["SET", "k", "v", "EX", "0"]),
        "ERR invalid expire time"
    ));
    assert_eq!(
        c.cmd(&["MSET", "a1", "1", "a2", "2", "b1", "3"]),
        simple("OK")
    );
    assert_eq!(
        c.cmd(&["MGET", "a1", "zz", "b1"]),
        F::Array(vec![bulk("1"), F::Null, bulk("3")])
    );
    assert_eq!(
        c.cmd(&["KEYS", "a*"]),
        F::Array(vec![bulk("a1"), bulk("a2")])
    );
    assert_eq!(c.cmd(&["DBSIZE"]), F::Integer(5));
    // SCAN in pages of two visits every key once.
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let F::Array(r) = c.cmd(&["SCAN", &cursor, "COUNT", "2"]) else {
            panic!()
        };
        let F::BulkString(next) = &r[0] else { panic!() };
        let F::Array(keys) = &r[1] else { panic!() };
        seen.extend(keys.iter().cloned());
        cursor = String::from_utf8(next.to_vec()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 5);
    assert_eq!(c.cmd(&["GETDEL", "a1"]), bulk("1"));
    assert_eq!(c.cmd(&["DEL", "a2", "b1", "nope"]), F::Integer(2));
    assert_eq!(c.cmd(&["FLUSHDB"]), simple("OK"));
    assert_eq!(c.cmd(&["DBSIZE"]), F::Integer(0));
    // A pipeline of SETs runs as one engine write, yet each command keeps its own reply:
    // a key over the engine's 64 KiB limit and the NX SET are answered on their own.
    let huge = vec![b'k'; 70 << 10];
    c.send(&[b"SET", b"p1", b"1"]);
    c.send(&[b"SET", b"p2", b"2"]);
    c.send(&[b"SET", &huge, b"x"]);
    c.send(&[b"SET", b"p3", b"3"]);
    c.send(&[b"SET", b"p1", b"9", b"NX"]);
    c.send(&[b"SET", b"p4", b"4"]);
    c.send(&[b"SET", b"p4", b"5"]);
    assert_eq!(c.read(), Some(simple("OK")));
    assert_eq!(c.read(), Some(simple("OK")));
    assert!(is_err(&c.read().unwrap(), "ERR"));
    assert_eq!(c.read(), Some(simple("OK")));
    assert_eq!(c.read(), Some(F::Null));
    assert_eq!(c.read(), Some(simple("OK")));
    assert_eq!(c.read(), Some(simple("OK")));
    assert_eq!(
        c.cmd(&["MGET", "p1", "p2", "p3", "p4"]),
        F::Array(vec![bulk("1"), bulk("2"), bulk("3"), bulk("5")])
    );
    assert!(is_err(
        &c.cmd(&["NOSUCH", "x"]),
        "ERR unknown command 'NOSUCH'"
    ));
    assert!(is_err(
        &c.cmd(&["GET"]),
        "ERR wrong number of arguments for 'get'"
    ));
    srv.stop();
}

#[test]
fn pipelining_and_many_connections() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let addr = srv.addr;
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                // 200 SETs in one write, then 200 GETs in one write.
                let mut out = Vec::new();
                for j in 0..200 {
                    out.extend_from_slice(
                        format!("*3\r\n$3\r\nSET\r\n$6\r\nk{i}-{j:03}\r\n$4\r\nv{j:03}\r\n")
                            .as_bytes(),
                    );
                }
                c.s.write_all(&out).unwrap();
                for _ in 0..200 {
                    assert_eq!(c.read(), Some(simple("OK")));
                }
                out.clear();
                for j in 0..200 {
                    out.extend_from_slice(
                        format!("*2\r\n$3\r\nGET\r\n$6\r\nk{i}-{j:03}\r\n").as_bytes(),
                    );
                }
                c.s.write_all(&out).unwrap();
                for j in 0..200 {
                    assert_eq!(c.read(), Some(bulk(&format!("v{j:03}"))));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["DBSIZE"]), F::Integer(1600));
    // Concurrent INCRs on one key are atomic.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let addr = srv.addr;
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                for _ in 0..100 {
                    c.cmd(&["INCR", "ctr"]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(c.cmd(&["GET", "ctr"]), bulk("400"));
    srv.stop();
}

#[test]
fn auth_limits_and_malformed_frames() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(
        t.path(),
        Config {
            requirepass: Some("sesame".into()),
            maxclients: 2,
            max_request_bytes: 1 << 10,
            ..config()
        },
    );
    let mut a = Client::connect(srv.addr);
    assert!(is_err(&a.cmd(&["GET", "k"]), "NOAUTH"));
    // Pipelined SETs before AUTH are refused one by one, not written.
    a.send(&[b"SET", b"k", b"x"]);
    a.send(&[b"SET", b"k2", b"y"]);
    assert!(is_err(&a.read().unwrap(), "NOAUTH"));
    assert!(is_err(&a.read().unwrap(), "NOAUTH"));
    assert!(is_err(&a.cmd(&["AUTH", "wrong"]), "WRONGPASS"));
    assert_eq!(a.cmd(&["AUTH", "sesame"]), simple("OK"));
    assert_eq!(a.cmd(&["SET", "k", "v"]), simple("OK"));
    // A third connection is refused while two are open.
    let mut b = Client::connect(srv.addr);
    assert_eq!(b.cmd(&["AUTH", "sesame"]), simple("OK"));
    let mut c = Client::connect(srv.addr);
    assert!(matches!(c.read(), Some(F::Error(e)) if e.contains("max number of clients")));
    // An oversized request closes only that connection.
    let big = "x".repeat(4 << 10);
    b.send(&[b"SET", b"big", big.as_bytes()]);
    assert!(matches!(b.read(), Some(F::Error(e)) if e.contains("Protocol error")));
    assert_eq!(b.read(), None);
    // So does garbage.
    let mut d = Client::connect(srv.addr);
    d.s.write_all(b"*1\r\n:7\r\n").unwrap();
    assert!(matches!(d.read(), Some(F::Error(e)) if e.contains("Protocol error")));
    assert_eq!(d.read(), None);
    assert_eq!(a.cmd(&["GET", "k"]), bulk("v"));
    assert_eq!(a.cmd(&["GET", "k2"]), F::Null);
    // HELLO 3 switches this connection to RESP3 (a map reply starts with '%').
    a.send(&[b"HELLO", b"3"]);
    let mut first = [0u8; 1];
    a.s.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"%");
    srv.stop();
}

#[test]
fn data_survives_shutdown_and_reopen() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    assert_eq!(
        c.cmd(&["SET", "durable", "yes", "EX", "1000"]),
        simple("OK")
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "appendfsync", "no"]), simple("OK"));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "appendfsync"]),
        F::Array(vec![bulk("appendfsync"), bulk("no")])
    );
    assert!(is_err(
        &c.cmd(&["CONFIG", "SET", "halflife-gc-policy", "titan"]),
        "ERR CONFIG SET failed"
    ));
    assert_eq!(c.cmd(&["SET", "after", "1"]), simple("OK"));
    // The active expiry sweep deletes an expired key that nobody reads (a collection: an
    // expired string is the engine's to hide, and the sweep never sees it).
    assert_eq!(c.cmd(&["HSET", "swept", "f", "x"]), F::Integer(1));
    assert_eq!(c.cmd(&["PEXPIRE", "swept", "20"]), F::Integer(1));
    std::thread::sleep(Duration::from_millis(600));
    let F::BulkString(info) = c.cmd(&["INFO", "stats"]) else {
        panic!()
    };
    let info = String::from_utf8(info.to_vec()).unwrap();
    assert!(info.contains("expired_keys:1\r\n"), "{info}");
    // SHUTDOWN closes the connection without a reply and stops the server.
    c.send(&[b"SHUTDOWN"]);
    assert_eq!(c.read(), None);
    srv.join();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["GET", "durable"]), bulk("yes"));
    assert_eq!(c.cmd(&["GET", "after"]), bulk("1"));
    let F::Integer(ttl) = c.cmd(&["TTL", "durable"]) else {
        panic!()
    };
    assert!((990..=1000).contains(&ttl), "{ttl}");
    srv.stop();
}

/// Waits until the server reports `n` blocked clients (a guard deadline only: the state,
/// not the time, is what is asserted).
fn wait_blocked(c: &mut Client, n: usize) {
    let want = format!("blocked_clients:{n}\r");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let F::BulkString(info) = c.cmd(&["INFO", "clients"]) else {
            panic!("INFO is a bulk string")
        };
        if String::from_utf8_lossy(&info).contains(&want) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never {n} blocked clients"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn blocking_pops_wake_in_fifo_order_and_time_out() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    // Two clients block on the same key; the first to block is served first.
    let mut first = Client::connect(srv.addr);
    let mut second = Client::connect(srv.addr);
    first.send(&[b"BLPOP", b"other", b"q", b"0"]);
    wait_blocked(&mut c, 1);
    second.send(&[b"BRPOP", b"q", b"0"]);
    wait_blocked(&mut c, 2);
    // One push of three elements: the first waiter pops the head after the whole push,
    // the second the tail; one element is left.
    assert_eq!(c.cmd(&["LPUSH", "q", "a", "b", "c"]), F::Integer(3));
    assert_eq!(first.read(), Some(F::Array(vec![bulk("q"), bulk("c")])));
    assert_eq!(second.read(), Some(F::Array(vec![bulk("q"), bulk("a")])));
    assert_eq!(
        c.cmd(&["LRANGE", "q", "0", "-1"]),
        F::Array(vec![bulk("b")])
    );
    wait_blocked(&mut c, 0);
    // A timeout answers the null array; a pipelined command after it runs after it.
    first.send(&[b"BLPOP", b"none", b"0.01"]);
    first.send(&[b"PING"]);
    assert_eq!(first.read(), Some(F::Null));
    assert_eq!(first.read(), Some(simple("PONG")));
    // Inside MULTI a blocking pop does not block.
    assert_eq!(c.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(c.cmd(&["BLPOP", "none", "0"]), simple("QUEUED"));
    assert_eq!(c.cmd(&["EXEC"]), F::Array(vec![F::Null]));
    // A push and a delete in one transaction wake nobody.
    second.send(&[b"BLMOVE", b"src", b"dst", b"LEFT", b"RIGHT", b"0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(c.cmd(&["MULTI"]), simple("OK"));
    c.cmd(&["RPUSH", "src", "x"]);
    c.cmd(&["DEL", "src"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        F::Array(vec![F::Integer(1), F::Integer(1)])
    );
    assert_eq!(c.cmd(&["RPUSH", "src", "y"]), F::Integer(1));
    assert_eq!(second.read(), Some(bulk("y")));
    assert_eq!(
        c.cmd(&["LRANGE", "dst", "0", "-1"]),
        F::Array(vec![bulk("y")])
    );
    // A sorted-set pop and CLIENT UNBLOCK.
    first.send(&[b"BZPOPMIN", b"z", b"0"]);
    wait_blocked(&mut c, 1);
    c.cmd(&["ZADD", "z", "2", "b", "1", "a"]);
    assert_eq!(
        first.read(),
        Some(F::Array(vec![bulk("z"), bulk("a"), bulk("1")]))
    );
    let F::Integer(id) = second.cmd(&["CLIENT", "ID"]) else {
        panic!("an id")
    };
    // The longest timeout Redis takes: the client waits like any other.
    second.send(&[b"BLPOP", b"none", b"9000000000000000"]);
    wait_blocked(&mut c, 1);
    let id = id.to_string();
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), F::Integer(1));
    assert!(is_err(&second.read().unwrap(), "UNBLOCKED"));
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id]), F::Integer(0));
    // A client that leaves while blocked is forgotten: a later push stays in the list.
    drop(second);
    first.send(&[b"BLPOP", b"gone", b"0"]);
    wait_blocked(&mut c, 1);
    drop(first);
    wait_blocked(&mut c, 0);
    assert_eq!(c.cmd(&["RPUSH", "gone", "v"]), F::Integer(1));
    assert_eq!(c.cmd(&["LLEN", "gone"]), F::Integer(1));
    assert!(is_err(
        &c.cmd(&["BLPOP", "gone", "-1"]),
        "ERR timeout is negative"
    ));
    srv.stop();
}

/// A push sent while a blocking pop is still registering is never lost: the pop either
/// sees the pushed element in its first attempt or is woken by the push (a writer that
/// asked "is anyone blocked?" before its write used to miss a waiter that registered in
/// between, and the pop then waited forever; Redis's `BRPOPLPUSH maintains order of
/// elements after failure` hung on it one run in a few).
#[test]
fn a_push_racing_a_blocking_pop_is_never_lost() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut popper = Client::connect(srv.addr);
    for i in 0..300 {
        let key = format!("race{i}");
        popper.send(&[b"BLPOP", key.as_bytes(), b"0"]);
        c.send(&[b"RPUSH", key.as_bytes(), b"x"]);
        assert_eq!(c.read(), Some(F::Integer(1)));
        // The read times out (30 s) and returns `None` if the pop was never woken.
        assert_eq!(
            popper.read(),
            Some(F::Array(vec![bulk(&key), bulk("x")])),
            "round {i}"
        );
    }
    srv.stop();
}

/// A client blocked in BRPOPLPUSH has not touched its destination yet: a transaction that
/// watches it commits. The push that wakes the pop is sent after EXEC's reply, so the order
/// of the two requests is fixed (Redis's own test pipelines them, see skip.txt).
#[test]
fn a_blocked_move_does_not_touch_a_watched_key() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut blocked = Client::connect(srv.addr);
    let mut watching = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["SET", "somekey", "somevalue"]), simple("OK"));
    blocked.send(&[b"BRPOPLPUSH", b"src", b"dst", b"0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(watching.cmd(&["WATCH", "dst"]), simple("OK"));
    assert_eq!(watching.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(watching.cmd(&["GET", "somekey"]), simple("QUEUED"));
    assert_eq!(watching.cmd(&["EXEC"]), F::Array(vec![bulk("somevalue")]));
    assert_eq!(c.cmd(&["LPUSH", "src", "element"]), F::Integer(1));
    assert_eq!(blocked.read(), Some(bulk("element")));
    // Once the move has run, it does touch the watched key.
    assert_eq!(watching.cmd(&["WATCH", "dst"]), simple("OK"));
    blocked.send(&[b"BRPOPLPUSH", b"src", b"dst", b"0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(c.cmd(&["LPUSH", "src", "second"]), F::Integer(1));
    assert_eq!(blocked.read(), Some(bulk("second")));
    assert_eq!(watching.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(watching.cmd(&["GET", "somekey"]), simple("QUEUED"));
    assert_eq!(watching.cmd(&["EXEC"]), F::Null);
    srv.stop();
}

/// `MIGRATE` between two plain servers: keys of each type move whole with their expiry;
/// `COPY` keeps them here, `REPLACE` overwrites there, `AUTH` reaches a server with a
/// password, and the target's refusals come back named.
#[test]
fn migrate_moves_keys_whole_between_servers() {
    let (t1, t2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let src = Running::start(t1.path(), config());
    let dst = Running::start(
        t2.path(),
        Config {
            requirepass: Some("pw".into()),
            ..config()
        },
    );
    let port = dst.addr.port().to_string();
    let mut s = Client::connect(src.addr);
    let mut d = Client::connect(dst.addr);
    assert_eq!(d.cmd(&["AUTH", "pw"]), simple("OK"));
    assert_eq!(s.cmd(&["SET", "str", "v"]), simple("OK"));
    assert_eq!(s.cmd(&["RPUSH", "list", "a", "b", "c"]), F::Integer(3));
    assert_eq!(s.cmd(&["LPOP", "list"]), bulk("a"));
    assert_eq!(s.cmd(&["HSET", "hash", "f", "1", "g", "2"]), F::Integer(2));
    assert_eq!(s.cmd(&["SADD", "set", "x", "y"]), F::Integer(2));
    assert_eq!(s.cmd(&["ZADD", "zset", "2", "b", "1", "a"]), F::Integer(2));
    assert_eq!(s.cmd(&["PEXPIRE", "hash", "500000"]), F::Integer(1));
    let migrate = |c: &mut Client, extra: &[&str]| {
        let mut cmd = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000"];
        cmd.extend_from_slice(extra);
        c.cmd(&cmd)
    };
    // Without the password, the target's refusal is named.
    assert!(is_err(
        &migrate(&mut s, &["KEYS", "str"]),
        "ERR Target instance replied with error: NOAUTH"
    ));
    assert_eq!(s.cmd(&["EXISTS", "str"]), F::Integer(1));
    let all = ["str", "list", "hash", "set", "zset", "missing"];
    let mut copy = vec!["COPY", "AUTH", "pw", "KEYS"];
    copy.extend_from_slice(&all);
    assert_eq!(migrate(&mut s, &copy), simple("OK"));
    assert_eq!(
        s.cmd(&["EXISTS", "str", "list", "hash", "set", "zset"]),
        F::Integer(5)
    );
    // Already there: BUSYKEY, nothing deleted here; REPLACE moves them.
    let mut again = vec!["AUTH2", "default", "pw", "KEYS"];
    again.extend_from_slice(&all);
    assert!(is_err(
        &migrate(&mut s, &again),
        "ERR Target instance replied with error: BUSYKEY"
    ));
    assert_eq!(
        s.cmd(&["EXISTS", "str", "list", "hash", "set", "zset"]),
        F::Integer(5)
    );
    assert_eq!(s.cmd(&["HSET", "hash", "h", "3"]), F::Integer(1));
    let mut replace = vec!["REPLACE", "AUTH", "pw", "KEYS"];
    replace.extend_from_slice(&all);
    assert_eq!(migrate(&mut s, &replace), simple("OK"));
    assert_eq!(s.cmd(&["DBSIZE"]), F::Integer(0));
    assert_eq!(
        migrate(&mut s, &["AUTH", "pw", "KEYS", "str"]),
        simple("NOKEY")
    );
    assert_eq!(d.cmd(&["GET", "str"]), bulk("v"));
    assert_eq!(
        d.cmd(&["LRANGE", "list", "0", "-1"]),
        F::Array(vec![bulk("b"), bulk("c")])
    );
    assert_eq!(d.cmd(&["RPUSH", "list", "d"]), F::Integer(3));
    assert_eq!(d.cmd(&["LINDEX", "list", "0"]), bulk("b"));
    assert_eq!(d.cmd(&["HGET", "hash", "h"]), bulk("3"));
    assert_eq!(d.cmd(&["HLEN", "hash"]), F::Integer(3));
    let pttl = match d.cmd(&["PTTL", "hash"]) {
        F::Integer(n) => n,
        other => panic!("{other:?}"),
    };
    assert!((1..=500_000).contains(&pttl), "{pttl}");
    assert_eq!(d.cmd(&["SCARD", "set"]), F::Integer(2));
    assert_eq!(
        d.cmd(&["ZRANGE", "zset", "0", "-1", "WITHSCORES"]),
        F::Array(vec![bulk("a"), bulk("1"), bulk("b"), bulk("2")])
    );
    assert_eq!(
        d.cmd(&["ZRANGEBYSCORE", "zset", "2", "2"]),
        F::Array(vec![bulk("b")])
    );
    // Nobody listening: IOERR, the key stays.
    assert_eq!(s.cmd(&["SET", "k", "v"]), simple("OK"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port().to_string();
    drop(closed);
    assert!(is_err(
        &s.cmd(&["MIGRATE", "127.0.0.1", &closed_port, "k", "0", "1000"]),
        "IOERR"
    ));
    assert_eq!(s.cmd(&["GET", "k"]), bulk("v"));
    // A key whose payload would pass proto-max-bulk-len is refused by name, and stays.
    assert_eq!(
        s.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "4096"]),
        simple("OK")
    );
    let v = "x".repeat(100);
    for i in 0..50 {
        assert_eq!(s.cmd(&["HSET", "big", &i.to_string(), &v]), F::Integer(1));
    }
    let too_large = "ERR the serialized value of key 'big' is larger than 4096 bytes";
    assert!(is_err(&s.cmd(&["DUMP", "big"]), too_large));
    assert!(is_err(
        &migrate(&mut s, &["AUTH", "pw", "KEYS", "big"]),
        too_large
    ));
    assert_eq!(s.cmd(&["HLEN", "big"]), F::Integer(50));
    drop((s, d));
    src.stop();
    dst.stop();
}

/// Waits until a `CLIENT LIST` line has `field` (a guard deadline only).
fn wait_client_list(c: &mut Client, field: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let F::BulkString(list) = c.cmd(&["CLIENT", "LIST"]) else {
            panic!("CLIENT LIST is a bulk string")
        };
        if String::from_utf8_lossy(&list).contains(field) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "never {field}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn client_field(line: &F, field: &str) -> String {
    let F::BulkString(l) = line else {
        panic!("{line:?}")
    };
    let l = String::from_utf8_lossy(l);
    let f = format!("{field}=");
    l.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&f))
        .unwrap_or_else(|| panic!("no {field} in {l}"))
        .to_string()
}

#[test]
fn client_list_kill_reply_and_reset() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut other = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "me"]), simple("OK"));
    let F::Integer(other_id) = other.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    let info = other.cmd(&["CLIENT", "INFO"]);
    let addr = client_field(&info, "addr");
    assert_eq!(client_field(&info, "laddr"), srv.addr.to_string());
    assert_eq!(client_field(&info, "user"), "default");
    // ID and TYPE filters.
    let one = c.cmd(&["CLIENT", "LIST", "ID", &other_id.to_string(), "999999"]);
    assert_eq!(client_field(&one, "addr"), addr);
    let F::BulkString(normal) = c.cmd(&["CLIENT", "LIST", "TYPE", "normal"]) else {
        panic!()
    };
    assert_eq!(String::from_utf8_lossy(&normal).lines().count(), 2);
    assert_eq!(c.cmd(&["CLIENT", "LIST", "TYPE", "replica"]), bulk(""));
    assert!(is_err(
        &c.cmd(&["CLIENT", "LIST", "TYPE", "nope"]),
        "ERR Unknown client type 'nope'"
    ));
    assert!(is_err(
        &c.cmd(&["CLIENT", "LIST", "ID", "x"]),
        "ERR Invalid client ID"
    ));
    // KILL: the old form by address, the new one by filters.
    assert!(is_err(
        &c.cmd(&["CLIENT", "KILL", "1.2.3.4:5"]),
        "ERR No such client"
    ));
    assert!(is_err(
        &c.cmd(&["CLIENT", "KILL", "ID", "0"]),
        "ERR client-id should be greater than 0"
    ));
    assert!(is_err(
        &c.cmd(&["CLIENT", "KILL", "USER", "bob"]),
        "ERR No such user 'bob'"
    ));
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ADDR", &addr]), F::Integer(1));
    assert_eq!(other.read(), None, "the killed connection is closed");
    let mut third = Client::connect(srv.addr);
    let laddr = client_field(&third.cmd(&["CLIENT", "INFO"]), "laddr");
    // SKIPME (default yes) spares the caller.
    assert_eq!(c.cmd(&["CLIENT", "KILL", "LADDR", &laddr]), F::Integer(1));
    assert_eq!(third.read(), None);
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    // REPLY OFF/SKIP drop replies; ON answers again.
    c.send(&[b"CLIENT", b"REPLY", b"SKIP"]);
    c.send(&[b"SET", b"a", b"1"]);
    c.send(&[b"CLIENT", b"REPLY", b"OFF"]);
    c.send(&[b"SET", b"b", b"2"]);
    assert_eq!(c.cmd(&["CLIENT", "REPLY", "ON"]), simple("OK"));
    assert_eq!(
        c.cmd(&["MGET", "a", "b"]),
        F::Array(vec![bulk("1"), bulk("2")])
    );
    // Tracking is not implemented: what Redis answers with it off.
    assert_eq!(c.cmd(&["CLIENT", "GETREDIR"]), F::Integer(-1));
    assert!(is_err(
        &c.cmd(&["CLIENT", "TRACKING", "ON"]),
        "ERR CLIENT TRACKING is not supported"
    ));
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "on"]), simple("OK"));
    assert_eq!(client_field(&c.cmd(&["CLIENT", "INFO"]), "flags"), "e");
    // RESET: out of MULTI, database 0, no name.
    assert_eq!(c.cmd(&["SELECT", "3"]), simple("OK"));
    assert_eq!(c.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(c.cmd(&["RESET"]), simple("RESET"));
    assert_eq!(c.cmd(&["GET", "a"]), bulk("1"));
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), F::Null);
    assert_eq!(client_field(&c.cmd(&["CLIENT", "INFO"]), "flags"), "N");
    // The old form may kill the caller: it answers, then closes.
    let me = client_field(&c.cmd(&["CLIENT", "INFO"]), "addr");
    assert_eq!(c.cmd(&["CLIENT", "KILL", &me]), simple("OK"));
    assert_eq!(c.read(), None);
    srv.stop();
}

#[test]
fn client_pause_holds_writes_until_unpause() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut writer = Client::connect(srv.addr);
    assert!(is_err(
        &c.cmd(&["CLIENT", "PAUSE", "x"]),
        "ERR timeout is not an integer or out of range"
    ));
    assert!(is_err(
        &c.cmd(&["CLIENT", "PAUSE", "10", "SOME"]),
        "ERR CLIENT PAUSE mode must be WRITE or ALL"
    ));
    assert_eq!(c.cmd(&["CLIENT", "PAUSE", "600000", "WRITE"]), simple("OK"));
    writer.send(&[b"SET", b"k", b"v"]);
    // The writer waits (shown blocked) while reads go on.
    wait_client_list(&mut c, "flags=b");
    assert_eq!(c.cmd(&["GET", "k"]), F::Null);
    assert_eq!(c.cmd(&["CLIENT", "UNPAUSE"]), simple("OK"));
    assert_eq!(writer.read(), Some(simple("OK")));
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    srv.stop();
}

#[test]
fn bitop_and_lolwut() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let raw = |c: &mut Client, args: &[&[u8]]| {
        c.send(args);
        c.read().unwrap()
    };
    raw(&mut c, &[b"SET", b"a", b"\x01\x02\xff\xff"]);
    raw(&mut c, &[b"SET", b"b", b"\x01\x02\xff"]);
    assert_eq!(c.cmd(&["SET", "dest", "x", "EX", "100"]), simple("OK"));
    for (op, want) in [
        ("AND", &b"\x01\x02\xff\x00"[..]),
        ("or", b"\x01\x02\xff\xff"),
        ("XOR", b"\x00\x00\x00\xff"),
    ] {
        assert_eq!(c.cmd(&["BITOP", op, "dest", "a", "b"]), F::Integer(4));
        assert_eq!(
            c.cmd(&["GET", "dest"]),
            F::BulkString(want.to_vec().into()),
            "{op}"
        );
    }
    // A missing source is zeros: AND with it is all zeros.
    assert_eq!(
        c.cmd(&["BITOP", "AND", "dest", "a", "missing"]),
        F::Integer(4)
    );
    assert_eq!(c.cmd(&["GET", "dest"]), F::BulkString(vec![0u8; 4].into()));
    assert_eq!(c.cmd(&["TTL", "dest"]), F::Integer(-1));
    assert_eq!(c.cmd(&["BITOP", "NOT", "a", "a"]), F::Integer(4));
    assert_eq!(
        c.cmd(&["GET", "a"]),
        F::BulkString(b"\xfe\xfd\x00\x00".to_vec().into())
    );
    // An empty result deletes the destination.
    assert_eq!(c.cmd(&["BITOP", "NOT", "dest", "missing"]), F::Integer(0));
    assert_eq!(c.cmd(&["EXISTS", "dest"]), F::Integer(0));
    assert!(is_err(
        &c.cmd(&["BITOP", "NOT", "dest", "a", "b"]),
        "ERR BITOP NOT must be called with a single source key."
    ));
    assert!(is_err(
        &c.cmd(&["BITOP", "NAND", "dest", "a"]),
        "ERR syntax error"
    ));
    assert_eq!(c.cmd(&["LPUSH", "l", "x"]), F::Integer(1));
    assert!(is_err(
        &c.cmd(&["BITOP", "OR", "dest", "a", "l"]),
        "WRONGTYPE"
    ));
    let F::BulkString(l) = c.cmd(&["LOLWUT", "VERSION", "5", "1"]) else {
        panic!()
    };
    assert!(String::from_utf8_lossy(&l).contains("Redis ver. 7.0.15"));
    assert!(is_err(
        &c.cmd(&["LOLWUT", "VERSION", "x"]),
        "ERR value is not an integer"
    ));
    srv.stop();
}

/// Two clients blocked in BRPOPLPUSH, the first towards a key of another type: a push
/// fails the first with WRONGTYPE and the element goes to the second, in the order they
/// blocked (Redis's "BRPOPLPUSH with multiple blocked clients", with that order fixed).
#[test]
fn a_failed_blocked_move_passes_the_element_on() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut first = Client::connect(srv.addr);
    let mut second = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["SET", "target1", "nolist"]), simple("OK"));
    first.send(&[b"BRPOPLPUSH", b"blist", b"target1", b"0"]);
    wait_blocked(&mut c, 1);
    second.send(&[b"BRPOPLPUSH", b"blist", b"target2", b"0"]);
    wait_blocked(&mut c, 2);
    assert_eq!(c.cmd(&["LPUSH", "blist", "foo"]), F::Integer(1));
    assert!(is_err(&first.read().unwrap(), "WRONGTYPE"));
    assert_eq!(second.read(), Some(bulk("foo")));
    assert_eq!(
        c.cmd(&["LRANGE", "target2", "0", "-1"]),
        F::Array(vec![bulk("foo")])
    );
    assert_eq!(c.cmd(&["LLEN", "blist"]), F::Integer(0));
    srv.stop();
}

/// An `HSET` or `ZADD` that only rewrites existing fields or members leaves the key's
/// metadata record as it is, yet it still changes the key for a transaction watching it;
/// the key's size and expiry stay.
#[test]
fn rewriting_existing_members_touches_a_watched_key() {
    let t = tempfile::tempdir().unwrap();
    // Under everysec, as the commands run on the connection's task then.
    let srv = Running::start(t.path(), with_fsync(AppendFsync::EverySec));
    let mut c = Client::connect(srv.addr);
    let mut watching = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["HSET", "h", "f", "1"]), F::Integer(1));
    assert_eq!(c.cmd(&["ZADD", "z", "1", "m"]), F::Integer(1));
    assert_eq!(c.cmd(&["PEXPIRE", "h", "500000"]), F::Integer(1));
    for (rewrite, read, expect) in [
        (["HSET", "h", "f", "2"], ["HGET", "h", "f"], bulk("2")),
        (["ZADD", "z", "5", "m"], ["ZSCORE", "z", "m"], bulk("5")),
    ] {
        assert_eq!(watching.cmd(&["WATCH", rewrite[1]]), simple("OK"));
        assert_eq!(c.cmd(&rewrite), F::Integer(0));
        assert_eq!(watching.cmd(&["MULTI"]), simple("OK"));
        assert_eq!(watching.cmd(&read), simple("QUEUED"));
        assert_eq!(watching.cmd(&["EXEC"]), F::Null, "{rewrite:?}");
        assert_eq!(c.cmd(&read), expect);
    }
    assert_eq!(c.cmd(&["HLEN", "h"]), F::Integer(1));
    assert_eq!(c.cmd(&["ZCARD", "z"]), F::Integer(1));
    assert!(matches!(c.cmd(&["PTTL", "h"]), F::Integer(ms) if ms > 0));
    srv.stop();
}

/// A pipeline's replies follow its commands' order and each sees the commands before it,
/// whether a batch runs on the connection's task (point commands) or on the blocking pool
/// (a command whose work grows with the data in it), under both sync settings.
/// A pipeline's commands on one key run as one engine write (`combine.rs`): each must
/// reply as it would have alone, read what the ones before it wrote, fail alone on a wrong
/// type, and leave what a restart reads back.
#[test]
fn a_pipeline_on_one_key_replies_as_its_commands_one_by_one() {
    let script: &[&[&str]] = &[
        &["HSET", "h", "a", "1", "b", "2"],
        &["HGET", "h", "a"],
        &["HSET", "h", "a", "3"],
        &["HINCRBY", "h", "a", "4"],
        &["HINCRBY", "h", "b", "x"],
        &["HSETNX", "h", "a", "9"],
        &["HMGET", "h", "a", "b", "c"],
        &["LPUSH", "h", "wrong"],
        &["HLEN", "h"],
        &["HEXISTS", "h", "c"],
        &["HSTRLEN", "h", "a"],
        &["ZADD", "z", "1", "m", "2", "n"],
        &["ZINCRBY", "z", "5", "m"],
        &["ZADD", "z", "XX", "CH", "0", "n", "7", "o"],
        &["ZSCORE", "z", "m"],
        &["ZCARD", "z"],
        &["SADD", "s", "a", "b", "a"],
        &["SREM", "s", "a", "c"],
        &["SISMEMBER", "s", "b"],
        &["SREM", "s", "b"],
        &["SCARD", "s"],
        &["SADD", "s", "c"],
        &["RPUSH", "l", "a", "b"],
        &["LPUSH", "l", "c"],
        &["LLEN", "l"],
        &["HSET", "l", "f", "v"],
        &["RPUSH", "l", "d"],
        &["LPOP", "l"],
        &["RPOP", "l"],
        &["LPOP", "l", "2"],
        &["RPUSH", "l", "x", "y"],
        &["LPOP", "l"],
        &["RPOP", "l"],
        &["LLEN", "l"],
        &["LPOP", "l"],
        &["RPUSH", "l", "z"],
        &["LPOP", "nothing"],
    ];
    let state: &[&[&str]] = &[
        &["HGETALL", "h"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["SMEMBERS", "s"],
        &["LRANGE", "l", "0", "-1"],
    ];
    for fsync in [AppendFsync::EverySec, AppendFsync::Always] {
        let t = tempfile::tempdir().unwrap();
        let srv = Running::start(t.path(), with_fsync(fsync));
        let mut c = Client::connect(srv.addr);
        // Database 1, one command at a time: what each reply must be.
        assert_eq!(c.cmd(&["SELECT", "1"]), simple("OK"));
        let alone: Vec<F> = script.iter().map(|cmd| c.cmd(cmd)).collect();
        let alone_state: Vec<F> = state.iter().map(|cmd| c.cmd(cmd)).collect();
        // Database 0, the whole script in one pipeline.
        assert_eq!(c.cmd(&["SELECT", "0"]), simple("OK"));
        for cmd in script {
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            c.send(&args);
        }
        let piped: Vec<F> = script.iter().map(|_| c.read().unwrap()).collect();
        assert_eq!(piped, alone, "{fsync:?}");
        srv.stop();
        let srv = Running::start(t.path(), with_fsync(fsync));
        let mut c = Client::connect(srv.addr);
        let after: Vec<F> = state.iter().map(|cmd| c.cmd(cmd)).collect();
        assert_eq!(after, alone_state, "{fsync:?}");
        srv.stop();
    }
}

/// Runs of pipelined increments of one key from several connections at once: each run
/// holds the key for its whole length, so no increment is lost.
#[test]
fn pipelined_increments_from_many_connections_are_all_kept() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), with_fsync(AppendFsync::EverySec));
    let (threads, rounds, per_round) = (4, 20, 40);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut c = Client::connect(srv.addr);
                for _ in 0..rounds {
                    for _ in 0..per_round {
                        c.send(&[b"HINCRBY", b"h", b"n", b"1"]);
                        c.send(&[b"ZINCRBY", b"z", b"1", b"m"]);
                    }
                    for _ in 0..2 * per_round {
                        assert!(matches!(c.read(), Some(F::Integer(_) | F::BulkString(_))));
                    }
                }
            });
        }
    });
    let mut c = Client::connect(srv.addr);
    let total = (threads * rounds * per_round).to_string();
    assert_eq!(c.cmd(&["HGET", "h", "n"]), bulk(&total));
    assert_eq!(c.cmd(&["ZSCORE", "z", "m"]), bulk(&total));
    srv.stop();
}

/// Redis serves a client blocked on a list between two pushes of one pipeline: the
/// pushes are then not combined.
#[test]
fn a_blocked_client_is_served_between_two_pipelined_pushes() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut waiter = Client::connect(srv.addr);
    waiter.send(&[b"BLPOP", b"l", b"0"]);
    wait_blocked(&mut c, 1);
    c.send(&[b"LPUSH", b"l", b"a"]);
    c.send(&[b"LPUSH", b"l", b"b"]);
    assert_eq!(c.read(), Some(F::Integer(1)));
    assert_eq!(c.read(), Some(F::Integer(1)));
    assert_eq!(waiter.read(), Some(F::Array(vec![bulk("l"), bulk("a")])));
    assert_eq!(
        c.cmd(&["LRANGE", "l", "0", "-1"]),
        F::Array(vec![bulk("b")])
    );
    srv.stop();
}

#[test]
fn pipelined_commands_see_the_ones_before_them() {
    for fsync in [AppendFsync::EverySec, AppendFsync::Always] {
        let t = tempfile::tempdir().unwrap();
        let srv = Running::start(t.path(), with_fsync(fsync));
        let mut c = Client::connect(srv.addr);
        let cheap: &[&[&[u8]]] = &[
            &[b"SET", b"n", b"1"],
            &[b"INCR", b"n"],
            &[b"RPUSH", b"l", b"a", b"b"],
            &[b"LPOP", b"l"],
            &[b"ZADD", b"z", b"1", b"m"],
            &[b"ZINCRBY", b"z", b"2", b"m"],
            &[b"GET", b"n"],
        ];
        let mixed: &[&[&[u8]]] = &[&[b"INCR", b"n"], &[b"LRANGE", b"l", b"0", b"-1"]];
        for cmd in cheap.iter().chain(mixed) {
            c.send(cmd);
        }
        let replies: Vec<F> = (0..cheap.len() + mixed.len())
            .map(|_| c.read().unwrap())
            .collect();
        assert_eq!(
            replies,
            vec![
                simple("OK"),
                F::Integer(2),
                F::Integer(2),
                bulk("a"),
                F::Integer(1),
                bulk("3"),
                bulk("2"),
                F::Integer(3),
                F::Array(vec![bulk("b")]),
            ],
            "{fsync:?}"
        );
        srv.stop();
    }
}

#[test]
fn info_counts_calls_rejections_failures_errors_and_latency() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), with_fsync(AppendFsync::EverySec));
    let mut c = Client::connect(srv.addr);
    let mut other = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), simple("OK"));
    // A pipeline of plain SETs runs as one write; each counts as a call.
    for i in 0..3 {
        c.send(&[b"SET", format!("k{i}").as_bytes(), b"v"]);
    }
    for _ in 0..3 {
        assert_eq!(c.read(), Some(simple("OK")));
    }
    assert!(is_err(
        &c.cmd(&["SET", "k"]),
        "ERR wrong number of arguments"
    ));
    assert!(is_err(
        &c.cmd(&["INCR", "k0"]),
        "ERR value is not an integer"
    ));
    assert!(is_err(&c.cmd(&["NOSUCH"]), "ERR unknown command"));
    assert!(is_err(
        &c.cmd(&["CLIENT", "NOSUCH"]),
        "ERR unknown subcommand"
    ));
    // A blocked pop answered with an error later fails then.
    let F::Integer(id) = other.cmd(&["CLIENT", "ID"]) else {
        panic!("an id")
    };
    other.send(&[b"BLPOP", b"none", b"0"]);
    wait_blocked(&mut c, 1);
    let id = id.to_string();
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), F::Integer(1));
    assert!(is_err(&other.read().unwrap(), "UNBLOCKED"));

    let stat =
        |c: &mut Client, name: &str| c.info_field("commandstats", &format!("cmdstat_{name}"));
    let set = stat(&mut c, "set").unwrap();
    assert!(set.starts_with("calls=3,"), "{set}");
    assert!(set.ends_with(",rejected_calls=1,failed_calls=0"), "{set}");
    let incr = stat(&mut c, "incr").unwrap();
    assert!(incr.ends_with(",rejected_calls=0,failed_calls=1"), "{incr}");
    let blpop = stat(&mut c, "blpop").unwrap();
    assert!(
        blpop.starts_with("calls=1,") && blpop.ends_with("failed_calls=1"),
        "{blpop}"
    );
    assert!(stat(&mut c, "client|unblock")
        .unwrap()
        .starts_with("calls=1,"));
    assert_eq!(stat(&mut c, "client|nosuch"), None);
    assert_eq!(stat(&mut c, "nosuch"), None);
    // ERR: arity, INCR, the unknown command and subcommand; UNBLOCKED: the pop.
    assert_eq!(
        c.info_field("errorstats", "errorstat_ERR").unwrap(),
        "count=4"
    );
    assert_eq!(
        c.info_field("errorstats", "errorstat_UNBLOCKED").unwrap(),
        "count=1"
    );
    assert_eq!(c.info_field("stats", "total_error_replies").unwrap(), "5");
    let p = c
        .info_field("latencystats", "latency_percentiles_usec_set")
        .unwrap();
    assert!(
        p.starts_with("p50=") && p.contains(",p99=") && p.contains(",p99.9="),
        "{p}"
    );
    // Neither section is in the default INFO (a line per command), both are in `all`.
    assert_eq!(c.info_field("", "cmdstat_set"), None);
    assert!(c.info_field("all", "cmdstat_set").is_some());

    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]),
        simple("OK")
    );
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), simple("OK"));
    assert_eq!(c.cmd(&["GET", "k0"]), bulk("v"));
    assert!(stat(&mut c, "get").unwrap().starts_with("calls=1,"));
    assert_eq!(
        c.info_field("latencystats", "latency_percentiles_usec_get"),
        None
    );
    assert_eq!(c.info_field("errorstats", "errorstat_ERR"), None);
    assert!(is_err(
        &c.cmd(&[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 101"
        ]),
        "ERR CONFIG SET failed"
    ));
    srv.stop();
}

#[test]
fn a_connection_made_before_a_password_is_set_stays_authenticated() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut before = Client::connect(srv.addr);
    assert_eq!(
        before.cmd(&["CONFIG", "SET", "requirepass", "pw"]),
        simple("OK")
    );
    // As in Redis: a failed AUTH does not take its authentication away either.
    assert!(is_err(&before.cmd(&["AUTH", "wrong"]), "WRONGPASS"));
    assert_eq!(before.cmd(&["SET", "k", "v"]), simple("OK"));
    let mut after = Client::connect(srv.addr);
    assert!(is_err(&after.cmd(&["GET", "k"]), "NOAUTH"));
    assert_eq!(after.cmd(&["AUTH", "pw"]), simple("OK"));
    assert_eq!(after.cmd(&["GET", "k"]), bulk("v"));
    srv.stop();
}

/// The arguments (as text) of `SLOWLOG GET`'s entries, newest first.
fn slowlog_args(c: &mut Client) -> Vec<Vec<String>> {
    let F::Array(entries) = c.cmd(&["SLOWLOG", "GET", "-1"]) else {
        panic!("SLOWLOG GET is an array")
    };
    entries
        .iter()
        .map(|e| match e {
            F::Array(f) => match &f[3] {
                F::Array(a) => a
                    .iter()
                    .map(|x| match x {
                        F::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                        other => panic!("{other:?}"),
                    })
                    .collect(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn slowlog_latency_and_debug_sleep() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    // DEBUG is refused unless enable-debug-command allows it (Redis 7's default).
    assert!(is_err(
        &c.cmd(&["DEBUG", "SLEEP", "0"]),
        "ERR DEBUG command not allowed"
    ));
    assert!(is_err(
        &c.cmd(&["CONFIG", "SET", "enable-debug-command", "yes"]),
        "ERR"
    ));
    // Everything is logged at 0 µs; passwords are not.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        simple("OK")
    );
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["CONFIG", "SET", "masterauth", "secret"]);
    c.cmd(&["SET", "k", "v"]);
    let got = slowlog_args(&mut c);
    assert_eq!(got[0], ["SET", "k", "v"]);
    assert_eq!(got[1], ["CONFIG", "SET", "masterauth", "(redacted)"]);
    // A blocked pop is logged when it is served, not when it blocks.
    let mut blocked = Client::connect(srv.addr);
    blocked.send(&[b"BLPOP", b"q", b"0"]);
    wait_blocked(&mut c, 1);
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["RPUSH", "q", "x"]);
    blocked.read().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !slowlog_args(&mut c).iter().any(|a| a[0] == "BLPOP") {
        assert!(std::time::Instant::now() < deadline, "BLPOP never logged");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The bound drops the oldest.
    c.cmd(&["CONFIG", "SET", "slowlog-max-len", "2"]);
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), F::Integer(2));
    // With the monitor off nothing is recorded.
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), F::Array(vec![]));
    srv.stop();

    // A server that allows DEBUG: a slow command is in the latency monitor.
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(
        t.path(),
        Config {
            enable_debug_command: Protection::Local,
            ..config()
        },
    );
    let mut c = Client::connect(srv.addr);
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "100"]);
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.2"]), simple("OK"));
    let F::Array(latest) = c.cmd(&["LATENCY", "LATEST"]) else {
        panic!("LATENCY LATEST is an array")
    };
    match &latest[..] {
        [F::Array(e)] => {
            assert_eq!(e[0], bulk("command"));
            assert!(matches!(e[2], F::Integer(ms) if ms >= 200), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(c.cmd(&["LATENCY", "HISTORY", "command"]), F::Array(v) if v.len() == 1));
    assert_eq!(c.cmd(&["LATENCY", "RESET"]), F::Integer(1));
    srv.stop();
}
