"""Fluid 1.6-1.8's RNN cell API: `RNNCell` (the interface), `GRUCell`, `LSTMCell`, and
`rnn(cell, inputs, ...)`, which unrolls a cell over padded batches.

A cell maps (inputs, states) to (outputs, new states) for one step; inputs and states may be
Variables or nestings of them (lists, tuples, namedtuples, dicts: `fluid.layers.utils`).
`rnn` runs the cell in a `StaticRNN` (op `recurrent`), as Fluid does: the step inputs are the
time-major slices of `inputs`, the states are the RNN's memories, and with `sequence_length`
a batch entry's states stop changing once its sequence has ended (`new * m - old * (m - 1)`
with m the step's 0/1 mask), so the final states are each sequence's last real step."""
from functools import partial

import numpy as np

from ..framework import Variable
from .rnn_units import BasicGRUUnit, BasicLSTMUnit
from .utils import assert_same_structure, flatten, map_structure, pack_sequence_as

__all__ = ["RNNCell", "GRUCell", "LSTMCell", "rnn"]


def _is_shape(s):
    """A shape (a list/tuple of ints) is a leaf of a nesting of shapes."""
    return isinstance(s, (list, tuple)) and all(
        isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in s)


class _Shape:
    """One state's shape with the batch dim (-1) in front, as a leaf for map_structure."""

    def __init__(self, shape):
        shape = [int(d) for d in shape]
        self.shape = shape if shape and shape[0] == -1 else [-1] + shape


def _shape_leaves(structure):
    """The nesting of shapes `structure` with each shape replaced by a _Shape."""
    if _is_shape(structure):
        return _Shape(structure)
    if isinstance(structure, dict):
        return type(structure)((k, _shape_leaves(v)) for k, v in structure.items())
    if isinstance(structure, (list, tuple)):
        items = [_shape_leaves(s) for s in structure]
        return type(structure)(*items) if hasattr(structure, "_fields") else \
            type(structure)(items)
    raise TypeError(f"get_initial_states: a state shape must be a list of ints (or a nesting "
                    f"of them), got {structure!r}")


class RNNCell:
    """The interface of a cell: `call(inputs, states, **kwargs)` returns (outputs,
    new_states), new_states nested as states are. `state_shape` (and optionally
    `state_dtype`) let `get_initial_states` make zero states."""

    def call(self, inputs, states, **kwargs):
        """One step: (outputs, new_states). Every cell implements it."""
        raise NotImplementedError("RNNCell must implent the call function.")

    def __call__(self, inputs, states, **kwargs):
        return self.call(inputs, states, **kwargs)

    def get_initial_states(self, batch_ref, shape=None, dtype=None, init_value=0,
                           batch_dim_idx=0):
        """States filled with `init_value`, one per shape of `shape` (default:
        `state_shape`; -1 for the batch is put in front of a shape that does not start with
        it), whose batch size is dim `batch_dim_idx` of the first tensor of `batch_ref`.
        `dtype` is one dtype for all or a nesting like `shape` (default: `state_dtype`, or
        float32 where the cell has none)."""
        from .control_flow import fill_constant_batch_size_like
        refs = flatten(batch_ref)
        if not refs or not isinstance(refs[0], Variable):
            raise TypeError(f"get_initial_states: batch_ref must be a Variable (or a nesting "
                            f"of them), got {batch_ref!r}")
        ref = refs[0]
        shapes = _shape_leaves(self.state_shape if shape is None else shape)
        if dtype is None:
            try:
                dtype = self.state_dtype
            except NotImplementedError:
                dtype = "float32"
        flat_dtypes = flatten(dtype)
        if len(flat_dtypes) == 1:
            dtype = map_structure(lambda _: flat_dtypes[0], shapes)
        return map_structure(
            lambda s, d: fill_constant_batch_size_like(
                input=ref, shape=s.shape, dtype=d, value=init_value,
                input_dim_idx=batch_dim_idx), shapes, dtype)

    @property
    def state_shape(self):
        """A nesting of shapes (lists of ints, the batch dim left out) of the states."""
        raise NotImplementedError(
            f"{type(self).__name__} has no `state_shape`: define it, or give get_initial_states "
            f"a `shape`")

    @property
    def state_dtype(self):
        """One dtype, or a nesting of dtypes like state_shape."""
        raise NotImplementedError(
            f"{type(self).__name__} has no `state_dtype`: define it, or give "
            f"get_initial_states a `dtype`")


class GRUCell(RNNCell):
    """A GRU cell (BasicGRUUnit's math and parameters, `<name>/BasicGRUUnit_<n>.w_0` ...):
    states and outputs are the hidden state h [batch, hidden_size].

        u = act_g(W_ux x + W_uh h + b_u);  r = act_g(W_rx x + W_rh h + b_r)
        m = act_c(W_cx x + W_ch (r * h) + b_c);  h' = u * h + (1 - u) * m
    """

    def __init__(self, hidden_size, param_attr=None, bias_attr=None, gate_activation=None,
                 activation=None, dtype="float32", name="GRUCell"):
        self.hidden_size = hidden_size
        self.dtype = dtype
        self.gru_unit = BasicGRUUnit(name, hidden_size, param_attr, bias_attr,
                                     gate_activation, activation, dtype)

    def call(self, inputs, states):
        """inputs [batch, input_size], states h [batch, hidden_size] -> (h', h')."""
        new_hidden = self.gru_unit(inputs, states)
        return new_hidden, new_hidden

    @property
    def state_shape(self):
        return [self.hidden_size]

    @property
    def state_dtype(self):
        return self.dtype


