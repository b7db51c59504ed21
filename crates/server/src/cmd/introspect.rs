//! `COMMAND` (from the one command table, [`super::table`]), `TIME`, `LASTSAVE`.

use super::table::{self, Spec};
use super::{eq, CmdResult, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;

/// ACL categories a command's flags and group imply (what `COMMAND INFO` lists).
fn categories(s: &Spec) -> Vec<Reply> {
    let mut c = Vec::new();
    let flag = |f: &str| s.flags.split(' ').any(|x| x == f);
    if s.first > 0 {
        c.push("@keyspace");
    }
    if flag("write") {
        c.push("@write");
    }
    if flag("readonly") {
        c.push("@read");
    }
    if flag("fast") {
        c.push("@fast");
    } else {
        c.push("@slow");
    }
    if flag("admin") {
        c.extend(["@admin", "@dangerous"]);
    }
    c.push(match s.group {
        "string" => "@string",
        "bitmap" => "@bitmap",
        "hash" => "@hash",
        "list" => "@list",
        "set" => "@set",
        "sorted-set" => "@sortedset",
        "transactions" => "@transaction",
        "connection" => "@connection",
        _ => "@keyspace",
    });
    c.dedup();
    c.into_iter().map(Reply::Simple).collect()
}

/// One command's `COMMAND INFO` entry (Redis 7's ten fields).
fn info(s: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::bulk(s.name),
        Reply::Int(s.arity as i64),
        Reply::Array(
            s.flags
                .split(' ')
                .filter(|f| !f.is_empty())
                .map(Reply::Simple)
                .collect(),
        ),
        Reply::Int(s.first as i64),
        Reply::Int(s.last as i64),
        Reply::Int(s.step as i64),
        Reply::Array(categories(s)),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

fn docs(s: &Spec) -> Reply {
    Reply::Map(vec![
        (
            Reply::bulk("summary"),
            Reply::bulk(format!("The {} command.", s.name.to_ascii_uppercase())),
        ),
        (Reply::bulk("since"), Reply::bulk("1.0.0")),
        (Reply::bulk("group"), Reply::bulk(s.group)),
    ])
}

/// The key positions of `args` (the command with its name) under `s`'s first/last/step.
fn keys_of(s: &Spec, args: &[Bytes]) -> Vec<Reply> {
    if s.first <= 0 || s.step <= 0 {
        return Vec::new();
    }
    let n = args.len() as i32;
    let last = if s.last < 0 {
        n + s.last
    } else {
        s.last.min(n - 1)
    };
    (s.first..=last)
        .step_by(s.step as usize)
        .filter_map(|i| args.get(i as usize).cloned().map(Reply::Bulk))
        .collect()
}

pub fn command(_cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let Some(sub) = a.first() else {
        return Ok(Reply::Array(table::all().map(info).collect()));
    };
    let names = || a[1..].iter().map(|n| super::text(n).to_ascii_lowercase());
    if eq(sub, "count") {
        Ok(Reply::Int(table::all().count() as i64))
    } else if eq(sub, "list") {
        Ok(Reply::Array(
            table::all().map(|s| Reply::bulk(s.name)).collect(),
        ))
    } else if eq(sub, "info") {
        if a.len() == 1 {
            return Ok(Reply::Array(table::all().map(info).collect()));
        }
        Ok(Reply::Array(
            names()
                .map(|n| table::find(&n).map_or(Reply::Nil, info))
                .collect(),
        ))
    } else if eq(sub, "docs") {
        let pairs = if a.len() == 1 {
            table::all()
                .map(|s| (Reply::bulk(s.name), docs(s)))
                .collect()
        } else {
            names()
                .filter_map(|n| table::find(&n).map(|s| (Reply::bulk(s.name), docs(s))))
                .collect()
        };
        Ok(Reply::Map(pairs))
    } else if eq(sub, "getkeys") {
        let Some(name) = a.get(1) else {
            return Err(super::wrong_args("command|getkeys"));
        };
        let Some(s) = table::find(&super::text(name).to_ascii_lowercase()) else {
            return Err(Reply::err("Invalid command specified"));
        };
        if !s.arity_ok(a.len() - 1) {
            return Err(Reply::err(
                "Invalid number of arguments specified for command",
            ));
        }
        let keys = keys_of(s, &a[1..]);
        if keys.is_empty() {
            return Err(Reply::err("The command has no key arguments"));
        }
        Ok(Reply::Array(keys))
    } else {
        Err(Reply::err(format!(
            "unknown subcommand '{}'. Try COMMAND HELP.",
            super::text(sub)
        )))
    }
}

pub fn time(_cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    let us = crate::record::now_us();
    Ok(Reply::Array(vec![
        Reply::bulk((us / 1_000_000).to_string()),
        Reply::bulk((us % 1_000_000).to_string()),
    ]))
}

/// The server's start: every write is in the WAL, there is no separate save.
pub fn lastsave(cx: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    let up = cx.sh.started.elapsed().as_secs();
    Ok(Reply::Int((crate::record::now_ms() / 1000 - up) as i64))
}

/// `FUNCTION`: there are no functions (no scripting); `FLUSH` and `LIST` answer as an
/// empty library set does, since test suites and clients call them when they reset.
pub fn function(_cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if eq(&a[0], "flush") && a.len() <= 2 {
        Ok(Reply::ok())
    } else if eq(&a[0], "list") {
        Ok(Reply::Array(Vec::new()))
    } else {
        Err(Reply::err(
            "FUNCTION is not supported by halflife (no scripting)",
        ))
    }
}

/// `LOLWUT [VERSION v] [...]`: Redis draws computer art for versions 5 and 6 and answers
/// its version line for any other; halflife answers the version line for every version
/// (the art is Redis's own work, not reproduced here).
pub fn lolwut(_cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if let [v, n, ..] = a {
        if eq(v, "version") {
            super::int(n)?;
        }
    }
    Ok(Reply::Text(format!(
        "halflife {}, Redis ver. {}\n",
        env!("CARGO_PKG_VERSION"),
        crate::info::REDIS_VERSION
    )))
}
