#!/usr/bin/env python3
"""Reads bench_pingpong's JSON files (a run with the interposer, a run without it, ...), draws
one-way latency and bandwidth against message size, one line per run and mode, and prints the
Markdown table of the goals against the staged baseline (what a user writes without Ferry):

  device->device bandwidth at 64 MiB   >= 350 GB/s, and >= 90 % of raw CUDA IPC (mode ipc)
  8 B one-way, device buffers          <= 6 us
  -X halo face one-way (1.5 MiB)       <= 20 us
  host 8 B latency the interposer adds <= 3 %  (host mode with and without LD_PRELOAD)

  tools/plot_pingpong.py stock=stock.json ferry=ferry.json --png pingpong.png [--full]

Each input is FILE or LABEL=FILE (default label: "ferry" for a run with the interposer, "stock"
without). --save-json writes all inputs into one file, which this script reads back like the
originals. Without matplotlib there is no plot, only the tables."""
import argparse
import json
import math
import os
import sys

from sizes import MIB, size_name

NAN = float("nan")

GOAL_BW_GBPS = 350.0
GOAL_8B_US = 6.0
GOAL_FACE_US = 20.0
GOAL_HOST_PCT = 3.0
GOAL_IPC_FRACTION = 0.90
FACE_BYTES = 256 * 256 * 3 * 8  # the -X face of a 256^3 grid, radius 3, doubles


def load(specs):
    """Runs as dicts {label, file, preload, device_name, date, records, skipped, ...}."""
    runs = []
    for spec in specs:
        label, path = None, spec
        if "=" in spec and not os.path.exists(spec):
            label, path = spec.split("=", 1)
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"plot_pingpong: cannot read {path}: {e}", file=sys.stderr)
            continue
        parts = data["runs"] if "runs" in data else [data]  # --save-json output, or one run
        for part in parts:
            run = dict(part)
            run["file"] = part.get("file", path)
            run["label"] = label if label and len(parts) == 1 else part.get("label") or None
            run.setdefault("records", [])
            run.setdefault("skipped", [])
            if "preload" not in run:
                run["preload"] = any(r.get("preload") for r in run["records"])
            runs.append(run)
    taken = set()
    for run in runs:  # default labels: ferry / stock, then the file name
        if not run["label"]:
            base = "ferry" if run["preload"] else "stock"
            run["label"] = base if base not in taken else os.path.splitext(os.path.basename(run["file"]))[0]
        while run["label"] in taken:
            run["label"] += "'"
        taken.add(run["label"])
    return runs


def record(run, mode, size=None):
    for r in run["records"]:
        if r["mode"] == mode and (size is None or r["bytes"] == size):
            return r
    return None


def find(runs, mode, size=None, preload=None):
    """The record of `mode` (at `size`) from the first run that has it, preferring runs whose
    preload equals `preload` when given: (run, record) or (None, None)."""
    ordered = runs
    if preload is not None:
        ordered = [r for r in runs if bool(r["preload"]) == preload] + \
                  [r for r in runs if bool(r["preload"]) != preload]
    for run in ordered:
        r = record(run, mode, size)
        if r:
            return run, r
    return None, None


def fmt(v, digits=2, unit=""):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.{digits}f}{unit}"


def verdict(ok):
    return "n/a" if ok is None else ("**yes**" if ok else "no")


def between_gpus(run, ok):
    """The device goals name two GPUs: a run whose ranks share one (or do not say) measures
    another configuration, and cannot meet or miss them."""
    if run is None or ok is None:
        return verdict(None)
    if run.get("ranks_same_gpu") is not False:
        return "n/a (ranks share a GPU; the goal is between GPUs)"
    return verdict(ok)


