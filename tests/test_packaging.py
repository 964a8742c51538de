"""The built wheel, installed into a fresh venv, carries every C source of the package and
each compiles from the installed copy (a wheel without one silently runs its kernels on
numpy). Builds offline: the test venv's setuptools, no build isolation, no downloads."""
import os
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest
from paths import ROOT

PKG = os.path.join(ROOT, "fluidity")


def _c_sources_in_tree():
    out = set()
    for root, _dirs, files in os.walk(PKG):
        out.update(os.path.relpath(os.path.join(root, f), ROOT) for f in files if f.endswith(".c"))
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel built from a clean copy of the sources: a build/ or *.egg-info/ left in the
    checkout (an editable install makes one) would list files package-data does not."""
    src = tmp_path_factory.mktemp("src") / "fluidity-src"
    anywhere = shutil.ignore_patterns("*.egg-info", "__pycache__")
    at_root = {".git", ".venv", ".venv-paddle", "build", "dist", "data", "out", "tests",
               "benchmarks"}

    def ignore(d, names):
        skip = set(anywhere(d, names))
        return skip | (at_root & set(names)) if os.path.samefile(d, ROOT) else skip
    shutil.copytree(ROOT, src, ignore=ignore)
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "--no-index", "-q", "-w", str(out), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (path,) = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".whl")]
    return path


def test_the_wheel_holds_every_c_source(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    want = _c_sources_in_tree()
    assert want, "the package has no C sources?"
    assert sorted(want - names) == []


def test_c_sources_compile_from_the_installed_package(wheel, tmp_path):
    """A fresh venv sees this venv's dependencies (numpy, protobuf, ...) through a .pth path
    entry, but not its editable fluidity: the wheel's copy is the one imported."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = [p for p in sys.path if p.endswith("site-packages")]
    with open(os.path.join(site, "test_deps.pth"), "w") as f:
        f.write("\n".join(deps) + "\n")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    check = f"""
import os, sys, warnings
warnings.simplefilter("error")       # a fallback to numpy warns: make it fail
import fluidity
from fluidity.core import native
from fluidity.datafeed import multislot
from fluidity.ops import sparse_kernels
from fluidity.executor import direct, native_loop
pkg = os.path.dirname(fluidity.__file__)
assert pkg.startswith({site!r}), pkg
srcs = [os.path.join(r, f) for r, _, fs in os.walk(pkg) for f in fs if f.endswith(".c")]
for src in srcs:       # each with the flags its module builds it with
    flags = (native_loop.cflags() if src.endswith("native_loop.c") else
             direct.helper_cflags() if src.endswith("direct_call.c") else native.CFLAGS)
    if flags is None:  # direct_call.c without the Python headers: run() packs in Python
        continue
    native.load(src, flags, libs=("-lm",))
assert multislot.build() and sparse_kernels.build()
print(len(srcs))
"""
    env = dict(os.environ, FLUIDITY_CACHE_DIR=str(tmp_path / "cache"), PYTHONNOUSERSITE="1")
    env.pop("PYTHONPATH", None)
    r = subprocess.run([str(py), "-c", check], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout.split()[-1]) == len(_c_sources_in_tree())
