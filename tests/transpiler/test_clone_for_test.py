"""Program.clone(for_test=True): the inference copy of a training program (conv, batch_norm,
pool, dropout, fc, backward and optimizer ops) has no training ops, is_test everywhere it is
declared, and computes the deterministic inference function."""
import numpy as np

import fluidity as fluid
from fluidity.backward import append_backward
from fluidity.framework import OpRole, op_role_guard
from fluidity.ops import registry
from references import bn_ref, conv_ref, pool_ref

TRAINING_ROLES = OpRole.Backward | OpRole.Optimize | OpRole.LRSched


def _build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3, 6, 6])
        c = fluid.layers.conv2d(x, 4, 3, padding=1, bias_attr=False)
        b = fluid.layers.batch_norm(c, act="relu", momentum=0.5)
        p = fluid.layers.pool2d(b, pool_size=2, pool_stride=2)
        d = fluid.layers.dropout(p, 0.25, seed=None)
        out = fluid.layers.fc(d, 5)
        loss = fluid.layers.mean(out)
        pairs = append_backward(loss)
        block = main.global_block()
        with op_role_guard(OpRole.LRSched):
            lr = block.create_var(name="lr", shape=[1], dtype="float32", persistable=True)
            block.append_op("fill_constant", outputs={"Out": lr},
                            attrs={"shape": [1], "dtype": lr.dtype, "value": 0.1})
        with op_role_guard(OpRole.Optimize):  # plain SGD: p -= lr * g
            for param, grad in pairs:
                step = block.create_var(name=param.name + "@STEP", dtype="float32")
                block.append_op("elementwise_mul", {"X": grad, "Y": lr}, {"Out": step})
                block.append_op("elementwise_sub", {"X": param, "Y": step}, {"Out": param})
    return main, startup, x, out, loss


def _roles(program):
    return [op.attr("op_role") for op in program.global_block().ops]


def test_clone_for_test_drops_training_ops_and_sets_is_test():
    main, _, x, out, loss = _build()
    n_ops = len(main.global_block().ops)
    test = main.clone(for_test=True)
    ops = test.global_block().ops
    assert not any(r & TRAINING_ROLES for r in _roles(test))
    assert not any(n.endswith("@GRAD") or "@GRAD@" in n or n.endswith("@STEP")
                   for n in test.global_block().vars)
    types = [op.type for op in ops]
    assert types == ["conv2d", "batch_norm", "relu", "pool2d", "dropout", "mul",
                     "elementwise_add", "mean"]
    assert ops[-1].attr("op_role") == OpRole.Forward | OpRole.Loss   # the loss op stays
    for op in ops:   # every op that declares is_test has it set, not just a known list
        if registry.get(op.type).declares("is_test"):
            assert op.attr("is_test") is True, op.type
    assert {"dropout", "batch_norm", "pool2d"} <= {op.type for op in ops if op.has_attr("is_test")}
    # the persistables forward ops use (params, moving stats) and the data var stay; the
    # learning rate only training used goes, as Fluid's prune_backward
    gb = test.global_block()
    for p in main.all_parameters():
        assert gb.has_var(p.name)
        assert gb.var(p.name).trainable == p.trainable
    assert gb.has_var("x") and not gb.has_var("lr")
    # a program without a backward pass keeps its unused persistables
    assert test.clone(for_test=True).global_block().has_var(main.all_parameters()[0].name)
    fwd = fluid.Program()
    fwd.global_block().create_var(name="kept", shape=[1], dtype="float32", persistable=True)
    assert fwd.clone(for_test=True).global_block().has_var("kept")
    assert gb.has_var(out.name) and gb.has_var(loss.name)
    # the original is untouched
    assert len(main.global_block().ops) == n_ops
    assert any(r & OpRole.Backward for r in _roles(main))
    assert all(not op.attr("is_test") for op in main.global_block().ops
               if op.type in ("dropout", "batch_norm"))


def _param(scope, name):
    return np.asarray(scope.find_var(name).get_tensor())


