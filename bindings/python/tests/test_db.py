"""The halflife Python package: dict-like DB, scans, batches, snapshots, stats, policies,
errors and the GIL."""

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


def test_len_is_an_estimate_that_tracks_writes(db):
    assert len(db) == 0
    for i in range(100):
        db[f"k{i:03}"] = b"v"
    assert len(db) == 100
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
