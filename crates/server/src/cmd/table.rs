//! The command table: name, arity, flags and key positions as Redis 7.0 declares them
//! (what `COMMAND INFO` reports and clients such as redis-py read), the group for
//! `COMMAND DOCS`, and the handler of the commands this module runs. Commands whose
//! handler is `None` are run by [`crate::commands`] and listed here for `COMMAND`.

use super::{
    blocking, hash, introspect, keyspace, list, migrate, multi, set, string, zset, CmdResult, Ctx,
};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::OnceLock;

pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

pub struct Spec {
    pub name: &'static str,
    /// Redis's arity: `n` exactly `n` words with the name, `-n` at least `n`.
    pub arity: i32,
    pub flags: &'static str,
    pub first: i32,
    pub last: i32,
    pub step: i32,
    pub group: &'static str,
    pub handler: Option<Handler>,
}

impl Spec {
    pub fn arity_ok(&self, words: usize) -> bool {
        let n = self.arity.unsigned_abs() as usize;
        if self.arity >= 0 {
            words == n
        } else {
            words >= n
        }
    }
}

#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    // connection and server (run by crate::commands)
    c!("ping", -1, "fast stale", 0, 0, 0, "connection", None),
    c!("echo", 2, "fast stale", 0, 0, 0, "connection", None),
    c!("quit", -1, "noscript loading stale fast no_auth allow_busy", 0, 0, 0, "connection", None),
    c!("hello", -1, "noscript loading stale fast no_auth allow_busy", 0, 0, 0, "connection", None),
    c!("auth", -2, "noscript loading stale fast no_auth allow_busy", 0, 0, 0, "connection", None),
    c!("reset", 1, "noscript loading stale fast no_auth allow_busy", 0, 0, 0, "connection", None),
    c!("client", -2, "admin noscript loading stale", 0, 0, 0, "connection", None),
    c!("select", 2, "loading stale fast", 0, 0, 0, "connection", Some(keyspace::select)),
    c!("shutdown", -1, "admin noscript loading stale no_multi allow_busy", 0, 0, 0, "server", None),
    c!("info", -1, "loading stale", 0, 0, 0, "server", None),
    c!("config", -2, "admin noscript loading stale", 0, 0, 0, "server", None),
    c!("command", -1, "loading stale", 0, 0, 0, "server", Some(introspect::command)),
    // replication (run by crate::repl); no_multi on REPLICAOF and WAIT is halflife's: they
    // take or wait for locks EXEC holds
    c!("replicaof", 3, "admin noscript stale no_multi", 0, 0, 0, "server", None),
    c!("slaveof", 3, "admin noscript stale no_multi", 0, 0, 0, "server", None),
    c!("role", 1, "noscript loading stale fast", 0, 0, 0, "server", None),
    c!("wait", 3, "noscript no_multi", 0, 0, 0, "generic", None),
    c!("replconf", -1, "admin noscript loading stale allow_busy", 0, 0, 0, "server", None),
    c!("psync", -3, "admin noscript no_multi", 0, 0, 0, "server", None),
    c!("sync", 1, "admin noscript no_multi", 0, 0, 0, "server", None),
    c!("dbsize", 1, "readonly fast", 0, 0, 0, "server", None),
    c!("flushdb", -1, "write", 0, 0, 0, "server", Some(keyspace::flushdb)),
    c!("flushall", -1, "write", 0, 0, 0, "server", Some(keyspace::flushall)),
    c!("function", -2, "noscript", 0, 0, 0, "scripting", Some(introspect::function)),
    c!("time", 1, "loading stale fast", 0, 0, 0, "server", Some(introspect::time)),
    c!("lolwut", -1, "readonly fast", 0, 0, 0, "server", Some(introspect::lolwut)),
    c!("lastsave", 1, "loading stale fast", 0, 0, 0, "server", Some(introspect::lastsave)),
    // cluster mode (crate::cluster)
    c!("cluster", -2, "loading stale", 0, 0, 0, "cluster", Some(crate::cluster::cmd::cluster)),
    c!("clusterx", -2, "admin loading stale", 0, 0, 0, "cluster", Some(crate::cluster::cmd::clusterx)),
    c!("readonly", 1, "loading stale fast", 0, 0, 0, "cluster", Some(crate::cluster::cmd::readonly)),
    c!("readwrite", 1, "loading stale fast", 0, 0, 0, "cluster", Some(crate::cluster::cmd::readwrite)),
    c!("asking", 1, "fast", 0, 0, 0, "cluster", Some(crate::cluster::cmd::asking)),
    // generic
    c!("scan", -2, "readonly", 0, 0, 0, "generic", None),
    c!("keys", 2, "readonly", 0, 0, 0, "generic", None),
    c!("del", -2, "write", 1, -1, 1, "generic", Some(keyspace::del)),
    c!("unlink", -2, "write fast", 1, -1, 1, "generic", Some(keyspace::del)),
    c!("exists", -2, "readonly fast", 1, -1, 1, "generic", Some(keyspace::exists)),
    c!("touch", -2, "readonly fast", 1, -1, 1, "generic", Some(keyspace::exists)),
    c!("type", 2, "readonly fast", 1, 1, 1, "generic", Some(keyspace::type_)),
    c!("ttl", 2, "readonly fast", 1, 1, 1, "generic", Some(keyspace::ttl)),
    c!("pttl", 2, "readonly fast", 1, 1, 1, "generic", Some(keyspace::pttl)),
    c!("expiretime", 2, "readonly fast", 1, 1, 1, "generic", Some(keyspace::expiretime)),
    c!("pexpiretime", 2, "readonly fast", 1, 1, 1, "generic", Some(keyspace::pexpiretime)),
    c!("expire", -3, "write fast", 1, 1, 1, "generic", Some(keyspace::expire)),
    c!("pexpire", -3, "write fast", 1, 1, 1, "generic", Some(keyspace::pexpire)),
    c!("expireat", -3, "write fast", 1, 1, 1, "generic", Some(keyspace::expireat)),
    c!("pexpireat", -3, "write fast", 1, 1, 1, "generic", Some(keyspace::pexpireat)),
    c!("persist", 2, "write fast", 1, 1, 1, "generic", Some(keyspace::persist)),
    c!("rename", 3, "write", 1, 2, 1, "generic", Some(keyspace::rename)),
    c!("renamenx", 3, "write fast", 1, 2, 1, "generic", Some(keyspace::renamenx)),
    c!("copy", -3, "write denyoom", 1, 2, 1, "generic", Some(keyspace::copy)),
    c!("dump", 2, "readonly", 1, 1, 1, "generic", Some(migrate::dump_cmd)),
    c!("restore", -4, "write denyoom", 1, 1, 1, "generic", Some(migrate::restore)),
    c!("restore-asking", -4, "write denyoom asking", 1, 1, 1, "server", Some(migrate::restore)),
    // no_multi is halflife's: MIGRATE takes the exec lock, which EXEC holds
    c!("migrate", -6, "write no_multi", 3, 3, 1, "generic", Some(migrate::migrate)),
    c!("move", 3, "write fast", 1, 1, 1, "generic", Some(keyspace::move_)),
    c!("randomkey", 1, "readonly", 0, 0, 0, "generic", Some(keyspace::randomkey)),
    c!("memory", -2, "readonly", 0, 0, 0, "server", Some(keyspace::memory)),
    c!("object", -2, "readonly", 2, 2, 1, "generic", Some(keyspace::object)),
    // strings
    c!("get", 2, "readonly fast", 1, 1, 1, "string", Some(string::get)),
    c!("set", -3, "write denyoom", 1, 1, 1, "string", Some(string::set)),
    c!("setnx", 3, "write denyoom fast", 1, 1, 1, "string", Some(string::setnx)),
    c!("setex", 4, "write denyoom", 1, 1, 1, "string", Some(string::setex)),
    c!("psetex", 4, "write denyoom", 1, 1, 1, "string", Some(string::psetex)),
    c!("getset", 3, "write denyoom fast", 1, 1, 1, "string", Some(string::getset)),
    c!("getdel", 2, "write fast", 1, 1, 1, "string", Some(string::getdel)),
    c!("getex", -2, "write fast", 1, 1, 1, "string", Some(string::getex)),
    c!("mget", -2, "readonly fast", 1, -1, 1, "string", Some(string::mget)),
    c!("mset", -3, "write denyoom", 1, -1, 2, "string", Some(string::mset)),
    c!("msetnx", -3, "write denyoom", 1, -1, 2, "string", Some(string::msetnx)),
    c!("incr", 2, "write denyoom fast", 1, 1, 1, "string", Some(string::incr)),
    c!("decr", 2, "write denyoom fast", 1, 1, 1, "string", Some(string::decr)),
    c!("incrby", 3, "write denyoom fast", 1, 1, 1, "string", Some(string::incrby)),
    c!("decrby", 3, "write denyoom fast", 1, 1, 1, "string", Some(string::decrby)),
    c!("incrbyfloat", 3, "write denyoom fast", 1, 1, 1, "string", Some(string::incrbyfloat)),
    c!("append", 3, "write denyoom fast", 1, 1, 1, "string", Some(string::append)),
    c!("strlen", 2, "readonly fast", 1, 1, 1, "string", Some(string::strlen)),
    c!("getrange", 4, "readonly", 1, 1, 1, "string", Some(string::getrange)),
    c!("substr", 4, "readonly", 1, 1, 1, "string", Some(string::getrange)),
    c!("setrange", 4, "write denyoom", 1, 1, 1, "string", Some(string::setrange)),
    c!("lcs", -3, "readonly", 1, 2, 1, "string", Some(string::lcs)),
    c!("setbit", 4, "write denyoom", 1, 1, 1, "bitmap", Some(string::setbit)),
    c!("getbit", 3, "readonly fast", 1, 1, 1, "bitmap", Some(string::getbit)),
    c!("bitcount", -2, "readonly", 1, 1, 1, "bitmap", Some(string::bitcount)),
    c!("bitop", -4, "write denyoom", 2, -1, 1, "bitmap", Some(string::bitop)),
    c!("bitpos", -3, "readonly", 1, 1, 1, "bitmap", Some(string::bitpos)),
    // transactions
    c!("multi", 1, "noscript loading stale fast allow_busy", 0, 0, 0, "transactions", Some(multi::multi)),
    c!("exec", 1, "noscript loading stale skip_slowlog", 0, 0, 0, "transactions", Some(multi::exec)),
    c!("discard", 1, "noscript loading stale fast allow_busy", 0, 0, 0, "transactions", Some(multi::discard)),
    c!("watch", -2, "noscript loading stale fast allow_busy", 1, -1, 1, "transactions", Some(multi::watch)),
    c!("unwatch", 1, "noscript loading stale fast allow_busy", 0, 0, 0, "transactions", Some(multi::unwatch)),
];

/// The spec of `name` (lower case), from [`COMMANDS`] or a data-type group's table.
pub fn find(name: &str) -> Option<&'static Spec> {
    find_numbered(name).map(|(_, s)| s)
}

/// [`find`], with the command's position in [`all`] (its number in per-command arrays).
pub fn find_numbered(name: &str) -> Option<(usize, &'static Spec)> {
    static INDEX: OnceLock<HashMap<&'static str, (usize, &'static Spec)>> = OnceLock::new();
    INDEX
        .get_or_init(|| all().enumerate().map(|(i, s)| (s.name, (i, s))).collect())
        .get(name)
        .copied()
}

/// Every command: this table and the data-type groups'.
pub fn all() -> impl Iterator<Item = &'static Spec> {
    COMMANDS
        .iter()
        .chain(hash::COMMANDS)
        .chain(set::COMMANDS)
        .chain(list::COMMANDS)
        .chain(zset::COMMANDS)
        .chain(blocking::COMMANDS)
}
