"""Redis data types and generic commands through redis-py: one test per command group."""

import threading
import time

import pytest
import redis

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def test_string_group(r):
    r.set("s", "hello world")
    assert r.getrange("s", 0, 4) == b"hello"
    assert r.getrange("s", -5, -1) == b"world"
    assert r.setrange("s", 6, "redis") == 11
    assert r.get("s") == b"hello redis"
    assert r.setrange("pad", 3, "x") == 4
    assert r.get("pad") == b"\x00\x00\x00x"
    assert r.getset("s", "new") == b"hello redis"
    assert r.msetnx({"m1": "1", "m2": "2"}) is True
    assert r.msetnx({"m2": "x", "m3": "3"}) is False
    assert r.get("m3") is None
    r.execute_command("SETEX", "ex", 100, "v")
    assert 99 <= r.ttl("ex") <= 100
    r.psetex("pex", 100000, "v")
    assert r.pttl("pex") > 99000
    assert r.getex("ex", persist=True) == b"v"
    assert r.ttl("ex") == -1
    assert r.getex("ex", ex=50) == b"v"
    assert 49 <= r.ttl("ex") <= 50
    assert r.incrbyfloat("f", 10.5) == 10.5
    assert r.incrbyfloat("f", 0.1) == pytest.approx(10.6)
    assert r.get("f") == b"10.6"
    assert r.setbit("bits", 7, 1) == 0
    assert r.getbit("bits", 7) == 1
    assert r.get("bits") == b"\x01"
    assert r.bitcount("bits") == 1
    assert r.bitpos("bits", 1) == 7
    with pytest.raises(redis.ResponseError, match="bit offset"):
        r.setbit("bits", 2**32, 1)
    with pytest.raises(redis.ResponseError, match="maximum allowed size"):
        r.setrange("big", 512 * 1024 * 1024, "x")
    r.mset({"a": "ohmytext", "b": "mynewtext"})
    assert r.lcs("a", "b") == b"mytext"
    assert r.lcs("a", "b", len=True) == 6
    r.rpush("list", "x")
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        r.get("list")
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        r.incr("list")
    # SET overwrites any type.
    assert r.set("list", "now a string") is True
    assert r.type("list") == b"string"


def test_generic_group(r):
    r.set("k", "v")
    r.hset("h", mapping={"f": "1", "g": "2"})
    assert r.type("k") == b"string"
    assert r.type("h") == b"hash"
    assert r.type("nothing") == b"none"
    assert r.expire("k", 100, nx=True) is True
    assert r.expire("k", 200, nx=True) is False
    assert r.expire("k", 50, gt=True) is False
    assert r.expire("k", 50, lt=True) is True
    assert 49 <= r.ttl("k") <= 50
    assert r.expiretime("k") > 0
    assert r.rename("h", "h2") is True
    assert r.hgetall("h2") == {b"f": b"1", b"g": b"2"}
    assert r.exists("h") == 0
    assert r.renamenx("k", "h2") is False
    assert r.copy("h2", "h3") is True
    assert r.hgetall("h3") == {b"f": b"1", b"g": b"2"}
    assert r.copy("h2", "h3") is False
    assert r.copy("k", "k", destination_db=5) is True
    with pytest.raises(redis.ResponseError, match="no such key"):
        r.rename("missing", "x")
    assert r.object("encoding", "k") == b"embstr"
    assert r.randomkey() in {b"k", b"h2", b"h3"}
    assert r.delete("h2") == 1
    assert r.hgetall("h2") == {}
    cursor, keys = r.scan(0, _type="hash", count=100)
    assert keys == [b"h3"]


def test_databases_are_apart(server):
    a = server.client(db=0)
    b = server.client(db=9)
    a.set("k", "zero")
    assert b.get("k") is None
    b.set("k", "nine")
    assert a.get("k") == b"zero"
    assert b.dbsize() == 1
    assert a.move("k", 3) is True
    assert server.client(db=3).get("k") == b"zero"
    b.flushdb()
    assert b.dbsize() == 0
    assert server.client(db=3).get("k") == b"zero"


