#!/usr/bin/env python3
"""Summarize Ferry benchmark JSON (Google Benchmark --benchmark_out_format=json) as tables.

    tools/plot_bench.py [--markdown] [--matrix] [--plot DIR] FILE.json [FILE.json ...]

Reads the output of bench_pack_cpu and/or bench_commit. When the run has repetitions, the median
aggregate is used; otherwise the mean of the runs of each benchmark.

bench_pack_cpu: one row per case with Ferry and MPI throughput (GB/s = 1e9 bytes of packed data per
second) for pack and unpack and the ratio Ferry / MPI; cases where Ferry is slower than MPI are
listed at the end (ratio < 1, marked with '<'). --matrix adds the ratio as an object size x block
size matrix for the 2D cases.
bench_commit: one row per datatype with the (CPU) time of each step in microseconds.

--plot DIR writes PNG plots of the 2D cases if matplotlib is installed (skipped with a note if not).
Only the standard library is needed otherwise.
"""

import argparse
import json
import math
import os
import sys
from collections import OrderedDict


def load(paths):
    """Returns (entries, context): entries maps run_name -> entry (median or mean)."""
    runs = OrderedDict()
    medians = {}
    cvs = {}
    context = {}
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print("note: skipping %s (%s)" % (path, e), file=sys.stderr)
            continue
        context.update(doc.get("context", {}))
        for b in doc.get("benchmarks", []):
            name = b.get("run_name", b["name"])
            if name.endswith("/real_time"):
                name = name[: -len("/real_time")]
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == "median":
                    medians[name] = dict(b)
                elif b.get("aggregate_name") == "cv":
                    cvs[name] = b
                continue
            runs.setdefault(name, []).append(b)
    # The coefficient of variation of the repetitions (of the time), for judging noise.
    for name, m in medians.items():
        if name in cvs and "cpu_time" in cvs[name]:
            m["cv"] = cvs[name]["cpu_time"]
    out = OrderedDict()
    for name, rs in runs.items():
        if name in medians:
            out[name] = medians[name]
            continue
        errors = [r for r in rs if r.get("error_occurred")]
        if errors:
            out[name] = errors[0]
            continue
        e = dict(rs[0])
        for key in ("real_time", "cpu_time", "bytes_per_second", "GBps"):
            vals = [r[key] for r in rs if key in r]
            if vals:
                e[key] = sum(vals) / len(vals)
        out[name] = e
    # Names only in aggregates (run without per-repetition output).
    for name, m in medians.items():
        out.setdefault(name, m)
    return out, context


def gbps(e):
    if e is None or e.get("error_occurred"):
        return None
    if "GBps" in e:
        return e["GBps"]
    if "bytes_per_second" in e:
        return e["bytes_per_second"] / 1e9
    return None


def to_us(e):
    if e is None or e.get("error_occurred"):
        return None
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[e.get("time_unit", "ns")]
    return e["cpu_time"] * scale


def fmt(x, digits=2):
    if x is None:
        return "ERR"
    if x >= 100:
        return "%.0f" % x
    if x >= 10:
        return "%.1f" % x
    return "%.*f" % (digits, x)


