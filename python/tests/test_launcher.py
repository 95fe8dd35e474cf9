"""ferry-run: ranks with NumPy buffers through the interposer, and what it says when the pieces do
not fit (a missing interposer, one that cannot load, another MPI, an unknown launcher)."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import ferry
from conftest import PROTOCOL_ENV, RANKS, ROOT, ferry_run, mpiexec, run

HOST = os.path.join(RANKS, "host_buffers.py")
SHOW = os.path.join(RANKS, "show_env.py")


@pytest.mark.parametrize("n", [2, 3, 4])
def test_host_buffers_through_the_interposer(n):
    p = run(ferry_run() + mpiexec(n) + [sys.executable, HOST], env=PROTOCOL_ENV)
    assert p.returncode == 0
    assert "host_buffers: correct on %d ranks" % n in p.stdout


def test_python_m_ferry_run():
    p = run([sys.executable, "-m", "ferry.run"] + mpiexec(2) + [sys.executable, HOST], env=PROTOCOL_ENV)
    assert p.returncode == 0
    assert "host_buffers: correct on 2 ranks" in p.stdout


def test_the_example_in_one_go():
    # The README's promise: pip install . then ferry-run mpiexec -n 2 python examples/... works.
    p = run(ferry_run() + mpiexec(2) + [sys.executable, os.path.join(ROOT, "examples", "mpi4py_cupy.py"), "--host"])
    assert p.returncode == 0
    assert "mpi4py_cupy: correct (NumPy (host)" in p.stdout


def test_keeps_ld_preload_and_passes_ferry_variables():
    p = run(ferry_run() + mpiexec(2) + [sys.executable, SHOW],
            env={"LD_PRELOAD": "libm.so.6", "FERRY_TEST_MARK": "42"})
    assert p.returncode == 0
    want = "loaded=True LD_PRELOAD=%s:libm.so.6 FERRY_TEST_MARK=42" % ferry.library_path()
    assert p.stdout.count(want) == 2
    # Open MPI's local ranks inherit mpiexec's environment anyway: the command must export them
    # for ranks on other nodes too.
    p = run(ferry_run() + ["--dry-run"] + mpiexec(2) + [sys.executable, SHOW], env={"FERRY_TEST_MARK": "42"})
    assert p.returncode == 0
    assert " -x LD_PRELOAD=%s " % ferry.library_path() in p.stdout
    assert " -x FERRY_TEST_MARK " in p.stdout
    assert p.stdout.index("-x") < p.stdout.index(" -n 2")


def test_does_not_preload_twice():
    p = run(ferry_run() + ["--dry-run"] + mpiexec(2) + [sys.executable, SHOW],
            env={"LD_PRELOAD": ferry.library_path() + ":libm.so.6"})
    assert p.returncode == 0
    assert "LD_PRELOAD=%s:libm.so.6 " % ferry.library_path() in p.stdout


def test_one_process_without_a_launcher():
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    p = run(ferry_run() + [sys.executable, SHOW], env=env)
    assert p.returncode == 0
    assert "rank 0: loaded=True LD_PRELOAD=%s " % ferry.library_path() in p.stdout


# What it says when something is wrong. Every error goes to stderr as one "ferry-run: error:"
# message, with exit status 1, before any rank starts.

def _error(p):
    assert p.returncode == 1, p.stdout
    assert "ferry-run: error:" in p.stdout
    return p.stdout


def test_missing_interposer(tmp_path):
    out = _error(run(ferry_run() + ["--library", str(tmp_path / "libferry-mpi.so")] + mpiexec(2) +
                     [sys.executable, SHOW]))
    assert "interposer %s does not exist" % (tmp_path / "libferry-mpi.so") in out
    assert "reinstall" in out


def _cc():
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libraries")
    return cc


def _fake_mpi(cc, where, soname, version):
    """A stand-in MPI library: only MPI_Get_library_version, answering `version`."""
    src = where / "fake_mpi.c"
    src.write_text(textwrap.dedent("""\
        #include <string.h>
        int MPI_Get_library_version(char* v, int* n) {
          strcpy(v, "%s"); *n = (int)strlen(v); return 0;
        }
        """ % version))
    lib = where / soname
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src), "-Wl,-soname," + soname], check=True)
    return lib


def _fake_interposer(cc, where, mpi):
    """A stand-in libferry-mpi.so that needs the library `mpi` (found through its RPATH)."""
    src = where / "fake_ferry.c"
    src.write_text("int MPI_Get_library_version(char*, int*);\n"
                   "int ferry_mpi_loaded(void) { return 1; }\n"
                   "void* ferry_keep(void) { return (void*)MPI_Get_library_version; }\n")
    lib = where / "libferry-mpi.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src), str(mpi),
                    "-Wl,-rpath," + str(mpi.parent), "-Wl,--no-as-needed"], check=True)
    return lib


@pytest.fixture
def mpich_interposer(tmp_path):
    """An interposer built against "MPICH" (libmpi.so.12), where mpi4py and mpiexec are Open MPI."""
    cc = _cc()
    mpi = _fake_mpi(cc, tmp_path, "libmpi.so.12", "MPICH Version: 4.1.2 (a stand-in for the test)")
    return _fake_interposer(cc, tmp_path, mpi)


def test_interposer_that_cannot_load(tmp_path):
    cc = _cc()
    gone = tmp_path / "gone"
    gone.mkdir()
    mpi = _fake_mpi(cc, gone, "libmpi.so.99", "MPICH Version: 9.9")
    lib = _fake_interposer(cc, tmp_path, mpi)
    mpi.unlink()
    out = _error(run(ferry_run() + ["--library", str(lib)] + mpiexec(2) + [sys.executable, SHOW]))
    assert "cannot load Ferry's interposer %s" % lib in out
    assert "libmpi.so.99" in out  # what it needs, read from the file
    assert "LD_LIBRARY_PATH" in out


def test_launcher_of_another_mpi(mpich_interposer):
    out = _error(run(ferry_run() + ["--library", str(mpich_interposer)] + mpiexec(2) + [sys.executable, SHOW]))
    assert "mpiexec is Open MPI's launcher" in out
    assert "interposer uses MPICH" in out
    assert "MPICH Version: 4.1.2" in out


def test_program_of_another_mpi(mpich_interposer):
    # The launcher check aside (env: one process), the program's mpi4py loads Open MPI.
    out = _error(run(ferry_run() + ["--library", str(mpich_interposer), "--launcher-style", "env",
                                    sys.executable, SHOW]))
    assert "the interposer and the program use different MPI libraries" in out
    assert "libmpi.so.12" in out and "MPICH Version: 4.1.2" in out
    assert "libmpi.so.40" in out and "Open MPI" in out
    assert "mpi4py" in out


def test_program_executable_of_another_mpi(mpich_interposer, tmp_path):
    # An MPI executable (not Python): its MPI comes from ldd.
    if shutil.which("mpicc") is None or shutil.which("ldd") is None:
        pytest.skip("no mpicc or ldd")
    src = tmp_path / "hello.c"
    src.write_text("#include <mpi.h>\nint main(int c, char** v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n")
    exe = tmp_path / "hello"
    subprocess.run(["mpicc", "-o", str(exe), str(src)], check=True)
    # (env: the launcher check aside; mpiexec itself links no MPI library and is passed over.)
    out = _error(run(ferry_run() + ["--library", str(mpich_interposer), "--launcher-style", "env"] +
                     mpiexec(2) + [str(exe)]))
    assert "the interposer and the program use different MPI libraries" in out
    assert "program %s" % exe in out
    # The same executable with the package's interposer: checked and started.
    p = run(ferry_run() + ["-v"] + mpiexec(2) + [str(exe)])
    assert p.returncode == 0
    assert "program %s uses the same MPI" % exe in p.stdout


def _fake_launcher(tmp_path, name, version_text):
    path = tmp_path / name
    path.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then printf '%%s\\n' '%s'; exit 0; fi\n"
                    "echo \"$0 $*\"\n" % version_text)
    path.chmod(0o755)
    return str(path)


def test_unknown_launcher(tmp_path):
    launcher = _fake_launcher(tmp_path, "launchy", "launchy 1.0 (job starter)")
    out = _error(run(ferry_run() + [launcher, "-n", "2", sys.executable, SHOW]))
    assert "cannot tell how %s passes environment variables to the ranks" % launcher in out
    assert "launchy 1.0 (job starter)" in out
    assert "--launcher-style" in out


def test_launcher_not_found():
    out = _error(run(ferry_run() + ["no-such-mpiexec", "-n", "2", sys.executable, SHOW]))
    assert "no-such-mpiexec: command not found" in out


def test_hydra_passes_environment_with_genv(tmp_path):
    launcher = _fake_launcher(tmp_path, "mpiexec.hydra", "HYDRA build details:")
    # The package's interposer is Open MPI's: a Hydra launcher is the wrong MPI's.
    out = _error(run(ferry_run() + [launcher, "-n", "2", sys.executable, SHOW]))
    assert "is MPICH's Hydra launcher" in out and "interposer uses Open MPI" in out
    p = run(ferry_run() + ["--no-check", "--dry-run", launcher, "-n", "2", sys.executable, SHOW],
            env={"FERRY_TEST_MARK": "7"})
    assert p.returncode == 0
    assert p.stdout.startswith("%s -genv LD_PRELOAD %s -genv " % (launcher, ferry.library_path()))
    assert " -genv FERRY_TEST_MARK 7 " in p.stdout
    assert p.stdout.index("FERRY_TEST_MARK") < p.stdout.index(" -n 2 ")


def test_srun_passes_environment_with_export(tmp_path):
    launcher = _fake_launcher(tmp_path, "srun", "slurm 23.02.7")
    p = run(ferry_run() + ["--dry-run", launcher, "-n", "2", sys.executable, SHOW])
    assert p.returncode == 0
    assert "%s --export=ALL,LD_PRELOAD=%s -n 2 " % (launcher, ferry.library_path()) in p.stdout
    out = _error(run(ferry_run() + [launcher, "--export=NONE", "-n", "2", sys.executable, SHOW]))
    assert "sets the ranks' environment itself (--export=NONE)" in out


def test_command_that_sets_ld_preload_itself():
    out = _error(run(ferry_run() + mpiexec(2)[:1] + ["-x", "LD_PRELOAD=libm.so.6"] + mpiexec(2)[1:] +
                     [sys.executable, SHOW]))
    assert "sets the ranks' environment itself (-x LD_PRELOAD=libm.so.6)" in out


def test_another_interposer_in_ld_preload(mpich_interposer):
    out = _error(run(ferry_run() + mpiexec(2) + [sys.executable, SHOW],
                     env={"LD_PRELOAD": str(mpich_interposer)}))
    assert "LD_PRELOAD already holds another Ferry interposer (%s)" % mpich_interposer in out


def test_no_command():
    out = _error(run(ferry_run()))
    assert "no command" in out
