"""Initializers: each adds one op to the startup program that fills a parameter, at the
front of its block, as Fluid 1.8's do (`block._prepend_op`: a startup program lists the init
ops last-made first; the Bilinear one appends, as Fluid's). Seeds come from the op's `seed`
attribute (0 = nondeterministic); an initializer without a seed of its own takes its program's
`random_seed`, as Fluid 1.8's do, so every init op of a seeded program carries that one seed
(and, each op reseeding its engine per run, parameters of one shape and distribution start out
equal there, as in Fluid). A float16 parameter is filled as Fluid 1.8 fills it:
the init op writes a float32 temporary, and a `cast` appended after it writes the parameter."""
import math

import numpy as np

from . import unique_name
from .core import dtypes
from .core.dtypes import VarType


def _fan_in_out(var):
    shape = var.shape
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = int(np.prod(shape[2:]))
    return shape[1] * receptive, shape[0] * receptive


class Initializer:
    def __init__(self, seed=0):
        self._seed = seed

    def _seed_for(self, block):
        """Fluid 1.8's rule: seed 0 becomes the program's `random_seed`, kept by the
        initializer from then on (an initializer shared by programs keeps the first one's)."""
        if self._seed == 0:
            self._seed = block.program.random_seed
        return self._seed

    # the prefix of the float32 temporary a float16 parameter is filled through (Fluid's)
    _tmp_prefix = "init"

    def __call__(self, var, block):
        startup_var = block.create_var(name=var.name, shape=var.shape, dtype=var.dtype,
                                       type=var.type, persistable=True)
        if var.dtype != VarType.FP16:
            return self._append(startup_var, block)
        # float16, as Fluid 1.8: fill a float32 temporary (the op goes to the front), then
        # cast it into the parameter (appended)
        tmp = block.create_var(
            name=unique_name.generate(f"{self._tmp_prefix}.{var.name}.tmp"),
            shape=var.shape, dtype=VarType.FP32, type=VarType.LOD_TENSOR, persistable=False)
        op = self._append(tmp, block)
        block.append_op("cast", inputs={"X": tmp}, outputs={"Out": startup_var},
                        attrs={"in_dtype": VarType.FP32, "out_dtype": VarType.FP16})
        return op


class ConstantInitializer(Initializer):
    _tmp_prefix = "constant_init"

    def __init__(self, value=0.0, force_cpu=False):
        super().__init__()
        self.value = value

    def _append(self, var, block):
        return block._prepend_op("fill_constant", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype,
                                      "value": float(self.value)})


class UniformInitializer(Initializer):
    """U[low, high); with diag_num > 0 the first diag_num rows (of the parameter seen as
    [rows, -1]) get diag_val at column i * diag_step (Fluid 1.8's identity-like init)."""

    _tmp_prefix = "uniform_random"

    def __init__(self, low=-1.0, high=1.0, seed=0, diag_num=0, diag_step=0, diag_val=1.0):
        super().__init__(seed)
        self.low, self.high = low, high
        self.diag_num, self.diag_step, self.diag_val = int(diag_num), int(diag_step), \
            float(diag_val)

    def _append(self, var, block):
        return block._prepend_op("uniform_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype,
                                      "min": float(self.low), "max": float(self.high),
                                      "seed": self._seed_for(block),
                                      "diag_num": self.diag_num, "diag_step": self.diag_step,
                                      "diag_val": self.diag_val})


class NormalInitializer(Initializer):
    _tmp_prefix = "gaussian_random"

    def __init__(self, loc=0.0, scale=1.0, seed=0):
        super().__init__(seed)
        self.loc, self.scale = loc, scale

    def _append(self, var, block):
        return block._prepend_op("gaussian_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype,
                                      "mean": float(self.loc), "std": float(self.scale),
                                      "seed": self._seed_for(block)})


class TruncatedNormalInitializer(NormalInitializer):
    _tmp_prefix = "truncated_gaussian_random"

    def _append(self, var, block):
        m, s = float(self.loc), float(self.scale)     # Fluid's cut: mean -+ 2 std
        return block._prepend_op("truncated_gaussian_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype,
                                      "mean": m, "std": s, "a": m - 2 * s, "b": m + 2 * s,
                                      "seed": self._seed_for(block)})


