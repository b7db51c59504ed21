//! Replication end to end: primaries and replicas in-process on ephemeral ports over temp
//! directories. Nothing waits for time to pass: each test waits for the state it asserts
//! (a replica's offset reaching the primary's, a link going up), polling, with a long
//! deadline only as a guard against a hang.

mod common;
use common::client::{bulk, is_err, simple, Client};
use common::Running;
use halflife_server::{AppendFsync, Config};
use redis_protocol::resp2::types::BytesFrame as F;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::ops::Bound::Unbounded;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Guards every wait; never reached when the code works.
const GUARD: Duration = Duration::from_secs(60);

fn config() -> Config {
    Config {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        appendfsync: AppendFsync::EverySec,
        ..Config::default()
    }
}

fn replica_of(primary: SocketAddr) -> Config {
    Config {
        replicaof: Some(("127.0.0.1".into(), primary.port())),
        ..config()
    }
}

/// Small memtables, tables and value files, and a lifetime GC that runs after a few
/// hundred writes: flushes, compactions and GC all happen within a test's data.
fn small_engine() -> engine::Options {
    engine::Options {
        tree: testkit::small_tree(),
        vlog: engine::ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 64 << 10,
            lifetime: engine::LifetimeOptions {
                thresholds: engine::lifetime::ThresholdParams {
                    initial_ttl: 150,
                    ..Default::default()
                },
                trigger: engine::GcTrigger::Ttl,
                ..Default::default()
            },
            ..Default::default()
        },
        ..engine::Options::default()
    }
}

fn text(f: F) -> String {
    match f {
        F::BulkString(b) | F::SimpleString(b) => String::from_utf8_lossy(&b).into_owned(),
        F::Error(e) => format!("-{e}"),
        F::Integer(i) => i.to_string(),
        F::Null => "(nil)".into(),
        F::Array(a) => format!("{:?}", a.into_iter().map(text).collect::<Vec<_>>()),
    }
}

fn info(c: &mut Client, section: &str) -> HashMap<String, String> {
    text(c.cmd(&["INFO", section]))
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn field(c: &mut Client, section: &str, key: &str) -> String {
    info(c, section).remove(key).unwrap_or_default()
}

/// Polls `cond` until it holds; panics with `what` after [`GUARD`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + GUARD;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the replica has applied everything the primary has logged.
fn caught_up(primary: &mut Client, replica: &mut Client) {
    wait_until("the replica reaches the primary's offset", || {
        let p = field(primary, "replication", "master_repl_offset");
        let r = info(replica, "replication");
        r.get("master_link_status").map(String::as_str) == Some("up")
            && r.get("slave_repl_offset") == Some(&p)
    });
}

/// Every key of database 0 with its type, value and absolute expiry, read over the
/// protocol.
fn dump(c: &mut Client) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut cursor = "0".to_string();
    loop {
        let F::Array(page) = c.cmd(&["SCAN", &cursor, "COUNT", "1000"]) else {
            panic!("SCAN reply")
        };
        let mut page = page.into_iter();
        cursor = text(page.next().unwrap());
        let Some(F::Array(keys)) = page.next() else {
            panic!("SCAN keys")
        };
        for k in keys.into_iter().map(text) {
            let kind = text(c.cmd(&["TYPE", &k]));
            let value = match kind.as_str() {
                "string" => text(c.cmd(&["GET", &k])),
                "hash" => text(c.cmd(&["HGETALL", &k])),
                "list" => text(c.cmd(&["LRANGE", &k, "0", "-1"])),
                "set" => {
                    let F::Array(m) = c.cmd(&["SMEMBERS", &k]) else {
                        panic!("SMEMBERS")
                    };
                    let mut m: Vec<String> = m.into_iter().map(text).collect();
                    m.sort();
                    format!("{m:?}")
                }
                other => panic!("type {other}"),
            };
            let at = text(c.cmd(&["PEXPIRETIME", &k]));
            out.insert(k, format!("{kind} {value} expires {at}"));
        }
        if cursor == "0" {
            return out;
        }
    }
}

