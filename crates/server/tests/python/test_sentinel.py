"""Failover of halflife servers by real Redis Sentinel processes (Debian's `redis-sentinel`).

Three sentinels monitor a halflife primary with one halflife replica. They must discover
the replica (from the primary's INFO) and each other (hello messages over pub/sub on the
monitored servers), fail over when the primary is killed (`MULTI`, `SLAVEOF NO ONE`,
`CONFIG REWRITE`, `CLIENT KILL`, `EXEC` on the replica), keep every write that `WAIT 1`
acknowledged before the kill, let redis-py's Sentinel client follow, and turn the old
primary into a replica of the new one when it comes back.

Skipped when `redis-sentinel` is not installed (`.ci/run` installs it).
"""

import shutil
import socket
import subprocess
import time

import pytest
import redis
from redis.sentinel import Sentinel

from conftest import Server

SENTINEL = shutil.which("redis-sentinel")
pytestmark = pytest.mark.skipif(SENTINEL is None, reason="redis-sentinel is not installed")

NAME = "mymaster"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, timeout=60):
    """Asks `check` until it is true: the state the test asserts, not a fixed sleep."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (redis.ConnectionError, redis.ResponseError) as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


class Sentinels:
    def __init__(self, tmp_path, master_port, n=3):
        self.procs, self.ports = [], []
        for i in range(n):
            port = free_port()
            conf = tmp_path / f"sentinel-{i}.conf"
            conf.write_text(
                f"port {port}\n"
                f"bind 127.0.0.1\n"
                f"dir {tmp_path}\n"
                f"sentinel monitor {NAME} 127.0.0.1 {master_port} 2\n"
                f"sentinel down-after-milliseconds {NAME} 1000\n"
                f"sentinel failover-timeout {NAME} 10000\n"
                f"sentinel parallel-syncs {NAME} 1\n"
            )
            log = open(tmp_path / f"sentinel-{i}.log", "w")
            self.procs.append(subprocess.Popen([SENTINEL, str(conf)], stdout=log, stderr=log))
            self.ports.append(port)
        self.tmp = tmp_path

    def client(self, i=0):
        return redis.Redis(port=self.ports[i], decode_responses=True)

    def master_addr(self, i=0):
        return self.client(i).execute_command("SENTINEL", "get-master-addr-by-name", NAME)

    def logs(self):
        return "\n".join(
            (self.tmp / f"sentinel-{i}.log").read_text() for i in range(len(self.procs))
        )

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=30)


def role(server):
    info = server.client(decode_responses=True).info("replication")
    return info["role"], info.get("master_port"), info.get("master_link_status")


def test_sentinel_fails_over_and_the_old_primary_rejoins(tmp_path):
    primary = Server(tmp_path / "a", port=free_port()).start()
    replica = Server(tmp_path / "b", "--replicaof", f"127.0.0.1:{primary.port}").start()
    sentinels = None
    try:
        wait_for("the replica's link", lambda: role(replica) == ("slave", primary.port, "up"))
        sentinels = Sentinels(tmp_path, primary.port)
        s0 = sentinels.client()
        # Discovery: the replica from the primary's INFO, the other sentinels from their
        # hello messages on the servers' __sentinel__:hello channel.
        wait_for(
            "sentinels to see the replica",
            lambda: any(
                int(r["port"]) == replica.port and "s_down" not in r["flags"]
                for r in s0.sentinel_slaves(NAME)
            ),
        )
        wait_for("sentinels to see each other", lambda: len(s0.sentinel_sentinels(NAME)) == 2)
        # The replica stays up in the sentinels' eyes (no s_down flapping) for a while.
        for _ in range(30):
            flags = [r["flags"] for r in s0.sentinel_slaves(NAME)]
            assert all("s_down" not in f for f in flags), (flags, sentinels.logs())
            time.sleep(0.1)

        sentinel = Sentinel([("127.0.0.1", p) for p in sentinels.ports], socket_timeout=2)
        master = sentinel.master_for(NAME, socket_timeout=2)
        acked = {}
        for i in range(200):
            master.set(f"k{i}", f"v{i}")
            if master.execute_command("WAIT", 1, 5000) == 1:
                acked[f"k{i}"] = f"v{i}".encode()
        assert len(acked) == 200

        primary.kill()
        wait_for(
            "the failover",
            lambda: sentinels.master_addr() == ["127.0.0.1", str(replica.port)],
            timeout=90,
        )
        wait_for("the promoted replica's role", lambda: role(replica)[0] == "master")
        new = replica.client()
        for k, v in acked.items():
            assert new.get(k) == v, k
        # redis-py's Sentinel client follows the failover.
        wait_for("writes through the Sentinel client", lambda: master.set("after", "1"))
        assert new.get("after") == b"1"

        # The old primary comes back and is made a replica of the new one.
        primary.start()
        wait_for(
            "the old primary to rejoin as a replica",
            lambda: role(primary) == ("slave", replica.port, "up"),
            timeout=90,
        )
        wait_for("the data to reach it", lambda: primary.client().get("after") == b"1")
        assert primary.client().get("k7") == b"v7"
    except AssertionError:
        if sentinels:
            print(sentinels.logs())
        raise
    finally:
        if sentinels:
            sentinels.stop()
        replica.stop()
        primary.stop()
