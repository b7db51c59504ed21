//! A replica's link to its primary: connect, authenticate (`masterauth`),
//! `REPLCONF listening-port`, `PSYNC` with the stored position, then either receive a
//! full sync and install it ([`super::install`]), or continue (from the primary's
//! backlog, or first from its WAL: `+WALCONTINUE`), and apply the stream.
//!
//! Each applied group of stream entries is one engine batch holding the primary's records
//! and the replica's new position ([`crate::record::REPL_KEY`]), so the position on disk
//! always names exactly the writes the database holds. The link acknowledges its offset
//! every second and when the stream asks (`REPLCONF GETACK`). Any failure drops the
//! connection, is reported by `INFO replication` (`master_sync_last_error`) and retried a
//! second later; a change of role or a shutdown ends the task.

use super::files::{self, ToDisk};
use crate::protocol::{self, Limits};
use crate::record;
use crate::repl_log::wire::{self, Answer, Event, SyncDecoder};
use crate::repl_state::{LinkState, Position};
use crate::shared::Shared;
use bytes::{Bytes, BytesMut};
use engine::WriteBatch;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// A link silent this long is considered dead: a primary pings its replicas every 10 s,
/// and sends nothing while it takes a checkpoint, so this is generous.
const IDLE: Duration = Duration::from_secs(120);
/// Stream entries applied in one engine batch at most (outside a transaction).
const GROUP: usize = 1024;

/// What the stream may hold: `HLBATCH` with a batch as large as a request may make, and
/// small commands.
fn stream_limits(sh: &Shared) -> Limits {
    let max = sh
        .settings
        .max_request_bytes()
        .saturating_mul(2)
        .max(1 << 20);
    Limits {
        max_args: 8,
        max_bulk: max,
        max_request: max.saturating_add(64),
        unauthenticated: false,
    }
}

/// The link task of generation `gen`: runs sessions until the role changes or the server
/// shuts down.
pub async fn run(sh: Arc<Shared>, host: String, port: u16, gen: u64) {
    let mut role = sh.repl.watch_gen();
    let mut shutdown = sh.shutdown_signal();
    loop {
        if *role.borrow_and_update() != gen || *shutdown.borrow() {
            return;
        }
        let r = tokio::select! {
            r = session(&sh, &host, port, gen) => r,
            _ = role.changed() => continue,
            _ = shutdown.changed() => return,
        };
        if let Err(e) = r {
            tracing::warn!("replication: link to {host}:{port}: {e}");
            sh.repl.link_failed(gen, e);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = role.changed() => {}
            _ = shutdown.changed() => return,
        }
    }
}

struct Conn {
    rd: OwnedReadHalf,
    wr: OwnedWriteHalf,
    buf: BytesMut,
}

impl Conn {
    /// Reads more bytes, failing on EOF or a silence of [`IDLE`].
    async fn fill(&mut self) -> Result<(), String> {
        self.fill_with(64 << 10).await
    }

    /// [`Conn::fill`] with room for `room` bytes.
    async fn fill_with(&mut self, room: usize) -> Result<(), String> {
        self.buf.reserve(room);
        match tokio::time::timeout(IDLE, self.rd.read_buf(&mut self.buf)).await {
            Err(_) => Err(format!("the primary sent nothing for {} s", IDLE.as_secs())),
            Ok(Err(e)) => Err(format!("reading from the primary: {e}")),
            Ok(Ok(0)) => Err("the primary closed the connection".into()),
            Ok(Ok(_)) => Ok(()),
        }
    }

    async fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(l) = wire::take_line(&mut self.buf).map_err(|e| e.to_string())? {
                return Ok(String::from_utf8_lossy(&l).into_owned());
            }
            self.fill().await?;
        }
    }

    async fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        self.wr
            .write_all(&wire::command(args))
            .await
            .map_err(|e| format!("writing to the primary: {e}"))
    }

    /// Sends a command and expects `+...` back.
    async fn ask(&mut self, args: &[&[u8]]) -> Result<String, String> {
        self.send(args).await?;
        let l = self.line().await?;
        if l.starts_with('+') {
            Ok(l)
        } else {
            Err(format!(
                "the primary answered {} with: {l}",
                String::from_utf8_lossy(args[0])
            ))
        }
    }
}

