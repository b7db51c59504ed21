//! This node's cluster state (its id, the topology and its version) and where it is kept:
//! the file `CLUSTER-NODES` in the database directory, replaced atomically (temp file,
//! fsync, rename, fsync of the directory) on every change, so that a crash leaves the old
//! state or the new one and a restarted node routes as before without its controller.
//!
//! A change is written to disk before it is made visible: no client is ever redirected by
//! a topology that a restart would forget.

use super::topology::{valid_id, Topology, ID_LEN};
use anyhow::{bail, Context, Result};
use parking_lot::RwLock;
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
}

impl State {
    fn to_text(&self) -> String {
        let mut s = format!("{HEADER}\nmyid {}\nversion {}\n", self.myid, self.version);
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
        let rest = lines.next().unwrap_or("");
        let topology = if version < 0 {
            None
        } else {
            Some(Topology::parse(rest)?)
        };
        Ok(State {
            myid,
            version,
            topology,
        })
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
}

/// A new random node id, as Redis gives a node on its first start.
fn random_id() -> String {
    let a: u128 = rand::random();
    let b: u32 = rand::random();
    format!("{a:032x}{b:08x}")
}

impl Cluster {
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
                };
                save(&path, &s)?;
                s
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Cluster {
            path,
            state: RwLock::new(state),
        })
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
        let t = Topology::parse(&format!("{id} 127.0.0.1 7000 master - 0-100 200")).unwrap();
        c.update(|s| -> Result<()> {
            s.myid = id.clone();
            s.version = 7;
            s.topology = Some(t.clone());
            Ok(())
        })
        .unwrap();
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
                topology: Some(t)
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
