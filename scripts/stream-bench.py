#!/usr/bin/env python3
"""Benchmarks streams on `halflife serve` against redis-server, in one run.

Part `rate`: for 100 B and 4 KiB entries, without pipelining and with -P 16, and for each
appendfsync given (both servers with the append-only file on, the same setting):
  - XADD of one field to one stream with `MAXLEN ~ 100000`, 50 connections (redis-benchmark);
  - XREADGROUP (COUNT 1) + XACK of each entry by 10 consumers of one group, over a stream
    of --entries entries appended before (the `stream-load` example: redis-benchmark cannot
    acknowledge the IDs a read returned).
Part `steady`: a producer appending --steady-bytes of 4 KiB entries at --steady-rate a second
while 10 consumers read and acknowledge them, each server limited to --budget-mib of memory:
halflife in a memory cgroup of that size (which counts its page cache too), Redis with
`maxmemory` of that size (noeviction, so it refuses appends past it). Reports the rates held,
the peak RSS, and for halflife the bytes it wrote to disk.

Needs redis-benchmark, redis-server, redis-cli (Debian: redis-tools, redis-server) and a
release build: cargo build --release -p halflife-cli && cargo build --release -p halflife-server --example stream-load.

    scripts/stream-bench.py [--parts rate,steady] [--requests N] [--out bench-out/stream]
"""

import argparse
import csv
import importlib.util
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The server start/stop helpers are serve-bench.py's.
_spec = importlib.util.spec_from_file_location("serve_bench", ROOT / "scripts/serve-bench.py")
sb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sb)


def redis_xadd(port, size, pipeline, requests):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests), "-P", str(pipeline),
         "--csv", "XADD", "bench:stream", "MAXLEN", "~", "100000", "*", "f", "v" * size],
        check=True, capture_output=True, text=True).stdout
    row = list(csv.DictReader(io.StringIO(out)))[0]
    return float(row["rps"])


