//! `BGSAVE`, `SAVE` and `BACKUP`: backups of the running server ([`crate::backup`]).

use super::table::c;
use super::{eq, CmdResult, Ctx};
use crate::backup::Refused;
use crate::protocol::Reply;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("bgsave", -1, [ADMIN NOSCRIPT], 0, 0, 0, Server, bgsave),
    c!("save", 1, [ADMIN NOSCRIPT NO_MULTI OWN_LOCK], 0, 0, 0, Server, save),
    c!("backup", -2, [ADMIN NOSCRIPT NO_MULTI OWN_LOCK], 0, 0, 0, Server, backup),
];

/// Redis's replies to a job refused because another runs.
fn refused(r: Refused) -> Reply {
    match r {
        Refused::BgsaveRunning => Reply::err("Background save already in progress"),
        Refused::BackupRunning => Reply::err(
            "Another background job is active (BACKUP CREATE): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
        ),
    }
}

/// `BGSAVE [SCHEDULE]`: a checkpoint into `backup-dir/bgsave` in the background.
fn bgsave(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let schedule = match a {
        [] => false,
        [s] if eq(s, "schedule") => true,
        _ => return Err(Reply::err("syntax error")),
    };
    match cx.sh.backups.bgsave(cx.sh.store.db(), schedule) {
        Ok(true) => Ok(Reply::Simple("Background saving started")),
        Ok(false) => Ok(Reply::Simple("Background saving scheduled")),
        Err(r) => Err(refused(r)),
    }
}

/// `SAVE`: the same checkpoint, made before the reply.
fn save(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    match cx.sh.backups.save(&cx.sh.store.db()) {
        Ok(Ok(_)) => Ok(Reply::ok()),
        Ok(Err(e)) => Err(Reply::err(e)),
        Err(r) => Err(refused(r)),
    }
}

fn engine_err(e: engine::Error) -> Reply {
    Reply::err(crate::protocol::one_line(&e.to_string()))
}

/// `BACKUP CREATE | LIST | VERIFY [id] | PURGE keep`: incremental backups into
/// `backup-dir` (RocksDB's `BackupEngine`: only files no earlier backup holds are copied).
/// CREATE answers the new backup's description; LIST one per backup; VERIFY recomputes
/// every file's crc32c (of every backup without an id) and fails naming the first bad file;
/// PURGE keeps the newest `keep` and answers how many it deleted.
fn backup(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sh = cx.sh;
    let describe = |m: &engine::backup::BackupMeta| {
        Reply::Map(vec![
            (Reply::bulk("id"), Reply::Int(m.id as i64)),
            (Reply::bulk("timestamp"), Reply::Int(m.timestamp as i64)),
            (Reply::bulk("sequence"), Reply::Int(m.sequence as i64)),
            (Reply::bulk("files"), Reply::Int(m.files.len() as i64)),
            (Reply::bulk("bytes"), Reply::Int(m.bytes() as i64)),
        ])
    };
    let id = |b: &Bytes| -> Result<u64, Reply> {
        std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Reply::err("value is not an integer or out of range"))
    };
    match a {
        [sub] if eq(sub, "create") => match sh.backups.create(sh.store.db()) {
            Ok(Ok(r)) => {
                tracing::info!(
                    "backup {} created in {}: {} files copied, {} already backed up",
                    r.meta.id,
                    sh.backups.dir().display(),
                    r.copied,
                    r.reused
                );
                Ok(describe(&r.meta))
            }
            Ok(Err(e)) => Err(engine_err(e)),
            Err(r) => Err(refused(r)),
        },
        [sub] if eq(sub, "list") => {
            let be = sh.backups.engine().map_err(engine_err)?;
            let all = be.list().map_err(engine_err)?;
            Ok(Reply::Array(all.iter().map(describe).collect()))
        }
        [sub, rest @ ..] if eq(sub, "verify") && rest.len() <= 1 => {
            let be = sh.backups.engine().map_err(engine_err)?;
            let ids = match rest {
                [n] => vec![id(n)?],
                _ => be
                    .list()
                    .map_err(engine_err)?
                    .iter()
                    .map(|m| m.id)
                    .collect(),
            };
            for id in &ids {
                be.verify(*id).map_err(engine_err)?;
            }
            Ok(Reply::Int(ids.len() as i64))
        }
        [sub, keep] if eq(sub, "purge") => {
            let keep = id(keep)? as usize;
            let be = sh.backups.engine().map_err(engine_err)?;
            let gone = be.purge_old(keep).map_err(engine_err)?;
            Ok(Reply::Int(gone.len() as i64))
        }
        _ => Err(Reply::err(
            "syntax error: BACKUP CREATE | LIST | VERIFY [id] | PURGE keep",
        )),
    }
}
