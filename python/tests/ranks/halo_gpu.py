"""ferry.halo on GPU arrays: the exchange is ordered on the arrays' current stream, and GPU-only
bad input raises.

    mpiexec -n 2 python halo_gpu.py cupy|torch

On a non-default stream a spin kernel of ~50 ms runs, then the interiors are overwritten, then the
plan exchanges with no synchronization in between: the halos must hold the new values (an exchange
not ordered on the stream would read the old ones). Then with an explicit stream handed to
start()/finish(), and with priority_stream=False (the exchange on the caller's stream itself). A
plan mixing host and GPU arrays raises HaloArgumentError on every rank. Rank 0 prints
"halo_gpu LIB: correct on N ranks".
"""
import sys

import numpy as np
from mpi4py import MPI

import ferry.halo as fh

lib = sys.argv[1]
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
failures = []


def check(what, ok):
    if not bool(ok):
        failures.append(what)
        print("rank %d: WRONG: %s" % (rank, what), flush=True)


if lib == "cupy":
    import cupy as xp
    dev = local.Get_rank() % xp.cuda.runtime.getDeviceCount()
    xp.cuda.Device(dev).use()
    _spin = xp.RawKernel(r'''extern "C" __global__ void spin(long long n) {
        long long t0 = clock64(); while (clock64() - t0 < n) {} }''', "spin")
    new_stream = lambda: xp.cuda.Stream(non_blocking=True)  # noqa: E731
    use = lambda s: s.use()  # noqa: E731
    spin = lambda: _spin((1,), (1,), (np.int64(100_000_000),))  # noqa: E731
    zeros = lambda shape: xp.zeros(shape)  # noqa: E731
    host = xp.asnumpy
    fill = lambda a, sl, v: a.__setitem__(sl, v)  # noqa: E731
else:
    import torch
    dev = local.Get_rank() % torch.cuda.device_count()
    torch.cuda.set_device(dev)
    new_stream = lambda: torch.cuda.Stream(dev)  # noqa: E731
    use = torch.cuda.set_stream
    spin = lambda: torch.cuda._sleep(100_000_000)  # noqa: E731
    zeros = lambda shape: torch.zeros(shape, dtype=torch.float64, device="cuda")  # noqa: E731
    host = lambda a: a.cpu().numpy()  # noqa: E731
    fill = lambda a, sl, v: a[sl].fill_(v)  # noqa: E731

dom = fh.Domain((16, 12, 10), comm, periodic=True, devices=[dev])
sub = dom.subdomains[0]
inner = sub.interior(1)


def halo_holds(u, value):
    h = host(u)
    mask = np.ones(h.shape, bool)
    mask[inner] = False
    return np.all(h[mask] == value)


for prio in (True, False):
    s = new_stream()
    use(s)
    u = zeros(sub.shape(1))
    with fh.Plan(dom, [u], 1, priority_stream=prio) as plan:
        plan.exchange()
        s.synchronize()
        comm.Barrier()
        spin()                     # the interiors change only after ~50 ms on stream s
        fill(u, inner, 1.0 + prio)
        plan.exchange()            # ordered after them on s, not before
        s.synchronize()
        check("priority_stream=%s: the exchange on the current stream saw the new interiors" % prio,
              halo_holds(u, 1.0 + prio))
        # An explicit stream, while another is current: ordered on s, after the work there.
        spin()
        fill(u, inner, 5.0)
        use(new_stream())
        plan.start(s)
        plan.finish(s)
        s.synchronize()
        check("priority_stream=%s: start(s)/finish(s) on an explicit stream" % prio, halo_holds(u, 5.0))
    use(new_stream())

try:
    fh.Plan(dom, [zeros(sub.shape(1)), np.zeros(sub.shape(1))])
    check("host and GPU arrays in one plan raised nothing", False)
except fh.HaloArgumentError as e:
    check("mixed memory: %s" % e, "host and GPU arrays" in str(e) and e.error_class == MPI.ERR_ARG)
dom.close()

bad = comm.gather(failures, root=0)
if rank == 0:
    wrong = ["rank %d: %s" % (r, f) for r, fs in enumerate(bad) for f in fs]
    print("halo_gpu %s: WRONG:\n  " % lib + "\n  ".join(wrong) if wrong else
          "halo_gpu %s: correct on %d ranks" % (lib, size), flush=True)
sys.exit(1 if comm.allreduce(len(failures)) else 0)
