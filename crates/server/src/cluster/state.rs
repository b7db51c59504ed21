//! This node's cluster state (its id, the topology and its version) and where it is kept:
//! the file `CLUSTER-NODES` in the database directory, replaced atomically (temp file,
//! fsync, rename, fsync of the directory) on every change, so that a crash leaves the old
//! state or the new one and a restarted node routes as before without its controller.
//!
//! A change is written to disk before it is made visible: no client is ever redirected by
//! a topology that a restart would forget. The slots being migrated (Redis's `CLUSTER
//! SETSLOT ... MIGRATING|IMPORTING`) are part of the state for the same reason: a source
//! restarted mid-move must go on sending `-ASK` for the keys that already left it.

use super::slot::parse_slot;
use super::topology::{valid_id, Topology, ID_LEN};
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file's name in the database directory.
pub const FILE: &str = "CLUSTER-NODES";
const HEADER: &str = "halflife-cluster-nodes 1";

/// A snapshot of the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub myid: String,
    /// The controller's version of `topology`; -1 before any (Kvrocks' convention).
    pub version: i64,
    pub topology: Option<Topology>,
    /// Slots of this node being moved out: slot -> the destination's id.
    pub migrating: BTreeMap<u16, String>,
    /// Slots being moved in: slot -> the source's id.
    pub importing: BTreeMap<u16, String>,
    /// Slots of this node whose keys have all left for another master
    /// (`CLUSTERX MIGRATE`'s success), slot -> the destination's id: their commands are
    /// sent there (`-MOVED`) until the controller gives the slot to it.
    pub migrated: BTreeMap<u16, String>,
    /// Slots whose keys have all arrived from their owner (`CLUSTER IMPORT <slot> 1`, sent
    /// by a `CLUSTERX MIGRATE` job), slot -> the source's id: served here to every
    /// client until the controller gives the slot to this node.
    pub imported: BTreeMap<u16, String>,
}

impl State {
    fn to_text(&self) -> String {
        let mut s = format!("{HEADER}\nmyid {}\nversion {}\n", self.myid, self.version);
        for (what, m) in [
            ("migrating", &self.migrating),
            ("importing", &self.importing),
            ("migrated", &self.migrated),
            ("imported", &self.imported),
        ] {
            for (slot, id) in m {
                s.push_str(&format!("{what} {slot} {id}\n"));
            }
        }
        if let Some(t) = &self.topology {
            s.push_str(&t.to_text());
        }
        s
    }

    fn from_text(text: &str) -> Result<State> {
        let mut lines = text.splitn(4, '\n');
        if lines.next() != Some(HEADER) {
            bail!("not a cluster state file (first line is not '{HEADER}')");
        }
        let field = |line: Option<&str>, name: &str| -> Result<String> {
            line.and_then(|l| l.strip_prefix(name))
                .and_then(|l| l.strip_prefix(' '))
                .map(str::to_string)
                .with_context(|| format!("no '{name}' line"))
        };
        let myid = field(lines.next(), "myid")?;
        if !valid_id(&myid) {
            bail!("myid '{myid}' is not {ID_LEN} hex characters");
        }
        let version: i64 = field(lines.next(), "version")?
            .parse()
            .context("version is not a number")?;
        let mut rest = lines.next().unwrap_or("");
        let [mut migrating, mut importing, mut migrated, mut imported] =
            std::array::from_fn(|_| BTreeMap::new());
        // `migrating|importing|migrated|imported <slot> <id>` lines, then the topology
        // (whose lines start with a node id).
        while let Some((line, tail)) = rest.split_once('\n') {
            let mut w = line.split(' ');
            let map = match w.next() {
                Some("migrating") => &mut migrating,
                Some("importing") => &mut importing,
                Some("migrated") => &mut migrated,
                Some("imported") => &mut imported,
                _ => break,
            };
            let (Some(slot), Some(id), None) = (
                w.next().and_then(|s| parse_slot(s.as_bytes())),
                w.next(),
                w.next(),
            ) else {
                bail!("bad line '{line}'");
            };
            if !valid_id(id) {
                bail!("bad line '{line}'");
            }
            map.insert(slot, id.to_string());
            rest = tail;
        }
        let topology = if version < 0 {
            None
        } else {
            Some(Topology::parse(rest)?)
        };
        let mut st = State {
            myid,
            version,
            topology,
            migrating,
            importing,
            migrated,
            imported,
        };
        st.drop_stale_moves();
        Ok(st)
    }

