"""Sequence ops over LoD tensors, with their gradients.

A LoDTensor X of shape [total, ...] with lod [[0, n1, n1+n2, ...]] holds one sequence per
example. Ops read the last LoD level (the one that indexes rows), keep the levels above it
where the number of sequences does not change, and never pad: kernels are vectorized over
the packed rows (np.add.reduceat over offsets, one gather index built with np.repeat).

* sequence_pool: one row per sequence; empty sequences pool to `pad_value` (Paddle's rule)
  and get no gradient.
* Gather-like ops (expand, expand_as, concat, slice, reverse, pad/unpad, conv's context
  window) build one row index; their gradient scatter-adds through the same index.
"""
import numpy as np

from ..core import dtypes
from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out, ints

POOL_TYPES = ("SUM", "AVERAGE", "SQRT", "MAX", "MIN", "FIRST", "LAST")


def _offsets(t, op, slot="X"):
    """Row offsets of the last LoD level of `t` (input `slot` of `op`)."""
    if t is None or not t._lod:
        raise ExecutionError(f"{op}: input {slot} has no LoD; feed a LoDTensor with sequence "
                             f"lengths (fluid.create_lod_tensor)")
    off = np.asarray(t._lod[-1], dtype=np.int64)
    if t._array is not None and t._array.ndim and off[-1] != t._array.shape[0]:
        raise ExecutionError(f"{op}: LoD of input {slot} ends at {off[-1]} but it has "
                             f"{t._array.shape[0]} rows")
    return off


def _seg(off):
    """Sequence id of every row."""
    return np.repeat(np.arange(len(off) - 1), np.diff(off))


def _ranges(starts, lens):
    """Concatenated aranges [starts[i], starts[i] + lens[i]) (the rows of sequences)."""
    lens = np.asarray(lens, dtype=np.int64)
    ends = np.cumsum(lens)
    return np.repeat(np.asarray(starts, dtype=np.int64) - (ends - lens), lens) + \
        np.arange(ends[-1] if len(ends) else 0)


def _seg_sum(v, off):
    """Per-sequence sums of rows of v (zeros for empty sequences)."""
    lens = np.diff(off)
    out = np.zeros((len(lens),) + v.shape[1:], dtype=v.dtype)
    ne = lens > 0
    if ne.any():
        out[ne] = np.add.reduceat(v, off[:-1][ne], axis=0)
    return out


def _with_last(lod, off):
    """`lod` with its last level replaced by offsets `off`."""
    return [list(level) for level in lod[:-1]] + [off.tolist()]


def _pool(x, off, ptype, pad_value):
    n = len(off) - 1
    lens = np.diff(off)
    nonempty = lens > 0
    out = np.full((n,) + x.shape[1:], pad_value, dtype=x.dtype)
    if not nonempty.any():
        # MAX/MIN still index every sequence: an empty one points past X (its row count)
        arg = ptype in ("MAX", "MIN")
        return out, (np.full(out.shape, len(x), np.int32) if arg else None)
    starts = off[:-1][nonempty]
    if ptype in ("SUM", "AVERAGE", "SQRT"):
        s = np.add.reduceat(x, starts, axis=0)
        if ptype == "AVERAGE":
            s = s / lens[nonempty].reshape((-1,) + (1,) * (x.ndim - 1))
        elif ptype == "SQRT":
            s = s / np.sqrt(lens[nonempty]).reshape((-1,) + (1,) * (x.ndim - 1))
        out[nonempty] = s
        return out, None
    if ptype in ("MAX", "MIN"):
        red = np.maximum if ptype == "MAX" else np.minimum
        out[nonempty] = red.reduceat(x, starts, axis=0)
        # index of the (first) extreme row of each sequence, for the gradient
        seg = np.repeat(np.arange(n), lens)
        hit = x == out[seg]
        idx = np.where(hit, np.arange(len(x)).reshape((-1,) + (1,) * (x.ndim - 1)), len(x))
        first = np.full((n,) + x.shape[1:], len(x), dtype=np.int64)
        np.minimum.at(first, seg, idx)
        return out, first.astype(np.int32)
    if ptype == "FIRST":
        out[nonempty] = x[starts]
    else:  # LAST
        out[nonempty] = x[off[1:][nonempty] - 1]
    return out, None


