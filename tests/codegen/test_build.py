"""Compiling generated C++: cached by the source's hash, a failed build shows the compiler's
message and the generated file's path, nothing falls back silently."""
import os

import pytest

from fluidity.codegen import build
from fluidity.codegen.build import CompileError

GOOD = '#include "fluidity.h"\nextern "C" int answer() { return 42; }\n'


def test_build_once_then_load_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(tmp_path))
    path = build.compile_cached(GOOD)
    assert path.startswith(str(tmp_path)) and os.path.exists(path)
    assert os.path.exists(path[:-3] + ".cc")          # the source, for reading
    mtime = os.stat(path).st_mtime_ns
    assert build.compile_cached(GOOD) == path and os.stat(path).st_mtime_ns == mtime
    assert build.load(path).answer() == 42
    assert build.compile_cached(GOOD + "// another\n") != path


def test_a_compiler_error_names_the_generated_file_and_says_what(tmp_path, monkeypatch):
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(tmp_path))
    with pytest.raises(CompileError) as e:
        build.compile_cached('#include "fluidity.h"\nint f() { return undeclared_name; }\n')
    msg = str(e.value)
    kept = msg.split("generated code ")[1].split(":\n")[0]   # kept outside the cache
    assert "undeclared_name" in msg and kept.endswith(".cc") and os.path.exists(kept)
    assert not [f for f in os.listdir(tmp_path / "codegen") if not f.startswith(".")]


def test_a_missing_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    with pytest.raises(CompileError, match="cannot run the C\\+\\+ compiler"):
        build.compile_cached(GOOD + "// new key\n")
