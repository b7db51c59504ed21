"""Fixtures: a `halflife serve` process on a free port over a fresh data directory.

The binary is $HALFLIFE_BIN, else target/debug/halflife of this checkout (`.ci/run`
builds it first).
"""

import os
import pathlib
import re
import signal
import subprocess

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

ROOT = pathlib.Path(__file__).resolve().parents[4]
BIN = os.environ.get("HALFLIFE_BIN", str(ROOT / "target" / "debug" / "halflife"))


class Server:
    """One `halflife serve` process; `start` again on the same directory after `kill`."""

    def __init__(self, data_dir, *extra, port=0):
        self.dir = data_dir
        self.extra = list(extra)
        self.proc = None
        self.port = None
        # 0: a free port at each start; else this one (a server that must come back where
        # others, such as Redis Sentinel, know it).
        self.fixed_port = port

    def start(self):
        self.proc = subprocess.Popen(
            [BIN, "serve", "--dir", str(self.dir), "--port", str(self.fixed_port), *self.extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        m = re.search(r"tcp 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(m.group(1))
        return self

    def client(self, **kw):
        # No retries: an error reply under test must surface at once, not after backoff.
        kw.setdefault("retry", Retry(NoBackoff(), 0))
        return redis.Redis(port=self.port, **kw)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "db").start()
    yield s
    s.stop()


@pytest.fixture
def r(server):
    c = server.client()
    yield c
    c.close()