def test_hash_group(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "a", "3") == 0
    assert r.hget("h", "a") == b"3"
    assert r.hmget("h", "a", "zz", "b") == [b"3", None, b"2"]
    assert r.hlen("h") == 2
    assert r.hexists("h", "b") and not r.hexists("h", "c")
    assert r.hsetnx("h", "a", "x") == 0
    assert r.hstrlen("h", "a") == 1
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrbyfloat("h", "n", 0.5) == 5.5
    assert sorted(r.hkeys("h")) == [b"a", b"b", b"n"]
    assert r.hrandfield("h") in {b"a", b"b", b"n"}
    assert len(r.hrandfield("h", -10)) == 10
    seen = {}
    for k, v in r.hscan_iter("h", count=1):
        seen[k] = v
    assert seen == r.hgetall("h")
    assert r.hdel("h", "a", "b", "n", "zz") == 3
    assert r.exists("h") == 0, "an emptied hash is deleted"
    r.set("s", "v")
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        r.hset("s", "f", "v")


def test_set_group(r):
    assert r.sadd("s", "a", "b", "c", "a") == 3
    assert r.scard("s") == 3
    assert r.sismember("s", "a") and not r.sismember("s", "z")
    assert r.smismember("s", "a", "z") == [1, 0]
    r.sadd("t", "b", "c", "d")
    assert r.sinter("s", "t") == {b"b", b"c"}
    assert r.sunion("s", "t") == {b"a", b"b", b"c", b"d"}
    assert r.sdiff("s", "t") == {b"a"}
    assert r.sinterstore("st", "s", "t") == 2
    assert r.smembers("st") == {b"b", b"c"}
    assert r.sintercard(2, ["s", "t"], limit=1) == 1
    assert r.smove("s", "t", "a") is True
    assert r.smembers("t") == {b"a", b"b", b"c", b"d"}
    assert r.srandmember("t") in {b"a", b"b", b"c", b"d"}
    assert len(r.srandmember("t", 10)) == 4
    popped = r.spop("t", 2)
    assert len(popped) == 2 and r.scard("t") == 2
    assert set(r.sscan_iter("t", count=1)) == r.smembers("t")
    assert r.srem("t", *r.smembers("t")) == 2
    assert r.exists("t") == 0


def test_list_group(r):
    assert r.rpush("l", "a", "b", "c") == 3
    assert r.lpush("l", "z") == 4
    assert r.lrange("l", 0, -1) == [b"z", b"a", b"b", b"c"]
    assert r.lindex("l", -1) == b"c"
    assert r.llen("l") == 4
    assert r.lset("l", 1, "A") is True
    assert r.linsert("l", "before", "b", "x") == 5
    assert r.lrange("l", 0, -1) == [b"z", b"A", b"x", b"b", b"c"]
    assert r.lpos("l", "b") == 3
    assert r.lrem("l", 0, "x") == 1
    assert r.ltrim("l", 1, -1) is True
    assert r.lrange("l", 0, -1) == [b"A", b"b", b"c"]
    assert r.lpop("l") == b"A"
    assert r.rpop("l", 5) == [b"c", b"b"]
    assert r.exists("l") == 0
    r.rpush("src", "1", "2")
    assert r.lmove("src", "dst", "LEFT", "RIGHT") == b"1"
    assert r.rpoplpush("src", "dst") == b"2"
    assert r.lrange("dst", 0, -1) == [b"2", b"1"]
    with pytest.raises(redis.ResponseError, match="no such key"):
        r.lset("nolist", 0, "v")
    assert r.lpushx("nolist", "v") == 0


def test_sorted_set_group(r):
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3, "neg": -5, "top": float("inf")}) == 5
    assert r.zrange("z", 0, -1) == [b"neg", b"a", b"b", b"c", b"top"]
    assert r.zrange("z", 0, 1, withscores=True) == [(b"neg", -5.0), (b"a", 1.0)]
    assert r.zrangebyscore("z", "(1", 3) == [b"b", b"c"]
    assert r.zrevrangebyscore("z", "+inf", 2, start=1, num=2) == [b"c", b"b"]
    assert r.zadd("z", {"a": 10}, xx=True, ch=True) == 1
    assert r.zadd("z", {"a": 5}, gt=True) == 0
    assert r.zscore("z", "a") == 10.0
    assert r.zincrby("z", 0.5, "b") == 2.5
    assert r.zrank("z", "a") == 3 and r.zrevrank("z", "a") == 1
    assert r.zcount("z", "-inf", 3) == 3
    assert r.zmscore("z", ["a", "nope"]) == [10.0, None]
    assert r.zrem("z", "neg", "nope") == 1
    assert r.zpopmin("z") == [(b"b", 2.5)]
    assert r.zpopmax("z", 2) == [(b"top", float("inf")), (b"a", 10.0)]
    assert r.zcard("z") == 1
    r.zadd("x", {"p": 1, "q": 2})
    r.zadd("y", {"q": 3, "r": 4})
    assert r.zunionstore("u", ["x", "y"]) == 3
    assert r.zrange("u", 0, -1, withscores=True) == [(b"p", 1.0), (b"r", 4.0), (b"q", 5.0)]
    assert r.zinter(["x", "y"], withscores=True, aggregate="MAX") == [(b"q", 3.0)]
    assert r.zdiff(["x", "y"]) == [b"p"]
    r.zadd("lex", {"a": 0, "b": 0, "c": 0})
    assert r.zrangebylex("lex", "(a", "+") == [b"b", b"c"]
    assert r.zremrangebylex("lex", "-", "[b") == 2
    assert dict(r.zscan_iter("u")) == {b"p": 1.0, b"q": 5.0, b"r": 4.0}
    assert r.type("u") == b"zset"
    with pytest.raises(redis.ResponseError, match="not a valid float"):
        r.zadd("z", {"a": "nan"})
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.lpush("u", "x")


