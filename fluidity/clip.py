"""Gradient clipping (Fluid's `fluid.clip`), built as ops between backward and the update.

* ClipGradByValue(max, min=-max):   g = clip(g, min, max)                   (op `clip`)
* ClipGradByNorm(clip_norm):        g = g * clip_norm / max(||g||, clip_norm) (`clip_by_norm`)
* ClipGradByGlobalNorm(clip_norm):  every g *= clip_norm / max(global_norm, clip_norm), where
  global_norm = sqrt(sum of ||g||^2 over the group) (`squared_l2_norm`, `sum`, `sqrt`,
  `elementwise_max`, `elementwise_div`, `elementwise_mul`)

Use one either as `optimizer(grad_clip=clip)` (all parameters) or, Fluid 1.x style,
`set_gradient_clip(clip, param_list)` (stored on each Parameter's `gradient_clip_attr`; the
optimizer's grad_clip wins when both are given). The GradientClipBy* names are aliases.
Sparse (SelectedRows) gradients: norms are over their merged rows and they stay sparse.
"""
import copy

from . import unique_name
from .core.dtypes import VarType
from .errors import FluidityError
from .framework import OpRole, Parameter, default_main_program, name_scope, op_role_guard

__all__ = ["ClipGradByValue", "ClipGradByNorm", "ClipGradByGlobalNorm", "GradientClipByValue",
           "GradientClipByNorm", "GradientClipByGlobalNorm", "set_gradient_clip",
           "append_gradient_clip_ops", "ErrorClipByValue", "error_clip_callback"]


def _number(x, what):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise FluidityError(f"{what} must be a number, got {type(x).__name__}")
    return float(x)


def _new_var(block, like, tag):
    return block.create_var(name=unique_name.generate(f"{like.name}_{tag}"), shape=like.shape,
                            dtype=like.dtype, type=like.type, stop_gradient=True)


def _check_need_clip(fn):
    if fn is not None and not callable(fn):
        raise FluidityError(f"need_clip must be a function of the parameter, got "
                            f"{type(fn).__name__}")
    return fn


class ClipGradBase:
    """A clip strategy. `_process_context` sees every (param, grad) first (global norms need
    all gradients), then `_create_operators` returns the clipped (param, grad).
    `need_clip(param) -> bool` (Fluid 1.8) leaves the parameters it refuses unclipped."""
    need_clip = None

    def __call__(self, params_grads):
        return _apply(params_grads, lambda p: self)

    def _process_context(self, context, param, grad):
        pass

    def _create_operators(self, param, grad):
        raise NotImplementedError


class ClipGradByValue(ClipGradBase):
    def __init__(self, max, min=None, need_clip=None):
        self.need_clip = _check_need_clip(need_clip)
        self.max = _number(max, "ClipGradByValue: max")
        if min is None:
            if self.max <= 0:
                raise FluidityError(f"ClipGradByValue: max must be > 0 when min is not "
                                    f"given, got {self.max}")
            min = -self.max
        self.min = _number(min, "ClipGradByValue: min")
        if self.min > self.max:
            raise FluidityError(f"ClipGradByValue: min {self.min} > max {self.max}")

    def __str__(self):
        return f"Clip Gradient By Value, min = {self.min:f}, max={self.max:f}"

    def _create_operators(self, param, grad):
        block = grad.block
        out = _new_var(block, grad, "clip")
        op = "selected_rows_clip" if grad.type == VarType.SELECTED_ROWS else "clip"
        block.append_op(op, {"X": grad}, {"Out": out}, {"min": self.min, "max": self.max})
        return param, out


class ClipGradByNorm(ClipGradBase):
    def __init__(self, clip_norm, need_clip=None):
        self.need_clip = _check_need_clip(need_clip)
        self.clip_norm = _number(clip_norm, "ClipGradByNorm: clip_norm")

    def __str__(self):
        return f"Gradient Clip By Norm, clip_norm={self.clip_norm:f}"

    def _create_operators(self, param, grad):
        block = grad.block
        out = _new_var(block, grad, "clip")
        block.append_op("clip_by_norm", {"X": grad}, {"Out": out}, {"max_norm": self.clip_norm})
        return param, out


