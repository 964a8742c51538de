"""Random ops compiled (runtime/philox.h) draw bit for bit what the interpreter draws
(core/philox.py) for the same seed and run count, over several runs: dropout (both
implementations; seed 0 from the op's state, fix_seed, a Seed input), uniform_random,
gaussian_random and their batch_size_like forms, nce's three samplers; and a training step
with them compiles whole."""
import numpy as np
import pytest
from op_test import compiled_ops, reset_random_states

import fluidity as fluid
from fluidity.core import philox
from fluidity.ops import random_stream

RUNS = 3


def _both(main, startup, feed, fetch, key=99):
    """[interpreted runs, compiled runs] of `main` from the same startup and random states."""
    exe, out = fluid.Executor(), []
    for compiled in (False, True):
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        reset_random_states(main, scope, key)
        prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
        out.append([exe.run(prog, feed=feed, fetch_list=fetch, scope=scope)
                    for _ in range(RUNS)])
    return out


def _assert_identical(runs_a, runs_b):
    for a, b in zip(runs_a, runs_b):
        for x, y in zip(a, b):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)


def _dropout_program(impl, seed=None, seed_input=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [40])
        if seed_input:
            block = main.global_block()
            s = block.create_var(name="seed_t", dtype="int32", shape=[1])
            block.append_op("fill_constant", outputs={"Out": s},
                            attrs={"shape": [1], "dtype": s.dtype, "value": 17.0})
            out = block.create_var(name="drop_out", dtype="float32")
            mask = block.create_var(name="drop_mask", dtype="uint8")
            block.append_op("dropout", inputs={"X": x, "Seed": s},
                            outputs={"Out": out, "Mask": mask},
                            attrs={"dropout_prob": 0.4, "dropout_implementation": impl})
        else:
            out = fluid.layers.dropout(x, 0.4, seed=seed, dropout_implementation=impl)
            mask = main.global_block().ops[-1].output("Mask")[0]
    return main, startup, out, mask


@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
@pytest.mark.parametrize("seeding", ["state", "fix_seed", "seed_input"])
def test_dropout_compiled_draws_the_interpreters_masks(impl, seeding):
    main, startup, out, mask = _dropout_program(impl, seed=5 if seeding == "fix_seed" else None,
                                                seed_input=seeding == "seed_input")
    assert "dropout" in compiled_ops(main)
    x = np.random.default_rng(0).uniform(1, 2, (6, 40)).astype(np.float32)
    interp, comp = _both(main, startup, {"x": x}, [out, mask])
    _assert_identical(interp, comp)
    masks = [r[1] for r in interp]
    if seeding == "state":       # seed 0: a new mask each run
        assert not np.array_equal(masks[0], masks[1])
        want = philox.keep_mask(x.shape, 0.4, 99, philox.stream_id(out.name), 1)
        np.testing.assert_array_equal(masks[1], want)
    else:                        # seeded: the same mask every run, key (seed, 0), run 0
        assert all(np.array_equal(masks[0], m) for m in masks)
        np.testing.assert_array_equal(
            masks[0], philox.keep_mask(x.shape, 0.4, 5 if seeding == "fix_seed" else 17, 0, 0))
    k = 1 / 0.6 if impl == "upscale_in_train" else 1.0
    np.testing.assert_array_equal(interp[0][0], (x * masks[0] * np.float32(k)
                                                 if impl == "downgrade_in_infer" else
                                                 x * masks[0] / np.float32(0.6)))


