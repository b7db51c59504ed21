//! The wire: requests decoded by [`Decoder`] (an array of bulk strings, or an inline
//! command: a line of words, what `telnet` sends), and replies encoded as RESP2 (here) or
//! RESP3 frames (with `redis-protocol`) depending on what the connection negotiated with
//! `HELLO`.
//!
//! Why the request decoder is our own: it is what anyone who can connect reaches before
//! `AUTH`, and a general RESP decoder is the wrong tool there. `redis-protocol`'s recurses
//! into nested arrays without a depth limit (300,000 `*1\r\n` overflow a worker's stack),
//! and it decodes a buffer from its start on every call, so a large array arriving in many
//! reads costs time quadratic in its size. A request is only ever a flat array of bulk
//! strings, so this one:
//! - checks every header's number against [`Limits`] before it allocates anything, and
//!   grows its buffers only as the bytes arrive, never to a length the client declared;
//! - keeps its place between reads (how many arguments are still expected, the ones read,
//!   the pending bulk's length), so each byte is examined once;
//! - never recurses: an element that is not a bulk string is a protocol error, as in Redis,
//!   so nesting cannot happen.
//!
//! Every error closes the connection after its reply, with Redis's text.

use bytes::{Buf, Bytes, BytesMut};
use redis_protocol::bytes_utils::Str;
use redis_protocol::resp3::types::{BytesFrame as Frame3, FrameMap, VerbatimStringFormat};

/// The Redis version whose command set and replies the server follows (what `INFO`,
/// `HELLO` and a script's `redis.REDIS_VERSION` report); clients gate features on it.
pub const REDIS_VERSION: &str = "7.0.15";

/// Why a connection's input cannot be read as commands; the connection is closed after the
/// error is sent, as Redis does. The texts are Redis's (`networking.c`) where it has one.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    #[error("Protocol error: expected '$', got '{}'", char::from(*.0).escape_default())]
    ExpectedBulk(u8),
    #[error("Protocol error: too big mbulk count string")]
    MultibulkHeaderTooLong,
    #[error("Protocol error: too big bulk count string")]
    BulkHeaderTooLong,
    #[error("Protocol error: bulk string not followed by CRLF")]
    MissingCrlf,
    #[error("Protocol error: too big inline request")]
    InlineTooLong,
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("Protocol error: request of more than {limit} bytes (client-query-buffer-limit)")]
    TooLarge { limit: usize },
}

/// Longest inline command line (Redis: 64 KiB).
pub const MAX_INLINE: usize = 64 << 10;
/// Longest `*<n>\r\n` or `$<n>\r\n` line: a sign and 19 digits fit with room to spare, and a
/// client cannot make the server buffer a header of unbounded length.
const MAX_HEADER: usize = 32;
/// Most arguments in one request (Redis: 1024*1024).
pub const MAX_ARGS: usize = 1024 * 1024;
/// Before `AUTH`, when a password is set (Redis's limits for unauthenticated clients).
pub const UNAUTH_MAX_ARGS: usize = 10;
pub const UNAUTH_MAX_BULK: usize = 16 << 10;
/// Arguments reserved up front for an array, however many it declares (Redis does the
/// same): more room is made only as arguments arrive.
const ARGS_RESERVED: usize = 1024;

/// What one request may hold, checked against each header before anything is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Arguments in an array.
    pub max_args: usize,
    /// Length of one bulk string.
    pub max_bulk: usize,
    /// The whole request, headers and bulks, so that many bulks under `max_bulk` cannot add
    /// up to more.
    pub max_request: usize,
    /// The connection has not authenticated while a password is set: the errors say so.
    pub unauthenticated: bool,
}

