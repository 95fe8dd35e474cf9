"""ctypes over Ferry's C API of the halo exchange (include/ferry/halo.h) in libferry.

Why ctypes and not a compiled extension (nanobind): libferry already exports the whole halo
library through a C API whose every call turns errors into an MPI error class and a message, so
a binding only has to describe arrays and forward calls. With ctypes the wheel holds no Python
extension: nothing more to compile in CI or on the GPU machine (no nanobind to fetch or find),
no coupling to one Python's ABI (the same package works with every CPython 3.8+), and libferry
stays the one copy of the library the interposer uses too. The costs are a struct layout written
twice, which import checks against the library's own sizes (ferry_halo_sizeof), and one ctypes
call per exchange (ferry_halo_exchange_on: start + finish in one crossing), 0.3-1 us, within issue
17's 3 us: describing arrays happens once, when the plan is built. The wheel is py3-none.
"""
import ctypes
import os

from .. import _build_info
from .._interposer import library_path

c_int = ctypes.c_int
c_ll = ctypes.c_longlong
c_void_p = ctypes.c_void_p
LL3 = c_ll * 3
INT3 = c_int * 3

# The method values of halo.h (FERRY_HALO_LOCAL...); the names are ferry::halo::name(Method).
METHODS = ("local", "peer", "ipc", "staged", "pipelined", "mpi")
PLACEMENTS = {"trivial": 0, "random": 1, "node_aware": 2}


class FieldC(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("data_next", c_void_p), ("elem_bytes", c_ll),
                ("alloc", LL3), ("origin", LL3), ("strides", LL3),
                ("minus", INT3), ("plus", INT3), ("dir_width", c_int * 27)]


class DomainOptionsC(ctypes.Structure):
    _fields_ = [("periodic", INT3), ("subdomains", c_int), ("devices", ctypes.POINTER(c_int)),
                ("grid", LL3), ("placement", c_int), ("seed", ctypes.c_ulonglong)]


class OptionsC(ctypes.Structure):
    _fields_ = [("method", c_int), ("graphs", c_int), ("fused", c_int), ("split_bytes", c_ll),
                ("progress_thread", c_int), ("priority_stream", c_int)]


def _open():
    """libferry as this process has it: the copy the interposer pulled in when it is loaded (one
    library per process: one transport, one set of pools), else the package's own."""
    scope = ctypes.CDLL(None)
    if hasattr(scope, "ferry_halo_plan_create"):
        return scope
    path = library_path("ferry")
    if _build_info.libferry != "shared" or not os.path.exists(path):
        raise ImportError("ferry.halo needs the shared libferry, and %s does not exist (a static "
                          "build, or an incomplete install: reinstall the ferry package)" % path)
    return ctypes.CDLL(path, mode=getattr(os, "RTLD_NOW", 2))


lib = _open()


def domain_create(comm, shape, opts, handle):
    """ferry_halo_domain_create on an mpi4py communicator. MPI_Comm is a pointer (Open MPI) or an
    int (MPICH): its ctypes type is taken from mpi4py (its documented way to hand a communicator to
    C), when the first domain is made, so that importing ferry.halo does not initialize MPI."""
    from mpi4py import MPI
    CommT = ctypes.c_int if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_int) else c_void_p
    f = lib.ferry_halo_domain_create
    if f.argtypes is None:
        f.argtypes = [CommT, LL3, ctypes.POINTER(DomainOptionsC), ctypes.POINTER(c_void_p)]
        f.restype = c_int
    return f(CommT.from_address(MPI._addressof(comm)), LL3(*shape), ctypes.byref(opts), ctypes.byref(handle))


def _declare():
    P = ctypes.POINTER
    d, p = c_void_p, c_void_p  # ferry_halo_domain, ferry_halo_plan
    sigs = {
        "ferry_error_string": ([], ctypes.c_char_p),
        "ferry_halo_sizeof": ([c_int], c_ll),
        "ferry_halo_field_init": ([P(FieldC)], None),
        "ferry_halo_domain_options_init": ([P(DomainOptionsC)], None),
        "ferry_halo_options_init": ([P(OptionsC)], None),
        "ferry_halo_domain_free": ([P(d)], c_int),
        "ferry_halo_domain_subdomains": ([d, P(c_int)], c_int),
        "ferry_halo_domain_subdomain": ([d, c_int, LL3, LL3, P(c_int)], c_int),
        "ferry_halo_domain_grid": ([d, LL3], c_int),
        "ferry_halo_domain_describe": ([d, ctypes.c_char_p, c_int], c_int),
        "ferry_halo_plan_create": ([d, c_int, c_int, P(FieldC), P(OptionsC), P(p)], c_int),
        "ferry_halo_plan_free": ([P(p)], c_int),
        "ferry_halo_exchange": ([p], c_int),
        "ferry_halo_start": ([p, c_void_p], c_int),
        "ferry_halo_finish": ([p, c_void_p], c_int),
        "ferry_halo_exchange_on": ([p, c_void_p], c_int),
        "ferry_halo_test": ([p, P(c_int)], c_int),
        "ferry_halo_swap": ([p], c_int),
        "ferry_halo_verify_report": ([p, P(c_ll), P(c_ll), ctypes.c_char_p, c_int], c_int),
        "ferry_halo_describe": ([p, ctypes.c_char_p, c_int], c_int),
        "ferry_halo_interior": ([p, c_int, LL3, LL3], c_int),
        "ferry_halo_exterior": ([p, c_int, P(c_int), LL3 * 6, LL3 * 6], c_int),
        "ferry_halo_stats": ([p, LL3 * 6, LL3 * 6, INT3], c_int),
    }
    if not hasattr(lib, "ferry_halo_domain_create"):
        raise ImportError("libferry has no ferry_halo_domain_create (reinstall the package)")
    for name, (args, res) in sigs.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            raise ImportError("libferry has no %s: the ferry package's library is older than its "
                              "Python sources (reinstall the package)" % name) from None
        f.argtypes = args
        f.restype = res
    for which, (cls, cname) in enumerate([(FieldC, "ferry_halo_field"),
                                          (DomainOptionsC, "ferry_halo_domain_options"),
                                          (OptionsC, "ferry_halo_options")]):
        if lib.ferry_halo_sizeof(which) != ctypes.sizeof(cls):
            raise ImportError("ferry.halo's layout of %s (%d bytes) is not libferry's (%d bytes): the "
                              "Python sources and the library come from different versions"
                              % (cname, ctypes.sizeof(cls), lib.ferry_halo_sizeof(which)))


_declare()


def last_error():
    msg = lib.ferry_error_string()
    return msg.decode("utf-8", "replace") if msg else ""


def text(fn, *args, size=1 << 16):
    """Calls a describe-like function that writes a NUL-terminated string; returns it."""
    buf = ctypes.create_string_buffer(size)
    return fn(*args, buf, size), buf.value.decode("utf-8", "replace")
