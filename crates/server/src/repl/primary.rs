//! The primary's side of a replica's connection, from its `PSYNC` on.
//!
//! `PSYNC <replid> <offset>` continues from the backlog when `replid` is this history's
//! and the bytes from `offset` are still held (`+CONTINUE`); otherwise the primary makes a
//! full sync: it checkpoints the database with writes held off (so the checkpoint is the
//! stream before an offset exactly, [`crate::store::Store::checkpoint_at_offset`]), sends
//! `+FULLRESYNC <replid> <offset>`, the checkpoint's files ([`wire`]'s framing, each with
//! its crc32c) and deletes the checkpoint. Then it sends the stream from that offset, read
//! from the backlog, as it grows, and reads the replica's `REPLCONF ACK`s.
//!
//! No per-replica buffer exists: a replica that falls more than `repl-backlog-size`
//! behind (during a long file transfer, or reading slowly) finds its next bytes gone, is
//! dropped, and syncs again when it reconnects.

use super::{log::Gap, wire};
use crate::protocol::{self, Limits};
use crate::server::Shared;
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
    let (replid, offset) = match args {
        [id, off] => (
            String::from_utf8_lossy(id).into_owned(),
            std::str::from_utf8(off)
                .ok()
                .and_then(|o| o.parse::<i64>().ok()),
        ),
        _ => {
            wr.write_all(b"-ERR wrong number of arguments for 'psync' command\r\n")
                .await?;
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
    let from = if let (true, Some(w)) = (cont, wanted) {
        sh.repl.stats.partial_ok.fetch_add(1, Relaxed);
        let id = sh.store.log().replid().to_string();
        wr.write_all(format!("+CONTINUE {id}\r\n").as_bytes())
            .await?;
        w
    } else {
        if replid != "?" {
            sh.repl.stats.partial_err.fetch_add(1, Relaxed);
        }
        sh.repl.stats.full.fetch_add(1, Relaxed);
        full_sync(sh, wr, who.id).await?
    };
    sh.repl.set_peer_state(who.id, "online");
    eprintln!(
        "halflife serve: replication: replica {}:{} streaming from offset {from} ({})",
        who.ip,
        who.port,
        if cont { "partial resync" } else { "full sync" }
    );
    stream(sh, rd, wr, input, who.id, from, gen, &mut shutdown).await
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
    let (replid, offset) = tokio::task::spawn_blocking(move || {
        let _c = s.store.command_lock();
        let _ = std::fs::remove_dir_all(&path);
        s.store.checkpoint_at_offset(&path)
    })
    .await
    .map_err(io::Error::other)?
    .map_err(io::Error::other)?;
    wr.write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())
        .await?;
    sh.repl.set_peer_state(id, "send_bulk");
    send_files(&dir.0, wr).await?;
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

async fn send_files<W: AsyncWrite + Unpin>(dir: &Path, wr: &mut W) -> io::Result<()> {
    let d = dir.to_path_buf();
    let files = tokio::task::spawn_blocking(move || list(&d))
        .await
        .map_err(io::Error::other)??;
    let total = files.iter().map(|(_, s)| s).sum();
    wr.write_all(&wire::sync_header(files.len() as u32, total))
        .await?;
    let mut buf = vec![0u8; 256 << 10];
    for (name, size) in files {
        wr.write_all(&wire::file_header(&name, size)).await?;
        let mut f = tokio::fs::File::open(dir.join(&name)).await?;
        let (mut left, mut crc) = (size, 0u32);
        while left > 0 {
            let want = (buf.len() as u64).min(left) as usize;
            let n = f.read(&mut buf[..want]).await?;
            if n == 0 {
                return Err(io::Error::other(format!(
                    "checkpoint file {name} shrank while being sent"
                )));
            }
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            wr.write_all(&buf[..n]).await?;
            left -= n as u64;
        }
        wr.write_all(&wire::file_trailer(crc)).await?;
    }
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
                    eprintln!("halflife serve: replication: replica {id} fell more than repl-backlog-size behind; dropped (it will sync again)");
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
                    eprintln!("halflife serve: replication: replica {id}: {e}; dropped");
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
