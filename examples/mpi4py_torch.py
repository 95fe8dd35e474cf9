#!/usr/bin/env python3
"""The PyTorch variant of mpi4py_cupy.py: CUDA tensors through a stock MPI with Ferry's interposer.

    mpirun -n 2 -x LD_PRELOAD=build/cuda/src/libferry-mpi.so python3 examples/mpi4py_torch.py

mpi4py takes a CUDA tensor through DLPack or __cuda_array_interface__ (its device pointer).
Checks Send/Recv, Allreduce, and the column block t[:, 3:7] of a 2-D tensor sent with
MPI.DOUBLE.Create_vector from a view that starts at the block's first element (t.view(-1)[3:]).
Rank 0 prints "mpi4py_torch: correct"; the exit status is 1 if any check failed.
"""
import sys


def main():
    try:
        from mpi4py import MPI
        import torch
    except ImportError as e:
        print(f"mpi4py_torch: skipped: {e}")
        return 0
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if not torch.cuda.is_available():
        if rank == 0:
            print("mpi4py_torch: skipped: no CUDA device for PyTorch")
        return 0
    if size != 2:
        if rank == 0:
            print(f"mpi4py_torch: run with 2 ranks, not {size}")
        return 2
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    torch.cuda.set_device(local.Get_rank() % torch.cuda.device_count())
    local.Free()
    dev = torch.device("cuda", torch.cuda.current_device())

    def ready():  # PyTorch launches asynchronously: finish before MPI reads the memory
        torch.cuda.current_stream().synchronize()

    failures = []

    def check(what, ok):
        if not bool(ok):
            failures.append(what)

    peer, f8 = 1 - rank, torch.float64

    # Send/Recv, rank 1 adds 1 and returns it.
    n = 1 << 20
    ref = torch.arange(n, dtype=f8, device=dev) * 0.5
    if rank == 0:
        a = ref.clone()
        ready()
        comm.Send(a, dest=peer, tag=1)
        back = torch.zeros(n, dtype=f8, device=dev)
        comm.Recv([back, MPI.DOUBLE], source=peer, tag=2)
        check("send/recv: the returned tensor", torch.equal(back, ref + 1))
    else:
        got = torch.full((n,), -1.0, dtype=f8, device=dev)
        comm.Recv(got, source=peer, tag=1)
        check("send/recv: the received tensor", torch.equal(got, ref))
        got += 1
        ready()
        comm.Send([got, MPI.DOUBLE], dest=peer, tag=2)

    # Allreduce.
    m = 100_003
    x = torch.arange(m, dtype=f8, device=dev) * (rank + 1)
    y = torch.empty_like(x)
    ready()
    comm.Allreduce(x, y, op=MPI.SUM)
    check("allreduce", torch.equal(y, torch.arange(m, dtype=f8, device=dev) * (size * (size + 1) // 2)))

    # The column block t[:, 3:7] with a vector type.
    rows, cols, c0, w = 512, 16, 3, 4
    full = (torch.arange(rows, dtype=f8, device=dev)[:, None] * 100
            + torch.arange(cols, dtype=f8, device=dev)[None, :]).contiguous()
    vec = MPI.DOUBLE.Create_vector(rows, w, cols).Commit()
    if rank == 0:
        ready()
        comm.Send([full.view(-1)[c0:], 1, vec], dest=peer, tag=3)
    else:
        b = torch.zeros((rows, cols), dtype=f8, device=dev)
        comm.Recv([b.view(-1)[c0:], 1, vec], source=peer, tag=3)
        expect = torch.zeros_like(b)
        expect[:, c0:c0 + w] = full[:, c0:c0 + w]
        check("vector type: the column block arrived, the rest is untouched", torch.equal(b, expect))
    vec.Free()

    all_failures = comm.gather(failures, root=0)
    wrong = None
    if rank == 0:
        bad = [f"rank {r}: {what}" for r, fs in enumerate(all_failures) for what in fs]
        if bad:
            print("mpi4py_torch: WRONG:\n  " + "\n  ".join(bad))
        else:
            print(f"mpi4py_torch: correct (PyTorch {torch.__version__})")
        wrong = bool(bad)
    return 1 if comm.bcast(wrong, root=0) else 0


if __name__ == "__main__":
    sys.exit(main())
