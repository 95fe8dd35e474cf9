"""On a GPU machine: CuPy arrays and PyTorch CUDA tensors through the interposer with 2 ranks
(sharing one GPU on a one-GPU machine: start CUDA MPS first), the examples, and ferry.measure.
Skipped, and reported so, without a GPU, without a CUDA build of ferry, or without CuPy/PyTorch."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import ferry
from conftest import MPIEXEC_FLAGS, RANKS, ROOT, ferry_run, mpiexec, run


def _gpus():
    if shutil.which("nvidia-smi") is None:
        return 0
    p = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, universal_newlines=True)
    return sum(1 for line in p.stdout.splitlines() if line.startswith("GPU ")) if p.returncode == 0 else 0


pytestmark = [
    pytest.mark.skipif(not ferry.build_info()["cuda"], reason="ferry was built without CUDA"),
    pytest.mark.skipif(_gpus() == 0, reason="no GPU"),
]


def _need(module):
    p = subprocess.run([sys.executable, "-c", "import %s" % module], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        pytest.skip("%s is not importable: %s" % (module, p.stdout.strip().splitlines()[-1:]))


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_gpu_arrays_through_the_interposer(lib):
    _need(lib)
    p = run(ferry_run() + mpiexec(2) + [sys.executable, os.path.join(RANKS, "gpu_arrays.py"), lib])
    assert p.returncode == 0
    assert "gpu_arrays %s: correct" % lib in p.stdout


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_example(lib):
    _need(lib)
    p = run(ferry_run() + mpiexec(2) + [sys.executable, os.path.join(ROOT, "examples", "mpi4py_%s.py" % lib)])
    assert p.returncode == 0
    assert "mpi4py_%s: correct" % lib in p.stdout  # "skipped" is a failure here: the GPU is there


def test_measure_and_validate(tmp_path):
    import ferry.measure as fm

    launcher = ["mpiexec", "-n", "2"] + MPIEXEC_FLAGS
    model = fm.measure(str(tmp_path / "model.json"), quick=True, max_size="4M", launcher=launcher)
    with open(model) as f:
        data = json.load(f)
    assert data  # the file ferry-measure wrote, which the interposer reads
    result = fm.validate(model, quick=True, max_size="4M", launcher=launcher,
                         json_out=str(tmp_path / "validate.json"))
    assert result["cases"] > 0 and len(result["records"]) == result["cases"]
    print("validate: %d of %d picks within 5%% of the fastest" % (result["hits"], result["cases"]))
