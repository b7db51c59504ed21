//! Pub/sub and keyspace notifications against a running server: delivery, the
//! subscribed state, cleanup on RESET / CLIENT KILL / disconnect, a subscriber that never
//! reads, hostile patterns, and the events of writes and expiries.

mod common;

use common::client::{bulk, is_err, Client};
use common::Running;
use halflife_server::Config;
use redis_protocol::resp2::types::BytesFrame as F;
use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

fn config() -> Config {
    Config {
        tcp: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..Config::default()
    }
}

fn arr(items: &[F]) -> F {
    F::Array(items.to_vec())
}

fn int(i: i64) -> F {
    F::Integer(i)
}

/// `[kind, a, b]` of bulk strings, as a message or confirmation reads.
fn msg(kind: &str, a: &str, b: &str) -> F {
    arr(&[bulk(kind), bulk(a), bulk(b)])
}

fn pmsg(pat: &str, ch: &str, m: &str) -> F {
    arr(&[bulk("pmessage"), bulk(pat), bulk(ch), bulk(m)])
}

/// Waits (by asking the server, not by sleeping a fixed time) until `PUBSUB NUMSUB ch`
/// says `n`: a subscription made on another connection is in place.
fn numsub(c: &mut Client, ch: &str) -> i64 {
    match c.cmd(&["PUBSUB", "NUMSUB", ch]) {
        F::Array(v) => match &v[1] {
            F::Integer(n) => *n,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn messages_reach_subscribers_and_the_subscribed_state_is_redis_s() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut sub = Client::connect(srv.addr);
    let mut publ = Client::connect(srv.addr);
    sub.send(&[b"SUBSCRIBE", b"a", b"b"]);
    assert_eq!(
        sub.read().unwrap(),
        arr(&[bulk("subscribe"), bulk("a"), int(1)])
    );
    assert_eq!(
        sub.read().unwrap(),
        arr(&[bulk("subscribe"), bulk("b"), int(2)])
    );
    sub.send(&[b"PSUBSCRIBE", b"n*"]);
    assert_eq!(
        sub.read().unwrap(),
        arr(&[bulk("psubscribe"), bulk("n*"), int(3)])
    );
    assert_eq!(publ.cmd(&["PUBLISH", "a", "hello"]), int(1));
    assert_eq!(sub.read().unwrap(), msg("message", "a", "hello"));
    assert_eq!(publ.cmd(&["PUBLISH", "news", "x"]), int(1));
    assert_eq!(sub.read().unwrap(), pmsg("n*", "news", "x"));
    assert_eq!(publ.cmd(&["PUBLISH", "zz", "x"]), int(0));
    // RESP2 subscribed state: only (un)subscribing, PING, QUIT and RESET.
    assert!(is_err(&sub.cmd(&["GET", "k"]), "ERR Can't execute 'get'"));
    assert_eq!(sub.cmd(&["PING"]), arr(&[bulk("pong"), bulk("")]));
    assert_eq!(
        publ.cmd(&["PUBSUB", "CHANNELS"]),
        publ.cmd(&["PUBSUB", "CHANNELS", "*"])
    );
    assert_eq!(publ.cmd(&["PUBSUB", "NUMPAT"]), int(1));
    // Unsubscribing from everything, reply awaited: nobody gets the next message.
    sub.send(&[b"UNSUBSCRIBE"]);
    sub.read().unwrap();
    sub.read().unwrap();
    assert_eq!(numsub(&mut publ, "a"), 0);
    assert_eq!(publ.cmd(&["PUBLISH", "a", "late"]), int(0));
    sub.send(&[b"PUNSUBSCRIBE"]);
    assert_eq!(
        sub.read().unwrap(),
        arr(&[bulk("punsubscribe"), bulk("n*"), int(0)])
    );
    // Out of the subscribed state: commands run again.
    assert_eq!(sub.cmd(&["GET", "k"]), F::Null);
    srv.stop();
}

#[test]
fn reset_kill_and_disconnect_leave_no_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut admin = Client::connect(srv.addr);
    let mut a = Client::connect(srv.addr);
    a.cmd(&["SUBSCRIBE", "c"]);
    assert_eq!(a.cmd(&["RESET"]), F::SimpleString("RESET".into()));
    assert_eq!(numsub(&mut admin, "c"), 0);
    // CLIENT KILL TYPE pubsub closes subscribers only.
    let mut b = Client::connect(srv.addr);
    b.cmd(&["SUBSCRIBE", "c"]);
    let F::BulkString(list) = admin.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST is a bulk string in RESP2")
    };
    assert!(String::from_utf8_lossy(&list).contains("flags=P"));
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]), int(1));
    assert!(b.read().is_none());
    assert_eq!(numsub(&mut admin, "c"), 0);
    // A subscriber that disconnects is forgotten.
    {
        let mut c = Client::connect(srv.addr);
        c.cmd(&["SUBSCRIBE", "c"]);
        assert_eq!(numsub(&mut admin, "c"), 1);
    }
    let mut waited = 0;
    while numsub(&mut admin, "c") != 0 {
        // The server notices the close when its read returns; ask again until it has.
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
        assert!(waited < 3000, "the closed subscriber is never forgotten");
    }
    srv.stop();
}

