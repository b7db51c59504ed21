#!/usr/bin/env python3
"""Where a request's time goes in `halflife serve`, against redis-server, per redis-benchmark test.

For each test, a fresh `halflife serve` and a fresh `redis-server` (AOF on, the same
appendfsync) each receive the same redis-benchmark run (50 connections). The CPU each server
spends per request is read from /proc (user + system time over the measured run, every
thread), and the halflife server is sampled on the CPU (`perf record -F 999`, stacks by frame
pointers) during that run. Each sample is charged to the innermost frame that names a part
of a request's path:

  background    the engine's own threads (flush, compaction, GC), whatever they do
  wait/wake     futexes and the scheduler: hand-offs between threads
  reply         encoding replies and sending them (the socket write included)
  request read  reading the socket
  decode        the RESP decoder (protocol::Decoder)
  engine write  the engine applying a batch (group commit, value log, WAL, memtable inserts)
  engine read   the engine answering a lookup (memtable, tables, caches, value files)
  command       the command's own logic: dispatch, type encoding, locks, write combining
  other         the runtime, allocation and anything not above

The first four are matched from the innermost frame outwards (a futex inside an engine
write is a wait); the engine's parts by any frame of the stack.

    scripts/serve-profile.py --binary target/release/halflife \
        [--tests zadd,hset,sadd,lpop] [--size 100] [--pipeline 16] [--requests 200000] \
        [--fsync everysec] [--out bench-out/serve-profile]

Needs redis-server and redis-benchmark (Debian: redis-server, redis-tools) and perf (Debian:
linux-perf). Build the binary with `RUSTFLAGS="-C force-frame-pointers=yes"` and line tables
(`CARGO_PROFILE_RELEASE_DEBUG=line-tables-only`) for whole stacks. Prints one table and writes
it, with the raw shares, to OUT/serve-profile.json and OUT/serve-profile.md.
"""

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# Tried on each frame from the innermost outwards; the first frame that matches wins.
INNERMOST = [
    ("wait/wake", re.compile(r"futex|try_to_wake_up|__schedule|parking_lot.*(park|unpark)")),
    ("reply", re.compile(r"tcp_sendmsg|sock_write_iter|writev|protocol::Reply|encode_resp|"
                         r"server::flush")),
    ("request read", re.compile(r"tcp_recvmsg|sock_read_iter|sock_recvmsg")),
    ("decode", re.compile(r"protocol::Decoder")),
]
# Then the first of these that any frame of the stack matches.
ANYWHERE = [
    ("engine write", re.compile(r"halflife_engine::db::DB::write|halflife_engine::db::write::")),
    ("engine read", re.compile(r"halflife_engine::")),
    ("command", re.compile(r"halflife_server::")),
]
NAMES = (["background"] + [n for n, _ in INNERMOST] + [n for n, _ in ANYWHERE] + ["other"])


# Starting servers and waiting for their port: as the side-by-side benchmark does.
_spec = importlib.util.spec_from_file_location(
    "serve_bench", os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve-bench.py"))
serve_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve_bench)
free_port, wait_port = serve_bench.free_port, serve_bench.wait_port


