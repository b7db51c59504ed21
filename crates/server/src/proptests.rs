//! Generated adversarial input against the request decoder and the command layer: valid
//! pipelines of RESP and inline commands, and malformed ones (random bytes, truncated
//! frames, huge, negative and non-numeric lengths, deep `*1\r\n` nesting), each fed whole
//! and in random chunks. The decoder must give the same commands and the same error either
//! way, keep its buffers within its limits, and every reply to what it decodes must be one
//! well-formed frame. Case counts are small so that `cargo test` stays quick; the
//! `cargo-fuzz` target in `crates/server/fuzz` runs the decoder for as long as one likes.

use crate::cmd::dispatch;
use crate::config::Config;
use crate::protocol::{Decoder, Limits, ProtocolError, Reply, MAX_INLINE};
use crate::session::Session;
use crate::shared::Shared;
use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, TestRunner};

type Decoded = (Vec<Vec<Bytes>>, Option<ProtocolError>);

/// Decodes `input` fed in pieces of the given sizes (cycled; the rest whole at the end),
/// checking the buffer bounds after every piece.
fn decode_in_chunks(input: &[u8], sizes: &[usize], limits: &Limits) -> Decoded {
    let mut d = Decoder::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < input.len() {
        let n = if sizes.is_empty() {
            input.len()
        } else {
            sizes[i % sizes.len()].max(1)
        };
        i += 1;
        let end = (at + n).min(input.len());
        buf.extend_from_slice(&input[at..end]);
        at = end;
        loop {
            match d.next(&mut buf, limits) {
                Ok(Some(c)) => out.push(c),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
        // What stays buffered is the unparsed part of one request or inline line.
        assert!(
            buf.len() <= limits.max_request.max(MAX_INLINE) + 64,
            "{} bytes buffered",
            buf.len()
        );
    }
    (out, None)
}

fn resp(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A command as an inline line, if its words can be written that way.
fn inline(args: &[Vec<u8>]) -> Option<Vec<u8>> {
    let ok = args.iter().all(|a| {
        !a.is_empty()
            && !a
                .iter()
                .any(|&c| c.is_ascii_whitespace() || matches!(c, 0x0b | b'"' | b'\''))
    }) && args[0][0] != b'*';
    ok.then(|| {
        let mut line = args.join(&b' ');
        line.extend_from_slice(b"\r\n");
        line
    })
}

fn word() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..24),
        prop::sample::select(vec![
            b"GET".to_vec(),
            b"SET".to_vec(),
            b"k".to_vec(),
            b"\r\n".to_vec(),
            b"*1".to_vec(),
            b"$3".to_vec(),
        ]),
    ]
}

fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(word(), 1..6)
}

/// Pieces of malformed input, glued at random.
fn hostile() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..16),
        prop::sample::select(vec![
            b"*".to_vec(),
            b"$".to_vec(),
            b"\r\n".to_vec(),
            b"\n".to_vec(),
            b"*1\r\n".to_vec(),
            b"*-1\r\n".to_vec(),
            b"$-1\r\n".to_vec(),
            b"*2147483647\r\n".to_vec(),
            b"$536870912\r\n".to_vec(),
            b"*99999999999999999999\r\n".to_vec(),
            b"$x\r\n".to_vec(),
            b"*1\r\n$4\r\nPING\r\n".to_vec(),
            b"PING\r\n".to_vec(),
            b":1\r\n".to_vec(),
        ]),
        (1usize..3000).prop_map(|n| b"*1\r\n".repeat(n)),
        command().prop_map(|c| {
            // A valid frame cut short.
            let f = resp(&c);
            let cut = f.len() / 2;
            f[..cut].to_vec()
        }),
    ];
    prop::collection::vec(piece, 1..8).prop_map(|p| p.concat())
}

fn sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..40, 0..8)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(PtConfig {
        cases,
        failure_persistence: None,
        ..PtConfig::default()
    })
}

const SMALL: Limits = Limits {
    max_args: 64,
    max_bulk: 4096,
    max_request: 8192,
    unauthenticated: false,
};

#[test]
fn valid_pipelines_decode_the_same_in_any_chunks() {
    let pipeline = prop::collection::vec((command(), any::<bool>()), 1..12);
    runner(256)
        .run(&(pipeline, sizes()), |(cmds, sizes)| {
            let mut input = Vec::new();
            for (c, as_inline) in &cmds {
                match inline(c).filter(|_| *as_inline) {
                    Some(line) => input.extend(line),
                    None => input.extend(resp(c)),
                }
            }
            let want: Vec<Vec<Bytes>> = cmds
                .iter()
                .map(|(c, _)| c.iter().map(|a| Bytes::from(a.clone())).collect())
                .collect();
            let whole = decode_in_chunks(&input, &[], &SMALL);
            prop_assert_eq!(&whole, &(want, None));
            prop_assert_eq!(decode_in_chunks(&input, &sizes, &SMALL), whole);
            // Byte by byte, the worst case for resuming.
            prop_assert_eq!(
                decode_in_chunks(&input, &[1], &SMALL),
                decode_in_chunks(&input, &[], &SMALL)
            );
            Ok(())
        })
        .unwrap();
}

