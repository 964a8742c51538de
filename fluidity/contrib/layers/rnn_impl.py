"""`fluid.contrib.layers.basic_lstm` / `basic_gru` (Fluid 1.6-1.8): multi-layer, optionally
bidirectional LSTM / GRU over padded batches, built from basic ops with `StaticRNN` (one
`recurrent` op per direction holding every layer), and the units they run
(`BasicLSTMUnit`, `BasicGRUUnit`, defined in fluidity/layers/rnn_units.py, where
`fluid.layers.LSTMCell` / `GRUCell` find them too).

Parameters are named as Fluid names them: layer i of the forward direction is the unit
`<name>_layers_<i>`, of the backward direction `<name>_reverse_layers_<i>`, so its weight is
`<name>_layers_<i>/BasicLSTMUnit_0.w_0`; a ParamAttr (or bias ParamAttr) with a name gives
`<name>_fw_w_<i>` / `<name>_bw_w_<i>` (biases `_fw_b_` / `_bw_b_`; the GRU adds `_gate` /
`_candidate`).

With `sequence_length`, a sequence's states stop changing after its last step (its outputs
past the end are the last state's); the backward direction runs over the reversed padded
batch, as Fluid's does."""
import copy

from ...errors import ShapeError
from ...framework import Variable
from ...layers.rnn_cells import keep_finished
from ...layers.rnn_units import BasicGRUUnit, BasicLSTMUnit
from ...param_attr import ParamAttr

__all__ = ["BasicGRUUnit", "basic_gru", "BasicLSTMUnit", "basic_lstm"]


def _named(attr, suffix):
    """A copy of attr with `suffix` on its name, when it names the parameter."""
    if attr is None or attr is False:
        return attr
    attr = ParamAttr.to_attr(attr)
    if attr.name is None:
        return attr
    attr = copy.deepcopy(attr)
    attr.name += suffix
    return attr


