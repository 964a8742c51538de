"""The compiled conv family at the machine's limit (issue 29): pooling's direct loops over
whole windows, the depthwise direct kernel, the strided/padded im2col, and the
conv_epilogue fusion (bias add, frozen batch_norm, relu computed in the conv's output
pass). Each compiled vs the numpy kernels, forward and gradients.

Tolerances come from the arithmetic: where the compiled code sums a window's products in
another order than the kernel's gemm, each result differs by at most about K float32
roundings of the largest partial sum, K the terms summed and that sum at most
K * max|x| * max|w|."""
import numpy as np
import pytest
from op_test import COMPILED_ATOL, COMPILED_RTOL, build_op, compiled_ops

import fluidity as fluid
from fluidity.backward import gradients

rng = np.random.default_rng(29)
EPS = np.finfo(np.float32).eps


def f32(*shape):
    return rng.uniform(-2.0, 2.0, shape).astype(np.float32)


def _run(main, feed, fetch, compiled):
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
    return [np.asarray(v) for v in exe.run(prog, feed=feed, fetch_list=fetch, scope=scope)]


def _with_grads(op_type, inputs, attrs, wrt, out_slot, outputs=None):
    """The op (declaring `outputs`, default `out_slot`), a weighted mean of its `out_slot`
    as the loss, and the gradients of `wrt`: (main, feed, [output, gradients...])."""
    main, startup, feed, outs, ins = build_op(op_type, inputs, attrs, outputs or [out_slot])
    out = outs[out_slot][0]
    with fluid.program_guard(main, startup):
        block = main.global_block()
        shape = _run(main, feed, [out], False)[0].shape
        wv = block.create_var(name="loss_w", shape=shape, dtype="float32")
        feed["loss_w"] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        prod = block.create_var(name="loss_p", dtype="float32")
        block.append_op("elementwise_mul", {"X": out, "Y": wv}, {"Out": prod})
        loss = block.create_var(name="loss", dtype="float32", shape=[1])
        block.append_op("mean", {"X": prod}, {"Out": loss})
        grads = gradients([loss], [ins[s][0] for s in wrt])
    return main, feed, [out] + grads


def _check(op_type, inputs, attrs, wrt, out_slot, atol):
    main, feed, fetch = _with_grads(op_type, inputs, attrs, wrt, out_slot)
    done = compiled_ops(main)
    assert op_type in done and op_type + "_grad" in done, done
    want, got = _run(main, feed, fetch, False), _run(main, feed, fetch, True)
    for v, g, w, tol in zip(fetch, got, want, atol):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0, atol=tol, err_msg=v.name)


# --- pooling over whole windows -----------------------------------------------------------
POOLS = {
    "max 2x2 stride 2": ("max", (2, 3, 8, 6), [2, 2], [2, 2], {}),
    "max 3x3 stride 2, odd plane": ("max", (1, 2, 9, 7), [3, 3], [2, 2], {}),
    # 9 x 10 windows: a row is 8 windows in vectors and 2 past them; the last row and column
    # of the plane in no window
    "max 2x2 stride 2, 19 x 21 plane": ("max", (2, 2, 19, 21), [2, 2], [2, 2], {}),
    "max 3x2 stride 1 (overlapping)": ("max", (2, 2, 5, 6), [3, 2], [1, 1], {}),
    "avg 3x3 stride 1": ("avg", (2, 2, 6, 5), [3, 3], [1, 1], {}),
    "avg 2x2 stride 2, not exclusive": ("avg", (1, 3, 4, 6), [2, 2], [2, 2],
                                        {"exclusive": False}),
    "avg global": ("avg", (2, 3, 5, 4), [1, 1], [1, 1], {"global_pooling": True}),
    "avg wide row (two row chunks)": ("avg", (1, 1, 2, 140), [1, 2], [1, 1], {}),
    # padded: the interior's windows whole (direct loops), the border's from tables
    "max 3x3 stride 2 padding 1": ("max", (2, 2, 9, 8), [3, 3], [2, 2], {"paddings": [1, 1]}),
    "avg 3x3 stride 1 padding 1, exclusive": ("avg", (1, 2, 6, 7), [3, 3], [1, 1],
                                              {"paddings": [1, 1]}),
    "avg 3x2 stride 2 padding (1, 0), not exclusive, ceil": (
        "avg", (2, 1, 7, 9), [3, 2], [2, 2], {"paddings": [1, 0], "exclusive": False,
                                              "ceil_mode": True}),
}


