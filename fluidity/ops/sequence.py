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
from . import c_emit
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

    # per pooltype: C over a sequence's rows [s, t) of width w at column j, as the numpy
    # kernel rounds: reduceat adds rows in order; AVERAGE and SQRT divide in double (numpy
    # promotes float32 / int64 lengths to float64) and round once
    C_POOL = {
        "SUM": "float v = x[s * w + j]; for (int64_t r = s + 1; r < t; ++r) v += x[r * w + j];",
        "AVERAGE": "float v = x[s * w + j]; for (int64_t r = s + 1; r < t; ++r) "
                   "v += x[r * w + j]; v = (float)((double)v / (double)(t - s));",
        "SQRT": "float v = x[s * w + j]; for (int64_t r = s + 1; r < t; ++r) v += x[r * w + j]; "
                "v = (float)((double)v / std::sqrt((double)(t - s)));",
        "MAX": "float v = x[s * w + j]; int32_t a = (int32_t)s; for (int64_t r = s + 1; r < t; "
               "++r) if (x[r * w + j] > v || x[r * w + j] != x[r * w + j]) { v = x[r * w + j]; "
               "a = (int32_t)r; }",
        "MIN": "float v = x[s * w + j]; int32_t a = (int32_t)s; for (int64_t r = s + 1; r < t; "
               "++r) if (x[r * w + j] < v || x[r * w + j] != x[r * w + j]) { v = x[r * w + j]; "
               "a = (int32_t)r; }",
        "FIRST": "float v = x[s * w + j];",
        "LAST": "float v = x[(t - 1) * w + j];",
    }

    @classmethod
    def pooled_element(cls, e, skip):
        """The pooling for both targets: (X, its sequences b, the row width w, the C
        statements storing Out[i, j] and MaxIndex[i, j] from sequence i's rows [s, t), where
        `skip` ends an empty sequence's element)."""
        x = e.input("X")
        e.require_float(x)
        ptype = e.attr("pooltype").upper()
        if x.lod is None or ptype not in cls.C_POOL:
            e.fail("X has no LoD, or an unknown pooltype")
        b, w = f"({x.lod_len} - 1)", e.prod(x.dims[1:])
        out = e.output("Out", [b] + x.dims[1:], lod_from=False)
        arg = ptype in ("MAX", "MIN")
        idx = None
        if e.has_output("MaxIndex"):
            idx = e.output("MaxIndex", ([b] if arg else ["0"]) + x.dims[1:], "int32_t",
                           lod_from=False)
        elif arg:
            e.fail("MAX/MIN pooling without its MaxIndex output")
        pad = e.literal(float(e.attr("pad_value")))
        put_idx = f" {idx}[i * w + j] = a;" if arg else ""
        # an empty sequence pools to pad_value; its MaxIndex is X's row count (the kernel's)
        empty_idx = f" {idx}[i * w + j] = (int32_t)({x.dims[0]});" if arg else ""
        return x, b, w, (f"if (t <= s) {{ {out}[i * w + j] = {pad};{empty_idx} {skip}; }} "
                         f"{cls.C_POOL[ptype]} {out}[i * w + j] = v;{put_idx}")

    @classmethod
    def emit(cls, e):
        x, b, w, element = cls.pooled_element(e, "continue")
        e.check(f"{x.lod}[{x.lod_len} - 1] != {x.dims[0]}", "sequence_pool: X's LoD ends "
                "elsewhere than its number of rows")
        e.code(f"const float* x = {x}; const int64_t w = {w}; for (int64_t i = 0; i < {b}; "
               f"++i) {{ const int64_t s = {x.lod}[i], t = {x.lod}[i + 1]; for (int64_t j = 0; "
               f"j < w; ++j) {{ {element} }} }}")

    @classmethod
    def cuda_emit(cls, e):
        """One device thread per output element, the C++ target's C_POOL over its sequence
        (the executor checks each LoD against its rows before copying it to the device)."""
        x, b, w, element = cls.pooled_element(e, "return")
        e.code(f"fl::cu::each({e.mul(b, w)}, [=] __device__ (int64_t k) {{ const float* x = "
               f"{x}; const int64_t w = {w}; const int64_t i = k / w, j = k % w; "
               f"const int64_t s = {x.lod}[i], t = {x.lod}[i + 1]; {element} }});")

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

    # the share of a sequence's gradient d each of its rows [s, t) gets, for both targets
    # (divided in double as numpy does); the other pooltypes give it to one row
    C_SPREAD = {"SUM": "d", "AVERAGE": "(float)((double)d / (double)(t - s))",
                "SQRT": "(float)((double)d / sqrt((double)(t - s)))"}

    @staticmethod
    def compiled_operands(e):
        """X (with a LoD), Out@GRAD, the pooltype, X@GRAD, X's sequences and row width (C
        expressions), for both targets."""
        x, d = e.input("X"), e.input("Out@GRAD")
        e.require_float(x, d)
        ptype = e.attr("pooltype").upper()
        if x.lod is None or ptype not in SequencePool.C_POOL:
            e.fail("X has no LoD, or an unknown pooltype")
        g = e.output("X@GRAD", x.dims, lod_from=x)
        b, w = f"({x.lod_len} - 1)", e.prod(x.dims[1:])
        return x, d, ptype, g, b, w

    @staticmethod
    def emit(e):
        """SUM/AVERAGE/SQRT spread each sequence's gradient over its rows (divided in double
        as numpy does), FIRST/LAST/MAX/MIN give it to one row of each; empty sequences get
        none."""
        x, d, ptype, g, b, w = SequencePoolGrad.compiled_operands(e)
        spread = SequencePoolGrad.C_SPREAD
        head = (f"const float* x = {x}; const int64_t w = {w}; for (int64_t i = 0; i < {b}; "
                f"++i) {{ const int64_t s = {x.lod}[i], t = {x.lod}[i + 1]; for (int64_t j = 0; "
                f"j < w; ++j) {{ const float d = {d}[i * w + j];")
        if ptype in spread:
            e.code(f"{head} for (int64_t r = s; r < t; ++r) {g}[r * w + j] = {spread[ptype]}; }} }}")
            return
        e.code(f"std::memset({g}, 0, sizeof(float) * {g.numel()});")
        pick = {"FIRST": "s", "LAST": "t - 1"}.get(ptype)
        if pick is None:   # MAX/MIN: the first extreme row, found again as the kernel does
            e.code(f"{head} if (t <= s) continue; {SequencePool.C_POOL[ptype]} "
                   f"{g}[(int64_t)a * w + j] = d; }} }}")
        else:
            e.code(f"{head} if (t <= s) continue; {g}[({pick}) * w + j] = d; }} }}")

    @staticmethod
    def cuda_emit(e):
        """One device thread per element of X@GRAD: its row's sequence found by a binary
        search of the LoD, then the C++ target's rule for that pooltype."""
        x, d, ptype, g, b, w = SequencePoolGrad.compiled_operands(e)
        spread = SequencePoolGrad.C_SPREAD
        if ptype in spread:
            value = spread[ptype]
        elif ptype in ("FIRST", "LAST"):
            value = f"row == {'s' if ptype == 'FIRST' else 't - 1'} ? d : 0.0f"
        else:
            value = f"0.0f; {{ {SequencePool.C_POOL[ptype]} if (a == row) g = d; }}"
        e.code(f"fl::cu::each({g.numel()}, [=] __device__ (int64_t k) {{ const float* x = "
               f"{x}; const int64_t w = {w}; const int64_t row = k / w, j = k % w; "
               f"int64_t lo = 0, hi = {b} - 1; while (lo < hi) {{ const int64_t mid = "
               f"(lo + hi + 1) / 2; if ({x.lod}[mid] <= row) lo = mid; else hi = mid - 1; }} "
               f"const int64_t s = {x.lod}[lo], t = {x.lod}[lo + 1]; const float d = "
               f"{d}[lo * w + j]; float g = {value}; {g}[k] = g; }});")


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
            if "grad_emit" in fwd.__dict__:      # its compiled form, on the forward class
                emit = fwd.__dict__["grad_emit"]

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


