"""fused_embedding_seq_pool and the pass that rewrites lookup_table -> sequence_pool(SUM)."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError
from fluidity.transpiler.fuse import fuse_embedding_seq_pool, fuse_embedding_seq_pool_concat, fuse_fc
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(0)


def _ids(lens, vocab=9):
    t = LoDTensor(rng.integers(0, vocab, size=(sum(lens), 1)).astype(np.int64))
    t.set_recursive_sequence_lengths([lens])
    return t


def test_op_forward_grad_and_padding():
    w = rng.normal(size=(9, 3)).astype(np.float32)
    ids = _ids([2, 0, 3])
    a = np.asarray(ids).reshape(-1)
    want = np.stack([w[a[:2]].sum(0), np.zeros(3), w[a[2:]].sum(0)]).astype(np.float32)
    check_output("fused_embedding_seq_pool", {"W": w, "Ids": ids}, {"Out": want}, rtol=1e-5)
    check_grad("fused_embedding_seq_pool", {"W": w, "Ids": ids}, ["W"])
    pad = int(a[0])
    want_pad = np.stack([w[[i for i in a[:2] if i != pad]].sum(0) if (a[:2] != pad).any()
                         else np.zeros(3), np.zeros(3),
                         w[[i for i in a[2:] if i != pad]].sum(0) if (a[2:] != pad).any()
                         else np.zeros(3)]).astype(np.float32)
    check_output("fused_embedding_seq_pool", {"W": w, "Ids": ids}, {"Out": want_pad},
                 {"padding_idx": pad}, rtol=1e-5, atol=1e-6)
    with pytest.raises(ExecutionError, match="Ids has no LoD"):
        run_op("fused_embedding_seq_pool", {"W": w, "Ids": np.zeros((2, 1), np.int64)})


def _ctr(fuse, sparse=True):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 4
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        slots = [fluid.layers.data(f"s{i}", [1], dtype="int64", lod_level=1) for i in range(3)]
        y = fluid.layers.data("y", [1])
        bags = [fluid.layers.sequence_pool(fluid.layers.embedding(
            s, [20, 4], is_sparse=sparse, param_attr=fluid.ParamAttr(name="emb")), "sum")
            for s in slots]
        pred = fluid.layers.fc(fluid.layers.concat(bags, axis=1), 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        n = fuse_embedding_seq_pool(main) if fuse else 0
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss, n


@pytest.mark.parametrize("sparse", [True, False])
def test_pass_fuses_pairs_and_training_is_unchanged(sparse):
    plain, s1, l1, _ = _ctr(False, sparse)
    fused, s2, l2, n = _ctr(True, sparse)
    assert n == 3
    types = [op.type for op in fused.global_block().ops]
    assert "lookup_table" not in types and "sequence_pool" not in types
    assert types.count("fused_embedding_seq_pool") == 3
    assert types.count("fused_embedding_seq_pool_grad") == 3
    feeds = [{**{f"s{i}": _ids([2, 1, 3], 20) for i in range(3)},
              "y": rng.normal(size=(3, 1)).astype(np.float32)} for _ in range(5)]
    exe = fluid.Executor()
    results = []
    for main, startup, loss in ((plain, s1, l1), (fused, s2, l2)):
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        losses = [exe.run(main, feed=f, fetch_list=[loss], scope=scope)[0] for f in feeds]
        results.append((losses, np.asarray(scope.find_var("emb").get_tensor()).copy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6, atol=1e-7)


def test_pass_leaves_pairs_it_cannot_fuse():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        s = fluid.layers.data("s", [1], dtype="int64", lod_level=1)
        e = fluid.layers.embedding(s, [10, 2])
        avg = fluid.layers.sequence_pool(e, "average")       # not SUM
        e2 = fluid.layers.embedding(s, [10, 2])
        total = fluid.layers.sequence_pool(e2, "sum")
        also = fluid.layers.scale(e2, 2.0)                   # e2 has a second reader
    assert fuse_embedding_seq_pool(main) == 0
    assert fuse_embedding_seq_pool(main, skip_vars=[e.name]) == 0


# --- fuse_embedding_seq_pool_concat ----------------------------------------------------------
def _ctr_concat(fuse, order=("e0", "e1", "e2"), tables=("emb", "emb", "emb"), dense=False):
    """3 slots' pooled embeddings (and a dense input) concatenated in `order`, one fc."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 4
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        slots = [fluid.layers.data(f"s{i}", [1], dtype="int64", lod_level=1) for i in range(3)]
        y = fluid.layers.data("y", [1])
        parts = {f"e{i}": fluid.layers.sequence_pool(fluid.layers.embedding(
            s, [20, 4], is_sparse=True, param_attr=fluid.ParamAttr(name=t)), "sum")
            for i, (s, t) in enumerate(zip(slots, tables))}
        parts["d"] = fluid.layers.data("d", [2])
        pred = fluid.layers.fc(fluid.layers.concat([parts[k] for k in order], axis=1), 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fuse_embedding_seq_pool(main)
        n = fuse_embedding_seq_pool_concat(main) if fuse else 0
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss, n


def _train(main, startup, loss, feeds, params):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = [exe.run(main, feed=f, fetch_list=[loss], scope=scope)[0] for f in feeds]
    return losses, [np.asarray(scope.find_var(p).get_tensor()).copy() for p in params]


def _feeds(n=5):
    return [{**{f"s{i}": _ids([2, 1, 3], 20) for i in range(3)},
             "d": rng.normal(size=(3, 2)).astype(np.float32),
             "y": rng.normal(size=(3, 1)).astype(np.float32)} for _ in range(n)]


@pytest.mark.parametrize("order", [("e0", "e1", "e2"), ("e0", "d", "e1", "e2")])
def test_concat_pass_fuses_runs_and_training_is_unchanged(order):
    plain = _ctr_concat(False, order)
    fused = _ctr_concat(True, order)
    types = [op.type for op in fused[0].global_block().ops]
    assert fused[3] == 1
    # e0 before the dense input stays a run of one: left as it is
    assert types.count("fused_embedding_seq_pool") == (0 if "d" not in order else 1)
    assert types.count("fused_embedding_seq_pool_concat") == 1
    assert types.count("fused_embedding_seq_pool_concat_grad") == 1
    if "d" not in order:
        assert "sum" not in types  # one sparse gradient for the table, nothing to add up
    # the whole of X fused: the concat is gone; a dense input in between: e0 stays apart
    assert types.count("concat") == (0 if "d" not in order else 1)
    feeds = _feeds()
    a, b = _train(*plain[:3], feeds, ["emb"]), _train(*fused[:3], feeds, ["emb"])
    np.testing.assert_allclose(a[0], b[0], rtol=1e-5)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-5, atol=1e-7)


