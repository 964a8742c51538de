"""Optimizers (Fluid's `fluid.optimizer`): `minimize(loss)` appends the backward pass, then
gradient clipping, regularization and one update op per parameter to the loss's program.

Each optimizer is a small subclass of `Optimizer` naming its op type, its accumulators
(persistable variables `<param>_<acc>_<n>` in the main program, filled by `fill_constant` in
the startup program) and the op's attributes. A float learning rate becomes a persistable
`learning_rate_<n>` variable filled in the startup program; a Variable (an LR schedule) is
used as is. A parameter's `optimize_attr['learning_rate']` != 1 adds a `scale` op.

The update ops write Param and accumulators in place (ParamOut is Param): see
`fluidity.ops.optimizer_ops` for each op's rule and its SelectedRows (sparse) behaviour.
"""
import numbers

from . import unique_name
from .backward import append_backward
from .clip import ClipGradBase, append_gradient_clip_ops
from .core.dtypes import VarType
from .errors import FluidityError
from .framework import (OpRole, Parameter, Program, Variable, default_main_program,
                        default_startup_program, name_scope, op_role_guard, program_guard)
from .initializer import ConstantInitializer
from .regularizer import WeightDecayRegularizer, append_regularization_ops

__all__ = ["SGD", "Momentum", "Adam", "AdamW", "Adagrad", "RMSProp", "Ftrl", "SGDOptimizer",
           "MomentumOptimizer", "AdamOptimizer", "AdamWOptimizer", "AdagradOptimizer",
           "RMSPropOptimizer", "FtrlOptimizer", "Optimizer"]


def _check(cond, message):
    if not cond:
        raise FluidityError(message)


