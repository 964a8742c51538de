"""C++ emitters of conv2d, depthwise_conv2d, conv2d_transpose, pool2d, max_pool2d_with_index
and their gradients: im2col and one gemm per group over a cache-sized chunk of the batch (the
numpy kernels' BLAS calls), a direct register-tiled kernel for stride-1 or -2 convs with few
taps (C*kh*kw <= DIRECT_MAX_K, C <= DIRECT_MAX_C), Winograd for deep 3x3 stride-1 convs, 1x1
convs as gemms over blocks of positions straight from the input, a direct kernel for
depthwise convs, direct loops for pooling; a chain of 1x1 and depthwise convs
(fusion.conv_chain) as one op a sample at a time in channel-last layout."""
import numpy as np

from ....errors import ShapeError
from ....ops.common import channel_last
from ....ops.conv import (conv_geometry, conv_shape_error, convt_geometry, pool_windows,
                          pool_with_index_attrs)
from ...cir import literal
from ...dim import is_lit
from ...fusion import CHAIN_CHANNELS
from .. import register
from ..checks import check_dims
from ..conv import (contiguous, emit_literal_nchw, grouped_gemm, pool_interior, regular_pool,
                    runs)


def _emit_conv_geometry(e, x, w):
    """The literal geometry of a compiled NCHW conv (N may be symbolic): (code declaring
    a fl::ConvGeom `g`, groups, M, [oh, ow]); NotCompilable when H, W, C or the filter are
    not literal or the layout is NHWC."""
    n, (c, h, wd), (m, cg, kh, kw) = emit_literal_nchw(e, x, w)
    groups = e.attr("groups")
    if conv_shape_error([1, c, h, wd], [m, cg, kh, kw], groups):
        e.fail(conv_shape_error([1, c, h, wd], [m, cg, kh, kw], groups))
    strides, pads, dil, (oh, ow) = conv_geometry(e.attrs, (h, wd), (kh, kw))
    code = (f"const fl::ConvGeom g{{{n}, {c}, {h}, {wd}, {kh}, {kw}, {oh}, {ow}, {strides[0]}, "
            f"{strides[1]}, {pads[0]}, {pads[2]}, {dil[0]}, {dil[1]}}};")
    return code, groups, m, [oh, ow]


def _emit_convt_geometry(e, x, w):
    """The literal geometry of a compiled NCHW conv2d_transpose (N may be symbolic): (code
    declaring the fl::ConvGeom `g` of the conv2d it transposes: the image is Output [N, M,
    oh, ow], the conv's output positions Input's [h, w]; groups, C, M/groups, [oh, ow])."""
    n, (c, h, wd), (c2, mg, kh, kw) = emit_literal_nchw(e, x, w)
    groups = e.attr("groups")
    if c != c2 or groups < 1 or c % groups:
        e.fail(f"Input {x.dims} and Filter {w.dims} with groups={groups} do not fit")
    try:
        strides, pads, dil, (oh, ow) = convt_geometry(e.attrs, (h, wd), (kh, kw))
    except ShapeError as err:
        e.fail(str(err))
    code = (f"const fl::ConvGeom g{{{n}, {groups * mg}, {oh}, {ow}, {kh}, {kw}, {h}, {wd}, "
            f"{strides[0]}, {strides[1]}, {pads[0]}, {pads[2]}, {dil[0]}, {dil[1]}}};")
    return code, groups, c, mg, [oh, ow]


def _emit_pool_tables(e, attrs, h, w):
    """C tables of a compiled pool's windows over an h x w plane: rows [hs, he), columns
    [ws, we) of each output position (the kernel's pool_windows, clipped; adaptive cells
    too), and the average's divisors (div); returns (code, (oh, ow))."""
    ((ih, vh), (iw, vw)), ksize, adaptive = pool_windows(attrs, h, w)
    if not (contiguous(ih, vh) and contiguous(iw, vw)):
        e.fail("windows that are not runs of positions")
    hs, he = runs(ih, vh)
    ws, we = runs(iw, vw)
    if attrs.get("exclusive", True) or attrs["global_pooling"] or adaptive:
        div = np.maximum(np.outer(vh.sum(1), vw.sum(1)), 1).astype(np.float32)
    else:
        div = np.full((len(hs), len(ws)), np.float32(ksize[0] * ksize[1]), np.float32)
    if attrs["global_pooling"] and not adaptive:      # global + adaptive: one-pixel cells
        div = np.full((1, 1), np.float32(h * w), np.float32)

    def arr(name, values, ctype="int64_t"):
        vals = ", ".join(repr(float(v)) + "f" if ctype == "float" else str(int(v))
                         for v in np.ravel(values))
        return f"static const {ctype} {name}[] = {{{vals}}};"
    code = " ".join([arr("hs", hs), arr("he", he), arr("ws", ws), arr("we", we),
                     arr("div", div, "float")])
    return code, (len(hs), len(ws))


