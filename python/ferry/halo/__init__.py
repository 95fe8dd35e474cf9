"""ferry.halo: halo exchange for 3-D structured grids split across MPI ranks (Ferry's halo
library, ferry/halo.hpp, from Python), on NumPy arrays and host PyTorch tensors (host backend)
and on CuPy arrays, PyTorch CUDA tensors or anything with __cuda_array_interface__ or __dlpack__
(GPU backend: one fused pack/unpack launch per GPU, CUDA IPC between ranks of a node).

    from mpi4py import MPI
    import numpy as np                     # or cupy: the same code
    import ferry.halo as fh

    dom = fh.Domain((256, 256, 256), MPI.COMM_WORLD, periodic=True)
    sub = dom.subdomains[0]                # this rank's part: sub.offset, sub.extent
    u = np.zeros(sub.shape(1))             # its interior and a halo 1 point thick on every side
    plan = fh.Plan(dom, [u], widths=1)     # collective: neighbours, methods, buffers, once
    for step in range(steps):
        plan.exchange()                    # fills u's halo from the neighbours
        u[sub.interior(1)] = ...           # the stencil reads the halo

Axes. Axis k of the arrays is axis k of the global shape, in every argument, result and message.
(The C++ library's x is the arrays' last axis: a C-ordered array is its x-fastest layout, whose
slowest axis its partition prefers to cut.) Every array of
a subdomain holds its interior and its halo (and any padding): by default the interior starts at
the minus-side halo width on each axis (Field(origin=...) says otherwise). Any positive strides
work: Fortran order, slices, padded allocations.

Widths: Widths (minus/plus per axis, the 26-direction override); an int means that width on every
side. Periodicity per axis. Several fields of different dtypes in one plan, several subdomains per
rank (Domain(subdomains=n), fields as a list per subdomain); swap() flips double-buffered arrays
(Field(u, next=v)) without re-planning.

Streams (GPU): exchange() and start()/finish() are ordered on the current stream of the arrays'
library (CuPy's cupy.cuda.get_current_stream(), PyTorch's torch.cuda.current_stream()) or the
stream given: work queued before sees its data sent, work queued after sees every halo filled;
they return without waiting for the GPU. Host arrays: exchange() returns with every halo filled.

Errors raise HaloError (HaloArgumentError, also a ValueError, for bad input) carrying the MPI
error class (`error_class`, `error_name`). The checks of a plan's description are collective: a
bad array, width or dtype on one rank raises on every rank, never leaves the others waiting.

Collectives: Domain(), Plan(), exchange(), start()/finish(), swap(), verify() and close() are
called by every rank of the communicator (exchanges the same number of times). A plan is closed
by close(), at the end of a `with` block, when it is garbage-collected (at the same point on every
rank in an SPMD program) or at exit, before MPI_Finalize.
"""
import atexit as _atexit
import re as _re
import ctypes as _ct
import weakref as _weakref

from . import _capi
from ._arrays import current_stream as _current_stream
from ._arrays import describe as _describe
from ._arrays import stream_handle as _stream_handle
from ._errors import HaloArgumentError, HaloError, argument_error as _argument_error, make_error as _make_error
from ._widths import DIRECTIONS, Widths, as_widths as _as_widths

__all__ = ["Domain", "Subdomain", "Field", "Plan", "VerifyResult", "Widths", "HaloError",
           "HaloArgumentError", "DIRECTIONS", "METHODS", "plan"]
METHODS = _capi.METHODS
_lib = _capi.lib
_live = {}  # id -> weakref of every open Domain and Plan, in creation order (closed at exit)


def _mpi():
    from mpi4py import MPI
    return MPI


def _check(rc):
    if rc:
        raise _make_error(_library_axes_to_array_axes(_capi.last_error()), rc)


def _library_axes_to_array_axes(msg):
    """The library numbers axes x, y, z = 0, 1, 2 with x the arrays' last axis: its messages are
    rewritten in the arrays' axis order, which the user wrote."""
    msg = _re.sub(r"\baxis ([012])\b", lambda m: "axis %d" % (2 - int(m.group(1))), msg)
    msg = _re.sub(r"\b(along|axis) ([xyz])\b",
                  lambda m: "%s %d" % ("along axis" if m.group(1) == "along" else "axis", 2 - "xyz".index(m.group(2))), msg)
    # Triples: "8 x 10 x 12", "1x1x2" (extents, grids), "(0,-1,4)" (points).
    msg = _re.sub(r"\b(\d+)( ?x ?)(\d+)( ?x ?)(\d+)\b", lambda m: "".join(m.group(5, 2, 3, 4, 1)), msg)
    return _re.sub(r"\((-?\d+),(-?\d+),(-?\d+)\)", lambda m: "(%s,%s,%s)" % m.group(3, 2, 1), msg)


