"""ferry.halo on the host backend (NumPy arrays; CI has no GPU): exchanges against a global array
with 2 and 4 ranks, bad input raising on every rank, the heat3d example against one rank, and
the pieces that need no MPI (widths, array descriptions)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import RANKS, ROOT, ferry_run, mpiexec, run

EXCHANGE = os.path.join(RANKS, "halo_exchange.py")
ERRORS = os.path.join(RANKS, "halo_errors.py")
HEAT = os.path.join(ROOT, "python", "examples", "heat3d.py")


@pytest.mark.parametrize("n", [2, 4])
def test_exchange_against_a_global_array(n):
    p = run(ferry_run() + mpiexec(n) + [sys.executable, EXCHANGE])
    assert p.returncode == 0
    assert "halo_exchange: correct on %d ranks (numpy" % n in p.stdout


def test_exchange_dlpack_only_arrays():
    # The same cases (a few) with arrays seen only through __dlpack__.
    p = run(ferry_run() + mpiexec(2) + [sys.executable, EXCHANGE, "--lib", "dlpack", "--quick"])
    assert p.returncode == 0
    assert "halo_exchange: correct on 2 ranks (dlpack" in p.stdout


def test_exchange_torch_cpu_tensors():
    # Asked in a fresh interpreter, as test_gpu.py does: importing torch into this process, which
    # has loaded ferry (and with it the MPI and CUDA libraries), crashed inside torch on the GPU
    # machine; the ranks import it in processes of their own.
    p = subprocess.run([sys.executable, "-c", "import torch"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        pytest.skip("torch is not importable")
    p = run(ferry_run() + mpiexec(2) + [sys.executable, EXCHANGE, "--lib", "torch-cpu", "--quick"])
    assert p.returncode == 0
    assert "halo_exchange: correct on 2 ranks (torch-cpu" in p.stdout


@pytest.mark.parametrize("n", [2, 3])
def test_bad_input_raises_on_every_rank(n):
    p = run(ferry_run() + mpiexec(n) + [sys.executable, ERRORS], timeout=120)
    assert p.returncode == 0
    assert "halo_errors: correct on %d ranks" % n in p.stdout


@pytest.mark.parametrize("overlap", [False, True])
def test_heat3d_example_matches_one_rank(overlap):
    argv = [sys.executable, HEAT, "--lib", "numpy", "--n", "23", "19", "17", "--steps", "30"]
    p = run(ferry_run() + mpiexec(4) + argv + (["--overlap"] if overlap else []))
    assert p.returncode == 0
    assert "heat3d: correct on 4 ranks (numpy, bit for bit against one rank" in p.stdout


# -- No MPI needed: widths and array descriptions ----------------------------------------------

def test_widths_forms():
    import ferry.halo as fh

    w = fh.Widths(minus=(1, 0, 2), plus=(3, 1, 1))
    assert [w.side(a, -1) for a in range(3)] == [1, 0, 2]
    assert [w.side(a, 1) for a in range(3)] == [3, 1, 1]
    assert w.thickness((1, 0, -1), 0) == 3 and w.thickness((1, 0, -1), 2) == 2
    assert not w.sends((0, -1, 0)) and not w.sends((1, -1, 1))  # a 0 side empties what touches it
    star = fh.Widths(2).faces_only()
    assert star.sends((0, 0, 1)) and not star.sends((0, 1, 1)) and not star.sends((1, 1, 1))
    assert fh.Widths(1).no_corners().sends((1, 1, 0)) and not fh.Widths(1).no_corners().sends((1, 1, -1))
    o = fh.Widths(1).set((1, 1, 0), 3).set((0, 0, -1), 0)
    assert o.thickness((1, 1, 0), 0) == 3 and o.thickness((1, 1, 0), 2) == 0
    assert o.side(0, 1) == 3 and o.side(2, -1) == 1  # edges and corners still need the -z side
    assert fh.Widths(2) == fh.Widths.axes((2, 2, 2), (2, 2, 2)) == fh.Widths.uniform(2)
    assert len(fh.DIRECTIONS) == 26


def test_array_descriptions():
    from ferry.halo._arrays import describe

    a = np.zeros((4, 5, 6), dtype=np.float32, order="F")
    d = describe(a)
    assert d.shape == (4, 5, 6) and d.strides == (4, 16, 80) and d.itemsize == 4
    assert d.dtype == "float32" and d.device == -1 and d.ptr == a.ctypes.data
    v = np.zeros((8, 10, 12))[1:, ::2, 3::3]
    d = describe(v)
    assert d.strides == v.strides and d.ptr == v.ctypes.data
    # An axis of extent 1 gets a stride the library accepts, whatever NumPy left there.
    one = np.zeros((1, 5, 6))[:, :, :]
    assert describe(one).strides[0] >= 5 * 6 * 8


def test_array_description_through_dlpack():
    from ferry.halo._arrays import describe

    class Only:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    base = np.zeros((6, 7, 8), dtype=np.int16)
    view = base[1:, 2:, ::2]
    d = describe(Only(view))
    assert d.shape == view.shape and d.strides == view.strides and d.ptr == view.ctypes.data
    assert d.dtype == "int16" and d.device == -1 and d.lib == "dlpack"
