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

use crate::cmd::table::{self, Flags};
use crate::config::AppendFsync;
use crate::shared::Shared;
use bytes::Bytes;

/// Whether `batch` may run on the connection's task (see the module's doc).
pub fn runs_inline(sh: &Shared, batch: &[Vec<Bytes>]) -> bool {
    sh.settings.appendfsync() != AppendFsync::Always
        && sh.cluster.as_ref().is_none_or(|c| !c.moving_slots())
        && batch.iter().all(|c| is_cheap(c))
}

/// Whether one command is cheap: its spec says so ([`Flags::CHEAP`], with its
/// [`crate::cmd::table::Spec::point_if`]).
fn is_cheap(cmd: &[Bytes]) -> bool {
    table::find(&cmd[0]).is_some_and(|s| s.runs_as(Flags::CHEAP, cmd))
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
        assert!(is_cheap(&cmd(&["xadd", "s", "*", "f", "v"])));
        assert!(is_cheap(&cmd(&[
            "XADD", "s", "MAXLEN", "~", "9", "*", "f", "v"
        ])));
        assert!(is_cheap(&cmd(&[
            "xadd", "s", "minid", "~", "9", "limit", "5", "1-1", "f", "v"
        ])));
        assert!(is_cheap(&cmd(&["xack", "s", "g", "1-1", "1-2"])));
        assert!(is_cheap(&cmd(&[
            "xread", "count", "5", "streams", "s", "0"
        ])));
        assert!(is_cheap(&cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "block",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            ">"
        ])));
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
            // Trims exactly (any number of entries), or without a bound.
            &["xadd", "s", "maxlen", "9", "*", "f", "v"],
            &["xadd", "s", "maxlen", "=", "9", "*", "f", "v"],
            &["xadd", "s", "maxlen", "~", "9", "limit", "0", "*", "f", "v"],
            // Waits, reads without a short count, or reads several streams.
            &["xread", "count", "5", "block", "0", "streams", "s", "0"],
            &["xread", "streams", "s", "0"],
            &["xread", "count", "1000", "streams", "s", "0"],
            &["xread", "count", "-1", "streams", "s", "0"],
            &["xread", "count", "5", "streams", "s", "t", "0", "0"],
            &[
                "xreadgroup",
                "group",
                "g",
                "c",
                "count",
                "1",
                "block",
                "5",
                "streams",
                "s",
                ">",
            ],
            &["a-name-longer-than-any-cheap-one"],
        ] {
            assert!(!is_cheap(&cmd(c)), "{c:?}");
        }
    }
}
