"""Fluid 1.x's CTR ops compiled (codegen/emit/cpu/ctr.py): a small CTR net (cvm, then
data_norm with slots, then fc) trains compiled in one segment as the interpreter trains it,
data_norm's statistics folded in place by its gradient op as the interpreter folds them."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering

from compiled_runs import train_both


def _ctr_net(shift):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        counts = fluid.layers.data("counts", [2])   # show, click
        emb = fluid.layers.data("emb", [6])
        w = fluid.layers.create_parameter(           # a learned per-column weight, so
            [6], "float32", "w", default_initializer=fluid.initializer.Constant(1.0))
        emb = fluid.layers.elementwise_mul(emb, w)   # cvm_grad has a gradient to pass
        x = fluid.layers.concat([counts, emb], axis=1)
        show_click = fluid.layers.data("cvm", [2])
        label = fluid.layers.data("label", [1])
        h = fluid.layers.continuous_value_model(x, show_click, use_cvm=True)
        h = fluid.layers.data_norm(h, slot_dim=2, enable_scale_and_shift=shift,
                                   summary_decay_rate=0.99)
        p = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square(p - label))
        learned = [q for q in main.all_parameters() if not q.name.startswith("dn.batch")]
        fluid.optimizer.SGD(0.05).minimize(loss, parameter_list=learned)
    return main, startup, loss


def _feeds(steps=6):
    r = np.random.default_rng(4)
    feeds = []
    for _ in range(steps):
        n = int(r.integers(1, 6))
        emb = r.normal(size=(n, 6)).astype("float32")
        emb[r.integers(0, n), 2] = 0.0               # a slot unused in one row
        feeds.append({"counts": r.integers(0, 9, (n, 2)).astype("float32"), "emb": emb,
                      "cvm": r.uniform(0, 3, (n, 2)).astype("float32"),
                      "label": r.normal(size=(n, 1)).astype("float32")})
    return feeds


@pytest.mark.parametrize("shift", [False, True])
def test_a_ctr_net_trains_compiled_in_one_segment_as_interpreted(shift):
    main, startup, loss = _ctr_net(shift)
    rows = Lowering(main, 0).explain()
    assert {w for _, _, w, _ in rows} == {"segment 0"}, "the whole step is one native call"
    assert {"cvm", "cvm_grad", "data_norm", "data_norm_grad"} <= {t for _, t, _, _ in rows}
    want, got = train_both(main, startup, [loss], _feeds())
    want_l, want_p = np.array([o[0] for o in want.outs]).ravel(), want.params
    got_l, got_p = np.array([o[0] for o in got.outs]).ravel(), got.params
    assert np.isfinite(want_l).all()
    np.testing.assert_allclose(got_l, want_l, rtol=1e-5, atol=1e-6)
    assert not np.allclose(want_p["dn.batch_size"], 1e4), "the statistics were folded"
    for name in want_p:                  # the statistics too
        np.testing.assert_allclose(got_p[name], want_p[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
