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
#       [--sync] [-R REPS] [-d DIR] [-o OUTDIR] [-B HALFLIFE_BINARY]
#
# Defaults: fillrandom,overwrite,readrandom,readwhilewriting,seekrandom; 500000 keys of
# 24 B and values of 1000 B; 1 thread; compression none (ratio 0.5, db_bench's default);
# 64 MiB write buffer, 256 MiB block cache; bloom filters of 10 bits per key on both sides;
# WAL on, not synced. --blob runs RocksDB's integrated BlobDB (min blob size 512, GC age
# cutoff 0.8, force threshold 0.2) against halflife's blobdb policy with the same knobs,
# twice: "separate-WAL" is like-for-like (BlobDB has a separate WAL too, so every value is
# written to the WAL and to a value file), "value-log-as-WAL" is halflife's design (each
# large value is written once, to the value log, and the WAL logs a pointer). Otherwise
# values stay in the tree on both sides (halflife's inline policy). -B runs a second
# halflife binary as more sides ("halflife-B..."), alternating with the first: an A/B of
# two builds within one run.
# As in db_bench, --num is per thread and is also the key space.
# The halflife binary is $HALFLIFE, else target/release/halflife (built if missing).
set -euo pipefail

benchmarks=fillrandom,overwrite,readrandom,readwhilewriting,seekrandom
num=500000 threads=1 key=24 value=1000 ratio=0.5 compression=none
memtable_mb=64 cache_mb=256 blob=0 sync=false reps=3 dir="" out=bench-out/db-bench-side halflife_b=""
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
        -B) halflife_b=$2; shift ;;
        --blob) blob=1 ;;
        --sync) sync=true ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
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
    --cache_size=$((cache_mb << 20)) --bloom_bits=10 --sync="$sync" --histogram=true)
hl_flags=(bench --benchmarks "$benchmarks" --num "$num" --threads "$threads"
    --key-size "$key" --value-size "$value" --compression-ratio "$ratio"
    --memtable-mb "$memtable_mb" --cache-mb "$cache_mb" --no-plot)
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

# The sides, in the order they alternate: "name|kind|binary|extra halflife flags". --blob
# runs halflife twice: like-for-like (a separate WAL, as BlobDB has: every value is
# written to the WAL and again to a value file at flush) and as designed (the value log
# as the WAL: each large value is written once, and the WAL logs a pointer).
sides=("rocksdb|rocksdb||")
hl_sides() { # $1: name suffix, $2: binary
    if [ $blob = 1 ]; then
        sides+=("halflife$1,separate-WAL|halflife|$2|--value-log-wal false")
        sides+=("halflife$1,value-log-as-WAL|halflife|$2|--value-log-wal true")
    else
        sides+=("halflife$1|halflife|$2|")
    fi
}
hl_sides "" "$halflife"
[ -n "$halflife_b" ] && hl_sides "-B" "$halflife_b"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores); commit $(git rev-parse --short HEAD 2>/dev/null || echo ?); $reps alternating runs each"
files=()
for rep in $(seq 1 "$reps"); do
    for i in "${!sides[@]}"; do
        IFS='|' read -r name kind bin extra <<<"${sides[$i]}"
        base="$out/$name-$tag-r$rep"
        rm -rf "${dir:?}/s$i"
        # Each run starts with the previous run's files written back: otherwise a run
        # pays for the other engine's writeback (up to 30 s of dirty pages on Linux).
        sync
        echo "side $name" >"$base.txt"
        echo "side $name" >"$base.time"
        if [ "$kind" = rocksdb ]; then
            /usr/bin/time -a -f "maxrss_kb %M" -o "$base.time" \
                db_bench "${rocks_flags[@]}" --db="$dir/s$i" >>"$base.txt" 2>&1
        else
            # shellcheck disable=SC2086 # $extra is a list of flags
            /usr/bin/time -a -f "maxrss_kb %M" -o "$base.time" \
                "$bin" "${hl_flags[@]}" $extra --dir "$dir/s$i" --report "$base.json" \
                >>"$base.txt" 2>&1
        fi
        echo "disk_bytes $(du -sb "$dir/s$i" | cut -f1)" >>"$base.time"
        files+=("$base.time" "$base.txt")
    done
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"

# "name : X micros/op Y ops/sec ..." from both; p99.9 from db_bench's histogram
# ("Percentiles: P50: a P75: b P99: c P99.9: d P99.99: e") and halflife's latency line.
# One row per benchmark and side; the ratio is to RocksDB's best.
awk '
    /^side / {
        side = $2; last = ""; run++
        if (!(side in known)) { known[side] = 1; sides[++ns] = side }
        next
    }
    /^maxrss_kb/ { if ($2 > rss[side]) rss[side] = $2 }
    /^disk_bytes/ { disk[side] = $2 }
    / : .* micros\/op / {
        last = $1
        if (!(last in seen)) { seen[last] = 1; order[++n] = last }
        if ($5 > best[side, last]) { best[side, last] = $5; bestrun[side, last] = run }
    }
    /^Percentiles:/ && last != "" && !((run, last) in p999) {
        for (i = 1; i <= NF; i++) if ($i == "P99.9:") p999[run, last] = $(i + 1)
    }
    /latency us:/ && last != "" {
        for (i = 1; i <= NF; i++) if ($i == "p99.9") p999[run, last] = $(i + 1)
    }
    END {
        printf "%-17s %-32s %12s %7s %12s\n", "benchmark", "side", "best ops/s", "ratio", "p99.9"
        for (i = 1; i <= n; i++) {
            b = order[i]; r = best["rocksdb", b]
            for (j = 1; j <= ns; j++) {
                s = sides[j]; h = best[s, b]
                printf "%-17s %-32s %12d %6.2fx %10.1fus\n", b, s, h, (r > 0 ? h / r : 0), p999[bestrun[s, b], b]
            }
        }
        for (j = 1; j <= ns; j++)
            printf "%-32s peak RSS %6.0f MiB, database at the end %8.1f MiB\n", sides[j], rss[sides[j]] / 1024, disk[sides[j]] / 1048576
    }' "${files[@]}"
echo "outputs: $out/<side>-$tag-r*.{txt,time} and $out/halflife*-$tag-r*.json"
