//! `maxmemory` and its eviction policies as a Redis client sees them: which keys each
//! policy evicts, `-OOM` when nothing may be, `used_memory` kept under the bound, the
//! `evicted` event and counter, and `OBJECT IDLETIME`/`FREQ` by policy.
//!
//! Each test sets `maxmemory-samples` to its most (64), so that every refill of the
//! eviction pool sees all the keys of these small data sets: which key goes is then
//! Redis's choice with a full view, not a draw. Nothing waits for time to pass but the
//! LRU test, which waits (bounded) until its cold keys are idle for two seconds.

mod common;
use common::client::{bulk, is_err, simple, Client};
use common::Running;
use halflife_server::Config;
use redis_protocol::resp2::types::BytesFrame as F;
use std::time::{Duration, Instant};

/// A guard against a hang, never reached when the server works.
const GUARD: Duration = Duration::from_secs(120);
/// Bytes of each value: every key's record is about a kilobyte.
const VALUE: usize = 1000;

fn start() -> (tempfile::TempDir, Running, Client) {
    let dir = tempfile::tempdir().unwrap();
    let r = Running::start(
        dir.path(),
        Config {
            tcp: Some("127.0.0.1:0".parse().unwrap()),
            ..Config::default()
        },
    );
    let c = Client::connect(r.addr);
    (dir, r, c)
}

fn int(f: F) -> i64 {
    match f {
        F::Integer(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn info_u64(c: &mut Client, section: &str, field: &str) -> u64 {
    c.info_field(section, field)
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .parse()
        .unwrap()
}

fn used(c: &mut Client) -> u64 {
    info_u64(c, "memory", "used_memory")
}

fn evicted(c: &mut Client) -> u64 {
    info_u64(c, "stats", "evicted_keys")
}

fn config_set(c: &mut Client, name: &str, value: &str) {
    assert_eq!(
        c.cmd(&["CONFIG", "SET", name, value]),
        simple("OK"),
        "{name}"
    );
}

fn set(c: &mut Client, key: &str, ttl: Option<u64>) -> F {
    let v = "v".repeat(VALUE);
    match ttl {
        Some(t) => c.cmd(&["SET", key, &v, "EX", &t.to_string()]),
        None => c.cmd(&["SET", key, &v]),
    }
}

/// Writes `<prefix>000`, `<prefix>001`, ... (`n` keys), each with expiry `ttl(i)`.
fn fill(c: &mut Client, prefix: &str, n: usize, ttl: impl Fn(usize) -> Option<u64>) {
    for i in 0..n {
        assert_eq!(set(c, &format!("{prefix}{i:03}"), ttl(i)), simple("OK"));
    }
}

fn exists(c: &mut Client, key: &str) -> bool {
    int(c.cmd(&["EXISTS", key])) == 1
}

/// How many of `<prefix>000` .. `<prefix>{n-1}` exist.
fn count(c: &mut Client, prefix: &str, n: usize) -> usize {
    (0..n)
        .filter(|i| exists(c, &format!("{prefix}{i:03}")))
        .count()
}

/// Sets `policy` and a bound at the data set's size now; returns the bound.
fn bound_here(c: &mut Client, policy: &str) -> u64 {
    config_set(c, "maxmemory-samples", "64");
    config_set(c, "maxmemory-policy", policy);
    let max = used(c);
    assert!(max > 0);
    config_set(c, "maxmemory", &max.to_string());
    max
}

#[test]
fn allkeys_policies_evict_keys_without_expiry_and_keep_used_memory_under_the_bound() {
    for policy in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
        let (_d, r, mut c) = start();
        fill(&mut c, "old:", 100, |_| None);
        let max = bound_here(&mut c, policy);
        for i in 0..50 {
            assert_eq!(set(&mut c, &format!("new:{i:03}"), None), simple("OK"));
            let u = used(&mut c);
            assert!(u <= max, "{policy}: used_memory {u} over maxmemory {max}");
        }
        let ev = evicted(&mut c);
        let left = int(c.cmd(&["DBSIZE"])) as u64;
        assert!(
            ev >= 40,
            "{policy}: {ev} keys evicted for 50 writes of the same size"
        );
        assert_eq!(
            left + ev,
            150,
            "{policy}: every key is there or was evicted"
        );
        r.stop();
    }
}

#[test]
fn volatile_policies_evict_only_keys_with_an_expiry_then_refuse_writes() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let (_d, r, mut c) = start();
        fill(&mut c, "keep:", 40, |_| None);
        fill(&mut c, "ttl:", 40, |_| Some(100_000));
        bound_here(&mut c, policy);
        // Each write of a key without expiry evicts one with an expiry, until none is left.
        let mut written = 0;
        let refused = loop {
            assert!(written < 200, "{policy}: never refused");
            let reply = set(&mut c, &format!("new:{written:03}"), None);
            if reply != simple("OK") {
                break reply;
            }
            written += 1;
        };
        assert!(
            is_err(
                &refused,
                "OOM command not allowed when used memory > 'maxmemory'"
            ),
            "{policy}: {refused:?}"
        );
        assert!(written >= 30, "{policy}: refused after {written} writes");
        assert_eq!(count(&mut c, "keep:", 40), 40, "{policy}");
        assert_eq!(count(&mut c, "new:", written), written, "{policy}");
        assert_eq!(
            count(&mut c, "ttl:", 40),
            0,
            "{policy}: keys with an expiry left"
        );
        assert_eq!(evicted(&mut c), 40, "{policy}");
        r.stop();
    }
}