    /// Forgets the moves the topology no longer allows: a slot migrates out (or counts as
    /// migrated) only while this node owns it, towards another master of the topology
    /// (once the slot is given to its destination, it is routed as any other slot of
    /// that node); it is imported only while another node owns it, from a node of the
    /// topology, and counts as imported only while its source owns it. Run after every
    /// change.
    pub fn drop_stale_moves(&mut self) {
        let Some(t) = &self.topology else {
            self.migrating.clear();
            self.importing.clear();
            self.migrated.clear();
            self.imported.clear();
            return;
        };
        let me = &self.myid;
        let owner = |slot: u16| t.owner(slot).map(|n| n.id.as_str());
        let moving_out = |slot: u16, dst: &String| {
            owner(slot) == Some(me.as_str())
                && dst != me
                && t.node(dst).is_some_and(|n| n.master.is_none())
        };
        self.migrating.retain(|&slot, dst| moving_out(slot, dst));
        self.migrated.retain(|&slot, dst| moving_out(slot, dst));
        self.importing.retain(|&slot, src| {
            owner(slot) != Some(me.as_str()) && src != me && t.node(src).is_some()
        });
        // Served here only while the topology still gives the slot to the source.
        self.imported
            .retain(|&slot, src| owner(slot) == Some(src.as_str()) && src != me);
    }

    /// This node in the topology, if the topology names it.
    pub fn myself(&self) -> Option<&super::topology::Node> {
        self.topology.as_ref()?.node(&self.myid)
    }
}

/// The state of a node started with cluster mode on.
pub struct Cluster {
    path: PathBuf,
    state: RwLock<State>,
    /// Held shared by a command on a slot this node migrates, from its routing check (which
    /// looks at which of its keys are still here) to its end, and exclusively by `MIGRATE`
    /// while it picks the keys it moves and marks them `departing`: a key never leaves
    /// while a command that found it here runs.
    moving: RwLock<()>,
    /// Keys of `MIGRATE` batches in flight (sent, not yet acknowledged and deleted): a
    /// command on one waits for `departed` rather than run on a key about to leave; the
    /// other keys of the slot are served meanwhile.
    departing: Mutex<HashSet<Vec<u8>>>,
    departed: Condvar,
    /// The last `CLUSTERX MIGRATE` job ([`super::jobs`]), kept in memory only.
    pub jobs: super::jobs::Jobs,
    /// Connections that forward `PUBLISH` to the other nodes ([`super::publish`]).
    pub publish: super::publish::Forwarder,
}

/// Keys marked leaving by [`Cluster::depart`]: dropped once they are deleted here (or
/// stay, refused by the destination), which wakes the commands waiting on them.
pub struct Departing<'a> {
    c: &'a Cluster,
    keys: Vec<Vec<u8>>,
}

impl Drop for Departing<'_> {
    fn drop(&mut self) {
        let mut d = self.c.departing.lock();
        for k in &self.keys {
            d.remove(k);
        }
        self.c.departed.notify_all();
    }
}

/// A new random node id, as Redis gives a node on its first start.
fn random_id() -> String {
    let a: u128 = rand::random();
    let b: u32 = rand::random();
    format!("{a:032x}{b:08x}")
}

impl Cluster {
    /// Forwards a `PUBLISH` of `channel` to every other node of the topology
    /// ([`super::publish`]), over connections started on `runtime`.
    pub fn forward_publish(
        &self,
        runtime: &tokio::runtime::Handle,
        password: Option<String>,
        channel: &bytes::Bytes,
        msg: &bytes::Bytes,
    ) {
        let addrs: Vec<String> = {
            let st = self.read();
            let Some(t) = &st.topology else {
                return;
            };
            t.nodes
                .iter()
                .filter(|n| n.id != st.myid)
                .map(|n| n.addr())
                .collect()
        };
        self.publish.send(addrs, runtime, password, channel, msg);
    }

    /// Reads the state kept in `dir`, or starts a new one with a random id (written at
    /// once, so that `CLUSTER MYID` is stable across restarts). A file that cannot be read
    /// stops the start: serving without it would route by no topology at all.
    pub fn open(dir: &Path) -> Result<Cluster> {
        let path = dir.join(FILE);
        let state = match std::fs::read_to_string(&path) {
            Ok(text) => State::from_text(&text)
                .with_context(|| format!("reading the cluster state {}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let s = State {
                    myid: random_id(),
                    version: -1,
                    topology: None,
                    migrating: BTreeMap::new(),
                    importing: BTreeMap::new(),
                    migrated: BTreeMap::new(),
                    imported: BTreeMap::new(),
                };
                save(&path, &s)?;
                s
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Cluster {
            path,
            state: RwLock::new(state),
            moving: RwLock::new(()),
            departing: Default::default(),
            departed: Condvar::new(),
            jobs: Default::default(),
            publish: Default::default(),
        })
    }

    /// What a command on a migrating slot holds (see [`Cluster`]'s `moving`).
    pub fn command_on_moving_slot(&self) -> parking_lot::RwLockReadGuard<'_, ()> {
        self.moving.read()
    }