def _agree(comm, error, signature=None):
    """Collective: raises the same HaloArgumentError on every rank when any rank found `error`;
    returns every rank's `signature`."""
    got = comm.allgather((error, signature))
    bad = [(r, e) for r, (e, _) in enumerate(got) if e]
    if bad:
        if error:
            raise _argument_error(error)
        raise _argument_error("rank %d: %s" % bad[0])
    return [s for _, s in got]


def _ints(v, what, n=3):
    try:
        out = tuple(int(x) for x in v)
    except TypeError:
        raise _argument_error("%s: %d integers, not %r" % (what, n, v)) from None
    if len(out) != n:
        raise _argument_error("%s: %d values (one per axis), not %d" % (what, n, len(out)))
    return out


def _bools(v, what):
    if isinstance(v, (list, tuple)):
        if len(v) != 3:
            raise _argument_error("%s: 3 values (one per axis), not %d" % (what, len(v)))
        return tuple(bool(x) for x in v)
    return (bool(v),) * 3


def _comm(comm):
    MPI = _mpi()
    if comm is None:
        return MPI.COMM_WORLD
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        raise TypeError("ferry.halo needs an mpi4py intracommunicator, not %r" % (comm,))
    return comm


def _register(obj):
    _live[id(obj)] = _weakref.ref(obj)


