#!/usr/bin/env python3
"""The GPU-to-GPU bandwidth matrix of this machine (CuPy): for every ordered pair, a contiguous
copy of --mib MiB with cudaMemcpyPeerAsync on a stream of the source GPU (peer access on where
the pair has it), and for every unordered pair both directions at once. Median of --reps, after
2 untimed, timed on the host clock around the copies and their synchronization.

  tools/p2p_matrix.py [--mib 256] [--reps 10] [--json FILE]"""
import argparse
import json
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        import cupy as cp
    except ImportError:
        print("p2p_matrix: cupy is not importable: no matrix")
        return 0
    rt = cp.cuda.runtime
    n = rt.getDeviceCount()
    size = a.mib << 20
    names = [rt.getDeviceProperties(d)["name"].decode() for d in range(n)]
    print(f"p2p_matrix: {n} GPUs ({', '.join(sorted(set(names)))}), {a.mib} MiB copies, median of {a.reps}")
    if n < 2:
        print("p2p_matrix: fewer than 2 GPUs: no matrix")
        return 0
    src, dst, streams = [], [], []
    access = [[bool(i != j and rt.deviceCanAccessPeer(i, j)) for j in range(n)] for i in range(n)]
    for d in range(n):
        with cp.cuda.Device(d):
            src.append(cp.ones(size, dtype=cp.uint8))
            dst.append(cp.zeros(size, dtype=cp.uint8))
            streams.append(cp.cuda.Stream(non_blocking=True))
            for j in range(n):
                if access[d][j]:
                    try:
                        rt.deviceEnablePeerAccess(j)
                    except rt.CUDARuntimeError:
                        pass  # already enabled

    def sync_all():
        for d in range(n):
            with cp.cuda.Device(d):
                rt.deviceSynchronize()

    def timed(pairs):
        """Seconds for the copies of `pairs` (src GPU, dst GPU) issued at once: median."""
        t = []
        for rep in range(a.reps + 2):
            sync_all()
            t0 = time.perf_counter()
            for s, d in pairs:
                with cp.cuda.Device(s):
                    rt.memcpyPeerAsync(dst[d].data.ptr, d, src[s].data.ptr, s, size, streams[s].ptr)
            for s, _ in pairs:
                streams[s].synchronize()
            if rep >= 2:
                t.append(time.perf_counter() - t0)
        return statistics.median(t)

    uni = [[None] * n for _ in range(n)]
    bidir = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j:
                uni[i][j] = size / timed([(i, j)]) / 1e9
    for i in range(n):
        for j in range(i + 1, n):
            # Both directions at once, each on its source GPU's stream: GB/s summed.
            g = 2 * size / timed([(i, j), (j, i)]) / 1e9
            bidir[i][j] = bidir[j][i] = g

    def table(title, m):
        print(f"\n{title}")
        print("from\\to " + "".join(f"{j:>9}" for j in range(n)))
        for i in range(n):
            print(f"GPU {i:<4}" + "".join(f"{'-' if m[i][j] is None else f'{m[i][j]:.1f}':>9}" for j in range(n)))

    table("unidirectional GB/s (cudaMemcpyPeerAsync, one copy at a time)", uni)
    table("bidirectional GB/s (both directions at once, summed)", bidir)
    print("peer access: " + ", ".join(f"{i}->{j}" for i in range(n) for j in range(n) if access[i][j]) or "none")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpus": names, "mib": a.mib, "reps": a.reps, "unidirectional_gbps": uni,
                       "bidirectional_gbps": bidir, "peer_access": access}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