def load(a, *args):
    out = subprocess.run([a.load_binary, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def start(name, a, d, fsync, extra_redis=(), preexec=None):
    if name == "halflife":
        port = sb.free_port()
        p = subprocess.Popen(
            [a.binary, "serve", "--dir", d, "--port", str(port), "--appendfsync", fsync],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
        sb.wait_port(port, p, "halflife serve")
        return p, port
    port = sb.free_port()
    p = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
         "--appendonly", "yes", "--appendfsync", fsync, "--daemonize", "no", *extra_redis],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sb.wait_port(port, p, "redis-server")
    return p, port


def part_rate(a, results):
    print(f"\n### Streams: XADD (MAXLEN ~ 100000, 50 connections, {a.requests} requests) and "
          f"XREADGROUP + XACK (10 consumers, {a.entries} entries); halflife / Redis (AOF) entries/s\n")
    print("| appendfsync | entry | pipeline | test | halflife | Redis | halflife / Redis |")
    print("|---|---|---|---|---|---|---|")
    for fsync in a.fsyncs.split(","):
        for size in (100, 4096):
            for pipeline in (1, 16):
                got = {}
                for name in ("halflife", "redis"):
                    with tempfile.TemporaryDirectory(dir=a.out) as d:
                        p, port = start(name, a, d, fsync)
                        try:
                            xadd = redis_xadd(port, size, pipeline, a.requests)
                            load(a, "produce", "--port", str(port), "--key", "q", "--size", str(size),
                                 "--rate", "1000000", "--seconds", "600",
                                 "--bytes", str(a.entries * size))
                            r = load(a, "consume", "--port", str(port), "--key", "q",
                                     "--consumers", "10", "--pipeline", str(pipeline),
                                     "--entries", str(a.entries))
                            assert r["acked"] >= a.entries, r
                            got[name] = {"XADD": xadd, "XREADGROUP + XACK": r["rps"]}
                        finally:
                            sb.stop(p, port)
                for test in got["halflife"]:
                    h, r = got["halflife"][test], got["redis"][test]
                    results["rate"].append(dict(appendfsync=fsync, entry=size, pipeline=pipeline,
                                                test=test, halflife=h, redis=r))
                    print(f"| {fsync} | {size} B | {pipeline} | {test} | {sb.fmt_rate(h)} | "
                          f"{sb.fmt_rate(r)} | {h / r:.2f}x |", flush=True)


class Cgroup:
    """A cgroup-v1 memory cgroup under this process's own (the limit counts page cache)."""

    def __init__(self, name, limit):
        own = next(l.split(":", 2)[2] for l in open("/proc/self/cgroup").read().splitlines()
                   if l.split(":")[1] == "memory")
        self.dir = pathlib.Path("/sys/fs/cgroup/memory") / own.lstrip("/") / name
        self.dir.mkdir(exist_ok=True)
        (self.dir / "memory.limit_in_bytes").write_text(str(limit))

    def join(self):
        (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def peak(self):
        return int((self.dir / "memory.max_usage_in_bytes").read_text())

    def remove(self):
        for _ in range(50):
            try:
                self.dir.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def written(pid):
    for line in open(f"/proc/{pid}/io"):
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def part_steady(a, results):
    budget = a.budget_mib << 20
    print(f"\n### A stream of {a.steady_bytes / 2**30:.1f} GiB of 4 KiB entries at {a.steady_rate}/s, "
          f"10 consumers reading and acknowledging, memory budget {a.budget_mib} MiB\n")
    print("| server | appended | acknowledged | appended/s | peak RSS | disk written | ended |")
    print("|---|---|---|---|---|---|---|")
    for name in ("halflife", "redis"):
        cg = Cgroup("stream-bench", budget) if name == "halflife" else None
        with tempfile.TemporaryDirectory(dir=a.out) as d:
            extra = ("--maxmemory", str(budget), "--maxmemory-policy", "noeviction")
            p, port = start(name, a, d, "everysec", extra, cg.join if cg else None)
            peak, io0, stop = [0], written(p.pid), threading.Event()

            def sample():
                while not stop.wait(1):
                    peak[0] = max(peak[0], rss(p.pid))
            t = threading.Thread(target=sample)
            t.start()
            began = time.time()
            try:
                out = subprocess.run(
                    [a.load_binary, "steady", "--port", str(port), "--size", "4096",
                     "--rate", str(a.steady_rate), "--bytes", str(a.steady_bytes),
                     "--seconds", str(10 * a.steady_bytes // (4096 * a.steady_rate) + 60),
                     "--consumers", "10"],
                    check=True, capture_output=True, text=True).stdout
                io1 = written(p.pid)
            finally:
                stop.set()
                t.join()
                sb.stop(p, port)
                if cg:
                    cg_peak = cg.peak()
                    cg.remove()
            secs = time.time() - began
            last = json.loads(out.strip().splitlines()[-1])
            row = dict(server=name, added=last["added"], acked=last["acked"],
                       seconds=secs, rate=last["added"] / max(last["t"], 1e-9),
                       peak_rss=peak[0], disk_written=io1 - io0, error=last.get("error"))
            if cg:
                row["cgroup_peak"] = cg_peak
            results["steady"].append(row)
            ended = f"`{row['error'][:40]}`" if row["error"] else "all appended"
            print(f"| {name} | {row['added'] * 4096 / 2**30:.2f} GiB | {row['acked'] * 4096 / 2**30:.2f} GiB | "
                  f"{row['rate']:.0f} | {peak[0] / 2**20:.0f} MiB | {row['disk_written'] / 2**30:.2f} GiB | "
                  f"{ended} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=str(ROOT / "target/release/halflife"))
    ap.add_argument("--load-binary", default=str(ROOT / "target/release/examples/stream-load"))
    ap.add_argument("--parts", default="rate,steady")
    ap.add_argument("--fsyncs", default="everysec", help="appendfsync settings of part rate")
    ap.add_argument("--requests", type=int, default=200_000, help="XADDs per cell")
    ap.add_argument("--entries", type=int, default=100_000, help="entries read and acknowledged per cell")
    ap.add_argument("--steady-bytes", type=float, default=10e9)
    ap.add_argument("--steady-rate", type=int, default=5000, help="entries appended a second")
    ap.add_argument("--budget-mib", type=int, default=2500)
    ap.add_argument("--out", default="bench-out/stream")
    a = ap.parse_args()
    a.steady_bytes = int(a.steady_bytes)
    for tool in ("redis-benchmark", "redis-server", "redis-cli"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install redis-tools redis-server")
    for b in (a.binary, a.load_binary):
        if not os.path.exists(b):
            sys.exit(f"{b} not found: cargo build --release -p halflife-cli && cargo build --release -p halflife-server --example stream-load")
    os.makedirs(a.out, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    results = {"commit": commit, "loadavg_start": os.getloadavg(), "rate": [], "steady": []}
    print(f"commit {commit}, load average at start {results['loadavg_start'][0]:.2f}", file=sys.stderr)
    parts = a.parts.split(",")
    if "rate" in parts:
        part_rate(a, results)
    if "steady" in parts:
        part_steady(a, results)
    results["loadavg_end"] = os.getloadavg()
    print(f"\nload average at end {results['loadavg_end'][0]:.2f}", file=sys.stderr)
    with open(os.path.join(a.out, "stream-bench.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