def _emit_repeat(e, x, y, lod_from):
    """sequence_expand(_as)'s Out: row i of X (no LoD) once per row of sequence i of Y."""
    if x.lod is not None:
        e.fail("X has LoD (Out's LoD would be made here)")
    n = c_emit.sequences(e, y, "Y")
    c_emit.same_dim(e, x.dims[0], n, "X has a row per sequence of Y")
    out = e.output("Out", [y.dims[0]] + x.dims[1:], x.ctype, lod_from=lod_from)
    e.code(f"fl::seq_repeat_rows({x}, {y.lod}, {n}, {e.prod(x.dims[1:])}, {out});")


def _emit_repeat_grad(e):
    x, y, d = e.input("X"), e.input("Y"), e.input("Out@GRAD")
    e.require_float(x, d)
    if x.lod is not None or (e.op.type == "sequence_expand" and e.attr("ref_level") not in (-1, 0)):
        e.fail("X has LoD, or a ref_level past Y's one level")
    n = c_emit.sequences(e, y, "Y")
    c_emit.same_dim(e, x.dims[0], n, "X has a row per sequence of Y")
    c_emit.same_dim(e, d.dims[0], y.dims[0], "Out@GRAD has Y's rows")
    dx = e.output("X@GRAD", x.dims, lod_from=False)
    e.code(f"fl::seq_repeat_rows_grad({d}, {y.lod}, {n}, {e.prod(x.dims[1:])}, {dx});")


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

    @staticmethod
    def emit(e):
        """X without LoD (Out then has none): its row i repeated per row of Y's sequence i."""
        if e.attr("ref_level") not in (-1, 0):
            e.fail("ref_level past Y's one level")
        _emit_repeat(e, e.input("X"), e.input("Y"), False)

    grad_emit = staticmethod(_emit_repeat_grad)


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

    @staticmethod
    def emit(e):
        """Row i of X per row of Y's sequence i; Out takes Y's LoD."""
        y = e.input("Y")
        _emit_repeat(e, e.input("X"), y, y)

    grad_emit = staticmethod(_emit_repeat_grad)


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

    @staticmethod
    def emit(e):
        x = e.input("X")
        n = c_emit.sequences(e, x, "X")
        y = e.output("Y", x.dims, x.ctype, lod_from=x)
        e.code(f"fl::seq_reverse({x}, {x.lod}, {n}, {e.prod(x.dims[1:])}, {y});")

    @staticmethod
    def grad_emit(e):
        """Reversal is a permutation: the gradient is Y@GRAD reversed (adds into zeros)."""
        x, d = e.input("X"), e.input("Y@GRAD")
        e.require_float(x, d)
        e.same_dims(x, d)
        n = c_emit.sequences(e, x, "X")
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        e.code(f"fl::seq_reverse({d}, {x.lod}, {n}, {e.prod(x.dims[1:])}, {dx});")


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


