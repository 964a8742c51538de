"""unbind and inplace_abn: forward against numpy, numeric gradients (inplace_abn's recovers
the batch norm's input from its output), the layers, bad input."""
import numpy as np
import pytest

import fluidity as fluid
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(18)


def test_unbind_forward_and_gradient():
    x = rng.normal(size=(2, 3, 4))
    got = run_op("unbind", {"X": x}, {"axis": 1}, outputs={"Out": 3})
    for i in range(3):
        np.testing.assert_array_equal(got["Out"][i], x[:, i])
    check_grad("unbind", {"X": x}, ["X"], {"axis": -1}, outputs={"Out": 4})


def bn_act_ref(x, scale, bias, eps, act, alpha):
    m = x.mean(axis=(0, 2, 3), keepdims=True)
    v = x.var(axis=(0, 2, 3), keepdims=True)
    y = (x - m) / np.sqrt(v + eps) * scale.reshape(1, -1, 1, 1) + bias.reshape(1, -1, 1, 1)
    if act == "leaky_relu":
        return np.where(y >= 0, y, alpha * y)
    if act == "elu":
        return np.where(y >= 0, y, alpha * (np.exp(y) - 1))
    return y


@pytest.mark.parametrize("act,alpha", [("identity", 0.1), ("leaky_relu", 0.2), ("elu", 0.7)])
def test_inplace_abn_forward_and_gradient(act, alpha):
    x = rng.normal(size=(3, 2, 2, 3))
    ins = {"X": x, "Scale": rng.uniform(0.5, 1.5, 2), "Bias": rng.normal(size=2),
           "Mean": np.zeros(2), "Variance": np.ones(2)}
    attrs = {"activation": act, "alpha": alpha, "epsilon": 1e-5}
    outs = ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"]
    check_output("inplace_abn", ins, {"Y": bn_act_ref(x, ins["Scale"], ins["Bias"], 1e-5, act,
                                                      alpha)}, attrs, outputs=outs, atol=1e-9)
    check_grad("inplace_abn", ins, ["X", "Scale", "Bias"], attrs, outputs=outs,
               output_slots=["Y"])


def test_layers_build_and_run():
    x = rng.normal(size=(4, 3, 2, 2)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.layers.data("x", [3, 2, 2])
        parts = fluid.layers.unbind(v, axis=1)
        y = fluid.layers.inplace_abn(v, act="leaky_relu", act_alpha=0.1)
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(0.1).minimize(loss)
        with pytest.raises(ValueError, match="inplace_abn only support"):
            fluid.layers.inplace_abn(v, act="relu")
        with pytest.raises(TypeError, match="axis"):
            fluid.layers.unbind(v, axis=1.5)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got = exe.run(main, feed={"x": x}, fetch_list=parts + [y])
    assert len(parts) == 3 and got[0].shape == (4, 2, 2)
    np.testing.assert_array_equal(got[2], x[:, 2])
    np.testing.assert_allclose(got[3], bn_act_ref(x.astype(np.float64), np.ones(3), np.zeros(3),
                                                  1e-5, "leaky_relu", 0.1), rtol=1e-4, atol=1e-5)