#[test]
fn resp3_clients_get_push_frames_and_may_run_anything() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    use std::io::Write;
    s.write_all(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\nc\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
        .unwrap();
    let mut got = Vec::new();
    let want: &[u8] = b">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n_\r\n";
    while !got.windows(want.len()).any(|w| w == want) {
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let mut p = Client::connect(srv.addr);
    assert_eq!(p.cmd(&["PUBLISH", "c", "m"]), int(1));
    let push: &[u8] = b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n";
    got.clear();
    while !got.windows(push.len()).any(|w| w == push) {
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    srv.stop();
}

#[test]
fn a_subscriber_that_never_reads_is_closed_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut admin = Client::connect(srv.addr);
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 256kb 60"
        ]),
        F::SimpleString("OK".into())
    );
    let mut slow = Client::connect(srv.addr);
    slow.cmd(&["SUBSCRIBE", "c"]);
    // It never reads again: the socket's buffers fill, then its mailbox, then it is cut.
    let big = "x".repeat(64 << 10);
    let mut delivered_to_it = 0;
    for _ in 0..2000 {
        match admin.cmd(&["PUBLISH", "c", &big]) {
            F::Integer(1) => delivered_to_it += 1,
            F::Integer(0) => break,
            other => panic!("{other:?}"),
        }
    }
    // At most the socket buffers and the limit's worth were taken for it.
    assert!(delivered_to_it < 2000, "never cut off");
    // Its connection closes and forgets it; ask until it has.
    let mut asked = 0;
    while numsub(&mut admin, "c") != 0 {
        std::thread::sleep(Duration::from_millis(10));
        asked += 1;
        assert!(asked < 3000, "the cut-off subscriber is never forgotten");
    }
    assert_eq!(admin.cmd(&["PING"]), F::SimpleString("PONG".into()));
    srv.stop();
}

#[test]
fn hostile_patterns_and_names_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut a = Client::connect(srv.addr);
    let stars = "*a".repeat(5000) + "*";
    a.cmd(&["PSUBSCRIBE", &stars]);
    let mut p = Client::connect(srv.addr);
    let channel = "a".repeat(6000) + "b";
    // Matching is linear in the pattern times the channel at worst: this answers.
    assert_eq!(p.cmd(&["PUBLISH", &channel, "m"]), int(1));
    assert_eq!(a.read().unwrap(), pmsg(&stars, &channel, "m"));
    // More than the per-connection bound of names is refused, the connection stays.
    let huge = "c".repeat(9 << 20);
    assert!(is_err(
        &a.cmd(&["SUBSCRIBE", &huge, &huge]),
        "ERR subscriptions of more than"
    ));
    assert_eq!(a.cmd(&["PING"]), arr(&[bulk("pong"), bulk("")]));
    assert_eq!(p.cmd(&["PING"]), F::SimpleString("PONG".into()));
    srv.stop();
}

