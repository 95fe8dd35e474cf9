"""ferry.measure from Python: what a CPU build says, and the command it runs."""
import os
import subprocess
import sys

import pytest

import ferry
import ferry.measure as fm


def test_default_model_path_is_the_interposers(monkeypatch, tmp_path):
    monkeypatch.delenv("FERRY_MODEL", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    import socket
    assert fm.default_model_path() == str(tmp_path / "ferry" / ("model-%s.json" % socket.gethostname()))
    monkeypatch.setenv("FERRY_MODEL", "/x/m.json")
    assert fm.default_model_path() == "/x/m.json"


@pytest.mark.skipif(ferry.build_info()["cuda"], reason="a CUDA build ships ferry-measure")
def test_cpu_build_says_it_needs_cuda(tmp_path):
    with pytest.raises(fm.MeasureError, match="needs a GPU build, and this ferry was built without CUDA"):
        fm.measure(str(tmp_path / "m.json"))
    p = subprocess.run([sys.executable, "-m", "ferry.measure", "--out", str(tmp_path / "m.json")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert p.returncode == 1
    assert "ferry.measure: error: ferry-measure needs a GPU build" in p.stdout


def test_validate_without_a_model(tmp_path):
    with pytest.raises(fm.MeasureError, match="no model file"):
        fm.validate(str(tmp_path / "none.json"))
