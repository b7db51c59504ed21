//! Streams end to end: blocking reads against concurrent appends and the writes that end
//! them, and a stream's consumer groups moving with it (`DUMP`/`RESTORE`, `RENAME`,
//! `COPY`, `MOVE`), expiring, and surviving a restart.

mod common;
use common::client::{bulk, is_err, simple, Client};
use common::{AlwaysCut, Running};
use halflife_server::{AppendFsync, Config};
use redis_protocol::resp2::types::BytesFrame as F;
use std::time::Duration;

fn config() -> Config {
    Config {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        appendfsync: AppendFsync::EverySec,
        ..Config::default()
    }
}

/// Waits until the server reports `n` blocked clients (a guard deadline only).
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

fn entry(id: &str, fields: &[&str]) -> F {
    F::Array(vec![
        bulk(id),
        F::Array(fields.iter().map(|f| bulk(f)).collect()),
    ])
}

/// `[[key, [entries]]]`: a read's reply for one stream.
fn served(key: &str, entries: Vec<F>) -> F {
    F::Array(vec![F::Array(vec![bulk(key), F::Array(entries)])])
}

/// An append sent while a blocking read is still registering is never lost: the read
/// either finds the entry in its first attempt or is woken by the append, for `XREAD`
/// and for `XREADGROUP` alike (the guarantee server.rs tests for the blocking pops).
#[test]
fn an_append_racing_a_blocking_read_is_never_lost() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut reader = Client::connect(srv.addr);
    for i in 0..200 {
        let key = format!("race{i}");
        let k = key.as_bytes();
        reader.send(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", k, b"0-0"]);
        c.send(&[b"XADD", k, b"1-1", b"f", b"v"]);
        if i % 2 == 1 {
            // A second append in the same pipeline: the two may run as one engine write
            // (`combine.rs`) if the read has not registered yet.
            c.send(&[b"XADD", k, b"1-2", b"f", b"v"]);
            assert_eq!(c.read(), Some(bulk("1-1")));
            assert_eq!(c.read(), Some(bulk("1-2")));
            let one = served(&key, vec![entry("1-1", &["f", "v"])]);
            let both = served(
                &key,
                vec![entry("1-1", &["f", "v"]), entry("1-2", &["f", "v"])],
            );
            let got = reader.read();
            assert!(
                got == Some(one) || got == Some(both),
                "XREAD round {i}: {got:?}"
            );
        } else {
            assert_eq!(c.read(), Some(bulk("1-1")));
            assert_eq!(
                reader.read(),
                Some(served(&key, vec![entry("1-1", &["f", "v"])])),
                "XREAD round {i}"
            );
        }
        let g = format!("g{i}");
        assert_eq!(c.cmd(&["XGROUP", "CREATE", &key, &g, "$"]), simple("OK"));
        reader.send(&[
            b"XREADGROUP",
            b"GROUP",
            g.as_bytes(),
            b"c",
            b"BLOCK",
            b"0",
            b"STREAMS",
            k,
            b">",
        ]);
        c.send(&[b"XADD", k, b"2-1", b"f", b"w"]);
        assert_eq!(c.read(), Some(bulk("2-1")));
        assert_eq!(
            reader.read(),
            Some(served(&key, vec![entry("2-1", &["f", "w"])])),
            "XREADGROUP round {i}"
        );
    }
    srv.stop();
}

/// Redis serves a client blocked on a stream between two appends of one pipeline: the
/// appends are then not combined into one write, and the read gets the first entry only.
#[test]
fn a_blocked_read_is_served_between_two_pipelined_appends() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut reader = Client::connect(srv.addr);
    reader.send(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]);
    wait_blocked(&mut c, 1);
    c.send(&[b"XADD", b"s", b"1-1", b"f", b"a"]);
    c.send(&[b"XADD", b"s", b"1-2", b"f", b"b"]);
    assert_eq!(c.read(), Some(bulk("1-1")));
    assert_eq!(c.read(), Some(bulk("1-2")));
    assert_eq!(
        reader.read(),
        Some(served("s", vec![entry("1-1", &["f", "a"])]))
    );
    assert_eq!(c.cmd(&["XLEN", "s"]), F::Integer(2));
    srv.stop();
}

