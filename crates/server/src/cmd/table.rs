//! The command table: every command the server knows is one [`Spec`] here, declared by
//! the file that implements it (each data type, connection, server, replication, cluster,
//! transactions has a `COMMANDS` slice) and gathered by [`all`]. A spec says everything
//! the rest of the server asks of a command: its arity, Redis's flags and key positions
//! (what `COMMAND INFO` reports and clients such as redis-py read, and how cluster mode
//! routes it), halflife's own properties of how it runs (cheap enough for the network
//! thread, combinable into one engine write, which lock it takes), its group for `COMMAND
//! DOCS`, and its handler. Nothing else lists command names.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::OnceLock;

pub type Handler = fn(&mut super::Ctx, &[Bytes]) -> super::CmdResult;

bitflags::bitflags! {
    /// Redis's command flags (the first group, reported by `COMMAND INFO` under these
    /// names), then halflife's properties of how the server runs a command.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Flags: u32 {
        const WRITE = 1 << 0;
        const READONLY = 1 << 1;
        const DENYOOM = 1 << 2;
        const ADMIN = 1 << 3;
        const PUBSUB = 1 << 4;
        const NOSCRIPT = 1 << 5;
        const BLOCKING = 1 << 6;
        const LOADING = 1 << 7;
        const STALE = 1 << 8;
        const SKIP_SLOWLOG = 1 << 9;
        const ASKING = 1 << 10;
        const FAST = 1 << 11;
        const NO_AUTH = 1 << 12;
        const MAY_REPLICATE = 1 << 13;
        const NO_MULTI = 1 << 14;
        const ALLOW_BUSY = 1 << 15;
        const MOVABLEKEYS = 1 << 16;
        const NO_MANDATORY_KEYS = 1 << 17;
        /// Shown to `MONITOR` before it runs instead of after (scripts, so that the
        /// commands they run come after them).
        const SKIP_MONITOR = 1 << 18;

        /// A bounded number of engine point reads and at most one engine write, whatever
        /// the data: runs on the connection's task instead of the blocking pool
        /// ([`crate::inline`]). Subject to [`Spec::point_if`].
        const CHEAP = 1 << 24;
        /// Reads only its key's metadata record and sub-keys by point lookups and writes
        /// only those: may join a run of commands on one key applied as one engine write
        /// ([`crate::combine`]). Subject to [`Spec::point_if`].
        const COMBINABLE = 1 << 25;
        /// May make clients blocked on its key ready (a push): it does not join a run
        /// while a client is blocked, since Redis serves blocked clients between two
        /// commands of a pipeline.
        const WAKES = 1 << 26;
        /// Takes the server-wide exec lock itself (exclusively: `EXEC`, `REPLICAOF`) or
        /// holds none while it waits (`WAIT`); every other command runs holding it shared.
        const OWN_LOCK = 1 << 27;
        /// Runs at once inside `MULTI` instead of being queued (`EXEC`, `DISCARD`, ...).
        const NOT_QUEUED = 1 << 28;
        /// May run on a RESP2 connection that has subscriptions (Redis's subscribed
        /// state: (un)subscribing, `PING`, `QUIT`, `RESET`).
        const PUBSUB_CONTEXT = 1 << 29;
        /// A container of subcommands (`CLIENT`, `CONFIG`, ...): `INFO commandstats`
        /// counts its calls per subcommand, as Redis 7.0 does ([`crate::cmdstats`]).
        const SUBCOMMANDS = 1 << 30;
        /// Runs a script: a batch of only such commands runs on the script thread
        /// ([`crate::server::lane`]).
        const RUNS_SCRIPT = 1 << 31;
    }
}

/// Redis's flag names, in `COMMAND INFO`'s order.
const REDIS_FLAGS: &[(Flags, &str)] = &[
    (Flags::WRITE, "write"),
    (Flags::READONLY, "readonly"),
    (Flags::DENYOOM, "denyoom"),
    (Flags::ADMIN, "admin"),
    (Flags::PUBSUB, "pubsub"),
    (Flags::NOSCRIPT, "noscript"),
    (Flags::BLOCKING, "blocking"),
    (Flags::LOADING, "loading"),
    (Flags::STALE, "stale"),
    (Flags::SKIP_MONITOR, "skip_monitor"),
    (Flags::SKIP_SLOWLOG, "skip_slowlog"),
    (Flags::ASKING, "asking"),
    (Flags::FAST, "fast"),
    (Flags::NO_AUTH, "no_auth"),
    (Flags::MAY_REPLICATE, "may_replicate"),
    (Flags::NO_MULTI, "no_multi"),
    (Flags::MOVABLEKEYS, "movablekeys"),
    (Flags::ALLOW_BUSY, "allow_busy"),
    (Flags::NO_MANDATORY_KEYS, "no_mandatory_keys"),
];

