"""ferry-run: start an MPI program with Ferry's interposer preloaded in every rank.

    ferry-run [options] mpiexec -n 4 python app.py
    python -m ferry.run [options] mpiexec -n 4 python app.py

It adds ``LD_PRELOAD=<the package's libferry-mpi.so>`` (before any LD_PRELOAD already set) to the
ranks' environment the way the launcher passes environment on: ``-x`` for Open MPI's mpiexec,
``-genv`` for MPICH's and Intel MPI's Hydra, ``--export`` for Slurm's srun (``mpiexec --version``
tells which), and passes every FERRY_* variable of its own environment on too. The launcher itself
is not preloaded. ``ferry-run python app.py`` runs a single process with the interposer.

Before it starts anything it checks that the pieces fit, and says what is wrong when they do not:
the interposer exists and loads; the launcher belongs to the interposer's MPI; the program (a
Python with mpi4py, or an MPI executable) loads the MPI library the interposer was built against.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

STYLES = ("openmpi", "hydra", "slurm", "env")
_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_probe.py")
_LAUNCHER_NAMES = {"openmpi": "Open MPI's launcher", "hydra": "MPICH's Hydra launcher",
                   "slurm": "Slurm's srun"}


class LaunchError(Exception):
    """What is wrong, in words for the person who typed the command."""


class Launch:
    """A command ready to run: argv, the environment to run it in, and what was checked."""

    def __init__(self, argv, env, style, notes):
        self.argv, self.env, self.style, self.notes = argv, env, style, notes

    def shell(self):
        """The command as a shell line (for --dry-run and --verbose)."""
        line = " ".join(shlex.quote(a) for a in self.argv)
        if self.style == "env":
            line = "LD_PRELOAD=%s %s" % (shlex.quote(self.env["LD_PRELOAD"]), line)
        return line


def _run(argv, env=None, timeout=120):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                           timeout=timeout, universal_newlines=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    return p.returncode, p.stdout


def _clean_env(environ):
    # The probes ask what a library or interpreter loads by itself.
    env = dict(environ)
    env.pop("LD_PRELOAD", None)
    return env


def _probe(python, args, environ):
    rc, out = _run([python, _PROBE] + args, env=_clean_env(environ))
    if rc is None:
        return {"error": out}
    lines = [l for l in out.splitlines() if l.startswith("{")]
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"error": "the probe printed %r (exit %s)" % (out.strip()[-500:], rc)}


def detect_style(launcher, environ=None):
    """How `launcher` passes environment to ranks, from its --version: (style, what it printed)."""
    path = shutil.which(launcher, path=(environ or os.environ).get("PATH"))
    if path is None:
        raise LaunchError("%s: command not found" % launcher)
    if re.match(r"python[0-9.]*$", os.path.basename(launcher)):
        return "env", "a Python interpreter (one process)"
    rc, out = _run([path, "--version"], env=dict(environ or os.environ), timeout=60)
    text = out or ""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if re.search(r"Open MPI|OpenRTE|PRRTE|prterun", text, re.I):
        return "openmpi", first
    if re.search(r"HYDRA|Intel\(R\) MPI|MPICH|MVAPICH", text, re.I):
        return "hydra", first
    if re.match(r"slurm", text.strip(), re.I):
        return "slurm", first
    raise LaunchError(
        "cannot tell how %s passes environment variables to the ranks: `%s --version` printed %r "
        "(exit status %s). ferry-run knows Open MPI's mpiexec/mpirun (-x), the Hydra mpiexec of "
        "MPICH and Intel MPI (-genv) and Slurm's srun (--export); name the launcher's kind with "
        "--launcher-style openmpi|hydra|slurm, or env for a launcher that passes ferry-run's own "
        "environment on to the ranks" % (launcher, launcher, first[:200], rc))


def _interpreter(path):
    """The Python that runs `path`: itself, or the one its #! line names; None for other files."""
    if re.match(r"python[0-9.]*$", os.path.basename(path)) or \
            re.match(r"python[0-9.]*$", os.path.basename(os.path.realpath(path))):
        return path
    try:
        with open(path, "rb") as f:
            head = f.readline(512).decode("utf-8", "replace")
    except OSError:
        return None
    if not head.startswith("#!"):
        return None
    words = head[2:].split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        return shutil.which(words[0]) if words and re.match(r"python[0-9.]*$", words[0]) else None
    return words[0] if words and re.match(r"python[0-9.]*$", os.path.basename(words[0])) else None