/// One connection: handshake, sync, stream, until something fails.
async fn session(sh: &Arc<Shared>, host: &str, port: u16, gen: u64) -> Result<(), String> {
    sh.repl.set_link_state(gen, LinkState::Connecting);
    let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect((host, port)))
        .await
        .map_err(|_| "connecting timed out".to_string())?
        .map_err(|e| format!("connecting: {e}"))?;
    stream.set_nodelay(true).ok();
    let (rd, wr) = stream.into_split();
    let mut c = Conn {
        rd,
        wr,
        buf: BytesMut::new(),
    };
    if let Some(pw) = sh.settings.masterauth() {
        // Redis's words, which operators (and Redis's tests) look for in the log.
        c.ask(&[b"AUTH", pw.as_bytes()])
            .await
            .map_err(|e| format!("Unable to AUTH to MASTER: {e}"))?;
    }
    let port_s = sh.tcp_port.to_string();
    c.ask(&[b"REPLCONF", b"listening-port", port_s.as_bytes()])
        .await?;
    c.ask(&[b"REPLCONF", b"capa", b"psync2"]).await?;
    let s = sh.clone();
    let stored = tokio::task::spawn_blocking(move || {
        let _c = s.store.command_lock();
        s.store.db().get(record::REPL_KEY)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("reading the stored position: {e}"))?
    .and_then(|v| crate::repl_state::Position::decode(&v));
    // `PSYNC <replid> <offset + 1> [<seq>]`: the offset as Redis's replicas send it (-1:
    // none), and halflife's primary sequence number, from which a primary that cannot
    // continue from its backlog may continue from its WAL.
    let mut psync: Vec<Vec<u8>> = vec![b"PSYNC".to_vec()];
    match &stored {
        Some(p) => {
            psync.push(p.replid.clone().into_bytes());
            psync.push(match p.offset {
                Some(o) => o.saturating_add(1).to_string().into_bytes(),
                None => b"-1".to_vec(),
            });
            if let Some(seq) = p.seq {
                psync.push(seq.to_string().into_bytes());
            }
        }
        None => psync.extend([b"?".to_vec(), b"-1".to_vec()]),
    }
    let args: Vec<&[u8]> = psync.iter().map(Vec::as_slice).collect();
    c.send(&args).await?;
    let reply = c.line().await?;
    let answer = wire::parse_answer(&reply)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the primary refused PSYNC: {reply}"))?;
    let pos = match answer {
        Answer::Full {
            replid,
            offset,
            seq,
        } => {
            sh.repl.set_link_state(gen, LinkState::Sync);
            let pos = Position {
                replid,
                offset: Some(offset),
                seq,
            };
            receive(sh, &mut c, &pos, gen).await?;
            Stream::at(pos)
        }
        Answer::Continue { replid } => {
            let old = stored.ok_or("+CONTINUE to a replica that asked for none")?;
            let offset = old
                .offset
                .ok_or("+CONTINUE to a replica that asked for no offset")?;
            Stream::at(Position {
                replid: replid.unwrap_or(old.replid),
                offset: Some(offset),
                seq: old.seq,
            })
        }
        Answer::Wal {
            replid,
            offset,
            seq,
        } => {
            let old = stored
                .filter(|p| p.seq.is_some())
                .ok_or("+WALCONTINUE to a replica that asked with no sequence number")?;
            Stream {
                pos: Position {
                    replid,
                    offset: None,
                    seq: old.seq,
                },
                offset: old.offset.unwrap_or(0),
                catching_up: Some((offset, seq)),
            }
        }
    };
    sh.repl.set_position(gen, &pos.pos.replid, pos.offset);
    sh.repl.set_link_state(gen, LinkState::Connected);
    match pos.catching_up {
        Some(_) => tracing::info!(
            "replication: catching up from the WAL of {host}:{port} after sequence number {}",
            pos.pos.seq.unwrap_or(0)
        ),
        None => tracing::info!(
            "replication: streaming from {host}:{port} at offset {}",
            pos.offset
        ),
    }
    apply_stream(sh, &mut c, pos, gen).await
}

/// Where the applied stream stands.
#[derive(Clone, Debug)]
struct Stream {
    /// What the next engine batch records.
    pos: Position,
    /// The stream's offset (while catching up, the last one known, for INFO).
    offset: u64,
    /// While the writes read back from the primary's WAL arrive: the offset and the
    /// sequence number the stream goes on from after [`wire::CAUGHT_UP`].
    catching_up: Option<(u64, u64)>,
}

impl Stream {
    fn at(pos: Position) -> Stream {
        Stream {
            offset: pos.offset.unwrap_or(0),
            pos,
            catching_up: None,
        }
    }
}

