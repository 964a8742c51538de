"""fused_elemwise_activation (Fluid 1.8): a binary elementwise op and a unary one in one op,
with its gradient.

functor_list names the two, outermost first:

* [binary, unary] (e.g. ["elementwise_add", "scale"]): Out = binary(X, unary(Y)),
  IntermediateOut = unary(Y) (Y's shape);
* [unary, binary] (e.g. ["relu", "elementwise_add"]): Out = unary(binary(X, Y)),
  IntermediateOut = binary(X, Y) (Out's shape).

Binary functors: elementwise_add, elementwise_mul; unary: scale (attribute `scale`), relu,
tanh, sigmoid. X and Y broadcast as elementwise ops do, with `axis`, in either direction: Out
takes the shape (and LoD) of the larger one (Y when Y has more dims, or as many and one
larger). Every functor is the registered op's own kernel (and, backward, its grad op's).
"""
from ..core.tensor import LoDTensor
from ..errors import ProgramError
from . import fused_parts
from .common import reduce_to_shape
from .registry import In, OpDef, Out, strings

BINARY = ("elementwise_add", "elementwise_mul")
UNARY = ("scale", "relu", "tanh", "sigmoid")


def _split(functors, op):
    """(binary, unary, unary_outside) of a functor list, names without `_grad`; ProgramError
    (a ValueError) naming the op when it is not one binary and one unary functor."""
    names = [f[:-len("_grad")] if f.endswith("_grad") else f for f in functors]
    if len(names) != 2:
        raise ProgramError(f"{op}: functor_list must name 2 functors, got {list(functors)}")
    if names[0] in BINARY and names[1] in UNARY:
        return names[0], names[1], False
    if names[1] in BINARY and names[0] in UNARY:
        return names[1], names[0], True
    raise ProgramError(f"{op}: functor_list {list(functors)} is not one of {list(BINARY)} and "
                     f"one of {list(UNARY)}")


def _x_is_larger(xs, ys):
    """Paddle's IsBcastY: whether Y broadcasts onto X (else X onto Y)."""
    if len(xs) != len(ys):
        return len(xs) > len(ys)
    return all(a < 0 or b < 0 or a >= b for a, b in zip(xs, ys))


def _unary(name, scale):
    if name == "scale":
        k = fused_parts.kernel("scale", scale=scale)
        return lambda v: k(v, None)
    return fused_parts.activation(name)


def _unary_grad(name, scale):
    """d(x, out, dout) -> dx of the unary functor."""
    if name == "scale":
        k = fused_parts.kernel("scale", scale=scale)
        return lambda x, o, d: k(d, None)
    return fused_parts.activation_grad(name)


def _forward(attrs, op):
    """forward(x, y) -> (out, intermediate) for the op's attributes."""
    binary, unary, outside = _split(attrs["functor_list"], op)
    b = fused_parts.kernel(binary, axis=attrs["axis"])
    u = _unary(unary, attrs["scale"])
    if outside:
        def forward(x, y):
            inter = b(x, y)
            return u(inter).astype(inter.dtype, copy=False), inter
    else:
        def forward(x, y):
            inter = u(y).astype(y.dtype, copy=False)
            return b(x, inter), inter
    return forward


class FusedElemwiseActivation(OpDef):
    type = "fused_elemwise_activation"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"), Out("IntermediateOut", dispensable=True, intermediate=True))
    attrs = {"axis": -1, "scale": 0.0, "save_intermediate_out": False,
             "functor_list": strings()}
    kind = "value"       # Out takes the LoD of the larger of X and Y, known at run time
    share_lod = None
    doc = ("Out = binary(X, unary(Y)) or unary(binary(X, Y)) as functor_list says (outermost "
           "first); IntermediateOut holds the inner result when save_intermediate_out.")

    @staticmethod
    def infer_shape(ctx):
        try:
            _, _, outside = _split(ctx.attr("functor_list"), "fused_elemwise_activation")
        except ProgramError as e:
            ctx.fail(str(e).split(": ", 1)[1])
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        big = "X" if _x_is_larger(xs, ys) else "Y"
        dt = ctx.input_dtype("X")
        if ctx.attr("save_intermediate_out") and not ctx.has_output("IntermediateOut"):
            ctx.fail("save_intermediate_out needs the output IntermediateOut")
        inter = big if outside else "Y"
        ctx.set_output("IntermediateOut", ctx.input_shape(inter), dt,
                       ctx.input_lod_level(inter))
        ctx.set_output("Out", ctx.input_shape(big), dt, ctx.input_lod_level(big))

    @classmethod
    def prepare(cls, attrs, outputs):
        forward = _forward(attrs, cls.type)
        _, _, outside = _split(attrs["functor_list"], cls.type)

        def kernel(x, y):
            xa, ya = x._array, y._array
            out, inter = forward(xa, ya)
            big = x if _x_is_larger(xa.shape, ya.shape) else y
            return (LoDTensor(out.astype(xa.dtype, copy=False), big._lod),
                    LoDTensor(inter.astype(xa.dtype, copy=False), (big if outside else y)._lod))
        return kernel

    @staticmethod
    def grad(g):
        ins = {"X": g.input("X"), "Y": g.input("Y"), "Out": g.output("Out"),
               "Out@GRAD": g.output_grad("Out")}
        if g.attr("save_intermediate_out") and g.has_output("IntermediateOut"):
            ins["IntermediateOut"] = g.output("IntermediateOut")
        attrs = g.attrs()
        attrs["functor_list"] = [f + "_grad" for f in attrs["functor_list"]]
        g.op("fused_elemwise_activation_grad", ins,
             {"X@GRAD": g.input_grad("X"), "Y@GRAD": g.input_grad("Y")}, attrs)


class FusedElemwiseActivationGrad(OpDef):
    type = "fused_elemwise_activation_grad"
    inputs = (In("X", dispensable=True), In("Y"), In("Out", dispensable=True),
              In("IntermediateOut", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True),
               Out("IntermediateOut@GRAD", dispensable=True))
    attrs = FusedElemwiseActivation.attrs
    infer_shape = None
    doc = ("X@GRAD, Y@GRAD of fused_elemwise_activation (functor_list with `_grad` "
           "suffixes, as Fluid writes it); IntermediateOut@GRAD is the gradient at the "
           "inner result.")

    @classmethod
    def prepare(cls, attrs, outputs):
        binary, unary, outside = _split(attrs["functor_list"], cls.type)
        forward = _forward(attrs, cls.type)
        bgrad = fused_parts.kernel(binary + "_grad", axis=attrs["axis"])
        du = _unary_grad(unary, attrs["scale"])

        def kernel(x, y, out, inter, dout):
            if x is None:
                x = dout     # only an elementwise_add reads no X; its shape is Out's
            if inter is None:
                out, inter = forward(x, y)
            elif out is None:
                out = forward(x, y)[0]
            if outside:
                dinter = du(inter, out, dout)
                dx, dy = bgrad(x, y, out, dinter)
            else:
                dx, d_uy = bgrad(x, inter, out, dout)
                dinter = d_uy
                dy = du(y, inter, d_uy) if d_uy is not None else None
            cast = (lambda v, like: None if v is None else
                    reduce_to_shape(v, like.shape).astype(like.dtype, copy=False))
            return cast(dx, x), cast(dy, y), None if dinter is None else \
                dinter.astype(dout.dtype, copy=False)
        return kernel
