//! Moving keys between servers: `DUMP`, `RESTORE` (and `RESTORE-ASKING`, which `MIGRATE`
//! sends so that a cluster node importing the slot takes it), and `MIGRATE`, which moves
//! keys to another server over a normal client connection. Payloads are
//! [`crate::dump`]'s: halflife to halflife.
//!
//! `MIGRATE` is atomic per key, as in Redis: it holds its keys' locks (exclusively) from
//! the moment it reads them until it has deleted the ones the target acknowledged, so no
//! write to them can fall between the copy and the delete. In cluster mode it picks its
//! keys under the cluster's migration lock, which every command on a migrating slot holds
//! shared from its routing check to its end ([`crate::cmd::cluster::route::admit`]), and marks
//! them leaving before it releases it, so a key never leaves while a command that found
//! it here runs; during the round trip the slot's other keys are served, and a command on
//! a key in flight waits for its end. The target writes each key with one engine batch:
//! a reader there sees all of a collection or none of it.

use super::table::c;
use super::{eq, int, syntax, CmdResult, Ctx, MAX_STRING};
use crate::dump;
use crate::protocol::Reply;
use crate::record;
use crate::repl_log::wire;
use crate::shared::Shared;
use crate::store::Batch;
use bytes::Bytes;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("dump", 2, [READONLY], 1, 1, 1, Generic, dump_cmd),
    c!("restore", -4, [WRITE DENYOOM], 1, 1, 1, Generic, restore),
    c!("restore-asking", -4, [WRITE DENYOOM ASKING], 1, 1, 1, Server, restore),
    c!("migrate", -6, [WRITE NO_MULTI OWN_LOCK], 3, 3, 1, Generic, migrate),
];

/// Longest reply line read from the target: its replies here are `+OK` or an error line.
const MAX_REPLY_LINE: u64 = 64 << 10;

/// The largest payload this server builds or takes: the request size limit
/// (`proto-max-bulk-len`), so that a payload built here is one the target can receive.
fn max_payload(sh: &Shared) -> usize {
    sh.settings.max_request_bytes().min(MAX_STRING as usize)
}

