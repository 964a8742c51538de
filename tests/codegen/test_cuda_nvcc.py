"""The real nvcc build of the generated CUDA code: one .cu per model's training program (MLP,
CTR-DNN, CNN, Adam: the step with the most op forms), with the device library's API, built
once for Hopper machine code (sm_90) and a generic architecture's PTX (compute_75, which the
driver compiles for any newer GPU), cached by the source's hash. Needs nvcc, not a GPU
(skipped, saying so, where nvcc is absent)."""
import ctypes

import pytest
from cuda_models import MODELS

from fluidity.codegen import build, cuda

pytestmark = pytest.mark.skipif(build.nvcc() is None, reason="nvcc is not installed")


@pytest.fixture(scope="module")
def libraries():
    """{model: path of its nvcc-built library}: each built once per module (cached on disk
    by hash, so a warm cache builds nothing)."""
    out = {}
    for name, (make, _) in MODELS.items():
        main, startup, loss = make("adam")
        low = cuda.lower(main, 0, keep=[loss.name])
        out[name] = build.compile_cuda_cached(cuda.with_device_api(low.source))
    return out


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_models_training_step_compiles_for_sm90_and_generic_ptx(libraries, model):
    path = libraries[model]
    with open(path, "rb") as f:
        blob = f.read()
    assert blob[:4] == b"\x7fELF"
    assert b"fl_seg_0" in blob and b"fl_cuda_malloc" in blob
    argv = build.cuda_argv(build.nvcc(), build.CUDA_ARCHS)[0]
    assert "-gencode=arch=compute_90,code=sm_90" in argv
    assert "-gencode=arch=compute_75,code=compute_75" in argv


def test_the_cuda_build_is_cached_by_the_sources_hash(libraries):
    main, startup, loss = MODELS["mlp"][0]("adam")
    low = cuda.lower(main, 0, keep=[loss.name])
    assert build.compile_cuda_cached(cuda.with_device_api(low.source)) == libraries["mlp"]


def test_a_library_built_by_nvcc_loads_where_the_cuda_runtime_does(libraries):
    """Loading needs libcudart (not a GPU): where it loads, the exported segment is there."""
    try:
        lib = ctypes.CDLL(libraries["mlp"])
    except OSError as e:
        pytest.skip(f"the CUDA runtime library does not load here: {e}")
    assert hasattr(lib, "fl_seg_0") and hasattr(lib, "fl_cuda_device_count")


def test_bad_generated_code_names_the_cu_file_and_nvccs_message():
    with pytest.raises(build.CompileError, match=r"nvcc failed .*\.cu"):
        build.compile_cuda_cached('#include "cuda_rt.h"\nthis is not C++;\n', ("90",))


def test_matmuls_go_through_cublas_where_it_is_installed(libraries):
    """With cuBLAS beside the toolkit, in $FLUIDITY_CUBLAS_HOME or from the nvidia-cublas
    wheel, the generated gemms call cublasSgemm (the device's own kernel otherwise)."""
    dirs = build.cublas_dirs(build.cuda_home(build.nvcc()))
    if dirs is None:
        pytest.skip("cuBLAS is not installed here (toolkit, $FLUIDITY_CUBLAS_HOME, "
                    "nvidia-cublas wheel): the plain gemm kernel was built")
    with open(libraries["mlp"], "rb") as f:
        assert b"cublasSgemm" in f.read()
    flags, link = build.cuda_argv(build.nvcc(), build.CUDA_ARCHS)
    assert "-DFL_USE_CUBLAS" in flags and f"-l:{dirs[2]}" in link


def test_cublas_is_found_in_a_wheels_layout(tmp_path, monkeypatch):
    """The pip wheel's layout (include/cublas_v2.h, lib/libcublas.so.13 with no unversioned
    name) is found through $FLUIDITY_CUBLAS_HOME."""
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cublas_v2.h").write_text("")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libcublas.so.13").write_bytes(b"")
    monkeypatch.setenv("FLUIDITY_CUBLAS_HOME", str(tmp_path))
    home = str(tmp_path / "no-toolkit")
    assert build.cublas_dirs(home) == (str(tmp_path / "include"), str(tmp_path / "lib"),
                                       "libcublas.so.13")
