"""Optimizers (Fluid's `fluid.optimizer`): `minimize(loss)` appends the backward pass, then
gradient clipping, regularization and one update op per parameter to the loss's program.

Each optimizer is a small subclass of `Optimizer` naming its op type, its accumulators
(persistable variables `<param>_<acc>_<n>` in the main program, filled by `fill_constant` in
the startup program; `_accumulators[acc][param name]`, with Fluid's `_<acc>_acc_str` names)
and the op's attributes. A float learning rate becomes a persistable `learning_rate_<n>`
variable filled in the startup program; a Variable (an LR schedule) is used as is. A
parameter's `optimize_attr['learning_rate']` != 1 adds a `scale` op before its update op.
`minimize` / `apply_gradients` return the ops the optimization pass appended (those `scale`
ops, the update ops and what follows them), as Fluid 1.8's do.

The update ops write Param and accumulators in place (ParamOut is Param): see
`fluidity.ops.optimizer_ops` (and `optimizer_variants`) for each op's rule and its SelectedRows
(sparse) behaviour.
"""
import numbers

from . import unique_name
from .backward import append_backward
from .clip import ClipGradBase, append_gradient_clip_ops
from .core.dtypes import VarType
from .errors import FluidityError, declined_class
from .framework import (OpRole, Parameter, Program, Variable, default_main_program,
                        default_startup_program, name_scope, op_role_guard, program_guard)
from .initializer import ConstantInitializer
from .regularizer import WeightDecayRegularizer, append_regularization_ops

__all__ = ["SGD", "Momentum", "Adam", "AdamW", "Adagrad", "RMSProp", "Ftrl", "SGDOptimizer",
           "MomentumOptimizer", "AdamOptimizer", "AdamWOptimizer", "AdagradOptimizer",
           "RMSPropOptimizer", "FtrlOptimizer", "Optimizer",
           "Adamax", "DecayedAdagrad", "Adadelta", "Lamb", "LarsMomentum", "Dpsgd",
           "AdamaxOptimizer", "DecayedAdagradOptimizer", "AdadeltaOptimizer", "LambOptimizer",
           "LarsMomentumOptimizer", "DpsgdOptimizer", "ModelAverage",
           "ExponentialMovingAverage", "RecomputeOptimizer", "LookaheadOptimizer",
           "DGCMomentumOptimizer", "PipelineOptimizer"]


def _check(cond, message):
    if not cond:
        raise FluidityError(message)