@pytest.mark.parametrize("case", sorted(POOLS))
def test_pool_over_whole_windows_matches_the_kernel(case):
    """max makes the same comparisons (NaN wins; the gradient to the first maximum):
    exact. avg sums each window in another order than the kernel's matmuls."""
    ptype, shape, ksize, strides, extra = POOLS[case]
    x = f32(*shape)
    if ptype == "max":                  # NaN wins the windows it is in: one at a corner
        x[0, 0, 0, 0] = np.nan          # (after padding, when padded: the gradient goes to
        x[0, -1, 3, 3] = np.nan         # the next maximum), one inside; ties: the first
        x[-1, -1, 1, :2] = x[-1, -1, 0, :2]                  # maximum takes the gradient
    attrs = {"pooling_type": ptype, "ksize": ksize, "strides": strides, "paddings": [0, 0],
             **extra}
    main, feed, fetch = _with_grads("pool2d", {"X": x}, attrs, ["X"], "Out")
    assert {"pool2d", "pool2d_grad"} <= compiled_ops(main)
    want, got = _run(main, feed, fetch, False), _run(main, feed, fetch, True)
    if ptype == "max":
        for v, g, w in zip(fetch, got, want):
            np.testing.assert_array_equal(g, w, err_msg=v.name)
    else:                    # sums of at most k terms of at most 2 (forward), positive (grad)
        k = x.shape[2] * x.shape[3] if extra.get("global_pooling") else ksize[0] * ksize[1]
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=2 * k * EPS * 2)
        np.testing.assert_allclose(got[1], want[1], rtol=2 * k * EPS)


def test_max_pool_2x2_gradient_goes_to_the_first_of_tied_maxima():
    """Values from {-1, 0, 1}: most windows hold ties, each in another pattern of taps."""
    x = rng.integers(-1, 2, (2, 3, 6, 20)).astype(np.float32)
    attrs = {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]}
    main, feed, fetch = _with_grads("pool2d", {"X": x}, attrs, ["X"], "Out")
    assert "pool2d_grad" in compiled_ops(main)
    want, got = _run(main, feed, fetch, False), _run(main, feed, fetch, True)
    for v, g, w in zip(fetch, got, want):
        np.testing.assert_array_equal(g, w, err_msg=v.name)


