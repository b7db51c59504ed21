//! The cluster's layout as a controller pushes it (`CLUSTERX SETNODES`, Kvrocks' format):
//! which nodes exist, where they listen, which are replicas of which, and which master
//! owns each slot. Parsed and validated as a whole before anything changes, since a
//! topology is the network's input and one bad line must not leave half of it applied.
//!
//! ```text
//! <40-hex id> <ip> <port> master -           <slot or first-last> ...
//! <40-hex id> <ip> <port> slave  <master id>
//! ```
//!
//! One node per line (lines separated by `\n`, blank ones skipped). The same text, as
//! [`Topology::to_text`] writes it, is what [`super::state`] keeps on disk, so the file is
//! read back by this parser and validated the same way.

use super::slot::SLOTS;
use std::fmt::Write;
use std::net::IpAddr;

/// Most nodes a topology may name (Redis Cluster's documented upper size): lines are
/// counted before any is parsed, so a request cannot make the parser build more.
pub const MAX_NODES: usize = 1000;
/// Characters of a node id (Redis's `CLUSTER_NAMELEN`).
pub const ID_LEN: usize = 40;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub ip: IpAddr,
    pub port: u16,
    /// `None` for a master; a replica's master's id.
    pub master: Option<String>,
}

impl Node {
    /// `ip:port` as MOVED and CLUSTER NODES print it.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

/// Why a topology was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("Invalid cluster nodes info: no node given")]
    Empty,
    #[error("Invalid cluster nodes info: {0} nodes, more than the {MAX_NODES} allowed")]
    TooManyNodes(usize),
    #[error("Invalid cluster nodes info: line {line}: {why}")]
    Line { line: usize, why: String },
    #[error("Invalid cluster nodes info: {0}")]
    Whole(String),
}

/// A validated topology: every slot owned by at most one master, every replica's master
/// present and a master, ids and addresses unique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub nodes: Vec<Node>,
    /// Slot -> index in `nodes` of its master (`None`: not served).
    owner: Vec<Option<u16>>,
}

/// Whether `id` is a node id: [`ID_LEN`] hex digits.
pub fn valid_id(id: &str) -> bool {
    id.len() == ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A client's token as an error quotes it: at most 64 characters, so that a request of
/// megabytes is not echoed back whole.
fn shown(t: &str) -> String {
    t.chars().take(64).collect()
}

/// `first-last` or a single slot, within `0..16384`.
fn parse_range(t: &str) -> Result<(u16, u16), String> {
    let num = |s: &str| {
        (!s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u16>().ok())
            .flatten()
            .filter(|&n| n < SLOTS)
            .ok_or_else(|| format!("slot '{}' is not a number in 0..{}", shown(s), SLOTS - 1))
    };
    let (a, b) = match t.split_once('-') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => {
            let n = num(t)?;
            (n, n)
        }
    };
    if a > b {
        return Err(format!("slot range '{}' ends before it starts", shown(t)));
    }
    Ok((a, b))
}

