//! The replication parsers a hostile peer reaches, under libFuzzer: the file transfer
//! decoder, fed whole and in chunks of a size the input chooses, must yield the same events
//! and the same error without a panic, hand on no more bytes than the transfer declared,
//! and keep its buffer to one read; the write-batch decoder, the handshake line reader and
//! the answer and number parsers must not panic and must allocate nothing beyond their
//! input.
//!
//! `cargo +nightly fuzz run repl_wire -- -jobs=1 -max_total_time=300` from `crates/server`.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

// The parsers' source itself, rather than the `halflife-server` crate: the target then
// builds without the engine.
#[allow(dead_code)]
#[path = "../../src/repl_log/wire.rs"]
mod wire;

use wire::{Event, SyncDecoder, WireError};

type Received = (Vec<Event>, Option<WireError>);

fn receive(input: &[u8], chunk: usize) -> Received {
    let mut d = SyncDecoder::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let (mut declared, mut data, mut done) = (0u64, 0u64, false);
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match d.next(&mut buf) {
                Ok(Some(e)) => {
                    match &e {
                        Event::Start { total, .. } => declared = *total,
                        Event::Done => done = true,
                        Event::Data(b) => {
                            data += b.len() as u64;
                            assert!(data <= declared);
                        }
                        _ => {}
                    }
                    // Data events are merged so that the chunking does not show.
                    match (out.last_mut(), e) {
                        (Some(Event::Data(prev)), Event::Data(b)) => {
                            let mut m = BytesMut::from(&prev[..]);
                            m.extend_from_slice(&b);
                            *prev = m.freeze();
                        }
                        (_, e) => out.push(e),
                    }
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
        // Until the end, at most one header is left unparsed (what follows the end is the
        // write stream's, not the decoder's).
        assert!(done || buf.len() <= 2 + wire::MAX_NAME + 8);
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    let [a, input @ ..] = data else {
        return;
    };
    let whole = receive(input, input.len().max(1));
    let chunked = receive(input, *a as usize % 17 + 1);
    assert_eq!(whole, chunked);

    if let Ok(ops) = wire::decode_ops(input) {
        assert!(ops.len() <= input.len() / 5);
        let again = wire::encode_ops(ops.iter().copied());
        assert_eq!(again, input);
    }

    let mut buf = BytesMut::from(input);
    while let Ok(Some(line)) = wire::take_line(&mut buf) {
        assert!(line.len() < wire::MAX_LINE);
        let _ = wire::parse_answer(&String::from_utf8_lossy(&line));
    }

    if let Ok(n) = wire::parse_number(input, "number") {
        assert!(n <= i64::MAX as u64);
        let digits = input.iter().position(|&b| b != b'0').map_or(&b"0"[..], |i| &input[i..]);
        assert_eq!(n.to_string().as_bytes(), digits);
    }
});
