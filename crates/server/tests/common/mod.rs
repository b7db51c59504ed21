//! The server in-process on an ephemeral port, and a minimal client ([`client`]), for the
//! integration tests (each test file is its own crate; `mod common;` shares this, and each
//! uses part of it, hence `dead_code` allowed).
#![allow(dead_code)]

pub mod client;

use halflife_server::{AppendFsync, Config, Server};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use testkit::powercut::{CutConfig, Moment, PowerCutStorage};

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

    /// [`Running::start`] over a storage that loses, at `moment` or at its `cut()`, every
    /// byte not synced and every directory entry whose directory was not synced (a power
    /// cut; `shadow` holds what it set aside). After the cut, `stop_result` fails (the
    /// engine cannot close) and the storage's `apply()` leaves `dir` as the disk would be.
    pub fn start_power_cut(
        dir: &Path,
        shadow: &Path,
        seed: u64,
        moment: Moment,
        config: Config,
    ) -> (Running, Arc<PowerCutStorage>) {
        let storage = PowerCutStorage::new(
            seed,
            moment,
            CutConfig {
                lose_dir_entries: true,
                keep_unsynced: false,
            },
            shadow,
        );
        let opts = engine::Options {
            storage: Some(storage.clone()),
            ..engine::Options::default()
        };
        (Running::start_with(dir, config, opts), storage)
    }

    /// Cuts the power under the server now (every byte and directory entry not synced is
    /// lost), stops it and leaves its directory as the disk would hold it. The stop must
    /// fail: an engine whose storage lost power cannot close, or the cut missed it. Drop
    /// the server's clients first (a shutdown waits for them).
    pub fn cut_power(self, storage: &PowerCutStorage) {
        storage.cut();
        assert!(
            self.stop_result().is_err(),
            "the engine closed after the power cut"
        );
        storage.apply();
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

/// A server in a fresh directory under `appendfsync always` (every acknowledged write was
/// synced before its reply) on a storage that loses power at `moment` or at
/// [`AlwaysCut::restart`]: the power-cut cases' common setup.
pub struct AlwaysCut {
    dir: tempfile::TempDir,
    _shadow: tempfile::TempDir,
    pub storage: Arc<PowerCutStorage>,
    config: Config,
}

impl AlwaysCut {
    /// Starts the server: `base` with `appendfsync always`, the storage's losses drawn
    /// from `seed`.
    pub fn start(base: Config, seed: u64, moment: Moment) -> (AlwaysCut, Running) {
        let (dir, shadow) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let config = Config {
            appendfsync: AppendFsync::Always,
            ..base
        };
        let (srv, storage) =
            Running::start_power_cut(dir.path(), shadow.path(), seed, moment, config.clone());
        let cut = AlwaysCut {
            dir,
            _shadow: shadow,
            storage,
            config,
        };
        (cut, srv)
    }

    /// Cuts the power under `srv` ([`Running::cut_power`]) and starts a server on what
    /// the disk then holds.
    pub fn restart(&self, srv: Running) -> Running {
        srv.cut_power(&self.storage);
        Running::start(self.dir.path(), self.config.clone())
    }
}