def goals_table(runs):
    rows = []
    # Ferry's numbers come from a run with the interposer; the baseline preferably from one without.
    # 1. Device-to-device bandwidth at 64 MiB.
    fr, f = find(runs, "device", 64 * MIB, preload=True)
    br, b = find(runs, "staged", 64 * MIB, preload=False)
    ferry_bw = f["gbps"] if f else None
    base_bw = b["gbps"] if b else None
    rows.append(("device→device bandwidth, 64 MiB", f"≥ {GOAL_BW_GBPS:.0f} GB/s",
                 fmt(ferry_bw, 1, " GB/s"), fmt(base_bw, 1, " GB/s"),
                 fmt(ferry_bw / base_bw if f and b else None, 2, "×"),
                 between_gpus(fr, None if f is None else ferry_bw >= GOAL_BW_GBPS), src(fr, br)))
    # 1b. The same against raw CUDA IPC by hand (mode ipc, measured in the same call), and at 8 B.
    ir, i = find(runs, "ipc", 64 * MIB, preload=False)
    if i:
        frac = ferry_bw / i["gbps"] if f else None
        rows.append(("device→device 64 MiB vs raw CUDA IPC", f"≥ {100 * GOAL_IPC_FRACTION:.0f} %",
                     fmt(ferry_bw, 1, " GB/s"), fmt(i["gbps"], 1, " GB/s") + " (raw IPC)",
                     fmt(None if frac is None else 100 * frac, 1, " %"),
                     between_gpus(fr, None if frac is None else frac >= GOAL_IPC_FRACTION), src(fr, ir)))
    ir, i = find(runs, "ipc", 8, preload=False)
    if i:
        fr8, f8 = find(runs, "device", 8, preload=True)
        rows.append(("8 B one-way vs raw CUDA IPC", "—", lat(f8), lat(i) + " (raw IPC)", speedup(f8, i),
                     "—", src(fr8, ir)))
    # 2. 8 B one-way, device buffers.
    fr, f = find(runs, "device", 8, preload=True)
    br, b = find(runs, "staged", 8, preload=False)
    rows.append(("8 B one-way, device buffers", f"≤ {GOAL_8B_US:g} µs",
                 lat(f), lat(b), speedup(f, b),
                 between_gpus(fr, None if f is None else f["oneway_us_median"] <= GOAL_8B_US), src(fr, br)))
    # 3. The -X halo face.
    fr, f = find(runs, "face", preload=True)
    br, b = find(runs, "face_staged", preload=False)
    rows.append(("-X halo face one-way (1.5 MiB)", f"≤ {GOAL_FACE_US:g} µs",
                 lat(f), lat(b), speedup(f, b),
                 between_gpus(fr, None if f is None else f["oneway_us_median"] <= GOAL_FACE_US), src(fr, br)))
    # 4. Host latency added by the interposer: the two host runs.
    fr = next((r for r in runs if r["preload"] and record(r, "host", 8)), None)
    br = next((r for r in runs if not r["preload"] and record(r, "host", 8)), None)
    f = record(fr, "host", 8) if fr else None
    b = record(br, "host", 8) if br else None
    pct = 100 * (f["oneway_us_median"] / b["oneway_us_median"] - 1) if f and b else None
    rows.append(("host 8 B latency added by the interposer", f"≤ {GOAL_HOST_PCT:g} %",
                 lat(f) + (f" ({pct:+.1f} %)" if pct is not None else ""), lat(b) + " (no LD_PRELOAD)",
                 (f"{pct:+.1f} % (min {min_pct(f, b):+.1f} %)") if pct is not None else "n/a",
                 verdict(None if pct is None else pct <= GOAL_HOST_PCT), src(fr, br)))
    # The same within one run (MPI_Send vs PMPI_Send, interleaved), and the noise floor of that
    # comparison in the run without the interposer.
    for run, what in ((fr, "same run: MPI_Send/Recv vs PMPI_Send/Recv"),
                      (br, "noise floor: the same without the interposer")):
        if not run:
            continue
        h, p = record(run, "host", 8), record(run, "host_pmpi", 8)
        if not (h and p):
            continue
        d = 100 * (h["oneway_us_median"] / p["oneway_us_median"] - 1)
        rows.append((f"host 8 B, {what}", f"≤ {GOAL_HOST_PCT:g} %" if run is fr else "≈ 0 %",
                     lat(h) + f" ({d:+.1f} %)", lat(p) + " (PMPI)",
                     f"{d:+.1f} % (min {min_pct(h, p):+.1f} %)",
                     verdict(d <= GOAL_HOST_PCT) if run is fr else "—", src(run, run)))

    print("| goal | target | Ferry | baseline (staged by hand / without Ferry) | Ferry vs baseline | met | runs |")
    print("|---|---|---:|---:|---:|:-:|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print("\nOne-way = round trip / 2, median over the repetitions; \"Ferry vs baseline\" is the "
          "speedup (bandwidth ratio for the first row; for the host rows, the added latency, from the "
          "medians and, in parentheses, from the fastest round trips).")


def min_pct(a, b):
    return 100 * (a["oneway_us_min"] / b["oneway_us_min"] - 1)


def lat(r):
    return fmt(r["oneway_us_median"], 2, " µs") if r else "n/a"


def speedup(f, b):
    if not (f and b):
        return "n/a"
    return fmt(b["oneway_us_median"] / f["oneway_us_median"], 2, "×")


def src(fr, br):
    names = []
    for run in (fr, br):
        if run and run["label"] not in names:
            names.append(run["label"])
    return ", ".join(names) if names else "—"