#[test]
fn writes_and_expiries_publish_keyspace_events() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut sub = Client::connect(srv.addr);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]),
        arr(&[bulk("notify-keyspace-events"), bulk("AKE")])
    );
    sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    c.cmd(&["SET", "s", "1"]);
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:set", "s")
    );
    c.cmd(&["HSET", "h", "f", "v"]);
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:hset", "h")
    );
    c.cmd(&["LPUSH", "l", "a"]);
    c.cmd(&["RPOP", "l"]);
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:lpush", "l")
    );
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:rpop", "l")
    );
    // The list emptied: it is deleted.
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:del", "l")
    );
    // A string read after its expiry: `expired`, once.
    c.cmd(&["SET", "t", "1", "PX", "50"]);
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:set", "t")
    );
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:expire", "t")
    );
    while c.cmd(&["EXISTS", "t"]) != int(0) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:expired", "t")
    );
    // One that nobody reads: the background sweep deletes and announces it.
    c.cmd(&["SET", "u", "1", "PX", "50"]);
    sub.read().unwrap();
    sub.read().unwrap();
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:expired", "u")
    );
    c.cmd(&["EXISTS", "t", "u"]);
    // A pipeline of combined writes publishes after its write, each command's event.
    c.send(&[b"SADD", b"st", b"a"]);
    c.send(&[b"SADD", b"st", b"b"]);
    c.read().unwrap();
    c.read().unwrap();
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:sadd", "st")
    );
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:sadd", "st")
    );
    // `new` once per created key.
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "En"]);
    c.cmd(&["SET", "n1", "a"]);
    c.cmd(&["SET", "n1", "b"]);
    c.cmd(&["SET", "n2", "a"]);
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:new", "n1")
    );
    assert_eq!(
        sub.read().unwrap(),
        pmsg("__keyevent@0__:*", "__keyevent@0__:new", "n2")
    );
    srv.stop();
}

#[test]
fn read_misses_publish_keymiss_and_count_in_info() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut sub = Client::connect(srv.addr);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Em"]);
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:keymiss"]);
    c.cmd(&["HSET", "h", "f", "v"]);
    assert_eq!(c.cmd(&["GET", "nokey"]), F::Null);
    c.cmd(&["HGET", "h", "f"]); // a hit: no event
    c.cmd(&["HGET", "nohash", "f"]);
    c.cmd(&["MGET", "h", "nokey2"]);
    c.cmd(&["SET", "wrote", "1"]); // a write's lookup is no miss
    for key in ["nokey", "nohash", "nokey2"] {
        assert_eq!(
            sub.read().unwrap(),
            msg("message", "__keyevent@0__:keymiss", key)
        );
    }
    // Nothing else was published: the next message is the one sent now.
    c.cmd(&["GET", "last"]);
    assert_eq!(
        sub.read().unwrap(),
        msg("message", "__keyevent@0__:keymiss", "last")
    );
    let F::BulkString(info) = c.cmd(&["INFO", "stats"]) else {
        panic!("INFO is a bulk string")
    };
    let info = String::from_utf8(info.to_vec()).unwrap();
    // GET nokey, HGET nohash, MGET's nokey2, GET last; the hits: HGET h f and MGET's h.
    assert!(info.contains("keyspace_misses:4\r\n"), "{info}");
    assert!(info.contains("keyspace_hits:2\r\n"), "{info}");
    srv.stop();
}