/// Receives the files of a full sync into a fresh directory and installs them.
async fn receive(sh: &Arc<Shared>, c: &mut Conn, pos: &Position, gen: u64) -> Result<(), String> {
    let data = sh.store.db().path().to_path_buf();
    let dir = tokio::task::spawn_blocking(move || super::install::incoming(&data))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("preparing the sync directory: {e}"))?;
    let started = std::time::Instant::now();
    let received = transfer(c, &dir).await;
    let transferred = started.elapsed();
    let (s, p) = (sh.clone(), pos.clone());
    let d = dir.clone();
    let installed = match received {
        Ok(bytes) => tokio::task::spawn_blocking(move || super::install::install(&s, &d, &p, gen))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| format!("installing the full sync: {e}")))
            .map(|()| bytes),
        Err(e) => Err(e),
    };
    if installed.is_err() {
        // What arrived of a failed sync is of no use.
        let _ = tokio::fs::remove_dir_all(&dir).await;
    }
    let bytes = installed?;
    // The two phases' times, for an operator (and `scripts/nodes-bench.py`) to see where
    // a full sync's time goes.
    let secs = transferred.as_secs_f64();
    tracing::info!(
        "replication: full sync installed at offset {}: {bytes} bytes received in {secs:.3} s ({:.0} MiB/s), installed in {:.3} s",
        pos.offset.unwrap_or(0),
        bytes as f64 / secs.max(1e-9) / f64::from(1 << 20),
        (started.elapsed() - transferred).as_secs_f64()
    );
    Ok(())
}

/// Buffer space a read from the primary asks for during a transfer: the files' bytes go
/// to disk in pieces of up to this size.
const TRANSFER_READ: usize = 1 << 20;

/// Receives the transfer's files into `dir`, each synced as it ends, and returns the bytes
/// written: this task reads the socket and checks the framing and each file's crc32c
/// ([`SyncDecoder`]), a blocking thread writes the files ([`files::write_files`]), a few
/// pieces behind.
async fn transfer(c: &mut Conn, dir: &std::path::Path) -> Result<u64, String> {
    let (tx, rx) = tokio::sync::mpsc::channel(files::AHEAD);
    let d = dir.to_path_buf();
    let writer = tokio::task::spawn_blocking(move || files::write_files(&d, rx));
    let received = receive_files(c, &tx).await;
    drop(tx);
    let written = writer.await.map_err(|e| e.to_string())?;
    // When the writer failed, the receiving stopped for that reason.
    let bytes = written?;
    received.map(|()| bytes)
}

/// Reads the transfer off the socket, hands its pieces to the writer thread, and checks
/// them on the way ([`SyncDecoder`]).
async fn receive_files(c: &mut Conn, tx: &tokio::sync::mpsc::Sender<ToDisk>) -> Result<(), String> {
    let mut dec = SyncDecoder::new();
    let mut spare = Buffers::default();
    loop {
        while let Some(ev) = dec.next(&mut c.buf).map_err(|e| e.to_string())? {
            let piece = match ev {
                Event::Start { .. } => continue,
                Event::File { name, .. } => ToDisk::Create(name),
                Event::Data(b) => ToDisk::Data(b),
                Event::FileEnd => ToDisk::End,
                Event::Done => return Ok(()),
            };
            if tx.send(piece).await.is_err() {
                return Err("the file writer stopped".into());
            }
        }
        spare.swap_in(&mut c.buf, TRANSFER_READ);
        c.fill_with(TRANSFER_READ).await?;
    }
}

/// The receive buffers of a transfer, each used again once the writer has dropped every
/// piece of it: a fresh buffer for each read would cost a page fault and a page cleared
/// per 4 KiB received (measured: a tenth of the replica's time in a sync).
#[derive(Default)]
struct Buffers(std::collections::VecDeque<BytesMut>);

impl Buffers {
    /// Buffers kept: the pieces queued for the writer, the one it writes, and a few more.
    const KEPT: usize = files::AHEAD + 4;

    /// When `buf` is empty and lacks `room` bytes of space, puts a kept buffer that has
    /// them (or a new one) in its place, and keeps `buf`'s for later.
    fn swap_in(&mut self, buf: &mut BytesMut, room: usize) {
        if !buf.is_empty() || buf.capacity() >= room {
            return;
        }
        let free = self.0.iter_mut().position(|b| b.try_reclaim(room));
        let next = match free.and_then(|i| self.0.remove(i)) {
            Some(b) => b,
            None => BytesMut::with_capacity(room),
        };
        if self.0.len() >= Self::KEPT {
            self.0.pop_front();
        }
        self.0.push_back(std::mem::replace(buf, next));
    }
}