# --- convolutions ---------------------------------------------------------------------------
CONVS = {
    "stride 2, padding 1": ((2, 3, 7, 8), (4, 3, 3, 3), {"strides": [2, 2],
                                                         "paddings": [1, 1]}),
    "stride (1, 3), padding (0, 2), dilation (2, 1)": (
        (1, 2, 9, 10), (3, 2, 2, 3), {"strides": [1, 3], "paddings": [0, 2],
                                      "dilations": [2, 1]}),
    "groups 2, padding 2 past the kernel": ((2, 4, 5, 5), (6, 2, 3, 3),
                                             {"paddings": [2, 2], "groups": 2}),
    # one sample's columns (16*9 x 24*24 floats) fill a chunk: the batch runs in 3 chunks
    "a batch in chunks of one sample, groups 2": ((3, 16, 24, 24), (4, 8, 3, 3),
                                                  {"paddings": [1, 1], "groups": 2}),
    # 36 x 576 floats of columns a sample: chunks of 3 samples, the second one short
    "a batch of 4 in chunks of 3": ((4, 4, 24, 24), (3, 4, 3, 3), {"paddings": [1, 1]}),
    # as wide as the input (col2im_flat), the top padding past the kernel: the first rows
    # of output read only padding for some taps
    "padding (top 3, bottom 0, left 2, right 0), output as wide as the input": (
        (2, 2, 5, 6), (3, 2, 3, 3), {"paddings": [3, 0, 2, 0]}),
    "batch of one, stride 2, padding 1": ((1, 3, 7, 8), (4, 3, 3, 3), {"strides": [2, 2],
                                                                     "paddings": [1, 1]}),
}
DEPTHWISE = {            # dilation 1, column stride 1 or 2: the register-tiled form
    "multiplier 1, stride 2, padding 1": ((2, 3, 7, 6), (3, 1, 3, 3),
                                          {"strides": [2, 2], "paddings": [1, 1]}),
    "multiplier 1, stride 1, padding 1, 19 columns (8 + 8 + 3)": (
        (2, 2, 5, 19), (2, 1, 3, 3), {"paddings": [1, 1]}),
    "multiplier 3, stride (3, 2), padding (2, 0), 3x4 kernel, batch of one": (
        (1, 2, 9, 13), (6, 1, 3, 4), {"strides": [3, 2], "paddings": [2, 0]}),
    "stride 2 over an odd width, padding past the kernel": (
        (2, 2, 6, 9), (2, 1, 2, 2), {"strides": [2, 2], "paddings": [3, 3]}),
    # column stride 3: the row-by-row kernel
    "column stride 3": ((2, 2, 7, 11), (2, 1, 3, 3), {"strides": [1, 3],
                                                       "paddings": [1, 1]}),
    # dilation 2: the row-by-row kernel
    "multiplier 2, dilation 2, stride (1, 2)": ((1, 2, 8, 9), (4, 1, 3, 2),
                                                {"strides": [1, 2], "paddings": [2, 1],
                                                 "dilations": [2, 2]}),
}


# the direct kernel (runtime/conv.h direct_conv): one group, stride 1 or 2, dilation 1,
# C*kh*kw <= DIRECT_MAX_K; the others above and below fall back to im2col
DIRECT = {
    "3 channels, stride 2, padding 1 (MobileNet's first conv), odd plane, batch of one": (
        (1, 3, 9, 11), (10, 3, 3, 3), {"strides": [2, 2], "paddings": [1, 1]}),
    "stride (2, 1), asymmetric padding, 2x4 kernel": (
        (2, 2, 7, 6), (8, 2, 2, 4), {"strides": [2, 1], "paddings": [1, 0, 2, 1]}),
    "stride (1, 2), no padding, even plane": ((2, 1, 6, 8), (17, 1, 3, 3),
                                              {"strides": [1, 2]}),
    "one channel, stride 2, padding 1": ((2, 1, 7, 7), (4, 1, 3, 3), {"strides": [2, 2],
                                                                     "paddings": [1, 1]}),
    "one channel, 5 filters (a block of 8 lanes), batch of one": (
        (1, 1, 7, 9), (5, 1, 3, 3), {"paddings": [1, 1]}),
    "20 filters (16 + 8 lanes), 3x4 kernel, padding past it, 10 columns (8 + 2)": (
        (2, 2, 5, 11), (20, 2, 3, 4), {"paddings": [2, 1]}),
    "asymmetric padding (top 0, bottom 2, left 1, right 0), 1 output column": (
        (2, 3, 6, 2), (8, 3, 3, 2), {"paddings": [0, 2, 1, 0]}),
    "no padding, 16 filters, one output row": ((3, 1, 3, 12), (16, 1, 3, 3), {}),
}
# Winograd F(2x2, 3x3): 3x3, stride 1, one group, at least WINOGRAD_MIN_C = 64 channels
WINOGRAD = {
    "odd output (a clipped last tile row and column), padding 1, batch of one": (
        (1, 64, 5, 7), (6, 64, 3, 3), {"paddings": [1, 1]}),
    "no padding, blocks of tiles across samples": ((3, 64, 8, 6), (5, 64, 3, 3), {}),
    "asymmetric padding past the kernel (top 2, bottom 0, left 0, right 3)": (
        (2, 64, 4, 5), (3, 64, 3, 3), {"paddings": [2, 0, 0, 3]}),
    # rows of 8 and 9 tiles: a whole vector of tiles, its last column clipped (15 columns),
    # and a vector past the row's end (17 columns)
    "15 output columns (8 tiles a row, the last column clipped)": ((2, 64, 3, 15), (2, 64, 3, 3),
                                                       {"paddings": [1, 1]}),
    # 3 x 5 x 9 = 135 tiles: two blocks, the second from the middle of a row of tiles
    "135 tiles in two blocks, rows of 9 tiles (17 columns)": ((3, 64, 12, 19), (3, 64, 3, 3),
                                                             {}),
}