def test_blocking_pops(server):
    r = server.client()
    waiter = server.client()
    # Nothing to pop and a short timeout: None, after the timeout.
    assert waiter.blpop(["empty"], timeout=0.05) is None
    r.rpush("q", "job")
    assert waiter.brpop(["empty", "q"], timeout=1) == (b"q", b"job")
    r.zadd("z", {"m": 1})
    assert waiter.bzpopmin("z", timeout=1) == (b"z", b"m", 1.0)
    assert r.lmpop(2, "empty", "q2", direction="LEFT") is None
    r.rpush("q2", "a", "b")
    assert r.lmpop(1, "q2", direction="RIGHT", count=5) == [b"q2", [b"b", b"a"]]


def test_multi_exec_and_watch(server):
    r = server.client()
    other = server.client()
    p = r.pipeline(transaction=True)
    p.set("a", 1).incr("a").rpush("l", "x")
    assert p.execute() == [True, 2, 1]
    # A watched key written by another client aborts EXEC.
    with r.pipeline(transaction=True) as p:
        p.watch("a")
        other.set("a", 100)
        p.multi()
        p.incr("a")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("a") == b"100"
    # Unrelated writes do not.
    with r.pipeline(transaction=True) as p:
        p.watch("a")
        other.set("b", 1)
        p.multi()
        p.incr("a")
        assert p.execute() == [101]
    # A command refused while queueing fails the whole transaction.
    r.execute_command("MULTI")
    r.execute_command("SET", "c", "1")
    with pytest.raises(redis.ResponseError):
        r.execute_command("GET")
    with pytest.raises(redis.exceptions.ExecAbortError, match="previous errors"):
        r.execute_command("EXEC")
    assert r.get("c") is None


def test_info_and_command_table(r):
    r.set("k", "v", ex=100)
    info = r.info()
    for field in ["redis_version", "arch_bits", "cluster_enabled", "role", "connected_clients",
                  "used_memory", "mem_allocator"]:
        assert field in info, field
    assert info["redis_version"] == "7.0.15"
    assert info["cluster_enabled"] == 0
    assert info["mem_allocator"] == "mimalloc"
    assert info["db0"] == {"keys": 1, "expires": 1, "avg_ttl": 0}
    assert r.command_count() > 100
    cmds = r.command()  # redis-py parses COMMAND's entries by name
    assert cmds["get"]["arity"] == 2
    assert (cmds["mset"]["first_key_pos"], cmds["mset"]["last_key_pos"],
            cmds["mset"]["step_count"]) == (1, -1, 2)
    assert r.command_getkeys("MSET", "a", "1", "b", "2") == ["a", "b"]
    assert r.config_set("hash-max-ziplist-entries", 16) is True
    assert r.config_get("hash-max-listpack-entries") == {"hash-max-listpack-entries": "16"}


def test_stream_group(r):
    ids = [r.xadd("s", {"n": i}, id=f"{i}-0") for i in range(1, 6)]
    assert ids == [f"{i}-0".encode() for i in range(1, 6)]
    assert int(r.xadd("s", {"n": 6}).split(b"-")[0]) > 5
    assert r.xlen("s") == 6
    assert r.xrange("s", "-", "+", count=2) == [(b"1-0", {b"n": b"1"}), (b"2-0", {b"n": b"2"})]
    assert r.xrevrange("s", "+", "-", count=1)[0][1] == {b"n": b"6"}
    assert r.xdel("s", "2-0") == 1
    assert r.xtrim("s", maxlen=4, approximate=False) == 1
    assert [e[0] for e in r.xrange("s")][:1] == [b"3-0"]
    assert r.xadd("s", {"n": 7}, maxlen=3, approximate=False) is not None
    assert r.xlen("s") == 3
    assert r.xadd("missing", {"f": "v"}, nomkstream=True) is None
    info = r.xinfo_stream("s")
    assert info["length"] == 3 and info["max-deleted-entry-id"] == b"2-0"
    assert info["first-entry"][0] == r.xrange("s", count=1)[0][0]
    with pytest.raises(redis.ResponseError, match="equal or smaller"):
        r.xadd("s", {"f": "v"}, id="1-0")
    r.set("str", "v")
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        r.xadd("str", {"f": "v"})