@register("conv2d", "cpu")
@register("depthwise_conv2d", "cpu")
def conv2d(e):
    """Per chunk of the batch (chunk_samples: its columns stay in cache): im2col (none for
    a 1x1 conv's one-sample chunk: the sample is its columns), one gemm per group ([M,
    C*kh*kw] @ [C*kh*kw, n*oh*ow], the kernel's matmul over those samples), then one pass
    writing NCHW: the bias, and the per-channel ops a fused epilogue
    (fusion.conv_epilogue) computes in their place. Instead, by shape: stride-1 or -2 convs
    over few channels run the direct kernel (_direct), deep 3x3 stride-1 convs Winograd
    (_winograd), 1x1 stride-1 convs of one group gemms over blocks of positions
    (_emit_pointwise), depthwise convs a direct depthwise kernel that applies the epilogue
    to each plane; all apply the same epilogue."""
    x, w, bias = e.input("Input"), e.input("Filter"), e.input("Bias")
    if e.op.input("ResidualData"):
        e.fail("ResidualData")
    e.require_float(x, w, bias)
    geom, groups, m, (oh, ow) = _emit_conv_geometry(e, x, w)
    if _emit_chain(e, x, w, geom):
        return
    dims = [x.dims[0], str(m), str(oh), str(ow)]
    fused = e.fused_epilogue("Output", dims)
    out = fused[2] if fused else e.output("Output", dims)
    ckk, hw, n = int(e.prod(w.dims[1:])), oh * ow, x.dims[0]
    mg = m // groups
    e.code(geom)
    if _direct(e, x, w, groups):
        _emit_direct(e, x, w, (out, m, oh, ow), n, bias, fused)
        return
    if _winograd(e, x, w, groups):
        _emit_winograd(e, x, (out, m, oh, ow), n, bias, fused)
        return
    if _depthwise(x, w, groups):
        strides, pads, dil = _geometry(e, x, w)
        if dil == [1, 1] and strides[1] in (1, 2) and min(pads) >= 0:
            kh, kw = int(w.dims[2]), int(w.dims[3])
            xp = e.scratch([str(2 * ((oh - 1) * strides[0] + kh) * (ow + kw + 32))])
            e.code(f"{{ auto depi = {_plane_epilogue(bias, fused)}; "
                   f"fl::depthwise_conv_tiled({x}, {w}, g, {mg}, {xp}, {out}, depi); }}")
        else:
            tmp = e.scratch([str(m), e.mul(n, hw)])
            e.code(f"fl::depthwise_conv({x}, {w}, g, {mg}, {tmp});")
            e.code(_epilogue(tmp, out, m, n, hw, bias, fused))
        return
    if groups == 1 and PW_BLOCK_BYTES and _identity_columns(e, x, w):
        _emit_pointwise(e, x, w, (out, m, hw), n, bias, fused)
        return
    nb = chunk_samples(groups * ckk * hw)
    tmp = e.scratch([str(m * nb * hw)])
    chw = int(x.dims[1]) * int(x.dims[2]) * int(x.dims[3])
    if nb == 1 and _identity_columns(e, x, w):
        cols, im2col = f"({x} + n0 * {chw})", ""     # the sample is its own columns
    else:
        cols = e.scratch([str(groups * ckk * nb * hw)])
        im2col = f"fl::im2col({x} + n0 * {chw}, gc, {cols}); "
    e.code(f"for (int64_t n0 = 0; n0 < {n}; n0 += {nb}) {{ fl::ConvGeom gc = g; "
           f"gc.N = {n} - n0 < {nb} ? {n} - n0 : {nb}; const int64_t nc = gc.N * {hw}; "
           + im2col +
           grouped_gemm("fl::gemm", groups, False, False, mg, "nc", ckk, w, ckk, cols, "nc",
                        tmp, "nc") + " " +
           _epilogue(tmp, f"({out} + n0 * {m * hw})", m, "gc.N", hw, bias, fused) + " }")


def _chain_geometry(kind, attrs, chw, filt):
    """(M, oh, ow, the C++ fl::ConvGeom initializer of one sample) of a conv_chain link
    reading [C, H, W] with filter dims `filt`, or None when its literal geometry is not the
    kind the analysis named (a 1x1 conv keeping H x W; a depthwise conv of multiplier 1)
    or a channel count is not a whole number of vectors (a head conv's input aside; its
    geometry is the direct kernel's, declared by the caller)."""
    c, h, w = chw
    m, cg, kh, kw = filt
    groups = attrs["groups"]
    if conv_shape_error([1, c, h, w], [m, cg, kh, kw], groups) or m % CHAIN_CHANNELS or \
            kind != "head" and c % CHAIN_CHANNELS:
        return None
    try:
        strides, pads, dil, (oh, ow) = conv_geometry(attrs, (h, w), (kh, kw))
    except ShapeError:
        return None
    if oh < 1 or ow < 1 or min(pads) < 0 or max(pads) > max(kh, kw) or min(strides) < 1:
        return None
    if kind == "pw" and not (groups == 1 and kh == kw == 1 and (oh, ow) == (h, w) and
                             not any(pads) and strides == [1, 1]):
        return None
    if kind == "dw" and not (groups == c == m and cg == 1 and dil == [1, 1]):
        return None
    if kind == "head":                  # the direct kernel's own geometry (`g`)
        return m, oh, ow, None
    geom = (f"fl::ConvGeom{{1, {c}, {h}, {w}, {kh}, {kw}, {oh}, {ow}, {strides[0]}, "
            f"{strides[1]}, {pads[0]}, {pads[2]}, 1, 1}}")
    return m, oh, ow, geom


def _chain_epilogue(e, m, bias, fused):
    """The C++ fl::ChainEpi of a chain link: its conv's bias, its epilogue's bias add, its
    frozen batch_norm as per-channel k and off (computed into scratch arrays once a call,
    _epilogue_steps' own statements), its relu."""
    epi, bufs = fused if fused else (None, {})
    steps = {kind: roles for kind, _, roles in (epi.steps if epi else [])}
    add = str(bufs[steps["add"]["Y"]]) if "add" in steps else "nullptr"
    k = off = "nullptr"
    if "bn" in steps:
        consts = dict(_channel_consts(e, m, None, fused)[0])
        k, off = str(consts["k"]), str(consts["off"])
    b1 = str(bias) if bias is not None else "nullptr"
    relu = "true" if "relu" in steps else "false"
    return f"fl::ChainEpi{{{b1}, {add}, {k}, {off}, {relu}}}"


def _emit_chain(e, x, w, geom):
    """A chain of 1x1 and depthwise convs starting at this conv (fusion.conv_chain), when
    there is one and every link's literal geometry is what the analysis named: a sample at
    a time, its input transposed into channel-last scratch (or, for a head conv the direct
    kernel runs, its [position][channel] result taken with its epilogue), each link's
    runtime/conv_chain.h kernel from one scratch buffer into the other with its epilogue,
    the last result transposed into the chain's NCHW output. Returns whether it emitted
    the chain."""
    got = e.fused_chain("Output")
    if got is None or not all(is_lit(d) for d in x.dims[1:]):
        return False
    chain, links = got
    chw = c0, h0, w0 = tuple(int(d) for d in x.dims[1:])
    plan, biggest = [], c0 * h0 * w0
    for link, (op, attrs, bufs, epi) in zip(chain.links, links):
        filt = bufs["Filter"]
        if len(filt.dims) != 4 or not all(is_lit(d) for d in filt.dims):
            return False
        b = bufs["Bias"]
        geo = _chain_geometry(link.kind, attrs, chw, tuple(int(d) for d in filt.dims))
        if geo is None or b is not None and int(e.prod(b.dims)) != geo[0]:
            return False
        plan.append((link, filt, b, epi, chw, geo))
        chw = geo[:3]
        biggest = max(biggest, chw[0] * chw[1] * chw[2])
    if plan[0][0].kind == "head" and not _direct(e, x, w, 1):
        return False                    # the chain after this conv starts there instead
    out = e.chain_output("Output", chain, [x.dims[0], *(str(d) for d in chw)])
    bufs_ab = [e.scratch([str(biggest)]), e.scratch([str(biggest)])]
    body, j = [], 0
    if plan[0][0].kind != "head":
        body.append(f"fl::chain_to_nhwc({x} + n0 * {c0 * h0 * w0}, {c0}, {h0 * w0}, "
                    f"{bufs_ab[0]});")
    for i, step in enumerate(plan):
        if step[0].kind == "head":
            body.append(_emit_chain_head(e, x, w, geom, step, bufs_ab[0]))
        else:
            body.append(_emit_chain_link(e, i, step, bufs_ab[j % 2], bufs_ab[(j + 1) % 2]))
            j += 1
    cl, hl, wl = chw
    body.append(f"fl::chain_to_nchw({bufs_ab[j % 2]}, {cl}, {hl * wl}, "
                f"{out} + n0 * {cl * hl * wl});")
    e.code(f"for (int64_t n0 = 0; n0 < {x.dims[0]}; ++n0) {{ " + " ".join(body) + " }")
    return True


