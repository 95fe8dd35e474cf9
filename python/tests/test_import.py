"""The launcher-free way: `import ferry` before mpi4py loads the interposer ahead of the MPI
library (plain mpiexec, no ferry-run), and the cases where it cannot work."""
import os
import sys

import pytest

from conftest import PROTOCOL_ENV, RANKS, mpiexec, run

SCRIPT = os.path.join(RANKS, "import_order.py")


@pytest.mark.parametrize("mode", ["first", "late", "forced", "off"])
def test_import_order(mode):
    env = dict(PROTOCOL_ENV)
    if mode == "off":
        env["FERRY_PRELOAD"] = "0"
    p = run(mpiexec(2) + [sys.executable, SCRIPT, mode], env=env)
    assert p.returncode == 0
    assert "import_order %s: correct" % mode in p.stdout


def test_host_buffers_after_import_ferry():
    p = run(mpiexec(3) + [sys.executable, os.path.join(RANKS, "host_buffers.py"), "--import-ferry"],
            env=PROTOCOL_ENV)
    assert p.returncode == 0
    assert "host_buffers: correct on 3 ranks" in p.stdout