def _is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _elf_mpi(path, environ):
    """(soname, resolved path or None) of the MPI library an executable needs, or None."""
    if shutil.which("ldd") is None:
        return None
    rc, out = _run(["ldd", path], env=_clean_env(environ))
    for line in (out or "").splitlines():
        m = re.match(r"\s*(lib(mpi|mpich|mpi_cray|mpi_ibm|mpi_intel)\.so[.0-9]*)\s+=>\s+(\S+)", line)
        if m:
            return m.group(1), (None if m.group(3) == "not" else m.group(3))
    return None


def program_mpi(tokens, environ):
    """The MPI the program in a launcher's arguments loads: (what the program is, probe) or None.

    The program is the first argument that is a Python (or a script for one) with mpi4py, or an
    executable that links an MPI library; launcher options and their values are not files of
    either kind. None when there is no such argument (the program is not checked)."""
    for t in tokens:
        if t.startswith("-"):
            continue
        path = t if os.sep in t else shutil.which(t, path=environ.get("PATH"))
        if not path or not os.path.isfile(path):
            continue
        python = _interpreter(path)
        if python:
            info = _probe(python, ["mpi4py"], environ)
            if info.get("missing") == "mpi4py":
                return None
            return "%s (mpi4py %s)" % (python, info.get("mpi4py", "?")), info
        if _is_elf(path):
            found = _elf_mpi(path, environ)
            if found is None:
                continue  # a wrapper such as env or nice: the program comes later
            soname, lib = found
            if lib is None:
                return path, {"error": "%s needs %s, which the dynamic loader cannot find" % (path, soname)}
            return path, _probe(sys.executable, ["library", lib], environ)
    return None


def _describe(info):
    return "%s (%s)\n      %s" % (info.get("soname") or "?", info.get("library"), info.get("version"))


def check(library, style, launcher, first_line, tokens, environ):
    """Raises LaunchError unless the interposer, the launcher and the program share one MPI.
    Returns notes on what was checked."""
    from . import _build_info, _probe as probe_module

    ferry = _probe(sys.executable, ["library", library], environ)
    if "error" in ferry:
        try:
            needed = [n for n in probe_module.elf_dynamic(library)["needed"] if "mpi" in n]
        except (OSError, ValueError):
            needed = []
        from ._interposer import library_path

        built = ""
        if os.path.realpath(library) == os.path.realpath(library_path()):
            built = " was built against %s (%s)" % (_build_info.mpi_library or "?",
                                                   _build_info.mpi_library_version or "?")
        if needed:
            built += (" and" if built else "") + " needs " + ", ".join(needed)
        raise LaunchError(
            "cannot load Ferry's interposer %s: %s\nIt%s; that MPI must be installed and found by "
            "the dynamic loader (load its module, or add its lib directory to LD_LIBRARY_PATH), "
            "or reinstall ferry against the MPI you have."
            % (library, ferry["error"], built or " needs an MPI library"))
    notes = ["interposer %s uses %s" % (library, _describe(ferry))]
    if style in ("openmpi", "hydra"):
        wanted = "openmpi" if style == "openmpi" else "mpich"
        if ferry.get("abi") not in (wanted, "unknown"):
            said = ("`%s --version`: %r" % (launcher, first_line)) if first_line else \
                "--launcher-style " + style
            raise LaunchError(
                "%s is %s (%s), but Ferry's interposer uses %s:\n      %s\n"
                "Ranks started by one MPI's launcher cannot initialize another MPI's library: run "
                "the mpiexec of the interposer's MPI (or rebuild ferry against this launcher's MPI)."
                % (launcher, _LAUNCHER_NAMES[style], said, ferry.get("family"), ferry.get("version")))
    found = program_mpi(tokens, environ)
    if found is None:
        notes.append("program: no Python with mpi4py or MPI executable among the arguments; not checked")
        return notes
    what, prog = found
    if "error" in prog:
        raise LaunchError("cannot tell which MPI %s uses: %s" % (what, prog["error"]))
    if prog.get("soname") != ferry.get("soname") or prog.get("version") != ferry.get("version"):
        raise LaunchError(
            "the interposer and the program use different MPI libraries:\n"
            "  interposer %s\n      %s\n  program %s\n      %s\n"
            "Preloaded, the interposer would run the program on its own MPI library. Rebuild ferry "
            "against the program's MPI (MPICC=/path/to/its/mpicc pip install --force-reinstall "
            "--no-deps <ferry source>), or use an mpi4py built against the interposer's MPI "
            "(pip install --no-binary=mpi4py --force-reinstall mpi4py)."
            % (library, _describe(ferry), what, _describe(prog)))
    notes.append("program %s uses the same MPI" % what)
    return notes


