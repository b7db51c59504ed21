#!/usr/bin/env python3
"""Draw the write/space/throughput plane of the GC policies, one panel per workload.

Reads docs/data/gc-plane.csv (every row taken from the dated record in docs/results/ that
it names) and writes docs/gc-plane.png: per workload, bytes written to the device over
user bytes (y) against the mean space amplification over the run (x), each point labelled
with its run throughput in thousands of ops/s. The default policy's points at several
space-amplification targets are joined into its curve.

    pip install matplotlib
    scripts/gc-plane.py [--csv docs/data/gc-plane.csv] [--out docs/gc-plane.png]
"""

import argparse
import csv
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
STYLE = {  # engine -> (marker, colour, legend label)
    "lifetime": ("o", "tab:blue", "halflife lifetime (default), at target T"),
    "oracle": ("*", "tab:green", "halflife oracle (bound; benchmarks only)"),
    "titan": ("s", "tab:orange", "halflife titan"),
    "terark": ("D", "tab:brown", "halflife terark"),
    "rocksdb-native": ("^", "tab:red", "RocksDB (values in the tree)"),
    "rocksdb-native-blob": ("v", "tab:pink", "RocksDB with BlobDB"),
    "badger": ("P", "tab:purple", "Badger"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=ROOT / "docs/data/gc-plane.csv", type=pathlib.Path)
    ap.add_argument("--out", default=ROOT / "docs/gc-plane.png", type=pathlib.Path)
    args = ap.parse_args()

    rows = list(csv.DictReader(args.csv.open()))
    for r in rows:
        if not (ROOT / "docs/results" / r["record"]).is_file():
            raise SystemExit(f"{args.csv}: row {r} names no record in docs/results/")
    workloads = list(dict.fromkeys(r["workload"] for r in rows))

    cols = 4
    nrows = -(-(len(workloads) + 1) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.8 * nrows), squeeze=False)
    flat = [ax for line in axes for ax in line]
    for ax, wl in zip(flat, workloads):
        mine = [r for r in rows if r["workload"] == wl]
        curve = sorted(
            (r for r in mine if r["engine"] == "lifetime"), key=lambda r: float(r["target"])
        )
        ax.plot(
            [float(r["mean_space"]) for r in curve],
            [float(r["device_wa"]) for r in curve],
            color=STYLE["lifetime"][1],
            lw=1,
            zorder=1,
        )
        for r in mine:
            marker, colour, _ = STYLE[r["engine"]]
            x, y = float(r["mean_space"]), float(r["device_wa"])
            ax.scatter(x, y, marker=marker, color=colour, s=70, zorder=2)
            label = f"{float(r['run_kops']):.0f}K"
            if r["engine"] == "lifetime":
                label = f"T={r['target']}: {label}"
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
        ax.set_title(wl, fontsize=10)
        ax.set_xlabel("mean space amplification over the run")
        ax.set_ylabel("device bytes / user bytes")
        ax.grid(alpha=0.3)
    legend_ax = flat[len(workloads)]
    legend_ax.axis("off")
    for engine, (marker, colour, label) in STYLE.items():
        legend_ax.scatter([], [], marker=marker, color=colour, s=70, label=label)
    legend_ax.legend(loc="center", fontsize=8, frameon=False,
                     title="labels: run throughput, K ops/s", title_fontsize=8)
    for ax in flat[len(workloads) + 1:]:
        ax.axis("off")
    fig.suptitle(
        "Full scale (1M records, 4M updates, 1 GiB cgroup per engine; 16 KiB: 250K, 1M); "
        "lower left is better; rows of docs/data/gc-plane.csv",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
