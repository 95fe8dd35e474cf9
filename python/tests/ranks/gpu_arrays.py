"""Run under ferry-run with 2 ranks: CuPy arrays (`cupy`) or PyTorch CUDA tensors (`torch`) handed
to a stock MPI through Ferry's interposer: contiguous and non-contiguous (datatype) sends, a
non-contiguous receive, a collective; whole arrays compared on the host. Node-local rank r uses
GPU r % count (two ranks share one GPU on a one-GPU machine: run it under CUDA MPS there).
Rank 0 prints "gpu_arrays <lib>: correct"."""
import sys

import numpy as np

import ferry
from mpi4py import MPI

lib = sys.argv[1]
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
if lib == "cupy":
    import cupy

    cupy.cuda.Device(local.Get_rank() % cupy.cuda.runtime.getDeviceCount()).use()
    device = lambda a: cupy.asarray(a)  # noqa: E731
    host = cupy.asnumpy
    sync = lambda: cupy.cuda.get_current_stream().synchronize()  # noqa: E731
    version = "CuPy " + cupy.__version__
else:
    import torch

    dev = torch.device("cuda", local.Get_rank() % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    device = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev)  # noqa: E731
    host = lambda t: t.cpu().numpy()  # noqa: E731
    sync = torch.cuda.synchronize
    version = "PyTorch " + torch.__version__
local.Free()
failures = []


def check(what, ok):
    if not bool(ok):
        failures.append(what)


def values(r, n):
    return np.arange(n, dtype=np.float64) * 0.25 + 1000.0 * r


nxt, prv = (rank + 1) % size, (rank - 1) % size
check("interposer active (%s)" % ferry.status(), ferry.loaded())

# Contiguous, 8 MiB.
n = 1 << 20
a, b = device(values(rank, n)), device(np.zeros(n))
sync()
comm.Sendrecv(a, dest=nxt, sendtag=1, recvbuf=b, source=prv, recvtag=1)
check("sendrecv 8 MiB", np.array_equal(host(b), values(prv, n)))

# The column block [:, 3:7] of a 512 x 16 array: sent with a subarray type on the whole array,
# received contiguously, then received again into the same columns of a device array.
rows, cols, c0, w = 512, 16, 3, 4
grid = values(rank, rows * cols).reshape(rows, cols)
sub = MPI.DOUBLE.Create_subarray([rows, cols], [rows, w], [0, c0]).Commit()
g = device(grid)
packed = device(np.zeros((rows, w)))
sync()
comm.Sendrecv([g, 1, sub], dest=nxt, sendtag=2, recvbuf=[packed, rows * w, MPI.DOUBLE], source=prv, recvtag=2)
peer_grid = values(prv, rows * cols).reshape(rows, cols)
check("subarray send", np.array_equal(host(packed), peer_grid[:, c0:c0 + w]))
into = device(np.full((rows, cols), -1.0))
sync()
comm.Sendrecv([g, 1, sub], dest=nxt, sendtag=3, recvbuf=[into, 1, sub], source=prv, recvtag=3)
expect = np.full((rows, cols), -1.0)
expect[:, c0:c0 + w] = peer_grid[:, c0:c0 + w]
check("subarray receive, the rest untouched", np.array_equal(host(into), expect))
sub.Free()

# Allreduce.
m = 100003
x, y = device(values(rank, m)), device(np.zeros(m))
sync()
comm.Allreduce(x, y, op=MPI.SUM)
check("allreduce", np.array_equal(host(y), sum(values(r, m) for r in range(size))))
comm.Barrier()
check("no request left pending (%s)" % ferry.counters(), ferry.counters()["pending"] == 0)

bad = comm.gather(failures, root=0)
if rank == 0:
    wrong = ["rank %d: %s" % (r, f) for r, fs in enumerate(bad) for f in fs]
    print("gpu_arrays %s: WRONG:\n  %s" % (lib, "\n  ".join(wrong)) if wrong else
          "gpu_arrays %s: correct (%s, %s)" % (lib, version, ferry.counters()), flush=True)
sys.exit(1 if comm.allreduce(len(failures)) else 0)
