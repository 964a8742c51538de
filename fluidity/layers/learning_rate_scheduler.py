"""Learning-rate schedules (Fluid 1.x `fluid.layers.*_decay`): each builds ops in the main
program computing the learning rate from a global step, and returns that Variable, to pass
as an optimizer's `learning_rate`.

The step is the persistable int64 counter `@LR_DECAY_COUNTER@`, shared by all schedules of a
program: the startup program sets it to begin - 1 and one `increment` op at the start of the
main program adds 1 per run, so the first run sees step = begin (0; noam_decay's is 1).
The ops carry op_role LRSched. Where Paddle uses a Switch (piecewise_decay,
linear_lr_warmup, polynomial_decay's cycle), these use `less_than` + `where`/`elementwise_max`.
"""
import math

from ..errors import FluidityError
from ..framework import OpRole, Variable, op_role_guard
from ..initializer import ConstantInitializer
from ..layer_helper import LayerHelper
from . import manip, nn, ops, tensor

__all__ = ["exponential_decay", "natural_exp_decay", "inverse_time_decay",
           "polynomial_decay", "piecewise_decay", "cosine_decay", "linear_lr_warmup",
           "noam_decay"]

LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"


def _decay_step_counter(begin=0):
    """The global step as a float32 [1] Variable (see the module docstring)."""
    helper = LayerHelper("global_step_counter")
    block = helper.main_program.global_block()
    counter = block.vars.get(LR_DECAY_COUNTER)
    if counter is None:
        counter = helper.create_global_variable(name=LR_DECAY_COUNTER, dtype="int64",
                                                shape=[1], persistable=True)
        helper.set_variable_initializer(counter, ConstantInitializer(float(begin - 1)))
        block.prepend_op("increment", {"X": counter}, {"Out": counter}, {"step": 1.0})
    return manip.cast(counter, "float32")


def _const(value):
    return tensor.fill_constant([1], "float32", float(value))


def _number(x, what):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise FluidityError(f"{what} must be a number, got {type(x).__name__}")
    return float(x)


def _lr_schedule(fn):
    """Build the schedule's ops with op_role LRSched."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with op_role_guard(OpRole.LRSched):
            return fn(*args, **kwargs)
    return wrapper


def _div_steps(step, decay_steps, staircase):
    div = nn.scale(step, 1.0 / _number(decay_steps, "decay_steps"))
    return ops.floor(div) if staircase else div


@_lr_schedule
def exponential_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """lr * decay_rate ^ (step / decay_steps)  (the exponent floored when staircase)."""
    lr, rate = _number(learning_rate, "learning_rate"), _number(decay_rate, "decay_rate")
    div = _div_steps(_decay_step_counter(), decay_steps, staircase)
    return nn.scale(nn.elementwise_pow(_const(rate), div), lr)


@_lr_schedule
def natural_exp_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """lr * exp(-decay_rate * step / decay_steps)."""
    lr, rate = _number(learning_rate, "learning_rate"), _number(decay_rate, "decay_rate")
    div = _div_steps(_decay_step_counter(), decay_steps, staircase)
    return nn.scale(ops.exp(nn.scale(div, -rate)), lr)


@_lr_schedule
def inverse_time_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """lr / (1 + decay_rate * step / decay_steps)."""
    lr, rate = _number(learning_rate, "learning_rate"), _number(decay_rate, "decay_rate")
    div = _div_steps(_decay_step_counter(), decay_steps, staircase)
    return nn.elementwise_div(_const(lr), nn.scale(div, rate, bias=1.0))


@_lr_schedule
def polynomial_decay(learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0,
                     cycle=False):
    """(lr - end_lr) * (1 - step / decay_steps) ^ power + end_lr, with step capped at
    decay_steps; cycle=True instead stretches decay_steps to the next multiple
    decay_steps * max(1, ceil(step / decay_steps))."""
    lr, end = _number(learning_rate, "learning_rate"), _number(end_learning_rate,
                                                               "end_learning_rate")
    steps, power = _number(decay_steps, "decay_steps"), _number(power, "power")
    step = _decay_step_counter()
    if cycle:
        div = nn.elementwise_max(ops.ceil(nn.scale(step, 1.0 / steps)), _const(1.0))
        frac = nn.elementwise_div(step, nn.scale(div, steps))
    else:
        frac = nn.scale(nn.elementwise_min(step, _const(steps)), 1.0 / steps)
    decay = ops.pow(nn.scale(frac, -1.0, bias=1.0), factor=power)
    return nn.scale(decay, lr - end, bias=end)


@_lr_schedule
def piecewise_decay(boundaries, values):
    """values[i] while step < boundaries[i] (first such i); values[-1] after the last."""
    if len(values) != len(boundaries) + 1:
        raise FluidityError(f"piecewise_decay: needs len(values) == len(boundaries) + 1, got "
                            f"{len(values)} values and {len(boundaries)} boundaries")
    step = _decay_step_counter()
    lr = _const(_number(values[-1], "values[-1]"))
    for b, v in reversed(list(zip(boundaries, values))):
        lr = manip.where(manip.less_than(step, _const(_number(b, "boundary"))),
                         _const(_number(v, "value")), lr)
    return lr


@_lr_schedule
def cosine_decay(learning_rate, step_each_epoch, epochs):
    """lr * 0.5 * (cos(floor(step / step_each_epoch) * pi / epochs) + 1)."""
    lr = _number(learning_rate, "learning_rate")
    epoch = ops.floor(nn.scale(_decay_step_counter(),
                               1.0 / _number(step_each_epoch, "step_each_epoch")))
    cos = ops.cos(nn.scale(epoch, math.pi / _number(epochs, "epochs")))
    return nn.scale(cos, 0.5 * lr, bias=0.5 * lr)


@_lr_schedule
def linear_lr_warmup(learning_rate, warmup_steps, start_lr, end_lr):
    """start_lr + (end_lr - start_lr) * step / warmup_steps while step < warmup_steps, then
    `learning_rate` (a float or another schedule's Variable)."""
    warmup = _number(warmup_steps, "warmup_steps")
    start, end = _number(start_lr, "start_lr"), _number(end_lr, "end_lr")
    if not isinstance(learning_rate, Variable):
        learning_rate = _const(_number(learning_rate, "learning_rate"))
    step = _decay_step_counter()
    warm = nn.scale(step, (end - start) / warmup, bias=start)
    return manip.where(manip.less_than(step, _const(warmup)), warm, learning_rate)


@_lr_schedule
def noam_decay(d_model, warmup_steps, learning_rate=1.0):
    """lr * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)  (step from 1;
    "Attention Is All You Need")."""
    d_model = _number(d_model, "d_model")
    warmup = _number(warmup_steps, "warmup_steps")
    lr = _number(learning_rate, "learning_rate")
    step = _decay_step_counter(1)
    a = ops.pow(step, factor=-0.5)
    b = nn.scale(step, warmup ** -1.5)
    return nn.scale(nn.elementwise_min(a, b), lr * d_model ** -0.5)
