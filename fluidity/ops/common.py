"""Helpers shared by op families: Paddle's broadcasting rule, shape arithmetic, build-time
shape rules and attributes given as tensors; and, for value and ctx ops, the holders' values
(empty tensors, SelectedRows made dense, zeros, gradients summed) and step frames."""
import numpy as np

from ..core.names import EMPTY_VAR_NAME
from ..core.tensor import LoDTensor, LoDTensorArray, SelectedRows
from ..errors import ExecutionError, ShapeError


def align_for_broadcast(x_shape, y_shape, axis):
    """Paddle's elementwise rule: Y's dims line up with X's starting at `axis` (-1: trailing).
    Returns Y's shape padded with 1s to X's rank; trailing 1s of Y that hang past X's end
    (old programs) are dropped; ShapeError when Y does not fit inside X at `axis`. If Y has
    more dims than X, the roles swap (Paddle 2.x); of equal ranks Y is as it is. Written once
    for build-time shapes (ints, -1 unknown) and the code generator's symbolic dims
    (codegen/dim.py: a Dim compares equal to its literal)."""
    nx, ny = len(x_shape), len(y_shape)
    if nx == ny:
        return list(y_shape)
    if ny > nx:
        return align_for_broadcast(y_shape, x_shape, axis)
    if axis == -1 or axis is None:
        axis = nx - ny
    y_shape = list(y_shape)
    while len(y_shape) > 0 and axis + len(y_shape) > nx and y_shape[-1] == 1:
        y_shape.pop()
    if axis < 0 or axis + len(y_shape) > nx:
        raise ShapeError(f"Y{list(y_shape)} does not line up with X{list(x_shape)} at axis "
                         f"{axis}")
    return [1] * axis + y_shape + [1] * (nx - axis - len(y_shape))


def broadcast_pair(x, y, axis):
    """x, y reshaped so numpy broadcasting does what Paddle's `axis` rule says."""
    if x.ndim == y.ndim:
        return x, y
    if y.ndim < x.ndim:
        return x, y.reshape(align_for_broadcast(x.shape, y.shape, axis))
    return x.reshape(align_for_broadcast(y.shape, x.shape, axis)), y


def broadcast_shape(a, b):
    """numpy broadcast of two shapes where -1 means unknown."""
    out = []
    for da, db in zip(a, b):
        if da == db:
            out.append(da)
        elif da == 1:
            out.append(db)
        elif db == 1:
            out.append(da)
        elif da == -1 or db == -1:
            out.append(max(da, db) if min(da, db) == -1 and max(da, db) != 1 else -1)
        else:
            return None
    return out


