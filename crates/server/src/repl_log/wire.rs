//! What a primary and a replica say to each other beyond ordinary RESP, and the parsers
//! of it, which a hostile peer can reach (a replica connects to whatever address it is
//! told; a primary serves whoever sends `PSYNC`).
//!
//! - Handshake replies (`+OK`, `+FULLRESYNC <replid> <offset> <seq>`, `+CONTINUE`,
//!   `+WALCONTINUE <replid> <offset> <seq>`, `-ERR ...`) are single lines, read with
//!   [`take_line`] under [`MAX_LINE`] and [`parse_answer`].
//! - After `+FULLRESYNC` the primary sends the checkpoint's files in halflife's own
//!   framing (a halflife replica needs a halflife primary, as Kvrocks' replicas need
//!   Kvrocks), read by [`SyncDecoder`]:
//!
//!   ```text
//!   transfer := "HLSYNC01" | files u32 BE | total bytes u64 BE | file*
//!   file     := name length u16 BE | name | size u64 BE | size bytes | crc32c u32 BE
//!   ```
//!
//!   Every declared number is checked against a limit before anything is done with it:
//!   no buffer is ever sized from one (the bytes of a file are handed on as they arrive),
//!   a file's size must fit in what the transfer declared is left, and a name is a plain
//!   file name of a few allowed characters, so it can never leave the directory it is
//!   written into.
//! - Then, and on `+CONTINUE`, the stream of writes: RESP arrays of bulk strings (read by
//!   the connection decoder, [`crate::protocol::Decoder`]). A write is `HLBATCH <ops>
//!   <seq>`: the engine batch the command produced, as it was applied on the primary, so
//!   that a replica applies exactly the same records (see `docs/replication.md` for why
//!   batches rather than commands), and the primary's sequence number at it, which lets a
//!   replica continue from the primary's WAL after a restart; [`encode_ops`] and
//!   [`decode_ops`] are its body, [`parse_number`] reads the number. `MULTI` and `EXEC`
//!   bracket a transaction's batches, `REPLCONF GETACK *` asks for an acknowledgement.
//! - On `+WALCONTINUE` ([`parse_answer`]), the same `HLBATCH` entries read back from the
//!   primary's WAL come first, outside the offsets, ended by [`CAUGHT_UP`].
//!
//! This file uses nothing of the server but `bytes`, `crc32c` and `thiserror`, so that its
//! fuzz target (`fuzz/fuzz_targets/repl_wire.rs`) builds it alone.

use bytes::{Buf, Bytes, BytesMut};

/// Longest handshake line, CRLF included.
pub const MAX_LINE: usize = 4096;
/// Most files one transfer may declare.
pub const MAX_FILES: u32 = 1 << 20;
/// Largest file one transfer may declare (engine files are far smaller: tables and value
/// files are tens of MiB).
pub const MAX_FILE_BYTES: u64 = 1 << 40;
/// Longest file name.
pub const MAX_NAME: usize = 255;
/// The transfer's first bytes.
pub const MAGIC: &[u8; 8] = b"HLSYNC01";
/// The write command of the stream.
pub const BATCH: &str = "HLBATCH";
/// Ends the writes a primary read back from its WAL for a replica it answered
/// `+WALCONTINUE`: what follows is the stream from the offset of that answer.
pub const CAUGHT_UP: &str = "HLCAUGHTUP";
/// Digits of the largest sequence number or offset a peer may send (`i64::MAX`).
const MAX_DIGITS: usize = 19;

const HEADER: usize = MAGIC.len() + 4 + 8;

