//! `RESTORE`'s payload reader under libFuzzer: a payload from the network must be refused
//! or read without a panic, and what it reads must be what a payload written from those
//! entries holds. The input is read as it is (the checksum almost never matches) and
//! sealed with a valid trailer (so the grammar behind the checksum is reached).
//!
//! `cargo +nightly fuzz run dump_payload -- -jobs=1 -max_total_time=300` from
//! `crates/server`.

#![no_main]

use libfuzzer_sys::fuzz_target;

// The reader's source itself, with the record types it names, rather than the
// `halflife-server` crate: the target then builds without the engine.
#[allow(dead_code)]
#[path = "../../src/record.rs"]
mod record;
#[allow(dead_code)]
#[path = "../../src/dump/payload.rs"]
mod payload;

fn check(p: &[u8]) {
    let Ok(parsed) = payload::parse(p) else {
        return;
    };
    // Written again from what was read, the payload is the same bytes.
    let mut again = vec![p[0]];
    let mut entries = 0usize;
    let read = match &parsed {
        payload::Parsed::String(v) => {
            again.extend_from_slice(v);
            Ok(())
        }
        payload::Parsed::Collection {
            size, head, state, ..
        } => {
            again.extend_from_slice(&size.to_be_bytes());
            again.extend_from_slice(&head.to_be_bytes());
            again.extend_from_slice(state);
            parsed.entries(|tag, member, value| {
                entries += 1;
                payload::push_entry(&mut again, tag, member, value);
            })
        }
    };
    if read.is_ok() {
        assert!(entries <= p.len() / payload::ENTRY_OVERHEAD);
        payload::seal(&mut again);
        assert_eq!(again, p);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut sealed = data.to_vec();
    payload::seal(&mut sealed);
    check(&sealed);
});