#[test]
fn geo_and_sort_writes_publish_redis_s_events() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut c = Client::connect(srv.addr);
    let mut sub = Client::connect(srv.addr);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    let mut event = |name: &str, key: &str| {
        assert_eq!(
            sub.read().unwrap(),
            pmsg("__keyevent@0__:*", &format!("__keyevent@0__:{name}"), key)
        );
    };
    // GEOADD is a ZADD of geohash scores, and says so.
    c.cmd(&["GEOADD", "g", "13.361389", "38.115556", "Palermo"]);
    event("zadd", "g");
    c.cmd(&[
        "GEOSEARCHSTORE",
        "gs",
        "g",
        "FROMLONLAT",
        "13",
        "38",
        "BYRADIUS",
        "200",
        "km",
    ]);
    event("geosearchstore", "gs");
    c.cmd(&["GEORADIUS", "g", "13", "38", "200", "km", "STORE", "gr"]);
    event("georadiusstore", "gr");
    // An empty result deletes the destination.
    c.cmd(&["GEORADIUS", "g", "0", "0", "1", "m", "STORE", "gr"]);
    event("del", "gr");
    c.cmd(&["RPUSH", "l", "2", "1"]);
    event("rpush", "l");
    assert_eq!(c.cmd(&["SORT", "l", "STORE", "sorted"]), int(2));
    event("sortstore", "sorted");
    assert_eq!(c.cmd(&["SORT", "missing", "STORE", "sorted"]), int(0));
    event("del", "sorted");
    // Reads send nothing: the next event is the next write's.
    c.cmd(&["SORT_RO", "l"]);
    c.cmd(&[
        "GEOSEARCH",
        "g",
        "FROMMEMBER",
        "Palermo",
        "BYBOX",
        "1",
        "1",
        "km",
    ]);
    c.cmd(&["SET", "done", "1"]);
    event("set", "done");
    srv.stop();
}

/// Whether client `id` is connected, from `CLIENT LIST` on `admin`.
fn connected(admin: &mut Client, id: i64) -> bool {
    match admin.cmd(&["CLIENT", "LIST"]) {
        F::BulkString(b) => String::from_utf8_lossy(&b)
            .lines()
            .any(|l| l.starts_with(&format!("id={id} "))),
        other => panic!("{other:?}"),
    }
}

fn client_id(c: &mut Client) -> i64 {
    match c.cmd(&["CLIENT", "ID"]) {
        F::Integer(n) => n,
        other => panic!("{other:?}"),
    }
}

/// Polls (a bounded number of times, the admin connection staying busy) until client `id`
/// is gone.
fn wait_closed(admin: &mut Client, id: i64) {
    for _ in 0..300 {
        if !connected(admin, id) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("client {id} is still connected 15 s past its timeout");
}

#[test]
fn timeout_closes_an_idle_client_and_spares_a_subscriber() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut admin = Client::connect(srv.addr);
    let mut sub = Client::connect(srv.addr);
    let sub_id = client_id(&mut sub);
    sub.send(&[b"SUBSCRIBE", b"c"]);
    assert_eq!(
        sub.read().unwrap(),
        arr(&[bulk("subscribe"), bulk("c"), int(1)])
    );
    let mut idle = Client::connect(srv.addr);
    let idle_id = client_id(&mut idle);
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "timeout", "1"]),
        F::SimpleString("OK".into())
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "GET", "timeout"]),
        arr(&[bulk("timeout"), bulk("1")])
    );
    wait_closed(&mut admin, idle_id);
    assert_eq!(idle.read(), None, "the server closed the idle connection");
    // A client idle since after the first was closed is closed too: the subscriber has
    // been idle longer than the timeout twice over by then, and is still there.
    let mut later = Client::connect(srv.addr);
    let later_id = client_id(&mut later);
    wait_closed(&mut admin, later_id);
    assert!(connected(&mut admin, sub_id));
    assert_eq!(admin.cmd(&["PUBLISH", "c", "m"]), int(1));
    assert_eq!(sub.read().unwrap(), msg("message", "c", "m"));
    admin.cmd(&["CONFIG", "SET", "timeout", "0"]);
    srv.stop();
}

/// The next line a `MONITOR` connection received, as text.
fn monitored(m: &mut Client) -> String {
    match m.read().expect("a monitor line") {
        F::SimpleString(s) => String::from_utf8(s.to_vec()).unwrap(),
        other => panic!("not a monitor line: {other:?}"),
    }
}

