#!/usr/bin/env bash
# Runs Redis 7.0.15's own TCL test units against `halflife serve`.
#
#   crates/server/tests/redis-suite/run.sh [unit ...]     (default: every unit in UNITS)
#
# Redis's source comes from Debian bookworm's source package (`apt-get source redis`,
# needs a deb-src entry; .ci/run adds one) into $REDIS_SUITE_DIR (default
# /tmp/halflife-redis-suite), or from $REDIS_SRC if that names an unpacked source tree. It
# is never part of this repository. The server is target/debug/halflife (built here) or
# $HALFLIFE_BIN, started for each unit on a free port over a fresh directory.
# $REDIS_SUITE_BASEPORT moves the ports the suite itself listens on and starts servers
# on (21111 and the 32 below it by default), for two runs at once on one machine.
#
# Units in OWN_MODE run in the suite's own mode instead: it starts a server per block
# through `redis-server` next to this script, a stand-in that runs halflife serve.
#
# Tests listed in skip.txt (next to this script, with the reason for each group) and
# tests with the tags in SKIP_TAGS are not run; external-mode runs skip `external:skip`
# tests by themselves. Prints passed/failed/skipped per unit and exits non-zero if any
# test that was run failed.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"

UNITS_DEFAULT=(type/string type/incr expire keyspace scan auth info multi
  type/hash type/set type/list type/zset type/stream type/stream-cgroups hyperloglog bitfield sort geo slowlog latency-monitor protocol dump
  pubsub pubsubshard scripting functions introspection maxmemory)
# Units run in the suite's own mode, where it starts each server itself from a config
# file (through the `redis-server` next to this script): every test of theirs is tagged
# `external:skip`, as it needs a server started with a password or a second server
# (maxmemory's, as each block wants a fresh server).
OWN_MODE=(auth info pubsubshard maxmemory)
# Tags of tests that need what an external, non-Redis server cannot offer: DEBUG,
# replication, RDB saves, DEBUG-like HyperLogLog and latency introspection.
SKIP_TAGS=(-needs:debug -needs:repl -needs:save -needs:pfdebug -needs:latency -needs:reset
  -needs:local-process)
# Units whose `needs:config-maxmemory` tests set `maxmemory 1` to make every write fail on
# a database they have just emptied: used_memory here is the data set's bytes
# (docs/maxmemory.md), 0 for an empty one, which is under any bound (Redis's is never 0).
# The tag is skipped for them; the other units run their maxmemory tests.
MAXMEMORY_1_UNITS=(scripting functions)
# Units whose `needs:debug` tests use only `DEBUG SLEEP` (which the server has, with
# --enable-debug-command) and whose `needs:latency` tests need the latency monitor the
# server has: those two tags run for them.
DEBUG_SLEEP_UNITS=(slowlog latency-monitor)

if [ $# -gt 0 ]; then UNITS=("$@"); else UNITS=("${UNITS_DEFAULT[@]}"); fi

# Redis's source.
if [ -n "${REDIS_SRC:-}" ]; then
  SRC="$REDIS_SRC"
else
  WORK="${REDIS_SUITE_DIR:-/tmp/halflife-redis-suite}"
  mkdir -p "$WORK"
  SRC="$(ls -d "$WORK"/redis-7.* 2>/dev/null | head -1 || true)"
  if [ -z "$SRC" ]; then
    (cd "$WORK" && apt-get source --download-only redis >/dev/null \
      && tar xzf redis_*.orig.tar.gz)
    SRC="$(ls -d "$WORK"/redis-7.* | head -1)"
  fi
fi
[ -f "$SRC/tests/test_helper.tcl" ] || { echo "no Redis test suite in $SRC" >&2; exit 2; }
command -v tclsh >/dev/null || { echo "tclsh is needed (apt-get install tcl)" >&2; exit 2; }

# The server.
BIN="${HALFLIFE_BIN:-$ROOT/target/debug/halflife}"
if [ -z "${HALFLIFE_BIN:-}" ]; then
  (cd "$ROOT" && cargo build -q -p halflife-cli)
fi
DATA="$(mktemp -d)"
OUT="$(mktemp -d)"
PID=""
stop_server() {
  if [ -n "$PID" ]; then
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
  fi
}
cleanup() {
  stop_server
  rm -rf "$DATA"
  [ -n "${KEEP_LOGS:-}" ] && echo "logs in $OUT" || rm -rf "$OUT"
}
trap cleanup EXIT
# A fresh server (and database) per unit, as Redis's own runs start one per test file: in
# external mode a unit's CONFIG SETs would otherwise stay for the next one (type/list
# sets proto-max-bulk-len to 10 GB, and protocol's "Out of range multibulk payload
# length" then waits for 2 GB instead of getting an error).
start_server() {
  local name="$1"
  rm -rf "$DATA/db"
  "$BIN" serve --dir "$DATA/db" --port 0 --enable-debug-command local >"$OUT/$name.server.out" 2>"$OUT/$name.server.err" &
  PID=$!
  for _ in $(seq 1 100); do
    grep -q 'ready' "$OUT/$name.server.out" 2>/dev/null && break
    sleep 0.1
  done
  PORT="$(sed -n 's/.*tcp 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$OUT/$name.server.out" | head -1)"
  [ -n "$PORT" ] || { echo "server did not start:"; cat "$OUT/$name.server.err"; exit 2; }
}