/// A command's group (`COMMAND DOCS`) and ACL category.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // groups of commands still to come (streams, pub/sub, ...)
pub enum Group {
    Connection,
    Server,
    Generic,
    String,
    Bitmap,
    Hash,
    List,
    Set,
    SortedSet,
    Stream,
    Hyperloglog,
    Geo,
    Pubsub,
    Scripting,
    Transactions,
    Cluster,
}

impl Group {
    /// Redis's name of the group.
    pub fn name(self) -> &'static str {
        match self {
            Group::Connection => "connection",
            Group::Server => "server",
            Group::Generic => "generic",
            Group::String => "string",
            Group::Bitmap => "bitmap",
            Group::Hash => "hash",
            Group::List => "list",
            Group::Set => "set",
            Group::SortedSet => "sorted-set",
            Group::Stream => "stream",
            Group::Hyperloglog => "hyperloglog",
            Group::Geo => "geo",
            Group::Pubsub => "pubsub",
            Group::Scripting => "scripting",
            Group::Transactions => "transactions",
            Group::Cluster => "cluster",
        }
    }

    /// The ACL category of the group's commands.
    pub fn category(self) -> &'static str {
        match self {
            Group::String => "@string",
            Group::Bitmap => "@bitmap",
            Group::Hash => "@hash",
            Group::List => "@list",
            Group::Set => "@set",
            Group::SortedSet => "@sortedset",
            Group::Stream => "@stream",
            Group::Hyperloglog => "@hyperloglog",
            Group::Geo => "@geo",
            Group::Pubsub => "@pubsub",
            Group::Scripting => "@scripting",
            Group::Transactions => "@transaction",
            Group::Connection => "@connection",
            Group::Server | Group::Generic | Group::Cluster => "@keyspace",
        }
    }
}

/// Key positions as Redis declares them: the first key's index (0: no keys), the last's
/// (negative: from the end), the step between keys.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    pub first: i32,
    pub last: i32,
    pub step: i32,
}

/// The keys of a command whose key positions depend on its arguments (Redis's
/// `movablekeys`: `EVAL`'s `numkeys`, `ZUNIONSTORE`'s, ...): their indexes in the whole
/// command (name first), or an error reply for arguments that do not parse.
pub type KeyFinder = fn(&[Bytes]) -> Result<Vec<usize>, super::Reply>;

/// One command (see the module's doc).
pub struct Spec {
    pub name: &'static str,
    /// Redis's arity: `n` exactly `n` words with the name, `-n` at least `n`.
    pub arity: i32,
    pub flags: Flags,
    pub keys: KeySpec,
    /// Where the keys are when [`Spec::keys`] cannot say (`None`: it says).
    pub find_keys: Option<KeyFinder>,
    pub group: Group,
    pub handler: Handler,
    /// `CHEAP` and `COMBINABLE` hold only for calls this accepts (the whole command, name
    /// first): a pop without a count, an `LRANGE` bounded by its indexes.
    pub point_if: Option<fn(&[Bytes]) -> bool>,
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

    pub fn has(&self, f: Flags) -> bool {
        self.flags.contains(f)
    }

    /// Whether the call `args` has the run property `f` ([`Flags::CHEAP`],
    /// [`Flags::COMBINABLE`]): the flag, and [`Spec::point_if`] if the spec has one.
    pub fn runs_as(&self, f: Flags, args: &[Bytes]) -> bool {
        self.has(f) && self.point_if.is_none_or(|ok| ok(args))
    }

    /// The key of `args` (the whole command, name first) if it has exactly one.
    pub fn sole_key<'a>(&self, args: &'a [Bytes]) -> Option<&'a Bytes> {
        if self.find_keys.is_none() && self.keys.first == 1 && self.keys.last == 1 {
            return args.get(1);
        }
        match self.key_indexes(args).ok()?[..] {
            [i] => args.get(i),
            _ => None,
        }
    }

    /// Redis's names of the command's flags, for `COMMAND INFO`.
    pub fn redis_flags(&self) -> impl Iterator<Item = &'static str> + '_ {
        REDIS_FLAGS
            .iter()
            .filter(|(f, _)| self.flags.contains(*f))
            .map(|(_, n)| *n)
    }

    /// The indexes of the keys of `args` (the whole command, name first), by
    /// [`Spec::find_keys`] or the key positions.
    pub fn key_indexes(&self, args: &[Bytes]) -> Result<Vec<usize>, super::Reply> {
        if let Some(find) = self.find_keys {
            return find(args);
        }
        let KeySpec { first, last, step } = self.keys;
        if first <= 0 || step <= 0 {
            return Ok(Vec::new());
        }
        let n = args.len() as i32;
        let last = if last < 0 { n + last } else { last.min(n - 1) };
        Ok((first..=last)
            .step_by(step as usize)
            .map(|i| i as usize)
            .filter(|&i| i < args.len())
            .collect())
    }
}

