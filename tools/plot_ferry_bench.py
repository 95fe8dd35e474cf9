#!/usr/bin/env python3
"""Reads ferry-bench's JSON, draws bandwidth against size (log-log, one line per case: memory or
method and direction) for each family and a bar chart of the runtime-call costs, and prints a
Markdown table: peak bandwidth of each line (and the size it is reached at) and its latency at the
smallest size; for `calls`, the median and minimum cost of each call.

  tools/plot_ferry_bench.py ferry_bench.json                       # tables only
  tools/plot_ferry_bench.py ferry_bench.json --png-dir plots       # one PNG per family
  tools/plot_ferry_bench.py ferry_bench.json --png ferry_bench.png # all families in one PNG

Without matplotlib there is no plot, only the tables. GB/s counts both directions for "bidir"."""
import argparse
import json
import math
import os
import sys
from collections import OrderedDict

from sizes import MIB, size_name

FAMILY_ORDER = ["copy", "peer", "copy2d3d", "pack", "calls"]
TITLES = {
    "copy": "Copies by memory kind (H2D / D2H / D2D, bidir = both at once)",
    "peer": "GPU 0 <-> GPU 1 (cudaMemcpyPeerAsync)",
    "copy2d3d": "cudaMemcpy2D/3D of strided regions vs contiguous",
    "pack": "Ferry pack_async, MPI vector (block B, stride 2B)",
    "calls": "Host cost of runtime calls (median)",
}


def fmt(v, digits=2):
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return "n/a"
    return f"{v:.{digits}f}"


def load(path):
    with open(path) as f:
        data = json.load(f)
    need = ("family", "case", "method", "direction", "bytes", "us_median", "us_min", "gbps", "reps")
    rows = []
    for r in data.get("results", []):
        missing = [k for k in need if k not in r]
        if missing:
            print(f"plot_ferry_bench: record without {', '.join(missing)}: {r}", file=sys.stderr)
            continue
        rows.append(r)
    return data, rows


def by_family(rows):
    """family -> case -> records sorted by size, families in the program's order."""
    fams = OrderedDict()
    for name in FAMILY_ORDER + sorted({r["family"] for r in rows} - set(FAMILY_ORDER)):
        cases = OrderedDict()
        for r in rows:
            if r["family"] == name:
                cases.setdefault(r["case"], []).append(r)
        if cases:
            fams[name] = OrderedDict((c, sorted(rs, key=lambda r: r["bytes"])) for c, rs in cases.items())
    return fams


def print_tables(data, fams):
    opts = data.get("options", {})
    print(f"ferry-bench: {data.get('device', '?')}, {data.get('devices', '?')} GPU(s), {data.get('date', '')}, "
          f"host {data.get('host', '?')} (CPU {data.get('cpu', '?')}, NUMA {data.get('cpu_numa') or '?'}; "
          f"GPU NUMA {data.get('gpu_numa') or '?'}); quick={opts.get('quick')}, flush={opts.get('flush')}, "
          f"gate={opts.get('gate')}, gate timeouts {data.get('gate_timeouts', 0)} of {data.get('gated_samples', 0)}")
    for s in data.get("skipped", []):
        print(f"skipped: {s.get('family')}: {s.get('reason')}")
    for n in data.get("notes", []):
        print(f"note: {n}")
    print()
    bw = [(f, c, rs) for f, cases in fams.items() if f != "calls" for c, rs in cases.items()]
    if bw:
        print("| family | case | timing | peak GB/s | at | smallest size | median µs there | min µs there |")
        print("|---|---|---|---:|---:|---:|---:|---:|")
        for f, c, rs in bw:
            peak = max(rs, key=lambda r: r["gbps"])
            small = rs[0]
            print(f"| {f} | {c} | {small.get('timing', '')} | {fmt(peak['gbps'])} | {size_name(peak['bytes'])} | "
                  f"{size_name(small['bytes'])} | {fmt(small['us_median'])} | {fmt(small['us_min'])} |")
        print()
    if "calls" in fams:
        print("| call | what is timed | median µs | min µs | samples |")
        print("|---|---|---:|---:|---:|")
        for c, rs in fams["calls"].items():
            for r in rs:
                print(f"| {c} | {r['direction']} | {fmt(r['us_median'], 3)} | {fmt(r['us_min'], 3)} | {r['reps']} |")
        print()
    print("GB/s = bytes / median time (bidir: both directions); latency = median time at the line's "
          "smallest size. Timing: gated = CUDA events behind a spin kernel (GPU time only), events = "
          "CUDA events around the calls, host = steady_clock.")