/// What ends a blocked read, each write sent once the read is blocked (Redis's own tests
/// of these send it without waiting: see skip.txt): a blocked `XREADGROUP` is answered
/// with an error when its key is deleted, retyped or flushed away or its group destroyed;
/// a blocked `XREAD` outlives all of that and is served by the next append.
#[test]
fn blocked_stream_reads_end_as_redis_says() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut rd = Client::connect(srv.addr);
    let group_read = [
        &b"XREADGROUP"[..],
        b"GROUP",
        b"g",
        b"Alice",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"s",
        b">",
    ];
    let ends: [&[&[&str]]; 4] = [
        &[&["DEL", "s"]],
        &[&["SET", "s", "v"]],
        &[&["MULTI"], &["DEL", "s"], &["SADD", "s", "e"], &["EXEC"]],
        &[&["FLUSHALL"]],
    ];
    for end in ends {
        c.cmd(&["DEL", "s"]);
        assert_eq!(c.cmd(&["XADD", "s", "666", "f", "v"]), bulk("666-0"));
        assert_eq!(c.cmd(&["XGROUP", "CREATE", "s", "g", "$"]), simple("OK"));
        rd.send(&group_read);
        wait_blocked(&mut c, 1);
        for cmd in end {
            c.cmd(cmd);
        }
        let r = rd.read().unwrap();
        assert!(
            is_err(&r, "UNBLOCKED the stream key no longer exists"),
            "{end:?}: {r:?}"
        );
    }
    c.cmd(&["DEL", "s"]);
    assert_eq!(
        c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
        simple("OK")
    );
    rd.send(&group_read);
    wait_blocked(&mut c, 1);
    assert_eq!(c.cmd(&["XGROUP", "DESTROY", "s", "g"]), F::Integer(1));
    assert!(is_err(&rd.read().unwrap(), "NOGROUP"));
    // XREAD from `$` (666-0): deleted, retyped and deleted again, then appended to.
    c.cmd(&["DEL", "s"]);
    c.cmd(&["XADD", "s", "666", "f", "v"]);
    rd.send(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]);
    wait_blocked(&mut c, 1);
    c.cmd(&["DEL", "s"]);
    c.cmd(&["SET", "s", "v"]);
    c.cmd(&["DEL", "s"]);
    assert_eq!(c.cmd(&["XADD", "s", "667", "f", "v"]), bulk("667-0"));
    assert_eq!(
        rd.read(),
        Some(served("s", vec![entry("667-0", &["f", "v"])]))
    );
    // Two readers of one group: the first takes the entry, the second stays blocked
    // until the next one.
    let mut rd2 = Client::connect(srv.addr);
    c.cmd(&["DEL", "s"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    rd.send(&group_read);
    wait_blocked(&mut c, 1);
    rd2.send(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"Bob",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"s",
        b">",
    ]);
    wait_blocked(&mut c, 2);
    c.cmd(&["XADD", "s", "1", "a", "1"]);
    assert_eq!(
        rd.read(),
        Some(served("s", vec![entry("1-0", &["a", "1"])]))
    );
    wait_blocked(&mut c, 1);
    c.cmd(&["XADD", "s", "2", "b", "2"]);
    assert_eq!(
        rd2.read(),
        Some(served("s", vec![entry("2-0", &["b", "2"])]))
    );
    srv.stop();
}