def _check(layer, input, hidden_size, num_layers, dropout_prob, init_states):
    if not isinstance(input, Variable):
        raise TypeError(f"{layer}: input must be a Variable, got {type(input).__name__}")
    if len(input.shape) != 3:
        raise ShapeError(f"{layer}: input '{input.name}' must be 3-D ([batch, time, size] or "
                         f"[time, batch, size]), got shape {list(input.shape)}")
    for arg, v in (("hidden_size", hidden_size), ("num_layers", num_layers)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{layer}: {arg} must be a positive int, got {v!r}")
    if dropout_prob is not None and not 0.0 <= dropout_prob < 1.0:
        raise ValueError(f"{layer}: dropout_prob must be in [0, 1), got {dropout_prob!r}")
    given = [s is not None for s in init_states]
    if any(given) and not all(given):
        raise ValueError(f"{layer}: give all of the initial states or none")
    for s in init_states:
        if s is not None and not isinstance(s, Variable):
            raise TypeError(f"{layer}: an initial state must be a Variable, got "
                            f"{type(s).__name__}")


def _units(make, name, num_layers, bidirectional, param_attr, bias_attr):
    """(forward units, backward units or None), named as Fluid names them."""
    def direction(tag, layer_tag):
        return [make(f"{name}{layer_tag}{i}", _named(param_attr, f"_{tag}_w_{i}"),
                     _named(bias_attr, f"_{tag}_b_{i}")) for i in range(num_layers)]
    fw = direction("fw", "_layers_")
    return fw, (direction("bw", "_reverse_layers_") if bidirectional else None)


def _run_direction(rnn_input, units, n_states, init_states, mask, direc_index, hidden_size,
                   dropout_prob, dropout_implementation):
    """One direction's StaticRNN over all layers: (output of the last layer [time, batch,
    hidden], [last states, each [num_layers, batch, hidden]])."""
    from ... import layers
    num_layers = len(units)
    rnn = layers.StaticRNN()
    with rnn.step():
        step_input = rnn.step_input(rnn_input)
        step_mask = rnn.step_input(mask) if mask is not None else None
        for i, unit in enumerate(units):
            if init_states is not None:
                pre = [rnn.memory(init=s[i, direc_index]) for s in init_states]
            else:
                pre = [rnn.memory(batch_ref=rnn_input, shape=[-1, hidden_size],
                                  ref_batch_dim_idx=1) for _ in range(n_states)]
            new = unit(step_input, *pre)
            new = list(new) if isinstance(new, (list, tuple)) else [new]
            if step_mask is not None:
                new = [keep_finished(p, n, step_mask) for p, n in zip(pre, new)]
            for p, n in zip(pre, new):
                rnn.update_memory(p, n)
            for n in new:
                rnn.step_output(n)
            step_input = new[0]
            if dropout_prob is not None and dropout_prob > 0.0:
                step_input = layers.dropout(step_input, dropout_prob=dropout_prob,
                                            dropout_implementation=dropout_implementation)
        rnn.step_output(step_input)
    outs = rnn()
    last = []
    for k in range(n_states):
        finals = [outs[i * n_states + k][-1] for i in range(num_layers)]
        last.append(layers.reshape(layers.concat(finals, axis=0),
                                   shape=[num_layers, -1, hidden_size]))
    return outs[-1], last


def _basic_rnn(input, init_states, hidden_size, units, n_states, sequence_length,
               dropout_prob, batch_first, dtype, dropout_implementation):
    from ... import layers
    fw_units, bw_units = units
    num_layers = len(fw_units)
    direc_num = 2 if bw_units is not None else 1
    if batch_first:
        input = layers.transpose(input, [1, 0, 2])
    mask = None
    if sequence_length is not None:
        mask = layers.sequence_mask(sequence_length, maxlen=layers.shape(input)[0],
                                    dtype=dtype)
        mask = layers.transpose(mask, [1, 0])
    if init_states[0] is not None:
        init_states = [layers.reshape(s, shape=[num_layers, direc_num, -1, hidden_size])
                       for s in init_states]
    else:
        init_states = None
    args = (n_states, init_states)
    fw_out, fw_last = _run_direction(input, fw_units, *args, mask, 0, hidden_size,
                                     dropout_prob, dropout_implementation)
    if bw_units is None:
        rnn_out, last = fw_out, fw_last
    else:
        bw_input = layers.reverse(input, axis=[0])
        bw_mask = layers.reverse(mask, axis=[0]) if mask is not None else None
        bw_out, bw_last = _run_direction(bw_input, bw_units, *args, bw_mask, 1, hidden_size,
                                         dropout_prob, dropout_implementation)
        bw_out = layers.reverse(bw_out, axis=[0])
        rnn_out = layers.concat([fw_out, bw_out], axis=2)
        last = [layers.reshape(layers.concat([f, b], axis=1),
                               shape=[num_layers * direc_num, -1, hidden_size])
                for f, b in zip(fw_last, bw_last)]
    if batch_first:
        rnn_out = layers.transpose(rnn_out, [1, 0, 2])
    return rnn_out, last


def basic_gru(input, init_hidden, hidden_size, num_layers=1, sequence_length=None,
              dropout_prob=0.0, bidirectional=False, batch_first=True, param_attr=None,
              bias_attr=None, gate_activation=None, activation=None, dtype="float32",
              name="basic_gru"):
    """A GRU of `num_layers` layers over `input` ([batch, time, size] with batch_first, else
    [time, batch, size]). `init_hidden` is [num_layers * directions, batch, hidden_size] (or
    None: zeros). Dropout (dropout_prob) is applied to each layer's output, not across
    steps. Returns (rnn_out, last_hidden): rnn_out [.., hidden_size * directions] in the
    input's layout, last_hidden [num_layers * directions, batch, hidden_size] (layer-major:
    layer 0 forward, layer 0 backward, ...)."""
    _check("basic_gru", input, hidden_size, num_layers, dropout_prob, [init_hidden])

    def make(unit_name, w, b):
        return BasicGRUUnit(unit_name, hidden_size, w, b, gate_activation, activation, dtype)
    units = _units(make, name, num_layers, bidirectional, param_attr, bias_attr)
    rnn_out, (last_hidden,) = _basic_rnn(
        input, [init_hidden], hidden_size, units, 1, sequence_length,
        dropout_prob, batch_first, dtype, "downgrade_in_infer")
    return rnn_out, last_hidden


def basic_lstm(input, init_hidden, init_cell, hidden_size, num_layers=1, sequence_length=None,
               dropout_prob=0.0, bidirectional=False, batch_first=True, param_attr=None,
               bias_attr=None, gate_activation=None, activation=None, forget_bias=1.0,
               dtype="float32", name="basic_lstm"):
    """An LSTM of `num_layers` layers over `input` ([batch, time, size] with batch_first,
    else [time, batch, size]). `init_hidden` and `init_cell` are [num_layers * directions,
    batch, hidden_size] (or both None: zeros). Dropout (dropout_prob, upscale_in_train) is
    applied to each layer's output. Returns (rnn_out, last_hidden, last_cell), shaped as
    basic_gru's."""
    _check("basic_lstm", input, hidden_size, num_layers, dropout_prob, [init_hidden, init_cell])

    def make(unit_name, w, b):
        return BasicLSTMUnit(unit_name, hidden_size, param_attr=w, bias_attr=b,
                             gate_activation=gate_activation, activation=activation,
                             forget_bias=forget_bias, dtype=dtype)
    units = _units(make, name, num_layers, bidirectional, param_attr, bias_attr)
    rnn_out, (last_hidden, last_cell) = _basic_rnn(
        input, [init_hidden, init_cell], hidden_size, units, 2, sequence_length,
        dropout_prob, batch_first, dtype, "upscale_in_train")
    return rnn_out, last_hidden, last_cell
