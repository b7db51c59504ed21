//! A minimal RESP2 client for the integration tests: commands encoded by hand, replies
//! decoded with `redis-protocol`. Each test crate uses part of it.
#![allow(dead_code)]

use bytes::BytesMut;
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame as F;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct Client {
    pub s: TcpStream,
    buf: BytesMut,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::try_connect(addr).unwrap()
    }

    /// [`Client::connect`] that reports a refused connection (the server went away).
    pub fn try_connect(addr: SocketAddr) -> std::io::Result<Client> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Client {
            s,
            buf: BytesMut::new(),
        })
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        self.try_send(args).unwrap();
    }

    /// [`Client::send`] that reports a failed write (the server went away) instead of
    /// panicking.
    pub fn try_send(&mut self, args: &[&[u8]]) -> std::io::Result<()> {
        self.try_send_all(&[args])
    }

    /// Sends several commands in one write: a pipeline the server reads at once.
    pub fn try_send_all(&mut self, cmds: &[&[&[u8]]]) -> std::io::Result<()> {
        let mut out = Vec::new();
        for args in cmds {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in *args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.s.write_all(&out)
    }

    /// The next reply, or `None` when the server closed the connection.
    pub fn read(&mut self) -> Option<F> {
        loop {
            if let Some((f, _, _)) = decode_bytes_mut(&mut self.buf).unwrap() {
                return Some(f);
            }
            let mut chunk = [0u8; 64 << 10];
            let n = self.s.read(&mut chunk).unwrap_or(0);
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn cmd(&mut self, args: &[&str]) -> F {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&args);
        self.read().expect("a reply")
    }

    /// The value of `field` in `INFO section`, if the server reports it.
    pub fn info_field(&mut self, section: &str, field: &str) -> Option<String> {
        let info = match self.cmd(&["INFO", section]) {
            F::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("INFO {section} answered {other:?}"),
        };
        info.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    }
}

pub fn bulk(s: &str) -> F {
    F::BulkString(s.as_bytes().to_vec().into())
}

pub fn simple(s: &str) -> F {
    F::SimpleString(s.as_bytes().to_vec().into())
}

pub fn is_err(f: &F, starts: &str) -> bool {
    matches!(f, F::Error(e) if e.starts_with(starts))
}
