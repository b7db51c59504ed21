//! The replication state of this node, below the server's shared state: its role (primary,
//! or replica of which primary and how its link stands), the replicas connected to it
//! and what they acknowledged (`WAIT`), the sync counters, and a replica's stored
//! position; what `INFO replication` and `ROLE` report. The replication tasks and
//! commands that change it are [`crate::repl`] and [`crate::cmd::repl`].

use crate::protocol::Reply;
use crate::store::Store;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;
use tokio::sync::watch;

/// Where a replica's link stands (`ROLE`'s states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Waiting to (re)connect.
    Connect,
    /// Connected, in the handshake.
    Connecting,
    /// Receiving a full sync.
    Sync,
    /// Applying the stream.
    Connected,
}

impl LinkState {
    fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// A replica's view of its primary.
struct Link {
    host: String,
    port: u16,
    state: LinkState,
    /// Replication id and offset of what this replica has applied.
    replid: String,
    offset: u64,
    last_io: Instant,
    /// When the link was last up (or made): `master_link_down_since_seconds`.
    down_since: Instant,
    /// Why the last attempt failed (empty if none did).
    last_error: String,
}

/// A replica connected to this primary.
pub struct Peer {
    ip: String,
    /// The port it listens on (`REPLCONF listening-port`).
    port: u16,
    state: &'static str,
    /// The offset it last acknowledged (none before its first `REPLCONF ACK`, which it
    /// sends once it has installed a full sync and applies the stream).
    ack: Option<u64>,
    last_ack: Instant,
}

pub(crate) struct State {
    /// Bumped at every change of role: a link or a stream to a replica that sees it
    /// changed stops.
    gen: u64,
    link: Option<Link>,
    peers: BTreeMap<u64, Peer>,
}

/// Full and partial syncs served (INFO stats).
#[derive(Default)]
pub struct SyncStats {
    pub full: AtomicU64,
    /// Partial resyncs, from the backlog or the WAL.
    pub partial_ok: AtomicU64,
    /// Those of `partial_ok` served from the WAL.
    pub partial_wal: AtomicU64,
    pub partial_err: AtomicU64,
}

pub struct Replication {
    state: Mutex<State>,
    /// Signalled when a replica acknowledges an offset (`WAIT`).
    acked: Condvar,
    gen_tx: watch::Sender<u64>,
    pub stats: SyncStats,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            state: Mutex::new(State {
                gen: 0,
                link: None,
                peers: BTreeMap::new(),
            }),
            acked: Condvar::new(),
            gen_tx: watch::channel(0).0,
            stats: SyncStats::default(),
        }
    }
}

impl Replication {
    pub fn gen(&self) -> u64 {
        self.state.lock().gen
    }

    /// Tells of each change of role.
    pub fn watch_gen(&self) -> watch::Receiver<u64> {
        self.gen_tx.subscribe()
    }

    /// The primary this server replicates, if it is a replica.
    pub fn primary(&self) -> Option<(String, u16)> {
        self.state
            .lock()
            .link
            .as_ref()
            .map(|l| (l.host.clone(), l.port))
    }

    pub(crate) fn link_offset(&self) -> Option<u64> {
        self.state.lock().link.as_ref().map(|l| l.offset)
    }

    fn update_link(&self, gen: u64, f: impl FnOnce(&mut Link)) {
        let mut st = self.state.lock();
        if st.gen == gen {
            if let Some(l) = st.link.as_mut() {
                f(l);
            }
        }
    }

    pub fn set_link_state(&self, gen: u64, state: LinkState) {
        self.update_link(gen, |l| {
            if l.state == LinkState::Connected && state != LinkState::Connected {
                l.down_since = Instant::now();
            }
            l.state = state;
            l.last_io = Instant::now();
        });
    }

    /// The link applied the stream up to `offset` of history `replid`.
    pub fn set_position(&self, gen: u64, replid: &str, offset: u64) {
        self.update_link(gen, |l| {
            l.replid = replid.to_string();
            l.offset = offset;
            l.last_io = Instant::now();
        });
    }

    /// Records why the link failed, for INFO: one line, cut to 256 characters (it may
    /// quote what the primary sent).
    pub fn link_failed(&self, gen: u64, why: String) {
        let line = why
            .chars()
            .take(256)
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        self.update_link(gen, |l| {
            if l.state == LinkState::Connected {
                l.down_since = Instant::now();
            }
            l.state = LinkState::Connect;
            l.last_error = line;
        });
    }

    pub fn add_peer(&self, id: u64, ip: String, port: u16) {
        self.state.lock().peers.insert(
            id,
            Peer {
                ip,
                port,
                state: "wait_bgsave",
                ack: None,
                last_ack: Instant::now(),
            },
        );
    }

    pub fn set_peer_state(&self, id: u64, state: &'static str) {
        if let Some(p) = self.state.lock().peers.get_mut(&id) {
            p.state = state;
        }
    }

