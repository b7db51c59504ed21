#!/usr/bin/env python3
"""Replay a halflife op file on RocksDB (through the `rocksdict` package).

This is one of the peer drivers run by `halflife compare`. Every driver speaks the same
small protocol (see docs/bench.md, "The peer interface"):

    driver.py --ops FILE --dir DIR [--report FILE] [engine options]

1. load phase: insert key numbers 0..record_count-1 (in that order), the op file's
   `record_count` from its header;
2. run phase: replay every op of the file;
3. settle: wait until no flush or compaction is pending or running;
4. write one JSON report (schema `halflife-run/1`, the same as `halflife bench`) to --report
   or to stdout, with the process's own /proc/self/io read as the very last thing.

While it runs it prints `progress DONE TOTAL` lines on stderr, which `halflife compare`
turns into a progress bar.

Keys follow the workload crate's rule exactly (crates/workload/src/keys.rs): b"user" + the
20-digit zero-padded decimal of FNV-1a-64 over the 8 little-endian bytes of the key number,
right-padded with b"x" to the key size; below 24 bytes, the key number's lowest
`key_size - 4` decimal digits, least significant first. Values are slices of one pre-generated random buffer taken at varying
offsets: compression is off for every engine, so the bytes' content does not change how
many bytes are written, and slicing keeps the per-op cost of Python low.
"""

import argparse
import json
import os
import random
import resource
import struct
import sys
import time

MAGIC = b"HLOPS001"
HEADER = struct.Struct("<8sIIQQ")
OP_KEY = struct.Struct("<BQ")
SCAN_LEN = struct.Struct("<I")
OP_NAMES = ["insert", "update", "read", "scan", "rmw", "delete"]
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1


def make_key(keynum, key_size):
    """The workload crate's key for `keynum` (see the module docstring)."""
    if key_size < 24:
        # Too short for the 20 hash digits: the key number's lowest decimal digits, reversed.
        d = key_size - 4
        if d <= 0:
            return b"user"[:key_size]
        return b"user" + (b"%0*d" % (d, keynum % 10**d))[::-1]
    h = FNV_OFFSET
    n = keynum
    for _ in range(8):
        h = ((h ^ (n & 0xFF)) * FNV_PRIME) & MASK64
        n >>= 8
    return (b"user%020d" % h).ljust(key_size, b"x")


def read_ops(path):
    """Yields (header dict, generator of (code, keynum, scan_len)) without loading the file."""
    f = open(path, "rb")
    head = f.read(HEADER.size)
    if len(head) != HEADER.size:
        raise SystemExit(f"{path}: too short for an op-file header")
    magic, key_size, value_size, record_count, op_count = HEADER.unpack(head)
    if magic != MAGIC:
        raise SystemExit(f"{path}: bad magic {magic!r}, expected {MAGIC!r}")
    header = dict(key_size=key_size, value_size=value_size,
                  record_count=record_count, op_count=op_count)

    def ops():
        # Parse in large chunks: one read() per 4 MiB, unpack_from inside the chunk.
        buf = b""
        pos = 0
        unpack_op = OP_KEY.unpack_from
        unpack_len = SCAN_LEN.unpack_from
        for _ in range(op_count):
            if len(buf) - pos < 13:
                buf = buf[pos:] + f.read(4 << 20)
                pos = 0
                if len(buf) < OP_KEY.size:
                    raise SystemExit(f"{path}: truncated op stream")
            code, key = unpack_op(buf, pos)
            pos += 9
            if code == 3:
                (n,) = unpack_len(buf, pos)
                pos += 4
            else:
                n = 0
            yield code, key, n
        f.close()

    return header, ops()


class Histogram:
    """Log-linear latency histogram in nanoseconds: 32 sub-buckets per power of two,
    so a reported percentile is within about 3% of the true value. Constant memory."""

    SUB = 5  # 2**5 sub-buckets

    def __init__(self):
        self.counts = {}
        self.n = 0
        self.total = 0
        self.max = 0

    def record(self, ns):
        b = ns.bit_length()
        if b > self.SUB:
            idx = (b << self.SUB) | ((ns >> (b - self.SUB - 1)) & ((1 << self.SUB) - 1))
        else:
            idx = ns
        c = self.counts
        c[idx] = c.get(idx, 0) + 1
        self.n += 1
        self.total += ns
        if ns > self.max:
            self.max = ns

    def _value(self, idx):
        sub = self.SUB
        if idx < (1 << sub):
            return float(idx)
        b = idx >> sub
        low = (1 << (b - 1)) | ((idx & ((1 << sub) - 1)) << (b - sub - 1))
        width = 1 << (b - sub - 1)
        return low + width / 2.0

    def quantile(self, q):
        if self.n == 0:
            return 0.0
        rank = max(1, int(q * self.n + 0.999999))
        seen = 0
        for idx in sorted(self.counts):
            seen += self.counts[idx]
            if seen >= rank:
                return min(self._value(idx), float(self.max))
        return float(self.max)

    def summary_us(self):
        if self.n == 0:
            return None
        return {
            "count": self.n,
            "mean": self.total / self.n / 1000.0,
            "p50": self.quantile(0.50) / 1000.0,
            "p99": self.quantile(0.99) / 1000.0,
            "p999": self.quantile(0.999) / 1000.0,
            "p9999": self.quantile(0.9999) / 1000.0,
            "max": self.max / 1000.0,
        }