class SequencePool(OpDef):
    type = "sequence_pool"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("MaxIndex", dispensable=True, intermediate=True))
    attrs = {"pooltype": "AVERAGE", "is_test": False, "pad_value": 0.0}
    kind = "value"
    share_lod = None
    doc = "Out[i] = pool(X[lod[i]:lod[i+1]]) for pooltype SUM/AVERAGE/SQRT/MAX/MIN/FIRST/LAST."

    @staticmethod
    def infer_shape(ctx):
        if ctx.attr("pooltype").upper() not in POOL_TYPES:
            ctx.fail(f"pooltype must be one of {POOL_TYPES}, got {ctx.attr('pooltype')!r}")
        shape = ctx.input_shape("X")
        ctx.set_output("Out", [-1] + shape[1:], ctx.input_dtype("X"), 0)
        if ctx.has_output("MaxIndex"):
            ctx.set_output("MaxIndex", [-1] + shape[1:], "int32", 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        ptype, pad = attrs["pooltype"].upper(), attrs["pad_value"]

        def kernel(x):
            off = _offsets(x, cls.type)
            a = x._array
            if off[-1] != len(a):
                raise ExecutionError(f"sequence_pool: LoD ends at {off[-1]} but X has "
                                     f"{len(a)} rows")
            out, idx = _pool(a, off, ptype, pad)
            # lower levels of a multi-level LoD survive (one level consumed)
            lod = x._lod[:-1]
            if idx is None:  # only MAX/MIN have arg indices; others write an empty one
                idx = np.zeros((0,) + a.shape[1:], np.int32)
            return LoDTensor(out, lod), LoDTensor(idx)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "sequence_pool_grad", {"X": g.input("X"), "MaxIndex": g.output("MaxIndex"),
                               "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class SequencePoolGrad(OpDef):
    type = "sequence_pool_grad"
    inputs = (In("X"), In("MaxIndex", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = SequencePool.attrs
    kind = "value"
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        ptype = attrs["pooltype"].upper()

        def kernel(x, max_index, dout):
            off = _offsets(x, cls.type)
            a, d = x._array, dout._array
            lens = np.diff(off)
            seg = np.repeat(np.arange(len(lens)), lens)
            bshape = (-1,) + (1,) * (a.ndim - 1)
            if ptype == "SUM":
                g = d[seg]
            elif ptype == "AVERAGE":
                g = d[seg] / lens[seg].reshape(bshape)
            elif ptype == "SQRT":
                g = d[seg] / np.sqrt(lens[seg]).reshape(bshape)
            else:
                g = np.zeros_like(a)
                if ptype in ("MAX", "MIN"):
                    _, idx = _pool(a, off, ptype, 0.0)
                    ne = lens > 0
                    cols = np.indices(idx[ne].shape)[1:]
                    g[(idx[ne].astype(np.int64),) + tuple(cols)] = d[ne]
                else:
                    ne = lens > 0
                    rows = off[:-1][ne] if ptype == "FIRST" else off[1:][ne] - 1
                    g[rows] = d[ne]
            return LoDTensor(np.ascontiguousarray(g, dtype=a.dtype), x._lod)
        return kernel


# --- gather-like ops: one row index forward, scatter-add backward ---------------------------
class _Gather(OpDef):
    """Out = X[index] with a new LoD. Subclasses define `index(attrs, *inputs) ->
    (row index into X, Out's lod)`; the gradient op `<type>_grad` scatter-adds Out@GRAD
    back through the same index."""
    kind = "value"
    share_lod = None
    out_slot = "Out"

    @staticmethod
    def rows(a):
        """The rows `index` indexes (a view of X's array)."""
        return a

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, *rest):
            idx, lod = cls.index(attrs, x, *rest)
            return LoDTensor(np.ascontiguousarray(cls.rows(x._array)[idx]), lod)
        return kernel

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if not cls.__dict__.get("type"):
            return
        fwd, out = cls, cls.out_slot

        class Grad(OpDef):
            type = fwd.type + "_grad"
            inputs = tuple(In(s.name) for s in fwd.inputs) + (In(out + "@GRAD"),)
            outputs = (Out("X@GRAD"),)
            attrs = fwd.attrs
            kind = "value"
            infer_shape = None

            @classmethod
            def prepare(cls, attrs, outputs):
                def kernel(x, *rest):
                    *ins, dout = rest
                    idx, _ = fwd.index(attrs, x, *ins)
                    dx = np.zeros_like(x._array)
                    np.add.at(fwd.rows(dx), idx, dout._array)
                    return LoDTensor(dx, x._lod)
                return kernel

        def grad(g):
            ins = {s.name: g.input(s.name) for s in fwd.inputs if g.input(s.name)}
            ins[out + "@GRAD"] = g.output_grad(out)
            g.op(fwd.type + "_grad", ins, {"X@GRAD": g.input_grad("X")}, g.attrs())
        cls.grad = staticmethod(grad)


def _rows_like(ctx, out="Out", lod_level=1):
    """infer_shape: Out has X's trailing dims, an unknown number of rows and a LoD."""
    shape = ctx.input_shape("X")
    ctx.set_output(out, [-1] + shape[1:], ctx.input_dtype("X"), lod_level)


class SequenceExpand(_Gather):
    type = "sequence_expand"
    inputs = (In("X"), In("Y", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"ref_level": -1}
    doc = ("Repeat sequence i of X (row i when X has no LoD) as many times as Y's level "
           "`ref_level` (default last) has sub-sequences in its i-th entry.")

    @staticmethod
    def infer_shape(ctx):
        _rows_like(ctx, lod_level=max(ctx.input_lod_level("X"), 0))

    @staticmethod
    def index(attrs, x, y):
        if y is None or not y._lod:
            raise ExecutionError("sequence_expand: input Y has no LoD; its LoD says how many "
                                 "times to repeat each sequence of X")
        ref = attrs["ref_level"]
        ref = len(y._lod) - 1 if ref == -1 else ref
        if not 0 <= ref < len(y._lod):
            raise ExecutionError(f"sequence_expand: ref_level {attrs['ref_level']} is out of "
                                 f"range for Y with {len(y._lod)} LoD levels")
        reps = np.diff(np.asarray(y._lod[ref], dtype=np.int64))
        if x._lod:
            xo = _offsets(x, "sequence_expand")
        else:
            xo = np.arange(x._array.shape[0] + 1, dtype=np.int64)
        if len(xo) - 1 != len(reps):
            raise ExecutionError(f"sequence_expand: X has {len(xo) - 1} sequences but level "
                                 f"{ref} of Y's LoD has {len(reps)}")
        src = np.repeat(np.arange(len(reps)), reps)          # source sequence of each copy
        lens = np.diff(xo)[src]
        idx = _ranges(xo[:-1][src], lens)
        lod = [np.concatenate([[0], np.cumsum(lens)]).tolist()] if x._lod else []
        return idx, lod


class SequenceExpandAs(_Gather):
    type = "sequence_expand_as"
    inputs = (In("X"), In("Y", no_grad=True))
    outputs = (Out("Out"),)
    doc = "Repeat row i of X as many times as sequence i of Y is long; Out takes Y's LoD."

    @staticmethod
    def infer_shape(ctx):
        _rows_like(ctx)

    @staticmethod
    def index(attrs, x, y):
        yo = _offsets(y, "sequence_expand_as", "Y")
        if x._array.shape[0] != len(yo) - 1:
            raise ExecutionError(f"sequence_expand_as: X has {x._array.shape[0]} rows but Y "
                                 f"has {len(yo) - 1} sequences")
        return np.repeat(np.arange(len(yo) - 1), np.diff(yo)), [list(lv) for lv in y._lod]


class SequenceReverse(_Gather):
    type = "sequence_reverse"
    inputs = (In("X"),)
    outputs = (Out("Y"),)
    out_slot = "Y"
    doc = "Reverse the rows of every sequence (last LoD level); Y keeps X's LoD."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Y")

    @staticmethod
    def index(attrs, x):
        off = _offsets(x, "sequence_reverse")
        seg = _seg(off)
        return off[seg] + off[seg + 1] - 1 - np.arange(off[-1]), x._lod


class SequenceSlice(_Gather):
    type = "sequence_slice"
    inputs = (In("X"), In("Offset", no_grad=True), In("Length", no_grad=True))
    outputs = (Out("Out"),)
    doc = "Out sequence i = X sequence i [Offset[i] : Offset[i] + Length[i]]."

    @staticmethod
    def infer_shape(ctx):
        _rows_like(ctx, lod_level=max(ctx.input_lod_level("X"), 1))

    @staticmethod
    def index(attrs, x, offset, length):
        off = _offsets(x, "sequence_slice")
        start = np.asarray(offset._array, dtype=np.int64).reshape(-1)
        n = np.asarray(length._array, dtype=np.int64).reshape(-1)
        if len(start) != len(off) - 1 or len(n) != len(off) - 1:
            raise ExecutionError(f"sequence_slice: X has {len(off) - 1} sequences but Offset "
                                 f"has {len(start)} and Length {len(n)} entries")
        if (start < 0).any() or (n < 0).any() or (start + n > np.diff(off)).any():
            raise ExecutionError(f"sequence_slice: slices (Offset {start.tolist()}, Length "
                                 f"{n.tolist()}) fall outside the sequences (lengths "
                                 f"{np.diff(off).tolist()})")
        return _ranges(off[:-1] + start, n), _with_last(x._lod, np.concatenate([[0], np.cumsum(n)]))


class SequenceUnpad(_Gather):
    type = "sequence_unpad"
    inputs = (In("X"), In("Length", no_grad=True))
    outputs = (Out("Out"),)
    doc = "Padded [N, L, ...] + lengths [N] -> packed rows [sum(lengths), ...] with LoD."

    @staticmethod
    def rows(a):
        return a.reshape((-1,) + a.shape[2:])

    @staticmethod
    def infer_shape(ctx):
        shape = ctx.input_shape("X")
        if len(shape) < 2:
            ctx.fail("X must be padded sequences [batch, max_len, ...]")
        ctx.set_output("Out", [-1] + shape[2:], ctx.input_dtype("X"), 1)

    @staticmethod
    def index(attrs, x, length):
        a = x._array
        n = np.asarray(length._array, dtype=np.int64).reshape(-1)
        if a.ndim < 2 or len(n) != a.shape[0] or (n < 0).any() or (n > a.shape[1]).any():
            raise ExecutionError(f"sequence_unpad: Length {n.tolist()} does not fit X of "
                                 f"shape {list(a.shape)} ([batch, max_len, ...])")
        idx = _ranges(np.arange(len(n)) * a.shape[1], n)
        return idx, [np.concatenate([[0], np.cumsum(n)]).tolist()]


class SequenceConcat(OpDef):
    type = "sequence_concat"
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Out"),)
    kind = "value"
    share_lod = None
    doc = "Out sequence i = concat(X_1 sequence i, X_2 sequence i, ...) along rows."

    @staticmethod
    def infer_shape(ctx):
        shape = ctx.input_shape("X")
        ctx.set_output("Out", [-1] + shape[1:], ctx.input_dtype("X"), 1)

    @staticmethod
    def index(xs):
        """Row index into the rows of all X stacked, and Out's offsets."""
        offs = [_offsets(x, "sequence_concat", f"X[{i}]") for i, x in enumerate(xs)]
        if len({len(o) for o in offs}) != 1:
            raise ExecutionError(f"sequence_concat: inputs hold different numbers of sequences "
                                 f"{[len(o) - 1 for o in offs]}")
        base = np.cumsum([0] + [o[-1] for o in offs[:-1]])
        starts = np.stack([o[:-1] + b for o, b in zip(offs, base)], 1).reshape(-1)
        lens = np.stack([np.diff(o) for o in offs], 1)
        out_off = np.concatenate([[0], np.cumsum(lens.sum(1))])
        return _ranges(starts, lens.reshape(-1)), out_off

    @classmethod
    def kernel(cls, xs):
        idx, off = cls.index(xs)
        stacked = np.concatenate([x._array for x in xs])
        return LoDTensor(stacked[idx], _with_last(xs[0]._lod, off))

    grad = staticmethod(lambda g: g.op(
        "sequence_concat_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}))


class SequenceConcatGrad(OpDef):
    type = "sequence_concat_grad"
    inputs = (In("X", duplicable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD", duplicable=True),)
    kind = "value"
    infer_shape = None

    @staticmethod
    def kernel(xs, dout):
        idx, _ = SequenceConcat.index(xs)
        d = np.empty((sum(len(x._array) for x in xs),) + dout._array.shape[1:],
                     dout._array.dtype)
        d[idx] = dout._array
        parts = np.split(d, np.cumsum([len(x._array) for x in xs])[:-1])
        return [LoDTensor(p, x._lod) for p, x in zip(parts, xs)]


class SequencePad(OpDef):
    type = "sequence_pad"
    inputs = (In("X"), In("PadValue", no_grad=True))
    outputs = (Out("Out"), Out("Length"))
    attrs = {"padded_length": -1}
    kind = "value"
    share_lod = None
    doc = ("Packed sequences -> [N, padded_length, ...] filled with PadValue (a scalar or "
           "one row), and their lengths Length [N] (int64).")

    @staticmethod
    def infer_shape(ctx):
        shape = ctx.input_shape("X")
        ctx.set_output("Out", [-1, ctx.attr("padded_length")] + shape[1:], ctx.input_dtype("X"), 0)
        ctx.set_output("Length", [-1], "int64", 0)

    @staticmethod
    def index(x, padded_length):
        off = _offsets(x, "sequence_pad")
        lens = np.diff(off)
        width = int(lens.max(initial=0)) if padded_length == -1 else padded_length
        if width < lens.max(initial=0):
            raise ExecutionError(f"sequence_pad: padded_length {padded_length} is shorter than "
                                 f"the longest sequence ({lens.max()})")
        return _ranges(np.arange(len(lens)) * width, lens), lens, width

    @classmethod
    def prepare(cls, attrs, outputs):
        padded_length = attrs["padded_length"]

        def kernel(x, pad_value):
            a = x._array
            pos, lens, width = cls.index(x, padded_length)
            pv = np.asarray(pad_value._array, dtype=a.dtype)
            if pv.size != 1 and pv.shape != a.shape[1:]:
                raise ExecutionError(f"sequence_pad: PadValue has shape {list(pv.shape)}; it "
                                     f"must be a scalar or one row of X {list(a.shape[1:])}")
            out = np.empty((len(lens) * width,) + a.shape[1:], a.dtype)
            out[...] = pv.reshape(a.shape[1:]) if pv.size != 1 else pv.reshape(())
            out[pos] = a
            return (LoDTensor(out.reshape((len(lens), width) + a.shape[1:])),
                    LoDTensor(lens.astype(np.int64)))
        return kernel


    grad = staticmethod(lambda g: g.op(
        "sequence_pad_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class SequencePadGrad(OpDef):
    type = "sequence_pad_grad"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = SequencePad.attrs
    kind = "value"
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, dout):
            pos, _, _ = SequencePad.index(x, attrs["padded_length"])
            d = dout._array
            return LoDTensor(d.reshape((-1,) + d.shape[2:])[pos], x._lod)
        return kernel


class SequenceSoftmax(OpDef):
    type = "sequence_softmax"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"use_cudnn": False}
    kind = "value"
    share_lod = None
    doc = "Softmax over the rows of each sequence; X is [T] or [T, 1]."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x):
        off = _offsets(x, "sequence_softmax")
        a = x._array
        if a.ndim > 2 or a.size != off[-1]:
            raise ExecutionError(f"sequence_softmax: X must be [T] or [T, 1], got "
                                 f"{list(a.shape)}")
        v = a.reshape(-1)
        lens = np.diff(off)
        ne = lens > 0
        m = np.zeros(len(lens), a.dtype)
        if ne.any():
            m[ne] = np.maximum.reduceat(v, off[:-1][ne])
        seg = _seg(off)
        e = np.exp(v - m[seg])
        return LoDTensor((e / _seg_sum(e, off)[seg]).reshape(a.shape), x._lod)


    grad = staticmethod(lambda g: g.op(
        "sequence_softmax_grad", {"Out": g.output("Out"), "Out@GRAD": g.output_grad("Out"),
                                  "X": g.input("X")}, {"X@GRAD": g.input_grad("X")}, g.attrs()))


class SequenceSoftmaxGrad(OpDef):
    type = "sequence_softmax_grad"
    inputs = (In("Out"), In("Out@GRAD"), In("X"))
    outputs = (Out("X@GRAD"),)
    attrs = SequenceSoftmax.attrs
    kind = "value"
    infer_shape = None

    @staticmethod
    def kernel(out, dout, x):
        off = _offsets(x, "sequence_softmax_grad")
        y, dy = out._array.reshape(-1), dout._array.reshape(-1)
        dx = y * (dy - _seg_sum(y * dy, off)[_seg(off)])
        return LoDTensor(dx.reshape(x._array.shape), x._lod)


class SequenceReshape(OpDef):
    type = "sequence_reshape"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"new_dim": 1}
    kind = "value"
    share_lod = None
    doc = "Reshape each sequence's rows [L, M] to [L * M / new_dim, new_dim]."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [-1, ctx.attr("new_dim")], ctx.input_dtype("X"),
                       max(ctx.input_lod_level("X"), 1))

    @classmethod
    def prepare(cls, attrs, outputs):
        new_dim = attrs["new_dim"]

        def kernel(x):
            off = _offsets(x, cls.type)
            a = x._array
            width = a.size // max(a.shape[0], 1) if a.shape[0] else int(np.prod(a.shape[1:]))
            if new_dim <= 0 or ((np.diff(off) * width) % new_dim).any():
                raise ExecutionError(f"sequence_reshape: sequences of lengths "
                                     f"{np.diff(off).tolist()} x width {width} cannot be "
                                     f"reshaped to rows of new_dim={new_dim}")
            return LoDTensor(a.reshape(-1, new_dim), _with_last(x._lod, off * width // new_dim))
        return kernel


    grad = staticmethod(lambda g: g.op(
        "sequence_reshape_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class SequenceReshapeGrad(OpDef):
    type = "sequence_reshape_grad"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = SequenceReshape.attrs
    kind = "value"
    infer_shape = None

    @staticmethod
    def kernel(x, dout):
        return LoDTensor(dout._array.reshape(x._array.shape).copy(), x._lod)


class LoDReset(OpDef):
    type = "lod_reset"
    inputs = (In("X"), In("Y", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"target_lod": ints(), "append": False}
    kind = "value"
    share_lod = None
    doc = ("Out = X with a new LoD: Y's LoD, else Y's data as level-0 offsets, else the "
           "`target_lod` offsets; `append` adds the new level below X's own.")

    @staticmethod
    def infer_shape(ctx):
        lvl = 1 + (ctx.input_lod_level("X") if ctx.attr("append") else 0)
        ctx.set_output("Out", ctx.input_shape("X"), ctx.input_dtype("X"), lvl)

    @classmethod
    def prepare(cls, attrs, outputs):
        target, append = [int(v) for v in attrs["target_lod"]], attrs["append"]

        def kernel(x, y):
            a = x._array
            if y is not None and y._lod:
                return LoDTensor(a.copy(), [list(lv) for lv in y._lod])
            level = (np.asarray(y._array).reshape(-1).astype(int).tolist() if y is not None
                     else target)
            if not level:
                raise ExecutionError("lod_reset: no target LoD: give input Y or the "
                                     "target_lod attribute")
            if level[0] != 0 or level[-1] != a.shape[0] or np.any(np.diff(level) < 0):
                raise ExecutionError(f"lod_reset: target LoD {level} must be ascending "
                                     f"offsets from 0 to the {a.shape[0]} rows of X")
            lod = [list(lv) for lv in x._lod] + [level] if append else [level]
            return LoDTensor(a.copy(), lod)
        return kernel


    grad = staticmethod(lambda g: g.op(
        "lod_reset_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class LoDResetGrad(OpDef):
    type = "lod_reset_grad"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = LoDReset.attrs
    kind = "value"
    infer_shape = None

    @staticmethod
    def kernel(x, dout):
        return LoDTensor(dout._array.copy(), x._lod)


class SequenceMask(OpDef):
    type = "sequence_mask"
    inputs = (In("X", no_grad=True), In("MaxLenTensor", dispensable=True, no_grad=True))
    outputs = (Out("Y"),)
    attrs = {"maxlen": -1, "out_dtype": int(dtypes.VarType.INT64)}
    share_lod = None
    doc = "Y[..., j] = j < X[...] for j < maxlen (default: max of X); dtype out_dtype."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Y", ctx.input_shape("X") + [ctx.attr("maxlen")], ctx.attr("out_dtype"), 0)

    @staticmethod
    def kernel(x, maxlen_t, *, maxlen, out_dtype):
        if maxlen_t is not None:
            maxlen = int(np.asarray(maxlen_t).reshape(-1)[0])
        if maxlen < 0:
            maxlen = int(x.max(initial=0))
        return (np.arange(maxlen) < x[..., None]).astype(dtypes.to_numpy(out_dtype))


class SequenceEnumerate(OpDef):
    type = "sequence_enumerate"
    inputs = (In("X", no_grad=True),)
    outputs = (Out("Out"),)
    attrs = {"win_size": 2, "pad_value": 0}
    kind = "value"
    share_lod = None
    doc = "Out[t] = the win_size ids X[t : t + win_size] of t's sequence, pad_value past its end."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [-1, ctx.attr("win_size")], ctx.input_dtype("X"),
                       ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        win, pad = attrs["win_size"], attrs["pad_value"]

        def kernel(x):
            off = _offsets(x, cls.type)
            v = x._array.reshape(-1)
            pos = np.arange(len(v))[:, None] + np.arange(win)
            inside = pos < off[1:][_seg(off)][:, None]
            out = np.where(inside, v[np.minimum(pos, len(v) - 1)], pad).astype(v.dtype)
            return LoDTensor(out, x._lod)
        return kernel


def _conv_grad(g):
    ins = {"X": g.input("X"), "Filter": g.input("Filter"), "Out@GRAD": g.output_grad("Out")}
    outs = {"X@GRAD": g.input_grad("X"), "Filter@GRAD": g.input_grad("Filter")}
    if g.input("PaddingData"):
        ins["PaddingData"] = g.input("PaddingData")
        outs["PaddingData@GRAD"] = g.input_grad("PaddingData")
    g.op("sequence_conv_grad", ins, outs, g.attrs())


# --- sequence_conv: a context window over the rows of each sequence --------------------------
class SequenceConv(OpDef):
    type = "sequence_conv"
    inputs = (In("X"), In("PaddingData", dispensable=True), In("Filter"))
    outputs = (Out("Out"),)
    attrs = {"paddingTrainable": False, "contextLength": 3, "contextStart": 0,
             "contextStride": 1}
    kind = "value"
    share_lod = None
    doc = ("Out[t] = concat(rows t+contextStart ... t+contextStart+contextLength-1 of t's "
           "sequence) @ Filter; rows outside the sequence are zeros, or rows of PaddingData "
           "([up_pad + down_pad, M]) when paddingTrainable.")

    @staticmethod
    def infer_shape(ctx):
        shape, f = ctx.input_shape("X"), ctx.input_shape("Filter")
        k = ctx.attr("contextLength")
        if len(shape) != 2 or len(f) != 2 or (shape[1] > 0 and f[0] != k * shape[1]):
            ctx.fail(f"X must be [T, M] and Filter [contextLength * M, N] (contextLength={k})")
        if ctx.attr("contextStride") != 1:
            ctx.fail("only contextStride = 1 is supported (as in Paddle)")
        ctx.set_output("Out", [-1, f[1]], ctx.input_dtype("X"), max(ctx.input_lod_level("X"), 1))

    @staticmethod
    def index(x, pad, attrs):
        """Rows of [X; zero row; PaddingData] that make each row's context, [T, K]."""
        k, cs = attrs["contextLength"], attrs["contextStart"]
        if attrs["contextStride"] != 1:
            raise ExecutionError("sequence_conv: only contextStride = 1 is supported")
        off = _offsets(x, "sequence_conv")
        t = off[-1]
        up, down = max(0, -cs), max(0, cs + k - 1)
        seg = _seg(off)
        start, length = off[:-1][seg][:, None], np.diff(off)[seg][:, None]
        p = np.arange(t)[:, None] - start + cs + np.arange(k)     # position inside the sequence
        inside = (p >= 0) & (p < length)
        idx = np.where(inside, start + p, t)
        if attrs["paddingTrainable"]:
            if pad is None or pad._array.shape[0] != up + down:
                raise ExecutionError(f"sequence_conv: paddingTrainable needs PaddingData with "
                                     f"{up + down} rows (up {up} + down {down})")
            idx = np.where(inside, idx, t + 1 + np.where(p < 0, up + p, up + p - length))
        return idx

    @staticmethod
    def _ext(x, pad, trainable):
        a = x._array
        parts = [a, np.zeros((1,) + a.shape[1:], a.dtype)]
        if trainable:
            parts.append(pad._array.astype(a.dtype, copy=False))
        return np.concatenate(parts)

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, pad, filt):
            idx = cls.index(x, pad, attrs)
            w = filt._array
            if w.shape[0] != idx.shape[1] * x._array.shape[1]:
                raise ExecutionError(f"sequence_conv: Filter has {w.shape[0]} rows; it needs "
                                     f"contextLength x width of X = {idx.shape[1]} x "
                                     f"{x._array.shape[1]}")
            col = cls._ext(x, pad, attrs["paddingTrainable"])[idx]
            return LoDTensor(col.reshape(len(idx), w.shape[0]) @ w, x._lod)
        return kernel

    grad = staticmethod(_conv_grad)


class SequenceConvGrad(OpDef):
    type = "sequence_conv_grad"
    inputs = (In("X"), In("PaddingData", dispensable=True), In("Filter"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("PaddingData@GRAD", dispensable=True),
               Out("Filter@GRAD", dispensable=True))
    attrs = SequenceConv.attrs
    kind = "value"
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        trainable = attrs["paddingTrainable"]

        def kernel(x, pad, filt, dout):
            idx = SequenceConv.index(x, pad, attrs)
            ext = SequenceConv._ext(x, pad, trainable)
            d = dout._array
            dfilt = ext[idx].reshape(len(idx), filt._array.shape[0]).T @ d
            dcol = (d @ filt._array.T).reshape(idx.shape + ext.shape[1:])
            dext = np.zeros_like(ext)
            np.add.at(dext, idx, dcol)
            t = x._array.shape[0]
            dpad = LoDTensor(dext[t + 1:].copy()) if trainable else None
            return LoDTensor(dext[:t].copy(), x._lod), dpad, LoDTensor(dfilt)
        return kernel


class SequenceScatter(OpDef):
    type = "sequence_scatter"
    inputs = (In("X"), In("Ids", no_grad=True), In("Updates"))
    outputs = (Out("Out"),)
    kind = "value"
    share_lod = None
    doc = ("Out = X, then Out[i, Ids[j]] += Updates[j] for every j of sequence i of Ids "
           "(Ids and Updates share one LoD; one sequence per row of X).")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", ctx.input_shape("X"), ctx.input_dtype("X"), 0)

    @staticmethod
    def index(x, ids, updates):
        """(row, column) of X that every update goes to."""
        off = _offsets(ids, "sequence_scatter", "Ids")
        a = x._array
        col = np.asarray(ids._array).reshape(-1).astype(np.int64)
        if updates._array.size != len(col):
            raise ExecutionError(f"sequence_scatter: Updates has {updates._array.size} values "
                                 f"for {len(col)} ids")
        if len(off) - 1 != a.shape[0]:
            raise ExecutionError(f"sequence_scatter: Ids has {len(off) - 1} sequences but X "
                                 f"has {a.shape[0]} rows; one sequence per row")
        width = int(np.prod(a.shape[1:]))
        if col.size and (col.min() < 0 or col.max() >= width):
            raise ExecutionError(f"sequence_scatter: id {int(col[(col < 0) | (col >= width)][0])}"
                                 f" is out of range for rows of {width}")
        return _seg(off), col

    @classmethod
    def kernel(cls, x, ids, updates):
        row, col = cls.index(x, ids, updates)
        a = x._array
        out = a.reshape(a.shape[0], -1).copy()
        np.add.at(out, (row, col), updates._array.reshape(-1).astype(a.dtype))
        return LoDTensor(out.reshape(a.shape), x._lod)


    grad = staticmethod(lambda g: g.op(
        "sequence_scatter_grad", {"X": g.input("X"), "Ids": g.input("Ids"),
                                  "Updates": g.input("Updates"),
                                  "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X"), "Updates@GRAD": g.input_grad("Updates")}))


class SequenceScatterGrad(OpDef):
    type = "sequence_scatter_grad"
    inputs = (In("X"), In("Ids"), In("Updates"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Updates@GRAD", dispensable=True))
    kind = "value"
    infer_shape = None

    @staticmethod
    def kernel(x, ids, updates, dout):
        row, col = SequenceScatter.index(x, ids, updates)
        d = dout._array
        du = d.reshape(d.shape[0], -1)[row, col].reshape(updates._array.shape)
        return LoDTensor(d.copy(), x._lod), LoDTensor(du.copy(), updates._lod)