    pub fn peer_acked(&self, id: u64, offset: u64) {
        if let Some(p) = self.state.lock().peers.get_mut(&id) {
            p.ack = Some(p.ack.unwrap_or(0).max(offset));
            p.last_ack = Instant::now();
        }
        self.acked.notify_all();
    }

    pub fn has_peers(&self) -> bool {
        !self.state.lock().peers.is_empty()
    }

    pub fn remove_peer(&self, id: u64) {
        self.state.lock().peers.remove(&id);
        self.acked.notify_all();
    }

    /// `ROLE`'s reply; `offset` is this primary's replication offset.
    pub fn role(&self, offset: u64) -> Reply {
        let st = self.state.lock();
        match &st.link {
            Some(l) => Reply::Array(vec![
                Reply::bulk("slave"),
                Reply::bulk(l.host.clone()),
                Reply::Int(l.port as i64),
                Reply::bulk(l.state.name()),
                Reply::Int(l.offset as i64),
            ]),
            None => {
                let peers = st
                    .peers
                    .values()
                    .filter(|p| p.state == "online")
                    .map(|p| {
                        Reply::Array(vec![
                            Reply::bulk(p.ip.clone()),
                            Reply::bulk(p.port.to_string()),
                            Reply::bulk(p.ack.unwrap_or(0).to_string()),
                        ])
                    })
                    .collect();
                Reply::Array(vec![
                    Reply::bulk("master"),
                    Reply::Int(offset as i64),
                    Reply::Array(peers),
                ])
            }
        }
    }

    /// `WAIT`'s wait: until `want` replicas have acknowledged `target`, `deadline` passes
    /// or `stop` says the server stops; how many had. Calls `ask` (which asks the replicas
    /// to acknowledge at once) first, unless enough have already.
    pub fn wait_acks(
        &self,
        target: u64,
        want: i64,
        deadline: Option<Instant>,
        ask: impl FnOnce(),
        stop: impl Fn() -> bool,
    ) -> i64 {
        let mut st = self.state.lock();
        if Replication::acked_at_least(&st, target) < want {
            drop(st);
            ask();
            st = self.state.lock();
        }
        loop {
            let n = Replication::acked_at_least(&st, target);
            if n >= want || stop() {
                return n;
            }
            let step = std::time::Duration::from_millis(100);
            let until = match deadline {
                Some(d) if d <= Instant::now() => return n,
                Some(d) => d.min(Instant::now() + step),
                None => Instant::now() + step,
            };
            self.acked.wait_until(&mut st, until);
        }
    }

    /// Replicas that acknowledged `offset` or more.
    fn acked_at_least(st: &State, offset: u64) -> i64 {
        st.peers
            .values()
            .filter(|p| p.state == "online" && p.ack.is_some_and(|a| a >= offset))
            .count() as i64
    }

    /// Changes the role (to a replica of `to`, or a primary with `None`); returns the new
    /// generation. The caller holds the exec lock, so no command and no applied batch of
    /// an old link runs meanwhile.
    pub(crate) fn change_role(&self, to: Option<(String, u16)>, offset: u64) -> u64 {
        let mut st = self.state.lock();
        st.gen += 1;
        st.link = to.map(|(host, port)| Link {
            host,
            port,
            state: LinkState::Connect,
            replid: String::new(),
            offset,
            last_io: Instant::now(),
            down_since: Instant::now(),
            last_error: String::new(),
        });
        let gen = st.gen;
        drop(st);
        self.gen_tx.send_replace(gen);
        self.acked.notify_all();
        gen
    }
}

/// What a replica's data holds of its primary's stream, kept in the record
/// [`record::REPL_KEY`], written in the same engine batch as the writes it applied, so
/// that after a restart it asks for exactly the stream after its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    /// The primary's replication id.
    pub replid: String,
    /// The stream's offset; `None` while the replica catches up from its primary's WAL
    /// (those writes are outside the offsets).
    pub offset: Option<u64>,
    /// The primary's engine sequence number: the replica holds every write of data the
    /// primary made up to it, and none after. `None` from a primary that sends none.
    pub seq: Option<u64>,
}

const UNKNOWN: u64 = u64::MAX;

impl Position {
    /// `replid | offset u64 BE | seq u64 BE`, `u64::MAX` for what is not known.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.replid.as_bytes().to_vec();
        v.extend_from_slice(&self.offset.unwrap_or(UNKNOWN).to_be_bytes());
        v.extend_from_slice(&self.seq.unwrap_or(UNKNOWN).to_be_bytes());
        v
    }

    /// Reads the record, also as written before sequence numbers were kept (`replid |
    /// offset`).
    pub fn decode(v: &[u8]) -> Option<Position> {
        let known = |n: u64| (n != UNKNOWN).then_some(n);
        let num = |b: &[u8]| b.try_into().ok().map(u64::from_be_bytes);
        let (id, offset, seq) = if v.len() == 40 + 16 {
            (&v[..40], num(&v[40..48])?, num(&v[48..])?)
        } else if v.len() > 8 {
            let (id, off) = v.split_at(v.len() - 8);
            (id, num(off)?, UNKNOWN)
        } else {
            return None;
        };
        Some(Position {
            replid: std::str::from_utf8(id).ok()?.to_string(),
            offset: known(offset),
            seq: known(seq),
        })
    }
}

