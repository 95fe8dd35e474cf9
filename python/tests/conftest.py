"""Helpers of the Python package's tests: they run against the installed ferry (pip install .),
starting ranks with mpiexec from this interpreter's environment."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RANKS = os.path.join(HERE, "ranks")
ROOT = os.path.dirname(os.path.dirname(HERE))


def _mpiexec_flags():
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        return None
    out = subprocess.run([mpiexec, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True).stdout
    flags = []
    if "Open MPI" in out or "OpenRTE" in out:
        # More ranks than cores in CI; tests run as root there.
        flags.append("--oversubscribe")
        if os.geteuid() == 0:
            flags.append("--allow-run-as-root")
    return flags


MPIEXEC_FLAGS = _mpiexec_flags()


def mpiexec(n):
    """The launcher line for n ranks."""
    if MPIEXEC_FLAGS is None:
        pytest.fail("no mpiexec on PATH")
    return ["mpiexec", "-n", str(n)] + MPIEXEC_FLAGS


def ferry_run():
    """The console script pip installed next to this interpreter (or, for a CMake install of the
    package, the ferry-run on PATH)."""
    path = os.path.join(os.path.dirname(sys.executable), "ferry-run")
    if not os.path.isfile(path):
        path = shutil.which("ferry-run")
    assert path, "no ferry-run next to %s or on PATH" % sys.executable
    return [path]


def run(argv, env=None, timeout=300, cwd=None):
    """Runs argv (output captured, stderr into stdout) and prints its output for pytest -rA / on
    failure."""
    full = dict(os.environ)
    full.update(env or {})
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full,
                       timeout=timeout, universal_newlines=True, cwd=cwd)
    print("$ " + " ".join(argv) + "\n" + p.stdout)
    return p


# The stub protocol of Ferry's pipelined method on host buffers (FERRY_PROTOCOL_TEST, as the C++
# tests use it): host messages of 1 MiB or more go through the interposer's own protocol, which
# its counters show, so a test can tell that Ferry carried the data and not the MPI alone.
PROTOCOL_ENV = {"FERRY_PROTOCOL_TEST": "1", "FERRY_PIPELINE_MIN": "1048576",
                "FERRY_IPC_MIN": "1000000000000000"}