def _is_number(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


class Optimizer:
    """Base optimizer. Subclasses set `type` (the update op), `accumulators` (name, fill
    value, shape or None for the parameter's shape) and implement `_op_io` giving the op's
    extra inputs/outputs and attributes."""
    type = None
    accumulators = ()

    def __init__(self, learning_rate, parameter_list=None, regularization=None,
                 grad_clip=None, name=None):
        _check(_is_number(learning_rate) or isinstance(learning_rate, Variable),
               f"{type(self).__name__}: learning_rate must be a float or a Variable, got "
               f"{type(learning_rate).__name__}")
        _check(regularization is None or isinstance(regularization, WeightDecayRegularizer),
               f"{type(self).__name__}: regularization must be an L1Decay/L2Decay "
               f"regularizer, got {type(regularization).__name__}")
        _check(grad_clip is None or isinstance(grad_clip, ClipGradBase),
               f"{type(self).__name__}: grad_clip must be a ClipGradByValue/ByNorm/"
               f"ByGlobalNorm, got {type(grad_clip).__name__}")
        self._learning_rate = learning_rate
        self._parameter_list = parameter_list
        self.regularization = regularization
        self._grad_clip = grad_clip
        self._name = name
        self._lr_vars = {}       # program -> its learning-rate Variable
        self._accumulators = {}  # program -> {(acc name, param name): Variable}

    # -- learning rate ----------------------------------------------------------------------
    def _create_global_learning_rate(self):
        program = default_main_program()
        if program in self._lr_vars:
            return
        lr = self._learning_rate
        if isinstance(lr, Variable):
            _check(lr.type == VarType.LOD_TENSOR and abs(lr.numel()) == 1,
                   f"learning rate Variable '{lr.name}' must be a tensor of one element, "
                   f"got shape {list(lr.shape)}")
            self._lr_vars[program] = lr
            return
        name = unique_name.generate("learning_rate")
        # 0-D, as Paddle >= 2.5 makes it (ops/reduce.py's note); a schedule's [1] works too
        var = program.global_block().create_var(name=name, shape=[], dtype="float32",
                                                persistable=True, stop_gradient=True)
        ConstantInitializer(float(lr))(var, default_startup_program().global_block())
        self._lr_vars[program] = var

    def _global_learning_rate(self, program=None):
        return self._lr_vars.get(program or default_main_program())

    def current_step_lr(self):
        """The learning rate as a float when it is one (Paddle returns the scheduled value
        only in dygraph mode)."""
        return float(self._learning_rate) if _is_number(self._learning_rate) else None

    def _create_param_lr(self, param):
        lr = self._global_learning_rate()
        factor = param.optimize_attr.get("learning_rate", 1.0) if isinstance(
            param, Parameter) else 1.0
        if isinstance(factor, Variable) or factor == 1.0:
            return factor if isinstance(factor, Variable) else lr
        block = default_main_program().global_block()
        out = block.create_var(name=unique_name.generate("learning_rate_scaled"), shape=lr.shape,
                               dtype=lr.dtype, stop_gradient=True)
        with op_role_guard(OpRole.Optimize | OpRole.LRSched):
            block.append_op("scale", {"X": lr}, {"Out": out}, {"scale": float(factor)})
        return out

    # -- accumulators ---------------------------------------------------------------------
    def _add_accumulator(self, name, param, fill_value=0.0, shape=None, dtype=None):
        program = default_main_program()
        accs = self._accumulators.setdefault(program, {})
        key = (name, param.name)
        if key in accs:
            raise FluidityError(f"{type(self).__name__}: accumulator '{name}' of parameter "
                                f"'{param.name}' already exists")
        prefix = f"{self._name}_" if self._name else ""
        var = program.global_block().create_var(
            name=unique_name.generate(f"{prefix}{param.name}_{name}"),
            shape=list(param.shape if shape is None else shape),
            dtype=param.dtype if dtype is None else dtype, persistable=True,
            stop_gradient=True)
        ConstantInitializer(float(fill_value))(var, default_startup_program().global_block())
        accs[key] = var
        return var

    def _get_accumulator(self, name, param):
        try:
            return self._accumulators[default_main_program()][(name, param.name)]
        except KeyError:
            raise FluidityError(f"{type(self).__name__}: no accumulator '{name}' for "
                                f"parameter '{param.name}'") from None

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            for name, fill, shape in self.accumulators:
                if (name, p.name) not in self._accumulators.get(default_main_program(), {}):
                    self._add_accumulator(name, p, fill, shape)

    # -- the update op --------------------------------------------------------------------
    def _op_io(self, param):
        """(extra inputs, extra outputs, attrs) of the update op for `param`."""
        return {}, {}, {}

    def _append_optimize_op(self, block, param_and_grad):
        param, grad = param_and_grad
        ins, outs, attrs = self._op_io(param)
        return block.append_op(
            self.type,
            {"Param": param, "Grad": grad, "LearningRate": self._create_param_lr(param), **ins},
            {"ParamOut": param, **outs}, attrs)

    def _create_optimization_pass(self, parameters_and_grads):
        program = default_main_program()
        block = program.global_block()
        todo = [(p, g) for p, g in parameters_and_grads
                if g is not None and getattr(p, "trainable", True)]
        ops = []
        self._create_global_learning_rate()
        self._create_accumulators(block, [p for p, _ in todo])
        with op_role_guard(OpRole.Optimize), name_scope("optimizer"):
            for p, g in todo:
                op = self._append_optimize_op(block, (p, g))
                op._set_attr("op_role_var", [p.name, g.name])
                ops.append(op)
        return ops

    # -- the public API -------------------------------------------------------------------
    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 callbacks=None):
        """append_backward(loss): [(param, grad)]."""
        _check(isinstance(loss, Variable),
               f"{type(self).__name__}: the loss must be a Variable, got "
               f"{type(loss).__name__}")
        plist = parameter_list if parameter_list is not None else self._parameter_list
        return append_backward(loss, plist, no_grad_set, callbacks)

    def apply_gradients(self, params_grads):
        """Clip, regularize, and append the update ops for [(param, grad)]; returns the
        update ops."""
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        if not params_grads:
            return []
        # build into the parameters' program (initializers: the default startup program)
        with program_guard(params_grads[0][0].block.program):
            if self._grad_clip is not None:
                params_grads = self._grad_clip(params_grads)
            else:
                params_grads = append_gradient_clip_ops(params_grads)
            params_grads = append_regularization_ops(params_grads, self.regularization)
            return self._create_optimization_pass(params_grads)

    def apply_optimize(self, loss, startup_program, params_grads):
        with program_guard(loss.block.program, startup_program):
            return self.apply_gradients(params_grads)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """backward + apply_gradients. Returns (optimize_ops, [(param, grad)])."""
        _check(isinstance(loss, Variable),
               f"{type(self).__name__}.minimize: the loss must be a Variable, got "
               f"{type(loss).__name__}")
        _check(startup_program is None or isinstance(startup_program, Program),
               f"{type(self).__name__}.minimize: startup_program must be a Program, got "
               f"{type(startup_program).__name__}")
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        return self.apply_optimize(loss, startup_program, params_grads), params_grads


# --- the optimizers --------------------------------------------------------------------------
class SGDOptimizer(Optimizer):
    """param -= lr * grad (op `sgd`)."""
    type = "sgd"


class MomentumOptimizer(Optimizer):
    """velocity = momentum * velocity + grad; param -= lr * velocity (or the Nesterov step)."""
    type = "momentum"
    accumulators = (("velocity", 0.0, None),)

    def __init__(self, learning_rate, momentum, parameter_list=None, use_nesterov=False,
                 regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        _check(_is_number(momentum), f"Momentum: momentum must be a number, got "
                                     f"{type(momentum).__name__}")
        self._momentum = float(momentum)
        self._use_nesterov = bool(use_nesterov)

    def _op_io(self, param):
        v = self._get_accumulator("velocity", param)
        return ({"Velocity": v}, {"VelocityOut": v},
                {"mu": self._momentum, "use_nesterov": self._use_nesterov})


class AdamOptimizer(Optimizer):
    """Adam (op `adam`; the op also advances the beta1/beta2 power accumulators).
    lazy_mode=True: a sparse gradient updates only its rows."""
    type = "adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameter_list=None, regularization=None, grad_clip=None, name=None,
                 lazy_mode=False):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        for k, v in (("beta1", beta1), ("beta2", beta2), ("epsilon", epsilon)):
            _check(_is_number(v), f"{type(self).__name__}: {k} must be a number, got "
                                  f"{type(v).__name__}")
        self._beta1, self._beta2, self._epsilon = float(beta1), float(beta2), float(epsilon)
        self._lazy_mode = bool(lazy_mode)
        self.accumulators = (("moment1", 0.0, None), ("moment2", 0.0, None),
                             ("beta1_pow_acc", self._beta1, [1]),
                             ("beta2_pow_acc", self._beta2, [1]))

    def _op_io(self, param):
        acc = {k: self._get_accumulator(n, param) for k, n in (
            ("Moment1", "moment1"), ("Moment2", "moment2"), ("Beta1Pow", "beta1_pow_acc"),
            ("Beta2Pow", "beta2_pow_acc"))}
        return (acc, {k + "Out": v for k, v in acc.items()},
                {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
                 "lazy_mode": self._lazy_mode})


