"""Bad input to ferry.halo raises a Python exception carrying the MPI error class, on every rank
together (a mistake on one rank never leaves the others waiting), and the program goes on: after
each refused case a good plan still exchanges correctly.

    mpiexec -n N python halo_errors.py     (N >= 2)

Rank 0 prints "halo_errors: correct on N ranks (K cases)"; the exit status is 1 on any miss.
"""
import sys

import numpy as np
from mpi4py import MPI

import ferry.halo as fh

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []
cases = 0


def check(what, ok):
    if not bool(ok):
        failures.append(what)
        print("rank %d: WRONG: %s" % (rank, what), flush=True)


def expect(name, fn, cls=fh.HaloArgumentError, error_class=MPI.ERR_ARG, match=None, match_other=None):
    """fn() must raise cls with error_class; its message must contain `match` (on the rank that
    made the mistake) or `match_other` (elsewhere), where given."""
    global cases
    cases += 1
    try:
        fn()
    except cls as e:
        check("%s: error_class %s, not %s (%s)" % (name, e.error_class, error_class, e),
              e.error_class == error_class)
        check("%s: error_name %s" % (name, e.error_name), e.error_name.startswith("MPI_ERR_"))
        want = match
        if match_other is not None and rank not in _mistake_ranks.get(name, ()):
            want = match_other
        if want is not None:
            check("%s: message %r lacks %r" % (name, str(e), want), want in str(e))
    except Exception as e:  # noqa: BLE001  (any other exception is the failure)
        check("%s: raised %s: %s, not %s" % (name, type(e).__name__, e, cls.__name__), False)
    else:
        check("%s: raised nothing" % name, False)
    # Every rank is still in step: a good exchange works.
    good_exchange(name)


_mistake_ranks = {}  # case -> the ranks that make the mistake (the others name them)


dom = fh.Domain((12, 10, 8), comm, periodic=True)
sub = dom.subdomains[0]


def good_exchange(after):
    u = np.zeros(sub.shape(1))
    u[sub.interior(1)] = rank + 1
    with fh.Plan(dom, [u], 1) as p:
        p.exchange()
        check("after %s: a good plan's verify()" % after, p.verify().ok)
    check("after %s: the halo was filled" % after, np.all(u != 0))


def arr(dtype=np.float64, widths=1, order="C"):
    return np.zeros(sub.shape(widths), dtype=dtype, order=order)


# Arrays of different dtypes across ranks (the same element size: only the dtype differs).
_mistake_ranks["dtypes"] = [1]
expect("dtypes", lambda: fh.Plan(dom, [arr(np.float32 if rank == 0 else np.int32)]),
       match="field 0: dtype float32 on rank 0, int32 on rank 1")
# A reversed view on one rank only: every rank raises; the others name the rank.
_mistake_ranks["reversed"] = [0]
expect("reversed", lambda: fh.Plan(dom, [arr()[:, :, ::-1] if rank == 0 else arr()]),
       match="along axis 2 (a reversed view)", match_other="rank 0: ")
# A broadcast (zero-stride) but writable view.
expect("broadcast", lambda: fh.Plan(dom, [np.lib.stride_tricks.as_strided(
    arr(), shape=sub.shape(1), strides=(0, 8, 8 * sub.shape(1)[2]))]), match="a broadcast view")


def readonly():
    a = arr()
    a.flags.writeable = False
    return fh.Plan(dom, [a])


expect("read-only", readonly, match="read-only")
expect("too small", lambda: fh.Plan(dom, [np.zeros(sub.extent)]), match="need")
expect("2-D", lambda: fh.Plan(dom, [np.zeros((5, 5))]), match="2-D array")
expect("not an array", lambda: fh.Plan(dom, [[1, 2, 3]]), match="is not an array")
expect("negative width", lambda: fh.Plan(dom, [arr()], widths=-1), match="negative width")
expect("bad direction", lambda: fh.Widths(1).set((0, 0, 0), 1), match="not a neighbour direction")
expect("object dtype", lambda: fh.Plan(dom, [arr(object)]), match="Python objects")
expect("bad method", lambda: fh.Plan(dom, [arr()], method="carrier pigeon"), match="method 'carrier pigeon'")
expect("fields per subdomain", lambda: fh.Plan(dom, [[arr()], [arr()]]), match="fields for 2 subdomain(s)")
expect("swap array of another shape", lambda: fh.Plan(dom, [fh.Field(arr(), next=np.zeros((3, 3, 3)))]),
       match="swap array")
# Found by the library (C++), collectively: widths that differ between ranks.
expect("widths differ between ranks",
       lambda: fh.Plan(dom, [arr(widths=2 if rank == 1 else 1)], widths=2 if rank == 1 else 1),
       match="differ between ranks")
expect("field count differs between ranks",
       lambda: fh.Plan(dom, [arr(), arr(np.int32)] if rank == 1 else [arr()]), match="differ between ranks")
# A width larger than the neighbouring subdomain (each subdomain is at most 12 points thick).
expect("width larger than a subdomain", lambda: fh.Plan(dom, [arr(widths=13)], widths=13))
# The communicator does not fit the grid asked for.
expect("grid for another number of ranks", lambda: fh.Domain((8, 8, 8), comm, grid=(size + 1, 1, 1)))
expect("bad placement", lambda: fh.Domain((8, 8, 8), comm, placement="nearby"), match="placement 'nearby'")
expect("global shape", lambda: fh.Domain((8, 8), comm), match="3 values")
expect("devices per subdomain", lambda: fh.Domain((8, 8, 8), comm, subdomains=2, devices=[0]), match="devices")


# Calls in the wrong state: the library's own errors, still exceptions with a class.
def swap_without_next():
    with fh.Plan(dom, [arr()]) as p:
        p.swap()


expect("swap without next", swap_without_next, match="second array")


def finish_without_start():
    with fh.Plan(dom, [arr()]) as p:
        p.finish()


expect("finish without start", finish_without_start, cls=fh.HaloError, error_class=MPI.ERR_OTHER,
       match="finish() without start()")


def closed():
    p = fh.Plan(dom, [arr()])
    p.close()
    p.exchange()


expect("exchange on a closed plan", closed, match="closed")
cases += 1
try:
    fh.Domain((8, 8, 8), "MPI.COMM_WORLD")
    check("a string as communicator raised nothing", False)
except TypeError as e:
    check("a string as communicator: %s" % e, "mpi4py intracommunicator" in str(e))
# The exception is a ValueError too, and carries the class where code catches MPI errors.
try:
    fh.Plan(dom, [np.zeros((5, 5))])
except ValueError as e:
    check("HaloArgumentError is a ValueError with error_class", e.error_class == MPI.ERR_ARG)

dom.close()
bad = comm.gather(failures, root=0)
if rank == 0:
    wrong = ["rank %d: %s" % (r, f) for r, fs in enumerate(bad) for f in fs]
    print("halo_errors: WRONG:\n  " + "\n  ".join(wrong) if wrong else
          "halo_errors: correct on %d ranks (%d cases)" % (size, cases), flush=True)
sys.exit(1 if comm.allreduce(len(failures)) else 0)
