//! A primary *process* killed with `SIGKILL` while a client writes and waits for its
//! replica after each write (`WAIT 1`): the replica holds every write `WAIT` acknowledged,
//! holds the primary's writes in order (a prefix of them), and, promoted, serves them.
//!
//! `crates/server/tests/replication.rs` covers the same with servers in-process, the kill
//! simulated by storage that keeps what the process handed to the kernel; here both
//! servers are the real `halflife serve` binary and the kill is the signal. Nothing waits
//! for time to pass: each step waits for the state it needs, with a long deadline only as
//! a guard against a hang.

#[path = "../../server/tests/common/client.rs"]
mod client;
mod served;

use client::Client;
use redis_protocol::resp2::types::BytesFrame as F;
use served::Served;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Guards every wait; never reached when the code works.
const GUARD: Duration = Duration::from_secs(60);

/// Writes `WAIT` must have acknowledged before the primary is killed.
const ACKED_BEFORE_KILL: usize = 200;

fn text(f: &F) -> String {
    match f {
        F::BulkString(b) | F::SimpleString(b) => String::from_utf8_lossy(b).into_owned(),
        F::Error(e) => format!("-{e}"),
        F::Integer(i) => i.to_string(),
        F::Null => "(nil)".into(),
        F::Array(a) => format!("{:?}", a.iter().map(text).collect::<Vec<_>>()),
    }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + GUARD;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One write (`SET k:i` and `RPUSH log i` in a transaction, so that the replica holds
/// both or neither) and `WAIT 1 5000`; `None` once the server is gone, else whether the
/// replica acknowledged it.
fn write_and_wait(c: &mut Client, i: usize) -> Option<bool> {
    let (k, v) = (format!("k:{i}"), i.to_string());
    let (k, v) = (k.as_str(), v.as_str());
    for cmd in [
        &["MULTI"][..],
        &["SET", k, v],
        &["RPUSH", "log", v],
        &["EXEC"],
        &["WAIT", "1", "5000"],
    ] {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        c.try_send(&args).ok()?;
    }
    let replies: Vec<F> = (0..5).map(|_| c.read()).collect::<Option<_>>()?;
    assert!(
        matches!(&replies[3], F::Array(a) if a.len() == 2),
        "EXEC answered {:?}",
        replies[3]
    );
    match &replies[4] {
        F::Integer(n) => Some(*n == 1),
        other => panic!("WAIT answered {other:?}"),
    }
}

#[test]
fn a_sigkilled_primary_process_loses_no_write_wait_acknowledged() {
    let t = tempfile::tempdir().unwrap();
    let (pd, rd) = (t.path().join("primary"), t.path().join("replica"));
    let mut primary = Served::start(&pd, &[]);
    let replica = Served::start(&rd, &["--replicaof", &primary.addr.to_string()]);
    let mut r = Client::connect(replica.addr);
    wait_until("the replica's link is up", || {
        r.info_field("replication", "master_link_status").as_deref() == Some("up")
    });

    // The writer goes on until the primary dies under it; the kill lands wherever it
    // lands (between a write and its WAIT, inside a transaction, ...).
    let acked = Arc::new(Mutex::new(Vec::new()));
    let sent = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (acked, sent, addr) = (acked.clone(), sent.clone(), primary.addr);
        std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            for i in 0.. {
                sent.store(i + 1, SeqCst);
                match write_and_wait(&mut c, i) {
                    None => return,
                    Some(true) => acked.lock().unwrap().push(i),
                    Some(false) => {}
                }
            }
        })
    };
    wait_until("WAIT acknowledged enough writes", || {
        acked.lock().unwrap().len() >= ACKED_BEFORE_KILL
    });
    primary.child.kill().unwrap(); // SIGKILL
    primary.child.wait().unwrap();
    writer.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    let sent = sent.load(SeqCst);
    assert!(acked.len() >= ACKED_BEFORE_KILL);

    // The replica notices, and serves what it applied.
    wait_until("the replica's link is down", || {
        r.info_field("replication", "master_link_status").as_deref() == Some("down")
    });
    let F::Array(log) = r.cmd(&["LRANGE", "log", "0", "-1"]) else {
        panic!("LRANGE reply")
    };
    let log: Vec<usize> = log.iter().map(|f| text(f).parse().unwrap()).collect();
    // A prefix of the writes, in order: the stream is the primary's order.
    assert_eq!(log, (0..log.len()).collect::<Vec<_>>());
    assert!(log.len() <= sent, "more on the replica than was written");
    for &i in &acked {
        assert!(i < log.len(), "write {i} was acknowledged by WAIT");
        assert_eq!(
            text(&r.cmd(&["GET", &format!("k:{i}")])),
            i.to_string(),
            "write {i} was acknowledged by WAIT"
        );
    }
    // The last write on the replica is whole (a transaction is applied in one batch).
    let last = log.len() - 1;
    assert_eq!(
        text(&r.cmd(&["GET", &format!("k:{last}")])),
        last.to_string()
    );
    assert_eq!(r.cmd(&["GET", &format!("k:{}", log.len())]), F::Null);

    // Failover: the promoted replica holds every acknowledged write and takes new ones.
    assert_eq!(text(&r.cmd(&["REPLICAOF", "NO", "ONE"])), "OK");
    assert_eq!(text(&r.cmd(&["SET", "after-failover", "1"])), "OK");
    assert_eq!(
        r.cmd(&["LLEN", "log"]),
        F::Integer(log.len() as i64),
        "promotion keeps what the replica applied"
    );
    drop(replica);
}
