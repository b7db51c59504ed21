//! Cluster mode end to end: three in-process nodes on ephemeral ports, a topology pushed
//! to each as a controller would (`CLUSTERX SETNODEID`, `SETNODES`), and what clients see:
//! redirections, cross-slot errors, Redis's CLUSTER replies, and the state after a
//! restart.

mod common;
use common::client::{bulk, is_err, simple, Client};
use common::Running;
use halflife_server::{AppendFsync, Config};
use redis_protocol::resp2::types::BytesFrame as F;
use std::path::Path;

fn config(cluster: bool) -> Config {
    Config {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        appendfsync: AppendFsync::Always,
        cluster_enabled: cluster,
        ..Config::default()
    }
}

/// Ids of the three nodes; node `i` owns `RANGES[i]`.
const IDS: [&str; 3] = [
    "1111111111111111111111111111111111111111",
    "2222222222222222222222222222222222222222",
    "3333333333333333333333333333333333333333",
];
const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

struct Cluster {
    _dirs: Vec<tempfile::TempDir>,
    nodes: Vec<Running>,
}

impl Cluster {
    fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.addr.port()).collect()
    }

    fn client(&self, i: usize) -> Client {
        Client::connect(self.nodes[i].addr)
    }

    /// The slot of the keys `{t}...` the move tests use, as node 0 computes it.
    fn tag_slot(&self) -> u16 {
        tag_of(&mut self.client(0), "x")
    }

    fn stop(self) {
        for n in self.nodes {
            n.stop();
        }
    }

    fn owner(slot: u16) -> usize {
        RANGES
            .iter()
            .position(|&(a, b)| (a..=b).contains(&slot))
            .unwrap()
    }
}

fn topology(ports: &[u16]) -> String {
    (0..3)
        .map(|i| {
            let (a, b) = RANGES[i];
            format!("{} 127.0.0.1 {} master - {a}-{b}\n", IDS[i], ports[i])
        })
        .collect()
}

fn push(c: &mut Client, id: &str, topo: &str, version: &str) {
    assert_eq!(c.cmd(&["CLUSTERX", "SETNODEID", id]), simple("OK"));
    assert_eq!(
        c.cmd(&["CLUSTERX", "SETNODES", topo, version]),
        simple("OK")
    );
}

/// Three nodes with the topology pushed.
fn three() -> Cluster {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes = dirs
        .iter()
        .map(|d| Running::start(d.path(), config(true)))
        .collect();
    let cl = Cluster { _dirs: dirs, nodes };
    let topo = topology(&cl.ports());
    for (i, id) in IDS.iter().enumerate() {
        push(&mut cl.client(i), id, &topo, "1");
    }
    cl
}

