"""The runtime header, precompiled: most of a generated library's compile time is the
compiler reading `fluidity.h` (the runtime headers, <cmath>, <algorithm>, the BLAS header),
the same text for every program. GCC can read it from a precompiled header (`.gch`)
instead, which makes each build of a small program about 40% faster with the same code
(the output is identical: a precompiled header only saves parsing).

The `.gch` is a build-cache entry like a library (`core/build_cache.py`: built once per
compiler, flags and runtime headers; recorded with its digest; verified before use), since
what it holds becomes part of the code we load. Each process that uses it verifies it once
and points the compiler at it through a private directory (0700, made by this process)
holding one link named `fluidity.h.gch`, searched before the runtime directory: GCC takes
`fluidity.h.gch` for `#include "fluidity.h"` when its flags match, and otherwise goes on to
the real header, so a stale or refused one only costs the time it would have saved.

`FLUIDITY_PCH=0` turns it off; a compiler that cannot make one (not GCC, say) is asked once.
"""
import atexit
import os
import shutil
import tempfile
import threading

from ..core import build_cache

HEADER = "fluidity.h"
_SOURCE = f'// the runtime header, precompiled (codegen/precompiled.py)\n#include "{HEADER}"\n'
_dirs = {}              # toolchain -> private include directory, or None (none usable)
_lock = threading.Lock()


def enabled():
    return os.environ.get("FLUIDITY_PCH", "1") != "0"


def include_dir(cxx, flags, toolchain, kind_dir, run_compiler):
    """A private directory holding `fluidity.h.gch` built by `cxx` with `flags` (the
    generated code's own compile flags, less -shared), to put first on the include path;
    None when there is none to use. `toolchain` is the build-cache toolchain id of those
    flags; `kind_dir` the cache kind the entry goes in; `run_compiler(argv)` runs a compile
    and returns its CompletedProcess."""
    if not enabled():
        return None
    with _lock:
        if toolchain in _dirs:
            return _dirs[toolchain]
        _dirs[toolchain] = d = _make(cxx, [f for f in flags if f != "-shared"], toolchain,
                                     kind_dir, run_compiler)
        return d


def _make(cxx, flags, toolchain, kind_dir, run_compiler):
    def compile_fn(src, out):
        r = run_compiler([cxx, *flags, "-x", "c++-header", src, "-o", out])
        return None if r.returncode == 0 else (r.stderr or r.stdout or "failed")[:2000]

    try:
        path = build_cache.build(kind_dir, "fluidity_h", _SOURCE.encode(),
                                 "precompiled header " + toolchain, compile_fn,
                                 lambda kept, message: build_cache.CacheError(message),
                                 src_ext=".h", ext=".gch")
        os.close(build_cache.verify(path))      # verified once, here, before any use
    except (build_cache.CacheError, OSError):
        # a compiler that cannot precompile, a full disk, a refused entry: compile as before
        # (a cache that is not safe to use fails the library build itself, naming why)
        return None
    d = tempfile.mkdtemp(prefix="fluidity-pch-")
    atexit.register(shutil.rmtree, d, True)
    os.symlink(path, os.path.join(d, HEADER + ".gch"))
    return d
