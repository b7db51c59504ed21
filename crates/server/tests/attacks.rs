//! Hostile clients against a running server (in-process, on an ephemeral port, as in
//! `server.rs`): each attack must end in a refusal or in that connection being closed, and
//! afterwards the server must still answer `PING` on a fresh connection.
//!
//! No test waits for time to pass: each reads until the server answers or closes, with a
//! long socket timeout only as a guard against a hang.

mod common;
use common::Running;
use halflife_server::{AppendFsync, Config};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Guards a read or a write against a server that hangs; never reached when it works.
const GUARD: Duration = Duration::from_secs(60);
const PASSWORD: &str = "sesame";

impl Running {
    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(GUARD)).unwrap();
        s.set_write_timeout(Some(GUARD)).unwrap();
        s
    }

    /// A connection that has authenticated.
    fn authed(&self) -> TcpStream {
        let mut s = self.connect();
        s.write_all(&frame(&[b"AUTH", PASSWORD.as_bytes()]))
            .unwrap();
        assert_eq!(read_line(&mut s), "+OK");
        s
    }

    /// The server still serves: `PING` on a fresh connection (after `AUTH`: with a
    /// password set, Redis answers `PING` with `-NOAUTH` before it).
    fn assert_alive(&self) {
        let mut s = self.authed();
        s.write_all(b"PING\r\n").unwrap();
        assert_eq!(read_line(&mut s), "+PONG");
    }
}

fn frame(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One reply line (without its CRLF), read byte by byte so that nothing after it is taken.
fn read_line(s: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut b = [0u8];
    while !line.ends_with(b"\r\n") {
        match s.read(&mut b) {
            Ok(1) => line.push(b[0]),
            Ok(_) => panic!(
                "closed before a full line: {:?}",
                String::from_utf8_lossy(&line)
            ),
            Err(e) => panic!("reading a reply: {e}"),
        }
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).unwrap()
}

/// Reads to the end: the server closed the connection (a reset counts as closed too).
fn assert_closed(s: &mut TcpStream) {
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest)),
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
    }
}

/// Sends `request`, expects the error line `want` and the connection closed after it.
///
/// The server answers as soon as the bad header arrives and closes without reading the
/// rest, so the rest may not go out (broken pipe, reset): a second thread sends while
/// this one reads, and a failed send is what is expected then, not an error.
fn refused(srv: &Running, mut s: TcpStream, request: &[u8], want: &str) {
    let mut w = s.try_clone().unwrap();
    let request = request.to_vec();
    let sender = std::thread::spawn(move || match w.write_all(&request) {
        Ok(()) => {}
        Err(e) => assert!(
            matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset),
            "{e}"
        ),
    });
    assert_eq!(read_line(&mut s), want);
    assert_closed(&mut s);
    sender.join().unwrap();
    srv.assert_alive();
}

fn config() -> Config {
    Config {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        appendfsync: AppendFsync::No,
        requirepass: Some(PASSWORD.into()),
        ..Config::default()
    }
}

#[test]
fn malformed_and_oversized_requests_close_only_their_connection() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let expected_dollar = "-ERR Protocol error: expected '$', got '*'";

    // 300,000 nested one-element arrays (1.2 MB): once overflowed a worker's stack.
    let deep = b"*1\r\n".repeat(300_000);
    refused(&srv, srv.connect(), &deep, expected_dollar);
    refused(&srv, srv.authed(), &deep, expected_dollar);

    // A bulk over proto-max-bulk-len (512 MiB) declared: refused from its header.
    refused(
        &srv,
        srv.authed(),
        b"*1\r\n$536870913\r\n",
        "-ERR Protocol error: invalid bulk length",
    );
    // Before AUTH the same header is over the unauthenticated limit.
    refused(
        &srv,
        srv.connect(),
        b"*2\r\n$4\r\nAUTH\r\n$536870912\r\n",
        "-ERR Protocol error: unauthenticated bulk length",
    );

    // Huge, negative and non-numeric lengths.
    let invalid_mb = "-ERR Protocol error: invalid multibulk length";
    let invalid_bulk = "-ERR Protocol error: invalid bulk length";
    refused(&srv, srv.authed(), b"*2147483647\r\n", invalid_mb);
    refused(
        &srv,
        srv.connect(),
        b"*2147483647\r\n",
        "-ERR Protocol error: unauthenticated multibulk length",
    );
    refused(&srv, srv.authed(), b"*99999999999999999999\r\n", invalid_mb);
    refused(&srv, srv.authed(), b"*abc\r\n", invalid_mb);
    refused(&srv, srv.authed(), b"*1\r\n$-5\r\n", invalid_bulk);
    refused(&srv, srv.authed(), b"*1\r\n$12x\r\n", invalid_bulk);
    refused(
        &srv,
        srv.authed(),
        &[b'*'; 100],
        "-ERR Protocol error: too big mbulk count string",
    );
    refused(
        &srv,
        srv.authed(),
        b"*1\r\n:1\r\n",
        "-ERR Protocol error: expected '$', got ':'",
    );
    refused(
        &srv,
        srv.connect(),
        &vec![b'x'; 70 << 10],
        "-ERR Protocol error: too big inline request",
    );
    // `*-1` and `*0` are empty requests, skipped as Redis does.
    let mut s = srv.authed();
    s.write_all(b"*-1\r\n*0\r\nPING\r\n").unwrap();
    assert_eq!(read_line(&mut s), "+PONG");
    srv.stop();
}