fn text(f: &F) -> String {
    match f {
        F::BulkString(b) | F::SimpleString(b) => String::from_utf8(b.to_vec()).unwrap(),
        F::Error(e) => e.to_string(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(f: &F) -> i64 {
    match f {
        F::Integer(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn slot(c: &mut Client, key: &str) -> u16 {
    int(&c.cmd(&["CLUSTER", "KEYSLOT", key])) as u16
}

#[test]
fn slots_match_the_cluster_spec() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config(true));
    let mut c = Client::connect(srv.addr);
    for (key, want) in [
        ("123456789", 12739),
        ("foo", 12182),
        ("{user1000}.following", 3443),
        ("{user1000}.followers", 3443),
        ("foo{}{bar}", 8363),
        ("foo{{bar}}zap", 4015),
        ("foo{bar}{zap}", 5061),
        ("bar", 5061),
    ] {
        assert_eq!(slot(&mut c, key), want, "{key}");
    }
    srv.stop();
}

#[test]
fn before_a_topology_keyed_commands_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let srv = Running::start(t.path(), config(true));
    let mut c = Client::connect(srv.addr);
    assert!(is_err(
        &c.cmd(&["GET", "k"]),
        "CLUSTERDOWN Hash slot not served"
    ));
    assert!(is_err(
        &c.cmd(&["SET", "k", "v"]),
        "CLUSTERDOWN Hash slot not served"
    ));
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    assert_eq!(c.cmd(&["CLUSTERX", "VERSION"]), F::Integer(-1));
    let info = text(&c.cmd(&["CLUSTER", "INFO"]));
    assert!(info.contains("cluster_state:fail\r\n"), "{info}");
    assert!(info.contains("cluster_slots_assigned:0\r\n"), "{info}");
    assert!(text(&c.cmd(&["INFO", "cluster"])).contains("cluster_enabled:1"));
    let myid = text(&c.cmd(&["CLUSTER", "MYID"]));
    assert_eq!(myid.len(), 40);
    let port = srv.addr.port();
    assert_eq!(
        text(&c.cmd(&["CLUSTER", "NODES"])),
        format!(
            "{myid} :{port}@{} myself,master - 0 0 0 connected\n",
            port as u32 + 10000
        )
    );
    assert!(is_err(
        &c.cmd(&["SELECT", "1"]),
        "ERR SELECT is not allowed in cluster mode"
    ));
    assert_eq!(c.cmd(&["SELECT", "0"]), simple("OK"));
    srv.stop();
    // Without cluster mode the commands say so, and nothing is routed.
    let srv = Running::start(t.path(), config(false));
    let mut c = Client::connect(srv.addr);
    for cmd in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTERX", "VERSION"],
        &["READONLY"],
    ] {
        assert!(is_err(
            &c.cmd(cmd),
            "ERR This instance has cluster support disabled"
        ));
    }
    assert!(text(&c.cmd(&["INFO", "cluster"])).contains("cluster_enabled:0"));
    assert_eq!(c.cmd(&["SET", "k", "v"]), simple("OK"));
    srv.stop();
}

#[test]
fn keys_are_served_by_their_owner_and_moved_elsewhere() {
    let cl = three();
    let ports = cl.ports();
    let mut cs: Vec<Client> = (0..3).map(|i| cl.client(i)).collect();
    let mut per_node = [0i64; 3];
    for k in 0..120 {
        let key = format!("key:{k}");
        let s = slot(&mut cs[0], &key);
        let owner = Cluster::owner(s);
        per_node[owner] += 1;
        for (i, c) in cs.iter_mut().enumerate() {
            let r = c.cmd(&["SET", &key, &k.to_string()]);
            if i == owner {
                assert_eq!(r, simple("OK"));
            } else {
                assert_eq!(text(&r), format!("MOVED {s} 127.0.0.1:{}", ports[owner]));
                assert_eq!(
                    text(&c.cmd(&["GET", &key])),
                    format!("MOVED {s} 127.0.0.1:{}", ports[owner])
                );
            }
        }
        assert_eq!(cs[owner].cmd(&["GET", &key]), bulk(&k.to_string()));
    }
    // A refused write wrote nothing: each node holds exactly the keys of its slots.
    for (i, c) in cs.iter_mut().enumerate() {
        assert!(per_node[i] > 0);
        assert_eq!(c.cmd(&["DBSIZE"]), F::Integer(per_node[i]));
    }
    // Keys of one command in different slots; hash tags put keys in one slot.
    let (a, b) = ("{user1000}.a", "{user1000}.b");
    let owner = Cluster::owner(slot(&mut cs[0], a));
    let c = &mut cs[owner];
    assert!(is_err(
        &c.cmd(&["MSET", "key:1", "x", "key:2", "y"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    ));
    assert_eq!(c.cmd(&["MSET", a, "1", b, "2"]), simple("OK"));
    assert_eq!(c.cmd(&["MGET", a, b]), F::Array(vec![bulk("1"), bulk("2")]));
    assert_eq!(c.cmd(&["RENAME", a, "{user1000}.c"]), simple("OK"));
    assert!(is_err(
        &c.cmd(&["COPY", b, "{user1000}.d", "DB", "1"]),
        "ERR Copying to another database is not allowed in cluster mode"
    ));
    assert!(is_err(
        &c.cmd(&["MOVE", b, "1"]),
        "ERR MOVE is not allowed in cluster mode"
    ));
    let s = slot(c, a) as i64;
    assert_eq!(
        c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s.to_string()]),
        F::Integer(2)
    );
    let mut got = match c.cmd(&["CLUSTER", "GETKEYSINSLOT", &s.to_string(), "10"]) {
        F::Array(v) => v.iter().map(text).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    got.sort();
    assert_eq!(got, ["{user1000}.b", "{user1000}.c"]);
    match c.cmd(&["CLUSTER", "GETKEYSINSLOT", &s.to_string(), "1"]) {
        F::Array(v) => assert_eq!(v.len(), 1),
        other => panic!("{other:?}"),
    }
    for bad in [&["16384", "1"][..], &["1", "-1"]] {
        let mut cmd = vec!["CLUSTER", "GETKEYSINSLOT"];
        cmd.extend_from_slice(bad);
        assert!(is_err(&c.cmd(&cmd), "ERR Invalid slot or number of keys"));
    }
    assert!(is_err(
        &c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "16384"]),
        "ERR Invalid slot"
    ));
    // SORT as Redis Cluster has it: BY and GET patterns name keys that may live anywhere
    // and are refused; BY without a pattern is fine; STORE is a key like any other.
    let l = "{user1000}.l";
    c.cmd(&["RPUSH", l, "2", "1", "3"]);
    assert!(is_err(
        &c.cmd(&["SORT", l, "BY", "w_*"]),
        "ERR BY option of SORT denied in Cluster mode."
    ));
    assert!(is_err(
        &c.cmd(&["SORT_RO", l, "GET", "#"]),
        "ERR GET option of SORT denied in Cluster mode."
    ));
    assert_eq!(
        c.cmd(&["SORT", l, "BY", "nosort", "DESC"]),
        F::Array(vec![bulk("3"), bulk("1"), bulk("2")])
    );
    assert!(is_err(&c.cmd(&["SORT", l, "STORE", "key:1"]), "CROSSSLOT"));
    assert_eq!(
        c.cmd(&["SORT", l, "STORE", "{user1000}.sorted"]),
        F::Integer(3)
    );
    drop(cs);
    cl.stop();
}

#[test]
fn transactions_route_as_one_request() {
    let cl = three();
    let mut c = cl.client(0);
    // Two keys of node 0 in different slots ("hello" is slot 866, "bar" 5061).
    let x = "hello";
    let sx = slot(&mut c, x);
    assert_eq!(Cluster::owner(sx), 0, "slot {sx}");
    let sb = slot(&mut c, "bar");
    assert_eq!(Cluster::owner(sb), 0);
    assert_eq!(c.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(c.cmd(&["SET", x, "1"]), simple("QUEUED"));
    assert_eq!(c.cmd(&["SET", "bar", "1"]), simple("QUEUED"));
    assert!(is_err(&c.cmd(&["EXEC"]), "CROSSSLOT"));
    // The refused transaction was discarded and ran nothing.
    assert!(is_err(&c.cmd(&["EXEC"]), "ERR EXEC without MULTI"));
    assert_eq!(c.cmd(&["EXISTS", x]), F::Integer(0));
    // A command for another node is refused when queued and makes EXEC fail.
    assert_eq!(c.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(c.cmd(&["SET", x, "1"]), simple("QUEUED"));
    assert!(is_err(&c.cmd(&["GET", "foo"]), "MOVED 12182 "));
    assert!(is_err(&c.cmd(&["EXEC"]), "EXECABORT"));
    // One slot: runs.
    assert_eq!(c.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(c.cmd(&["SET", x, "1"]), simple("QUEUED"));
    assert_eq!(c.cmd(&["INCR", x]), simple("QUEUED"));
    assert_eq!(
        c.cmd(&["EXEC"]),
        F::Array(vec![simple("OK"), F::Integer(2)])
    );
    drop(c);
    cl.stop();
}

/// CLUSTER NODES parsed back: (id, addr, flags, master, slot ranges).
fn parse_nodes(s: &str) -> Vec<(String, String, String, String, Vec<String>)> {
    s.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert!(f.len() >= 8, "{l}");
            assert_eq!(f[7], "connected", "{l}");
            (
                f[0].to_string(),
                f[1].to_string(),
                f[2].to_string(),
                f[3].to_string(),
                f[8..].iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect()
}

#[test]
fn cluster_replies_have_redis_formats() {
    let cl = three();
    let ports = cl.ports();
    let mut c = cl.client(1);
    assert_eq!(c.cmd(&["CLUSTER", "MYID"]), bulk(IDS[1]));
    let mut nodes = parse_nodes(&text(&c.cmd(&["CLUSTER", "NODES"])));
    nodes.sort();
    for (i, n) in nodes.iter().enumerate() {
        let (a, b) = RANGES[i];
        let me = if i == 1 { "myself,master" } else { "master" };
        assert_eq!(
            *n,
            (
                IDS[i].to_string(),
                format!("127.0.0.1:{}@{}", ports[i], ports[i] as u32 + 10000),
                me.to_string(),
                "-".to_string(),
                vec![format!("{a}-{b}")]
            )
        );
    }
    let F::Array(slots) = c.cmd(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS is not an array")
    };
    assert_eq!(slots.len(), 3);
    for (i, e) in slots.iter().enumerate() {
        let (a, b) = RANGES[i];
        assert_eq!(
            *e,
            F::Array(vec![
                F::Integer(a as i64),
                F::Integer(b as i64),
                F::Array(vec![
                    bulk("127.0.0.1"),
                    F::Integer(ports[i] as i64),
                    bulk(IDS[i]),
                    F::Array(vec![]),
                ]),
            ])
        );
    }
    let F::Array(shards) = c.cmd(&["CLUSTER", "SHARDS"]) else {
        panic!("CLUSTER SHARDS is not an array")
    };
    assert_eq!(shards.len(), 3);
    let F::Array(first) = &shards[0] else {
        panic!()
    };
    assert_eq!(first[0], bulk("slots"));
    assert_eq!(first[1], F::Array(vec![F::Integer(0), F::Integer(5460)]));
    assert_eq!(first[2], bulk("nodes"));
    let info = text(&c.cmd(&["CLUSTER", "INFO"]));
    for line in [
        "cluster_state:ok",
        "cluster_slots_assigned:16384",
        "cluster_known_nodes:3",
        "cluster_size:3",
        "cluster_current_epoch:1",
    ] {
        assert!(info.contains(&format!("{line}\r\n")), "{line} in {info}");
    }
    assert_eq!(c.cmd(&["READONLY"]), simple("OK"));
    assert_eq!(c.cmd(&["READWRITE"]), simple("OK"));
    drop(c);
    cl.stop();
}

#[test]
fn versions_setslot_and_bad_topologies() {
    let cl = three();
    let ports = cl.ports();
    let mut c = cl.client(0);
    let topo = topology(&ports);
    // An older version is refused; the same one is a no-op; FORCE applies any.
    assert!(is_err(
        &c.cmd(&["CLUSTERX", "SETNODES", &topo, "0"]),
        "ERR Invalid cluster version"
    ));
    assert_eq!(
        c.cmd(&["CLUSTERX", "SETNODES", "", "1"]),
        F::Error("ERR Invalid cluster nodes info: no node given".into())
    );
    let bad = [
        (
            topo.replace(IDS[2], "xyz"),
            "line 3: node id 'xyz' is not 40 hex characters",
        ),
        (
            topo.replace("10923-16383", "10923-16384"),
            "slot '16384' is not a number in 0..16383",
        ),
        (
            topo.replace("10923-16383", "5000-16383"),
            "line 3: slot 5000 is already owned by node 1111",
        ),
        (
            topo.replace(" master - 0-5460", " boss - 0-5460"),
            "role 'boss'",
        ),
        (
            topo.replace("127.0.0.1", "not-an-ip"),
            "'not-an-ip' is not an IP address",
        ),
    ];
    for (t, why) in bad {
        let r = c.cmd(&["CLUSTERX", "SETNODES", &t, "5"]);
        assert!(text(&r).contains(why), "{why}: {r:?}");
    }
    assert_eq!(c.cmd(&["CLUSTERX", "VERSION"]), F::Integer(1));
    assert!(is_err(
        &c.cmd(&["CLUSTERX", "SETNODEID", "abc"]),
        "ERR Invalid cluster node id"
    ));
    // SETSLOT: the next version only; to a master of the topology only.
    let s = slot(&mut c, "bar").to_string();
    assert!(is_err(
        &c.cmd(&["CLUSTERX", "SETSLOT", &s, "NODE", IDS[1], "3"]),
        "ERR Invalid cluster version"
    ));
    let unknown = "4".repeat(40);
    assert!(is_err(
        &c.cmd(&["CLUSTERX", "SETSLOT", &s, "NODE", &unknown, "2"]),
        "ERR node 4444"
    ));
    assert!(is_err(
        &c.cmd(&["CLUSTERX", "SETSLOT", "16384", "NODE", IDS[1], "2"]),
        "ERR Invalid or out of range slot"
    ));
    assert_eq!(
        c.cmd(&["CLUSTERX", "SETSLOT", &s, "NODE", IDS[1], "2"]),
        simple("OK")
    );
    assert_eq!(
        text(&c.cmd(&["GET", "bar"])),
        format!("MOVED {s} 127.0.0.1:{}", ports[1])
    );
    assert_eq!(c.cmd(&["CLUSTERX", "VERSION"]), F::Integer(2));
    // The slot left this node: it cannot migrate it.
    assert_eq!(
        text(&c.cmd(&["CLUSTERX", "MIGRATE", &s, IDS[1]])),
        "ERR Can't migrate slot which doesn't belong to me"
    );
    // Redis's CLUSTER SETSLOT ... NODE: the next version, to masters of the topology.
    let replica = topo.replace(
        &format!("{} 127.0.0.1 {} master - 10923-16383", IDS[2], ports[2]),
        &format!("{} 127.0.0.1 {} slave {}", IDS[2], ports[2], IDS[0]),
    );
    assert_eq!(
        c.cmd(&["CLUSTERX", "SETNODES", &replica, "3"]),
        simple("OK")
    );
    assert!(is_err(
        &c.cmd(&["CLUSTER", "SETSLOT", &s, "NODE", IDS[2]]),
        &format!("ERR Can't assign hashslot {s} to a slave node.")
    ));
    assert_eq!(
        c.cmd(&["CLUSTER", "SETSLOT", &s, "NODE", IDS[0]]),
        simple("OK")
    );
    assert_eq!(c.cmd(&["CLUSTERX", "VERSION"]), F::Integer(4));
    assert_eq!(c.cmd(&["GET", "bar"]), F::Null);
    drop(c);
    cl.stop();
}

#[test]
fn topology_survives_a_restart() {
    let cl = three();
    let ports = cl.ports();
    let Cluster { _dirs: dirs, nodes } = cl;
    let mut c = Client::connect(nodes[0].addr);
    let bar = slot(&mut c, "bar").to_string();
    assert_eq!(c.cmd(&["SET", "bar", "v"]), simple("OK"));
    assert_eq!(
        c.cmd(&["CLUSTERX", "SETSLOT", "0", "NODE", IDS[2], "2"]),
        simple("OK")
    );
    drop(c);
    for n in nodes {
        n.stop();
    }
    let dir: &Path = dirs[0].path();
    let srv = Running::start(dir, config(true));
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["CLUSTER", "MYID"]), bulk(IDS[0]));
    assert_eq!(c.cmd(&["CLUSTERX", "VERSION"]), F::Integer(2));
    assert_eq!(c.cmd(&["GET", "bar"]), bulk("v"));
    assert_eq!(int(&c.cmd(&["CLUSTER", "KEYSLOT", "bar"])).to_string(), bar);
    assert_eq!(
        text(&c.cmd(&["GET", "foo"])),
        format!("MOVED 12182 127.0.0.1:{}", ports[2])
    );
    let nodes = parse_nodes(&text(&c.cmd(&["CLUSTER", "NODES"])));
    let me = nodes.iter().find(|n| n.0 == IDS[0]).unwrap();
    assert_eq!(me.4, ["1-5460"]);
    let third = nodes.iter().find(|n| n.0 == IDS[2]).unwrap();
    assert_eq!(third.4, ["0", "10923-16383"]);
    srv.stop();
}

/// Moving a slot as Redis does: the node ids and clients of the source and destination.
struct Move {
    slot: u16,
    src: usize,
    dst: usize,
}

impl Move {
    /// Opens `slot` for moving from its owner to the next node.
    fn open(cl: &Cluster, slot: u16) -> Move {
        let src = Cluster::owner(slot);
        let dst = (src + 1) % 3;
        let s = slot.to_string();
        assert_eq!(
            cl.client(dst)
                .cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", IDS[src]]),
            simple("OK")
        );
        assert_eq!(
            cl.client(src)
                .cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", IDS[dst]]),
            simple("OK")
        );
        Move { slot, src, dst }
    }

    /// `MIGRATE` of `keys` from the source to the destination.
    fn migrate(&self, cl: &Cluster, keys: &[String]) -> F {
        let port = cl.ports()[self.dst].to_string();
        let mut cmd = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        cmd.extend(keys.iter().map(String::as_str));
        cl.client(self.src).cmd(&cmd)
    }

    /// Up to `n` keys of the slot still on the source.
    fn left(&self, cl: &Cluster, n: usize) -> Vec<String> {
        let s = self.slot.to_string();
        match cl
            .client(self.src)
            .cmd(&["CLUSTER", "GETKEYSINSLOT", &s, &n.to_string()])
        {
            F::Array(v) => v.iter().map(text).collect(),
            other => panic!("{other:?}"),
        }
    }

    /// Gives the slot to the destination on every node (destination first), version 2.
    fn close(&self, cl: &Cluster) {
        let s = self.slot.to_string();
        for i in [self.dst, self.src, 3 - self.src - self.dst] {
            assert_eq!(
                cl.client(i)
                    .cmd(&["CLUSTERX", "SETSLOT", &s, "NODE", IDS[self.dst], "2"]),
                simple("OK"),
                "node {i}"
            );
        }
    }
}

/// The slot of the keys `{t}...` the move tests use.
fn tag_of(c: &mut Client, name: &str) -> u16 {
    slot(c, &format!("{{t}}{name}"))
}

#[test]
fn ask_asking_and_tryagain_during_a_move() {
    let cl = three();
    let ports = cl.ports();
    let mut any = cl.client(0);
    let sl = tag_of(&mut any, "a");
    let (a, b) = ("{t}a", "{t}b");
    let (owner, next) = (Cluster::owner(sl), (Cluster::owner(sl) + 1) % 3);
    let mut src = cl.client(owner);
    assert_eq!(src.cmd(&["SET", a, "1"]), simple("OK"));
    assert_eq!(src.cmd(&["SET", b, "2"]), simple("OK"));
    assert_eq!(src.cmd(&["PEXPIRE", a, "1000000"]), F::Integer(1));
    let mv = Move::open(&cl, sl);
    assert_eq!((mv.src, mv.dst), (owner, next));
    let mut dst = cl.client(mv.dst);
    let s = sl.to_string();
    let ask = format!("ASK {sl} 127.0.0.1:{}", ports[mv.dst]);
    let moved_to_src = format!("MOVED {sl} 127.0.0.1:{}", ports[mv.src]);
    // A key that is not on the source: ASK, for reads and writes alike.
    assert_eq!(text(&src.cmd(&["GET", "{t}new"])), ask);
    assert_eq!(text(&src.cmd(&["SET", "{t}new", "x"])), ask);
    let nodes = text(&src.cmd(&["CLUSTER", "NODES"]));
    assert!(
        nodes.contains(&format!("[{sl}->-{}]", IDS[mv.dst])),
        "{nodes}"
    );
    let nodes = text(&dst.cmd(&["CLUSTER", "NODES"]));
    assert!(
        nodes.contains(&format!("[{sl}-<-{}]", IDS[mv.src])),
        "{nodes}"
    );
    // The slot cannot be given away while keys of it are here.
    for cmd in [
        &["CLUSTER", "SETSLOT", &s, "NODE", IDS[mv.dst]][..],
        &["CLUSTERX", "SETSLOT", &s, "NODE", IDS[mv.dst], "2"],
    ] {
        assert!(
            is_err(&src.cmd(cmd), "ERR Can't assign hashslot"),
            "{cmd:?}"
        );
    }
    assert_eq!(mv.migrate(&cl, &[a.to_string()]), simple("OK"));
    assert_eq!(text(&src.cmd(&["GET", a])), ask);
    assert_eq!(src.cmd(&["GET", b]), bulk("2"));
    // Keys split between the two nodes: TRYAGAIN, on both.
    assert!(is_err(
        &src.cmd(&["MGET", a, b]),
        "TRYAGAIN Multiple keys request during rehashing of slot"
    ));
    // A transaction on the source: runs on keys still here; a key gone fails it.
    assert_eq!(src.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(src.cmd(&["INCR", b]), simple("QUEUED"));
    assert_eq!(src.cmd(&["EXEC"]), F::Array(vec![F::Integer(3)]));
    assert_eq!(src.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(src.cmd(&["GET", b]), simple("QUEUED"));
    assert_eq!(text(&src.cmd(&["GET", a])), ask);
    assert!(is_err(&src.cmd(&["EXEC"]), "EXECABORT"));
    // The destination serves the slot to ASKING clients only, one command at a time.
    assert_eq!(text(&dst.cmd(&["GET", a])), moved_to_src);
    assert_eq!(dst.cmd(&["ASKING"]), simple("OK"));
    assert_eq!(dst.cmd(&["GET", a]), bulk("1"));
    assert_eq!(text(&dst.cmd(&["GET", a])), moved_to_src);
    assert_eq!(dst.cmd(&["ASKING"]), simple("OK"));
    let pttl = int(&dst.cmd(&["PTTL", a]));
    assert!((1..=1_000_000).contains(&pttl), "{pttl}");
    assert_eq!(dst.cmd(&["ASKING"]), simple("OK"));
    assert!(is_err(&dst.cmd(&["MGET", a, b]), "TRYAGAIN"));
    assert_eq!(dst.cmd(&["ASKING"]), simple("OK"));
    assert_eq!(
        dst.cmd(&["MGET", a, a]),
        F::Array(vec![bulk("1"), bulk("1")])
    );
    // ASKING covers a whole transaction; and it ends after the next command even when
    // that is a pipelined plain SET (which has a fast path of its own).
    assert_eq!(dst.cmd(&["ASKING"]), simple("OK"));
    assert_eq!(dst.cmd(&["MULTI"]), simple("OK"));
    assert_eq!(dst.cmd(&["GET", a]), simple("QUEUED"));
    assert_eq!(dst.cmd(&["EXEC"]), F::Array(vec![bulk("1")]));
    assert_eq!(text(&dst.cmd(&["GET", a])), moved_to_src);
    let mine: Vec<String> = (0..)
        .map(|i| format!("k{i}"))
        .filter(|k| Cluster::owner(slot(&mut dst, k)) == mv.dst)
        .take(2)
        .collect();
    let cmds: [&[&[u8]]; 4] = [
        &[b"ASKING"],
        &[b"SET", mine[0].as_bytes(), b"1"],
        &[b"SET", mine[1].as_bytes(), b"1"],
        &[b"GET", a.as_bytes()],
    ];
    // One write, so that the server reads the four as one pipeline.
    let mut out = Vec::new();
    for c in cmds {
        out.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
        for a in c {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
    std::io::Write::write_all(&mut dst.s, &out).unwrap();
    let replies: Vec<F> = (0..4).map(|_| dst.read().unwrap()).collect();
    assert_eq!(replies[..3], [simple("OK"), simple("OK"), simple("OK")]);
    assert_eq!(text(&replies[3]), moved_to_src);
    // MIGRATE of keys that are not here; bad requests.
    assert_eq!(mv.migrate(&cl, &[a.to_string()]), simple("NOKEY"));
    let p = ports[mv.dst].to_string();
    for (cmd, want) in [
        (
            &["MIGRATE", "127.0.0.1", "x", b, "0", "10"][..],
            "ERR value is not an integer",
        ),
        (
            &["MIGRATE", "127.0.0.1", &p, b, "0", "10", "KEYS", b],
            "ERR When using MIGRATE KEYS",
        ),
        (
            &["MIGRATE", "127.0.0.1", &p, b, "99", "10"],
            "ERR DB index is out of range",
        ),
        (
            &["MIGRATE", "127.0.0.1", &p, b, "0", "10", "BOGUS"],
            "ERR syntax error",
        ),
        (
            &["CLUSTER", "SETSLOT", &s, "MIGRATING", &"4".repeat(40)],
            "ERR I don't know about node",
        ),
        (
            &["CLUSTER", "SETSLOT", &s, "IMPORTING", IDS[mv.dst]],
            "ERR I'm already the owner",
        ),
        (
            &["CLUSTER", "SETSLOT", &s, "BOGUS"],
            "ERR Invalid CLUSTER SETSLOT action",
        ),
        (
            &["CLUSTER", "SETSLOT", "16384", "STABLE"],
            "ERR Invalid or out of range slot",
        ),
        (
            &["RESTORE", b, "0", "not a payload", "REPLACE"],
            "ERR DUMP payload version or checksum are wrong",
        ),
        (&["RESTORE", b, "-1", "x"], "ERR Invalid TTL value"),
    ] {
        assert!(is_err(&src.cmd(cmd), want), "{cmd:?}: {:?}", src.cmd(cmd));
    }
    let other = (0..3).find(|&i| i != mv.src && i != mv.dst).unwrap();
    assert!(is_err(
        &cl.client(other)
            .cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", IDS[mv.dst]]),
        "ERR I'm not the owner of hash slot"
    ));
    // DUMP and RESTORE carry a key whole; an existing key is kept without REPLACE.
    let F::BulkString(payload) = src.cmd(&["DUMP", b]) else {
        panic!("DUMP")
    };
    src.send(&[b"RESTORE", b.as_bytes(), b"0", &payload]);
    assert!(is_err(
        &src.read().unwrap(),
        "BUSYKEY Target key name already exists."
    ));
    src.send(&[b"RESTORE", b.as_bytes(), b"100000", &payload, b"REPLACE"]);
    assert_eq!(src.read().unwrap(), simple("OK"));
    assert_eq!(src.cmd(&["GET", b]), bulk("3"));
    let pttl = int(&src.cmd(&["PTTL", b]));
    assert!((1..=100_000).contains(&pttl), "{pttl}");
    // A crash mid-move: the source restarted still sends the moved keys' clients on.
    let Cluster { _dirs: dirs, nodes } = cl;
    drop((src, dst, any));
    let mut nodes: Vec<Option<Running>> = nodes.into_iter().map(Some).collect();
    nodes[mv.src].take().unwrap().stop();
    let again = Running::start(dirs[mv.src].path(), config(true));
    let mut c = Client::connect(again.addr);
    assert_eq!(text(&c.cmd(&["GET", a])), ask);
    assert_eq!(c.cmd(&["GET", b]), bulk("3"));
    assert_eq!(c.cmd(&["CLUSTER", "SETSLOT", &s, "STABLE"]), simple("OK"));
    assert_eq!(c.cmd(&["GET", a]), F::Null);
    drop(c);
    again.stop();
    for n in nodes.into_iter().flatten() {
        n.stop();
    }
}

/// Follows redirections as a cluster client does: MOVED updates its slot map, ASK sends
/// `ASKING` and the command to the node named once, TRYAGAIN retries.
struct Follower {
    ports: Vec<u16>,
    conns: Vec<Client>,
    owner: std::collections::HashMap<u16, usize>,
    asks: usize,
}

impl Follower {
    fn new(cl: &Cluster) -> Follower {
        Follower {
            ports: cl.ports(),
            conns: (0..3).map(|i| cl.client(i)).collect(),
            owner: Default::default(),
            asks: 0,
        }
    }

    fn node_of(&self, addr: &str) -> usize {
        let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
        self.ports.iter().position(|&p| p == port).unwrap()
    }

    fn cmd(&mut self, slot: u16, args: &[&str]) -> F {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut node = *self.owner.get(&slot).unwrap_or(&Cluster::owner(slot));
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "no answer to {args:?}"
            );
            let r = self.conns[node].cmd(args);
            let F::Error(e) = &r else { return r };
            let w: Vec<&str> = e.split(' ').collect();
            match w[0] {
                "MOVED" => {
                    node = self.node_of(w[2]);
                    self.owner.insert(slot, node);
                }
                "ASK" => {
                    self.asks += 1;
                    let to = self.node_of(w[2]);
                    assert_eq!(self.conns[to].cmd(&["ASKING"]), simple("OK"));
                    let r = self.conns[to].cmd(args);
                    if !is_err(&r, "TRYAGAIN") {
                        return r;
                    }
                }
                "TRYAGAIN" => {}
                _ => return r,
            }
        }
    }
}

#[test]
fn a_slot_moves_while_a_client_writes() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let cl = three();
    let mut c0 = cl.client(0);
    let sl = tag_of(&mut c0, "x");
    drop(c0);
    let owner = Cluster::owner(sl);
    let mut src = cl.client(owner);
    // What is there before: strings, collections of each type, expiring keys.
    for i in 0..100 {
        let k = format!("{{t}}s:{i}");
        assert_eq!(src.cmd(&["SET", &k, &i.to_string()]), simple("OK"));
    }
    let fields: Vec<String> = (0..50)
        .flat_map(|i| [format!("f{i}"), i.to_string()])
        .collect();
    let mut cmd = vec!["HSET", "{t}h"];
    cmd.extend(fields.iter().map(String::as_str));
    assert_eq!(src.cmd(&cmd), F::Integer(50));
    let elems: Vec<String> = (0..30).map(|i| format!("e{i}")).collect();
    let mut cmd = vec!["RPUSH", "{t}l"];
    cmd.extend(elems.iter().map(String::as_str));
    assert_eq!(src.cmd(&cmd), F::Integer(30));
    assert_eq!(src.cmd(&["SADD", "{t}set", "a", "b", "c"]), F::Integer(3));
    assert_eq!(
        src.cmd(&["ZADD", "{t}z", "1.5", "a", "-2", "b", "3", "c"]),
        F::Integer(3)
    );
    assert_eq!(src.cmd(&["EXPIRE", "{t}z", "100000"]), F::Integer(1));
    assert_eq!(
        src.cmd(&["SET", "{t}ttl", "v", "PX", "1000000"]),
        simple("OK")
    );

    // The writer: each round appends to the list and the hash, increments a counter and
    // writes a new key, all in the slot; `done` counts acknowledged rounds.
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut w = Follower::new(&cl);
    let writer = {
        let (done, stop) = (done.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0usize;
            while !stop.load(SeqCst) {
                let (n, e) = (i.to_string(), format!("w{i}"));
                assert_eq!(w.cmd(sl, &["RPUSH", "{t}l", &e]), F::Integer(31 + i as i64));
                assert_eq!(w.cmd(sl, &["HSET", "{t}h", &e, &n]), F::Integer(1));
                assert_eq!(w.cmd(sl, &["INCR", "{t}ctr"]), F::Integer(i as i64 + 1));
                assert_eq!(
                    w.cmd(sl, &["SET", &format!("{{t}}w:{i}"), &n]),
                    simple("OK")
                );
                i += 1;
                done.store(i, SeqCst);
            }
            w.asks
        })
    };
    // Waits until the writer has acknowledged `n` more rounds: writes fall between every
    // two steps of the move, whatever the speed of either thread.
    let progress = |n: usize| {
        let want = done.load(SeqCst) + n;
        let deadline = Instant::now() + Duration::from_secs(60);
        while done.load(SeqCst) < want {
            assert!(Instant::now() < deadline, "the writer is stuck");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    progress(3);
    let mv = Move::open(&cl, sl);
    let mut batches = 0;
    loop {
        progress(2);
        let keys = mv.left(&cl, 10);
        if keys.is_empty() {
            break;
        }
        assert_eq!(mv.migrate(&cl, &keys), simple("OK"));
        batches += 1;
    }
    progress(2);
    mv.close(&cl);
    progress(2);
    stop.store(true, SeqCst);
    let asks = writer.join().unwrap();
    let rounds = done.load(SeqCst);
    assert!(batches >= 11, "{batches} batches");
    assert!(asks > 0, "the writer was never sent on with ASK");

    // Every acknowledged write is on the new owner, with what was there before.
    let mut dst = cl.client(mv.dst);
    assert_eq!(
        dst.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &sl.to_string()]),
        F::Integer(100 + 5 + 1 + rounds as i64)
    );
    assert_eq!(
        src.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &sl.to_string()]),
        F::Integer(0)
    );
    assert!(is_err(
        &src.cmd(&["GET", "{t}s:1"]),
        &format!("MOVED {sl} ")
    ));
    for i in 0..100 {
        assert_eq!(
            dst.cmd(&["GET", &format!("{{t}}s:{i}")]),
            bulk(&i.to_string())
        );
    }
    let mut list: Vec<F> = elems.iter().map(|e| bulk(e)).collect();
    list.extend((0..rounds).map(|i| bulk(&format!("w{i}"))));
    assert_eq!(dst.cmd(&["LRANGE", "{t}l", "0", "-1"]), F::Array(list));
    assert_eq!(dst.cmd(&["HLEN", "{t}h"]), F::Integer(50 + rounds as i64));
    for i in 0..rounds {
        assert_eq!(
            dst.cmd(&["HGET", "{t}h", &format!("w{i}")]),
            bulk(&i.to_string())
        );
        assert_eq!(
            dst.cmd(&["GET", &format!("{{t}}w:{i}")]),
            bulk(&i.to_string())
        );
    }
    assert_eq!(dst.cmd(&["HGET", "{t}h", "f7"]), bulk("7"));
    assert_eq!(dst.cmd(&["GET", "{t}ctr"]), bulk(&rounds.to_string()));
    assert_eq!(dst.cmd(&["SCARD", "{t}set"]), F::Integer(3));
    assert_eq!(dst.cmd(&["SISMEMBER", "{t}set", "b"]), F::Integer(1));
    assert_eq!(
        dst.cmd(&["ZRANGE", "{t}z", "0", "-1", "WITHSCORES"]),
        F::Array(vec![
            bulk("b"),
            bulk("-2"),
            bulk("a"),
            bulk("1.5"),
            bulk("c"),
            bulk("3")
        ])
    );
    assert_eq!(dst.cmd(&["ZSCORE", "{t}z", "c"]), bulk("3"));
    let ttl = int(&dst.cmd(&["TTL", "{t}z"]));
    assert!((1..=100000).contains(&ttl), "{ttl}");
    let pttl = int(&dst.cmd(&["PTTL", "{t}ttl"]));
    assert!((1..=1_000_000).contains(&pttl), "{pttl}");
    assert_eq!(dst.cmd(&["PTTL", "{t}s:3"]), F::Integer(-1));
    drop((src, dst));
    cl.stop();
}

fn text_ask(slot: u16, port: u16) -> F {
    F::Error(format!("ASK {slot} 127.0.0.1:{port}").into())
}

/// Clients blocked on a key of a slot that goes to another node are sent there (as in
/// Redis); while the slot is only being migrated, they stay blocked.
#[test]
fn blocked_clients_follow_their_slot() {
    let cl = three();
    let ports = cl.ports();
    let mut c = cl.client(0);
    let sl = tag_of(&mut c, "q");
    drop(c);
    let owner = Cluster::owner(sl);
    let mut blocked = cl.client(owner);
    blocked.send(&[b"BLPOP", b"{t}q", b"0"]);
    let mut src = cl.client(owner);
    let wait_blocked = |c: &mut Client, n: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !text(&c.cmd(&["INFO", "clients"])).contains(&format!("blocked_clients:{n}\r\n")) {
            assert!(std::time::Instant::now() < deadline, "not {n} blocked");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    };
    wait_blocked(&mut src, "1");
    // Opening the move and moving keys leave it blocked; the slot given away sends it on.
    let mv = Move::open(&cl, sl);
    assert_eq!(src.cmd(&["SET", "{t}s", "1"]), text_ask(sl, ports[mv.dst]));
    assert_eq!(mv.migrate(&cl, &["{t}other".to_string()]), simple("NOKEY"));
    wait_blocked(&mut src, "1");
    mv.close(&cl);
    assert_eq!(
        text(&blocked.read().unwrap()),
        format!("MOVED {sl} 127.0.0.1:{}", ports[mv.dst])
    );
    wait_blocked(&mut src, "0");
    drop((blocked, src));
    cl.stop();
}

/// Waits (as a controller polls `CLUSTER INFO`) until the source's `CLUSTERX MIGRATE` of
/// `slot` is in `state`; the deadline only guards against a hang.
fn wait_migration(c: &mut Client, slot: u16, state: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let info = text(&c.cmd(&["CLUSTER", "INFO"]));
        if info.contains(&format!("migrating_slot: {slot}\r\n"))
            && info.contains(&format!("migrating_state: {state}\r\n"))
        {
            return info;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no migrating_state {state}: {info}"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Fills the slot of `{t}` on `c`: `n` strings, a hash, a list, a set, an expiring
/// sorted set. Returns the number of keys.
fn fill_slot(c: &mut Client, n: usize) -> i64 {
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let kv: Vec<String> = chunk
            .iter()
            .flat_map(|i| [format!("{{t}}s:{i}"), i.to_string()])
            .collect();
        let mut cmd = vec!["MSET"];
        cmd.extend(kv.iter().map(String::as_str));
        assert_eq!(c.cmd(&cmd), simple("OK"));
    }
    let fields: Vec<String> = (0..200)
        .flat_map(|i| [format!("f{i}"), i.to_string()])
        .collect();
    let mut cmd = vec!["HSET", "{t}h"];
    cmd.extend(fields.iter().map(String::as_str));
    assert_eq!(c.cmd(&cmd), F::Integer(200));
    let elems: Vec<String> = (0..100).map(|i| format!("e{i}")).collect();
    let mut cmd = vec!["RPUSH", "{t}l"];
    cmd.extend(elems.iter().map(String::as_str));
    assert_eq!(c.cmd(&cmd), F::Integer(100));
    assert_eq!(c.cmd(&["SADD", "{t}set", "a", "b", "c"]), F::Integer(3));
    assert_eq!(
        c.cmd(&["ZADD", "{t}z", "1.5", "a", "-2", "b"]),
        F::Integer(2)
    );
    assert_eq!(c.cmd(&["EXPIRE", "{t}z", "100000"]), F::Integer(1));
    n as i64 + 4
}

/// What [`fill_slot`] wrote, read on `c`, `fields` the hash's fields by then.
fn check_filled(c: &mut Client, n: usize, fields: i64) {
    for i in 0..n {
        assert_eq!(
            c.cmd(&["GET", &format!("{{t}}s:{i}")]),
            bulk(&i.to_string())
        );
    }
    assert_eq!(c.cmd(&["HLEN", "{t}h"]), F::Integer(fields));
    assert_eq!(c.cmd(&["HGET", "{t}h", "f123"]), bulk("123"));
    assert_eq!(c.cmd(&["LINDEX", "{t}l", "99"]), bulk("e99"));
    assert_eq!(c.cmd(&["SISMEMBER", "{t}set", "b"]), F::Integer(1));
    assert_eq!(c.cmd(&["ZSCORE", "{t}z", "b"]), bulk("-2"));
    let ttl = int(&c.cmd(&["TTL", "{t}z"]));
    assert!((1..=100000).contains(&ttl), "{ttl}");
}

/// Kvrocks' controller protocol: `CLUSTERX MIGRATE <slot> <dst> SYNC` on the source moves
/// the slot's keys by itself; the source then sends the slot's clients on (`MOVED`) and
/// the destination serves them, before and after the controller's `SETSLOT`.
#[test]
fn clusterx_migrate_moves_a_slot() {
    let cl = three();
    let ports = cl.ports();
    let sl = cl.tag_slot();
    let (src, dst) = (Cluster::owner(sl), (Cluster::owner(sl) + 1) % 3);
    let other = 3 - src - dst;
    let s = sl.to_string();
    let mut sc = cl.client(src);
    let mut dc = cl.client(dst);
    let keys = fill_slot(&mut sc, 1000);
    assert!(!text(&sc.cmd(&["CLUSTER", "INFO"])).contains("migrating_slot"));

    // Kvrocks' errors.
    for (node, args, err) in [
        (
            src,
            vec![s.as_str(), &"f".repeat(40)],
            "ERR Can't find the destination node id",
        ),
        (src, vec![&s, IDS[src]], "ERR Can't migrate slot to myself"),
        (
            dst,
            vec![&s, IDS[src]],
            "ERR Can't migrate slot which doesn't belong to me",
        ),
        (src, vec!["16384", IDS[dst]], "ERR Slot is out of range"),
        (src, vec![&s, IDS[dst], "later"], "ERR Invalid sync flag"),
        (
            src,
            vec![&s, IDS[dst], "async", "5"],
            "ERR Async migration does not support timeout",
        ),
    ] {
        let mut cmd = vec!["CLUSTERX", "MIGRATE"];
        cmd.extend(args);
        assert_eq!(text(&cl.client(node).cmd(&cmd)), err, "{cmd:?}");
    }

    // CLUSTER IMPORT, what the source's job sends the destination.
    for (node, args, err) in [
        (dst, [s.as_str(), "3"], "ERR Invalid import state"),
        (
            dst,
            [&s, "1"],
            &format!("ERR Slot {sl} is not being imported"),
        ),
        (src, [&s, "0"], "ERR Can't import slot which belongs to me"),
    ] {
        let mut cmd = vec!["CLUSTER", "IMPORT"];
        cmd.extend(args);
        assert_eq!(text(&cl.client(node).cmd(&cmd)), err, "{cmd:?}");
    }

    assert_eq!(
        sc.cmd(&["CLUSTERX", "MIGRATE", &s, IDS[dst], "SYNC"]),
        simple("OK")
    );
    let info = wait_migration(&mut sc, sl, "success");
    assert!(
        info.contains(&format!("destination_node: {}\r\n", IDS[dst])),
        "{info}"
    );
    assert_eq!(sc.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]), F::Integer(0));
    assert_eq!(
        dc.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]),
        F::Integer(keys)
    );
    // Before the controller's SETSLOT: the source sends every command on the slot to the
    // destination, which serves it; another node still sends clients to the source.
    let moved_to = |port: u16| F::Error(format!("MOVED {sl} 127.0.0.1:{port}").into());
    assert_eq!(sc.cmd(&["GET", "{t}s:1"]), moved_to(ports[dst]));
    assert_eq!(sc.cmd(&["SET", "{t}new", "1"]), moved_to(ports[dst]));
    assert_eq!(sc.cmd(&["HLEN", "{t}h"]), moved_to(ports[dst]));
    assert_eq!(
        cl.client(other).cmd(&["GET", "{t}s:1"]),
        moved_to(ports[src])
    );
    check_filled(&mut dc, 1000, 200);
    assert_eq!(dc.cmd(&["SET", "{t}new", "1"]), simple("OK"));
    assert_eq!(
        text(&sc.cmd(&["CLUSTERX", "MIGRATE", &s, IDS[dst]])),
        "ERR Can't migrate slot which has been migrated"
    );
    // The controller gives the slot to the destination on every node.
    for i in [dst, src, other] {
        assert_eq!(
            cl.client(i)
                .cmd(&["CLUSTERX", "SETSLOT", &s, "NODE", IDS[dst], "2"]),
            simple("OK"),
            "node {i}"
        );
    }
    assert_eq!(sc.cmd(&["GET", "{t}s:1"]), moved_to(ports[dst]));
    assert_eq!(
        cl.client(other).cmd(&["GET", "{t}s:1"]),
        moved_to(ports[dst])
    );
    check_filled(&mut dc, 1000, 200);
    assert_eq!(dc.cmd(&["GET", "{t}new"]), bulk("1"));
    drop((sc, dc));
    cl.stop();
}