def _is_number(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _check_lr_variable(lr):
    _check(lr.type == VarType.LOD_TENSOR and abs(lr.numel()) == 1,
           f"learning rate Variable '{lr.name}' must be a tensor of one element, "
           f"got shape {list(lr.shape)}")


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
        self._learning_rate_map = {}   # program -> its learning-rate Variable
        if isinstance(learning_rate, Variable):
            # Fluid 1.8 records a Variable learning rate for the current main program at
            # once, so _global_learning_rate() answers before minimize (PaddleCV's
            # image_classification fetches it so)
            _check_lr_variable(learning_rate)
            self._learning_rate_map[default_main_program()] = learning_rate
        self._accumulators = {}        # acc name -> {param name: Variable} (Fluid's layout)

    # -- learning rate ----------------------------------------------------------------------
    def _create_global_learning_rate(self):
        program = default_main_program()
        if program in self._learning_rate_map:
            return
        lr = self._learning_rate
        if isinstance(lr, Variable):
            _check_lr_variable(lr)
            self._learning_rate_map[program] = lr
            return
        name = unique_name.generate("learning_rate")
        # [1], as Fluid 1.x's create_global_var makes it (ops/reduce.py's note)
        var = program.global_block().create_var(name=name, shape=[1], dtype="float32",
                                                persistable=True, stop_gradient=True)
        ConstantInitializer(float(lr))(var, default_startup_program().global_block())
        self._learning_rate_map[program] = var

    def _global_learning_rate(self, program=None):
        return self._learning_rate_map.get(program or default_main_program())

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
        with op_role_guard(OpRole.Optimize | OpRole.LRSched), \
                name_scope("scale_with_param_lr"):
            block.append_op("scale", {"X": lr}, {"Out": out},
                            {"scale": float(factor), "bias": 0.0})
        return out

    # -- accumulators ---------------------------------------------------------------------
    def _acc_key(self, name):
        return f"{self._name}_{name}" if self._name is not None else name

    def _add_accumulator(self, name, param, fill_value=0.0, shape=None, dtype=None, **kwargs):
        """A persistable `<param>_<name>_<n>` of the parameter's shape (or `shape`) filled
        with `fill_value` by the startup program; kept in `_accumulators[name][param]`. An
        optimizer used again for another program makes that program its own."""
        program = default_main_program()
        name = self._acc_key(name)
        old = self._accumulators.get(name, {}).get(param.name)
        if old is not None and old.block.program is program:
            raise FluidityError(f"Accumulator {name} already exists for parameter "
                                f"{param.name}")
        var = program.global_block().create_var(
            name=unique_name.generate(f"{param.name}_{name}"),
            shape=list(param.shape if shape is None else shape),
            dtype=param.dtype if dtype is None else dtype, persistable=True,
            stop_gradient=True)
        ConstantInitializer(float(fill_value))(var, default_startup_program().global_block())
        self._accumulators.setdefault(name, {})[param.name] = var
        return var

    def _get_accumulator(self, name, param):
        var = self._accumulators.get(self._acc_key(name), {}).get(param.name)
        if var is None:
            raise FluidityError(f"Accumulator {self._acc_key(name)} does not exist for "
                                f"parameter {param.name}")
        return var

    def _create_accumulators(self, block, parameters):
        program = default_main_program()
        for p in parameters:
            for name, fill, shape in self.accumulators:
                old = self._accumulators.get(self._acc_key(name), {}).get(p.name)
                if old is None or old.block.program is not program:
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
        """Append the update of every (param, grad) (accumulators and the learning rate
        first, as Fluid 1.8); returns every op it appended: each parameter's own-LR `scale`,
        its update op, and the ops of `_finish_update`."""
        program = default_main_program()
        todo = [(p, g) for p, g in parameters_and_grads
                if g is not None and getattr(p, "trainable", True)]
        # the updates go where the gradients are: the global block, or the backward block
        # of a loss built in a case/switch_case branch (Fluid 1.8's backward_block_idx)
        block = next((g.block for _, g in todo if g.block.idx != 0), program.global_block())
        start = len(block.ops)
        self._create_accumulators(block, [p for p, _ in todo])
        self._create_global_learning_rate()
        with op_role_guard(OpRole.Optimize), name_scope("optimizer"):
            for p, g in todo:
                op = self._append_optimize_op(block, (p, g))
                op._set_attr("op_role_var", [p.name, g.name])
            self._finish_update(block, todo)
        return block.ops[start:]

    def _finish_update(self, block, params_grads):
        """Ops after the updates (Fluid 1.x's beta-power steps); none by default."""

    def _scale_accumulators(self, block, params_grads, steps):
        """acc *= factor for each (accumulator name, factor) in `steps`, per parameter."""
        for p, _g in params_grads:
            for name, factor in steps:
                acc = self._get_accumulator(name, p)
                block.append_op("scale", {"X": acc}, {"Out": acc}, {"scale": float(factor)})

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

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 grad_clip=None):
        """backward + apply_gradients. Returns (optimize_ops, [(param, grad)]).
        `grad_clip` (Fluid 1.6) clips this call's gradients in place of the optimizer's."""
        _check(isinstance(loss, Variable),
               f"{type(self).__name__}.minimize: the loss must be a Variable, got "
               f"{type(loss).__name__}")
        _check(startup_program is None or isinstance(startup_program, Program),
               f"{type(self).__name__}.minimize: startup_program must be a Program, got "
               f"{type(startup_program).__name__}")
        _check(grad_clip is None or isinstance(grad_clip, ClipGradBase),
               f"{type(self).__name__}.minimize: grad_clip must be a GradientClipByValue/"
               f"ByNorm/ByGlobalNorm, got {type(grad_clip).__name__}")
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        return self._optimize_clipped(loss, startup_program, params_grads, grad_clip), \
            params_grads

    def _optimize_clipped(self, loss, startup_program, params_grads, grad_clip):
        """apply_optimize, with `grad_clip` (when given) in place of the optimizer's own."""
        if grad_clip is None:
            return self.apply_optimize(loss, startup_program, params_grads)
        saved, self._grad_clip = self._grad_clip, grad_clip
        try:
            return self.apply_optimize(loss, startup_program, params_grads)
        finally:
            self._grad_clip = saved

    def state_dict(self):
        raise NotImplementedError("Optimizer.state_dict is a dygraph feature, which Fluidity "
                                  "does not have; save the program's persistables instead")

    def set_dict(self, state_dict):
        raise NotImplementedError("Optimizer.set_dict is a dygraph feature, which Fluidity "
                                  "does not have; load the program's persistables instead")

    load = set_dict

    def get_opti_var_name_list(self):
        """The names of the accumulators and learning rates this optimizer created."""
        names = [v.name for accs in self._accumulators.values() for v in accs.values()]
        return names + [v.name for v in self._learning_rate_map.values()]


