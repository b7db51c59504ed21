//! `halflife serve FILE`: a config file in redis.conf syntax under the command line's
//! options, `CONFIG REWRITE` writing the settings back into it (the round trip through a
//! restart), errors that name the file and line; and the `loglevel` and `logfile`
//! settings, from the command line and changed at run time.

#[path = "../../server/tests/common/client.rs"]
mod client;
mod served;

use client::{simple, Client};
use redis_protocol::resp2::types::BytesFrame as F;
use served::Served;
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

fn text(f: &F) -> String {
    match f {
        F::BulkString(b) | F::SimpleString(b) => String::from_utf8_lossy(b).into_owned(),
        F::Error(e) => format!("-{e}"),
        other => format!("{other:?}"),
    }
}

/// `CONFIG GET name`'s value.
fn get(c: &mut Client, name: &str) -> String {
    match c.cmd(&["CONFIG", "GET", name]) {
        F::Array(a) if a.len() == 2 => text(&a[1]),
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

fn serve_file(t: &Path, conf: &Path, extra: &[&str]) -> Served {
    let mut args: Vec<&OsStr> = vec!["serve".as_ref(), conf.as_ref()];
    args.extend(extra.iter().map(OsStr::new));
    Served::spawn(&t.join("serve.log"), &args)
}

/// `halflife serve ARGS` that must fail: its stderr.
fn fails(args: &[&OsStr]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_halflife"))
        .args(args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{args:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn config_file_round_trip_through_config_rewrite_and_a_restart() {
    let t = tempfile::tempdir().unwrap();
    let conf = t.path().join("halflife.conf");
    let db = t.path().join("db");
    let text_before = format!(
        "# a halflife server\nport 0\ndir \"{}\"\nappendonly yes\n\n# tuned by hand\nslowlog-max-len 64\n",
        db.display()
    );
    std::fs::write(&conf, &text_before).unwrap();
    let srv = serve_file(t.path(), &conf, &[]);
    let mut c = Client::connect(srv.addr);
    assert_eq!(get(&mut c, "slowlog-max-len"), "64");
    assert_eq!(c.cmd(&["SET", "k", "v"]), simple("OK"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-max-len", "100", "timeout", "300"]),
        simple("OK")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
        simple("OK")
    );
    // Redis 7's alias: lua-time-limit is busy-reply-threshold.
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "lua-time-limit",
            "1234",
            "client-query-buffer-limit",
            "2mb"
        ]),
        simple("OK")
    );
    assert_eq!(get(&mut c, "busy-reply-threshold"), "1234");
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), simple("OK"));
    let after = std::fs::read_to_string(&conf).unwrap();
    // Comments and the lines it does not rewrite stay; the changed setting is written in
    // place; new ones are appended.
    let lines: Vec<&str> = after.lines().collect();
    assert_eq!(
        lines[..7],
        text_before.replace("64", "100").lines().collect::<Vec<_>>()[..]
    );
    assert!(lines.contains(&"timeout 300"), "{after}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("notify-keyspace-events ")),
        "{after}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("loglevel")), "{after}");
    assert!(lines.contains(&"busy-reply-threshold 1234"), "{after}");
    assert!(
        !lines.iter().any(|l| l.starts_with("lua-time-limit")),
        "{after}"
    );
    assert!(
        lines.contains(&"client-query-buffer-limit 2097152"),
        "{after}"
    );
    drop(c);
    drop(srv);

    // The restart reads the rewritten file; the command line overrides it.
    let other = t.path().join("other-backups");
    let srv = serve_file(t.path(), &conf, &["--backup-dir", other.to_str().unwrap()]);
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["GET", "k"]), F::BulkString("v".into()));
    assert_eq!(get(&mut c, "timeout"), "300");
    assert_eq!(get(&mut c, "slowlog-max-len"), "100");
    assert_eq!(get(&mut c, "lua-time-limit"), "1234");
    assert_eq!(get(&mut c, "client-query-buffer-limit"), "2097152");
    let events = get(&mut c, "notify-keyspace-events");
    assert!(events.contains('K') && events.contains('E'), "{events}");
    assert_eq!(get(&mut c, "backup-dir"), other.display().to_string());
    // Fixed settings are refused, saying how to change them.
    let e = text(&c.cmd(&["CONFIG", "SET", "halflife-gc-policy", "titan"]));
    assert!(e.starts_with("-ERR") && e.contains("--policy"), "{e}");
    let e = text(&c.cmd(&["CONFIG", "SET", "halflife-space-amp-target", "2"]));
    assert!(e.contains("--space-amp-target"), "{e}");
    assert_eq!(get(&mut c, "halflife-space-amp-target"), "1.5");
}

