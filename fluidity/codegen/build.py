"""Compile generated C++ with the system compiler, cache the result by the source's hash,
load it.

`compile_cached(source, kind)` writes `<hash>.cc` beside the binary in the cache directory
(`$FLUIDITY_CACHE_DIR/codegen`, default `~/.cache/fluidity/codegen`) and builds a shared
library (`kind="shared"`) or an executable (`kind="exe"`) with `$CXX` (default `g++`):
`-O3 -march=native` (retried without `-march=native` where the compiler refuses it), no FMA
contraction (so float results round as numpy's do), linked against the OpenBLAS of the
`scipy-openblas32` package. The key covers the source, the compiler, the flags and the BLAS,
so a change to any of them builds anew; builders racing on one key write temp files and
rename them into place atomically. A failed build raises `CompileError` naming the
generated file and showing the compiler's message.
"""
import ctypes
import hashlib
import importlib.util
import os
import subprocess
import tempfile

from ..core import native, place
from ..errors import FluidityError

RUNTIME_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime")
CXXFLAGS = ("-O3", "-std=c++17", "-fPIC", "-fno-math-errno", "-ffp-contract=off",
            "-fno-semantic-interposition", "-Wno-unused-variable", "-Wno-unused-but-set-variable")
NATIVE_ARCH = ("-march=native",)


class CompileError(FluidityError):
    """Generated code did not compile (or link, or load)."""


def blas():
    """(include dir, lib dir, link name) of the BLAS generated code links against."""
    try:
        import scipy_openblas32 as ob
    except ImportError:
        raise CompileError("compiled programs call BLAS from the scipy-openblas32 package, "
                           "which is not installed: pip install scipy-openblas32") from None
    return ob.get_include_dir(), ob.get_lib_dir(), ob.get_library()


def cache_dir():
    return os.path.join(native.cache_dir(), "codegen")


def runtime_sources():
    """The runtime headers' text, part of every key: a changed header rebuilds."""
    out = []
    for f in sorted(os.listdir(RUNTIME_DIR)):
        if f.endswith((".h", ".hpp")):
            with open(os.path.join(RUNTIME_DIR, f), "rb") as fh:
                out.append(fh.read())
    return b"".join(out)


_arch_ok = {}   # compiler -> whether it takes -march=native


def _flags(cxx, kind):
    inc, libdir, lib = blas()
    arch = NATIVE_ARCH if _arch_ok.get(cxx, True) else ()
    link = [f"-L{libdir}", f"-l{lib}", f"-Wl,-rpath,{libdir}", "-lm", "-lpthread"]
    head = ["-shared"] if kind == "shared" else []
    return [*head, *CXXFLAGS, *arch, f"-I{RUNTIME_DIR}", f"-I{inc}"], link


def binary_path(source, kind="shared", name="fluidity_gen"):
    """Where `compile_cached` puts the binary of `source` (it may not be built yet)."""
    cxx = os.environ.get("CXX") or "g++"
    flags, link = _flags(cxx, kind)
    key = hashlib.sha256(source.encode() + runtime_sources() +
                         " ".join([cxx, *flags, *link]).encode()).hexdigest()[:20]
    ext = ".so" if kind == "shared" else ""
    return os.path.join(cache_dir(), f"{name}-{key}{ext}")