def test_the_winograd_cases_cover_a_second_block_of_tiles():
    from fluidity.codegen.emit.cpu.conv import winograd_block
    assert 45 * 2 < winograd_block(64, 3) < 135 and winograd_block(64, 3) % 9
FALLBACK = {            # a shape the direct kernel does not take: the im2col path
    "C*kh*kw = 36 > DIRECT_MAX_K": ((2, 4, 6, 6), (5, 4, 3, 3), {"paddings": [1, 1]}),
    "a 1x1 conv over 8 > DIRECT_MAX_C channels": ((2, 8, 5, 5), (6, 8, 1, 1), {}),
    "one channel, stride 3": ((2, 1, 7, 7), (4, 1, 3, 3), {"strides": [3, 3],
                                                          "paddings": [1, 1]}),
    "one channel, dilation 2": ((1, 1, 8, 8), (3, 1, 3, 3), {"dilations": [2, 2],
                                                            "paddings": [2, 2]}),
    "64 channels, stride 2 (not Winograd)": ((1, 64, 5, 5), (4, 64, 3, 3),
                                             {"strides": [2, 2], "paddings": [1, 1]}),
    "64 channels, 2x2 filter (not Winograd)": ((1, 64, 4, 4), (4, 64, 2, 2), {}),
}


def _source(main):
    from fluidity.codegen.lower import Lowering
    return Lowering(main, 0).source


def _direct_kernel_runs(main):
    """Whether the compiled program's source calls the direct conv kernel."""
    return "fl::direct_conv(" in _source(main)


def test_a_conv_whose_sample_fills_a_chunk_runs_the_batch_in_chunks():
    from fluidity.codegen.emit.cpu.conv import chunk_samples
    assert chunk_samples(16 * 9 * 24 * 24) == 1
    assert chunk_samples(4 * 9 * 24 * 24) == 3


def _conv_case(op_type, case, table, direct=None, winograd=None, source_check=None):
    """Values in [-2, 2], the loss's weights in [0.5, 1.5] over the mean: each gradient
    element of Output is at most 1.5 / its size. A sum of n terms of at most t each is
    off by at most about n * eps * n * t in either order."""
    xs, ws, attrs = table[case]
    x, w = f32(*xs), f32(*ws)
    attrs = {"groups": xs[1] if op_type == "depthwise_conv2d" else 1, **attrs}
    main, _, feed, outs, _ = build_op(op_type, {"Input": x, "Filter": w}, attrs, ["Output"])
    out = _run(main, feed, outs["Output"], False)[0]
    d = 1.5 / out.size
    taps = ws[1] * ws[2] * ws[3]                       # terms of one output
    dx_terms = ws[0] // attrs["groups"] * ws[2] * ws[3]  # at most, per input element
    dw_terms = out.shape[0] * out.shape[2] * out.shape[3]

    def tol(n, t):
        return 2 * n * EPS * n * t
    if direct is not None:
        assert _direct_kernel_runs(main) == direct
    if source_check is not None:
        assert source_check(_source(main))
    if winograd is not None:
        # Winograd's transforms scale a tile's inputs by up to 4 and its filter taps by up
        # to 9/4, and its output adds 9 of the channel sums: each output passes through
        # about C + 16 roundings of values up to 81 * C * max|x| * max|w|, within the
        # 2 * (9C)^2 * eps * max|x| * max|w| below
        assert ("fl::wino_input(" in _source(main)) == winograd
    _check(op_type, {"Input": x, "Filter": w}, attrs, ["Input", "Filter"], "Output",
           [tol(taps, 4.0), tol(dx_terms, 2 * d), tol(dw_terms, 2 * d)])