def _emit_pad_width(e, x):
    """sequence_pad(_grad)'s number of sequences and padded width, as C expressions."""
    n = c_emit.sequences(e, x, "X")
    longest = f"fl::seq_max_len({x.lod}, {x.lod_len})"
    width = int(e.attr("padded_length"))
    if width == -1:
        return n, longest
    e.check(f"{width} < {longest}", "sequence_pad: padded_length is shorter than a sequence")
    return n, str(width)


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

    @staticmethod
    def emit(e):
        """Out [N, width, ...]: width is padded_length, else the longest sequence (from the
        LoD before the segment runs); a padded_length shorter than a sequence runs the op
        interpreted (its kernel says so)."""
        x, pv = e.input("X"), e.input("PadValue")
        n, width = _emit_pad_width(e, x)
        if pv.ctype != x.ctype:
            e.fail("PadValue and X differ in dtype")
        w = e.prod(x.dims[1:])
        row = pv.numel() != "1"
        if row:
            c_emit.same_dim(e, pv.numel(), w, "PadValue is one value or one row of X")
        out = e.output("Out", [n, width] + x.dims[1:], x.ctype, lod_from=False)
        length = e.output("Length", [n], "int64_t", lod_from=False)
        e.code(f"fl::seq_pad({x}, {x.lod}, {n}, {width}, {w}, {pv}, {e.literal(row)}, {out}, "
               f"{length});")

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

    @staticmethod
    def emit(e):
        x, d = e.input("X"), e.input("Out@GRAD")
        e.require_float(x, d)
        n, width = _emit_pad_width(e, x)
        c_emit.same_dim(e, d.numel(), e.prod([n, width] + x.dims[1:]),
                          "Out@GRAD is the padded Out")
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        e.code(f"fl::seq_pad_grad({d}, {x.lod}, {n}, {width}, {e.prod(x.dims[1:])}, {dx});")