def compile_cached(source, kind="shared", name="fluidity_gen"):
    """Path of the binary built from C++ `source` (built now unless cached)."""
    cxx = os.environ.get("CXX") or "g++"
    out = binary_path(source, kind, name)
    if os.path.exists(out):
        return out
    d = cache_dir()
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        raise CompileError(f"cannot write to the cache directory {d}: {e}") from None
    src = out[:-3] + ".cc" if out.endswith(".so") else out + ".cc"
    fd, tmp_src = tempfile.mkstemp(suffix=".cc", dir=d)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    os.replace(tmp_src, src)
    fd, tmp = tempfile.mkstemp(suffix=".tmp", dir=d)
    os.close(fd)
    try:
        r = _run_compiler(cxx, kind, src, tmp)
        if r.returncode != 0 and _arch_ok.get(cxx, True) and "march" in r.stderr:
            _arch_ok[cxx] = False          # a compiler without -march=native: portable build
            r = _run_compiler(cxx, kind, src, tmp)
        if r.returncode != 0:
            msg = "\n".join((r.stderr or r.stdout).strip().splitlines()[:30])
            raise CompileError(f"{cxx} failed to compile the generated code {src}:\n{msg}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def _run_compiler(cxx, kind, src, out):
    flags, link = _flags(cxx, kind)
    return run_compiler([cxx, *flags, "-o", out, src, *link])


def run_compiler(argv):
    """The compiler's CompletedProcess (text output captured); CompileError when it cannot
    be started at all."""
    try:
        return subprocess.run(argv, capture_output=True, text=True)
    except OSError as e:
        raise CompileError(f"cannot run the C++ compiler {argv[0]!r}: {e}") from None


def compile_files(sources, out, kind="shared", includes=(), link=(), portable=False):
    """Build `sources` into `out` (not cached: a deliverable, e.g. a standalone model) with
    the flags generated code gets, plus `includes` and `link`; `portable` leaves out
    -march=native. The BLAS is linked as for cached builds; the caller sets any rpath."""
    cxx = os.environ.get("CXX") or "g++"
    flags, blas_link = _flags(cxx, kind)
    if portable:
        flags = [f for f in flags if f not in NATIVE_ARCH]
    blas_link = [a for a in blas_link if not a.startswith("-Wl,-rpath")]
    argv = [cxx, *flags, *(f"-I{d}" for d in includes), "-o", out, *sources, *link, *blas_link]
    r = run_compiler(argv)
    if r.returncode != 0 and not portable and "march" in r.stderr:
        return compile_files(sources, out, kind, includes, link, portable=True)
    if r.returncode != 0:
        msg = "\n".join((r.stderr or r.stdout).strip().splitlines()[:30])
        raise CompileError(f"{cxx} failed to build {out} from {', '.join(sources)}:\n{msg}")
    return out


_loaded = {}


def load(path):
    """The ctypes library at `path` (loaded once per process); its calls release the GIL."""
    lib = _loaded.get(path)
    if lib is None:
        try:
            lib = _loaded[path] = ctypes.CDLL(path)
        except OSError as e:
            raise CompileError(f"cannot load the compiled library {path}: {e}") from None
    return lib


# --- the CUDA target (codegen/cuda.py) ---------------------------------------------------------
# Hopper's machine code, and PTX of the oldest architecture CUDA 13 targets, which the driver
# compiles for any newer GPU. Override with $FLUIDITY_CUDA_ARCHS ("90,75": sm_90 code + PTX 75).
CUDA_ARCHS = ("90", "75")
NVCCFLAGS = ("-O3", "-std=c++17", "--extended-lambda", "--fmad=false", "-Xcompiler", "-fPIC",
             "-shared", "-cudart", "shared", "-Wno-deprecated-gpu-targets")


def nvcc():
    """The nvcc to build with ($NVCC, else the first on PATH or in /usr/local/cuda/bin), or
    None when there is none."""
    return place.nvcc_path()


def cuda_home(compiler):
    """The CUDA toolkit directory of an nvcc (its bin/ resolved through wrappers)."""
    real = os.path.realpath(compiler)
    home = os.path.dirname(os.path.dirname(real))
    if not os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
        with open(real, "rb") as f:                 # a shell wrapper that execs the real one
            head = f.read(512).decode(errors="replace")
        for word in head.split():
            if word.endswith("/nvcc") and os.path.exists(word):
                return os.path.dirname(os.path.dirname(word))
    return home


def cublas_dirs(home):
    """(include dir, library dir, library file) of the cuBLAS to build with, or None: the
    toolkit's own, else $FLUIDITY_CUBLAS_HOME, else a pip-installed NVIDIA wheel
    (`nvidia-cublas`, as PyTorch installs it: nvidia/cu13 or nvidia/cublas, whose library
    has only its versioned name)."""
    roots = [home, os.environ.get("FLUIDITY_CUBLAS_HOME") or ""]
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        roots += [os.path.join(base, d) for d in sorted(os.listdir(base), reverse=True)]
    for root in filter(None, roots):
        inc = os.path.join(root, "include")
        if not os.path.exists(os.path.join(inc, "cublas_v2.h")):
            continue
        for d in ("lib64", "lib"):
            lib = os.path.join(root, d)
            names = sorted(f for f in os.listdir(lib) if f.startswith("libcublas.so")) \
                if os.path.isdir(lib) else []
            if names:
                return inc, lib, names[0]
    return None


def cuda_argv(compiler, archs):
    """(nvcc flags, link flags) of a build for `archs` (the first: machine code, the rest
    PTX)."""
    home = cuda_home(compiler)
    gencode = [f"-gencode=arch=compute_{archs[0]},code=sm_{archs[0]}"]
    gencode += [f"-gencode=arch=compute_{a},code=compute_{a}" for a in archs[1:]]
    blas = cublas_dirs(home)
    blas_flags = [] if blas is None else ["-DFL_USE_CUBLAS", f"-I{blas[0]}"]
    # the toolkit's libraries (libcudart, libcublas) found at load time wherever ld.so looks
    lib_dirs = [os.path.join(home, d) for d in ("lib64", "lib")
                if os.path.isdir(os.path.join(home, d))]
    link = []
    if blas is not None:
        link = [f"-L{blas[1]}", f"-l:{blas[2]}"]
        lib_dirs += [blas[1]] if blas[1] not in lib_dirs else []
    link += [f"-Xlinker=-rpath,{d}" for d in lib_dirs]
    return [*NVCCFLAGS, *gencode, *blas_flags, f"-I{RUNTIME_DIR}"], link


def compile_cuda_cached(source, archs=None, name="fluidity_cuda"):
    """Path of the shared library nvcc builds from CUDA `source` for `archs` (first: machine
    code, the rest PTX), cached by the hash of source, runtime headers, nvcc and flags."""
    compiler = nvcc()
    if compiler is None:
        raise CompileError("the CUDA target needs nvcc, which is not installed (or set $NVCC)")
    if archs is None:
        env = os.environ.get("FLUIDITY_CUDA_ARCHS")
        archs = tuple(env.split(",")) if env else CUDA_ARCHS
    flags, link = cuda_argv(compiler, archs)
    key = hashlib.sha256(source.encode() + runtime_sources() +
                         " ".join([os.path.realpath(compiler), *flags, *link]).encode()
                         ).hexdigest()[:20]
    out = os.path.join(cache_dir(), f"{name}-{key}.so")
    if os.path.exists(out):
        return out
    os.makedirs(cache_dir(), exist_ok=True)
    src = out[:-3] + ".cu"
    fd, tmp_src = tempfile.mkstemp(suffix=".cu", dir=cache_dir())
    with os.fdopen(fd, "w") as f:
        f.write(source)
    os.replace(tmp_src, src)
    fd, tmp = tempfile.mkstemp(suffix=".tmp", dir=cache_dir())
    os.close(fd)
    try:
        r = run_compiler([compiler, *flags, "-o", tmp, src, *link])
        if r.returncode != 0:
            msg = "\n".join((r.stderr or r.stdout).strip().splitlines()[:30])
            raise CompileError(f"nvcc failed to compile the generated CUDA code {src}:\n{msg}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def compile_cuda_emulated(source, name="fluidity_cuda_emu"):
    """The same CUDA source built with the C++ compiler against the host emulation of the
    CUDA runtime (runtime/cuda_host.h): the test hook that runs generated kernels without a
    GPU."""
    return compile_cached("#define FL_CUDA_EMULATE 1\n" + source, "shared", name)