@pytest.mark.parametrize("seed", [0, 11])
def test_random_tensors_compiled_match_the_interpreter(seed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3])
        block = main.global_block()
        outs = []
        for op_type, attrs in (("uniform_random", {"min": -2.0, "max": 5.0}),
                               ("gaussian_random", {"mean": 1.0, "std": 3.0})):
            o = block.create_var(name=f"{op_type}_out", dtype="float32")
            block.append_op(op_type, outputs={"Out": o},
                            attrs={"shape": [4, 33], "dtype": o.dtype, "seed": seed, **attrs})
            outs.append(o)
        outs.append(fluid.layers.uniform_random_batch_size_like(x, [-1, 7], min=0.0, max=1.0,
                                                                seed=seed))
        outs.append(fluid.layers.gaussian_random_batch_size_like(x, [-1, 9], seed=seed))
        total = fluid.layers.sums([fluid.layers.reduce_sum(o) for o in outs])
    assert {"uniform_random", "gaussian_random", "uniform_random_batch_size_like",
            "gaussian_random_batch_size_like"} <= compiled_ops(main)
    feed = {"x": np.zeros((5, 3), np.float32)}
    interp, comp = _both(main, startup, feed, outs + [total])
    _assert_identical([r[:4] for r in interp], [r[:4] for r in comp])
    first, second = interp[0], interp[1]
    assert first[2].shape == (5, 7) and first[3].shape == (5, 9)
    if seed:
        assert all(np.array_equal(a, b) for a, b in zip(first[:4], second[:4]))
        np.testing.assert_array_equal(first[0], philox.uniform((4, 33), -2.0, 5.0, seed, 0))
    else:
        assert not np.array_equal(first[0], second[0])
        name = outs[1].name
        np.testing.assert_array_equal(second[1], philox.normal(
            (4, 33), 1.0, 3.0, 99, philox.stream_id(name), 1))


@pytest.mark.parametrize("sampler,sparse", [("uniform", False), ("log_uniform", True),
                                            ("custom_dist", False)])
def test_nce_compiled_samples_the_interpreters_negatives(sampler, sparse):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [8])
        y = fluid.layers.data("y", [1], dtype="int64")
        # custom_dist: probabilities (Fluid's layer takes them as given)
        dist = list(np.linspace(1, 3, 30) / np.linspace(1, 3, 30).sum()) \
            if sampler == "custom_dist" else None
        cost = fluid.layers.nce(x, y, 30, num_neg_samples=6, sampler=sampler,
                                custom_dist=dist, is_sparse=sparse)
        loss = fluid.layers.mean(cost)
        fluid.optimizer.SGD(0.1).minimize(loss)
    nce_op = next(op for op in main.global_block().ops if op.type == "nce")
    labels = nce_op.output("SampleLabels")[0]
    assert {"nce", "nce_grad"} <= compiled_ops(main)
    r = np.random.default_rng(1)
    feed = {"x": r.standard_normal((7, 8)).astype(np.float32),
            "y": r.integers(0, 30, (7, 1))}
    interp, comp = _both(main, startup, feed, [labels, loss])
    for a, b in zip(interp, comp):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_allclose(a[1], b[1], rtol=1e-5)
    assert not np.array_equal(interp[0][0], interp[1][0])     # seed 0: new negatives
    neg = interp[0][0][:, 1:]
    assert neg.min() >= 0 and neg.max() < 30
    np.testing.assert_array_equal(interp[0][0][:, :1], feed["y"])


def test_training_step_with_dropout_compiles_whole_and_repeats_the_interpreter():
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [16])
        h = fluid.layers.dropout(fluid.layers.fc(x, 32, act="relu"), 0.5,
                                 dropout_implementation="upscale_in_train")
        loss = fluid.layers.mean(fluid.layers.fc(h, 1))
        fluid.optimizer.SGD(0.05).minimize(loss)
    low = fluid.CompiledProgram(main).with_native_code().explain(feed=["x"],
                                                                   fetch_list=[loss.name])
    assert "0 as Python steps" in low
    mask = next(op for op in main.global_block().ops if op.type == "dropout").output("Mask")[0]
    feed = {"x": np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)}
    interp, comp = _both(main, startup, feed, [mask, loss])
    for a, b in zip(interp, comp):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_allclose(a[1], b[1], rtol=1e-5)


def test_a_program_without_the_state_makes_one_and_advances_it():
    main, startup, out, mask = _dropout_program("upscale_in_train")
    scope, exe = fluid.Scope(), fluid.Executor()
    x = np.ones((2, 40), np.float32)
    exe.run(main, feed={"x": x}, fetch_list=[out], scope=scope)
    name = random_stream.state_var(main.global_block().ops[-1])
    state = np.array(scope.find_var(name).get_tensor())
    assert state.dtype == np.int64 and state[1] == 1
    exe.run(fluid.CompiledProgram(main).with_native_code(), feed={"x": x}, fetch_list=[out],
            scope=scope)
    assert np.array(scope.find_var(name).get_tensor())[1] == 2