def test_clone_for_test_runs_inference_reference():
    main, startup, x, out, loss = _build()
    test = main.clone(for_test=True)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(1)
    for _ in range(3):   # train a little: moves params and running stats
        exe.run(main, feed={"x": rng.normal(size=(4, 3, 6, 6)).astype(np.float32)},
                fetch_list=[loss], scope=scope)
    gb = main.global_block()
    names = {op.type: op for op in gb.ops if op.attr("op_role") == OpRole.Forward}
    snapshot = {p.name: _param(scope, p.name).copy() for p in main.all_parameters()}

    xt = rng.normal(size=(2, 3, 6, 6)).astype(np.float32)
    a, = exe.run(test, feed={"x": xt}, fetch_list=[out.name], scope=scope)
    b, = exe.run(test, feed={"x": xt}, fetch_list=[out.name], scope=scope)
    np.testing.assert_array_equal(a, b)   # deterministic: no dropout noise, no stat updates
    for name, value in snapshot.items():  # inference changes no parameter or statistic
        np.testing.assert_array_equal(_param(scope, name), value)

    conv, bn, fc_mul = names["conv2d"], names["batch_norm"], names["mul"]
    w = snapshot[conv.input("Filter")[0]]
    scale, shift = snapshot[bn.input("Scale")[0]], snapshot[bn.input("Bias")[0]]
    mean, var = snapshot[bn.input("Mean")[0]], snapshot[bn.input("Variance")[0]]
    assert not np.allclose(mean, 0) and not np.allclose(var, 1)   # training moved them
    fw = snapshot[fc_mul.input("Y")[0]]
    fb = snapshot[names["elementwise_add"].input("Y")[0]]
    h = conv_ref(xt, w, paddings=(1, 1))
    h = np.maximum(bn_ref(h, scale, shift, mean, var, 1e-5), 0)
    h = pool_ref(h, [2, 2], [2, 2]) * (1 - 0.25)   # downgrade_in_infer
    want = h.reshape(2, -1) @ fw + fb
    np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-5)


def test_clone_for_test_of_forward_only_program_keeps_everything():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.dropout(x, 0.5)
    test = main.clone(for_test=True)
    assert [op.type for op in test.global_block().ops] == ["dropout"]
    assert test.global_block().ops[0].attr("is_test") is True
    xv = np.ones((3, 4), np.float32)
    got, = fluid.Executor().run(test, feed={"x": xv}, fetch_list=[y.name], scope=fluid.Scope())
    np.testing.assert_allclose(got, xv * 0.5)


def test_inference_optimize_cuts_the_reader_only_when_asked():
    """Program._inference_optimize and save_inference_model's pass are one function
    (transpiler.prune.inference_optimize): is_test set either way; prune_read_op drops the
    ops up to the read and the READER variables."""
    from fluidity.core.dtypes import VarType
    from fluidity.transpiler.prune import inference_optimize
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        reader = fluid.layers.create_py_reader_by_data(2, [x], use_double_buffer=False)
        xr = fluid.layers.read_file(reader)
        fluid.layers.mean(fluid.layers.dropout(xr, 0.5))

    def readers(p):
        return [n for n, v in p.global_block().vars.items() if v.type == VarType.READER]

    kept = main._inference_optimize(prune_read_op=False)
    cut = main._inference_optimize(prune_read_op=True)
    assert "read" in [op.type for op in kept.global_block().ops] and readers(kept)
    assert [op.type for op in cut.global_block().ops] == ["dropout", "mean"] and not readers(cut)
    for p in (kept, cut):
        assert p.global_block().ops[-2].attr("is_test") is True
    assert main.global_block().ops[-2].attr("is_test") is False    # the original untouched
    in_place = main.clone()
    assert inference_optimize(in_place) is in_place
    assert [op.type for op in in_place.global_block().ops] == ["dropout", "mean"]


def test_clone_for_test_drops_gradient_blocks_and_renumbers_the_rest():
    """Fluid's prune_backward: gradient blocks (left without ops) go; forward blocks built
    after them are renumbered, and the ops that run them follow."""
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        h = L.fc(x, 3)
        pred = L.reduce_sum(h) > 0.0
        y = L.cond(pred, lambda: h * 2.0, lambda: h - 1.0)
        loss = L.mean(y)
        fluid.optimizer.SGD(0.1).minimize(loss)
        z = L.cond(L.reduce_sum(x) > 0.0, lambda: x + 1.0, lambda: x * 3.0)  # blocks 5, 6
    assert len(main.blocks) == 7
    test = main.clone(for_test=True)
    assert len(test.blocks) == 5 and [b.parent_idx for b in test.blocks] == [-1, 0, 0, 0, 0]
    runs = [op.attr("sub_block").idx for op in test.global_block().ops
            if op.type == "conditional_block"]
    assert runs == [1, 2, 3, 4]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.array([[1.0, -2.0, 0.5]], "float32")
    got_y, got_z = exe.run(test, feed={"x": xv}, fetch_list=[y, z], scope=scope)
    w = np.array(scope.find_var(h.block.program.all_parameters()[0].name).get_tensor())
    b = np.array(scope.find_var(h.block.program.all_parameters()[1].name).get_tensor())
    hv = xv @ w + b
    np.testing.assert_allclose(got_y, hv * 2 if hv.sum() > 0 else hv - 1, rtol=1e-5)
    np.testing.assert_allclose(got_z, xv * 3, rtol=1e-6)
