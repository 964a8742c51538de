"""The eager mode's tracer: ops run as they are appended, recorded on a tape that is a
program like any other, and gradients come from that program's backward.

Fluid 1.8's OpTest (and a user trying an op interactively) builds an op the static way,
`block.append_op(type, inputs, outputs, attrs)`, under `fluid.dygraph.guard()`, and expects
its outputs to hold values at once and `loss.backward()` to give every input its gradient.
Here that is the static machinery run one op at a time:

* the guard's main program is the tape: `Block.create_var` declares the variable in it as
  usual and returns a `VarBase` (a Variable whose value lives in the tracer's scope), and
  `Block.append_op` appends the op as usual (schema checks, shape inference) and then runs
  it, alone, on the tracer's scope through the executor (`Executor.run_block` over a one-op
  program), so the kernel is the one static programs run;
* before an op is appended its inputs' declarations take their values' shapes, dtypes and LoD
  levels, so build-time inference sees what the values are, and after it runs its outputs'
  declarations take theirs;
* `VarBase.backward()` is `fluid.backward.gradients([loss], leaves)` on the tape: the grad
  ops the static `append_backward` would append (the ops' registered gradient makers, in
  reverse order, contributions summed), each run as it is appended. A leaf's gradient adds
  to the one an earlier `backward()` left (as Fluid's dygraph), until `clear_gradient()`.

It is the eager execution of the static ops, not a dygraph framework: no Layers, no
`no_grad`, no dygraph-to-static (fluidity/dygraph/__init__.py lists what is not built).
"""
import numpy as np

from ..core import dtypes
from ..core.names import EMPTY_VAR_NAME, grad_var_name
from ..core.place import CPUPlace, Place
from ..core.scope import Scope
from ..core.tensor import LoDTensor, LoDTensorArray, SelectedRows, as_fetched
from ..core.dtypes import VarType
from ..errors import FluidityError
from ..executor import Executor
from ..framework import Variable
from ..ir.op_desc import unwrap
from ..ir.views import TENSORLIKE, ProgramView
from ..proto import framework_pb2 as pb


class VarBase(Variable):
    """A variable of the eager mode: its declaration in the tape program (name, shape,
    dtype, `stop_gradient`, ...) and its value in the tracer's scope."""

    def __init__(self, block, desc, tracer):
        super().__init__(block, desc)
        self._tracer = tracer

    # -- the value ------------------------------------------------------------------------
    def value(self):
        """The scope variable holding the value (`value().get_tensor()`)."""
        return self._tracer.scope.var(self.name)

    def numpy(self):
        """A copy of the value as an ndarray (one element in one or more dims converts to a
        Python number too, as Executor.run's fetches: core/tensor.py's FetchedArray)."""
        v = self._tracer.scope.find_var(self.name)
        held = v.value if v is not None else None
        if isinstance(held, SelectedRows):
            return as_fetched(np.array(held.value))
        if not isinstance(held, LoDTensor) or held._array is None:
            raise FluidityError(f"variable '{self.name}' holds no value yet (no op has "
                                f"written it)")
        return as_fetched(np.array(held._array))

    def set_value(self, value):
        """Replace the value with `value` (an ndarray or a VarBase) of the same shape."""
        arr = value.numpy() if isinstance(value, VarBase) else np.asarray(value)
        if tuple(arr.shape) != tuple(self.shape):
            raise FluidityError(f"set_value: variable '{self.name}' has shape "
                                f"{list(self.shape)}, the value {list(arr.shape)}")
        self.value().get_tensor().set(arr)
        self._tracer.sync_var(self)

    # -- gradients ------------------------------------------------------------------------
    def backward(self, backward_strategy=None):
        """Compute the gradient of this (one-element) value with respect to every leaf
        that does not stop gradients, adding to the gradients earlier calls left."""
        self._tracer.backward(self)

    def _grad_ivar(self):
        """The gradient as a VarBase, or None when there is none."""
        g = self.block.find_var_recursive(grad_var_name(self.name))
        if g is None or not self._tracer.holds_value(g.name):
            return None
        return g

    def gradient(self):
        """The gradient as an ndarray (None when there is none)."""
        g = self._grad_ivar()
        return None if g is None else g.numpy()

    def clear_gradient(self):
        """Zero the gradient (a later backward() starts from nothing)."""
        g = self._grad_ivar()
        if g is not None:
            t = g.value().get_tensor()
            t.set(np.zeros_like(t._array))

    def detach(self):
        """A new variable holding the same value, cut off from the gradient."""
        out = self.block.create_var(shape=self.shape, dtype=self.dtype,
                                    lod_level=self.lod_level, stop_gradient=True)
        src = self.value().get_tensor()
        out.value().get_tensor().set(src._array)
        out.value().get_tensor()._lod = [list(level) for level in src._lod]
        return out

    def __repr__(self):
        return f"VarBase({self.name!r}, shape={list(self.shape)}, " \
               f"dtype={dtypes.name(self.dtype) if self.dtype is not None else None})"