def test_concat_pass_keeps_different_tables_apart():
    main, *_ , n = _ctr_concat(True, tables=("emb", "emb", "other"))
    assert n == 1
    ops = main.global_block().ops
    (op,) = [o for o in ops if o.type == "fused_embedding_seq_pool_concat"]
    assert op.input("W") == ["emb"] and len(op.input("Ids")) == 2
    assert [o.type for o in ops].count("fused_embedding_seq_pool") == 1
    main, *_ , n = _ctr_concat(True, tables=("emb", "other", "emb"))
    assert n == 0  # no two neighbours share a table


# --- fuse_fc -----------------------------------------------------------------------------------
def _mlp(fuse, acts=("relu", "relu", None)):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 9
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [6])
        y = fluid.layers.data("y", [1])
        h = x
        for width, act in zip((8, 8, 1), acts):
            h = fluid.layers.fc(h, width, act=act)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(h, y))
        n = fuse_fc(main) if fuse else 0
        fluid.optimizer.SGD(0.05).minimize(loss)
    return main, startup, loss, n


def test_fuse_fc_rewrites_layers_and_training_is_unchanged():
    plain, fused = _mlp(False), _mlp(True)
    assert fused[3] == 3
    types = [op.type for op in fused[0].global_block().ops]
    assert types.count("fc") == 3 and types.count("fc_grad") == 3
    assert not {"mul", "elementwise_add", "relu", "mul_grad", "relu_grad"} & set(types)
    acts = [op.attr("activation_type") for op in fused[0].global_block().ops
            if op.type == "fc"]
    assert acts == ["relu", "relu", ""]
    r = np.random.default_rng(1)
    feeds = [{"x": r.normal(size=(4, 6)).astype(np.float32),
              "y": r.normal(size=(4, 1)).astype(np.float32)} for _ in range(6)]
    params = [p.name for p in plain[0].global_block().all_parameters()]
    a, b = _train(*plain[:3], feeds, params), _train(*fused[:3], feeds, params)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-5)
    for pa, pb in zip(a[1], b[1]):
        np.testing.assert_allclose(pa, pb, rtol=1e-5, atol=1e-7)


def test_fuse_fc_leaves_what_it_cannot_fuse():
    main, *_, n = _mlp(True, acts=("tanh", "relu", None))
    types = [op.type for op in main.global_block().ops]
    assert n == 3 and "tanh" in types  # mul + bias fused, tanh stays its own op
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        h = fluid.layers.fc(fluid.layers.data("x", [6]), 8, act="relu")
        fluid.layers.scale(h, 2.0)
    pre_act = [op for op in main.global_block().ops if op.type == "elementwise_add"][0]
    assert fuse_fc(main, skip_vars=pre_act.output("Out")) == 1
    types = [op.type for op in main.global_block().ops]
    assert types == ["fc", "relu", "scale"]  # the kept pre-activation: relu stays apart
    assert [op.attr("activation_type") for op in main.global_block().ops
            if op.type == "fc"] == [""]
