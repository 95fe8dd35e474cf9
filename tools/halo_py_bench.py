#!/usr/bin/env python3
"""ferry.halo's exchange time from Python, timed as ferry-halo-bench times it from C++, for issue
17's goal: Python adds at most 3 us per exchange (latency case: 64^3, 1 fp32 field, width 1, one
GPU). Each iteration: barrier, then the clock around exchange() (start + finish on the current
stream: the user's call) and a synchronize of the stream, like ferry-halo-bench's
start(stream) + finish(stream) + sync. Medians over iterations, the maximum over ranks.

    python tools/halo_py_bench.py --lib cupy [--priority off]            # one GPU, 1 rank
    ferry-halo-bench --memory device --type float --global 64 64 64 --width 1 --iters 2000 \\
        [--priority off]                                                  # the same from C++
    python tools/halo_py_bench.py --lib numpy                            # host backend
    ferry-halo-bench --memory host --type float --global 64 64 64 --width 1 --iters 2000

Also prints the time of start() alone (the host cost Python adds is paid there and in finish())
and, with --json FILE, writes the numbers.
"""
import argparse
import json
import statistics
import sys
import time

from mpi4py import MPI

import ferry.halo as fh


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default="numpy", choices=["numpy", "cupy", "torch"])
    ap.add_argument("--global", dest="shape", type=int, nargs=3, default=[64, 64, 64])
    ap.add_argument("--type", default="float32")
    ap.add_argument("--width", type=int, default=1)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--priority", default="on", choices=["on", "off"])
    ap.add_argument("--graphs", default="on", choices=["on", "off"])
    ap.add_argument("--json")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    sync = lambda: None  # noqa: E731
    dev = None
    if a.lib == "cupy":
        import cupy as xp
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)
        dev = local.Get_rank() % xp.cuda.runtime.getDeviceCount()
        xp.cuda.Device(dev).use()
        stream = xp.cuda.Stream(non_blocking=True)
        stream.use()
        sync = stream.synchronize
        alloc = lambda shape: xp.zeros(shape, dtype=a.type)  # noqa: E731
    elif a.lib == "torch":
        import torch
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)
        dev = local.Get_rank() % torch.cuda.device_count()
        torch.cuda.set_device(dev)
        stream = torch.cuda.Stream(dev)
        torch.cuda.set_stream(stream)
        sync = stream.synchronize
        alloc = lambda shape: torch.zeros(shape, dtype=getattr(torch, a.type), device="cuda")  # noqa: E731
    else:
        import numpy as xp
        alloc = lambda shape: xp.zeros(shape, dtype=a.type)  # noqa: E731
    dom = fh.Domain(a.shape, comm, periodic=True, devices=None if dev is None else [dev])
    sub = dom.subdomains[0]
    u = alloc(sub.shape(a.width))
    plan = fh.Plan(dom, [u], a.width, priority_stream=a.priority == "on", graphs=a.graphs == "on")
    if not plan.verify().ok:
        print("halo_py_bench: verify() failed", file=sys.stderr)
        return 1
    clock = time.perf_counter
    total, start_only = [], []
    for i in range(a.warmup + a.iters):
        comm.Barrier()
        t0 = clock()
        plan.exchange()
        sync()
        t1 = clock()
        if i >= a.warmup:
            total.append((t1 - t0) * 1e6)
    for i in range(a.warmup + a.iters):
        comm.Barrier()
        t0 = clock()
        plan.start()
        t1 = clock()
        plan.finish()
        sync()
        if i >= a.warmup:
            start_only.append((t1 - t0) * 1e6)
    med = comm.allreduce(statistics.median(total), op=MPI.MAX)
    p10 = comm.allreduce(sorted(total)[len(total) // 10], op=MPI.MAX)
    p90 = comm.allreduce(sorted(total)[9 * len(total) // 10], op=MPI.MAX)
    smed = comm.allreduce(statistics.median(start_only), op=MPI.MAX)
    out = {"lib": a.lib, "ranks": comm.Get_size(), "global": a.shape, "type": a.type, "width": a.width,
           "priority_stream": a.priority, "graphs": a.graphs, "iters": a.iters,
           "exchange_median_us": med, "exchange_p10_us": p10, "exchange_p90_us": p90,
           "start_host_median_us": smed}
    if comm.Get_rank() == 0:
        print(plan.describe(), end="")
        print("ferry.halo from Python (%s, %d rank(s), %s %s, width %d, priority stream %s, graphs %s): "
              "exchange median %.2f us (p10 %.2f, p90 %.2f); start() host time median %.2f us"
              % (a.lib, comm.Get_size(), "x".join(map(str, a.shape)), a.type, a.width, a.priority, a.graphs,
                 med, p10, p90, smed))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
    plan.close()
    dom.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
