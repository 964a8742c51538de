"""Debugging layers: Print."""
from ..layer_helper import LayerHelper

__all__ = ["Print"]


def Print(input, first_n=-1, message=None, summarize=20, print_tensor_name=True,
          print_tensor_type=True, print_tensor_shape=True, print_tensor_lod=True,
          print_phase="both"):
    """Print `input` (name, LoD, shape, dtype and the first `summarize` values) to stderr
    each time the program runs (the first `first_n` times; -1: always); returns a variable
    equal to it. print_phase "forward", "backward" (the gradient flowing back through the
    returned variable) or "both"."""
    if str(print_phase).upper() not in ("FORWARD", "BACKWARD", "BOTH"):
        raise ValueError(f"Print: print_phase must be 'forward', 'backward' or 'both', got "
                         f"{print_phase!r}")
    helper = LayerHelper("print", **locals())
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="print", inputs={"In": [input]}, outputs={"Out": [out]},
                     attrs={"first_n": int(first_n), "message": message or "",
                            "summarize": int(summarize),
                            "print_tensor_name": bool(print_tensor_name),
                            "print_tensor_type": bool(print_tensor_type),
                            "print_tensor_shape": bool(print_tensor_shape),
                            "print_tensor_lod": bool(print_tensor_lod),
                            "print_phase": str(print_phase).upper()})
    return out
