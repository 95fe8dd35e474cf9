"""ferry.measure: measure this machine's performance model, or validate one, from Python.

It runs the package's ferry-measure program (CUDA builds ship it) with two ranks under an MPI
launcher, so the model file is the very file ferry-measure writes and the interposer reads::

    import ferry.measure
    path = ferry.measure.measure()                 # ~/.cache/ferry/model-<host>.json
    result = ferry.measure.validate(path)          # {"hits": ..., "cases": ..., "records": [...]}

    python -m ferry.measure [--launcher "mpiexec -n 2"] [--out FILE] [--update FILE] [--quick]
    python -m ferry.measure --validate FILE [--json OUT]

The launcher line is checked as ferry-run checks it (its MPI and the program's are one); FERRY_*
variables reach the ranks. Measuring needs a GPU: on one GPU it measures ranks that share it, on
two GPUs ranks on two GPUs (README: run it both ways to measure both).
"""

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile

from . import _build_info
from ._interposer import program_path
from .run import LaunchError, prepare

DEFAULT_LAUNCHER = ("mpiexec", "-n", "2")


class MeasureError(RuntimeError):
    """ferry-measure could not run, or failed; the message says why."""


def default_model_path():
    """Where the interposer looks for the model: $FERRY_MODEL, else the per-host cache file."""
    if os.environ.get("FERRY_MODEL"):
        return os.environ["FERRY_MODEL"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "ferry", "model-%s.json" % socket.gethostname())


def program():
    """The path of ferry-measure; MeasureError when this build has none."""
    path = program_path("ferry-measure")
    if not os.path.isfile(path):
        if not _build_info.cuda:
            raise MeasureError(
                "ferry-measure needs a GPU build, and this ferry was built without CUDA "
                "(ferry.build_info()['backend'] == 'cpu'): reinstall it where the CUDA toolkit is "
                "found (nvcc on PATH, or CUDACXX=/path/to/nvcc)")
        raise MeasureError("%s does not exist: the ferry package is incomplete; reinstall it" % path)
    return path


def _launcher(launcher):
    if launcher is None:
        return list(DEFAULT_LAUNCHER)
    return shlex.split(launcher) if isinstance(launcher, str) else list(launcher)


def _run(args, launcher, check):
    try:
        launch = prepare(_launcher(launcher) + [program()] + args, preload=False, do_check=check)
    except LaunchError as e:
        raise MeasureError(str(e))
    return subprocess.run(launch.argv, env=launch.env).returncode


def measure(out=None, update=None, max_size=None, quick=False, launcher=None, check=True):
    """Measures the model and writes it to `out` (default: default_model_path()); returns the path.

    update: a model file whose curves this run keeps for the localities it cannot measure;
    max_size: the largest message, bytes or "64M"; quick: fewer repetitions; launcher: the
    command line that starts two ranks (default "mpiexec -n 2"). Raises MeasureError."""
    out = os.path.abspath(out or default_model_path())
    os.makedirs(os.path.dirname(out), exist_ok=True)
    args = ["--out", out]
    if update:
        args += ["--update", os.path.abspath(update)]
    if max_size:
        args += ["--max-size", str(max_size)]
    if quick:
        args.append("--quick")
    rc = _run(args, launcher, check)
    if rc != 0 or not os.path.isfile(out):
        raise MeasureError("ferry-measure failed (exit status %d); its output above says why" % rc)
    return out


def validate(model=None, json_out=None, max_size=None, quick=False, launcher=None, check=True):
    """Checks a model (default: default_model_path()) against a held-out sweep.

    Returns ferry-measure's JSON result as a dict ("records", "hits", "cases") with "ok" added:
    the model's pick was the fastest within 5 % in at least 90 % of cases. json_out keeps the file.
    Raises MeasureError when ferry-measure could not run."""
    model = os.path.abspath(model or default_model_path())
    if not os.path.isfile(model):
        raise MeasureError("no model file %s: run ferry.measure.measure() first" % model)
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.abspath(json_out) if json_out else os.path.join(tmp, "validate.json")
        args = ["--validate", model, "--json", result]
        if max_size:
            args += ["--max-size", str(max_size)]
        if quick:
            args.append("--quick")
        rc = _run(args, launcher, check)
        if not os.path.isfile(result):
            raise MeasureError("ferry-measure --validate wrote no result (exit status %d)" % rc)
        with open(result) as f:
            data = json.load(f)
    data["ok"] = data["cases"] > 0 and data["hits"] >= 0.9 * data["cases"]
    data["exit_status"] = rc
    return data


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ferry.measure", description=__doc__.split("\n")[0])
    parser.add_argument("--launcher", help='the command that starts 2 ranks (default "mpiexec -n 2")')
    parser.add_argument("--out", help="the model file to write (default %s)" % default_model_path())
    parser.add_argument("--update", help="keep this model's curves for localities not measured now")
    parser.add_argument("--validate", metavar="MODEL", help="validate MODEL instead of measuring")
    parser.add_argument("--json", help="with --validate: write the result here too")
    parser.add_argument("--max-size", help="the largest message (e.g. 64M)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--no-check", action="store_true", help="do not check the MPI libraries first")
    a = parser.parse_args(argv)
    try:
        if a.validate:
            r = validate(a.validate, json_out=a.json, max_size=a.max_size, quick=a.quick,
                         launcher=a.launcher, check=not a.no_check)
            print("ferry.measure: %d of %d picks within 5%% of the fastest: %s"
                  % (r["hits"], r["cases"], "ok" if r["ok"] else "below the 90% goal"))
            return 0 if r["ok"] else 1
        path = measure(a.out, update=a.update, max_size=a.max_size, quick=a.quick,
                       launcher=a.launcher, check=not a.no_check)
        print("ferry.measure: wrote " + path)
        return 0
    except MeasureError as e:
        sys.stderr.write("ferry.measure: error: %s\n" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
