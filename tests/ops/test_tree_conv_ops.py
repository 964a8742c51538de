"""tree_conv (fluidity/ops/tree_conv.py): forward against a recursive numpy reference written
from the definition, gradients against finite differences (output_size * num_filters > 1,
where Fluid's own NodesVector gradient is wrong), errors, and the contrib / dygraph layers."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ExecutionError
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(8)

# two trees over up to 7 nodes, padded with 0 edges; the second has a 3-level chain
EDGES = np.array([[[1, 2], [1, 3], [1, 4], [2, 5], [2, 6], [4, 7], [0, 0]],
                  [[1, 2], [2, 3], [3, 4], [1, 5], [0, 0], [0, 0], [0, 0]]], np.int32)


def tree_conv_ref(x, edges, w, max_depth):
    """Each node's patch by recursion: the node (eta_t = 1) and its descendants less than
    max_depth levels down, child i of c weighing Filter's left/right/top slices by
    eta_t = (D - d) / D, eta_l = (1 - eta_t) * ((i - 1) / (c - 1) or 1/2), eta_r =
    (1 - eta_t) * (1 - eta_l)."""
    n_b, n, _ = x.shape
    out = np.zeros((n_b, n) + w.shape[2:])
    for b in range(n_b):
        kids = {}
        real = [(u, v) for u, v in edges[b] if u and v]
        for u, v in real:
            kids.setdefault(u, []).append(v)

        def members(u, d):
            yield u, 1, 1, d
            if d + 1 < max_depth:
                for i, v in enumerate(kids.get(u, []), 1):
                    yield v, i, len(kids[u]), d + 1
                    for m in members(v, d + 1):
                        if m[0] != v:
                            yield m

        for u in range(1, len(real) + 2):
            for v, i, c, d in members(u, 0):
                eta_t = (max_depth - d) / max_depth
                eta_l = (1 - eta_t) * (0.5 if c == 1 else (i - 1) / (c - 1))
                eta_r = (1 - eta_t) * (1 - eta_l)
                for k, eta in enumerate((eta_l, eta_r, eta_t)):
                    out[b, u - 1] += eta * np.tensordot(x[b, v - 1], w[:, k], axes=1)
    return out


@pytest.mark.parametrize("max_depth", [2, 3])
def test_tree_conv_forward(max_depth):
    x, w = rng.normal(size=(2, 8, 3)), rng.normal(size=(3, 3, 2, 2))
    check_output("tree_conv", {"NodesVector": x, "EdgeSet": EDGES, "Filter": w},
                 {"Out": tree_conv_ref(x, EDGES, w, max_depth)}, {"max_depth": max_depth},
                 atol=1e-12, rtol=1e-12)


def test_tree_conv_float32_and_rows_past_the_tree_are_zero():
    x, w = rng.normal(size=(2, 9, 2)).astype(np.float32), rng.normal(size=(2, 3, 1, 3))
    out = run_op("tree_conv", {"NodesVector": x, "EdgeSet": EDGES,
                               "Filter": w.astype(np.float32)})["Out"]
    assert out.dtype == np.float32 and out.shape == (2, 9, 1, 3)
    np.testing.assert_allclose(out, tree_conv_ref(x.astype(float), EDGES, w, 2), rtol=1e-5,
                               atol=1e-5)
    assert not out[0, 7:].any() and not out[1, 5:].any()


@pytest.mark.parametrize("max_depth", [2, 3])
def test_tree_conv_gradients(max_depth):
    x, w = rng.normal(size=(2, 7, 2)), rng.normal(size=(2, 3, 2, 2))
    check_grad("tree_conv", {"NodesVector": x, "EdgeSet": EDGES, "Filter": w},
               ["NodesVector", "Filter"], {"max_depth": max_depth})


@pytest.mark.parametrize("edges, nodes, attrs, match", [
    ([[[1, 2], [2, 9]]], 4, {}, "outside 1..3"),
    ([[[1, 2], [2, 3], [3, 4]]], 3, {}, "tree of 4 nodes"),
    ([[[1, 2]]], 3, {"max_depth": 1}, "greater than 1"),
    (np.array([[[1.0, 2.0]]], np.float32), 3, {}, "integer node numbers"),
])
def test_tree_conv_errors(edges, nodes, attrs, match):
    ins = {"NodesVector": rng.normal(size=(1, nodes, 2)),
           "EdgeSet": np.asarray(edges) if isinstance(edges, np.ndarray)
           else np.array(edges, np.int32), "Filter": rng.normal(size=(2, 3, 1, 1))}
    with pytest.raises(ExecutionError, match=match):
        run_op("tree_conv", ins, attrs)


def test_tree_conv_layers_build_and_run():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [7, 4], dtype="float32")
        e = fluid.layers.data("e", [7, 2], dtype="int32")
        out = fluid.contrib.layers.tree_conv(x, e, output_size=3, num_filters=2, max_depth=2)
        dy = fluid.dygraph.TreeConv(feature_size=4, output_size=3, num_filters=2, act=None,
                                    bias_attr=False)(x, e)
        with pytest.raises(TypeError):
            fluid.contrib.layers.tree_conv(np.ones((7, 4), np.float32), e, 3)
    assert list(out.shape) == [-1, 7, 3, 2] and list(dy.shape) == [-1, 7, 3, 2]
    ops = [op.type for op in main.global_block().ops]
    assert ops == ["tree_conv", "elementwise_add", "tanh", "tree_conv"]
    params = {p.name: list(p.shape) for p in main.global_block().all_parameters()}
    assert sorted(params.values()) == [[4, 3, 3, 2], [4, 3, 3, 2], [7, 3, 2]]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = rng.normal(size=(2, 7, 4)).astype(np.float32)
    o, d = exe.run(main, feed={"x": xv, "e": EDGES}, fetch_list=[out, dy], scope=scope)
    assert o.shape == d.shape == (2, 7, 3, 2) and np.abs(o).max() <= 1