# --- the optimizers --------------------------------------------------------------------------
class SGDOptimizer(Optimizer):
    """param -= lr * grad (op `sgd`)."""
    type = "sgd"


class MomentumOptimizer(Optimizer):
    """velocity = momentum * velocity + grad; param -= lr * velocity (or the Nesterov step)."""
    type = "momentum"
    _velocity_acc_str = "velocity"
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
    _moment1_acc_str, _moment2_acc_str = "moment1", "moment2"
    _beta1_pow_acc_str, _beta2_pow_acc_str = "beta1_pow_acc", "beta2_pow_acc"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameter_list=None, regularization=None, grad_clip=None, name=None,
                 lazy_mode=False):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        # Fluid 1.8: beta1 and beta2 a number or a [1] Variable (read by the op at run time,
        # input Beta1Tensor / Beta2Tensor), epsilon a number
        for k, v in (("beta1", beta1), ("beta2", beta2)):
            _check(_is_number(v) or isinstance(v, Variable),
                   f"{type(self).__name__}: {k} must be a number or a Variable, got "
                   f"{type(v).__name__}")
        _check(_is_number(epsilon), f"{type(self).__name__}: epsilon must be a number, got "
                                    f"{type(epsilon).__name__}")
        self._beta1, self._beta2 = (v if isinstance(v, Variable) else float(v)
                                    for v in (beta1, beta2))
        self._epsilon = float(epsilon)
        self._lazy_mode = bool(lazy_mode)
        self.accumulators = self._moment_accumulators()

    def _moment_accumulators(self):
        """Adam's (and Lamb's) two moments and two beta powers. A beta given as a Variable
        starts its power at Fluid's default (0.9, 0.999), as Fluid 1.8 does."""
        b1 = 0.9 if isinstance(self._beta1, Variable) else self._beta1
        b2 = 0.999 if isinstance(self._beta2, Variable) else self._beta2
        return (("moment1", 0.0, None), ("moment2", 0.0, None),
                ("beta1_pow_acc", b1, [1]), ("beta2_pow_acc", b2, [1]))

    def _moment_inputs(self, param):
        return {k: self._get_accumulator(n, param) for k, n in (
            ("Moment1", "moment1"), ("Moment2", "moment2"), ("Beta1Pow", "beta1_pow_acc"),
            ("Beta2Pow", "beta2_pow_acc"))}

    def _op_io(self, param):
        acc = self._moment_inputs(param)
        outs = {k + "Out": v for k, v in acc.items()}
        attrs = {"epsilon": self._epsilon, "lazy_mode": self._lazy_mode}
        for attr, slot, beta in (("beta1", "Beta1Tensor", self._beta1),
                                 ("beta2", "Beta2Tensor", self._beta2)):
            if isinstance(beta, Variable):
                acc = dict(acc, **{slot: beta})
            else:
                attrs[attr] = beta
        return acc, outs, attrs


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
    _moment_acc_str = "moment"

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
    _momentum_acc_str, _mean_square_acc_str = "momentum", "mean_square"
    _mean_grad_acc_str = "mean_grad"
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
    _squared_acc_str, _linear_acc_str = "squared", "linear"
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


# --- Fluid 1.x optimizers over the update ops of fluidity/ops/optimizer_variants.py -----------
def _numbers(owner, **values):
    for k, v in values.items():
        _check(_is_number(v), f"{owner}: {k} must be a number, got {type(v).__name__}")
    return [float(v) for v in values.values()]


