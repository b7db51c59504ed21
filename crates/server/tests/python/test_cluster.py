"""Cluster mode with a real cluster client: three `halflife serve --cluster-enabled`
processes, a topology pushed to each as a controller would, and redis-py's RedisCluster
routing 200 keys across them by the slots it reads from CLUSTER SLOTS, and following
the -ASK and -MOVED redirections of a slot being moved while it writes (by Redis's
commands, or by the source itself with Kvrocks' CLUSTERX MIGRATE)."""

import threading
import time

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


class SlotWriter:
    """A RedisCluster client writing to the keys of `tag` on its own thread, one round
    after another (`SET {tag}w:i`, `RPUSH {tag}l wi`, `HSET {tag}h wi i`), until stopped:
    what a slot move must not lose. The keys `{tag}l` and `{tag}h` start with 20 elements
    `e0..e19` / fields `f0..f19`."""

    def __init__(self, startup, tag):
        self.tag, self.acked, self.failed = tag, [], []
        self._stop = threading.Event()
        self._startup = startup
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self):
        wc = RedisCluster(startup_nodes=self._startup, decode_responses=True)
        i, tag = 0, self.tag
        try:
            while not self._stop.is_set():
                wc.set(f"{tag}w:{i}", i)
                wc.rpush(f"{tag}l", f"w{i}")
                wc.hset(f"{tag}h", f"w{i}", i)
                self.acked.append(i)
                i += 1
        except Exception as e:  # reported by the main thread
            self.failed.append(e)
        finally:
            wc.close()

    def progress(self, n):
        """Waits for `n` more acknowledged rounds: writes fall between every two steps of
        a move, however fast either side runs (the deadline only guards a hang)."""
        want, deadline = len(self.acked) + n, time.monotonic() + 60
        while len(self.acked) < want:
            assert not self.failed, self.failed
            assert time.monotonic() < deadline, "the writer is stuck"
            time.sleep(0.001)

    def stop(self):
        """Stops the writer; returns the rounds acknowledged (all of them, in order)."""
        self._stop.set()
        self._thread.join()
        assert not self.failed, self.failed
        n = len(self.acked)
        assert self.acked == list(range(n))
        return n

    def check(self, c):
        """Every acknowledged round is on the node `c`, after what was there before."""
        tag, n = self.tag, len(self.acked)
        assert [c.get(f"{tag}w:{i}") for i in range(n)] == [str(i) for i in range(n)]
        assert c.lrange(f"{tag}l", 0, -1) == [f"e{i}" for i in range(20)] + [f"w{i}" for i in range(n)]
        h = c.hgetall(f"{tag}h")
        assert h == {**{f"f{i}": str(i) for i in range(20)}, **{f"w{i}": str(i) for i in range(n)}}


def give_slot(cluster, slot, src_i, dst_i):
    """The controller's last step: `CLUSTERX SETSLOT <slot> NODE <dst> 2` on every node."""
    for i in (dst_i, src_i, 3 - src_i - dst_i):
        c = cluster[i].client()
        assert c.execute_command("CLUSTERX", "SETSLOT", slot, "NODE", IDS[dst_i], 2)
        c.close()


