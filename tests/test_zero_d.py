"""0-D values where a program's desc declares them: a program saved by Paddle 2.5 or later
declares its full reductions, its loss@GRAD seed and its learning rate `[]`, and keeps those
0-D values here (fed, fetched, saved, loaded, compiled, on every plan kind), while a program
built with `fluidity.layers` declares and yields Fluid 1.x's `[1]` (tests/test_fluid1_shapes.py).
One op kernel serves both: the executor shapes a one-element result as its variable is
declared (executor/plan.py; codegen/lower.py for compiled code).

The Paddle 2.5+ programs here are Fluidity programs whose descs are rewritten the way Paddle
2.5+ writes them (`_as_paddle25`); tests/test_paddle3_training.py and test_paddle_zoo.py run
programs Paddle 3.3.1 itself saved."""
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

# the ops whose one-element outputs Paddle 2.5+ declares [] where Fluid 1.x declares [1]
_FULL_REDUCTIONS = {"mean", "reduce_sum", "reduce_mean", "accuracy"}


def test_0d_tensor_files_are_paddles_bytes(tmp_path):
    for raw, value in ((PADDLE_0D_F32, np.array(2.5, np.float32)),
                       (PADDLE_0D_I64, np.array(7, np.int64))):
        t = ser.lod_tensor_from_bytes(raw)
        arr = np.asarray(t)
        assert arr.shape == () and arr.dtype == value.dtype and arr == value
        assert ser.lod_tensor_to_bytes(LoDTensor(value)) == raw
    assert LoDTensor(np.array(3.0, np.float32)).shape() == []


def _as_paddle25(main, startup):
    """Rewrite the descs as Paddle 2.5+ writes the same program: every [1] output of a full
    reduction, the loss@GRAD seed and the learning rate declared [] (the seed's and the
    learning rate's fill_constant with shape [] too). Returns the names made 0-D."""
    made = set()
    for block in main.blocks:
        for op in block.ops:
            outs = []
            if op.type in _FULL_REDUCTIONS:
                outs = op.output_arg_names
            elif op.type == "fill_constant" and op.output_arg_names[0].endswith("@GRAD") \
                    and op.attr("shape") == [1]:
                outs = op.output_arg_names
                op._set_attr("shape", [])
            made |= {n for n in outs if tuple(block.var_recursive(n).shape) == (1,)}
    made |= {v.name for v in main.list_vars() if v.name.startswith("learning_rate")}
    made |= {n + "@GRAD" for n in made if main.global_block().has_var(n + "@GRAD")}
    for name in made:
        main.global_block().var_recursive(name)._set_shape([])
    for op in startup.global_block().ops:
        if op.output_arg_names[0] in made:
            op._set_attr("shape", [])
            startup.global_block().var(op.output_arg_names[0])._set_shape([])
    return made


def _regression(opt):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.data("y", [1])
        scale = fluid.data("scale", [])     # fluid.data: the fed shape is checked
        pred = fluid.layers.fc(x, 1)
        loss = fluid.layers.mean(fluid.layers.square(pred - y)) * scale
        opt.minimize(loss)
    return main, startup, loss


def _paddle25_regression(opt):
    main, startup, loss = _regression(opt)
    made = _as_paddle25(main, startup)
    means = [n for n in made if n.startswith("mean") and not n.endswith("@GRAD")]
    assert len(means) == 1 and {means[0] + "@GRAD", loss.name + "@GRAD"} <= made
    loss._set_shape([])   # `mean * scale`, a 0-D scale: elementwise_mul of [] and [] is []
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
def test_a_program_declaring_0d_trains_and_fetches_0d(opt):
    main, startup, loss = _paddle25_regression(opt())
    lr = [v for v in main.list_vars() if v.name.startswith("learning_rate")]
    assert lr and all(v.shape == () for v in lr)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    assert all(np.asarray(scope.find_var(v.name).get_tensor()).shape == () for v in lr)
    losses = []
    for feed in _batches():
        out, = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        assert type(out) is np.ndarray and out.shape == ()
        losses.append(float(out))
        assert out.item() == losses[-1]
    assert losses[-1] < 0.2 * losses[0]
    means = [v for v in main.list_vars() if v.name.startswith("mean")]
    got = exe.run(main, feed=next(_batches()), fetch_list=means, scope=scope)
    assert [g.shape for g in got] == [()] * len(means)


def test_feeding_a_0d_variable():
    main, startup, loss = _regression(fluid.optimizer.SGD(0.0))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = next(_batches())
    outs = []
    for s in (2.0, np.float32(2.0), np.array(2.0, np.float32), LoDTensor(np.array(2.0, "f4"))):
        outs.append(exe.run(main, feed={**feed, "scale": s}, fetch_list=[loss], scope=scope)[0])
    # a Fluid 1.x loss ([1]) times a 0-D scale broadcasts to [1]
    assert all(o.shape == (1,) and o == outs[0] for o in outs)
    with pytest.raises(fluid.errors.FeedError, match=r"'scale'.*shape = \(\), but received "
                                                     r"fed shape \[1\]"):
        exe.run(main, feed={**feed, "scale": np.ones(1, np.float32)}, fetch_list=[loss],
                scope=scope)


def test_a_0d_program_compiled_matches_the_interpreter():
    main, startup, loss = _paddle25_regression(fluid.optimizer.SGD(0.1))
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
    """A 0-D learning rate saves as Paddle writes it and loads back as 0-D, in separate
    files and combined."""
    main, startup, loss = _paddle25_regression(fluid.optimizer.SGD(0.25))
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
        total = fluid.layers.reduce_sum(h)
        out = total * s
    total._set_shape([])          # as Paddle 2.5+ declares a full reduce_sum
    out._set_shape([])
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
    assert f"{name}: float32 []" in r.stdout      # model_run names the dtype and shape
    got = np.load(tmp_path / "res" / (name.replace("/", "_") + ".npy"))
    assert got.shape == ()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert os.path.isfile(tmp_path / "out" / "model_run")


@pytest.mark.parametrize("kind", ["linear", "dataflow", "parallel"])
def test_every_plan_kind_gives_the_interpreters_0d_results(kind):
    """The linear plan's arena (memory_plan) holds 0-D temporaries as one element; every
    kind fetches 0-D ndarrays, bit-identical to the interpreter."""
    from fluidity.executor.strategy import ExecutionStrategy
    main, startup, loss = _paddle25_regression(fluid.optimizer.Adam(0.05))
    runs = []
    for exe in (fluid.Executor(), fluid.Executor(strategy=ExecutionStrategy(kind))):
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        runs.append([exe.run(main, feed=f, fetch_list=[loss], scope=scope)[0]
                     for f in _batches(4)])
    for a, b in zip(*runs):
        assert type(a) is type(b) is np.ndarray and a.shape == b.shape == ()
        assert a == b
