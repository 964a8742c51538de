"""dynamic_lstmp (Fluid 1.8 defines it in fluid.layers.rnn): an LSTM over LoD sequences with a
recurrent projection layer. Op in fluidity/ops/lstmp.py."""
import copy

from ..errors import ShapeError
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr
from .checks import check_variables

__all__ = ["dynamic_lstmp"]


def dynamic_lstmp(input, size, proj_size, param_attr=None, bias_attr=None, use_peepholes=True,
                  is_reverse=False, gate_activation="sigmoid", cell_activation="tanh",
                  candidate_activation="tanh", proj_activation="tanh", dtype="float32",
                  name=None, h_0=None, c_0=None, cell_clip=None, proj_clip=None):
    """Projected LSTM over the sequences of `input` ([T, size], the projected x; size = 4 *
    hidden). Weight [proj_size, 4D], ProjWeight [D, proj_size], Bias [1, 7D] with peepholes
    (else [1, 4D]); h_0 [N, proj_size] and c_0 [N, D] optional. Returns (projection [T,
    proj_size], cell [T, D]), both with input's LoD."""
    check_variables("dynamic_lstmp", input=input)
    if bias_attr is False:
        raise ValueError("dynamic_lstmp: bias_attr should not be False")
    if size % 4:
        raise ShapeError(f"dynamic_lstmp: size must be 4 * hidden size, got {size}")
    d = size // 4
    for arg, v, width in (("h_0", h_0, proj_size), ("c_0", c_0, d)):
        if v is not None:
            check_variables("dynamic_lstmp", **{arg: v})
            if len(v.shape) != 2 or v.shape[1] != width:
                raise ShapeError(f"dynamic_lstmp: {arg} must be [batch_size, {width}], got "
                                 f"{list(v.shape)}")
    for arg, v in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
        if v is not None and v < 0:
            raise ValueError(f"dynamic_lstmp: {arg} should not be negative, got {v}")
    helper = LayerHelper("lstmp", name=name)
    weight = helper.create_parameter(param_attr, [proj_size, 4 * d], dtype)
    proj_attr = ParamAttr.to_attr(param_attr)
    if proj_attr is not None and proj_attr.name is not None:
        proj_attr = copy.copy(proj_attr)       # two parameters cannot share one name
        proj_attr.name = proj_attr.name + ".proj"
    proj_weight = helper.create_parameter(proj_attr, [d, proj_size], dtype, suffix="proj_w")
    bias = helper.create_parameter(bias_attr, [1, (7 if use_peepholes else 4) * d], dtype,
                                   is_bias=True)
    tmp = helper.create_variable_for_type_inference
    projection, cell = tmp(dtype), tmp(dtype)
    batch_hidden, batch_gate, batch_cell = (tmp(dtype, stop_gradient=True) for _ in range(3))
    inputs = {"Input": input, "Weight": weight, "ProjWeight": proj_weight, "Bias": bias}
    if h_0 is not None:
        inputs["H0"] = h_0
    if c_0 is not None:
        inputs["C0"] = c_0
    helper.append_op("lstmp", inputs=inputs,
                     outputs={"Projection": projection, "Cell": cell,
                              "BatchHidden": batch_hidden, "BatchGate": batch_gate,
                              "BatchCellPreAct": batch_cell},
                     attrs={"use_peepholes": bool(use_peepholes),
                            "cell_clip": float(cell_clip or 0.0),
                            "proj_clip": float(proj_clip or 0.0), "is_reverse": bool(is_reverse),
                            "gate_activation": gate_activation,
                            "cell_activation": cell_activation,
                            "candidate_activation": candidate_activation,
                            "proj_activation": proj_activation})
    return projection, cell