def parse_statistics(text):
    """RocksDB's statistics string: `rocksdb.x COUNT : n` tickers and
    `rocksdb.y P50 : .. COUNT : n SUM : s` histograms."""
    tickers, histograms = {}, {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[1] == "COUNT" and parts[2] == ":":
            try:
                tickers[parts[0]] = int(parts[3])
            except ValueError:
                pass
        elif len(parts) > 4 and parts[1].startswith("P"):
            h = {}
            for i in range(1, len(parts) - 2, 3):
                if parts[i + 1] == ":":
                    try:
                        h[parts[i]] = float(parts[i + 2])
                    except ValueError:
                        pass
            histograms[parts[0]] = h
    return tickers, histograms


def proc_self_io():
    out = {}
    try:
        with open("/proc/self/io") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k.strip()] = int(v)
    except OSError:
        pass
    return out


def dir_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


class Progress:
    def __init__(self, total):
        self.total = total
        self.done = 0
        self.next_at = 0
        self.step = max(1, total // 200)
        self.last = 0.0

    def advance(self, n=1):
        self.done += n
        if self.done >= self.next_at:
            self.next_at = self.done + self.step
            now = time.monotonic()
            if now - self.last >= 0.2 or self.done >= self.total:
                self.last = now
                print(f"progress {self.done} {self.total}", file=sys.stderr, flush=True)


def open_db(args):
    try:
        import rocksdict as rd
    except ImportError:
        raise SystemExit("the rocksdict package is missing: python3 -m pip install rocksdict")
    o = rd.Options(raw_mode=True)
    o.create_if_missing(True)
    o.set_write_buffer_size(args.memtable_mb << 20)
    o.set_compression_type(rd.DBCompressionType.none())
    o.set_bottommost_compression_type(rd.DBCompressionType.none())
    o.set_max_background_jobs(args.background_jobs)
    o.enable_statistics()
    if args.blob:
        o.set_enable_blob_files(True)
        o.set_min_blob_size(args.min_blob_size)
        o.set_blob_file_size(args.blob_file_mb << 20)
        o.set_blob_compression_type(rd.DBCompressionType.none())
        o.set_enable_blob_gc(True)
        o.set_blob_gc_age_cutoff(args.age_cutoff)
        o.set_blob_gc_force_threshold(args.force_threshold)
    t = rd.BlockBasedOptions()
    t.set_bloom_filter(10, False)
    t.set_block_cache(rd.Cache(args.cache_mb << 20))
    o.set_block_based_table_factory(t)
    db = rd.Rdict(args.dir, o)
    w = rd.WriteOptions()
    w.sync = bool(args.sync)
    db.set_write_options(w)
    return rd, o, db


def settle(db):
    """Waits until RocksDB has no flush or compaction pending or running (blob GC runs
    inside compactions), seen three times in a row."""
    props = ("rocksdb.num-running-compactions", "rocksdb.num-running-flushes",
             "rocksdb.compaction-pending", "rocksdb.mem-table-flush-pending")
    quiet = 0
    while quiet < 3:
        busy = any((db.property_int_value(p) or 0) for p in props)
        quiet = 0 if busy else quiet + 1
        time.sleep(0.1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", required=True, help="op file written by `halflife compare`")
    p.add_argument("--dir", required=True, help="database directory (created)")
    p.add_argument("--report", help="JSON report path (default: stdout)")
    p.add_argument("--engine-name", default=None)
    p.add_argument("--memtable-mb", type=int, default=64)
    p.add_argument("--cache-mb", type=int, default=64)
    p.add_argument("--background-jobs", type=int, default=2)
    p.add_argument("--sync", action="store_true", help="sync the WAL on every write")
    p.add_argument("--blob", action="store_true", help="integrated BlobDB (key-value separation)")
    p.add_argument("--min-blob-size", type=int, default=512)
    p.add_argument("--blob-file-mb", type=int, default=256)
    p.add_argument("--age-cutoff", type=float, default=0.8)
    p.add_argument("--force-threshold", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    name = args.engine_name or ("rocksdb-blob" if args.blob else "rocksdb")

    header, ops = read_ops(args.ops)
    key_size, value_size = header["key_size"], header["value_size"]
    record_count, op_count = header["record_count"], header["op_count"]

    rng = random.Random(args.seed)
    span = 1 << 20
    pool = rng.randbytes(span + value_size)
    offset = 0

    rd, options, db = open_db(args)
    progress = Progress(record_count + op_count)
    clock = time.perf_counter_ns
    user_bytes = 0
    put = db.put
    get = db.get
    delete = db.delete

    # Load phase.
    load_hist = Histogram()
    t0 = time.monotonic()
    for k in range(record_count):
        key = make_key(k, key_size)
        value = pool[offset:offset + value_size]
        offset = (offset + 4093) & (span - 1)
        s = clock()
        put(key, value)
        load_hist.record(clock() - s)
        user_bytes += key_size + value_size
        progress.advance()
    load_secs = time.monotonic() - t0

    # Run phase.
    hists = [Histogram() for _ in OP_NAMES]
    not_found = 0
    scanned = 0
    t0 = time.monotonic()
    for code, keynum, n in ops:
        key = make_key(keynum, key_size)
        if code == 0 or code == 1:
            value = pool[offset:offset + value_size]
            offset = (offset + 4093) & (span - 1)
            s = clock()
            put(key, value)
            e = clock()
            user_bytes += key_size + value_size
        elif code == 2:
            s = clock()
            v = get(key)
            e = clock()
            if v is None:
                not_found += 1
        elif code == 3:
            s = clock()
            it = db.iter()
            it.seek(key)
            i = 0
            while i < n and it.valid():
                it.key()
                it.value()
                it.next()
                i += 1
            del it
            e = clock()
            scanned += i
        elif code == 4:
            value = pool[offset:offset + value_size]
            offset = (offset + 4093) & (span - 1)
            s = clock()
            if get(key) is None:
                not_found += 1
            put(key, value)
            e = clock()
            user_bytes += key_size + value_size
        elif code == 5:
            # A tombstone of the key; the next update re-creates it.
            s = clock()
            delete(key)
            e = clock()
            user_bytes += key_size
        else:
            raise SystemExit(f"unknown op code {code}")
        hists[code].record(e - s)
        progress.advance()
    run_secs = time.monotonic() - t0

    t0 = time.monotonic()
    settle(db)
    settle_secs = time.monotonic() - t0

    tickers, histograms = parse_statistics(options.get_statistics())
    props = {}
    for prop in ("rocksdb.total-sst-files-size", "rocksdb.live-sst-files-size",
                 "rocksdb.total-blob-file-size", "rocksdb.live-blob-file-size",
                 "rocksdb.live-blob-file-garbage-size", "rocksdb.num-blob-files",
                 "rocksdb.estimate-num-keys", "rocksdb.num-live-versions"):
        try:
            props[prop] = db.property_int_value(prop)
        except Exception:  # a property this build does not know
            props[prop] = None
    db.close()
    disk = dir_bytes(args.dir)

    wal = tickers.get("rocksdb.wal.bytes", 0)
    flush = tickers.get("rocksdb.flush.write.bytes", 0)
    compact = tickers.get("rocksdb.compact.write.bytes", 0)
    report = {
        "schema": "halflife-run/1",
        "engine": name,
        "settings": {k: v for k, v in vars(args).items() if k not in ("ops", "dir", "report")},
        "workload": {"record_count": record_count, "op_count": op_count,
                     "key_size": key_size, "value_size": value_size},
        "phases": {
            "load": {"ops": record_count, "seconds": load_secs,
                     "ops_per_sec": record_count / load_secs if load_secs > 0 else 0.0},
            "run": {"ops": op_count, "seconds": run_secs,
                    "ops_per_sec": op_count / run_secs if run_secs > 0 else 0.0},
            "settle": {"ops": 0, "seconds": settle_secs, "ops_per_sec": 0.0},
        },
        "latency_us": {OP_NAMES[i]: h.summary_us() for i, h in enumerate(hists) if h.n},
        "load_latency_us": load_hist.summary_us(),
        "not_found": not_found,
        "scanned_entries": scanned,
        "user_bytes_written": user_bytes,
        # flush and compaction bytes include the blob files they write (and blob GC, which
        # runs inside compactions); rocksdb.bytes.written is the user bytes of writes.
        "engine_bytes_written": wal + flush + compact,
        "engine_bytes_by_cause": {"wal": wal, "flush": flush, "compaction": compact},
        "disk_bytes": disk,
        "tree_bytes": props.get("rocksdb.total-sst-files-size"),
        "value_file_bytes": props.get("rocksdb.total-blob-file-size") if args.blob else 0,
        "live_user_bytes": None,
        "stall_micros": tickers.get("rocksdb.stall.micros", 0),
        "engine_stats": {
            "tickers": {k: v for k, v in tickers.items() if v},
            "properties": props,
            "write_stall": histograms.get("rocksdb.db.write.stall"),
        },
    }
    # Last, so that everything above (including the report's own encoding) is counted.
    text = json.dumps(report, indent=1)
    report["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    report["proc_io"] = proc_self_io()
    text = json.dumps(report, indent=1)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
