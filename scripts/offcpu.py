#!/usr/bin/env python3
"""Off-CPU profile of a command: where its threads wait, by stack, in wall time.

An on-CPU profile (`perf record -F`) shows where a thread computes; a tail latency or a
throughput gap is often time a thread spends not running: blocked on a lock, in a
back-pressure sleep, in direct reclaim, waiting for I/O. This records every context switch
of the machine (`perf record -e sched:sched_switch -a`, with the call stack of the thread
that leaves the CPU) while COMMAND runs, and charges each of a thread's off-CPU intervals
(switched out at t0, switched in again at t1) to the stack it left with.

    scripts/offcpu.py --out bench-out/offcpu/NAME [--process halflife] [--threads REGEX] \
        [--top 12] -- COMMAND [ARGS...]
    scripts/offcpu.py --out bench-out/offcpu/NAME --report-only ...   # report again

Writes DIR/perf.data, DIR/offcpu.folded (`frame;frame;... microseconds`, the input of any
flame-graph tool) and DIR/offcpu.txt (what is printed): per thread name, its threads' wall
time seen, time off the CPU, and the stacks that hold most of it (total, count, longest),
each shown by its innermost frames of this project and the kernel function it slept in.

Needs `perf` (Debian: linux-perf) with access to tracepoints (root, or
kernel.perf_event_paranoid <= -1). Stacks are walked by frame pointers: build the binary
with `RUSTFLAGS="-C force-frame-pointers=yes"` so that the project's frames are there
(the standard library's and libc's own frames may still be cut short).
"""

import argparse
import collections
import os
import re
import subprocess
import sys

HEADER = re.compile(
    r"^\s*(?P<comm>.+?)\s+(?P<pid>-?\d+)/(?P<tid>\d+)\s+(?P<time>\d+\.\d+):\s+"
    r"sched:sched_switch:\s+(?P<trace>.*)$")
TRACE = re.compile(
    r"prev_comm=(?P<pcomm>.*?) prev_pid=(?P<ppid>\d+) .*?prev_state=(?P<state>\S+) ==> "
    r"next_comm=(?P<ncomm>.*?) next_pid=(?P<npid>\d+)")
FRAME = re.compile(r"^\s+[0-9a-f]+\s+(?P<sym>.*?)(\+0x[0-9a-f]+)?\s+\((?P<dso>.*)\)$")

# Kernel functions that only say "this thread is switching out"; the reason is below them.
SCHED = {"__schedule", "schedule", "schedule_idle", "preempt_schedule_common",
         "__cond_resched", "preempt_schedule", "preempt_schedule_irq",
         "schedule_timeout", "io_schedule", "schedule_hrtimeout_range_clock",
         "schedule_preempt_disabled", "__schedule_loop", "do_nanosleep",
         "hrtimer_nanosleep", "schedule_hrtimeout_range"}


def short(sym):
    """A symbol without generic arguments, closure markers or hashes."""
    out, depth = [], 0
    for ch in sym:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out)
    s = re.sub(r"::\{\{closure\}\}|::h[0-9a-f]{16}$|\{closure#\d+\}", "", s)
    return s.strip(":") or sym


def signature(frames, ours):
    """What a stack says in one line: the kernel function it slept in, then the innermost
    frames of this project (up to three), innermost first."""
    kernel = [f for f, dso in frames if "kernel" in dso]
    reason = next((f for f in kernel if f not in SCHED), kernel[0] if kernel else "?")
    user = [short(f) for f, dso in frames if "kernel" not in dso]
    mine = [f for f in user if ours.search(f)][:3]
    if not mine:
        mine = [f for f in user if f and f != "[unknown]"][:2]
    return f"{reason} <- " + " <- ".join(mine or ["?"])