class LSTMCell(RNNCell):
    """An LSTM cell (BasicLSTMUnit's math and parameters, `<name>/BasicLSTMUnit_<n>.w_0` and
    `.b_0`): states are [h, c], each [batch, hidden_size]; the output is h.

        i = act_g(W_i [x, h] + b_i);  f = act_g(W_f [x, h] + b_f + forget_bias)
        o = act_g(W_o [x, h] + b_o);  c' = f * c + i * act_c(W_c [x, h] + b_c)
        h' = o * act_c(c')
    """

    def __init__(self, hidden_size, param_attr=None, bias_attr=None, gate_activation=None,
                 activation=None, forget_bias=1.0, dtype="float32", name="LSTMCell"):
        self.hidden_size = hidden_size
        self.dtype = dtype
        self.lstm_unit = BasicLSTMUnit(name, hidden_size, param_attr, bias_attr,
                                       gate_activation, activation, forget_bias, dtype)

    def call(self, inputs, states):
        """inputs [batch, input_size], states [h, c] -> (h', [h', c'])."""
        if not isinstance(states, (list, tuple)) or len(states) != 2:
            raise TypeError(f"LSTMCell: states must be [hidden, cell], got {states!r}")
        pre_hidden, pre_cell = states
        new_hidden, new_cell = self.lstm_unit(inputs, pre_hidden, pre_cell)
        return new_hidden, [new_hidden, new_cell]

    @property
    def state_shape(self):
        return [[self.hidden_size], [self.hidden_size]]

    @property
    def state_dtype(self):
        return self.dtype


def _transpose_batch_time(x):
    from .manip import transpose
    return transpose(x, [1, 0] + list(range(2, len(x.shape))))


def keep_finished(state, new_state, step_mask):
    """new_state where step_mask (one 0/1 per batch entry) is 1, state where it is 0, built
    as Fluid builds it: new * mask - state * (mask - 1)."""
    from .. import layers
    return layers.elementwise_sub(layers.elementwise_mul(new_state, step_mask, axis=0),
                                  layers.elementwise_mul(state, step_mask - 1, axis=0))


def rnn(cell, inputs, initial_states=None, sequence_length=None, time_major=False,
        is_reverse=False, **kwargs):
    """Run `cell` over every step of `inputs` ([batch, time, ...], or [time, batch, ...]
    with time_major). Returns (outputs, final_states): the cell's outputs of every step,
    stacked along time in the layout of `inputs`, and the states after the last step (with
    `sequence_length`, a [batch] int tensor, after each sequence's last real step; the
    padded steps' outputs are still computed). `initial_states` default to the cell's
    zero states; `is_reverse` runs from the last step to the first (outputs stay in input
    order). Extra keyword arguments go to `cell.call` at every step."""
    from .. import layers
    from .control_flow import StaticRNN
    if not callable(getattr(cell, "call", None)):
        raise TypeError(f"rnn: cell must be an RNNCell (with a `call` method), got "
                        f"{type(cell).__name__}")
    flat_inputs = flatten(inputs)
    if not flat_inputs or not all(isinstance(x, Variable) for x in flat_inputs):
        raise TypeError(f"rnn: inputs must be a Variable or a nesting of Variables, got "
                        f"{inputs!r}")
    for x in flat_inputs:
        if len(x.shape) < 2:
            raise ValueError(f"rnn: input '{x.name}' must have a batch and a time dim, got "
                             f"shape {list(x.shape)}")
    if initial_states is None:
        initial_states = cell.get_initial_states(batch_ref=inputs,
                                                 batch_dim_idx=1 if time_major else 0)

    def _grad_on(x):
        x.stop_gradient = False
        return x
    initial_states = map_structure(_grad_on, initial_states)

    if not time_major:
        inputs = map_structure(_transpose_batch_time, inputs)
    mask = None
    if sequence_length is not None:
        max_seq_len = layers.shape(flatten(inputs)[0])[0]
        mask = layers.sequence_mask(sequence_length, maxlen=max_seq_len,
                                    dtype=flatten(initial_states)[0].dtype)
        mask = layers.transpose(mask, [1, 0])
    if is_reverse:
        inputs = map_structure(lambda x: layers.reverse(x, axis=[0]), inputs)
        if mask is not None:
            mask = layers.reverse(mask, axis=[0])

    static_rnn = StaticRNN()
    with static_rnn.step():
        step_inputs = map_structure(static_rnn.step_input, inputs)
        states = map_structure(static_rnn.memory, initial_states)
        outputs, new_states = cell.call(step_inputs, map_structure(lambda x: x, states),
                                        **kwargs)
        assert_same_structure(states, new_states)
        if mask is not None:
            step_mask = static_rnn.step_input(mask)
            new_states = map_structure(partial(keep_finished, step_mask=step_mask), states,
                                       new_states)
        map_structure(static_rnn.update_memory, states, new_states)
        flat_outputs = flatten(outputs)
        map_structure(static_rnn.step_output, outputs)
        map_structure(static_rnn.step_output, new_states)

    stacked = static_rnn()
    stacked = stacked if isinstance(stacked, list) else [stacked]
    final_outputs = pack_sequence_as(outputs, stacked[:len(flat_outputs)])
    final_states = pack_sequence_as(new_states,
                                    [x[-1] for x in stacked[len(flat_outputs):]])
    if is_reverse:
        final_outputs = map_structure(lambda x: layers.reverse(x, axis=[0]), final_outputs)
    if not time_major:
        final_outputs = map_structure(_transpose_batch_time, final_outputs)
    return final_outputs, final_states
