#!/usr/bin/env python3
"""Benchmarks `halflife serve` across nodes, in one run: cluster overhead, a replica's full
sync and replica lag.

Part `cluster`: redis-benchmark SET and GET (4 KiB values, 50 connections) against one node,
then with --cluster against three nodes that split the 16384 slots; throughput per node and
the three nodes' total against the single node. On a machine with fewer cores than nodes the
nodes share them: --cpus pins every server to the same cores in both runs (and
redis-benchmark to the others), so the total is what matters there.

Part `fullsync`: a primary loaded once with --sync-mib of 4 KiB values (redis-benchmark SETs
over distinct keys), then per round a fresh replica's full sync (checkpoint, files over
loopback, install, open) timed from REPLICAOF to `master_link_status:up` at the primary's
offset, and `dd if=<file> of=/dev/null bs=1M` over the files it carried, as the primary holds
them; the ratio of the two rates is taken within the round. With --cold the primary's files
are dropped from the page cache (fsync, POSIX_FADV_DONTNEED) before each sync and each dd;
without, both read them from the page cache. With --baseline a second binary's syncs alternate
with --binary's (A B, B A, ...), so that both see the same machine.

Part `lag`: writes at --lag-rate SETs/s (pipelines of 100 every 1/100 s from one client) on
the primary while a probe client writes a key every 10 ms and waits until the replica
returns it: the time from the primary's reply to the replica's answer, percentiles.

Needs redis-benchmark (Debian: redis-tools), redis-py and a build of halflife (dev or
release). Prints Markdown tables; data under --out.

    scripts/nodes-bench.py [--parts cluster,fullsync,lag] [--out bench-out/nodes]
"""

import argparse
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

import redis

ROOT = pathlib.Path(__file__).resolve().parents[1]
SLOTS = 16384


class Node:
    """One `halflife serve` process on a free port."""

    def __init__(self, binary, data, cpus, *extra):
        cmd = [binary, "serve", "--dir", str(data), "--port", "0", *extra]
        if cpus:
            cmd = ["taskset", "-c", cpus, *cmd]
        # Its log beside its data directory (the full-sync part reads the phases' times).
        self.log = data.with_name(data.name + ".log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"tcp 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"server did not start: {line!r}")
        self.port = int(m.group(1))
        self.data = data

    def client(self):
        return redis.Redis(port=self.port)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)


def info(c, section):
    """INFO's fields as strings (redis-py's parsed dict, values stringified)."""
    return {k: str(v) for k, v in c.info(section).items()}


def benchmark(port, tests, requests, cpus, cluster=False):
    """redis-benchmark's requests per second for each test (CSV output)."""
    cmd = ["redis-benchmark", "-p", str(port), "-t", tests, "-n", str(requests), "-c", "50",
           "-d", "4096", "-r", "1000000", "--csv", "-q"]
    if cluster:
        cmd.append("--cluster")
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rates = {}
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) >= 2 and cells[0] != "test":
            rates[cells[0]] = float(cells[1])
    return rates


def part_cluster(a, out):
    single = Node(a.binary, out / "single", a.cpus)
    try:
        one = benchmark(single.port, "set,get", a.requests, a.client_cpus)
    finally:
        single.stop()
    nodes = [Node(a.binary, out / f"node{i}", a.cpus, "--cluster-enabled") for i in range(3)]
    try:
        ids = [str(i + 1) * 40 for i in range(3)]
        per = SLOTS // 3
        ranges = [(0, per - 1), (per, 2 * per - 1), (2 * per, SLOTS - 1)]
        topo = "\n".join(f"{ids[i]} 127.0.0.1 {n.port} master - {lo}-{hi}"
                         for i, (n, (lo, hi)) in enumerate(zip(nodes, ranges)))
        for i, n in enumerate(nodes):
            c = n.client()
            c.execute_command("CLUSTERX", "SETNODEID", ids[i])
            c.execute_command("CLUSTERX", "SETNODES", topo, 1)
        three = benchmark(nodes[0].port, "set,get", a.requests, a.client_cpus, cluster=True)
    finally:
        for n in nodes:
            n.stop()
    print(f"\n### Cluster: one node against three (servers on cpus {a.cpus or 'all'}, "
          f"redis-benchmark on {a.client_cpus or 'all'}; 50 connections, 4 KiB values)\n")
    print("| test | one node, req/s | three nodes, total req/s | per node | total / one node |")
    print("| --- | --- | --- | --- | --- |")
    for t in one:
        if t in three:
            print(f"| {t} | {one[t]:,.0f} | {three[t]:,.0f} | {three[t] / 3:,.0f} | {three[t] / one[t]:.2f}x |")