#[test]
fn client_query_buffer_limit_bounds_a_request() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut s = srv.authed();
    s.write_all(&frame(&[b"CONFIG", b"GET", b"client-query-buffer-limit"]))
        .unwrap();
    for want in [
        "*2",
        "$25",
        "client-query-buffer-limit",
        "$10",
        "1073741824",
    ] {
        assert_eq!(read_line(&mut s), want);
    }
    // Redis's least is 1 MiB.
    s.write_all(&frame(&[
        b"CONFIG",
        b"SET",
        b"client-query-buffer-limit",
        b"1000",
    ]))
    .unwrap();
    assert!(read_line(&mut s).starts_with("-ERR CONFIG SET failed"));
    s.write_all(&frame(&[
        b"CONFIG",
        b"SET",
        b"client-query-buffer-limit",
        b"1mb",
    ]))
    .unwrap();
    assert_eq!(read_line(&mut s), "+OK");
    // A bulk of 1 MiB is under proto-max-bulk-len, but the request with its headers is
    // over the query buffer's limit: refused from the header, before any byte of it.
    refused(
        &srv,
        srv.authed(),
        b"*2\r\n$3\r\nGET\r\n$1048576\r\n",
        "-ERR Protocol error: request of more than 1048576 bytes (client-query-buffer-limit)",
    );
    // A request under it is served.
    let value = vec![b'v'; 1000 << 10];
    s.write_all(&frame(&[b"SET", b"k", &value])).unwrap();
    assert_eq!(read_line(&mut s), "+OK");
}

#[test]
fn unauthenticated_clients_get_redis_tighter_limits() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let eleven: Vec<&[u8]> = vec![b"DEL"; 11];
    refused(
        &srv,
        srv.connect(),
        &frame(&eleven),
        "-ERR Protocol error: unauthenticated multibulk length",
    );
    let big = vec![b'v'; (16 << 10) + 1];
    refused(
        &srv,
        srv.connect(),
        &frame(&[b"AUTH", &big]),
        "-ERR Protocol error: unauthenticated bulk length",
    );
    // At the limits exactly, before AUTH: an ordinary refusal, the connection stays.
    let mut s = srv.connect();
    s.write_all(b"PING\r\n").unwrap();
    assert!(read_line(&mut s).starts_with("-NOAUTH"));
    let ten: Vec<&[u8]> = vec![b"DEL"; 10];
    s.write_all(&frame(&ten)).unwrap();
    assert!(read_line(&mut s).starts_with("-NOAUTH"));
    // An AUTH pipelined with a request over those limits: the AUTH runs before the next
    // request is read, so that one is read with the limits of an authenticated client.
    let mut pipeline = frame(&[b"AUTH", PASSWORD.as_bytes()]);
    pipeline.extend(frame(&[b"SET", b"big", &big]));
    pipeline.extend(frame(&eleven));
    s.write_all(&pipeline).unwrap();
    assert_eq!(read_line(&mut s), "+OK");
    assert_eq!(read_line(&mut s), "+OK");
    assert_eq!(read_line(&mut s), ":0");
    srv.assert_alive();
    srv.stop();
}