impl Limits {
    /// The limits of a connection: `max_bulk` (`proto-max-bulk-len`) bounds one bulk and
    /// `max_request` (`client-query-buffer-limit`) one request; an unauthenticated
    /// connection gets Redis's tighter ones.
    ///
    /// Redis's `client-query-buffer-limit` bounds a connection's query buffer, which may
    /// hold many pipelined requests. Here the buffer holds the unparsed part of one request
    /// and the bytes of the last read after it (the requests before were parsed off its
    /// front), so bounding the request bounds the buffer to the limit plus one read.
    pub fn new(max_bulk: usize, max_request: usize, unauthenticated: bool) -> Limits {
        if unauthenticated {
            Limits {
                max_args: UNAUTH_MAX_ARGS,
                max_bulk: UNAUTH_MAX_BULK.min(max_bulk),
                max_request: max_request.min(UNAUTH_MAX_ARGS * (UNAUTH_MAX_BULK + 2 * MAX_HEADER)),
                unauthenticated,
            }
        } else {
            Limits {
                max_args: MAX_ARGS,
                max_bulk,
                max_request,
                unauthenticated,
            }
        }
    }
}

/// A connection's request decoder: where it is within the request being read.
///
/// The bytes of the connection are in a `BytesMut` the caller owns and appends to; the
/// decoder takes what it has parsed off its front, so the buffer holds only the unparsed
/// part of one request plus whatever the last read brought after it.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Arguments of the current array still to come; 0 between requests.
    remaining: usize,
    /// The arguments read so far.
    args: Vec<Bytes>,
    /// The length of the bulk whose header was read and whose bytes are awaited.
    bulk: Option<usize>,
    /// Bytes of the current request parsed so far, against [`Limits::max_request`].
    consumed: usize,
    /// How far the search for the end of a line at the front of the buffer has got, so that
    /// a line arriving byte by byte is not searched from its start each time.
    scanned: usize,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Whether a request has been started and not finished.
    pub fn in_request(&self) -> bool {
        self.remaining > 0
    }

    /// Takes the next complete command off the front of `buf`: `Ok(None)` if more bytes
    /// are needed (the decoder remembers where it stopped). After an error the connection
    /// must be closed: the decoder's state is not meaningful any more.
    pub fn next(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            if self.remaining == 0 {
                let Some(&first) = buf.first() else {
                    return Ok(None);
                };
                if first != b'*' {
                    match self.inline(buf, limits)? {
                        None => return Ok(None),
                        Some(words) if words.is_empty() => continue,
                        Some(words) => return Ok(Some(words)),
                    }
                }
                let Some(line) = self.header(buf, ProtocolError::MultibulkHeaderTooLong)? else {
                    return Ok(None);
                };
                let n = number(&line[1..]).ok_or(ProtocolError::InvalidMultibulkLength)?;
                if n <= 0 {
                    continue; // `*0` and `*-1` are empty requests, skipped as in Redis
                }
                if n as u64 > limits.max_args as u64 {
                    return Err(if limits.unauthenticated {
                        ProtocolError::UnauthenticatedMultibulkLength
                    } else {
                        ProtocolError::InvalidMultibulkLength
                    });
                }
                self.remaining = n as usize;
                self.args = Vec::with_capacity(self.remaining.min(ARGS_RESERVED));
                self.consumed = line.len();
                continue;
            }
            match self.bulk {
                None => {
                    let Some(&first) = buf.first() else {
                        return Ok(None);
                    };
                    if first != b'$' {
                        return Err(ProtocolError::ExpectedBulk(first));
                    }
                    let Some(line) = self.header(buf, ProtocolError::BulkHeaderTooLong)? else {
                        return Ok(None);
                    };
                    let len = number(&line[1..])
                        .and_then(|n| u64::try_from(n).ok())
                        .ok_or(ProtocolError::InvalidBulkLength)?;
                    if len > limits.max_bulk as u64 {
                        return Err(if limits.unauthenticated {
                            ProtocolError::UnauthenticatedBulkLength
                        } else {
                            ProtocolError::InvalidBulkLength
                        });
                    }
                    let len = len as usize; // <= max_bulk, a usize
                    self.consumed = self.consumed.saturating_add(line.len());
                    if self.consumed.saturating_add(len + 2) > limits.max_request {
                        return Err(ProtocolError::TooLarge {
                            limit: limits.max_request,
                        });
                    }
                    self.bulk = Some(len);
                }
                Some(len) => {
                    if buf.len() < len + 2 {
                        return Ok(None);
                    }
                    if &buf[len..len + 2] != b"\r\n" {
                        return Err(ProtocolError::MissingCrlf);
                    }
                    let arg = buf.split_to(len).freeze();
                    buf.advance(2);
                    self.consumed += len + 2;
                    self.args.push(arg);
                    self.bulk = None;
                    self.remaining -= 1;
                    if self.remaining == 0 {
                        self.consumed = 0;
                        return Ok(Some(std::mem::take(&mut self.args)));
                    }
                }
            }
        }
    }

    /// The index of the `\n` ending the line at the front of `buf`, if it has arrived;
    /// `Err(too_long)` if `max` bytes came without one.
    fn line_end<E>(&mut self, buf: &[u8], max: usize, too_long: E) -> Result<Option<usize>, E> {
        let lim = buf.len().min(max);
        let window = &buf[self.scanned.min(lim)..lim];
        match window.iter().position(|&c| c == b'\n') {
            Some(i) => {
                let end = self.scanned.min(lim) + i;
                self.scanned = 0;
                Ok(Some(end))
            }
            None if buf.len() >= max => Err(too_long),
            None => {
                self.scanned = buf.len();
                Ok(None)
            }
        }
    }

    /// A `*<n>\r\n` or `$<n>\r\n` line off the front of `buf`, without its `\r\n`.
    fn header(
        &mut self,
        buf: &mut BytesMut,
        too_long: ProtocolError,
    ) -> Result<Option<BytesMut>, ProtocolError> {
        let invalid = match too_long {
            ProtocolError::MultibulkHeaderTooLong => ProtocolError::InvalidMultibulkLength,
            _ => ProtocolError::InvalidBulkLength,
        };
        let Some(end) = self.line_end(buf, MAX_HEADER, too_long)? else {
            return Ok(None);
        };
        let mut line = buf.split_to(end + 1);
        if !line.ends_with(b"\r\n") {
            return Err(invalid);
        }
        line.truncate(end - 1);
        Ok(Some(line))
    }

    /// An inline command: one line of words separated by blanks (`\r\n` or `\n` ends it),
    /// quoted as Redis's `sdssplitargs` reads them ([`split_inline`]). `Some(empty)` for a
    /// blank line. The line is bounded by [`MAX_INLINE`] (and the request limit), its words
    /// by the argument limit, counted as they are split.
    fn inline(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let max = MAX_INLINE.min(limits.max_request);
        let Some(end) = self.line_end(buf, max, ProtocolError::InlineTooLong)? else {
            return Ok(None);
        };
        let line = buf.split_to(end + 1).freeze();
        let too_many = if limits.unauthenticated {
            ProtocolError::UnauthenticatedMultibulkLength
        } else {
            ProtocolError::InvalidMultibulkLength
        };
        split_inline(&line, limits.max_args, too_many).map(Some)
    }
}

