"""Small C libraries shipped as source, compiled on first use with the system C compiler.

Hot loops that numpy cannot express without temporaries or a sort (the MultiSlot text parser,
sparse embedding pooling and row-scatter updates, the AsyncExecutor's native loop) live in
`.c` files next to the Python that calls them. `load(src)` compiles one with `$CC` (default
`cc`) into the build cache (`core/build_cache.py`: the `native/` directory of
`$FLUIDITY_CACHE_DIR`, default `~/.cache/fluidity`), keyed by the source, the compiler's
identity and the flags, and loads it verified, with ctypes (whose calls release the GIL).

A library that cannot be built raises `NativeBuildError`, remembered per source for the
process so a missing compiler costs one attempt; callers fall back to numpy.
"""
import os
import subprocess

from ..errors import FluidityError
from . import build_cache

CFLAGS = ("-O2", "-shared", "-fPIC")
KIND = "native"
_loaded = {}  # source path -> CDLL or the NativeBuildError saying why it failed


class NativeBuildError(FluidityError):
    """A C helper library could not be compiled or loaded."""


def cache_dir():
    """The build cache's root directory (core/build_cache.py)."""
    return build_cache.root()


def _build(src_path, cflags, libs):
    try:
        with open(src_path, "rb") as f:
            src = f.read()
    except OSError as e:
        raise NativeBuildError(f"cannot read the C source {src_path}: {e}") from None
    cc = os.environ.get("CC") or "cc"
    stem = os.path.splitext(os.path.basename(src_path))[0]

    def compile_fn(src_file, out):
        try:
            r = subprocess.run([cc, *cflags, "-o", out, src_file, *libs],
                               capture_output=True, text=True)
        except OSError as e:
            raise NativeBuildError(f"cannot run the C compiler {cc!r}: {e}") from None
        if r.returncode != 0:
            return ((r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"])[0]
        return None

    def fail(kept, message):
        return NativeBuildError(f"{cc} failed to compile {src_path}: {message}")

    try:
        path = build_cache.build(KIND, stem, src, build_cache.toolchain_id(cc, *cflags, *libs),
                                 compile_fn, fail, src_ext=".c")
        return build_cache.load(path)
    except build_cache.CacheError as e:
        raise NativeBuildError(str(e)) from None


def load(src_path, cflags=CFLAGS, libs=()):
    """The ctypes library built from `src_path` (linked with `libs`, e.g. "-lm");
    NativeBuildError (once per process and source, then the same error again) when it cannot
    be built."""
    lib = _loaded.get(src_path)
    if lib is None:
        try:
            lib = _build(src_path, tuple(cflags), tuple(libs))
        except NativeBuildError as e:
            lib = e
        _loaded[src_path] = lib
    if isinstance(lib, NativeBuildError):
        raise lib
    return lib


def forget(src_path=None):
    """Drop the remembered result for one source (or all): the next load() tries again."""
    if src_path is None:
        _loaded.clear()
    else:
        _loaded.pop(src_path, None)
