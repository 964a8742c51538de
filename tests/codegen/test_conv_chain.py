"""The conv_chain fusion (issue 29, point 1): a run of 1x1 and depthwise convs in an
inference program, each reading only the one before, runs as one op a sample at a time in
channel-last layout (runtime/conv_chain.h). Compiled vs the interpreter on MobileNet-style
stacks of every shape the kernels branch on (channel counts of one and two vectors, edge
columns, strides 1 and 2, paddings, odd planes, with and without bias, batch_norm and
relu); what is not chained (and why) runs as before.

Tolerance: each link sums K products (K input channels of a 1x1 conv, kh*kw taps of a
depthwise one) in another order than the interpreter's gemm, so a value differs by about
K float32 roundings of a sum no larger than the sum of |terms|; through the links these
relative errors add, so the bound is a few EPS times the sum of the links' K, relative to
the output's magnitude."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen import fusion

EPS = np.finfo(np.float32).eps
rng = np.random.default_rng(41)


def _stack(layers, channels=8, hw=(9, 9), bn=True, act="relu", bias=None, fmt="NCHW"):
    """An inference program: img [N, channels, H, W] through `layers`, each ("dw", stride,
    ksize, padding), ("pw", out channels) or ("conv", out channels, stride, ksize), a conv then (with `bn`) a frozen batch_norm
    with `act`, else `act` on the conv; returns (main, startup, the last value)."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup):
        shape = [None, channels, *hw] if fmt == "NCHW" else [None, *hw, channels]
        x = fluid.data("img", shape, "float32")
        for layer in layers:
            c = x.shape[1] if fmt == "NCHW" else x.shape[3]
            if layer[0] == "conv":                 # ("conv", out channels, stride, ksize)
                _, m, stride, k = layer
                x = fluid.layers.conv2d(x, m, k, stride=stride, padding=k // 2, bias_attr=bias,
                                        data_format=fmt)
            elif layer[0] == "dw":
                _, stride, k, pad = layer
                x = fluid.layers.conv2d(x, c, k, stride=stride, padding=pad, groups=c,
                                        bias_attr=bias, use_cudnn=False, data_format=fmt)
            else:
                x = fluid.layers.conv2d(x, layer[1], 1, bias_attr=bias, data_format=fmt)
            if bn:
                x = fluid.layers.batch_norm(x, act=act, is_test=True, data_layout=fmt)
            elif act:
                x = fluid.layers.relu(x)
    return main, startup, x


def _run(main, startup, fetch, x, compiled):
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    r = np.random.default_rng(7)
    for v in main.global_block().all_parameters() + [
            v for v in main.list_vars() if v.persistable and
            ("mean" in v.name or "variance" in v.name)]:
        t = scope.find_var(v.name).get_tensor()
        shape = np.asarray(t).shape
        lo, hi = (-0.5, 0.5) if len(shape) == 4 else (0.5, 1.5)   # filters signed
        t.set(r.uniform(lo, hi, shape).astype(np.float32), fluid.CPUPlace())
    prog = fluid.CompiledProgram(main).with_native_code(feed=["img"], fetch_list=fetch) \
        if compiled else main
    got = exe.run(prog, feed={"img": x}, fetch_list=fetch, scope=scope)
    return prog, [np.asarray(v) for v in got]


def _chained(prog):
    return [line.split()[1] for line in prog.explain().splitlines() if "(conv_chain)" in line]


def _taps(layers, channels):
    total, c = 0, channels
    for layer in layers:
        if layer[0] == "dw":
            total += layer[2] ** 2
        elif layer[0] == "conv":
            total, c = total + c * layer[3] ** 2, layer[1]
        else:
            total, c = total + c, layer[1]
    return total


