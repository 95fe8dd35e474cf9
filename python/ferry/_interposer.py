"""Loading Ferry's MPI interposer into this process, and telling whether it is active.

The interposer defines the MPI_* functions and calls the MPI library's PMPI_* ones. It is active
when the dynamic loader resolves a program's MPI_* references to it rather than to the MPI library,
which holds when it comes first in the process's global symbol scope at the time those references
are bound:

* under ``ferry-run`` (``LD_PRELOAD``): always, preloaded libraries come first;
* after ``import ferry`` (``dlopen(RTLD_GLOBAL)``), when nothing that references MPI was loaded
  before: Python loads mpi4py.MPI later, with its references bound against the global scope first.

The second cannot work when
* mpi4py.MPI (or another extension that links the MPI library) was imported before ferry: Python
  loads extensions with RTLD_NOW, so their MPI_* references are bound to the MPI library already;
* the program itself links the MPI library (an embedded Python in an MPI program): the executable
  and its libraries come before anything loaded later;
* the MPI library is linked statically into mpi4py or the program: its calls do not go through the
  dynamic loader at all;
* a library is loaded with RTLD_DEEPBIND, which binds to its own dependencies first.
Use ``ferry-run`` (or ``LD_PRELOAD``) there.
"""

import ctypes
import os
import sys

from . import _build_info

_RTLD_NOLOAD = getattr(os, "RTLD_NOLOAD", 4)
_RTLD_GLOBAL = getattr(os, "RTLD_GLOBAL", 0x100)
_RTLD_NOW = getattr(os, "RTLD_NOW", 2)

# Set by load(): why the interposer is not active, when it is not.
_why_not = None
# Whether mpi4py.MPI was already imported when load() ran.
_too_late = False


def package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def library_path(name="ferry-mpi"):
    """The path of one of the package's shared libraries: "ferry-mpi" (the interposer) or "ferry"."""
    return os.path.normpath(os.path.join(package_dir(), _build_info.lib_dir, "lib%s.so" % name))


def program_path(name):
    """The path of one of the package's programs (ferry-measure), whether or not it was built."""
    return os.path.normpath(os.path.join(package_dir(), _build_info.bin_dir, name))


def _address(handle, name):
    try:
        return ctypes.cast(getattr(handle, name), ctypes.c_void_p).value
    except AttributeError:
        return None


def _ferry_handle():
    """A handle on the interposer if this process has it loaded (by any path), else None."""
    try:
        handle = ctypes.CDLL(library_path(), mode=_RTLD_NOLOAD | _RTLD_NOW)
    except OSError:
        handle = None
    if handle is not None and _address(handle, "ferry_mpi_loaded"):
        return handle
    # Preloaded from elsewhere (a build tree, another install): found through the global scope.
    if _address(ctypes.CDLL(None), "ferry_mpi_loaded"):
        return ctypes.CDLL(None)
    return None


def loaded():
    """True when the interposer is active in this process: loaded, and first for MPI_Send."""
    handle = _ferry_handle()
    if handle is None or _too_late:
        return False
    ours = _address(handle, "ferry_mpi_loaded")
    first = _address(ctypes.CDLL(None), "ferry_mpi_loaded")
    if ours != first:
        return False
    # The global scope resolves MPI_Send to the interposer's, not the MPI library's.
    send = _address(ctypes.CDLL(None), "MPI_Send")
    try:
        own = _address(ctypes.CDLL(library_path(), mode=_RTLD_NOLOAD | _RTLD_NOW), "MPI_Send")
    except OSError:
        own = send  # preloaded from another path: it is first in the global scope (checked above)
    return send is not None and send == own


def status():
    """One line: whether the interposer is active in this process, and if not, why."""
    if loaded():
        how = "preloaded" if "libferry-mpi" in os.environ.get("LD_PRELOAD", "") else "loaded by import ferry"
        return "active (%s, %s)" % (how, library_path())
    if _too_late:
        return ("not active: mpi4py.MPI was imported before ferry, so its MPI calls are bound to the "
                "MPI library; import ferry first, or start the program with ferry-run")
    if _why_not:
        return "not active: " + _why_not
    if _ferry_handle() is not None:
        return ("not active: loaded, but another library's MPI_Send comes first in this process "
                "(the program links MPI itself, or another MPI tool is preloaded); use ferry-run")
    return "not active: not loaded (import ferry before mpi4py, or start the program with ferry-run)"


def load():
    """Loads the interposer with RTLD_GLOBAL, ahead of the MPI library, where that can still work.

    Returns loaded(). Never raises: the reason it is not active is in status().
    """
    global _why_not, _too_late
    if _ferry_handle() is not None:
        return loaded()
    if "mpi4py.MPI" in sys.modules:
        _too_late = True
        return False
    path = library_path()
    if not os.path.exists(path):
        _why_not = "%s does not exist (an incomplete install: reinstall the ferry package)" % path
        return False
    try:
        ctypes.CDLL(path, mode=_RTLD_GLOBAL | _RTLD_NOW)
    except OSError as e:
        _why_not = "cannot load %s: %s" % (path, e)
        return False
    return loaded()


def counters():
    """The interposer's counters in this process: messages over CUDA IPC and pipelined, requests
    still pending. Raises RuntimeError when the interposer is not loaded."""
    handle = _ferry_handle()
    if handle is None:
        raise RuntimeError("Ferry's interposer is not loaded in this process: " + status())
    out = {}
    for name in ("ipc_sent", "ipc_received", "pipelined_sent", "pending"):
        f = getattr(handle, "ferry_mpi_" + name)
        f.restype = ctypes.c_long
        out[name] = int(f())
    return out
