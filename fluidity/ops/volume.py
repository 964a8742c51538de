"""Sliding-window ops over N-d inputs [N, C, *spatial] (Fluid 1.x): conv3d,
conv3d_transpose, pool3d (sliding, global and adaptive windows), max_pool3d_with_index,
and unfold (im2col of 2-D images); trilinear_interp is with the resize family (ops/interp.py).

One patch map serves them all: for every output position and kernel offset, the flat
spatial index of the input element it reads (-1 in the padding). A convolution is an
einsum over the gathered patches; its input gradient adds the patch gradients back through
the same map; a transposed convolution is that adjoint run forward.
"""
import numpy as np

from ..errors import ExecutionError, ShapeError
from .common import bilinear_double_grad, channel_last
from .conv import out_size, pool_out_size, resolve_padding
from .nn import interp_matrix
from .registry import In, OpDef, Out, ints


def patch_map(spatial, ksize, strides, pads, dilations, ceil_mode=False, pool=False):
    """int64 [prod(out), prod(k)]: the flat input index each (output position, kernel
    offset) reads, -1 in the padding (and, with ceil_mode, past the input's end). pool:
    the output extents are pooling's (a window a little wider than the input still
    gives one output, see conv.pool_out_size)."""
    outs = [pool_out_size(n, k, s, *p, ceil_mode) if pool else
            out_size(n, k, s, *p, d, ceil_mode)
            for n, k, s, p, d in zip(spatial, ksize, strides, pads, dilations)]
    if any(o <= 0 for o in outs):
        raise ShapeError(f"the window {list(ksize)} (dilations {list(dilations)}) does not "
                         f"fit the padded input {list(spatial)}")
    grids = []
    for n, k, s, p, d, o in zip(spatial, ksize, strides, pads, dilations, outs):
        pos = (np.arange(o) * s)[:, None] + (np.arange(k) * d)[None, :] - p[0]   # [o, k]
        grids.append(np.where((pos >= 0) & (pos < n), pos, -1))
    nd = len(spatial)
    idx = np.zeros([1] * (2 * nd), np.int64)
    valid = np.ones([1] * (2 * nd), bool)
    stride = 1
    for i in reversed(range(nd)):
        g = grids[i]
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = g.shape
        g = g.reshape(shape)
        idx = idx + np.maximum(g, 0) * stride
        valid = valid & (g >= 0)
        stride *= spatial[i]
    m = np.where(valid, idx, -1)
    return m.reshape(int(np.prod(outs)), int(np.prod(ksize))), outs


def gather_patches(x, m, fill=0.0):
    """x [N, C, *S] -> [N, C, O, K] through patch map m."""
    n, c = x.shape[:2]
    flat = x.reshape(n, c, -1)
    cols = flat[:, :, np.maximum(m, 0)]
    return np.where(m >= 0, cols, np.asarray(fill, x.dtype))


def scatter_patches(cols, m, spatial):
    """The adjoint of gather_patches: [N, C, O, K] summed into [N, C, *S]."""
    n, c = cols.shape[:2]
    out = np.zeros((n, c, int(np.prod(spatial))), cols.dtype)
    keep = m >= 0
    np.add.at(out, (slice(None), slice(None), m[keep]), cols[:, :, keep])
    return out.reshape((n, c) + tuple(spatial))


def conv_plan(attrs, spatial, ksize):
    """(strides, pads [(before, after)] per dim, dilations) of a 3-D convolution window over
    `spatial`, after Paddle's padding_algorithm (EXPLICIT / SAME / VALID)."""
    strides = [int(v) for v in attrs["strides"]]
    flat, dil = resolve_padding(attrs.get("padding_algorithm", "EXPLICIT"), list(spatial),
                                list(ksize), strides, attrs["paddings"],
                                attrs.get("dilations", [1, 1, 1]))
    return strides, [(flat[2 * i], flat[2 * i + 1]) for i in range(len(ksize))], list(dil)


