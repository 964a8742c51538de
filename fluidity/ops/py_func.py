"""py_func: an op that calls a Python function (Fluid's layers.py_func). The functions live
in this process's table, found by the ids the op's attributes hold (as in Paddle, a program
with py_func runs only in the process that built it). Its gradient is py_func again, calling
the backward function on the forward's inputs, outputs and output gradients (less the
skipped ones)."""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out, strings

_CALLABLES = []


def register_callable(fn):
    """The id a py_func attribute names `fn` by."""
    _CALLABLES.append(fn)
    return len(_CALLABLES) - 1


def _callable(i):
    if not 0 <= i < len(_CALLABLES):
        raise ExecutionError(f"py_func: no Python function with id {i} in this process (a "
                             f"program with py_func runs only where it was built)")
    return _CALLABLES[i]


def _as_tensor(v, slot):
    if v is None:
        return None
    if isinstance(v, LoDTensor):
        return v
    arr = np.asarray(v)
    if arr.dtype == object:
        raise ExecutionError(f"py_func: the function returned a non-tensor for '{slot}'")
    return LoDTensor(arr)


class PyFunc(OpDef):
    type = "py_func"
    kind = "value"
    inputs = (In("X", duplicable=True, dispensable=True),)
    outputs = (Out("Out", duplicable=True, dispensable=True),)
    attrs = {"forward_callable_id": -1, "backward_callable_id": -1,
             "backward_skip_vars": strings()}
    share_lod = None
    doc = ("Out = the Python function forward_callable_id called on the LoDTensors of X "
           "(it returns one array/LoDTensor per Out, a list of them, or None).")

    @staticmethod
    def infer_shape(ctx):
        pass      # the layer declares Out's shapes and dtypes, as Fluid's does

    @classmethod
    def prepare(cls, attrs, outputs):
        fid = attrs["forward_callable_id"]

        def kernel(xs):
            got = _callable(fid)(*(xs or []))
            if got is None:
                return []
            got = list(got) if isinstance(got, (list, tuple)) else [got]
            return [_as_tensor(v, "Out") for v in got]
        return kernel

    @staticmethod
    def grad(g):
        bid = g.attr("backward_callable_id")
        if bid < 0:
            return
        skip = set(g.attr("backward_skip_vars"))
        ins = [n for n in g.input("X") + g.output("Out") if n not in skip]
        ins += [d for d in g.output_grad("Out")]
        g.op("py_func", {"X": ins}, {"Out": g.input_grad("X")},
             {"forward_callable_id": bid, "backward_callable_id": -1,
              "backward_skip_vars": []})
