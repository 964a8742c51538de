"""The precompiled runtime header (codegen/precompiled.py): built once into the build cache,
verified, used by the generated code's builds, and never a reason for a build to fail."""
import ctypes
import os
import subprocess

import pytest

from fluidity.codegen import build, precompiled
from fluidity.core import build_cache

SOURCE = """// a generated-code-like library
#include "fluidity.h"
extern "C" double fl_test_sum(const double* x, long n) { return fl::pairwise_sum(x, n, 1); }
"""


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(precompiled, "_dirs", {})
    return tmp_path / "cache"


def _sum(path):
    lib = ctypes.CDLL(path)
    lib.fl_test_sum.restype = ctypes.c_double
    xs = (ctypes.c_double * 5)(1.5, 2.0, -0.25, 8.0, 1e-3)
    return lib.fl_test_sum(xs, 5)


def _cxx():
    return os.environ.get("CXX") or "g++"


def test_the_header_is_precompiled_once_into_the_cache_and_used(fresh_cache, monkeypatch):
    lib = build.compile_cached(SOURCE, name="pch_check")
    gch = [n for n in os.listdir(fresh_cache / "codegen") if n.endswith(".gch")]
    assert len(gch) == 1, os.listdir(fresh_cache / "codegen")
    (d,) = [v for v in precompiled._dirs.values() if v]
    link = os.path.join(d, "fluidity.h.gch")
    assert os.readlink(link) == str(fresh_cache / "codegen" / gch[0])
    assert oct(os.stat(d).st_mode & 0o777) == "0o700"
    # the compiler takes it: -Winvalid-pch would say why not
    flags, _ = build._flags(_cxx(), "shared")
    src = fresh_cache / "probe.cc"
    src.write_text(SOURCE)
    r = subprocess.run([_cxx(), f"-I{d}", *[f for f in flags if f != "-shared"], "-H",
                        "-Winvalid-pch", "-fsyntax-only", str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "fluidity.h.gch" in r.stderr, r.stderr[:2000]
    # the same results as a build without it
    monkeypatch.setenv("FLUIDITY_PCH", "0")
    plain = build.compile_cached(SOURCE + "// plain\n", name="pch_check")
    assert _sum(lib) == _sum(plain) == 1.5 + 2.0 - 0.25 + 8.0 + 1e-3


def test_a_tampered_precompiled_header_is_built_again(fresh_cache):
    build.compile_cached(SOURCE, name="pch_check")
    (gch,) = [fresh_cache / "codegen" / n for n in os.listdir(fresh_cache / "codegen")
              if n.endswith(".gch")]
    data = bytearray(gch.read_bytes())
    data[len(data) // 2] ^= 0xFF
    gch.write_bytes(bytes(data))
    with pytest.raises(build_cache.CacheIntegrityError):
        build_cache.verify(str(gch))
    precompiled._dirs.clear()
    lib = build.compile_cached(SOURCE + "// again\n", name="pch_check")
    os.close(build_cache.verify(str(gch)))      # rebuilt over the damaged one
    assert _sum(lib) == pytest.approx(11.251)


def test_a_compiler_that_cannot_precompile_builds_as_before(fresh_cache, monkeypatch):
    def refuses(argv):
        if "c++-header" in argv:
            return subprocess.CompletedProcess(argv, 1, "", "no precompiled headers here")
        return build.run_compiler(argv)
    flags, _ = build._flags(_cxx(), "shared")
    assert precompiled.include_dir(_cxx(), flags, "a toolchain", build.KIND, refuses) is None
    assert not [n for n in os.listdir(fresh_cache / "codegen") if ".gch" in n]
    monkeypatch.setattr(precompiled, "_dirs", {build._toolchain(_cxx(), "shared"): None})
    assert _sum(build.compile_cached(SOURCE, name="pch_check")) == pytest.approx(11.251)


def test_fluidity_pch_0_turns_it_off(fresh_cache, monkeypatch):
    monkeypatch.setenv("FLUIDITY_PCH", "0")
    build.compile_cached(SOURCE, name="pch_check")
    assert not [n for n in os.listdir(fresh_cache / "codegen") if ".gch" in n]