@pytest.mark.parametrize("seeding", ["startup_seed", "seed_input", "state"])
def test_random_crop_compiled_crops_where_the_interpreter_does(seeding):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3, 9, 8])
        block = main.global_block()
        out = block.create_var(name="crop_out", dtype="float32")
        seed_out = block.create_var(name="crop_seed_out", dtype="int64")
        inputs = {"X": x}
        if seeding == "seed_input":
            s = block.create_var(name="crop_seed", dtype="int64", shape=[1])
            block.append_op("fill_constant", outputs={"Out": s},
                            attrs={"shape": [1], "dtype": s.dtype, "value": 123.0})
            inputs["Seed"] = s
        block.append_op("random_crop", inputs=inputs, outputs={"Out": out, "SeedOut": seed_out},
                        attrs={"shape": [5, 4],
                               "startup_seed": 7 if seeding == "startup_seed" else 0})
    assert "random_crop" in compiled_ops(main)
    xs = np.arange(4 * 3 * 9 * 8, dtype=np.float32).reshape(4, 3, 9, 8)
    interp, comp = _both(main, startup, {"x": xs}, [out, seed_out])
    _assert_identical(interp, comp)
    crop = interp[0][0]
    assert crop.shape == (4, 3, 5, 4)
    for i in range(4):           # each crop is a window of its instance
        for c in range(3):
            r0, c0 = divmod(int(crop[i, c, 0, 0] - xs[i, c, 0, 0]), 8)
            np.testing.assert_array_equal(crop[i, c], xs[i, c, r0:r0 + 5, c0:c0 + 4])
    repeats = np.array_equal(interp[0][0], interp[1][0])
    assert repeats == (seeding != "state")


def test_a_bad_state_or_label_stops_the_run_naming_the_op():
    from fluidity.errors import ExecutionError
    main, startup, out, mask = _dropout_program("upscale_in_train")
    name = random_stream.state_var(main.global_block().ops[-1])
    x = np.ones((2, 40), np.float32)
    for compiled in (False, True):
        scope = fluid.Scope()
        scope.var(name).get_tensor().set(np.zeros(3, np.float32), fluid.CPUPlace())
        prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
        why = (r"'@RNG_STATE@dropout_\d+\.tmp_0' is float32, compiled for int64" if compiled
               else r"int64 \[key, run\] pair, got float32 \[3\]")
        with pytest.raises(ExecutionError, match=r"'dropout'.*" + why):
            fluid.Executor().run(prog, feed={"x": x}, fetch_list=[out], scope=scope)

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", [4])
        y = fluid.layers.data("y", [1], dtype="int64")
        cost = fluid.layers.nce(xv, y, 10, num_neg_samples=3)
    feed = {"x": np.ones((2, 4), np.float32), "y": np.array([[3], [10]])}
    for compiled in (False, True):
        scope = fluid.Scope()
        fluid.Executor().run(startup, scope=scope)
        prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
        with pytest.raises(ExecutionError, match="nce: label 10 is out of range for "
                                                 "num_total_classes=10"):
            fluid.Executor().run(prog, feed=feed, fetch_list=[cost], scope=scope)


def test_a_hostile_alias_table_stops_both_runs_naming_it():
    """CustomDistAlias comes from the model's variables: a class past num_total_classes
    would index Weight out of bounds in generated code; both paths refuse it."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.data("y", [1], dtype="int64")
        cost = fluid.layers.nce(x, y, 10, num_neg_samples=3, sampler="custom_dist",
                                custom_dist=[0.1] * 10)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    nce_op = next(op for op in main.global_block().ops if op.type == "nce")
    t = scope.find_var(nce_op.input("CustomDistAlias")[0]).get_tensor()
    bad = np.array(t)
    bad[:] = 10 ** 6
    t.set(bad, fluid.CPUPlace())
    feed = {"x": np.ones((2, 4), np.float32), "y": np.zeros((2, 1), np.int64)}
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        with pytest.raises(Exception, match="CustomDistAlias holds 1000000"):
            exe.run(prog, feed=feed, fetch_list=[cost], scope=scope)
