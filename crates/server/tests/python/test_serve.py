"""`halflife serve` through redis-py: every command, error replies, RESP3, durability."""

import shutil
import socket
import subprocess
import threading
import time

import pytest
import redis

from conftest import Server


def test_ping_echo_select(r):
    assert r.ping() is True
    assert r.echo("hi") == b"hi"
    assert r.execute_command("SELECT", 0) in (True, b"OK")
    assert r.execute_command("SELECT", 15) in (True, b"OK")
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.execute_command("SELECT", 16)


def test_set_get_options(r):
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.get("missing") is None
    assert r.set("k", "w", nx=True) is None
    assert r.set("new", "n", nx=True) is True
    assert r.set("absent", "x", xx=True) is None
    assert r.set("k", "w", xx=True, get=True) == b"v"
    assert r.get("k") == b"w"
    assert r.setnx("k", "z") is False
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("SET", "k", "v", "NX", "XX")
    with pytest.raises(redis.ResponseError, match="invalid expire time"):
        r.set("k", "v", ex=0)
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.execute_command("SET", "k", "v", "EX", "soon")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'get'"):
        r.execute_command("GET")


def test_binary_and_large_values(r):
    blob = bytes(range(256)) * 64  # 16 KiB, every byte value: goes to a value file
    r.set(b"\x00bin\xff", blob)
    assert r.get(b"\x00bin\xff") == blob
    assert r.strlen(b"\x00bin\xff") == len(blob)


def test_expiry(r):
    r.set("short", "v", px=100)
    r.set("long", "v", ex=100)
    assert 99 <= r.ttl("long") <= 100
    assert 0 < r.pttl("short") <= 100
    assert r.ttl("nokey") == -2
    r.set("plain", "v")
    assert r.ttl("plain") == -1
    assert r.exists("short") == 1
    time.sleep(0.25)
    assert r.get("short") is None
    assert r.exists("short") == 0
    # KEEPTTL and APPEND/INCR keep the expiry.
    r.set("long", "w", keepttl=True)
    assert r.ttl("long") > 90
    r.append("long", "x")
    assert r.ttl("long") > 90
    assert r.expire("plain", 50) is True
    assert 49 <= r.ttl("plain") <= 50
    assert r.persist("plain") is True
    assert r.ttl("plain") == -1
    # An absolute expiry in the past deletes the key.
    r.set("past", "v", exat=1)
    assert r.get("past") is None


def test_getdel_del_exists(r):
    r.mset({"a": "1", "b": "2", "c": "3"})
    assert r.getdel("a") == b"1"
    assert r.getdel("a") is None
    assert r.exists("a", "b", "c", "b") == 3
    assert r.delete("b", "c", "zz") == 2
    assert r.delete("b") == 0
    assert r.unlink("nothing") == 0


def test_mget_mset(r):
    assert r.mset({"x": "1", "y": "2"}) is True
    assert r.mget("x", "nope", "y") == [b"1", None, b"2"]
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'mset'"):
        r.execute_command("MSET", "x")


def test_counters(r):
    assert r.incr("n") == 1
    assert r.incrby("n", 10) == 11
    assert r.decr("n") == 10
    assert r.decrby("n", 20) == -10
    r.set("text", "abc")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.incr("text")
    r.set("max", str(2**63 - 1))
    with pytest.raises(redis.ResponseError, match="overflow"):
        r.incr("max")


def test_append_strlen(r):
    assert r.append("s", "hello") == 5
    assert r.append("s", " world") == 11
    assert r.get("s") == b"hello world"
    assert r.strlen("s") == 11
    assert r.strlen("none") == 0


def test_scan_keys_dbsize_flushdb(r):
    for i in range(50):
        r.set(f"user:{i:02}", i)
    for i in range(5):
        r.set(f"item:{i}", i)
    assert r.dbsize() == 55
    assert sorted(r.keys("item:*")) == [f"item:{i}".encode() for i in range(5)]
    assert r.keys("user:4?") == [f"user:4{i}".encode() for i in range(10)]
    seen = list(r.scan_iter(match="user:*", count=7))
    assert len(seen) == 50 and len(set(seen)) == 50
    cursor, page = r.scan(0, count=10)
    assert cursor != 0 and len(page) == 10
    with pytest.raises(redis.ResponseError, match="invalid cursor"):
        r.scan(987654)
    assert r.flushdb() is True
    assert r.dbsize() == 0
    assert r.keys("*") == []


def test_info(r):
    r.set("k", "v" * 1000)
    info = r.info()
    for field in ["redis_version", "tcp_port", "connected_clients", "total_commands_processed",
                  "appendfsync", "gc_policy", "write_amplification", "bytes_written_wal"]:
        assert field in info, field
    assert r.info("halflife")["gc_policy"] == "lifetime"
    assert "keyspace_hits" in r.info("stats")
    assert "used_memory_memtables" in r.info("memory")
    assert r.info("persistence")["aof_enabled"] == 1


def test_config_get_set(r):
    assert r.config_get("appendfsync") == {"appendfsync": "everysec"}
    assert r.config_set("appendfsync", "always") is True
    assert r.config_get("appendfsync") == {"appendfsync": "always"}
    assert "halflife-gc-policy" in r.config_get("halflife-*")
    with pytest.raises(redis.ResponseError, match="fixed while the database is open"):
        r.config_set("halflife-gc-policy", "titan")
    with pytest.raises(redis.ResponseError, match="Unknown option"):
        r.config_set("no-such-thing", "1")
    with pytest.raises(redis.ResponseError, match="appendfsync"):
        r.config_set("appendfsync", "sometimes")
    assert r.config_set("maxclients", "100") is True
    assert r.config_get("maxclients") == {"maxclients": "100"}


