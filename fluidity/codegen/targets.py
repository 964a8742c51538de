"""The code generator's targets, one registry entry each: the dialect its source is rendered
in (render.py), what its segments may do, and how its source becomes a loaded library. A
target's emitters are the folder emit/<name>/; adding a target is that folder plus an entry
here (the C target is the example: emit/c/, runtime/c_rt.h and the entry below)."""
import os
import subprocess

from ..core import build_cache, native
from . import build
from .render import C, CPP, CUDA


class Target:
    """`name` as `Lowering(..., target=name)` takes it; `title` as messages say it;
    `dialect` the renderer's; `load(source)` the loaded library of a translation unit (None
    where the target's plan loads it itself: CUDA builds for a device);
    `creates_persistables`: a segment may create a persistable it writes first (the CUDA
    plan allocates it on the device: a startup program's fill_constant)."""

    def __init__(self, name, title, dialect, load=None, creates_persistables=False):
        self.name, self.title, self.dialect, self.load = name, title, dialect, load
        self.creates_persistables = creates_persistables


def load_cpp(source):
    """C++: built by $CXX through the build cache (build.py), loaded with ctypes."""
    return build.load(build.compile_cached(source))


def load_c(source):
    """Plain C: built by $CC (with the runtime headers on the include path) through the one
    build cache (core/build_cache.py: keyed by the source, the compiler, the flags and the
    headers' digest) and loaded verified."""
    cc = os.environ.get("CC") or "cc"
    flags = (*native.CFLAGS, "-std=c99", f"-I{build.RUNTIME_DIR}")

    def compile_fn(src, out):
        try:
            r = subprocess.run([cc, *flags, "-o", out, src, "-lm"], capture_output=True,
                               text=True)
        except OSError as e:
            return f"cannot run the C compiler {cc!r}: {e}"
        return None if r.returncode == 0 else \
            "\n".join((r.stderr or r.stdout).strip().splitlines()[:30])

    def fail(kept, message):
        return build.CompileError(f"{cc} failed to compile the generated C code {kept}:\n"
                                  f"{message}")

    toolchain = build_cache.toolchain_id(cc, *flags, "-lm", "runtime " + build.runtime_digest())
    try:
        return build.load(build_cache.build(build.KIND, "fluidity_c", source.encode(),
                                            toolchain, compile_fn, fail, src_ext=".c"))
    except build_cache.CacheError as e:
        raise build.CompileError(str(e)) from None


TARGETS = {t.name: t for t in (
    Target("cpu", "C++", CPP, load_cpp),
    Target("cuda", "CUDA", CUDA, creates_persistables=True),
    Target("c", "C", C, load_c),
)}


def target(name):
    """The Target called `name`; ValueError naming the targets there are."""
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"code generator target must be one of {sorted(TARGETS)}, got "
                         f"{name!r}") from None