#[test]
fn config_file_errors_name_the_file_and_line() {
    let t = tempfile::tempdir().unwrap();
    for (body, want) in [
        ("port 0\n\ntimeout soon\n", ":3: "),
        ("port 0\nno-such-setting 1\n", ":2: "),
        ("port 0\nrequirepass \"open\n", ":2: Unbalanced quotes"),
        ("port 0\nreplicaof onlyhost\n", ":2: Bad directive"),
    ] {
        let conf = t.path().join("bad.conf");
        std::fs::write(
            &conf,
            format!("dir {}\n{body}", t.path().join("db").display()),
        )
        .unwrap();
        let err = fails(&["serve".as_ref(), conf.as_ref()]);
        let line = want.replace(":3", ":4").replace(":2", ":3");
        assert!(err.contains(&format!("bad.conf{line}")), "{body:?}: {err}");
    }
    // CONFIG REWRITE without a file fails, as in Redis.
    let srv = Served::start(&t.path().join("db2"), &[]);
    let mut c = Client::connect(srv.addr);
    let e = text(&c.cmd(&["CONFIG", "REWRITE"]));
    assert!(e.contains("without a config file"), "{e}");
}

fn persistence(c: &mut Client, field: &str) -> String {
    c.info_field("persistence", field)
        .unwrap_or_else(|| panic!("no {field} in INFO persistence"))
}

/// A `BGSAVE`, waited for until `rdb_saves` says it is the `n`-th.
fn bgsave(c: &mut Client, n: u64) {
    assert_eq!(c.cmd(&["BGSAVE"]), simple("Background saving started"));
    let start = Instant::now();
    while persistence(c, "rdb_bgsave_in_progress") != "0"
        || persistence(c, "rdb_saves").parse::<u64>().unwrap() < n
    {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "BGSAVE never ended"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

const STARTED: &str = "Background saving started";

#[test]
fn loglevel_and_logfile_decide_which_lines_appear_where() {
    let t = tempfile::tempdir().unwrap();
    let (l1, l2) = (t.path().join("one.log"), t.path().join("two.log"));
    let srv = Served::start(
        &t.path().join("db"),
        &["--loglevel", "warning", "--logfile", l1.to_str().unwrap()],
    );
    let mut c = Client::connect(srv.addr);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    assert_eq!(get(&mut c, "loglevel"), "warning");
    assert_eq!(get(&mut c, "logfile"), l1.display().to_string());
    bgsave(&mut c, 1);
    assert!(!read(&l1).contains(STARTED), "an info line at warning");

    assert_eq!(
        c.cmd(&["CONFIG", "SET", "loglevel", "notice"]),
        simple("OK")
    );
    bgsave(&mut c, 2);
    let one = read(&l1);
    assert_eq!(one.matches(STARTED).count(), 1, "{one}");
    // A time, then the level.
    let line = one.lines().find(|l| l.contains(STARTED)).unwrap();
    assert!(line.contains(" INFO "), "{line}");

    assert_eq!(
        c.cmd(&["CONFIG", "SET", "logfile", l2.to_str().unwrap()]),
        simple("OK")
    );
    bgsave(&mut c, 3);
    assert_eq!(read(&l1).matches(STARTED).count(), 1);
    assert_eq!(read(&l2).matches(STARTED).count(), 1);

    let e = text(&c.cmd(&["CONFIG", "SET", "loglevel", "loud"]));
    assert!(e.contains("debug, verbose, notice, warning"), "{e}");
    let e = text(&c.cmd(&["CONFIG", "SET", "logfile", "/nonexistent-dir/x.log"]));
    assert!(e.contains("Can't open the log file"), "{e}");
    assert_eq!(get(&mut c, "logfile"), l2.display().to_string());
}
