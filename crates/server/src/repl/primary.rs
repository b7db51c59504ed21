//! The primary's side of a replica's connection, from its `PSYNC` on.
//!
//! `PSYNC <replid> <offset> [<seq>]` continues from the backlog when `replid` is this
//! history's and the bytes from `offset` are still held (`+CONTINUE`). Otherwise, when the
//! replica sent the primary sequence number its data holds, `replid` is a history this
//! data still holds up to that number ([`super::history`]) and the WAL holds every write
//! after it, the primary sends those writes read back from the WAL, then the stream from
//! the offset where they end (`+WALCONTINUE`, [`catch_up_from`]). Otherwise it makes a
//! full sync: it checkpoints the database with writes held off (so the checkpoint is the
//! stream before an offset exactly, [`crate::store::Store::checkpoint_at_offset`]), sends
//! `+FULLRESYNC <replid> <offset>`, the checkpoint's files ([`wire`]'s framing, each with
//! its crc32c) and deletes the checkpoint. Then it sends the stream from that offset, read
//! from the backlog, as it grows, and reads the replica's `REPLCONF ACK`s.
//!
//! No per-replica buffer exists: a replica that falls more than `repl-backlog-size`
//! behind (during a long file transfer, or reading slowly) finds its next bytes gone, is
//! dropped, and syncs again when it reconnects.

use super::files;
use crate::protocol::{self, Limits};
use crate::repl_log::{wire, Gap};
use crate::shared::Shared;
use bytes::{Bytes, BytesMut};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

/// Stream bytes sent in one write at most.
const CHUNK: usize = 1 << 20;

/// What a replica may send once streaming: `REPLCONF ACK <offset>` (a small request).
const ACK_LIMITS: Limits = Limits {
    max_args: 8,
    max_bulk: 64,
    max_request: 1024,
    unauthenticated: false,
};

/// How often a primary with replicas puts a `PING` in the stream (Redis's
/// `repl-ping-replica-period`), so that a replica of an idle primary hears from it well
/// within its timeout.
const PING_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Pings the replicas through the stream while the server runs.
pub async fn ping_replicas(sh: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(PING_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if sh.repl.has_peers() {
            // The log's lock may be held by a checkpoint for a while: not on this thread.
            let s = sh.clone();
            let _ = tokio::task::spawn_blocking(move || s.store.log_command(&[b"PING"])).await;
        }
    }
}

/// Who is asking: the connection's id, address and `REPLCONF listening-port`.
pub struct Asker {
    pub id: u64,
    pub ip: String,
    pub port: u16,
}

