"""The kernels of existing ops that Fluid's fused CPU ops are compositions of.

A fused op (fusion_gru, fusion_seqpool_concat, ...) computes what a chain of plain ops
computes; its kernel calls those ops' own kernels through here, so that one piece of code
holds each computation (a fix to `gru` is a fix to `fusion_gru`)."""
import numpy as np

from ..errors import ExecutionError
from . import registry


def kernel(op_type, **attrs):
    """The kernel of registered op `op_type` with `attrs` over its defaults, every output
    slot present: what an executor would call for that op (its kind's calling convention:
    arrays for "array" ops, LoDTensors for "value" ops)."""
    opdef = registry.get(op_type)
    outputs = frozenset(s.name for s in opdef.outputs)
    fn = opdef.kernel_for(registry.attrs_of(opdef, attrs), outputs)
    return fn.kernel if isinstance(fn, registry.Allocating) else fn


def activation(name):
    """The forward of activation op `name` (relu, sigmoid, tanh, identity...), elementwise
    over a numpy array."""
    if name == "identity":
        return lambda x: x
    return registry.get(name).func


def activation_grad(name):
    """d(x, out, dout) -> dx of activation op `name` (its `<name>_grad` op's derivative)."""
    if name == "identity":
        return lambda x, o, d: d
    return registry.get(name + "_grad").dfunc


def lod_offsets(t, op, slot):
    """Row offsets of the last LoD level of input `slot` of `op`, checked against its rows
    (start at 0, never decrease, end at the row count): ExecutionError naming both if not."""
    if t is None or not t._lod:
        raise ExecutionError(f"{op}: input {slot} has no LoD; feed a LoDTensor with sequence "
                             f"lengths (fluid.create_lod_tensor)")
    off = np.asarray(t._lod[-1], dtype=np.int64)
    if off[0] != 0 or off[-1] != t._array.shape[0] or (np.diff(off) < 0).any():
        raise ExecutionError(f"{op}: the LoD of {slot} {off.tolist()[:6]} does not fit its "
                             f"{t._array.shape[0]} rows")
    return off
