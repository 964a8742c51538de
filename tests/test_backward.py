"""append_backward / gradients: naming, summing of contributions, stop_gradient,
no_grad_set, pruning; and a whole network against finite differences."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.backward import append_backward, gradients
from fluidity.core.tensor import LoDTensor


def _prog():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    return main, startup


def test_grad_names_roles_and_seed():
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        y = fluid.layers.fc(x, 2)
        loss = fluid.layers.mean(y)
        pg = append_backward(loss)
    assert sorted(p.name for p, _ in pg) == ["fc_0.b_0", "fc_0.w_0"]
    assert all(g.name == p.name + "@GRAD" for p, g in pg)
    ops = main.global_block().ops
    seed = [o for o in ops if o.output_arg_names == [loss.name + "@GRAD"]][0]
    assert seed.type == "fill_constant" and seed.attr("value") == 1.0
    assert seed.attr("op_role") == 0x0101  # Backward | Loss
    loss_op = [o for o in ops if loss.name in o.output_arg_names and o.type == "mean"][0]
    assert loss_op.attr("op_role") == 0x0100
    mul_grad = [o for o in ops if o.type == "mul_grad"][0]
    assert mul_grad.attr("op_role_var") == ["fc_0.w_0", "fc_0.w_0@GRAD"]
    # x is data (stop_gradient): no X@GRAD is computed
    assert "x@GRAD" not in main.global_block().vars
    assert mul_grad.output("X@GRAD") == []


def test_repeated_use_sums_renamed_partials():
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3], append_batch_size=False)
        x.stop_gradient = False
        a = fluid.layers.scale(x, 2.0)
        b = fluid.layers.scale(x, 3.0)
        c = fluid.layers.elementwise_mul(x, x)
        loss = fluid.layers.reduce_sum(a + b + c)
        (gx,) = gradients([loss], [x])
    sums = [o for o in main.global_block().ops if o.type == "sum" and
            o.output("Out") == ["x@GRAD"]]
    assert len(sums) == 1 and len(sums[0].input("X")) == 4
    assert all("@RENAME@" in n for n in sums[0].input("X"))
    xv = np.array([1.0, -2.0, 0.5], "float32")
    (g,) = fluid.Executor().run(main, feed={"x": xv}, fetch_list=[gx])
    np.testing.assert_allclose(g, 2 + 3 + 2 * xv)


def test_no_grad_set_and_stop_gradient_prune():
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        h1 = fluid.layers.fc(x, 3, param_attr=fluid.ParamAttr(name="w1"), bias_attr=False)
        h2 = fluid.layers.fc(h1, 2, param_attr=fluid.ParamAttr(name="w2"), bias_attr=False)
        frozen = fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name="w3", trainable=False),
                                 bias_attr=False)
        loss = fluid.layers.mean(h2 + frozen)
        pg = append_backward(loss, no_grad_set={"w1"})
    names = {p.name for p, _ in pg}
    assert names == {"w2"}  # w1 in no_grad_set, w3 not trainable
    block = main.global_block()
    assert not block.has_var("w1@GRAD") and not block.has_var("w3@GRAD")
    # nothing needs h1's gradient once w1 is excluded: no grad op computes it
    assert not any("w1" in " ".join(o.output_arg_names) for o in block.ops)


def test_parameter_list_and_unused_branch():
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        used = fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name="wu"))
        fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name="wx"))  # not on the loss path
        loss = fluid.layers.mean(used)
        pg = append_backward(loss, parameter_list=["wu"])
    assert [p.name for p, _ in pg] == ["wu"]
    assert not main.global_block().has_var("wx@GRAD")


def test_unused_output_gradient_is_zero_filled():
    """split gives three outputs; the loss uses one; the others' grads are filled with 0."""
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [6], append_batch_size=False)
        x.stop_gradient = False
        parts = fluid.layers.split(x, 3)
        loss = fluid.layers.reduce_sum(parts[1] * 5.0)
        (gx,) = gradients([loss], [x])
    (g,) = fluid.Executor().run(main, feed={"x": np.arange(6, dtype="float32")},
                                fetch_list=[gx])
    np.testing.assert_array_equal(g, [0, 0, 5, 5, 0, 0])


def test_sparse_embedding_gradient_is_selected_rows():
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64")
        e = fluid.layers.embedding(ids, [10, 3], is_sparse=True,
                                   param_attr=fluid.ParamAttr(name="emb"))
        loss = fluid.layers.mean(e)
        append_backward(loss)
    assert main.global_block().var("emb@GRAD").type == fluid.VarType.SELECTED_ROWS
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed={"ids": np.array([[2], [7], [2]], "int64")}, scope=scope,
            create_local_scope=False)
    g = scope.find_var("emb@GRAD").value
    assert isinstance(g, fluid.SelectedRows) and sorted(g.rows.tolist()) == [2, 2, 7]
    np.testing.assert_allclose(g.to_dense()[2], np.full(3, 2 / 9), rtol=1e-6)