impl Topology {
    /// Parses and validates a whole topology (see the module's doc for the format).
    pub fn parse(text: &str) -> Result<Topology, TopologyError> {
        let lines = || {
            text.split('\n')
                .enumerate()
                .map(|(i, l)| (i + 1, l.trim()))
                .filter(|(_, l)| !l.is_empty())
        };
        let count = lines().count();
        if count == 0 {
            return Err(TopologyError::Empty);
        }
        if count > MAX_NODES {
            return Err(TopologyError::TooManyNodes(count));
        }
        let mut nodes: Vec<Node> = Vec::with_capacity(count);
        let mut owner: Vec<Option<u16>> = vec![None; SLOTS as usize];
        for (line, l) in lines() {
            let bad = |why: String| TopologyError::Line { line, why };
            let mut t = l.split_ascii_whitespace();
            let (Some(id), Some(ip), Some(port), Some(role), Some(master)) =
                (t.next(), t.next(), t.next(), t.next(), t.next())
            else {
                return Err(bad(
                    "expected '<id> <ip> <port> master|slave <master id or -> [slots]'".into(),
                ));
            };
            if !valid_id(id) {
                return Err(bad(format!(
                    "node id '{}' is not {ID_LEN} hex characters",
                    shown(id)
                )));
            }
            if nodes.iter().any(|n| n.id == id) {
                return Err(bad(format!("node id {id} appears twice")));
            }
            let ip: IpAddr = ip
                .parse()
                .map_err(|_| bad(format!("'{}' is not an IP address", shown(ip))))?;
            let port: u16 = port
                .parse()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad(format!("port '{}' is not in 1..65535", shown(port))))?;
            if nodes.iter().any(|n| n.ip == ip && n.port == port) {
                return Err(bad(format!("address {ip}:{port} appears twice")));
            }
            let index = nodes.len() as u16;
            let master = match role {
                "master" => {
                    if master != "-" {
                        return Err(bad(format!(
                            "a master's master id must be '-', not '{}'",
                            shown(master)
                        )));
                    }
                    for r in t {
                        let (a, b) = parse_range(r).map_err(&bad)?;
                        for s in a..=b {
                            if let Some(other) = owner[s as usize] {
                                return Err(bad(format!(
                                    "slot {s} is already owned by node {}",
                                    nodes.get(other as usize).map_or(id, |n| &n.id)
                                )));
                            }
                            owner[s as usize] = Some(index);
                        }
                    }
                    None
                }
                "slave" | "replica" => {
                    if !valid_id(master) {
                        return Err(bad(format!(
                            "master id '{}' is not {ID_LEN} hex characters",
                            shown(master)
                        )));
                    }
                    if master == id {
                        return Err(bad("a node cannot be its own master".into()));
                    }
                    if t.next().is_some() {
                        return Err(bad("a replica cannot own slots".into()));
                    }
                    Some(master.to_string())
                }
                other => {
                    return Err(bad(format!(
                        "role '{}' is neither 'master' nor 'slave'",
                        shown(other)
                    )))
                }
            };
            nodes.push(Node {
                id: id.to_string(),
                ip,
                port,
                master,
            });
        }
        for n in &nodes {
            if let Some(m) = &n.master {
                match nodes.iter().find(|x| &x.id == m) {
                    Some(x) if x.master.is_none() => {}
                    Some(_) => {
                        return Err(TopologyError::Whole(format!(
                            "node {} replicates {m}, which is a replica",
                            n.id
                        )))
                    }
                    None => {
                        return Err(TopologyError::Whole(format!(
                            "node {} replicates {m}, which is not in the topology",
                            n.id
                        )))
                    }
                }
            }
        }
        Ok(Topology { nodes, owner })
    }

    /// The master that owns `slot`.
    pub fn owner(&self, slot: u16) -> Option<&Node> {
        self.owner[slot as usize].map(|i| &self.nodes[i as usize])
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    pub fn replicas_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes
            .iter()
            .filter(move |n| n.master.as_deref() == Some(id))
    }

    /// Slots that some master owns.
    pub fn assigned(&self) -> usize {
        self.owner.iter().filter(|o| o.is_some()).count()
    }

    /// The contiguous slot ranges `id` owns, in slot order.
    pub fn ranges(&self, id: &str) -> Vec<(u16, u16)> {
        let Some(want) = self.nodes.iter().position(|n| n.id == id) else {
            return Vec::new();
        };
        let mut out: Vec<(u16, u16)> = Vec::new();
        for (s, o) in self.owner.iter().enumerate() {
            if *o != Some(want as u16) {
                continue;
            }
            let s = s as u16;
            match out.last_mut() {
                Some((_, end)) if *end + 1 == s => *end = s,
                _ => out.push((s, s)),
            }
        }
        out
    }

    /// Gives `slot` to the master `id` (`CLUSTERX SETSLOT`).
    pub fn set_slot(&mut self, slot: u16, id: &str) -> Result<(), String> {
        match self.nodes.iter().position(|n| n.id == id) {
            None => Err(format!("node {id} is not in the topology")),
            Some(i) if self.nodes[i].master.is_some() => {
                Err(format!("node {id} is a replica, not a master"))
            }
            Some(i) => {
                self.owner[slot as usize] = Some(i as u16);
                Ok(())
            }
        }
    }

    /// The topology in the format [`Topology::parse`] reads.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let role = if n.master.is_some() {
                "slave"
            } else {
                "master"
            };
            let master = n.master.as_deref().unwrap_or("-");
            let _ = write!(out, "{} {} {} {role} {master}", n.id, n.ip, n.port);
            for r in self.ranges(&n.id) {
                let _ = write!(out, " {}", fmt_range(r));
            }
            out.push('\n');
        }
        out
    }
}