class AdamaxOptimizer(Optimizer):
    """Adamax (Kingma & Ba): Adam with the infinity norm (op `adamax`); the beta1 power
    advances by a `scale` op after the updates."""
    type = "adamax"
    _moment_acc_str, _inf_norm_acc_str = "moment", "inf_norm"
    _beta1_pow_acc_str = "beta1_pow_acc"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameter_list=None, regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._beta1, self._beta2, self._epsilon = _numbers(
            "Adamax", beta1=beta1, beta2=beta2, epsilon=epsilon)
        self.accumulators = (("moment", 0.0, None), ("inf_norm", 0.0, None),
                             ("beta1_pow_acc", self._beta1, [1]))

    def _op_io(self, param):
        m, u, b1p = (self._get_accumulator(n, param)
                     for n in ("moment", "inf_norm", "beta1_pow_acc"))
        return ({"Moment": m, "InfNorm": u, "Beta1Pow": b1p},
                {"MomentOut": m, "InfNormOut": u},
                {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon})

    def _finish_update(self, block, params_grads):
        self._scale_accumulators(block, params_grads, [("beta1_pow_acc", self._beta1)])


class DecayedAdagradOptimizer(Optimizer):
    """moment = decay * moment + (1 - decay) * grad^2; param -= lr * grad / (sqrt(moment) +
    epsilon) (op `decayed_adagrad`)."""
    type = "decayed_adagrad"
    _moment_acc_str = "moment"
    accumulators = (("moment", 0.0, None),)

    def __init__(self, learning_rate, decay=0.95, epsilon=1e-6, parameter_list=None,
                 regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._decay, self._epsilon = _numbers("DecayedAdagrad", decay=decay, epsilon=epsilon)

    def _op_io(self, param):
        m = self._get_accumulator("moment", param)
        return {"Moment": m}, {"MomentOut": m}, {"decay": self._decay, "epsilon": self._epsilon}


class AdadeltaOptimizer(Optimizer):
    """Adadelta (Zeiler) (op `adadelta`; the learning rate scales the step)."""
    type = "adadelta"
    _avg_squared_grad_acc_str = "_avg_squared_grad"
    _avg_squared_update_acc_str = "_avg_squared_update"
    accumulators = (("_avg_squared_grad", 0.0, None), ("_avg_squared_update", 0.0, None))

    def __init__(self, learning_rate, epsilon=1.0e-6, rho=0.95, parameter_list=None,
                 regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._epsilon, self._rho = _numbers("Adadelta", epsilon=epsilon, rho=rho)

    def _op_io(self, param):
        g2, u2 = (self._get_accumulator(n, param)
                  for n in ("_avg_squared_grad", "_avg_squared_update"))
        return ({"AvgSquaredGrad": g2, "AvgSquaredUpdate": u2},
                {"AvgSquaredGradOut": g2, "AvgSquaredUpdateOut": u2},
                {"epsilon": self._epsilon, "rho": self._rho})


class LambOptimizer(AdamOptimizer):
    """LAMB (You et al.): Adam's moments with a layer-wise trust ratio (op `lamb`).
    `exclude_from_weight_decay_fn(param) -> bool` turns weight decay off per parameter."""
    type = "lamb"

    def __init__(self, learning_rate=0.001, lamb_weight_decay=0.01, beta1=0.9, beta2=0.999,
                 epsilon=1e-6, parameter_list=None, regularization=None, grad_clip=None,
                 exclude_from_weight_decay_fn=None, name=None):
        Optimizer.__init__(self, learning_rate, parameter_list, regularization, grad_clip,
                           name)
        self._weight_decay, self._beta1, self._beta2, self._epsilon = _numbers(
            "Lamb", lamb_weight_decay=lamb_weight_decay, beta1=beta1, beta2=beta2,
            epsilon=epsilon)
        _check(exclude_from_weight_decay_fn is None or callable(exclude_from_weight_decay_fn),
               "Lamb: exclude_from_weight_decay_fn must be callable")
        self._exclude = exclude_from_weight_decay_fn
        self.accumulators = self._moment_accumulators()

    def _op_io(self, param):
        acc = self._moment_inputs(param)
        decay = 0.0 if self._exclude is not None and self._exclude(param) else \
            self._weight_decay
        return (acc, {"Moment1Out": acc["Moment1"], "Moment2Out": acc["Moment2"]},
                {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
                 "weight_decay": decay})

    def _finish_update(self, block, params_grads):
        self._scale_accumulators(block, params_grads, [("beta1_pow_acc", self._beta1),
                                                       ("beta2_pow_acc", self._beta2)])


class LarsMomentumOptimizer(Optimizer):
    """Momentum with a layer-wise learning rate from the parameter and gradient norms (LARS,
    op `lars_momentum`)."""
    type = "lars_momentum"
    _velocity_acc_str = "velocity"
    accumulators = (("velocity", 0.0, None),)

    def __init__(self, learning_rate, momentum, lars_coeff=0.001, lars_weight_decay=0.0005,
                 parameter_list=None, regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._momentum, self._lars_coeff, self._lars_weight_decay = _numbers(
            "LarsMomentum", momentum=momentum, lars_coeff=lars_coeff,
            lars_weight_decay=lars_weight_decay)

    def _op_io(self, param):
        v = self._get_accumulator("velocity", param)
        return ({"Velocity": v}, {"VelocityOut": v},
                {"mu": self._momentum, "lars_coeff": self._lars_coeff,
                 "lars_weight_decay": self._lars_weight_decay})


class DpsgdOptimizer(Optimizer):
    """Differentially private SGD (op `dpsgd`): gradients clipped to L2 norm `clip`, plus
    Gaussian noise of scale `sigma` / `batch_size`. Fluid 1.8's defaults."""
    type = "dpsgd"

    def __init__(self, learning_rate=0.001, clip=0.9, batch_size=0.999, sigma=1e-8,
                 parameter_list=None):
        super().__init__(learning_rate, parameter_list)
        self._clip, self._batch_size, self._sigma = _numbers(
            "Dpsgd", clip=clip, batch_size=batch_size, sigma=sigma)

    def _op_io(self, param):
        return {}, {}, {"clip": self._clip, "batch_size": self._batch_size,
                        "sigma": self._sigma, "seed": 0}


Adamax = AdamaxOptimizer
DecayedAdagrad = DecayedAdagradOptimizer
Adadelta = AdadeltaOptimizer
Lamb = LambOptimizer
LarsMomentum = LarsMomentumOptimizer
Dpsgd = DpsgdOptimizer


# --- parameter averaging and optimizer wrappers ------------------------------------------------
def _mirror(block, var):
    """`var` (persistable, of another program) declared in `block` under its own name."""
    if block.has_var(var.name):
        return block.var(var.name)
    return block.create_var(name=var.name, shape=list(var.shape), dtype=var.dtype,
                            persistable=True, stop_gradient=True)


def _averaged_params(owner):
    params = [p for p in default_main_program().global_block().all_parameters()
              if p.do_model_average is not False and getattr(p, "trainable", True)]
    _check(params, f"{owner}: the main program has no parameters to average (build the "
                   f"network and call minimize first)")
    return params


class _SwapPrograms:
    """apply(executor, need_restore=True) / restore(executor) over two programs: `apply`
    saves each parameter to a backup and writes the averaged value in its place, `restore`
    writes the backups back."""

    def _build_swap(self, params, write_average):
        """write_average(block, param) appends the ops writing param's average into param."""
        self.apply_program, self.restore_program = Program(), Program()
        ablock = self.apply_program.global_block()
        rblock = self.restore_program.global_block()
        for p in params:
            _mirror(ablock, p)
            backup = ablock.create_var(
                name=unique_name.generate(f"{p.name}@BACKUP"), shape=list(p.shape),
                dtype=p.dtype, persistable=True, stop_gradient=True)
            ablock.append_op("assign", {"X": ablock.var(p.name)}, {"Out": backup})
            write_average(ablock, p)
            rblock.append_op("assign", {"X": _mirror(rblock, backup)},
                             {"Out": _mirror(rblock, p)})

    def apply(self, executor, need_restore=True):
        """A context manager: the parameters hold their averages inside it, and their own
        values again after it (unless need_restore=False)."""
        import contextlib

        @contextlib.contextmanager
        def swapped():
            executor.run(self.apply_program)
            try:
                yield
            finally:
                if need_restore:
                    self.restore(executor)
        return swapped()

    def restore(self, executor):
        executor.run(self.restore_program)


class ModelAverage(Optimizer, _SwapPrograms):
    """Averages each parameter over a sliding window of recent updates (op
    average_accumulates, fluidity/ops/model_average.py, after the optimizer's updates);
    `apply(exe)` swaps the averages in for evaluation. Build it after `minimize`."""

    def __init__(self, average_window_rate, min_average_window=10000,
                 max_average_window=10000, regularization=None, name=None):
        super().__init__(0.0, regularization=regularization, name=name)
        self.average_window = float(average_window_rate)
        self.min_average_window = int(min_average_window)
        self.max_average_window = int(max_average_window)
        params = _averaged_params("ModelAverage")
        block = default_main_program().global_block()
        with op_role_guard(OpRole.Optimize):
            for p in params:
                self._append_average_accumulate_op(block, p)
        self._build_swap(params, self._write_average)

    def _append_average_accumulate_op(self, block, param):
        sums = [self._add_accumulator(f"sum_{i}", param) for i in (1, 2, 3)]
        counts = [self._add_accumulator(n, param, 0, [1], VarType.INT64)
                  for n in ("num_accumulates", "old_num_accumulates", "num_updates")]
        names = ("sum_1", "sum_2", "sum_3", "num_accumulates", "old_num_accumulates",
                 "num_updates")
        block.append_op("average_accumulates",
                        {"param": param, **{f"in_{n}": v for n, v in zip(names, sums + counts)}},
                        {f"out_{n}": v for n, v in zip(names, sums + counts)},
                        {"average_window": self.average_window,
                         "min_average_window": self.min_average_window,
                         "max_average_window": self.max_average_window})

    def _write_average(self, block, p):
        acc = {n: _mirror(block, self._get_accumulator(n, p)) for n in (
            "sum_1", "sum_2", "sum_3", "num_accumulates", "old_num_accumulates")}

        def tmp(dtype):
            return block.create_var(name=unique_name.generate("model_average_tmp"),
                                    dtype=dtype, stop_gradient=True)
        total, count, countf = tmp(p.dtype), tmp(VarType.INT64), tmp(p.dtype)
        block.append_op("sum", {"X": [acc["sum_1"], acc["sum_2"], acc["sum_3"]]},
                        {"Out": total})
        block.append_op("sum", {"X": [acc["num_accumulates"], acc["old_num_accumulates"]]},
                        {"Out": count})
        block.append_op("cast", {"X": count}, {"Out": countf},
                        {"in_dtype": VarType.INT64, "out_dtype": p.dtype})
        block.append_op("elementwise_div", {"X": total, "Y": countf},
                        {"Out": block.var(p.name)})

    def _op_io(self, param):
        raise FluidityError("ModelAverage has no update op of its own: use it beside an "
                            "optimizer, after minimize")

    def minimize(self, *args, **kwargs):
        raise FluidityError("ModelAverage.minimize: ModelAverage averages what another "
                            "optimizer trains; call that optimizer's minimize")


class ExponentialMovingAverage(_SwapPrograms):
    """ema = decay * ema + (1 - decay) * param after each step (`update()` appends the ops
    to the main program); `apply(exe)` swaps in ema / (1 - prod(decay)) (bias-corrected).
    With `thres_steps` (a Variable counting steps), decay = min(decay, (1 + t) / (10 + t))."""

    def __init__(self, decay=0.999, thres_steps=None, name=None):
        _check(_is_number(decay), f"ExponentialMovingAverage: decay must be a number, got "
                                  f"{type(decay).__name__}")
        _check(thres_steps is None or isinstance(thres_steps, Variable),
               "ExponentialMovingAverage: thres_steps must be a Variable")
        self._decay, self._thres_steps = float(decay), thres_steps
        self._name = name or ""
        self._params = _averaged_params("ExponentialMovingAverage")
        self._ema = {p.name: self._persistable(f"{p.name}.ema", p.shape, p.dtype, 0.0)
                     for p in self._params}
        self._decay_pow = self._persistable("ema_decay_pow", [1], "float32", 1.0)
        self._build_swap(self._params, self._write_average)

    def _persistable(self, name, shape, dtype, value):
        var = default_main_program().global_block().create_var(
            name=unique_name.generate(self._name + name), shape=list(shape), dtype=dtype,
            persistable=True, stop_gradient=True)
        ConstantInitializer(float(value))(var, default_startup_program().global_block())
        return var

    def _decay_var(self, block):
        def tmp():
            return block.create_var(name=unique_name.generate("ema_decay"), dtype="float32",
                                    shape=[1], stop_gradient=True)
        const = tmp()
        block.append_op("fill_constant", {}, {"Out": const},
                        {"shape": [1], "dtype": VarType.FP32, "value": self._decay})
        if self._thres_steps is None:
            return const
        t, num, den, ratio, out = tmp(), tmp(), tmp(), tmp(), tmp()
        block.append_op("cast", {"X": self._thres_steps}, {"Out": t},
                        {"in_dtype": self._thres_steps.dtype, "out_dtype": VarType.FP32})
        block.append_op("scale", {"X": t}, {"Out": num}, {"scale": 1.0, "bias": 1.0})
        block.append_op("scale", {"X": t}, {"Out": den}, {"scale": 1.0, "bias": 10.0})
        block.append_op("elementwise_div", {"X": num, "Y": den}, {"Out": ratio})
        block.append_op("elementwise_min", {"X": ratio, "Y": const}, {"Out": out})
        return out

    def update(self):
        """Append the moving-average updates to the main program (after minimize)."""
        block = default_main_program().global_block()
        with op_role_guard(OpRole.Optimize), name_scope("moving_average"):
            d = self._decay_var(block)
            one_minus = block.create_var(name=unique_name.generate("ema_one_minus"),
                                         dtype="float32", shape=[1], stop_gradient=True)
            block.append_op("scale", {"X": d}, {"Out": one_minus}, {"scale": -1.0, "bias": 1.0})
            for p in self._params:
                ema = self._ema[p.name]
                a = block.create_var(name=unique_name.generate("ema_a"), dtype=p.dtype,
                                     stop_gradient=True)
                b = block.create_var(name=unique_name.generate("ema_b"), dtype=p.dtype,
                                     stop_gradient=True)
                block.append_op("elementwise_mul", {"X": ema, "Y": d}, {"Out": a})
                block.append_op("elementwise_mul", {"X": p, "Y": one_minus}, {"Out": b})
                block.append_op("elementwise_add", {"X": a, "Y": b}, {"Out": ema})
            block.append_op("elementwise_mul", {"X": self._decay_pow, "Y": d},
                            {"Out": self._decay_pow})

    def _write_average(self, block, p):
        ema, pw = _mirror(block, self._ema[p.name]), _mirror(block, self._decay_pow)
        denom = block.create_var(name=unique_name.generate("ema_denom"), dtype="float32",
                                 shape=[1], stop_gradient=True)
        block.append_op("scale", {"X": pw}, {"Out": denom}, {"scale": -1.0, "bias": 1.0})
        block.append_op("elementwise_div", {"X": ema, "Y": denom}, {"Out": block.var(p.name)})


class RecomputeOptimizer(Optimizer):
    """Wraps an optimizer for recomputation (Fluid 1.8): `_set_checkpoints(vars)` names the
    activations to keep; the backward pass runs the forward ops between checkpoints again
    (append_backward's `checkpoints`, fluidity/recompute.py), then the inner optimizer
    updates as it would."""

    def __init__(self, optimizer):
        _check(isinstance(optimizer, Optimizer),
               f"RecomputeOptimizer: optimizer must be an Optimizer, got "
               f"{type(optimizer).__name__}")
        self._optimizer = optimizer
        self._checkpoints = None
        self._learning_rate = optimizer._learning_rate

    def _set_checkpoints(self, checkpoints):
        _check(isinstance(checkpoints, (list, tuple)) and all(
            isinstance(c, Variable) for c in checkpoints),
            "RecomputeOptimizer: checkpoints must be a list of Variables")
        self._checkpoints = list(checkpoints)

    def load(self, stat_dict):
        raise NotImplementedError(
            "load function is not supported by Recompute Optimizer for now")

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 callbacks=None, checkpoints=None):
        if checkpoints is not None:
            self._set_checkpoints(checkpoints)
        _check(self._checkpoints is not None,
               "RecomputeOptimizer.backward: call _set_checkpoints first")
        _check(isinstance(loss, Variable),
               f"RecomputeOptimizer: the loss must be a Variable, got {type(loss).__name__}")
        plist = parameter_list if parameter_list is not None else \
            self._optimizer._parameter_list
        return append_backward(loss, plist, no_grad_set, callbacks,
                               checkpoints=self._checkpoints)

    def apply_gradients(self, params_grads):
        return self._optimizer.apply_gradients(params_grads)

    def apply_optimize(self, loss, startup_program, params_grads):
        return self._optimizer.apply_optimize(loss, startup_program, params_grads)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 grad_clip=None):
        _check(self._checkpoints is not None,
               "RecomputeOptimizer.minimize: call _set_checkpoints first")
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        return self._optimizer._optimize_clipped(loss, startup_program, params_grads,
                                                 grad_clip), params_grads


class LookaheadOptimizer:
    """Lookahead (Zhang et al. 2019): the inner optimizer updates the fast parameters; every
    k steps the slow copies move alpha of the way to them and the fast ones restart there."""

    def __init__(self, inner_optimizer, alpha=0.5, k=5):
        _check(isinstance(inner_optimizer, Optimizer),
               "LookaheadOptimizer: inner_optimizer must be an Optimizer")
        _check(_is_number(alpha) and 0.0 <= alpha <= 1.0,
               f"LookaheadOptimizer: alpha must be in [0, 1], got {alpha!r}")
        _check(isinstance(k, int) and k > 0, f"LookaheadOptimizer: k must be a positive "
                                             f"int, got {k!r}")
        self.inner_optimizer, self.alpha, self.k = inner_optimizer, float(alpha), k
        self.type = "lookahead"

    def minimize(self, loss, startup_program=None):
        out = self.inner_optimizer.minimize(loss, startup_program=startup_program)
        main = loss.block.program
        startup = startup_program or default_startup_program()
        block, sblock = main.global_block(), startup.global_block()
        params = [p for p in block.all_parameters() if getattr(p, "trainable", True)]

        def var(name, shape, dtype, persistable=False):
            return block.create_var(name=unique_name.generate(name), shape=shape,
                                    dtype=dtype, persistable=persistable, stop_gradient=True)
        with op_role_guard(OpRole.Optimize), name_scope("lookahead"):
            step = var("lookahead_step", [1], "int64", True)
            ConstantInitializer(0.0)(step, sblock)
            k, zero, mod, hit, on = (var("lookahead_k", [1], "int64"),
                                     var("lookahead_zero", [1], "int64"),
                                     var("lookahead_mod", [1], "int64"),
                                     var("lookahead_hit", [1], "bool"),
                                     var("lookahead_on", [1], "float32"))
            block.append_op("increment", {"X": step}, {"Out": step}, {"step": 1.0})
            for v, value in ((k, self.k), (zero, 0)):
                block.append_op("fill_constant", {}, {"Out": v},
                                {"shape": [1], "dtype": VarType.INT64, "value": float(value)})
            block.append_op("elementwise_mod", {"X": step, "Y": k}, {"Out": mod})
            block.append_op("equal", {"X": mod, "Y": zero}, {"Out": hit})
            block.append_op("cast", {"X": hit}, {"Out": on},
                            {"in_dtype": VarType.BOOL, "out_dtype": VarType.FP32})
            for p in params:
                slow = block.create_var(name=p.name + "@SLOW", shape=list(p.shape),
                                        dtype=p.dtype, persistable=True, stop_gradient=True)
                sslow = sblock.create_var(name=slow.name, shape=list(p.shape), dtype=p.dtype,
                                          persistable=True)
                sblock.append_op("assign", {"X": _mirror(sblock, p)}, {"Out": sslow})
                diff, step_, moved = (var("lookahead_t", list(p.shape), p.dtype)
                                      for _ in range(3))
                # slow += alpha * (fast - slow) * on;  fast += (slow - fast) * on
                block.append_op("elementwise_sub", {"X": p, "Y": slow}, {"Out": diff})
                block.append_op("scale", {"X": diff}, {"Out": step_}, {"scale": self.alpha})
                block.append_op("elementwise_mul", {"X": step_, "Y": on}, {"Out": moved})
                block.append_op("elementwise_add", {"X": slow, "Y": moved}, {"Out": slow})
                back = var("lookahead_back", list(p.shape), p.dtype)
                back_on = var("lookahead_back_on", list(p.shape), p.dtype)
                block.append_op("elementwise_sub", {"X": slow, "Y": p}, {"Out": back})
                block.append_op("elementwise_mul", {"X": back, "Y": on}, {"Out": back_on})
                block.append_op("elementwise_add", {"X": p, "Y": back_on}, {"Out": p})
        return out


DGCMomentumOptimizer = declined_class(
    "optimizer.DGCMomentumOptimizer",
    "deep gradient compression only pays across GPUs in multi-node training, which Fluidity "
    "does not run; use Momentum",
    methods=("apply_gradients", "apply_optimize", "backward", "minimize"))

PipelineOptimizer = declined_class(
    "optimizer.PipelineOptimizer",
    "pipeline training splits a program across devices, which Fluidity does not run",
    methods=("minimize",))