def parse(lines):
    """Yields (comm, pid, tid, time, trace match, frames) per sched_switch event."""
    head, frames = None, []
    for line in lines:
        if not line.strip():
            if head:
                yield head + (frames,)
            head, frames = None, []
            continue
        m = HEADER.match(line)
        if m:
            if head:
                yield head + (frames,)
            t = TRACE.search(m["trace"])
            head = (m["comm"], int(m["pid"]), int(m["tid"]), float(m["time"]), t) if t else None
            frames = []
            continue
        f = FRAME.match(line)
        if f and head:
            frames.append((f["sym"], f["dso"]))
    if head:
        yield head + (frames,)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--process", default="halflife",
                    help="profile the threads of processes whose main thread has this name")
    ap.add_argument("--threads", default="", help="only thread names matching this regex")
    ap.add_argument("--ours", default=r"halflife|engine|crates/",
                    help="regex naming this project's frames")
    ap.add_argument("--top", type=int, default=12, help="stacks shown per thread name")
    ap.add_argument("--report-only", action="store_true", help="report DIR/perf.data again")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    os.makedirs(a.out, exist_ok=True)
    data = os.path.join(a.out, "perf.data")
    if not a.report_only:
        if not cmd:
            sys.exit("offcpu.py: no command given (put it after --)")
        # perf itself checks it can write; check the directory now, not after the run.
        if not os.access(a.out, os.W_OK):
            sys.exit(f"offcpu.py: cannot write to {a.out}")
        rc = subprocess.call(["perf", "record", "-q", "-e", "sched:sched_switch", "-a",
                              "--call-graph", "fp", "-o", data, "--", *cmd])
        if rc != 0:
            print(f"offcpu.py: the command exited with {rc}; reporting what was recorded",
                  file=sys.stderr)
    elif not os.path.exists(data):
        sys.exit(f"offcpu.py: {data} does not exist")
    script = subprocess.Popen(
        ["perf", "script", "-i", data, "-F", "comm,pid,tid,time,event,trace,ip,sym,dso"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace")

    ours = re.compile(a.ours)
    only = re.compile(a.threads) if a.threads else None
    main_comm = {}        # pid -> name of its main thread, as seen
    out_at = {}           # tid -> (time it left the CPU, signature, folded stack, state)
    first, last = {}, {}  # tid -> first and last time seen
    name = {}             # tid -> thread name
    pid_of = {}           # tid -> pid
    off = collections.defaultdict(lambda: [0.0, 0, 0.0, collections.Counter()])
    folded = collections.Counter()
    for comm, pid, tid, t, tr, frames in parse(script.stdout):
        if pid == tid:
            main_comm[pid] = comm
        prev, nxt = int(tr["ppid"]), int(tr["npid"])
        for x in (prev, nxt):
            first.setdefault(x, t)
            last[x] = t
        name[prev] = tr["pcomm"]
        pid_of[prev] = pid
        if prev != 0:
            fold = ";".join(short(f) for f, _ in reversed(frames))
            out_at[prev] = (t, signature(frames, ours), fold, tr["state"])
        if nxt in out_at:
            t0, sig, fold, state = out_at.pop(nxt)
            key = (tr["ncomm"], pid_of.get(nxt, -1), sig)
            e = off[key]
            e[0] += t - t0
            e[1] += 1
            e[2] = max(e[2], t - t0)
            e[3][state] += 1
            folded[(tr["ncomm"], pid_of.get(nxt, -1), fold)] += t - t0
    script.wait()

    def wanted(comm, pid):
        return main_comm.get(pid) == a.process and (not only or only.search(comm))

    lines = []
    by_thread = collections.defaultdict(list)
    for (comm, pid, sig), e in off.items():
        if wanted(comm, pid):
            by_thread[comm].append((sig, e))
    # Wall time of each thread name: the sum over its threads of first to last switch seen.
    wall = collections.Counter()
    for tid, n in name.items():
        if wanted(n, pid_of.get(tid, -1)):
            wall[n] += last[tid] - first[tid]
    if not by_thread:
        lines.append(f"no off-CPU time recorded for threads of processes named {a.process!r}")
    for comm in sorted(by_thread, key=lambda c: -sum(e[0] for _, e in by_thread[c])):
        rows = sorted(by_thread[comm], key=lambda r: -r[1][0])
        total = sum(e[0] for _, e in rows)
        lines.append(f"\n## {comm}: {total:.2f} s off the CPU of {wall[comm]:.2f} s of its "
                     f"threads' wall time")
        lines.append(f"{'total ms':>10} {'share':>6} {'count':>8} {'max ms':>8} state  stack")
        for sig, (tot, n, mx, st) in rows[:a.top]:
            state = ",".join(s for s, _ in st.most_common(2))
            lines.append(f"{tot * 1e3:10.1f} {tot / total:6.1%} {n:8d} {mx * 1e3:8.2f} "
                         f"{state:6} {sig}")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "offcpu.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.out, "offcpu.folded"), "w") as f:
        for (comm, pid, fold), secs in folded.most_common():
            if wanted(comm, pid):
                f.write(f"{comm};{fold} {int(secs * 1e6)}\n")


if __name__ == "__main__":
    main()