#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum WireError {
    #[error("handshake line longer than {MAX_LINE} bytes")]
    LineTooLong,
    #[error("handshake line not ended by CRLF")]
    BadLine,
    #[error(
        "not a halflife sync transfer (bad magic); a halflife replica needs a halflife primary"
    )]
    BadMagic,
    #[error("transfer declares {0} files, more than the limit of {MAX_FILES}")]
    TooManyFiles(u32),
    #[error("bad file name in transfer ({0})")]
    BadName(String),
    #[error("file {name} declares {size} bytes, more than the limit of {MAX_FILE_BYTES}")]
    FileTooLarge { name: String, size: u64 },
    #[error("file {name} declares {size} bytes, more than the {left} the transfer has left of its declared total")]
    OverTotal { name: String, size: u64, left: u64 },
    #[error("transfer ended with {left} of its declared bytes not sent")]
    ShortTotal { left: u64 },
    #[error(
        "crc32c mismatch in file {name}: sent {sent:#010x}, received bytes sum to {got:#010x}"
    )]
    Crc { name: String, sent: u32, got: u32 },
    #[error("malformed write batch: {0}")]
    BadBatch(&'static str),
    #[error("bad {0}: not a decimal number below 2^63")]
    BadNumber(&'static str),
    #[error("bad replication id from the primary: {0}")]
    BadReplid(String),
}

/// Takes one CRLF-ended line (without the CRLF) off the front of `buf`; `None` if it is not
/// complete yet.
pub fn take_line(buf: &mut BytesMut) -> Result<Option<Bytes>, WireError> {
    match buf.iter().position(|&b| b == b'\n') {
        Some(i) if i < MAX_LINE => {
            if i == 0 || buf[i - 1] != b'\r' {
                return Err(WireError::BadLine);
            }
            let line = buf.split_to(i + 1).freeze();
            Ok(Some(line.slice(..i - 1)))
        }
        Some(_) => Err(WireError::LineTooLong),
        None if buf.len() >= MAX_LINE => Err(WireError::LineTooLong),
        None => Ok(None),
    }
}

/// A RESP array of bulk strings (how the stream's commands are sent).
pub fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        push_arg(&mut out, a);
    }
    out
}

/// Appends one bulk string to a command whose array header counted it.
pub fn push_arg(out: &mut Vec<u8>, a: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

/// `HLBATCH <ops> <seq>` up to its last argument, the primary's sequence number of the
/// batch, which [`push_arg`] appends once it is known (the primary learns it under the
/// lock that orders writes, and encodes the body before taking it).
pub fn batch_head(ops: &[u8]) -> Vec<u8> {
    let mut out = b"*3\r\n".to_vec();
    push_arg(&mut out, BATCH.as_bytes());
    push_arg(&mut out, ops);
    out
}

/// A sequence number or offset a peer sent: 1 to 19 ASCII digits, below 2^63.
pub fn parse_number(b: &[u8], what: &'static str) -> Result<u64, WireError> {
    if b.is_empty() || b.len() > MAX_DIGITS || !b.iter().all(u8::is_ascii_digit) {
        return Err(WireError::BadNumber(what));
    }
    // 19 digits fit in a u64; i64::MAX bounds it as Redis bounds offsets.
    let n: u64 = std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(WireError::BadNumber(what))?;
    if n > i64::MAX as u64 {
        return Err(WireError::BadNumber(what));
    }
    Ok(n)
}

/// How a primary answered `PSYNC`.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// `+FULLRESYNC <replid> <offset> [<seq>]`: a copy follows, holding the stream before
    /// `offset` and the primary's writes up to its sequence number `seq` (a primary that
    /// sends no `seq` cannot continue the replica from its WAL later).
    Full {
        replid: String,
        offset: u64,
        seq: Option<u64>,
    },
    /// `+CONTINUE [<replid>]`: the stream from the offset asked for, from the backlog.
    Continue { replid: Option<String> },
    /// `+WALCONTINUE <replid> <offset> <seq>`: the writes after the sequence number asked
    /// for, read from the primary's WAL, up to `seq`, then [`CAUGHT_UP`], then the stream
    /// from `offset` of history `replid`.
    Wal {
        replid: String,
        offset: u64,
        seq: u64,
    },
}

/// A replication id is 40 hex digits, as Redis's (it goes into INFO and the stored
/// position).
pub fn check_replid(id: &str) -> Result<(), WireError> {
    if id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(WireError::BadReplid(format!(
            "{:?}",
            id.chars().take(64).collect::<String>()
        )))
    }
}

/// Parses the line a primary answered `PSYNC` with; `Ok(None)` for anything else (a
/// refusal, which the caller reports as it came).
pub fn parse_answer(line: &str) -> Result<Option<Answer>, WireError> {
    let words: Vec<&str> = line.splitn(5, ' ').collect();
    let id = |w: &str| check_replid(w).map(|()| w.to_string());
    let num = |w: &str, what| parse_number(w.as_bytes(), what);
    Ok(Some(match words[..] {
        ["+FULLRESYNC", r, o] => Answer::Full {
            replid: id(r)?,
            offset: num(o, "offset")?,
            seq: None,
        },
        ["+FULLRESYNC", r, o, s] => Answer::Full {
            replid: id(r)?,
            offset: num(o, "offset")?,
            seq: Some(num(s, "sequence number")?),
        },
        ["+CONTINUE"] => Answer::Continue { replid: None },
        ["+CONTINUE", r] => Answer::Continue {
            replid: Some(id(r)?),
        },
        ["+WALCONTINUE", r, o, s] => Answer::Wal {
            replid: id(r)?,
            offset: num(o, "offset")?,
            seq: num(s, "sequence number")?,
        },
        _ => return Ok(None),
    }))
}