def test_client_commands(r, server):
    assert r.client_setname("worker-1") is True
    assert r.client_getname() in ("worker-1", b"worker-1")
    other = server.client()
    other.ping()
    names = [c["name"] for c in r.client_list()]
    assert "worker-1" in names and len(names) >= 2
    assert isinstance(r.client_id(), int)
    with pytest.raises(redis.ResponseError, match="cannot contain spaces"):
        r.client_setname("bad name")
    other.close()


def test_unknown_command_and_quit(r, server):
    with pytest.raises(redis.ResponseError, match="unknown command 'FROB'"):
        r.execute_command("FROB", "x")
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"*1\r\n$4\r\nQUIT\r\n")
    assert s.recv(100) == b"+OK\r\n"
    assert s.recv(100) == b""


def test_inline_and_malformed(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"PING\r\n")
    assert s.recv(100) == b"+PONG\r\n"
    # A malformed frame closes only this connection.
    s.sendall(b"*1\r\n:5\r\n")
    assert s.recv(200).startswith(b"-ERR Protocol error")
    assert s.recv(100) == b""
    assert server.client().ping()


def test_resp3(server):
    c = server.client(protocol=3)
    assert c.ping()
    c.set("k", "v")
    assert c.get("k") == b"v"
    assert c.get("missing") is None
    assert c.config_get("appendfsync") == {b"appendfsync": b"everysec"} or \
        c.config_get("appendfsync") == {"appendfsync": "everysec"}
    assert "gc_policy" in c.info("halflife")
    with pytest.raises(redis.ResponseError):
        c.execute_command("HELLO", "4")


def test_pipeline(r):
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.set(f"p{i}", i)
    for i in range(500):
        p.get(f"p{i}")
    out = p.execute()
    assert out[:500] == [True] * 500
    assert out[500:] == [str(i).encode() for i in range(500)]


def test_concurrent_incr_is_atomic(server):
    def work():
        c = server.client()
        for _ in range(200):
            c.incr("ctr")
        c.close()
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert server.client().get("ctr") == b"1600"


def test_auth(tmp_path):
    s = Server(tmp_path / "db", "--requirepass", "sesame").start()
    try:
        c = s.client()
        with pytest.raises(redis.AuthenticationError):
            c.get("k")
        with pytest.raises(redis.AuthenticationError):
            s.client(password="wrong").ping()
        ok = s.client(password="sesame")
        assert ok.set("k", "v") and ok.get("k") == b"v"
        assert s.client(password="sesame", protocol=3).get("k") == b"v"
    finally:
        s.stop()


def test_maxclients(tmp_path):
    s = Server(tmp_path / "db", "--maxclients", "2").start()
    try:
        a, b = s.client(), s.client()
        a.ping(), b.ping()
        with pytest.raises(redis.ConnectionError, match="max number of clients"):
            s.client().ping()
    finally:
        s.stop()


def test_unix_socket(tmp_path):
    sock = tmp_path / "halflife.sock"
    s = Server(tmp_path / "db", "--unix-socket", str(sock)).start()
    try:
        u = redis.Redis(unix_socket_path=str(sock))
        assert u.set("via", "unix") and u.get("via") == b"unix"
    finally:
        s.stop()
    assert not sock.exists()


def test_shutdown_and_sigterm_keep_data(tmp_path):
    s = Server(tmp_path / "db", "--appendfsync", "no").start()
    c = s.client()
    c.set("a", "1")
    c.set("b", "2", ex=1000)
    try:
        c.shutdown()
    except redis.ConnectionError:
        pass
    assert s.proc.wait(timeout=60) == 0
    s.start()
    c = s.client()
    assert c.get("a") == b"1" and c.ttl("b") > 990
    c.set("c", "3")
    s.stop()  # SIGTERM
    assert s.proc.returncode == 0
    s.start()
    assert s.client().get("c") == b"3"
    s.stop()


def test_every_acknowledged_set_survives_sigkill(tmp_path):
    """appendfsync always: SIGKILL in the middle of concurrent writes, restart, and every SET
    that was acknowledged must be there with its value."""
    s = Server(tmp_path / "db", "--appendfsync", "always", "--memtable-mb", "1").start()
    acked = [[] for _ in range(8)]
    stop = threading.Event()

    def writer(w):
        c = s.client()
        i = 0
        try:
            while not stop.is_set():
                key, value = f"w{w}:{i}", f"{w}-{i}-" + "x" * (i % 2000)
                c.set(key, value)
                acked[w].append((key, value))
                i += 1
        except redis.ConnectionError:
            pass

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    # redis-benchmark's SETs as well, when installed (Debian's redis-tools), for more
    # concurrent load; only the writers above record what was acknowledged.
    bench = None
    if shutil.which("redis-benchmark"):
        bench = subprocess.Popen(
            ["redis-benchmark", "-p", str(s.port), "-t", "set", "-n", "10000000", "-c", "20",
             "-P", "4", "-r", "100000", "-d", "100", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.0)
    s.kill()
    if bench:
        bench.kill()
        bench.wait()
    stop.set()
    for t in threads:
        t.join()
    total = sum(len(a) for a in acked)
    assert total > 100, f"only {total} writes before the kill"
    s.start()
    c = s.client()
    for a in acked:
        keys = [k for k, _ in a]
        for i in range(0, len(keys), 500):
            got = c.mget(keys[i:i + 500])
            for (k, v), g in zip(a[i:i + 500], got):
                assert g == v.encode(), f"acknowledged {k} lost after SIGKILL"
    s.stop()
