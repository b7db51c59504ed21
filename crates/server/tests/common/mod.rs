//! The server in-process on an ephemeral port, for the integration tests (each test file
//! is its own crate; `mod common;` shares this).

pub mod client;

use halflife_server::{Config, Server};
use std::net::SocketAddr;
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
        let db = engine::DB::open(dir, engine::Options::default()).unwrap();
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
        self.handle.shutdown();
        self.join();
    }

    /// Waits for a server that stops by itself (`SHUTDOWN`); its result must be `Ok`.
    pub fn join(mut self) {
        self.thread.take().unwrap().join().unwrap().unwrap();
    }
}