def fmt_bytes(n):
    n = int(n)
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def table(rows, header, markdown):
    if markdown:
        lines = ["| " + " | ".join(header) + " |",
                 "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    def line(r):
        return "  ".join(str(x).ljust(w) if i == 0 else str(x).rjust(w)
                         for i, (x, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def ratio_str(f, m, markdown):
    if f is None or m is None or m == 0:
        return "n/a", None
    r = f / m
    s = "%.2f" % r
    if r < 1:
        s = ("**%s**" if markdown else "%s <") % s
    return s, r


HALO_ORDER = ["-X", "-Y", "-Z", "-Z_planes"]


def case_key(case):
    """Sort order of pack cases (runs may be randomly interleaved): 2D by size then block, halos."""
    if case.startswith("2d/"):
        kv = dict(p.split("=") for p in case.split("/")[1:])
        return (0, int(kv["obj"]), int(kv["blk"]), "")
    if case.startswith("halo/"):
        face = case[len("halo/"):]
        return (1, HALO_ORDER.index(face) if face in HALO_ORDER else len(HALO_ORDER), 0, face)
    return (2, 0, 0, case)


def pack_report(entries, markdown, matrix):
    cases = OrderedDict()
    for name, e in entries.items():
        parts = name.split("/", 2)
        if len(parts) != 3 or parts[0] not in ("pack", "unpack"):
            continue
        op, impl, case = parts
        cases.setdefault(case, {})[(op, impl)] = e
    if not cases:
        return ""
    cases = OrderedDict(sorted(cases.items(), key=lambda kv: case_key(kv[0])))
    capi = any(impl == "ferry_c" for c in cases.values() for (_, impl) in c)
    header = ["case", "bytes", "runs", "pack Ferry", "pack MPI", "ratio",
              "unpack Ferry", "unpack MPI", "ratio"]
    if capi:
        header += ["pack Ferry C", "unpack Ferry C"]
    rows, losses, ratios = [], [], {}
    for case, c in cases.items():
        any_e = next(iter(c.values()))
        nbytes = any_e.get("bytes")
        runs = c.get(("pack", "ferry"), {}).get("runs")
        row = [case, fmt_bytes(nbytes) if nbytes else "?", "%d" % runs if runs else "?"]
        for op in ("pack", "unpack"):
            f, m = gbps(c.get((op, "ferry"))), gbps(c.get((op, "mpi")))
            s, r = ratio_str(f, m, markdown)
            row += [fmt(f), fmt(m), s]
            ratios[(case, op)] = r
            if r is not None and r < 1:
                cv = [c[(op, impl)].get("cv") for impl in ("ferry", "mpi")]
                note = ("" if None in cv else
                        " (run-to-run variation: Ferry %.1f%%, MPI %.1f%%)" % (100 * cv[0], 100 * cv[1]))
                losses.append((case, op, f, m, (r, note)))
            if f is None and c.get((op, "ferry")) is not None:
                losses.append((case, op, None, m,
                               c[(op, "ferry")].get("error_message", "error")))
        if capi:
            for op in ("pack", "unpack"):
                e = c.get((op, "ferry_c"))
                row.append("-" if e is None else fmt(gbps(e)))
        rows.append(row)
    out = ["CPU pack/unpack throughput, GB/s (1e9 B/s of packed data); ratio = Ferry / MPI", "",
           table(rows, header, markdown), ""]
    if matrix:
        out += matrix_report(ratios, markdown)
    if losses:
        out.append("Ferry slower than MPI (or failed), %d of %d:" % (len(losses), 2 * len(cases)))
        for case, op, f, m, r in losses:
            if f is None:
                out.append("  %s %s: Ferry error: %s (MPI %s GB/s)" % (op, case, r, fmt(m)))
            else:
                out.append("  %s %s: Ferry %s GB/s, MPI %s GB/s, ratio %.3f%s"
                           % (op, case, fmt(f, 3), fmt(m, 3), r[0], r[1]))
    else:
        out.append("Ferry >= MPI on every case.")
    rs = [r for r in ratios.values() if r]
    if rs:
        geo = math.exp(sum(math.log(r) for r in rs) / len(rs))
        out.append("Ratio Ferry/MPI over %d measurements: min %.2f, geometric mean %.2f, max %.2f"
                   % (len(rs), min(rs), geo, max(rs)))
    return "\n".join(out) + "\n"


def matrix_report(ratios, markdown):
    out = []
    objs, blks = [], []
    for (case, _op) in ratios:
        if not case.startswith("2d/"):
            continue
        kv = dict(p.split("=") for p in case.split("/")[1:])
        o, b = int(kv["obj"]), int(kv["blk"])
        if o not in objs:
            objs.append(o)
        if b not in blks:
            blks.append(b)
    if not objs:
        return out
    objs.sort()
    blks.sort()
    for op in ("pack", "unpack"):
        header = ["obj \\ blk"] + ["%d" % b for b in blks]
        rows = []
        for o in objs:
            row = [fmt_bytes(o)]
            for b in blks:
                r = ratios.get(("2d/obj=%d/blk=%d" % (o, b), op))
                row.append("" if r is None else ("%.2f" % r) + ("<" if r < 1 else ""))
            rows.append(row)
        out += ["%s: Ferry / MPI throughput ratio, 2D objects (pitch 512 B)" % op, "",
                table(rows, header, markdown), ""]
    return out


COMMIT_STEPS = [("translate", "translate"), ("translate_raw", "translate_raw"),
                ("canonicalize", "canonicalize"),
                ("ferry_type_commit+free", "ferry_type_commit+free"),
                ("lookup", "lookup"), ("c_pack_size", "ferry_pack_size"),
                ("mpi_build_commit_free", "MPI build+commit+free")]


def commit_report(entries, markdown):
    types = OrderedDict()
    for name, e in entries.items():
        parts = name.split("/", 2)
        if len(parts) != 3 or parts[0] != "commit":
            continue
        types.setdefault(parts[2], {})[parts[1]] = e
    if not types:
        return ""
    header = ["type"] + [label + " (us)" for _, label in COMMIT_STEPS] + ["canonical ok"]
    rows, slow = [], []
    for t, steps in types.items():
        row = [t]
        for key, _ in COMMIT_STEPS:
            us = to_us(steps.get(key))
            row.append("" if key not in steps else ("ERR" if us is None else "%.3f" % us))
        tr = steps.get("translate")
        ok = tr.get("as_expected") if tr else None
        row.append("" if ok is None else ("yes" if ok == 1 else "NO"))
        rows.append(row)
        for key in ("translate", "ferry_type_commit+free"):
            us = to_us(steps.get(key))
            if us is not None and us > 5.0:
                slow.append("  %s %s: %.2f us" % (key, t, us))
    forms = OrderedDict()
    for t, steps in types.items():
        tr = steps.get("translate")
        if tr and tr.get("label"):
            forms.setdefault(tr["label"], []).append(t)
    out = ["Commit cost per datatype, microseconds (goal: translate <= 5 us)", "",
           table(rows, header, markdown), ""]
    if forms:
        out.append("Canonical forms:")
        for form, ts in forms.items():
            out.append("  %s: %s" % (form, ", ".join(ts)))
        out.append("")
    out.append("Over 5 us:\n" + "\n".join(slow) if slow else "Every commit is within 5 us.")
    return "\n".join(out) + "\n"


def plot(entries, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; no plots written", file=sys.stderr)
        return
    series = {}
    for name, e in entries.items():
        parts = name.split("/", 2)
        if len(parts) != 3 or not parts[2].startswith("2d/"):
            continue
        op, impl, case = parts
        kv = dict(p.split("=") for p in case.split("/")[1:])
        series.setdefault((op, impl, int(kv["blk"])), []).append((int(kv["obj"]), gbps(e)))
    os.makedirs(outdir, exist_ok=True)
    for op in ("pack", "unpack"):
        blks = sorted({b for (o, _, b) in series if o == op})
        fig, axes = plt.subplots(2, (len(blks) + 1) // 2, figsize=(18, 7), sharey=True)
        for ax, b in zip(axes.flat, blks):
            for impl, style in (("ferry", "-o"), ("mpi", "--s"), ("ferry_c", ":^")):
                pts = sorted(p for p in series.get((op, impl, b), []) if p[1] is not None)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=impl, ms=3)
            ax.set_xscale("log", base=2)
            ax.set_title("blk = %d B" % b)
            ax.grid(True, alpha=0.3)
        axes.flat[0].set_ylabel("GB/s")
        axes.flat[0].legend()
        fig.suptitle("%s, 2D objects at a 512-byte pitch: GB/s vs object size" % op)
        fig.tight_layout()
        path = os.path.join(outdir, "pack_cpu_2d_%s.png" % op)
        fig.savefig(path, dpi=110)
        print("wrote", path)


def as_markdown_lists(text):
    """Indented detail lines become Markdown list items."""
    return "\n".join("- " + line[2:] if line.startswith("  ") else line
                     for line in text.split("\n"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--markdown", action="store_true", help="Markdown tables")
    ap.add_argument("--matrix", action="store_true", help="ratio matrix for the 2D cases")
    ap.add_argument("--plot", metavar="DIR", help="write PNG plots (needs matplotlib)")
    args = ap.parse_args()
    entries, context = load(args.files)
    if context.get("mpi_library"):
        print("MPI: %s; Ferry %s (%s)" % (context["mpi_library"], context.get("ferry_version", "?"),
                                         context.get("ferry_build_type", "?")))
    if context.get("date"):
        loadavg = context.get("load_avg")
        print("Run: %s on %s CPUs%s\n" % (context["date"], context.get("num_cpus", "?"),
              ", load average at start %s" % " ".join("%.2f" % x for x in loadavg) if loadavg else ""))
    for part in (commit_report(entries, args.markdown),
                 pack_report(entries, args.markdown, args.matrix)):
        if part:
            print(as_markdown_lists(part) if args.markdown else part)
    if args.plot:
        plot(entries, args.plot)


if __name__ == "__main__":
    main()