/// Serves a replica that sent `PSYNC args` until it goes away, the server shuts down or
/// the role changes. `input` holds what the replica sent after its `PSYNC`.
pub async fn serve<R, W>(
    sh: &Arc<Shared>,
    rd: &mut R,
    wr: &mut W,
    input: BytesMut,
    who: Asker,
    args: &[Bytes],
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    if sh.repl.primary().is_some() {
        wr.write_all(b"-ERR a halflife replica serves no replicas (no chained replication)\r\n")
            .await?;
        return Ok(());
    }
    let gen = sh.repl.gen();
    let (replid, offset, seq) = match args {
        [id, off, rest @ ..] if rest.len() <= 1 => (
            String::from_utf8_lossy(id).into_owned(),
            std::str::from_utf8(off)
                .ok()
                .and_then(|o| o.parse::<i64>().ok()),
            rest.first(),
        ),
        _ => {
            wr.write_all(b"-ERR wrong number of arguments for 'psync' command\r\n")
                .await?;
            return Ok(());
        }
    };
    let seq = match seq.map(|s| wire::parse_number(s, "sequence number in PSYNC")) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            wr.write_all(format!("-ERR {e}\r\n").as_bytes()).await?;
            return Ok(());
        }
    };
    sh.repl.add_peer(who.id, who.ip.clone(), who.port);
    let _peer = PeerGuard(sh, who.id);
    // PSYNC's offset is the first byte wanted, 1-based as Redis's: the stream after
    // `offset - 1` bytes.
    let wanted = offset
        .and_then(|o| o.checked_sub(1))
        .and_then(|o| u64::try_from(o).ok());
    let cont = wanted.is_some_and(|w| sh.store.log().can_continue(&replid, w));
    let catch_up = match (cont, seq) {
        (false, Some(seq)) => {
            let (s, id) = (sh.clone(), replid.clone());
            tokio::task::spawn_blocking(move || catch_up_from(&s, &id, seq))
                .await
                .map_err(io::Error::other)?
        }
        _ => None,
    };
    let how;
    let from = if let (true, Some(w)) = (cont, wanted) {
        sh.repl.stats.partial_ok.fetch_add(1, Relaxed);
        let id = sh.store.log().replid().to_string();
        wr.write_all(format!("+CONTINUE {id}\r\n").as_bytes())
            .await?;
        how = "partial resync from the backlog";
        w
    } else if let Some(c) = catch_up {
        sh.repl.stats.partial_ok.fetch_add(1, Relaxed);
        sh.repl.stats.partial_wal.fetch_add(1, Relaxed);
        how = "partial resync from the WAL";
        send_wal(wr, c).await?
    } else {
        if replid != "?" {
            sh.repl.stats.partial_err.fetch_add(1, Relaxed);
        }
        sh.repl.stats.full.fetch_add(1, Relaxed);
        how = "full sync";
        full_sync(sh, wr, who.id).await?
    };
    sh.repl.set_peer_state(who.id, "online");
    tracing::info!(
        "replication: replica {}:{} streaming from offset {from} ({how})",
        who.ip,
        who.port,
    );
    stream(sh, rd, wr, input, who.id, from, gen, &mut shutdown).await
}

/// A replica's continuation from the WAL, once it is known to be possible.
struct CatchUp {
    replid: String,
    /// The stream continues from `offset`, which holds exactly the writes after `end`.
    offset: u64,
    end: u64,
    /// The writes still to send: the first entry, read before answering, and the rest.
    first: Option<Vec<u8>>,
    rest: WalEntries,
}

/// The `HLBATCH` entries of the WAL after the replica's sequence number `after`, up to
/// `end`, each with the primary's sequence number it begins at: the replica holds every
/// write of data of the batches that begin at or before a number it holds.
struct WalEntries {
    updates: engine::db::updates::Updates,
    after: u64,
    end: u64,
}

impl WalEntries {
    fn next_entry(&mut self) -> engine::Result<Option<Vec<u8>>> {
        for u in self.updates.by_ref() {
            let (first, batch) = u?;
            if first > self.end {
                break;
            }
            if first <= self.after {
                continue;
            }
            let ops = crate::store::stream_ops(&batch);
            if ops.is_empty() {
                continue;
            }
            let mut entry = wire::batch_head(&ops);
            wire::push_arg(&mut entry, first.to_string().as_bytes());
            return Ok(Some(entry));
        }
        Ok(None)
    }
}

/// Whether a replica that holds the writes of data of history `replid` up to sequence
/// number `seq` can continue from the WAL: the history must still be this data's up to
/// `seq` ([`super::history`]: a replica ahead of what a restart recovered holds writes
/// this primary lost, and must copy anew), and the WAL must still hold every write after
/// it. Then the log is active from the returned offset on.
///
/// The first entry to send is read before the answer: a write the WAL can no longer give
/// (its WAL dropped by the retention, its value file collected) ends a continuation that
/// already sent what came before it, and the replica, asking again from there, meets it
/// first and gets a full sync instead of the same continuation forever.
fn catch_up_from(sh: &Shared, replid: &str, seq: u64) -> Option<CatchUp> {
    let shared = sh.store.log().history().shared_until(replid)?;
    if seq > shared {
        tracing::info!("replication: a replica holds writes up to sequence number {seq} of a history this database holds only up to {shared}: full sync");
        return None;
    }
    let _c = sh.store.command_lock();
    let (offset, end) = sh.store.stream_point();
    if seq > end {
        return None;
    }
    let replid = sh.store.log().replid().to_string();
    let mut rest = match sh.store.db().updates_since(seq.saturating_add(1)) {
        Ok(updates) => WalEntries {
            updates,
            after: seq,
            end,
        },
        Err(e) => {
            tracing::warn!("replication: cannot continue a replica from the WAL: {e}");
            return None;
        }
    };
    match rest.next_entry() {
        Ok(first) => Some(CatchUp {
            replid,
            offset,
            end,
            first,
            rest,
        }),
        Err(e) => {
            tracing::warn!("replication: cannot continue a replica from the WAL: {e}");
            None
        }
    }
}

