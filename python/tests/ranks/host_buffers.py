"""Run under ferry-run (or after `import ferry`): NumPy host buffers through Ferry's interposer.

Every rank checks that the interposer is active and that every result is right (whole arrays
against values it computes itself), and, under FERRY_PROTOCOL_TEST=1, that a 4 MiB message went
through the interposer's pipelined protocol. Rank 0 prints "host_buffers: correct on N ranks".
"""
import os
import sys

if "--import-ferry" in sys.argv:
    import ferry  # noqa: F401  (before mpi4py: the launcher-free way)
from mpi4py import MPI  # noqa: E402
import numpy as np  # noqa: E402

import ferry  # noqa: E402,F811

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
seed = int(os.environ.get("FERRY_TEST_SEED", "2025"))
if rank == 0:
    print("host_buffers: seed %d, %d ranks" % (seed, size), flush=True)
failures = []


def check(what, ok):
    if not bool(ok):
        failures.append(what)


def data(r, n, dtype=np.float64):
    """Rank r's array: the same on every rank that asks."""
    return np.random.default_rng(seed + r).standard_normal(n).astype(dtype)


nxt, prv = (rank + 1) % size, (rank - 1) % size
check("interposer active (%s)" % ferry.status(), ferry.loaded())

# Ring exchange of a contiguous array.
got = np.zeros(1000)
comm.Sendrecv(data(rank, 1000), dest=nxt, sendtag=1, recvbuf=got, source=prv, recvtag=1)
check("sendrecv", np.array_equal(got, data(prv, 1000)))

# A column block of a 2-D array as a subarray datatype, received contiguously.
rows, cols, c0, w = 64, 10, 2, 3
grid = data(rank, rows * cols).reshape(rows, cols)
sub = MPI.DOUBLE.Create_subarray([rows, cols], [rows, w], [0, c0]).Commit()
block = np.zeros((rows, w))
comm.Sendrecv([grid, 1, sub], dest=nxt, sendtag=2, recvbuf=[block, rows * w, MPI.DOUBLE],
              source=prv, recvtag=2)
check("subarray column block", np.array_equal(block, data(prv, rows * cols).reshape(rows, cols)[:, c0:c0 + w]))
# And into the same place of the receiver's grid, the rest untouched.
into = np.full((rows, cols), -1.0)
comm.Sendrecv([grid, 1, sub], dest=nxt, sendtag=3, recvbuf=[into, 1, sub], source=prv, recvtag=3)
expect = np.full((rows, cols), -1.0)
expect[:, c0:c0 + w] = data(prv, rows * cols).reshape(rows, cols)[:, c0:c0 + w]
check("subarray into subarray", np.array_equal(into, expect))
sub.Free()

# Non-blocking, with a vector type of int32 (every other element).
n = 500
vec = MPI.INT32_T.Create_vector(n, 1, 2).Commit()
src = np.arange(2 * n, dtype=np.int32) * (rank + 1)
dst = np.zeros(n, dtype=np.int32)
reqs = [comm.Irecv([dst, n, MPI.INT32_T], source=prv, tag=4), comm.Isend([src, 1, vec], dest=nxt, tag=4)]
MPI.Request.Waitall(reqs)
check("isend/irecv vector", np.array_equal(dst, np.arange(0, 2 * n, 2, dtype=np.int32) * (prv + 1)))
vec.Free()

# Collectives.
total = np.zeros(777)
comm.Allreduce(data(rank, 777), total, op=MPI.SUM)
want = sum(data(r, 777) for r in range(size))
check("allreduce", np.allclose(total, want, rtol=0, atol=1e-12))
parts = np.zeros((size, 5), dtype=np.int64)
comm.Alltoall(np.arange(size * 5, dtype=np.int64).reshape(size, 5) + 1000 * rank, parts)
check("alltoall", np.array_equal(parts, np.array([np.arange(rank * 5, rank * 5 + 5) + 1000 * r for r in range(size)])))
everyone = np.zeros((size, 3))
comm.Allgather(data(rank, 3), everyone)
check("allgather", np.array_equal(everyone, np.array([data(r, 3) for r in range(size)])))

# A large message: under FERRY_PROTOCOL_TEST Ferry's pipelined protocol carries it.
big = np.zeros(1 << 19)  # 4 MiB
comm.Sendrecv(data(rank, 1 << 19), dest=nxt, sendtag=5, recvbuf=big, source=prv, recvtag=5)
check("4 MiB sendrecv", np.array_equal(big, data(prv, 1 << 19)))
comm.Barrier()
if ferry.loaded():
    counts = ferry.counters()
    if os.environ.get("FERRY_PROTOCOL_TEST") == "1":
        check("the 4 MiB message went through Ferry's protocol (%s)" % counts, counts["pipelined_sent"] >= 1)
    check("no request left pending (%s)" % counts, counts["pending"] == 0)

bad = comm.gather(failures, root=0)
if rank == 0:
    wrong = ["rank %d: %s" % (r, f) for r, fs in enumerate(bad) for f in fs]
    print("host_buffers: WRONG:\n  " + "\n  ".join(wrong) if wrong else
          "host_buffers: correct on %d ranks" % size, flush=True)
sys.exit(1 if comm.allreduce(len(failures)) else 0)
