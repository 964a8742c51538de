"""LayerHelperBase (``fluid.layer_helper_base``, as in Fluid 1.8): the part of a layer's
helper that creates things — temporaries, global variables, parameters with their
initializer ops in the startup program, weight-normalized parameters. LayerHelper
(layer_helper.py) adds what reads a layer function's keyword arguments. Real Fluid 1.8 code
(PaddleDetection's mixed precision) patches LayerHelperBase.create_parameter, so layers must
reach it through this class."""
import copy

from . import unique_name
from .framework import default_main_program, default_startup_program
from .initializer import ConstantInitializer, XavierInitializer
from .param_attr import ParamAttr, WeightNormParamAttr


class LayerHelperBase:
    def __init__(self, name, layer_type):
        self.name = name
        self.layer_type = layer_type

    @property
    def main_program(self):
        return default_main_program()

    @property
    def startup_program(self):
        return default_startup_program()

    def block(self):
        return self.main_program.current_block()

    def create_variable_for_type_inference(self, dtype=None, stop_gradient=False, shape=None,
                                           lod_level=None, type=None):
        from .core.dtypes import VarType
        return self.block().create_var(
            name=unique_name.generate(f"{self.name}.tmp"), dtype=dtype, shape=shape,
            lod_level=lod_level, persistable=False, stop_gradient=stop_gradient,
            type=type if type is not None else VarType.LOD_TENSOR)

    create_tmp_variable = create_variable_for_type_inference

    def create_variable(self, *args, **kwargs):
        """A variable in the current block, declared as given (Fluid's
        LayerHelper.create_variable, used by evaluators and layers written outside Fluid)."""
        return self.block().create_var(*args, **kwargs)

    def create_parameter(self, attr, shape, dtype="float32", is_bias=False,
                         default_initializer=None, suffix=None):
        if attr is False:
            return None
        attr = copy.copy(ParamAttr.to_attr(attr))
        if attr.name is None:
            attr.name = unique_name.generate(f"{self.name}.{suffix or ('b' if is_bias else 'w')}")
        init = attr.initializer or default_initializer or (
            ConstantInitializer(0.0) if is_bias else XavierInitializer())
        if isinstance(attr, WeightNormParamAttr):
            return self._weight_normalized(attr, shape, dtype, init)
        startup_block = self.startup_program.global_block()
        main_block = self.main_program.global_block()
        param = main_block.create_parameter(
            name=attr.name, shape=[int(d) for d in shape], dtype=dtype, trainable=attr.trainable,
            regularizer=attr.regularizer, gradient_clip_attr=attr.gradient_clip,
            optimize_attr={"learning_rate": attr.learning_rate},
            do_model_average=attr.do_model_average)
        param.initializer = init
        if not startup_block.has_var(param.name):
            # a Parameter in the startup program too, with its init op there (Fluid's rule):
            # fluid.load(startup_program, path) and save_params(startup_program) find it
            startup_block.create_parameter(
                name=param.name, shape=list(param.shape), dtype=dtype, trainable=attr.trainable,
                regularizer=attr.regularizer, gradient_clip_attr=attr.gradient_clip,
                optimize_attr={"learning_rate": attr.learning_rate},
                do_model_average=attr.do_model_average, initializer=init)
        return param

    def create_global_variable(self, persistable=False, dtype="float32", shape=None,
                               name=None, type=None, stop_gradient=True):
        """A variable in the main program's global block (state such as metric counters)."""
        from .core.dtypes import VarType
        return self.main_program.global_block().create_var(
            name=name or unique_name.generate(f"{self.name}.global"), dtype=dtype, shape=shape,
            persistable=persistable, stop_gradient=stop_gradient,
            type=type if type is not None else VarType.LOD_TENSOR)

    def set_variable_initializer(self, var, initializer):
        """Initialize `var` by `initializer` in the startup program (once)."""
        startup_block = self.startup_program.global_block()
        if not startup_block.has_var(var.name):
            initializer(var, startup_block)
        return var

    # -- weight normalization (WeightNormParamAttr) -------------------------------------
    def _weight_normalized(self, attr, shape, dtype, init):
        """The weight w = g * v / ||v|| of a WeightNormParamAttr (Salimans & Kingma 2016,
        Fluid's scheme): parameters `<name>_v` (shape of w, `init`ialized as w would be)
        and `<name>_g` (the norms; size shape[dim] along `dim`, 1 elsewhere), where ||v|| is
        taken over every dimension but `attr.dim` (over all when it is None). The startup
        program sets g = ||v|| after v's initializer, so w starts as `init` makes it; the
        main program computes w from g and v each run, so training updates g and v."""
        shape = [int(d) for d in shape]
        dim = attr.dim
        if dim is not None and not -len(shape) <= dim < len(shape):
            raise ValueError(f"WeightNormParamAttr: dim {dim} is out of range for a "
                             f"parameter of shape {shape}")
        dim = dim % len(shape) if dim is not None else None
        g_shape = [1] * len(shape)
        if dim is not None:
            g_shape[dim] = shape[dim]

        def attr_named(suffix):
            a = copy.copy(attr)
            a.__class__ = ParamAttr
            a.name = attr.name + suffix
            return a

        main_block = self.main_program.global_block()
        startup_block = self.startup_program.global_block()
        v = self.create_parameter(attr_named("_v"), shape, dtype, default_initializer=init)
        g_attr = attr_named("_g")
        g = main_block.create_parameter(
            name=g_attr.name, shape=g_shape, dtype=dtype, trainable=g_attr.trainable,
            regularizer=g_attr.regularizer, gradient_clip_attr=g_attr.gradient_clip,
            optimize_attr={"learning_rate": g_attr.learning_rate},
            do_model_average=g_attr.do_model_average)
        if not startup_block.has_var(g.name):
            g_init = startup_block.create_var(name=g.name, shape=g_shape, dtype=dtype,
                                              persistable=True)
            self._norm_except_dim(startup_block, startup_block.var(v.name), dim, g_shape,
                                  out=g_init)
        norm = self._norm_except_dim(self.block(), v, dim, g_shape)
        scale = self._wn_op(self.block(), "elementwise_div", {"X": [g], "Y": [norm]},
                            g_shape, dtype, {"axis": -1})
        scale = self._wn_reshape(self.block(), scale, [shape[dim]] if dim is not None else [1])
        return self._wn_op(self.block(), "elementwise_mul", {"X": [v], "Y": [scale]}, shape,
                           dtype, {"axis": dim if dim is not None else -1})

    @staticmethod
    def _wn_op(block, op_type, inputs, shape, dtype, attrs=None, out=None, extra=()):
        out = out if out is not None else block.create_var(
            name=unique_name.generate(f"weight_norm.{op_type}.tmp"), shape=shape, dtype=dtype)
        outputs = {"Out": [out]}
        for slot in extra:
            outputs[slot] = [block.create_var(name=unique_name.generate("weight_norm.xshape"),
                                              dtype=dtype)]
        block.append_op(op_type, inputs=inputs, outputs=outputs, attrs=attrs or {})
        return out

    def _wn_reshape(self, block, x, shape, out=None):
        return self._wn_op(block, "reshape2", {"X": [x]}, shape, x.dtype, {"shape": shape},
                           out=out, extra=("XShape",))

    def _norm_except_dim(self, block, v, dim, g_shape, out=None):
        """||v|| over every dimension but `dim`, shaped g_shape (into `out` if given)."""
        x = v
        if dim is not None and dim != 0:
            perm = [dim] + [i for i in range(len(v.shape)) if i != dim]
            x = self._wn_op(block, "transpose2", {"X": [v]}, [v.shape[i] for i in perm],
                            v.dtype, {"axis": perm}, extra=("XShape",))
        if dim is not None:
            x = self._wn_reshape(block, x, [int(v.shape[dim]), -1])
        sq = self._wn_op(block, "square", {"X": [x]}, x.shape, v.dtype)
        summed = self._wn_op(block, "reduce_sum", {"X": [sq]},
                             [int(v.shape[dim])] if dim is not None else [], v.dtype,
                             {"dim": [1], "keep_dim": False} if dim is not None else
                             {"dim": [0], "keep_dim": False, "reduce_all": True})
        norm = self._wn_op(block, "sqrt", {"X": [summed]}, summed.shape, v.dtype)
        return self._wn_reshape(block, norm, g_shape, out=out)