# --- row-local ops ---------------------------------------------------------------------------
def _emit_one_per_row(e, x):
    """sequence_softmax's X: [T] or [T, 1] with LoD; its number of sequences."""
    if x.ndim > 2 or (x.ndim == 2 and x.dims[1] != "1"):
        e.fail("X is not [T] or [T, 1]")
    return c_emit.sequences(e, x, "X")


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

    @staticmethod
    def emit(e):
        x = e.input("X")
        e.require_float(x)
        n = _emit_one_per_row(e, x)
        out = e.output("Out", x.dims, lod_from=x)
        e.code(f"fl::seq_softmax({x}, {x.lod}, {n}, {out});")

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

    @staticmethod
    def emit(e):
        out, d, x = e.input("Out"), e.input("Out@GRAD"), e.input("X")
        e.require_float(out, d, x)
        n = _emit_one_per_row(e, x)
        for b in (out, d):
            c_emit.same_dim(e, b.numel(), x.dims[0], f"{b.var} has one value per row of X")
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        e.code(f"fl::seq_softmax_grad({out}, {d}, {x.lod}, {n}, {dx});")


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

    @staticmethod
    def emit(e):
        """Only where new_dim is X's width (the LoD stays X's; any other new_dim makes a new
        LoD here): a copy."""
        x = e.input("X")
        if x.ndim != 2 or x.dims[1] != str(e.attr("new_dim")):
            e.fail("new_dim other than X's width (a new LoD)")
        c_emit.sequences(e, x, "X")
        out = e.output("Out", x.dims, x.ctype, lod_from=x)
        e.code(f"std::memcpy({out}, {x}, {x.nbytes()});")

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

    @staticmethod
    def emit(e):
        """dOut's values in X's shape (and LoD)."""
        x, d = e.input("X"), e.input("Out@GRAD")
        c_emit.same_dim(e, d.numel(), x.numel(), "Out@GRAD has X's size")
        dx = e.output("X@GRAD", x.dims, d.ctype, lod_from=x)
        e.code(f"std::memcpy({dx}, {d}, {dx.nbytes()});")


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

    @staticmethod
    def emit(e):
        """Only Y's own LoD (Out takes it; a LoD from Y's values or target_lod would be
        made here): a copy of X."""
        x, y = e.input("X"), e.input("Y")
        if y is None or y.lod is None or e.attr("append"):
            e.fail("a new LoD (target_lod, Y's values or append)")
        out = e.output("Out", x.dims, x.ctype, lod_from=y)
        e.code(f"std::memcpy({out}, {x}, {x.nbytes()});")

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

    @staticmethod
    def emit(e):
        x, d = e.input("X"), e.input("Out@GRAD")
        dx = e.output("X@GRAD", d.dims, d.ctype, lod_from=x)
        e.code(f"std::memcpy({dx}, {d}, {d.nbytes()});")


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

    @staticmethod
    def emit(e):
        """With a maxlen attribute (a maxlen from X's values or a tensor would size Out from
        data): Y[..., j] = j < X[...]."""
        x = e.input("X")
        maxlen = int(e.attr("maxlen"))
        if e.op.input("MaxLenTensor") or maxlen < 0:
            e.fail("maxlen from X's values or MaxLenTensor")
        if x.ctype not in ("int64_t", "int32_t", "float", "double"):
            e.fail(f"X is {x.ctype}")
        ct = e.ctype_of(e.attr("out_dtype"))
        y = e.output("Y", x.dims + [str(maxlen)], ct, lod_from=False)
        e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) for (int64_t j = 0; j < {maxlen}; "
               f"++j) {y}[i * {maxlen} + j] = ({ct})(j < {x}[i]);")


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

    @staticmethod
    def emit(e):
        x = e.input("X")
        if x.ctype not in ("int64_t", "int32_t"):
            e.fail(f"X is {x.ctype}")
        if x.ndim > 2 or (x.ndim == 2 and x.dims[1] != "1"):
            e.fail("X is not [T] or [T, 1]")
        n = c_emit.sequences(e, x, "X")
        win = int(e.attr("win_size"))
        if win < 1:
            e.fail(f"win_size {win}")
        out = e.output("Out", [x.dims[0], str(win)], x.ctype, lod_from=x)
        pad = f"({x.ctype})({int(e.attr('pad_value'))}LL)"
        e.code(f"fl::seq_enumerate({x}, {x.lod}, {n}, {win}, {pad}, {out});")