/// An asynchronous `CLUSTERX MIGRATE` while a client that follows ASK and MOVED writes
/// to the slot: every acknowledged write is on the destination afterwards.
#[test]
fn clusterx_migrate_while_a_client_writes() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let cl = three();
    let sl = cl.tag_slot();
    let (src, dst) = (Cluster::owner(sl), (Cluster::owner(sl) + 1) % 3);
    let s = sl.to_string();
    let mut sc = cl.client(src);
    let keys = fill_slot(&mut sc, 3000);

    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut w = Follower::new(&cl);
    let writer = {
        let (done, stop) = (done.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0usize;
            while !stop.load(SeqCst) {
                let (n, e) = (i.to_string(), format!("w{i}"));
                assert_eq!(
                    w.cmd(sl, &["RPUSH", "{t}l", &e]),
                    F::Integer(101 + i as i64)
                );
                assert_eq!(w.cmd(sl, &["HSET", "{t}h", &e, &n]), F::Integer(1));
                assert_eq!(
                    w.cmd(sl, &["SET", &format!("{{t}}w:{i}"), &n]),
                    simple("OK")
                );
                i += 1;
                done.store(i, SeqCst);
            }
        })
    };
    let progress = |n: usize| {
        let want = done.load(SeqCst) + n;
        let deadline = Instant::now() + Duration::from_secs(60);
        while done.load(SeqCst) < want {
            assert!(Instant::now() < deadline, "the writer is stuck");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    progress(3);
    assert_eq!(sc.cmd(&["CLUSTERX", "MIGRATE", &s, IDS[dst]]), simple("OK"));
    wait_migration(&mut sc, sl, "success");
    // Writes go on between the job's end and the controller's SETSLOT, and after it.
    progress(3);
    for i in [dst, src, 3 - src - dst] {
        assert_eq!(
            cl.client(i)
                .cmd(&["CLUSTERX", "SETSLOT", &s, "NODE", IDS[dst], "2"]),
            simple("OK")
        );
    }
    progress(3);
    stop.store(true, SeqCst);
    writer.join().unwrap();
    let rounds = done.load(SeqCst);

    let mut dc = cl.client(dst);
    assert_eq!(sc.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]), F::Integer(0));
    assert_eq!(
        dc.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]),
        F::Integer(keys + rounds as i64)
    );
    assert_eq!(dc.cmd(&["LLEN", "{t}l"]), F::Integer(100 + rounds as i64));
    assert_eq!(dc.cmd(&["HLEN", "{t}h"]), F::Integer(200 + rounds as i64));
    for i in 0..rounds {
        let n = i.to_string();
        assert_eq!(
            dc.cmd(&["LINDEX", "{t}l", &(100 + i).to_string()]),
            bulk(&format!("w{i}"))
        );
        assert_eq!(dc.cmd(&["HGET", "{t}h", &format!("w{i}")]), bulk(&n));
        assert_eq!(dc.cmd(&["GET", &format!("{{t}}w:{i}")]), bulk(&n));
    }
    check_filled(&mut dc, 3000, 200 + rounds as i64);
    drop((sc, dc));
    cl.stop();
}

