//! The argument and reply helpers every command shares: Redis's canonical integers and
//! floats, case-insensitive words, the common error replies. A leaf (it imports only the
//! protocol and the record layout), so that modules below the commands (the slow log,
//! the scripting host) parse arguments with the same rules as the commands do.

use crate::protocol::Reply;
use crate::record;
use bytes::Bytes;

pub fn wrongtype() -> Reply {
    Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into())
}

pub fn syntax() -> Reply {
    Reply::err("syntax error")
}

pub fn not_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

pub fn not_float() -> Reply {
    Reply::err("value is not a valid float")
}

pub fn wrong_args(cmd: &str) -> Reply {
    Reply::err(format!("wrong number of arguments for '{cmd}' command"))
}

pub fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// A 64-bit integer in Redis's canonical form only: no sign `+`, no leading zeros, no
/// `-0`, no spaces.
pub fn int(b: &[u8]) -> Result<i64, Reply> {
    parse_int(b).ok_or_else(not_integer)
}

pub fn parse_int(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b)
        .ok()
        .filter(|s| !(s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) || *s == "-0"))
        .filter(|s| !s.starts_with("-0") || s.len() == 1)
        .and_then(|s| s.parse().ok())
}

/// A float as Redis's `strtold` reads it: `inf`, `-inf`, decimals and exponents; no NaN,
/// no spaces.
pub fn parse_float(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty()
        || s.starts_with(|c: char| c.is_ascii_whitespace())
        || s.ends_with(|c: char| c.is_ascii_whitespace())
    {
        return None;
    }
    let v: f64 = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        l if l.contains("nan") || l.contains("inf") => return None,
        _ => s.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

pub fn float(b: &[u8]) -> Result<f64, Reply> {
    parse_float(b).ok_or_else(not_float)
}

pub use crate::protocol::fmt_double as fmt_float;

/// A float as `INCRBYFLOAT` prints it (Redis's human-friendly `%.17Lf` trimmed): fixed
/// notation, shortest digits that read back the same.
pub fn fmt_incr_float(v: f64) -> String {
    let s = format!("{v}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A string value's reply.
pub fn bulk(v: Vec<u8>) -> Reply {
    Reply::Bulk(Bytes::from(v))
}

/// Milliseconds since the epoch, as Redis's `mstime`, as a signed number.
pub fn now_ms() -> i64 {
    record::now_ms() as i64
}

/// `b` in double quotes with Redis's escapes (`sdscatrepr`): `\\`, `\"`, `\n`, `\r`, `\t`,
/// `\a`, `\b`, and `\xHH` for any other byte that is not printable ASCII. What `MONITOR`
/// shows of each argument and a rewritten config file of a value that needs quotes.
pub fn repr(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() + 2);
    s.push('"');
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}