/// One record of a write batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op<'a> {
    /// A put (`true`) or a delete.
    pub put: bool,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// The body of `HLBATCH`: `('P' | klen u32 BE | key | vlen u32 BE | value) | ('D' | klen
/// u32 BE | key)` per record, in the batch's order.
pub fn encode_ops<'a>(ops: impl Iterator<Item = Op<'a>>) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        out.push(if op.put { b'P' } else { b'D' });
        out.extend_from_slice(&(op.key.len() as u32).to_be_bytes());
        out.extend_from_slice(op.key);
        if op.put {
            out.extend_from_slice(&(op.value.len() as u32).to_be_bytes());
            out.extend_from_slice(op.value);
        }
    }
    out
}

/// The records of an `HLBATCH` body; every length is checked against the bytes left, so
/// nothing is allocated beyond one entry per 5 input bytes.
pub fn decode_ops(mut b: &[u8]) -> Result<Vec<Op<'_>>, WireError> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], WireError> {
        if b.len() < n {
            return Err(WireError::BadBatch("a length runs past the end"));
        }
        let (h, t) = b.split_at(n);
        *b = t;
        Ok(h)
    }
    fn len(b: &mut &[u8]) -> Result<usize, WireError> {
        let l = take(b, 4)?;
        Ok(u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
    }
    let mut ops = Vec::new();
    while !b.is_empty() {
        let tag = take(&mut b, 1)?[0];
        let put = match tag {
            b'P' => true,
            b'D' => false,
            _ => return Err(WireError::BadBatch("unknown record tag")),
        };
        let n = len(&mut b)?;
        let key = take(&mut b, n)?;
        if key.is_empty() {
            return Err(WireError::BadBatch("empty key"));
        }
        let value = if put {
            let n = len(&mut b)?;
            take(&mut b, n)?
        } else {
            &[]
        };
        ops.push(Op { put, key, value });
    }
    Ok(ops)
}

/// The transfer's header.
pub fn sync_header(files: u32, total: u64) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&files.to_be_bytes());
    out.extend_from_slice(&total.to_be_bytes());
    out
}

/// A file's header (its bytes and then [`file_trailer`] follow).
pub fn file_header(name: &str, size: u64) -> Vec<u8> {
    let mut out = (name.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&size.to_be_bytes());
    out
}

pub fn file_trailer(crc: u32) -> [u8; 4] {
    crc.to_be_bytes()
}

/// Whether `name` is a file name the transfer may carry: 1 to [`MAX_NAME`] characters of
/// `[A-Za-z0-9._-]`, not starting with a dot (so neither `.` nor `..`, nor a hidden file).
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name[0] != b'.'
        && name
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// What [`SyncDecoder::next`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// The header: how many files and bytes follow.
    Start { files: u32, total: u64 },
    /// A file begins.
    File { name: String, size: u64 },
    /// Bytes of the current file, as they arrived.
    Data(Bytes),
    /// The current file ended and its crc32c matched.
    FileEnd,
    /// Every declared file arrived; what follows in the buffer is the write stream.
    Done,
}

#[derive(Debug)]
enum State {
    Header,
    FileHeader,
    Data {
        left: u64,
    },
    Trailer,
    /// Every file arrived: [`Event::Done`] is next.
    End,
    Done,
}

/// The receiving end of a transfer: takes what it parsed off the front of a buffer the
/// caller fills, keeping its place between calls.
#[derive(Debug)]
pub struct SyncDecoder {
    state: State,
    files_left: u32,
    bytes_left: u64,
    name: String,
    crc: u32,
}

impl Default for SyncDecoder {
    fn default() -> Self {
        SyncDecoder::new()
    }
}

impl SyncDecoder {
    pub fn new() -> SyncDecoder {
        SyncDecoder {
            state: State::Header,
            files_left: 0,
            bytes_left: 0,
            name: String::new(),
            crc: 0,
        }
    }

