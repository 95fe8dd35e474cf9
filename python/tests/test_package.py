"""The installed package: its version is the CMake project's, it says what it was built with,
its libraries find each other and the MPI mpi4py uses."""
import json
import os
import re
import subprocess
import sys

import ferry
from ferry import _probe
from conftest import ROOT

try:
    from importlib.metadata import version as dist_version
except ImportError:  # Python 3.7
    dist_version = None


def test_version_is_the_cmake_projects():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        project = re.search(r"project\(Ferry\s+VERSION\s+([0-9.]+)", f.read()).group(1)
    assert ferry.__version__ == project
    if dist_version:
        assert dist_version("ferry") == project


def test_build_info():
    info = ferry.build_info()
    assert info["backend"] in ("cuda", "cpu")
    assert info["cuda"] == (info["backend"] == "cuda")
    assert info["version"] == ferry.__version__
    assert os.path.isfile(info["interposer"])
    assert info["libferry"] in ("shared", "static")
    if info["libferry"] == "shared":
        assert os.path.isfile(info["libferry_path"])
    # ferry-measure ships with the CUDA backend only (it measures GPU messages).
    assert (info["ferry_measure"] is not None) == info["cuda"]


def test_libraries_find_each_other_through_origin():
    lib = ferry.build_info()["interposer"]
    dyn = _probe.elf_dynamic(lib)
    paths = (dyn["runpath"] or dyn["rpath"] or "").split(":")
    assert "$ORIGIN" in paths
    if ferry.build_info()["libferry"] == "shared":
        assert any(n.startswith("libferry.so") for n in dyn["needed"])


def test_built_against_the_mpi_mpi4py_loads():
    out = subprocess.run([sys.executable, _probe.__file__, "mpi4py"], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    mpi4py_mpi = json.loads(out)
    assert ferry.build_info()["mpi_library_version"] == mpi4py_mpi["version"]
    ours = json.loads(subprocess.run([sys.executable, _probe.__file__, "library", ferry.library_path()],
                                     stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout)
    assert ours["soname"] == mpi4py_mpi["soname"]
    assert ours["version"] == mpi4py_mpi["version"]


def test_python_m_ferry_prints_build_info_and_status():
    p = subprocess.run([sys.executable, "-m", "ferry"], stdout=subprocess.PIPE, universal_newlines=True)
    assert p.returncode == 0
    assert '"backend": "%s"' % ferry.build_info()["backend"] in p.stdout
    assert "interposer: active (loaded by import ferry" in p.stdout


def test_build_refuses_an_mpi_other_than_mpi4pys(tmp_path):
    """Configuring the package against another MPI than mpi4py's stops with both named."""
    import shutil
    import textwrap

    cc = shutil.which("cc") or shutil.which("gcc")
    cmake = shutil.which("cmake")
    headers = subprocess.run(["mpicc", "--showme:incdirs"], stdout=subprocess.PIPE,
                             universal_newlines=True).stdout.split() if shutil.which("mpicc") else []
    if not (cc and cmake and headers):
        import pytest
        pytest.skip("needs cc, cmake and Open MPI's mpicc")
    (tmp_path / "mpi.c").write_text(textwrap.dedent("""\
        #include <string.h>
        int MPI_Get_library_version(char* v, int* n) { strcpy(v, "MPICH Version: 4.1.2"); *n = (int)strlen(v); return 0; }
        int MPI_Init(void* a, void* b) { return 0; }
        int MPI_Finalize(void) { return 0; }
        """))
    lib = tmp_path / "libmpi.so.12"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "mpi.c"), "-Wl,-soname,libmpi.so.12"], check=True)
    p = subprocess.run([cmake, "-S", ROOT, "-B", str(tmp_path / "build"), "-DFERRY_PYTHON=ON",
                        "-DPython_EXECUTABLE=" + sys.executable, "-DFERRY_CUDA=OFF",
                        "-DFERRY_BUILD_TESTS=OFF", "-DFERRY_BUILD_BENCHMARKS=OFF", "-DFERRY_BUILD_APPS=OFF",
                        "-DMPI_C_COMPILER=/nonexistent", "-DMPI_C_LIB_NAMES=mpi", "-DMPI_mpi_LIBRARY=%s" % lib,
                        "-DMPI_C_HEADER_DIR=" + headers[0]],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    print(p.stdout[-3000:])
    assert p.returncode != 0
    text = " ".join(p.stdout.split())  # CMake wraps the message
    assert "Ferry: mpi4py uses another MPI than this build would" in text
    assert "MPICH Version: 4.1.2" in text and "Open MPI" in text
    assert "MPICC=/path/to/its/mpicc pip install ." in text
