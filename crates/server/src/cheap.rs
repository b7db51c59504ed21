//! Which batches of commands run on the connection's own task instead of a job on tokio's
//! blocking pool.
//!
//! A pool job per batch costs two thread hand-offs (the job wakes a pool thread, its end
//! wakes the connection's task); under `redis-benchmark` they were about a quarter of the
//! server's CPU (docs/serve.md, "Benchmark"), and with one pool thread per busy connection
//! the commands of one hot key contended for its lock among dozens of threads. A command
//! that does a bounded number of engine point reads and at most one engine write costs
//! less than those hand-offs, so it runs where it was decoded, as Redis runs every command
//! on its event loop. What stays on the pool: anything whose work grows with the data
//! (`KEYS`, `SMEMBERS`, `ZRANGEBYSCORE`, `DEL` of many keys...), anything that waits
//! (`WAIT`, blocking pops, `EXEC`, which waits for the exec lock), and every write under
//! `appendfsync always`, whose WAL sync would hold a network thread for a disk flush.
//! In cluster mode the same holds while no slot is being moved to or from the node; while
//! one is, every batch goes to the pool, as a command on a key of a `MIGRATE` batch in
//! flight waits for the other node's answer. A move that starts just after the check
//! makes such a command wait on its network thread for one batch's round trip, as a
//! `MIGRATE` outside cluster mode makes a command on its keys wait for their locks.
//!
//! The engine may still block such a command (a table block read from disk, a write
//! stall); it then holds one network thread for that while, as it would hold Redis's.

use crate::config::AppendFsync;
use crate::server::Shared;
use bytes::Bytes;

/// Commands whose work is a few point reads and at most one write, whatever the data.
#[rustfmt::skip]
const CHEAP: &[&str] = &[
    // connection
    "ping", "echo", "select",
    // strings: one metadata record each
    "get", "set", "setnx", "setex", "psetex", "getset", "getdel", "getex", "incr", "decr",
    "incrby", "decrby", "incrbyfloat", "append", "strlen", "getbit",
    // several keys: work grows with the request, not with the data
    "mget", "mset",
    // keys: one metadata record (a collection's sub-keys are left to the sweep)
    "exists", "type", "ttl", "pttl", "expiretime", "pexpiretime", "expire", "pexpire",
    "expireat", "pexpireat", "persist",
    // hashes, sets: the metadata record and one sub-key per field or member
    "hset", "hsetnx", "hmset", "hget", "hmget", "hdel", "hlen", "hstrlen", "hexists",
    "hincrby", "hincrbyfloat", "sadd", "srem", "sismember", "smismember", "scard",
    // lists: the metadata record and the sub-keys at one end
    "lpush", "rpush", "lpushx", "rpushx", "llen",
    // sorted sets: the metadata record, the member's score and its index entry
    "zadd", "zincrby", "zscore", "zmscore", "zcard", "zrem",
];

/// Most elements of an `LRANGE` run on the connection's task: a scan of that many
/// sub-keys (one seek, then steps) costs less than the pool's two thread hand-offs and the
/// fresh memory of a pool thread's heap, which were 40 % of the server's CPU for
/// `LRANGE 0 99` (docs/serve.md, "Where a request's time goes").
const SHORT_RANGE: i64 = 128;

/// Whether `LRANGE key start end` reads at most [`SHORT_RANGE`] elements whatever the
/// list's length: both indexes count from the same end.
fn short_range(start: &[u8], end: &[u8]) -> bool {
    use crate::cmd::parse_int;
    match (parse_int(start), parse_int(end)) {
        (Some(s), Some(e)) if (s >= 0) == (e >= 0) => e.saturating_sub(s) < SHORT_RANGE,
        _ => false,
    }
}

/// Longest command name in [`CHEAP`] (names longer than this are not looked up).
const MAX_NAME: usize = 16;

/// Whether `batch` may run on the connection's task (see the module's doc).
pub fn runs_inline(sh: &Shared, batch: &[Vec<Bytes>]) -> bool {
    sh.settings.appendfsync() != AppendFsync::Always
        && sh.cluster.as_ref().is_none_or(|c| !c.moving_slots())
        && batch.iter().all(|c| is_cheap(c))
}

/// Whether one command is cheap (see [`CHEAP`]); `LPOP`/`RPOP` without a count are too,
/// and an `LRANGE` whose indexes alone bound it to [`SHORT_RANGE`] elements.
fn is_cheap(cmd: &[Bytes]) -> bool {
    let Some(name) = cmd.first() else {
        return false;
    };
    if name.len() > MAX_NAME {
        return false;
    }
    let mut buf = [0u8; MAX_NAME];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let lower = &*lower;
    match lower {
        b"lpop" | b"rpop" => cmd.len() == 2,
        b"lrange" => cmd.len() == 4 && short_range(&cmd[2], &cmd[3]),
        _ => CHEAP.iter().any(|c| c.as_bytes() == lower),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn point_commands_are_cheap_in_any_case() {
        assert!(is_cheap(&cmd(&["GET", "k"])));
        assert!(is_cheap(&cmd(&["zAdd", "z", "1", "m"])));
        assert!(is_cheap(&cmd(&["lpop", "l"])));
        assert!(is_cheap(&cmd(&["LRANGE", "l", "0", "99"])));
        assert!(is_cheap(&cmd(&["lrange", "l", "-100", "-1"])));
        assert!(is_cheap(&cmd(&["lrange", "l", "5", "1"])));
    }

    #[test]
    fn commands_whose_work_grows_with_the_data_are_not() {
        for c in [
            &["keys", "*"][..],
            &["smembers", "s"],
            &["lpop", "l", "1000"],
            &["lrange", "l", "0", "-1"],
            &["lrange", "l", "0", "128"],
            &["lrange", "l", "-1000", "-1"],
            &["lrange", "l", "x", "1"],
            &["wait", "1", "0"],
            &["exec"],
            &["blpop", "l", "0"],
            &["a-name-longer-than-any-cheap-one"],
        ] {
            assert!(!is_cheap(&cmd(c)), "{c:?}");
        }
    }
}
