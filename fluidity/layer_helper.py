"""LayerHelper: what every layer function does — name things, create parameters (and their
initializer ops in the startup program), create temporaries, append ops. The creation of
variables and parameters is LayerHelperBase's (layer_helper_base.py), as in Fluid 1.8."""
from . import unique_name
from .layer_helper_base import LayerHelperBase
from .param_attr import ParamAttr


class LayerHelper(LayerHelperBase):
    """A layer function's helper: the base's creation of variables and parameters, plus
    what reads the layer's keyword arguments (param_attr, bias_attr, act, its input)."""

    def __init__(self, layer_type, **kwargs):
        self.kwargs = kwargs
        name = kwargs.get("name")
        super().__init__(name if name is not None else unique_name.generate(layer_type),
                         layer_type)

    @property
    def param_attr(self):
        """The layer's `param_attr` keyword as a ParamAttr (Fluid's LayerHelper.param_attr,
        which layer functions written outside Fluid read)."""
        return ParamAttr.to_attr(self.kwargs.get("param_attr"))

    @property
    def bias_attr(self):
        """The layer's `bias_attr` keyword as a ParamAttr (False stays False: no bias)."""
        return ParamAttr.to_attr(self.kwargs.get("bias_attr"))

    def append_op(self, *args, **kwargs):
        return self.block().append_op(*args, **kwargs)

    def input_dtype(self, input_param_name="input"):
        inputs = self.kwargs.get(input_param_name)
        if isinstance(inputs, (list, tuple)):
            inputs = inputs[0]
        return inputs.dtype

    def append_bias_op(self, input_var, bias_attr, dim_start=1, dim_end=None):
        if bias_attr is False or bias_attr is None and self.kwargs.get("bias_attr") is False:
            return input_var
        size = list(input_var.shape[dim_start:dim_end])
        b = self.create_parameter(bias_attr, size, input_var.dtype, is_bias=True)
        out = self.create_variable_for_type_inference(input_var.dtype)
        self.append_op("elementwise_add", inputs={"X": input_var, "Y": b},
                       outputs={"Out": out}, attrs={"axis": dim_start})
        return out

    def append_activation(self, input_var, act=None):
        act = act if act is not None else self.kwargs.get("act")
        if act is None:
            return input_var
        if isinstance(act, dict):
            act = dict(act)
            act_type = act.pop("type")
            attrs = act
        else:
            act_type, attrs = act, {}
        out = self.create_variable_for_type_inference(input_var.dtype)
        self.append_op(act_type, inputs={"X": input_var}, outputs={"Out": out}, attrs=attrs)
        return out
