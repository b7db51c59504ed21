//! `DEBUG`: of Redis's debugging subcommands, `SLEEP` (holds the connection for a while,
//! so that tests and operators can see a slow command in `SLOWLOG` and `LATENCY`) and
//! `HELP`. As in Redis 7, the command is refused unless `enable-debug-command` is `yes`,
//! or `local` and the client is on a loopback address or the Unix socket.

use super::table::c;
use super::{float, text, CmdResult, Ctx};
use crate::config::Protection;
use crate::protocol::Reply;
use bytes::Bytes;
use std::time::Duration;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("debug", -2, [ADMIN NOSCRIPT LOADING STALE], 0, 0, 0, Server, debug),
];

/// Longest `DEBUG SLEEP`: it holds one of the blocking pool's threads meanwhile.
const MAX_SLEEP_SECS: f64 = 3600.0;

fn debug(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let allowed = match cx.sh.settings.enable_debug_command() {
        Protection::Yes => true,
        Protection::No => false,
        Protection::Local => cx
            .sh
            .clients
            .lock()
            .get(&cx.s.id)
            .is_some_and(|c| crate::config::is_local_addr(&c.addr)),
    };
    if !allowed {
        return Err(Reply::err(
            "DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
        ));
    }
    let sub = text(&a[0]).to_ascii_lowercase();
    match (sub.as_str(), &a[1..]) {
        ("sleep", [secs]) => {
            let s = float(secs)?;
            if !(0.0..=MAX_SLEEP_SECS).contains(&s) {
                return Err(Reply::err(format!(
                    "DEBUG SLEEP takes 0 to {MAX_SLEEP_SECS} seconds"
                )));
            }
            std::thread::sleep(Duration::from_secs_f64(s));
            Ok(Reply::ok())
        }
        ("help", []) => Ok(Reply::Array(
            [
                "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "SLEEP <seconds>",
                "    Stop the connection for <seconds>. Decimal values are allowed.",
                "HELP",
                "    Prints this help.",
            ]
            .into_iter()
            .map(Reply::bulk)
            .collect(),
        )),
        _ => Err(Reply::err(format!(
            "unknown subcommand '{}'. Try DEBUG HELP.",
            text(&a[0])
        ))),
    }
}
