#!/usr/bin/env python3
"""Benchmarks `halflife serve` against redis-server with redis-benchmark, in one run.

Part 1: GET and SET (or the redis-benchmark tests given by --tests), 50 connections, 100 B
and 4 KiB values, without pipelining and with -P 16, for halflife and Redis (append-only
file on) at the same appendfsync setting
(everysec, and always for the durable comparison); ratios halflife / Redis.
Part 2: a write-intensive workload through the server (SETs of 4 KiB values over a key
space overwritten several times) with each GC policy, write and space amplification from
INFO halflife.
Part 3: Lua scripts, EVALSHA of a one-INCR script and of a ten-command script on a random
key, 50 connections, without pipelining and with -P 16, halflife against Redis (AOF on,
appendfsync everysec).
Part 4: what the maxmemory check costs a write: SET and HSET (100 B, 50 connections,
without pipelining and with -P 16, appendfsync everysec) on halflife with maxmemory set far
above the data (64 GB) against maxmemory 0, rounds alternating the two; ratios set / unset.

Needs redis-benchmark and redis-server (Debian: redis-tools, redis-server) and a release
build of halflife (cargo build --release -p halflife-cli). Prints Markdown tables.

    scripts/serve-bench.py [--requests N] [--wi-requests N] [--out bench-out/serve]
"""

import argparse
import csv
import io
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what):
    for _ in range(300):
        if proc.poll() is not None:
            sys.exit(f"{what} exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not listen on {port}")


def start_halflife(binary, data, fsync, policy="blobdb", extra=()):
    port = free_port()
    p = subprocess.Popen(
        [binary, "serve", "--dir", data, "--port", str(port), "--appendfsync", fsync,
         "--policy", policy, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_port(port, p, "halflife serve")
    return p, port


def start_redis(data, fsync):
    port = free_port()
    p = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", data,
         "--save", "", "--appendonly", "yes", "--appendfsync", fsync, "--daemonize", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_port(port, p, "redis-server")
    return p, port


def stop(p, port):
    subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def bench(port, tests, size, pipeline, requests, keyspace):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests), "-d", str(size),
         "-P", str(pipeline), "-r", str(keyspace), "-t", tests, "--csv"],
        check=True, capture_output=True, text=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    return {r["test"]: float(r["rps"]) for r in rows}, {r["test"]: float(r["p50_latency_ms"]) for r in rows}


def info(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "halflife"],
                         check=True, capture_output=True, text=True).stdout
    return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)