/// Applies the stream from `at` until the link fails or the role changes.
async fn apply_stream(
    sh: &Arc<Shared>,
    c: &mut Conn,
    mut at: Stream,
    gen: u64,
) -> Result<(), String> {
    let limits = stream_limits(sh);
    let mut decoder = protocol::Decoder::new();
    // Bytes of the entry being decoded so far (the decoder takes them off the buffer as it
    // goes): an entry's share of the offset.
    let mut partial = 0usize;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Entries decoded and not applied yet, their bytes, and whether they end inside a
    // `MULTI` ... `EXEC` (a transaction is applied in one engine batch, so no reader of
    // the replica sees part of it, unless it passes `cap`).
    let (mut pending, mut bytes, mut in_multi) = (Vec::new(), 0usize, false);
    let cap = limits.max_request;
    loop {
        let mut full = false;
        loop {
            if (!in_multi && pending.len() >= GROUP) || bytes > cap {
                full = true;
                break;
            }
            let before = c.buf.len();
            let r = decoder.next(&mut c.buf, &limits);
            partial += before - c.buf.len();
            let Some(cmd) = r.map_err(|e| format!("replication stream: {e}"))? else {
                break;
            };
            if cmd[0].eq_ignore_ascii_case(b"multi") {
                in_multi = true;
            } else if cmd[0].eq_ignore_ascii_case(b"exec") {
                in_multi = false;
            }
            bytes += partial;
            pending.push((cmd, partial));
            partial = 0;
        }
        if !pending.is_empty() && (!in_multi || bytes > cap) {
            let entries = std::mem::take(&mut pending);
            bytes = 0;
            let (s, from) = (sh.clone(), at.clone());
            let (next, ack) = tokio::task::spawn_blocking(move || apply(&s, gen, from, entries))
                .await
                .map_err(|e| e.to_string())??;
            at = next;
            sh.repl.set_position(gen, &at.pos.replid, at.offset);
            if ack {
                send_ack(c, &at).await?;
            }
        }
        if full {
            continue;
        }
        tokio::select! {
            r = c.fill() => r?,
            _ = tick.tick() => send_ack(c, &at).await?,
        }
    }
}

/// Acknowledges the offset applied; nothing while catching up from the primary's WAL
/// (those writes are outside the offsets that `WAIT` counts).
async fn send_ack(c: &mut Conn, at: &Stream) -> Result<(), String> {
    if at.catching_up.is_some() {
        return Ok(());
    }
    c.send(&[b"REPLCONF", b"ACK", at.offset.to_string().as_bytes()])
        .await
}

/// Applies stream entries (with their sizes in bytes) as one engine batch with the new
/// position; returns where the stream stands after them and whether one asked for an
/// acknowledgement.
fn apply(
    sh: &Shared,
    gen: u64,
    mut at: Stream,
    entries: Vec<(Vec<Bytes>, usize)>,
) -> Result<(Stream, bool), String> {
    let _c = sh.store.command_lock();
    if sh.repl.gen() != gen {
        return Err("the role changed".into());
    }
    let mut wb = WriteBatch::new();
    let mut ack = false;
    for (cmd, len) in &entries {
        let name = &cmd[0];
        let caught_up = at.catching_up;
        if name.eq_ignore_ascii_case(wire::BATCH.as_bytes()) && (2..=3).contains(&cmd.len()) {
            for op in wire::decode_ops(&cmd[1]).map_err(|e| e.to_string())? {
                if op.put {
                    wb.put(op.key, op.value);
                } else {
                    wb.delete(op.key);
                }
            }
            if let Some(seq) = cmd.get(2) {
                at.pos.seq = Some(
                    wire::parse_number(seq, "sequence number in HLBATCH")
                        .map_err(|e| e.to_string())?,
                );
            }
        } else if let (Some((offset, seq)), true) = (
            caught_up,
            name.eq_ignore_ascii_case(wire::CAUGHT_UP.as_bytes()) && cmd.len() == 1,
        ) {
            at.catching_up = None;
            at.offset = offset;
            at.pos.seq = Some(seq);
            continue;
        } else if name.eq_ignore_ascii_case(b"replconf")
            && cmd.len() == 3
            && cmd[1].eq_ignore_ascii_case(b"getack")
        {
            ack = true;
        } else if !["ping", "multi", "exec"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
        {
            return Err(format!(
                "unexpected command '{}' in the replication stream",
                String::from_utf8_lossy(&name[..name.len().min(64)])
            ));
        }
        if caught_up.is_none() {
            at.offset = at.offset.saturating_add(*len as u64);
        }
    }
    at.pos.offset = at.catching_up.is_none().then_some(at.offset);
    wb.put(record::REPL_KEY, &at.pos.encode());
    let sync = sh.settings.appendfsync() == crate::AppendFsync::Always;
    sh.store
        .apply_replicated(wb, sync)
        .map_err(|e| format!("applying the stream: {e}"))?;
    Ok((at, ack))
}