class ClipGradByGlobalNorm(ClipGradBase):
    def __init__(self, clip_norm, group_name="default_group", need_clip=None):
        self.need_clip = _check_need_clip(need_clip)
        self.clip_norm = _number(clip_norm, "ClipGradByGlobalNorm: clip_norm")
        if not isinstance(group_name, str):
            raise FluidityError(f"ClipGradByGlobalNorm: group_name must be a str, got "
                                f"{type(group_name).__name__}")
        self.group_name = group_name

    def __str__(self):
        return f"Gradient Clip By GlobalNorm, global_norm={self.clip_norm:f}"

    def _process_context(self, context, param, grad):
        norms = context.setdefault(self.group_name, [])
        clip = context.setdefault(self.group_name + "_clip_value", self.clip_norm)
        if clip != self.clip_norm:
            raise FluidityError(f"ClipGradByGlobalNorm: all parameters of group "
                                f"'{self.group_name}' need the same clip_norm ({clip} vs "
                                f"{self.clip_norm})")
        block = grad.block
        sq = block.create_var(name=unique_name.generate(f"{grad.name}_squared_l2_norm"),
                              shape=[1], dtype=grad.dtype, stop_gradient=True)
        block.append_op("squared_l2_norm", {"X": grad}, {"Out": sq})
        norms.append(sq)
        self._context = context

    def _scale(self, block, dtype):
        """clip_norm / max(global_norm, clip_norm), built once per group."""
        key = self.group_name + "_scale"
        ctx = self._context
        if key not in ctx:
            def tmp(tag):
                return block.create_var(name=unique_name.generate(f"{self.group_name}_{tag}"),
                                        shape=[1], dtype=dtype, stop_gradient=True)
            total = tmp("global_norm_sq")
            block.append_op("sum", {"X": ctx[self.group_name]}, {"Out": total})
            norm = tmp("global_norm")
            block.append_op("sqrt", {"X": total}, {"Out": norm})
            clip = tmp("clip_norm")
            block.append_op("fill_constant", outputs={"Out": clip},
                            attrs={"shape": [1], "dtype": dtype, "value": self.clip_norm})
            denom = tmp("max")
            block.append_op("elementwise_max", {"X": clip, "Y": norm}, {"Out": denom})
            scale = tmp("scale")
            block.append_op("elementwise_div", {"X": clip, "Y": denom}, {"Out": scale})
            ctx[key] = scale
        return ctx[key]

    def _create_operators(self, param, grad):
        block = grad.block
        scale = self._scale(block, grad.dtype)
        out = _new_var(block, grad, "clip")
        if grad.type == VarType.SELECTED_ROWS:
            block.append_op("selected_rows_scale", {"X": grad, "Scale": scale}, {"Out": out})
        else:
            block.append_op("elementwise_mul", {"X": grad, "Y": scale}, {"Out": out})
        return param, out


GradientClipBase = ClipGradBase
GradientClipByValue = ClipGradByValue
GradientClipByNorm = ClipGradByNorm
GradientClipByGlobalNorm = ClipGradByGlobalNorm


def _apply(params_grads, clip_of):
    """Clip [(param, grad)] with `clip_of(param)` (None: leave as is)."""
    context = {}
    todo = []
    with op_role_guard(OpRole.Optimize), name_scope("gradient_clip"):
        for p, g in params_grads:
            clip = clip_of(p) if g is not None and getattr(p, "need_clip", True) else None
            if clip is not None and not isinstance(clip, ClipGradBase):
                raise FluidityError(f"gradient clip of '{p.name}' must be a ClipGradBy*, got "
                                    f"{type(clip).__name__}")
            if clip is not None and clip.need_clip is not None and not clip.need_clip(p):
                clip = None
            if clip is not None:
                clip._process_context(context, p, g)
            todo.append(clip)
        return [clip._create_operators(p, g) if clip is not None else (p, g)
                for clip, (p, g) in zip(todo, params_grads)]


def set_gradient_clip(clip, param_list=None, program=None):
    """Give `param_list` (Parameters or names; default all of `program`'s) the clip strategy
    `clip`, applied by the optimizer unless it has its own grad_clip."""
    if not isinstance(clip, ClipGradBase):
        raise FluidityError(f"set_gradient_clip: clip must be a ClipGradBy*, got "
                            f"{type(clip).__name__}")
    program = program or default_main_program()
    block = program.global_block()
    if param_list is None:
        param_list = block.all_parameters()
    params = [block.var(p) if isinstance(p, str) else p for p in param_list]
    for p in params:
        if not isinstance(p, Parameter):
            raise FluidityError(f"set_gradient_clip: '{getattr(p, 'name', p)}' is not a "
                                f"Parameter")
        p.gradient_clip_attr = copy.deepcopy(clip)


def append_gradient_clip_ops(params_grads):
    """Apply each parameter's `gradient_clip_attr` (set by set_gradient_clip)."""
    return _apply(params_grads, lambda p: getattr(p, "gradient_clip_attr", None))


class ErrorClipByValue:
    """Fluid's clipping of a variable's error (its gradient inside backward) is not built:
    it needs backward to call clip callbacks after each gradient op."""

    def __init__(self, max, min=None):
        raise NotImplementedError(
            "fluid.clip.ErrorClipByValue is not available in Fluidity: backward does not run "
            "per-variable error-clip callbacks; clip gradients with GradientClipByValue")


def error_clip_callback(block, context):
    raise NotImplementedError("fluid.clip.error_clip_callback is not available in Fluidity "
                              "(see ErrorClipByValue)")
