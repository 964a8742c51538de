"""Compile generated C++ with the system compiler, cache the result by the source's hash,
load it.

`compile_cached(source, kind)` builds a shared library (`kind="shared"`) or an executable
(`kind="exe"`) of the source with `$CXX` (default `g++`): `-O3 -march=native` (without
`-march=native` where the compiler refuses it), no FMA contraction (so float results round as
numpy's do), `-fno-trapping-math` (no code reads the floating-point exception flags, and
without it GCC keeps a branch around a multiply in `cond ? d : d * 0` loops such as
relu_grad's rather than vectorize them; the values computed are the same), linked against the OpenBLAS of the `scipy-openblas32` package. It goes into the
one build cache (`core/build_cache.py`: the `codegen/` directory of `$FLUIDITY_CACHE_DIR`,
default `~/.cache/fluidity`), beside its source `<name>-<key>.cc` for reading, under a key
that covers the source, the runtime headers, the compiler's identity, the flags and the BLAS;
`load(path)` loads it only when its signed digest matches (a swapped library is refused).
A failed build raises `CompileError` naming the generated file (kept outside the cache, which
it leaves as it was) and showing the compiler's message.
"""
import hashlib
import importlib.util
import os
import subprocess

from ..core import build_cache, place
from ..errors import FluidityError
from . import precompiled

RUNTIME_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime")
CXXFLAGS = ("-O3", "-std=c++17", "-fPIC", "-fno-math-errno", "-ffp-contract=off",
            "-fno-trapping-math", "-fno-semantic-interposition", "-Wno-unused-variable", "-Wno-unused-but-set-variable")
NATIVE_ARCH = ("-march=native",)
KIND = "codegen"


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
    """The directory generated code is cached in (created 0700 and checked)."""
    try:
        return build_cache.directory(KIND)
    except build_cache.CacheError as e:
        raise CompileError(str(e)) from None


def runtime_digest():
    """The runtime headers' digest, part of every key: a changed header rebuilds."""
    h = hashlib.sha256()
    for f in sorted(os.listdir(RUNTIME_DIR)):
        if f.endswith((".h", ".hpp")):
            with open(os.path.join(RUNTIME_DIR, f), "rb") as fh:
                h.update(f.encode() + b"\0" + fh.read())
    return h.hexdigest()


_arch_ok = {}   # compiler -> whether it takes -march=native


def _takes_native_arch(cxx):
    """Whether `cxx` accepts -march=native (asked once: preprocessing an empty file)."""
    ok = _arch_ok.get(cxx)
    if ok is None:
        try:
            r = subprocess.run([cxx, *NATIVE_ARCH, "-x", "c++", "-E", os.devnull],
                               capture_output=True, text=True)
            ok = r.returncode == 0
        except OSError:
            ok = True          # no compiler: the build itself says so
        _arch_ok[cxx] = ok
    return ok


def _flags(cxx, kind):
    inc, libdir, lib = blas()
    arch = NATIVE_ARCH if _takes_native_arch(cxx) else ()
    link = [f"-L{libdir}", f"-l{lib}", f"-Wl,-rpath,{libdir}", "-lm", "-lpthread"]
    head = ["-shared"] if kind == "shared" else []
    return [*head, *CXXFLAGS, *arch, f"-I{RUNTIME_DIR}", f"-I{inc}"], link


def _toolchain(cxx, kind):
    flags, link = _flags(cxx, kind)
    return build_cache.toolchain_id(cxx, *flags, *link, "runtime " + runtime_digest())


def binary_path(source, kind="shared", name="fluidity_gen"):
    """Where `compile_cached` puts the binary of `source` (it may not be built yet)."""
    cxx = os.environ.get("CXX") or "g++"
    try:
        return build_cache.entry_path(KIND, name, source.encode(), _toolchain(cxx, kind),
                                      ".so" if kind == "shared" else "")[0]
    except build_cache.CacheError as e:
        raise CompileError(str(e)) from None


def compile_cached(source, kind="shared", name="fluidity_gen"):
    """Path of the binary built from C++ `source` (built now unless a verified one is
    cached)."""
    cxx = os.environ.get("CXX") or "g++"

    def compile_fn(src, out):
        r = _run_compiler(cxx, kind, src, out)
        return None if r.returncode == 0 else \
            "\n".join((r.stderr or r.stdout).strip().splitlines()[:30])

    def fail(kept, message):
        return CompileError(f"{cxx} failed to compile the generated code {kept}:\n{message}")

    try:
        return build_cache.build(KIND, name, source.encode(), _toolchain(cxx, kind),
                                 compile_fn, fail, ".cc", ".so" if kind == "shared" else "")
    except build_cache.CacheError as e:
        raise CompileError(str(e)) from None


def _run_compiler(cxx, kind, src, out):
    flags, link = _flags(cxx, kind)
    pch = precompiled.include_dir(cxx, flags, _toolchain(cxx, kind), KIND, run_compiler)
    return run_compiler([cxx, *([f"-I{pch}"] if pch else []), *flags, "-o", out, src, *link])


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


def load(path):
    """The ctypes library at `path`, a build cache entry, verified against its signed record
    and loaded once per process; its calls release the GIL."""
    try:
        return build_cache.load(path)
    except build_cache.CacheError as e:
        raise CompileError(str(e)) from None


def verified(path):
    """`path`, a cached executable, once it matches its signed record (CompileError
    otherwise): run it only then."""
    try:
        os.close(build_cache.verify(path))
    except build_cache.CacheError as e:
        raise CompileError(str(e)) from None
    return path


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

    def compile_fn(src, out):
        r = run_compiler([compiler, *flags, "-o", out, src, *link])
        return None if r.returncode == 0 else \
            "\n".join((r.stderr or r.stdout).strip().splitlines()[:30])

    def fail(kept, message):
        return CompileError(f"nvcc failed to compile the generated CUDA code {kept}:\n{message}")

    toolchain = build_cache.toolchain_id(compiler, *flags, *link,
                                         "runtime " + runtime_digest())
    try:
        return build_cache.build(KIND, name, source.encode(), toolchain, compile_fn, fail,
                                 ".cu")
    except build_cache.CacheError as e:
        raise CompileError(str(e)) from None


def compile_cuda_emulated(source, name="fluidity_cuda_emu"):
    """The same CUDA source built with the C++ compiler against the host emulation of the
    CUDA runtime (runtime/cuda_host.h): the test hook that runs generated kernels without a
    GPU."""
    return compile_cached("#define FL_CUDA_EMULATE 1\n" + source, "shared", name)
