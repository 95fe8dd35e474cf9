"""ferry.halo on GPU arrays: CuPy arrays and PyTorch CUDA tensors, 1 and 2 ranks (2 ranks on one
GPU: start CUDA MPS first, tools/mps.sh), the exchange ordered on the arrays' current stream, the
heat3d example with CuPy against one rank. Skipped, and reported so, without a GPU, without a
CUDA build of ferry, or without CuPy/PyTorch."""
import os
import sys

import pytest

import ferry
from conftest import RANKS, ROOT, ferry_run, mpiexec, run
from test_gpu import _gpus, _need

pytestmark = [
    pytest.mark.skipif(not ferry.build_info()["cuda"], reason="ferry was built without CUDA"),
    pytest.mark.skipif(_gpus() == 0, reason="no GPU"),
]
EXCHANGE = os.path.join(RANKS, "halo_exchange.py")


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_exchange_against_a_global_array(lib, n):
    _need(lib)
    p = run(ferry_run() + mpiexec(n) + [sys.executable, EXCHANGE, "--lib", lib])
    assert p.returncode == 0
    assert "halo_exchange: correct on %d ranks (%s" % (n, lib) in p.stdout


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_exchange_is_ordered_on_the_current_stream(lib):
    _need(lib)
    p = run(ferry_run() + mpiexec(2) + [sys.executable, os.path.join(RANKS, "halo_gpu.py"), lib])
    assert p.returncode == 0
    assert "halo_gpu %s: correct on 2 ranks" % lib in p.stdout


@pytest.mark.parametrize("overlap", [False, True])
def test_heat3d_cupy_matches_one_rank(overlap):
    _need("cupy")
    argv = [sys.executable, os.path.join(ROOT, "python", "examples", "heat3d.py"), "--lib", "cupy",
            "--n", "64", "48", "40", "--steps", "50"] + (["--overlap"] if overlap else [])
    p = run(ferry_run() + mpiexec(2) + argv)
    assert p.returncode == 0
    assert "heat3d: correct on 2 ranks (cupy, bit for bit against one rank" in p.stdout


def test_latency_from_python():
    # Prints the numbers for issue 17's goal (compared with ferry-halo-bench by the lead); asserts
    # only that the benchmark runs and verifies.
    _need("cupy")
    for prio in ("on", "off"):
        p = run(ferry_run() + mpiexec(1) + [sys.executable, os.path.join(ROOT, "tools", "halo_py_bench.py"),
                                            "--lib", "cupy", "--priority", prio, "--iters", "2000"])
        assert p.returncode == 0
        assert "exchange median" in p.stdout