/// Every record of a closed database, but the replica's position and the primary's
/// replication histories (each server's own).
fn records(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = engine::DB::open(dir, small_engine()).unwrap();
    let all = db
        .scan(Unbounded, Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .filter(|(k, _)| k != b"R" && k != b"H")
        .collect();
    db.close().unwrap();
    all
}

/// Strings (some large enough for value files, overwritten so that GC has garbage), keys
/// with expiries, every collection type, and collections deleted and made again.
fn populate(c: &mut Client) {
    for round in 0..4 {
        for i in 0..150 {
            let v = format!("{round}-{i}-{}", "x".repeat(200));
            assert_eq!(c.cmd(&["SET", &format!("s:{i}"), &v]), simple("OK"));
        }
    }
    for i in 0..20 {
        assert_eq!(
            c.cmd(&["SET", &format!("ttl:{i}"), "v", "EX", "100000"]),
            simple("OK")
        );
    }
    c.cmd(&["SET", "soon-gone", "v", "PX", "1"]);
    c.cmd(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    c.cmd(&["HINCRBY", "h", "a", "41"]);
    c.cmd(&["SADD", "set", "x", "y", "z", "w"]);
    c.cmd(&["SREM", "set", "w"]);
    c.cmd(&["SPOP", "set"]);
    c.cmd(&["RPUSH", "list", "1", "2", "3"]);
    c.cmd(&["LPUSH", "list", "0"]);
    c.cmd(&["LPOP", "list"]);
    c.cmd(&["INCRBYFLOAT", "float", "1.5"]);
    c.cmd(&["EXPIRE", "h", "100000"]);
    c.cmd(&["HSET", "again", "old", "1"]);
    c.cmd(&["DEL", "again"]);
    c.cmd(&["HSET", "again", "new", "2"]);
}

#[test]
fn a_full_sync_copies_a_live_primary_and_the_stream_follows() {
    let (pd, rd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // No background expiry sweep: its purges (replicated like any write) could land after
    // the last catch-up below and before the servers stop, and the records compared at the
    // end would then differ by when the sweep ran, not by what replication did.
    let quiet = Config {
        active_expire_keys_per_sec: 0,
        ..config()
    };
    let primary = Running::start_with(pd.path(), quiet, small_engine());
    let mut p = Client::connect(primary.addr);
    populate(&mut p);
    wait_until("the primary compacted and collected garbage", || {
        let h = info(&mut p, "all");
        let n = |k: &str| h.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        n("compactions") > 0 && n("gc_jobs") > 0
    });
    // A writer goes on during the sync and after it.
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, written, addr) = (stop.clone(), written.clone(), primary.addr);
        std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            let mut i = 0u64;
            while !stop.load(SeqCst) || i < 200 {
                c.cmd(&["SET", &format!("w:{i}"), &i.to_string()]);
                c.cmd(&["SADD", "wset", &i.to_string()]);
                i += 1;
                written.store(i, SeqCst);
            }
        })
    };
    let replica = Running::start_with(rd.path(), replica_of(primary.addr), small_engine());
    let mut r = Client::connect(replica.addr);
    wait_until("the link is up", || {
        field(&mut r, "replication", "master_link_status") == "up"
    });
    let at_sync = written.load(SeqCst);
    wait_until("more writes after the sync", || {
        written.load(SeqCst) > at_sync + 100
    });
    stop.store(true, SeqCst);
    writer.join().unwrap();
    p.cmd(&["MULTI"]);
    p.cmd(&["SADD", "txset", "a", "b"]);
    p.cmd(&["DEL", "h"]);
    p.cmd(&["EXEC"]);
    p.cmd(&["SET", "last", "one"]);
    caught_up(&mut p, &mut r);
    let (pdump, rdump) = (dump(&mut p), dump(&mut r));
    assert!(pdump.len() > 150 + 200, "{} keys", pdump.len());
    assert_eq!(pdump, rdump);
    assert_eq!(r.cmd(&["GET", "last"]), bulk("one"));
    assert_eq!(field(&mut p, "stats", "sync_full"), "1");
    assert_eq!(field(&mut p, "replication", "connected_slaves"), "1");
    assert!(field(&mut p, "replication", "slave0").contains("state=online"));
    // Reads may have purged expired keys on the primary (replicated as deletes).
    caught_up(&mut p, &mut r);
    // Record for record: the replica holds what the primary holds, byte for byte.
    replica.stop();
    primary.stop();
    assert_eq!(records(pd.path()), records(rd.path()));
}

