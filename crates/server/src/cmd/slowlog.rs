//! `SLOWLOG GET|LEN|RESET|HELP` over the server's [`crate::slowlog::SlowLog`].

use super::table::c;
use super::{parse_int, text, wrong_args, CmdResult, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("slowlog", -2, [ADMIN LOADING STALE SUBCOMMANDS], 0, 0, 0, Server, slowlog),
];

/// Entries `SLOWLOG GET` returns without a count (Redis's 10).
const DEFAULT_GET: usize = 10;

fn slowlog(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let log = &cx.sh.slowlog;
    let sub = text(&a[0]).to_ascii_lowercase();
    match (sub.as_str(), &a[1..]) {
        ("get", rest) if rest.len() <= 1 => {
            let count = match rest.first() {
                None => Some(DEFAULT_GET),
                Some(n) => match parse_int(n) {
                    Some(-1) => None,
                    Some(n) if n >= 0 => Some(n as usize),
                    _ => return Err(Reply::err("count should be greater than or equal to -1")),
                },
            };
            Ok(Reply::Array(
                log.get(count)
                    .into_iter()
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Int(e.id as i64),
                            Reply::Int(e.time),
                            Reply::Int(e.micros as i64),
                            Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
                            Reply::bulk(e.addr),
                            Reply::bulk(e.name),
                        ])
                    })
                    .collect(),
            ))
        }
        ("len", []) => Ok(Reply::Int(log.len() as i64)),
        ("reset", []) => {
            log.reset();
            Ok(Reply::ok())
        }
        ("help", []) => Ok(Reply::Array(
            [
                "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "    Entries are made of:",
                "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                "    client name",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
                "HELP",
                "    Prints this help.",
            ]
            .into_iter()
            .map(Reply::bulk)
            .collect(),
        )),
        ("get" | "len" | "reset" | "help", _) => Err(wrong_args(&format!("slowlog|{sub}"))),
        _ => Err(Reply::err(format!(
            "unknown subcommand '{}'. Try SLOWLOG HELP.",
            text(&a[0])
        ))),
    }
}