class XavierInitializer(Initializer):
    """Glorot & Bengio (2010): U(+-sqrt(6/(fan_in+fan_out))) or N(0, sqrt(2/(fan_in+fan_out)))."""

    _tmp_prefix = "xavier_init"

    def __init__(self, uniform=True, fan_in=None, fan_out=None, seed=0):
        super().__init__(seed)
        self.uniform, self.fan_in, self.fan_out = uniform, fan_in, fan_out

    def _append(self, var, block):
        fi, fo = _fan_in_out(var)
        fi = self.fan_in or fi
        fo = self.fan_out or fo
        if self.uniform:
            lim = math.sqrt(6.0 / (fi + fo))
            return UniformInitializer(-lim, lim, self._seed_for(block))._append(var, block)
        return NormalInitializer(0.0, math.sqrt(2.0 / (fi + fo)),
                                 self._seed_for(block))._append(var, block)


class MSRAInitializer(Initializer):
    """He et al. (2015): U(+-sqrt(6/fan_in)) or N(0, sqrt(2/fan_in))."""

    _tmp_prefix = "msra_init"

    def __init__(self, uniform=True, fan_in=None, seed=0, negative_slope=0.0,
                 nonlinearity="relu"):
        super().__init__(seed)
        self.uniform, self.fan_in = uniform, fan_in

    def _append(self, var, block):
        fi = self.fan_in or _fan_in_out(var)[0]
        if self.uniform:
            lim = math.sqrt(6.0 / fi)
            return UniformInitializer(-lim, lim, self._seed_for(block))._append(var, block)
        return NormalInitializer(0.0, math.sqrt(2.0 / fi),
                                 self._seed_for(block))._append(var, block)


class NumpyArrayInitializer(Initializer):
    _tmp_prefix = "numpy_array_init"

    def __init__(self, value):
        super().__init__()
        self.value = np.asarray(value)

    def _append(self, var, block):
        return block._prepend_op("assign_value", outputs={"Out": var}, attrs=self._attrs(var))

    def _attrs(self, var):
        """assign_value's attributes writing this array into `var`."""
        v = self.value.astype(dtypes.to_numpy(var.dtype))
        if [d for d in v.shape if d != 1] == [d for d in var.shape if d != 1]:
            # Fluid writes the array as it is (its shape wins at run time): an array that
            # differs from the parameter only in dims of 1 ([n] for [n, 1], as Fluid's TDM
            # programs give) is taken in the parameter's shape; a transposed one is refused
            v = v.reshape(var.shape)
        if list(v.shape) != list(var.shape):
            from .errors import ShapeError
            raise ShapeError(f"NumpyArrayInitializer for '{var.name}': array shape "
                             f"{list(v.shape)} != parameter shape {list(var.shape)}")
        key = {"float32": "fp32_values", "int32": "int32_values", "int64": "int64_values",
               "bool": "bool_values"}.get(str(v.dtype), "fp32_values")
        return {"shape": list(var.shape), "dtype": var.dtype, key: v.reshape(-1).tolist()}


class BilinearInitializer(Initializer):
    """Bilinear-upsampling weights for a conv2d_transpose filter [C_out, C_in, K, K]:
    each K x K kernel is (1 - |x / f - c|) * (1 - |y / f - c|), f = ceil(K / 2),
    c = (2f - 1 - f % 2) / (2f)."""

    _tmp_prefix = "bilinear_init"

    def __init__(self):
        super().__init__()

    def _append(self, var, block):
        shape = list(var.shape)
        if len(shape) != 4 or shape[2] != shape[3]:
            from .errors import ShapeError
            raise ShapeError(f"BilinearInitializer for '{var.name}': needs a 4-D filter "
                             f"with square kernels, got shape {shape}")
        k = shape[3]
        f = math.ceil(k / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        ramp = 1 - np.abs(np.arange(k) / f - c)
        weight = np.broadcast_to(np.outer(ramp, ramp), shape).astype(np.float32)
        return block.append_op("assign_value", outputs={"Out": var},
                               attrs=NumpyArrayInitializer(weight)._attrs(var))


_FORCE_INIT_ON_CPU = [False]


def force_init_on_cpu():
    """Whether initializers are told to place parameters on the CPU (inside init_on_cpu)."""
    return _FORCE_INIT_ON_CPU[0]


def init_on_cpu():
    """A context manager under which force_init_on_cpu() is True (Fluid's hint to create
    parameters on the CPU; Fluidity's tensors live on the CPU already)."""
    import contextlib

    @contextlib.contextmanager
    def guard():
        saved, _FORCE_INIT_ON_CPU[0] = _FORCE_INIT_ON_CPU[0], True
        try:
            yield
        finally:
            _FORCE_INIT_ON_CPU[0] = saved
    return guard()


Constant = ConstantInitializer
Uniform = UniformInitializer
Normal = NormalInitializer
TruncatedNormal = TruncatedNormalInitializer
Xavier = XavierInitializer
MSRA = MSRAInitializer
Kaiming = MSRAInitializer
NumpyArray = NumpyArrayInitializer
Bilinear = BilinearInitializer