#[test]
fn a_restarted_replica_continues_from_the_backlog_or_else_the_wal() {
    let (pd, rd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let primary = Running::start(pd.path(), config());
    let mut p = Client::connect(primary.addr);
    p.cmd(&["SET", "before", "1"]);
    let replica = Running::start(rd.path(), replica_of(primary.addr));
    let mut r = Client::connect(replica.addr);
    p.cmd(&["SET", "streamed", "1"]);
    caught_up(&mut p, &mut r);
    replica.stop();
    wait_until("the primary sees the replica gone", || {
        field(&mut p, "replication", "connected_slaves") == "0"
    });
    p.cmd(&["SET", "while-down", "1"]);
    p.cmd(&["HSET", "h", "f", "v"]);

    let replica = Running::start(rd.path(), replica_of(primary.addr));
    let mut r = Client::connect(replica.addr);
    caught_up(&mut p, &mut r);
    assert_eq!(field(&mut p, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut p, "stats", "sync_full"), "1");
    assert_eq!(r.cmd(&["GET", "while-down"]), bulk("1"));
    assert_eq!(r.cmd(&["HGET", "h", "f"]), bulk("v"));
    replica.stop();
    wait_until("the primary sees the replica gone", || {
        field(&mut p, "replication", "connected_slaves") == "0"
    });

    // More writes than the backlog holds: the replica continues from the primary's WAL
    // (its live WAL still holds them).
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "repl-backlog-size", "16384"]),
        simple("OK")
    );
    let big = "y".repeat(1000);
    for i in 0..100 {
        p.cmd(&["SET", &format!("big:{i}"), &big]);
    }
    assert_eq!(
        field(&mut p, "replication", "repl_backlog_histlen"),
        "16384"
    );
    let replica = Running::start(rd.path(), replica_of(primary.addr));
    let mut r = Client::connect(replica.addr);
    caught_up(&mut p, &mut r);
    assert_eq!(field(&mut p, "stats", "sync_full"), "1");
    assert_eq!(field(&mut p, "stats", "sync_partial_ok"), "2");
    assert_eq!(field(&mut p, "stats", "sync_partial_wal"), "1");
    assert_eq!(dump(&mut p), dump(&mut r));
    // And WAIT counts it in the offsets it goes on with.
    p.cmd(&["SET", "after-wal", "1"]);
    assert_eq!(p.cmd(&["WAIT", "1", "0"]), F::Integer(1));
    assert_eq!(r.cmd(&["GET", "after-wal"]), bulk("1"));
    replica.stop();
    primary.stop();
}

#[test]
fn a_replica_out_of_both_the_backlog_and_the_wal_syncs_again() {
    let (pd, rd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Small memtables and no WAL kept past its flush.
    let primary = Running::start_with(pd.path(), config(), small_engine());
    let mut p = Client::connect(primary.addr);
    p.cmd(&["SET", "before", "1"]);
    let replica = Running::start_with(rd.path(), replica_of(primary.addr), small_engine());
    let mut r = Client::connect(replica.addr);
    caught_up(&mut p, &mut r);
    replica.stop();
    wait_until("the primary sees the replica gone", || {
        field(&mut p, "replication", "connected_slaves") == "0"
    });
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "repl-backlog-size", "16384"]),
        simple("OK")
    );
    let flushes = |p: &mut Client| field(p, "all", "flushes").parse::<u64>().unwrap();
    let before = flushes(&mut p);
    let big = "y".repeat(1000);
    let mut i = 0;
    // Until three memtables were flushed after the replica left: the flush of the one
    // whose WAL holds what it needs (the first or, if an older one was queued, the second)
    // has finished, WAL removal included, before the next one is counted.
    while flushes(&mut p) < before + 3 {
        p.cmd(&["SET", &format!("big:{}", i % 500), &big]);
        i += 1;
    }
    let replica = Running::start_with(rd.path(), replica_of(primary.addr), small_engine());
    let mut r = Client::connect(replica.addr);
    caught_up(&mut p, &mut r);
    assert_eq!(field(&mut p, "stats", "sync_full"), "2");
    assert_eq!(field(&mut p, "stats", "sync_partial_err"), "1");
    assert_eq!(field(&mut p, "stats", "sync_partial_wal"), "0");
    assert_eq!(dump(&mut p), dump(&mut r));
    replica.stop();
    primary.stop();
}