def _conv_grad(g):
    ins = {"X": g.input("X"), "Filter": g.input("Filter"), "Out@GRAD": g.output_grad("Out")}
    outs = {"X@GRAD": g.input_grad("X"), "Filter@GRAD": g.input_grad("Filter")}
    if g.input("PaddingData"):
        ins["PaddingData"] = g.input("PaddingData")
        outs["PaddingData@GRAD"] = g.input_grad("PaddingData")
    g.op("sequence_conv_grad", ins, outs, g.attrs())


def _emit_conv_inputs(e):
    """sequence_conv(_grad)'s X [T, M] (LoD), Filter [contextLength * M, N] and PaddingData
    (trainable: [up + down, M], else None) Bufs and its window (k, contextStart, up, down)."""
    x, f = e.input("X"), e.input("Filter")
    e.require_float(x, f)
    k, cs = int(e.attr("contextLength")), int(e.attr("contextStart"))
    if e.attr("contextStride") != 1 or x.ndim != 2 or f.ndim != 2:
        e.fail("contextStride other than 1, or X or Filter not a matrix")
    c_emit.same_dim(e, f.dims[0], e.mul(k, x.dims[1]), "Filter has contextLength x M rows")
    up, down = max(0, -cs), max(0, cs + k - 1)
    pad = None
    if e.attr("paddingTrainable"):
        pad = e.input("PaddingData")
        if pad is None:
            e.fail("paddingTrainable without PaddingData")
        e.require_float(pad)
        c_emit.same_dim(e, pad.dims[0], up + down, "PaddingData has up + down rows")
        c_emit.same_dim(e, e.prod(pad.dims[1:]), x.dims[1], "PaddingData has X's width")
    return x, f, pad, k, cs, up, down


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

    @staticmethod
    def emit(e):
        """fl::seq_context builds the [T, contextLength * M] context matrix the kernel
        gathers, then one gemm by Filter."""
        x, f, pad, k, cs, up, down = _emit_conv_inputs(e)
        out = e.output("Out", [x.dims[0], f.dims[1]], lod_from=x)
        n = c_emit.sequences(e, x, "X")
        col = e.scratch([x.dims[0], f.dims[0]])
        e.code(f"fl::seq_context({x}, {x.lod}, {n}, {x.dims[1]}, {k}, {cs}, "
               f"{pad or 'nullptr'}, {up}, {col});")
        e.code(f"fl::matmul({x.dims[0]}, {f.dims[1]}, {f.dims[0]}, {col}, {f}, {out});")


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

    @staticmethod
    def emit(e):
        """The kernel's backward: Filter@GRAD = col^T @ dOut, then dOut @ Filter^T added
        back through the context (fl::seq_context_grad, np.add.at's order)."""
        x, f, pad, k, cs, up, down = _emit_conv_inputs(e)
        d = e.input("Out@GRAD")
        e.require_float(d)
        c_emit.same_dim(e, d.dims[0], x.dims[0], "Out@GRAD has X's rows")
        c_emit.same_dim(e, e.prod(d.dims[1:]), f.dims[1], "Out@GRAD has Filter's columns")
        n = c_emit.sequences(e, x, "X")
        rows, km = x.dims[0], f.dims[0]
        if e.has_output("Filter@GRAD"):
            col = e.scratch([rows, km])
            df = e.output("Filter@GRAD", f.dims, lod_from=False)
            e.code(f"fl::seq_context({x}, {x.lod}, {n}, {x.dims[1]}, {k}, {cs}, "
                   f"{pad or 'nullptr'}, {up}, {col});")
            e.code(f"fl::at_b({rows}, {km}, {f.dims[1]}, {col}, {d}, {df});")
        dx = e.output("X@GRAD", x.dims, lod_from=x) if e.has_output("X@GRAD") else None
        dpad = (e.output("PaddingData@GRAD", pad.dims, lod_from=False)
                if pad is not None and e.has_output("PaddingData@GRAD") else None)
        if dx is None and dpad is None:
            return
        dcol = e.scratch([rows, km])
        e.code(f"fl::gemm(false, true, {rows}, {km}, {f.dims[1]}, 1.0f, {d}, {f.dims[1]}, "
               f"{f}, {f.dims[1]}, 0.0f, {dcol}, {km});")
        e.code(f"fl::seq_context_grad({dcol}, {x.lod}, {n}, {rows}, {x.dims[1]}, {k}, {cs}, "
               f"{dx or 'nullptr'}, {dpad or 'nullptr'}, {up}, {up + down});")


