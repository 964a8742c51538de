"""One step of an LSTM or a GRU built from basic ops (Fluid 1.6-1.8's
`fluid.contrib.layers.BasicLSTMUnit` / `BasicGRUUnit`, which `LSTMCell`, `GRUCell`,
`basic_lstm` and `basic_gru` run at every step).

A unit owns its parameters, named as Fluid names them: the unit's full name is
`unique_name(name_scope + "/BasicLSTMUnit")` (e.g. `LSTMCell/BasicLSTMUnit_0`) and the
parameters are `<full name>.w_0`, `.b_0` (the GRU: `.w_0` gate weight, `.w_1` candidate
weight, `.b_0`, `.b_1`), unless a ParamAttr names them. They are created at the first call,
when the input size is known (input size + hidden size rows). A unit called while building
another program (a decoding program next to the training one) declares the same parameters,
by name, in that program too, so both read the same values from the scope.

The ops are the ones Fluid builds (concat, matmul, elementwise_add, split, the activations,
elementwise_mul), so a program's structure and its numbers match Fluid's:

    LSTM  [i, j, f, o] = [x, h] W + b
          c' = c * act_g(f + forget_bias) + act_g(i) * act_c(j);  h' = act_c(c') * act_g(o)
    GRU   [r, u] = act_g([x, h] W_g + b_g);  m = act_c([x, r * h] W_c + b_c)
          h' = u * h + (1 - u) * m
"""
import copy
import weakref

import numpy as np

from .. import unique_name
from ..errors import ShapeError
from ..framework import Variable, default_main_program
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr

__all__ = ["BasicLSTMUnit", "BasicGRUUnit"]


def activation_fn(act, default, what):
    """A layer function for an activation given as a callable (Fluid's way), an op name such
    as "relu", or None (the default)."""
    if act is None:
        return default
    if callable(act):
        return act
    if isinstance(act, str):
        from .. import layers
        fn = getattr(layers, act, None)
        if callable(fn):
            return fn
    raise TypeError(f"{what} must be a layer function such as fluid.layers.sigmoid (or its "
                    f"name), got {act!r}")


def _suffixed(attr, suffix):
    """attr with `suffix` added to its name when it names the parameter (else as it is)."""
    attr = ParamAttr.to_attr(attr) if attr is not None else None
    if attr is None or attr is False or attr.name is None:
        return attr
    attr = copy.deepcopy(attr)
    attr.name += suffix
    return attr


def _plus_bias(x, bias):
    """x + bias (none with bias_attr=False)."""
    from .. import layers
    return x if bias is None else layers.elementwise_add(x, bias)


class _Unit:
    """The parameter bookkeeping the units share: one set of parameters per program, the
    same names in every program."""

    _PARAMS = ()     # (key, is_bias) in creation order (which decides the names' numbers)

    def __init__(self, name_scope, hidden_size, param_attr, bias_attr, gate_activation,
                 activation, dtype):
        kind = type(self).__name__
        if isinstance(hidden_size, bool) or not isinstance(hidden_size, (int, np.integer)) \
                or hidden_size <= 0:
            raise ValueError(f"{kind}: hidden_size must be a positive int, got {hidden_size!r}")
        self._name = name_scope
        self._full_name = unique_name.generate(f"{name_scope}/{kind}")
        self._hiden_size = int(hidden_size)
        self._dtype = dtype
        self._param_attr = param_attr
        self._bias_attr = bias_attr
        from .ops import sigmoid, tanh
        self._gate_activation = activation_fn(gate_activation, sigmoid,
                                              f"{kind} gate_activation")
        self._activation = activation_fn(activation, tanh, f"{kind} activation")
        self._input_size = None
        self._attrs = None          # key -> ParamAttr with the name fixed at the first build
        self._built = weakref.WeakKeyDictionary()    # program -> {key: Variable}

    def full_name(self):
        return self._full_name

    def _param_shapes(self, input_size):
        raise NotImplementedError

    def _param_attrs(self):
        raise NotImplementedError

    def _check_input(self, input, pre_hidden):
        for what, v in (("input", input), ("pre_hidden", pre_hidden)):
            if not isinstance(v, Variable):
                raise TypeError(f"{self._full_name}: {what} must be a Variable, got "
                                f"{type(v).__name__}")
        size = input.shape[-1] if len(input.shape) else -1
        if size is None or size <= 0:
            raise ShapeError(f"{self._full_name}: the last dim of input '{input.name}' must be "
                             f"known (got shape {list(input.shape)})")
        if self._input_size is not None and size != self._input_size:
            raise ShapeError(f"{self._full_name}: input '{input.name}' has {size} features, "
                             f"but the unit was built for {self._input_size}")
        h = pre_hidden.shape[-1] if len(pre_hidden.shape) else -1
        if h not in (-1, self._hiden_size):
            raise ShapeError(f"{self._full_name}: pre_hidden '{pre_hidden.name}' has {h} "
                             f"features, the hidden size is {self._hiden_size}")
        return size

    def _params(self, input, pre_hidden):
        """{key: Variable} of the program being built (created on its first use there)."""
        size = self._check_input(input, pre_hidden)
        program = default_main_program()
        got = self._built.get(program)
        if got is not None:
            return got
        first = self._attrs is None
        if first:
            self._input_size = size
            self._attrs = self._param_attrs()
        shapes = self._param_shapes(self._input_size)
        helper = LayerHelper(type(self).__name__, name=self._full_name)
        got = {}
        for key, is_bias in self._PARAMS:
            p = helper.create_parameter(self._attrs[key], shapes[key], self._dtype,
                                        is_bias=is_bias)
            if first and p is not None:   # later programs declare the same name
                attr = copy.copy(ParamAttr.to_attr(self._attrs[key]))
                attr.name = p.name
                self._attrs[key] = attr
            got[key] = p
        self._extra(program, got)
        self._built[program] = got
        return got

    def _extra(self, program, params):
        """Other per-program state (the LSTM's forget-bias constant)."""

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def parameters(self):
        """The parameters of the program being built (empty before the first call)."""
        got = self._built.get(default_main_program())
        return list(got.values()) if got else []