#[test]
fn replicas_are_read_only_acknowledge_for_wait_and_can_be_promoted() {
    let (pd, rd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let primary = Running::start(
        pd.path(),
        Config {
            requirepass: Some("pw".into()),
            ..config()
        },
    );
    let mut p = Client::connect(primary.addr);
    assert_eq!(p.cmd(&["AUTH", "pw"]), simple("OK"));
    // The replica starts as a primary of its own and is pointed at the primary.
    let replica = Running::start(
        rd.path(),
        Config {
            masterauth: Some("pw".into()),
            ..config()
        },
    );
    let mut r = Client::connect(replica.addr);
    r.cmd(&["SET", "mine", "1"]);
    let port = primary.addr.port().to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), simple("OK"));
    assert_eq!(
        r.cmd(&["SLAVEOF", "127.0.0.1", &port]),
        simple("OK Already connected to specified master")
    );
    assert_eq!(p.cmd(&["SET", "k", "v"]), simple("OK"));
    assert_eq!(p.cmd(&["WAIT", "1", "60000"]), F::Integer(1));
    assert_eq!(r.cmd(&["GET", "k"]), bulk("v"));
    // A transaction arrives whole.
    assert_eq!(p.cmd(&["MULTI"]), simple("OK"));
    p.cmd(&["SET", "t1", "1"]);
    p.cmd(&["HSET", "t2", "f", "v"]);
    p.cmd(&["INCR", "t1"]);
    assert!(matches!(p.cmd(&["EXEC"]), F::Array(a) if a.len() == 3));
    assert_eq!(p.cmd(&["WAIT", "1", "60000"]), F::Integer(1));
    assert_eq!(r.cmd(&["GET", "t1"]), bulk("2"));
    assert_eq!(r.cmd(&["HGET", "t2", "f"]), bulk("v"));
    assert_eq!(r.cmd(&["GET", "mine"]), F::Null, "replaced by the copy");
    // Only one replica: asking for two times out with one.
    assert_eq!(p.cmd(&["WAIT", "2", "50"]), F::Integer(1));
    assert!(is_err(
        &r.cmd(&["WAIT", "1", "10"]),
        "ERR WAIT cannot be used"
    ));
    assert!(is_err(
        &p.cmd(&["WAIT", "1", "-1"]),
        "ERR timeout is negative"
    ));

    let readonly = "READONLY You can't write against a read only replica.";
    assert_eq!(r.cmd(&["SET", "k", "x"]), F::Error(readonly.into()));
    assert_eq!(r.cmd(&["HSET", "h", "f", "v"]), F::Error(readonly.into()));
    assert_eq!(r.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(r.cmd(&["DEL", "k"]), F::Error(readonly.into()));
    assert!(is_err(&r.cmd(&["EXEC"]), "EXECABORT"));
    let F::Array(role) = r.cmd(&["ROLE"]) else {
        panic!("ROLE")
    };
    let role: Vec<String> = role.into_iter().map(text).collect();
    assert_eq!(role[..4], ["slave", "127.0.0.1", &port, "connected"]);
    let F::Array(prole) = p.cmd(&["ROLE"]) else {
        panic!("ROLE")
    };
    assert_eq!(text(prole[0].clone()), "master");
    assert_eq!(field(&mut p, "replication", "connected_slaves"), "1");

    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), simple("OK"));
    assert_eq!(field(&mut r, "replication", "role"), "master");
    assert_eq!(r.cmd(&["SET", "k", "promoted"]), simple("OK"));
    assert_eq!(r.cmd(&["GET", "k"]), bulk("promoted"));
    assert_eq!(
        p.cmd(&["GET", "k"]),
        bulk("v"),
        "the old primary is untouched"
    );
    wait_until("the old primary sees the replica gone", || {
        field(&mut p, "replication", "connected_slaves") == "0"
    });
    assert!(is_err(
        &r.cmd(&["REPLICAOF", "127.0.0.1", "65536"]),
        "ERR Invalid master port"
    ));
    replica.stop();
    primary.stop();
}

