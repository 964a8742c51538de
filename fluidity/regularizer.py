"""Weight-decay regularization (Fluid's `fluid.regularizer`): the optimizer adds the decay term
to each gradient before the update, as ops in the program.

* L2Decay: grad += coeff * param          (ops `scale`, `sum`)
* L1Decay: grad += coeff * sign(param)    (ops `sign`, `scale`, `sum`; while there is no
  `sign` op: `greater_than`, `less_than`, `cast`, `elementwise_sub` compute it)

A parameter's own regularizer (ParamAttr(regularizer=...), kept on `Parameter.regularizer`)
overrides the optimizer's `regularization`.

A sparse gradient (SelectedRows, from `embedding(is_sparse=True)`) is regularized as Fluid 1.x
does it by default: the dense decay term of the whole table is added to it, `sum(grad, decay)`
into a dense `<grad>@NEWGRAD@` that the update op then reads, so every row of the table
decays every step, touched or not.

`L2Decay(coeff, lazy_mode=True)` (and L1Decay's) is Fluidity's explicit alternative for
large sparse tables: only the rows present in the gradient decay (duplicates merged first,
so each row once), and the gradient stays sparse (op `selected_rows_weight_decay`), which
costs the touched rows only, where Fluid's rule costs the whole table each step; it is the
same weight decay applied lazily, as Adam's `lazy_mode` applies Adam to the touched rows.
Dense gradients are regularized the same way either way.
"""
import logging

from . import unique_name
from .core.dtypes import VarType
from .core.names import OpRole
from .errors import FluidityError
from .framework import name_scope, op_role_guard
from .ops import registry

NEW_GRAD_SUFFIX = "@NEWGRAD@"    # Fluid's kNewGradSuffix: a sparse gradient made dense

__all__ = ["L1Decay", "L2Decay", "L1DecayRegularizer", "L2DecayRegularizer",
           "append_regularization_ops"]


class WeightDecayRegularizer:
    """Base class: `__call__(param, grad, block)` appends ops computing the dense decay term
    and returns its variable."""
    method = None

    def __init__(self, regularization_coeff=0.0, lazy_mode=False):
        if isinstance(regularization_coeff, bool) or not isinstance(regularization_coeff,
                                                                    (int, float)):
            raise FluidityError(f"{type(self).__name__}: regularization_coeff must be a "
                                f"number, got {type(regularization_coeff).__name__}")
        self._regularization_coeff = float(regularization_coeff)
        self.lazy_mode = bool(lazy_mode)

    def _tmp(self, block, param):
        return block.create_var(name=unique_name.generate(f"{param.name}_{self.method}"),
                                shape=param.shape, dtype=param.dtype, stop_gradient=True)

    def __str__(self):
        return f"{type(self).__name__}, regularization_coeff={self._regularization_coeff:g}"


class L2DecayRegularizer(WeightDecayRegularizer):
    """loss + coeff/2 * ||param||^2, i.e. grad += coeff * param."""
    method = "l2_decay"

    def __call__(self, param, grad, block):
        decay = self._tmp(block, param)
        block.append_op("scale", {"X": param}, {"Out": decay},
                        {"scale": self._regularization_coeff})
        return decay


class L1DecayRegularizer(WeightDecayRegularizer):
    """loss + coeff * ||param||_1, i.e. grad += coeff * sign(param)."""
    method = "l1_decay"

    def __call__(self, param, grad, block):
        sign = self._sign(block, param)
        decay = self._tmp(block, param)
        block.append_op("scale", {"X": sign}, {"Out": decay},
                        {"scale": self._regularization_coeff})
        return decay


    def _sign(self, block, param):
        sign = self._tmp(block, param)
        if registry.has("sign"):
            block.append_op("sign", {"X": param}, {"Out": sign})
            return sign
        # no `sign` op yet: sign(p) = (p > 0) - (p < 0) with comparison and cast ops
        zero = block.create_var(name=unique_name.generate("l1_decay_zero"), shape=[1],
                                dtype=param.dtype, stop_gradient=True)
        block.append_op("fill_constant", outputs={"Out": zero},
                        attrs={"shape": [1], "dtype": param.dtype, "value": 0.0})
        parts = []
        for cmp in ("greater_than", "less_than"):
            mask = block.create_var(name=unique_name.generate(f"l1_decay_{cmp}"),
                                    shape=param.shape, dtype="bool", stop_gradient=True)
            block.append_op(cmp, {"X": param, "Y": zero}, {"Out": mask})
            val = self._tmp(block, param)
            block.append_op("cast", {"X": mask}, {"Out": val},
                            {"in_dtype": VarType.BOOL, "out_dtype": param.dtype})
            parts.append(val)
        block.append_op("elementwise_sub", {"X": parts[0], "Y": parts[1]}, {"Out": sign})
        return sign


L1Decay = L1DecayRegularizer
L2Decay = L2DecayRegularizer


def append_regularization_ops(parameters_and_grads, regularization=None):
    """Add each parameter's decay term to its gradient: a dense gradient in place, a
    sparse one into a new dense `<grad>@NEWGRAD@` (or, lazy_mode, its own rows in place).
    Returns [(param, regularized grad)], as Fluid's; the ops carry op_role Optimize and
    op_role_var [param, grad]."""
    out = []
    warned = False
    for param, grad in parameters_and_grads:
        own = getattr(param, "regularizer", None)
        reg = own or regularization
        if grad is None or reg is None:
            out.append((param, grad))
            continue
        if own is not None and regularization is not None and not warned:
            warned = True
            logging.info("If regularizer of a Parameter has been set by 'fluid.ParamAttr' or "
                         "'fluid.WeightNormParamAttr' already. The Regularization[%s] in "
                         "Optimizer will not take effect, and it will only be applied to "
                         "other Parameters!", regularization)
        if not isinstance(reg, WeightDecayRegularizer):
            raise FluidityError(f"regularizer of '{param.name}' must be L1Decay or L2Decay, "
                                f"got {type(reg).__name__}")
        block = grad.block
        start = len(block.ops)
        new_grad = grad
        with op_role_guard(OpRole.Optimize), name_scope("regularization"):
            if grad.type == VarType.SELECTED_ROWS and reg.lazy_mode:
                block.append_op("selected_rows_weight_decay", {"Param": param, "Grad": grad},
                                {"Out": grad},
                                {"regularization_method": reg.method,
                                 "regularization_coeff": reg._regularization_coeff})
            else:
                decay = reg(param, grad, block)
                if grad.type == VarType.SELECTED_ROWS:
                    new_grad = block.create_var(name=grad.name + NEW_GRAD_SUFFIX,
                                                dtype=param.dtype, shape=param.shape,
                                                lod_level=param.lod_level,
                                                type=VarType.LOD_TENSOR)
                block.append_op("sum", {"X": [grad, decay]}, {"Out": new_grad})
        for op in block.ops[start:]:
            op._set_attr("op_role_var", [param.name, grad.name])
        out.append((param, new_grad))
    return out