@pytest.mark.parametrize("case", sorted(CONVS))
def test_conv2d_matches_the_kernel(case):
    _conv_case("conv2d", case, CONVS)


@pytest.mark.parametrize("case", sorted(DIRECT))
def test_direct_kernel_matches_the_kernel(case):
    """The forward and the filter gradient of the direct kernel's convs: at stride 1 the
    direct one (direct_conv_s1_wgrad: up to 24 taps, two blocks of them), at stride 2 the
    gemm's."""
    _conv_case("conv2d", case, DIRECT, direct=True)
    xs, ws, attrs = DIRECT[case]
    main, _, _ = _with_grads("conv2d", {"Input": f32(*xs), "Filter": f32(*ws)},
                             {"groups": 1, **attrs}, ["Input", "Filter"], "Output")
    stride_1 = list(attrs.get("strides", [1, 1])) == [1, 1]
    assert ("fl::direct_conv_s1_wgrad(" in _source(main)) == stride_1


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # the interpreter's inf - inf
def test_the_direct_filter_gradient_of_a_sample_holding_inf_and_nan():
    """Its padded grid's extra columns would multiply the inf by 0: that sample takes the
    real positions only, and each tap gets inf or NaN only where the kernel's does."""
    x, w = f32(2, 1, 5, 9), f32(4, 1, 3, 3)
    x[0, 0, 2, 0] = np.inf
    x[0, 0, 4, 8] = np.nan
    main, feed, fetch = _with_grads("conv2d", {"Input": x, "Filter": w},
                                    {"paddings": [1, 1], "groups": 1}, ["Filter"], "Output")
    assert "fl::direct_conv_s1_wgrad(" in _source(main)
    want, got = _run(main, feed, fetch, False), _run(main, feed, fetch, True)
    dw_want, dw_got = want[1], got[1]
    np.testing.assert_array_equal(np.isfinite(dw_got), np.isfinite(dw_want))
    assert np.isfinite(dw_want).any() and not np.isfinite(dw_want).all()
    ok = np.isfinite(dw_want)
    np.testing.assert_allclose(dw_got[ok], dw_want[ok], rtol=1e-5, atol=1e-6)


def test_a_1x1_conv_whose_sample_fills_a_chunk_hands_the_gemm_the_input():
    """Its columns would be a copy of the sample: no im2col (groups 2: each group's rows
    of the sample, as im2col lays them)."""
    table = {"1x1": ((2, 16, 64, 64), (4, 8, 1, 1), {"groups": 2})}
    _conv_case("conv2d", "1x1", table, source_check=lambda src: "fl::im2col(" not in
               src.split("conv2d_grad")[0])


POINTWISE = {          # 1x1, stride 1, no padding, one group: blocked gemms from the input
    "blocks of 48 positions and a remainder, batch 2": ((2, 5, 10, 11), (7, 5, 1, 1), {}),
    "one block a sample, batch 1": ((1, 6, 4, 5), (3, 6, 1, 1), {}),
}
POINTWISE_FALLBACK = {  # 1x1 convs that are not the sample's own columns: im2col
    "stride 2": ((2, 5, 7, 6), (4, 5, 1, 1), {"strides": [2, 2]}),
    "padding 1": ((1, 5, 4, 5), (4, 5, 1, 1), {"paddings": [1, 1]}),
    "dilation 2 (taken as not the sample's own columns)": ((1, 5, 4, 5), (4, 5, 1, 1),
                                                           {"dilations": [2, 2]}),
}


def _pointwise_runs(src):
    return "auto pepi = " in src.split("conv2d_grad")[0]


@pytest.mark.parametrize("case", sorted(POINTWISE))
def test_a_1x1_conv_runs_gemms_over_blocks_of_positions(case, monkeypatch):
    """Blocks small enough that a sample takes several (12 channels in and out, 48
    positions a block): each block's gemm writes into the output in place (ldb = ldc =
    H*W) and the epilogue follows it."""
    from fluidity.codegen.emit.cpu import conv
    monkeypatch.setattr(conv, "PW_BLOCK_BYTES", 4 * 12 * 48)
    monkeypatch.setattr(conv, "PW_MIN_BLOCK", 16)
    assert conv.pointwise_block(5, 7, 110) == 48
    _conv_case("conv2d", case, POINTWISE, source_check=_pointwise_runs)