def full_table(runs):
    cols = []
    for run in runs:
        for mode in dict.fromkeys(r["mode"] for r in run["records"]):
            cols.append((run, mode))
    sizes = sorted({r["bytes"] for run in runs for r in run["records"]})
    print("| size | " + " | ".join(f"{run['label']} {mode}" for run, mode in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for s in sizes:
        cells = []
        for run, mode in cols:
            r = record(run, mode, s)
            cells.append(f"{r['oneway_us_median']:.2f} µs / {r['gbps']:.2f} GB/s" if r else "")
        print(f"| {size_name(s)} | " + " | ".join(cells) + " |")
    print()


def plot(runs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: no plot")
        return
    fig, (ax_l, ax_b) = plt.subplots(1, 2, figsize=(14, 5.5))
    # Colour = mode (a face mode shares its transport's colour), line style = run.
    colors = {"host": "tab:blue", "staged": "tab:orange", "device": "tab:green", "ipc": "tab:red",
              "face_host": "tab:blue", "face_staged": "tab:orange", "face": "tab:green"}
    markers = {"face_host": "P", "face_staged": "s", "face": "*"}
    run_styles = ["-", "--", ":", "-."]
    for k, run in enumerate(sorted(runs, key=lambda r: not r["preload"])):
        ls = run_styles[k % len(run_styles)]
        for mode in dict.fromkeys(r["mode"] for r in run["records"]):
            if mode == "host_pmpi":  # the same as host within noise: in the table only
                continue
            rs = sorted((r for r in run["records"] if r["mode"] == mode), key=lambda r: r["bytes"])
            xs = [r["bytes"] for r in rs]
            style = dict(color=colors.get(mode), label=f"{run['label']}: {mode}")
            if mode in markers:  # one size: a point
                style.update(marker=markers[mode], markersize=11, linestyle="none",
                             markerfacecolor="none" if ls != "-" else style["color"])
            else:
                style.update(marker="o", markersize=3, linestyle=ls)
            ax_l.plot(xs, [r["oneway_us_median"] for r in rs], **style)
            ax_b.plot(xs, [r["gbps"] for r in rs], **style)
    ax_l.axhline(GOAL_8B_US, color="grey", linestyle="-.", linewidth=0.8)
    ax_l.annotate(f"goal: 8 B ≤ {GOAL_8B_US:g} µs", (1, GOAL_8B_US), fontsize=8, color="grey",
                  textcoords="offset points", xytext=(2, 3))
    ax_l.plot([FACE_BYTES], [GOAL_FACE_US], marker="_", markersize=20, color="grey")
    ax_l.annotate(f"goal: face ≤ {GOAL_FACE_US:g} µs", (FACE_BYTES, GOAL_FACE_US), fontsize=8,
                  color="grey", textcoords="offset points", xytext=(8, -10))
    ax_b.axhline(GOAL_BW_GBPS, color="grey", linestyle="-.", linewidth=0.8)
    ax_b.annotate(f"goal: 64 MiB ≥ {GOAL_BW_GBPS:g} GB/s", (1, GOAL_BW_GBPS), fontsize=8,
                  color="grey", textcoords="offset points", xytext=(2, 3))
    dev = next((r.get("device_name") for r in runs if r.get("device_name") not in (None, "none")), "no GPU")
    date = next((r.get("date") for r in runs if r.get("date")), "")
    same = next((r.get("ranks_same_gpu") for r in runs if r.get("ranks_same_gpu") is not None), None)
    where = "" if same is None else (", both ranks on one GPU" if same else ", one GPU per rank")
    mps = {mps_word(r) for r in runs}
    where += f", MPS {mps.pop()}" if len(mps) == 1 else ", MPS " + "/".join(sorted(mps))
    ax_l.set(xscale="log", yscale="log", xlabel="message size (B)", ylabel="one-way latency (µs, median)",
             title=f"Ping-pong latency, {dev}{where}")
    ax_b.set(xscale="log", yscale="log", xlabel="message size (B)", ylabel="GB/s (size / one-way time)",
             title=f"Ping-pong bandwidth ({date})")
    for ax in (ax_l, ax_b):
        ax.set_xscale("log", base=2)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")



def mps_word(run):
    """Whether CUDA MPS served the run's ranks (bench_pingpong's "mps"; older files lack it)."""
    m = run.get("mps")
    return "on" if m is True else "off" if m is False else "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="bench_pingpong JSON files, FILE or LABEL=FILE")
    ap.add_argument("--png", help="write the plot here")
    ap.add_argument("--full", action="store_true", help="also print every size of every mode")
    ap.add_argument("--save-json", metavar="FILE", help="write all inputs into one JSON file")
    args = ap.parse_args()
    runs = load(args.inputs)
    if not any(run["records"] for run in runs):
        print("plot_pingpong: no records in the inputs", file=sys.stderr)
        return 1
    if args.save_json:
        with open(args.save_json, "w") as f:
            json.dump({"runs": runs}, f, indent=1)
        print(f"json: {args.save_json}")
    if args.png:
        plot(runs, args.png)
    for run in runs:
        skipped = ", ".join(f"{s['mode']} ({s['reason']})" for s in run["skipped"])
        print(f"run {run['label']}: {os.path.basename(run['file'])}, interposer {'loaded' if run['preload'] else 'not loaded'}, "
              f"{run.get('device_name', '?')}, MPS {mps_word(run)}, {run.get('mpi', '')}, {run.get('date', '')}"
              + (f"; skipped: {skipped}" if skipped else ""))
    print()
    if args.full:
        full_table(runs)
    goals_table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