def cpu_seconds(pid):
    """User + system CPU seconds of every thread of `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def benchmark(port, test, a, requests):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(requests), "-c", "50",
         "-P", str(a.pipeline), "-r", "10000", "-d", str(a.size), "--csv"],
        capture_output=True, text=True, check=True).stdout
    rows = [line.split(",") for line in out.splitlines()[1:] if line.strip()]
    return float(rows[-1][1].strip('"'))


def start(kind, a, data):
    port = free_port()
    if kind == "redis":
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", data,
               "--save", "", "--appendonly", "yes", "--appendfsync", a.fsync]
    else:
        cmd = [a.binary, "serve", "--dir", data, "--port", str(port), "--appendfsync", a.fsync]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, p, kind)
    return p, port


def classify(thread, frames):
    if thread.startswith("halflife-"):
        return "background"
    for f in frames:
        for name, pat in INNERMOST:
            if pat.search(f):
                return name
    for name, pat in ANYWHERE:
        if any(pat.search(f) for f in frames):
            return name
    return "other"


def shares(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,sym"],
                         capture_output=True, text=True, errors="replace").stdout
    counts = dict.fromkeys(NAMES, 0)
    for sample in out.split("\n\n"):
        lines = sample.strip("\n").splitlines()
        if len(lines) < 2:
            continue
        frames = [line.strip().split(None, 1)[1] for line in lines[1:]
                  if len(line.strip().split(None, 1)) == 2]
        counts[classify(lines[0].strip(), frames)] += 1
    total = sum(counts.values()) or 1
    return {k: v / total for k, v in counts.items()}


def measure(kind, test, a, work):
    data = tempfile.mkdtemp(dir=work)
    p, port = start(kind, a, data)
    try:
        # Fills the key space and warms up; redis-benchmark's LRANGE tests read the list
        # its LPUSH test fills.
        benchmark(port, "lpush" if test.startswith("lrange") else test, a, a.requests // 10)
        perf = None
        if kind == "halflife":
            perf = subprocess.Popen(
                ["perf", "record", "-q", "-F", "999", "--call-graph", "fp", "-p", str(p.pid),
                 "-o", os.path.join(a.out, f"{test}.perf.data")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        c0, t0 = cpu_seconds(p.pid), time.monotonic()
        rps = benchmark(port, test, a, a.requests)
        c1 = cpu_seconds(p.pid)
        if perf:
            perf.send_signal(2)
            perf.wait()
        return {"rps": rps, "cpu_us_per_op": (c1 - c0) * 1e6 / a.requests,
                "cores": (c1 - c0) / (time.monotonic() - t0)}
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(data, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tests", default="zadd,hset,sadd,lpop")
    ap.add_argument("--size", type=int, default=100, help="value size (-d)")
    ap.add_argument("--pipeline", type=int, default=16, help="-P")
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--fsync", default="everysec", choices=["everysec", "always", "no"])
    ap.add_argument("--out", default="bench-out/serve-profile")
    a = ap.parse_args()
    for tool in ("redis-server", "redis-benchmark", "perf"):
        if not shutil.which(tool):
            sys.exit(f"serve-profile.py: {tool} not found on PATH")
    if not os.access(a.binary, os.X_OK):
        sys.exit(f"serve-profile.py: {a.binary} is not an executable")
    os.makedirs(a.out, exist_ok=True)
    if not os.access(a.out, os.W_OK):
        sys.exit(f"serve-profile.py: cannot write to {a.out}")
    work = tempfile.mkdtemp(prefix="serve-profile-")
    rows = []
    try:
        for test in a.tests.split(","):
            h = measure("halflife", test, a, work)
            r = measure("redis", test, a, work)
            h["shares"] = shares(os.path.join(a.out, f"{test}.perf.data"))
            rows.append({"test": test, "halflife": h, "redis": r})
            print(f"{test}: done", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    head = (f"{a.size} B values, -P {a.pipeline}, 50 connections, {a.requests} requests, "
            f"appendfsync {a.fsync}; load {os.getloadavg()[0]:.2f}")
    lines = [head, "",
             "| test | req/s halflife / Redis | CPU us per request halflife / Redis | "
             + " | ".join(NAMES) + " |",
             "|---" * (3 + len(NAMES)) + "|"]
    for row in rows:
        h, r = row["halflife"], row["redis"]
        us = h["cpu_us_per_op"]
        cells = [f"{h['shares'][n] * us:.1f} ({h['shares'][n]:.0%})" for n in NAMES]
        lines.append(f"| {row['test'].upper()} | {h['rps'] / 1e3:.1f}K / {r['rps'] / 1e3:.1f}K "
                     f"({h['rps'] / r['rps']:.2f}x) | {us:.1f} / {r['cpu_us_per_op']:.1f} | "
                     + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Each category cell: CPU microseconds per request (share of the server's samples).")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "serve-profile.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.out, "serve-profile.json"), "w") as f:
        json.dump({"settings": vars(a), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