# --- sequence_scatter: sparse updates of each row of X by one sequence of (id, value) --------
def _emit_scatter_inputs(e):
    """sequence_scatter(_grad)'s X [N, ...], Ids (int64, one sequence per row of X) and
    Updates (one per id) Bufs, N and X's row width."""
    x, ids, upd = e.input("X"), e.input("Ids"), e.input("Updates")
    e.require_float(x, upd)
    if ids.ctype != "int64_t":
        e.fail(f"Ids are {ids.ctype}")
    n = c_emit.sequences(e, ids, "Ids")
    c_emit.same_dim(e, x.dims[0], n, "X has a row per sequence of Ids")
    c_emit.same_dim(e, upd.numel(), ids.dims[0], "Updates has one value per id")
    c_emit.same_dim(e, ids.numel(), ids.dims[0], "Ids has one id per row")
    return x, ids, upd, n, e.prod(x.dims[1:])


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

    @staticmethod
    def emit(e):
        """fl::seq_scatter: every id checked first, then the adds in the kernel's order."""
        x, ids, upd, n, w = _emit_scatter_inputs(e)
        out = e.output("Out", x.dims, lod_from=x)
        e.code(f"{{ const int64_t bad = fl::seq_scatter({x}, {ids}, {upd}, {ids.lod}, {n}, {w}, "
               f"{out}); if (bad >= 0) {{ std::snprintf(err, 512, \"sequence_scatter: id %lld "
               f"is out of range for rows of %lld\", (long long){ids}[bad], (long long)({w})); "
               f"return {2 + e.k}; }} }}")

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

    @staticmethod
    def emit(e):
        x, ids, upd, n, w = _emit_scatter_inputs(e)
        d = e.input("Out@GRAD")
        e.require_float(d)
        e.same_dims(d, x)
        if e.has_output("X@GRAD"):
            dx = e.output("X@GRAD", x.dims, lod_from=x)
            e.code(f"std::memcpy({dx}, {d}, {d.nbytes()});")
        if e.has_output("Updates@GRAD"):
            du = e.output("Updates@GRAD", upd.dims, lod_from=upd)
            e.code(f"for (int64_t i = 0; i < {n}; ++i) for (int64_t j = {ids.lod}[i]; "
                   f"j < {ids.lod}[i + 1]; ++j) {{ const int64_t c = {ids}[j]; if (c < 0 || "
                   f"c >= {w}) {{ std::snprintf(err, 512, \"sequence_scatter_grad: id %lld is "
                   f"out of range for rows of %lld\", (long long)c, (long long)({w})); "
                   f"return {2 + e.k}; }} {du}[j] = {d}[i * {w} + c]; }}")
