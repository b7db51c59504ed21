//! The disk side of a full sync's transfer: the primary's reads of its checkpoint's files
//! ([`read_files`]) and the replica's writes of them ([`write_files`]), each on one
//! blocking thread that the connection's task feeds or drains through a bounded channel.
//!
//! Why this shape (measured in `docs/replication.md`): a transfer of gigabytes made of
//! small reads and writes each sent to the runtime's blocking pool (what `tokio::fs` does)
//! spends its time handing work between threads and copying into the pool's buffers, and
//! a sync of each file when it ends stops the receiving until the disk has it all. Here
//! the primary reads [`CHUNK`]-sized pieces with plain reads, a few ahead of the socket;
//! the replica writes what each read from the socket brought, starts the write-back of
//! every [`WRITEBACK_STEP`] bytes as they are written (RocksDB's `bytes_per_sync`), so the
//! sync at a file's end finds little left to do, and the socket is read meanwhile.
//!
//! What is checked stays where it was: the framing and the crc32c of every file are
//! checked by [`crate::repl_log::wire::SyncDecoder`] before the file's end is passed on here, a
//! file is created only if its name does not exist, and each file is synced before the
//! transfer counts as received.

use crate::repl_log::wire;
use bytes::Bytes;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::mpsc as std_mpsc;
use tokio::sync::mpsc;

/// Bytes of checkpoint files read, summed and handed to the socket at a time: a transfer
/// of gigabytes then costs a few thousand reads and writes, not a million.
pub const CHUNK: usize = 2 << 20;
/// Chunks read ahead of the socket on the primary, and pieces received ahead of the disk
/// on the replica: the disk and the network work at the same time.
pub const AHEAD: usize = 4;
/// Bytes written to a received file between two starts of its write-back.
const WRITEBACK_STEP: u64 = 8 << 20;

/// The transfer of the checkpoint in `dir` (its files, `list`ed, in [`wire`]'s framing),
/// in chunks of about [`CHUNK`] sent to `out`; emptied buffers come back through `reuse`,
/// so that no more than a few are ever allocated. Each file is read once: its crc32c is
/// summed over the bytes as they are read. Returns early, without an error, when the
/// receiving side is gone (it reports why).
pub fn read_files(
    dir: &Path,
    files: &[(String, u64)],
    out: &mpsc::Sender<Vec<u8>>,
    reuse: &std_mpsc::Receiver<Vec<u8>>,
) -> io::Result<()> {
    let fresh = || match reuse.try_recv() {
        Ok(mut b) => {
            b.clear();
            b
        }
        Err(_) => Vec::with_capacity(CHUNK + 512),
    };
    // Sends `buf` once it holds a chunk, in its place an empty one; false when the
    // receiving side is gone. Checked before every header and read, a buffer never holds
    // more than a chunk and one file's header and trailer.
    let ship = |buf: &mut Vec<u8>| {
        buf.len() < CHUNK || out.blocking_send(std::mem::replace(buf, fresh())).is_ok()
    };
    let total = files.iter().map(|(_, s)| s).sum();
    let mut buf = fresh();
    buf.extend_from_slice(&wire::sync_header(files.len() as u32, total));
    for (name, size) in files {
        if !ship(&mut buf) {
            return Ok(());
        }
        buf.extend_from_slice(&wire::file_header(name, *size));
        let mut f = File::open(dir.join(name))?;
        advise_sequential(&f);
        let (mut left, mut crc) = (*size, 0u32);
        while left > 0 {
            if !ship(&mut buf) {
                return Ok(());
            }
            let want = ((CHUNK - buf.len()) as u64).min(left);
            let start = buf.len();
            // Into the buffer's spare capacity, not zeroed first.
            let n = (&mut f).take(want).read_to_end(&mut buf)?;
            if n == 0 {
                return Err(io::Error::other(format!(
                    "checkpoint file {name} shrank while being sent"
                )));
            }
            crc = crc32c::crc32c_append(crc, &buf[start..]);
            left -= n as u64;
        }
        buf.extend_from_slice(&wire::file_trailer(crc));
    }
    let _ = out.blocking_send(buf);
    Ok(())
}

/// What the replica's connection task hands the thread writing a transfer's files, in
/// order.
pub enum ToDisk {
    /// A file begins (its name checked by the decoder).
    Create(String),
    /// Bytes of the current file.
    Data(Bytes),
    /// The current file is complete and its crc32c matched: sync it.
    End,
}

/// Writes the files of a transfer into `dir` as the pieces arrive, until the sender is
/// dropped. A file that exists is refused (the directory is fresh, and a name twice in a
/// transfer is a lie); each is synced at its [`ToDisk::End`]. Returns the bytes written.
pub fn write_files(dir: &Path, mut rx: mpsc::Receiver<ToDisk>) -> Result<u64, String> {
    /// The file being written: its name, and the bytes written and handed to write-back.
    struct Current {
        name: String,
        f: File,
        written: u64,
        started: u64,
    }
    let mut cur: Option<Current> = None;
    let mut total = 0;
    while let Some(piece) = rx.blocking_recv() {
        match piece {
            ToDisk::Create(name) => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(dir.join(&name))
                    .map_err(|e| format!("creating {name}: {e}"))?;
                cur = Some(Current {
                    name,
                    f,
                    written: 0,
                    started: 0,
                });
            }
            ToDisk::Data(b) => {
                let c = cur.as_mut().ok_or("data outside a file")?;
                c.f.write_all(&b)
                    .map_err(|e| format!("writing {}: {e}", c.name))?;
                c.written += b.len() as u64;
                total += b.len() as u64;
                if c.written - c.started >= WRITEBACK_STEP {
                    start_writeback(&c.f, c.started, c.written - c.started);
                    c.started = c.written;
                }
            }
            ToDisk::End => {
                let c = cur.take().ok_or("end outside a file")?;
                c.f.sync_all()
                    .map_err(|e| format!("syncing {}: {e}", c.name))?;
            }
        }
    }
    Ok(total)
}