#[test]
fn monitor_shows_each_command_as_redis_formats_it_in_the_order_they_ran() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Running::start(dir.path(), config());
    let mut m = Client::connect(srv.addr);
    let mut c = Client::connect(srv.addr);
    assert_eq!(m.cmd(&["MONITOR"]), F::SimpleString("OK".into()));

    // A command after it ran (so SELECT shows its new database): time, database,
    // client, each argument quoted and escaped as Redis's sdscatrepr does.
    c.cmd(&["SELECT", "2"]);
    c.send(&[&b"SET"[..], b"k", b"a \"b\"\n\x01"]);
    c.read();
    let select = monitored(&mut m);
    let (time, rest) = select.split_once(' ').unwrap();
    let (secs, micros) = time.split_once('.').unwrap();
    assert!(
        secs.parse::<u64>().unwrap() > 1_600_000_000 && micros.len() == 6,
        "{select}"
    );
    let (client, args) = rest
        .strip_prefix("[2 ")
        .and_then(|r| r.split_once("] "))
        .unwrap_or_else(|| panic!("{select}"));
    assert!(client.starts_with("127.0.0.1:"), "{select}");
    assert_eq!(args, r#""SELECT" "2""#);
    let set = monitored(&mut m);
    assert!(
        set.ends_with(&format!(r#"[2 {client}] "SET" "k" "a \"b\"\n\x01""#)),
        "{set}"
    );

    // A script before the commands it runs, which show as `lua`.
    c.cmd(&["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "s"]);
    let eval = monitored(&mut m);
    assert!(
        eval.ends_with(r#""EVAL" "return redis.call('set', KEYS[1], 'v')" "1" "s""#),
        "{eval}"
    );
    let call = monitored(&mut m);
    assert!(call.ends_with(r#"[2 lua] "set" "s" "v""#), "{call}");

    // A transaction: MULTI, its commands when EXEC runs them, then EXEC; a refused
    // command shows nothing, an aborted EXEC still shows.
    c.cmd(&["MULTI"]);
    c.cmd(&["INCR", "n"]);
    assert!(is_err(&c.cmd(&["NOSUCH"]), "ERR unknown command"));
    assert!(is_err(&c.cmd(&["EXEC"]), "EXECABORT"));
    assert!(monitored(&mut m).ends_with(r#""MULTI""#));
    assert!(monitored(&mut m).ends_with(r#""EXEC""#));
    c.cmd(&["MULTI"]);
    c.cmd(&["INCR", "n"]);
    c.cmd(&["EXEC"]);
    assert!(monitored(&mut m).ends_with(r#""MULTI""#));
    assert!(monitored(&mut m).ends_with(r#""INCR" "n""#));
    assert!(monitored(&mut m).ends_with(r#""EXEC""#));

    // Passwords are redacted; administrative commands never show.
    assert!(is_err(&c.cmd(&["AUTH", "nobody", "secret"]), ""));
    let auth = monitored(&mut m);
    assert!(
        auth.ends_with(r#""AUTH" "(redacted)" "(redacted)""#),
        "{auth}"
    );
    c.cmd(&["CONFIG", "SET", "slowlog-max-len", "10"]);
    c.cmd(&["PING"]);
    assert!(
        monitored(&mut m).ends_with(r#""PING""#),
        "CONFIG SET is not shown"
    );

    // RESET ends it: a later command reaches it no more (its next read is PING's reply).
    assert_eq!(m.cmd(&["RESET"]), F::SimpleString("RESET".into()));
    c.cmd(&["SET", "after", "1"]);
    assert_eq!(m.cmd(&["PING"]), F::SimpleString("PONG".into()));

    // Inside MULTI it is refused when EXEC runs it, as Redis refuses a client that
    // cannot block.
    c.cmd(&["MULTI"]);
    c.cmd(&["MONITOR"]);
    match c.cmd(&["EXEC"]) {
        F::Array(v) => assert!(is_err(&v[0], "ERR MONITOR isn't allowed"), "{v:?}"),
        other => panic!("{other:?}"),
    }
}