@pytest.mark.parametrize("case", sorted(POINTWISE_FALLBACK))
def test_a_1x1_conv_with_stride_or_padding_runs_im2col(case):
    _conv_case("conv2d", case, POINTWISE_FALLBACK,
               source_check=lambda src: not _pointwise_runs(src))


@pytest.mark.parametrize("case", sorted(WINOGRAD))
def test_winograd_matches_the_kernel(case):
    _conv_case("conv2d", case, WINOGRAD, winograd=True)


@pytest.mark.parametrize("case", sorted(FALLBACK))
def test_a_conv_the_direct_kernel_does_not_take_runs_im2col(case):
    _conv_case("conv2d", case, FALLBACK, direct=False, winograd=False)


def test_a_one_channel_depthwise_conv_runs_the_direct_kernel():
    """Fluid makes a conv over one input channel a depthwise_conv2d of one group (the
    MNIST CNN's first conv): the direct kernel computes it."""
    table = {"one": ((2, 1, 6, 5), (6, 1, 3, 3), {"paddings": [1, 1]})}
    _conv_case("depthwise_conv2d", "one", table, direct=True)


@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_depthwise_direct_kernel_matches_the_kernel(case):
    """The tiled kernel where it applies; column stride 3 and dilation 2 fall back to the
    row-by-row kernel (and its separate epilogue pass)."""
    tiled = "stride 3" not in case and "dilation" not in case
    _conv_case("depthwise_conv2d", case, DEPTHWISE,
               source_check=lambda src: ("fl::depthwise_conv_tiled(" in src) == tiled
               and ("fl::depthwise_conv(" in src) != tiled)


# --- conv_epilogue ----------------------------------------------------------------------------
def _cnn(is_test, groups=1, channels=4, stride=2, ksize=3):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 11           # the same filters each time it is built
    with fluid.program_guard(main, startup):
        img = fluid.data("img", [None, channels, 9, 9], "float32")
        h = fluid.layers.conv2d(img, 8, ksize, padding=ksize // 2, stride=stride,
                                groups=groups)
        h = fluid.layers.batch_norm(h, act="relu", is_test=is_test)
        out = fluid.layers.pool2d(h, 2, pool_stride=2)
    return main, startup, out


def _run_cnn(main, startup, fetch, compiled, x):
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    r = np.random.default_rng(5)
    for p in main.global_block().all_parameters():    # statistics and scales not 0 / 1
        t = scope.find_var(p.name).get_tensor()
        t.set(r.uniform(0.5, 1.5, np.asarray(t).shape).astype(np.float32), fluid.CPUPlace())
    prog = fluid.CompiledProgram(main).with_native_code(feed=["img"], fetch_list=fetch) \
        if compiled else main
    return prog, [np.asarray(v) for v in exe.run(prog, feed={"img": x}, fetch_list=fetch,
                                                 scope=scope)]


def _fused(prog):
    return [line for line in prog.explain().splitlines() if "(conv_epilogue)" in line]


@pytest.mark.parametrize("groups", [1, 4])
def test_inference_conv_computes_bias_batch_norm_and_relu_in_its_epilogue(groups):
    main, startup, out = _cnn(True, groups=groups)
    x = f32(3, 4, 9, 9)
    _, (want,) = _run_cnn(main, startup, [out], False, x)
    prog, (got,) = _run_cnn(main, startup, [out], True, x)
    fused = _fused(prog)
    assert [line.split()[1] for line in fused] == ["elementwise_add", "batch_norm", "relu"]
    taps = 9 * 4 // groups
    np.testing.assert_allclose(got, want, rtol=4 * taps * EPS, atol=4 * taps * EPS * 4)


