#!/usr/bin/env bash
# Runs RocksDB's db_bench (Debian's rocksdb-tools, RocksDB 7.8.3) and `halflife bench
# --benchmarks` with the same db_bench flags, alternately, -R times each (on a shared
# machine the load moves between runs: the best of several alternating runs is the
# figure least disturbed by others; each run starts after `sync`, so that neither pays for
# the writeback of the run before it), and prints each benchmark's best throughput with the
# p99.9 of that run, the halflife/RocksDB ratio, both processes' peak RSS and the size of
# each database directory at the end.
#
#   scripts/db-bench-side-by-side.sh [-b LIST] [-n NUM] [-t THREADS] [-k KEY] [-v VALUE]
#       [-r COMPRESSION_RATIO] [-c none|lz4|zstd] [-m MEMTABLE_MB] [-C CACHE_MB] [--blob]
#       [--sync] [-R REPS] [-d DIR] [-o OUTDIR]
#
# Defaults: fillrandom,overwrite,readrandom,readwhilewriting,seekrandom; 500000 keys of
# 24 B and values of 1000 B; 1 thread; compression none (ratio 0.5, db_bench's default);
# 64 MiB write buffer, 256 MiB block cache; bloom filters of 10 bits per key on both sides;
# WAL on, not synced. --blob runs RocksDB's integrated BlobDB (min blob size 512, GC age
# cutoff 0.8, force threshold 0.2) against halflife's blobdb policy with the same knobs;
# otherwise values stay in the tree on both sides (halflife's inline policy).
# As in db_bench, --num is per thread and is also the key space.
# The halflife binary is $HALFLIFE, else target/release/halflife (built if missing).
set -euo pipefail

benchmarks=fillrandom,overwrite,readrandom,readwhilewriting,seekrandom
num=500000 threads=1 key=24 value=1000 ratio=0.5 compression=none
memtable_mb=64 cache_mb=256 blob=0 sync=false reps=3 dir="" out=bench-out/db-bench-side
while [ $# -gt 0 ]; do
    case "$1" in
        -b) benchmarks=$2; shift ;;
        -n) num=$2; shift ;;
        -t) threads=$2; shift ;;
        -k) key=$2; shift ;;
        -v) value=$2; shift ;;
        -r) ratio=$2; shift ;;
        -c) compression=$2; shift ;;
        -m) memtable_mb=$2; shift ;;
        -C) cache_mb=$2; shift ;;
        -R) reps=$2; shift ;;
        -d) dir=$2; shift ;;
        -o) out=$2; shift ;;
        --blob) blob=1 ;;
        --sync) sync=true ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if ! command -v db_bench >/dev/null; then
    echo "installing rocksdb-tools (db_bench) with apt-get ..." >&2
    apt-get install -y -q rocksdb-tools >/dev/null
fi
halflife=${HALFLIFE:-target/release/halflife}
if [ ! -x "$halflife" ]; then
    cargo build --release -p halflife-cli
fi
mkdir -p "$out"
if [ -z "$dir" ]; then
    dir=$(mktemp -d -t db-bench-side-XXXXXX)
    trap 'rm -rf "$dir"' EXIT
fi
tag="t${threads}-n${num}-v${value}-${compression}$([ $blob = 1 ] && echo -blob || true)"

rocks_flags=(--benchmarks="$benchmarks" --num="$num" --threads="$threads"
    --key_size="$key" --value_size="$value" --compression_ratio="$ratio"
    --compression_type="$compression" --write_buffer_size=$((memtable_mb << 20))
    --cache_size=$((cache_mb << 20)) --bloom_bits=10 --sync="$sync" --histogram=true
    --db="$dir/rocksdb")
hl_flags=(bench --benchmarks "$benchmarks" --num "$num" --threads "$threads"
    --key-size "$key" --value-size "$value" --compression-ratio "$ratio"
    --memtable-mb "$memtable_mb" --cache-mb "$cache_mb" --dir "$dir/halflife"
    --no-plot)
[ "$compression" != none ] && hl_flags+=(--compression "$compression")
[ "$sync" = true ] && hl_flags+=(--sync)
if [ $blob = 1 ]; then
    rocks_flags+=(--enable_blob_files=true --min_blob_size=512
        --enable_blob_garbage_collection=true --blob_garbage_collection_age_cutoff=0.8
        --blob_garbage_collection_force_threshold=0.2)
    hl_flags+=(--policy blobdb --min-blob-size 512 --age-cutoff 0.8 --force-threshold 0.2)
else
    hl_flags+=(--policy inline)
fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores); commit $(git rev-parse --short HEAD 2>/dev/null || echo ?); $reps alternating runs each"
files=()
for rep in $(seq 1 "$reps"); do
    for side in rocksdb halflife; do
        base="$out/$side-$tag-r$rep"
        rm -rf "${dir:?}/$side"
        # Each run starts with the previous run's files written back: otherwise a run
        # pays for the other engine's writeback (up to 30 s of dirty pages on Linux).
        sync
        if [ $side = rocksdb ]; then
            /usr/bin/time -f "maxrss_kb %M" -o "$base.time" \
                db_bench "${rocks_flags[@]}" >"$base.txt" 2>&1
        else
            /usr/bin/time -f "maxrss_kb %M" -o "$base.time" \
                "$halflife" "${hl_flags[@]}" --report "$base.json" >"$base.txt" 2>&1
        fi
        echo "disk_bytes $(du -sb "$dir/$side" | cut -f1)" >>"$base.time"
        files+=("$base.time" "$base.txt")
    done
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"

# "name : X micros/op Y ops/sec ..." from both; p99.9 from db_bench's histogram
# ("Percentiles: P50: a P75: b P99: c P99.9: d P99.99: e") and halflife's latency line.
awk '
    FNR == 1 { side = (FILENAME ~ /\/rocksdb-[^\/]*$/) ? 1 : 2; last = ""; run++ }
    /^maxrss_kb/ { if ($2 > rss[side]) rss[side] = $2 }
    /^disk_bytes/ { disk[side] = $2 }
    / : .* micros\/op / {
        last = $1; ops[run, last] = $5
        if (!(last in seen)) { seen[last] = 1; order[++n] = last }
        if ($5 > best[side, last]) { best[side, last] = $5; bestrun[side, last] = run }
    }
    side == 1 && /^Percentiles:/ && last != "" && !((run, last) in p999) {
        for (i = 1; i <= NF; i++) if ($i == "P99.9:") p999[run, last] = $(i + 1)
    }
    side == 2 && /latency us:/ && last != "" {
        for (i = 1; i <= NF; i++) if ($i == "p99.9") p999[run, last] = $(i + 1)
    }
    END {
        printf "%-17s %14s %14s %7s %12s %12s\n", "benchmark", "rocksdb ops/s", "halflife ops/s", "ratio", "rocks p99.9", "hl p99.9"
        for (i = 1; i <= n; i++) {
            b = order[i]; r = best[1, b]; h = best[2, b]
            printf "%-17s %14d %14d %6.2fx %10.1fus %10.1fus\n", b, r, h, (r > 0 ? h / r : 0), p999[bestrun[1, b], b], p999[bestrun[2, b], b]
        }
        printf "peak RSS: rocksdb %.0f MiB, halflife %.0f MiB\n", rss[1] / 1024, rss[2] / 1024
        printf "database size at the end: rocksdb %.1f MiB, halflife %.1f MiB\n", disk[1] / 1048576, disk[2] / 1048576
    }' "${files[@]}"
echo "outputs: $out/{rocksdb,halflife}-$tag-r*.{txt,time} and $out/halflife-$tag-r*.json"
