"""The code generator's targets, one registry entry each: the dialect its source is rendered
in (render.py), what its segments may do, and how its source becomes a loaded library. A
target's emitters are the folder emit/<name>/; adding a target is that folder plus an entry
here (the C target is the example: emit/c/, runtime/c_rt.h and the entry below)."""
import hashlib
import os
import tempfile

from ..core import native
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
    """Plain C: the source written under the cache directory (named by its digest) and built
    by $CC through the C build cache (core/native.py) with the runtime headers on the include
    path and their digest in the flags (the cache keys on source and flags)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    path = os.path.join(build.cache_dir(), f"fluidity_c-{digest}.c")
    if not os.path.exists(path):
        os.makedirs(build.cache_dir(), exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".c", dir=build.cache_dir())
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    headers = hashlib.sha256(build.runtime_sources()).hexdigest()[:16]
    flags = (*native.CFLAGS, "-std=c99", f"-I{build.RUNTIME_DIR}",
             f"-DFL_RUNTIME_SHA={headers}")
    try:
        return native.load(path, flags, ("-lm",))
    except native.NativeBuildError as e:
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
