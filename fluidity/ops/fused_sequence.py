"""Fluid 1.8's fused sequence CPU ops (inference ops: no gradients, as in Fluid).

* fusion_seqconv_eltadd_relu: relu(sequence_conv(X, Filter) + Bias).
* fusion_seqexpand_concat_fc: act(concat([X0, expand(X1), ...], axis=1) @ FCWeight + FCBias)
  where X0 holds the sequences and every other input one row per sequence of X0.
* fusion_seqpool_concat: concat([sequence_pool(Xi) for Xi in X], axis=1).
* fusion_seqpool_cvm_concat: concat([cvm(sequence_pool(Xi)) for Xi in X], axis=1).

Each runs the plain ops' own kernels (sequence_conv, fc, sequence_pool, cvm) through
ops/fused_parts.py.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ProgramError
from . import fused_parts, registry
from .registry import In, OpDef, Out

_FC_ACTS = ("sigmoid", "tanh", "relu", "identity")
_POOLS = ("AVERAGE", "SUM", "SQRT")


# --- fusion_seqconv_eltadd_relu ------------------------------------------------------------
class FusionSeqConvEltAddRelu(OpDef):
    type = "fusion_seqconv_eltadd_relu"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("X"), In("Filter"), In("Bias"))
    outputs = (Out("Out"), Out("ColMat", dispensable=True, intermediate=True))
    attrs = {"contextLength": 0, "contextStart": 0, "contextStride": 1}
    kind = "value"
    share_lod = None
    doc = ("Out = relu(sequence_conv(X, Filter, contextLength, contextStart) + Bias) over "
           "X's sequences (rows outside a sequence are zeros); ColMat [T, contextLength * M] "
           "holds each row's context window.")

    @staticmethod
    def infer_shape(ctx):
        k, cs = ctx.attr("contextLength"), ctx.attr("contextStart")
        if k <= 0:
            ctx.fail(f"contextLength must be > 0, got {k}")
        if ctx.attr("contextStride") != 1:
            ctx.fail(f"only contextStride = 1 is supported, got {ctx.attr('contextStride')}")
        if k + cs <= 0:
            ctx.fail(f"contextStart {cs} + contextLength {k} must be > 0 (the window must "
                     f"reach the row itself or later)")
        xs, f, b = ctx.input_shape("X"), ctx.input_shape("Filter"), ctx.input_shape("Bias")
        if len(xs) != 2 or len(f) != 2:
            ctx.fail(f"X must be [T, M] and Filter [contextLength * M, N], got {xs}, {f}")
        if xs[1] >= 0 and f[0] >= 0 and f[0] != k * xs[1]:
            ctx.fail(f"Filter must have contextLength * M = {k * xs[1]} rows, got {f[0]}")
        if b and all(v >= 0 for v in b) and f[1] >= 0 and int(np.prod(b)) != f[1]:
            ctx.fail(f"Bias must hold N = {f[1]} values ([1, N]), got shape {b}")
        dt = ctx.input_dtype("X")
        ctx.set_output("Out", [xs[0], f[1]], dt, max(ctx.input_lod_level("X"), 1))
        ctx.set_output("ColMat", [xs[0], f[0]], dt, 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        if attrs["contextLength"] <= 0 or attrs["contextStride"] != 1 or \
                attrs["contextLength"] + attrs["contextStart"] <= 0:
            raise ProgramError(f"{cls.type}: contextLength {attrs['contextLength']} (> 0), "
                               f"contextStart {attrs['contextStart']} (start + length > 0) "
                               f"and contextStride {attrs['contextStride']} (1) do not fit")
        conv_attrs = {"contextLength": attrs["contextLength"],
                      "contextStart": attrs["contextStart"], "contextStride": 1,
                      "paddingTrainable": False}
        conv = fused_parts.kernel("sequence_conv", **conv_attrs)
        relu = fused_parts.activation("relu")
        seq_conv = registry.get("sequence_conv")
        want_col = "ColMat" in outputs

        def kernel(x, filt, bias):
            fused_parts.lod_offsets(x, cls.type, "X")
            n = filt._array.shape[1]
            if bias._array.size != n:
                raise ExecutionError(f"{cls.type}: Bias holds {bias._array.size} values, "
                                     f"Filter has {n} columns")
            y = conv(x, None, filt)
            out = relu(y._array + bias._array.reshape(-1))
            col = None
            if want_col:
                a = x._array
                idx = seq_conv.index(x, None, conv_attrs)
                ext = np.concatenate([a, np.zeros((1,) + a.shape[1:], a.dtype)])
                col = LoDTensor(ext[idx].reshape(len(idx), -1))
            return LoDTensor(out, y._lod), col
        return kernel


# --- fusion_seqexpand_concat_fc ------------------------------------------------------------
class FusionSeqExpandConcatFC(OpDef):
    type = "fusion_seqexpand_concat_fc"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("X", duplicable=True), In("FCWeight"), In("FCBias", dispensable=True))
    outputs = (Out("Out"), Out("FCOut", dispensable=True, intermediate=True))
    attrs = {"fc_activation": "identity"}
    kind = "value"
    share_lod = None
    doc = ("Out = fc_activation(concat([X[0], X[1] expanded, ...], axis=1) @ FCWeight + "
           "FCBias): X[0] [T, M0] holds N sequences, every other X[i] [N, Mi] one row per "
           "sequence, repeated over its rows; FCOut [N, D] is the fc of those rows.")

    @staticmethod
    def infer_shape(ctx):
        act = ctx.attr("fc_activation")
        if act not in _FC_ACTS:
            ctx.fail(f"fc_activation must be one of {list(_FC_ACTS)}, got {act!r}")
        shapes = ctx.input_shapes("X")
        if len(shapes) < 2:
            ctx.fail(f"X needs at least 2 inputs (the sequences and one to expand), got "
                     f"{len(shapes)}")
        w = ctx.input_shape("FCWeight")
        if len(w) != 2:
            ctx.fail(f"FCWeight must be 2-D, got {w}")
        widths = [s[1] if len(s) == 2 else -1 for s in shapes]
        if any(len(s) != 2 for s in shapes):
            ctx.fail(f"every X must be 2-D, got {shapes}")
        if all(v >= 0 for v in widths) and w[0] >= 0 and sum(widths) != w[0]:
            ctx.fail(f"FCWeight must have sum of the X widths = {sum(widths)} rows, got "
                     f"{w[0]}")
        if ctx.has_input("FCBias"):
            b = ctx.input_shape("FCBias")
            if len(b) not in (1, 2) or (len(b) == 2 and b[0] != 1) or \
                    (b[-1] >= 0 and w[1] >= 0 and b[-1] != w[1]):
                ctx.fail(f"FCBias must be [{w[1]}] or [1, {w[1]}], got {b}")
        dt = ctx.input_dtype("X")
        ctx.set_output("Out", [shapes[0][0], w[1]], dt, ctx.input_lod_level("X", 0))
        ctx.set_output("FCOut", [-1, w[1]], dt, 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        fc = fused_parts.kernel("fc")
        if attrs["fc_activation"] not in _FC_ACTS:
            raise ProgramError(f"{cls.type}: fc_activation must be one of {list(_FC_ACTS)}, "
                               f"got {attrs['fc_activation']!r}")
        act = fused_parts.activation(attrs["fc_activation"])

        def kernel(xs, w, bias):
            off = fused_parts.lod_offsets(xs[0], cls.type, "X[0]")
            n = len(off) - 1
            wa = w._array
            m0 = xs[0]._array.shape[1]
            for i, t in enumerate(xs[1:], 1):
                rows = t._array.shape[0]
                lens = np.diff(t._lod[-1]) if t._lod else np.ones(rows, np.int64)
                if rows != n or len(lens) != n or (lens != 1).any():
                    raise ExecutionError(f"{cls.type}: X[{i}] must hold one row per sequence "
                                         f"of X[0] ({n}), got {rows} rows with LoD "
                                         f"{t._lod[-1][:6] if t._lod else None}")
            rest = np.concatenate([t._array.reshape(n, -1) for t in xs[1:]], axis=1)
            if m0 + rest.shape[1] != wa.shape[0]:
                raise ExecutionError(f"{cls.type}: FCWeight has {wa.shape[0]} rows, the X "
                                     f"widths sum to {m0 + rest.shape[1]}")
            b = None if bias is None else bias._array
            fc_out = fc(rest, wa[m0:], b)
            out = fc(xs[0]._array, wa[:m0], None) + np.repeat(fc_out, np.diff(off), axis=0)
            return LoDTensor(act(out), xs[0]._lod), LoDTensor(fc_out)
        return kernel


# --- fusion_seqpool_concat, fusion_seqpool_cvm_concat --------------------------------------
def _seqpool_concat_shape(ctx):
    if ctx.attr("pooltype") not in _POOLS:
        ctx.fail(f"pooltype must be one of {list(_POOLS)}, got {ctx.attr('pooltype')!r}")
    if ctx.attr("axis") != 1:
        ctx.fail(f"only concat axis = 1 is supported, got {ctx.attr('axis')}")
    shapes = ctx.input_shapes("X")
    if not shapes:
        ctx.fail("X needs at least one input")
    if len(shapes[0]) != 2:
        ctx.fail(f"the first X must be 2-D, got {shapes[0]}")
    w = shapes[0][1]
    ctx.set_output("Out", [-1, w * len(shapes) if w >= 0 else -1], ctx.input_dtype("X"), 1)


def _pool_all(op, pool, xs, then=None):
    """[B, n * w]: each input pooled per sequence (`then` applied to each), side by side."""
    if not xs:
        raise ExecutionError(f"{op}: X needs at least one input")
    b = None
    parts = []
    w = None
    for i, t in enumerate(xs):
        off = fused_parts.lod_offsets(t, op, f"X[{i}]")
        a = t._array
        width = a.size // a.shape[0] if a.shape[0] else (a.shape[1] if a.ndim > 1 else 1)
        if w is None:
            w, b = width, len(off) - 1
        if width != w or len(off) - 1 != b:
            raise ExecutionError(f"{op}: X[{i}] has {len(off) - 1} sequences of width "
                                 f"{width}; X[0] has {b} of width {w}: every input needs the "
                                 f"same batch and width")
        flat = LoDTensor(a.reshape(a.shape[0], w), [list(off)])
        out = pool(flat)[0]._array
        parts.append(then(out) if then is not None else out)
    return LoDTensor(np.concatenate(parts, axis=1), [list(range(b + 1))])


def _pool_kernel(op, attrs):
    if attrs["pooltype"] not in _POOLS:
        raise ProgramError(f"{op}: pooltype must be one of {list(_POOLS)}, got "
                           f"{attrs['pooltype']!r}")
    return fused_parts.kernel("sequence_pool", pooltype=attrs["pooltype"])


class FusionSeqPoolConcat(OpDef):
    type = "fusion_seqpool_concat"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Out"),)
    attrs = {"pooltype": "SUM", "axis": 1}
    kind = "value"
    share_lod = None
    doc = ("Out [B, n * w] = concat([sequence_pool(X[i], pooltype) for i], axis=1), pooltype "
           "SUM, AVERAGE or SQRT; Out has one sequence per row (LoD [0, 1, ..., B]).")

    infer_shape = staticmethod(_seqpool_concat_shape)

    @classmethod
    def prepare(cls, attrs, outputs):
        return lambda xs: _pool_all(cls.type, _pool_kernel(cls.type, attrs), xs)


class FusionSeqPoolCVMConcat(OpDef):
    type = "fusion_seqpool_cvm_concat"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("X", duplicable=True), In("CVM", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"pooltype": "SUM", "use_cvm": True, "axis": 1}
    kind = "value"
    share_lod = None
    doc = ("Out = concat([cvm(sequence_pool(X[i], pooltype)) for i], axis=1): each pooled "
           "slot's first two columns (show, click) become log(show + 1) and log(click + 1) - "
           "log(show + 1); use_cvm must be true (as in Fluid); CVM is not read.")

    @staticmethod
    def infer_shape(ctx):
        if not ctx.attr("use_cvm"):
            ctx.fail("only use_cvm = True is supported (as in Fluid 1.8)")
        _seqpool_concat_shape(ctx)

    @classmethod
    def prepare(cls, attrs, outputs):
        pool = _pool_kernel(cls.type, attrs)
        cvm = fused_parts.kernel("cvm", use_cvm=True)

        def kernel(xs, cvm_in):
            return _pool_all(cls.type, pool, xs, lambda v: cvm(v, None))
        return kernel
