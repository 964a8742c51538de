"""Whole training programs PaddlePaddle 3.3.1 built (tests/fixtures/paddle3_train, made by
scripts/gen_paddle3_zoo.py): forward, the backward Paddle appends (seeded by a 0-D
loss@GRAD), the optimizer ops with their 0-D learning rate, a sparse embedding gradient.
Fluidity loads the ProgramDesc and Paddle's persistables, runs the same steps, and gets
Paddle's 0-D losses and updated persistables (within float32 rounding: Paddle's kernels sum
in another order). Paddle itself is never needed."""
import json
import os

import numpy as np
import pytest

import fluidity as fluid
from fluidity import io as fio
from fluidity.transpiler.compat_check import find_unsupported
from paths import FIXTURES

TRAIN = os.path.join(FIXTURES, "paddle3_train")
NAMES = sorted(d for d in os.listdir(TRAIN) if os.path.isfile(os.path.join(TRAIN, d, "meta.json")))


def _load(name):
    d = os.path.join(TRAIN, name)
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    return d, meta, fio.load_program(os.path.join(d, "main.pdmodel"))


def test_the_fixtures_are_there():
    assert {"train_sparse_sgd", "train_adam"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_paddle3_program_declares_0d_loss_seed_and_learning_rate(name):
    _, meta, prog = _load(name)
    assert not any(find_unsupported(prog)), find_unsupported(prog)
    block = prog.global_block()
    assert block.var(meta["loss"]).shape == ()
    assert block.var("learning_rate_0").shape == ()
    seed = [op for op in block.ops if op.output_arg_names == [meta["loss"] + "@GRAD"]]
    assert seed[0].type == "fill_constant" and seed[0].attr("shape") == []


@pytest.mark.parametrize("compiled", [False, True], ids=["interpreted", "compiled"])
@pytest.mark.parametrize("name", NAMES)
def test_paddle3_training_program_trains_as_paddle(name, compiled):
    d, meta, prog = _load(name)
    feeds = np.load(os.path.join(d, "feeds.npz"))
    want = np.load(os.path.join(d, "result.npz"))
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        fio.load_persistables(exe, d, prog, filename="params.pdiparams")
    run = fluid.CompiledProgram(prog).with_native_code() if compiled else prog
    for i in range(meta["steps"]):
        feed = {k: feeds[f"step_{i}/{k}"] for k in meta["feeds"]}
        loss, = exe.run(run, feed=feed, fetch_list=[meta["loss"]], scope=scope)
        assert loss.shape == () and loss.dtype == np.float32
        np.testing.assert_allclose(loss, want[f"loss_{i}"], rtol=2e-5, err_msg=f"step {i}")
    for n in want.files:
        if not n.startswith("loss_"):
            got = np.asarray(scope.find_var(n).get_tensor())
            assert got.shape == want[n].shape, n
            np.testing.assert_allclose(got, want[n], rtol=1e-4, atol=1e-6, err_msg=n)
