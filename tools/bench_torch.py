#!/usr/bin/env python3
"""PyTorch's .copy_ of the same strided views bench_gpu_pack measures, timed the same way (CUDA
events, warm-up, median). Writes JSON in bench_gpu_pack's schema with method "torch_copy"."""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="bench_torch.json")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch not importable: skipped")
        return 0
    if not torch.cuda.is_available():
        print("no GPU: skipped")
        return 0

    def median(f, reps=30, warm=3):
        for _ in range(warm):
            f()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(reps):
            a.record()
            f()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) * 1e-3)
        ts.sort()
        return ts[len(ts) // 2]

    results = []
    dtypes = [(8, torch.int64), (4, torch.int32), (2, torch.int16), (1, torch.uint8)]
    if not args.quick:
        sizes = [64, 1 << 10, 16 << 10, 256 << 10, 4 << 20, 16 << 20, 64 << 20]
        blocks = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]
        mem = torch.empty((32 << 30) + (64 << 20), dtype=torch.uint8, device="cuda")
        for size in sizes:
            for block in blocks:
                if block > size:
                    continue
                pitch = 512 if block < 512 else 2 * block
                n = size // block
                w, dt = next((w, dt) for w, dt in dtypes if block % w == 0)
                src = mem[: n * pitch].view(dt).as_strided((n, block // w), (pitch // w, 1))
                dst = torch.empty((n, block // w), dtype=dt, device="cuda")
                s = median(lambda: dst.copy_(src))
                results.append({"group": "2d", "name": f"{size}B/{block}B", "method": "torch_copy",
                                "bytes": size, "block": block, "seconds": s})
        del mem
    # Faces of the 256^3 grid, radius 3, rows padded to 320 doubles (2560 B).
    grid = torch.empty((262, 262, 320), dtype=torch.float64, device="cuda")
    faces = {"-X": grid[3:259, 3:259, 3:6], "-Y": grid[3:259, 3:6, 3:259], "-Z": grid[3:6, 3:259, 3:259]}
    for name, view in faces.items():
        dst = torch.empty(view.shape, dtype=torch.float64, device="cuda")
        s = median(lambda: dst.copy_(view), reps=100)
        results.append({"group": "face", "name": name, "method": "torch_copy",
                        "bytes": view.numel() * 8, "block": view.shape[2] * 8, "seconds": s})
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "results": results}, f, indent=1)
    print(f"torch {torch.__version__}: {len(results)} cases -> {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
