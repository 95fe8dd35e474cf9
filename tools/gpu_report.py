#!/usr/bin/env python3
"""Reads bench_gpu_pack's JSON (and bench_torch's, if given), draws the plots and prints the table
of the goals: 2-D cases >= 16 MiB against the sector roofline and PyTorch, faces against the
hand-written kernel, the batch against one face."""
import argparse
import json
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("torch", nargs="?")
    ap.add_argument("--png", default=None)
    ap.add_argument("--alt", action="append", default=[],
                    help="NAME=FILE: bench JSON of an alternative run, shown as a column NAME")
    args = ap.parse_args()
    data = json.load(open(args.bench))
    rows = list(data["results"])
    if args.torch:
        try:
            rows += json.load(open(args.torch))["results"]
        except (OSError, ValueError):
            pass
    t = defaultdict(dict)  # (group, name) -> method -> seconds
    meta = {}
    for r in rows:
        t[(r["group"], r["name"])][r["method"]] = r["seconds"]
        meta[(r["group"], r["name"])] = r
    alt_names = []
    for spec in args.alt:
        name, _, path = spec.partition("=")
        try:
            for r in json.load(open(path))["results"]:
                if r["method"] == "ferry_pack":
                    t[(r["group"], r["name"])]["alt_" + name] = r["seconds"]
            alt_names.append(name)
        except (OSError, ValueError):
            pass
    gbs = lambda key, m: meta[key]["bytes"] / t[key][m] / 1e9 if m in t[key] else float("nan")

    if args.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, axes = plt.subplots(1, 2, figsize=(13, 5))
            methods = ["ferry_pack", "ferry_unpack", "hand_kernel", "memcpy2d", "torch_copy",
                       "memcpy_per_block", "roofline"]

            def panel(ax, xs_all, key_of, xlabel, title):
                for m in methods:
                    xs = [x for x in xs_all if m in t[key_of(x)]]
                    if xs:
                        ax.plot(xs, [gbs(key_of(x), m) for x in xs], marker="o", label=m,
                                linestyle="--" if m == "roofline" else "-")
                ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="GB/s packed", title=title)
                ax.legend(fontsize=8)

            big = sorted({meta[k]["block"] for k in t if k[0] == "2d" and meta[k]["bytes"] == 64 << 20})
            panel(axes[0], big, lambda b: ("2d", f"{64 << 20}B/{b}B"), "contiguous block (B)",
                  f"2-D objects of 64 MiB, {data['device']}")
            sizes = sorted({meta[k]["bytes"] for k in t if k[0] == "2d" and meta[k]["block"] == 8})
            panel(axes[1], sizes, lambda s: ("2d", f"{s}B/8B"), "object size (B)",
                  "2-D objects, 8-byte blocks, 512 B pitch")
            fig.tight_layout()
            fig.savefig(args.png, dpi=110)
            print(f"plot: {args.png}")
        except ImportError:
            print("matplotlib not importable: no plot")

    print(f"\ndevice {data['device']}, device-to-device copy {data['copy_rate_Bps'] / 1e9:.0f} GB/s (r+w)")
    print(f"{'case':<22}{'ferry GB/s':>11}{'unpack':>9}{'%roof':>7}{'x torch':>9}{'x hand':>8}"
          f"{'x 2D/3D':>9}" + "".join(f"{n + ' GB/s':>10}" for n in alt_names))
    for key in sorted(t, key=lambda k: (k[0], meta[k]["bytes"], meta[k]["block"])):
        g, name = key
        if g == "2d" and meta[key]["bytes"] < 16 << 20:
            continue
        m = t[key]
        fp = m.get("ferry_pack") or m.get("ferry_batch")
        if fp is None:
            continue
        roof = 100 * m["roofline"] / fp if "roofline" in m else float("nan")
        up = m.get("ferry_unpack") or m.get("ferry_batch_unpack")
        cp = m.get("memcpy2d") or m.get("memcpy3d")
        print(f"{g + ' ' + name:<22}{meta[key]['bytes'] / fp / 1e9:>11.0f}"
              f"{meta[key]['bytes'] / up / 1e9 if up else float('nan'):>9.0f}{roof:>7.0f}"
              f"{m['torch_copy'] / fp if 'torch_copy' in m else float('nan'):>9.2f}"
              f"{m['hand_kernel'] / fp if 'hand_kernel' in m else float('nan'):>8.2f}"
              f"{cp / fp if cp else float('nan'):>9.2f}"
              + "".join(f"{meta[key]['bytes'] / m['alt_' + n] / 1e9 if 'alt_' + n in m else float('nan'):>10.0f}"
                        for n in alt_names))
    for key in t:
        if key[0] == "overhead":
            for m, v in t[key].items():
                print(f"host cost, {key[1]}: {m} {v * 1e6:.2f} us")
        if key[0] == "batch":
            m = t[key]
            us = lambda name: f"{m[name] * 1e6:.1f} us" if name in m else "n/a"
            if "ferry_batch" in m:
                face = t.get(("face", "-X"), {}).get("ferry_pack")
                print(f"batch {key[1]}: {us('ferry_batch')} in one launch, "
                      f"{us('ferry_separate_launches')} as separate launches, "
                      f"one -X face {face * 1e6 if face else float('nan'):.1f} us, roofline {us('roofline')}")
            else:  # the parts of a batch, timed on the device only
                print(f"batch {key[1]}: pack {us('ferry_batch_device_only')}, "
                      f"unpack {us('ferry_batch_unpack_device_only')} (device time), roofline {us('roofline')}")

if __name__ == "__main__":
    main()