/// Tells the kernel the file will be read from start to end (a larger read-ahead). A hint:
/// its failure changes nothing.
fn advise_sequential(f: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor for the call's duration; no memory is passed.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = f;
}

/// Starts writing `len` bytes at `offset` of `f` back to the disk without waiting for
/// them (`sync_file_range(SYNC_FILE_RANGE_WRITE)`); durability still comes from the
/// `sync_all` at the file's end. A hint: its failure changes nothing.
fn start_writeback(f: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor for the call's duration; no memory is passed.
        unsafe {
            libc::sync_file_range(
                f.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (f, offset, len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repl_log::wire::{Event, SyncDecoder};
    use bytes::BytesMut;

    /// What `read_files` sends for `files` of `dir`: the chunks, collected on another
    /// thread as the socket side would.
    fn sent(dir: &Path, files: &[(String, u64)]) -> Vec<Vec<u8>> {
        let (tx, mut rx) = mpsc::channel(AHEAD);
        let (_reuse_tx, reuse) = std_mpsc::sync_channel(AHEAD);
        let collector = std::thread::spawn(move || {
            let mut chunks = Vec::new();
            while let Some(c) = rx.blocking_recv() {
                chunks.push(c);
            }
            chunks
        });
        read_files(dir, files, &tx, &reuse).unwrap();
        drop(tx);
        collector.join().unwrap()
    }

    /// Decodes `input` fed in pieces of `piece` bytes and writes the files into `dir`
    /// as the replica does.
    fn received(input: &[u8], piece: usize, dir: &Path) -> Result<u64, String> {
        let (tx, rx) = mpsc::channel(AHEAD);
        let d = dir.to_path_buf();
        let writer = std::thread::spawn(move || write_files(&d, rx));
        let mut dec = SyncDecoder::new();
        let mut buf = BytesMut::new();
        'feed: for p in input.chunks(piece) {
            buf.extend_from_slice(p);
            while let Some(ev) = dec.next(&mut buf).map_err(|e| e.to_string())? {
                let msg = match ev {
                    Event::Start { .. } => continue,
                    Event::File { name, .. } => ToDisk::Create(name),
                    Event::Data(b) => ToDisk::Data(b),
                    Event::FileEnd => ToDisk::End,
                    Event::Done => break 'feed,
                };
                if tx.blocking_send(msg).is_err() {
                    break 'feed;
                }
            }
        }
        drop(tx);
        writer.join().unwrap()
    }

    #[test]
    fn files_round_trip_in_chunks_of_bounded_size() {
        let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // Sizes around a chunk's edges, an empty file, and many small ones.
        let mut files = Vec::new();
        for (i, size) in [0, 1, CHUNK - 1, CHUNK, CHUNK + 7, 3 * CHUNK + 5]
            .into_iter()
            .chain(std::iter::repeat_n(100, 50))
            .enumerate()
        {
            let name = format!("{i:06}.vlog");
            let data: Vec<u8> = (0..size).map(|b| (b * 31 + i) as u8).collect();
            std::fs::write(src.path().join(&name), &data).unwrap();
            files.push((name, size as u64));
        }
        let chunks = sent(src.path(), &files);
        for c in &chunks {
            assert!(c.len() <= CHUNK + 512, "a chunk of {} bytes", c.len());
        }
        let whole = chunks.concat();
        let total: u64 = files.iter().map(|(_, s)| s).sum();
        assert!(chunks.len() as u64 >= total / CHUNK as u64);
        for piece in [4096, 1 << 20, whole.len()] {
            let out = tempfile::tempdir().unwrap();
            received(&whole, piece, out.path()).unwrap();
            for (name, _) in &files {
                assert_eq!(
                    std::fs::read(out.path().join(name)).unwrap(),
                    std::fs::read(src.path().join(name)).unwrap(),
                    "{name}"
                );
            }
        }
        // A flipped byte anywhere in a file's data fails its crc32c before its end is
        // passed on.
        let mut bad = whole.clone();
        let at = bad.len() / 2;
        bad[at] ^= 1;
        assert!(received(&bad, 1 << 20, dst.path())
            .unwrap_err()
            .contains("crc32c mismatch"));
    }

    #[test]
    fn a_name_that_exists_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("CURRENT"), b"mine").unwrap();
        let (tx, rx) = mpsc::channel(AHEAD);
        tx.blocking_send(ToDisk::Create("CURRENT".into())).unwrap();
        drop(tx);
        let e = write_files(d.path(), rx).unwrap_err();
        assert!(e.starts_with("creating CURRENT"), "{e}");
        assert_eq!(std::fs::read(d.path().join("CURRENT")).unwrap(), b"mine");
    }
}
