"""The multi-batch-merge pass (transpiler/batch_merge.py) and the BuildStrategy pass
builder that adds it, as Fluid 1.8's test_dist_mnist_batch_merge uses them."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers
from fluidity.ir.views import ProgramView
from fluidity.transpiler.batch_merge import multi_batch_merge


def _program(opt=None):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = layers.data("x", [3])
        y = layers.data("y", [1])
        w = fluid.ParamAttr(name="w")
        h = layers.fc(x, 3, param_attr=w, bias_attr=False, act="tanh")
        h = layers.fc(h, 3, param_attr=w, bias_attr=False)   # w twice: a summed gradient
        pred = layers.fc(h, 1)
        loss = layers.mean(layers.square_error_cost(pred, y))
        (opt or fluid.optimizer.SGD(0.1)).minimize(loss)
    return main, startup, loss


def test_forward_backward_repeat_and_the_gradients_are_averaged_once():
    main, _, _ = _program()
    before = main.desc.SerializeToString()
    out = ProgramView(multi_batch_merge(main.desc, 3)).global_block()
    assert main.desc.SerializeToString() == before          # a pure pass
    src = main.global_block().ops
    fb = [op.type for op in src if op.type not in ("sgd",)]
    types = [op.type for op in out.ops]
    n = len(fb)
    assert types[:3 * n] == fb * 3
    grads = [op.input("Grad")[0] for op in src if op.type == "sgd"]
    tail = types[3 * n:]
    assert tail == ["sum", "scale"] * len(grads) + ["sgd"] * len(grads)
    for k, g in enumerate(grads):
        s, sc = out.ops[3 * n + 2 * k], out.ops[3 * n + 2 * k + 1]
        assert s.input("X") == [f"{g}.repeat.{i}" for i in range(3)]
        assert s.output("Out") == [g] and sc.input("X") == [g] == sc.output("Out")
        assert sc.attr("scale") == pytest.approx(1 / 3)
        assert list(sc.attr("op_role_var"))[1] == g
        for i in range(3):
            assert f"{g}.repeat.{i}" in out.vars
    # no repeated op still claims a gradient (the data-parallel pass reduces the merged one)
    for op in out.ops[:3 * n]:
        assert not set(op.output_arg_names) & set(grads)
        if any(".repeat." in name for name in op.output_arg_names):
            assert not op.has_attr("op_role_var") or not list(op.attr("op_role_var"))


def _train(merge, places=1, opt=None, steps=3):
    main, startup, loss = _program(opt)
    build = fluid.BuildStrategy()
    if merge:
        p = build._finalize_strategy_and_create_passes().insert_pass(
            0, "multi_batch_merge_pass")
        p.set("num_repeats", merge)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=build, places=fluid.cpu_places(places))
    rng = np.random.RandomState(0)
    losses = []
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        for _ in range(steps):
            feed = {"x": rng.rand(4, 3).astype("float32"),
                    "y": rng.rand(4, 1).astype("float32")}
            (v,) = exe.run(compiled, feed=feed, fetch_list=[loss])
            losses.append(np.array(v))
        w = np.array(fluid.global_scope().find_var("w").get_tensor())
    return np.array(losses), w


@pytest.mark.parametrize("places", [1, 2])
def test_merged_repeats_of_one_batch_train_as_the_batch(places):
    """Each repeat reads the same fed batch (as in Fluid), so the mean of the repeats'
    gradients is the batch's gradient: the same losses and weights as without the pass
    (a missing 1/num_repeats would double the step)."""
    opt = fluid.optimizer.Momentum(0.1, momentum=0.9)
    want_l, want_w = _train(0, places, opt)
    got_l, got_w = _train(2, places, fluid.optimizer.Momentum(0.1, momentum=0.9))
    np.testing.assert_allclose(got_l, want_l, rtol=1e-5)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-7)
    assert not np.allclose(want_l[0], want_l[-1])           # it did train


def test_the_pass_builder_refuses_what_it_cannot_run():
    build = fluid.BuildStrategy()
    passes = build._finalize_strategy_and_create_passes()
    assert build._finalize_strategy_and_create_passes() is passes
    with pytest.raises(ValueError, match="no_such_pass has not been registered"):
        passes.append_pass("no_such_pass")
    p = passes.append_pass("multi_batch_merge_pass")
    assert p.type() == "multi_batch_merge_pass" and not p.has("num_repeats")
    main, _, _ = _program()
    with pytest.raises(ValueError, match="num_repeats"):
        passes.apply(main.desc)
    p.set("num_repeats", 0)
    with pytest.raises(ValueError, match="num_repeats must be an int >= 1"):
        passes.apply(main.desc)
    passes.remove_pass(0)
    assert passes.all_passes() == []