#[test]
fn a_replica_that_loses_power_resumes_from_the_position_its_disk_kept() {
    let (pd, rd, shadow) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let primary = Running::start_with(pd.path(), config(), small_engine());
    let mut p = Client::connect(primary.addr);
    p.cmd(&["SET", "before", "1"]);
    // The replica syncs nothing itself (`appendfsync no`): what it applies after its sync
    // is in the page cache only, and a cut keeps a random part of it (possibly all: then
    // the round is repeated with another seed, and the odds that eight rounds all keep
    // everything are below 1e-4).
    let mut took = false;
    for seed in 0..8 {
        let storage = testkit::powercut::PowerCutStorage::new(
            seed,
            testkit::powercut::Moment::Never,
            testkit::powercut::CutConfig {
                lose_dir_entries: true,
                keep_unsynced: false,
            },
            &shadow.path().join(seed.to_string()),
        );
        let replica = Running::start_with(
            rd.path(),
            Config {
                appendfsync: AppendFsync::No,
                ..replica_of(primary.addr)
            },
            engine::Options {
                storage: Some(storage.clone()),
                ..small_engine()
            },
        );
        let mut r = Client::connect(replica.addr);
        caught_up(&mut p, &mut r);
        for i in 0..300 {
            p.cmd(&["INCR", &format!("c:{}", i % 7)]);
            p.cmd(&["HSET", "h", &format!("f{}", i % 13), &i.to_string()]);
            if i == 150 {
                caught_up(&mut p, &mut r);
            }
        }
        caught_up(&mut p, &mut r);
        let applied: u64 = field(&mut r, "replication", "slave_repl_offset")
            .parse()
            .unwrap();
        drop(r);
        replica.cut_power(&storage);
        let kept = {
            let db = engine::DB::open(rd.path(), small_engine()).unwrap();
            let pos = db.get(b"R").unwrap().expect("a stored position");
            db.close().unwrap();
            // `replid (40) | offset u64 | primary seq u64`.
            u64::from_be_bytes(pos[40..48].try_into().unwrap())
        };
        assert!(kept <= applied, "a position is never ahead of its data");
        if kept < applied {
            took = true;
            break;
        }
    }
    assert!(
        took,
        "no cut took applied writes: the resume below would test nothing"
    );
    let full = field(&mut p, "stats", "sync_full");
    let partial = field(&mut p, "stats", "sync_partial_ok");

    // After the cut, the replica asks for the stream after what its disk kept, and ends
    // equal to the primary without copying the database again.
    p.cmd(&["SET", "after", "1"]);
    let replica = Running::start_with(rd.path(), replica_of(primary.addr), small_engine());
    let mut r = Client::connect(replica.addr);
    caught_up(&mut p, &mut r);
    assert_eq!(dump(&mut p), dump(&mut r));
    assert_eq!(field(&mut p, "stats", "sync_full"), full);
    assert_ne!(field(&mut p, "stats", "sync_partial_ok"), partial);
    drop(r);
    replica.stop();
    primary.stop();
    assert_eq!(records(pd.path()), records(rd.path()));
}

/// The engine as `halflife serve` opens it: obsolete WALs kept (an hour, 64 MiB here),
/// so that a restarted primary can serve its replicas from them.
fn keeping_wals() -> engine::Options {
    engine::Options {
        wal: engine::WalOptions {
            wal_ttl_seconds: 3600,
            wal_size_limit: 64 << 20,
            ..Default::default()
        },
        ..engine::Options::default()
    }
}

/// The primary's configuration for a restart on the address its replicas know.
fn listening_on(addr: SocketAddr) -> Config {
    Config {
        tcp: Some(addr),
        ..config()
    }
}

/// The primary sequence number a stopped replica's data holds (`replid (40) | offset u64
/// | seq u64`).
fn stored_seq(dir: &Path) -> u64 {
    let db = engine::DB::open(dir, engine::Options::default()).unwrap();
    let pos = db.get(b"R").unwrap().expect("a stored position");
    db.close().unwrap();
    u64::from_be_bytes(pos[48..56].try_into().unwrap())
}

