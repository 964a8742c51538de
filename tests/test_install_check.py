"""`fluid.install_check.run_check()` builds and runs one native segment and says what is
missing when it cannot; `fluidity env` prints what a bug report needs."""
import subprocess
import sys

import pytest

import fluidity as fluid
from fluidity.install_check import InstallCheckError


def test_run_check_trains_natively_too(capsys):
    fluid.install_check.run_check()
    out = capsys.readouterr().out
    assert "on the Executor, data parallel and as native code" in out
    assert "installed successfully" in out


def test_run_check_names_a_missing_cxx_compiler(monkeypatch, capsys):
    monkeypatch.setenv("CXX", "no-such-g++")
    with pytest.raises(InstallCheckError, match=r"no C\+\+ compiler.*'no-such-g\+\+' is not "
                                                 r"installed.*apt-get install g\+\+"):
        fluid.install_check.run_check()
    assert "successfully" not in capsys.readouterr().out


def test_run_check_names_a_compiler_that_fails(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CXX", "false")
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(tmp_path))
    with pytest.raises(InstallCheckError, match="the C\\+\\+ compiler could not build"):
        fluid.install_check.run_check()
    assert "successfully" not in capsys.readouterr().out


def test_a_missing_c_compiler_is_a_note(monkeypatch):
    from fluidity import install_check
    monkeypatch.setenv("CC", "no-such-cc")
    assert "run on numpy" in install_check._c_kernels_note()
    monkeypatch.delenv("CC")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert install_check._c_kernels_note() is None or "no C compiler" in \
        install_check._c_kernels_note()


def test_fluidity_env_reports_what_a_bug_report_needs(tmp_path):
    r = subprocess.run([sys.executable, "-m", "fluidity.cli", "env"], capture_output=True,
                       text=True, env={"PATH": "/usr/bin:/bin", "FLUIDITY_CACHE_DIR": str(tmp_path),
                                       "OPENBLAS_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(f"Fluidity {fluid.__version__} (")
    for part in ("Python 3.", "numpy ", "protobuf ", "BLAS:", " threads", "generated code links:",
                 "compilers:", "C++ ($CXX, compiled programs):", "CUDA:", "nvcc:",
                 f"build cache: {tmp_path} (", "OPENBLAS_NUM_THREADS=1"):
        assert part in out, (part, out)