/// One [`Spec`]: `c!(name, arity, [FLAG ...], first, last, step, Group, handler)`, then
/// optionally `point_if = f` and `find_keys = f`.
macro_rules! c {
    ($name:literal, $arity:expr, [$($flag:ident)*], $first:expr, $last:expr, $step:expr, $group:ident, $h:expr $(, $field:ident = $v:expr)* $(,)?) => {
        $crate::cmd::table::Spec {
            $($field: Some($v),)*
            ..$crate::cmd::table::Spec {
                name: $name,
                arity: $arity,
                flags: $crate::cmd::table::Flags::empty()$(.union($crate::cmd::table::Flags::$flag))*,
                keys: $crate::cmd::table::KeySpec { first: $first, last: $last, step: $step },
                find_keys: None,
                group: $crate::cmd::table::Group::$group,
                handler: $h,
                point_if: None,
            }
        }
    };
}
pub(crate) use c;

/// The spec of the command named `name` (any case), with its position in [`all`] (its
/// number in per-command arrays such as [`crate::cmdstats`]'s). No name is longer than
/// [`MAX_NAME`] bytes, so a longer one (a client's megabytes) is not looked at.
pub fn lookup(name: &[u8]) -> Option<(usize, &'static Spec)> {
    static INDEX: OnceLock<HashMap<&'static str, (usize, &'static Spec)>> = OnceLock::new();
    if name.len() > MAX_NAME {
        return None;
    }
    let mut buf = [0u8; MAX_NAME];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let lower = std::str::from_utf8(lower).ok()?;
    INDEX
        .get_or_init(|| all().enumerate().map(|(i, s)| (s.name, (i, s))).collect())
        .get(lower)
        .copied()
}

/// Each command's name and whether it counts per subcommand ([`Flags::SUBCOMMANDS`]), in
/// the table's order: what [`crate::cmdstats::CommandStats::new`] counts.
pub fn counted() -> impl Iterator<Item = (&'static str, bool)> {
    all().map(|s| (s.name, s.has(Flags::SUBCOMMANDS)))
}

/// The spec of `name` (any case).
pub fn find(name: &[u8]) -> Option<&'static Spec> {
    lookup(name).map(|(_, s)| s)
}

/// Longest command name (bytes) looked up.
pub const MAX_NAME: usize = 32;

/// Every command, file by file.
pub fn all() -> impl Iterator<Item = &'static Spec> {
    [
        super::connection::COMMANDS,
        super::client::COMMANDS,
        super::server::COMMANDS,
        super::persist::COMMANDS,
        super::config::COMMANDS,
        super::command::COMMANDS,
        super::slowlog::COMMANDS,
        super::latency::COMMANDS,
        super::debug::COMMANDS,
        super::repl::COMMANDS,
        super::cluster::COMMANDS,
        super::keyspace::COMMANDS,
        super::migrate::COMMANDS,
        super::string::COMMANDS,
        super::multi::COMMANDS,
        super::hash::COMMANDS,
        super::set::COMMANDS,
        super::list::COMMANDS,
        super::zset::COMMANDS,
        super::pubsub::COMMANDS,
        super::blocking::COMMANDS,
        super::stream::COMMANDS,
        super::hll::COMMANDS,
        super::bitfield::COMMANDS,
        super::sort::COMMANDS,
        super::geo::COMMANDS,
        super::script::COMMANDS,
    ]
    .into_iter()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_lower_case_short_and_declared_once() {
        let mut seen = std::collections::HashSet::new();
        for s in all() {
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert!(s.name.len() <= MAX_NAME, "{}", s.name);
            assert!(seen.insert(s.name), "{} declared twice", s.name);
        }
    }

    #[test]
    fn lookup_ignores_case_and_refuses_long_names() {
        assert_eq!(find(b"GeT").map(|s| s.name), Some("get"));
        assert!(find(&[b'a'; 100]).is_none());
        assert!(find(b"no-such-command").is_none());
    }

    #[test]
    fn flags_are_consistent() {
        for s in all() {
            // A combinable command runs on the network thread: a run is cheap by
            // construction, and both decide by the same point_if.
            if s.has(Flags::COMBINABLE) {
                assert!(s.has(Flags::CHEAP), "{} combinable but not cheap", s.name);
            }
            assert!(
                !(s.has(Flags::WRITE) && s.has(Flags::READONLY)),
                "{} is both write and readonly",
                s.name
            );
            if s.has(Flags::WAKES) {
                assert!(s.has(Flags::WRITE), "{} wakes but does not write", s.name);
            }
        }
    }
}
