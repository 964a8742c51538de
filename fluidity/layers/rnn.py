"""Recurrent layers (Fluid 1.x's `fluid.layers.rnn` module): over LoD sequences
dynamic_lstm, dynamic_gru, and the one-step lstm_unit / gru_unit (inputs to dynamic_lstm /
dynamic_gru are already projected, an fc of size 4*D or 3*D before them, as in Fluid); and
over padded batches the 1.6 cell API, built in rnn_cells.py (RNNCell, GRUCell, LSTMCell,
rnn) and decoders.py (Decoder, BeamSearchDecoder, dynamic_decode, the decode helpers and
BasicDecoder), whose names this module also holds as Fluid's does."""
from ..errors import ShapeError
from ..layer_helper import LayerHelper
from ..ops.rnn import ACT_CODES
from .manip import concat
from .nn import fc
from .decoders import (BasicDecoder, BeamSearchDecoder, Decoder, DecodeHelper,
                       GreedyEmbeddingHelper, SampleEmbeddingHelper, TrainingHelper,
                       dynamic_decode)
from .rnn_cells import GRUCell, LSTMCell, RNNCell, rnn

__all__ = ["RNNCell", "GRUCell", "LSTMCell", "Decoder", "BeamSearchDecoder", "rnn",
           "dynamic_decode", "DecodeHelper", "TrainingHelper", "GreedyEmbeddingHelper",
           "SampleEmbeddingHelper", "BasicDecoder",
           "dynamic_lstm", "dynamic_gru", "lstm_unit", "gru_unit"]


def _temps(helper, dtype, n):
    return [helper.create_variable_for_type_inference(dtype, stop_gradient=True)
            for _ in range(n)]


def dynamic_lstm(input, size, h_0=None, c_0=None, param_attr=None, bias_attr=None,
                 use_peepholes=True, is_reverse=False, gate_activation="sigmoid",
                 cell_activation="tanh", candidate_activation="tanh", dtype="float32",
                 name=None):
    """LSTM over the sequences of `input` ([T, size], the projected x; size = 4 * hidden).
    Weight [D, 4D], Bias [1, 4D] (or [1, 7D] with peepholes); h_0/c_0 [N, D] optional.
    Returns (hidden, cell), each [T, D] with input's LoD."""
    if size % 4:
        raise ShapeError(f"dynamic_lstm: size must be 4 * hidden size, got {size}")
    helper = LayerHelper("lstm", param_attr=param_attr, bias_attr=bias_attr, name=name)
    d = size // 4
    w = helper.create_parameter(param_attr, [d, 4 * d], dtype)
    b = helper.create_parameter(bias_attr, [1, 7 * d if use_peepholes else 4 * d], dtype,
                                is_bias=True)
    hidden, cell = (helper.create_variable_for_type_inference(dtype) for _ in range(2))
    batch_gate, batch_cell = _temps(helper, dtype, 2)
    inputs = {"Input": input, "Weight": w, "Bias": b}
    if h_0 is not None:
        inputs["H0"] = h_0
    if c_0 is not None:
        inputs["C0"] = c_0
    helper.append_op("lstm", inputs=inputs,
                     outputs={"Hidden": hidden, "Cell": cell, "BatchGate": batch_gate,
                              "BatchCellPreAct": batch_cell},
                     attrs={"use_peepholes": use_peepholes, "is_reverse": is_reverse,
                            "gate_activation": gate_activation,
                            "cell_activation": cell_activation,
                            "candidate_activation": candidate_activation})
    return hidden, cell


def dynamic_gru(input, size, param_attr=None, bias_attr=None, is_reverse=False,
                gate_activation="sigmoid", candidate_activation="tanh", h_0=None,
                origin_mode=False):
    """GRU over the sequences of `input` ([T, 3 * size], the projected x); size = hidden.
    Returns hidden [T, size] with input's LoD."""
    helper = LayerHelper("gru", param_attr=param_attr, bias_attr=bias_attr)
    dtype = input.dtype
    w = helper.create_parameter(param_attr, [size, 3 * size], dtype)
    b = helper.create_parameter(bias_attr, [1, 3 * size], dtype, is_bias=True)
    hidden = helper.create_variable_for_type_inference(dtype)
    gate, reset, batch_hidden = _temps(helper, dtype, 3)
    inputs = {"Input": input, "Weight": w}
    if b is not None:
        inputs["Bias"] = b
    if h_0 is not None:
        inputs["H0"] = h_0
    helper.append_op("gru", inputs=inputs,
                     outputs={"Hidden": hidden, "BatchGate": gate,
                              "BatchResetHiddenPrev": reset, "BatchHidden": batch_hidden},
                     attrs={"is_reverse": is_reverse, "gate_activation": gate_activation,
                            "activation": candidate_activation, "origin_mode": origin_mode})
    return hidden


def lstm_unit(x_t, hidden_t_prev, cell_t_prev, forget_bias=0.0, param_attr=None,
              bias_attr=None, name=None):
    """One LSTM step: fc(concat(x_t, hidden_t_prev)) -> 4 gates -> (hidden, cell)."""
    helper = LayerHelper("lstm_unit", name=name)
    d = cell_t_prev.shape[1]
    gates = fc(concat([x_t, hidden_t_prev], axis=1), 4 * d, param_attr=param_attr,
               bias_attr=bias_attr)
    c = helper.create_variable_for_type_inference(x_t.dtype)
    h = helper.create_variable_for_type_inference(x_t.dtype)
    helper.append_op("lstm_unit", inputs={"X": gates, "C_prev": cell_t_prev},
                     outputs={"C": c, "H": h}, attrs={"forget_bias": float(forget_bias)})
    return h, c


def gru_unit(input, hidden, size, param_attr=None, bias_attr=None, activation="tanh",
             gate_activation="sigmoid", origin_mode=False):
    """One GRU step on input [N, size] (projected x; size = 3 * hidden) and hidden [N, D].
    Returns (updated hidden, reset hidden prev, gate)."""
    helper = LayerHelper("gru_unit", param_attr=param_attr, bias_attr=bias_attr)
    dtype = input.dtype
    d = size // 3
    w = helper.create_parameter(param_attr, [d, 3 * d], dtype)
    b = helper.create_parameter(bias_attr, [1, 3 * d], dtype, is_bias=True)
    gate = helper.create_variable_for_type_inference(dtype)
    reset = helper.create_variable_for_type_inference(dtype)
    updated = helper.create_variable_for_type_inference(dtype)
    inputs = {"Input": input, "HiddenPrev": hidden, "Weight": w}
    if b is not None:
        inputs["Bias"] = b
    helper.append_op("gru_unit", inputs=inputs,
                     outputs={"Gate": gate, "ResetHiddenPrev": reset, "Hidden": updated},
                     attrs={"activation": ACT_CODES.index(activation),
                            "gate_activation": ACT_CODES.index(gate_activation),
                            "origin_mode": origin_mode})
    return updated, reset, gate