def data_files(data):
    return sorted(p for p in data.rglob("*") if p.is_file())


def drop_cached(files):
    """Evicts `files` from the page cache (fsync, then POSIX_FADV_DONTNEED): what an
    unprivileged run can drop without `echo 3 > /proc/sys/vm/drop_caches`, and only
    these files' pages, not the machine's."""
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cached_fraction(files):
    """Share of `files`' pages in the page cache (fincore), or None without fincore."""
    if shutil.which("fincore") is None:
        return None
    r = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "-o", "RES,SIZE", *map(str, files)],
                       capture_output=True, text=True)
    res = size = 0
    for line in r.stdout.splitlines():
        a, b = line.split()
        res, size = res + int(a), size + int(b)
    return res / size if size else None


def dd_read_mib_s(files):
    """`dd if=<file> of=/dev/null bs=1M` over every file, one after another: bytes read
    over the seconds the reads took."""
    total, secs = 0, 0.0
    for f in files:
        t = time.perf_counter()
        r = subprocess.run(["dd", f"if={f}", "of=/dev/null", "bs=1M"], capture_output=True, text=True)
        secs += time.perf_counter() - t
        if r.returncode != 0:
            sys.exit(f"dd on {f}: {r.stderr.strip()}")
        total += int(re.match(r"(\d+) bytes", r.stderr.splitlines()[-1]).group(1))
    return total / secs / 2**20


def dd_copy_mib_s(files, dest):
    """What the disks do for the same copy without halflife: `dd` reads `files` (as in
    `dd_read_mib_s`) while another `dd` writes as many bytes into `dest` with
    `conv=fdatasync`; bytes over the seconds until both are done. On one disk the reads and
    the writes share it; with `dest` on another device this is about the read alone."""
    total = sum(f.stat().st_size for f in files)
    out = dest / "dd-copy"
    dest.mkdir(parents=True, exist_ok=True)
    writer = subprocess.Popen(["dd", "if=/dev/zero", f"of={out}", "bs=1M", f"count={max(1, total >> 20)}",
                               "conv=fdatasync"], stderr=subprocess.DEVNULL)
    t = time.perf_counter()
    for f in files:
        subprocess.run(["dd", f"if={f}", "of=/dev/null", "bs=1M"], capture_output=True, check=True)
    writer.wait()
    secs = time.perf_counter() - t
    out.unlink()
    return total / secs / 2**20


def wait_synced(replica, primary, deadline_s=3600):
    pc, rc = primary.client(), replica.client()
    end = time.time() + deadline_s
    while time.time() < end:
        r = info(rc, "replication")
        if r.get("master_link_status") == "up":
            want = int(info(pc, "replication")["master_repl_offset"])
            if int(r.get("master_repl_offset", -1)) >= want:
                return
        time.sleep(0.01)
    sys.exit("the replica never caught up")