#[test]
fn volatile_ttl_evicts_the_nearest_expiry_first() {
    let (_d, r, mut c) = start();
    fill(&mut c, "keep:", 10, |_| None);
    // The later the name, the nearer the expiry: key order is not expiry order.
    fill(&mut c, "ttl:", 30, |i| Some(100_000 - 100 * i as u64));
    bound_here(&mut c, "volatile-ttl");
    fill(&mut c, "new:", 10, |_| None);
    let ev = evicted(&mut c) as usize;
    assert!((1..30).contains(&ev), "{ev} evicted");
    for i in 0..30 {
        let nearest = i >= 30 - ev;
        assert_eq!(
            exists(&mut c, &format!("ttl:{i:03}")),
            !nearest,
            "ttl:{i:03} with {ev} evicted"
        );
    }
    assert_eq!(count(&mut c, "keep:", 10), 10);
    r.stop();
}

#[test]
fn lfu_keeps_a_key_read_often_over_keys_never_read() {
    let (_d, r, mut c) = start();
    // Every access counts and nothing decays: the counters are exact.
    config_set(&mut c, "lfu-log-factor", "0");
    config_set(&mut c, "lfu-decay-time", "0");
    config_set(&mut c, "maxmemory-policy", "allkeys-lfu");
    fill(&mut c, "cold:", 60, |_| None);
    assert_eq!(set(&mut c, "hot", None), simple("OK"));
    for _ in 0..20 {
        assert_eq!(c.cmd(&["GET", "hot"]), bulk(&"v".repeat(VALUE)));
    }
    let hot = int(c.cmd(&["OBJECT", "FREQ", "hot"]));
    let cold = int(c.cmd(&["OBJECT", "FREQ", "cold:000"]));
    assert!(hot >= cold + 20, "hot {hot}, cold {cold}");
    bound_here(&mut c, "allkeys-lfu");
    fill(&mut c, "new:", 40, |_| None);
    assert!(evicted(&mut c) >= 30);
    assert!(exists(&mut c, "hot"), "the key read often was evicted");
    r.stop();
}

