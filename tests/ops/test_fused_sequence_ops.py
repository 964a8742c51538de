"""fusion_seqconv_eltadd_relu, fusion_seqexpand_concat_fc, fusion_seqpool_concat,
fusion_seqpool_cvm_concat, fusion_repeated_fc_relu, fusion_squared_mat_sub against numpy
references written row by row, and their bad-input errors."""
import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import FluidityError
from tests.op_test import check_output, run_op

RNG = np.random.default_rng(3)


def _lod(lens):
    return [np.concatenate([[0], np.cumsum(lens)]).astype(int).tolist()]


@pytest.mark.parametrize("length,start", [(3, -1), (2, 0), (4, -3)])
def test_fusion_seqconv_eltadd_relu(length, start):
    lens, m, n = [3, 1, 4], 2, 3
    off = _lod(lens)[0]
    x = RNG.normal(size=(sum(lens), m)).astype("float32")
    w = RNG.normal(size=(length * m, n)).astype("float32")
    b = RNG.normal(size=(1, n)).astype("float32")
    want = np.zeros((sum(lens), n))
    cols = np.zeros((sum(lens), length * m))
    for s in range(len(lens)):
        for t in range(off[s], off[s + 1]):
            window = [x[r] if off[s] <= r < off[s + 1] else np.zeros(m)
                      for r in range(t + start, t + start + length)]
            cols[t] = np.concatenate(window)
            want[t] = np.maximum(cols[t] @ w + b[0], 0)
    got = check_output("fusion_seqconv_eltadd_relu", {"X": LoDTensor(x, _lod(lens)),
                                                      "Filter": w, "Bias": b},
                       {"Out": want, "ColMat": cols},
                       {"contextLength": length, "contextStart": start})
    assert got["Out"].shape == (sum(lens), n)


def test_fusion_seqexpand_concat_fc():
    lens = [2, 3]
    x0 = RNG.normal(size=(5, 3)).astype("float32")
    x1 = RNG.normal(size=(2, 2)).astype("float32")
    x2 = RNG.normal(size=(2, 1)).astype("float32")
    w = RNG.normal(size=(6, 4)).astype("float32")
    b = RNG.normal(size=(1, 4)).astype("float32")
    rows = []
    for s, n in enumerate(lens):
        for t in range(n):
            row = np.concatenate([x0[sum(lens[:s]) + t], x1[s], x2[s]])
            rows.append(np.tanh(row @ w + b[0]))
    one_each = _lod([1, 1])
    check_output("fusion_seqexpand_concat_fc",
                 {"X": [("x0", LoDTensor(x0, _lod(lens))), ("x1", LoDTensor(x1, one_each)),
                        ("x2", x2)], "FCWeight": w, "FCBias": b},
                 {"Out": np.array(rows)}, {"fc_activation": "tanh"})


@pytest.mark.parametrize("pooltype", ["SUM", "AVERAGE", "SQRT"])
def test_fusion_seqpool_concat(pooltype):
    la, lb = [2, 1, 3], [1, 4, 2]
    a = RNG.uniform(0.1, 1, size=(6, 3)).astype("float32")
    b = RNG.uniform(0.1, 1, size=(7, 3)).astype("float32")
    div = {"SUM": lambda n: 1, "AVERAGE": lambda n: n, "SQRT": lambda n: np.sqrt(n)}[pooltype]

    def pooled(x, lens):
        off = _lod(lens)[0]
        return np.array([x[off[i]:off[i + 1]].sum(0) / div(lens[i]) for i in range(3)])
    want = np.hstack([pooled(a, la), pooled(b, lb)])
    inputs = {"X": [("a", LoDTensor(a, _lod(la))), ("b", LoDTensor(b, _lod(lb)))]}
    check_output("fusion_seqpool_concat", inputs, {"Out": want}, {"pooltype": pooltype})
    # the CTR variant: each pooled slot's show/click columns through cvm
    cvm = want.copy()
    for k in (0, 3):
        cvm[:, k] = np.log(want[:, k] + 1)
        cvm[:, k + 1] = np.log(want[:, k + 1] + 1) - cvm[:, k]
    inputs["CVM"] = np.array([[0.6, 0.4]], "float32")
    check_output("fusion_seqpool_cvm_concat", inputs, {"Out": cvm}, {"pooltype": pooltype})


def test_fusion_seqpool_concat_out_has_one_sequence_per_row():
    x = LoDTensor(np.ones((3, 2), "float32"), _lod([1, 2]))
    out = run_op("fusion_seqpool_concat", {"X": [("a", x)]}, return_lod=True)["Out"]
    assert out.recursive_sequence_lengths() == [[1, 1]]


