//! `COMMAND`: what the command table ([`super::table`]) says of each command, as Redis 7.0
//! reports it.

use super::table::c;
use super::table::{self, Flags, Spec};
use super::{eq, CmdResult, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;

/// ACL categories a command's flags and group imply (what `COMMAND INFO` lists).
fn categories(s: &Spec) -> Vec<Reply> {
    let mut c = Vec::new();
    if s.keys.first > 0 {
        c.push("@keyspace");
    }
    if s.has(Flags::WRITE) {
        c.push("@write");
    }
    if s.has(Flags::READONLY) {
        c.push("@read");
    }
    if s.has(Flags::FAST) {
        c.push("@fast");
    } else {
        c.push("@slow");
    }
    if s.has(Flags::ADMIN) {
        c.extend(["@admin", "@dangerous"]);
    }
    if s.has(Flags::BLOCKING) {
        c.push("@blocking");
    }
    c.push(s.group.category());
    c.dedup();
    c.into_iter().map(Reply::Simple).collect()
}

/// One command's `COMMAND INFO` entry (Redis 7's ten fields).
fn info(s: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::bulk(s.name),
        Reply::Int(s.arity as i64),
        Reply::Array(s.redis_flags().map(Reply::Simple).collect()),
        Reply::Int(s.keys.first as i64),
        Reply::Int(s.keys.last as i64),
        Reply::Int(s.keys.step as i64),
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
        (Reply::bulk("group"), Reply::bulk(s.group.name())),
    ])
}

#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    c!("command", -1, [LOADING STALE SUBCOMMANDS], 0, 0, 0, Server, command),
];

fn command(_cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let Some(sub) = a.first() else {
        return Ok(Reply::Array(table::all().map(info).collect()));
    };
    let named = || a[1..].iter().map(|n| table::find(n));
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
            named().map(|s| s.map_or(Reply::Nil, info)).collect(),
        ))
    } else if eq(sub, "docs") {
        let pairs = if a.len() == 1 {
            table::all()
                .map(|s| (Reply::bulk(s.name), docs(s)))
                .collect()
        } else {
            named()
                .flatten()
                .map(|s| (Reply::bulk(s.name), docs(s)))
                .collect()
        };
        Ok(Reply::Map(pairs))
    } else if eq(sub, "getkeys") {
        let Some(name) = a.get(1) else {
            return Err(super::wrong_args("command|getkeys"));
        };
        let Some(s) = table::find(name) else {
            return Err(Reply::err("Invalid command specified"));
        };
        if !s.arity_ok(a.len() - 1) {
            return Err(Reply::err(
                "Invalid number of arguments specified for command",
            ));
        }
        let keys: Vec<Reply> = s
            .key_indexes(&a[1..])?
            .into_iter()
            .map(|i| Reply::Bulk(a[1 + i].clone()))
            .collect();
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