def _check(layers, channels=8, hw=(9, 9), batch=2, **kw):
    main, startup, out = _stack(layers, channels, hw, **kw)
    x = rng.uniform(-2, 2, (batch, channels, *hw)).astype(np.float32)
    _, (want,) = _run(main, startup, [out], x, False)
    prog, (got,) = _run(main, startup, [out], x, True)
    assert got.shape == want.shape
    scale = max(float(np.abs(want).max()), 1.0)
    np.testing.assert_allclose(got, want, rtol=0,
                               atol=8 * EPS * _taps(layers, channels) * scale)
    return prog


MOBILE = [("dw", 1, 3, 1), ("pw", 16), ("dw", 2, 3, 1), ("pw", 24), ("dw", 1, 3, 1),
          ("pw", 32)]


@pytest.mark.parametrize("hw", [(9, 9), (7, 12), (16, 16), (5, 3), (1, 1)])
@pytest.mark.parametrize("batch", [1, 3])
def test_a_mobilenet_stack_runs_as_one_chain(hw, batch):
    """Channel counts of one vector (8, 24: a half panel) and two (16, 32); planes whose
    rows hold tiles of 8, 4 and 1 interior positions and edge columns; position counts
    that leave 1-5 positions after the 1x1 conv's tiles of 6."""
    prog = _check(MOBILE, hw=hw, batch=batch)
    assert _chained(prog) == ["conv2d", "depthwise_conv2d", "conv2d", "depthwise_conv2d",
                              "conv2d"]


@pytest.mark.parametrize("layers", [
    [("pw", 16), ("pw", 8)],                              # two 1x1 convs
    [("dw", 2, 3, 1), ("dw", 1, 3, 1)],                   # two depthwise convs
    [("dw", 1, 5, 2), ("pw", 16)],                        # 5x5 taps
    [("dw", 2, 3, 0), ("pw", 16)],                        # no padding, stride 2
    [("dw", 1, 3, 0), ("pw", 40), ("dw", 2, 3, 1)],       # the chain ends on a depthwise
    [("dw", 1, 1, 0), ("pw", 16)],                        # a 1x1 depthwise conv
])
def test_chains_of_every_link_kind(layers):
    prog = _check(layers, hw=(11, 10))
    assert len(_chained(prog)) == len(layers) - 1


@pytest.mark.parametrize("kw", [dict(bn=False), dict(bn=False, act=None),
                                dict(bias=None, act=None), dict(bias=False)])
def test_each_links_epilogue_is_optional(kw):
    """A link with only a relu, with nothing after it, a batch_norm without relu, a conv
    without a bias add."""
    prog = _check(MOBILE[:4], **kw)
    assert len(_chained(prog)) == 3


def test_relu_keeps_nan_and_infinities_flow_as_the_interpreter_computes_them():
    main, startup, out = _stack(MOBILE[:2], channels=8)
    x = rng.uniform(-2, 2, (2, 8, 9, 9)).astype(np.float32)
    x[0, 3, 4, 4] = np.nan
    x[1, 5, 0, 0] = np.inf
    _, (want,) = _run(main, startup, [out], x, False)
    _, (got,) = _run(main, startup, [out], x, True)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-5)


def test_a_fetched_intermediate_splits_the_chain():
    """The second conv's result is fetched: kept, so the chain stops there and a new one
    starts after it; both fetched values are the interpreter's."""
    main, startup, out = _stack(MOBILE)
    ops = main.global_block().ops
    mid_out = [op for op in ops if op.type == "relu"][1].output("Out")[0]
    x = rng.uniform(-2, 2, (2, 8, 9, 9)).astype(np.float32)
    _, want = _run(main, startup, [mid_out, out], x, False)
    prog, got = _run(main, startup, [mid_out, out], x, True)
    assert len(_chained(prog)) == 4              # chains of links 1-2 and 3-6: 1 + 3 later
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=8 * EPS * 200 * max(np.abs(w).max(), 1))