def fmt_rate(r):
    return f"{r / 1000:.1f}K"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=str(ROOT / "target/release/halflife"))
    ap.add_argument("--requests", type=int, default=100_000, help="requests per test (part 1)")
    ap.add_argument("--keyspace", type=int, default=10_000, help="random keys (-r) in part 1")
    ap.add_argument("--tests", default="set,get",
                    help="redis-benchmark tests of part 1 (-t), e.g. set,get,lpush,lpop,hset,sadd,zadd,lrange_100")
    ap.add_argument("--wi-requests", type=int, default=60_000, help="SETs per policy (part 2)")
    ap.add_argument("--wi-keys", type=int, default=6_000, help="key space of part 2")
    ap.add_argument("--fsyncs", default="everysec,always")
    ap.add_argument("--policies", default="inline,blobdb,titan,terark,lifetime,lifetime-nomodel")
    ap.add_argument("--out", default="bench-out/serve")
    ap.add_argument("--parts", default="1,2", help="which tables to measure (1, 2, 3)")
    ap.add_argument("--script-requests", type=int, default=100_000, help="EVALSHAs per cell (part 3)")
    ap.add_argument("--mm-rounds", type=int, default=3, help="rounds of each maxmemory setting (part 4)")
    a = ap.parse_args()
    for tool in ("redis-benchmark", "redis-server", "redis-cli"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install redis-tools redis-server")
    if not os.path.exists(a.binary):
        sys.exit(f"{a.binary} not found: cargo build --release -p halflife-cli")
    os.makedirs(a.out, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()
    results = {"commit": commit, "loadavg_start": load, "part1": [], "part2": [], "part3": [],
               "part4": []}
    print(f"commit {commit}, load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", file=sys.stderr)

    parts = a.parts.split(",")
    if "1" in parts:
        part1(a, results)
    if "2" in parts:
        part2(a, results)
    if "3" in parts:
        part3(a, results)
    if "4" in parts:
        part4(a, results)
    results["loadavg_end"] = os.getloadavg()
    print(f"\nload average at end {results['loadavg_end'][0]:.2f}", file=sys.stderr)
    with open(os.path.join(a.out, "serve-bench.json"), "w") as f:
        json.dump(results, f, indent=1)


# The lifetime policies' first GC waits for an initial TTL in writes; the paper's 2^22 is
# for its 200 GB load (46M records of 256 B + 4 KiB), scaled here to the key space as
# `halflife bench` scales it to its records.
PAPER_TTL, PAPER_RECORDS = 1 << 22, 200_000_000_000 // (256 + 4096)


def part1(a, results):
    print(f"\n### {a.tests}, 50 connections, {a.requests} requests per test, {a.keyspace} random keys\n")
    print("| appendfsync | value | pipeline | test | halflife ops/s | Redis (AOF) ops/s | halflife / Redis | halflife p50 ms | Redis p50 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for fsync in a.fsyncs.split(","):
        for size in (100, 4096):
            for pipeline in (1, 16):
                got = {}
                for name in ("halflife", "redis"):
                    with tempfile.TemporaryDirectory(dir=a.out) as d:
                        p, port = (start_halflife(a.binary, d, fsync) if name == "halflife"
                                   else start_redis(d, fsync))
                        try:
                            got[name] = bench(port, a.tests, size, pipeline, a.requests, a.keyspace)
                        finally:
                            stop(p, port)
                for test in got["halflife"][0]:
                    h, r = got["halflife"][0][test], got["redis"][0][test]
                    hp, rp = got["halflife"][1][test], got["redis"][1][test]
                    results["part1"].append(dict(appendfsync=fsync, value=size, pipeline=pipeline, test=test,
                                                 halflife=h, redis=r, halflife_p50=hp, redis_p50=rp))
                    print(f"| {fsync} | {size} B | {pipeline} | {test} | {fmt_rate(h)} | {fmt_rate(r)} | "
                          f"{h / r:.2f}x | {hp:.3f} | {rp:.3f} |", flush=True)



def part2(a, results):
    ttl = max(1024, PAPER_TTL * a.wi_keys // PAPER_RECORDS)
    print(f"\n### Write-intensive through the server: {a.wi_requests} SETs of 4 KiB values over "
          f"{a.wi_keys} uniformly random keys, -P 16, appendfsync everysec, 4 MiB memtable, 8 MiB value files, "
          f"lifetime initial TTL {ttl} writes\n")
    print("| policy | SET ops/s | write amp. | WA by cause | value files | GC jobs | disk bytes / live |")
    print("|---|---|---|---|---|---|---|")
    for policy in a.policies.split(","):
        with tempfile.TemporaryDirectory(dir=a.out) as d:
            p, port = start_halflife(a.binary, d, "everysec", policy,
                                     ["--memtable-mb", "4", "--blob-file-mb", "8",
                                      "--lifetime-initial-ttl", str(ttl)])
            try:
                rps, _ = bench(port, "set", 4096, 16, a.wi_requests, a.wi_keys)
                time.sleep(2)  # let flushes, compactions and GC jobs started by the run go on
                i = info(port)
            finally:
                stop(p, port)
        live = a.wi_keys * (4096 + 16)
        causes = ", ".join(f"{k[len('write_amplification_'):]} {float(v):.2f}" for k, v in i.items()
                           if k.startswith("write_amplification_"))
        space = int(i["disk_bytes"]) / live
        results["part2"].append(dict(policy=policy, set_ops=rps["SET"], info=i))
        print(f"| {policy} | {fmt_rate(rps['SET'])} | {float(i['write_amplification']):.2f} | {causes} | "
              f"{i['value_files']} | {i['gc_jobs']} | {space:.2f} |", flush=True)


# Part 3's scripts: one INCR, and ten commands on the key and two keys next to it.
SCRIPTS = {
    "EVALSHA 1 INCR": "return redis.call('incr', KEYS[1])",
    "EVALSHA 10 commands": """local k = KEYS[1]
redis.call('incr', k)
redis.call('get', k)
redis.call('set', k .. ':s', ARGV[1])
redis.call('get', k .. ':s')
redis.call('hset', k .. ':h', 'f', ARGV[1])
redis.call('hget', k .. ':h', 'f')
redis.call('expire', k, 3600)
redis.call('ttl', k)
redis.call('exists', k .. ':s')
return redis.call('incr', k)""",
}


def bench_evalsha(port, sha, pipeline, requests, keyspace):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests), "-P", str(pipeline),
         "-r", str(keyspace), "--csv", "evalsha", sha, "1", "key:__rand_int__", "value"],
        check=True, capture_output=True, text=True).stdout
    row = list(csv.DictReader(io.StringIO(out)))[0]
    return float(row["rps"]), float(row["p50_latency_ms"])


def part3(a, results):
    print(f"\n### Lua scripts: EVALSHA, 50 connections, {a.script_requests} requests per cell, "
          f"{a.keyspace} random keys, appendfsync everysec\n")
    print("| script | pipeline | halflife ops/s | Redis (AOF) ops/s | halflife / Redis | halflife p50 ms | Redis p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for name, body in SCRIPTS.items():
        for pipeline in (1, 16):
            got = {}
            for server in ("halflife", "redis"):
                with tempfile.TemporaryDirectory(dir=a.out) as d:
                    p, port = (start_halflife(a.binary, d, "everysec") if server == "halflife"
                               else start_redis(d, "everysec"))
                    try:
                        sha = subprocess.run(["redis-cli", "-p", str(port), "script", "load", body],
                                             check=True, capture_output=True, text=True).stdout.strip()
                        got[server] = bench_evalsha(port, sha, pipeline, a.script_requests, a.keyspace)
                    finally:
                        stop(p, port)
            (h, hp), (r, rp) = got["halflife"], got["redis"]
            results["part3"].append(dict(script=name, pipeline=pipeline, halflife=h, redis=r,
                                         halflife_p50=hp, redis_p50=rp))
            print(f"| {name} | {pipeline} | {fmt_rate(h)} | {fmt_rate(r)} | {h / r:.2f}x | {hp:.3f} | {rp:.3f} |",
                  flush=True)


def part4(a, results):
    print(f"\n### maxmemory's check: SET and HSET of 100 B, 50 connections, {a.requests} requests per "
          f"cell, {a.keyspace} random keys, appendfsync everysec, {a.mm_rounds} rounds of each setting\n")
    print("| test | pipeline | maxmemory 0 ops/s (rounds) | maxmemory 64gb ops/s (rounds) | set / unset (median) |")
    print("|---|---|---|---|---|")
    rates = {}
    for _ in range(a.mm_rounds):
        for mm in ("0", "64gb"):
            with tempfile.TemporaryDirectory(dir=a.out) as d:
                p, port = start_halflife(a.binary, d, "everysec")
                try:
                    subprocess.run(["redis-cli", "-p", str(port), "config", "set", "maxmemory", mm],
                                   check=True, capture_output=True)
                    for pipeline in (1, 16):
                        got, _ = bench(port, "set,hset", 100, pipeline, a.requests, a.keyspace)
                        for test, r in got.items():
                            rates.setdefault((test, pipeline, mm), []).append(r)
                finally:
                    stop(p, port)
    for (test, pipeline, mm), unset in sorted(rates.items()):
        if mm != "0":
            continue
        bound = rates[(test, pipeline, "64gb")]
        med = lambda v: sorted(v)[len(v) // 2]
        results["part4"].append(dict(test=test, pipeline=pipeline, unset=unset, set=bound))
        print(f"| {test} | {pipeline} | {', '.join(fmt_rate(r) for r in unset)} | "
              f"{', '.join(fmt_rate(r) for r in bound)} | {med(bound) / med(unset):.2f}x |", flush=True)


if __name__ == "__main__":
    main()
