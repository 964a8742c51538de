"""0-D tensors as Paddle >= 2.5 has them (ops/reduce.py's module docstring): a loss is shape
[], fetched as a 0-D ndarray so `float(loss)` works under numpy 2; backward seeds it with a
0-D `loss@GRAD`; the optimizers' learning rate is 0-D; 0-D values feed, fetch, save and load
(in Paddle 3.3.1's bytes), and run compiled and in a standalone build."""
import os
import subprocess

import numpy as np
import pytest

import fluidity as fluid
from fluidity.core import serialization as ser
from fluidity.core.tensor import LoDTensor

# what Paddle 3.3.1 wrote for 0-D persistables (paddle.static.save_vars of
# create_global_var(shape=[]): 2.5 float32, 7 int64), one file each and combined (sorted)
PADDLE_0D_F32 = bytes.fromhex("0000000000000000000000000000000002000000080500002040")
PADDLE_0D_I64 = bytes.fromhex("000000000000000000000000000000000200000008030700000000000000")


def test_0d_tensor_files_are_paddles_bytes(tmp_path):
    for raw, value in ((PADDLE_0D_F32, np.array(2.5, np.float32)),
                       (PADDLE_0D_I64, np.array(7, np.int64))):
        t = ser.lod_tensor_from_bytes(raw)
        arr = np.asarray(t)
        assert arr.shape == () and arr.dtype == value.dtype and arr == value
        assert ser.lod_tensor_to_bytes(LoDTensor(value)) == raw
    assert LoDTensor(np.array(3.0, np.float32)).shape() == []


def _regression(opt):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.data("y", [1])
        scale = fluid.layers.data("scale", [], append_batch_size=False)
        pred = fluid.layers.fc(x, 1)
        loss = fluid.layers.mean(fluid.layers.square(pred - y)) * scale
        opt.minimize(loss)
    return main, startup, loss


def _batches(n=30):
    r = np.random.default_rng(0)
    w = r.normal(size=(4, 1)).astype("float32")
    for _ in range(n):
        x = r.normal(size=(8, 4)).astype("float32")
        yield {"x": x, "y": x @ w, "scale": 1.0}


@pytest.mark.parametrize("opt", [lambda: fluid.optimizer.SGD(0.1),
                                 lambda: fluid.optimizer.Adam(0.05),
                                 lambda: fluid.optimizer.Momentum(0.05, 0.9)],
                         ids=["sgd", "adam", "momentum"])
def test_a_0d_loss_trains_and_converts_to_float(opt):
    main, startup, loss = _regression(opt())
    assert loss.shape == ()
    block = main.global_block()
    seed = [op for op in block.ops if op.type == "fill_constant"
            and op.output("Out") == [loss.name + "@GRAD"]]
    assert len(seed) == 1 and seed[0].attr("shape") == []
    lr = [v for v in main.list_vars() if v.name.startswith("learning_rate")]
    assert lr and all(v.shape == () for v in lr)          # as Paddle 3.3.1 makes it
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for feed in _batches():
        out, = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        assert isinstance(out, np.ndarray) and out.shape == ()
        losses.append(float(out))
        assert out.item() == losses[-1]
    assert losses[-1] < 0.2 * losses[0]


def test_feeding_a_0d_variable():
    main, startup, loss = _regression(fluid.optimizer.SGD(0.0))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = next(_batches())
    outs = []
    for s in (2.0, np.float32(2.0), np.array(2.0, np.float32), LoDTensor(np.array(2.0, "f4"))):
        outs.append(exe.run(main, feed={**feed, "scale": s}, fetch_list=[loss], scope=scope)[0])
    assert all(o.shape == () and o == outs[0] for o in outs)
    with pytest.raises(fluid.errors.FeedError, match=r"'scale'.*expected shape \[\]"):
        exe.run(main, feed={**feed, "scale": np.ones(1, np.float32)}, fetch_list=[loss],
                scope=scope)


def test_a_0d_loss_compiled_matches_the_interpreter():
    main, startup, loss = _regression(fluid.optimizer.SGD(0.1))
    results = []
    for compiled in (False, True):
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
        results.append([exe.run(prog, feed=f, fetch_list=[loss], scope=scope)[0]
                        for f in _batches(5)])
    for a, b in zip(*results):
        assert a.shape == b.shape == ()
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_0d_persistables_save_and_load(tmp_path):
    """The 0-D learning rate saves as Paddle writes it and loads back as 0-D, in separate
    files and combined."""
    main, startup, loss = _regression(fluid.optimizer.SGD(0.25))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    lr = [v.name for v in main.list_vars() if v.name.startswith("learning_rate")][0]
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path / "sep"), main)
        fluid.io.save_persistables(exe, str(tmp_path / "comb"), main, filename="params")
    raw = (tmp_path / "sep" / lr).read_bytes()
    assert raw == ser.lod_tensor_to_bytes(LoDTensor(np.array(0.25, np.float32)))
    for d, kw in (("sep", {}), ("comb", {"filename": "params"})):
        other = fluid.Scope()
        with fluid.scope_guard(other):
            fluid.io.load_persistables(exe, str(tmp_path / d), main, **kw)
        got = np.asarray(other.find_var(lr).get_tensor())
        assert got.shape == () and got == np.float32(0.25)


def test_a_standalone_build_feeds_and_fetches_0d(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3])
        s = fluid.layers.data("s", [], append_batch_size=False)
        h = fluid.layers.fc(x, 2)
        out = fluid.layers.reduce_sum(h) * s
    exe, scope = fluid.Executor(), fluid.Scope()
    xs = np.random.default_rng(1).random((4, 3), dtype=np.float32)
    sv = np.array(1.5, np.float32)
    with fluid.scope_guard(scope):
        exe.run(startup)
        want, = exe.run(main, feed={"x": xs, "s": sv}, fetch_list=[out])
        fluid.io.save_inference_model(str(tmp_path / "model"), ["x", "s"], [out], exe, main)
    assert want.shape == ()
    from fluidity.compiler import compile_inference_model
    compile_inference_model(str(tmp_path / "model"), str(tmp_path / "out"))
    np.save(tmp_path / "x.npy", xs)
    np.save(tmp_path / "s.npy", sv)
    r = subprocess.run([str(tmp_path / "out" / "model_run"), f"x={tmp_path / 'x.npy'}",
                        f"s={tmp_path / 's.npy'}", "-o", str(tmp_path / "res")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    name = r.stdout.split(":")[0]
    assert f"{name}: <f4 []" in r.stdout
    got = np.load(tmp_path / "res" / (name.replace("/", "_") + ".npy"))
    assert got.shape == ()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert os.path.isfile(tmp_path / "out" / "model_run")


@pytest.mark.parametrize("kind", ["linear", "dataflow", "parallel"])
def test_every_plan_kind_gives_the_interpreters_0d_results(kind):
    """The linear plan's arena (memory_plan) holds 0-D temporaries as one element; every
    kind fetches 0-D ndarrays, bit-identical to the interpreter."""
    from fluidity.executor.strategy import ExecutionStrategy
    main, startup, loss = _regression(fluid.optimizer.Adam(0.05))
    runs = []
    for exe in (fluid.Executor(), fluid.Executor(strategy=ExecutionStrategy(kind))):
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        runs.append([exe.run(main, feed=f, fetch_list=[loss], scope=scope)[0]
                     for f in _batches(4)])
    for a, b in zip(*runs):
        assert type(a) is type(b) is np.ndarray and a.shape == b.shape == ()
        assert a == b
