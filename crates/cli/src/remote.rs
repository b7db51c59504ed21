//! A blocking RESP2 client for the commands that act on a running `halflife serve`
//! (`halflife backup ... --server`): one command, one reply, over TCP. Replies are decoded
//! with `redis-protocol`; the command table of the server is not needed here.

use anyhow::{anyhow, bail, Context, Result};
use bytes::BytesMut;
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame as Frame;
use std::io::{Read, Write};
use std::net::TcpStream;

/// Where the server listens and how to authenticate, for commands that take `--server`.
#[derive(clap::Args, Clone, Debug)]
pub struct ServerArgs {
    /// Act on the running `halflife serve` at HOST:PORT (through its BACKUP command)
    /// instead of opening a database or backup directory here.
    #[arg(long, value_name = "HOST:PORT")]
    pub server: Option<String>,
    /// The server's requirepass.
    #[arg(long, requires = "server")]
    pub password: Option<String>,
}

pub struct Remote {
    addr: String,
    s: TcpStream,
    buf: BytesMut,
}

/// Replies above this are refused (a backup list of a few thousand entries is far below).
const MAX_REPLY: usize = 64 << 20;

impl Remote {
    /// Connects to `addr` and authenticates with `password` if given.
    pub fn connect(addr: &str, password: Option<&str>) -> Result<Remote> {
        let s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        let mut r = Remote {
            addr: addr.to_string(),
            s,
            buf: BytesMut::new(),
        };
        if let Some(p) = password {
            r.call(&["AUTH", p])?;
        }
        Ok(r)
    }

    /// Sends one command and returns its reply; an error reply is an `Err` naming the
    /// server.
    pub fn call(&mut self, args: &[&str]) -> Result<Frame> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.s
            .write_all(&out)
            .with_context(|| format!("sending {} to {}", args[0], self.addr))?;
        loop {
            let decoded = decode_bytes_mut(&mut self.buf)
                .map_err(|e| anyhow!("a malformed reply from {}: {e:?}", self.addr))?;
            if let Some((f, _, _)) = decoded {
                if let Frame::Error(e) = &f {
                    bail!("{} answered {}: {e}", self.addr, args.join(" "));
                }
                return Ok(f);
            }
            if self.buf.len() > MAX_REPLY {
                bail!("a reply from {} over {MAX_REPLY} bytes", self.addr);
            }
            let mut chunk = [0u8; 64 << 10];
            let n = self
                .s
                .read(&mut chunk)
                .with_context(|| format!("reading from {}", self.addr))?;
            if n == 0 {
                bail!("{} closed the connection", self.addr);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// An integer reply.
pub fn int(f: &Frame) -> Result<i64> {
    match f {
        Frame::Integer(n) => Ok(*n),
        other => bail!("expected an integer, got {other:?}"),
    }
}

/// The integer fields of a map reply.
pub struct Fields(Vec<(String, i64)>);

impl Fields {
    /// The field `name`; 0 if the reply has none.
    pub fn get(&self, name: &str) -> i64 {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }
}

/// A map reply as RESP2 sends it (a flat array of name, value, ...): its integer fields.
pub fn int_fields(f: &Frame) -> Result<Fields> {
    let Frame::Array(items) = f else {
        bail!("expected a map, got {f:?}");
    };
    items
        .chunks(2)
        .map(|kv| match kv {
            [Frame::BulkString(k), v] => Ok((String::from_utf8_lossy(k).into_owned(), int(v)?)),
            _ => bail!("expected name and value, got {kv:?}"),
        })
        .collect::<Result<_>>()
        .map(Fields)
}
