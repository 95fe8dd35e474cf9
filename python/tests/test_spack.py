"""packaging/spack/package.py without Spack: it is executed against a stand-in of the few Spack
names it uses, and every variant must map to a CMake option that Ferry's CMake files declare and
that cmake_args() sets for every combination of variants."""
import itertools
import os
import re
import sys
import types

import pytest

from conftest import ROOT

PACKAGE = os.path.join(ROOT, "packaging", "spack", "package.py")


def cmake_options():
    """Every option() and cache variable declared in Ferry's CMake files."""
    names = set()
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build", "out"))]
        for f in files:
            if f == "CMakeLists.txt" or f.endswith(".cmake"):
                with open(os.path.join(top, f)) as fh:
                    text = fh.read()
                names.update(re.findall(r"\boption\(\s*([A-Za-z0-9_]+)", text))
                names.update(re.findall(r"\bset\(\s*([A-Za-z0-9_]+)\s+[^)]*?\bCACHE\b", text))
    return names


class _Recorder:
    """The Spack directives and base classes package.py uses, recording what it declares."""

    def __init__(self):
        self.calls = []

    def directive(self, name):
        def record(*args, **kwargs):
            self.calls.append((name, args, kwargs))
        return record


def load_package():
    rec = _Recorder()
    spack = types.ModuleType("spack")
    pkg = types.ModuleType("spack.package")
    for d in ("version", "variant", "depends_on", "conflicts", "extends", "generator", "requires",
              "maintainers", "license", "patch", "provides"):
        setattr(pkg, d, rec.directive(d))

    class PackageBase:
        run_tests = False

        def __init__(self, spec):
            self.spec = spec

        @staticmethod
        def define(name, value):
            # Spack's CMakeBuilder.define: bools become BOOL ON/OFF, lists ;-joined strings.
            if isinstance(value, bool):
                return "-D%s:BOOL=%s" % (name, "ON" if value else "OFF")
            if isinstance(value, (list, tuple)):
                value = ";".join(str(v) for v in value)
            return "-D%s:STRING=%s" % (name, value)

    class CMakePackage(PackageBase):
        pass

    class CudaPackage(PackageBase):
        pass

    pkg.CMakePackage, pkg.CudaPackage = CMakePackage, CudaPackage
    pkg.__all__ = [n for n in vars(pkg) if not n.startswith("_")]
    spack.package = pkg
    saved = {k: sys.modules.get(k) for k in ("spack", "spack.package")}
    sys.modules.update({"spack": spack, "spack.package": pkg})
    try:
        namespace = {"__name__": "ferry_spack_package"}
        with open(PACKAGE) as f:
            exec(compile(f.read(), PACKAGE, "exec"), namespace)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return namespace["Ferry"], rec.calls, CudaPackage


class Spec:
    """A concrete spec with the given variants on (the rest off)."""

    def __init__(self, on):
        self.on = set(on)
        self.variants = {"cuda_arch": types.SimpleNamespace(value=("90",))}

    def satisfies(self, s):
        m = re.fullmatch(r"([+~])([a-z_]+)", s)
        assert m, "the stand-in spec understands +variant and ~variant only, not %r" % s
        return (m.group(2) in self.on) == (m.group(1) == "+")

    def __getitem__(self, name):
        assert name in ("mpi", "python"), name
        if name == "python":
            return types.SimpleNamespace(command=types.SimpleNamespace(path="/opt/py/bin/python3"))
        return types.SimpleNamespace(mpicc="/opt/mpi/bin/mpicc")


def test_every_variant_maps_to_a_cmake_option():
    cls, calls, cuda_package = load_package()
    variants = {args[0] for name, args, _ in calls if name == "variant"}
    if issubclass(cls, cuda_package):
        variants.add("cuda")  # CudaPackage's variant
    assert variants == {"cuda", "metis", "python"}
    assert set(cls.variant_options) == variants
    declared = cmake_options()
    missing = {v: o for v, o in cls.variant_options.items() if o not in declared}
    assert not missing, "variants whose CMake option no CMake file declares: %s" % missing


@pytest.mark.parametrize("on", [set(c) for n in range(4) for c in itertools.combinations(("cuda", "metis", "python"), n)])
def test_cmake_args_set_each_variants_option(on):
    cls, _, _ = load_package()
    args = cls(Spec(on)).cmake_args()
    for variant, option in cls.variant_options.items():
        assert "-D%s:STRING=%s" % (option, "ON" if variant in on else "OFF") in args
    assert "-DMPI_C_COMPILER:STRING=/opt/mpi/bin/mpicc" in args
    assert ("-DCMAKE_CUDA_ARCHITECTURES:STRING=90" in args) == ("cuda" in on)
    assert ("-DPython_EXECUTABLE:STRING=/opt/py/bin/python3" in args) == ("python" in on)
    # Every other Ferry option it passes exists too.
    declared = cmake_options()
    for a in args:
        name = re.match(r"-D([A-Za-z0-9_]+)", a).group(1)
        if name.startswith("FERRY_"):
            assert name in declared, a


def test_version_is_the_cmake_projects():
    _, calls, _ = load_package()
    versions = [args[0] for name, args, _ in calls if name == "version"]
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        project = re.search(r"project\(Ferry\s+VERSION\s+([0-9.]+)", f.read()).group(1)
    assert project in versions
