"""`fluidity cache`: where the build cache is and how big; --clear empties it (over
core/build_cache.py's info() and clear() where that module is there)."""
import importlib.util
import os
import subprocess
import sys

import pytest

HAS_BUILD_CACHE = importlib.util.find_spec("fluidity.core.build_cache") is not None


def _cli(*args, cache):
    return subprocess.run([sys.executable, "-m", "fluidity.cli", "cache", *args],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, FLUIDITY_CACHE_DIR=str(cache)))


@pytest.mark.skipif(HAS_BUILD_CACHE, reason="the verified build cache is there")
def test_cache_shows_the_directory_and_its_size(tmp_path):
    (tmp_path / "codegen").mkdir()
    (tmp_path / "codegen" / "lib.so").write_bytes(b"x" * 2000)
    r = _cli(cache=tmp_path)
    assert r.returncode == 0 and r.stdout == f"{tmp_path}: 1 files, 2.0 kB\n", r.stdout
    r = _cli("--clear", cache=tmp_path)
    assert r.returncode == 2 and "remove" in r.stderr and "by hand" in r.stderr
    assert (tmp_path / "codegen" / "lib.so").exists()


@pytest.mark.skipif(not HAS_BUILD_CACHE, reason="needs fluidity.core.build_cache")
def test_cache_shows_and_clears_the_build_cache(tmp_path):
    cache = tmp_path / "cache"
    r = _cli(cache=cache)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{cache}: 0 compiled libraries and executables, 0 B (cap ")
    r = _cli("--clear", cache=cache)
    assert r.returncode == 0 and r.stdout.startswith("removed 0 compiled libraries"), r.stderr