#[test]
fn a_replica_continues_from_the_wal_of_a_cleanly_restarted_primary() {
    let (pd, rd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // No expiry sweep: a purge between the last catch-up and the stop would make the
    // records compared at the end differ by when it ran.
    let quiet = Config {
        active_expire_keys_per_sec: 0,
        ..config()
    };
    let primary = Running::start_with(pd.path(), quiet.clone(), keeping_wals());
    let addr = primary.addr;
    let mut p = Client::connect(addr);
    populate(&mut p);
    let replica = Running::start(rd.path(), replica_of(addr));
    let mut r = Client::connect(replica.addr);
    p.cmd(&["SET", "streamed", "1"]);
    assert_eq!(p.cmd(&["WAIT", "1", "0"]), F::Integer(1));
    let old_id = field(&mut p, "replication", "master_replid");
    drop(p);
    primary.stop();

    // The replica stays up and reconnects; the primary comes back on the same address
    // and takes writes before and after the replica is back.
    let primary = Running::start_with(
        pd.path(),
        Config {
            tcp: Some(addr),
            ..quiet.clone()
        },
        keeping_wals(),
    );
    let mut p = Client::connect(addr);
    assert_eq!(field(&mut p, "replication", "repl_previous_ids"), "1");
    assert_ne!(field(&mut p, "replication", "master_replid"), old_id);
    for i in 0..50 {
        p.cmd(&["SET", &format!("after:{i}"), &i.to_string()]);
    }
    p.cmd(&["HSET", "h", "new", "field"]);
    caught_up(&mut p, &mut r);
    for i in 50..100 {
        p.cmd(&["SET", &format!("after:{i}"), &i.to_string()]);
    }
    assert_eq!(p.cmd(&["WAIT", "1", "0"]), F::Integer(1));
    assert_eq!(r.cmd(&["GET", "after:99"]), bulk("99"));
    assert_eq!(
        field(&mut p, "stats", "sync_full"),
        "0",
        "no copy after the restart"
    );
    assert_eq!(field(&mut p, "stats", "sync_partial_wal"), "1");
    assert_eq!(
        field(&mut r, "replication", "master_replid"),
        field(&mut p, "replication", "master_replid")
    );
    assert_eq!(dump(&mut p), dump(&mut r));
    // Reads may have purged expired keys on the primary (replicated as deletes).
    caught_up(&mut p, &mut r);
    drop((p, r));
    replica.stop();
    primary.stop();
    assert_eq!(records(pd.path()), records(rd.path()));

    // A replica whose position claims more of that history than the primary recovered
    // (as if it held writes the primary lost): it copies anew, however close it is.
    let db = engine::DB::open(rd.path(), engine::Options::default()).unwrap();
    let mut pos = db.get(b"R").unwrap().unwrap();
    let seq = u64::from_be_bytes(pos[48..56].try_into().unwrap());
    pos[48..56].copy_from_slice(&(seq + 1).to_be_bytes());
    db.put(b"R", &pos).unwrap();
    db.close().unwrap();
    let primary = Running::start_with(pd.path(), quiet, keeping_wals());
    let mut p = Client::connect(primary.addr);
    assert_eq!(
        field(&mut p, "replication", "repl_recovered_seq"),
        seq.to_string(),
        "the replica had everything the primary recovered"
    );
    let replica = Running::start(rd.path(), replica_of(primary.addr));
    let mut r = Client::connect(replica.addr);
    caught_up(&mut p, &mut r);
    assert_eq!(field(&mut p, "stats", "sync_full"), "1");
    assert_eq!(field(&mut p, "stats", "sync_partial_wal"), "0");
    drop((p, r));
    replica.stop();
    primary.stop();
}

#[test]
fn writes_acknowledged_by_wait_survive_a_killed_primary() {
    let (pd, rd, shadow) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    // A process kill: the cut keeps every byte the process handed to the kernel, and
    // loses what it still buffered and what it never wrote.
    let storage = testkit::powercut::PowerCutStorage::new(
        1,
        testkit::powercut::Moment::Never,
        testkit::powercut::CutConfig {
            lose_dir_entries: false,
            keep_unsynced: true,
        },
        shadow.path(),
    );
    let primary = Running::start_with(
        pd.path(),
        Config {
            appendfsync: AppendFsync::No,
            ..config()
        },
        engine::Options {
            storage: Some(storage.clone()),
            ..keeping_wals()
        },
    );
    let addr = primary.addr;
    let mut p = Client::connect(addr);
    let replica = Running::start(rd.path(), replica_of(addr));
    let mut r = Client::connect(replica.addr);
    let mut acknowledged = Vec::new();
    for i in 0..200 {
        let k = format!("k:{i}");
        p.cmd(&["SET", &k, &i.to_string()]);
        p.cmd(&["RPUSH", "list", &i.to_string()]);
        if i % 20 == 19 {
            assert_eq!(p.cmd(&["WAIT", "1", "0"]), F::Integer(1));
            acknowledged.push(k);
        }
    }
    // Written after the last WAIT: on the replica or not, as the stream had it.
    p.cmd(&["SET", "unacknowledged", "1"]);
    drop(p);
    primary.cut_power(&storage);

    let primary = Running::start_with(pd.path(), listening_on(addr), keeping_wals());
    let mut p = Client::connect(addr);
    p.cmd(&["SET", "after-restart", "1"]);
    caught_up(&mut p, &mut r);
    for k in &acknowledged {
        assert_ne!(r.cmd(&["GET", k]), F::Null, "{k} was acknowledged by WAIT");
    }
    assert_eq!(r.cmd(&["GET", "after-restart"]), bulk("1"));
    // A kill loses nothing the replica was sent (the stream follows the engine's write),
    // so the replica is never ahead of the restarted primary: no copy.
    assert_eq!(field(&mut p, "stats", "sync_full"), "0");
    assert_eq!(field(&mut p, "stats", "sync_partial_wal"), "1");
    assert_eq!(dump(&mut p), dump(&mut r));
    caught_up(&mut p, &mut r);
    drop((p, r));
    replica.stop();
    primary.stop();
    assert_eq!(records(pd.path()), records(rd.path()));
}

#[test]
fn a_replica_holding_writes_a_primary_lost_copies_anew_even_after_the_primary_passed_it() {
    // A primary on power-cut storage that syncs nothing (`appendfsync no`) loses a tail
    // of the writes its replica applied. It then writes more than it lost and restarts
    // cleanly: its sequence numbers are past the replica's again, and a single replication
    // id kept across restarts would let the replica continue, keeping the lost writes.
    // Each round uses fresh directories; a cut keeps everything now and then (then the
    // round is repeated: eight all keeping everything are below 1e-4).
    for seed in 0..8 {
        let (pd, rd, shadow) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let storage = testkit::powercut::PowerCutStorage::new(
            seed,
            testkit::powercut::Moment::Never,
            testkit::powercut::CutConfig {
                lose_dir_entries: true,
                keep_unsynced: false,
            },
            shadow.path(),
        );
        let nosync = Config {
            appendfsync: AppendFsync::No,
            ..config()
        };
        let primary = Running::start_with(
            pd.path(),
            nosync.clone(),
            engine::Options {
                storage: Some(storage.clone()),
                ..keeping_wals()
            },
        );
        let mut p = Client::connect(primary.addr);
        let replica = Running::start(rd.path(), replica_of(primary.addr));
        for i in 0..100 {
            p.cmd(&["SET", &format!("lost:{i}"), "x"]);
        }
        assert_eq!(p.cmd(&["WAIT", "1", "0"]), F::Integer(1));
        replica.stop();
        let replica_seq = stored_seq(rd.path());
        drop(p);
        primary.cut_power(&storage);

        let primary = Running::start_with(pd.path(), nosync.clone(), keeping_wals());
        let mut p = Client::connect(primary.addr);
        let recovered: u64 = field(&mut p, "replication", "repl_recovered_seq")
            .parse()
            .unwrap();
        if recovered >= replica_seq {
            // The cut kept everything the replica holds: nothing to test this round.
            drop(p);
            primary.stop();
            continue;
        }
        // More writes than were lost, then a clean restart.
        let mut i = 0;
        while field(&mut p, "replication", "master_repl_seq")
            .parse::<u64>()
            .unwrap()
            <= replica_seq + 10
        {
            p.cmd(&["SET", &format!("new:{i}"), "y"]);
            i += 1;
        }
        drop(p);
        primary.stop();
        let primary = Running::start_with(pd.path(), nosync, keeping_wals());
        let mut p = Client::connect(primary.addr);
        assert!(
            field(&mut p, "replication", "repl_recovered_seq")
                .parse::<u64>()
                .unwrap()
                > replica_seq
        );
        assert_eq!(field(&mut p, "replication", "repl_previous_ids"), "2");

        let replica = Running::start(rd.path(), replica_of(primary.addr));
        let mut r = Client::connect(replica.addr);
        caught_up(&mut p, &mut r);
        assert_eq!(
            dump(&mut p),
            dump(&mut r),
            "the replica is the primary's copy"
        );
        assert_eq!(field(&mut p, "stats", "sync_full"), "1");
        assert_eq!(field(&mut p, "stats", "sync_partial_wal"), "0");
        drop((p, r));
        replica.stop();
        primary.stop();
        return;
    }
    panic!("no cut took a write the replica held: the test tested nothing");
}

/// A fake primary: answers every command of the handshake with `+OK` and, after `PSYNC`,
/// sends `payload`, then holds the connection open; serves every connection so.
fn fake_primary(payload: Vec<u8>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let payload = payload.clone();
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                let mut answered = 0;
                loop {
                    let Ok(n) = s.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    // Each command is an array: one `*` per command at a line start.
                    let commands = seen
                        .windows(3)
                        .filter(|w| w[1] == b'*' && w[0] == b'\n')
                        .count()
                        + (seen.first() == Some(&b'*')) as usize;
                    let psync = seen.windows(5).any(|w| w == b"PSYNC");
                    let ok = if psync { commands - 1 } else { commands };
                    while answered < ok {
                        s.write_all(b"+OK\r\n").unwrap();
                        answered += 1;
                    }
                    if psync {
                        s.write_all(&payload).unwrap();
                        // Hold the link until the replica drops it.
                        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn transfer_header(files: u32, total: u64) -> Vec<u8> {
    let mut out = format!("+FULLRESYNC {} 0\r\n", "a".repeat(40)).into_bytes();
    out.extend_from_slice(b"HLSYNC01");
    out.extend_from_slice(&files.to_be_bytes());
    out.extend_from_slice(&total.to_be_bytes());
    out
}

fn file_header(name: &str, size: u64) -> Vec<u8> {
    let mut out = (name.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&size.to_be_bytes());
    out
}

#[test]
fn a_hostile_primary_gets_its_link_dropped_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let replica = Running::start(dir.path(), config());
    let mut r = Client::connect(replica.addr);
    r.cmd(&["SET", "kept", "1"]);

    // A file length of 2^62 bytes: refused from the header, nothing allocated or written.
    let mut huge = transfer_header(1, u64::MAX);
    huge.extend(file_header("000001.sst", 1 << 62));
    let fake = fake_primary(huge);
    r.cmd(&["REPLICAOF", "127.0.0.1", &fake.port().to_string()]);
    wait_until("the oversized file is refused", || {
        field(&mut r, "replication", "master_sync_last_error")
            .contains("file 000001.sst declares 4611686018427387904 bytes, more than the limit")
    });
    assert_eq!(field(&mut r, "replication", "master_link_status"), "down");

    // A file whose bytes do not match its crc32c.
    let mut bad = transfer_header(1, 4);
    bad.extend(file_header("CURRENT", 4));
    bad.extend_from_slice(b"abcd");
    bad.extend_from_slice(&(crc32c::crc32c(b"abcd") ^ 1).to_be_bytes());
    let fake = fake_primary(bad);
    r.cmd(&["REPLICAOF", "127.0.0.1", &fake.port().to_string()]);
    wait_until("the bad checksum is refused", || {
        field(&mut r, "replication", "master_sync_last_error")
            .contains("crc32c mismatch in file CURRENT")
    });

    // A path in a file name.
    let mut escape = transfer_header(1, 1);
    escape.extend(file_header("../x", 1));
    let fake = fake_primary(escape);
    r.cmd(&["REPLICAOF", "127.0.0.1", &fake.port().to_string()]);
    wait_until("the file name is refused", || {
        field(&mut r, "replication", "master_sync_last_error").contains("bad file name")
    });

    // A replication id that is not one.
    let fake = fake_primary(b"+FULLRESYNC \r\x1b[2J 0\r\n".to_vec());
    r.cmd(&["REPLICAOF", "127.0.0.1", &fake.port().to_string()]);
    wait_until("the replication id is refused", || {
        field(&mut r, "replication", "master_sync_last_error").contains("bad replication id")
    });

    // The replica's own data is untouched, and it serves on.
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), simple("OK"));
    assert_eq!(r.cmd(&["GET", "kept"]), bulk("1"));
    replica.stop();
}
