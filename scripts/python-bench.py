#!/usr/bin/env python3
"""Python throughput of the halflife package against rocksdict (RocksDB) on one op file.

Both engines are driven the same way from Python, one call per op, on the same op file:
load the records, then replay the run phase (updates and reads). The op file comes from
`halflife compare` (its workload.ops), or is made here by running it on a tiny engine list.
Options match where the two engines share them: memtable, block cache, WAL without sync,
no compression (halflife never compresses), key-value separation at 512 B for halflife's
blobdb policy and RocksDB's BlobDB (`--blob`).

    pip install ./bindings/python rocksdict
    scripts/python-bench.py [--ops FILE] [--records N] [--op-count N] [--policies blobdb,...]
"""

import argparse
import importlib.util
import itertools
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

# The op-file reader and key rule of the RocksDB peer driver (the workload crate's format).
spec = importlib.util.spec_from_file_location("driver", ROOT / "peers/rocksdb/driver.py")
driver = importlib.util.module_from_spec(spec)
spec.loader.exec_module(driver)


def make_ops(binary, work, workload, records, op_count):
    """Writes an op file of `workload` with `halflife compare` (which also runs it once on
    halflife-inline: compare has no generate-only mode)."""
    subprocess.run(
        [binary, "compare", "--engines", "halflife-inline", "--preset", "small", "--workload", workload,
         "--records", str(records),
         "--op-count", str(op_count), "--work-dir", str(work), "--memory-limit-mb", "0",
         "--report", str(work / "compare.json")],
        check=True, stdout=subprocess.DEVNULL)
    return work / "workload.ops"


def reads(name, scan, scan_back, get_many, record_count, key_size, n, length=50, batch=64):
    """After the run: `n` range scans of `length` entries from random keys, forward and
    backward, and `n` multi-gets of `batch` random keys; rates per second."""
    rng = random.Random(7)
    starts = [driver.make_key(rng.randrange(record_count), key_size) for _ in range(n)]
    out = {}
    for label, f in (("scan", scan), ("reverse_scan", scan_back)):
        t0 = time.perf_counter()
        got = sum(sum(1 for _ in itertools.islice(f(k), length)) for k in starts)
        out[f"{label}s_per_sec"] = n / (time.perf_counter() - t0)
        out[f"{label}_entries"] = got
    batches = [[driver.make_key(rng.randrange(record_count), key_size) for _ in range(batch)] for _ in range(n)]
    t0 = time.perf_counter()
    for b in batches:
        get_many(b)
    out["multi_gets_per_sec"] = n / (time.perf_counter() - t0)
    return out


def replay(name, put, get, ops_path):
    header, ops = driver.read_ops(ops_path)
    ks, vs = header["key_size"], header["value_size"]
    rng = random.Random(42)
    span = 1 << 20
    pool = rng.randbytes(span + vs)
    off = 0
    t0 = time.perf_counter()
    for k in range(header["record_count"]):
        put(driver.make_key(k, ks), pool[off:off + vs])
        off = (off + 4093) & (span - 1)
    load = time.perf_counter() - t0
    n_put = n_get = 0
    t0 = time.perf_counter()
    for code, keynum, _ in ops:
        key = driver.make_key(keynum, ks)
        if code in (0, 1):
            put(key, pool[off:off + vs])
            off = (off + 4093) & (span - 1)
            n_put += 1
        elif code == 2:
            get(key)
            n_get += 1
        else:
            raise SystemExit(f"{name}: op code {code} (scan/rmw) is not replayed by this script")
    run = time.perf_counter() - t0
    return dict(engine=name, load_ops_per_sec=header["record_count"] / load,
                run_ops_per_sec=(n_put + n_get) / run, puts=n_put, gets=n_get)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=str(ROOT / "target/release/halflife"))
    ap.add_argument("--ops", help="op file [default: make one with halflife compare]")
    ap.add_argument("--workload", default="write-intensive",
                    help="write-intensive (updates only) or a YCSB core workload a, b, c, f (no scans)")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--op-count", type=int, default=150_000)
    ap.add_argument("--policies", default="inline,blobdb,lifetime")
    ap.add_argument("--memtable-mb", type=int, default=16)
    ap.add_argument("--cache-mib", type=int, default=32)
    ap.add_argument("--scans", type=int, default=2000,
                    help="range scans (50 entries) each way and multi-gets (64 keys) after the run")
    ap.add_argument("--out", default="bench-out/python-bench")
    a = ap.parse_args()
    import halflife
    import rocksdict as rd

    os.makedirs(a.out, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(dir=a.out))
    ops = pathlib.Path(a.ops) if a.ops else make_ops(a.binary, work, a.workload, a.records, a.op_count)
    load = os.getloadavg()
    print(f"op file {ops}, load average at start {load[0]:.2f}", file=sys.stderr)
    results = []
    for policy in a.policies.split(","):
        path = work / f"halflife-{policy}"
        with halflife.DB(path, gc=policy, memtable_mb=a.memtable_mb, cache_mib=a.cache_mib) as db:
            r = replay(f"halflife {policy}", db.put, db.get, ops)
            header, _ = driver.read_ops(ops)
            r.update(reads(r["engine"], lambda k: db.items(start=k),
                           lambda k: db.items(stop=k, reverse=True), db.get_many,
                           header["record_count"], header["key_size"], a.scans))
            results.append(r)
        shutil.rmtree(path)
    for blob in (False, True):
        o = rd.Options(raw_mode=True)
        o.create_if_missing(True)
        o.set_write_buffer_size(a.memtable_mb << 20)
        o.set_compression_type(rd.DBCompressionType.none())
        o.set_bottommost_compression_type(rd.DBCompressionType.none())
        if blob:
            o.set_enable_blob_files(True)
            o.set_min_blob_size(512)
            o.set_blob_compression_type(rd.DBCompressionType.none())
            o.set_enable_blob_gc(True)
        t = rd.BlockBasedOptions()
        t.set_bloom_filter(10, False)
        t.set_block_cache(rd.Cache(a.cache_mib << 20))
        o.set_block_based_table_factory(t)
        path = work / f"rocksdb-{blob}"
        db = rd.Rdict(str(path), o)
        r = replay("rocksdict" + (" blob" if blob else ""), db.put, db.get, ops)
        header, _ = driver.read_ops(ops)
        r.update(reads(r["engine"], lambda k: db.items(from_key=k),
                       lambda k: db.items(backwards=True, from_key=k), db.get,
                       header["record_count"], header["key_size"], a.scans))
        results.append(r)
        db.close()
        shutil.rmtree(path)
    end = os.getloadavg()
    base = next(r for r in results if r["engine"] == "rocksdict")
    print("\n| engine | load ops/s | run ops/s | scans/s | reverse scans/s | multi-gets/s |\n|---|---|---|---|---|---|")
    rel = lambda r, k: f"{r[k] / 1000:.2f}K ({r[k] / base[k]:.2f}x)"
    for r in results:
        print(f"| {r['engine']} | {rel(r, 'load_ops_per_sec')} | {rel(r, 'run_ops_per_sec')} | "
              f"{rel(r, 'scans_per_sec')} | {rel(r, 'reverse_scans_per_sec')} | {rel(r, 'multi_gets_per_sec')} |")
    print(f"\nload average {load[0]:.2f} at start, {end[0]:.2f} at end", file=sys.stderr)
    with open(os.path.join(a.out, "python-bench.json"), "w") as f:
        json.dump(dict(ops=str(ops), loadavg_start=load, loadavg_end=end, results=results), f, indent=1)


if __name__ == "__main__":
    main()