impl Replication {
    /// The `# Replication` section of INFO.
    pub fn info(&self, store: &Store, read_only: bool, out: &mut String) {
        let db = store.db();
        // Read before the locks are taken: it lists the archive.
        let archived = db.stats().wal_archive_bytes;
        let st = self.state.lock();
        let log = store.log();
        let mut kv = |k: &str, v: String| {
            let _ = write!(out, "{k}:{v}\r\n");
        };
        match &st.link {
            Some(l) => {
                kv("role", "slave".into());
                kv("master_host", l.host.clone());
                kv("master_port", l.port.to_string());
                let up = l.state == LinkState::Connected;
                kv("master_link_status", if up { "up" } else { "down" }.into());
                if !up {
                    // Redis Sentinel prefers, of the replicas it may promote, those whose
                    // link went down last.
                    kv(
                        "master_link_down_since_seconds",
                        l.down_since.elapsed().as_secs().to_string(),
                    );
                }
                kv(
                    "master_last_io_seconds_ago",
                    if up {
                        l.last_io.elapsed().as_secs().to_string()
                    } else {
                        "-1".into()
                    },
                );
                kv(
                    "master_sync_in_progress",
                    ((l.state == LinkState::Sync) as u8).to_string(),
                );
                kv("slave_read_repl_offset", l.offset.to_string());
                kv("slave_repl_offset", l.offset.to_string());
                kv("slave_priority", "100".into());
                kv("slave_read_only", (read_only as u8).to_string());
                kv("replica_announced", "1".into());
                kv("connected_slaves", "0".into());
                kv("master_replid", l.replid.clone());
                kv("master_repl_offset", l.offset.to_string());
                kv("master_sync_last_error", l.last_error.clone());
            }
            None => {
                kv("role", "master".into());
                let online: Vec<&Peer> = st.peers.values().collect();
                kv("connected_slaves", online.len().to_string());
                for (i, p) in online.iter().enumerate() {
                    kv(
                        &format!("slave{i}"),
                        format!(
                            "ip={},port={},state={},offset={},lag={}",
                            p.ip,
                            p.port,
                            p.state,
                            p.ack.unwrap_or(0),
                            p.last_ack.elapsed().as_secs()
                        ),
                    );
                }
                kv("master_failover_state", "no-failover".into());
                kv("master_replid", log.replid().to_string());
                kv("master_repl_offset", log.offset().to_string());
                // halflife's: the engine's sequence number, what the last open recovered, and
                // how many earlier replication ids a replica may continue from ([`history`]).
                kv("master_repl_seq", db.latest_sequence_number().to_string());
                kv("repl_recovered_seq", store.recovered_seq().to_string());
                kv(
                    "repl_previous_ids",
                    log.history().previous.len().to_string(),
                );
            }
        }
        // The WAL a primary keeps for replicas to continue from (the engine's WAL archive).
        let o = db.options();
        kv("repl_wal_keep_seconds", o.wal.wal_ttl_seconds.to_string());
        kv("repl_wal_keep_bytes", o.wal.wal_size_limit.to_string());
        kv("repl_wal_archive_bytes", archived.to_string());
        let (first, held) = log.held();
        kv("second_repl_offset", "-1".into());
        kv("repl_backlog_active", (log.active() as u8).to_string());
        kv("repl_backlog_size", log.capacity().to_string());
        kv("repl_backlog_first_byte_offset", first.to_string());
        kv("repl_backlog_histlen", held.to_string());
    }

    /// INFO stats' sync counters.
    pub fn info_stats(&self, out: &mut String) {
        let s = &self.stats;
        for (k, v) in [
            ("sync_full", &s.full),
            ("sync_partial_ok", &s.partial_ok),
            ("sync_partial_err", &s.partial_err),
            ("sync_partial_wal", &s.partial_wal),
        ] {
            let _ = write!(out, "{k}:{}\r\n", v.load(Relaxed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Position;

    #[test]
    fn positions_round_trip_and_old_records_read_without_a_sequence_number() {
        let id = "0123456789".repeat(4);
        for (offset, seq) in [(Some(7), Some(9)), (None, Some(3)), (Some(0), None)] {
            let p = Position {
                replid: id.clone(),
                offset,
                seq,
            };
            assert_eq!(Position::decode(&p.encode()), Some(p));
        }
        let mut old = id.clone().into_bytes();
        old.extend_from_slice(&42u64.to_be_bytes());
        assert_eq!(
            Position::decode(&old),
            Some(Position {
                replid: id,
                offset: Some(42),
                seq: None
            })
        );
        assert_eq!(Position::decode(b"short"), None);
    }
}