def test_slot_moves_while_redis_cluster_writes(cluster):
    """A slot moved with CLUSTER SETSLOT MIGRATING/IMPORTING, MIGRATE in batches and
    CLUSTERX SETSLOT, while a RedisCluster client writes to it: every write it saw
    acknowledged is on the new owner afterwards, with what was there before."""
    tag = "{mv}"
    slot = key_slot(tag.encode())
    src_i = next(i for i, (a, b) in enumerate(RANGES) if a <= slot <= b)
    dst_i = (src_i + 1) % 3
    src, dst = cluster[src_i].client(), cluster[dst_i].client(decode_responses=True)
    startup = [ClusterNode("127.0.0.1", cluster[0].port)]
    rc = RedisCluster(startup_nodes=startup, decode_responses=True)
    for i in range(60):
        rc.set(f"{tag}s:{i}", i)
    rc.rpush(f"{tag}l", *[f"e{i}" for i in range(20)])
    rc.hset(f"{tag}h", mapping={f"f{i}": i for i in range(20)})
    rc.zadd(f"{tag}z", {"a": 1.5, "b": -2})
    rc.set(f"{tag}ttl", "v", px=1_000_000)
    rc.close()

    w = SlotWriter(startup, tag)
    try:
        w.progress(3)
        assert dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", IDS[src_i])
        assert src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", IDS[dst_i])
        batches = 0
        while True:
            w.progress(2)
            keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 10)
            if not keys:
                break
            r = src.execute_command(
                "MIGRATE", "127.0.0.1", cluster[dst_i].port, "", 0, 5000, "KEYS", *keys
            )
            assert r == b"OK"
            batches += 1
        w.progress(2)
        give_slot(cluster, slot, src_i, dst_i)
        w.progress(2)
    finally:
        n = w.stop()
    assert batches >= 8
    assert src.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    assert dst.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 60 + 4 + n
    assert [dst.get(f"{tag}s:{i}") for i in range(60)] == [str(i) for i in range(60)]
    w.check(dst)
    assert dst.zrange(f"{tag}z", 0, -1, withscores=True) == [("b", -2.0), ("a", 1.5)]
    assert 0 < dst.pttl(f"{tag}ttl") <= 1_000_000
    # redis-py shows MOVED as its arguments only.
    moved = rf"{slot} 127\.0\.0\.1:{cluster[dst_i].port}"
    with pytest.raises(redis.exceptions.ResponseError, match=moved):
        src.get(f"{tag}s:1")
    src.close()
    dst.close()


def migration_state(c):
    """CLUSTER INFO's migration lines (Kvrocks': `migrating_state: success`)."""
    text = redis.utils.str_if_bytes
    info = c.execute_command("CLUSTER", "INFO")
    if isinstance(info, (bytes, str)):
        info = dict(line.split(":", 1) for line in text(info).splitlines() if line)
    info = {text(k).strip(): text(v).strip() for k, v in info.items()}
    return info.get("migrating_slot"), info.get("destination_node"), info.get("migrating_state")


def test_clusterx_migrate_while_redis_cluster_writes(cluster):
    """Kvrocks' controller protocol: CLUSTERX MIGRATE to the source, CLUSTER INFO polled
    until `migrating_state: success`, CLUSTERX SETSLOT ... NODE to every node, while a
    RedisCluster client writes to the slot: every write it saw acknowledged is on the
    new owner afterwards, with what was there before."""
    tag = "{cx}"
    slot = key_slot(tag.encode())
    src_i = next(i for i, (a, b) in enumerate(RANGES) if a <= slot <= b)
    dst_i = (src_i + 1) % 3
    src, dst = cluster[src_i].client(), cluster[dst_i].client(decode_responses=True)
    startup = [ClusterNode("127.0.0.1", cluster[0].port)]
    rc = RedisCluster(startup_nodes=startup, decode_responses=True)
    for j in range(0, 2000, 500):
        rc.mset({f"{tag}s:{i}": i for i in range(j, j + 500)})
    rc.rpush(f"{tag}l", *[f"e{i}" for i in range(20)])
    rc.hset(f"{tag}h", mapping={f"f{i}": i for i in range(20)})
    rc.close()

    w = SlotWriter(startup, tag)
    try:
        w.progress(3)
        assert src.execute_command("CLUSTERX", "MIGRATE", slot, IDS[dst_i]) == b"OK"
        deadline = time.monotonic() + 60
        while (state := migration_state(src)) != (str(slot), IDS[dst_i], "success"):
            assert not w.failed, w.failed
            assert state == (str(slot), IDS[dst_i], "start"), state
            assert time.monotonic() < deadline, "the migration does not end"
            time.sleep(0.002)
        w.progress(3)
        give_slot(cluster, slot, src_i, dst_i)
        w.progress(3)
    finally:
        n = w.stop()
    assert src.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    assert dst.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 2000 + 2 + n
    assert [dst.get(f"{tag}s:{i}") for i in range(2000)] == [str(i) for i in range(2000)]
    w.check(dst)
    moved = rf"{slot} 127\.0\.0\.1:{cluster[dst_i].port}"
    with pytest.raises(redis.exceptions.ResponseError, match=moved):
        src.get(f"{tag}s:1")
    src.close()
    dst.close()