def reduce_to_shape(g, shape):
    """Sum `g` over the dims that broadcasting expanded so it gets `shape`."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    nd = g.ndim - len(shape)
    if nd > 0:
        g = g.sum(axis=tuple(range(nd)))
    axes = tuple(i for i, (a, b) in enumerate(zip(g.shape, shape)) if b == 1 and a != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def untile(dout, shape, times):
    """The gradient of np.tile(x, times) for x of `shape` (len(times) == len(shape)): the
    sum of dout's tiles, in dout's dtype. dout viewed as [t0, d0, t1, d1, ...] is summed
    over the t axes. expand, tile and expand_as all take their gradient so."""
    split = [n for t, d in zip(times, shape) for n in (t, d)]
    return dout.reshape(split).sum(axis=tuple(range(0, 2 * len(shape), 2))) \
        .astype(dout.dtype, copy=False)


def prod(shape):
    """The product of `shape`'s dims: ints, or the code generator's Dims (a symbolic
    product), one rule for both."""
    n = 1
    for d in shape:
        n = n * d
    return n


def numel(shape):
    """Number of elements, or -1 if a dim is unknown."""
    return -1 if any(d < 0 for d in shape) else prod(shape)


def flatten_to_2d(shape, num_col_dims):
    """[d0..dk-1, dk..dn] -> [prod(d0..dk-1), prod(dk..)] (mul's x_num_col_dims rule)."""
    return prod(shape[:num_col_dims]), prod(shape[num_col_dims:])


def as_dtype_of(value, like):
    return np.asarray(value, dtype=like.dtype)


def norm_axis(axis, rank, what="axis"):
    """`axis` in [-rank, rank) -> [0, rank); ShapeError otherwise."""
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return axis % rank if rank else 0


def infer_with(ctx, rule, *args):
    """Run a shape rule at build time; a broken rule fails naming the op and its inputs."""
    try:
        return rule(*args)
    except ShapeError as e:
        ctx.fail(str(e), type(e))      # the class says which built-in error Fluid raises


def ints_from(tensor=None, tensor_list=None):
    """Ints a layer passed as a 1-D tensor or a list of [1] tensors (None if neither)."""
    if tensor_list:
        return [int(np.asarray(t).reshape(-1)[0]) for t in tensor_list]
    if tensor is not None:
        return [int(v) for v in np.asarray(tensor).reshape(-1)]
    return None


def present(slots):
    """Grad-op inputs without the empty (absent dispensable) slots."""
    return {k: v for k, v in slots.items() if v}


def grad_maker(grad_type, reads, wrt):
    """An OpDef's `grad` (a staticmethod) appending the op `grad_type`, which reads the
    forward's slots `reads` (input or output slot names; `<out>@GRAD` for the gradient of
    output `out`; absent dispensable ones left out) and writes the gradients of the forward
    inputs `wrt` that are present, with the forward's attrs."""
    def make(g):
        ins = {s: g.output_grad(s[:-len("@GRAD")]) if s.endswith("@GRAD")
               else g.input(s) or g.output(s) for s in reads}
        g.op(grad_type, present(ins), {s + "@GRAD": g.input_grad(s) for s in wrt if g.input(s)},
             g.attrs())
    return staticmethod(make)


# --- second-order gradients: the `grad` of a grad op ------------------------------------------
# A backward pass over a program that holds an earlier pass's grad ops (a gradient of a
# gradient) differentiates those ops too; each maker below is the `grad` of one kind of them.
# A grad op's inputs are the forward's (X, Y) and Out@GRAD; `g.output_grad("X@GRAD")` names
# the gradient flowing into its output dX (ddX), `g.input_grad("Out@GRAD")` the one it gives
# dOut.
def bilinear_double_grad(fwd_type, x_slot="X", y_slot="Y", out_slot="Out"):
    """The grad of `<fwd_type>_grad` for an op bilinear in X and Y, Out = B(X, Y)
    (elementwise_mul, mul, matmul; conv2d/3d in Input and Filter, with their slot names). Its
    dX is linear in (dOut, Y) and dY in (X, dOut), so: X gets dX of B's grad at (X, ddY,
    dOut); Y gets dY of B's grad at (ddX, Y, dOut); dOut gets B(ddX, Y) + B(X, ddY) (the two
    writes are summed by backward)."""
    grad_type = fwd_type + "_grad"
    dx_slot, dy_slot, dout_slot = x_slot + "@GRAD", y_slot + "@GRAD", out_slot + "@GRAD"

    def make(g):
        x, y, dout = g.input(x_slot), g.input(y_slot), g.input(dout_slot)
        ddx = g.output_grad(dx_slot) if g.has_output(dx_slot) else None
        ddy = g.output_grad(dy_slot) if g.has_output(dy_slot) else None
        attrs = g.attrs()
        if ddy:
            g.op(grad_type, {x_slot: x, y_slot: ddy, dout_slot: dout},
                 {dx_slot: g.input_grad(x_slot)}, attrs)
        if ddx:
            g.op(grad_type, {x_slot: ddx, y_slot: y, dout_slot: dout},
                 {dy_slot: g.input_grad(y_slot)}, attrs)
        for a, b in ((ddx, y), (x, ddy)):
            if a and b:
                g.op(fwd_type, {x_slot: a, y_slot: b}, {out_slot: g.input_grad(dout_slot)},
                     attrs)
    return staticmethod(make)


def linear_double_grad(fwd_type, operands=("X",)):
    """The grad of `<fwd_type>_grad` for an op linear in its `operands` together
    (elementwise_add/sub, mean, reduce_sum/mean): the grad op's outputs are linear in dOut
    alone, so dOut gets the forward op applied to ddX, ddY (zeros for an operand whose
    gradient the grad op did not compute), and nothing else gets a gradient."""
    def make(g):
        out = g.input_grad("Out@GRAD")
        if all(n == EMPTY_VAR_NAME for n in out):
            return
        ins = {s: g.output_grad(s + "@GRAD") if g.has_output(s + "@GRAD")
               else g.zeros_like(g.input(s)) for s in operands}
        g.op(fwd_type, ins, {"Out": out}, g.attrs())
    return staticmethod(make)


def piecewise_linear_double_grad(grad_type):
    """The grad of an activation's grad op whose derivative is piecewise constant (relu,
    leaky_relu: dX = dOut * f'(.)): dOut gets the grad op itself applied to ddX; the
    activation's input or output, f''= 0, gets nothing."""
    def make(g):
        ins = {s: g.input(s) for s in ("X", "Out") if g.input(s)}
        ins["Out@GRAD"] = g.output_grad("X@GRAD")
        g.op(grad_type, ins, {"X@GRAD": g.input_grad("Out@GRAD")}, g.attrs())
    return staticmethod(make)


def square_double_grad(g):
    """The grad of square_grad (dX = 2 X dOut): dOut gets square_grad(X, ddX) = 2 X ddX; X
    gets 2 dOut ddX."""
    x, dout, ddx = g.input("X"), g.input("Out@GRAD"), g.output_grad("X@GRAD")
    g.op("square_grad", {"X": x, "Out@GRAD": ddx}, {"X@GRAD": g.input_grad("Out@GRAD")})
    gx = g.input_grad("X")
    if any(n != EMPTY_VAR_NAME for n in gx):
        prod = g.temp(x)
        g.op("elementwise_mul", {"X": dout, "Y": ddx}, {"Out": prod}, {"axis": -1})
        g.op("scale", {"X": prod}, {"Out": gx}, {"scale": 2.0, "bias": 0.0})


def channel_last(fmt):
    """Whether data_format / data_layout `fmt` puts channels last (NHWC, NDHWC)."""
    return fmt in ("NHWC", "NDHWC")


# --- holders' values and step frames (value and ctx ops) -----------------------------------
def is_empty(v):
    """No value: None, or a LoDTensor holding no array."""
    return v is None or (isinstance(v, LoDTensor) and v._array is None)


def scalar_value(t, what):
    """The one element of tensor `t` (ExecutionError naming `what` otherwise)."""
    if is_empty(t):
        raise ExecutionError(f"{what} has no value")
    a = np.asarray(t._array)
    if a.size != 1:
        raise ExecutionError(f"{what} must hold one element, got shape {list(a.shape)}")
    return a.reshape(-1)[0]


def zeros_like_value(v):
    """Zeros shaped like a value; an empty array for an array (missing elements are zero)."""
    if isinstance(v, LoDTensorArray):
        return LoDTensorArray()
    if isinstance(v, SelectedRows):
        return LoDTensor(np.zeros((v.height,) + v.value.shape[1:], v.value.dtype))
    if is_empty(v):
        return None
    return LoDTensor(np.zeros_like(v._array), v._lod)


def dense(v):
    """A SelectedRows as a dense LoDTensor; anything else as it is."""
    return LoDTensor(v.to_dense()) if isinstance(v, SelectedRows) else v


def add_grads(a, b):
    """a + b for gradients: None (or an empty tensor) is zero; arrays add element-wise."""
    if is_empty(a):
        return None if is_empty(b) else b
    if is_empty(b):
        return a
    if isinstance(a, LoDTensorArray) or isinstance(b, LoDTensorArray):
        a = a if isinstance(a, LoDTensorArray) else LoDTensorArray()
        b = b if isinstance(b, LoDTensorArray) else LoDTensorArray()
        out = LoDTensorArray()
        for j in range(max(len(a), len(b))):
            x = a[j] if j < len(a) else None
            y = b[j] if j < len(b) else None
            v = add_grads(x, y)
            list.append(out, v if v is not None else LoDTensor())
        return out
    a, b = dense(a), dense(b)
    return LoDTensor(a._array + b._array.reshape(a._array.shape), a._lod or b._lod)


def aligned_outputs(p, slot):
    """Frame slots of a duplicable output, None where the name is @EMPTY@."""
    return [p.idx(n) if n != EMPTY_VAR_NAME else None for n in p.op.output(slot)]


def drop_scopes(scope, scopes):
    """Delete the kid scopes `scopes` of `scope` (those still there)."""
    for s in scopes or ():
        if scope.has_kid(s):
            scope.delete_scope(s)


def sigmoid(x):
    """1 / (1 + exp(-x)), numerically stable for large |x| (exp of a non-positive number
    only)."""
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    ex = np.exp(x[~pos])
    out[~pos] = ex / (1.0 + ex)
    return out


def default_grad(g):
    """Paddle's default grad op: `<type>_grad` taking the forward's inputs, outputs and
    output gradients (for the classes of a table that all use it)."""
    g.default()
