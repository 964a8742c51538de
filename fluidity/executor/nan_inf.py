"""FLAGS_check_nan_inf as an observer of prepared plans: each op's step is followed by a
check of the float outputs it wrote; the first NaN or Inf stops the run with a
core.EnforceNotMet (the exact class Fluid raises) naming the op, the variable, and where the
op was created (its `op_callstack`). Plans are prepared with it only while the flag is on, so off it costs
nothing."""
import logging

import numpy as np

from ..core.names import EMPTY_VAR_NAME
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import EnforceNotMet

logger = logging.getLogger("fluidity")


def _array(value):
    if isinstance(value, LoDTensor):
        return value._array
    if isinstance(value, SelectedRows):
        return value.value
    return None


def _fault(arr):
    """'NaN' / 'Inf' counts of a float array with any, else None."""
    if arr is None or arr.dtype.kind not in "fc" or np.isfinite(arr).all():
        return None
    nan = int(np.isnan(arr).sum())
    return f"{nan} NaN and {arr.size - nan - int(np.isfinite(arr).sum())} Inf of {arr.size} values"


def observe(plan):
    """Make every step of `plan` check its op's outputs; returns the plan."""
    if len(plan.steps) != len(plan.ops):
        logger.warning("FLAGS_check_nan_inf: a %s runs ops in groups; its ops are not "
                       "checked one by one", type(plan).__name__)
        return plan

    def checked(step, i, op):
        outs = [(n, plan.slot_of(n)) for n in op.output_arg_names if n != EMPTY_VAR_NAME]
        where = op.attr("op_callstack") if op.has_attr("op_callstack") else []
        at_block = plan.block_index_of(i)
        label = plan.op_label(at_block)   # as every other run-time error names the op

        def run(frame, env):
            step(frame, env)
            for name, k in outs:
                v = frame[k]
                fault = _fault(_array(v.value)) if v is not None else None
                if fault is not None:
                    at = f"; the op was created at {where[-1]}" if where else ""
                    # Fluid raises exactly core.EnforceNotMet ("... find nan or inf"), and
                    # its programs test the type with ==, so no subclass of it here
                    err = EnforceNotMet(
                        f"FLAGS_check_nan_inf: {label} wrote {fault} to variable "
                        f"'{name}'{at} (in [op={op.type}] [tensor={name}] find nan or inf)")
                    err.names_its_op = True     # the plan raises it as it is
                    raise err
        return run
    plan.steps = [checked(s, i, op) for i, (s, op) in enumerate(zip(plan.steps, plan.ops))]
    return plan