def test_the_direct_kernels_epilogue_computes_bias_batch_norm_and_relu():
    """A 3-channel stride-1 conv (K = 27: the direct kernel) fused with its bias, frozen
    batch_norm and relu, the epilogue a vector of 8 positions at a time."""
    main, startup, out = _cnn(True, channels=3, stride=1)
    x = f32(2, 3, 9, 9)
    x[1, 0, 4, 4] = np.nan              # relu keeps a NaN lane by lane, as fmaxnp does
    _, (want,) = _run_cnn(main, startup, [out], False, x)
    prog, (got,) = _run_cnn(main, startup, [out], True, x)
    assert _direct_kernel_runs(main)
    assert [line.split()[1] for line in _fused(prog)] == ["elementwise_add", "batch_norm", "relu"]
    assert np.isnan(got[1]).any() and np.array_equal(np.isnan(got), np.isnan(want))
    taps = 27
    np.testing.assert_allclose(got, want, rtol=4 * taps * EPS, atol=4 * taps * EPS * 4)


@pytest.mark.parametrize("channels, stride, groups, ksize", [
    (4, 2, 1, 3), (3, 1, 1, 3), (4, 1, 4, 3), (4, 2, 4, 3), (6, 1, 1, 1)])
def test_the_epilogue_rounds_as_the_unfused_ops(channels, stride, groups, ksize):
    """Fusing changes no bit: fetching the conv's own output (kept, so nothing fuses)
    gives the same result bit for bit (the im2col path, the direct kernel's, the tiled
    depthwise kernel's, which applies it to each plane as it is computed, and the 1x1
    conv's, which applies it to each block of positions after its gemm)."""
    main, startup, out = _cnn(True, channels=channels, stride=stride, groups=groups,
                              ksize=ksize)
    x = f32(2, channels, 9, 9)
    prog, (fused,) = _run_cnn(main, startup, [out], True, x)
    assert len(_fused(prog)) == 3
    conv_out = main.global_block().ops[0].output("Output")[0]
    prog, (_, plain) = _run_cnn(main, startup, [conv_out, out], True, x)
    assert not _fused(prog)
    np.testing.assert_array_equal(fused, plain)


def test_a_1x1_convs_epilogue_follows_each_block_of_positions(monkeypatch):
    """81 positions in blocks of 32, 32 and 17: bias, batch_norm and relu applied to each
    block's channel rows (fused) give the unfused ops' bits and the interpreter's values
    within the rounding of a 6-term sum."""
    from fluidity.codegen.emit.cpu import conv
    monkeypatch.setattr(conv, "PW_BLOCK_BYTES", 4 * 14 * 32)
    monkeypatch.setattr(conv, "PW_MIN_BLOCK", 16)
    assert conv.pointwise_block(6, 8, 81) == 32
    main, startup, out = _cnn(True, channels=6, stride=1, ksize=1)
    x = f32(2, 6, 9, 9)
    _, (want,) = _run_cnn(main, startup, [out], False, x)
    prog, (fused,) = _run_cnn(main, startup, [out], True, x)
    assert len(_fused(prog)) == 3 and _pointwise_runs(_source(main))
    conv_out = main.global_block().ops[0].output("Output")[0]
    _, (_, plain) = _run_cnn(main, startup, [conv_out, out], True, x)
    np.testing.assert_array_equal(fused, plain)
    taps = 6
    np.testing.assert_allclose(fused, want, rtol=4 * taps * EPS, atol=4 * taps * EPS * 4)


def test_training_batch_norm_and_a_fetched_intermediate_are_not_fused():
    main, startup, out = _cnn(False)
    prog, _ = _run_cnn(main, startup, [out], True, f32(2, 4, 9, 9))
    assert [line.split()[1] for line in _fused(prog)] == ["elementwise_add"]
    main, startup, out = _cnn(True)          # batch_norm's output is fetched
    bn_y, x = main.global_block().ops[2].output("Y")[0], f32(2, 4, 9, 9)
    prog, got = _run_cnn(main, startup, [bn_y, out], True, x)
    assert [line.split()[1] for line in _fused(prog)] == ["elementwise_add", "batch_norm"]
    _, want = _run_cnn(main, startup, [bn_y, out], False, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=4 * 36 * EPS, atol=4 * 36 * EPS * 4)


