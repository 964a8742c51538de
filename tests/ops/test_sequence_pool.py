"""sequence_pool (every pool type, empty sequences, pad_value) forward against numpy loops and
its numeric gradients."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError
from op_test import check_grad, run_op

rng = np.random.default_rng(0)
LENS = [2, 3, 1, 4]


def _ref(x, lens, ptype, pad=0.0):
    out, s = [], 0
    for n in lens:
        seq = x[s:s + n]
        s += n
        if n == 0:
            out.append(np.full(x.shape[1:], pad))
            continue
        out.append({"SUM": seq.sum(0), "AVERAGE": seq.mean(0), "SQRT": seq.sum(0) / np.sqrt(n),
                    "MAX": seq.max(0), "MIN": seq.min(0), "FIRST": seq[0],
                    "LAST": seq[-1]}[ptype])
    return np.array(out, dtype=x.dtype)


@pytest.mark.parametrize("ptype", ["SUM", "AVERAGE", "SQRT", "MAX", "MIN", "FIRST", "LAST"])
@pytest.mark.parametrize("lens", [LENS, [3, 0, 2]])
def test_sequence_pool(ptype, lens):
    x = rng.normal(size=(sum(lens), 3)).astype(np.float32)
    t = LoDTensor(x)
    t.set_recursive_sequence_lengths([lens])
    got = run_op("sequence_pool", {"X": t}, {"pooltype": ptype, "pad_value": -1.0},
                 outputs=["Out", "MaxIndex"])["Out"]
    np.testing.assert_allclose(got, _ref(x, lens, ptype, -1.0), rtol=1e-5, atol=1e-6)
    check_grad("sequence_pool", {"X": t}, ["X"], {"pooltype": ptype},
               outputs=["Out", "MaxIndex"], output_slots=["Out"])


@pytest.mark.parametrize("ptype", ["MAX", "MIN"])
def test_all_empty_sequences_pool_to_pad_and_index_past_x(ptype):
    t = LoDTensor(np.zeros((0, 3), np.float32))
    t.set_recursive_sequence_lengths([[0, 0]])
    got = run_op("sequence_pool", {"X": t}, {"pooltype": ptype, "pad_value": 2.0},
                 outputs=["Out", "MaxIndex"])
    np.testing.assert_array_equal(got["Out"], np.full((2, 3), 2.0, np.float32))
    np.testing.assert_array_equal(got["MaxIndex"], np.zeros((2, 3), np.int32))


def test_sequence_pool_needs_lod():
    with pytest.raises(ExecutionError, match="sequence_pool: input X has no LoD"):
        run_op("sequence_pool", {"X": np.ones((3, 2), np.float32)}, {"pooltype": "SUM"},
               outputs=["Out", "MaxIndex"])


def test_embedding_bag_model_end_to_end():
    """ids (LoD) -> embedding -> sequence_pool(sum) -> fc -> loss trains, and the pooled
    embedding equals a numpy bag of rows."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3   # initial weights fixed: no flaky threshold
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1])
        emb = fluid.layers.embedding(ids, [20, 4], is_sparse=True,
                                     param_attr=fluid.ParamAttr(name="emb"))
        bag = fluid.layers.sequence_pool(emb, "sum")
        pred = fluid.layers.fc(bag, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, label))
        fluid.optimizer.SGD(0.05).minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    idv = fluid.create_lod_tensor(np.array([[1], [2], [2], [5], [7], [1]], np.int64),
                                  [[3, 1, 2]])
    y = np.array([[1.0], [-1.0], [0.5]], np.float32)
    table = np.asarray(scope.find_var("emb").get_tensor()).copy()
    (b,) = exe.run(main, feed={"ids": idv, "label": y}, fetch_list=[bag], scope=scope)
    np.testing.assert_allclose(b, [table[[1, 2, 2]].sum(0), table[5], table[[7, 1]].sum(0)],
                               rtol=1e-5)
    losses = [float(exe.run(main, feed={"ids": idv, "label": y}, fetch_list=[loss],
                            scope=scope)[0]) for _ in range(30)]
    assert losses[-1] < 0.1 * losses[0]
