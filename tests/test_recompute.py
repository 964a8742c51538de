"""Forward recomputation (RecomputeOptimizer, append_backward(checkpoints=)): the ops the
backward pass runs again, as Fluid 1.8 builds them, and gradients equal to those without
recomputation, dropout included."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers, optimizer
from fluidity.backward import append_backward
from fluidity.errors import ProgramError


def _chain(dropout=False):
    """x -> fc(tanh) h1 -> [dropout] -> fc(tanh) h2 -> fc out -> mean loss."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data("x", [3])
        h1 = layers.fc(x, 4, act="tanh")
        d = layers.dropout(h1, 0.5) if dropout else h1
        h2 = layers.fc(d, 4, act="tanh")
        loss = layers.mean(layers.fc(h2, 1))
    return main, startup, x, h1, h2, loss


def _types(block, start):
    return [op.type for op in block.ops[start:]]


def test_one_checkpoint_recomputes_the_ops_before_it():
    main, startup, x, h1, h2, loss = _chain()
    n = len(main.global_block().ops)
    with fluid.program_guard(main, startup):
        append_backward(loss, checkpoints=[h2])
    ops = _types(main.global_block(), n)
    # fc = mul, elementwise_add (+ tanh): after the gradients of what follows h2, the ops up
    # to h2 run again, their results renamed, but for h2's own writer (h2 is kept); then
    # their gradients
    assert ops[:4] == ["fill_constant", "mean_grad", "elementwise_add_grad", "mul_grad"]
    assert ops[4:9] == ["mul", "elementwise_add", "tanh", "mul", "elementwise_add"]
    assert ops[9:] == ["tanh_grad", "elementwise_add_grad", "mul_grad"] * 2
    recomputed = main.global_block().ops[n + 4:n + 9]
    assert all(o.endswith(".subprog_0") for op in recomputed for o in op.output_arg_names)
    # the segment's gradient ops read the recomputed values, not the forward ones
    reads = [r for op in main.global_block().ops[n + 9:] for r in op.input_arg_names]
    assert h1.name not in reads and h1.name + ".subprog_0" in reads


def test_two_checkpoints_recompute_only_between_them():
    main, startup, x, h1, h2, loss = _chain()
    n = len(main.global_block().ops)
    with fluid.program_guard(main, startup):
        append_backward(loss, checkpoints=[h2, h1])   # any order: sorted by position
    ops = _types(main.global_block(), n)
    # two segments, the ops before h1 and those from h1 to h2, each rerun but for the tanh
    # writing its checkpoint, the later one first; each renames under its own suffix
    assert ops.count("mul") == 2 and ops.count("tanh") == 0
    assert ops.count("mul_grad") == 3
    outs = [o for op in main.global_block().ops[n:] if op.type == "mul"
            for o in op.output_arg_names]
    assert [o.rsplit(".", 1)[1] for o in outs] == ["subprog_0", "subprog_1"]


def test_adjacent_checkpoints_recompute_nothing():
    main, startup, x, h1, h2, loss = _chain()
    block = main.global_block()
    n = len(block.ops)
    after_h1 = block.ops[3].output("Out")[0]     # the mul reading h1 writes it
    with fluid.program_guard(main, startup):
        append_backward(loss, checkpoints=[h1, after_h1])
    assert not any(t in ("mul", "tanh") for t in _types(main.global_block(), n))


def _train(checkpoints, dropout, steps=3):
    main, startup, x, h1, h2, loss = _chain(dropout)
    with fluid.program_guard(main, startup):
        opt = optimizer.SGD(0.5)
        if checkpoints is not None:
            opt = optimizer.RecomputeOptimizer(opt)
            opt._set_checkpoints([{"h1": h1, "h2": h2}[c] for c in checkpoints])
        opt.minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    losses = [float(exe.run(main, feed={"x": xv}, fetch_list=[loss], scope=scope)[0])
              for _ in range(steps)]
    params = {p.name: np.asarray(scope.find_var(p.name).get_tensor())
              for p in main.global_block().all_parameters()}
    return losses, params


@pytest.mark.parametrize("checkpoints", [["h2"], ["h1", "h2"]])
def test_recompute_trains_as_without_it(checkpoints):
    want, p_want = _train(None, False)
    got, p_got = _train(checkpoints, False)
    np.testing.assert_array_equal(got, want)   # the same ops on the same values
    for name in p_want:
        np.testing.assert_array_equal(p_got[name], p_want[name])


def test_recomputed_dropout_draws_the_forward_mask():
    main, startup, x, h1, h2, loss = _chain(dropout=True)
    with fluid.program_guard(main, startup):
        opt = optimizer.RecomputeOptimizer(optimizer.SGD(0.5))
        opt._set_checkpoints([h2])
        opt.minimize(loss)
    block = main.global_block()
    types = [op.type for op in block.ops]
    assert types.index("seed") == types.index("dropout") - 1   # a seed op before it
    drops = [op for op in block.ops if op.type == "dropout"]
    assert len(drops) == 2 and drops[0].input("Seed") == drops[1].input("Seed")
    masks = [d.output("Out")[0] for d in drops]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.random.default_rng(1).normal(size=(6, 3)).astype(np.float32)
    a, b = exe.run(main, feed={"x": xv}, fetch_list=masks, scope=scope)
    np.testing.assert_array_equal(a, b)
    assert (a == 0).any() and (a != 0).any()


def test_recompute_refuses_control_flow_on_the_path():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data("x", [3])
        h = layers.fc(x, 3)
        flag = layers.fill_constant([1], "bool", True)
        out = layers.cond(flag, lambda: layers.scale(h, 2.0), lambda: layers.scale(h, 3.0))
        loss = layers.mean(out)
        with pytest.raises(ProgramError, match="sub-block"):
            append_backward(loss, checkpoints=[h])


def test_recompute_optimizer_load_is_not_supported():
    opt = optimizer.RecomputeOptimizer(optimizer.SGD(0.1))
    with pytest.raises(NotImplementedError, match="not supported by Recompute Optimizer"):
        opt.load({})
