"""`fluid.contrib.mixed_precision.decorate(optimizer, ...)`: an optimizer that trains with
automatic mixed precision, as Fluid 1.8's does.

`backward` rewrites the forward ops (fp16_utils.rewrite_program), multiplies the loss by the
loss scaling (a persistable variable, `get_loss_scaling()`), differentiates the scaled loss
and divides each gradient by the scaling again. With dynamic loss scaling, `apply_gradients`
checks that the gradients are finite: if not, they are zeroed (the step changes nothing) and
the scaling shrinks; after enough finite steps it grows (fp16_utils.update_loss_scaling).
On a CPU the float16 ops compute in numpy's float16."""
from ... import layers, unique_name
from ...core.names import OpRole
from ...framework import default_main_program, default_startup_program, op_role_guard
from .fp16_lists import AutoMixedPrecisionLists
from .fp16_utils import rewrite_program, update_loss_scaling

__all__ = ["decorate", "OptimizerWithMixedPrecision"]


class OptimizerWithMixedPrecision:
    def __init__(self, optimizer, amp_lists, init_loss_scaling, use_dynamic_loss_scaling,
                 incr_every_n_steps, decr_every_n_nan_or_inf, incr_ratio, decr_ratio):
        self._optimizer = optimizer
        self._amp_lists = amp_lists
        self._train_program = default_main_program()
        self._startup_prog = default_startup_program()
        self._params_grads = None
        self._scaled_loss = None
        self._loss_scaling = layers.create_global_var(
            name=unique_name.generate("loss_scaling"), shape=[1],
            value=float(init_loss_scaling), dtype="float32", persistable=True)
        self._use_dynamic_loss_scaling = bool(use_dynamic_loss_scaling)
        if self._use_dynamic_loss_scaling:
            self._incr_every_n_steps = layers.fill_constant(
                shape=[1], dtype="int32", value=int(incr_every_n_steps))
            self._decr_every_n_nan_or_inf = layers.fill_constant(
                shape=[1], dtype="int32", value=int(decr_every_n_nan_or_inf))
            self._incr_ratio = float(incr_ratio)
            self._decr_ratio = float(decr_ratio)
            self._num_good_steps = layers.create_global_var(
                name=unique_name.generate("num_good_steps"), shape=[1], value=0,
                dtype="int32", persistable=True)
            self._num_bad_steps = layers.create_global_var(
                name=unique_name.generate("num_bad_steps"), shape=[1], value=0,
                dtype="int32", persistable=True)

    def get_loss_scaling(self):
        """The loss scaling variable (it changes as training goes with dynamic scaling)."""
        return self._loss_scaling

    def get_scaled_loss(self):
        """The loss times the scaling (what backward differentiates)."""
        return self._scaled_loss

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 callbacks=None):
        """[(param, unscaled gradient)] of the rewritten program's scaled loss."""
        rewrite_program(self._train_program, self._amp_lists)
        self._scaled_loss = loss * self._loss_scaling
        self._params_grads = self._optimizer.backward(self._scaled_loss, startup_program,
                                                      parameter_list, no_grad_set, callbacks)
        out = []
        with op_role_guard(OpRole.Optimize):      # Fluid puts the unscaling with the update
            for p, g in self._params_grads:
                out.append([p, g / self._loss_scaling])
        return out

    def apply_gradients(self, scaled_params_grads):
        """The optimizer's ops over the gradients, which a non-finite step zeroes first (with
        dynamic loss scaling, which it also updates)."""
        if self._use_dynamic_loss_scaling:
            sums = [layers.reduce_sum(g) for _p, g in scaled_params_grads]
            total = layers.reduce_sum(layers.concat(sums))
            finite = layers.isfinite(total)
            update_loss_scaling(finite, self._loss_scaling, self._num_good_steps,
                                self._num_bad_steps, self._incr_every_n_steps,
                                self._decr_every_n_nan_or_inf, self._incr_ratio,
                                self._decr_ratio)
            with layers.Switch() as switch:
                with switch.case(finite):
                    pass
                with switch.default():
                    for _p, g in scaled_params_grads:
                        layers.assign(layers.zeros_like(g), g)
        return self._optimizer.apply_gradients(scaled_params_grads)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """backward + apply_gradients: (optimize ops, [(param, gradient)])."""
        scaled = self.backward(loss, startup_program=startup_program,
                               parameter_list=parameter_list, no_grad_set=no_grad_set)
        return self.apply_gradients(scaled), scaled


def decorate(optimizer, amp_lists=None, init_loss_scaling=2**15, incr_every_n_steps=1000,
             decr_every_n_nan_or_inf=2, incr_ratio=2.0, decr_ratio=0.8,
             use_dynamic_loss_scaling=True):
    """`optimizer` wrapped for mixed-precision training (Fluid 1.8's defaults)."""
    from ...optimizer import Optimizer
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"decorate: optimizer must be a fluid Optimizer, got "
                        f"{type(optimizer).__name__}")
    if amp_lists is None:
        amp_lists = AutoMixedPrecisionLists()
    elif not isinstance(amp_lists, AutoMixedPrecisionLists):
        raise TypeError(f"decorate: amp_lists must be an AutoMixedPrecisionLists, got "
                        f"{type(amp_lists).__name__}")
    if float(init_loss_scaling) <= 0:
        raise ValueError(f"decorate: init_loss_scaling must be positive, got "
                         f"{init_loss_scaling}")
    return OptimizerWithMixedPrecision(optimizer, amp_lists, init_loss_scaling,
                                       use_dynamic_loss_scaling, incr_every_n_steps,
                                       decr_every_n_nan_or_inf, incr_ratio, decr_ratio)
