"""The halflife Python package: dict-like DB, scans both ways, cursors, batches,
snapshots, expiry, backups, stats, policies, errors and the GIL."""

import random
import threading
import time

import pytest

import halflife


@pytest.fixture
def db(tmp_path):
    d = halflife.DB(tmp_path / "db", memtable_mb=1)
    yield d
    d.close()


def test_dict_interface(db):
    db[b"a"] = b"1"
    db["b"] = "2"  # str is taken as UTF-8
    assert db[b"a"] == b"1"
    assert db[b"b"] == b"2"
    assert b"a" in db and b"zz" not in db
    assert db.get(b"zz") is None
    assert db.get(b"zz", b"dflt") == b"dflt"
    with pytest.raises(KeyError):
        db[b"zz"]
    del db[b"a"]
    assert b"a" not in db
    with pytest.raises(KeyError):
        del db[b"a"]
    db.put(b"c", bytearray(b"3"), sync=True)
    db.delete(b"c")
    assert db.get(b"c") is None
    with pytest.raises(TypeError, match="bytes or str"):
        db[1] = b"x"


def test_there_is_no_len_only_an_estimate(db):
    """len() would either read every key or lie: the package has none (docs/python.md)."""
    with pytest.raises(TypeError):
        len(db)
    for i in range(100):
        db[f"k{i:03}"] = b"v"
    db.flush()
    assert db.estimate_num_keys() == 100


def test_iteration_and_range_scans(db):
    for i in range(20):
        db[f"k{i:02}"] = f"v{i}"
    assert list(db) == [f"k{i:02}".encode() for i in range(20)]
    assert list(db.keys(b"k05", b"k08")) == [b"k05", b"k06", b"k07"]
    assert list(db.values(start="k18")) == [b"v18", b"v19"]
    assert list(db.items(stop="k02")) == [(b"k00", b"v0"), (b"k01", b"v1")]


def test_large_values_go_through_value_files(db):
    big = bytes(range(256)) * 64
    for i in range(300):
        db[f"big{i}"] = big
    db.flush()
    assert db[b"big7"] == big
    assert db.stats()["value_file_bytes"] > 0


def test_write_batch_is_atomic_and_ordered(db):
    db[b"gone"] = b"x"
    b = halflife.WriteBatch()
    b.put(b"x", b"1")
    b.put("y", "2")
    b.delete(b"gone")
    assert len(b) == 3
    db.write(b, sync=True)
    assert db[b"x"] == b"1" and db[b"y"] == b"2" and b"gone" not in db
    b.clear()
    assert len(b) == 0


def test_snapshot_sees_the_past(db):
    db[b"k"] = b"old"
    with db.snapshot() as snap:
        db[b"k"] = b"new"
        db[b"later"] = b"1"
        assert snap[b"k"] == b"old"
        assert b"later" not in snap
        assert list(snap.items()) == [(b"k", b"old")]
        assert db[b"k"] == b"new"
    with pytest.raises(halflife.Error, match="released"):
        snap.get(b"k")


def test_stats_is_a_dict(db):
    db[b"k"] = b"v"
    s = db.stats()
    assert s["policy"] == "lifetime"
    assert s["placement"] == "write-history"
    assert s["user_bytes_written"] > 0
    assert "write_amplification" in s and "levels" in s


@pytest.mark.parametrize("policy", halflife.POLICIES)
def test_every_policy_opens_writes_and_reopens(tmp_path, policy):
    path = tmp_path / policy
    with halflife.DB(path, gc=policy, memtable_mb=1, min_blob_size=64) as d:
        for i in range(2000):
            d[f"k{i % 500}"] = b"v" * 200 + str(i).encode()
        d.flush()
        d.wait_idle()
        # The engine names the configured policy, not its family.
        assert d.stats()["policy"] == policy
    with halflife.DB(path, gc=policy) as d:
        assert d[b"k499"] == b"v" * 200 + b"1999"


def test_context_manager_closes(tmp_path):
    with halflife.DB(tmp_path / "db") as d:
        d[b"k"] = b"v"
    assert d.closed
    with pytest.raises(halflife.Error, match="closed"):
        d[b"k"]
    # Reopen: the write is there.
    with halflife.DB(tmp_path / "db") as d:
        assert d[b"k"] == b"v"


def test_engine_errors_carry_the_engine_message(tmp_path):
    with pytest.raises(halflife.Error, match="unknown policy"):
        halflife.DB(tmp_path / "a", gc="nope")
    with pytest.raises(halflife.Error, match="memtable_size"):
        halflife.DB(tmp_path / "b", memtable_mb=0)
    with pytest.raises(TypeError, match="unknown option"):
        halflife.DB(tmp_path / "c", colour="blue")
    with halflife.DB(tmp_path / "d") as d:
        with pytest.raises(halflife.Error, match="empty"):
            d[b""] = b"v"
        # A second open of the same directory fails on its lock, naming the problem.
        with pytest.raises(halflife.Error, match="opening"):
            halflife.DB(tmp_path / "d")