/// A `CLUSTERX MIGRATE` to a node that does not answer fails, and leaves the slot as it
/// was: every key on the source, served there, no MIGRATING mark.
#[test]
fn clusterx_migrate_to_an_unreachable_node_fails() {
    let cl = three();
    let ports = cl.ports();
    // A port nothing listens on.
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = "4444444444444444444444444444444444444444";
    let topo = format!(
        "{}{dead} 127.0.0.1 {dead_port} master -\n",
        topology(&ports)
    );
    for i in 0..3 {
        assert_eq!(
            cl.client(i).cmd(&["CLUSTERX", "SETNODES", &topo, "2"]),
            simple("OK")
        );
    }
    let sl = cl.tag_slot();
    let src = Cluster::owner(sl);
    let s = sl.to_string();
    let mut sc = cl.client(src);
    let keys = fill_slot(&mut sc, 300);

    assert_eq!(sc.cmd(&["CLUSTERX", "MIGRATE", &s, dead]), simple("OK"));
    let info = wait_migration(&mut sc, sl, "fail");
    assert!(
        info.contains(&format!("destination_node: {dead}\r\n")),
        "{info}"
    );
    let r = text(&sc.cmd(&["CLUSTERX", "MIGRATE", &s, dead, "SYNC"]));
    assert!(
        r.starts_with(&format!("ERR Failed to migrate slot {sl}: IOERR")),
        "{r}"
    );
    wait_migration(&mut sc, sl, "fail");
    assert_eq!(
        sc.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]),
        F::Integer(keys)
    );
    check_filled(&mut sc, 300, 200);
    assert_eq!(sc.cmd(&["SET", "{t}new", "1"]), simple("OK"));
    let nodes = text(&sc.cmd(&["CLUSTER", "NODES"]));
    assert!(!nodes.contains("->-"), "{nodes}");
    // The slot can still move elsewhere.
    let dst = (src + 1) % 3;
    assert_eq!(
        sc.cmd(&["CLUSTERX", "MIGRATE", &s, IDS[dst], "SYNC"]),
        simple("OK")
    );
    assert_eq!(
        cl.client(dst).cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]),
        F::Integer(keys + 1)
    );
    drop(sc);
    cl.stop();
}

