"""`fluid.dygraph.Sequential`, `LayerList`, `ParameterList`: Layers that hold other Layers
or Parameters by position (or name), as Fluid 1.8's."""
import collections

from ..framework import Parameter
from .layers import Layer

__all__ = ["Sequential", "ParameterList", "LayerList"]


class Sequential(Layer):
    """Calls its sublayers in order. `Sequential(l1, l2)` keys them '0', '1';
    `Sequential(('a', l1), ('b', l2))` by name."""

    def __init__(self, *layers):
        super().__init__()
        named = layers and isinstance(layers[0], tuple)
        for i, item in enumerate(layers):
            name, layer = item if named else (str(i), item)
            self.add_sublayer(name, layer)

    def __getitem__(self, name):
        return self._sub_layers[str(name)]

    def __setitem__(self, name, layer):
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential: item '{name}' must be a Layer, got "
                            f"{type(layer).__name__}")
        setattr(self, str(name), layer)

    def __delitem__(self, name):
        del self._sub_layers[str(name)]

    def __len__(self):
        return len(self._sub_layers)

    def forward(self, input):
        for layer in self._sub_layers.values():
            input = layer(input)
        return input


class ParameterList(Layer):
    def __init__(self, parameters=None):
        super().__init__()
        for p in parameters or ():
            self.append(p)

    def __getitem__(self, idx):
        return self._parameters[str(idx)]

    def __setitem__(self, idx, param):
        if not isinstance(param, Parameter):
            raise TypeError(f"ParameterList: item {idx} must be a Parameter, got "
                            f"{type(param).__name__}")
        setattr(self, str(idx), param)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def append(self, parameter):
        self[len(self._parameters)] = parameter
        return self


class LayerList(Layer):
    def __init__(self, sublayers=None):
        super().__init__()
        for i, layer in enumerate(sublayers or ()):
            self.add_sublayer(str(i), layer)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._sub_layers.values())[idx])
        if idx < 0:
            idx += len(self)
        return self._sub_layers[str(idx)]

    def __setitem__(self, idx, sublayer):
        setattr(self, str(idx), sublayer)

    def __delitem__(self, idx):
        keys = list(self._sub_layers)
        for k in (keys[idx] if isinstance(idx, slice) else [keys[idx]]):
            del self._sub_layers[k]
        self._sub_layers = collections.OrderedDict(
            (str(i), l) for i, l in enumerate(self._sub_layers.values()))

    def __len__(self):
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers.values())

    def append(self, sublayer):
        self.add_sublayer(str(len(self)), sublayer)
        return self

    def insert(self, index, sublayer):
        if not (isinstance(index, int) and 0 <= index < len(self._sub_layers)):
            raise IndexError("index should be an integer in range [0, len(self))")
        items = list(self._sub_layers.values())
        items.insert(index, sublayer)
        self._sub_layers = collections.OrderedDict((str(i), l) for i, l in enumerate(items))

    def extend(self, sublayers):
        for layer in sublayers:
            self.append(layer)
        return self