/// Sends `+WALCONTINUE`, the writes after the replica's sequence number as `HLBATCH`
/// entries read back from the WAL, and [`wire::CAUGHT_UP`]; returns the offset the
/// stream goes on from. The WAL is read on a blocking thread, a chunk at a time; a write
/// it can no longer give ends the connection ([`catch_up_from`]).
async fn send_wal<W: AsyncWrite + Unpin>(wr: &mut W, c: CatchUp) -> io::Result<u64> {
    wr.write_all(format!("+WALCONTINUE {} {} {}\r\n", c.replid, c.offset, c.end).as_bytes())
        .await?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<io::Result<Vec<u8>>>(2);
    let (mut chunk, mut rest) = (c.first.unwrap_or_default(), c.rest);
    let reader = tokio::task::spawn_blocking(move || {
        loop {
            match rest.next_entry() {
                Ok(Some(entry)) => chunk.extend_from_slice(&entry),
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.blocking_send(Err(io::Error::other(e)));
                    return;
                }
            }
            if chunk.len() >= CHUNK && tx.blocking_send(Ok(std::mem::take(&mut chunk))).is_err() {
                return;
            }
        }
        chunk.extend_from_slice(&wire::command(&[wire::CAUGHT_UP.as_bytes()]));
        let _ = tx.blocking_send(Ok(chunk));
    });
    while let Some(chunk) = rx.recv().await {
        wr.write_all(&chunk?).await?;
    }
    reader.await.map_err(io::Error::other)?;
    Ok(c.offset)
}

/// Takes a replica off the list when its connection ends, however it ends.
struct PeerGuard<'a>(&'a Shared, u64);

impl Drop for PeerGuard<'_> {
    fn drop(&mut self) {
        self.0.repl.remove_peer(self.1);
    }
}

/// Deletes a checkpoint made for one replica once it is sent (or the send failed).
struct CheckpointDir(PathBuf);

impl Drop for CheckpointDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Checkpoints, sends `+FULLRESYNC` and the files; returns the offset the stream goes on
/// from.
async fn full_sync<W: AsyncWrite + Unpin>(
    sh: &Arc<Shared>,
    wr: &mut W,
    id: u64,
) -> io::Result<u64> {
    let data = sh.store.db().path().to_path_buf();
    let dir = CheckpointDir(super::install::sibling(&data, &format!("repl-{id}")));
    let path = dir.0.clone();
    let s = sh.clone();
    let started = std::time::Instant::now();
    let (replid, offset, seq) = tokio::task::spawn_blocking(move || {
        let _c = s.store.command_lock();
        let _ = std::fs::remove_dir_all(&path);
        s.store.checkpoint_at_offset(&path)
    })
    .await
    .map_err(io::Error::other)?
    .map_err(io::Error::other)?;
    let checkpointed = started.elapsed();
    wr.write_all(format!("+FULLRESYNC {replid} {offset} {seq}\r\n").as_bytes())
        .await?;
    sh.repl.set_peer_state(id, "send_bulk");
    send_files(&dir.0, wr).await?;
    tracing::info!(
        "replication: full sync to replica {id}: checkpoint in {:.3} s, sent in {:.3} s",
        checkpointed.as_secs_f64(),
        (started.elapsed() - checkpointed).as_secs_f64()
    );
    Ok(offset)
}