/// While a `MIGRATE` batch waits for the destination, the source serves the slot's other
/// keys; a command on a key in flight waits for the batch's end and is then sent on.
#[test]
fn keys_not_in_flight_are_served_during_a_migrate() {
    use std::time::{Duration, Instant};
    let cl = three();
    let ports = cl.ports();
    let sl = cl.tag_slot();
    let mut src = cl.client(Cluster::owner(sl));
    assert_eq!(src.cmd(&["SET", "{t}a", "1"]), simple("OK"));
    assert_eq!(src.cmd(&["SET", "{t}b", "2"]), simple("OK"));
    let mv = Move::open(&cl, sl);
    // The destination holds writes: the batch stays in flight until it is unpaused.
    let mut dst = cl.client(mv.dst);
    assert_eq!(
        dst.cmd(&["CLIENT", "PAUSE", "600000", "WRITE"]),
        simple("OK")
    );
    let port = ports[mv.dst].to_string();
    let mut migrating = cl.client(mv.src);
    migrating.send(&[
        b"MIGRATE",
        b"127.0.0.1",
        port.as_bytes(),
        b"{t}a",
        b"0",
        b"60000",
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !text(&dst.cmd(&["CLIENT", "LIST"])).contains("flags=b") {
        assert!(
            Instant::now() < deadline,
            "the batch never reached the destination"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // Another key of the slot: served at once, read and written.
    let (tx, rx) = std::sync::mpsc::channel();
    let mut other = cl.client(mv.src);
    std::thread::spawn(move || {
        tx.send((
            other.cmd(&["GET", "{t}b"]),
            other.cmd(&["SET", "{t}b", "3"]),
        ))
        .unwrap()
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(60))
            .expect("a key not in flight waited"),
        (bulk("2"), simple("OK"))
    );
    // The key in flight: answered once the batch ends, by the destination.
    let mut waiting = cl.client(mv.src);
    waiting.send(&[b"GET", b"{t}a"]);
    assert_eq!(dst.cmd(&["CLIENT", "UNPAUSE"]), simple("OK"));
    assert_eq!(migrating.read().unwrap(), simple("OK"));
    assert_eq!(waiting.read().unwrap(), text_ask(sl, ports[mv.dst]));
    assert_eq!(src.cmd(&["GET", "{t}b"]), bulk("3"));
    drop((src, dst, migrating, waiting));
    cl.stop();
}

/// After `CLUSTERX MIGRATE`'s success and before the controller's `SETSLOT`, a restarted
/// source still sends the slot's clients to the destination, and a restarted destination
/// still serves it.
#[test]
fn a_migrated_slot_is_routed_the_same_after_a_restart() {
    let cl = three();
    let ports = cl.ports();
    let sl = cl.tag_slot();
    let (src, dst) = (Cluster::owner(sl), (Cluster::owner(sl) + 1) % 3);
    let s = sl.to_string();
    let mut sc = cl.client(src);
    assert_eq!(sc.cmd(&["SET", "{t}a", "1"]), simple("OK"));
    assert_eq!(
        sc.cmd(&["CLUSTERX", "MIGRATE", &s, IDS[dst], "SYNC"]),
        simple("OK")
    );
    drop(sc);
    let Cluster { _dirs: dirs, nodes } = cl;
    for n in nodes {
        n.stop();
    }
    let moved = F::Error(format!("MOVED {sl} 127.0.0.1:{}", ports[dst]).into());
    let srv = Running::start(dirs[src].path(), config(true));
    assert_eq!(Client::connect(srv.addr).cmd(&["GET", "{t}a"]), moved);
    srv.stop();
    let srv = Running::start(dirs[dst].path(), config(true));
    assert_eq!(Client::connect(srv.addr).cmd(&["GET", "{t}a"]), bulk("1"));
    srv.stop();
}
