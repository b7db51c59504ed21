//! Moving keys between servers: `DUMP`, `RESTORE` (and `RESTORE-ASKING`, which `MIGRATE`
//! sends so that a cluster node importing the slot takes it), and `MIGRATE`, which moves
//! keys to another server over a normal client connection. Payloads are
//! [`crate::dump`]'s: halflife to halflife.
//!
//! `MIGRATE` is atomic per key, as in Redis: it holds its keys' locks (exclusively) from
//! the moment it reads them until it has deleted the ones the target acknowledged, so no
//! write to them can fall between the copy and the delete; in cluster mode it also holds
//! the cluster's migration lock, which every command on a migrating slot holds shared
//! from its routing check to its end ([`crate::cluster::route::admit`]), so a key never
//! leaves while a command that found it here runs. The target writes each key with one
//! engine batch: a reader there sees all of a collection or none of it.

use super::{eq, int, syntax, CmdResult, Ctx, MAX_STRING};
use crate::dump;
use crate::protocol::Reply;
use crate::record;
use crate::repl::wire;
use crate::store::Batch;
use bytes::Bytes;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Longest reply line read from the target: its replies here are `+OK` or an error line.
const MAX_REPLY_LINE: u64 = 64 << 10;

/// The largest payload this server builds or takes: the request size limit
/// (`proto-max-bulk-len`), so that a payload built here is one the target can receive.
fn max_payload(cx: &Ctx) -> usize {
    cx.sh.settings.max_request_bytes().min(MAX_STRING as usize)
}