#[test]
fn lru_keeps_a_key_read_recently_over_idle_ones() {
    let (_d, r, mut c) = start();
    fill(&mut c, "cold:", 60, |_| None);
    assert_eq!(set(&mut c, "hot", None), simple("OK"));
    // The access clock counts seconds, as Redis's: wait until the cold keys are idle.
    let since = Instant::now();
    while int(c.cmd(&["OBJECT", "IDLETIME", "cold:059"])) < 2 {
        assert!(since.elapsed() < GUARD, "idle time never grew");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(c.cmd(&["GET", "hot"]), bulk(&"v".repeat(VALUE)));
    let hot = int(c.cmd(&["OBJECT", "IDLETIME", "hot"]));
    assert!(hot < int(c.cmd(&["OBJECT", "IDLETIME", "cold:059"])));
    bound_here(&mut c, "allkeys-lru");
    fill(&mut c, "new:", 40, |_| None);
    assert!(evicted(&mut c) >= 30);
    assert!(exists(&mut c, "hot"), "the key read last was evicted");
    r.stop();
}

#[test]
fn noeviction_refuses_writes_but_serves_reads_and_deletes() {
    let (_d, r, mut c) = start();
    fill(&mut c, "k:", 20, |_| None);
    bound_here(&mut c, "noeviction");
    let oom = "OOM command not allowed when used memory > 'maxmemory'";
    // Checked before the command, as in Redis: at the bound a write still runs.
    assert_eq!(set(&mut c, "more", None), simple("OK"));
    assert!(is_err(&set(&mut c, "more2", None), oom));
    assert!(is_err(&c.cmd(&["APPEND", "k:000", "x"]), oom));
    assert_eq!(c.cmd(&["GET", "k:000"]), bulk(&"v".repeat(VALUE)));
    assert_eq!(int(c.cmd(&["DBSIZE"])), 21);
    // A transaction that queues a write over the bound fails as a whole.
    assert_eq!(c.cmd(&["MULTI"]), simple("OK"));
    assert!(is_err(&c.cmd(&["SET", "more2", "x"]), oom));
    assert!(is_err(&c.cmd(&["EXEC"]), "EXECABORT"));
    // DEL frees room: a write fits again.
    assert_eq!(int(c.cmd(&["DEL", "k:000", "k:001"])), 2);
    assert_eq!(c.cmd(&["SET", "small", "x"]), simple("OK"));
    // One queued under the bound is refused at EXEC once the bound is passed, as in
    // Redis 7: the transaction is discarded because of the OOM.
    assert_eq!(c.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(c.cmd(&["SET", "more2", "x"]), simple("QUEUED"));
    let mut admin = Client::connect(r.addr);
    config_set(&mut admin, "maxmemory", "1");
    assert!(is_err(
        &c.cmd(&["EXEC"]),
        &format!("EXECABORT Transaction discarded because of: {oom}")
    ));
    assert_eq!(evicted(&mut c), 0);
    assert_eq!(int(c.cmd(&["DBSIZE"])), 20);
    r.stop();
}

#[test]
fn evictions_publish_the_evicted_event_and_count_in_info() {
    let (_d, r, mut c) = start();
    config_set(&mut c, "notify-keyspace-events", "Ee");
    let mut sub = Client::connect(r.addr);
    sub.send(&[b"SUBSCRIBE", b"__keyevent@0__:evicted"]);
    assert!(matches!(sub.read(), Some(F::Array(_))));
    fill(&mut c, "k:", 30, |_| None);
    config_set(&mut c, "maxmemory-policy", "allkeys-random");
    let max = used(&mut c) / 2;
    config_set(&mut c, "maxmemory", &max.to_string());
    // Evicted before the next command runs or by the background task, whichever first.
    let since = Instant::now();
    while used(&mut c) > max {
        assert!(since.elapsed() < GUARD, "never evicted down to the bound");
        std::thread::sleep(Duration::from_millis(10));
    }
    let ev = evicted(&mut c) as usize;
    assert!(ev >= 10, "{ev} evicted");
    assert_eq!(int(c.cmd(&["DBSIZE"])) as usize, 30 - ev);
    let mut keys = std::collections::HashSet::new();
    for _ in 0..ev {
        let Some(F::Array(m)) = sub.read() else {
            panic!("no event")
        };
        assert_eq!(m[1], bulk("__keyevent@0__:evicted"));
        let F::BulkString(k) = &m[2] else {
            panic!("{m:?}")
        };
        let k = String::from_utf8(k.to_vec()).unwrap();
        assert!(!exists(&mut c, &k), "{k} announced evicted but there");
        keys.insert(k);
    }
    assert_eq!(keys.len(), ev, "each evicted key announced once");
    r.stop();
}

#[test]
fn object_freq_answers_under_lfu_and_idletime_otherwise() {
    let (_d, r, mut c) = start();
    config_set(&mut c, "lfu-log-factor", "0");
    config_set(&mut c, "lfu-decay-time", "0");
    assert_eq!(c.cmd(&["SET", "k", "v"]), simple("OK"));
    assert!(int(c.cmd(&["OBJECT", "IDLETIME", "k"])) >= 0);
    assert!(is_err(
        &c.cmd(&["OBJECT", "FREQ", "k"]),
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked."
    ));
    config_set(&mut c, "maxmemory-policy", "allkeys-lfu");
    assert!(is_err(
        &c.cmd(&["OBJECT", "IDLETIME", "k"]),
        "ERR An LFU maxmemory policy is selected, idle time not tracked."
    ));
    let f = int(c.cmd(&["OBJECT", "FREQ", "k"]));
    // OBJECT, TTL, TYPE and EXISTS are not accesses; GET and TOUCH are.
    for cmd in ["TTL", "TYPE", "EXISTS"] {
        c.cmd(&[cmd, "k"]);
    }
    assert_eq!(int(c.cmd(&["OBJECT", "FREQ", "k"])), f);
    c.cmd(&["GET", "k"]);
    c.cmd(&["TOUCH", "k"]);
    assert_eq!(int(c.cmd(&["OBJECT", "FREQ", "k"])), f + 2);
    assert_eq!(c.cmd(&["OBJECT", "FREQ", "missing"]), F::Null);
    // Back to LRU: the idle time shows again.
    config_set(&mut c, "maxmemory-policy", "volatile-lru");
    assert!(int(c.cmd(&["OBJECT", "IDLETIME", "k"])) >= 0);
    r.stop();
}

#[test]
fn candidates_left_from_before_a_flush_or_another_policy_do_not_refuse_writes() {
    let (_d, r, mut c) = start();
    // Evictions under allkeys-lfu leave candidates in the pool, scored by frequency.
    fill(&mut c, "a:", 40, |_| None);
    bound_here(&mut c, "allkeys-lfu");
    fill(&mut c, "b:", 20, |_| None);
    assert!(evicted(&mut c) > 0);
    assert_eq!(c.cmd(&["FLUSHALL"]), simple("OK"));
    config_set(&mut c, "maxmemory", "0");
    fill(&mut c, "t:", 40, |_| Some(100_000));
    // Under volatile-lru, with keys that all have an expiry, every write evicts one.
    bound_here(&mut c, "volatile-lru");
    for i in 0..20 {
        let reply = set(&mut c, &format!("u:{i:03}"), Some(100_000));
        assert_eq!(reply, simple("OK"), "write {i}");
    }
    r.stop();
}

#[test]
fn restore_sets_the_idle_time_and_frequency_it_is_given() {
    let (_d, r, mut c) = start();
    assert_eq!(c.cmd(&["SET", "k", "v"]), simple("OK"));
    // `RESTORE k 0 <k's payload> REPLACE <opts>`.
    let restore = |c: &mut Client, opts: &[&str]| {
        let F::BulkString(p) = c.cmd(&["DUMP", "k"]) else {
            panic!("DUMP")
        };
        let mut args: Vec<&[u8]> = vec![b"RESTORE", b"k", b"0", &p, b"REPLACE"];
        args.extend(opts.iter().map(|o| o.as_bytes()));
        c.send(&args);
        c.read().expect("a reply")
    };
    assert_eq!(restore(&mut c, &["IDLETIME", "1000"]), simple("OK"));
    let idle = int(c.cmd(&["OBJECT", "IDLETIME", "k"]));
    assert!((1000..1010).contains(&idle), "{idle}");
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    assert!(
        int(c.cmd(&["OBJECT", "IDLETIME", "k"])) < 1000,
        "GET is an access"
    );
    config_set(&mut c, "maxmemory-policy", "allkeys-lfu");
    assert_eq!(restore(&mut c, &["FREQ", "100"]), simple("OK"));
    assert_eq!(int(c.cmd(&["OBJECT", "FREQ", "k"])), 100);
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    assert!(is_err(
        &restore(&mut c, &["FREQ", "256"]),
        "ERR Invalid FREQ value, must be >= 0 and <= 255"
    ));
    assert!(is_err(
        &restore(&mut c, &["IDLETIME", "-1"]),
        "ERR Invalid IDLETIME value, must be >= 0"
    ));
    r.stop();
}
