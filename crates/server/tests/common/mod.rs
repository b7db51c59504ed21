//! The server in-process on an ephemeral port, and a minimal client, for the integration
//! tests (each test file is its own crate; `mod common;` shares this, and each uses part
//! of it, hence `dead_code` allowed).
#![allow(dead_code)]

use bytes::BytesMut;
use halflife_server::{Config, Server};
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame as F;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

/// A running server: its address and how to stop it.
pub struct Running {
    pub addr: SocketAddr,
    handle: halflife_server::ShutdownHandle,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl Running {
    /// Opens the database in `dir` and serves it with `config` on its own runtime.
    pub fn start(dir: &Path, config: Config) -> Running {
        Running::start_with(dir, config, engine::Options::default())
    }

    /// [`Running::start`] with engine options of the test's choosing.
    pub fn start_with(dir: &Path, config: Config, opts: engine::Options) -> Running {
        let db = engine::DB::open(dir, opts).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(async {
                let s = Server::bind(&config, db).await?;
                tx.send((s.local_addr().unwrap(), s.shutdown_handle()))
                    .unwrap();
                s.run().await
            })
        });
        // A guard against a server that never binds; never reached when it works.
        let (addr, handle) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("server bound");
        Running {
            addr,
            handle,
            thread: Some(thread),
        }
    }

    /// Shuts the server down and waits for it; its result must be `Ok`.
    pub fn stop(self) {
        self.stop_result().unwrap();
    }

    /// Shuts the server down and waits for it, returning its result (an engine whose
    /// storage lost power fails to close).
    pub fn stop_result(mut self) -> anyhow::Result<()> {
        self.handle.shutdown();
        self.thread.take().unwrap().join().unwrap()
    }

    /// Waits for a server that stops by itself (`SHUTDOWN`); its result must be `Ok`.
    pub fn join(mut self) {
        self.thread.take().unwrap().join().unwrap().unwrap();
    }
}

/// A client that encodes commands by hand and decodes replies with `redis-protocol`.
pub struct Client {
    /// The socket, for tests that write raw bytes.
    pub s: TcpStream,
    buf: BytesMut,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client {
            s,
            buf: BytesMut::new(),
        }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.s.write_all(&out).unwrap();
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
