"""The one build cache (core/build_cache.py): a library is loaded only when its signed record
matches it, from directories only this user can write (0700 whatever the umask), the cache
stays under its size cap by evicting the least recently used entries, and a failed build
leaves nothing behind. The tests run as root: foreign owners are made with os.chown."""
import ctypes
import json
import os
import shutil
import stat
import subprocess
import time

import pytest

from fluidity.codegen import build
from fluidity.core import build_cache, native
from fluidity.core.build_cache import CacheIntegrityError, CacheSecurityError

OTHER_UID = 4321
CC = shutil.which(os.environ.get("CC") or "cc") or "cc"


def lib_source(value):
    return f"int answer(void) {{ return {value}; }}\n".encode()


def _compile(src, out):
    r = subprocess.run([CC, "-shared", "-fPIC", "-o", out, src], capture_output=True, text=True)
    return None if r.returncode == 0 else r.stderr or "failed"


def _fail(kept, message):
    return RuntimeError(f"failed to compile {kept}: {message}")


def make(value, stem="lib"):
    """The path of a cached library whose answer() returns `value`."""
    return build_cache.build("test", stem, lib_source(value), build_cache.toolchain_id(CC),
                             _compile, _fail, ".c")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(root))
    monkeypatch.delenv("FLUIDITY_TRUSTED_CACHE_DIR", raising=False)
    monkeypatch.delenv("FLUIDITY_CACHE_MAX_MB", raising=False)
    monkeypatch.setattr(build_cache, "_loaded", {})   # every test loads from disk
    yield root
    for dirpath, dirnames, filenames in os.walk(tmp_path):   # chowned files: let pytest
        for n in dirnames + filenames:                       # clean them up
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.chown(p, 0, 0)


def answer(path):
    return build_cache.load(path).answer()


def test_built_once_verified_and_loaded(cache):
    path = make(42)
    assert path.startswith(str(cache / "test")) and answer(path) == 42
    mtime = os.stat(path).st_mtime_ns
    assert make(42) == path and os.stat(path).st_mtime_ns == mtime      # a hit builds nothing
    assert make(43) != path
    rec = json.loads(open(path[:-3] + ".json").read())
    assert rec["fields"]["bytes"] == os.path.getsize(path) and len(rec["mac"]) == 64
    assert open(path[:-3] + ".c", "rb").read() == lib_source(42)    # the source, for reading


def test_directories_and_files_are_private_whatever_the_umask(cache):
    old = os.umask(0)
    try:
        path = make(1)
    finally:
        os.umask(old)
    for d in (cache, cache / "test"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    for f in os.listdir(cache / "test"):
        assert stat.S_IMODE(os.stat(cache / "test" / f).st_mode) & 0o077 == 0, f
    assert stat.S_IMODE(os.stat(cache / ".key").st_mode) == 0o600
    assert answer(path) == 1


def test_a_swapped_library_is_refused_then_built_again(cache):
    good, evil = make(3), make(-7)
    shutil.copyfile(evil, good + ".tmp")
    os.replace(good + ".tmp", good)                     # same name, another library
    with pytest.raises(CacheIntegrityError, match="does not match the digest") as e:
        answer(good)
    assert good in str(e.value)
    assert make(3) == good and answer(good) == 3       # a build over it restores the entry


def test_a_library_swapped_with_its_record_is_refused(cache):
    good, evil = make(3), make(-7)
    for ext in (".so", ".json"):
        shutil.copyfile(evil[:-3] + ext, good[:-3] + ext)
    with pytest.raises(CacheIntegrityError, match="for another entry"):
        answer(good)


def test_a_record_forged_without_the_key_is_refused(cache):
    good, evil = make(3), make(-7)
    shutil.copyfile(evil, good)
    rec_path = good[:-3] + ".json"
    rec = json.loads(open(rec_path).read())
    data = open(good, "rb").read()
    import hashlib
    rec["fields"].update(binary=hashlib.sha256(data).hexdigest(), bytes=len(data))
    open(rec_path, "w").write(json.dumps(rec))          # the digest right, the signature not
    with pytest.raises(CacheIntegrityError, match="not signed by this cache's key"):
        answer(good)


def test_a_truncated_library_is_refused(cache):
    path = make(5)
    with open(path, "r+b") as f:
        f.truncate(100)
    with pytest.raises(CacheIntegrityError, match="its record says"):
        answer(path)


def test_a_foreign_owned_cache_directory_is_refused(cache):
    make(1)
    os.chown(cache / "test", OTHER_UID, OTHER_UID)
    with pytest.raises(CacheSecurityError, match=f"owned by uid {OTHER_UID}") as e:
        make(2)
    assert str(cache / "test") in str(e.value)
    os.chown(cache / "test", 0, 0)
    os.chown(cache, OTHER_UID, OTHER_UID)
    with pytest.raises(CacheSecurityError, match=str(cache)):
        make(2)


def test_a_foreign_owned_library_is_refused(cache):
    path = make(1)
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(CacheSecurityError, match=f"library {path}: it is owned by uid"):
        answer(path)


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_directory_group_or_others_can_write_is_refused(cache, mode):
    make(1)
    os.chmod(cache / "test", mode)
    with pytest.raises(CacheSecurityError, match="group or others can write"):
        make(2)


def test_a_world_writable_parent_is_refused_unless_sticky(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, OTHER_UID, OTHER_UID)       # another user's directory above the cache
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(shared / "mine"))
    with pytest.raises(CacheSecurityError, match=f"{shared}: that directory is owned by uid"):
        make(1)
    os.chown(shared, 0, 0)
    os.chmod(shared, 0o777)
    with pytest.raises(CacheSecurityError, match="no sticky bit"):
        make(1)
    os.chmod(shared, 0o1777)                      # as /tmp: others cannot move our entries
    assert answer(make(1)) == 1