/// The words of an inline line as Redis's `sdssplitargs` splits them: blanks separate
/// words; `"..."` may hold `\xHH`, `\n`, `\r`, `\t`, `\b`, `\a` and `\<c>` escapes and
/// `'...'` the escape `\'`; a quote may open mid-word, a closing one must be followed by a
/// blank or the end of the line, and an unclosed one is an error. More than `max_args`
/// words is `too_many`, found before more are collected. Unquoted words are slices of
/// `line`; quoted ones are copies. Config files' lines are split by it too
/// ([`crate::conffile::split_args`]).
pub(crate) fn split_inline(
    line: &Bytes,
    max_args: usize,
    too_many: ProtocolError,
) -> Result<Vec<Bytes>, ProtocolError> {
    let blank = |c: u8| c.is_ascii_whitespace() || c == 0x0b;
    let hex = |c: u8| (c as char).to_digit(16);
    let mut words = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && blank(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Ok(words);
        }
        if words.len() == max_args {
            return Err(too_many);
        }
        let start = i;
        // `None` while the word is a plain slice of the line.
        let mut word: Option<Vec<u8>> = None;
        loop {
            match line.get(i).copied() {
                None => break,
                Some(c) if blank(c) => break,
                Some(q @ (b'"' | b'\'')) => {
                    let w = word.get_or_insert_with(|| line[start..i].to_vec());
                    i += 1;
                    loop {
                        let c = *line.get(i).ok_or(ProtocolError::UnbalancedQuotes)?;
                        let next = line.get(i + 1).copied();
                        if c == q {
                            if next.is_some_and(|n| !blank(n)) {
                                return Err(ProtocolError::UnbalancedQuotes);
                            }
                            i += 1;
                            break;
                        }
                        if c == b'\\' && q == b'"' {
                            match (next, line.get(i + 2), line.get(i + 3)) {
                                (Some(b'x'), Some(&h), Some(&l))
                                    if hex(h).is_some() && hex(l).is_some() =>
                                {
                                    w.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                                    i += 4;
                                    continue;
                                }
                                (Some(e), _, _) => {
                                    w.push(match e {
                                        b'n' => b'\n',
                                        b'r' => b'\r',
                                        b't' => b'\t',
                                        b'b' => 0x08,
                                        b'a' => 0x07,
                                        e => e,
                                    });
                                    i += 2;
                                    continue;
                                }
                                (None, _, _) => {}
                            }
                        } else if c == b'\\' && next == Some(b'\'') {
                            w.push(b'\'');
                            i += 2;
                            continue;
                        }
                        w.push(c);
                        i += 1;
                    }
                    // A closing quote ends the word.
                    break;
                }
                Some(c) => {
                    if let Some(w) = word.as_mut() {
                        w.push(c);
                    }
                    i += 1;
                }
            }
        }
        words.push(match word {
            Some(w) => Bytes::from(w),
            None => line.slice(start..i),
        });
    }
}