/// `DUMP key`: the key's payload, nil if it does not exist.
pub fn dump_cmd(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let _g = cx.lock(&a[..1]);
    Ok(
        match dump::dump(&cx.sh.store, cx.db(), &a[0], max_payload(cx))? {
            Some((p, _)) => Reply::Bulk(p.into()),
            None => Reply::Nil,
        },
    )
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]` (and
/// `RESTORE-ASKING`, the same with the `asking` flag). Idle time and frequency are
/// checked and ignored: this server keeps no LRU/LFU data.
pub fn restore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (key, payload) = (&a[0], &a[2]);
    let ttl = int(&a[1])?;
    if ttl < 0 {
        return Err(Reply::err("Invalid TTL value, must be >= 0"));
    }
    let (mut replace, mut absttl) = (false, false);
    let mut i = 3;
    while i < a.len() {
        let o = &a[i];
        if eq(o, "replace") {
            replace = true;
        } else if eq(o, "absttl") {
            absttl = true;
        } else if (eq(o, "idletime") || eq(o, "freq")) && i + 1 < a.len() {
            i += 1;
            let v = int(&a[i])?;
            if eq(o, "idletime") && v < 0 {
                return Err(Reply::err("Invalid IDLETIME value, must be >= 0"));
            }
            if eq(o, "freq") && !(0..=255).contains(&v) {
                return Err(Reply::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let now = record::now_ms();
    let expire_at = match (ttl, absttl) {
        (0, _) => None,
        (t, true) => Some(t as u64),
        (t, false) => Some(now.saturating_add(t as u64)),
    };
    let _g = cx.lock(&a[..1]);
    if !replace && cx.meta(key)?.is_some() {
        return Err(Reply::Error(
            "BUSYKEY Target key name already exists.".into(),
        ));
    }
    let mut b = Batch::new();
    if expire_at.is_some_and(|t| t <= now) {
        // Already expired (an absolute time in the past): checked, then not created, as
        // in Redis; a replaced key is deleted.
        dump::restore(&cx.sh.store, &mut Batch::new(), cx.db(), key, payload, None)?;
        if replace {
            b.del_meta(cx.db(), key);
        }
    } else {
        dump::restore(&cx.sh.store, &mut b, cx.db(), key, payload, expire_at)?;
    }
    cx.write(b)?;
    Ok(Reply::ok())
}

/// `MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 user pw]
/// [KEYS key ...]`: sends the keys that exist here to the target with `RESTORE-ASKING`
/// (absolute expiry), then deletes those it acknowledged (unless `COPY`). `+NOKEY` if none
/// exists. The keys come from the request, already bounded by its size; one payload is
/// held at a time, each bounded by [`max_payload`].
pub fn migrate(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let host = std::str::from_utf8(&a[0]).map_err(|_| Reply::err("invalid host"))?;
    let port = u16::try_from(int(&a[1])?)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| Reply::err("invalid port"))?;
    let target_db = u8::try_from(int(&a[3])?)
        .ok()
        .filter(|&d| d < record::DATABASES)
        .ok_or_else(|| Reply::err("DB index is out of range"))?;
    let timeout = match int(&a[4])? {
        t if t <= 0 => 1000,
        t => t as u64,
    };
    let (mut copy, mut replace, mut auth): (bool, bool, Vec<&Bytes>) = (false, false, vec![]);
    let mut keys: &[Bytes] = &a[2..3];
    let mut i = 5;
    while i < a.len() {
        let o = &a[i];
        let left = a.len() - i - 1;
        if eq(o, "copy") {
            copy = true;
        } else if eq(o, "replace") {
            replace = true;
        } else if eq(o, "auth") && left >= 1 {
            auth = vec![&a[i + 1]];
            i += 1;
        } else if eq(o, "auth2") && left >= 2 {
            auth = vec![&a[i + 1], &a[i + 2]];
            i += 2;
        } else if eq(o, "keys") {
            if !a[2].is_empty() {
                return Err(Reply::err(
                    "When using MIGRATE KEYS option, the key argument must be set to an empty string",
                ));
            }
            keys = &a[i + 1..];
            break;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    // Lock order: the cluster's migration lock, the exec lock, the keys (as commands on
    // a migrating slot take them; MIGRATE is run without the exec lock for this).
    let _moving = cx.sh.cluster.as_ref().map(|c| c.migration());
    let _cmd = cx.sh.store.command_lock();
    let _keys = cx.lock(keys);
    let db = cx.db();
    let (mut here, mut seen) = (Vec::new(), std::collections::HashSet::new());
    for k in keys {
        if seen.insert(k) && cx.meta(k)?.is_some() {
            here.push(k);
        }
    }
    if here.is_empty() {
        return Ok(Reply::Simple("NOKEY"));
    }
    fn io(what: &'static str) -> impl Fn(std::io::Error) -> Reply {
        move |_| Reply::Error(format!("IOERR error or timeout {what} target instance"))
    }
    let t = Duration::from_millis(timeout);
    let addr = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Reply::Error("IOERR error or timeout connecting to the client".into()))?;
    let conn = TcpStream::connect_timeout(&addr, t)
        .map_err(|_| Reply::Error("IOERR error or timeout connecting to the client".into()))?;
    conn.set_read_timeout(Some(t)).map_err(io("reading from"))?;
    conn.set_write_timeout(Some(t)).map_err(io("writing to"))?;
    let mut wr = BufWriter::new(conn.try_clone().map_err(io("writing to"))?);
    let mut rd = BufReader::new(conn);
    let mut sent = 0;
    if !auth.is_empty() {
        let mut cmd: Vec<&[u8]> = vec![b"AUTH"];
        cmd.extend(auth.iter().map(|x| &x[..]));
        wr.write_all(&wire::command(&cmd))
            .map_err(io("writing to"))?;
        sent += 1;
    }
    let db_text = target_db.to_string();
    wr.write_all(&wire::command(&[b"SELECT", db_text.as_bytes()]))
        .map_err(io("writing to"))?;
    sent += 1;
    let max = max_payload(cx);
    for k in &here {
        // Read under the keys' locks: exists (checked above), whole.
        let (payload, exp) = dump::dump(&cx.sh.store, db, k, max)?.ok_or_else(|| {
            Reply::err("a key to migrate vanished under its lock (this is a bug)")
        })?;
        let ttl = exp.unwrap_or(0).to_string();
        let mut cmd: Vec<&[u8]> = vec![b"RESTORE-ASKING", k, ttl.as_bytes(), &payload, b"ABSTTL"];
        if replace {
            cmd.push(b"REPLACE");
        }
        wr.write_all(&wire::command(&cmd))
            .map_err(io("writing to"))?;
    }
    wr.flush().map_err(io("writing to"))?;
    let mut line = Vec::new();
    let mut read_reply = |line: &mut Vec<u8>| -> Result<(), Reply> {
        line.clear();
        std::io::Read::take(&mut rd, MAX_REPLY_LINE)
            .read_until(b'\n', line)
            .map_err(io("reading from"))?;
        if !line.ends_with(b"\r\n") {
            return Err(Reply::Error(
                "IOERR error or timeout reading from target instance".into(),
            ));
        }
        line.truncate(line.len() - 2);
        Ok(())
    };
    let target_error = |line: &[u8]| {
        Reply::err(format!(
            "Target instance replied with error: {}",
            String::from_utf8_lossy(&line[1..])
        ))
    };
    for _ in 0..sent {
        read_reply(&mut line)?;
        if line.first() == Some(&b'-') {
            return Err(target_error(&line));
        }
    }
    let mut b = Batch::new();
    let mut first_error = None;
    for k in &here {
        read_reply(&mut line)?;
        if line.first() == Some(&b'-') {
            first_error.get_or_insert_with(|| target_error(&line));
        } else if !copy {
            b.del_meta(db, k);
        }
    }
    // Synced whatever appendfsync says: a source that came back after a crash with a
    // moved key (the delete lost) would serve that old copy, and a later MIGRATE ...
    // REPLACE would put it over the newer writes the destination took meanwhile.
    cx.sh.store.write(b, true)?;
    match first_error {
        Some(e) => Err(e),
        None => Ok(Reply::ok()),
    }
}