class AdamWOptimizer(AdamOptimizer):
    """AdamW (op `adamw`): decoupled weight decay param *= 1 - lr * lr_ratio * weight_decay
    before the Adam step. `apply_decay_param_fun(name) -> bool` picks the decayed parameters;
    `lr_ratio(param) -> float` scales each parameter's learning rate."""
    type = "adamw"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameter_list=None, weight_decay=0.01, lr_ratio=None,
                 apply_decay_param_fun=None, grad_clip=None, lazy_mode=False, name=None):
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list, None,
                         grad_clip, name, lazy_mode)
        _check(_is_number(weight_decay), f"AdamW: weight_decay must be a number, got "
                                         f"{type(weight_decay).__name__}")
        _check(lr_ratio is None or callable(lr_ratio), "AdamW: lr_ratio must be callable")
        self._coeff = float(weight_decay)
        self._lr_ratio = lr_ratio
        self._apply_decay_param_fun = apply_decay_param_fun

    def _op_io(self, param):
        ins, outs, attrs = super()._op_io(param)
        decay = self._apply_decay_param_fun is None or self._apply_decay_param_fun(param.name)
        attrs.update(coeff=self._coeff, with_decay=bool(decay),
                     lr_ratio=float(self._lr_ratio(param)) if self._lr_ratio else 1.0)
        return ins, outs, attrs


class AdagradOptimizer(Optimizer):
    """moment += grad^2; param -= lr * grad / (sqrt(moment) + epsilon)."""
    type = "adagrad"

    def __init__(self, learning_rate, epsilon=1e-6, parameter_list=None, regularization=None,
                 grad_clip=None, name=None, initial_accumulator_value=0.0):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._epsilon = float(epsilon)
        self.accumulators = (("moment", float(initial_accumulator_value), None),)

    def _op_io(self, param):
        m = self._get_accumulator("moment", param)
        return {"Moment": m}, {"MomentOut": m}, {"epsilon": self._epsilon}


class RMSPropOptimizer(Optimizer):
    """RMSProp (Hinton), optionally centered, with momentum (op `rmsprop`)."""
    type = "rmsprop"
    accumulators = (("momentum", 0.0, None), ("mean_square", 0.0, None),
                    ("mean_grad", 0.0, None))

    def __init__(self, learning_rate, rho=0.95, epsilon=1e-6, momentum=0.0, centered=False,
                 parameter_list=None, regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        for k, v in (("rho", rho), ("epsilon", epsilon), ("momentum", momentum)):
            _check(_is_number(v), f"RMSProp: {k} must be a number, got {type(v).__name__}")
        self._rho, self._epsilon = float(rho), float(epsilon)
        self._momentum, self._centered = float(momentum), bool(centered)

    def _op_io(self, param):
        mom, ms, mg = (self._get_accumulator(n, param)
                       for n in ("momentum", "mean_square", "mean_grad"))
        return ({"Moment": mom, "MeanSquare": ms, "MeanGrad": mg},
                {"MomentOut": mom, "MeanSquareOut": ms, "MeanGradOut": mg},
                {"decay": self._rho, "epsilon": self._epsilon, "momentum": self._momentum,
                 "centered": self._centered})


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (op `ftrl`)."""
    type = "ftrl"
    accumulators = (("squared", 0.0, None), ("linear", 0.0, None))

    def __init__(self, learning_rate, l1=0.0, l2=0.0, lr_power=-0.5, parameter_list=None,
                 regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._l1, self._l2, self._lr_power = float(l1), float(l2), float(lr_power)

    def _op_io(self, param):
        sq, lin = self._get_accumulator("squared", param), self._get_accumulator("linear", param)
        return ({"SquaredAccumulator": sq, "LinearAccumulator": lin},
                {"SquaredAccumOut": sq, "LinearAccumOut": lin},
                {"l1": self._l1, "l2": self._l2, "lr_power": self._lr_power})


SGD = SGDOptimizer
Momentum = MomentumOptimizer
Adam = AdamOptimizer
AdamW = AdamWOptimizer
Adagrad = AdagradOptimizer
RMSProp = RMSPropOptimizer
Ftrl = FtrlOptimizer