def test_gil_is_released_during_io(tmp_path):
    """A Python thread keeps running while another one waits in synced writes."""
    with halflife.DB(tmp_path / "db", sync=True) as d:
        stop = threading.Event()
        ticks = [0]

        def spin():
            while not stop.is_set():
                ticks[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        start = time.time()
        n = 0
        while time.time() - start < 0.5:
            d[f"k{n}"] = b"v" * 100
            n += 1
        stop.set()
        t.join()
        # With the GIL held through each fsync the spinner would barely advance.
        assert ticks[0] > 10 * n, (ticks[0], n)


def test_readme_example_runs(tmp_path, capsys):
    """The README's Python example, run as written (in a temporary directory)."""
    import pathlib
    import re

    readme = (pathlib.Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme.split("## Using it from Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code.replace("/tmp/halflife-py", str(tmp_path / "db")), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "[(b'user:2', b'bob')]" in out


def test_value_log_wal_writes_large_values_once(tmp_path):
    """With the value log as the WAL (the default) the WAL holds pointers, not values, and
    a database written either way reopens the other way with every value intact."""
    big = {b"k%03d" % i: bytes([i % 251]) * 10_000 for i in range(100)}
    wal_bytes = {}
    for on in (False, True):
        path = tmp_path / ("on" if on else "off")
        with halflife.DB(path, value_log_wal=on) as d:
            for k, v in big.items():
                d[k] = v
            # Bytes written to the WAL, not its files' size: the WAL file is reserved
            # ahead in windows of 4 MiB (written through a mapping).
            wal_bytes[on] = d.stats()["io"]["by_cause"]["wal"]["bytes_written"]
        with halflife.DB(path, value_log_wal=not on) as d:
            assert all(d[k] == v for k, v in big.items())
    assert wal_bytes[True] * 4 < wal_bytes[False], wal_bytes


def _model_db(db, n=300, seed=7):
    """Writes, overwrites and deletes keys in `db` and returns the model dict, with a flush
    in the middle so that scans merge the memtable and a table file."""
    rng = random.Random(seed)
    model = {}
    for step in range(n * 3):
        k = b"k%03d" % rng.randrange(n)
        if rng.random() < 0.2:
            db.delete(k)
            model.pop(k, None)
        else:
            v = bytes([rng.randrange(256)]) * rng.choice([10, 800])
            db[k] = v
            model[k] = v
        if step == n:
            db.flush()
    return model


def test_scans_both_ways_and_prefixes_match_a_model(db):
    model = _model_db(db)
    keys = sorted(model)
    assert list(db.keys()) == keys
    assert list(db.keys(reverse=True)) == keys[::-1]
    assert list(db.items(b"k100", b"k200", reverse=True)) == [
        (k, model[k]) for k in reversed(keys) if b"k100" <= k < b"k200"
    ]
    assert list(db.values(start=b"k250", reverse=True)) == [model[k] for k in reversed(keys) if k >= b"k250"]
    for p in (b"k1", b"k05", b"k299", b"x", b""):
        want = [k for k in keys if k.startswith(p)]
        assert list(db.keys(prefix=p)) == want
        assert list(db.keys(prefix=p, reverse=True)) == want[::-1]
    with pytest.raises(ValueError, match="prefix"):
        db.keys(b"a", prefix=b"k")


def test_cursor_seeks_anywhere_and_steps_both_ways(db):
    model = _model_db(db)
    keys = sorted(model)
    rng = random.Random(3)
    c = db.iter()
    assert not c.valid() and c.key() is None
    db[b"k000-written-after"] = b"unseen"  # the cursor's view is fixed when it is made
    at = None
    for _ in range(500):
        op = rng.randrange(6)
        target = b"k%03d" % rng.randrange(310) + (b"~" if rng.random() < 0.5 else b"")
        if op == 0:
            c.seek_to_first()
            at = 0 if keys else None
        elif op == 1:
            c.seek_to_last()
            at = len(keys) - 1 if keys else None
        elif op == 2:
            c.seek(target)
            i = next((i for i, k in enumerate(keys) if k >= target), None)
            at = i
        elif op == 3:
            c.seek_for_prev(target)
            below = [i for i, k in enumerate(keys) if k <= target]
            at = below[-1] if below else None
        elif op == 4 and at is not None:
            c.next()
            at = at + 1 if at + 1 < len(keys) else None
        elif op == 5 and at is not None:
            c.prev()
            at = at - 1 if at > 0 else None
        if at is None:
            assert not c.valid()
        else:
            assert (c.key(), c.value()) == (keys[at], model[keys[at]])
    # Bounded cursors, and a prefix one.
    c = db.iter(b"k100", b"k200")
    c.seek_to_last()
    assert c.key() == max(k for k in keys if k < b"k200")
    c = db.iter(prefix=b"k2")
    c.seek_for_prev(b"k3")
    assert c.key() == max(k for k in keys if k.startswith(b"k2"))


def test_snapshots_scan_both_ways_and_have_cursors(db):
    model = _model_db(db)
    with db.snapshot() as s:
        db.delete_range(b"k", b"l")
        assert list(db.keys()) == []
        assert list(s.keys(reverse=True)) == sorted(model, reverse=True)
        assert s.get_many([b"k001", b"nope"], b"-") == [model.get(b"k001", b"-"), b"-"]
        c = s.iter(prefix=b"k1")
        c.seek_to_last()
        assert c.key() == max(k for k in model if k.startswith(b"k1"))


def test_get_many_and_multi_get(db):
    db[b"a"] = b"1"
    db[b"c"] = b"3"
    assert db.get_many([b"a", b"b", "c"]) == [b"1", None, b"3"]
    assert db.get_many(iter([b"b"]), default=0) == [0]
    assert db.multi_get([b"a", b"b", b"c"]) == {b"a": b"1", b"c": b"3"}


def test_delete_range_deletes_the_range_only(db):
    for i in range(100):
        db[b"k%02d" % i] = b"v"
    db.flush()
    assert db.delete_range(b"k10", b"k20") == 10
    assert db.delete_range(b"k10", b"k20") == 0
    left = list(db.keys())
    assert len(left) == 90 and b"k09" in left and b"k20" in left and b"k15" not in left


def test_writes_with_an_expiry_read_as_absent_once_it_passes(db):
    db.put(b"soon", b"v", ttl=0.2)
    db.put(b"later", b"v", expire_at=time.time() + 3600)
    b = halflife.WriteBatch()
    b.put(b"batched", b"v", ttl=0.2)
    db.write(b)
    assert db[b"soon"] == b"v" and db[b"batched"] == b"v"
    time.sleep(0.3)
    assert b"soon" not in db and b"batched" not in db
    assert db[b"later"] == b"v"
    assert list(db.keys()) == [b"later"]
    with pytest.raises(ValueError):
        db.put(b"x", b"v", ttl=-1)
    with pytest.raises(ValueError):
        db.put(b"x", b"v", ttl=1, expire_at=1)


def test_checkpoint_and_backups_restore_every_write(tmp_path):
    with halflife.DB(tmp_path / "db", min_blob_size=64) as d:
        for i in range(500):
            d[b"k%03d" % i] = bytes([i % 251]) * 300
        info = d.checkpoint(tmp_path / "cp")
        assert info["sequence"] >= 500
        with halflife.BackupEngine(tmp_path / "backups") as be:
            first = be.create(d)
            d[b"k000"] = b"changed"
            second = be.create(d)
            assert second["reused"] > 0 and second["id"] > first["id"]
            assert [m["id"] for m in be.list()] == [first["id"], second["id"]]
            be.verify(first["id"])
            be.restore(tmp_path / "restored-first", first["id"])
            be.restore(tmp_path / "restored-latest")
            assert be.purge_old(1) == [first["id"]]
    with halflife.DB(tmp_path / "cp") as d:
        assert d[b"k499"] == bytes([499 % 251]) * 300
    with halflife.DB(tmp_path / "restored-first") as d:
        assert d[b"k000"] == bytes([0]) * 300
    with halflife.DB(tmp_path / "restored-latest") as d:
        assert d[b"k000"] == b"changed" and d[b"k499"] == bytes([499 % 251]) * 300


@pytest.mark.parametrize(
    "policy,params",
    [
        ("blobdb", dict(age_cutoff=0.5, force_threshold=0.1)),
        ("titan", dict(garbage_ratio=0.1)),
        ("terark", dict(garbage_ratio=0.1)),
        ("lifetime", dict(space_amp_target=1.2)),
        ("lifetime", dict(space_amp_target=0)),  # paper 000's TTL trigger
        ("lifetime-nomodel", dict(space_amp_target=2.0, background_gc=2)),
    ],
)
def test_policy_parameters_are_keywords(tmp_path, policy, params):
    with halflife.DB(tmp_path / "db", gc=policy, memtable_mb=1, min_blob_size=64, **params) as d:
        for i in range(3000):
            d[f"k{i % 300}"] = b"v" * 300
        d.flush()
        d.wait_idle()
        assert d[b"k299"] == b"v" * 300
        assert d.stats()["policy"] == policy


def test_a_parameter_of_another_policy_is_refused(tmp_path):
    with pytest.raises(TypeError, match="garbage_ratio applies to"):
        halflife.DB(tmp_path / "a", gc="blobdb", garbage_ratio=0.1)
    with pytest.raises(TypeError, match="space_amp_target applies to"):
        halflife.DB(tmp_path / "b", space_amp_target=1.2, gc="titan")
    with pytest.raises(halflife.Error):
        halflife.DB(tmp_path / "c", gc="titan", garbage_ratio=2.0)