def test_a_paddle_saved_cnn_folds_its_reshaped_bias_and_batch_norms():
    """Paddle 2.x saves conv2d -> reshape2(bias to [1, M, 1, 1]) -> elementwise_add ->
    batch_norm -> relu: the add reads the bias vector itself, and the whole chain fuses."""
    import os
    from fluidity import io as fio
    zoo = os.path.join(os.path.dirname(__file__), "..", "fixtures", "paddle_zoo", "cnn")
    data = np.load(os.path.join(zoo, "input.npz"))
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        prog, _, fetches = fio.load_inference_model(os.path.join(zoo, "model"), exe)
        compiled = fluid.CompiledProgram(prog).with_native_code()
        feed = {k: data[k] for k in data.files}
        want = exe.run(prog, feed=feed, fetch_list=fetches)
        got = exe.run(compiled, feed=feed, fetch_list=fetches)
    assert [line.split()[1] for line in _fused(compiled)] == \
        ["elementwise_add", "batch_norm", "relu"] * 2
    for g, w in zip(got, want):          # the convs' gemms as the kernel's: BLAS rounding
        np.testing.assert_allclose(g, w, rtol=COMPILED_RTOL, atol=COMPILED_ATOL)


def test_an_nhwc_lrn_is_not_compiled_and_keeps_the_interpreters_numbers():
    """The compiled lrn is NCHW: an NHWC one runs interpreted (explain says why), so the
    compiled program's result is the interpreter's."""
    from fluidity.codegen.lower import Lowering
    x0 = np.random.default_rng(0).standard_normal((2, 5, 5, 6)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 5, 5, 6], "float32")
        y = fluid.layers.lrn(x, n=3, data_format="NHWC")
    rows = [(w, why) for _, t, w, why in Lowering(main, 0).explain() if t == "lrn"]
    assert rows and "NCHW" in rows[0][1]
    got = []
    for compiled in (False, True):
        exe = fluid.Executor()
        prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
        got.append(exe.run(prog, feed={"x": x0}, fetch_list=[y])[0])
    np.testing.assert_array_equal(got[0], got[1])


def test_training_batch_norm_gradient_over_planes_of_float_blocks():
    """Planes of 135 values: bn_grad_sums_d's two 64-value float blocks and its tail. Its
    sums add 8 terms in float, then in double; numpy's pairwise sums round about log2(n)
    times: each sum of n terms is off by at most (8 + log2 n) * eps * the sum of their
    magnitudes, here n * |g| * (1 + max|xh|) at most. dX = k * (g - (sum g + xh * sum
    g*xh) / n) with k <= max scale / std: off by k * (1 + max|xh|) / n times that, plus a
    few roundings of its own."""
    x = f32(3, 2, 9, 15)
    c = x.shape[1]
    ins = {"X": x, "Scale": rng.uniform(0.5, 1.5, c).astype(np.float32),
           "Bias": f32(c), "Mean": np.zeros(c, np.float32),
           "Variance": np.ones(c, np.float32)}
    main, feed, fetch = _with_grads("batch_norm", ins, {"is_test": False, "epsilon": 1e-5},
                                    ["X", "Scale", "Bias"], "Y",
                                    ["Y", "MeanOut", "VarianceOut", "SavedMean",
                                     "SavedVariance"])
    assert {"batch_norm", "batch_norm_grad"} <= compiled_ops(main)
    want, got = _run(main, feed, fetch, False), _run(main, feed, fetch, True)
    n = x.size // c
    g = 1.5 / x.size                              # the loss's weights over the mean
    std = x.std((0, 2, 3))
    xh = np.abs((x - x.mean((0, 2, 3), keepdims=True)) / std[None, :, None, None]).max()
    sums = 2 * (8 + np.log2(n)) * EPS * n * g * (1 + xh)
    dx = 1.5 / std.min() * (1 + xh) / n * sums + 8 * EPS * np.abs(want[1]).max()
    for v, a, b, tol in zip(fetch, got, want, [8 * EPS * 4.0, dx, sums, sums]):
        np.testing.assert_allclose(a, b, rtol=0, atol=tol, err_msg=v.name)
