"""Ferry for Python: non-contiguous GPU data for mpi4py programs, on any MPI.

Ferry's MPI interposer (libferry-mpi.so) lets mpi4py hand CuPy arrays and PyTorch CUDA tensors,
with or without MPI derived datatypes, to an MPI that knows nothing of GPUs. Start the program
with the launcher, which preloads the interposer in every rank::

    ferry-run mpiexec -n 4 python app.py

or, where no launcher can be wrapped (srun scripts, Jupyter), import ferry before mpi4py::

    import ferry            # loads the interposer ahead of the MPI library
    from mpi4py import MPI
    assert ferry.loaded()

ferry.halo exchanges the halos of 3-D grids split across ranks (Ferry's halo library) on NumPy,
CuPy and PyTorch arrays: see its docstring; ferry.measure writes the interposer's model file.

`FERRY_PRELOAD=0` in the environment keeps ``import ferry`` from loading it. ferry.status() says
why the interposer is not active when it is not (ferry._interposer says when importing ferry
cannot work). ``python -m ferry`` prints build_info() and status().
"""

import os as _os

try:
    from . import _build_info
except ImportError:  # python/ferry of a source tree: CMake writes _build_info.py when it builds
    raise ImportError("this ferry package is not built (%s has no _build_info.py): install it "
                      "with `pip install .` in Ferry's source tree, and import it from elsewhere"
                      % _os.path.dirname(__file__)) from None
from ._interposer import counters, library_path, loaded, program_path, status
from ._interposer import load as _load

__version__ = _build_info.version
__all__ = ["build_info", "counters", "library_path", "loaded", "status", "__version__"]


def build_info():
    """What this package was built with: version, CUDA or CPU backend, the MPI, the paths."""
    info = {k: v for k, v in vars(_build_info).items() if not k.startswith("_")}
    info["backend"] = "cuda" if _build_info.cuda else "cpu"
    info["interposer"] = library_path("ferry-mpi")
    info["libferry_path"] = library_path("ferry") if _build_info.libferry == "shared" else None
    measure = program_path("ferry-measure")
    info["ferry_measure"] = measure if _os.path.exists(measure) else None
    return info


if _os.environ.get("FERRY_PRELOAD", "1") != "0":
    _load()