def _grouped(groups, c, f):
    if c % groups or f % groups:
        raise ShapeError(f"channels {c} and filters {f} must be divisible by groups {groups}")
    return c // groups, f // groups


def _to_first(x, last):
    """NDHWC -> NCDHW view (the kernels below work channel-first)."""
    return np.moveaxis(x, -1, 1) if last else x


def _to_layout(x, last):
    return np.ascontiguousarray(np.moveaxis(x, 1, -1)) if last else x


def _conv_attrs(ctx):
    return {a: ctx.attr(a) for a in ("strides", "paddings", "dilations", "padding_algorithm",
                                     "output_size", "output_padding") if ctx.opdef.declares(a)}


def _check_format(op, fmt):
    """Whether `fmt` puts channels last; Paddle reads NCHW / NHWC of a 5-D op as NCDHW /
    NDHWC (one DataLayout for both ranks)."""
    if fmt not in ("NCDHW", "NDHWC", "NCHW", "NHWC", "AnyLayout"):
        raise ShapeError(f"{op}: data_format must be 'NCDHW' or 'NDHWC', got {fmt!r}")
    return channel_last(fmt)


# --- conv3d ---------------------------------------------------------------------------------
class Conv3d(OpDef):
    type = "conv3d"
    inputs = (In("Input"), In("Filter"), In("Bias", dispensable=True))
    outputs = (Out("Output"),)
    attrs = {"strides": ints([1, 1, 1]), "paddings": ints([0, 0, 0]),
             "dilations": ints([1, 1, 1]), "groups": 1, "use_cudnn": True,
             "padding_algorithm": "EXPLICIT", "data_format": "NCDHW"}
    share_lod = "Input"
    lod_outputs = ("Output",)
    doc = ("Output = the 3-D convolution of Input [N, C, D, H, W] (NDHWC by data_format) with "
           "Filter [F, C/g, kd, kh, kw]; paddings 3 or 6 values, or padding_algorithm SAME / "
           "VALID.")

    @staticmethod
    def infer_shape(ctx):
        xs, ws = ctx.input_shape("Input"), ctx.input_shape("Filter")
        if len(xs) != 5 or len(ws) != 5:
            ctx.fail(f"Input and Filter must be 5-D, got {xs} and {ws}")
        try:
            last = _check_format("conv3d", ctx.attr("data_format"))
            xs = [xs[0], xs[4]] + xs[1:4] if last else xs
            st, pads, dil = conv_plan(_conv_attrs(ctx), xs[2:], ws[2:])
        except ShapeError as e:
            ctx.fail(str(e))
        groups = ctx.attr("groups")
        if xs[1] >= 0 and ws[1] >= 0 and xs[1] != ws[1] * groups:
            ctx.fail(f"Input {xs} has {xs[1]} channels but Filter {ws} with groups={groups} "
                     f"expects {ws[1] * groups}")
        out = [out_size(n, kk, s, *p, d)
               for n, kk, s, p, d in zip(xs[2:], ws[2:], st, pads, dil)]
        if any(0 <= n and o <= 0 for n, o in zip(xs[2:], out)):
            ctx.fail(f"output size {out} is not positive")
        out = [xs[0], ws[0]] + out
        ctx.set_output("Output", [out[0]] + out[2:] + [out[1]] if last else out,
                       ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last = attrs["groups"], _check_format("conv3d", attrs["data_format"])

        def kernel(x, w, bias):
            x = _to_first(x, last)
            st, pads, dil = conv_plan(attrs, x.shape[2:], w.shape[2:])
            m, outs = patch_map(x.shape[2:], w.shape[2:], st, pads, dil)
            cg, fg = _grouped(groups, x.shape[1], w.shape[0])
            if w.shape[1] != cg:
                raise ShapeError(f"conv3d: Input {list(x.shape)} with groups={groups} does not "
                                 f"fit Filter {list(w.shape)}")
            cols = gather_patches(x, m)
            wf = w.reshape(w.shape[0], cg, -1)
            out = np.concatenate([np.einsum("ncok,fck->nfo", cols[:, g * cg:(g + 1) * cg],
                                            wf[g * fg:(g + 1) * fg]) for g in range(groups)], 1)
            out = out.reshape((x.shape[0], w.shape[0]) + tuple(outs))
            if bias is not None:
                out = out + bias.reshape(1, -1, 1, 1, 1)
            return _to_layout(out.astype(x.dtype), last)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "conv3d_grad", {"Input": g.input("Input"), "Filter": g.input("Filter"),
                        "Output@GRAD": g.output_grad("Output")},
        {"Input@GRAD": g.input_grad("Input"), "Filter@GRAD": g.input_grad("Filter")},
        g.attrs()))


