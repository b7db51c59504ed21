//! `halflife backup create|list|verify|purge --server` against a running `halflife serve
//! --backup-dir`, then `halflife backup restore` and `halflife check` of the restored
//! copy, which a second server serves with every write made before the backup.

#[path = "../../server/tests/common/client.rs"]
mod client;
mod served;

use client::{simple, Client};
use redis_protocol::resp2::types::BytesFrame as F;
use served::Served;
use std::process::{Command, Output};

fn halflife(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halflife"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `halflife args`, which must succeed; its stdout.
fn ok(args: &[&str]) -> String {
    let out = halflife(args);
    assert!(
        out.status.success(),
        "halflife {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn backup_of_a_running_server_through_its_backup_command() {
    let t = tempfile::tempdir().unwrap();
    let (data, backups) = (t.path().join("db"), t.path().join("backups"));
    let srv = Served::start(&data, &["--backup-dir", backups.to_str().unwrap()]);
    let addr = srv.addr.to_string();
    let mut c = Client::connect(srv.addr);
    for i in 0..100 {
        assert_eq!(
            c.cmd(&["SET", &format!("k{i}"), &i.to_string()]),
            simple("OK")
        );
    }
    // Opening the server's database here fails: it holds the lock.
    let locked = halflife(&[
        "backup",
        "create",
        "--dir",
        data.to_str().unwrap(),
        "--backup-dir",
        t.path().join("elsewhere").to_str().unwrap(),
    ]);
    assert!(!locked.status.success());
    assert!(String::from_utf8_lossy(&locked.stderr).contains("--server"));

    let out = ok(&["backup", "create", "--server", &addr]);
    assert!(out.starts_with("backup 1 of the server at"), "{out}");
    assert_eq!(c.cmd(&["SET", "later", "x"]), simple("OK"));
    let out = ok(&["backup", "create", "--server", &addr]);
    assert!(out.starts_with("backup 2 "), "{out}");
    let out = ok(&["backup", "list", "--server", &addr]);
    assert_eq!(out.lines().count(), 3, "{out}");
    let out = ok(&["backup", "verify", "--server", &addr]);
    assert!(out.starts_with("2 backup(s)"), "{out}");
    let out = ok(&["backup", "purge", "--server", &addr, "--keep", "1"]);
    assert!(out.starts_with("deleted 1 backup(s)"), "{out}");
    let out = ok(&["backup", "verify", "--server", &addr, "--id", "2"]);
    assert!(out.starts_with("1 backup(s)"), "{out}");
    // An error reply fails the command and says what the server answered.
    let gone = halflife(&["backup", "verify", "--server", &addr, "--id", "1"]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("answered BACKUP VERIFY 1"));
    drop(c);
    drop(srv);

    // Restored and checked while the server is gone; a second server serves it.
    let restored = t.path().join("restored");
    let b = backups.to_str().unwrap();
    ok(&[
        "backup",
        "restore",
        "--backup-dir",
        b,
        "--to",
        restored.to_str().unwrap(),
    ]);
    ok(&["check", restored.to_str().unwrap()]);
    let srv = Served::start(
        &restored,
        &["--backup-dir", t.path().join("b2").to_str().unwrap()],
    );
    let mut c = Client::connect(srv.addr);
    for i in 0..100 {
        assert_eq!(
            c.cmd(&["GET", &format!("k{i}")]),
            F::BulkString(i.to_string().into_bytes().into())
        );
    }
    assert_eq!(c.cmd(&["GET", "later"]), F::BulkString("x".into()));
}