class _Owned:
    """What Domain and Plan share: a library handle `_h`, freed (collectively) by close(), by the
    end of a `with` block, when collected while MPI is up, or at exit (_close_all)."""

    _free = None  # the C API's free function, by name

    def close(self):
        if self._h:
            h, self._h = self._h, None
            _live.pop(id(self), None)
            _check(getattr(_lib, self._free)(_ct.byref(h)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) and _mpi_alive():
            try:
                self.close()
            except Exception:
                pass


@_atexit.register
def _close_all():
    # Before mpi4py's MPI_Finalize: closing frees MPI objects (communicators, shared windows).
    for ref in [r for r in _live.values()][::-1]:
        obj = ref()
        if obj is not None:
            try:
                obj.close()
            except Exception:
                pass


def _mpi_alive():
    try:
        MPI = _mpi()
        return MPI.Is_initialized() and not MPI.Is_finalized()
    except Exception:
        return False


class Subdomain:
    """One of this rank's subdomains: `offset` (global index of its first interior point),
    `extent` (interior points), per axis in array order; `device`, the GPU it is placed on (-1:
    none)."""

    def __init__(self, index, offset, extent, device):
        self.index, self.offset, self.extent, self.device = index, offset, extent, device

    def shape(self, widths=1):
        """The shape of an array holding the interior and the halo of `widths` (no padding)."""
        w = _as_widths(widths)
        return tuple(self.extent[a] + w.side(a, -1) + w.side(a, 1) for a in range(3))

    def interior(self, widths=1):
        """Slices of the interior in an array of shape(widths)."""
        w = _as_widths(widths)
        return tuple(slice(w.side(a, -1), w.side(a, -1) + self.extent[a]) for a in range(3))

    @property
    def global_slices(self):
        """Slices of this subdomain's interior in the global array."""
        return tuple(slice(o, o + n) for o, n in zip(self.offset, self.extent))

    def __repr__(self):
        return "Subdomain(index=%d, offset=%r, extent=%r, device=%d)" % (
            self.index, self.offset, self.extent, self.device)


class Domain(_Owned):
    """A global grid split into subdomains over the ranks of `comm` (collective; the communicator
    is duplicated inside). `global_shape` and every per-axis argument are in the arrays' axis
    order. periodic: a bool or one per axis. grid: subdomains per axis (None: Ferry partitions by
    prime factors, nodes then GPUs, to send the least surface). subdomains: how many this rank
    holds; devices: the GPU of each (None: the current one). placement: "node_aware" (default),
    "trivial" or "random" (with `seed`, the same on every rank).

    Errors (HaloArgumentError on every rank): a global extent < 1, a grid that does not multiply
    to the number of subdomains or is finer than the grid points (a communicator of the wrong
    size for the grid), arguments that differ between ranks."""

    def __init__(self, global_shape, comm=None, *, periodic=False, grid=None, subdomains=1,
                 devices=None, placement="node_aware", seed=1):
        self.comm = _comm(comm)
        self._h = None
        err = None
        opts = _capi.DomainOptionsC()
        _lib.ferry_halo_domain_options_init(_ct.byref(opts))
        try:
            shape = _ints(global_shape, "global_shape")
            per = _bools(periodic, "periodic")
            grid = (0, 0, 0) if grid is None else _ints(grid, "grid")
            n = int(subdomains)
            if devices is not None:
                devices = [int(d) for d in devices]
                if len(devices) != n:
                    raise _argument_error("devices: %d values for %d subdomain(s)" % (len(devices), n))
            if placement not in _capi.PLACEMENTS:
                raise _argument_error("placement %r: one of %s" % (placement, ", ".join(_capi.PLACEMENTS)))
        except HaloError as e:
            err = e.message
        except (TypeError, ValueError) as e:
            err = str(e)
        _agree(self.comm, err)
        for a in range(3):  # the library's axis 0 (x) is the arrays' last
            opts.periodic[a] = int(per[2 - a])
            opts.grid[a] = grid[2 - a]
        opts.subdomains = n
        if devices is not None:
            self._devices = (_ct.c_int * n)(*devices)
            opts.devices = _ct.cast(self._devices, _ct.POINTER(_ct.c_int))
        opts.placement = _capi.PLACEMENTS[placement]
        opts.seed = int(seed) & (2 ** 64 - 1)
        h = _ct.c_void_p()
        _check(_capi.domain_create(self.comm, shape[::-1], opts, h))
        self._h = h
        _register(self)
        self.global_shape, self.periodic = shape, per
        count = _ct.c_int()
        _check(_lib.ferry_halo_domain_subdomains(h, _ct.byref(count)))
        self.subdomains = []
        for i in range(count.value):
            off, ext, dev = _capi.LL3(), _capi.LL3(), _ct.c_int()
            _check(_lib.ferry_halo_domain_subdomain(h, i, off, ext, _ct.byref(dev)))
            self.subdomains.append(Subdomain(i, tuple(off[::-1]), tuple(ext[::-1]), dev.value))
        g = _capi.LL3()
        _check(_lib.ferry_halo_domain_grid(h, g))
        self.grid = tuple(g[::-1])

    def describe(self):
        """The partition and placement, for people (in the arrays' axis order)."""
        rc, s = _capi.text(_lib.ferry_halo_domain_describe, self._live_handle())
        _check(rc)
        return _library_axes_to_array_axes(s)

    def _live_handle(self):
        if not self._h:
            raise _argument_error("the domain is closed")
        return self._h

    _free = "ferry_halo_domain_free"

    def close(self):
        """Frees the domain (collective). Plans built on it keep working."""
        _Owned.close(self)


class Field:
    """One array of one subdomain, with what Plan cannot guess from a bare array: its own widths
    (None: the plan's), a second array `next` of the same layout for swap(), the `origin` (array
    index of the first interior point per axis; default: the minus-side widths) and a `name`."""

    def __init__(self, array, widths=None, *, next=None, origin=None, name=None):
        self.array, self.widths, self.next, self.origin, self.name = array, widths, next, origin, name
        self._swapped = False

    @property
    def current(self):
        """The array the plan exchanges now (array, or next after an odd number of swaps)."""
        return self.next if self._swapped else self.array

    @property
    def other(self):
        return self.array if self._swapped else self.next


class VerifyResult:
    """Plan.verify()'s result, over all ranks: cells_checked, bad_cells, first_errors (a few, from
    the lowest rank with errors: local points, 0 being the first interior point); ok."""

    def __init__(self, cells_checked, bad_cells, first_errors):
        self.cells_checked, self.bad_cells, self.first_errors = cells_checked, bad_cells, first_errors

    @property
    def ok(self):
        return self.bad_cells == 0

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return "VerifyResult(cells_checked=%d, bad_cells=%d%s)" % (
            self.cells_checked, self.bad_cells, ", first_errors=%r" % self.first_errors if self.bad_cells else "")


from ._plan import Plan, plan  # noqa: E402  (Plan needs the classes above)
