"""The launcher-free way, and when it cannot work. Run with plain mpiexec (no ferry-run), under
FERRY_PROTOCOL_TEST=1, with one of:

  first   import ferry, then mpi4py: the interposer must be active and carry a 4 MiB message;
  late    mpi4py first, then ferry: ferry must say it is not active, and why;
  forced  mpi4py first, then the interposer loaded with RTLD_GLOBAL anyway: mpi4py's calls were
          bound to the MPI library at import, so the message must not go through Ferry (the
          reason `import ferry` refuses to load it late).
  off     FERRY_PRELOAD=0, import ferry first: not loaded.
Rank 0 prints "import_order <mode>: correct".
"""
import ctypes
import os
import sys

mode = sys.argv[1]
if mode in ("first", "off"):
    import ferry
    from mpi4py import MPI
else:
    from mpi4py import MPI
    import ferry
    if mode == "forced":
        ctypes.CDLL(ferry.library_path(), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
import numpy as np  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []


def check(what, ok):
    if not ok:
        failures.append(what)


big = np.arange(1 << 19, dtype=np.float64) + rank
got = np.zeros_like(big)
comm.Sendrecv(big, dest=(rank + 1) % size, recvbuf=got, source=(rank - 1) % size)
comm.Barrier()
check("data", np.array_equal(got, np.arange(1 << 19, dtype=np.float64) + (rank - 1) % size))
status = ferry.status()
if mode == "first":
    check("active: " + status, ferry.loaded() and status.startswith("active (loaded by import ferry"))
    check("through Ferry: %s" % ferry.counters(), ferry.counters()["pipelined_sent"] == 1)
elif mode == "late":
    check("not active: " + status, not ferry.loaded() and "imported before ferry" in status)
elif mode == "forced":
    check("loaded, yet mpi4py bypasses it: %s" % ferry.counters(), ferry.counters()["pipelined_sent"] == 0)
elif mode == "off":
    check("not loaded: " + status, not ferry.loaded() and "not loaded" in status)
bad = comm.gather(failures, root=0)
if rank == 0:
    wrong = ["rank %d: %s" % (r, f) for r, fs in enumerate(bad) for f in fs]
    print("import_order %s: WRONG: %s" % (mode, wrong) if wrong else "import_order %s: correct" % mode)
sys.exit(1 if comm.allreduce(len(failures)) else 0)
