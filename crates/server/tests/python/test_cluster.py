"""Cluster mode with a real cluster client: three `halflife serve --cluster-enabled`
processes, a topology pushed to each as a controller would, and redis-py's RedisCluster
routing 200 keys across them by the slots it reads from CLUSTER SLOTS."""

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

from conftest import Server

IDS = [str(i + 1) * 40 for i in range(3)]
RANGES = [(0, 5460), (5461, 10922), (10923, 16383)]


@pytest.fixture
def cluster(tmp_path):
    nodes = []
    try:
        for i in range(3):
            nodes.append(Server(tmp_path / f"node{i}", "--cluster-enabled").start())
        topo = "\n".join(
            f"{IDS[i]} 127.0.0.1 {n.port} master - {a}-{b}"
            for i, (n, (a, b)) in enumerate(zip(nodes, RANGES))
        )
        for i, n in enumerate(nodes):
            c = n.client()
            assert c.execute_command("CLUSTERX", "SETNODEID", IDS[i]) == b"OK"
            assert c.execute_command("CLUSTERX", "SETNODES", topo, 1) == b"OK"
            c.close()
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def test_redis_cluster_client_spreads_keys_over_three_nodes(cluster):
    rc = RedisCluster(
        startup_nodes=[ClusterNode("127.0.0.1", cluster[0].port)], decode_responses=True
    )
    try:
        assert len(rc.get_primaries()) == 3
        for k in range(200):
            assert rc.set(f"key:{k}", str(k))
        for k in range(200):
            assert rc.get(f"key:{k}") == str(k)
        keys = [f"key:{k}" for k in range(0, 200, 7)]
        assert rc.mget_nonatomic(keys) == [k.split(":")[1] for k in keys]
        # Hash tags keep keys together, so multi-key commands work on them.
        assert rc.mset({"{user}:a": "1", "{user}:b": "2"})
        assert rc.mget("{user}:a", "{user}:b") == ["1", "2"]
    finally:
        rc.close()
    # Each node holds exactly the keys of its own slots.
    total = 0
    for i, n in enumerate(cluster):
        c = n.client()
        held = c.keys("key:*")
        a, b = RANGES[i]
        assert held and all(a <= key_slot(k) <= b for k in held)
        total += len(held)
        c.close()
    assert total == 200


def test_plain_client_is_redirected(cluster):
    owner = next(i for i, (a, b) in enumerate(RANGES) if a <= key_slot(b"foo") <= b)
    wrong = cluster[(owner + 1) % 3].client()
    with pytest.raises(redis.exceptions.ResponseError, match=r"12182 127\.0\.0\.1:%d" % cluster[owner].port):
        wrong.set("foo", "x")
    with pytest.raises(redis.exceptions.ResponseError, match="hash to the same slot"):
        wrong.mset({"foo": "1", "bar": "2"})
    wrong.close()
