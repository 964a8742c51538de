"""`fluid.dygraph.Layer`: Fluid 1.8's Layer object, as it works in a static program.

Fluid 1.8 unified its layer classes: `fluid.dygraph.Linear(...)`, `fluid.LayerNorm(...)` and
the rest build static ops when no dygraph guard is active, and 1.8's own tests and models use
them that way inside `program_guard`. A Layer here is that: its constructor creates its
parameters in the default main program (their initializers in the startup program, names
`<full_name>.w_0` / `.b_0` as Fluid names them), and calling it appends its ops to the current
block, so the program it builds is the one Fluid 1.8 builds. Fluidity's eager mode (tracer.py)
runs static ops one at a time and is not a dygraph framework: a Layer is refused there.
"""
import collections
import copy
import re

from .. import framework, unique_name
from ..framework import Parameter
from ..layer_helper import LayerHelper

__all__ = ["Layer"]


def camel_to_snake(name):
    """`BatchNorm` -> `batch_norm`, `PRelu` -> `p_relu`: the name scope Fluid 1.8 gives a
    Layer of that class."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


class _HookHandle:
    """What register_forward_*_hook returns: remove() takes the hook out."""
    _next = 0

    def __init__(self, hooks):
        self._hooks, self.id = hooks, _HookHandle._next
        _HookHandle._next += 1

    def remove(self):
        self._hooks.pop(self.id, None)


class Layer:
    """A building block of a model: parameters, sublayers and a `forward` that appends ops.

    Attributes that are Parameters or Layers are registered (`parameters()`, `sublayers()`,
    `state_dict()` find them under their attribute names, as in Fluid 1.8)."""

    def __init__(self, name_scope=None, dtype="float32"):
        if framework.in_dygraph_mode():
            raise NotImplementedError(
                f"dygraph.{type(self).__name__}: a Layer in the eager mode (dygraph.guard) is "
                f"not built in Fluidity (its parameters would need Fluid's dygraph framework); "
                f"build it in a static program (program_guard), where it builds Fluid 1.8's "
                f"ops")
        self.training = True
        self._full_name = unique_name.generate(name_scope or camel_to_snake(type(self).__name__))
        self._helper = LayerHelper(self._full_name, name=self._full_name)
        self._built = False
        self._dtype = dtype
        self._parameters = collections.OrderedDict()
        self._sub_layers = collections.OrderedDict()
        self._forward_pre_hooks = collections.OrderedDict()
        self._forward_post_hooks = collections.OrderedDict()

    # -- modes and names ------------------------------------------------------------------
    def train(self):
        self.training = True
        for layer in self.sublayers():
            layer.training = True

    def eval(self):
        self.training = False
        for layer in self.sublayers():
            layer.training = False

    def full_name(self):
        return self._full_name

    # -- parameters and variables -----------------------------------------------------------
    def create_parameter(self, shape, attr=None, dtype="float32", is_bias=False,
                         default_initializer=None):
        """A parameter of this layer (None when `attr` is False), named
        `<full_name>.w_N` / `.b_N` unless `attr` names it."""
        attr = None if attr == "" else copy.deepcopy(attr)
        return self._helper.create_parameter(attr, shape, dtype, is_bias, default_initializer)

    def create_variable(self, name=None, persistable=None, dtype=None, type=None):
        """A variable in the current block named `<full_name>.<name>` (or a generated one)."""
        var_name = (f"{self._full_name}.{name}" if name is not None
                    else unique_name.generate(f"{self._full_name}._generated_var"))
        kwargs = {} if type is None else {"type": type}
        return self._helper.main_program.current_block().create_var(
            name=var_name, persistable=persistable, dtype=dtype, **kwargs)

    def parameters(self, include_sublayers=True):
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def sublayers(self, include_sublayers=True):
        return [l for _, l in self.named_sublayers(include_sublayers=include_sublayers)]

    def named_parameters(self, prefix="", include_sublayers=True):
        seen = set()
        for layer_prefix, layer in self.named_sublayers(prefix, include_sublayers,
                                                        include_self=True):
            for key, p in layer._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{layer_prefix}.{key}" if layer_prefix else key), p

    def named_sublayers(self, prefix="", include_sublayers=True, include_self=False,
                        layers_set=None):
        layers_set = set() if layers_set is None else layers_set
        if include_self and id(self) not in layers_set:
            layers_set.add(id(self))
            yield prefix, self
        if include_sublayers:
            for key, layer in self._sub_layers.items():
                if layer is None:
                    continue
                sub = f"{prefix}.{key}" if prefix else key
                yield from layer.named_sublayers(sub, include_sublayers, True, layers_set)

    def add_sublayer(self, name, sublayer):
        if not isinstance(sublayer, Layer):
            raise TypeError(f"add_sublayer: '{name}' must be a Layer, got "
                            f"{type(sublayer).__name__}")
        self._sub_layers[name] = sublayer
        return sublayer

    def add_parameter(self, name, parameter):
        if parameter is not None and not isinstance(parameter, Parameter):
            raise TypeError(f"parameter assignment requires Parameter or None, but got "
                            f"'{type(parameter).__name__}'")
        self._parameters[name] = parameter
        return parameter

    def state_dict(self, destination=None, include_sublayers=True, structured_name_prefix=""):
        """{structured name: Parameter} of this layer and (by default) its sublayers, the
        names `attr` / `sublayer.attr` as Fluid 1.8 keys them."""
        out = collections.OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[structured_name_prefix + name] = p
        if include_sublayers:
            for name, layer in self._sub_layers.items():
                if layer is not None:
                    layer.state_dict(out, True, f"{structured_name_prefix}{name}.")
        return out

    # -- calling ----------------------------------------------------------------------------
    @staticmethod
    def _add_hook(hooks, hook):
        h = _HookHandle(hooks)
        hooks[h.id] = hook
        return h

    def register_forward_pre_hook(self, hook):
        return self._add_hook(self._forward_pre_hooks, hook)

    def register_forward_post_hook(self, hook):
        return self._add_hook(self._forward_post_hooks, hook)

    def _build_once(self, *inputs, **kwargs):
        """Create what depends on the first input (Fluid's lazily built layers)."""

    def __call__(self, *inputs, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, inputs)
            if result is not None:
                inputs = result if isinstance(result, tuple) else (result,)
        if not self._built:
            self._build_once(*inputs, **kwargs)
            self._built = True
        outputs = self.forward(*inputs, **kwargs)
        for hook in list(self._forward_post_hooks.values()):
            result = hook(self, inputs, outputs)
            if result is not None:
                outputs = result
        return outputs

    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def backward(self, *inputs):
        raise ValueError("Layer shouldn't implement backward")

    # -- attribute registration ---------------------------------------------------------------
    def __getattr__(self, name):
        d = self.__dict__
        if name in d.get("_parameters", ()):
            return d["_parameters"][name]
        if name in d.get("_sub_layers", ()):
            return d["_sub_layers"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        layers = self.__dict__.get("_sub_layers")
        if isinstance(value, Parameter):
            if params is None:
                raise ValueError("super(YourLayer, self).__init__() should be called first")
            self.__dict__.pop(name, None)
            layers.pop(name, None)
            params[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"assignment to parameter '{name}' should be of type "
                                f"Parameter or None, but got '{type(value).__name__}'")
            params[name] = None
        elif isinstance(value, Layer):
            if layers is None:
                raise ValueError("super(YourLayer, self).__init__() should be called first")
            self.__dict__.pop(name, None)
            params.pop(name, None)
            layers[name] = value
        elif layers is not None and name in layers:
            if value is not None:
                raise TypeError(f"assignment to sublayer '{name}' should be of type Layer "
                                f"or None, but got '{type(value).__name__}'")
            layers[name] = None
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._sub_layers:
            del self._sub_layers[name]
        else:
            object.__delattr__(self, name)