def test_a_trusted_shared_cache_skips_owner_checks_not_digests(tmp_path, monkeypatch):
    shared = tmp_path / "team-cache"
    shared.mkdir()
    os.chmod(shared, 0o777)
    os.chown(shared, OTHER_UID, OTHER_UID)
    monkeypatch.setenv("FLUIDITY_TRUSTED_CACHE_DIR", str(shared))
    path = make(11)
    assert path.startswith(str(shared)) and answer(path) == 11
    assert build_cache.info()["trusted"] is True
    evil = make(12)
    shutil.copyfile(evil, path)
    build_cache._loaded.clear()
    with pytest.raises(CacheIntegrityError):
        answer(path)


def test_a_failed_build_leaves_nothing_in_the_cache(cache):
    make(1)
    before = sorted(os.listdir(cache / "test"))
    with pytest.raises(RuntimeError, match="failed to compile") as e:
        build_cache.build("test", "bad", b"this is not C;\n", build_cache.toolchain_id(CC),
                          _compile, _fail, ".c")
    assert sorted(os.listdir(cache / "test")) == before
    kept = str(e.value).split("failed to compile ")[1].split(":")[0]
    assert not kept.startswith(str(cache)) and open(kept, "rb").read() == b"this is not C;\n"


def test_generated_code_failures_name_the_kept_source(cache):
    with pytest.raises(build.CompileError, match="undeclared_name") as e:
        build.compile_cached('#include "fluidity.h"\nint f() { return undeclared_name; }\n')
    assert ".cc" in str(e.value)
    # nothing of the failed build; the precompiled runtime header (codegen/precompiled.py)
    # it was compiled with is an entry of its own
    assert not [f for f in os.listdir(cache / "codegen")
                if not f.startswith((".", "fluidity_h-"))]


def test_lru_eviction_under_a_small_cap(cache, monkeypatch):
    paths = [make(v) for v in range(4)]
    sizes = {p: sum(os.path.getsize(p[:-3] + e) for e in (".so", ".c", ".json", ".lock"))
             for p in paths}
    lib0 = build_cache.load(paths[0])             # loaded: its eviction must not break it
    now = time.time()
    for age, p in zip((4000, 1000, 3000, 2000), paths):   # last use: 1 most recent of the old
        os.utime(p[:-3] + ".json", (now - age, now - age))
    cap = 3 * max(sizes.values()) + min(sizes.values()) // 2    # room for 3 of the 5 entries
    monkeypatch.setenv("FLUIDITY_CACHE_MAX_MB", str(cap / (1 << 20)))
    newest = make(99)                            # over the cap: the LRU entries go
    assert os.path.exists(newest)
    assert not os.path.exists(paths[0]) and not os.path.exists(paths[2])
    assert os.path.exists(paths[1])              # used more recently than 0, 2 and 3
    assert build_cache.info()["bytes"] <= cap
    assert lib0.answer() == 0                    # unlinked, still mapped: still runs
    assert make(0) == paths[0] and answer(paths[0]) == 0   # and it is rebuilt on demand


def test_recently_used_entries_are_never_evicted(cache, monkeypatch):
    paths = [make(v) for v in range(3)]
    monkeypatch.setenv("FLUIDITY_CACHE_MAX_MB", "0.000001")
    assert build_cache.evict() == 0              # all used within GRACE_S
    assert all(os.path.exists(p) for p in paths)


def test_info_and_clear(cache):
    assert build_cache.info()["entries"] == 0
    paths = [make(v) for v in range(2)]
    got = build_cache.info()
    assert got["path"] == str(cache) and got["entries"] == 2 and got["bytes"] > 0
    assert got["max_bytes"] == build_cache.DEFAULT_MAX_MB << 20 and got["trusted"] is False
    assert build_cache.clear() == 2
    assert build_cache.info()["entries"] == 0 and not any(map(os.path.exists, paths))


def test_native_helpers_go_through_the_verified_cache(cache, monkeypatch):
    src = os.path.join(os.path.dirname(native.__file__), "..", "ops", "sparse_kernels.c")
    native.forget(src)
    try:
        lib = native.load(src, libs=("-lm",))
        assert isinstance(lib, ctypes.CDLL)
        (so,) = [f for f in os.listdir(cache / "native") if f.endswith(".so")]
        assert so.startswith("sparse_kernels-")
        with open(cache / "native" / so, "r+b") as f:      # damaged behind our back
            f.seek(200)
            f.write(b"\xff" * 8)
        native.forget(src)
        monkeypatch.setattr(build_cache, "_loaded", {})
        assert isinstance(native.load(src, libs=("-lm",)), ctypes.CDLL)   # rebuilt, verified
    finally:
        native.forget(src)