def draw_bandwidth(ax, family, cases, plt):
    styles = {"H2D": "-", "D2H": "--", "D2D": "-.", "bidir": ":", "0->1": "-", "1->0": "--", "pack": "-"}
    # Colour = memory/method and line style = direction where that tells the lines apart (copy,
    # peer); otherwise one colour per line.
    pairs = [(rs[0]["method"], rs[0]["direction"]) for rs in cases.values()]
    if len(set(pairs)) == len(pairs):
        methods = list(dict.fromkeys(m for m, _ in pairs))
        cmap = plt.get_cmap("tab10")
        color_of = lambda i: cmap(methods.index(pairs[i][0]) % 10)
    else:
        cmap = plt.get_cmap("tab20")
        color_of = lambda i: cmap(i % 20)
    for i, (case, rs) in enumerate(cases.items()):
        xs = [r["bytes"] for r in rs]
        ys = [r["gbps"] for r in rs]
        if not any(y > 0 for y in ys):
            continue
        style = dict(color=color_of(i), label=case, linewidth=1.2)
        if len(rs) == 1:
            style.update(marker="D", markersize=6, linestyle="none")
        else:
            style.update(marker="o", markersize=2.5, linestyle=styles.get(rs[0]["direction"], "-"))
        ax.plot(xs, ys, **style)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(xlabel="bytes", ylabel="GB/s (median)", title=TITLES.get(family, family))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=6, ncol=2 if len(cases) > 12 else 1)


def draw_calls(ax, cases):
    labels, med, mins = [], [], []
    for case, rs in cases.items():
        for r in rs:
            labels.append(case)
            med.append(r["us_median"])
            mins.append(r["us_min"])
    ys = list(range(len(labels)))
    ax.barh(ys, med, color="tab:blue", label="median")
    ax.plot(mins, ys, linestyle="none", marker="|", markersize=8, color="black", label="min")
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set(xlabel="µs per call (host clock)", title=TITLES["calls"])
    ax.grid(True, axis="x", which="major", alpha=0.3)
    ax.legend(fontsize=7)


def draw(ax, family, cases, plt):
    if family == "calls":
        draw_calls(ax, cases)
    else:
        draw_bandwidth(ax, family, cases, plt)


def plot(data, fams, png=None, png_dir=None):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: no plot")
        return
    if not fams:
        print("plot_ferry_bench: no records: no plot")
        return
    dev = data.get("device", "?")
    if png_dir:
        os.makedirs(png_dir, exist_ok=True)
        for family, cases in fams.items():
            fig, ax = plt.subplots(figsize=(9, 6))
            draw(ax, family, cases, plt)
            fig.suptitle(f"ferry-bench {family}, {dev}", fontsize=10)
            fig.tight_layout()
            path = os.path.join(png_dir, f"ferry_bench_{family}.png")
            fig.savefig(path, dpi=110)
            plt.close(fig)
            print(f"plot: {path}")
    if png:
        n = len(fams)
        cols = 1 if n == 1 else 2
        rows = (n + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(8.5 * cols, 5.8 * rows), squeeze=False)
        for ax, (family, cases) in zip(axes.flat, fams.items()):
            draw(ax, family, cases, plt)
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        fig.suptitle(f"ferry-bench, {dev}, {data.get('date', '')}", fontsize=11)
        fig.tight_layout()
        fig.savefig(png, dpi=100)
        plt.close(fig)
        print(f"plot: {png}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="ferry-bench --json output")
    ap.add_argument("--png", help="one PNG with a panel per family")
    ap.add_argument("--png-dir", help="one PNG per family in this folder (ferry_bench_<family>.png)")
    ap.add_argument("--family", help="only these families (comma-separated)")
    args = ap.parse_args()
    try:
        data, rows = load(args.json)
    except (OSError, ValueError) as e:
        print(f"plot_ferry_bench: cannot read {args.json}: {e}", file=sys.stderr)
        return 1
    if args.family:
        keep = set(args.family.split(","))
        rows = [r for r in rows if r["family"] in keep]
    fams = by_family(rows)
    if args.png or args.png_dir:
        plot(data, fams, args.png, args.png_dir)
    print_tables(data, fams)
    if not rows:
        print("plot_ferry_bench: no records" + (" (skipped: no GPU)" if data.get("device") == "none" else ""),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