def _whole_net(seed=0):
    """A small network mixing many ops: embedding over LoD ids + sequence_pool, concat with a
    dense input, fc+tanh, layer_norm, elementwise ops with broadcasting, softmax CE."""
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        dense = fluid.layers.data("dense", [3], dtype="float64")
        label = fluid.layers.data("label", [1], dtype="int64")
        emb = fluid.layers.embedding(ids, [7, 4], dtype="float64",
                                     param_attr=fluid.ParamAttr(name="emb"))
        bag = fluid.layers.sequence_pool(emb, "average")
        h = fluid.layers.concat([bag, dense], axis=1)
        h = fluid.layers.fc(h, 5, act="tanh", param_attr=fluid.ParamAttr(name="w1"))
        h = fluid.layers.layer_norm(h)
        h = fluid.layers.elementwise_mul(h, fluid.layers.sigmoid(h))
        logits = fluid.layers.fc(h, 3, param_attr=fluid.ParamAttr(name="w2"))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        pg = append_backward(loss)
    return main, startup, loss, pg


def test_whole_network_gradients_match_finite_differences():
    main, startup, loss, pg = _whole_net()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    ids = fluid.create_lod_tensor(rng.integers(0, 7, size=(7, 1)).astype("int64"), [[2, 3, 2]])
    feed = {"ids": ids, "dense": rng.normal(size=(3, 3)),
            "label": np.array([[0], [2], [1]], "int64")}
    params = [p.name for p, _ in pg]
    assert {"emb", "w1", "w2"} <= set(params)
    analytic = exe.run(main, feed=feed, fetch_list=[g for _, g in pg], scope=scope)
    test = main.clone(for_test=True)

    def f():
        return float(exe.run(test, feed=feed, fetch_list=[loss], scope=scope)[0])
    for name, a in zip(params, analytic):
        t = scope.find_var(name).get_tensor()
        w = t._array
        flat = w.reshape(-1)
        idx = range(flat.size) if flat.size <= 40 else rng.choice(flat.size, 40, replace=False)
        for k in idx:
            orig = flat[k]
            flat[k] = orig + 1e-6
            up = f()
            flat[k] = orig - 1e-6
            down = f()
            flat[k] = orig
            num = (up - down) / 2e-6
            np.testing.assert_allclose(np.asarray(a).reshape(-1)[k], num, rtol=1e-4, atol=1e-8,
                                       err_msg=f"d loss / d {name}[{k}]")


def test_gradients_of_targets_that_feed_each_other_are_summed():
    """d(y + z)/dx with z = 3y, y = 2x: both targets seed 1, and y's seed is added to the
    gradient flowing back from z (not overwritten by it)."""
    main, startup = _prog()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [2], append_batch_size=False)
        x.stop_gradient = False
        y = fluid.layers.scale(x, 2.0)
        z = fluid.layers.scale(y, 3.0)
        (gx,) = gradients([y, z], [x])
    (g,) = fluid.Executor().run(main, feed={"x": np.ones(2, "float32")}, fetch_list=[gx])
    np.testing.assert_allclose(g, [8.0, 8.0])  # 2 * (1 + 3)


def _two_layer_grads(checkpoints):
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        h = fluid.layers.fc(x, 4, act="tanh")
        loss = fluid.layers.mean(fluid.layers.fc(h, 1))
        pairs = append_backward(loss, checkpoints=[h] if checkpoints else None)
    exe = fluid.Executor()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.random.RandomState(0).rand(5, 3).astype("float32")
    return exe.run(main, feed={"x": xv}, fetch_list=[g for _, g in pairs], scope=scope)


def test_recompute_checkpoints_give_the_same_gradients():
    for a, b in zip(_two_layer_grads(False), _two_layer_grads(True)):
        np.testing.assert_array_equal(a, b)
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        with pytest.raises(TypeError):
            append_backward(loss, checkpoints=x)
        with pytest.raises(ValueError, match="not a variable"):
            append_backward(loss, checkpoints=["nowhere"])


@pytest.mark.parametrize("second", [0, 1])
def test_reads_of_one_tensor_array_add_their_gradients(second):
    """Two reads of an array's entries: of one entry, their gradients add (2 + 3, as Fluid's
    renamed partial arrays summed entry by entry); of different entries, each entry gets its
    own. Checked against finite differences of the loss."""
    main, startup = _prog()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        L = fluid.layers
        x0, x1 = (fluid.data(n, [2], "float64") for n in ("x0", "x1"))
        arr = L.create_array("float64")
        for x in (x0, x1):
            x.stop_gradient = False
            L.array_write(x, L.array_length(arr), array=arr)
        a = L.array_read(arr, L.fill_constant([1], "int64", 0))
        b = L.array_read(arr, L.fill_constant([1], "int64", second))
        loss = L.reduce_sum(a * 2.0 + L.square(b) * 3.0)
        grads = gradients(loss, [x0, x1])
    feed = {"x0": np.array([0.5, -1.0]), "x1": np.array([2.0, 0.25])}
    exe = fluid.Executor()
    g0, g1 = exe.run(main, feed=feed, fetch_list=grads)
    b0 = feed[f"x{second}"]
    want = [np.full(2, 2.0), np.zeros(2)]
    want[second] = want[second] + 6.0 * b0
    np.testing.assert_allclose(g0, want[0], rtol=1e-12)
    np.testing.assert_allclose(g1, want[1], rtol=1e-12)
    f0 = float(exe.run(main, feed=feed, fetch_list=[loss])[0])
    up = dict(feed, x0=feed["x0"] + np.array([1e-6, 0]))
    f1 = float(exe.run(main, feed=up, fetch_list=[loss])[0])
    np.testing.assert_allclose((f1 - f0) / 1e-6, g0[0], rtol=1e-5)