/// A header's number as Redis's `string2ll` reads it: an optional `-`, then `0` or digits
/// without a leading zero, in range of an `i64`; nothing else (no `+`, no blanks).
fn number(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits {
        [] => return None,
        [b'0'] if !neg => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    let mut n: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = (c - b'0') as i64;
        n = n.checked_mul(10)?;
        n = if neg {
            n.checked_sub(d)?
        } else {
            n.checked_add(d)?
        };
    }
    Some(n)
}

/// `msg` with CR and LF replaced by spaces, as Redis does with every error it formats: an
/// error is one line, and client bytes echoed into it must not end it early (what follows
/// would be read as another reply).
pub fn one_line(msg: &str) -> String {
    msg.replace(['\r', '\n'], " ")
}

/// A reply, independent of the protocol version it will be encoded in.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(&'static str),
    /// The whole error line after `-`, starting with its code (`ERR ...`, `NOAUTH ...`).
    Error(String),
    Int(i64),
    Bulk(Bytes),
    /// Absent value: RESP2's null bulk string, RESP3's null.
    Nil,
    /// Absent array (`LPOP key count` of a missing key, `EXEC` aborted by `WATCH`): RESP2's
    /// null array `*-1`, RESP3's null.
    NilArray,
    Array(Vec<Reply>),
    /// RESP3 map; a flat array of keys and values in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// Text for humans (INFO, CLIENT LIST): RESP3 verbatim string, RESP2 bulk string.
    Text(String),
    /// A score: RESP3 double, RESP2 bulk string in Redis's `%.17g` ([`fmt_double`]).
    Double(f64),
    /// A status line made at run time (a script's `{ok=...}`), one line.
    Status(String),
    /// RESP3 boolean; RESP2 integer 1 or 0.
    Bool(bool),
    /// RESP3 set; RESP2 array.
    Set(Vec<Reply>),
    /// RESP3 big number; RESP2 bulk string.
    BigNumber(String),
    /// RESP3 push (a pub/sub message or confirmation, out of band); RESP2 array.
    Push(Vec<Reply>),
    /// Several replies one after another: `SUBSCRIBE a b` confirms each channel.
    Many(Vec<Reply>),
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Simple("OK")
    }

    pub fn err(msg: impl Into<String>) -> Reply {
        Reply::Error(format!("ERR {}", msg.into()))
    }

    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    /// Appends the encoding of `self` in protocol `proto` (2 or 3) to `out`.
    pub fn encode(self, proto: u8, out: &mut BytesMut) {
        if let Reply::Many(replies) = self {
            replies.into_iter().for_each(|r| r.encode(proto, out));
        } else if proto >= 3 {
            // Encoding a well-formed frame into a growable buffer cannot fail.
            redis_protocol::resp3::encode::complete::extend_encode(out, &self.into_resp3(), false)
                .expect("RESP3 frame encodes");
        } else {
            self.encode_resp2(out);
        }
    }

    /// RESP2, written here: `redis-protocol`'s RESP2 frames have no null array (`*-1`).
    fn encode_resp2(self, out: &mut BytesMut) {
        fn line(out: &mut BytesMut, kind: u8, text: &[u8]) {
            out.extend_from_slice(&[kind]);
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        fn bulk(out: &mut BytesMut, b: &[u8]) {
            out.reserve(b.len() + 24);
            line(out, b'$', itoa::Buffer::new().format(b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Status(s) => line(out, b'+', one_line(&s).as_bytes()),
            Reply::Error(e) => line(out, b'-', one_line(&e).as_bytes()),
            Reply::Int(i) => line(out, b':', itoa::Buffer::new().format(i).as_bytes()),
            Reply::Bool(b) => line(out, b':', if b { b"1" } else { b"0" }),
            Reply::Bulk(b) => bulk(out, &b),
            Reply::BigNumber(n) => bulk(out, n.as_bytes()),
            Reply::Text(t) => bulk(out, t.as_bytes()),
            Reply::Double(d) => bulk(out, fmt_double(d).as_bytes()),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) | Reply::Set(items) | Reply::Push(items) | Reply::Many(items) => {
                line(
                    out,
                    b'*',
                    itoa::Buffer::new().format(items.len()).as_bytes(),
                );
                items.into_iter().for_each(|r| r.encode_resp2(out));
            }
            Reply::Map(pairs) => {
                line(
                    out,
                    b'*',
                    itoa::Buffer::new().format(pairs.len() * 2).as_bytes(),
                );
                for (k, v) in pairs {
                    k.encode_resp2(out);
                    v.encode_resp2(out);
                }
            }
        }
    }

    fn into_resp3(self) -> Frame3 {
        match self {
            Reply::Simple(s) => Frame3::SimpleString {
                data: Bytes::from_static(s.as_bytes()),
                attributes: None,
            },
            Reply::Status(s) => Frame3::SimpleString {
                data: Bytes::from(one_line(&s)),
                attributes: None,
            },
            Reply::Error(e) => Frame3::SimpleError {
                data: Str::from(one_line(&e)),
                attributes: None,
            },
            Reply::Bool(data) => Frame3::Boolean {
                data,
                attributes: None,
            },
            Reply::BigNumber(n) => Frame3::BigNumber {
                data: Bytes::from(one_line(&n)),
                attributes: None,
            },
            Reply::Set(items) => Frame3::Set {
                data: items.into_iter().map(Reply::into_resp3).collect(),
                attributes: None,
            },
            Reply::Int(i) => Frame3::Number {
                data: i,
                attributes: None,
            },
            Reply::Bulk(b) => Frame3::BlobString {
                data: b,
                attributes: None,
            },
            Reply::Text(t) => Frame3::VerbatimString {
                data: Bytes::from(t),
                format: VerbatimStringFormat::Text,
                attributes: None,
            },
            Reply::Double(data) => Frame3::Double {
                data,
                attributes: None,
            },
            Reply::Nil | Reply::NilArray => Frame3::Null,
            // A `Many` is never nested (encode takes it apart); as an element it would
            // be an array.
            Reply::Array(items) | Reply::Many(items) => Frame3::Array {
                data: items.into_iter().map(Reply::into_resp3).collect(),
                attributes: None,
            },
            Reply::Push(items) => Frame3::Push {
                data: items.into_iter().map(Reply::into_resp3).collect(),
                attributes: None,
            },
            Reply::Map(pairs) => {
                let mut data = FrameMap::with_capacity(pairs.len());
                for (k, v) in pairs {
                    data.insert(k.into_resp3(), v.into_resp3());
                }
                Frame3::Map {
                    data,
                    attributes: None,
                }
            }
        }
    }
}

/// A double as Redis 7.0 prints one in RESP2 (a sorted set's score) (`%.17g`; `inf`, `-inf`).
pub fn fmt_double(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // 17 significant digits, then %g's choice between fixed and exponent notation.
    let sci = format!("{v:.16e}");
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    if !(-4..17).contains(&exp) {
        let mant = trim_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", exp.abs());
    }
    let decimals = (16 - exp).max(0) as usize;
    trim_zeros(&format!("{v:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: Limits = Limits {
        max_args: MAX_ARGS,
        max_bulk: 1 << 20,
        max_request: 1 << 20,
        unauthenticated: false,
    };

    fn all_with(input: &[u8], limits: &Limits) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut d = Decoder::new();
        let mut out = Vec::new();
        while let Some(c) = d.next(&mut buf, limits)? {
            out.push(c);
        }
        Ok(out)
    }

    fn all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        all_with(input, &BIG)
    }

    #[test]
    fn decodes_pipelined_arrays_and_inline_commands() {
        let cmds = all(
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*0\r\n*-1\r\nPING\r\n\r\n  set  a b\nx\r\n*1\r\n$4\r\nPI",
        )
        .unwrap();
        let words: Vec<Vec<&[u8]>> = cmds
            .iter()
            .map(|c| c.iter().map(|b| &b[..]).collect())
            .collect();
        assert_eq!(
            words,
            vec![
                vec![&b"GET"[..], b"k"],
                vec![b"PING"],
                vec![b"set", b"a", b"b"],
                vec![b"x"],
            ]
        );
    }

    #[test]
    fn inline_words_are_quoted_as_redis_splits_them() {
        let one = |line: &[u8]| -> Result<Vec<Vec<u8>>, ProtocolError> {
            let mut c = all(line)?;
            assert_eq!(c.len(), 1);
            Ok(c.remove(0).into_iter().map(|b| b.to_vec()).collect())
        };
        assert_eq!(
            one(b"set \"a b\" 'c\\'d' \"\\x41\\n\\\"\" \"\"\r\n").unwrap(),
            vec![
                b"set".to_vec(),
                b"a b".to_vec(),
                b"c'd".to_vec(),
                b"A\n\"".to_vec(),
                b"".to_vec()
            ]
        );
        assert_eq!(
            one(b"get k\"x y\"\n").unwrap(),
            vec![b"get".to_vec(), b"kx y".to_vec()]
        );
        for bad in [
            &b"set \"\"\"k\"\"\" v\r\n"[..],
            b"get \"k\r\n",
            b"get 'k\n",
            b"get \"k\"x\r\n",
        ] {
            assert_eq!(all(bad), Err(ProtocolError::UnbalancedQuotes), "{bad:?}");
        }
    }

    #[test]
    fn rejects_what_is_not_a_flat_array_of_bulks() {
        use ProtocolError::*;
        let cases: &[(&[u8], ProtocolError)] = &[
            (b"*1\r\n:5\r\n", ExpectedBulk(b':')),
            (b"*1\r\n*1\r\n$1\r\nx\r\n", ExpectedBulk(b'*')),
            (b"*x\r\n", InvalidMultibulkLength),
            (b"*1x\r\n", InvalidMultibulkLength),
            (b"*+1\r\n", InvalidMultibulkLength),
            (b"*01\r\n", InvalidMultibulkLength),
            (b"*\r\n", InvalidMultibulkLength),
            (b"*1\n", InvalidMultibulkLength),
            (b"*99999999999999999999\r\n", InvalidMultibulkLength),
            (b"*2147483647\r\n", InvalidMultibulkLength),
            (b"*1\r\n$-1\r\n", InvalidBulkLength),
            (b"*1\r\n$-0\r\n", InvalidBulkLength),
            (b"*1\r\n$abc\r\n", InvalidBulkLength),
            (b"*1\r\n$3\r\nabcd\r\n", MissingCrlf),
            (b"*1\r\n$536870912\r\n", InvalidBulkLength),
            (&[b'*'; 40], MultibulkHeaderTooLong),
            (
                b"*1\r\n$1111111111111111111111111111111111",
                BulkHeaderTooLong,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                all(input).as_ref(),
                Err(want),
                "{}",
                String::from_utf8_lossy(input)
            );
        }
        assert_eq!(
            all(&[b'a'; MAX_INLINE + 1]),
            Err(ProtocolError::InlineTooLong)
        );
        // Inline commands are held to the argument limit too (found by cargo-fuzz).
        let unauth = Limits::new(512 << 20, 1 << 30, true);
        assert_eq!(
            all_with(b"a b c d e f g h i j k\r\n", &unauth),
            Err(UnauthenticatedMultibulkLength)
        );
        assert_eq!(
            all_with(b"a b c d e f g h i j\r\n", &unauth).unwrap().len(),
            1
        );
        // Deep nesting is an error at the second byte of nesting, not a recursion.
        let deep = b"*1\r\n".repeat(300_000);
        assert_eq!(all(&deep), Err(ExpectedBulk(b'*')));
    }

    #[test]
    fn limits_are_checked_from_the_headers() {
        let small = Limits {
            max_args: 3,
            max_bulk: 8,
            max_request: 20,
            unauthenticated: false,
        };
        assert_eq!(
            all_with(b"*4\r\n", &small),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            all_with(b"*1\r\n$9\r\n", &small),
            Err(ProtocolError::InvalidBulkLength)
        );
        // Two bulks within max_bulk whose sum is over max_request.
        assert_eq!(
            all_with(b"*2\r\n$8\r\n12345678\r\n$8\r\n", &small),
            Err(ProtocolError::TooLarge { limit: 20 })
        );
        let unauth = Limits::new(512 << 20, 1 << 30, true);
        assert_eq!(
            all_with(b"*11\r\n", &unauth),
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        );
        assert_eq!(
            all_with(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n", &unauth),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
        assert_eq!(
            all_with(b"*2\r\n$4\r\nAUTH\r\n$16384\r\n", &unauth),
            Ok(vec![])
        );
    }

    #[test]
    fn a_declared_length_reserves_nothing() {
        // A huge array and a huge bulk are accepted as headers but allocate only for what
        // has arrived.
        let limits = Limits::new(512 << 20, 1 << 30, false);
        let mut d = Decoder::new();
        let mut buf = BytesMut::from(&b"*1048576\r\n$536870800\r\nabc"[..]);
        assert_eq!(d.next(&mut buf, &limits), Ok(None));
        assert!(d.args.capacity() <= ARGS_RESERVED);
        assert!(buf.capacity() < 1024);
        assert!(d.in_request());
    }

    #[test]
    fn resumes_where_it_stopped() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n";
        let mut d = Decoder::new();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            while let Some(c) = d.next(&mut buf, &BIG).unwrap() {
                got.push(c);
            }
        }
        assert_eq!(got, all(input).unwrap());
        assert_eq!(got.len(), 2);
        assert!(buf.is_empty());
    }

    #[test]
    fn error_lines_cannot_carry_line_breaks() {
        let mut b = BytesMut::new();
        Reply::err("unknown command 'a\r\n+OK'").encode(2, &mut b);
        assert_eq!(&b[..], b"-ERR unknown command 'a  +OK'\r\n");
        let mut b = BytesMut::new();
        Reply::Error("ERR x\ny".into()).encode(3, &mut b);
        assert_eq!(&b[..], b"-ERR x y\r\n");
    }

    #[test]
    fn encodes_both_protocols() {
        let enc = |r: Reply, p| {
            let mut b = BytesMut::new();
            r.encode(p, &mut b);
            b
        };
        assert_eq!(&enc(Reply::Nil, 2)[..], b"$-1\r\n");
        assert_eq!(&enc(Reply::Nil, 3)[..], b"_\r\n");
        assert_eq!(&enc(Reply::NilArray, 2)[..], b"*-1\r\n");
        assert_eq!(&enc(Reply::NilArray, 3)[..], b"_\r\n");
        let nested = Reply::Array(vec![
            Reply::Simple("OK"),
            Reply::Int(-7),
            Reply::NilArray,
            Reply::Text("t".into()),
            Reply::bulk(""),
        ]);
        assert_eq!(
            &enc(nested, 2)[..],
            b"*5\r\n+OK\r\n:-7\r\n*-1\r\n$1\r\nt\r\n$0\r\n\r\n"
        );
        assert_eq!(
            &enc(Reply::Error("ERR a\r\nb".into()), 2)[..],
            b"-ERR a  b\r\n"
        );
        let map = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        assert_eq!(&enc(map.clone(), 2)[..], b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(&enc(map, 3)[..], b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(&enc(Reply::err("boom"), 2)[..], b"-ERR boom\r\n");
        assert_eq!(&enc(Reply::Text("x".into()), 3)[..], b"=5\r\ntxt:x\r\n");
    }
}
