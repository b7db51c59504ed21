//! Operations as the benchmark clients execute them, and the batches they travel in.
//!
//! Ops are generated (or read from an op file) on one producer thread and handed to the
//! client threads in batches over a bounded channel, so generation overlaps the run, memory
//! stays bounded, and generation cost is not counted in any op's latency.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

/// Op codes, also indices into [`super::latency::OP_NAMES`] and the op-file codes.
pub const INSERT: u8 = 0;
pub const UPDATE: u8 = 1;
pub const READ: u8 = 2;
pub const SCAN: u8 = 3;
pub const RMW: u8 = 4;
pub const DELETE: u8 = 5;
pub const EXPIRING_UPDATE: u8 = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientOp {
    pub code: u8,
    pub key: u64,
    /// Scan length (0 for other ops).
    pub len: u32,
    /// An expiring update's time to live in ticks, one per op (0 for other ops; see
    /// [`crate::client::Expiry`]).
    pub ttl: u32,
}

impl ClientOp {
    /// An op of `code` on `key` that is neither a scan nor an expiring update.
    pub fn on(code: u8, key: u64) -> ClientOp {
        ClientOp {
            code,
            key,
            len: 0,
            ttl: 0,
        }
    }
}

impl From<workload::Op> for ClientOp {
    fn from(op: workload::Op) -> ClientOp {
        let len = match op {
            workload::Op::Scan { len, .. } => len,
            _ => 0,
        };
        ClientOp {
            code: op.code(),
            key: op.key(),
            len,
            ttl: op.ttl().unwrap_or(0),
        }
    }
}

pub const BATCH: usize = 1024;

/// The ops of a load phase: an insert of every key number below `records`, in order.
pub fn load(records: u64) -> impl Iterator<Item = anyhow::Result<ClientOp>> + Send + 'static {
    (0..records).map(|key| Ok(ClientOp::on(INSERT, key)))
}

/// The receiving end shared by the client threads.
pub type SharedReceiver = Arc<Mutex<Receiver<Vec<ClientOp>>>>;

/// Starts a producer thread that batches `ops` into a channel; returns the receiver and the
/// producer's handle (which returns the number of ops produced, or the source's error).
pub fn produce<I>(
    ops: I,
    clients: usize,
) -> (SharedReceiver, std::thread::JoinHandle<anyhow::Result<u64>>)
where
    I: Iterator<Item = anyhow::Result<ClientOp>> + Send + 'static,
{
    let (tx, rx): (SyncSender<Vec<ClientOp>>, _) = sync_channel(4 * clients.max(1));
    let handle = std::thread::Builder::new()
        .name("op-producer".into())
        .spawn(move || {
            let mut n = 0u64;
            let mut batch = Vec::with_capacity(BATCH);
            for op in ops {
                batch.push(op?);
                n += 1;
                if batch.len() == BATCH
                    && tx
                        .send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))
                        .is_err()
                {
                    return Ok(n); // clients stopped (an error there is reported by them)
                }
            }
            if !batch.is_empty() {
                let _ = tx.send(batch);
            }
            Ok(n)
        })
        .expect("spawning the op producer");
    (Arc::new(Mutex::new(rx)), handle)
}

/// The next batch for a client, `None` when the producer is done.
pub fn next_batch(rx: &SharedReceiver) -> Option<Vec<ClientOp>> {
    rx.lock().ok()?.recv().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_reach_every_client_once() {
        let ops = (0..5000u64).map(|k| Ok(ClientOp::on(INSERT, k)));
        let (rx, producer) = produce(ops, 3);
        let clients: Vec<_> = (0..3)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || {
                    let mut keys = Vec::new();
                    while let Some(b) = next_batch(&rx) {
                        keys.extend(b.iter().map(|o| o.key));
                    }
                    keys
                })
            })
            .collect();
        let mut all: Vec<u64> = clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..5000).collect::<Vec<_>>());
        assert_eq!(producer.join().unwrap().unwrap(), 5000);
    }
}