@pytest.mark.parametrize("why, build", [
    ("channels not a multiple of 8", lambda: _stack(MOBILE[:2], channels=12)),
    ("NHWC", lambda: _stack([("dw", 1, 3, 1), ("pw", 16)], fmt="NHWC")),
    ("training batch_norm", None),
])
def test_what_is_not_chained_runs_as_before(why, build):
    if build is None:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.data("img", [None, 8, 9, 9], "float32")
            h = fluid.layers.conv2d(x, 8, 3, padding=1, groups=8)
            h = fluid.layers.batch_norm(h, act="relu")          # training statistics
            out = fluid.layers.conv2d(h, 16, 1)
    else:
        main, startup, out = build()
    shape = [2, *(d for d in main.global_block().var("img").shape[1:])]
    x = rng.uniform(-2, 2, shape).astype(np.float32)
    _, (want,) = _run(main, startup, [out], x, False)
    prog, (got,) = _run(main, startup, [out], x, True)
    assert _chained(prog) == [], why
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * max(np.abs(want).max(), 1))


def test_a_dilated_or_multiplier_depthwise_conv_ends_the_chain():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("img", [None, 8, 9, 9], "float32")
        h = fluid.layers.conv2d(x, 16, 1)
        h = fluid.layers.conv2d(h, 16, 3, padding=2, dilation=2, groups=16)
        h = fluid.layers.conv2d(h, 32, 3, padding=1, groups=16)     # multiplier 2
        out = fluid.layers.conv2d(h, 8, 1)
    kinds = [fusion.chain_kind(op, main.global_block()) for op in main.global_block().ops
             if op.type.endswith("conv2d")]
    assert kinds == ["pw", None, None, "pw"]
    assert fusion.conv_chain(main, main.global_block(), set()) == {}


def test_hostile_geometry_is_not_chained_and_runs_as_the_interpreter_does():
    """A depthwise conv whose paddings a crafted file set far beyond its taps: the
    analysis names it a depthwise link, the emitter's literal check refuses the chain
    (no such value reaches the chain's C), and the program runs as before."""
    main, startup, out = _stack([("dw", 1, 3, 1), ("pw", 16)])
    dw = next(op for op in main.global_block().ops if op.type == "depthwise_conv2d")
    dw._set_attr("paddings", [40, 40])
    x = rng.uniform(-2, 2, (1, 8, 9, 9)).astype(np.float32)
    _, (want,) = _run(main, startup, [out], x, False)
    prog, (got,) = _run(main, startup, [out], x, True)
    assert _chained(prog) == []
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * max(np.abs(want).max(), 1))


def test_the_analysis_names_links_results_and_fused_ops():
    main, _, out = _stack(MOBILE[:3])
    block = main.global_block()
    (first, chain), = fusion.conv_chain(main, block, set()).items()
    assert block.ops[chain.links[0].conv].output("Output") == [first]
    assert [link.kind for link in chain.links] == ["dw", "pw", "dw"]
    assert chain.out == out.name
    fused = dict(chain.ops)
    assert sorted(set(fused.values())) == ["conv_chain", "conv_epilogue"]
    assert [block.ops[j].type for j, p in chain.ops if p == "conv_chain"] == \
        ["conv2d", "depthwise_conv2d"]
    assert fusion.conv_chain(main, block, {out.name}) != {}      # the result may be kept