    /// What `MIGRATE` holds while it picks the keys it moves.
    pub fn migration(&self) -> parking_lot::RwLockWriteGuard<'_, ()> {
        self.moving.write()
    }

    /// Marks `keys` as leaving (the caller holds [`Cluster::migration`] and the keys'
    /// locks) until the returned guard is dropped.
    pub fn depart(&self, keys: Vec<Vec<u8>>) -> Departing<'_> {
        self.departing.lock().extend(keys.iter().cloned());
        Departing { c: self, keys }
    }

    /// Whether one of `keys` is leaving.
    pub fn departing<'a>(&self, mut keys: impl Iterator<Item = &'a Bytes>) -> bool {
        let d = self.departing.lock();
        !d.is_empty() && keys.any(|k| d.contains(&k[..]))
    }

    /// Waits until none of `keys` is leaving.
    pub fn wait_departed(&self, keys: &[&Bytes]) {
        let mut d = self.departing.lock();
        while keys.iter().any(|k| d.contains(&k[..])) {
            self.departed.wait(&mut d);
        }
    }

    /// Whether a slot is being moved to or from this node (a command on it may then wait
    /// for a `MIGRATE` batch in flight).
    pub fn moving_slots(&self) -> bool {
        let s = self.state.read();
        !s.migrating.is_empty() || !s.importing.is_empty()
    }

    /// The current state (a read lock: hold it briefly).
    pub fn read(&self) -> parking_lot::RwLockReadGuard<'_, State> {
        self.state.read()
    }

    /// Applies `change` to a copy of the state; if it succeeds, saves the copy and makes it
    /// the state. Changes are serialized by the write lock.
    pub fn update<E: From<anyhow::Error>>(
        &self,
        change: impl FnOnce(&mut State) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut st = self.state.write();
        let mut next = st.clone();
        change(&mut next)?;
        next.drop_stale_moves();
        if next != *st {
            save(&self.path, &next)?;
            *st = next;
        }
        Ok(())
    }
}

/// Writes `s` to `path` atomically: a crash leaves either the old file or the new one.
fn save(path: &Path, s: &State) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let dir = path
        .parent()
        .context("the cluster state file has no directory")?;
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(s.to_text().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().with_context(|| format!("saving the cluster state to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_survives_a_reopen_and_a_bad_file_stops_the_start() {
        let d = tempfile::tempdir().unwrap();
        let c = Cluster::open(d.path()).unwrap();
        let first = c.read().clone();
        assert!(valid_id(&first.myid));
        assert_eq!((first.version, first.topology.is_none()), (-1, true));
        let id = "a".repeat(40);
        let b = "b".repeat(40);
        let t = Topology::parse(&format!(
            "{id} 127.0.0.1 7000 master - 0-100 200\n{b} 127.0.0.1 7001 master - 300"
        ))
        .unwrap();
        let moves = |pairs: &[(u16, &str)]| {
            pairs
                .iter()
                .map(|&(s, i)| (s, i.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        c.update(|s| -> Result<()> {
            s.myid = id.clone();
            s.version = 7;
            s.topology = Some(t.clone());
            // Kept: a slot of this node towards b, a slot of b from b. Dropped: a slot
            // this node does not own, a slot it owns "imported", an unknown node.
            s.migrating = moves(&[(5, &b), (300, &b), (6, &"c".repeat(40))]);
            s.importing = moves(&[(300, &b), (7, &b)]);
            s.migrated = moves(&[(200, &b), (300, &b)]);
            s.imported = moves(&[(300, &b), (301, &b), (302, &id)]);
            Ok(())
        })
        .unwrap();
        assert_eq!(c.read().migrating, moves(&[(5, &b)]));
        assert_eq!(c.read().importing, moves(&[(300, &b)]));
        assert_eq!(c.read().migrated, moves(&[(200, &b)]));
        assert_eq!(c.read().imported, moves(&[(300, &b)]));
        // A refused change leaves memory and disk as they were.
        let refused = c.update(|s| -> Result<()> {
            s.version = 8;
            bail!("no")
        });
        assert!(refused.is_err());
        drop(c);
        let again = Cluster::open(d.path()).unwrap();
        assert_eq!(
            *again.read(),
            State {
                myid: id,
                version: 7,
                topology: Some(t),
                migrating: moves(&[(5, &b)]),
                importing: moves(&[(300, &b)]),
                migrated: moves(&[(200, &b)]),
                imported: moves(&[(300, &b)]),
            }
        );
        assert!(!d.path().join("CLUSTER-NODES.tmp").exists());
        std::fs::write(d.path().join(FILE), "garbage").unwrap();
        let e = Cluster::open(d.path()).err().unwrap();
        assert!(
            format!("{e:#}").contains("not a cluster state file"),
            "{e:#}"
        );
    }
}