class Conv3dGrad(OpDef):
    type = "conv3d_grad"
    inputs = (In("Input"), In("Filter"), In("Output@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("Filter@GRAD", dispensable=True))
    attrs = Conv3d.attrs
    infer_shape = None
    share_lod = None
    grad = bilinear_double_grad("conv3d", "Input", "Filter", "Output")   # conv3d_grad_grad

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last = attrs["groups"], _check_format("conv3d", attrs["data_format"])

        def kernel(x, w, dout):
            x, dout = _to_first(x, last), _to_first(dout, last)
            st, pads, dil = conv_plan(attrs, x.shape[2:], w.shape[2:])
            m, _ = patch_map(x.shape[2:], w.shape[2:], st, pads, dil)
            cg, fg = _grouped(groups, x.shape[1], w.shape[0])
            cols = gather_patches(x, m)
            wf = w.reshape(w.shape[0], cg, -1)
            d = dout.reshape(dout.shape[0], dout.shape[1], -1)
            dcols = np.concatenate([np.einsum("nfo,fck->ncok", d[:, g * fg:(g + 1) * fg],
                                              wf[g * fg:(g + 1) * fg]) for g in range(groups)], 1)
            dw = np.concatenate([np.einsum("nfo,ncok->fck", d[:, g * fg:(g + 1) * fg],
                                           cols[:, g * cg:(g + 1) * cg]) for g in range(groups)],
                                0)
            dx = scatter_patches(dcols, m, x.shape[2:]).astype(x.dtype)
            return _to_layout(dx, last), dw.reshape(w.shape).astype(w.dtype)
        return kernel


def transpose_out_spatial(xs, k, attrs):
    """(output spatial size, strides, pads, dilations) of conv3d_transpose of spatial size
    `xs` with window `k` (public: the code generator sizes its output by it)."""
    st, pads, dil = conv_plan(attrs, xs, k)
    sizes = [(n - 1) * s - p[0] - p[1] + d * (kk - 1) + 1 if n >= 0 else -1
             for n, s, p, d, kk in zip(xs, st, pads, dil, k)]
    if attrs.get("output_size"):
        sizes = [int(v) for v in attrs["output_size"]]
    elif attrs.get("output_padding"):
        sizes = [n + int(op) if n >= 0 else -1
                 for n, op in zip(sizes, attrs["output_padding"])]
    return sizes, st, pads, dil


# --- conv3d_transpose -------------------------------------------------------------------------
class Conv3dTranspose(OpDef):
    type = "conv3d_transpose"
    inputs = (In("Input"), In("Filter"), In("Bias", dispensable=True))
    outputs = (Out("Output"),)
    attrs = {"strides": ints([1, 1, 1]), "paddings": ints([0, 0, 0]),
             "dilations": ints([1, 1, 1]), "groups": 1, "output_size": ints(),
             "output_padding": ints(), "use_cudnn": True, "padding_algorithm": "EXPLICIT",
             "data_format": "NCDHW"}
    share_lod = None
    doc = ("Output = conv3d's input gradient of Input (its transpose): Filter [C, F/g, k...], "
           "Output size (S - 1) * stride - pads + dilation * (k - 1) + 1 (or output_size); "
           "NDHWC by data_format; padding_algorithm SAME / VALID as conv3d's.")

    @staticmethod
    def infer_shape(ctx):
        xs, ws = ctx.input_shape("Input"), ctx.input_shape("Filter")
        if len(xs) != 5 or len(ws) != 5:
            ctx.fail(f"Input and Filter must be 5-D, got {xs} and {ws}")
        try:
            last = _check_format("conv3d_transpose", ctx.attr("data_format"))
            xs = [xs[0], xs[4]] + xs[1:4] if last else xs
            out, _, _, _ = transpose_out_spatial(xs[2:], ws[2:], _conv_attrs(ctx))
        except ShapeError as e:
            ctx.fail(str(e))
        if xs[1] >= 0 and ws[0] >= 0 and xs[1] != ws[0]:
            ctx.fail(f"Input {xs} has {xs[1]} channels but Filter {ws} expects {ws[0]}")
        f = ws[1] * ctx.attr("groups") if ws[1] >= 0 else -1
        ctx.set_output("Output", [xs[0]] + out + [f] if last else [xs[0], f] + out,
                       ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        last = _check_format("conv3d_transpose", attrs["data_format"])

        def kernel(x, w, bias):
            x = _to_first(x, last)
            spatial, st, pads, dil = transpose_out_spatial(x.shape[2:], w.shape[2:], attrs)
            m, outs = patch_map(spatial, w.shape[2:], st, pads, dil)
            if list(outs) != list(x.shape[2:]):
                raise ExecutionError(f"conv3d_transpose: output size {spatial} does not give "
                                     f"back the input's {list(x.shape[2:])}")
            groups = attrs["groups"]
            cg, fg = _grouped(groups, w.shape[0], w.shape[1] * groups)
            if x.shape[1] != w.shape[0]:
                raise ShapeError(f"conv3d_transpose: Input {list(x.shape)} has {x.shape[1]} "
                                 f"channels but Filter {list(w.shape)} expects {w.shape[0]}")
            wf = w.reshape(w.shape[0], w.shape[1], -1)
            xf = x.reshape(x.shape[0], x.shape[1], -1)
            cols = np.concatenate([np.einsum("nco,cfk->nfok", xf[:, g * cg:(g + 1) * cg],
                                             wf[g * cg:(g + 1) * cg]) for g in range(groups)], 1)
            out = scatter_patches(cols, m, spatial)
            if bias is not None:
                out = out + bias.reshape(1, -1, 1, 1, 1)
            return _to_layout(out.astype(x.dtype), last)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "conv3d_transpose_grad", {"Input": g.input("Input"), "Filter": g.input("Filter"),
                                  "Output@GRAD": g.output_grad("Output")},
        {"Input@GRAD": g.input_grad("Input"), "Filter@GRAD": g.input_grad("Filter")},
        g.attrs()))


class Conv3dTransposeGrad(OpDef):
    type = "conv3d_transpose_grad"
    inputs = (In("Input"), In("Filter"), In("Output@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("Filter@GRAD", dispensable=True))
    attrs = Conv3dTranspose.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        groups = attrs["groups"]
        last = _check_format("conv3d_transpose", attrs["data_format"])

        def kernel(x, w, dout):
            # the transpose's input gradient is conv3d of dout; its filter gradient is
            # conv3d's filter gradient with the roles of input and output swapped
            x, dout = _to_first(x, last), _to_first(dout, last)
            _, st, pads, dil = transpose_out_spatial(x.shape[2:], w.shape[2:], attrs)
            m, _ = patch_map(dout.shape[2:], w.shape[2:], st, pads, dil)
            cg, fg = _grouped(groups, w.shape[0], w.shape[1] * groups)
            cols = gather_patches(dout, m)                         # [N, F, O=x's S, K]
            wf = w.reshape(w.shape[0], w.shape[1], -1)
            xf = x.reshape(x.shape[0], x.shape[1], -1)
            dx = np.concatenate([np.einsum("nfok,cfk->nco", cols[:, g * fg:(g + 1) * fg],
                                           wf[g * cg:(g + 1) * cg]) for g in range(groups)], 1)
            dw = np.concatenate([np.einsum("nco,nfok->cfk", xf[:, g * cg:(g + 1) * cg],
                                           cols[:, g * fg:(g + 1) * fg]) for g in range(groups)],
                                0)
            return (_to_layout(dx.reshape(x.shape).astype(x.dtype), last),
                    dw.reshape(w.shape).astype(w.dtype))
        return kernel


# --- pool3d ---------------------------------------------------------------------------------
def adaptive_map(spatial, outs):
    """Patch map of adaptive pooling: output cell i of a dim of size n covers [floor(i * n /
    o), ceil((i + 1) * n / o)); cells differ in size, so the map is as wide as the largest
    and -1 past a cell's end."""
    grids = []
    for n, o in zip(spatial, outs):
        if o <= 0:
            raise ShapeError(f"adaptive pooling: output size {list(outs)} must be positive")
        i = np.arange(o)
        start, end = (i * n) // o, -((-(i + 1) * n) // o)
        k = int((end - start).max())
        pos = start[:, None] + np.arange(k)[None, :]
        grids.append(np.where(pos < end[:, None], pos, -1))
    nd = len(spatial)
    idx = np.zeros([1] * (2 * nd), np.int64)
    valid = np.ones([1] * (2 * nd), bool)
    stride = 1
    for i in reversed(range(nd)):
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = grids[i].shape
        g = grids[i].reshape(shape)
        idx = idx + np.maximum(g, 0) * stride
        valid = valid & (g >= 0)
        stride *= spatial[i]
    m = np.where(valid, idx, -1)
    return m.reshape(int(np.prod(outs)), -1), list(outs)


def pool_pads(spatial, attrs):
    """[(before, after)] per dim of a sliding 3-D pooling, after padding_algorithm."""
    flat, _ = resolve_padding(attrs.get("padding_algorithm", "EXPLICIT"), list(spatial),
                              list(attrs["ksize"]), list(attrs["strides"]), attrs["paddings"],
                              [1, 1, 1])
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(3)]


def pool_map(spatial, attrs, op):
    """The patch map and output size of a 3-D pooling's windows: global, adaptive (ksize is
    the output size) or sliding (ceil_mode: a last, partial window where one starts inside
    the padded input)."""
    if attrs["global_pooling"] and attrs["adaptive"]:
        return adaptive_map(spatial, list(spatial))    # Fluid: ksize = the volume: identity
    if attrs["global_pooling"]:
        return patch_map(spatial, spatial, [1, 1, 1], [(0, 0)] * 3, [1, 1, 1])
    if attrs["adaptive"]:
        return adaptive_map(spatial, attrs["ksize"])
    return patch_map(spatial, attrs["ksize"], attrs["strides"], pool_pads(spatial, attrs),
                     [1, 1, 1], bool(attrs.get("ceil_mode")), pool=True)


def pool_out_shape(spatial, ctx):
    # Fluid 1.8: global pooling sets ksize to the input's dims; adaptive then makes ksize
    # the output size (so global + adaptive keeps the input's size)
    if ctx.attr("global_pooling"):
        return list(spatial) if ctx.attr("adaptive") else [1, 1, 1]
    if ctx.attr("adaptive"):
        return list(ctx.attr("ksize"))
    attrs = {a: ctx.attr(a) for a in ("ksize", "strides", "paddings", "padding_algorithm",
                                      "ceil_mode") if ctx.opdef.declares(a)}
    try:
        pads = pool_pads(spatial, attrs)
    except ShapeError as e:
        ctx.fail(str(e))
    ceil = bool(attrs.get("ceil_mode"))
    return [pool_out_size(n, k, s, *p, ceil) for n, k, s, p in
            zip(spatial, ctx.attr("ksize"), ctx.attr("strides"), pads)]


class Pool3d(OpDef):
    type = "pool3d"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"pooling_type": "max", "ksize": ints(), "global_pooling": False,
             "strides": ints([1, 1, 1]), "paddings": ints([0, 0, 0]), "exclusive": True,
             "adaptive": False, "ceil_mode": False, "use_cudnn": True,
             "padding_algorithm": "EXPLICIT", "data_format": "NCDHW"}
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = ("Max or average pooling of X [N, C, D, H, W] (NDHWC with data_format NDHWC) over "
           "ksize windows (global_pooling: the whole volume; adaptive: ksize is the output "
           "size); `exclusive` averages over the unpadded elements only.")

    @staticmethod
    def _plan(spatial, attrs):
        return pool_map(spatial, attrs, "pool3d")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 5:
            ctx.fail(f"X must be 5-D, got {xs}")
        if channel_last(ctx.attr("data_format")):      # NDHWC
            out = [xs[0]] + pool_out_shape(xs[1:4], ctx) + [xs[4]]
        else:
            out = xs[:2] + pool_out_shape(xs[2:], ctx)
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        kind, excl = attrs["pooling_type"], attrs["exclusive"]
        if kind not in ("max", "avg"):
            raise ShapeError(f"pool3d: pooling_type must be max or avg, got {kind}")
        last = channel_last(attrs["data_format"])

        def kernel(x):
            x = np.moveaxis(x, -1, 1) if last else x
            m, outs = cls._plan(x.shape[2:], attrs)
            shape = x.shape[:2] + tuple(outs)
            if kind == "max":
                out = gather_patches(x, m, -np.inf).max(axis=-1).reshape(shape)
            else:
                total = gather_patches(x, m).sum(axis=-1)
                count = (m >= 0).sum(axis=-1) if excl or attrs["adaptive"] else m.shape[1]
                out = (total / count).astype(x.dtype).reshape(shape)
            return np.ascontiguousarray(np.moveaxis(out, 1, -1)) if last else out
        return kernel

    grad = staticmethod(lambda g: g.default())


class Pool3dGrad(OpDef):
    type = "pool3d_grad"
    inputs = (In("X"), In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Pool3d.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        kind, excl = attrs["pooling_type"], attrs["exclusive"]
        last = channel_last(attrs["data_format"])

        def kernel(x, out, dout):
            if last:
                return np.ascontiguousarray(np.moveaxis(
                    channel_first(np.moveaxis(x, -1, 1), np.moveaxis(dout, -1, 1)), 1, -1))
            return channel_first(x, dout)

        def channel_first(x, dout):
            m, _ = Pool3d._plan(x.shape[2:], attrs)
            d = dout.reshape(dout.shape[0], dout.shape[1], -1, 1)
            if kind == "max":
                cols = gather_patches(x, m, -np.inf)
                hit = cols == cols.max(axis=-1, keepdims=True)
                hit &= np.cumsum(hit, axis=-1) == 1                   # the first maximum
                dcols = hit * d
            else:
                count = (m >= 0).sum(axis=-1)[:, None] if excl or attrs["adaptive"] \
                    else m.shape[1]
                dcols = np.broadcast_to(d / count, d.shape[:3] + (m.shape[1],))
            return scatter_patches(np.ascontiguousarray(dcols), m, x.shape[2:]).astype(x.dtype)
        return kernel


class MaxPool3dWithIndex(OpDef):
    type = "max_pool3d_with_index"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("Mask", intermediate=True))
    attrs = {"ksize": ints(), "strides": ints([1, 1, 1]), "paddings": ints([0, 0, 0]),
             "global_pooling": False, "adaptive": False}
    share_lod = None
    doc = ("Max pooling of X [N, C, D, H, W] and Mask, the int32 index (d * H * W + h * W + "
           "w) of each window's first maximum in its input volume (adaptive_pool3d's max).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 5:
            ctx.fail(f"X must be 5-D, got {xs}")
        shape = xs[:2] + pool_out_shape(xs[2:], ctx)
        ctx.set_output("Out", shape, ctx.input_dtype("X"))
        if ctx.has_output("Mask"):
            ctx.set_output("Mask", shape, "int32")

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x):
            m, outs = pool_map(x.shape[2:], attrs, "max_pool3d_with_index")
            cols = gather_patches(x, m, -np.inf)                 # [N, C, O, K]
            k = cols.argmax(axis=-1)
            out = np.take_along_axis(cols, k[..., None], -1)[..., 0]
            mask = m[np.arange(m.shape[0])[None, None, :], k]
            shape = x.shape[:2] + tuple(outs)
            return out.reshape(shape).astype(x.dtype), mask.reshape(shape).astype(np.int32)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "max_pool3d_with_index_grad", {"X": g.input("X"), "Mask": g.output("Mask"),
                                       "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class MaxPool3dWithIndexGrad(OpDef):
    type = "max_pool3d_with_index_grad"
    inputs = (In("X"), In("Mask"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = MaxPool3dWithIndex.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, mask, dout):
        n, c = x.shape[:2]
        vol = int(np.prod(x.shape[2:]))
        base = (np.arange(n * c) * vol).reshape(n, c, *([1] * (mask.ndim - 2)))
        dx = np.bincount((base + mask).ravel(), weights=dout.ravel(), minlength=x.size)
        return dx.reshape(x.shape).astype(x.dtype)


# --- unfold -----------------------------------------------------------------------------------
def tlbr_pads(p):
    """Paddle's unfold / im2sequence paddings [top, left, bottom, right] as (before, after) per dim."""
    return [(p[0], p[2]), (p[1], p[3])]


class Unfold(OpDef):
    type = "unfold"
    inputs = (In("X"),)
    outputs = (Out("Y"),)
    attrs = {"kernel_sizes": ints(), "strides": ints([1, 1]), "paddings": ints([0, 0, 0, 0]),
             "dilations": ints([1, 1])}
    share_lod = None
    doc = ("Y [N, C * kh * kw, L] = the sliding kh x kw blocks of X [N, C, H, W] (im2col); "
           "paddings [top, left, bottom, right].")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D, got {xs}")
        k, s, d = ctx.attr("kernel_sizes"), ctx.attr("strides"), ctx.attr("dilations")
        pads = tlbr_pads(ctx.attr("paddings"))
        if any(n < 0 for n in xs[2:]):
            length = -1
        else:
            outs = [out_size(n, kk, ss, *p, dd) for n, kk, ss, p, dd in
                    zip(xs[2:], k, s, pads, d)]
            if any(o <= 0 for o in outs):
                ctx.fail(f"the {k} window does not fit the padded input")
            length = outs[0] * outs[1]
        ctx.set_output("Y", [xs[0], xs[1] * k[0] * k[1] if xs[1] >= 0 else -1, length],
                       ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x):
            m, _ = patch_map(x.shape[2:], attrs["kernel_sizes"], attrs["strides"],
                             tlbr_pads(attrs["paddings"]), attrs["dilations"])
            cols = gather_patches(x, m)                       # [N, C, L, K]
            n, c, length, k = cols.shape
            return cols.transpose(0, 1, 3, 2).reshape(n, c * k, length)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "unfold_grad", {"X": g.input("X"), "Y@GRAD": g.output_grad("Y")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class UnfoldGrad(OpDef):
    type = "unfold_grad"
    inputs = (In("X"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Unfold.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, dy):
            m, _ = patch_map(x.shape[2:], attrs["kernel_sizes"], attrs["strides"],
                             tlbr_pads(attrs["paddings"]), attrs["dilations"])
            n, c = x.shape[:2]
            dcols = dy.reshape(n, c, m.shape[1], m.shape[0]).transpose(0, 1, 3, 2)
            return scatter_patches(np.ascontiguousarray(dcols), m, x.shape[2:]).astype(x.dtype)
        return kernel