def test_stream_consumer_groups(r):
    for i in range(1, 5):
        r.xadd("q", {"job": i}, id=f"{i}-0")
    assert r.xgroup_create("q", "workers", id="0") is True
    with pytest.raises(redis.ResponseError, match="BUSYGROUP"):
        r.xgroup_create("q", "workers", id="0")
    assert r.xgroup_create("fresh", "g", id="$", mkstream=True) is True
    got = r.xreadgroup("workers", "alice", {"q": ">"}, count=2)
    assert got == [[b"q", [(b"1-0", {b"job": b"1"}), (b"2-0", {b"job": b"2"})]]]
    got = r.xreadgroup("workers", "bob", {"q": ">"})
    assert [e[0] for e in got[0][1]] == [b"3-0", b"4-0"]
    assert r.xack("q", "workers", "1-0", "3-0") == 2
    summary = r.xpending("q", "workers")
    assert summary["pending"] == 2 and summary["min"] == b"2-0" and summary["max"] == b"4-0"
    assert {c["name"]: c["pending"] for c in summary["consumers"]} == {b"alice": 1, b"bob": 1}
    rows = r.xpending_range("q", "workers", "-", "+", 10, consumername="alice")
    assert [(p["message_id"], p["times_delivered"]) for p in rows] == [(b"2-0", 1)]
    # Alice's history, then bob takes over her entry.
    assert r.xreadgroup("workers", "alice", {"q": "0"})[0][1] == [(b"2-0", {b"job": b"2"})]
    claimed = r.xclaim("q", "workers", "bob", min_idle_time=0, message_ids=["2-0"])
    assert claimed == [(b"2-0", {b"job": b"2"})]
    cursor, entries, deleted = r.xautoclaim("q", "workers", "carol", min_idle_time=0, start_id="0-0")
    assert cursor == b"0-0" and [e[0] for e in entries] == [b"2-0", b"4-0"] and deleted == []
    groups = r.xinfo_groups("q")
    assert [(g["name"], g["consumers"], g["pending"]) for g in groups] == [(b"workers", 3, 2)]
    consumers = {c["name"]: c["pending"] for c in r.xinfo_consumers("q", "workers")}
    assert consumers == {b"alice": 0, b"bob": 0, b"carol": 2}
    assert r.xgroup_createconsumer("q", "workers", "dave") == 1
    assert r.xgroup_delconsumer("q", "workers", "carol") == 2
    assert r.xpending("q", "workers")["pending"] == 0
    assert r.xgroup_setid("q", "workers", id="0") is True
    assert len(r.xreadgroup("workers", "dave", {"q": ">"})[0][1]) == 4
    full = r.xinfo_stream("q", full=True)
    assert full["groups"][0]["pel-count"] == 4
    assert r.xgroup_destroy("q", "workers") == 1
    assert r.xinfo_groups("q") == []


def test_blocking_stream_reads(server):
    r = server.client()
    r.xgroup_create("events", "g", id="$", mkstream=True)
    # Nothing new: the reads time out.
    assert r.xread({"events": "$"}, block=50) == []
    assert r.xreadgroup("g", "c", {"events": ">"}, block=50) == []
    results = {}

    def read(name, call):
        results[name] = call(server.client())

    threads = [
        threading.Thread(target=read, args=("xread", lambda c: c.xread({"events": "$"}, block=0))),
        threading.Thread(
            target=read, args=("group", lambda c: c.xreadgroup("g", "c", {"events": ">"}, block=0))
        ),
    ]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    while r.info("clients")["blocked_clients"] < 2:
        assert time.time() < deadline, "the reads never blocked"
        time.sleep(0.01)
    r.xadd("events", {"kind": "click"}, id="7-0")
    for t in threads:
        t.join(30)
    want = [[b"events", [(b"7-0", {b"kind": b"click"})]]]
    assert results == {"xread": want, "group": want}