CHAIN_PROGRAM = r"""
#include <cmath>
#include <cstdio>
#include "conv.h"
#include "conv_chain.h"
// A dw (stride 2, 11 x 10) -> pw (16 -> 24) -> dw chain of 2 samples on fixed data, its
// bits printed: the vector kernels and the portable loops must print the same.
int main() {
    const int64_t C = 16, H = 11, W = 10, M = 24;
    static float x[C * H * W], a[C * H * W], b[C * H * W], c[M * H * W], wd[C * 9],
        wp[M * C], pk[24 * 16 * 2], wt[C * 9], wt2[M * 9], wd2[M * 9], k[M], off[M];
    unsigned s = 7;
    auto r = [&] { s = s * 1103515245u + 12345u; return ((s >> 8) % 2001) / 1000.0f - 1.0f; };
    for (auto& v : x) v = r();
    for (auto& v : wd) v = r();
    for (auto& v : wp) v = r();
    for (auto& v : wd2) v = r();
    for (int64_t i = 0; i < M; ++i) { k[i] = 0.5f + i / 32.0f; off[i] = r(); }
    const fl::ConvGeom g1{1, C, H, W, 3, 3, 6, 5, 2, 2, 1, 1, 1, 1};
    const fl::ConvGeom g2{1, M, 6, 5, 3, 3, 6, 5, 1, 1, 1, 1, 1, 1};
    const fl::ChainEpi e1{nullptr, off, k, off, true}, e2{off, nullptr, nullptr, nullptr, false};
    fl::chain_dw_pack(wd, C, 9, wt);
    fl::chain_pw_pack(wp, M, C, pk);
    fl::chain_dw_pack(wd2, M, 9, wt2);
    fl::chain_to_nhwc(x, C, H * W, a);
    fl::chain_depthwise(a, wt, g1, b, e1);
    fl::chain_pointwise(b, 30, C, pk, M, a, e2);
    fl::chain_depthwise(a, wt2, g2, b, e1);
    fl::chain_to_nchw(b, M, 30, c);
    for (int64_t i = 0; i < M * 30; ++i) {
        unsigned bits; std::memcpy(&bits, c + i, 4); std::printf("%08x\n", bits);
    }
}
"""


def test_the_portable_build_computes_the_vector_kernels_bits(tmp_path):
    """Built without -march=native (no AVX2: the plain loops) the chain's kernels give the
    vector kernels' bits: the same fused multiply-adds in the same order, the epilogue the
    same separate multiply and add."""
    import subprocess
    from fluidity.codegen import build
    src = tmp_path / "chain.cc"
    src.write_text(CHAIN_PROGRAM)
    outs = []
    for portable in (False, True):
        exe = str(tmp_path / f"chain{int(portable)}")
        build.compile_files([str(src)], exe, kind="exe", includes=[build.RUNTIME_DIR],
                            portable=portable)
        outs.append(subprocess.run([exe], capture_output=True, text=True, check=True).stdout)
    assert len(outs[0].split()) == 24 * 30 and outs[0] == outs[1]


@pytest.mark.parametrize("channels, stride, hw", [(3, 2, (13, 12)), (1, 1, (9, 9)),
                                                  (2, 2, (8, 8)), (3, 1, (5, 11))])
def test_a_stem_the_direct_kernel_runs_heads_the_chain(channels, stride, hw):
    """A few-channel stem conv (the direct kernel's) before the chain writes its
    [position][channel] result with its epilogue straight into the chain's channel-last
    scratch: no NCHW output, no transpose."""
    layers = [("conv", 8, stride, 3)] + MOBILE
    prog = _check(layers, channels=channels, hw=hw)
    assert _chained(prog) == ["depthwise_conv2d", "conv2d", "depthwise_conv2d", "conv2d",
                              "depthwise_conv2d", "conv2d"]
    src = _source(prog)
    assert "fl::chain_from_grid(" in src and "fl::chain_to_nhwc(" not in src


def test_a_head_the_direct_kernel_does_not_run_leaves_the_chain_after_it():
    """A 3x3 conv over 16 channels (im2col + gemm, not the direct kernel) cannot write
    channel-last: it runs as before and the chain starts at the depthwise conv after it."""
    layers = [("conv", 16, 1, 3)] + MOBILE[:4]
    prog = _check(layers, channels=16)
    assert _chained(prog) == ["conv2d", "depthwise_conv2d", "conv2d"]
    src = _source(prog)
    assert "fl::chain_to_nhwc(" in src and "fl::chain_from_grid(" not in src


def _source(prog):
    """The C++ of the compiled program's block (its feed and fetch as it runs them)."""
    from fluidity.codegen.lower import Lowering
    from fluidity.executor.executor import add_feed_fetch_ops
    view = add_feed_fetch_ops(prog._program, 0, prog._feed, prog._fetch)
    return Lowering(view, 0, keep=prog._fetch).source
