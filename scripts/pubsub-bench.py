#!/usr/bin/env python3
"""PUBLISH throughput of `halflife serve` against redis-server, in one run.

For 1 and 100 subscribers of one channel, and without and with pipelining (-P 16):
`redis-benchmark -c 50 -n N PUBLISH chan <100 B>` against each server while the
subscribers (one reader process, non-blocking sockets, replies discarded) drain what they
are sent. Each cell is run --rounds times, servers alternated; the table gives the median
requests per second and the ratio halflife / Redis, with the spread. Every subscriber must
have received every message of a run (checked from byte counts), else the run is
reported as lost.

Needs redis-benchmark and redis-server (Debian: redis-tools, redis-server) and a release
build of halflife (cargo build --release -p halflife-cli).

    scripts/pubsub-bench.py [--requests N] [--rounds R] [--out bench-out/pubsub]
"""

import argparse
import json
import os
import pathlib
import re
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from importlib import import_module  # noqa: E402

serve_bench = import_module("serve-bench")
ROOT = pathlib.Path(__file__).resolve().parents[1]
CHANNEL = b"bench-channel"


def subscribers(port, n):
    """`n` subscribed sockets, each confirmed."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n" % (len(CHANNEL), CHANNEL))
        want = b":1\r\n"
        got = b""
        while not got.endswith(want):
            got += s.recv(4096)
        s.setblocking(False)
        socks.append(s)
    return socks


def drain(socks, stop_after, expect_bytes):
    """Reads every socket until each has `expect_bytes` or `stop_after` seconds pass;
    the bytes each received."""
    sel = selectors.DefaultSelector()
    got = {}
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
        got[s] = 0
    deadline = time.monotonic() + stop_after
    while time.monotonic() < deadline and any(v < expect_bytes for v in got.values()):
        for key, _ in sel.select(timeout=0.5):
            try:
                data = key.fileobj.recv(1 << 20)
            except BlockingIOError:
                continue
            got[key.fileobj] += len(data)
    return list(got.values())


def run_cell(port, subs, requests, pipeline, value):
    socks = subscribers(port, subs)
    # One message as RESP2 delivers it to a subscriber.
    msg = b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
        len(CHANNEL), CHANNEL, len(value), value)
    counts = []
    t = threading.Thread(
        target=lambda: counts.extend(drain(socks, 600, requests * len(msg))), daemon=True)
    t.start()
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests), "-P",
         str(pipeline), "-q", "PUBLISH", CHANNEL.decode(), value.decode()],
        capture_output=True, text=True, check=True).stdout
    t.join()
    for s in socks:
        s.close()
    m = re.findall(r"([\d.]+) requests per second", out)
    if not m:
        sys.exit(f"no result from redis-benchmark: {out!r}")
    lost = sum(1 for c in counts if c < requests * len(msg))
    return float(m[-1]), lost


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--binary", default=str(ROOT / "target" / "release" / "halflife"))
    ap.add_argument("--out", default="bench-out/pubsub")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not os.path.exists(a.binary):
        sys.exit(f"{a.binary} missing: cargo build --release -p halflife-cli")
    value = b"v" * 100
    cells = [(s, p) for s in (1, 100) for p in (1, 16)]
    results = {}
    for rnd in range(a.rounds):
        for who in ("halflife", "redis"):
            with tempfile.TemporaryDirectory() as d:
                if who == "halflife":
                    proc, port = serve_bench.start_halflife(a.binary, d, "everysec")
                else:
                    proc, port = serve_bench.start_redis(d, "everysec")
                try:
                    for subs, pipe in cells:
                        rps, lost = run_cell(port, subs, a.requests, pipe, value)
                        results.setdefault((who, subs, pipe), []).append((rps, lost))
                        print(f"round {rnd} {who} subscribers={subs} -P {pipe}: "
                              f"{rps:.0f}/s, {lost} subscribers short", flush=True)
                finally:
                    serve_bench.stop(proc, port)
    rows = []
    print("\n| subscribers | pipeline | halflife (req/s) | Redis (req/s) | ratio (min-max) |")
    print("| --- | --- | --- | --- | --- |")
    for subs, pipe in cells:
        h = [r for r, _ in results[("halflife", subs, pipe)]]
        r = [r for r, _ in results[("redis", subs, pipe)]]
        ratios = [x / y for x, y in zip(h, r)]
        lost = sum(l for _, l in results[("halflife", subs, pipe)])
        print(f"| {subs} | {'-P 16' if pipe > 1 else 'none'} | {statistics.median(h):,.0f} "
              f"| {statistics.median(r):,.0f} | {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}){' LOST' if lost else ''} |")
        rows.append({"subscribers": subs, "pipeline": pipe, "halflife": h, "redis": r,
                     "ratios": ratios, "halflife_lost": lost})
    (out / "pubsub.json").write_text(json.dumps(rows, indent=1))
    print(f"\nwrote {out / 'pubsub.json'}")


if __name__ == "__main__":
    main()
