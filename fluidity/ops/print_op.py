"""print: show a tensor (name, LoD, shape, dtype, values) while a program runs.

Paddle's op: input In, output Out (= In, so the op can sit in the data path and its
gradient op prints the gradient); attributes first_n (print the first n runs only; -1: every
run), message, summarize (how many values; -1: all), print_tensor_name / _type / _shape /
_lod, print_phase ("FORWARD", "BACKWARD" or "BOTH") and is_forward (the gradient's print op
has False). The text goes to stderr, one block per print, as Paddle's TensorFormatter lays
it out.
"""
import sys
import threading

import numpy as np

from ..core import dtypes
from ..core.tensor import LoDTensor, SelectedRows
from .registry import In, OpDef, Out

_PHASES = ("FORWARD", "BACKWARD", "BOTH")
_LOCK = threading.Lock()


def format_tensor(name, value, message="", summarize=20, show_name=True, show_type=True,
                  show_shape=True, show_lod=True):
    """Paddle's TensorFormatter text for one value."""
    lines = [message] if message else []
    if show_name:
        lines.append(f"Variable: {name}")
    if isinstance(value, SelectedRows):
        arr, lod = np.asarray(value.value), []
        lines.append(f"  - rows: {value.rows.tolist()}  height: {value.height}")
    elif isinstance(value, LoDTensor) and value._array is not None:
        arr, lod = value._array, value.lod()
    else:
        lines.append("  - (not initialized)")
        return "\n".join(lines)
    if show_lod:
        lines.append("  - lod: {" + ", ".join("{" + ", ".join(map(str, lv)) + "}"
                                            for lv in lod) + "}")
    lines.append("  - place: CPUPlace")
    if show_shape:
        lines.append(f"  - shape: {list(arr.shape)}")
    if show_type:
        lines.append(f"  - dtype: {dtypes.name(dtypes.to_code(arr.dtype))}")
    flat = arr.reshape(-1)
    n = flat.size if summarize is None or summarize < 0 else min(summarize, flat.size)
    lines.append("  - data: [" + " ".join(str(v) for v in flat[:n].tolist())
                 + (" ..." if n < flat.size else "") + "]")
    return "\n".join(lines)


class Print(OpDef):
    type = "print"
    inputs = (In("In"),)
    outputs = (Out("Out"),)
    attrs = {"first_n": -1, "message": "", "summarize": 20, "print_tensor_name": True,
             "print_tensor_type": True, "print_tensor_shape": True,
             "print_tensor_lod": True, "print_phase": "BOTH", "is_forward": True}
    kind = "ctx"
    share_lod = None
    doc = "Out = In; prints In (name, LoD, shape, dtype, values) to stderr."

    @staticmethod
    def infer_shape(ctx):
        ctx.same_as_first_input()

    @staticmethod
    def make_step(p):
        a = p.attrs
        i, o, name = p.in_one("In"), p.out_one("Out"), p.op.input("In")[0]
        phase = a["print_phase"].upper()
        if phase not in _PHASES:
            raise ValueError(f"print: print_phase must be one of {_PHASES}, got "
                             f"{a['print_phase']!r}")
        show = phase == "BOTH" or (phase == "FORWARD") == a["is_forward"]
        left = [a["first_n"]]
        fmt = dict(message=a["message"], summarize=a["summarize"],
                   show_name=a["print_tensor_name"], show_type=a["print_tensor_type"],
                   show_shape=a["print_tensor_shape"], show_lod=a["print_tensor_lod"])

        def step(frame, env):
            value = frame[i].value
            if o is not None:
                frame[o].value = value
            if not show or left[0] == 0:
                return
            if left[0] > 0:
                left[0] -= 1
            text = format_tensor(name, value, **fmt)
            with _LOCK:
                sys.stderr.write(text + "\n")
                sys.stderr.flush()
        return step

    @staticmethod
    def grad(g):
        g.op("print", {"In": g.output_grad("Out")}, {"Out": g.input_grad("In")},
             dict(g.attrs(), is_forward=False))