#[test]
fn client_bytes_in_errors_cannot_break_the_framing() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut s = srv.authed();
    // An unknown command whose name would forge a `+OK` reply if echoed as it is.
    s.write_all(&frame(&[b"FOO\r\n+OK\r\nBAR", b"a\r\nb"]))
        .unwrap();
    assert_eq!(
        read_line(&mut s),
        "-ERR unknown command 'FOO  +OK  BAR', with args beginning with: 'a  b' "
    );
    // A name of 100 KB is echoed cut short.
    let long = vec![b'z'; 100 << 10];
    s.write_all(&frame(&[&long, &long])).unwrap();
    let line = read_line(&mut s);
    assert!(line.len() < 400, "{} bytes", line.len());
    // The connection is still in step: the next reply is the next command's.
    s.write_all(&frame(&[b"PING"])).unwrap();
    assert_eq!(read_line(&mut s), "+PONG");
    srv.assert_alive();
    srv.stop();
}

#[test]
fn scan_count_is_clamped() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut s = srv.authed();
    let mut mset: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
    for i in 0..1500 {
        mset.push(format!("key{i:05}").into_bytes());
        mset.push(b"v".to_vec());
    }
    let args: Vec<&[u8]> = mset.iter().map(|a| &a[..]).collect();
    s.write_all(&frame(&args)).unwrap();
    assert_eq!(read_line(&mut s), "+OK");
    s.write_all(&frame(&[b"SCAN", b"0", b"COUNT", b"1000000000"]))
        .unwrap();
    assert_eq!(read_line(&mut s), "*2");
    assert_eq!(read_line(&mut s), "$1");
    let cursor = read_line(&mut s);
    assert_ne!(cursor, "0", "1500 keys do not fit one clamped page");
    assert_eq!(read_line(&mut s), "*1000");
    for _ in 0..1000 {
        read_line(&mut s);
        read_line(&mut s);
    }
    s.write_all(&frame(&[
        b"SCAN",
        cursor.as_bytes(),
        b"COUNT",
        b"1000000000",
    ]))
    .unwrap();
    assert_eq!(read_line(&mut s), "*2");
    assert_eq!(read_line(&mut s), "$1");
    assert_eq!(read_line(&mut s), "0");
    assert_eq!(read_line(&mut s), "*500");
    srv.assert_alive();
    srv.stop();
}

#[test]
fn a_client_that_never_reads_its_replies_is_closed() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut admin = srv.authed();
    admin
        .write_all(&frame(&[
            b"CONFIG",
            b"SET",
            b"halflife-client-output-limit",
            b"1048576",
        ]))
        .unwrap();
    assert_eq!(read_line(&mut admin), "+OK");
    let value = vec![b'v'; 64 << 10];
    admin.write_all(&frame(&[b"SET", b"big", &value])).unwrap();
    assert_eq!(read_line(&mut admin), "+OK");

    // GETs of 64 KiB, sent and never read: once the socket buffers are full the replies
    // pile up in the server until the limit, and the server closes the connection, which
    // the writer sees as a failed write once the loopback's buffers (megabytes) are full.
    // 10 million GETs (220 MB of requests) only bound the test.
    let mut s = srv.authed();
    let gets = frame(&[b"GET", b"big"]).repeat(100);
    let mut closed = false;
    for _ in 0..100_000 {
        if let Err(e) = s.write_all(&gets) {
            assert!(
                matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset),
                "{e}"
            );
            closed = true;
            break;
        }
    }
    assert!(closed, "the server kept a client that reads nothing");

    // An MGET whose reply alone is over the limit is refused, and the connection stays.
    let keys: Vec<&[u8]> = std::iter::once(&b"MGET"[..])
        .chain(std::iter::repeat_n(&b"big"[..], 32))
        .collect();
    admin.write_all(&frame(&keys)).unwrap();
    assert!(read_line(&mut admin).starts_with("-ERR MGET reply would exceed"));
    admin.write_all(b"PING\r\n").unwrap();
    assert_eq!(read_line(&mut admin), "+PONG");
    srv.assert_alive();
    srv.stop();
}

#[test]
fn keys_and_dbsize_see_live_keys_only() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config());
    let mut s = srv.authed();
    // Values large enough to live in value files, and one already expired.
    let value = vec![b'v'; 64 << 10];
    s.write_all(&frame(&[b"SET", b"a", &value])).unwrap();
    s.write_all(&frame(&[b"SET", b"b", &value])).unwrap();
    s.write_all(&frame(&[b"SET", b"gone", b"x", b"PXAT", b"1"]))
        .unwrap();
    for _ in 0..3 {
        assert_eq!(read_line(&mut s), "+OK");
    }
    s.write_all(&frame(&[b"DBSIZE"])).unwrap();
    assert_eq!(read_line(&mut s), ":2");
    s.write_all(&frame(&[b"KEYS", b"*"])).unwrap();
    assert_eq!(read_line(&mut s), "*2");
    srv.stop();
}