/// The files of `dir` (a checkpoint: plain files only), by name.
fn list(dir: &Path) -> io::Result<Vec<(String, u64)>> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.file_type()?.is_file() || !wire::valid_name(name.as_bytes()) {
            return Err(io::Error::other(format!(
                "checkpoint holds {name:?}, which the transfer cannot carry"
            )));
        }
        files.push((name, e.metadata()?.len()));
    }
    files.sort();
    Ok(files)
}

/// Sends the checkpoint in `dir` in [`wire`]'s framing: a blocking thread reads it
/// ([`files::read_files`], a few chunks ahead), this task writes the chunks to the socket
/// and hands each buffer back for reuse.
async fn send_files<W: AsyncWrite + Unpin>(dir: &Path, wr: &mut W) -> io::Result<()> {
    let d = dir.to_path_buf();
    let listed = tokio::task::spawn_blocking(move || list(&d))
        .await
        .map_err(io::Error::other)??;
    let (chunks, mut full) = tokio::sync::mpsc::channel::<Vec<u8>>(files::AHEAD);
    let (empty, reuse) = std::sync::mpsc::sync_channel::<Vec<u8>>(files::AHEAD + 2);
    let d = dir.to_path_buf();
    let reader =
        tokio::task::spawn_blocking(move || files::read_files(&d, &listed, &chunks, &reuse));
    while let Some(chunk) = full.recv().await {
        // A failed write drops `full`: the reader stops at its next chunk.
        wr.write_all(&chunk).await?;
        let _ = empty.try_send(chunk);
    }
    reader.await.map_err(io::Error::other)??;
    wr.flush().await
}

/// Sends the stream from `from` as it grows; reads `REPLCONF ACK`s.
#[allow(clippy::too_many_arguments)]
async fn stream<R, W>(
    sh: &Arc<Shared>,
    rd: &mut R,
    wr: &mut W,
    mut input: BytesMut,
    id: u64,
    mut from: u64,
    gen: u64,
    shutdown: &mut watch::Receiver<bool>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut grew = sh.store.log().subscribe();
    let mut role = sh.repl.watch_gen();
    let mut decoder = protocol::Decoder::new();
    loop {
        grew.borrow_and_update();
        loop {
            let chunk = sh.store.log().read(from, CHUNK);
            match chunk {
                Ok(c) if c.is_empty() => break,
                Ok(c) => {
                    wr.write_all(&c).await?;
                    from += c.len() as u64;
                }
                Err(Gap::Overrun) => {
                    tracing::warn!("replication: replica {id} fell more than repl-backlog-size behind; dropped (it will sync again)");
                    return Ok(());
                }
                Err(Gap::Ahead) => return Ok(()),
            }
        }
        // ACKs already read.
        loop {
            match decoder.next(&mut input, &ACK_LIMITS) {
                Ok(Some(cmd)) => {
                    if cmd.len() == 3
                        && cmd[0].eq_ignore_ascii_case(b"replconf")
                        && cmd[1].eq_ignore_ascii_case(b"ack")
                    {
                        if let Some(off) = std::str::from_utf8(&cmd[2])
                            .ok()
                            .and_then(|o| o.parse::<u64>().ok())
                        {
                            sh.repl.peer_acked(id, off.min(from));
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("replication: replica {id}: {e}; dropped");
                    return Ok(());
                }
            }
        }
        input.reserve(4096);
        tokio::select! {
            r = grew.changed() => if r.is_err() { return Ok(()) },
            n = rd.read_buf(&mut input) => if n? == 0 { return Ok(()) },
            _ = role.changed() => if *role.borrow() != gen { return Ok(()) },
            _ = shutdown.changed() => return Ok(()),
        }
    }
}
