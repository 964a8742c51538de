"""tdm_child and tdm_sampler (fluidity/ops/tdm.py) and their contrib layers, on a small tree
worked out by hand:

            1            2           layer 0
          3   4        5             layer 1
         6 7  8                      layer 2 (leaves: items 6, 7, 8; node 5 has none)
"""
import numpy as np
import pytest

import fluidity as fluid
from op_test import run_op
from fluidity.errors import ExecutionError

# item_id, layer_id, parent_id, child0, child1
TREE = np.array([[0, 0, 0, 0, 0],      # node 0: padding
                 [0, 0, 0, 3, 4], [0, 0, 0, 5, 0], [0, 1, 1, 6, 7], [0, 1, 1, 8, 0],
                 [0, 1, 2, 0, 0], [1, 2, 3, 0, 0], [2, 2, 3, 0, 0], [3, 2, 4, 0, 0]], np.int64)
TRAVEL = np.array([[1, 3, 6], [1, 3, 7], [1, 4, 8]], np.int32)     # leaves' paths
LAYER = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int32).reshape(-1, 1)
LOD = [0, 2, 5, 8]


def test_tdm_child():
    x = np.array([[1], [3], [5], [0], [4]], np.int32)
    got = run_op("tdm_child", {"X": x, "TreeInfo": TREE}, {"child_nums": 2})
    np.testing.assert_array_equal(got["Child"][:, 0], [[3, 4], [6, 7], [0, 0], [0, 0],
                                                       [8, 0]])
    np.testing.assert_array_equal(got["LeafMask"][:, 0], [[0, 0], [1, 1], [0, 0], [0, 0],
                                                          [1, 0]])
    assert got["Child"].dtype == np.int32
    with pytest.raises(ExecutionError, match="input node id 9 is out of range"):
        run_op("tdm_child", {"X": np.array([[9]], np.int32), "TreeInfo": TREE},
               {"child_nums": 2})


@pytest.mark.parametrize("positive", [True, False])
def test_tdm_sampler(positive):
    x = np.array([[0], [2], [1]], np.int64)
    negs = [1, 2, 2]
    attrs = {"neg_samples_num_list": negs, "layer_offset_lod": LOD, "seed": 7,
             "output_positive": positive, "dtype": int(fluid.core.VarDesc.VarType.INT64)}
    got = run_op("tdm_sampler", {"X": x, "Travel": TRAVEL, "Layer": LAYER}, attrs)
    out, labels, mask = got["Out"], got["Labels"], got["Mask"]
    assert out.dtype == np.int64 and out.shape == (3, sum(negs) + 3 * positive)
    for i, leaf in enumerate(x[:, 0]):
        at = 0
        for l, n in enumerate(negs):
            layer_nodes = set(LAYER[LOD[l]:LOD[l + 1], 0].tolist())
            if positive:
                assert out[i, at] == TRAVEL[leaf, l] and labels[i, at] == 1
                at += 1
            drawn = out[i, at:at + n].tolist()
            assert len(set(drawn)) == n and set(drawn) <= layer_nodes - {TRAVEL[leaf, l]}
            assert not labels[i, at:at + n].any() and mask[i, at:at + n].all()
            at += n
    again = run_op("tdm_sampler", {"X": x, "Travel": TRAVEL, "Layer": LAYER}, attrs)
    np.testing.assert_array_equal(again["Out"], out)      # one seed, one draw


def test_tdm_sampler_too_many_negatives():
    with pytest.raises(ExecutionError, match="3 negatives asked at layer 1"):
        run_op("tdm_sampler", {"X": np.array([[0]], np.int64), "Travel": TRAVEL,
                               "Layer": LAYER},
               {"neg_samples_num_list": [1, 3, 1], "layer_offset_lod": LOD})


def test_contrib_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        node = fluid.data("node", [None, 1], "int32")
        leaf = fluid.data("leaf", [None, 1], "int32")
        child, mask = fluid.contrib.layers.tdm_child(
            node, node_nums=9, child_nums=2, param_attr=fluid.ParamAttr(
                initializer=fluid.initializer.NumpyArrayInitializer(TREE.astype(np.int32))))
        samples, labels, masks = fluid.contrib.layers.tdm_sampler(
            leaf, [1, 1, 2], [2, 3, 3], 3,
            tree_travel_attr=fluid.ParamAttr(
                initializer=fluid.initializer.NumpyArrayInitializer(TRAVEL)),
            tree_layer_attr=fluid.ParamAttr(
                initializer=fluid.initializer.NumpyArrayInitializer(LAYER.reshape(-1))),
            seed=3)
        with pytest.raises(ValueError, match="must be less than the number of nodes"):
            fluid.contrib.layers.tdm_sampler(leaf, [2, 1, 1], [2, 3, 3], 3)
    assert len(samples) == 3 and list(samples[2].shape) == [-1, 3, 1]
    exe = fluid.Executor()
    exe.run(startup)
    c, s0, s2 = exe.run(main, feed={"node": np.array([[3]], np.int32),
                                    "leaf": np.array([[2]], np.int32)},
                        fetch_list=[child, samples[0], samples[2]])
    np.testing.assert_array_equal(c.reshape(-1), [6, 7])
    assert s0[0, 0, 0] == 1 and s2[0, 0, 0] == 8
