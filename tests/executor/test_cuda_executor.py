"""Executor(fluid.CUDAPlace(0)): programs compiled whole for the device, parameters in device
memory across runs, explicit copies at feeds, fetches, save/load and the scope.

Without a GPU a CUDAPlace fails at once. The device path runs here on the host emulation of
the device (FLUIDITY_CUDA_EMULATE=1, the test hook: the same generated .cu built by g++ with
runtime/cuda_host.h); the GPU tests at the end run the same training steps on a real GPU and
skip, saying so, where there is none."""
import ctypes

import numpy as np
import pytest
from cuda_models import MODELS, has_gpu, mlp, mlp_feed, train

import fluidity as fluid
from fluidity.codegen import cuda
from fluidity.core import place as places
from fluidity.errors import DeviceError, ExecutionError
from fluidity.executor.cuda import DeviceTensor

STEPS = 20
RTOL, ATOL = 1e-4, 1e-5     # float32 training, summation orders of the device's reductions


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


@pytest.fixture
def real(monkeypatch):
    monkeypatch.delenv(cuda.EMULATE_ENV, raising=False)


# --- the truth about this machine ------------------------------------------------------------
def test_the_cuda_questions_tell_the_truth(real):
    lib = places.cudart()
    assert places.cuda_buildable() == (lib is not None and places.nvcc_path() is not None)
    n = ctypes.c_int(0)
    want = n.value if lib is not None and lib.cudaGetDeviceCount(ctypes.byref(n)) == 0 else 0
    assert fluid.core.get_cuda_device_count() == want
    # Fluid's `CUDAPlace(0) if is_compiled_with_cuda() else CPUPlace()` picks a place that runs
    assert fluid.core.is_compiled_with_cuda() == (places.cuda_buildable() and want > 0)


@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU: CUDAPlace runs")
def test_without_a_gpu_every_way_to_ask_for_one_fails_at_once(real):
    main, startup, loss = mlp()
    for ask in (lambda: fluid.Executor(fluid.CUDAPlace(0)),
                lambda: fluid.CompiledProgram(main).with_data_parallel(
                    loss_name=loss.name, places=[fluid.CUDAPlace(0)]),
                lambda: fluid.ParallelExecutor(use_cuda=True, loss_name=loss.name,
                                               main_program=main),
                fluid.cuda_places, fluid.cuda_pinned_places):
        with pytest.raises(DeviceError, match="CUDA is not available"):
            ask()
    fluid.CUDAPlace(0)                   # constructing a place asks nothing of the machine


def test_a_cuda_place_asked_of_a_cpu_only_strategy_is_refused(emulated):
    with pytest.raises(DeviceError, match="runs on the CPU"):
        fluid.Executor(fluid.CUDAPlace(0), strategy="parallel")
    with pytest.raises(DeviceError, match="one device"):
        fluid.Executor(fluid.CUDAPlace(1))


# --- training on the (emulated) device ------------------------------------------------------------
@pytest.mark.parametrize("model,optimizer", [("mlp", "sgd"), ("mlp", "adam"), ("ctr", "sgd"),
                                             ("ctr", "adam"), ("cnn", "adam")])
def test_training_on_the_emulated_device_matches_the_cpu(emulated, model, optimizer):
    want_l, want_p, _ = train(model, optimizer, fluid.CPUPlace(), STEPS)
    got_l, got_p, scope = train(model, optimizer, fluid.CUDAPlace(0), STEPS)
    np.testing.assert_allclose(got_l, want_l, rtol=RTOL, atol=ATOL)
    for name in want_p:
        np.testing.assert_allclose(got_p[name], want_p[name], rtol=RTOL, atol=ATOL,
                                   err_msg=name)
        assert isinstance(scope.find_var(name).value, DeviceTensor), name


def test_parameters_stay_in_device_memory_across_runs(emulated):
    main, startup, loss = mlp()
    exe, scope = fluid.Executor(fluid.CUDAPlace(0)), fluid.Scope()
    exe.run(startup, scope=scope)
    params = [p.name for p in main.all_parameters()]
    held = {n: scope.find_var(n).value for n in params}
    assert all(isinstance(t, DeviceTensor) and t.memory is not None for t in held.values())
    before = {n: t.to_host() for n, t in held.items()}
    rng = np.random.default_rng(0)
    for _ in range(3):
        exe.run(main, feed=mlp_feed(rng), fetch_list=[loss], scope=scope)
    for n in params:
        t = scope.find_var(n).value
        assert t is held[n] and t.ptr == held[n].ptr, f"{n} left its device memory"
        assert not np.array_equal(t.to_host(), before[n]), f"{n} was not trained"