TAGS=()
for t in "${SKIP_TAGS[@]}"; do TAGS+=(--tags "$t"); done
DEBUG_TAGS=()
for t in "${SKIP_TAGS[@]}"; do
  [[ "$t" == -needs:debug || "$t" == -needs:latency ]] || DEBUG_TAGS+=(--tags "$t")
done

# A tree every unit runs from: Redis's tests and runtest, and for the suite's own mode the
# stand-in server as src/redis-server (the suite starts `src/redis-server CONFIG` from its
# working directory). Its tests/tmp is its own (the suite empties tests/tmp when it starts,
# which would pull the files from under another run's servers); the rest are links.
OWN="$OUT/own-mode"
mkdir -p "$OWN/src" "$OWN/tests/tmp"
for e in "$SRC"/tests/*; do
  [ "$(basename "$e")" = tmp ] || ln -s "$e" "$OWN/tests/$(basename "$e")"
done
cp "$SRC/runtest" "$OWN/runtest"
cp "$HERE/redis-server" "$OWN/src/redis-server"
export HALFLIFE_BIN="$BIN"

# Runs one unit; its output goes to $1.
run_unit() {
  local log="$1" unit="$2"
  local tags=("${TAGS[@]}")
  if [[ " ${DEBUG_SLEEP_UNITS[*]} " == *" $unit "* ]]; then tags=("${DEBUG_TAGS[@]}"); fi
  if [[ " ${MAXMEMORY_1_UNITS[*]} " == *" $unit "* ]]; then
    tags+=(--tags -needs:config-maxmemory)
  fi
  local common=(--single "unit/$unit" --durable --clients 1 --timeout 600
    --baseport "${REDIS_SUITE_BASEPORT:-21111}"
    --skipfile "$HERE/skip.txt" "${tags[@]}")
  if [[ " ${OWN_MODE[*]} " == *" $unit "* ]]; then
    (cd "$OWN" && timeout 1800 ./runtest "${common[@]}")
  else
    start_server "$(echo "$unit" | tr / _)"
    (cd "$OWN" && timeout 1800 ./runtest --host 127.0.0.1 --port "$PORT" "${common[@]}")
    stop_server
  fi 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
}

status=0
printf '%-14s %6s %6s %6s\n' unit passed failed skipped
for unit in "${UNITS[@]}"; do
  name="$(echo "$unit" | tr / _)"
  log="$OUT/$name.log"
  run_unit "$log" "$unit"
  ok=$(grep -ac '^\[ok\]' "$log" || true)
  err=$(grep -acE '^\[(err|exception|TIMEOUT)\]' "$log" || true)
  skip=$(grep -ac '^\[skip\]' "$log" || true)
  # A unit that dies before its summary (an exception outside a test, a timeout) fails.
  if ! grep -aq 'All tests passed\|following tests failed' "$log"; then err=$((err + 1)); fi
  printf '%-14s %6s %6s %6s\n' "$unit" "$ok" "$err" "$skip"
  if [ "$err" -gt 0 ]; then
    status=1
    grep -aE '^\[(err|exception|TIMEOUT)\]' "$log" | sed 's/^/    /' || true
    grep -a -A3 -E '^\[(err|exception)\]|Expected|Killing' "$log" | head -40 | sed 's/^/    | /' || true
  fi
done
exit $status