/// A stream with a consumer group is one key: `DUMP`/`RESTORE`, `RENAME`, `COPY` and `MOVE`
/// carry its entries, groups and pending entries; `TYPE`, `SCAN TYPE`, `OBJECT ENCODING`
/// and expiry treat it as any key; and it survives a restart.
#[test]
fn a_stream_moves_expires_and_restarts_whole() {
    let t = tempfile::tempdir().unwrap();
    let mut srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    for i in 1..=5 {
        c.cmd(&["XADD", "s", &format!("{i}-0"), "f", &i.to_string()]);
    }
    c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    let summary = || {
        F::Array(vec![
            F::Integer(2),
            bulk("1-0"),
            bulk("2-0"),
            F::Array(vec![F::Array(vec![bulk("alice"), bulk("2")])]),
        ])
    };
    assert_eq!(c.cmd(&["XPENDING", "s", "g"]), summary());
    assert_eq!(c.cmd(&["TYPE", "s"]), simple("stream"));
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "s"]), bulk("stream"));
    assert_eq!(
        c.cmd(&["SCAN", "0", "TYPE", "stream"]),
        F::Array(vec![bulk("0"), F::Array(vec![bulk("s")])])
    );
    let F::BulkString(payload) = c.cmd(&["DUMP", "s"]) else {
        panic!("a payload")
    };
    c.send(&[b"RESTORE", b"r", b"0", &payload]);
    assert_eq!(c.read(), Some(simple("OK")));
    assert_eq!(c.cmd(&["XPENDING", "r", "g"]), summary());
    assert_eq!(c.cmd(&["XLEN", "r"]), F::Integer(5));
    assert_eq!(c.cmd(&["RENAME", "r", "r2"]), simple("OK"));
    assert_eq!(c.cmd(&["COPY", "r2", "r3"]), F::Integer(1));
    assert_eq!(c.cmd(&["MOVE", "r3", "1"]), F::Integer(1));
    assert_eq!(c.cmd(&["XPENDING", "r2", "g"]), summary());
    c.cmd(&["SELECT", "1"]);
    assert_eq!(c.cmd(&["XPENDING", "r3", "g"]), summary());
    assert_eq!(
        c.cmd(&["XREVRANGE", "r3", "+", "-", "COUNT", "2"]),
        F::Array(vec![entry("5-0", &["f", "5"]), entry("4-0", &["f", "4"])])
    );
    c.cmd(&["SELECT", "0"]);
    assert_eq!(c.cmd(&["PEXPIRE", "r2", "1"]), F::Integer(1));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.cmd(&["EXISTS", "r2"]), F::Integer(0));
    assert_eq!(c.cmd(&["XLEN", "r2"]), F::Integer(0));
    // A forged payload is refused.
    let mut bad = payload.to_vec();
    bad[20] ^= 1;
    c.send(&[b"RESTORE", b"x", b"0", &bad]);
    assert!(is_err(&c.read().unwrap(), "ERR DUMP payload"));
    srv.stop();
    srv = Running::start(t.path(), config());
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["XPENDING", "s", "g"]), summary());
    assert_eq!(
        c.cmd(&["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]),
        served(
            "s",
            (3..=5)
                .map(|i| entry(&format!("{i}-0"), &["f", &i.to_string()]))
                .collect()
        )
    );
    srv.stop();
}

/// A power cut under `appendfsync always` (the storage keeps only what was synced, and
/// may lose unsynced directory entries): every `XADD` and `XACK` whose reply came back
/// survives, entries delivered to the group and not acknowledged are still pending, and
/// the group's counts agree with its pending entries. Sent one by one (each command its
/// own engine write) and, for even seeds, pipelined: each ten appends, their reads by the
/// group and half their acknowledgements are one pipeline on the stream, which runs as one
/// engine write (`combine.rs`), its reads seeing the run's appends.
#[test]
fn acknowledged_appends_and_acks_survive_a_power_cut() {
    for seed in 0..3 {
        let pipelined = seed % 2 == 0;
        let (cut, srv) = AlwaysCut::start(config(), seed, testkit::powercut::Moment::Never);
        let mut c = Client::connect(srv.addr);
        assert_eq!(
            c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
            simple("OK")
        );
        let (mut added, mut acked, mut delivered) = (Vec::new(), Vec::new(), Vec::new());
        for i in (1..=60u64).filter(|_| pipelined).step_by(10) {
            let burst: Vec<u64> = (i..i + 10).collect();
            let mut sent = Vec::new();
            for n in &burst {
                let (id, v) = (format!("{n}-0"), n.to_string());
                c.send(&[
                    b"XADD",
                    b"s",
                    b"MAXLEN",
                    b"~",
                    b"1000",
                    id.as_bytes(),
                    b"n",
                    v.as_bytes(),
                ]);
                sent.push(bulk(&id));
            }
            for n in &burst {
                c.send(&[
                    b"XREADGROUP",
                    b"GROUP",
                    b"g",
                    b"c",
                    b"COUNT",
                    b"1",
                    b"STREAMS",
                    b"s",
                    b">",
                ]);
                sent.push(served(
                    "s",
                    vec![entry(&format!("{n}-0"), &["n", &n.to_string()])],
                ));
            }
            for n in burst.iter().step_by(2) {
                c.send(&[b"XACK", b"s", b"g", format!("{n}-0").as_bytes()]);
                sent.push(F::Integer(1));
            }
            for want in sent {
                assert_eq!(c.read(), Some(want), "seed {seed}");
            }
            added.extend(burst.iter().map(|n| format!("{n}-0")));
            delivered.extend(burst.iter().map(|n| format!("{n}-0")));
            acked.extend(burst.iter().step_by(2).map(|n| format!("{n}-0")));
        }
        for i in (1..=60u64).filter(|_| !pipelined) {
            let id = format!("{i}-0");
            assert_eq!(
                c.cmd(&["XADD", "s", "MAXLEN", "~", "1000", &id, "n", &i.to_string()]),
                bulk(&id)
            );
            added.push(id);
            if i % 10 == 0 {
                let F::Array(r) = c.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"])
                else {
                    panic!("entries delivered")
                };
                assert_eq!(r.len(), 1);
                delivered.extend((i - 9..=i).map(|n| format!("{n}-0")));
                // Every other delivered entry is acknowledged.
                for n in (i - 9..=i).step_by(2) {
                    let id = format!("{n}-0");
                    assert_eq!(c.cmd(&["XACK", "s", "g", &id]), F::Integer(1));
                    acked.push(id);
                }
            }
        }
        // Sent, but cut off before or after it reached the disk.
        c.send(&[b"XADD", b"s", b"61-0", b"n", b"61"]);
        drop(c);
        let srv = cut.restart(srv);
        let mut c = Client::connect(srv.addr);
        let F::Array(entries) = c.cmd(&["XRANGE", "s", "-", "+"]) else {
            panic!("entries")
        };
        let ids: Vec<F> = entries
            .iter()
            .map(|e| match e {
                F::Array(e) => e[0].clone(),
                _ => panic!("an entry"),
            })
            .collect();
        for (i, id) in added.iter().enumerate() {
            assert_eq!(
                ids.get(i),
                Some(&bulk(id)),
                "seed {seed}: {id} was acknowledged"
            );
        }
        assert!(ids.len() <= 61);
        let F::Array(pending) = c.cmd(&["XPENDING", "s", "g", "-", "+", "1000"]) else {
            panic!("pending")
        };
        let pending: Vec<F> = pending
            .iter()
            .map(|p| match p {
                F::Array(p) => p[0].clone(),
                _ => panic!("a pending entry"),
            })
            .collect();
        let want: Vec<F> = delivered
            .iter()
            .filter(|d| !acked.contains(d))
            .map(|d| bulk(d))
            .collect();
        assert_eq!(pending, want, "seed {seed}");
        let summary = c.cmd(&["XPENDING", "s", "g"]);
        let F::Array(summary) = summary else {
            panic!("a summary")
        };
        assert_eq!(summary[0], F::Integer(want.len() as i64));
        // The group goes on where it stopped.
        let next = c.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            ">",
        ]);
        if ids.len() == 61 {
            assert_eq!(next, served("s", vec![entry("61-0", &["n", "61"])]));
        } else {
            assert_eq!(next, F::Null);
        }
        srv.stop();
    }
}
