#!/usr/bin/env python3
"""Prints the markdown tables of docs/performance.md's GPU section from bench_gpu_pack's and
bench_torch's JSON (the files tools/gpu-check writes)."""
import json
import sys


def main():
    bench, torch = sys.argv[1], sys.argv[2]
    d = json.load(open(bench))
    rows = list(d["results"]) + json.load(open(torch))["results"]
    r = {(x["group"], x["name"], x["method"]): x for x in rows}

    def gbs(g, n, m):
        x = r.get((g, n, m))
        return x["bytes"] / x["seconds"] / 1e9 if x else float("nan")

    def sec(g, n, m):
        x = r.get((g, n, m))
        return x["seconds"] if x else float("nan")

    print(f"Device {d['device']}; device-to-device copy {d['copy_rate_Bps'] / 1e9:.0f} GB/s (read + write).\n")
    print("| object | block | Ferry pack | unpack | pack to mapped host | hand kernel | cudaMemcpy2D | "
          "PyTorch copy_ | sector roofline | Ferry / roofline | Ferry / PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for size in (16 << 20, 64 << 20):
        for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096):
            n = f"{size}B/{b}B"
            if ("2d", n, "ferry_pack") not in r:
                continue
            fp = sec("2d", n, "ferry_pack")
            print(f"| {size >> 20} MiB | {b} B | {gbs('2d', n, 'ferry_pack'):.0f} | {gbs('2d', n, 'ferry_unpack'):.0f} | "
                  f"{gbs('2d', n, 'ferry_pack_mapped'):.0f} | {gbs('2d', n, 'hand_kernel'):.0f} | "
                  f"{gbs('2d', n, 'memcpy2d'):.0f} | {gbs('2d', n, 'torch_copy'):.0f} | {gbs('2d', n, 'roofline'):.0f} | "
                  f"{100 * sec('2d', n, 'roofline') / fp:.0f}% | {sec('2d', n, 'torch_copy') / fp:.2f} |")
    print("\nGB/s of packed bytes. Halo faces (1.5 MiB each), microseconds per pack (event-timed, so the "
          "launch is included):\n")
    print("| face | Ferry pack | Ferry unpack | hand kernel | cudaMemcpy3D | PyTorch copy_ | sector roofline |")
    print("|---|---|---|---|---|---|---|")
    for f in ("-X", "-Y", "-Z"):
        print(f"| {f} | {sec('face', f, 'ferry_pack') * 1e6:.1f} | {sec('face', f, 'ferry_unpack') * 1e6:.1f} | "
              f"{sec('face', f, 'hand_kernel') * 1e6:.1f} | {sec('face', f, 'memcpy3d') * 1e6:.1f} | "
              f"{sec('face', f, 'torch_copy') * 1e6:.1f} | {sec('face', f, 'roofline') * 1e6:.2f} |")
    b = "208 jobs"
    print(f"\nBatch of 26 faces x 8 quantities ({r[('batch', b, 'ferry_batch')]['bytes'] / 2**20:.1f} MiB): "
          f"one launch {sec('batch', b, 'ferry_batch') * 1e6:.1f} us (unpack {sec('batch', b, 'ferry_batch_unpack') * 1e6:.1f} us), "
          f"208 separate launches {sec('batch', b, 'ferry_separate_launches') * 1e6:.1f} us, "
          f"sector roofline {sec('batch', b, 'roofline') * 1e6:.1f} us, one -X face {sec('face', '-X', 'ferry_pack') * 1e6:.1f} us.")
    i = "200k blocks"
    print(f"Indexed, 200k blocks of 1-64 doubles ({r[('indexed', i, 'ferry_pack')]['bytes'] / 2**20:.1f} MiB): "
          f"pack {gbs('indexed', i, 'ferry_pack'):.0f} GB/s, unpack {gbs('indexed', i, 'ferry_unpack'):.0f} GB/s, "
          f"sector roofline {gbs('indexed', i, 'roofline'):.0f} GB/s.")
    print(f"Host cost per call: empty kernel launch {sec('overhead', 'empty kernel', 'host_launch_call') * 1e6:.2f} us, "
          f"ferry::gpu::pack_async {sec('overhead', '-X face', 'host_pack_async_call') * 1e6:.2f} us, "
          f"memory_of {sec('overhead', 'pointer', 'host_memory_of') * 1e6:.2f} us.")


if __name__ == "__main__":
    main()
