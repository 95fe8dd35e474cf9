# Spack recipe for Ferry: non-contiguous GPU data for MPI programs (the datatype engine, the MPI
# interposer libferry-mpi, ferry-measure and, with +python, the ferry Python package with
# ferry-run). Written for Spack v0.23 (from spack.package import *); Spack 1.x moved the build
# systems into its builtin repository, imported below when present. Installing from a clone of
# Ferry, with the system's MPI, CMake and Python as externals:
#
#   spack repo create ~/ferry-spack ferry
#   mkdir -p ~/ferry-spack/packages/ferry && cp packaging/spack/package.py ~/ferry-spack/packages/ferry/
#   spack repo add ~/ferry-spack
#   spack external find openmpi cmake ninja python py-mpi4py nlohmann-json
#   spack dev-build ferry@0.1.0 +python ~cuda      # run in the clone: builds the local tree
#
# Each variant sets one CMake option (variant_options); python/tests/test_spack.py checks that
# every option exists in Ferry's CMake files and that cmake_args() sets it.

from spack.package import *  # noqa: F401,F403

try:  # Spack >= 1.0
    from spack_repo.builtin.build_systems.cmake import CMakePackage
    from spack_repo.builtin.build_systems.cuda import CudaPackage
except ImportError:
    pass


class Ferry(CMakePackage, CudaPackage):
    """Ferry moves non-contiguous GPU data for MPI programs: MPI derived datatypes packed on the
    GPU, an MPI interposer that lets any MPI take GPU buffers, and a measured performance model.
    No public home yet: install it from a clone (spack dev-build, above)."""

    version("0.1.0")  # the CMake project's VERSION (the test checks they agree)

    variant("metis", default=False, description="Graph partitioning with METIS for rank placement")
    variant("python", default=False, description="The ferry Python package and ferry-run (mpi4py)")

    #: Each variant and the CMake option it sets (ON or OFF): the CUDA backend, METIS, the Python
    #: package. The cuda variant comes from CudaPackage, with cuda_arch.
    variant_options = {"cuda": "FERRY_CUDA", "metis": "FERRY_METIS", "python": "FERRY_PYTHON"}

    depends_on("cxx", type="build")
    depends_on("c", type="build")
    depends_on("cmake@3.24:", type="build")
    depends_on("ninja", type="build")
    generator("ninja")

    depends_on("mpi")
    depends_on("nlohmann-json@3:", type="build")  # header-only, used inside libferry only
    depends_on("metis", when="+metis")
    # The package's interposer is built against the MPI mpi4py uses, which the build asks mpi4py.
    extends("python", when="+python")
    depends_on("python@3.8:", when="+python", type=("build", "run"))
    depends_on("py-mpi4py", when="+python", type=("build", "run"))
    depends_on("googletest", type="test")

    conflicts("cuda_arch=none", when="+cuda", msg="+cuda needs cuda_arch=<sm>, e.g. cuda_arch=90")

    def cmake_args(self):
        args = [self.define(option, "ON" if self.spec.satisfies("+" + name) else "OFF")
                for name, option in self.variant_options.items()]
        args += [
            self.define("MPI_C_COMPILER", self.spec["mpi"].mpicc),
            self.define("FERRY_BUILD_TESTS", self.run_tests),
            self.define("FERRY_BUILD_BENCHMARKS", False),
            self.define("FERRY_BUILD_APPS", True),
        ]
        if self.spec.satisfies("+python"):
            args.append(self.define("Python_EXECUTABLE", self.spec["python"].command.path))
        if self.spec.satisfies("+cuda"):
            archs = self.spec.variants["cuda_arch"].value
            args.append(self.define("CMAKE_CUDA_ARCHITECTURES", ";".join(archs)))
        return args