class BasicLSTMUnit(_Unit):
    """One LSTM step from basic ops (see the module's docstring). Weight `.w_0` is
    [input_size + hidden_size, 4 * hidden_size] with the gate columns in the order i, j, f, o
    (input, candidate, forget, output); bias `.b_0` is [4 * hidden_size]."""

    _PARAMS = (("w", False), ("b", True))

    def __init__(self, name_scope, hidden_size, param_attr=None, bias_attr=None,
                 gate_activation=None, activation=None, forget_bias=1.0, dtype="float32"):
        super().__init__(name_scope, hidden_size, param_attr, bias_attr, gate_activation,
                         activation, dtype)
        self._forget_bias_value = float(forget_bias)

    def _param_shapes(self, input_size):
        h = self._hiden_size
        return {"w": [input_size + h, 4 * h], "b": [4 * h]}

    def _param_attrs(self):
        return {"w": self._param_attr, "b": self._bias_attr}

    def _extra(self, program, params):
        # Fluid adds forget_bias as a [1] tensor (fill_constant, stop_gradient False); one
        # per program, in its global block so that every step and loop body reads it
        from .tensor import fill_constant
        block = program.global_block()
        cur = program.current_block_idx
        program.current_block_idx = block.idx
        try:
            fb = fill_constant([1], self._dtype, self._forget_bias_value)
        finally:
            program.current_block_idx = cur
        fb.stop_gradient = False
        params["forget_bias"] = fb

    def forward(self, input, pre_hidden, pre_cell):
        from .. import layers
        p = self._params(input, pre_hidden)
        gates = _plus_bias(layers.matmul(layers.concat([input, pre_hidden], 1), p["w"]),
                           p["b"])
        i, j, f, o = layers.split(gates, num_or_sections=4, dim=-1)
        act_g, act_c = self._gate_activation, self._activation
        new_cell = layers.elementwise_add(
            layers.elementwise_mul(pre_cell, act_g(layers.elementwise_add(f, p["forget_bias"]))),
            layers.elementwise_mul(act_g(i), act_c(j)))
        new_hidden = act_c(new_cell) * act_g(o)
        return new_hidden, new_cell

    def parameters(self):
        return [v for k, v in ((self._built.get(default_main_program()) or {}).items())
                if k != "forget_bias"]


class BasicGRUUnit(_Unit):
    """One GRU step from basic ops (see the module's docstring). `.w_0` is the gate weight
    [input_size + hidden_size, 2 * hidden_size] (columns r then u), `.w_1` the candidate
    weight [input_size + hidden_size, hidden_size], `.b_0` [2 * hidden_size], `.b_1`
    [hidden_size]. A ParamAttr with a name gives `<name>_gate` and `<name>_candidate`."""

    _PARAMS = (("gate_w", False), ("candidate_w", False), ("gate_b", True),
               ("candidate_b", True))

    def __init__(self, name_scope, hidden_size, param_attr=None, bias_attr=None,
                 gate_activation=None, activation=None, dtype="float32"):
        super().__init__(name_scope, hidden_size, param_attr, bias_attr, gate_activation,
                         activation, dtype)

    def _param_shapes(self, input_size):
        h = self._hiden_size
        return {"gate_w": [input_size + h, 2 * h], "candidate_w": [input_size + h, h],
                "gate_b": [2 * h], "candidate_b": [h]}

    def _param_attrs(self):
        return {"gate_w": _suffixed(self._param_attr, "_gate"),
                "candidate_w": _suffixed(self._param_attr, "_candidate"),
                "gate_b": _suffixed(self._bias_attr, "_gate"),
                "candidate_b": _suffixed(self._bias_attr, "_candidate")}

    def forward(self, input, pre_hidden):
        from .. import layers
        p = self._params(input, pre_hidden)
        gates = self._gate_activation(_plus_bias(
            layers.matmul(layers.concat([input, pre_hidden], 1), p["gate_w"]), p["gate_b"]))
        r, u = layers.split(gates, num_or_sections=2, dim=1)
        candidate = _plus_bias(
            layers.matmul(layers.concat([input, r * pre_hidden], 1), p["candidate_w"]),
            p["candidate_b"])
        c = self._activation(candidate)
        return u * pre_hidden + (1 - u) * c
