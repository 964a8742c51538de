"""What a bug report needs to say about the machine: `fluidity env` (or
`python -m fluidity.collect_env`), as PyTorch's collect_env.

It reports the versions of Fluidity, Python and the packages Fluidity uses (installed or
not: read from their metadata, nothing imported that is not needed), the BLAS numpy calls
and the one generated code links, with their thread counts, the C and C++ compilers native
kernels and compiled programs are built with, CUDA (nvcc, the GPUs), the build cache's
directory and size, and the FLUIDITY_* / BLAS environment variables that change behaviour.
Every probe that fails says so on its line; none stops the report.
"""
import os
import platform
import shutil
import subprocess
import sys

PACKAGES = ("numpy", "protobuf", "tqdm", "threadpoolctl", "scipy-openblas32", "grpcio",
            "tensorboardX", "ray", "torch", "scikit-learn", "matplotlib")
ENV_VARS = ("FLUIDITY_CACHE_DIR", "FLUIDITY_NATIVE", "FLUIDITY_LOG_LEVEL", "CC", "CXX", "NVCC",
            "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE",
            "CUDA_VISIBLE_DEVICES", "FLUIDITY_CUDA_ARCHS", "FLUIDITY_CUDA_EMULATE")


def _version(dist):
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _first_line(argv, timeout=10):
    """The first line a tool prints, or why there is none."""
    exe = shutil.which(argv[0]) if not os.path.isabs(argv[0]) else argv[0]
    if not exe:
        return f"not found ({argv[0]})"
    try:
        r = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{exe}: cannot run it ({e})"
    out = (r.stdout or r.stderr).strip().splitlines()
    return f"{exe}: {out[0] if out else '(no output)'}"


def _size_of(path):
    total = files = 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
                files += 1
            except OSError:
                pass
    return total, files


def _mb(n):
    return f"{n / 1e6:,.1f} MB"


def _blas_lines():
    lines = []
    try:
        from threadpoolctl import threadpool_info
        import numpy  # noqa: F401 - loads numpy's BLAS so it is listed
        for info in threadpool_info():
            lines.append(f"  {info.get('internal_api')} {info.get('version')} "
                         f"({info.get('user_api')}, {info.get('num_threads')} threads, "
                         f"{info.get('threading_layer', '?')} threading): "
                         f"{info.get('filepath')}")
    except Exception as e:  # noqa: BLE001 - a report line, never a crash
        lines.append(f"  (threadpoolctl cannot say: {e})")
    try:
        from .codegen.build import blas
        _, libdir, lib = blas()
        lines.append(f"  generated code links: {os.path.join(libdir, f'lib{lib}.so')}")
    except Exception as e:  # noqa: BLE001
        lines.append(f"  generated code links: none ({e})")
    return lines


def _cuda_lines():
    from .core import place
    nvcc = place.nvcc_path()
    lines = [f"  nvcc: {_first_line([nvcc, '--version']) if nvcc else 'not found'}"]
    if nvcc:   # its version is its last line
        try:
            r = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=10)
            ver = [ln for ln in r.stdout.splitlines() if "release" in ln]
            if ver:
                lines[0] = f"  nvcc: {nvcc}: {ver[0].strip()}"
        except (OSError, subprocess.TimeoutExpired):
            pass
    gpus = _first_line(["nvidia-smi", "-L"]) if shutil.which("nvidia-smi") else "no nvidia-smi"
    lines.append(f"  GPUs: {gpus}")
    try:
        lines.append(f"  CUDAPlace programs can run: {place.is_compiled_with_cuda()}")
    except Exception as e:  # noqa: BLE001
        lines.append(f"  CUDAPlace programs can run: cannot tell ({e})")
    return lines


def report():
    """The report, as text."""
    from .core import native
    pkg = sys.modules[__package__]
    lines = [f"Fluidity {pkg.__version__} ({os.path.dirname(os.path.abspath(pkg.__file__))})",
             f"Python {platform.python_version()} ({sys.executable})",
             f"OS {platform.platform()}; {os.cpu_count()} CPUs, "
             f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'} "
             f"usable by this process",
             "packages:"]
    lines += [f"  {name:18s} {_version(name)}" for name in PACKAGES]
    lines.append("BLAS:")
    lines += _blas_lines()
    lines.append("compilers:")
    lines.append(f"  C   ($CC, native kernels):       "
                 f"{_first_line([os.environ.get('CC') or 'cc', '--version'])}")
    lines.append(f"  C++ ($CXX, compiled programs):  "
                 f"{_first_line([os.environ.get('CXX') or 'g++', '--version'])}")
    lines.append("CUDA:")
    lines += _cuda_lines()
    cache = native.cache_dir()
    size, files = _size_of(cache) if os.path.isdir(cache) else (0, 0)
    lines.append(f"build cache: {cache} ({_mb(size)} in {files} files)"
                 if os.path.isdir(cache) else f"build cache: {cache} (not made yet)")
    env = [f"  {k}={os.environ[k]}" for k in ENV_VARS if k in os.environ]
    lines.append("environment:" + ("" if env else " none of " + ", ".join(ENV_VARS[:3]) +
                                   ", ... set"))
    lines += env
    return "\n".join(lines)


def main():
    print(report())


if __name__ == "__main__":
    main()
