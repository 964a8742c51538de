"""sum of a SelectedRows and dense tensors compiled: a sparse embedding's gradient plus its
L2 decay (machine_translation's training with is_sparse=True) in one native segment, with
the interpreter's bits: the rows added into zeros in order (repeated ids included), then
the decay."""
import numpy as np

import fluidity as fluid
from fluidity.codegen.lower import Lowering

from compiled_runs import train_both

L = fluid.layers


def test_a_sparse_gradient_with_l2_decay_sums_compiled_as_interpreted(caplog):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 2
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = L.data("ids", [1], dtype="int64")
        emb = L.embedding(ids, size=[6, 3], is_sparse=True,
                          param_attr=fluid.ParamAttr(name="emb"))
        loss = L.mean(L.fc(emb, 2))
        fluid.optimizer.SGD(0.5, regularization=fluid.regularizer.L2Decay(0.1)).minimize(loss)
    rows = Lowering(main, 0, keep=[loss.name]).explain()
    assert not [t for _, t, w, _ in rows if w == "python"]
    assert any(t == "sum" for _, t, _, _ in rows)
    feed = {"ids": np.array([[1], [4], [1], [0], [1]], np.int64)}     # 1 three times
    want, got = train_both(main, startup, [loss], [feed, feed], caplog)
    np.testing.assert_array_equal(got.params["emb"], want.params["emb"])
