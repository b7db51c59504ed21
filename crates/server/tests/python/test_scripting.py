"""Lua scripting and functions as applications use them: redis-py's Lock and
register_script, the `limits` rate limiters (Lua scripts run by EVALSHA) and
python-redis-lock's lock, end to end against `halflife serve`."""

import threading
import time

import pytest
import redis
import redis_lock
from limits import parse, storage, strategies
from redis.exceptions import LockNotOwnedError, NoScriptError, ResponseError


def test_eval_and_register_script(r):
    assert r.eval("return redis.call('incr', KEYS[1])", 1, "k") == 1
    incr_by = r.register_script(
        "local v = redis.call('incrby', KEYS[1], ARGV[1]) return {v, type(v)}"
    )
    # The first call meets NOSCRIPT after a flush and loads the script again.
    r.script_flush()
    assert incr_by(keys=["k"], args=[5]) == [6, b"number"]
    assert incr_by(keys=["k"], args=[5]) == [11, b"number"]
    assert r.script_exists(incr_by.sha) == [True]
    with pytest.raises(NoScriptError):
        r.evalsha("ffd632c7d33e571e9f24556ebed26c3479a87130", 0)
    with pytest.raises(ResponseError, match="Script attempted to access nonexistent global"):
        r.eval("return undefined_name", 0)


def test_redis_py_lock(server, r):
    lock = r.lock("resource", timeout=10)
    assert lock.acquire(blocking=False)
    other = server.client().lock("resource", timeout=10)
    assert not other.acquire(blocking=False)
    assert lock.extend(5)
    assert lock.owned()
    lock.release()
    assert other.acquire(blocking=False)
    # Releasing a lock another owner holds is refused by the release script.
    lock.local.token = b"not-the-token"
    with pytest.raises(LockNotOwnedError):
        lock.release()
    other.release()


def test_python_redis_lock(server, r):
    lock = redis_lock.Lock(r, "job", expire=30)
    assert lock.acquire(blocking=False)
    waiter_got = []

    def waiter():
        c = server.client()
        l2 = redis_lock.Lock(c, "job", expire=30)
        waiter_got.append(l2.acquire(timeout=20))
        l2.release()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    assert not waiter_got
    lock.extend(60)
    # The release script deletes the lock and signals the waiter through its list.
    lock.release()
    t.join(timeout=30)
    assert waiter_got == [True]
    redis_lock.reset_all(r)


@pytest.mark.parametrize(
    "strategy",
    [
        strategies.MovingWindowRateLimiter,
        strategies.FixedWindowRateLimiter,
        strategies.SlidingWindowCounterRateLimiter,
    ],
)
def test_limits_rate_limiters(server, strategy):
    limiter = strategy(storage.RedisStorage(f"redis://127.0.0.1:{server.port}"))
    item = parse("5/minute")
    assert all(limiter.hit(item, "user", "42") for _ in range(5))
    assert not limiter.hit(item, "user", "42")
    assert limiter.hit(item, "user", "43")
    stats = limiter.get_window_stats(item, "user", "42")
    assert stats.remaining == 0
    limiter.clear(item, "user", "42")
    assert limiter.hit(item, "user", "42")


def test_functions_with_redis_py(server, r):
    code = """#!lua name=counters
redis.register_function('bump', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)
redis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}
"""
    assert r.function_load(code) == b"counters"
    assert r.fcall("bump", 1, "c", 3) == 3
    assert r.fcall_ro("peek", 1, "c") == b"3"
    lib = r.function_list()[0]
    assert dict(zip(lib[::2], lib[1::2]))[b"library_name"] == b"counters"
    dump = r.function_dump()
    r.function_flush()
    assert r.function_list() == []
    r.function_restore(dump)
    assert r.fcall("bump", 1, "c", 1) == 4
    # Functions are kept in the database: they are there after a kill and a restart.
    server.kill()
    server.start()
    c = server.client()
    assert c.fcall("bump", 1, "c", 1) == 5
    c.close()


def test_a_script_that_never_ends_is_killed(server, r):
    r.config_set("busy-reply-threshold", 100)
    done = []

    def spin():
        c = server.client()
        try:
            c.eval("while true do end", 0)
        except ResponseError as e:
            done.append(str(e))

    t = threading.Thread(target=spin)
    t.start()
    other = server.client()
    while True:
        try:
            other.ping()
        except ResponseError as e:
            assert str(e).startswith("BUSY")
            break
    assert other.script_kill()
    t.join(timeout=30)
    assert "Script killed by user" in done[0]
    assert other.ping()
