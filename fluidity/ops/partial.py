"""partial_concat and partial_sum: the same column window [start_index, start_index + length)
of several 2-D tensors of one shape, concatenated (partial_concat) or added (partial_sum),
with their gradients (the window of Out@GRAD back into each input, zeros elsewhere), as
Fluid 1.8's ops compute them. length -1 means every column from start_index on;
partial_concat also takes a negative start_index counted from the end."""
import numpy as np

from ..errors import ShapeError
from .common import grad_maker
from .registry import In, OpDef, Out


def window(op, shapes, start, length, negative_start):
    """(start, length) of the column window for inputs of `shapes` (checked: 2-D, one
    shape); ShapeError naming the op otherwise. Unknown (-1) dims pass at build time."""
    if not shapes:
        raise ShapeError(f"{op}: Input(X) is empty")
    first = list(shapes[0])
    for i, s in enumerate(shapes):
        if len(s) != 2:
            raise ShapeError(f"{op}: every X must be 2-D, X[{i}] is {list(s)}")
        if all(d >= 0 for d in list(s) + first) and list(s) != first:
            raise ShapeError(f"{op}: every X must have X[0]'s shape {first}, X[{i}] is "
                             f"{list(s)}")
    size = first[1]
    if size < 0:
        return start, length
    lo = -size if negative_start else 0
    if not lo <= start < size:
        raise ShapeError(f"{op}: start_index {start} is out of range for inputs of "
                         f"{size} columns")
    if start < 0:
        start += size
    if length < 0:
        length = size - start
    if start + length > size:
        raise ShapeError(f"{op}: start_index {start} + length {length} exceeds the inputs' "
                         f"{size} columns")
    return start, length


class _Partial(OpDef):
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Out"),)
    attrs = {"start_index": 0, "length": -1}
    negative_start = True

    @classmethod
    def infer_shape(cls, ctx):
        shapes = ctx.input_shapes("X")
        try:
            start, length = window(cls.type, shapes, ctx.attr("start_index"),
                                    ctx.attr("length"), cls.negative_start)
        except ShapeError as e:
            ctx.fail(str(e))
        width = -1 if length < 0 else cls.width(length, len(shapes))
        ctx.set_output("Out", [shapes[0][0], width], ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        op, s0, n0, neg = cls.type, attrs["start_index"], attrs["length"], cls.negative_start

        def kernel(xs):
            s, n = window(op, [x.shape for x in xs], s0, n0, neg)
            return cls.combine([x[:, s:s + n] for x in xs])
        return kernel


class _PartialGrad(OpDef):
    inputs = (In("X", duplicable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD", duplicable=True),)
    attrs = {"start_index": 0, "length": -1}
    infer_shape = None
    negative_start = True

    @classmethod
    def prepare(cls, attrs, outputs):
        op, s0, n0, neg = cls.type, attrs["start_index"], attrs["length"], cls.negative_start

        def kernel(xs, dout):
            s, n = window(op, [x.shape for x in xs], s0, n0, neg)
            grads = []
            for k, x in enumerate(xs):
                d = np.zeros_like(x)
                d[:, s:s + n] = cls.piece(dout, k, n)
                grads.append(d)
            return grads
        return kernel


class PartialConcat(_Partial):
    type = "partial_concat"
    doc = "Out = concat([X_k[:, start_index:start_index + length] for k], axis=1)."

    @staticmethod
    def width(length, count):
        return length * count

    @staticmethod
    def combine(parts):
        return np.concatenate(parts, axis=1)

    grad = grad_maker("partial_concat_grad", ("X", "Out@GRAD"), ("X",))


class PartialConcatGrad(_PartialGrad):
    type = "partial_concat_grad"

    @staticmethod
    def piece(dout, k, n):
        return dout[:, k * n:(k + 1) * n]


class PartialSum(_Partial):
    type = "partial_sum"
    attrs = {"start_index": 0, "length": -1, "use_mkldnn": False}
    negative_start = False
    doc = "Out = sum_k X_k[:, start_index:start_index + length]."

    @staticmethod
    def width(length, count):
        return length

    @staticmethod
    def combine(parts):
        out = parts[0].copy()
        for p in parts[1:]:
            out += p
        return out

    grad = grad_maker("partial_sum_grad", ("X", "Out@GRAD"), ("X",))


class PartialSumGrad(_PartialGrad):
    type = "partial_sum_grad"
    attrs = PartialSum.attrs
    negative_start = False

    @staticmethod
    def piece(dout, k, n):
        return dout
