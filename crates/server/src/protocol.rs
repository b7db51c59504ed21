//! The wire: requests decoded with `redis-protocol`'s RESP2 decoder (clients send commands
//! as arrays of bulk strings in both protocol versions) or as inline commands (a line of
//! words, what `telnet` sends), and replies encoded as RESP2 or RESP3 frames depending on
//! what the connection negotiated with `HELLO`.

use bytes::{Bytes, BytesMut};
use redis_protocol::bytes_utils::Str;
use redis_protocol::resp2::types::{BytesFrame as Frame2, Resp2Frame};
use redis_protocol::resp3::types::{BytesFrame as Frame3, FrameMap, VerbatimStringFormat};

/// Why a connection's input cannot be read as commands; the connection is closed after the
/// error is sent, as Redis does.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("Protocol error: {0}")]
    Malformed(String),
    #[error("Protocol error: request of more than {limit} bytes (proto-max-bulk-len)")]
    TooLarge { limit: usize },
}

/// Longest inline command line (Redis: 64 KiB).
const MAX_INLINE: usize = 64 << 10;

/// Takes the next complete command off the front of `buf`: `Ok(None)` if more bytes are
/// needed. A request that cannot complete within `max_request` bytes is an error.
pub fn next_command(
    buf: &mut BytesMut,
    max_request: usize,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    loop {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        if first == b'*' {
            return match redis_protocol::resp2::decode::decode_bytes_mut(buf) {
                Ok(Some((_, amt, _))) if amt > max_request => {
                    Err(ProtocolError::TooLarge { limit: max_request })
                }
                Ok(Some((frame, _, _))) => match frame {
                    Frame2::Array(items) if items.is_empty() => continue,
                    Frame2::Array(items) => items
                        .into_iter()
                        .map(|f| match f {
                            Frame2::BulkString(b) | Frame2::SimpleString(b) => Ok(b),
                            other => Err(ProtocolError::Malformed(format!(
                                "expected bulk strings in a command, got {:?}",
                                other.kind()
                            ))),
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map(Some),
                    _ => Err(ProtocolError::Malformed(
                        "expected an array of bulk strings".into(),
                    )),
                },
                Ok(None) if buf.len() > max_request => {
                    Err(ProtocolError::TooLarge { limit: max_request })
                }
                Ok(None) => Ok(None),
                Err(e) => Err(ProtocolError::Malformed(e.details().to_string())),
            };
        }
        // Inline command: one line of whitespace-separated words.
        let Some(end) = buf.iter().position(|&c| c == b'\n') else {
            if buf.len() > MAX_INLINE {
                return Err(ProtocolError::Malformed("too big inline request".into()));
            }
            return Ok(None);
        };
        let line = buf.split_to(end + 1).freeze();
        let words: Vec<Bytes> = line
            .split(|c| c.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
            .map(|w| line.slice_ref(w))
            .collect();
        if !words.is_empty() {
            return Ok(Some(words));
        }
    }
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
    Array(Vec<Reply>),
    /// RESP3 map; a flat array of keys and values in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// Text for humans (INFO, CLIENT LIST): RESP3 verbatim string, RESP2 bulk string.
    Text(String),
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
        // Encoding a well-formed frame into a growable buffer cannot fail.
        if proto >= 3 {
            redis_protocol::resp3::encode::complete::extend_encode(out, &self.into_resp3(), false)
                .expect("RESP3 frame encodes");
        } else {
            redis_protocol::resp2::encode::extend_encode(out, &self.into_resp2(), false)
                .expect("RESP2 frame encodes");
        }
    }

    fn into_resp2(self) -> Frame2 {
        match self {
            Reply::Simple(s) => Frame2::SimpleString(Bytes::from_static(s.as_bytes())),
            Reply::Error(e) => Frame2::Error(Str::from(e)),
            Reply::Int(i) => Frame2::Integer(i),
            Reply::Bulk(b) => Frame2::BulkString(b),
            Reply::Text(t) => Frame2::BulkString(Bytes::from(t)),
            Reply::Nil => Frame2::Null,
            Reply::Array(items) => {
                Frame2::Array(items.into_iter().map(Reply::into_resp2).collect())
            }
            Reply::Map(pairs) => Frame2::Array(
                pairs
                    .into_iter()
                    .flat_map(|(k, v)| [k.into_resp2(), v.into_resp2()])
                    .collect(),
            ),
        }
    }

    fn into_resp3(self) -> Frame3 {
        match self {
            Reply::Simple(s) => Frame3::SimpleString {
                data: Bytes::from_static(s.as_bytes()),
                attributes: None,
            },
            Reply::Error(e) => Frame3::SimpleError {
                data: Str::from(e),
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
            Reply::Nil => Frame3::Null,
            Reply::Array(items) => Frame3::Array {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(c) = next_command(&mut buf, 1 << 20)? {
            out.push(c);
        }
        Ok(out)
    }

    #[test]
    fn decodes_pipelined_arrays_and_inline_commands() {
        let cmds =
            all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*0\r\nPING\r\n\r\n  set  a b\r\n*1\r\n$4\r\nPI")
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
                vec![b"set", b"a", b"b"]
            ]
        );
    }

    #[test]
    fn rejects_garbage_and_oversized_requests() {
        assert!(matches!(
            all(b"*1\r\n:5\r\n"),
            Err(ProtocolError::Malformed(_))
        ));
        assert!(matches!(all(b"*x\r\n"), Err(ProtocolError::Malformed(_))));
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$100\r\n0123456789"[..]);
        assert_eq!(
            next_command(&mut buf, 16),
            Err(ProtocolError::TooLarge { limit: 16 })
        );
        // Complete but too large.
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$10\r\n0123456789\r\n"[..]);
        assert_eq!(
            next_command(&mut buf, 16),
            Err(ProtocolError::TooLarge { limit: 16 })
        );
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
        let map = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        assert_eq!(&enc(map.clone(), 2)[..], b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(&enc(map, 3)[..], b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(&enc(Reply::err("boom"), 2)[..], b"-ERR boom\r\n");
        assert_eq!(&enc(Reply::Text("x".into()), 3)[..], b"=5\r\ntxt:x\r\n");
    }
}
