//! `PUBLISH` in cluster mode reaches the subscribers of every node, as Redis Cluster's bus
//! broadcasts it. There is no bus here (the topology comes from a controller), so each node
//! forwards a `PUBLISH` to every other node of the topology over a client connection of its
//! own, as `CLUSTERX PUBLISH channel message`, which delivers to local subscribers only
//! (no loop). Delivery is best effort, as Redis's: a peer that is down or slow loses the
//! messages that do not fit in its queue ([`QUEUE`]), counted in `INFO`'s
//! `cluster_publish_dropped`. `SPUBLISH` stays on the node that owns its slot.

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// Messages waiting for one peer at most; more are dropped.
const QUEUE: usize = 4096;

/// The connections to the other nodes, by address (`ip:port`).
#[derive(Default)]
pub struct Forwarder {
    peers: Mutex<HashMap<String, mpsc::Sender<(Bytes, Bytes)>>>,
    pub dropped: AtomicU64,
}

impl Forwarder {
    /// Forwards a `PUBLISH` of `channel` to the nodes at `addrs` (connections to nodes
    /// not among them are dropped), over connections started on `runtime` that
    /// authenticate with `password` (the nodes share one, as Kvrocks assumes).
    pub fn send(
        &self,
        addrs: Vec<String>,
        runtime: &tokio::runtime::Handle,
        password: Option<String>,
        channel: &Bytes,
        msg: &Bytes,
    ) {
        let mut peers = self.peers.lock();
        peers.retain(|a, tx| addrs.contains(a) && !tx.is_closed());
        for a in addrs {
            let tx = peers
                .entry(a.clone())
                .or_insert_with(|| start(runtime, password.clone(), a.clone()));
            if tx.try_send((channel.clone(), msg.clone())).is_err() {
                self.dropped.fetch_add(1, Relaxed);
            }
        }
    }
}

/// A task that keeps a connection to `addr` and sends it what comes on the queue.
fn start(
    runtime: &tokio::runtime::Handle,
    password: Option<String>,
    addr: String,
) -> mpsc::Sender<(Bytes, Bytes)> {
    let (tx, mut rx) = mpsc::channel::<(Bytes, Bytes)>(QUEUE);
    runtime.spawn(async move {
        while let Some(first) = rx.recv().await {
            let Ok(Ok(mut conn)) = tokio::time::timeout(
                Duration::from_secs(2),
                tokio::net::TcpStream::connect(&addr),
            )
            .await
            else {
                // Down: what waits is dropped with this message; the next one tries again.
                while rx.try_recv().is_ok() {}
                continue;
            };
            let mut out = BytesMut::new();
            if let Some(p) = &password {
                encode(&mut out, &[b"AUTH", p.as_bytes()]);
            }
            let mut next = Some(first);
            let mut sink = vec![0u8; 16 << 10];
            loop {
                if let Some((ch, m)) = next.take() {
                    encode(&mut out, &[b"CLUSTERX", b"PUBLISH", &ch, &m]);
                    while let Ok((ch, m)) = rx.try_recv() {
                        encode(&mut out, &[b"CLUSTERX", b"PUBLISH", &ch, &m]);
                    }
                    if conn.write_all_buf(&mut out).await.is_err() {
                        break;
                    }
                }
                // Replies are read and dropped, so that the peer never holds them for us.
                tokio::select! {
                    m = rx.recv() => match m {
                        Some(m) => next = Some(m),
                        None => return,
                    },
                    n = conn.read(&mut sink) => match n {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    },
                }
            }
        }
    });
    tx
}

/// A command as RESP.
fn encode(out: &mut BytesMut, words: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
    for w in words {
        out.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
        out.extend_from_slice(w);
        out.extend_from_slice(b"\r\n");
    }
}
