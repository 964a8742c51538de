"""`fluid.dygraph.base`: entering and leaving the eager mode, and values into it."""
import contextlib

import numpy as np

from .. import framework, unique_name
from ..core.place import CPUPlace
from ..errors import FluidityError, declined
from .tracer import Tracer, VarBase

__all__ = ["no_grad", "grad", "guard", "enable_dygraph", "disable_dygraph", "enabled",
           "to_variable"]


def enabled():
    """Whether ops run as they are appended (inside `guard()`)."""
    return framework.in_dygraph_mode()


@contextlib.contextmanager
def guard(place=None):
    """Run ops as they are appended inside the block (the eager mode, tracer.py): the
    default main and startup programs are new ones (the main one is the tape), names start
    afresh, and `block.append_op(...)` runs the op at once on `place` (the CPU)."""
    tracer = Tracer(place if place is not None else CPUPlace())
    with framework.program_guard(framework.Program(), framework.Program()):
        with unique_name.guard():
            with framework._dygraph_guard(tracer):
                yield


_enabled = []   # the guard enable_dygraph entered


def enable_dygraph(place=None):
    """Enter the eager mode until `disable_dygraph()` (Fluid 1.8's functional form of
    `guard`)."""
    if _enabled:
        return
    g = guard(place)
    g.__enter__()
    _enabled.append(g)


def disable_dygraph():
    if _enabled:
        _enabled.pop().__exit__(None, None, None)


def _tracer():
    tracer = framework._dygraph_tracer()
    if tracer is None:
        raise FluidityError("to_variable could only be called in dygraph mode (inside "
                            "fluid.dygraph.guard())")
    return tracer


def to_variable(value, name=None, zero_copy=None):
    """A VarBase holding `value` (an ndarray; a VarBase is returned as is), with
    stop_gradient=True as in Fluid. `zero_copy=True` shares the array's memory where numpy
    can; by default (None, False) it is copied. (Fluid shares by default on the CPU; here
    the update ops, which run in place as the static executor runs them, would write into
    the caller's array.)"""
    if isinstance(value, VarBase):
        return value
    if not isinstance(value, np.ndarray):
        raise TypeError(f"to_variable: the input must be a numpy.ndarray or a Variable, got "
                        f"{type(value).__name__}")
    tracer = _tracer()
    block = framework.default_main_program().current_block()
    var = block.create_var(name=name or unique_name.generate("_generated_var"),
                           shape=value.shape, dtype=value.dtype, stop_gradient=True)
    arr = np.ascontiguousarray(value) if zero_copy else np.array(value)
    var.value().get_tensor()._array = arr
    tracer.sync_var(var)
    return var


no_grad = declined(
    "dygraph.no_grad", "the eager mode here records every op for backward; compute what "
    "needs no gradient on values with stop_gradient=True")
grad = declined(
    "dygraph.grad", "the eager mode's gradients come from VarBase.backward(); for partial "
    "gradients build a static program and use fluid.gradients")
