//! Server commands: `SHUTDOWN`, `INFO`, `TIME`, `LASTSAVE`, `LOLWUT`, and `FUNCTION` until
//! scripting exists.

use super::table::c;
use super::{eq, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::session::Outcome;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("shutdown", -1, [ADMIN NOSCRIPT LOADING STALE NO_MULTI ALLOW_BUSY], 0, 0, 0, Server, shutdown),
    c!("info", -1, [LOADING STALE], 0, 0, 0, Server, info),
    c!("time", 1, [LOADING STALE FAST], 0, 0, 0, Server, time),
    c!("lolwut", -1, [READONLY FAST], 0, 0, 0, Server, lolwut),
    c!("lastsave", 1, [LOADING STALE FAST], 0, 0, 0, Server, lastsave),
];

/// Stops the server: the connection closes without a reply.
fn shutdown(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    cx.s.outcome = Outcome::Shutdown;
    Ok(Reply::ok())
}

fn info(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    Ok(Reply::Text(crate::info::render(cx.sh, a)))
}

fn time(_cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    let us = crate::record::now_us();
    Ok(Reply::Array(vec![
        Reply::bulk((us / 1_000_000).to_string()),
        Reply::bulk((us % 1_000_000).to_string()),
    ]))
}

/// The last successful `BGSAVE`, `SAVE` or `BACKUP CREATE` (the start until one ran, as
/// in Redis).
fn lastsave(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(cx.sh.backups.last_save() as i64))
}

/// `LOLWUT [VERSION v] [...]`: Redis draws computer art for versions 5 and 6 and answers
/// its version line for any other; halflife answers the version line for every version
/// (the art is Redis's own work, not reproduced here).
fn lolwut(_cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if let [v, n, ..] = a {
        if eq(v, "version") {
            super::int(n)?;
        }
    }
    Ok(Reply::Text(format!(
        "halflife {}, Redis ver. {}\n",
        env!("CARGO_PKG_VERSION"),
        crate::protocol::REDIS_VERSION
    )))
}
