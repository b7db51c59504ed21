//! The request decoder under libFuzzer: any bytes, under three sets of limits, fed whole
//! and in chunks of a size the input chooses, must decode to the same commands and the
//! same error, without a panic, and with the buffer holding no more than one request.
//!
//! `cargo +nightly fuzz run decoder -- -jobs=1 -max_total_time=300` from `crates/server`.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;

// The decoder's source itself, rather than the `halflife-server` crate: the target then
// builds without the engine.
#[allow(dead_code)]
#[path = "../../src/protocol.rs"]
mod protocol;

use protocol::{Decoder, Limits, ProtocolError, MAX_INLINE};

type Decoded = (Vec<Vec<Bytes>>, Option<ProtocolError>);

fn decode(input: &[u8], chunk: usize, limits: &Limits) -> Decoded {
    let mut d = Decoder::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match d.next(&mut buf, limits) {
                Ok(Some(c)) => {
                    assert!(!c.is_empty() && c.len() <= limits.max_args);
                    out.push(c)
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
        assert!(buf.len() <= limits.max_request.max(MAX_INLINE) + 64);
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    let [a, b, input @ ..] = data else {
        return;
    };
    let limits = match a % 3 {
        0 => Limits {
            max_args: 8,
            max_bulk: 64,
            max_request: 256,
            unauthenticated: false,
        },
        1 => Limits::new(512 << 20, 1 << 30, false),
        _ => Limits::new(512 << 20, 1 << 30, true),
    };
    let whole = decode(input, input.len().max(1), &limits);
    let chunked = decode(input, *b as usize % 17 + 1, &limits);
    assert_eq!(whole, chunked);
});
