#!/usr/bin/env python3
"""mpi4py + CuPy on a stock, non-CUDA-aware MPI, through Ferry's interposer:

    mpirun -n 2 -x LD_PRELOAD=build/cuda/src/libferry-mpi.so python3 examples/mpi4py_cupy.py

mpi4py hands MPI the device pointer of any object with __cuda_array_interface__ (CuPy arrays,
PyTorch CUDA tensors, Numba device arrays); the interposer sees that the pointer is GPU memory and
stages the data through pinned host memory, packing and unpacking non-contiguous datatypes on the
GPU. Without the interposer the same program crashes inside a stock MPI (it dereferences the
device pointer on the host).

What it does, checking every result on both ranks:
  1. Send/Recv of a CuPy array (rank 0 -> rank 1 -> back, changed on the way);
  2. Allreduce of a CuPy array (out of place and in place);
  3. a non-contiguous slice, the column block a[:, 3:7] of a 2-D array, sent with MPI datatypes:
     a. MPI.DOUBLE.Create_vector(rows, 4, cols), with a buffer that starts at the slice's first
        element (a.ravel()[3:]: the datatype's offsets count from the buffer's start);
     b. MPI.DOUBLE.Create_subarray([rows, cols], [rows, 4], [0, 3]) on the whole array, received
        into a contiguous (rows, 4) array (the type maps match: rows*4 doubles each).
Rank 0 prints "mpi4py_cupy: correct"; the exit status is 1 if any check failed.

--host runs the same with NumPy arrays (no GPU, no interposer needed): a test of the MPI logic.
"""
import sys


def main():
    use_host = "--host" in sys.argv[1:]
    try:
        from mpi4py import MPI
    except ImportError as e:
        print(f"mpi4py_cupy: skipped: mpi4py is not importable ({e})")
        return 0
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if use_host:
        import numpy as xp
    else:
        try:
            import cupy as xp
        except ImportError as e:
            if rank == 0:
                print(f"mpi4py_cupy: skipped: cupy is not importable ({e})")
            return 0
        # Node-local rank r uses device r % count.
        local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
        xp.cuda.Device(local.Get_rank() % xp.cuda.runtime.getDeviceCount()).use()
        local.Free()
    if size != 2:
        if rank == 0:
            print(f"mpi4py_cupy: run with 2 ranks, not {size}")
        return 2

    def ready():
        # CuPy launches asynchronously on its current stream: the data must be there before MPI
        # (or the interposer, on its own stream) reads it.
        if not use_host:
            xp.cuda.get_current_stream().synchronize()

    failures = []

    def check(what, ok):
        if not bool(ok):
            failures.append(what)

    peer = 1 - rank
    f8 = xp.float64

    # 1. Send/Recv: rank 0 sends, rank 1 adds 1 and sends it back.
    n = 1 << 20
    ref = xp.arange(n, dtype=f8) * 0.5
    if rank == 0:
        a = ref.copy()
        ready()
        comm.Send(a, dest=peer, tag=1)
        back = xp.zeros(n, dtype=f8)
        comm.Recv([back, MPI.DOUBLE], source=peer, tag=2)
        check("send/recv: the returned array", xp.array_equal(back, ref + 1))
    else:
        got = xp.full(n, -1.0, dtype=f8)
        comm.Recv(got, source=peer, tag=1)
        check("send/recv: the received array", xp.array_equal(got, ref))
        got += 1
        ready()
        comm.Send([got, MPI.DOUBLE], dest=peer, tag=2)

    # 2. Allreduce: sum of (rank + 1) * i over the ranks.
    m = 100_003
    x = xp.arange(m, dtype=f8) * (rank + 1)
    y = xp.empty_like(x)
    ready()
    comm.Allreduce(x, y, op=MPI.SUM)
    factor = size * (size + 1) // 2
    check("allreduce", xp.array_equal(y, xp.arange(m, dtype=f8) * factor))
    z = xp.arange(m, dtype=xp.int64) + rank
    ready()
    comm.Allreduce(MPI.IN_PLACE, z, op=MPI.MAX)
    check("allreduce in place", xp.array_equal(z, xp.arange(m, dtype=xp.int64) + size - 1))

    # 3. The column block a[:, 3:7] of a rows x cols array of doubles.
    rows, cols, c0, w = 512, 16, 3, 4
    full = (xp.arange(rows, dtype=f8)[:, None] * 100 + xp.arange(cols, dtype=f8)[None, :]).copy()
    block = full[:, c0:c0 + w]  # not contiguous: mpi4py refuses it as a plain buffer
    vec = MPI.DOUBLE.Create_vector(rows, w, cols).Commit()
    sub = MPI.DOUBLE.Create_subarray([rows, cols], [rows, w], [0, c0], order=MPI.ORDER_C).Commit()
    assert vec.Get_size() == sub.Get_size() == rows * w * 8

    # a. Vector type, buffer starting at the block's first element (full.ravel() is a view of the
    #    contiguous array, so [c0:] starts at full[0, c0]).
    if rank == 0:
        a = full.copy()
        ready()
        comm.Send([a.ravel()[c0:], 1, vec], dest=peer, tag=3)
    else:
        b = xp.zeros((rows, cols), dtype=f8)
        comm.Recv([b.ravel()[c0:], 1, vec], source=peer, tag=3)
        expect = xp.zeros((rows, cols), dtype=f8)
        expect[:, c0:c0 + w] = block
        check("vector type: the column block arrived, the rest is untouched", xp.array_equal(b, expect))

    # b. Subarray type on the whole array; the receiver takes the bytes contiguously.
    if rank == 0:
        a = full.copy()
        ready()
        comm.Send([a, 1, sub], dest=peer, tag=4)
    else:
        packed = xp.zeros((rows, w), dtype=f8)
        comm.Recv([packed, rows * w, MPI.DOUBLE], source=peer, tag=4)
        check("subarray type: packed column block", xp.array_equal(packed, xp.ascontiguousarray(block)))
    vec.Free()
    sub.Free()

    all_failures = comm.gather(failures, root=0)
    wrong = None
    if rank == 0:
        bad = [f"rank {r}: {what}" for r, fs in enumerate(all_failures) for what in fs]
        if bad:
            print("mpi4py_cupy: WRONG:\n  " + "\n  ".join(bad))
        else:
            import mpi4py
            where = "NumPy (host)" if use_host else f"CuPy {xp.__version__}"
            print(f"mpi4py_cupy: correct ({where}, mpi4py {mpi4py.__version__})")
        wrong = bool(bad)
    return 1 if comm.bcast(wrong, root=0) else 0


if __name__ == "__main__":
    sys.exit(main())
