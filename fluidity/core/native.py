"""Small C libraries shipped as source, compiled on first use with the system C compiler.

Hot loops that numpy cannot express without temporaries or a sort (the MultiSlot text parser,
sparse embedding pooling and row-scatter updates) live in `.c` files next to the Python that
calls them. `load(src)` compiles one with `$CC` (default `cc`) into the cache directory
(`$FLUIDITY_CACHE_DIR`, default `~/.cache/fluidity`) under a name keyed by the hash of the
source and the flags, and loads it with ctypes (whose calls release the GIL). Concurrent
builders race harmlessly: each writes a temp file and renames it into place atomically.

A library that cannot be built raises `NativeBuildError`, remembered per source for the
process so a missing compiler costs one attempt; callers fall back to numpy.
"""
import ctypes
import hashlib
import os
import subprocess
import tempfile

from ..errors import FluidityError

CFLAGS = ("-O2", "-shared", "-fPIC")
_loaded = {}  # source path -> CDLL or the NativeBuildError saying why it failed


class NativeBuildError(FluidityError):
    """A C helper library could not be compiled or loaded."""


def cache_dir():
    return os.environ.get("FLUIDITY_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "fluidity")


def _build(src_path, cflags, libs):
    try:
        with open(src_path, "rb") as f:
            src = f.read()
    except OSError as e:
        raise NativeBuildError(f"cannot read the C source {src_path}: {e}") from None
    cc = os.environ.get("CC") or "cc"
    key = hashlib.sha256(src + " ".join([cc, *cflags, *libs]).encode()).hexdigest()[:16]
    out_dir = cache_dir()
    stem = os.path.splitext(os.path.basename(src_path))[0]
    lib_path = os.path.join(out_dir, f"{stem}-{key}.so")
    if not os.path.exists(lib_path):
        try:
            os.makedirs(out_dir, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=out_dir)
            os.close(fd)
        except OSError as e:
            raise NativeBuildError(f"cannot write to the cache directory {out_dir}: {e}") \
                from None
        try:
            try:
                r = subprocess.run([cc, *cflags, "-o", tmp, src_path, *libs],
                                   capture_output=True, text=True)
            except OSError as e:
                raise NativeBuildError(f"cannot run the C compiler {cc!r}: {e}") from None
            if r.returncode != 0:
                msg = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
                raise NativeBuildError(f"{cc} failed to compile {src_path}: {msg[0]}")
            os.replace(tmp, lib_path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    try:
        return ctypes.CDLL(lib_path)
    except OSError as e:
        raise NativeBuildError(f"cannot load the compiled library {lib_path}: {e}") from None


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