def _emit_chain_head(e, x, w, geom, step, dst):
    """The head conv of a chain (the direct kernel's; its geometry `geom` declares `g`):
    filter packed once a call; a sample's line: direct_conv, then its grid with the head's
    epilogue into channel-last `dst`."""
    link, _, b, epi, (c, h, wd), (m, oh, ow, _) = step
    fused = (link.epilogue, epi) if link.epilogue else None
    e.code(f"const fl::ChainEpi cepi0 = {_chain_epilogue(e, m, b, fused)};")
    packed, offsets, xp, tmp, ws = _direct_scratch(e, x, w, m)
    e.code(geom)
    e.code(f"fl::dconv_pack({w}, {m}, {int(e.prod(w.dims[1:]))}, {packed}); "
           f"fl::dconv_offsets(g, {offsets});")
    return (f"fl::direct_conv({x} + n0 * {c * h * wd}, {packed}, {offsets}, g, {m}, {xp}, "
            f"n0 == 0, {tmp}); fl::chain_from_grid({tmp}, {oh}, {ow}, {ws}, {m}, cepi0, "
            f"{dst});")


def _emit_chain_link(e, i, step, src, dst):
    """Link i of a chain (a 1x1 or depthwise conv): its epilogue and packed filter once a
    call; a sample's line from channel-last `src` into `dst`."""
    link, filt, b, epi, (c, h, wd), (m, _, _, lgeom) = step
    fused = (link.epilogue, epi) if link.epilogue else None
    e.code(f"const fl::ChainEpi cepi{i} = {_chain_epilogue(e, m, b, fused)};")
    if link.kind == "pw":
        packed = e.scratch([str(-(-m // 16) * 16 * c)])     # chain_pw_packed_floats
        e.code(f"fl::chain_pw_pack({filt}, {m}, {c}, {packed});")
        return f"fl::chain_pointwise({src}, {h * wd}, {c}, {packed}, {m}, {dst}, cepi{i});"
    taps = int(filt.dims[2]) * int(filt.dims[3])
    packed = e.scratch([str(c * taps)])
    e.code(f"fl::chain_dw_pack({filt}, {c}, {taps}, {packed}); "
           f"const fl::ConvGeom cg{i} = {lgeom};")
    return f"fl::chain_depthwise({src}, {packed}, cg{i}, {dst}, cepi{i});"


# Bytes of im2col columns a chunk of the batch may take: the chunk's columns and its gemm
# output stay in the core's L2 (512 KiB here) between im2col, the gemm and the epilogue;
# the whole batch's columns at once (7 MiB for the MNIST CNN's second conv at batch 64)
# went through memory twice.
CHUNK_BYTES = 256 << 10


def chunk_samples(col_floats_per_sample):
    """Samples a chunk of a conv's batch holds: as many as CHUNK_BYTES of columns take, at
    least one (one sample's columns are then already a large gemm's operand)."""
    return max(1, CHUNK_BYTES // (4 * col_floats_per_sample))


# runtime/conv.h's direct kernel (direct_conv): the output positions its micro-kernel
# holds (DCONV_R); its scratch sizes are dconv_xp_floats and dconv_tmp_floats there.
DIRECT_R = 6


# The largest C*kh*kw a conv runs the direct kernel with. A gemm this shallow runs far
# under its peak (the MNIST CNN's first conv, K = 9: 17 GFLOP/s with its im2col, 1.14x
# slower than the direct kernel in alternating rounds), and the direct kernel's tile reads
# all its taps from a few rows of L1. Deeper convs stay with im2col + sgemm: there the
# direct kernel (no channel blocking: a tile reads C rows of the padded planes) was no
# faster on the MNIST CNN's second conv and the ResNet stack, and 2x slower on MobileNet's
# pointwise convs (C planes of 112 x 112 a tile): so also at most DIRECT_MAX_C input
# channels (MobileNet's 32 -> 64 pointwise conv has K = 32).
DIRECT_MAX_K = 32
DIRECT_MAX_C = 4


def _geometry(e, x, w):
    hw, khw = [int(d) for d in x.dims[2:]], [int(d) for d in w.dims[2:]]
    strides, pads, dil, _ = conv_geometry(e.attrs, hw, khw)
    return strides, pads, list(dil)


def _direct(e, x, w, groups):
    """Whether a conv runs conv.h's direct kernel (direct_conv): one group, stride 1 or 2,
    dilation 1, padding not negative, C*kh*kw at most DIRECT_MAX_K and C at most
    DIRECT_MAX_C; each sample's output then comes straight from the padded image (split
    into its stride's phases), without im2col's columns."""
    strides, pads, dil = _geometry(e, x, w)
    return (groups == 1 and set(strides) <= {1, 2} and dil == [1, 1] and min(pads) >= 0
            and int(e.prod(w.dims[1:])) <= DIRECT_MAX_K and int(x.dims[1]) <= DIRECT_MAX_C)


def _direct_wgrad(e, x, w, groups):
    """Whether a conv's filter gradient runs conv.h's direct_conv_s1_wgrad: the direct
    kernel's convs at stride 1 (its padded grid is the stride-1 one; stride 2 takes the
    gemm gradient)."""
    return _direct(e, x, w, groups) and _geometry(e, x, w)[0] == [1, 1]


# Winograd F(2x2, 3x3) (runtime/conv.h wino_*): the fewest input channels a 3x3 stride-1
# conv takes it with (the 16 gemms are [M, C] @ [C, tiles]: shallower ones run under
# sgemm's peak, and the transforms' cost per multiply-add saved grows), and the bytes a
# block of tiles' transformed input and gemm results take (they stay in L2 from the
# input transform through the gemms to the output transform).
WINOGRAD_MIN_C = 64
WINOGRAD_BLOCK_BYTES = 512 << 10


def _winograd(e, x, w, groups):
    """Whether a conv runs Winograd F(2x2, 3x3): a 3x3 filter, one group, stride 1,
    dilation 1, padding not negative, at least WINOGRAD_MIN_C input channels."""
    strides, pads, dil = _geometry(e, x, w)
    return (groups == 1 and [int(d) for d in w.dims[2:]] == [3, 3] and strides == [1, 1]
            and dil == [1, 1] and min(pads) >= 0 and int(x.dims[1]) >= WINOGRAD_MIN_C)


def winograd_block(c, m):
    """Tiles a block of Winograd's gemms takes: its V [16, C, block] and results [16, M,
    block] within WINOGRAD_BLOCK_BYTES, a multiple of 16, at least 16."""
    return max(16, WINOGRAD_BLOCK_BYTES // (4 * 16 * (c + m)) // 16 * 16)


def _emit_winograd(e, x, output, n, bias, fused):
    """The filter transformed once a call; then per block of tiles (numbered over the
    batch) the input transform, 16 gemms U_k [M, C] @ V_k [C, block] and the output
    transform, which applies the conv's epilogue (_epilogue_steps, the same float operations
    on a value or lane by lane on 8 tiles' values) as it writes NCHW."""
    c = int(x.dims[1])
    out, m, oh, ow = output
    w = e.input("Filter")
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    blk = winograd_block(c, m)
    u = e.scratch([str(16 * m * c)])
    xp = e.scratch([str(c * (2 * th + 2) * 2 * (tw + 1) + 16)])     # wino_xp_floats
    v = e.scratch([str(16 * c * (blk + 8))])        # rows of ld = the block's tiles + 8
    r = e.scratch([str(16 * m * (blk + 8))])
    consts, per_value = _channel_consts(e, m, bias, fused)
    fetch = " ".join(f"const float {name} = {arr}[c];" for name, arr in consts)
    tiles = e.mul(n, th * tw)
    e.code(f"fl::wino_filter({w}, {m}, {c}, {u});")
    e.code(f"{{ int64_t wpad = -1; auto wepi = [&](int64_t c, auto v) {{ {fetch} {per_value} "
           f"return v; }}; for (int64_t wt0 = 0; wt0 < {tiles}; wt0 += {blk}) {{ "
           f"const int64_t wtb = {tiles} - wt0 < {blk} ? {tiles} - wt0 : {blk}; "
           f"const int64_t wld = wtb + 8; fl::wino_input({x}, g, wt0, wtb, wld, {xp}, &wpad, {v}); "
           f"for (int64_t wk = 0; wk < 16; ++wk) fl::gemm(false, false, {m}, wtb, {c}, 1.0f, "
           f"{u} + wk * {m * c}, {c}, {v} + wk * {c} * wld, wld, 0.0f, {r} + wk * {m} * wld, "
           f"wld); fl::wino_output({r}, g, {m}, wt0, wtb, wld, {out}, wepi); }} }}")


# A 1x1 conv (stride 1, no padding, one group) is [M, C] @ the sample [C, H*W] with no
# columns to build: the generated code runs one gemm per block of the sample's positions,
# straight from the input into the output (ldb = ldc = H*W), and applies the epilogue to
# the block right after, while its [M, block] results are in L2, instead of a gemm into
# scratch and a second sweep over memory. PW_BLOCK_BYTES bounds a block's input and output
# columns; 0 turns the blocked form off (the im2col path's no-copy chunks then run it).
PW_BLOCK_BYTES = 256 << 10
PW_MIN_BLOCK = 256


def pointwise_block(c, m, hw):
    """Positions a block of a 1x1 conv's gemm takes: its [C + M, block] floats within
    PW_BLOCK_BYTES, at least PW_MIN_BLOCK (a narrower gemm repacks [M, C] too often for
    its work), the sample's positions split into blocks of equal size (a multiple of 16)."""
    blk = max(PW_MIN_BLOCK, PW_BLOCK_BYTES // (4 * (c + m)))
    if blk >= hw:
        return hw
    nblk = -(-hw // blk)
    return -(-(-(-hw // nblk)) // 16) * 16


def _emit_pointwise(e, x, w, output, n, bias, fused):
    """A 1x1 conv a block of positions at a time: the gemm writes the block's [M, block]
    outputs in place in NCHW, then _plane_epilogue runs over each channel's row of it."""
    out, m, hw = output
    c = int(x.dims[1])
    blk = pointwise_block(c, m, hw)
    e.code(f"{{ auto pepi = {_plane_epilogue(bias, fused)}; "
           f"for (int64_t n0 = 0; n0 < {n}; ++n0) for (int64_t j0 = 0; j0 < {hw}; "
           f"j0 += {blk}) {{ const int64_t jb = {hw} - j0 < {blk} ? {hw} - j0 : {blk}; "
           f"float* o = {out} + n0 * {m * hw} + j0; fl::gemm(false, false, {m}, jb, {c}, "
           f"1.0f, {w}, {c}, {x} + n0 * {c * hw} + j0, {hw}, 0.0f, o, {hw}); "
           f"for (int64_t c = 0; c < {m}; ++c) pepi(c, o + c * {hw}, jb); }} }}")


def _identity_columns(e, x, w):
    """Whether im2col of one sample is a copy of it: a 1x1 filter, stride 1, dilation 1,
    no padding (then a chunk of one sample hands the gemm the input itself)."""
    strides, pads, dil = _geometry(e, x, w)
    return ([int(d) for d in w.dims[2:]] == [1, 1] and strides == [1, 1] and dil == [1, 1]
            and not any(pads))


def _depthwise(x, w, groups):
    """Whether a conv is depthwise (one input channel a group, more than one group): then
    it runs conv.h's direct kernel, since each output channel's gemm would have K = kh*kw
    and M = the channel multiplier."""
    return groups > 1 and int(x.dims[1]) == groups and int(w.dims[1]) == 1


def _epilogue_steps(bias, fused):
    """C++ of the conv's epilogue per output value v of channel c: (statements once per
    channel, statements per value): the conv's bias, then the fused steps, in the unfused
    ops' float arithmetic (elementwise_add's x + y, batch_norm's x * k + off with its k and
    off, relu's fmaxnp), so fusing changes no bit."""
    per_channel, per_value, names = [], [], []
    if bias is not None:
        per_value.append(f"v = v + {bias}[c];")
    epi, bufs = (fused[0], fused[1]) if fused else (None, {})
    for kind, _, roles in (epi.steps if epi else []):
        b = {role: bufs[name] for role, name in roles.items()}
        if kind == "add":
            per_value.append(f"v = v + {b['Y']}[c];")
        elif kind == "bn":
            eps = literal(float(epi.epsilon))
            per_channel.append(
                f"const float inv = 1.0f / std::sqrt({b['Variance']}[c] + {eps}); "
                f"const float k = {b['Scale']}[c] * inv; const float off = {b['Bias']}[c] - "
                f"{b['Mean']}[c] * {b['Scale']}[c] * inv;")
            per_value.append("v = v * k + off;")
            names += ["k", "off"]
        else:
            per_value.append("v = fl::fmaxnp(v, 0.0f);")
    return " ".join(per_channel), " ".join(per_value), names


def _epilogue(tmp, out, m, n, hw, bias, fused):
    """C++ writing `out` [N, M, hw] from the gemm's [M, N, hw] (_epilogue_steps per value)."""
    per_channel, per_value, _ = _epilogue_steps(bias, fused)
    return (f"for (int64_t c = 0; c < {m}; ++c) {{ {per_channel} "
            f"for (int64_t b = 0; b < {n}; ++b) {{ const float* src = {tmp} + (c * {n} + b) * "
            f"{hw}; float* dst = {out} + (b * {m} + c) * {hw}; for (int64_t i = 0; i < {hw}; "
            f"++i) {{ float v = src[i]; {per_value} dst[i] = v; }} }} }}")


def _plane_epilogue(bias, fused):
    """A C++ lambda (c, plane, n) applying the conv's epilogue in place to n values of
    output channel c (_epilogue_steps: the unfused ops' float arithmetic), for kernels
    that hand it each plane or block while it is in cache."""
    per_channel, per_value, _ = _epilogue_steps(bias, fused)
    if not per_value:
        return "[](int64_t, float*, int64_t) {}"
    return (f"[&](int64_t c, float* __restrict o, int64_t np_) {{ {per_channel} "
            f"for (int64_t i = 0; i < np_; ++i) {{ float v = o[i]; {per_value} o[i] = v; }} }}")


def _channel_consts(e, m, bias, fused):
    """(the per-channel constants' (name, array) pairs, the per-value steps) of an epilogue
    run over a whole sample at a time: the constants (_epilogue_steps' per-channel
    statements) are computed into arrays once a call, before the sample loop."""
    per_channel, per_value, names = _epilogue_steps(bias, fused)
    if not names:
        return [], per_value
    consts = [(name, e.scratch([str(m)])) for name in names]
    e.code(f"for (int64_t c = 0; c < {m}; ++c) {{ {per_channel} " +
           " ".join(f"{arr}[c] = {name};" for name, arr in consts) + " }")
    return consts, per_value


def _direct_scratch(e, x, w, m):
    """The direct kernel's scratch for M output channels: (packed filter, tap offsets,
    padded phases, the [position][channel] result grid, its row width WS)."""
    c, kh, kw = int(x.dims[1]), int(w.dims[2]), int(w.dims[3])
    sh, sw = _geometry(e, x, w)[0]
    _, _, _, (oh, ow) = conv_geometry(e.attrs, [int(d) for d in x.dims[2:]], [kh, kw])
    k, mp = c * kh * kw, -(-m // 8) * 8
    rh, wp = oh + (kh - 1) // sh, ow + (kw - 1) // sw               # dconv_rh, dconv_ws
    packed = e.scratch([str(mp * k)])
    offsets = e.scratch([str(k)], "int64_t")
    xp = e.scratch([str(c * sh * sw * rh * wp + wp + DIRECT_R + 8)])    # dconv_xp_floats
    tmp = e.scratch([str((oh * wp + DIRECT_R + 8) * mp)])               # dconv_tmp_floats
    return packed, offsets, xp, tmp, wp


def _emit_direct(e, x, w, output, n, bias, fused):
    """conv.h's direct kernel a sample at a time (the filter packed once a call), each
    sample's [position][channel] result written out in NCHW by _direct_epilogue."""
    out, m, oh, ow = output
    c, kh, kw = int(x.dims[1]), int(w.dims[2]), int(w.dims[3])
    k, mp = c * kh * kw, -(-m // 8) * 8
    packed, offsets, xp, tmp, wp = _direct_scratch(e, x, w, m)
    chw = c * int(x.dims[2]) * int(x.dims[3])
    sample = f"({out} + n0 * {m * oh * ow})"
    consts, per_value = _channel_consts(e, m, bias, fused)
    e.code(f"fl::dconv_pack({w}, {m}, {k}, {packed}); fl::dconv_offsets(g, {offsets});")
    e.code(f"for (int64_t n0 = 0; n0 < {n}; ++n0) {{ fl::direct_conv({x} + n0 * {chw}, "
           f"{packed}, {offsets}, g, {m}, {xp}, n0 == 0, {tmp}); "
           + _direct_epilogue(tmp, sample, m, (oh, ow, wp, mp), consts, per_value) + " }")


def _direct_epilogue(tmp, out, m, grid, consts, per_value):
    """C++ writing one sample's `out` [M, oh, ow] from the direct kernel's tmp [oh * wp +
    ow][mp]: per row of the grid and block of 8 positions and 8 channels, a transposed
    load (fl::dconv_load_t), then each channel's 8 values as one vector through the
    per-value steps (_epilogue_steps: the same float operations lane by lane) and stored
    into its NCHW row. `consts` are the per-channel constants' arrays."""
    oh, ow, wp, mp = grid
    fetch = " ".join(f"const float {name} = {arr}[c];" for name, arr in consts)
    return (f"for (int64_t a = 0; a < {oh}; ++a) for (int64_t c0 = 0; c0 < {m}; c0 += 8) "
            f"for (int64_t i0 = 0; i0 < {ow}; i0 += 8) {{ fl::dconv_v8 r[8]; "
            f"fl::dconv_load_t({tmp} + (a * {wp} + i0) * {mp} + c0, {mp}, r); "
            f"for (int64_t cc = 0; cc < 8 && c0 + cc < {m}; ++cc) {{ const int64_t c = c0 + cc; "
            f"{fetch} fl::dconv_v8 v = r[cc]; {per_value} fl::dconv_store({out} + c * "
            f"{oh * ow} + a * {ow} + i0, v, {ow} - i0); }} }}")


@register("conv2d_grad", "cpu")
@register("depthwise_conv2d_grad", "cpu")
def conv2d_grad(e):
    x, w, bias, dout = e.input("Input"), e.input("Filter"), e.input("Bias"), \
        e.input("Output@GRAD")
    e.require_float(x, w, bias, dout)
    geom, groups, m, (oh, ow) = _emit_conv_geometry(e, x, w)
    mg = m // groups
    e.code(geom)
    if _depthwise(x, w, groups):
        dx = e.output("Input@GRAD", x.dims) if e.has_output("Input@GRAD") else None
        dw = e.output("Filter@GRAD", w.dims) if e.has_output("Filter@GRAD") else None
        e.code(f"fl::depthwise_conv_grad({x}, {w}, {dout}, g, {mg}, {dx or 'nullptr'}, "
               f"{dw or 'nullptr'});")
        _bias_grad(e, bias, dout, x.dims[0], m, oh * ow)
        return
    want_dw, want_dx = e.has_output("Filter@GRAD"), e.has_output("Input@GRAD")
    dw = e.output("Filter@GRAD", w.dims) if want_dw else None
    dx = e.output("Input@GRAD", x.dims) if want_dx else None
    if dw is not None and _direct_wgrad(e, x, w, groups):
        # the direct kernel's stride-1 convs: dW from the padded samples, no columns (conv.h)
        c, kh, kw = (int(d) for d in w.dims[1:])
        wp = ow + kw - 1
        xp = e.scratch([str(c * (oh + kh - 1) * wp + wp + DIRECT_R + 8)])  # dconv_xp_floats
        dp = e.scratch([str((oh * wp + 7) // 8 * 8)])                    # dwgrad_dp_floats
        acc = e.scratch([str(m * c * kh * kw)], "double")
        e.code(f"fl::direct_conv_s1_wgrad({x}, {dout}, g, {m}, {xp}, {dp}, {acc}, {dw});")
        dw = None
    if dw is not None or dx is not None:
        _emit_gemm_grad(e, x, w, dout, (groups, m, oh, ow), dw, dx)
    _bias_grad(e, bias, dout, x.dims[0], m, oh * ow)


def _emit_gemm_grad(e, x, w, dout, shape, dw, dx):
    """conv2d_grad's gemms per chunk of the batch (chunk_samples of its columns), so that
    the chunk's Output@GRAD in gemm layout [M, nb*oh*ow], its columns and their gradient
    stay in L2 from one step to the next: per group dW_g (+)= dY_g @ cols_g^T (the first
    chunk's gemm sets dW, the later ones add to it) and dcols_g = W_g^T @ dY_g, then
    col2im into the chunk's samples of dX (conv.h's col2im_flat, a run of the plane a tap,
    where the stride is 1 and the output as wide as the input). The whole batch's
    [M, N*oh*ow] swap and columns (7 MB each for the MNIST CNN's second conv at batch 64)
    went through memory between these steps."""
    groups, m, oh, ow = shape
    n, mg, hw = x.dims[0], m // groups, oh * ow
    ckk = int(e.prod(w.dims[1:]))
    chw = int(e.prod(x.dims[1:]))
    nb = chunk_samples(groups * ckk * hw)
    d = e.scratch([str(m * nb * hw)])
    cols = e.scratch([str(groups * ckk * nb * hw)])
    steps = [f"fl::swap01({dout} + n0 * {m * hw}, {d}, gc.N, {m}, {hw});"]
    if dw is not None:
        steps.append(f"fl::im2col({x} + n0 * {chw}, gc, {cols}); for (int64_t gi = 0; "
                     f"gi < {groups}; ++gi) fl::gemm(false, true, {mg}, {ckk}, nc, 1.0f, "
                     f"{d} + gi * {mg} * nc, nc, {cols} + gi * {ckk} * nc, nc, n0 ? 1.0f : "
                     f"0.0f, {dw} + gi * {mg * ckk}, {ckk});")
    if dx is not None:
        strides, _, _ = _geometry(e, x, w)
        flat = strides == [1, 1] and int(x.dims[3]) == ow
        steps.append(f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(true, false, {ckk}, "
                     f"nc, {mg}, 1.0f, {w} + gi * {mg * ckk}, {ckk}, {d} + gi * {mg} * nc, nc, "
                     f"0.0f, {cols} + gi * {ckk} * nc, nc); fl::"
                     f"{'col2im_flat' if flat else 'col2im'}({cols}, gc, {dx} + n0 * {chw});")
    e.code(f"for (int64_t n0 = 0; n0 < {n}; n0 += {nb}) {{ fl::ConvGeom gc = g; "
           f"gc.N = {n} - n0 < {nb} ? {n} - n0 : {nb}; const int64_t nc = gc.N * {hw}; "
           + " ".join(steps) + " }")
    if dw is not None:               # an empty batch: no chunk set dW
        e.code(f"if ({n} == 0) std::memset({dw}, 0, sizeof(float) * {dw.numel()});")


def _bias_grad(e, bias, dout, n, m, hw):
    """Bias@GRAD: Output@GRAD (NCHW) summed per channel in double."""
    if e.has_output("Bias@GRAD") and bias is not None:
        db = e.output("Bias@GRAD", bias.dims)
        e.code(f"for (int64_t c = 0; c < {m}; ++c) {{ double s = 0; for (int64_t b = 0; "
               f"b < {n}; ++b) for (int64_t i = 0; i < {hw}; ++i) s += {dout}[(b * {m} + c) "
               f"* {hw} + i]; {db}[c] = (float)s; }}")


@register("conv2d_transpose", "cpu")
def conv2d_transpose(e):
    """The kernel's steps: Input as [C, N*h*w], one gemm per group making the columns
    W_g^T @ X_g, col2im into Output (tap by tap, as _col2im adds), then the bias."""
    x, w, bias = e.input("Input"), e.input("Filter"), e.input("Bias")
    e.require_float(x, w, bias)
    geom, groups, c, mg, (oh, ow) = _emit_convt_geometry(e, x, w)
    n, hw = x.dims[0], int(x.dims[2]) * int(x.dims[3])
    m, cg, mgkk = groups * mg, c // groups, e.prod(w.dims[1:])
    out = e.output("Output", [n, str(m), str(oh), str(ow)])
    ncol = e.mul(n, hw)
    xg = e.scratch([str(c), ncol])
    cols = e.scratch([e.mul(groups, mgkk), ncol])
    e.code(geom)
    e.code(f"fl::swap01({x}, {xg}, {n}, {c}, {hw});")
    e.code(f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(true, false, {mgkk}, {ncol}, "
           f"{cg}, 1.0f, {w} + gi * {cg} * {mgkk}, {mgkk}, {xg} + gi * {cg} * {ncol}, "
           f"{ncol}, 0.0f, {cols} + gi * {mgkk} * {ncol}, {ncol});")
    e.code(f"fl::col2im({cols}, g, {out});")
    if bias is not None:
        e.code(f"for (int64_t i = 0; i < {out.numel()}; ++i) "
               f"{out}[i] = {out}[i] + {bias}[(i / {oh * ow}) % {m}];")


@register("conv2d_transpose_grad", "cpu")
def conv2d_transpose_grad(e):
    """The kernel's steps: im2col of Output@GRAD at Input's positions, per group dX_g =
    W_g @ cols_g and dW_g = X_g @ cols_g^T (gemms), dBias summed in double."""
    x, w, bias, dout = e.input("Input"), e.input("Filter"), e.input("Bias"), \
        e.input("Output@GRAD")
    e.require_float(x, w, bias, dout)
    geom, groups, c, mg, (oh, ow) = _emit_convt_geometry(e, x, w)
    n, hw = x.dims[0], int(x.dims[2]) * int(x.dims[3])
    m, cg, mgkk = groups * mg, c // groups, e.prod(w.dims[1:])
    check_dims(e, dout, [n, str(m), str(oh), str(ow)], "Output")
    ncol = e.mul(n, hw)
    cols = e.scratch([e.mul(groups, mgkk), ncol])
    e.code(geom)
    e.code(f"fl::im2col({dout}, g, {cols});")
    if e.has_output("Input@GRAD"):
        tmp = e.scratch([str(c), ncol])
        dx = e.output("Input@GRAD", x.dims)
        e.code(f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(false, false, {cg}, "
               f"{ncol}, {mgkk}, 1.0f, {w} + gi * {cg} * {mgkk}, {mgkk}, {cols} + gi * "
               f"{mgkk} * {ncol}, {ncol}, 0.0f, {tmp} + gi * {cg} * {ncol}, {ncol});")
        e.code(f"fl::swap01({tmp}, {dx}, {c}, {n}, {hw});")
    if e.has_output("Filter@GRAD"):
        xg = e.scratch([str(c), ncol])
        dw = e.output("Filter@GRAD", w.dims)
        e.code(f"fl::swap01({x}, {xg}, {n}, {c}, {hw});")
        e.code(f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(false, true, {cg}, "
               f"{mgkk}, {ncol}, 1.0f, {xg} + gi * {cg} * {ncol}, {ncol}, {cols} + gi * "
               f"{mgkk} * {ncol}, {ncol}, 0.0f, {dw} + gi * {cg} * {mgkk}, {mgkk});")
    if e.has_output("Bias@GRAD") and bias is not None:
        db = e.output("Bias@GRAD", bias.dims)
        e.code(f"for (int64_t c = 0; c < {m}; ++c) {{ double s = 0; for (int64_t b = 0; "
               f"b < {n}; ++b) for (int64_t i = 0; i < {oh * ow}; ++i) s += {dout}[(b * {m} "
               f"+ c) * {oh * ow} + i]; {db}[c] = (float)s; }}")


@register("pool2d", "cpu")
def pool2d(e):
    """Each window's taps in the kernel's order (rows, then columns): the first maximum
    (NaN wins, as np.maximum's), or the sum of a separable average (columns of each row
    summed, then the rows) divided as the kernel divides. Windows that are all whole (in
    NCHW: every one, or the interior of a padded pooling) run conv.h's direct loops, the
    others a loop over tables of their rows and columns; NHWC walks the same planes with
    a channel stride."""
    x = e.input("X")
    e.require_float(x)
    lay = PoolLayout(e, x, e.attrs)
    tables, (oh, ow) = _emit_pool_tables(e, e.attrs, lay.h, lay.w)
    out = e.output("Out", lay.dims(oh, ow))
    regular = None if lay.last else regular_pool(e.attrs, lay.h, lay.w)
    if regular is not None:          # every window whole: the direct loops of conv.h
        e.code(regular[0])
        e.code(_direct_pool(e, x, out, lay, oh * ow, 0, regular[1]))
        return
    skip = ""
    inner = None if lay.last else pool_interior(e.attrs, lay.h, lay.w)
    if inner is not None:            # padding: the direct loops over the whole windows
        geom, at, (a0, a1, b0, b1), area = inner
        e.code(geom)
        e.code(_direct_pool(e, x, out, lay, oh * ow, at, area))
        skip = f"if (a >= {a0} && a < {a1} && b >= {b0} && b < {b1}) continue; "
    if e.attr("pooling_type") == "max":
        body = ("float v = -INFINITY; bool any = false; for (int64_t i = hs[a]; i < he[a]; "
                "++i) for (int64_t j = ws[b]; j < we[b]; ++j) { const float t = "
                "img[(i * W + j) * ES]; if (!any || t > v || t != t) { v = t; any = true; } }")
    else:
        body = ("float v = 0.0f; for (int64_t j = ws[b]; j < we[b]; ++j) { float col = 0.0f; "
                "for (int64_t i = hs[a]; i < he[a]; ++i) col += img[(i * W + j) * ES]; "
                "v += col; } v = v / div[a * OW + b];")
    e.code(tables)
    e.code(lay.planes(ow, ("const float* img", x, lay.h * lay.w),
                      ("float* o", out, oh * ow)) +
           f"for (int64_t a = 0; a < {oh}; ++a) for (int64_t b = 0; b < OW; ++b) {{ "
           f"{skip}{body} o[(a * OW + b) * ES] = v; }} }}")


def _direct_pool(e, x, out, lay, ohw, at, area):
    """C++ running conv.h's direct pooling loop (geometry `pg`) on every NCHW plane, its
    first output `at` into the output plane."""
    call = ("fl::max_pool_plane(img, o, pg);" if e.attr("pooling_type") == "max" else
            f"fl::avg_pool_plane(img, o, pg, {float(area)!r}f);")
    return (f"for (int64_t p = 0; p < {lay.n_planes}; ++p) {{ const float* img = {x} + "
            f"p * {lay.h * lay.w}; float* o = {out} + p * {ohw} + {at}; {call} }}")


@register("pool2d_grad", "cpu")
def pool2d_grad(e):
    """max: each window's gradient to its first maximum, summed per position in double
    (the kernel's bincount); avg: spread over the window divided as the forward. Max over
    disjoint whole windows (conv.h's max_pool_plane_grad_disjoint) may write the relu_grad
    after it in its place (fusion.relu_grad_into_gradient)."""
    x, dout = e.input("X"), e.input("Out@GRAD")
    e.require_float(x, dout)
    lay = PoolLayout(e, x, e.attrs)
    tables, (oh, ow) = _emit_pool_tables(e, e.attrs, lay.h, lay.w)
    hw = lay.h * lay.w
    regular = None if lay.last else regular_pool(e.attrs, lay.h, lay.w)
    if e.attr("pooling_type") == "max" and regular is not None and regular[2]:
        # disjoint whole windows: one contribution a position; a relu_grad over X (the
        # relu's Out) that alone reads X@GRAD applied at the window's maximum
        relu = e.fused_relu_grad("X@GRAD", x.dims, e.op.input("X")[0])
        dx = relu if relu is not None else e.output("X@GRAD", x.dims)
        e.code(regular[0])
        e.code(f"for (int64_t p = 0; p < {lay.n_planes}; ++p) fl::max_pool_plane_grad_"
               f"disjoint({x} + p * {hw}, {dout} + p * {oh * ow}, {dx} + p * {hw}, pg, "
               f"{'true' if relu is not None else 'false'});")
        return
    dx = e.output("X@GRAD", x.dims)
    e.code(tables)
    if e.attr("pooling_type") == "max":
        # the kernel starts each window at its first tap, padding (-inf) or not, and takes
        # a later tap only if strictly greater: a NaN first tap keeps the gradient, a NaN
        # after padding never gets it
        ((_, vh), (_, vw)), _, _ = pool_windows(e.attrs, lay.h, lay.w)
        acc = e.scratch(x.dims, "double")
        e.code(" ".join(f"static const bool {name}[] = {{{', '.join(map(str, flags))}}};"
                        for name, flags in (("h0v", vh[:, 0].astype(int)),
                                            ("w0v", vw[:, 0].astype(int)))))
        e.code(f"std::memset({acc}, 0, sizeof(double) * {acc.numel()});")
        e.code(lay.planes(ow, ("const float* img", x, hw), ("double* g", acc, hw),
                          ("const float* d", dout, oh * ow)) +
               f"for (int64_t a = 0; a < {oh}; ++a) for (int64_t b = 0; b < OW; ++b) {{ "
               "if (he[a] <= hs[a] || we[b] <= ws[b]) continue; int64_t at = hs[a] * W + "
               "ws[b]; float v = h0v[a] && w0v[b] ? img[at * ES] : -INFINITY; "
               "for (int64_t i = hs[a]; i < he[a]; ++i) for (int64_t j = ws[b]; j < we[b]; "
               "++j) { const float t = img[(i * W + j) * ES]; if (t > v) { v = t; "
               "at = i * W + j; } } g[at * ES] += (double)d[(a * OW + b) * ES]; } }")
        e.code(f"for (int64_t i = 0; i < {dx.numel()}; ++i) {dx}[i] = (float){acc}[i];")
    else:
        e.code(f"std::memset({dx}, 0, sizeof(float) * {dx.numel()});")
        e.code(lay.planes(ow, ("float* g", dx, hw), ("const float* d", dout, oh * ow)) +
               f"for (int64_t a = 0; a < {oh}; ++a) for (int64_t b = 0; b < OW; ++b) {{ "
               "const float v = d[(a * OW + b) * ES] / div[a * OW + b]; "
               "for (int64_t i = hs[a]; i < he[a]; ++i) for (int64_t j = ws[b]; j < we[b]; "
               "++j) g[(i * W + j) * ES] += v; } }")


@register("max_pool2d_with_index", "cpu")
def max_pool2d_with_index(e):
    """Each window's first maximum (strictly greater replaces, as the kernel's tap by
    tap scan) and its position i * W + j in the plane as Mask."""
    x = e.input("X")
    e.require_float(x)
    attrs = pool_with_index_attrs(e.attrs)
    lay = PoolLayout(e, x, attrs)
    tables, (oh, ow) = _emit_pool_tables(e, attrs, lay.h, lay.w)
    out = e.output("Out", lay.dims(oh, ow))
    mask = e.output("Mask", lay.dims(oh, ow), "int32_t") if e.has_output("Mask") else None
    e.code(tables)
    pointers = [("const float* img", x, lay.h * lay.w), ("float* o", out, oh * ow)]
    if mask is not None:
        pointers.append(("int32_t* mk", mask, oh * ow))
    e.code(lay.planes(ow, *pointers) +
           f"for (int64_t a = 0; a < {oh}; ++a) for (int64_t b = 0; b < OW; ++b) {{ "
           "float v = -INFINITY; int64_t at = -1; for (int64_t i = hs[a]; i < he[a]; ++i) "
           "for (int64_t j = ws[b]; j < we[b]; ++j) { const float t = img[i * W + j]; "
           "if (at < 0 || t > v) { v = t; at = i * W + j; } } o[a * OW + b] = v; "
           + ("mk[a * OW + b] = (int32_t)at; " if mask else "") + "} }")


@register("max_pool2d_with_index_grad", "cpu")
def max_pool2d_with_index_grad(e):
    """Each Out@GRAD element added to the X position its Mask names, in double (the
    kernel's bincount), then rounded to float."""
    x, mask, dout = e.input("X"), e.input("Mask"), e.input("Out@GRAD")
    e.require_float(x, dout)
    if mask.ctype != "int32_t":
        e.fail(f"Mask is {mask.ctype}")
    lay = PoolLayout(e, x, {})
    oh, ow = dout.dims[2], dout.dims[3]
    if not (e.is_lit(oh) and e.is_lit(ow)):
        e.fail("output size not known when compiling")
    e.same_dims(mask, dout)
    dx = e.output("X@GRAD", x.dims)
    acc = e.scratch(x.dims, "double")
    hw, ohw = lay.h * lay.w, int(oh) * int(ow)
    e.code(f"std::memset({acc}, 0, sizeof(double) * {acc.numel()});")
    e.code(f"for (int64_t p = 0; p < {lay.n_planes}; ++p) for (int64_t q = 0; q < {ohw}; "
           f"++q) {{ const int64_t at = {mask}[p * {ohw} + q]; if (at >= 0 && at < {hw}) "
           f"{acc}[p * {hw} + at] += (double){dout}[p * {ohw} + q]; }}")
    e.code(f"for (int64_t i = 0; i < {dx.numel()}; ++i) {dx}[i] = (float){acc}[i];")


class PoolLayout:
    """Where compiled pooling finds the planes of X (4-D, H and W known when compiling):
    plane p (of N*C) of NCHW starts at p*H*W, its elements one apart; of NHWC, (n, c) =
    (p / C, p % C) starts at n*H*W*C + c, its elements C apart (ES)."""

    def __init__(self, e, x, attrs):
        if x.ndim != 4:
            e.fail(f"X is {x.ndim}-D")
        self.last = channel_last(attrs.get("data_format", "NCHW"))
        self.n, self.c, h, w = ((x.dims[0], x.dims[3], x.dims[1], x.dims[2]) if self.last
                                else x.dims)
        if not (e.is_lit(h) and e.is_lit(w)):
            e.fail("image size not known when compiling")
        self.h, self.w = int(h), int(w)
        self.n_planes = e.mul(self.n, self.c)

    def dims(self, oh, ow):
        """The dims of a pooled output in X's layout."""
        return ([self.n, str(oh), str(ow), self.c] if self.last
                else [self.n, self.c, str(oh), str(ow)])

    def planes(self, ow, *pointers):
        """C++ opening a loop over the planes (the caller closes its brace) that declares
        W, OW, ES and, for each (declaration, Buf, plane size) of `pointers`, that pointer
        to the Buf's plane p."""
        decls = " ".join(
            f"{decl} = {buf} + (p / ES) * {size} * ES + p % ES;" if self.last else
            f"{decl} = {buf} + p * {size};" for decl, buf, size in pointers)
        return (f"const int64_t W = {self.w}, OW = {ow}, ES = {self.c if self.last else 1}; "
                f"for (int64_t p = 0; p < {self.n_planes}; ++p) {{ {decls} ")