def _preload_value(library, environ):
    mine = os.path.realpath(library)
    others = []
    for entry in re.split(r"[:\s]+", environ.get("LD_PRELOAD", "").strip()):
        if not entry:
            continue
        if os.path.basename(entry).startswith("libferry-mpi.so"):
            if os.path.realpath(entry) == mine:
                continue
            raise LaunchError(
                "LD_PRELOAD already holds another Ferry interposer (%s); unset it, or name it with "
                "--library to run with that one" % entry)
        others.append(entry)
    return ":".join([library] + others)


def prepare(command, library=None, style=None, do_check=True, preload=True, environ=None):
    """The Launch for `command` (a list: launcher, its arguments, the program and its arguments).

    library: the interposer (default: the package's); style: how the launcher passes environment
    (default: detected); do_check: check the MPI libraries first; preload: False starts the command
    without LD_PRELOAD (for programs linked with the interposer, such as ferry-measure), still
    checked and still passing FERRY_* variables on. Raises LaunchError."""
    from ._interposer import library_path

    environ = dict(os.environ if environ is None else environ)
    if not command:
        raise LaunchError("no command: ferry-run mpiexec -n 4 python app.py")
    library = os.path.abspath(library or library_path())
    if not os.path.isfile(library):
        raise LaunchError(
            "Ferry's interposer %s does not exist: the ferry package is incomplete, or --library "
            "names a file that is not there (reinstall: pip install --force-reinstall --no-deps "
            "<ferry source>)" % library)
    launcher, rest = command[0], list(command[1:])
    first_line = ""
    if style is None:
        style, first_line = detect_style(launcher, environ)
    elif style not in STYLES:
        raise LaunchError("unknown --launcher-style %r: one of %s" % (style, ", ".join(STYLES)))
    if shutil.which(launcher, path=environ.get("PATH")) is None:
        raise LaunchError("%s: command not found" % launcher)
    for flag, value in zip([""] + rest, rest):
        sets = (flag in ("-x", "-genv", "-env") and value.startswith("LD_PRELOAD")) or \
            (style == "slurm" and value.startswith("--export"))
        if sets:
            t = (flag + " " + value).strip()
            raise LaunchError(
                "the command sets the ranks' environment itself (%s); ferry-run sets LD_PRELOAD "
                "for every rank, with Ferry's interposer first and the LD_PRELOAD of its own "
                "environment after it: set yours in the environment instead" % t)
    notes = []
    if do_check:
        tokens = command if style == "env" else rest
        notes = check(library, style, launcher, first_line, tokens, environ)
    value = _preload_value(library, environ) if preload else None
    ferry_vars = sorted(k for k in environ if k.startswith("FERRY_"))
    env = environ
    flags = []
    if style == "openmpi":
        if value:
            flags += ["-x", "LD_PRELOAD=" + value]
        for k in ferry_vars:
            flags += ["-x", k]
    elif style == "hydra":
        if value:
            flags += ["-genv", "LD_PRELOAD", value]
        for k in ferry_vars:
            flags += ["-genv", k, environ[k]]
    elif style == "slurm":
        if value:
            flags.append("--export=ALL,LD_PRELOAD=" + value)
    elif value:
        env = dict(environ, LD_PRELOAD=value)
    return Launch([launcher] + flags + rest, env, style, notes)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ferry-run",
        description="Start an MPI program with Ferry's interposer preloaded in every rank.",
        epilog="example: ferry-run mpiexec -n 4 python app.py")
    parser.add_argument("--library", help="the interposer to preload (default: this package's)")
    parser.add_argument("--launcher-style", choices=STYLES,
                        help="how the launcher passes environment (default: from its --version)")
    parser.add_argument("--no-check", action="store_true",
                        help="do not check that the launcher, the interposer and the program share one MPI")
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    parser.add_argument("-v", "--verbose", action="store_true", help="print what was checked and the command")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the launcher command line")
    args = parser.parse_args(argv)
    try:
        launch = prepare(args.command, library=args.library, style=args.launcher_style,
                         do_check=not args.no_check)
    except LaunchError as e:
        sys.stderr.write("ferry-run: error: %s\n" % e)
        return 1
    if args.verbose:
        for n in launch.notes:
            sys.stderr.write("ferry-run: %s\n" % n)
    if args.dry_run or args.verbose:
        (sys.stdout if args.dry_run else sys.stderr).write(launch.shell() + "\n")
    if args.dry_run:
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(launch.argv[0], launch.argv, launch.env)
    except OSError as e:
        sys.stderr.write("ferry-run: error: cannot run %s: %s\n" % (launch.argv[0], e))
        return 127


if __name__ == "__main__":
    sys.exit(main())
