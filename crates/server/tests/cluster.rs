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
    drop(cs);
    for n in cl.nodes {
        n.stop();
    }
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
    for n in cl.nodes {
        n.stop();
    }
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
    for n in cl.nodes {
        n.stop();
    }
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
    assert!(is_err(
        &c.cmd(&["CLUSTERX", "MIGRATE", &s, IDS[1]]),
        "ERR CLUSTERX MIGRATE is not supported"
    ));
    drop(c);
    for n in cl.nodes {
        n.stop();
    }
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
