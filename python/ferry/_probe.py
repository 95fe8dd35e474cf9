"""Which MPI library a Python or a shared library loads, asked of the dynamic loader itself.

Standard library only, and runnable as a script, because it runs in three places: inside the
package (ferry.run's checks), in the subprocesses those checks start (one interpreter per MPI, so
that two MPI libraries never share a process), and from CMake at build time (python/mpi4py.cmake),
before the package exists::

    python _probe.py mpi4py          # the MPI that mpi4py loads in this interpreter
    python _probe.py library PATH    # the MPI that loading PATH brings in

Each prints one JSON object: ``library`` (the file the loader mapped), ``soname``, ``version``
(``MPI_Get_library_version``, which MPI allows before ``MPI_Init``), ``family``, ``abi``; or
``error`` and exit status 1. Nothing here initializes MPI.
"""

import ctypes
import json
import os
import re
import struct
import sys

# Base names of the libraries that hold an MPI's C entry points (not its Fortran or C++ layers):
# Open MPI and MPICH libmpi, MPICH's older libmpich, Cray's and IBM Spectrum's own names.
_MPI_LIBRARY = re.compile(r"^lib(mpi|mpich|mpi_cray|mpi_ibm|mpi_intel)\.so(\.[0-9.]+)?$")

# The two C ABIs MPI libraries come in: a library of one cannot stand in for one of the other, and
# each has its own launcher (Open MPI's passes environment with -x, Hydra's with -genv).
_FAMILIES = (
    ("Open MPI", "openmpi", re.compile(r"Open MPI", re.I)),
    ("Intel MPI", "mpich", re.compile(r"Intel\(R\) MPI|Intel MPI", re.I)),
    ("MVAPICH", "mpich", re.compile(r"MVAPICH", re.I)),
    ("Cray MPICH", "mpich", re.compile(r"CRAY MPICH", re.I)),
    ("MPICH", "mpich", re.compile(r"MPICH", re.I)),
)


def family(version):
    """(name, abi) of an MPI from its library version string; ('unknown', 'unknown') otherwise."""
    for name, abi, pattern in _FAMILIES:
        if pattern.search(version or ""):
            return name, abi
    return "unknown", "unknown"


def elf_dynamic(path):
    """The dynamic section of an ELF shared object or executable: soname, needed, rpath, runpath.

    Read from the file (nothing is loaded), so it also describes a library that cannot be loaded,
    which is when a user most needs to know what it asks for. Raises ValueError for non-ELF files.
    """
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        raise ValueError(path + " is not an ELF file")
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
        sec = end + "IIQQQQIIQQ"
        dyn = end + "qQ"
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
        sec = end + "IIIIIIIIII"
        dyn = end + "iI"
    sections = [struct.unpack_from(sec, data, shoff + i * shentsize) for i in range(shnum)]
    out = {"soname": None, "needed": [], "rpath": None, "runpath": None}
    for s in sections:
        if s[1] != 6:  # SHT_DYNAMIC
            continue
        offset, size, link = s[4], s[5], s[6]
        strtab = sections[link][4]

        def string(at):
            stop = data.index(b"\0", strtab + at)
            return data[strtab + at:stop].decode("utf-8", "replace")

        step = struct.calcsize(dyn)
        for at in range(offset, offset + size, step):
            tag, value = struct.unpack_from(dyn, data, at)
            if tag == 0:
                break
            if tag == 1:
                out["needed"].append(string(value))
            elif tag == 14:
                out["soname"] = string(value)
            elif tag == 15:
                out["rpath"] = string(value)
            elif tag == 29:
                out["runpath"] = string(value)
    return out


def loaded_mpi_libraries():
    """Paths of the MPI libraries mapped into this process, in the order they were mapped."""
    seen = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) < 6:
                continue
            path = fields[5].strip()
            if _MPI_LIBRARY.match(os.path.basename(path)) and path not in seen:
                seen.append(path)
    return seen


def library_version(path):
    """MPI_Get_library_version of the (already loaded) MPI library at path."""
    lib = ctypes.CDLL(path)
    # MPI_MAX_LIBRARY_VERSION_STRING is 256 in Open MPI and 8192 in MPICH; take the larger.
    buf = ctypes.create_string_buffer(8192 + 1)
    length = ctypes.c_int(0)
    rc = lib.MPI_Get_library_version(buf, ctypes.byref(length))
    if rc != 0:
        raise RuntimeError("MPI_Get_library_version failed with error %d" % rc)
    return _clean(buf.value.decode("utf-8", "replace"))


def _clean(version):
    # mpi4py returns the string with the terminating NUL some MPIs count in its length.
    return version.replace("\0", "").strip()


def describe(path):
    """What a caller needs to compare two MPIs: the mapped file, its soname, version and family."""
    info = {"library": path, "soname": None}
    try:
        info["soname"] = elf_dynamic(path)["soname"]
    except (OSError, ValueError, struct.error, IndexError):
        pass
    info["version"] = library_version(path)
    info["family"], info["abi"] = family(info["version"])
    return info


def _the_mpi(context):
    libs = loaded_mpi_libraries()
    if not libs:
        raise RuntimeError(context + " loaded no MPI library")
    return describe(libs[0])


def probe_library(path):
    """The MPI that loading the shared library at path brings into a process."""
    ctypes.CDLL(os.path.abspath(path), mode=getattr(os, "RTLD_LOCAL", 0) | getattr(os, "RTLD_NOW", 2))
    return _the_mpi("loading " + path)


class _NoMpi4py(Exception):
    pass


def probe_mpi4py():
    """The MPI that mpi4py loads in this interpreter, without initializing MPI."""
    try:
        import mpi4py
    except ImportError as e:
        raise _NoMpi4py(str(e))
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    config = mpi4py.get_config() if hasattr(mpi4py, "get_config") else {}
    from mpi4py import MPI

    info = _the_mpi("importing mpi4py.MPI")
    info["version"] = _clean(MPI.Get_library_version())
    info["family"], info["abi"] = family(info["version"])
    info["mpi4py"] = mpi4py.__version__
    info["mpi4py_module"] = MPI.__file__
    info["mpicc"] = config.get("mpicc") or ""
    info["python"] = sys.executable
    return info


def main(argv):
    try:
        if argv[:1] == ["mpi4py"] and len(argv) == 1:
            info = probe_mpi4py()
        elif argv[:1] == ["library"] and len(argv) == 2:
            info = probe_library(argv[1])
        else:
            sys.stderr.write("usage: _probe.py mpi4py | library PATH\n")
            return 2
    except _NoMpi4py as e:
        print(json.dumps({"error": "no mpi4py: %s" % e, "missing": "mpi4py"}))
        return 1
    except (ImportError, OSError, RuntimeError, AttributeError) as e:  # mpi4py.MPI cannot load
        print(json.dumps({"error": str(e)}))
        return 1
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