/// A range as Redis prints it: `a-b`, or `a` for one slot.
pub fn fmt_range((a, b): (u16, u16)) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccccccccccc";

    fn three() -> String {
        format!(
            "{A} 127.0.0.1 7000 master - 0-5460\n{B} 127.0.0.1 7001 master - 5461-10922 16383\n\
             {C} 127.0.0.1 7002 slave {A}\n"
        )
    }

    #[test]
    fn parses_owners_ranges_and_replicas() {
        let t = Topology::parse(&three()).unwrap();
        assert_eq!(t.owner(0).unwrap().id, A);
        assert_eq!(t.owner(5461).unwrap().id, B);
        assert_eq!(t.owner(16383).unwrap().id, B);
        assert_eq!(t.owner(12000), None);
        assert_eq!(t.assigned(), 5461 + 5462 + 1);
        assert_eq!(t.ranges(B), vec![(5461, 10922), (16383, 16383)]);
        assert_eq!(t.replicas_of(A).map(|n| &n.id[..]).collect::<Vec<_>>(), [C]);
        assert_eq!(Topology::parse(&t.to_text()).unwrap(), t);
    }

    #[test]
    fn set_slot_moves_one_slot_to_a_master_only() {
        let mut t = Topology::parse(&three()).unwrap();
        t.set_slot(0, B).unwrap();
        assert_eq!(t.owner(0).unwrap().id, B);
        assert_eq!(t.ranges(A), vec![(1, 5460)]);
        assert!(t.set_slot(1, C).unwrap_err().contains("replica"));
        assert!(t
            .set_slot(1, &"d".repeat(40))
            .unwrap_err()
            .contains("not in"));
    }

    #[test]
    fn refuses_bad_input_with_the_reason() {
        let cases = [
            (String::new(), "no node"),
            (format!("{A} 127.0.0.1 7000 master -\nxyz"), "line 2"),
            ("abc 127.0.0.1 7000 master - 0-1".into(), "40 hex"),
            (format!("{A} localhost 7000 master - 0"), "not an IP"),
            (format!("{A} 127.0.0.1 0 master - 0"), "port '0'"),
            (format!("{A} 127.0.0.1 70000 master - 0"), "port '70000'"),
            (format!("{A} 127.0.0.1 7000 master - 0-16384"), "'16384'"),
            (format!("{A} 127.0.0.1 7000 master - 5-4"), "ends before"),
            (format!("{A} 127.0.0.1 7000 master - -1"), "slot ''"),
            (format!("{A} 127.0.0.1 7000 boss - 0"), "role 'boss'"),
            (format!("{A} 127.0.0.1 7000 master {B} 0"), "must be '-'"),
            (
                format!("{A} 127.0.0.1 7000 master - 0-10\n{B} 127.0.0.1 7001 master - 10"),
                "slot 10 is already owned by node aaaa",
            ),
            (
                format!("{A} 127.0.0.1 7000 master - 0\n{A} 127.0.0.1 7001 master - 1"),
                "appears twice",
            ),
            (
                format!("{A} 127.0.0.1 7000 master - 0\n{B} 127.0.0.1 7000 master - 1"),
                "address 127.0.0.1:7000 appears twice",
            ),
            (
                format!("{A} 127.0.0.1 7000 slave {B}"),
                "not in the topology",
            ),
            (format!("{A} 127.0.0.1 7000 slave {A}"), "own master"),
            (
                format!("{A} 127.0.0.1 7000 master -\n{B} 127.0.0.1 7001 slave {A} 0"),
                "cannot own slots",
            ),
            (
                format!(
                    "{A} 127.0.0.1 7000 master -\n{B} 127.0.0.1 7001 slave {A}\n\
                     {C} 127.0.0.1 7002 slave {B}"
                ),
                "which is a replica",
            ),
        ];
        for (text, want) in cases {
            let e = Topology::parse(&text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let long = "x".repeat(1 << 20);
        let e = Topology::parse(&format!("{long} 127.0.0.1 7000 master -")).unwrap_err();
        assert!(e.to_string().len() < 200, "{e}");
        let many = format!("{A} 127.0.0.1 7000 master -\n").repeat(MAX_NODES + 1);
        assert_eq!(
            Topology::parse(&many),
            Err(TopologyError::TooManyNodes(MAX_NODES + 1))
        );
    }
}

/// Generated input against the parser: lines built from the format's own tokens (valid
/// ones and near misses) must parse or be refused without a panic, and whatever parses
/// must satisfy the invariants and read back the same from [`Topology::to_text`].
#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            (0u8..4).prop_map(|i| ["a", "b", "c", "d"][i as usize].repeat(ID_LEN)),
            Just("A".repeat(ID_LEN)),
            Just("g".repeat(ID_LEN)),
            Just("a".repeat(ID_LEN - 1)),
            prop_oneof![
                Just("127.0.0.1"),
                Just("::1"),
                Just("10.0.0.300"),
                Just("host")
            ]
            .prop_map(String::from),
            (0u32..70000).prop_map(|p| p.to_string()),
            prop_oneof![Just("master"), Just("slave"), Just("replica"), Just("-")]
                .prop_map(String::from),
            (0u16..16400, 0u16..16400).prop_map(|(a, b)| format!("{a}-{b}")),
            (0u16..16400).prop_map(|a| a.to_string()),
            "[ -~]{0,8}",
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        let line = prop::collection::vec(token(), 0..9).prop_map(|t| t.join(" "));
        prop::collection::vec(line, 0..6).prop_map(|l| l.join("\n"))
    }

    /// A valid topology: up to four masters with disjoint ranges, and replicas of them.
    fn valid() -> impl Strategy<Value = (String, Vec<u16>)> {
        (
            prop::collection::btree_set(0u16..SLOTS, 0..12),
            1usize..5,
            0usize..3,
        )
            .prop_map(|(cuts, masters, replicas)| {
                let cuts: Vec<u16> = cuts.into_iter().collect();
                let mut owner = vec![u16::MAX; SLOTS as usize];
                let mut lines = Vec::new();
                let hex = |i: usize| format!("{i:040x}");
                for m in 0..masters {
                    let mut l = format!("{} 127.0.0.1 {} master -", hex(m + 1), 7000 + m);
                    // Masters take turns over the ranges between the cuts.
                    for (j, w) in cuts.windows(2).enumerate() {
                        if j % masters == m {
                            let (a, b) = (w[0], w[1] - 1);
                            l.push_str(&format!(" {}", fmt_range((a, b))));
                            owner[a as usize..=b as usize].fill(m as u16);
                        }
                    }
                    lines.push(l);
                }
                for r in 0..replicas {
                    let port = 8000 + r;
                    lines.push(format!("{} ::1 {port} slave {}", hex(100 + r), hex(1)));
                }
                (lines.join("\n"), owner)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_input_parses_or_is_refused(t in text()) {
            if let Ok(topo) = Topology::parse(&t) {
                for s in 0..SLOTS {
                    if let Some(n) = topo.owner(s) {
                        prop_assert!(n.master.is_none());
                    }
                }
                prop_assert_eq!(Topology::parse(&topo.to_text()).unwrap(), topo);
            }
        }

        #[test]
        fn valid_topologies_parse_to_their_owners((t, owner) in valid()) {
            let topo = Topology::parse(&t).unwrap();
            for s in 0..SLOTS {
                let want = owner[s as usize];
                let got = topo.owner(s).map(|n| &n.id);
                if want == u16::MAX {
                    prop_assert!(got.is_none());
                } else {
                    prop_assert_eq!(got, Some(&format!("{:040x}", want + 1)));
                }
            }
            prop_assert_eq!(Topology::parse(&topo.to_text()).unwrap(), topo);
        }
    }
}