    /// The next event, `None` if more bytes are needed. After an error the link must be
    /// dropped.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, WireError> {
        match self.state {
            State::Header => {
                if buf.len() < HEADER {
                    return Ok(None);
                }
                if &buf[..MAGIC.len()] != MAGIC {
                    return Err(WireError::BadMagic);
                }
                buf.advance(MAGIC.len());
                let files = buf.get_u32();
                let total = buf.get_u64();
                if files > MAX_FILES {
                    return Err(WireError::TooManyFiles(files));
                }
                self.files_left = files;
                self.bytes_left = total;
                self.state = self.after_file();
                Ok(Some(Event::Start { files, total }))
            }
            State::FileHeader => {
                if buf.len() < 2 {
                    return Ok(None);
                }
                let n = u16::from_be_bytes([buf[0], buf[1]]) as usize;
                if n > MAX_NAME {
                    return Err(WireError::BadName(format!("{n} bytes long")));
                }
                if buf.len() < 2 + n + 8 {
                    return Ok(None);
                }
                let raw = &buf[2..2 + n];
                if !valid_name(raw) {
                    return Err(WireError::BadName(format!(
                        "{:?}",
                        String::from_utf8_lossy(raw)
                    )));
                }
                let name = String::from_utf8_lossy(raw).into_owned();
                buf.advance(2 + n);
                let size = buf.get_u64();
                if size > MAX_FILE_BYTES {
                    return Err(WireError::FileTooLarge { name, size });
                }
                if size > self.bytes_left {
                    return Err(WireError::OverTotal {
                        name,
                        size,
                        left: self.bytes_left,
                    });
                }
                self.bytes_left -= size;
                self.files_left -= 1;
                self.name = name.clone();
                self.crc = 0;
                self.state = State::Data { left: size };
                Ok(Some(Event::File { name, size }))
            }
            State::Data { left } => {
                if left == 0 {
                    self.state = State::Trailer;
                    return self.next(buf);
                }
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = (buf.len() as u64).min(left) as usize;
                let data = buf.split_to(n).freeze();
                self.crc = crc32c::crc32c_append(self.crc, &data);
                self.state = State::Data {
                    left: left - n as u64,
                };
                Ok(Some(Event::Data(data)))
            }
            State::Trailer => {
                if buf.len() < 4 {
                    return Ok(None);
                }
                let sent = buf.get_u32();
                if sent != self.crc {
                    return Err(WireError::Crc {
                        name: std::mem::take(&mut self.name),
                        sent,
                        got: self.crc,
                    });
                }
                self.state = self.after_file();
                Ok(Some(Event::FileEnd))
            }
            State::End => {
                if self.bytes_left > 0 {
                    return Err(WireError::ShortTotal {
                        left: self.bytes_left,
                    });
                }
                self.state = State::Done;
                Ok(Some(Event::Done))
            }
            State::Done => Ok(None),
        }
    }

    /// The state after the header or a file: another file, or the end (every declared
    /// byte must have been in a file).
    fn after_file(&mut self) -> State {
        if self.files_left > 0 {
            State::FileHeader
        } else {
            State::End
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transfer(files: &[(&str, &[u8])]) -> Vec<u8> {
        let total = files.iter().map(|(_, d)| d.len() as u64).sum();
        let mut out = sync_header(files.len() as u32, total);
        for (name, data) in files {
            out.extend(file_header(name, data.len() as u64));
            out.extend_from_slice(data);
            out.extend(file_trailer(crc32c::crc32c(data)));
        }
        out
    }

    /// Decodes `input` fed `chunk` bytes at a time into (name, bytes) pairs.
    fn receive(input: &[u8], chunk: usize) -> Result<Vec<(String, Vec<u8>)>, WireError> {
        let mut d = SyncDecoder::new();
        let mut buf = BytesMut::new();
        let mut out: Vec<(String, Vec<u8>)> = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            buf.extend_from_slice(piece);
            while let Some(e) = d.next(&mut buf)? {
                match e {
                    Event::File { name, .. } => out.push((name, Vec::new())),
                    Event::Data(b) => out.last_mut().unwrap().1.extend_from_slice(&b),
                    Event::Start { .. } | Event::FileEnd => {}
                    Event::Done => return Ok(out),
                }
            }
        }
        Err(WireError::BadLine)
    }

    #[test]
    fn a_transfer_round_trips_in_any_chunking() {
        let files: &[(&str, &[u8])] = &[
            ("000001.sst", b"table"),
            ("CURRENT", b""),
            ("x-1", &[7; 1000]),
        ];
        let t = transfer(files);
        for chunk in [1, 3, 64, t.len()] {
            let got = receive(&t, chunk).unwrap();
            assert_eq!(got.len(), 3);
            assert_eq!(got[2].1, vec![7; 1000]);
            assert_eq!(got[1].0, "CURRENT");
        }
        let empty = transfer(&[]);
        assert_eq!(receive(&empty, 5).unwrap(), vec![]);
    }

    #[test]
    fn lies_are_refused_before_anything_is_done_with_them() {
        let mut t = sync_header(1, u64::MAX);
        t.extend(file_header("big", u64::MAX));
        assert!(matches!(
            receive(&t, 7),
            Err(WireError::FileTooLarge { .. })
        ));
        let mut t = sync_header(1, 10);
        t.extend(file_header("big", 11));
        assert!(matches!(receive(&t, 7), Err(WireError::OverTotal { .. })));
        let mut t = sync_header(1, 4);
        t.extend(file_header("../etc", 4));
        assert!(matches!(receive(&t, 7), Err(WireError::BadName(_))));
        assert!(matches!(
            receive(&sync_header(MAX_FILES + 1, 0), 7),
            Err(WireError::TooManyFiles(_))
        ));
        let mut t = transfer(&[("a", b"data")]);
        let n = t.len();
        t[n - 1] ^= 1;
        assert!(matches!(receive(&t, 3), Err(WireError::Crc { .. })));
        let mut t = sync_header(1, 9);
        t.extend(file_header("a", 4));
        t.extend_from_slice(b"data");
        t.extend(file_trailer(crc32c::crc32c(b"data")));
        assert!(matches!(receive(&t, 3), Err(WireError::ShortTotal { .. })));
        assert_eq!(
            receive(b"RDB0000000000000000000", 4),
            Err(WireError::BadMagic)
        );
    }

    #[test]
    fn batches_round_trip_and_truncations_are_errors() {
        let ops = [
            Op {
                put: true,
                key: b"k",
                value: b"v",
            },
            Op {
                put: false,
                key: b"gone",
                value: b"",
            },
            Op {
                put: true,
                key: b"e",
                value: b"",
            },
        ];
        let body = encode_ops(ops.iter().copied());
        assert_eq!(decode_ops(&body).unwrap(), ops);
        // Records end at 11 and 20 bytes: a cut there is a shorter batch, anywhere else
        // an error.
        for cut in 1..body.len() {
            match cut {
                11 | 20 => assert!(decode_ops(&body[..cut]).is_ok()),
                _ => assert!(decode_ops(&body[..cut]).is_err(), "cut at {cut}"),
            }
        }
        assert!(decode_ops(b"X").is_err());
        assert!(decode_ops(&[b'P', 0xff, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn numbers_and_answers_are_bounded() {
        assert_eq!(parse_number(b"0", "x"), Ok(0));
        assert_eq!(
            parse_number(b"9223372036854775807", "x"),
            Ok(i64::MAX as u64)
        );
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b" 1",
            b"9223372036854775808",
            b"99999999999999999999",
            b"1x",
        ] {
            assert_eq!(
                parse_number(bad, "x"),
                Err(WireError::BadNumber("x")),
                "{bad:?}"
            );
        }
        let id = "ab".repeat(20);
        assert_eq!(
            parse_answer(&format!("+FULLRESYNC {id} 7 9")),
            Ok(Some(Answer::Full {
                replid: id.clone(),
                offset: 7,
                seq: Some(9)
            }))
        );
        assert_eq!(
            parse_answer(&format!("+FULLRESYNC {id} 7")),
            Ok(Some(Answer::Full {
                replid: id.clone(),
                offset: 7,
                seq: None
            }))
        );
        assert_eq!(
            parse_answer(&format!("+WALCONTINUE {id} 0 12")),
            Ok(Some(Answer::Wal {
                replid: id.clone(),
                offset: 0,
                seq: 12
            }))
        );
        assert_eq!(
            parse_answer("+CONTINUE"),
            Ok(Some(Answer::Continue { replid: None }))
        );
        assert_eq!(parse_answer("-ERR no"), Ok(None));
        assert_eq!(parse_answer(&format!("+WALCONTINUE {id} 0")), Ok(None));
        assert!(parse_answer("+FULLRESYNC xyz 0").is_err());
        assert!(parse_answer(&format!("+WALCONTINUE {id} 0 -5")).is_err());
        let mut entry = batch_head(b"ops");
        push_arg(&mut entry, b"42");
        assert_eq!(entry, command(&[BATCH.as_bytes(), b"ops", b"42"]));
    }

    #[test]
    fn lines_are_bounded() {
        let mut b = BytesMut::from(&b"+OK\r\n+FULL"[..]);
        assert_eq!(take_line(&mut b).unwrap().unwrap(), &b"+OK"[..]);
        assert_eq!(take_line(&mut b).unwrap(), None);
        let mut long = BytesMut::from(&vec![b'a'; MAX_LINE][..]);
        assert_eq!(take_line(&mut long), Err(WireError::LineTooLong));
        let mut bare = BytesMut::from(&b"+OK\n"[..]);
        assert_eq!(take_line(&mut bare), Err(WireError::BadLine));
    }
}