def cpu_seconds(node):
    """User and system CPU seconds a node's process has used (Linux /proc)."""
    fields = pathlib.Path(f"/proc/{node.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def phases(primary, replica):
    """The full sync's phases as the two servers log them: `checkpoint / transfer /
    install` seconds, or `?` for a binary that does not log them."""
    def grab(log, pattern):
        m = re.search(pattern, log.read_text(errors="replace"))
        return float(m.group(1)) if m else None
    got = [grab(primary.log, r"checkpoint in ([\d.]+) s"), grab(replica.log, r"received in ([\d.]+) s"),
           grab(replica.log, r"installed in ([\d.]+) s")]
    return " / ".join("?" if g is None else f"{g:.2f}" for g in got)


def sync_once(binary, primary_dir, replica_dir, cpus):
    """A fresh replica's full sync from a primary serving `primary_dir`, both run with
    `binary`: seconds from REPLICAOF until the replica is up at the primary's offset, the
    bytes the replica then holds, the names of its files, the CPU seconds both processes
    spent meanwhile (what the load of other processes changes least) and the phases'
    seconds as the servers log them."""
    primary = Node(binary, primary_dir, cpus)
    replica = None
    try:
        replica = Node(binary, replica_dir, cpus)
        cpu = cpu_seconds(primary) + cpu_seconds(replica)
        t = time.perf_counter()
        replica.client().execute_command("REPLICAOF", "127.0.0.1", primary.port)
        wait_synced(replica, primary)
        secs = time.perf_counter() - t
        cpu = cpu_seconds(primary) + cpu_seconds(replica) - cpu
        assert replica.client().get("last") == b"1"
        got = data_files(replica_dir)
        held = sum(p.stat().st_size for p in got)
    finally:
        for node in (replica, primary):
            if node:
                node.stop()
    shutil.rmtree(replica_dir)
    return secs, held, {p.name for p in got}, cpu, phases(primary, replica)


def part_fullsync(a, out):
    """Loads a primary once, then per round, for each binary (alternated: A B, B A, ...):
    the primary's files dropped from the page cache (--cold) or read into it, a full sync
    to a fresh replica, and `dd` over the same files in the same state; the ratio of the
    two rates is taken within the round."""
    pdir = out / "primary"
    # The replica's directory: another device's if given (this machine may have one disk,
    # which a replica on another machine would not share with its primary).
    rdir = pathlib.Path(a.replica_dir) if a.replica_dir else out / "replica"
    if rdir.exists():
        sys.exit(f"--replica-dir {rdir} exists: give a path that does not")
    primary = Node(a.binary, pdir, a.cpus)
    try:
        n = a.sync_mib * 256
        subprocess.run(["redis-benchmark", "-p", str(primary.port), "-t", "set", "-n", str(n), "-c", "50",
                        "-d", "4096", "-r", str(n), "-q"], check=True, capture_output=True)
        primary.client().execute_command("SET", "last", "1")
    finally:
        primary.stop()
    if a.cold and not hasattr(os, "posix_fadvise"):
        sys.exit("--cold needs os.posix_fadvise (Linux)")
    binaries = [("A", a.binary)] + ([("B", a.baseline)] if a.baseline else [])
    print(f"\n### Full sync of {n:,} SETs of 4 KiB: REPLICAOF until the replica is up at the primary's offset, "
          f"against `dd if=<file> of=/dev/null bs=1M` over the primary's files, "
          f"{'dropped from the page cache (fsync + POSIX_FADV_DONTNEED) before each' if a.cold else 'in the page cache'}\n")
    for label, b in binaries:
        print(f"- {label}: {b}")
    print(f"- the primary's data in {pdir}, the replica's in {rdir} "
          f"({'the same' if os.stat(pdir).st_dev == os.stat(rdir.parent).st_dev else 'another'} file system)")
    print("\n| round | binary | primary's files cached before | replica's data | seconds | checkpoint / transfer / install s "
          "| CPU seconds (both) | sync rate | dd read | sync / dd read | dd read + write | sync / dd read + write | load average |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ratios = {label: [] for label, _ in binaries}
    cpus = {label: [] for label, _ in binaries}
    copies = {label: [] for label, _ in binaries}
    for r in range(a.sync_rounds):
        order = binaries if r % 2 == 0 else binaries[::-1]
        for label, b in order:
            files = data_files(pdir)
            if a.cold:
                drop_cached(files)
            else:
                dd_read_mib_s(files)
            cached = cached_fraction(files)
            secs, held, names, cpu, phase = sync_once(b, pdir, rdir, a.cpus)
            # The files the transfer carried, as the primary holds them (the checkpoint's
            # links; its own manifest and empty WAL aside).
            files = [p for p in data_files(pdir) if p.name in names]
            if a.cold:
                drop_cached(files)
            dd = dd_read_mib_s(files)
            if a.cold:
                drop_cached(files)
            copy = dd_copy_mib_s(files, rdir)
            rate = held / secs / 2**20
            ratios[label].append(rate / dd)
            copies[label].append(rate / copy)
            cpus[label].append(cpu)
            shown = "?" if cached is None else f"{cached:.0%}"
            print(f"| {r + 1} | {label} | {shown} | {held / 2**30:.2f} GiB | {secs:.2f} s | {phase} | {cpu:.2f} s | {rate:,.0f} MiB/s "
                  f"| {dd:,.0f} MiB/s | {rate / dd:.2f} | {copy:,.0f} MiB/s | {rate / copy:.2f} | {os.getloadavg()[0]:.1f} |",
                  flush=True)
    shutil.rmtree(rdir, ignore_errors=True)
    print()
    for label, rs in ratios.items():
        print(f"- {label}: sync / dd read median {statistics.median(rs):.2f}, sync / dd read + write median "
              f"{statistics.median(copies[label]):.2f}, CPU seconds median "
              f"{statistics.median(cpus[label]):.2f}, over {len(rs)} rounds")


def part_lag(a, out):
    primary = Node(a.binary, out / "lag-primary", a.cpus)
    replica = Node(a.binary, out / "lag-replica", a.cpus, "--replicaof", f"127.0.0.1:{primary.port}")
    stop = threading.Event()
    written = [0]

    def load():
        c = primary.client()
        value = b"v" * 128
        tick = time.perf_counter()
        i = 0
        while not stop.is_set():
            p = c.pipeline(transaction=False)
            for _ in range(a.lag_rate // 100):
                p.set(f"load:{i % 100000}", value)
                i += 1
            p.execute()
            written[0] = i
            tick += 0.01
            time.sleep(max(0.0, tick - time.perf_counter()))

    try:
        wait_synced(replica, primary)
        th = threading.Thread(target=load, daemon=True)
        th.start()
        t0 = time.perf_counter()
        pc, rc = primary.client(), replica.client()
        lags = []
        k = 0
        while time.perf_counter() - t0 < a.lag_seconds:
            k += 1
            pc.set("probe", k)
            t = time.perf_counter()
            while rc.get("probe") != str(k).encode():
                pass
            lags.append((time.perf_counter() - t) * 1000)
            time.sleep(0.01)
        elapsed = time.perf_counter() - t0
        stop.set()
        th.join()
    finally:
        replica.stop()
        primary.stop()
    lags.sort()
    q = lambda p: lags[min(len(lags) - 1, int(p * len(lags)))]
    print(f"\n### Replica lag under {written[0] / elapsed:,.0f} SETs/s of 128 B values ({len(lags)} probes)\n")
    print("| p50 | p90 | p99 | max | mean |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| {q(0.5):.2f} ms | {q(0.9):.2f} ms | {q(0.99):.2f} ms | {lags[-1]:.2f} ms | {statistics.mean(lags):.2f} ms |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=str(ROOT / "target" / "release" / "halflife"))
    ap.add_argument("--parts", default="cluster,fullsync,lag")
    ap.add_argument("--requests", type=int, default=200000, help="requests per redis-benchmark test (cluster)")
    ap.add_argument("--cpus", default="", help="cores the servers run on (taskset list), e.g. 1")
    ap.add_argument("--client-cpus", default="", help="cores redis-benchmark runs on, e.g. 0")
    ap.add_argument("--sync-mib", type=int, default=4096, help="MiB of 4 KiB values on the primary (fullsync)")
    ap.add_argument("--sync-rounds", type=int, default=3, help="full syncs per binary (fullsync)")
    ap.add_argument("--baseline", default="", help="a second halflife binary whose full syncs alternate with "
                    "--binary's (fullsync)")
    ap.add_argument("--cold", action="store_true", help="drop the primary's files from the page cache before "
                    "each sync and each dd (fullsync)")
    ap.add_argument("--replica-dir", default="", help="the replica's data directory in the full sync (must not "
                    "exist; default <out>/replica), e.g. on another device than the primary's")
    ap.add_argument("--lag-rate", type=int, default=10000, help="SETs per second on the primary (lag)")
    ap.add_argument("--lag-seconds", type=float, default=30)
    ap.add_argument("--out", default=str(ROOT / "bench-out" / "nodes"))
    a = ap.parse_args()
    if not os.access(a.binary, os.X_OK):
        sys.exit(f"no halflife binary at {a.binary}: cargo build --release -p halflife-cli, or --binary")
    if shutil.which("redis-benchmark") is None:
        sys.exit("redis-benchmark not found (Debian: apt-get install redis-tools)")
    if a.lag_rate < 100 or a.lag_rate % 100:
        sys.exit("--lag-rate must be a positive multiple of 100")
    out = pathlib.Path(a.out)
    if out.exists() and any(out.iterdir()):
        sys.exit(f"{out} is not empty: give a new --out or remove it")
    out.mkdir(parents=True, exist_ok=True)
    parts = {"cluster": part_cluster, "fullsync": part_fullsync, "lag": part_lag}
    for p in a.parts.split(","):
        if p not in parts:
            sys.exit(f"unknown part {p!r}: choose from {', '.join(parts)}")
    print(f"halflife {a.binary}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    for p in a.parts.split(","):
        parts[p](a, out)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