def test_fusion_seqpool_concat_refuses_unequal_batches():
    a = LoDTensor(np.ones((3, 2), "float32"), _lod([1, 2]))
    b = LoDTensor(np.ones((3, 2), "float32"), _lod([1, 1, 1]))
    with pytest.raises(FluidityError, match=r"fusion_seqpool_concat: X\[1\] has 3 sequences"):
        run_op("fusion_seqpool_concat", {"X": [("a", a), ("b", b)]})


def test_fusion_repeated_fc_relu():
    x = RNG.normal(size=(3, 4)).astype("float32")
    ws = [RNG.normal(size=s).astype("float32") for s in [(4, 5), (5, 2), (2, 3)]]
    bs = [RNG.normal(size=(1, s[1])).astype("float32") for s in [(4, 5), (5, 2), (2, 3)]]
    h, layers = x.astype(float), []
    for w, b in zip(ws, bs):
        h = np.maximum(h @ w + b, 0)
        layers.append(h)
    check_output("fusion_repeated_fc_relu",
                 {"X": x, "W": [(f"w{i}", w) for i, w in enumerate(ws)],
                  "Bias": [(f"b{i}", b) for i, b in enumerate(bs)]},
                 {"Out": layers[-1], "ReluOut": layers[:-1]},
                 outputs={"Out": 1, "ReluOut": 2})


def test_fusion_squared_mat_sub():
    x = RNG.normal(size=(3, 4)).astype("float32")
    y = RNG.normal(size=(4, 2)).astype("float32")
    want = np.zeros((3, 2))
    for i in range(3):
        for j in range(2):
            pairs = [x[i, k] * y[k, j] for k in range(4)]
            want[i, j] = -0.5 * (sum(pairs) ** 2 - sum(p * p for p in pairs))
    check_output("fusion_squared_mat_sub", {"X": x, "Y": y}, {"Out": want}, {"scalar": -0.5})


def test_build_time_shape_errors_name_the_op():
    with pytest.raises(FluidityError, match="fusion_squared_mat_sub.*X's columns"):
        run_op("fusion_squared_mat_sub", {"X": np.ones((3, 4), "float32"),
                                          "Y": np.ones((3, 2), "float32")})
    with pytest.raises(FluidityError, match="fusion_repeated_fc_relu.*W needs at least 2"):
        run_op("fusion_repeated_fc_relu", {"X": np.ones((3, 4), "float32"),
                                           "W": [("w0", np.ones((4, 2), "float32"))],
                                           "Bias": [("b0", np.ones((1, 2), "float32"))]},
               outputs=["Out"])


def test_attributes_edited_after_build_are_refused_at_run_time():
    """A program file is not trusted: an attribute no Fluid op accepts, written past the
    build-time checks, is refused when the op is prepared, naming op and attribute."""
    import fluidity as fluid
    from tests.op_test import build_op
    x = LoDTensor(np.ones((3, 2), "float32"), _lod([1, 2]))
    cases = [("fusion_seqpool_concat", {"X": [("a", x)]}, "pooltype", "MAX!"),
             ("fusion_seqexpand_concat_fc",
              {"X": [("a", x), ("b", LoDTensor(np.ones((2, 1), "float32"), _lod([1, 1])))],
               "FCWeight": np.ones((3, 2), "float32")}, "fc_activation", "softmax"),
             ("fusion_seqconv_eltadd_relu", {"X": x, "Filter": np.ones((2, 2), "float32"),
                                             "Bias": np.ones((1, 2), "float32")},
              "contextLength", -1)]
    for op_type, inputs, attr, bad in cases:
        attrs = {"contextLength": 1} if op_type == "fusion_seqconv_eltadd_relu" else {}
        main, _, feed, outs, _ = build_op(op_type, inputs, attrs, outputs=["Out"])
        main.global_block().ops[-1]._set_attr(attr, bad)
        with pytest.raises(FluidityError, match=f"{op_type}.*{attr}"):
            fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=outs["Out"])


def test_backward_through_a_fused_op_is_an_error_as_in_fluid():
    """Fluid registers no gradient maker for its fused inference ops: a gradient that depends
    on one raises (naming it) instead of stopping there, and one that does not is built."""
    import fluidity as fluid
    from fluidity.errors import NoGradientError
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4], "float32")
        h = fluid.layers.fc(x, 4)
        block = main.global_block()
        out = block.create_var(name="sq", dtype="float32")
        block.append_op(type="fusion_squared_mat_sub", inputs={"X": h, "Y": h},
                        outputs={"Out": out, "SquaredX": block.create_var(name="s1"),
                                 "SquaredY": block.create_var(name="s2"),
                                 "SquaredXY": block.create_var(name="s3")},
                        attrs={"scalar": 1.0})
        side = fluid.layers.mean(h)
        fluid.backward.append_backward(side)          # does not go through the fused op
        with pytest.raises(NoGradientError, match="'fusion_squared_mat_sub'.*no gradient"):
            fluid.backward.append_backward(fluid.layers.mean(out))