#[test]
fn hostile_input_gives_the_same_commands_and_error_in_any_chunks() {
    let limits = prop::sample::select(vec![
        SMALL,
        Limits::new(512 << 20, 1 << 30, false),
        Limits::new(512 << 20, 1 << 30, true),
    ]);
    runner(512)
        .run(&(hostile(), sizes(), limits), |(input, sizes, limits)| {
            let whole = decode_in_chunks(&input, &[], &limits);
            prop_assert_eq!(decode_in_chunks(&input, &sizes, &limits), whole.clone());
            // Nothing decoded exceeds the limits.
            for c in &whole.0 {
                prop_assert!(c.len() <= limits.max_args);
                prop_assert!(c.iter().all(|a| a.len() <= limits.max_bulk.max(MAX_INLINE)));
            }
            // An error's text is one line.
            if let Some(e) = &whole.1 {
                let mut b = BytesMut::new();
                Reply::err(e.to_string()).encode(2, &mut b);
                prop_assert_eq!(b.iter().filter(|&&c| c == b'\n').count(), 1);
            }
            Ok(())
        })
        .unwrap();
}

/// Every reply encodes as exactly one RESP2 frame: an error carrying a CR or LF from the
/// client's bytes would read as two.
fn one_frame(r: Reply) -> Result<(), TestCaseError> {
    let mut b = BytesMut::new();
    r.encode(2, &mut b);
    let len = b.len();
    match redis_protocol::resp2::decode::decode_bytes_mut(&mut b) {
        Ok(Some((_, used, _))) => prop_assert_eq!(used, len),
        other => prop_assert!(false, "not one frame: {:?}", other.map(|f| f.map(|x| x.1))),
    }
    Ok(())
}

#[test]
fn commands_from_hostile_input_get_well_formed_replies() {
    let t = tempfile::tempdir().unwrap();
    let db = engine::DB::open(t.path(), engine::Options::default()).unwrap();
    let sh = Shared::for_test(db, &Config::default());
    let names = prop::sample::select(vec![
        "GET",
        "SET",
        "MGET",
        "DEL",
        "INCR",
        "APPEND",
        "SCAN",
        "KEYS",
        "DBSIZE",
        "EXPIRE",
        "TTL",
        "CONFIG",
        "CLIENT",
        "HELLO",
        "AUTH",
        "PING",
        "ECHO",
        "NOSUCH\r\n+OK",
        "x\ny",
        "SELECT",
        "ZADD",
        "ZRANGE",
        "ZRANGEBYLEX",
        "ZUNIONSTORE",
        "ZMPOP",
        "ZRANDMEMBER",
        "LMPOP",
    ]);
    let arg = prop_oneof![
        word(),
        prop::sample::select(vec![
            b"0".to_vec(),
            b"-1".to_vec(),
            b"1000000000".to_vec(),
            b"COUNT".to_vec(),
            b"MATCH".to_vec(),
            b"*".to_vec(),
            b"GET".to_vec(),
            b"SETNAME".to_vec(),
            b"\r\n-ERR injected\r\n".to_vec(),
        ]),
    ];
    let cmd = (names, prop::collection::vec(arg, 0..5));
    let stream = prop::collection::vec(
        prop_oneof![
            3 => cmd.prop_map(|(n, mut a)| {
                a.insert(0, n.as_bytes().to_vec());
                resp(&a)
            }),
            1 => hostile(),
        ],
        1..6,
    );
    runner(48)
        .run(&(stream, sizes()), |(pieces, sizes)| {
            let input = pieces.concat();
            let (cmds, err) =
                decode_in_chunks(&input, &sizes, &Limits::new(1 << 20, 1 << 20, false));
            let mut s = Session::new(1);
            for c in cmds {
                // Not the ones that would stop the run or change what the next case sees.
                if c[0].eq_ignore_ascii_case(b"config")
                    && c.len() > 1
                    && !c[1].eq_ignore_ascii_case(b"get")
                {
                    continue;
                }
                let (reply, _) = dispatch::execute(&sh, &mut s, &c);
                s.proto = 2;
                one_frame(reply)?;
            }
            if let Some(e) = err {
                one_frame(Reply::err(e.to_string()))?;
            }
            Ok(())
        })
        .unwrap();
}