/// `DUMP key`: the key's payload, nil if it does not exist.
pub fn dump_cmd(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let _g = cx.lock(&a[..1]);
    Ok(
        match dump::dump(&cx.sh.store, cx.db(), &a[0], max_payload(cx.sh))? {
            Some((p, _)) => Reply::Bulk(p.into()),
            None => Reply::Nil,
        },
    )
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]` (and
/// `RESTORE-ASKING`, the same with the `asking` flag). The idle time and the frequency
/// go to the access table ([`crate::access`]), which keeps both whatever the policy
/// (Redis sets the one its policy uses): `OBJECT IDLETIME` and `OBJECT FREQ` answer them.
pub fn restore(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (key, payload) = (&a[0], &a[2]);
    let ttl = int(&a[1])?;
    if ttl < 0 {
        return Err(Reply::err("Invalid TTL value, must be >= 0"));
    }
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (None, None);
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
            if eq(o, "idletime") {
                if v < 0 {
                    return Err(Reply::err("Invalid IDLETIME value, must be >= 0"));
                }
                idle = Some(v as u64);
            } else {
                freq = Some(
                    u8::try_from(v)
                        .map_err(|_| Reply::err("Invalid FREQ value, must be >= 0 and <= 255"))?,
                );
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
    let mk = record::meta_key(cx.db(), key);
    cx.sh.store.access.restore(&mk, idle, freq);
    cx.notify(crate::notify::Class::GENERIC, "restore", &a[0]);
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
    let moving = cx.sh.cluster.as_ref().map(|c| c.migration());
    let _cmd = cx.sh.store.command_lock();
    let mut prelude: Vec<Vec<&[u8]>> = Vec::new();
    if !auth.is_empty() {
        let mut cmd: Vec<&[u8]> = vec![b"AUTH"];
        cmd.extend(auth.iter().map(|x| &x[..]));
        prelude.push(cmd);
    }
    let db_text = target_db.to_string();
    prelude.push(vec![b"SELECT", db_text.as_bytes()]);
    let mut target = Target::new(host, port, Duration::from_millis(timeout), &prelude);
    move_keys(cx.sh, cx.db(), &mut target, keys, copy, replace, moving)
}

/// A client connection to the server keys move to, opened at its first use: `MIGRATE`
/// makes one per call, the slot-migration job ([`crate::cmd::cluster::migration`]) one per
/// job. Commands of the prelude (`AUTH`, `SELECT`) go first on the connection, their
/// replies read with the first reply awaited. After an error the connection is closed
/// (what was in flight is unknown) and the next use opens another.
pub struct Target {
    host: String,
    port: u16,
    timeout: Duration,
    prelude: Vec<Vec<u8>>,
    conn: Option<Conn>,
}

struct Conn {
    wr: BufWriter<TcpStream>,
    rd: BufReader<TcpStream>,
    /// Replies of the prelude not read yet.
    prelude_replies: usize,
}

fn io_error(what: &'static str) -> impl Fn(std::io::Error) -> Reply {
    move |_| Reply::Error(format!("IOERR error or timeout {what} target instance"))
}

fn target_error(line: &[u8]) -> Reply {
    Reply::err(format!(
        "Target instance replied with error: {}",
        String::from_utf8_lossy(&line[1..])
    ))
}

impl Target {
    /// `timeout` bounds the connection and each read and write.
    pub fn new(host: &str, port: u16, timeout: Duration, prelude: &[Vec<&[u8]>]) -> Target {
        Target {
            host: host.to_string(),
            port,
            timeout,
            prelude: prelude.iter().map(|c| wire::command(c)).collect(),
            conn: None,
        }
    }

    fn conn(&mut self) -> Result<&mut Conn, Reply> {
        if self.conn.is_none() {
            let refused = || Reply::Error("IOERR error or timeout connecting to the client".into());
            let addr = (self.host.as_str(), self.port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(refused)?;
            let conn = TcpStream::connect_timeout(&addr, self.timeout).map_err(|_| refused())?;
            conn.set_read_timeout(Some(self.timeout))
                .map_err(io_error("reading from"))?;
            conn.set_write_timeout(Some(self.timeout))
                .map_err(io_error("writing to"))?;
            let mut wr = BufWriter::new(conn.try_clone().map_err(io_error("writing to"))?);
            for cmd in &self.prelude {
                wr.write_all(cmd).map_err(io_error("writing to"))?;
            }
            self.conn = Some(Conn {
                wr,
                rd: BufReader::new(conn),
                prelude_replies: self.prelude.len(),
            });
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }

    /// Runs `f` on the connection; an error closes it.
    fn with<T>(&mut self, f: impl FnOnce(&mut Conn) -> Result<T, Reply>) -> Result<T, Reply> {
        let r = self.conn().and_then(f);
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    /// Sends one command and reads its reply line: `Ok` with the line (a `+`/`:` reply),
    /// `Err` for an error reply (`ERR Target instance replied with error: ...`) or when
    /// the target cannot be reached (`IOERR ...`).
    pub fn call(&mut self, cmd: &[&[u8]]) -> Result<Vec<u8>, Reply> {
        self.with(|c| {
            c.wr.write_all(&wire::command(cmd))
                .map_err(io_error("writing to"))?;
            c.wr.flush().map_err(io_error("writing to"))?;
            c.prelude_done()?;
            let line = c.reply()?;
            match line.first() {
                Some(b'-') => Err(target_error(&line)),
                _ => Ok(line),
            }
        })
    }
}

impl Conn {
    /// One reply line, without its CRLF: the target's replies here are `+OK`, an
    /// integer or an error line.
    fn reply(&mut self) -> Result<Vec<u8>, Reply> {
        let mut line = Vec::new();
        std::io::Read::take(&mut self.rd, MAX_REPLY_LINE)
            .read_until(b'\n', &mut line)
            .map_err(io_error("reading from"))?;
        if !line.ends_with(b"\r\n") {
            return Err(Reply::Error(
                "IOERR error or timeout reading from target instance".into(),
            ));
        }
        line.truncate(line.len() - 2);
        Ok(line)
    }

    /// Reads the prelude's replies if not read yet: an error among them fails the use.
    fn prelude_done(&mut self) -> Result<(), Reply> {
        while self.prelude_replies > 0 {
            let line = self.reply()?;
            if line.first() == Some(&b'-') {
                return Err(target_error(&line));
            }
            self.prelude_replies -= 1;
        }
        Ok(())
    }
}

/// `MIGRATE`'s transfer (the caller holds the exec lock, and in cluster mode the
/// cluster's migration lock, `moving`, taken before it): locks `keys`, sends those that
/// exist here to `target` with `RESTORE-ASKING` (absolute expiry), then deletes those it
/// acknowledged (unless `copy`). `+NOKEY` if none exists. One payload is held at a time,
/// each bounded by [`max_payload`]; the keys' count is the caller's (a request's, or a
/// job's batch).
///
/// The migration lock is released once the keys are picked and marked leaving
/// ([`crate::cluster::Cluster::depart`]): during the round trip, commands on the slot's
/// other keys run, and those on a key in flight wait for its end.
pub fn move_keys(
    sh: &Shared,
    db: u8,
    target: &mut Target,
    keys: &[Bytes],
    copy: bool,
    replace: bool,
    moving: Option<parking_lot::RwLockWriteGuard<'_, ()>>,
) -> CmdResult {
    let _keys = sh.store.lock(db, keys);
    let (mut here, mut seen) = (Vec::new(), std::collections::HashSet::new());
    for k in keys {
        if seen.insert(k) && sh.store.read(db, k, false)?.is_some() {
            here.push(k);
        }
    }
    if here.is_empty() {
        return Ok(Reply::Simple("NOKEY"));
    }
    // Dropped after the deletes (declared before them), before the keys' locks.
    let _leaving = match (&sh.cluster, &moving) {
        (Some(c), Some(_)) if !copy => Some(c.depart(here.iter().map(|k| k.to_vec()).collect())),
        _ => None,
    };
    drop(moving);
    let max = max_payload(sh);
    let first_error = target.with(|c| {
        for k in &here {
            // Read under the keys' locks: exists (checked above), whole.
            let (payload, exp) = dump::dump(&sh.store, db, k, max)?.ok_or_else(|| {
                Reply::err("a key to migrate vanished under its lock (this is a bug)")
            })?;
            let ttl = exp.unwrap_or(0).to_string();
            let mut cmd: Vec<&[u8]> =
                vec![b"RESTORE-ASKING", k, ttl.as_bytes(), &payload, b"ABSTTL"];
            if replace {
                cmd.push(b"REPLACE");
            }
            c.wr.write_all(&wire::command(&cmd))
                .map_err(io_error("writing to"))?;
        }
        c.wr.flush().map_err(io_error("writing to"))?;
        c.prelude_done()?;
        let mut b = Batch::new();
        let mut first_error = None;
        for k in &here {
            let line = c.reply()?;
            if line.first() == Some(&b'-') {
                first_error.get_or_insert_with(|| target_error(&line));
            } else if !copy {
                b.del_meta(db, k);
            }
        }
        // Synced whatever appendfsync says: a source that came back after a crash with a
        // moved key (the delete lost) would serve that old copy, and a later MIGRATE ...
        // REPLACE would put it over the newer writes the destination took meanwhile.
        sh.store.write(b, true)?;
        Ok(first_error)
    })?;
    match first_error {
        Some(e) => Err(e),
        None => Ok(Reply::ok()),
    }
}