def _var_args(value):
    """The Variables in an op's `inputs` argument (dict of slot -> var or list of vars)."""
    for v in (value or {}).values():
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(x, Variable):
                yield x


class Tracer:
    """Runs the ops appended under one `dygraph.guard()` on its own scope."""

    def __init__(self, place=None):
        place = place if place is not None else CPUPlace()
        if not isinstance(place, Place):
            raise TypeError(f"dygraph.guard: place must be a Place, got "
                            f"{type(place).__name__}")
        if not isinstance(place, CPUPlace):
            raise FluidityError(f"dygraph.guard({place!r}): the eager mode runs ops one at "
                                f"a time on the CPU; programs run on a GPU compiled whole "
                                f"(Executor(fluid.CUDAPlace(0)))")
        self.place = place
        self.scope = Scope()
        self._executor = Executor(place)

    # -- variables --------------------------------------------------------------------------
    def eager_var(self, var):
        """The VarBase for a variable just declared in the tape (replacing its view)."""
        vb = VarBase(var.block, var.desc, self)
        var.block.vars[var.name] = vb
        return vb

    def holds_value(self, name):
        v = self.scope.find_var(name)
        return v is not None and v.is_initialized()

    def sync_var(self, var):
        """Make `var`'s declaration say what its value is (type, shape, dtype, LoD level)."""
        v = self.scope.find_var(var.name)
        held = v.value if v is not None else None
        if isinstance(held, SelectedRows):
            var._set_type(VarType.SELECTED_ROWS)
            if held.value is not None:
                var._set_shape([held.height] + list(held.value.shape[1:]))
                var._set_dtype(held.value.dtype)
        elif isinstance(held, LoDTensorArray):
            var._set_type(VarType.LOD_TENSOR_ARRAY)
        elif isinstance(held, LoDTensor) and held._array is not None \
                and var.type in TENSORLIKE:
            var._set_shape(held._array.shape)
            var._set_dtype(held._array.dtype)
            var.lod_level = len(held._lod)

    def sync_vars(self, block, inputs):
        for v in _var_args(inputs):
            if self.holds_value(v.name):
                self.sync_var(v)

    # -- running ----------------------------------------------------------------------------
    def run_op(self, op):
        """Run one op of the tape now, on the tracer's scope."""
        block = op.block
        desc = pb.ProgramDesc()
        bd = desc.blocks.add()
        bd.idx, bd.parent_idx = 0, -1
        for n in dict.fromkeys(op.input_arg_names + op.output_arg_names):
            v = block.find_var_recursive(n) if n != EMPTY_VAR_NAME else None
            if v is not None:
                bd.vars.add().CopyFrom(v.desc)
        bd.ops.add().CopyFrom(unwrap(op.desc))
        self._executor.run_block(ProgramView(desc), 0, self.scope)
        for n in op.output_arg_names:
            v = block.find_var_recursive(n) if n != EMPTY_VAR_NAME else None
            if v is not None:
                self.sync_var(v)

    def backward(self, loss):
        from ..backward import gradients   # the static backward, over the tape
        if loss.stop_gradient:
            raise FluidityError(f"backward(): '{loss.name}' stops gradients "
                                f"(stop_gradient=True): nothing to differentiate")
        block = loss.block
        if int(np.prod(loss.shape)) != 1:
            raise FluidityError(f"backward(): '{loss.name}' has shape {list(loss.shape)}; "
                                f"the loss must hold one value (reduce it with mean/sum)")
        produced = {n for op in block.ops for n in op.output_arg_names}
        leaves = [v for v in block.vars.values()
                  if isinstance(v, VarBase) and not v.stop_gradient and v.name not in produced
                  and v.type in TENSORLIKE and v is not loss]
        before = {}
        for v in leaves:
            g = self.scope.find_var(grad_var_name(v.name))
            if g is not None and isinstance(g.value, LoDTensor) and g.value._array is not None:
                before[g.name] = g.value._array.copy()
        gradients([loss], leaves)   # appends the grad ops: each runs as it is appended
        for name, old in before.items():
            t = self.scope.find_var(name).value
            if isinstance(t, LoDTensor) and t._array is not None:
                t.set(t._array + old)