def test_the_scope_reads_and_writes_device_tensors_through_host_copies(emulated):
    main, startup, loss = mlp()
    exe, scope = fluid.Executor(fluid.CUDAPlace(0)), fluid.Scope()
    exe.run(startup, scope=scope)
    name = main.all_parameters()[0].name
    t = scope.find_var(name).get_tensor()
    host = np.array(t)
    assert host.shape == tuple(t.shape()) and host.dtype == np.float32
    t.set(np.full_like(host, 0.5))                         # host -> device
    assert np.all(np.array(scope.find_var(name).get_tensor()) == 0.5)
    got = exe.run(main, feed=mlp_feed(np.random.default_rng(1)), fetch_list=[name],
                  scope=scope)[0]
    assert got.shape == host.shape                          # a fetched parameter: a host copy


def test_save_and_load_move_parameters_between_device_and_host(emulated, tmp_path):
    main, startup, loss = mlp("adam")
    dev, scope = fluid.Executor(fluid.CUDAPlace(0)), fluid.Scope()
    dev.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    for _ in range(3):
        dev.run(main, feed=mlp_feed(rng), fetch_list=[loss], scope=scope)
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(dev, str(tmp_path), main)
    saved = {p.name: np.array(scope.find_var(p.name).get_tensor())
             for p in main.all_parameters()}
    # into a CPU scope: the same values
    cpu, cpu_scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(cpu_scope):
        fluid.io.load_persistables(cpu, str(tmp_path), main)
    for n, v in saved.items():
        np.testing.assert_array_equal(np.array(cpu_scope.find_var(n).get_tensor()), v)
    # into a fresh device scope: moved to the device by its next run, which trains as the CPU
    dev_scope = fluid.Scope()
    with fluid.scope_guard(dev_scope):
        fluid.io.load_persistables(dev, str(tmp_path), main)
    feed = mlp_feed(rng)
    want = cpu.run(main, feed=feed, fetch_list=[loss], scope=cpu_scope)[0]
    got = dev.run(main, feed=feed, fetch_list=[loss], scope=dev_scope)[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert all(isinstance(dev_scope.find_var(n).value, DeviceTensor) for n in saved)


def test_an_op_with_no_cuda_form_is_named_with_its_variables(emulated):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [6])
        values, _ = fluid.layers.topk(x, k=2)
    with pytest.raises(DeviceError, match=r"'top_k' \(inputs \{'X': \['x'\]\}"):
        fluid.Executor(fluid.CUDAPlace(0)).run(
            main, feed={"x": np.ones((2, 6), np.float32)}, fetch_list=[values])


def test_a_feed_of_another_shape_than_the_program_declares_is_an_error_not_a_cpu_run(emulated):
    main, startup, loss = mlp()
    exe, scope = fluid.Executor(fluid.CUDAPlace(0)), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.ones((3, 21), np.float32), "label": np.zeros((3, 1), np.int64)}
    with pytest.raises((ExecutionError, fluid.errors.FeedError), match="x"):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)


def test_explain_says_which_ops_run_on_the_host_and_what_is_copied(emulated):
    main, startup, loss = mlp()
    rows = cuda.explain(cuda.lower(startup, 0))
    host = [r for r in rows if r[2] == "python"]
    assert host and all(r[1] == "uniform_random" and "copied to the device" in r[3]
                        for r in host)
    assert {r[2] for r in cuda.explain(cuda.lower(main, 0, keep=[loss.name]))} == \
        {"segment 0"}


# --- on a GPU --------------------------------------------------------------------------------------
gpu = pytest.mark.skipif(not has_gpu(), reason="no NVIDIA GPU here "
                         "(fluid.core.get_cuda_device_count() is 0)")


@gpu
@pytest.mark.parametrize("model", sorted(MODELS))
def test_training_on_the_gpu_matches_the_cpu(real, model):
    optimizer = "adam"
    want_l, want_p, _ = train(model, optimizer, fluid.CPUPlace(), STEPS)
    got_l, got_p, scope = train(model, optimizer, fluid.CUDAPlace(0), STEPS)
    np.testing.assert_allclose(got_l, want_l, rtol=1e-3, atol=1e-4)
    for name in want_p:
        np.testing.assert_allclose(got_p[name], want_p[name], rtol=1e-3, atol=1e-4,
                                   err_msg=name)
        assert isinstance(scope.find_var(name).value, DeviceTensor)


def test_data_parallel_programs_given_cuda_places_run_on_the_device(emulated):
    want_l, _, _ = train("mlp", "sgd", fluid.CPUPlace(), 3)
    main, startup, loss = mlp()
    scope = fluid.Scope()
    fluid.Executor(fluid.CUDAPlace(0)).run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CUDAPlace(0)])
    pe = fluid.ParallelExecutor(use_cuda=True, loss_name=loss.name, main_program=main,
                                scope=scope)
    assert pe.device_count == 1
    rng = np.random.default_rng(0)
    exe = fluid.Executor(fluid.CPUPlace())
    got = [float(exe.run(compiled, feed=mlp_feed(rng), fetch_list=[loss], scope=scope)[0])
           for _ in range(2)]
    got.append(float(pe.run([loss.name], feed=mlp_feed(rng))[0]))
    np.testing.assert_allclose(got, want_l, rtol=RTOL, atol=ATOL)
    assert all(isinstance(scope.find_var(p.name).value, DeviceTensor)
               for p in main.all_parameters())
